"""3x3-block sparse matrices (BSR) on Taichi ndarrays with a pattern fixed at build time.

Every DOF block of the global velocity vector is a 3-vector (an FEM or rod node,
a rod segment's angular velocity, a rigid body's linear or angular velocity), so
``A`` is stored as 3x3 blocks: ``indptr`` (n+1), ``indices`` (nnzb) and ``blocks``
(nnzb 3x3 matrices), rows sorted by column, with ``diag`` the block index of each
diagonal block.
"""

import numpy as np
import scipy.sparse as sp

from ..backend import ti
from .. import backend
from ..math.smallmat import mv


class BlockPattern:
    """The sparsity pattern: which (row, col) node pairs hold a 3x3 block."""

    def __init__(self, n: int, rows: np.ndarray, cols: np.ndarray):
        rows = np.concatenate([np.asarray(rows, np.int64).ravel(), np.arange(n)])
        cols = np.concatenate([np.asarray(cols, np.int64).ravel(), np.arange(n)])
        keys = np.unique(np.concatenate([rows * n + cols, cols * n + rows]))
        self.n = int(n)
        self.keys = keys
        self.row = (keys // n).astype(np.int64)
        self.col = (keys % n).astype(np.int64)
        self.indptr = np.searchsorted(self.row, np.arange(n + 1)).astype(np.int64)
        self.diag = self.index(np.arange(n), np.arange(n))

    @property
    def nnzb(self) -> int:
        return len(self.keys)

    def index(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Block index of each (row, col) pair; every pair must be in the pattern."""
        q = np.asarray(rows, np.int64) * self.n + np.asarray(cols, np.int64)
        idx = np.searchsorted(self.keys, q)
        if np.any(idx >= len(self.keys)) or np.any(self.keys[np.minimum(idx, len(self.keys) - 1)] != q):
            raise ValueError("block pair missing from the sparsity pattern")
        return idx


class BlockSparseMatrix:
    """A symmetric 3x3-block sparse matrix with a fixed pattern, stored on Taichi ndarrays."""

    def __init__(self, pattern: BlockPattern):
        self.pattern = pattern
        self.n = pattern.n
        self.indptr = backend.int_array(pattern.indptr)
        self.indices = backend.int_array(pattern.col)
        self.diag = backend.int_array(pattern.diag)
        self.blocks = backend.mat3_array(pattern.nnzb)

    def zero(self) -> None:
        fill_mat3(self.blocks, 0.0)

    def matvec(self, x, y) -> None:
        """y = A x (x, y: vec3 ndarrays of length n)."""
        bsr_matvec(self.indptr, self.indices, self.blocks, x, y, self.n)

    def blocks_numpy(self) -> np.ndarray:
        """(nnzb, 3, 3) float64 copy of the blocks (through the host view on the CPU: no copy kernel)."""
        return backend.read(self.blocks, self.pattern.nnzb).astype(np.float64, copy=False)

    def to_scipy(self, blocks: np.ndarray | None = None) -> sp.csr_matrix:
        """Export as a (3n, 3n) scipy CSR matrix (for tests and direct solvers); ``blocks``: a
        ``blocks_numpy()`` already read this step."""
        data = self.blocks_numpy() if blocks is None else blocks
        bsr = sp.bsr_matrix((data, self.pattern.col, self.pattern.indptr), shape=(3 * self.n, 3 * self.n))
        return bsr.tocsr()

    def diagonal_blocks(self, blocks: np.ndarray | None = None) -> np.ndarray:
        """(n, 3, 3) diagonal blocks as numpy (from ``blocks`` when given)."""
        if blocks is not None:
            return blocks[self.pattern.diag]
        view = backend.host_view(self.blocks)
        return (view if view is not None else self.blocks.to_numpy())[self.pattern.diag]


@ti.kernel
def fill_mat3(m: ti.types.ndarray(), value: float):
    for i in m:
        m[i] = ti.Matrix.zero(float, 3, 3) + value


@ti.kernel
def bsr_matvec(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
               x: ti.types.ndarray(), y: ti.types.ndarray(), n: ti.i32):
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += mv(blocks[k], x[indices[k]])
        y[i] = acc

"""Linear solves of ``A x = b`` for the SPD step matrix.

- ``BlockJacobiPCG``: preconditioned conjugate gradients with a 3x3 block-Jacobi
  preconditioner in Taichi kernels (runs on any backend; three kernel launches per iteration,
  the CG scalars kept on the device and read every few iterations, no per-node Python work; the
  update, direction and loop are ``cg_kernels``', shared with the Newton step's ``newton_pcg``).
- ``DirectSolver``: sparse direct factorisation on the CPU of the exported matrix (CHOLMOD
  through cvxopt, else SciPy's SuperLU); exact, and faster than CG for small, stiff problems.

``make_linear_solver("auto", n)`` picks direct below ``DIRECT_MAX_DOFS`` on the CPU
and PCG otherwise.
"""
from dataclasses import dataclass
import math

import numpy as np

from ..backend import ti
from .. import backend
from ..assembly.sparse import BlockSparseMatrix
from ..errors import ParameterError
from ..spec.names import LINEAR_SOLVERS
from .cg_kernels import (BNORM2, COUNT, RR, pcg_begin, pcg_direction, pcg_iterations, pcg_update, pcg_zero,
                         record_pq)
DIRECT_MAX_DOFS = 5000  # SuperLU fill-in makes it slower than PCG above ~5k DOF (tools/bench_assembly.py)


@dataclass
class LinearSolveStats:
    iterations: int = 0
    residual: float = 0.0   # final relative residual ‖b - A x‖ / ‖b‖
    converged: bool = True


def make_linear_solver(kind: str, n: int, tol: float = 1e-8, max_iter: int = 5000):
    """A linear solver for n 3-vector blocks: "pcg", "direct" or "auto"."""
    if kind not in LINEAR_SOLVERS:
        raise ParameterError(f"unknown linear solver {kind!r}; choose one of {', '.join(LINEAR_SOLVERS)}")
    if kind == "auto":
        kind = "direct" if backend.config()["arch"] == "cpu" and 3 * n <= DIRECT_MAX_DOFS else "pcg"
    return DirectSolver(n) if kind == "direct" else BlockJacobiPCG(n, tol, max_iter)


class DirectSolver:
    """Direct solve: up to ``DENSE_MAX_DOFS`` unknowns (a few rigid bodies, a robot) A as one dense
    matrix factored by LAPACK's Cholesky (no sparse object: ~20 µs at 60 DOF against ~0.4 ms), else
    the exported sparse matrix by CHOLMOD's supernodal Cholesky when cvxopt is installed, or SciPy's
    SuperLU (``newton_linear``, shared with the Newton path). The residual is reported; iterations = 1."""

    name = "direct"

    def __init__(self, n: int):
        from .newton_dense import DENSE_MAX_DOFS
        from .newton_linear import make_newton_linear_solver

        self.n = n
        self.dense = 0 < 3 * n <= DENSE_MAX_DOFS
        self._factor = make_newton_linear_solver("direct")
        self._dense_pattern = None      # (pattern, flat positions of its blocks in the dense A)

    def solve(self, A: BlockSparseMatrix, b, x) -> LinearSolveStats:
        rhs = backend.read(b, self.n).astype(np.float64).ravel()
        sol = self._solve_dense(A, rhs) if self.dense else None
        if sol is None:
            K = A.to_scipy()
            sol = self._factor.solve(K, rhs) if self.n else rhs
            residual = K @ sol - rhs
        else:
            sol, residual = sol
        backend.write(x, np.ascontiguousarray(sol.reshape(-1, 3), dtype=backend.np_real()))
        nb = np.linalg.norm(rhs)
        res = float(np.linalg.norm(residual) / nb) if nb > 0 else 0.0
        return LinearSolveStats(1, res, bool(np.isfinite(res)))

    def _solve_dense(self, A: BlockSparseMatrix, rhs: np.ndarray):
        """(solution, residual) by dense Cholesky; None where A is not positive definite (the sparse
        factorization then reports it as before)."""
        from scipy.linalg import lapack     # imported where used (scipy.linalg's start-up cost)
        from .newton_dense import dense_index

        if self._dense_pattern is None or self._dense_pattern[0] is not A.pattern:
            self._dense_pattern = (A.pattern, dense_index(A.pattern).ravel())
        M = np.zeros((3 * self.n) ** 2)
        M[self._dense_pattern[1]] = A.blocks_numpy().ravel()
        M = M.reshape(3 * self.n, 3 * self.n)
        L, info = lapack.dpotrf(M, lower=1, clean=0, overwrite_a=0)
        if info != 0:
            return None
        sol, info = lapack.dpotrs(L, rhs, lower=1)
        return (sol, M @ sol - rhs) if info == 0 else None


class BlockJacobiPCG:
    """PCG for one matrix size; work vectors are allocated once and reused every step."""

    name = "pcg"

    def __init__(self, n: int, tol: float = 1e-8, max_iter: int = 5000):
        self.n, self.tol, self.max_iter = n, tol, max_iter
        self.r, self.z, self.p, self.q = (backend.vec3_array(n) for _ in range(4))
        self.pinv = backend.mat3_array(n)
        self.S = backend.scalar_array(8)
        self.check_every = backend.default_check_every()

    def solve(self, A: BlockSparseMatrix, b, x) -> LinearSolveStats:
        """Solve A x = b in place, starting from the current x (warm start).

        The CG scalars (r·z, p·A p, r·r) stay on the device in ``S``; the host reads ``S`` every
        ``check_every`` iterations (every one on the CPU, where a host view reads it for free).
        Past convergence or a breakdown (p·A p ≤ 0) the kernels stop changing x on their own."""
        n, S = self.n, self.S
        pcg_start(A.indptr, A.indices, A.blocks, A.diag, b, x, self.r, self.z, self.p, self.pinv, S, self.tol**2, n)
        s = backend.read(self.S)
        if s[BNORM2] == 0.0:
            pcg_zero(x, n)
            return LinearSolveStats(0, 0.0, True)

        def iterate():
            pcg_matvec_dot(A.indptr, A.indices, A.blocks, self.p, self.q, S, n)
            pcg_update(x, self.r, self.z, self.p, self.q, self.pinv, S, n)
            pcg_direction(self.z, self.p, S, n)

        s = pcg_iterations(S, s, iterate, self.check_every, self.max_iter)
        rel = math.sqrt(max(float(s[RR]), 0.0) / float(s[BNORM2]))
        return LinearSolveStats(int(s[COUNT]), rel, rel <= self.tol)


@ti.kernel
def pcg_start(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
              diag: ti.types.ndarray(), b: ti.types.ndarray(), x: ti.types.ndarray(), r: ti.types.ndarray(),
              z: ti.types.ndarray(), p: ti.types.ndarray(), pinv: ti.types.ndarray(), S: ti.types.ndarray(),
              tol2: float, n: ti.i32):
    """Block-Jacobi inverse, r = b - A x, z = p = P r; S = (r·z, 0, r·r, 0, b·b, 0, 0, tol² b·b)."""
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ x[indices[k]]
        pinv[i] = blocks[diag[i]].inverse()
        r[i] = b[i] - acc
    pcg_begin(b, r, z, p, pinv, S, tol2, n)


@ti.kernel
def pcg_matvec_dot(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                   p: ti.types.ndarray(), q: ti.types.ndarray(), S: ti.types.ndarray(), n: ti.i32):
    """q = A p; S[PQ] = p·q (a breakdown, p·q ≤ 0 or not finite, sets the stop flag)."""
    s = 0.0
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ p[indices[k]]
        q[i] = acc
        s += p[i].dot(acc)
    record_pq(S, s)

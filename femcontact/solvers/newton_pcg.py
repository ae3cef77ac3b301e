"""The Newton step's linear solves ``H Δv = −∇ℓ`` by conjugate gradients in kernels (issue 31 item 5):
the GPU form of the Newton path, like Genesis' SAP coupler (``genesis/engine/couplers/sap_coupler.py``).

``H = Ã + Jᵀ G J`` is applied matrix-free (``newton_matvec_dot``): Ã = ``scale`` · A from the step
matrix's own device blocks (no copy: ``scale`` = s/c_h, ``sap.py``), J as per-contact block rows
(``newton_dense.ContactRows``, uploaded once per step), G (c x 3 x 3) uploaded per Newton iteration:

    u_m = G_m J_m p,   q = Ã p + Σ_m J_mᵀ u_m   (the Jᵀ part added atomically per node).

Preconditioner: H's 3x3 diagonal blocks inverted (block Jacobi, ``newton_block_jacobi``:
``Ã_ii + Σ J_miᵀ G_m J_mi``). Warm start from the previous Newton direction d (of this step, or the
last one of the previous step), scaled to the minimizer of the quadratic along it,
``x₀ = β d, β = dᵀr / dᵀH d``: never further from the answer in H's norm than x₀ = 0, and the
previous direction's shape where the iterates repeat (``warm_start=False``: x₀ = 0).

The CG itself is ``cg_kernels``' (``pcg_begin``, ``pcg_update``, ``pcg_direction``, ``pcg_iterations``):
fixed-size kernels that stop changing x on their own once converged (Genesis' per-problem "still
active" flag: ``cg_kernels._running``), the scalars kept on the device and read every ``check_every``
iterations (every one on the CPU, where a host view reads them for free; 8 on a GPU), nothing else
read back until x at the end. Stop: ``‖r‖ ≤ rtol ‖∇ℓ‖`` on the recursive residual.

Per Newton iteration the host sends G and ∇ℓ (c·9 + 3n numbers) and reads Δv (3n); the matrix stays
on the device. The contact model and the line search stay on the host (``sap.py``).

``solve(H, r)``: the same kernels for any SPD scipy matrix (its 3x3 blocks uploaded, no contacts):
``newton_linear``'s one-call interface, used where the Newton path hands over an assembled H.
"""

import numpy as np
import scipy.sparse as sp

from .. import backend
from ..assembly.sparse import BlockPattern, BlockSparseMatrix
from ..backend import ti
from ..errors import ParameterError, SimulationError
from .cg_kernels import (BNORM2, COUNT, PQ, RR, STOP, THRESHOLD, pcg_begin, pcg_direction, pcg_iterations, pcg_update,
                         pcg_zero, record_pq)
from .newton_dense import ContactRows

XB = 8          # S[XB]: dᵀr of the warm start (S's slots 0..7: cg_kernels' CG scalars)


@ti.kernel
def newton_matvec_dot(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                      scale: float, nodes: ti.types.ndarray(), jb: ti.types.ndarray(), G: ti.types.ndarray(),
                      u: ti.types.ndarray(), K: ti.i32, c: ti.i32, p: ti.types.ndarray(), q: ti.types.ndarray(),
                      S: ti.types.ndarray(), n: ti.i32):
    """q = (scale A + Jᵀ G J) p; S[PQ] = p·q (a breakdown sets the stop flag, ``cg_kernels.record_pq``)."""
    for m in range(c):
        acc = ti.Vector.zero(float, 3)
        for k in range(K):
            acc += jb[m * K + k] @ p[nodes[m * K + k]]
        u[m] = G[m] @ acc
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ p[indices[k]]
        q[i] = scale * acc
    for e in range(c * K):
        q[nodes[e]] += jb[e].transpose() @ u[e // K]
    s = 0.0
    for i in range(n):
        s += p[i].dot(q[i])
    record_pq(S, s)


@ti.kernel
def newton_block_jacobi(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), scale: float,
                        nodes: ti.types.ndarray(), jb: ti.types.ndarray(), G: ti.types.ndarray(), K: ti.i32,
                        c: ti.i32, pinv: ti.types.ndarray(), n: ti.i32):
    """pinv_i = (scale A_ii + Σ_(m,k: node i) J_mkᵀ G_m J_mk)⁻¹, H's diagonal blocks inverted."""
    for i in range(n):
        pinv[i] = scale * blocks[diag[i]]
    for e in range(c * K):
        Je = jb[e]
        pinv[nodes[e]] += Je.transpose() @ G[e // K] @ Je
    for i in range(n):
        pinv[i] = pinv[i].inverse()


@ti.kernel
def newton_pcg_start(b: ti.types.ndarray(), x: ti.types.ndarray(), q: ti.types.ndarray(), r: ti.types.ndarray(),
                     z: ti.types.ndarray(), p: ti.types.ndarray(), pinv: ti.types.ndarray(), S: ti.types.ndarray(),
                     tol2: float, n: ti.i32):
    """Warm start x = β d (x holds d, q = H d, S[PQ] = dᵀH d on entry; β = dᵀb / dᵀH d, 0 where dᵀH d
    is not positive), r = b − β q, then ``pcg_begin``."""
    xb = 0.0
    for i in range(n):
        xb += x[i].dot(b[i])
    S[XB] = xb
    beta = 0.0
    if S[PQ] > 0.0 and S[PQ] < 1e300:
        beta = S[XB] / S[PQ]
    for i in range(n):
        x[i] = beta * x[i]
        r[i] = b[i] - beta * q[i]
    pcg_begin(b, r, z, p, pinv, S, tol2, n)


class NewtonPCG:
    """Block-Jacobi PCG on ``H = Ã + Jᵀ G J`` in kernels (module docstring).

    rtol: stop at ``‖r‖ ≤ rtol ‖rhs‖``; max_iter: CG iterations per solve at most; warm_start: start
    from the previous direction (scaled) rather than zero; check_every: iterations between reads of
    the CG scalars (default ``backend.default_check_every()``). After each solve: ``iterations`` (CG
    iterations of that solve), ``residual`` (its relative recursive residual; above rtol after
    ``max_iter``: the direction is still one of descent, CG's iterates lower the quadratic model);
    over the solver's life ``total_iterations`` and ``solves``. A breakdown (pᵀHp ≤ 0) raises
    SimulationError."""

    name = "pcg"

    def __init__(self, rtol: float = 1e-10, max_iter: int = 10_000, warm_start: bool = True,
                 check_every: int | None = None):
        if not (isinstance(rtol, (int, float)) and 0.0 < rtol < 1.0):
            raise ParameterError(f"PCG rtol must be in (0, 1), got {rtol!r}")
        if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
            raise ParameterError(f"PCG max_iter must be a positive integer, got {max_iter!r}")
        self.rtol, self.max_iter, self.warm_start = float(rtol), int(max_iter), bool(warm_start)
        self.check_every = check_every or backend.default_check_every()
        self.iterations, self.residual = 0, 0.0
        self.total_iterations, self.solves = 0, 0
        self._n = -1                       # node count of the work vectors
        self._cap = {}                     # capacity of the per-contact arrays
        self._A, self._scale = None, 1.0   # the step's device A (BlockSparseMatrix) and Ã = scale A
        self._c, self._K = 0, 1
        self._generic = None               # (pattern key, BlockSparseMatrix) of ``solve``'s uploads
        self.S = backend.scalar_array(XB + 1)

    # ------------------------------------------------------------------ the Newton path
    def setup(self, A: BlockSparseMatrix, scale: float, J: ContactRows) -> None:
        """Once per step: Ã = ``scale`` A (the step matrix on the device, used in place) and J's block
        rows uploaded. The previous direction is kept as the next warm start while the size repeats."""
        n = A.n
        self._vectors(n)
        self._A, self._scale = A, float(scale)
        c, K = J.nodes.shape if J.nodes.ndim == 2 else (0, 1)
        K = max(int(K), 1)
        self._c, self._K = int(c), K
        nodes = self._array("nodes", c * K, lambda m: backend.int_array(np.zeros(m, np.int32)))
        jb = self._array("jb", c * K, backend.mat3_array)
        if c:
            _put(nodes, J.nodes.reshape(-1), np.int32)
            _put(jb, (J.blocks * J.valid[:, :, None, None]).reshape(-1, 3, 3), backend.np_real())
        self._array("G", c, backend.mat3_array)
        self._array("u", c, backend.vec3_array)

    def solve_step(self, G: np.ndarray, r: np.ndarray) -> np.ndarray:
        """x (3n,) with ``(Ã + Jᵀ G J) x = r`` for this step's Ã and J (``setup``) and the blocks G (c, 3, 3)."""
        if self._A is None:
            raise SimulationError("NewtonPCG.solve_step before setup")
        if self._c:
            _put(self._arrays["G"], np.asarray(G).reshape(-1, 3, 3), backend.np_real())
        return self._solve(self._A, self._scale, r)

    # ------------------------------------------------------------------ any SPD matrix
    def solve(self, H: sp.spmatrix, r: np.ndarray) -> np.ndarray:
        """x with ``H x = r`` for a symmetric positive definite scipy matrix H (its 3x3 blocks uploaded;
        a size not a multiple of 3 padded with identity rows)."""
        n3 = H.shape[0]
        pad = (-n3) % 3
        if pad:
            H = sp.block_diag([H, sp.eye(pad)])
        B = sp.bsr_matrix(H, blocksize=(3, 3))
        B.sort_indices()
        nn = (n3 + pad) // 3
        rows = np.repeat(np.arange(nn), np.diff(B.indptr))
        key = (nn, hash(B.indptr.tobytes()), hash(B.indices.tobytes()))
        if self._generic is None or self._generic[0] != key:
            self._generic = (key, BlockSparseMatrix(BlockPattern(nn, rows, B.indices)))
        A = self._generic[1]
        data = np.zeros((A.pattern.nnzb, 3, 3))
        data[A.pattern.index(rows, B.indices)] = B.data
        _put(A.blocks, data, backend.np_real())
        self._vectors(nn)
        self._c, self._K = 0, 1
        for name, make in (("nodes", lambda m: backend.int_array(np.zeros(m, np.int32))),
                           ("jb", backend.mat3_array), ("G", backend.mat3_array), ("u", backend.vec3_array)):
            self._array(name, 0, make)
        x = self._solve(A, 1.0, np.concatenate([np.asarray(r, np.float64), np.zeros(pad)]))
        self._A = None                     # a Newton step needs its own setup again
        return x[:n3]

    # ------------------------------------------------------------------ the CG
    def _solve(self, A: BlockSparseMatrix, scale: float, r: np.ndarray) -> np.ndarray:
        n, a, S = A.n, self._arrays, self.S
        x, q, res, z, p, pinv, b = (self._work[k] for k in ("x", "q", "r", "z", "p", "pinv", "b"))
        _put(b, np.asarray(r).reshape(-1, 3), backend.np_real())
        contact = (a["nodes"], a["jb"], a["G"])
        newton_block_jacobi(A.blocks, A.diag, scale, *contact, self._K, self._c, pinv, n)
        if not self.warm_start:
            pcg_zero(x, n)
        newton_matvec_dot(A.indptr, A.indices, A.blocks, scale, *contact, a["u"], self._K, self._c, x, q, S, n)
        newton_pcg_start(b, x, q, res, z, p, pinv, S, self.rtol**2, n)
        s = backend.read(S)
        if s[BNORM2] == 0.0:
            pcg_zero(x, n)
            self.iterations, self.residual = 0, 0.0
            self.solves += 1
            return np.zeros(3 * n)

        def iterate():
            newton_matvec_dot(A.indptr, A.indices, A.blocks, scale, *contact, a["u"], self._K, self._c, p, q, S, n)
            pcg_update(x, res, z, p, q, pinv, S, n)
            pcg_direction(z, p, S, n)

        s = pcg_iterations(S, s, iterate, self.check_every, self.max_iter)
        self.iterations = int(s[COUNT])
        self.residual = float(np.sqrt(max(float(s[RR]), 0.0) / float(s[BNORM2])))
        self.total_iterations += self.iterations
        self.solves += 1
        out = backend.read(x, n).astype(np.float64).ravel()
        if (s[STOP] != 0.0 and s[RR] > s[THRESHOLD]) or not np.all(np.isfinite(out)):
            pcg_zero(x, n)
            raise SimulationError(f"PCG on the Newton system broke down after {self.iterations} iterations "
                                  "(pᵀHp ≤ 0: H not positive definite)")
        return out

    def _vectors(self, n: int) -> None:
        """The work vectors for n nodes (new ones, and a cold warm start, when n changes)."""
        if n != self._n:
            self._work = {k: backend.vec3_array(n) for k in ("x", "q", "r", "z", "p", "b")}
            self._work["pinv"] = backend.mat3_array(n)
            pcg_zero(self._work["x"], n)
            self._n = n
            self._arrays = {}
            self._cap = {}

    def _array(self, name: str, size: int, make):
        """The per-contact device array ``name`` with room for ``size`` rows (grown by doubling)."""
        if self._cap.get(name, -1) < size:
            cap = max(2 * size, 16)
            self._arrays[name] = make(cap)
            self._cap[name] = cap
        return self._arrays[name]


def _put(arr, value: np.ndarray, dtype) -> None:
    """Upload ``value`` into the first rows of ``arr`` by one ``from_numpy`` of the whole array (zero-padded
    to its capacity): no read-back first, as ``backend.write`` does off the CPU."""
    full = np.zeros(tuple(arr.shape) + tuple(getattr(arr, "element_shape", ()) or ()), dtype=dtype)
    full[:len(value)] = value
    arr.from_numpy(full)

"""Linear solves of ``A x = b`` for the SPD step matrix.

- ``BlockJacobiPCG``: preconditioned conjugate gradients with a 3x3 block-Jacobi
  preconditioner in Taichi kernels (runs on any backend; three kernel launches and
  one scalar read-back per iteration, no per-node Python work).
- ``DirectSolver``: sparse direct factorisation on the CPU of the exported matrix (CHOLMOD
  through cvxopt, else SciPy's SuperLU); exact, and faster than CG for small, stiff problems.

``make_linear_solver("auto", n)`` picks direct below ``DIRECT_MAX_DOFS`` on the CPU
and PCG otherwise.
"""
from dataclasses import dataclass
import math

import numpy as np
import taichi as ti

from .. import backend
from ..assembly.sparse import BlockSparseMatrix
from ..errors import ParameterError

LINEAR_SOLVERS = ("auto", "pcg", "direct")
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
    """Sparse direct solve of the exported matrix: CHOLMOD's supernodal Cholesky when cvxopt is
    installed, else SciPy's SuperLU (``newton_linear``, shared with the Newton path).
    The residual is reported; iterations = 1."""

    name = "direct"

    def __init__(self, n: int):
        from .newton_linear import make_newton_linear_solver

        self.n = n
        self._factor = make_newton_linear_solver("direct")

    def solve(self, A: BlockSparseMatrix, b, x) -> LinearSolveStats:
        K = A.to_scipy()
        rhs = b.to_numpy()[: self.n].astype(np.float64).ravel()
        sol = self._factor.solve(K, rhs) if self.n else rhs
        x.from_numpy(np.ascontiguousarray(sol.reshape(-1, 3), dtype=backend.np_real()))
        nb = np.linalg.norm(rhs)
        res = float(np.linalg.norm(K @ sol - rhs) / nb) if nb > 0 else 0.0
        return LinearSolveStats(1, res, bool(np.isfinite(res)))


class BlockJacobiPCG:
    """PCG for one matrix size; work vectors are allocated once and reused every step."""

    name = "pcg"

    def __init__(self, n: int, tol: float = 1e-8, max_iter: int = 5000):
        self.n, self.tol, self.max_iter = n, tol, max_iter
        self.r, self.z, self.p, self.q = (backend.vec3_array(n) for _ in range(4))
        self.pinv = backend.mat3_array(n)

    def solve(self, A: BlockSparseMatrix, b, x) -> LinearSolveStats:
        """Solve A x = b in place, starting from the current x (warm start)."""
        n = self.n
        bb = pcg_start(A.indptr, A.indices, A.blocks, A.diag, b, x, self.r, self.z, self.p, self.pinv, n)
        bnorm2, rz = float(bb[0]), float(bb[1])
        if bnorm2 == 0.0:
            pcg_zero(x, n)
            return LinearSolveStats(0, 0.0, True)
        rr = float(bb[2])
        it = 0
        while rr > self.tol**2 * bnorm2 and it < self.max_iter:
            pq = pcg_matvec_dot(A.indptr, A.indices, A.blocks, self.p, self.q, n)
            if not (pq > 0.0) or not math.isfinite(pq):
                break
            out = pcg_update(x, self.r, self.z, self.p, self.q, self.pinv, rz / pq, n)
            rr, rz_new = float(out[0]), float(out[1])
            pcg_direction(self.z, self.p, rz_new / rz, n)
            rz = rz_new
            it += 1
        rel = math.sqrt(max(rr, 0.0) / bnorm2)
        return LinearSolveStats(it, rel, rel <= self.tol)


@ti.kernel
def pcg_start(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
              diag: ti.types.ndarray(), b: ti.types.ndarray(), x: ti.types.ndarray(), r: ti.types.ndarray(),
              z: ti.types.ndarray(), p: ti.types.ndarray(), pinv: ti.types.ndarray(), n: ti.i32) -> ti.math.vec3:
    """Block-Jacobi inverse, r = b - A x, z = p = P r. Returns (b·b, r·z, r·r)."""
    out = ti.Vector.zero(float, 3)
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ x[indices[k]]
        pi = blocks[diag[i]].inverse()
        pinv[i] = pi
        ri = b[i] - acc
        zi = pi @ ri
        r[i] = ri
        z[i] = zi
        p[i] = zi
        out += ti.Vector([b[i].norm_sqr(), ri.dot(zi), ri.norm_sqr()])
    return out


@ti.kernel
def pcg_matvec_dot(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                   p: ti.types.ndarray(), q: ti.types.ndarray(), n: ti.i32) -> float:
    """q = A p; returns p·q."""
    s = 0.0
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ p[indices[k]]
        q[i] = acc
        s += p[i].dot(acc)
    return s


@ti.kernel
def pcg_update(x: ti.types.ndarray(), r: ti.types.ndarray(), z: ti.types.ndarray(), p: ti.types.ndarray(),
               q: ti.types.ndarray(), pinv: ti.types.ndarray(), alpha: float, n: ti.i32) -> ti.math.vec2:
    """x += alpha p; r -= alpha q; z = P r. Returns (r·r, r·z)."""
    out = ti.Vector.zero(float, 2)
    for i in range(n):
        x[i] += alpha * p[i]
        ri = r[i] - alpha * q[i]
        r[i] = ri
        zi = pinv[i] @ ri
        z[i] = zi
        out += ti.Vector([ri.norm_sqr(), ri.dot(zi)])
    return out


@ti.kernel
def pcg_direction(z: ti.types.ndarray(), p: ti.types.ndarray(), beta: float, n: ti.i32):
    for i in range(n):
        p[i] = z[i] + beta * p[i]


@ti.kernel
def pcg_zero(a: ti.types.ndarray(), n: ti.i32):
    for i in range(n):
        a[i] = ti.Vector.zero(float, 3)

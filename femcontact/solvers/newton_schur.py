"""The Newton system of a large deformable body through the Schur complement of Ã on the contact DOFs
(issue 31 item 3; Drake's ``SchurComplement`` / ``DeformableDriver``).

``H = Ã + Jᵀ G J`` differs from Ã only on the k DOFs that a contact touches (J's nonzero columns, c),
so one sparse Cholesky of Ã per step, with c ordered last, serves every Newton iteration::

    P Ã Pᵀ = L Lᵀ,   L = [L_ii 0; L_ci L_cc],   S = L_cc L_ccᵀ = Ã_cc − Ã_ci Ã_ii⁻¹ Ã_ic,

S being the Schur complement of Ã's interior block (the trailing block of the factor is the Cholesky
factor of the complement when the last k columns are eliminated last). ``H x = r`` is solved
exactly by block elimination (``SchurSolver.solve``): a forward sweep over the interior columns of L
(``y_i = L_ii⁻¹ r_i``, and ``t_c = r_c − L_ci y_i``), the dense k x k system
``(S + J_cᵀ G J_c) x_c = t_c`` (LAPACK Cholesky, ``ContactMatrix``: a ``DenseNewtonMatrix`` with S as its
Ã), and a backward sweep ``x_i = L_ii⁻ᵀ (y_i − L_ciᵀ x_c)``. The Newton loop (``ContactSpace``) needs
the sweeps only once per step: no contact acts on the interior, so its gradient only shrinks by
(1 − α) per step; the iterates live on the contact DOFs (the dense Cholesky per iteration) and the
interior is recovered at the end. The iterates are the full-H Newton iterates up to round-off; the
sparse factorization moves out of the Newton loop.

Factorization: CHOLMOD through cvxopt (``newton_linear``), supernodal, with the permutation given
(``nmethods`` = 1) and no postordering (``postorder`` = False, so the contact columns stay last):
the fill-reducing order of all DOFs (METIS nested dissection through pymetis, else AMD; computed
once per pattern of Ã) with the contact DOFs taken out and appended. ``cholmod.getfactor`` hands
over L (it leaves the factor symbolic, so the sweeps run on L's CSC arrays: two serial compiled
loops, ``_forward`` / ``_backward``, ~8 ms each at 14.7k DOF where ``scipy.sparse.linalg.
spsolve_triangular`` takes ~300 ms and a SuperLU of L ~150 ms; docs/PERFORMANCE.md). The symbolic
analysis is redone every step (~25 ms at 14.7k DOF: the factor ``getfactor`` leaves behind is a simplicial
one, whose next numeric factorization would be an LDLᵀ), the ordering kept per pattern of Ã.

Factor reuse (option ``factor_reuse``, off by default; ``SchurSolver.reuse``): Ã of a linear
corotational body changes from step to step only through its element rotations, so the factor of an
earlier step's Ã₀ is kept (while Ã's pattern repeats and the contact nodes are among its trailing
ones) and each step is still solved on its own Ã to the solver's tolerance: ``ReusedContactSpace``
restarts the contact-space Newton at its answer, where the gradient is the exact one, until that
passes the stop test (a splitting Ã = Ã₀ + Δ whose restarts contract by about ‖Ã₀⁻¹Δ‖); refactor
triggers on the restart count and contraction. Measured in docs/PERFORMANCE.md (2026-11-28).

Selection (``sap.py``, option ``linear_solver``): "schur" forces this path; "auto" takes it on the
CPU backend from ``SCHUR_MIN_DOFS`` unknowns when the contact DOFs are at most
``SCHUR_MAX_FRACTION`` of them and at most ``SCHUR_MAX_CONTACT_DOFS`` (the dense k³ Cholesky); the
full-H CHOLMOD path ("cholmod", ``newton_linear.solve_newton``) stays the reference.
"""
import math

import numpy as np
import scipy.sparse as sp

from ..backend import ti
from ..errors import ParameterError, SimulationError
from .newton_dense import ContactRows, DenseNewtonMatrix
from .newton_linear import DIRECT_MAX_DOFS, METIS_MIN_DOFS, ORDERINGS, cholmod_available, nested_dissection

SCHUR_MIN_DOFS = 3000           # "auto": the Schur path from this many unknowns ...
SCHUR_MAX_FRACTION = 0.25       # ... while the contact DOFs are at most this fraction of them
SCHUR_MAX_CONTACT_DOFS = 6000   # ... and at most this many (dense k x k Cholesky per Newton iteration)
# factor reuse (a refactor costs about as much CPU as 15 restarts on the 14.7k-DOF cube, where at rest
# each step restarts twice whatever the factor's age; the soft gripper's steps restart 3-5 times:
# docs/PERFORMANCE.md)
REUSE_MAX_RESTARTS = 4          # refactor at the next step after a step that restarted more often
REUSE_REFACTOR_RESTARTS = 10    # ... and at once within a step that restarts this often
REUSE_MIN_CONTRACTION = 0.2     # ... or whose restarts shrink the exact e_m by less than this factor each


@ti.kernel
def _forward(indptr: ti.types.ndarray(dtype=ti.i64), indices: ti.types.ndarray(dtype=ti.i32),
             data: ti.types.ndarray(dtype=ti.f64), x: ti.types.ndarray(dtype=ti.f64), ncols: ti.i32):
    """Forward substitution over L's first ``ncols`` columns (CSC, diagonal first in each column), in
    place: x[:ncols] ← L_ii⁻¹ x[:ncols], x[ncols:] ← x[ncols:] − L_ci x[:ncols]."""
    ti.loop_config(serialize=True)
    for j in range(ncols):
        xj = x[j] / data[indptr[j]]
        x[j] = xj
        e = indptr[j] + 1            # (a while loop: range() would take its bounds as 32-bit)
        while e < indptr[j + 1]:
            x[indices[e]] -= data[e] * xj
            e += 1


@ti.kernel
def _backward(indptr: ti.types.ndarray(dtype=ti.i64), indices: ti.types.ndarray(dtype=ti.i32),
              data: ti.types.ndarray(dtype=ti.f64), x: ti.types.ndarray(dtype=ti.f64), ncols: ti.i32):
    """Back substitution with L's first ``ncols`` columns transposed, in place:
    x[:ncols] ← L_ii⁻ᵀ (x[:ncols] − L_ciᵀ x[ncols:])."""
    ti.loop_config(serialize=True)
    for jj in range(ncols):
        j = ncols - 1 - jj
        s = x[j]
        e = indptr[j] + 1
        while e < indptr[j + 1]:
            s -= data[e] * x[indices[e]]
            e += 1
        x[j] = s / data[indptr[j]]


def contact_nodes(J: ContactRows, fixed: np.ndarray) -> np.ndarray:
    """The nodes (sorted) whose columns of J a contact touches, prescribed nodes left out."""
    return np.unique(J.nodes[J.valid & ~fixed[J.nodes]])


class ContactMatrix(DenseNewtonMatrix):
    """``S + J_cᵀ G J_c`` (k x k) for ``ContactSpace``: J_cᵀGJ_c summed into its few distinct entries
    of S (not a k² scatter), and the Cholesky factor kept while G repeats (a reuse restart, where
    the iterate and so G are the same)."""

    def setup(self, At: np.ndarray, J: ContactRows) -> None:
        new = self._nodes is None or not (self._nodes.shape == J.nodes.shape and self._size == At.shape[0]
                                           and np.array_equal(self._nodes, J.nodes))
        super().setup(At, J)
        if new:
            self._entries, self._slot = np.unique(self._scatter, return_inverse=True)
        self._factor = self._factor_G = None

    def matrix(self, G: np.ndarray) -> np.ndarray:
        Hm = self._JdT @ (G @ self._Jd)
        H = self._At.copy()
        H.ravel()[self._entries] += np.bincount(self._slot, Hm.ravel(), minlength=len(self._entries))
        return H

    def solve(self, G: np.ndarray, r: np.ndarray) -> np.ndarray:
        from scipy.linalg import lapack

        if self._factor_G is None or not np.array_equal(G, self._factor_G):
            L, info = lapack.dpotrf(self.matrix(G), lower=1, clean=0, overwrite_a=1)
            if info != 0:
                raise SimulationError(f"Newton matrix is not positive definite (LAPACK dpotrf info {info})")
            self._factor, self._factor_G = L, G.copy()
        x, info = lapack.dpotrs(self._factor, r, lower=1)
        return x


class SchurSolver:
    """``H = Ã + Jᵀ G J`` solved through one Cholesky of Ã per step and the dense Schur complement on
    the contact DOFs (module docstring). ``setup`` once per step, ``solve(G, r)`` per Newton iteration.
    ``ordering``: as ``newton_linear.CholmodSolver``'s ("auto": METIS from ``METIS_MIN_DOFS``).

    ``reuse``: keep the factor of an earlier step's Ã₀ while the pattern of Ã repeats and this step's
    contact nodes are among the factor's trailing ones; ``space`` then gives a ``ReusedContactSpace``
    (exact to the solver's tolerance), and a step that needed more than ``REUSE_MAX_RESTARTS``
    restarts makes the next one refactor (``REUSE_REFACTOR_RESTARTS``: at once, within the step)."""

    name = "schur"

    def __init__(self, ordering: str = "auto", reuse: bool = False):
        from cvxopt import cholmod

        if ordering not in ORDERINGS:
            raise ParameterError(f"unknown ordering {ordering!r}; choose one of {', '.join(ORDERINGS)}")
        self._cholmod = cholmod
        cholmod.options["supernodal"] = 2
        self.ordering = ordering
        self.ordering_used = None    # "metis" or "amd"
        self.analyses = 0            # symbolic analyses (one per step: see ``setup``)
        self.contact_dofs = 0        # k of the last setup
        self._order_key = self._order = None
        self._perm_key = self._perm = None
        self._matrix_key = self._matrix = None
        self.dense = ContactMatrix()
        self.reuse = reuse
        self.factorizations = 0      # numeric factorizations of Ã
        self.stale = False           # the factor is an earlier step's (reuse)
        self.refactor_next = True    # (reuse) the next setup factors
        self.restarts = []           # (reuse) restarts of each step set up on a stale factor
        self._nodes = None           # the contact nodes ordered last in the factor
        self._args = None            # the last setup's arguments (a refactor within a step)

    @staticmethod
    def takes(n_dofs: int, k: int) -> bool:
        """Whether "auto" takes the Schur path for k contact DOFs of ``n_dofs``."""
        return k <= SCHUR_MAX_FRACTION * n_dofs and k <= SCHUR_MAX_CONTACT_DOFS

    def setup(self, L: sp.csc_matrix, cols: np.ndarray, key, J: ContactRows, nodes_c: np.ndarray,
              blocks=None) -> None:
        """Factor Ã (its lower triangle ``L``, sorted CSC, ``cols`` each entry's column; ``key`` names
        its pattern) with the DOFs of ``nodes_c`` last, read S off the factor, and map J (prescribed
        columns zeroed) to those DOFs. ``blocks``: Ã's node-block pattern for METIS, if known."""
        from cvxopt import matrix, spmatrix

        self._args = (L, cols, key, J, nodes_c, blocks)
        if (self.reuse and not self.refactor_next and key == self._matrix_key and self._nodes is not None
                and np.isin(nodes_c, self._nodes).all()):
            self.stale = True
            self.J_local = self._local_rows(J, self._nodes)
            self.dense.setup(self.S, self.J_local)
            return
        n = L.shape[0]
        cdof = (3 * nodes_c[:, None] + np.arange(3)).ravel()
        k = len(cdof)
        if key != self._matrix_key:
            self._matrix = spmatrix(matrix(np.ones(L.nnz)), matrix(L.indices.astype(np.int64)),
                                    matrix(cols.astype(np.int64)), L.shape)
            self._matrix_key = key
            self._order_key = None
        Ac = self._matrix
        Ac.V = matrix(np.ascontiguousarray(L.data, dtype=np.float64))
        if key != self._order_key:
            self._order = self._fill_reducing_order(Ac, L, cols, blocks)
            self._order_key = key
            self._perm_key = None
        perm_key = (key, cdof.tobytes())
        if perm_key != self._perm_key:
            last = np.zeros(n, bool)
            last[cdof] = True
            self._perm = np.concatenate([self._order[~last[self._order]], cdof]).astype(np.int64)
            self._perm_key = perm_key
        # a fresh analysis every step: getfactor turns the factor into a simplicial symbolic one, on
        # which a later numeric() would compute a simplicial LDLᵀ, not the supernodal L Lᵀ read here
        F = self._analyze(Ac, self._perm)
        try:
            self._cholmod.numeric(Ac, F)
        except ArithmeticError as exc:
            raise SimulationError(f"Newton matrix Ã is not positive definite (CHOLMOD: {exc})") from None
        Lf = self._cholmod.getfactor(F)
        indptr, indices, data = Lf.CCS                    # copies out of cvxopt, viewed without another
        self._indptr, self._data = (np.asarray(memoryview(a)).ravel() for a in (indptr, data))
        self._indices = np.asarray(memoryview(indices)).ravel().astype(np.int32)   # row numbers: the sweeps read 12 bytes an entry, not 16
        self._ni = n - k
        self.contact_dofs = k
        self.factorizations += 1
        self.stale, self.refactor_next, self._nodes = False, False, nodes_c.copy()
        self.S = self._complement(k)
        self.J_local = self._local_rows(J, nodes_c)
        self.dense.setup(self.S, self.J_local)

    def refactor(self) -> None:
        """Factor the last setup's Ã now (a reuse step whose restarts do not settle)."""
        self.refactor_next = True
        self.setup(*self._args)

    def space(self, v: np.ndarray, At, bt: np.ndarray, J: ContactRows, off: np.ndarray, D: np.ndarray,
              dof_fixed: np.ndarray, converged) -> "ContactSpace | ReusedContactSpace":
        """The Newton iterates of this step (Ã = ``At``, CSR) on the contact DOFs: exact on a fresh factor, else
        restarted to the tolerance ``converged(‖D∇ℓ‖, scale)`` (``ReusedContactSpace``)."""
        if not self.stale:
            return ContactSpace(self, v, At, bt, J, off, D, dof_fixed)
        return ReusedContactSpace(self, v, At, bt, J, off, D, dof_fixed, converged)

    def _fill_reducing_order(self, Ac, L: sp.csc_matrix, cols: np.ndarray, blocks) -> np.ndarray:
        """The fill-reducing order of all DOFs (row k of the permuted matrix is row order[k])."""
        p = None
        if self.ordering == "metis" or (self.ordering == "auto" and L.shape[0] >= METIS_MIN_DOFS):
            p = nested_dissection(L, cols, blocks=blocks)
        self.ordering_used = "amd" if p is None else "metis"
        if p is None:
            from cvxopt import amd
            p = np.array(amd.order(Ac), dtype=np.int64).ravel()
        return np.asarray(p, dtype=np.int64)

    def _analyze(self, Ac, perm: np.ndarray):
        """CHOLMOD's symbolic analysis with exactly ``perm`` (no other ordering tried, no postorder)."""
        from cvxopt import matrix

        opts = self._cholmod.options
        saved = {key: opts.get(key) for key in ("nmethods", "postorder")}
        opts["nmethods"], opts["postorder"] = 1, False
        try:
            self.analyses += 1
            return self._cholmod.symbolic(Ac, p=matrix(perm), uplo="L")
        finally:
            for key, value in saved.items():
                if value is None:
                    opts.pop(key, None)
                else:
                    opts[key] = value

    def _complement(self, k: int) -> np.ndarray:
        """S = L_cc L_ccᵀ (k x k, lower triangle filled) from the factor's trailing k columns."""
        from scipy.linalg import blas

        ni, ip = self._ni, self._indptr
        Lcc = np.zeros((k, k), order="F")
        start = ip[ni]
        col = np.repeat(np.arange(k), np.diff(ip[ni:]))
        Lcc[self._indices[start:] - ni, col] = self._data[start:]
        return blas.dsyrk(1.0, Lcc, lower=1)

    @staticmethod
    def _local_rows(J: ContactRows, nodes_c: np.ndarray) -> ContactRows:
        """J's block rows on the contact nodes' numbering (slots of other nodes hold zero blocks)."""
        local = np.minimum(np.searchsorted(nodes_c, J.nodes), max(len(nodes_c) - 1, 0))
        return ContactRows(local, J.blocks, len(nodes_c), J.valid)

    def solve(self, G: np.ndarray, r: np.ndarray) -> np.ndarray:
        """``H(G)⁻¹ r``: forward sweep, dense contact-space Cholesky, backward sweep (H of the factored
        Ã: with ``reuse`` an earlier step's where ``stale``)."""
        x = np.ascontiguousarray(r[self._perm], dtype=np.float64)
        ni = self._ni
        _forward(self._indptr, self._indices, self._data, x, ni)
        x[ni:] = self.dense.solve(G, x[ni:])
        _backward(self._indptr, self._indices, self._data, x, ni)
        out = np.empty_like(x)
        out[self._perm] = x
        return out


def make_schur_solver(kind: str, n_dofs: int, arch: str, reuse: bool = False) -> "SchurSolver | None":
    """The Schur solver for option ``linear_solver`` = ``kind``: always for "schur" (cvxopt needed),
    for "auto" on the CPU backend from ``SCHUR_MIN_DOFS`` to ``DIRECT_MAX_DOFS`` unknowns (above: PCG) when
    cvxopt is installed; else None. ``reuse``: the factor kept over steps (``SchurSolver``)."""
    if kind == "schur":
        if not cholmod_available():
            raise ParameterError("linear solver 'schur' needs cvxopt (pip install cvxopt); or use 'auto'")
        return SchurSolver(reuse=reuse)
    if kind == "auto" and arch == "cpu" and SCHUR_MIN_DOFS <= n_dofs <= DIRECT_MAX_DOFS and cholmod_available():
        return SchurSolver(reuse=reuse)
    return None


class ContactSpace:
    """The Newton iterates of ``sap.FullSpace`` (the full-H path) carried on the contact DOFs only.

    H Δv = −∇ℓ eliminated with the factor of ``solver`` (module docstring, perm order, i interior,
    c contact DOFs): Δv_c = (S + J_cᵀGJ_c)⁻¹ (−∇ℓ_c − L_ci y_i), Δv_i = L_ii⁻ᵀ (y_i − L_ciᵀ Δv_c) with
    y_i = −L_ii⁻¹ ∇ℓ_i. No contact acts on the interior, so ∇ℓ_i = ρ g_i (g_i its value at the warm
    start, ρ = Π(1 − α) over the steps taken: H_i = Ã_i and Ã_i Δv = −∇ℓ_i) and y_i = ρ y₀: one
    forward sweep per step. The line search's scalars close on the contact DOFs
    (Ã = L Lᵀ: ΔvᵀÃΔv = ρ²‖y₀‖² + Δv_cᵀ S Δv_c, Δv_iᵀ∇ℓ_i = −ρ²‖y₀‖² + ρ Δv_cᵀ L_ci y₀,
    (ÃΔv)_c = ρ L_ci y₀ + S Δv_c), and the interior is recovered once at the end,
    v_i = v_i⁰ + L_ii⁻ᵀ (σ y₀ − L_ciᵀ ζ) with σ = Σ αρ and ζ = Σ α Δv_c (one backward sweep).
    Same iterates as the full H up to round-off, the sparse factor touched twice per step."""

    def __init__(self, solver: SchurSolver, v: np.ndarray, At, bt: np.ndarray, J: ContactRows,
                 off: np.ndarray, D: np.ndarray, dof_fixed: np.ndarray):
        self.s = s = solver
        perm, ni = s._perm, s._ni
        inner, cdof = perm[:ni], perm[ni:]
        self.v0 = v
        Av = At @ v
        r = Av - bt
        g = np.where(dof_fixed, 0.0, r)               # ∇ℓ off the contact DOFs (prescribed DOFs: 0)
        self._g_inner = g[inner]
        self.y0 = None                                # y₀, −L_ci y₀ and ‖y₀‖²: at the first direction
        Dg, Db = D[inner] * g[inner], D[inner] * bt[inner]
        self.gg, self.gb, self.bb = float(Dg @ Dg), float(Dg @ Db), float(Db @ Db)
        self.Dc, self.bc, self.rc = D[cdof], bt[cdof], r[cdof]
        self.quadratic = float(0.5 * v @ Av - bt @ v)
        self.vc0 = J.matvec(v).reshape(-1, 3) + off               # prescribed nodes' part stays in here
        self.rho, self.sigma = 1.0, 0.0
        self.zeta = np.zeros(len(cdof))                           # v_c − v_c⁰

    def _sweep(self) -> None:
        """y₀ = −L_ii⁻¹ ∇ℓ_i and u₀ = −L_ci y₀ (the forward sweep; none where the start has converged)."""
        s, ni = self.s, self.s._ni
        x = np.zeros(len(self.v0))
        x[:ni] = -self._g_inner
        _forward(s._indptr, s._indices, s._data, x, ni)
        self.y0, self.u0 = x[:ni].copy(), x[ni:].copy()
        self.Y = float(self.y0 @ self.y0)

    def contact_velocity(self) -> np.ndarray:
        return self.vc0 + self.s.J_local.matvec(self.zeta).reshape(-1, 3)

    def gradient(self, gamma: np.ndarray) -> tuple[float, float, float]:
        """As ``FullSpace.gradient``, from the contact DOFs and ρ."""
        jc = self.s.J_local.rmatvec(gamma)
        self.grad_c = self.rc - jc
        rho, Dc = self.rho, self.Dc
        gnorm2 = rho * rho * self.gg + float(np.sum((Dc * self.grad_c) ** 2))
        Av2 = rho * rho * self.gg + 2.0 * rho * self.gb + self.bb + float(np.sum((Dc * (self.rc + self.bc)) ** 2))
        return (self.quadratic, math.sqrt(gnorm2),
                max(math.sqrt(max(Av2, 0.0)), float(np.linalg.norm(Dc * jc))))

    def direction(self, G: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        """As ``FullSpace.direction``: Δv_c by the dense contact-space Cholesky, the rest in closed form."""
        from scipy.linalg import blas

        if self.y0 is None:
            self._sweep()
        rho, u0 = self.rho, self.u0
        dvc = self.s.dense.solve(G, rho * u0 - self.grad_c)
        Sd = blas.dsymv(1.0, self.s.S, dvc, lower=1)
        yy, yu = rho * rho * self.Y, rho * float(dvc @ u0)
        self.dv_c, self.Adv_c = dvc, Sd - rho * u0
        self.c0 = -yy - yu + float(dvc @ self.rc)
        self.c1 = yy + float(dvc @ Sd)
        return (self.s.J_local.matvec(dvc).reshape(-1, 3), self.c0, self.c1,
                -yy - yu + float(dvc @ self.grad_c))

    def advance(self, alpha: float) -> None:
        self.quadratic += alpha * self.c0 + 0.5 * alpha * alpha * self.c1
        self.rc = self.rc + alpha * self.Adv_c
        self.sigma += alpha * self.rho
        self.zeta = self.zeta + alpha * self.dv_c
        self.rho *= 1.0 - alpha

    def velocity(self) -> np.ndarray:
        """v after the steps taken: the interior by one backward sweep (none where no step was taken)."""
        if self.sigma == 0.0:
            return self.v0
        s, ni = self.s, self.s._ni
        x = np.empty(len(self.v0))
        x[:ni] = self.sigma * self.y0
        x[ni:] = self.zeta
        _backward(s._indptr, s._indices, s._data, x, ni)
        dv = np.empty_like(x)
        dv[s._perm] = x
        return self.v0 + dv


class ReusedContactSpace:
    """``ContactSpace`` on the factor of an earlier step's Ã₀ (option ``factor_reuse``), converged on
    this step's Ã = Ã₀ + Δ by restarts.

    A ``ContactSpace`` started at v with this step's Ã (its residual Ã v − b̃ exact) but the factor,
    S and the interior response of Ã₀ is Newton on ½ uᵀÃ₀u − (b̃ − Δv)ᵀu + ℓ_c(Ju): the splitting
    Ã = Ã₀ + Δ with Δu frozen at Δv. When that converges (``converged``, the solver's own test), it is
    restarted at its answer, where its gradient is this step's exact ∇ℓ: the step ends only when
    the exact gradient passes the test. Each restart costs a backward sweep, one product with Ã and
    (where it goes on) a forward sweep; the restarts contract the exact e_m by about ‖Ã₀⁻¹Δ‖. Refactor
    triggers: more than ``REUSE_MAX_RESTARTS`` in a step make the next step refactor; a restart that
    shrinks the exact e_m by less than ``REUSE_MIN_CONTRACTION``, or the ``REUSE_REFACTOR_RESTARTS``-th,
    refactors at once (this step's Ã, the rest of the step exact)."""

    def __init__(self, solver: SchurSolver, v: np.ndarray, At, bt: np.ndarray, J: ContactRows, off: np.ndarray,
                 D: np.ndarray, dof_fixed: np.ndarray, converged):
        self.s, self.args, self.converged = solver, (At, bt, J, off, D, dof_fixed), converged
        self.restarts = 0
        self.exact = False                # refactored within the step: the rest is exact
        self.e_m = None                   # the exact e_m at the last restart
        self._start(v)

    def _start(self, v: np.ndarray) -> None:
        self.inner = ContactSpace(self.s, v, *self.args)
        self.moved = False              # a Newton step taken since the start

    def contact_velocity(self) -> np.ndarray:
        return self.inner.contact_velocity()

    def gradient(self, gamma: np.ndarray) -> tuple[float, float, float]:
        """As ``ContactSpace.gradient``; where the inner problem has converged, the restart's exact one."""
        out = self.inner.gradient(gamma)
        if self.exact or not self.moved or not self.converged(out[1], out[2]):
            return out
        self.restarts += 1
        v = self.inner.velocity()
        self._start(v)
        out = self.inner.gradient(gamma)
        e_m = out[1] / out[2] if out[2] > 0 else out[1]
        slow = self.e_m is not None and e_m > REUSE_MIN_CONTRACTION * self.e_m
        self.e_m = e_m
        if not self.converged(out[1], out[2]) and (slow or self.restarts >= REUSE_REFACTOR_RESTARTS):
            self.s.refactor()                     # the rest of the step on this step's own factor
            self.exact = True
            self._start(v)
            out = self.inner.gradient(gamma)
        return out

    def direction(self, G: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        self.moved = True
        return self.inner.direction(G)

    def advance(self, alpha: float) -> None:
        self.inner.advance(alpha)

    def velocity(self) -> np.ndarray:
        """v at the end (the inner one's); records the restarts and sets the refactor trigger."""
        self.s.restarts.append(self.restarts)
        if self.restarts > REUSE_MAX_RESTARTS and not self.exact:
            self.s.refactor_next = True
        return self.inner.velocity()

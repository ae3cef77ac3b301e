"""The Newton system of a large deformable body through the Schur complement of Ã on the contact DOFs
(issue 31 item 3; Drake's ``SchurComplement`` / ``DeformableDriver``).

``H = Ã + Jᵀ G J`` differs from Ã only on the k DOFs that a contact touches (J's nonzero columns, c),
so one sparse Cholesky of Ã per step, with c ordered last, serves every Newton iteration::

    P Ã Pᵀ = L Lᵀ,   L = [L_ii 0; L_ci L_cc],   S = L_cc L_ccᵀ = Ã_cc − Ã_ci Ã_ii⁻¹ Ã_ic,

S being the Schur complement of Ã's interior block (the trailing block of the factor is the Cholesky
factor of the complement when the last k columns are eliminated last). ``H x = r`` is solved
exactly by block elimination (``SchurSolver.solve``): a forward sweep over the interior columns of L
(``y_i = L_ii⁻¹ r_i``, and ``t_c = r_c − L_ci y_i``), the dense k x k system
``(S + J_cᵀ G J_c) x_c = t_c`` (LAPACK Cholesky, ``newton_dense.DenseNewtonMatrix`` with S as its
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


@ti.kernel
def _forward(indptr: ti.types.ndarray(dtype=ti.i64), indices: ti.types.ndarray(dtype=ti.i64),
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
def _backward(indptr: ti.types.ndarray(dtype=ti.i64), indices: ti.types.ndarray(dtype=ti.i64),
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


class SchurSolver:
    """``H = Ã + Jᵀ G J`` solved through one Cholesky of Ã per step and the dense Schur complement on
    the contact DOFs (module docstring). ``setup`` once per step, ``solve(G, r)`` per Newton iteration.
    ``ordering``: as ``newton_linear.CholmodSolver``'s ("auto": METIS from ``METIS_MIN_DOFS``)."""

    name = "schur"

    def __init__(self, ordering: str = "auto"):
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
        self.dense = DenseNewtonMatrix()

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
        self._indptr, self._indices, self._data = (np.asarray(memoryview(a)).ravel() for a in (indptr, indices, data))
        self._ni = n - k
        self.contact_dofs = k
        self.S = self._complement(k)
        self.J_local = self._local_rows(J, nodes_c)
        self.dense.setup(self.S, self.J_local)

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
        """``H(G)⁻¹ r``: forward sweep, dense contact-space Cholesky, backward sweep."""
        x = np.ascontiguousarray(r[self._perm], dtype=np.float64)
        ni = self._ni
        _forward(self._indptr, self._indices, self._data, x, ni)
        x[ni:] = self.dense.solve(G, x[ni:])
        _backward(self._indptr, self._indices, self._data, x, ni)
        out = np.empty_like(x)
        out[self._perm] = x
        return out


def make_schur_solver(kind: str, n_dofs: int, arch: str) -> "SchurSolver | None":
    """The Schur solver for option ``linear_solver`` = ``kind``: always for "schur" (cvxopt needed),
    for "auto" on the CPU backend from ``SCHUR_MIN_DOFS`` to ``DIRECT_MAX_DOFS`` unknowns (above: PCG) when
    cvxopt is installed; else None."""
    if kind == "schur":
        if not cholmod_available():
            raise ParameterError("linear solver 'schur' needs cvxopt (pip install cvxopt); or use 'auto'")
        return SchurSolver()
    if kind == "auto" and arch == "cpu" and SCHUR_MIN_DOFS <= n_dofs <= DIRECT_MAX_DOFS and cholmod_available():
        return SchurSolver()
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
        x = np.zeros(len(v))
        x[:ni] = -g[inner]
        _forward(s._indptr, s._indices, s._data, x, ni)
        self.y0, self.u0 = x[:ni].copy(), x[ni:].copy()          # y₀ and −L_ci y₀
        self.Y = float(self.y0 @ self.y0)
        Dg, Db = D[inner] * g[inner], D[inner] * bt[inner]
        self.gg, self.gb, self.bb = float(Dg @ Dg), float(Dg @ Db), float(Db @ Db)
        self.Dc, self.bc, self.rc = D[cdof], bt[cdof], r[cdof]
        self.quadratic = float(0.5 * v @ Av - bt @ v)
        self.vc0 = J.matvec(v).reshape(-1, 3) + off               # prescribed nodes' part stays in here
        self.rho, self.sigma = 1.0, 0.0
        self.zeta = np.zeros(len(cdof))                           # v_c − v_c⁰

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
        """v after the steps taken: the interior by one backward sweep."""
        s, ni = self.s, self.s._ni
        x = np.empty(len(self.v0))
        x[:ni] = self.sigma * self.y0
        x[ni:] = self.zeta
        _backward(s._indptr, s._indices, s._data, x, ni)
        dv = np.empty_like(x)
        dv[s._perm] = x
        return self.v0 + dv

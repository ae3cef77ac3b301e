"""Truncated nonsmooth multigrid for COND's FEM rows (issue 32 item 4; Gräser & Kornhuber's TNNMG),
host prototype in numpy/scipy: the hierarchy built from the mesh once, the cycle on one step's
captured problem (``HostStep``). docs/COND.md, "Multilevel correction", has the measurements.

One cycle from v̂:

    smoother    ν times: v* = v̂ − W(A v̂ − b);  λ = ProjectFC(−y(v*)/γ);  v̂ ← v* + W Jᵀλ
                (COND Alg. 1-2, eq. 18, 22, 23, W COND's scalar Frobenius step)
    truncation  per contact node in its frame: stick (λ_n > 0, tangent not clipped) all three
                directions, slide the normal, open (λ_n = 0) none; prescribed nodes all
    correction  c ≈ (T A T)⁻¹ T r,  r = b + Jᵀλ − A v̂: a V-cycle over the smoothed-aggregation
                levels (block-free damped Jacobi there, exact on the coarsest) below the fine
                level (``coarse`` "vcycle"; "exact": the first coarse level solved exactly), or from
                the fine level with ``fine_sweeps`` Chebyshev sweeps there
    projection  c's normal part on open contacts limited so none closes past its gap (y_n ≥ 0)
    line search α = cᵀr / cᵀAc in [0, 1] (the quadratic with λ frozen), or (``line_search="tresca"``)
                the minimizer over [0, 1] of the Tresca energy ½vᵀAv − bᵀv + Σ μ λ_n ‖y_t‖ with λ_n
                frozen at the smoother's (convex in α); v̂ ← v̂ + α c

Hierarchy (``Hierarchy``): nodes aggregated by axis-aligned boxes (per-axis sizes: the mat's
first level is its columns through the thickness), tentative prolongation from the rigid modes
(``rotations``) or the translations, SA-smoothed per step on the truncated operator.

The contacts are node-against-obstacle (``HostStep``): y_m = R_m (v_node − v_world) + bias_m, with
the normal target in bias_m[2] (φ̃); the strict projection (eq. 23) makes the fixed point Coulomb's
law whatever γ > 0, so the correction does not change what is solved.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ... import backend
from ...backend import ti
from ..projection import STRICT, project_batch
from .layout import CONTACT, CONTACT_NODES

STICK, SLIDE, OPEN = 0, 1, 2
COARSEST = 40            # nodes (or coarse points) at which the hierarchy stops: solved exactly
JACOBI_OMEGA = 0.6       # damping of the (point) Jacobi smoothing on the coarse levels of the V-cycle
CHEB_RATIO = 30.0        # the fine-level Chebyshev smoother's interval [λ_max/CHEB_RATIO, λ_max]


@dataclass
class HostStep:
    """One step's ``A v̂ = b + Jᵀλ`` with node-against-obstacle contacts, as numpy (n nodes, c contacts)."""

    A: sp.csr_matrix
    b: np.ndarray           # (3n,)
    fixed: np.ndarray       # (n,) bool: prescribed nodes
    v0: np.ndarray          # (n, 3) warm start
    node: np.ndarray        # (c,) the contact's node
    R: np.ndarray           # (c, 3, 3) rows t1, t2, n
    mu: np.ndarray          # (c, 2)
    bias: np.ndarray        # (c, 3): tangential bias, φ̃
    v_world: np.ndarray     # (c, 3)
    W: np.ndarray           # (n,) COND's scalar step
    em: Callable            # (v (n, 3), λ (c, 3)) -> SAP eq. 32 e_m

    @classmethod
    def from_cond(cls, solver, hp, v0: np.ndarray) -> "HostStep":
        """The step a ``CondSolver`` has just set up (its contact tables and scalar W), with the
        ``HostContactProblem`` hp read before the solve and the warm start v0 (n, 3)."""
        nc, n = hp.c, hp.n
        cf = CONTACT.unpack(solver._Cf.to_numpy()[:nc].astype(np.float64))
        ci = CONTACT_NODES.unpack(solver._Ci.to_numpy()[:nc])["node"].reshape(nc, 2)
        if (ci[:, 0] >= 0).any() or solver._last_nv or (ci[:, 1] >= n).any():
            raise ValueError("multigrid prototype: node-against-obstacle contacts only (no virtual nodes)")
        return cls(A=hp.a_scipy(), b=hp.b.copy(), fixed=hp.fixed.copy(), v0=np.asarray(v0, np.float64).reshape(n, 3),
                   node=ci[:, 1].copy(), R=cf["frame"][:, 0], mu=cf["mu"].copy(),
                   bias=np.column_stack([cf["bias"][:, 0], cf["bias"][:, 1], cf["phi_tilde"][:, 0]]),
                   v_world=cf["v_world"][:, 0], W=solver._W.to_numpy()[:n].astype(np.float64),
                   em=lambda v, lam: hp.momentum_error(v, hp.s * lam))


def aggregate_boxes(X: np.ndarray, h: "float | np.ndarray") -> np.ndarray:
    """Geometric aggregation: the points in each box of an axis-aligned grid of spacing ``h`` (from the
    points' lower corner; a scalar or one per axis) form an aggregate. Returns (n,) aggregate ids, numbered 0..k-1."""
    key = np.floor((X - X.min(axis=0)) / h + 1e-9).astype(np.int64)
    _, agg = np.unique(key, axis=0, return_inverse=True)
    return agg.ravel()


def rigid_modes(X: np.ndarray) -> np.ndarray:
    """(3n, 6) the rigid motions of points X (n, 3): three translations, three rotations about the centroid."""
    x = X - X.mean(axis=0)
    B = np.zeros((3 * len(X), 6))
    for k in range(3):
        B[k::3, k] = 1.0
    B[0::3, 3], B[1::3, 3] = -x[:, 1], x[:, 0]        # e_z × x
    B[1::3, 4], B[2::3, 4] = -x[:, 2], x[:, 1]        # e_x × x
    B[2::3, 5], B[0::3, 5] = -x[:, 0], x[:, 2]        # e_y × x
    return B


def tentative(agg: np.ndarray, B: np.ndarray, bs: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Smoothed-aggregation tentative prolongation: per aggregate the orthonormal basis of the
    near-null space ``B`` ((n·bs, k): rigid modes, or the coarse modes of the level above) restricted
    to its unknowns (bs per point). Each coarse point carries k unknowns; an aggregate too small for
    all k modes (a line of points cannot rotate about itself) gets zero columns for the missing
    ones. Returns (P₀ (n·bs, na·k), the coarse modes (na·k, k))."""
    na, k = int(agg.max()) + 1, B.shape[1]
    order = np.argsort(agg, kind="stable")
    starts = np.searchsorted(agg[order], np.arange(na + 1))
    rows, cols, vals = [], [], []
    Bc = np.zeros((na * k, k))
    for a in range(na):
        pts = order[starts[a]:starts[a + 1]]
        dof = (bs * pts[:, None] + np.arange(bs)[None, :]).ravel()
        U, S, Vt = np.linalg.svd(B[dof], full_matrices=False)
        r = int((S > 1e-8 * max(S[0], 1e-300)).sum())
        rr, cc = np.meshgrid(dof, k * a + np.arange(r), indexing="ij")
        rows.append(rr.ravel()), cols.append(cc.ravel()), vals.append(U[:, :r].ravel())
        Bc[k * a:k * a + r] = S[:r, None] * Vt[:r]
    P0 = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(agg) * bs, na * k))
    return P0, Bc


class Hierarchy:
    """Aggregates of the mesh's nodes, level by level (built once from the tets), and the tentative
    prolongations P₀ of 3-vectors between them."""

    def __init__(self, n: int, edges: np.ndarray, X: np.ndarray, rotations: bool = False,
                 box: "float | np.ndarray" = 2.0, spacing: str = "shortest"):
        self.aggs, self.P0 = [], []
        self.rotations = rotations
        size = n
        h = box * _edge_length(X, edges, spacing)
        Xl = X
        while size > COARSEST:
            agg = aggregate_boxes(Xl, h)
            if agg.max() + 1 >= size:
                break
            self.aggs.append(agg)
            size = int(agg.max()) + 1
            Xl = np.array([Xl[agg == a].mean(axis=0) for a in range(size)])
            h *= 2.0
        # P₀ per level from the near-null space: the rigid modes (or the three translations alone)
        B, bs = rigid_modes(X), 3
        if not rotations:
            B = B[:, :3]
        for agg in self.aggs:
            P0, B = tentative(agg, B, bs)
            self.P0.append(P0)
            bs = B.shape[1]

    @classmethod
    def from_model(cls, model, **options) -> "Hierarchy":
        tets = np.asarray(model.tets_np)
        pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
        e = np.sort(tets[:, pairs].reshape(-1, 2), axis=1)
        return cls(int(model.n_nodes), np.unique(e, axis=0), np.asarray(model.rest_positions), **options)

    def sizes(self) -> list[int]:
        return [p.shape[0] for p in self.P0] + ([self.P0[-1].shape[1]] if self.P0 else [])


class Cycle:
    """The cycle on one ``HostStep`` (module docstring)."""

    def __init__(self, step: HostStep, hier: Hierarchy, coarse: str, smooth_p: bool, nu: int, line_search: bool,
                 vsweeps: int = 2, fine_sweeps: int = 0, project: bool = True):
        self.fine_sweeps, self.project = fine_sweeps, project
        self.s, self.h = step, hier
        self.coarse, self.smooth_p, self.nu, self.line_search, self.vsweeps = coarse, smooth_p, nu, line_search, vsweeps
        n = len(step.W)
        self.n = n
        self.w3 = np.repeat(np.where(step.fixed, 0.0, step.W), 3)
        self.matvecs = 0.0
        self.nnz = step.A.nnz
        self.free = np.repeat(~step.fixed, 3).astype(float)

    def av(self, x):
        self.matvecs += 1
        return self.s.A @ x

    def smoother(self, v):
        s = self.s
        g = self.av(v) - s.b
        vs = v - self.w3 * g
        V = vs.reshape(-1, 3)
        y = np.einsum("cij,cj->ci", s.R, V[s.node] - s.v_world) + s.bias
        gam = s.W[s.node]
        lam, self.clipped = _project(-y / gam[:, None], s.mu)
        f = np.einsum("cij,ci->cj", s.R, lam)            # Rᵀλ
        np.add.at(V, s.node, gam[:, None] * f)
        return vs, lam

    def states(self, lam):
        """Per contact STICK, SLIDE (the projection clipped the tangent) or OPEN (λ_n = 0)."""
        st = np.where(self.clipped, SLIDE, STICK)
        st[lam[:, 2] <= 0.0] = OPEN
        return st

    def truncation(self, st) -> sp.csr_matrix:
        s, n = self.s, self.n
        T = np.tile(np.eye(3), (n, 1, 1))
        T[s.fixed] = 0.0
        for m in np.flatnonzero(st != OPEN):
            i = s.node[m]
            if st[m] == STICK:
                T[i] = 0.0
            else:
                nrm = s.R[m, 2]
                T[i] = T[i] - np.outer(nrm, nrm) @ T[i]
        return _block_diag(T)

    def correction(self, v, lam, st):
        s = self.s
        Jt = np.zeros((self.n, 3))
        np.add.at(Jt, s.node, np.einsum("cij,ci->cj", s.R, lam))
        self._lam, self._jt = lam, Jt.ravel()
        r = s.b + Jt.ravel() - self.av(v)
        r *= self.free
        T = self.truncation(st)
        AT = (T @ s.A @ T).tocsr()
        Tr = T @ r
        if self.coarse == "direct":           # the truncated fine system solved exactly (diagnosis)
            return self._apply(v, T @ _solve(AT, Tr), r, st)
        if self.fine_sweeps:                  # a V-cycle from the fine level, Chebyshev-smoothed there
            return self._apply(v, T @ self.vcycle(AT, Tr, 0, T), r, st)
        P = self.h.P0[0]
        if self.smooth_p:
            d = AT.diagonal()
            dinv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
            lmax = _lambda_max(AT, dinv)
            P = P - (4.0 / 3.0 / lmax) * (sp.diags(dinv) @ (AT @ P))
        P = (T @ P).tocsr()
        A1 = (P.T @ AT @ P).tocsr()
        r1 = P.T @ Tr
        if self.coarse == "exact":
            x1 = _solve(A1, r1)
        else:
            x1 = self.vcycle(A1, r1, 1)
        self.matvecs += 2 * P.nnz / self.nnz          # restriction and prolongation
        return self._apply(v, P @ x1, r, st)

    def _apply(self, v, c, r, st):
        """v + α c: c projected so that no open contact closes faster than its gap allows (y_n ≥ 0, or
        no further in where it already is below), then α = cᵀr / cᵀAc in [0, 1] (the quadratic with λ
        frozen)."""
        s = self.s
        if self.project:
            C, V = c.reshape(-1, 3), v.reshape(-1, 3)
            yn = np.einsum("ci,ci->c", s.R[:, 2], V[s.node] - s.v_world) + s.bias[:, 2]
            cn = np.einsum("ci,ci->c", s.R[:, 2], C[s.node])
            lo = np.minimum(-yn, 0.0)
            fix = (st == OPEN) & (cn < lo)
            C[s.node[fix]] += (lo - cn)[fix, None] * s.R[fix, 2]
        if self.line_search == "tresca":
            Ac = self.av(c)
            alpha = self._tresca_step(v, c, r, float(c @ Ac))
        elif self.line_search:
            Ac = self.av(c)
            cAc = float(c @ Ac)
            alpha = min(max(float(c @ r) / cAc, 0.0), 1.0) if cAc > 0 else 0.0
        else:
            alpha = 1.0
        return v + alpha * c, alpha

    def _tresca_step(self, v, c, r, cAc: float) -> float:
        """argmin over α ∈ [0, 1] of the Tresca energy ``½vᵀAv − bᵀv + Σ μ λ_n ‖y_t(v)‖`` along c (λ_n
        frozen at the smoother's; convex in α, its derivative's root by bisection). ``Av − b = Jᵀλ − r``."""
        s = self.s
        C, V = c.reshape(-1, 3), v.reshape(-1, 3)
        yt = np.einsum("cij,cj->ci", s.R[:, :2], V[s.node] - s.v_world) + s.bias[:, :2]
        ct = np.einsum("cij,cj->ci", s.R[:, :2], C[s.node])
        g = s.mu[:, 0] * np.maximum(self._lam[:, 2], 0.0)
        q1 = float(c @ self._jt) - float(c @ r)

        def slope(a):
            z = yt + a * ct
            nz = np.linalg.norm(z, axis=1)
            return a * cAc + q1 + float((g * np.einsum("ci,ci->c", z, ct) / np.maximum(nz, 1e-300)).sum())

        if slope(0.0) >= 0.0:
            return 0.0
        if slope(1.0) <= 0.0:
            return 1.0
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if slope(mid) < 0.0 else (lo, mid)
        return 0.5 * (lo + hi)

    def vcycle(self, A, r, level, T=None):
        """One V-cycle on ``A x = r`` from ``level`` (damped Jacobi, or on the fine level Chebyshev of
        degree ``fine_sweeps``); matvecs counted in fine-level units (nnz)."""
        if level >= len(self.h.P0) or A.shape[0] <= 3 * COARSEST:
            return _solve(A, r)
        d = A.diagonal()
        dinv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
        lmax = _lambda_max(A, dinv)
        fine = level == 0
        sweeps = self.fine_sweeps if fine else self.vsweeps
        x = np.zeros_like(r)
        x = self._smooth(A, dinv, r, x, sweeps, lmax, fine)
        P = self.h.P0[level]
        if self.smooth_p:
            P = (P - (4.0 / 3.0 / lmax) * (sp.diags(dinv) @ (A @ P))).tocsr()
        if T is not None:
            P = (T @ P).tocsr()
        Ac = (P.T @ A @ P).tocsr()
        x += P @ self.vcycle(Ac, P.T @ (r - A @ x), level + 1)
        x = self._smooth(A, dinv, r, x, sweeps, lmax, fine)
        self.matvecs += ((2 * sweeps + 1) * A.nnz + 2 * P.nnz) / self.nnz
        return x

    @staticmethod
    def _smooth(A, dinv, r, x, sweeps, lmax, chebyshev):
        """``sweeps`` damped-Jacobi steps, or Chebyshev of that degree on [lmax/CHEB_RATIO, 1.1 lmax] (Saad Alg. 12.1)."""
        if not chebyshev:
            for _ in range(sweeps):
                x = x + JACOBI_OMEGA * dinv * (r - A @ x)
            return x
        b = 1.1 * lmax
        a = b / CHEB_RATIO
        theta, delta = 0.5 * (b + a), 0.5 * (b - a)
        res = r - A @ x
        p = dinv * res / theta
        rho = delta / theta
        x = x + p
        for _ in range(sweeps - 1):
            res = res - A @ p
            rho_new = 1.0 / (2.0 * theta / delta - rho)
            p = rho_new * rho * p + (2.0 * rho_new / delta) * dinv * res
            x = x + p
            rho = rho_new
        return x


def _edge_length(X, edges, spacing) -> "float | np.ndarray":
    """The mesh spacing h: the median over nodes of the node's shortest edge ("shortest") or the
    median edge ("median")."""
    L = np.linalg.norm(X[edges[:, 0]] - X[edges[:, 1]], axis=1)
    if spacing == "median":
        return float(np.median(L))
    if spacing == "axes":         # per axis: the median length of the edges along that axis (mostly)
        d = np.abs(X[edges[:, 0]] - X[edges[:, 1]])
        ax = d.argmax(axis=1)
        return np.array([np.median(d[ax == k, k]) if (ax == k).any() else np.median(L) for k in range(3)])
    m = np.full(len(X), np.inf)
    np.minimum.at(m, edges[:, 0], L)
    np.minimum.at(m, edges[:, 1], L)
    return float(np.median(m[np.isfinite(m)]))


def _project(ls: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """COND eq. 23 (strict) per row of ls (c, 3) with μ (c, 2), by the solver's own projection kernel;
    returns λ and whether the tangent was clipped."""
    c = len(ls)
    out, clipped = backend.vec3_array(c), backend.scalar_array(c, dtype=ti.i32)
    mu_arr = ti.Vector.ndarray(2, float, shape=c)
    mu_arr.from_numpy(mu.astype(backend.np_real()))
    project_batch(backend.vec3_array(c, ls), mu_arr, STRICT, out, clipped)
    return out.to_numpy().astype(np.float64), clipped.to_numpy() != 0


def _block_diag(T: np.ndarray) -> sp.csr_matrix:
    n = len(T)
    rows = np.repeat(np.arange(3 * n), 3)
    cols = (3 * np.arange(n)[:, None, None] + np.zeros((1, 3, 1), int) + np.arange(3)[None, None, :]).ravel()
    return sp.csr_matrix((T.ravel(), (rows, cols)), shape=(3 * n, 3 * n))


def _lambda_max(A, dinv, steps: int = 12) -> float:
    x = np.random.default_rng(0).standard_normal(A.shape[0]) * (dinv > 0)
    lam = 1.0
    for _ in range(steps):
        y = dinv * (A @ x)
        lam = float(np.linalg.norm(y)) / max(float(np.linalg.norm(x)), 1e-300)
        x = y / max(np.linalg.norm(y), 1e-300)
    return max(lam, 1e-300)


def _solve(A, r):
    """Exact solve of a (possibly singular: truncated rows) coarse system: zero rows/columns dropped."""
    d = np.abs(A).sum(axis=1).A1 if sp.issparse(A) else np.abs(A).sum(axis=1)
    keep = d > 1e-14 * max(d.max(), 1e-300)
    x = np.zeros_like(r)
    if keep.any():
        Ak = A[keep][:, keep]
        x[keep] = spla.spsolve(Ak.tocsc(), r[keep]) if sp.issparse(Ak) else np.linalg.solve(Ak, r[keep])
    return x


VARIANTS = {
    "smoother": {"coarse": None},
    "direct": {"coarse": "direct"},
    "twolevel": {"coarse": "exact", "smooth_p": False},
    "twolevel_sa": {"coarse": "exact", "smooth_p": True},
    "vcycle": {"coarse": "vcycle", "smooth_p": False},
    "vcycle_sa": {"coarse": "vcycle", "smooth_p": True},
    "twolevel_sa2": {"coarse": "exact", "smooth_p": True, "nu": 2},
    "vcycle_sa2": {"coarse": "vcycle", "smooth_p": True, "nu": 2},
    "fine2": {"coarse": "vcycle", "smooth_p": True, "fine_sweeps": 2},
    "fine4": {"coarse": "vcycle", "smooth_p": True, "fine_sweeps": 4},
    "fine8": {"coarse": "vcycle", "smooth_p": True, "fine_sweeps": 8},
    "direct_tresca": {"coarse": "direct", "line_search": "tresca"},
    "vcycle_sa2_tresca": {"coarse": "vcycle", "smooth_p": True, "nu": 2, "line_search": "tresca"},
    "fine4_tresca": {"coarse": "vcycle", "smooth_p": True, "fine_sweeps": 4, "line_search": "tresca"},
    "fine4_tresca_pc": {"coarse": "vcycle", "smooth_p": False, "fine_sweeps": 4, "line_search": "tresca"},
}


def solve(step: HostStep, hier: Hierarchy, tol: float = 1e-4, max_cycles: int = 300, coarse: str | None = "exact",
          smooth_p: bool = False, nu: int = 1, line_search: "bool | str" = True, answer: bool = False,
          fine_sweeps: int = 0, project: bool = True) -> dict:
    """Cycles from ``step.v0`` until e_m ≤ tol after a smoother (at most ``max_cycles``). Returns the
    cycles, the last e_m, the fine matvecs per cycle (coarse work in fine-matvec units) and the
    stick/slide/open counts at the end."""
    cyc = Cycle(step, hier, coarse or "exact", smooth_p, nu, line_search, fine_sweeps=fine_sweeps,
                project=project)
    v = step.v0.ravel().copy()
    fixed = np.repeat(step.fixed, 3)
    v[fixed] = _prescribed(step)[fixed]
    e_m, k, st = np.inf, 0, None
    alphas, history = [], []
    for k in range(1, max_cycles + 1):
        for _ in range(nu):
            v, lam = cyc.smoother(v)
        e_m = step.em(v.reshape(-1, 3), lam)
        history.append(e_m)
        st = cyc.states(lam)
        if e_m <= tol or not np.isfinite(e_m):
            break
        if coarse is not None and hier.P0:
            v, a = cyc.correction(v, lam, st)
            alphas.append(a)
    counts = tuple(int((st == s).sum()) for s in (STICK, SLIDE, OPEN))
    out = {"cycles": k, "e_m": e_m, "matvecs": cyc.matvecs / max(k, 1), "states": counts,
           "alpha": float(np.median(alphas)) if alphas else 1.0, "history": history,
           "kappa_eff": kappa_eff(history)}
    if answer:
        out.update(v=v, lam=lam)
    return out


def kappa_eff(history: list) -> float:
    """The condition number a Krylov-optimal method would need for the mean rate ρ of ``history``
    (e_m after each cycle, from the first): √κ = (1 + ρ)/(1 − ρ)."""
    if len(history) < 2 or not history[-1] > 0 or not history[0] > history[-1]:
        return float("inf")
    rho = (history[-1] / history[0]) ** (1.0 / (len(history) - 1))
    return ((1.0 + rho) / (1.0 - rho)) ** 2


def _prescribed(step: HostStep) -> np.ndarray:
    """v̂ with the prescribed nodes at A_ii⁻¹ b_i (their rows are decoupled)."""
    n = len(step.W)
    v = step.v0.ravel().copy()
    A = step.A
    for i in np.flatnonzero(step.fixed):
        sl = slice(3 * i, 3 * i + 3)
        v[sl] = np.linalg.solve(A[sl, sl].toarray(), step.b[sl])
    return v

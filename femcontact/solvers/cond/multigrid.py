"""Truncated nonsmooth multigrid for COND's FEM rows (issue 32 item 4; Gräser & Kornhuber's TNNMG),
host prototype in numpy/scipy: the hierarchy built from the mesh once, the cycle on one step's
captured problem (``HostStep``). docs/COND.md, "Multilevel correction", has the measurements.

One cycle from v̂:

    smoother    v* = v̂ − W(A v̂ − b);  λ = ProjectFC(−y(v*)/γ);  v̂** = v* + W Jᵀλ   (COND Alg. 1-2, eq. 18, 22, 23)
    truncation  per contact node in its frame: stick (|λ_t| < μλ_n) all three directions, slide the
                normal, open (λ_n = 0) none; prescribed nodes all (T_i = 0 there, I elsewhere)
    correction  c = T P₁ x₁,  x₁ ≈ (P₁ᵀ T A T P₁)⁻¹ P₁ᵀ T r,  r = b + Jᵀλ − A v̂**
                (exact, or a V-cycle over the coarser levels with block-Jacobi smoothing)
    line search α = cᵀr / cᵀAc (the quadratic energy with λ frozen: c never moves a truncated
                direction, so the contact's convex energy is the quadratic there); v̂ ← v̂** + α c

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

from .layout import CONTACT, CONTACT_NODES

STICK, SLIDE, OPEN = 0, 1, 2
COARSEST = 40            # nodes (or coarse points) at which the hierarchy stops: solved exactly
JACOBI_OMEGA = 0.6       # damping of the block-Jacobi smoothing inside the V-cycle and of the SA prolongator
SLIDE_TOL = 1e-9         # |λ_t| ≥ (1 − SLIDE_TOL) μ λ_n counts as sliding


@dataclass
class HostStep:
    """One step's ``A v̂ = b + Jᵀλ`` with node-against-obstacle contacts, as numpy (n nodes, c contacts)."""

    A: sp.csr_matrix
    b: np.ndarray           # (3n,)
    fixed: np.ndarray       # (n,) bool: prescribed nodes
    v0: np.ndarray          # (n, 3) warm start
    node: np.ndarray        # (c,) the contact's node
    R: np.ndarray           # (c, 3, 3) rows t1, t2, n
    mu: np.ndarray          # (c,)
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
                   node=ci[:, 1].copy(), R=cf["frame"][:, 0], mu=cf["mu"][:, 0].copy(),
                   bias=np.column_stack([cf["bias"][:, 0], cf["bias"][:, 1], cf["phi_tilde"][:, 0]]),
                   v_world=cf["v_world"][:, 0], W=solver._W.to_numpy()[:n].astype(np.float64),
                   em=lambda v, lam: hp.momentum_error(v, hp.s * lam))


def aggregate(n: int, edges: np.ndarray) -> np.ndarray:
    """Greedy aggregation of a graph (n vertices, (k, 2) edges): roots whose neighbours are all free
    take them (phase 1), the rest join a neighbouring aggregate (phase 2). Returns (n,) aggregate ids."""
    adj = sp.csr_matrix((np.ones(2 * len(edges)), (np.r_[edges[:, 0], edges[:, 1]], np.r_[edges[:, 1], edges[:, 0]])),
                        shape=(n, n))
    ptr, idx = adj.indptr, adj.indices
    agg = np.full(n, -1)
    count = 0
    for i in range(n):
        nb = idx[ptr[i]:ptr[i + 1]]
        if agg[i] < 0 and (agg[nb] < 0).all():
            agg[i] = count
            agg[nb] = count
            count += 1
    for i in np.flatnonzero(agg < 0):
        nb = idx[ptr[i]:ptr[i + 1]]
        taken = nb[agg[nb] >= 0]
        if len(taken):
            agg[i] = agg[taken[0]]
        else:
            agg[i] = count
            count += 1
    return agg


def aggregate_boxes(X: np.ndarray, h: float) -> np.ndarray:
    """Geometric aggregation: the points in each box of an axis-aligned grid of spacing ``h`` (from the
    points' lower corner) form an aggregate. Returns (n,) aggregate ids, numbered 0..k-1."""
    key = np.floor((X - X.min(axis=0)) / h + 1e-9).astype(np.int64)
    _, agg = np.unique(key, axis=0, return_inverse=True)
    return agg.ravel()


def coarse_edges(agg: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The aggregates' graph: an edge where two aggregates share a fine edge."""
    e = agg[edges]
    e = e[e[:, 0] != e[:, 1]]
    e = np.sort(e, axis=1)
    return np.unique(e, axis=0) if len(e) else np.zeros((0, 2), int)


def tentative(agg: np.ndarray, X: np.ndarray | None, rotations: bool) -> tuple[sp.csr_matrix, np.ndarray | None]:
    """Piecewise-constant prolongation of 3-vectors from aggregates (3 translations per aggregate), or
    with ``rotations`` the rigid modes (3 translations, 3 rotations about the aggregate's centroid,
    orthonormalized per aggregate, rank-revealing: an aggregate too small for a mode drops it).
    Returns (P₀, the coarse points' positions or None)."""
    n, na = len(agg), int(agg.max()) + 1
    if not rotations:
        rows = np.arange(3 * n)
        cols = (3 * agg[:, None] + np.arange(3)[None, :]).ravel()
        return sp.csr_matrix((np.ones(3 * n), (rows, cols)), shape=(3 * n, 3 * na)), None
    rows, cols, vals = [], [], []
    col = 0
    for a in range(na):
        nodes = np.flatnonzero(agg == a)
        x = X[nodes] - X[nodes].mean(axis=0)
        B = np.zeros((3 * len(nodes), 6))
        for k in range(3):
            B[k::3, k] = 1.0
        B[0::3, 3], B[1::3, 3] = -x[:, 1], x[:, 0]        # rotations e_z × x, e_x × x, e_y × x
        B[1::3, 4], B[2::3, 4] = -x[:, 2], x[:, 1]
        B[2::3, 5], B[0::3, 5] = -x[:, 0], x[:, 2]
        Q, Rr = np.linalg.qr(B)
        keep = np.abs(np.diag(Rr)) > 1e-8 * max(np.abs(np.diag(Rr)).max(), 1e-300)
        Q = Q[:, keep]
        dof = (3 * nodes[:, None] + np.arange(3)[None, :]).ravel()
        r, c = np.meshgrid(dof, col + np.arange(Q.shape[1]), indexing="ij")
        rows.append(r.ravel()), cols.append(c.ravel()), vals.append(Q.ravel())
        col += Q.shape[1]
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(3 * n, col)), None


class Hierarchy:
    """Aggregates of the mesh's nodes, level by level (built once from the tets), and the tentative
    prolongations P₀ of 3-vectors between them."""

    def __init__(self, n: int, edges: np.ndarray, X: np.ndarray, rotations: bool = False, boxes: bool = True,
                 box: float = 2.0, spacing: str = "shortest"):
        self.aggs, self.P0 = [], []
        self.rotations = rotations
        size = n
        h = box * _edge_length(X, edges, spacing)
        Xl = X
        while size > COARSEST:
            agg = aggregate_boxes(Xl, h) if boxes else aggregate(size, edges)
            if agg.max() + 1 >= size:
                break
            self.aggs.append(agg)
            edges = coarse_edges(agg, edges)
            size = int(agg.max()) + 1
            Xl = np.array([Xl[agg == a].mean(axis=0) for a in range(size)])
            h *= 2.0
        # P₀ per level: rigid modes only on the first (its coarse points carry 6 unknowns; deeper levels
        # aggregate those coarse points with piecewise constants in each of their unknowns)
        self.P0 = [tentative(self.aggs[0], X, rotations)[0]] if self.aggs else []
        width = 6 if rotations else 3
        for agg in self.aggs[1:]:
            m, na = len(agg), int(agg.max()) + 1
            rows = np.arange(width * m)
            cols = (width * agg[:, None] + np.arange(width)[None, :]).ravel()
            self.P0.append(sp.csr_matrix((np.ones(width * m), (rows, cols)), shape=(width * m, width * na)))
        if rotations and self.aggs:          # the first level's dropped modes: keep the deeper P₀ consistent
            ncol = self.P0[0].shape[1]
            if len(self.P0) > 1 and ncol != self.P0[1].shape[0]:
                self.P0 = self.P0[:1]
                self.aggs = self.aggs[:1]

    @classmethod
    def from_model(cls, model, **options) -> "Hierarchy":
        tets = np.asarray(model.tets_np)
        pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
        e = np.sort(tets[:, pairs].reshape(-1, 2), axis=1)
        return cls(int(model.n_nodes), np.unique(e, axis=0), np.asarray(model.rest_positions), **options)

    def sizes(self) -> list[int]:
        return [p.shape[0] for p in self.P0] + ([self.P0[-1].shape[1]] if self.P0 else [])


def _project_strict(ls: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """COND eq. 23 (strict), isotropic μ, per row of ls (c, 3)."""
    lam = ls.copy()
    lam[:, 2] = np.maximum(ls[:, 2], 0.0)
    nt = np.linalg.norm(ls[:, :2], axis=1)
    r = mu * lam[:, 2]
    s = np.where(nt > r, r / np.maximum(nt, 1e-300), 1.0)
    lam[:, :2] *= s[:, None]
    return lam


class Cycle:
    """The cycle on one ``HostStep`` (module docstring)."""

    def __init__(self, step: HostStep, hier: Hierarchy, coarse: str, smooth_p: bool, nu: int, line_search: bool,
                 vsweeps: int = 2):
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
        lam = _project_strict(-y / gam[:, None], s.mu)
        f = np.einsum("cij,ci->cj", s.R, lam)            # Rᵀλ
        np.add.at(V, s.node, gam[:, None] * f)
        return vs, lam

    def states(self, lam):
        st = np.full(len(lam), OPEN)
        on = lam[:, 2] > 0.0
        slide = np.linalg.norm(lam[:, :2], axis=1) >= (1.0 - SLIDE_TOL) * self.s.mu * lam[:, 2]
        st[on] = np.where(slide[on], SLIDE, STICK)
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
        r = s.b + Jt.ravel() - self.av(v)
        r *= self.free
        T = self.truncation(st)
        AT = (T @ s.A @ T).tocsr()
        Tr = T @ r
        if self.coarse == "direct":           # the truncated fine system solved exactly (diagnosis)
            return self._apply(v, T @ _solve(AT, Tr), r)
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
            self.matvecs += 2 * self.vsweeps * A1.nnz / self.nnz
        return self._apply(v, P @ x1, r)

    def _apply(self, v, c, r):
        if self.line_search:
            Ac = self.av(c)
            cAc = float(c @ Ac)
            alpha = float(c @ r) / cAc if cAc > 0 else 0.0
        else:
            alpha = 1.0
        return v + alpha * c, alpha

    def vcycle(self, A, r, level):
        if level >= len(self.h.P0) or A.shape[0] <= 3 * COARSEST:
            return _solve(A, r)
        d = A.diagonal()
        dinv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
        omega = JACOBI_OMEGA
        x = np.zeros_like(r)
        for _ in range(self.vsweeps):
            x += omega * dinv * (r - A @ x)
        P = self.h.P0[level]
        if self.smooth_p:
            lmax = _lambda_max(A, dinv)
            P = (P - (4.0 / 3.0 / lmax) * (sp.diags(dinv) @ (A @ P))).tocsr()
        Ac = (P.T @ A @ P).tocsr()
        x += P @ self.vcycle(Ac, P.T @ (r - A @ x), level + 1)
        self.matvecs += 2 * self.vsweeps * Ac.nnz / self.nnz
        for _ in range(self.vsweeps):
            x += omega * dinv * (r - A @ x)
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
}


def solve(step: HostStep, hier: Hierarchy, tol: float = 1e-4, max_cycles: int = 300, coarse: str | None = "exact",
          smooth_p: bool = False, nu: int = 1, line_search: bool = True, answer: bool = False) -> dict:
    """Cycles from ``step.v0`` until e_m ≤ tol after a smoother (at most ``max_cycles``). Returns the
    cycles, the last e_m, the fine matvecs per cycle (coarse work in fine-matvec units) and the
    stick/slide/open counts at the end."""
    cyc = Cycle(step, hier, coarse or "exact", smooth_p, nu, line_search)
    v = step.v0.ravel().copy()
    fixed = np.repeat(step.fixed, 3)
    v[fixed] = _prescribed(step)[fixed]
    e_m, k, st = np.inf, 0, None
    alphas = []
    for k in range(1, max_cycles + 1):
        for _ in range(nu):
            v, lam = cyc.smoother(v)
        e_m = step.em(v.reshape(-1, 3), lam)
        st = cyc.states(lam)
        if e_m <= tol or not np.isfinite(e_m):
            break
        if coarse is not None and hier.P0:
            v, a = cyc.correction(v, lam, st)
            alphas.append(a)
    counts = tuple(int((st == s).sum()) for s in (STICK, SLIDE, OPEN))
    out = {"cycles": k, "e_m": e_m, "matvecs": cyc.matvecs / max(k, 1), "states": counts,
           "alpha": float(np.median(alphas)) if alphas else 1.0}
    if answer:
        out.update(v=v, lam=lam)
    return out


def _prescribed(step: HostStep) -> np.ndarray:
    """v̂ with the prescribed nodes at A_ii⁻¹ b_i (their rows are decoupled)."""
    n = len(step.W)
    v = step.v0.ravel().copy()
    A = step.A
    for i in np.flatnonzero(step.fixed):
        sl = slice(3 * i, 3 * i + 3)
        v[sl] = np.linalg.solve(A[sl, sl].toarray(), step.b[sl])
    return v

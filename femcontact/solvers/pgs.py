"""NCP projected Gauss–Seidel (``solver="pgs"``): the baseline of COND §V-D/E, Table I.

The step system ``A v̂ = b + Jᵀλ`` is reduced to contact space, ``u(λ) = G λ + q`` with the dense
Delassus operator ``G = J_f A⁻¹ J_fᵀ`` from a sparse direct factorization of A and COND's normal
targets and midpoint bias in q (``delassus.py``, shared with ``incp.py``). The NCP per contact m
(strict Coulomb cone, ellipsoidal when μ1 ≠ μ2 on the frame's axes t1, t2):

    λ_n ≥ 0 ⊥ u_n ≥ 0,   (λ_1/μ1)² + (λ_2/μ2)² ≤ λ_n²,   λ_t maximizes −u_t·λ_t on that ellipse.

Projected Gauss–Seidel sweeps the contacts in order; each visit solves the contact's 3×3 problem
``u_m = G_mm λ_m + r_m`` (r_m: q_m plus the other contacts' current impulses) exactly
(``local_solve``): take-off (λ = 0 if r_n ≥ 0), else stick (λ = −G_mm⁻¹ r if inside the cone),
else slide: in coordinates scaled by ``S = diag(μ1, μ2, 1)`` the cone is the unit circular one,
λ = λ_n S (cos θ, sin θ, 1) with λ_n fixed by u_n = 0, and the maximal-dissipation condition
``ũ_t ∥ −(cos θ, sin θ)`` is a trigonometric polynomial of degree 2 in θ, i.e. a quartic in
``z = e^{iθ}``, solved by ``np.roots`` and polished by Newton (a dense θ scan is the fallback).
Friction on one axis only (μ1 or μ2 = 0, legal) makes the ellipse a segment: the exact 2D problem
on (t_j, n) with λ_k = 0 (``_segment``).

Stopping (COND-like): relative change of the impulses over one sweep
``‖λ^{k+1} − λ^k‖ / max(‖λ^{k+1}‖, ‖λ^k‖) < tol`` (default 1e-6; the max keeps a sweep in which
every contact takes off, λ^{k+1} = 0, a finite change of 1 rather than 0/0: the next sweep confirms it), at most ``max_iter`` sweeps (default 500,
COND §V-D). Warm start: the last step's impulses (kept in world coordinates, matched by the
contact's nodes and nearest point, re-expressed in the new frame), carried by
``memory()``/``restore()``.

Cost (a baseline, as in the paper): the factorization and the 3c right-hand sides of A⁻¹ J_fᵀ
(solved a block at a time) are O(fill · c); G is dense (1.3 GB at 4,300 contacts); one sweep is O(c²) flops in a Python loop over contacts that keeps
``u = G λ + q`` current (one column-block update per changed impulse; tens of µs per contact and
visit on this machine, more when it slides: a scalar Newton on θ, ``np.roots`` only as a fallback). ``ms_factorization`` (A and v*), ``ms_delassus`` (G) and
``ms_iteration`` (the sweeps) are reported separately.

Options: ``tol`` (1e-6), ``max_iter`` (500 sweeps), ``warm_start`` (True), ``restitution`` (0),
``recovery`` (0.2), ``max_recovery_speed`` (0.05 m/s) as COND's, ``linear_solver`` ("direct",
"cholmod", "splu": a factorization is needed).
"""
from __future__ import annotations

import math

import numpy as np

from ..contact.contacts import OPEN, SLIP, STICK
from . import CONTACT_SOLVERS
from .delassus import COMMON_DEFAULTS, ContactIterate, ContactSpace, DelassusSolver

DEFAULTS = dict(COMMON_DEFAULTS)
_SCAN = np.linspace(-math.pi, math.pi, 721)


# --------------------------------------------------------------------------- the local problem
def local_solve(Gm, r, mu1: float, mu2: float, Ginv=None):
    """Exact Signorini–Coulomb solution of one contact for ``u = Gm λ + r``; returns (λ (3-tuple), status).

    Gm: 3×3 symmetric positive (semi)definite diagonal block of the Delassus operator (nested list or
    array); r: the rest of the contact velocity (rows t1, t2, n); mu1, mu2 >= 0 on t1, t2; Ginv: Gm⁻¹
    if it exists. Scalar arithmetic: it runs once per contact and visit."""
    g = Gm.tolist() if isinstance(Gm, np.ndarray) else Gm
    r = r.tolist() if isinstance(r, np.ndarray) else r
    if not r[2] < 0.0 or not g[2][2] > 0.0:
        return (0.0, 0.0, 0.0), OPEN                       # take-off (or nothing this contact can move)
    if mu1 <= 0.0 and mu2 <= 0.0:                          # frictionless
        return (0.0, 0.0, -r[2] / g[2][2]), SLIP
    if mu1 <= 0.0 or mu2 <= 0.0:                           # friction on one axis only: a segment, not an ellipse
        return _segment(g, r, 0 if mu1 > 0.0 else 1, max(mu1, mu2))
    if Ginv is not None:
        gi = Ginv.tolist() if isinstance(Ginv, np.ndarray) else Ginv
        stick = tuple(-(gi[k][0] * r[0] + gi[k][1] * r[1] + gi[k][2] * r[2]) for k in range(3))
        if stick[2] > 0.0 and _inside(stick, mu1, mu2):
            return stick, STICK
    lam = _slide(g, r, mu1, mu2)
    return lam, (SLIP if lam[2] > 0.0 else OPEN)


def _segment(g, r, j: int, mu: float):
    """One frictionless tangent axis (its μ = 0): the cone is the segment |λ_j| <= μ λ_n, λ_k = 0 on the
    other axis, and the problem is the 2D one on rows (j, n): stick on axis j (u_j = 0) if that λ is on
    the segment, else slide with λ_j = −μ λ_n sign(u_j). The contact still moves freely along axis k,
    so a contact that does not take off is reported SLIP."""
    gjj, gjn, gnn = g[j][j], g[j][2], g[2][2]
    det = gjj * gnn - gjn * gjn
    if det > 1e-12 * (gjj + gnn) ** 2:
        lj = -(gnn * r[j] - gjn * r[2]) / det
        ln = -(gjj * r[2] - gjn * r[j]) / det
        if ln > 0.0 and abs(lj) <= mu * ln:
            return _on_axes(j, lj, ln), SLIP
    for s in (1.0, -1.0):                                  # λ_j = −s μ λ_n; slip u_j must have sign s
        den = gnn - s * mu * gjn
        if not den > 0.0:
            continue
        ln = -r[2] / den
        if ln > 0.0 and s * ((gjn - s * mu * gjj) * ln + r[j]) >= 0.0:
            return _on_axes(j, -s * mu * ln, ln), SLIP
    return (0.0, 0.0, 0.0), OPEN


def _on_axes(j: int, lj: float, ln: float):
    return (lj, 0.0, ln) if j == 0 else (0.0, lj, ln)


def _inside(lam, mu1, mu2) -> bool:
    """λ in the (ellipsoidal) cone: (λ1/μ1)² + (λ2/μ2)² <= λ_n² (a zero μ allows no impulse on its axis)."""
    if mu1 <= 0.0 and lam[0] != 0.0 or mu2 <= 0.0 and lam[1] != 0.0:
        return False
    x = lam[0] / mu1 if mu1 > 0.0 else 0.0
    y = lam[1] / mu2 if mu2 > 0.0 else 0.0
    return x * x + y * y <= lam[2] * lam[2]


def _slide(Gm, r, mu1, mu2) -> np.ndarray:
    """The sliding solution (module docstring): λ = λ_n S (cos θ, sin θ, 1). Newton on F(θ) from the
    direction of the slip at λ_t = 0 (scalar arithmetic: this runs once per contact and visit);
    the quartic's roots when that does not land on an admissible root."""
    g = Gm.tolist() if isinstance(Gm, np.ndarray) else Gm
    sc = (mu1, mu2, 1.0)
    a = [[g[i][j] * sc[i] * sc[j] for j in range(3)] for i in range(3)]
    rt = [r[0] * mu1, r[1] * mu2, r[2]]
    rn = rt[2]
    # P(θ) = −r_n (G̃_t d) + r̃_t (G̃_n · d), d = (c, s, 1): P_k = α_k c + β_k s + γ_k
    al = (-rn * a[0][0] + rt[0] * a[2][0], -rn * a[1][0] + rt[1] * a[2][0])
    be = (-rn * a[0][1] + rt[0] * a[2][1], -rn * a[1][1] + rt[1] * a[2][1])
    ga = (-rn * a[0][2] + rt[0] * a[2][2], -rn * a[1][2] + rt[1] * a[2][2])
    # F(θ) = P_1 sin θ − P_2 cos θ = f0 + f1c cos θ + f1s sin θ + f2c cos 2θ + f2s sin 2θ
    f = (0.5 * (be[0] - al[1]), -ga[1], ga[0], -0.5 * (be[0] + al[1]), 0.5 * (al[0] - be[1]))
    th = math.atan2(-ga[1], -ga[0])                     # the slip direction with λ_t = 0
    for _ in range(30):
        F = _F(th, *f)
        dF = (-f[1] * math.sin(th) + f[2] * math.cos(th) - 2 * f[3] * math.sin(2 * th) + 2 * f[4] * math.cos(2 * th))
        if dF == 0.0:
            break
        step = max(-0.5, min(0.5, F / dF))
        th -= step
        if abs(step) < 1e-13:
            break
    best = _pick([th], a, rn, al, be, ga)
    if best is None:
        best = _slide_roots(f, a, rn, al, be, ga)
    if best is None:
        return (0.0, 0.0, 0.0)
    c, sn = math.cos(best), math.sin(best)
    ln = -rn / (a[2][0] * c + a[2][1] * sn + a[2][2])
    return (mu1 * ln * c, mu2 * ln * sn, ln)


def _slide_roots(f, a, rn, al, be, ga):
    """All roots of F as the quartic in z = e^{iθ} (np.roots), else a dense θ scan."""
    f0, f1c, f1s, f2c, f2s = f
    coef = np.array([0.5 * (f2c - 1j * f2s), 0.5 * (f1c - 1j * f1s), f0, 0.5 * (f1c + 1j * f1s),
                     0.5 * (f2c + 1j * f2s)])
    scale = np.abs(coef).max()
    cands = []
    if scale > 0.0:
        lead = np.flatnonzero(np.abs(coef) > 1e-14 * scale)
        roots = np.roots(coef[lead[0]:lead[-1] + 1]) if lead.size and lead[-1] > lead[0] else np.zeros(0)
        for z in roots:
            if abs(abs(z) - 1.0) < 1e-3:
                cands.append(_polish(math.atan2(z.imag, z.real), *f))
    best = _pick(cands, a, rn, al, be, ga)
    if best is None:
        th = _SCAN
        F = f0 + f1c * np.cos(th) + f1s * np.sin(th) + f2c * np.cos(2 * th) + f2s * np.sin(2 * th)
        sign = np.flatnonzero(np.sign(F[:-1]) != np.sign(F[1:]))
        cands = [_bisect(th[k], th[k + 1], *f) for k in sign]
        cands += list(th[np.argsort(np.abs(F))[:8]])
        best = _pick(cands, a, rn, al, be, ga)
    return best


def _F(th, f0, f1c, f1s, f2c, f2s):
    return f0 + f1c * math.cos(th) + f1s * math.sin(th) + f2c * math.cos(2 * th) + f2s * math.sin(2 * th)


def _polish(th, f0, f1c, f1s, f2c, f2s) -> float:
    for _ in range(4):
        F = _F(th, f0, f1c, f1s, f2c, f2s)
        dF = (-f1c * math.sin(th) + f1s * math.cos(th) - 2 * f2c * math.sin(2 * th) + 2 * f2s * math.cos(2 * th))
        if dF == 0.0:
            break
        th -= F / dF
    return th


def _bisect(lo, hi, *f) -> float:
    flo = _F(lo, *f)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        fm = _F(mid, *f)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _pick(cands, a, rn, al, be, ga):
    """The admissible θ (λ_n > 0, dissipative) with the smallest |F| residual relative to its size."""
    best, best_err = None, math.inf
    for th in cands:
        c, s = math.cos(th), math.sin(th)
        D = a[2][0] * c + a[2][1] * s + a[2][2]
        if not D > 0.0:
            continue
        p0, p1 = al[0] * c + be[0] * s + ga[0], al[1] * c + be[1] * s + ga[1]
        norm = math.hypot(p0, p1)
        if p0 * c + p1 * s > 1e-9 * norm:                  # friction must oppose the slip
            continue
        err = abs(p0 * s - p1 * c) / max(norm, 1e-300)
        if err < best_err:
            best, best_err = th, err
    if best is not None and best_err > 1e-6:
        return None
    return best


# --------------------------------------------------------------------------- the solver
class PgsSolver(DelassusSolver):
    """NCP projected Gauss–Seidel on the Delassus operator of a factorized A (module docstring)."""

    name = "pgs"
    defaults = DEFAULTS
    iteration_word = "sweep"

    def iterate(self, space: ContactSpace) -> ContactIterate:
        """Gauss–Seidel sweeps of ``local_solve`` over the contacts until the relative impulse change
        of a sweep is below ``tol`` (module docstring)."""
        o = self.opt
        Gd, q, mu, c = space.G, space.q, space.mu, space.count
        lam = space.lam_warm.ravel().copy()
        Gmm = np.stack([Gd[3 * m:3 * m + 3, 3 * m:3 * m + 3] for m in range(c)])
        det = np.linalg.det(Gmm)
        good = det > 1e-12 * np.einsum("mii->m", Gmm) ** 3
        Ginv = np.zeros_like(Gmm)
        if good.any():
            Ginv[good] = np.linalg.inv(Gmm[good])
        mu1, mu2 = mu[:, 0].tolist(), mu[:, 1].tolist()
        Gl, Gil, goodl = Gmm.tolist(), Ginv.tolist(), good.tolist()
        status = np.full(c, OPEN, np.int32)
        history = []
        theta, converged, sweeps = math.inf, False, 0
        cols = [np.ascontiguousarray(Gd[:, 3 * m:3 * m + 3]) for m in range(c)]
        for sweeps in range(1, int(o["max_iter"]) + 1):
            old = lam.copy()
            u = Gd @ lam + q                      # contact velocities, kept current through the sweep
            L = lam.reshape(c, 3).tolist()
            for m in range(c):
                i = 3 * m
                g, lm = Gl[m], L[m]
                ui = u[i:i + 3].tolist()
                r = [ui[k] - (g[k][0] * lm[0] + g[k][1] * lm[1] + g[k][2] * lm[2]) for k in range(3)]
                new, status[m] = local_solve(g, r, mu1[m], mu2[m], Gil[m] if goodl[m] else None)
                d = (new[0] - lm[0], new[1] - lm[1], new[2] - lm[2])
                if d[0] != 0.0 or d[1] != 0.0 or d[2] != 0.0:
                    u += cols[m] @ d
                    L[m] = list(new)
            lam = np.asarray(L, dtype=np.float64).ravel()
            dn = float(np.linalg.norm(lam - old))
            ln = max(float(np.linalg.norm(lam)), float(np.linalg.norm(old)))
            theta = dn / ln if ln > 0 else 0.0
            history.append(theta)
            if not math.isfinite(theta):
                break
            if theta < o["tol"]:
                converged = True
                break
        return ContactIterate(lam.reshape(c, 3), status, sweeps, theta, converged, history)


def make_pgs_solver(model, options: dict) -> PgsSolver:
    return PgsSolver(model, options)


CONTACT_SOLVERS["pgs"] = make_pgs_solver

"""Todorov's implicit nonlinear complementarity (``solver="incp"``), on the Delassus operator of a
factorized A (``delassus.py``, shared with NCP-PGS). Theory in ``docs/INCP.md``; equation numbers
are the paper's (``shared/papers/todorov-implicit-complementarity.md``).

Contact space: ``u = G λ + q`` (rows t1, t2, n per contact, COND's normal targets folded into q,
so the paper's b is 0). Each contact is rescaled by ``T = diag(μ1, μ2, 1)/√ω`` (ω: the largest
diagonal entry of ``diag(μ1, μ2, 1) G_kk diag(μ1, μ2, 1)``): ``λ = T f``, ``û = T u``, so ``û = Â f + q̂`` with ``Â = T G T``, ``q̂ = T q``. In
these coordinates every cone is the circular cone of μ = 1 (the ellipsoidal one of μ1 ≠ μ2
becomes circular; maximal dissipation is preserved since ``û·f = u·λ``) and each diagonal block
of Â has largest diagonal entry 1.

The unknown x ∈ R^{3c} is unconstrained; the impulse and velocity are functions of it (eqs. 10,
12-14): ``f_n = max(0, −x_n)``, ``s = min(1, f_n/‖x_t‖)``, ``f_t = −s x_t``, ``v = f + x``; they
satisfy Signorini, the exact cone and maximal dissipation for every x. The step is the root of
``r(x) = (Â − I) f(x) − x + q̂`` (eq. 15), found by minimizing ``ℓ = ½‖r‖²`` (eq. 19) with
Levenberg–Marquardt-damped Gauss–Newton (eqs. 20-22): the Newton point is accepted when it gives
half the predicted decrease; otherwise the dogleg ``x → x_C → x_N`` (eq. 24) is searched
edge-aware: cut at every crossing of a contact's plane (x_n = 0) or cone (‖x_t‖ = −x_n) edge
(eq. 27), a cubic line search in each smooth piece, the best point kept. On an active edge
(eq. 25: ℓ decreases along neither side) the Jacobian is the blend of eq. 26 and the step is
restricted to the edge's tangent space (eqs. 28-29), then projected back onto a curved (cone)
edge. Initialization (§III-F): all contacts sticking, ``x = Â⁺ q̂``; with a warm start, the
last step's impulses mapped to x; and the free start x = q̂, in this order. A start that does not
halve ‖r‖ in 6 iterations has stalled in a local minimum of ℓ (frequent where Â is rank-deficient:
rigid bodies, stiff bodies) and the next is tried; if all stall, proximal steps
``û = (Â + εI) f + q̂ − ε f_prev`` from the best point (§V-A's perturbed equation, exact at its
fixed point), each from the last with ε = ‖r‖/‖f‖ (docs/INCP.md: the stalls are plateaus in Â's
null space).

Stop: ``‖r‖ / max(‖q̂‖, ‖Â f‖, ‖v‖) < tol`` (default 1e-10), at most ``max_iter`` iterations in
all (default 100), or no decrease anywhere (a local minimum of ℓ; reported unconverged).

Cost: the factorization and G as for PGS; each iteration forms the dense 3c × 3c Jacobian and
Cholesky-solves ``JᵀJ + λI``: O(c³) flops and O(c²) memory per iteration, which bounds it to
some thousands of contacts (``docs/INCP.md``).

Options: as PGS's (``delassus.COMMON_DEFAULTS``) with ``tol`` 1e-10 and ``max_iter`` 100.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..contact.contacts import OPEN, SLIP, STICK
from . import CONTACT_SOLVERS
from .delassus import COMMON_DEFAULTS, ContactIterate, ContactSpace, DelassusSolver

DEFAULTS = {**COMMON_DEFAULTS, "tol": 1e-10, "max_iter": 100}
BREAK_REGION, STICK_REGION, SLIP_REGION = 0, 1, 2
_EDGE_TOL = 1e-9            # a contact is on an edge within this fraction of ‖x_k‖
_DAMPING_MIN, _DAMPING_MAX = 1e-14, 1e12
_SQRT_HALF = math.sqrt(0.5)
_PROXIMAL_EPS_MIN = 1e-14   # proximal weight floor against Â's unit diagonal scale
_STALL_WINDOW = 6           # stalled: ‖r‖ not halved in this many iterations


# --------------------------------------------------------------------------- the implicit map
def contact_regions(x: np.ndarray) -> np.ndarray:
    """Per contact (x: (c, 3), rows t1, t2, n) the smooth region of the map: break (x_n >= 0),
    stick (‖x_t‖ <= −x_n) or slip (Fig. 1C)."""
    xn = x[:, 2]
    nt = np.hypot(x[:, 0], x[:, 1])
    return np.where(xn >= 0.0, BREAK_REGION, np.where(nt <= -xn, STICK_REGION, SLIP_REGION))


def implicit_impulse(x: np.ndarray) -> np.ndarray:
    """f(x) of eqs. 10, 12, 13 for the unit circular cone (b = 0); x: (..., 3) rows t1, t2, n.
    The velocity is v = f + x (eq. 14)."""
    fn = np.maximum(0.0, -x[..., 2])
    nt = np.hypot(x[..., 0], x[..., 1])
    s = np.where(nt > fn, fn / np.where(nt > 0.0, nt, 1.0), 1.0)
    f = np.empty_like(x)
    f[..., 0] = -s * x[..., 0]
    f[..., 1] = -s * x[..., 1]
    f[..., 2] = fn
    return f


def impulse_jacobian(x: np.ndarray, region: np.ndarray) -> np.ndarray:
    """∂f/∂x per contact, (c, 3, 3), of the map in the given smooth region (one-sided on an edge):
    0 (break), −I (stick), and for slip ∂f_t/∂x_t = (x_n/‖x_t‖)(I − e eᵀ), ∂f_t/∂x_n = e, ∂f_n/∂x_n = −1
    with e = x_t/‖x_t‖."""
    c = len(x)
    D = np.zeros((c, 3, 3))
    stick = region == STICK_REGION
    D[stick] = -np.eye(3)
    slip = region == SLIP_REGION
    if slip.any():
        xs = x[slip]
        nt = np.maximum(np.hypot(xs[:, 0], xs[:, 1]), 1e-300)
        e = xs[:, :2] / nt[:, None]
        k = xs[:, 2] / nt
        blk = np.zeros((len(xs), 3, 3))
        blk[:, :2, :2] = k[:, None, None] * (np.eye(2) - e[:, :, None] * e[:, None, :])
        blk[:, :2, 2] = e
        blk[:, 2, 2] = -1.0
        D[slip] = blk
    return D


# --------------------------------------------------------------------------- the scaled problem
@dataclass
class ScaledContactProblem:
    """``r(x) = (Â − I) f(x) − x + q̂`` (eq. 15) for c contacts in the μ = 1 coordinates
    (module docstring); ``scale``: per contact the map λ = scale · f (c, 3)."""

    A: np.ndarray
    q: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_delassus(cls, G: np.ndarray, q: np.ndarray, mu: np.ndarray) -> "ScaledContactProblem":
        c = len(mu)
        diag = np.diagonal(G).reshape(c, 3) * np.column_stack([mu[:, 0] ** 2, mu[:, 1] ** 2, np.ones(c)])
        omega = diag.max(axis=1)                          # Â_kk's largest diagonal entry becomes 1
        pos = omega > 0.0
        omega[~pos] = omega[pos].mean() if pos.any() else 1.0
        T = np.column_stack([mu[:, 0], mu[:, 1], np.ones(c)]) / np.sqrt(omega)[:, None]
        t = T.ravel()
        A = G * t[:, None] * t[None, :]
        return cls(0.5 * (A + A.T), t * np.asarray(q, np.float64).ravel(), T)

    @property
    def count(self) -> int:
        return len(self.scale)

    def proximal(self, eps: float, f_prev: np.ndarray) -> "ScaledContactProblem":
        """The proximal problem ``û = (Â + εI) f + q̂ − ε f_prev`` (same scaling)."""
        return ScaledContactProblem(self.A + eps * np.eye(len(self.A)), self.q - eps * f_prev, self.scale)

    def residuals(self, X: np.ndarray):
        """r at a batch of points X (m, 3c) → (R (m, 3c), F (m, 3c))."""
        F = implicit_impulse(X.reshape(len(X), -1, 3)).reshape(X.shape)
        return F @ self.A + self.q - F - X, F

    def direction_derivative(self, x: np.ndarray, region: np.ndarray, u: np.ndarray) -> np.ndarray:
        """J(x) u for the Jacobian of the given regions: (Â − I) (D u) − u (eq. 18)."""
        Du = np.einsum("kij,kj->ki", impulse_jacobian(x.reshape(-1, 3), region), u.reshape(-1, 3)).ravel()
        return self.A @ Du - Du - u

    def jacobian(self, D: np.ndarray) -> np.ndarray:
        """Dense J = (Â − I) D − I for block-diagonal D (c, 3, 3)."""
        n = 3 * self.count
        J = np.einsum("ikj,kjl->ikl", self.A.reshape(n, -1, 3), D).reshape(n, n)
        for k in range(self.count):
            J[3 * k:3 * k + 3, 3 * k:3 * k + 3] -= D[k]
        J[np.diag_indices(n)] -= 1.0
        return J

    def relative_residual(self, r: np.ndarray, f: np.ndarray, x: np.ndarray) -> float:
        scale = max(float(np.linalg.norm(self.q)), float(np.linalg.norm(self.A @ f)),
                    float(np.linalg.norm(f + x)), 1e-300)
        return float(np.linalg.norm(r)) / scale


@dataclass
class IncpResult:
    """The solution in the scaled coordinates: x, f(x), the relative residual history, and what the
    iteration did."""

    x: np.ndarray
    f: np.ndarray
    iterations: int
    residual: float
    converged: bool
    history: list
    newton_steps: int
    line_searches: int
    stop: str
    init: str


# --------------------------------------------------------------------------- edges (eqs. 25-29)
def _edge_jacobian(prob: ScaledContactProblem, x: np.ndarray, r: np.ndarray):
    """The per-contact Jacobian blocks D (c, 3, 3) at x with the paper's choice on edges (eqs. 25,
    26), and the tangent bases (contact → (3, 2) orthonormal) and kinds ("plane", "cone") of the
    active edges."""
    xc = x.reshape(-1, 3)
    region = contact_regions(xc)
    D = impulse_jacobian(xc, region)
    nt = np.hypot(xc[:, 0], xc[:, 1])
    xn = xc[:, 2]
    tol = _EDGE_TOL * np.maximum(np.linalg.norm(xc, axis=1), 1e-300)
    plane = (np.abs(xn) <= tol) & (nt > tol)
    cone = (xn < -tol) & (np.abs(nt + xn) <= tol)
    edges = np.flatnonzero(plane | cone)
    active: dict[int, tuple[np.ndarray, str]] = {}
    if not len(edges):
        return D, active
    Ar = (prob.A @ r).reshape(-1, 3)
    rc = r.reshape(-1, 3)
    for k in edges:
        e = xc[k, :2] / nt[k]
        if plane[k]:        # side 1 (d = +n): break; side 2: slip at x_n → 0⁻
            d = np.array([0.0, 0.0, 1.0])
            D1 = np.zeros((3, 3))
            D2 = impulse_jacobian(np.array([[xc[k, 0], xc[k, 1], 0.0]]), np.array([SLIP_REGION]))[0]
            basis = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        else:               # side 1 (d = (e, 1)/√2, outwards): slip; side 2: stick
            d = _SQRT_HALF * np.array([e[0], e[1], 1.0])
            D1 = impulse_jacobian(xc[k:k + 1], np.array([SLIP_REGION]))[0]
            D2 = -np.eye(3)
            basis = np.array([[_SQRT_HALF * e[0], -e[1]], [_SQRT_HALF * e[1], e[0]], [-_SQRT_HALF, 0.0]])
        w1, w2 = D1 @ d, D2 @ d
        delta1 = float(Ar[k] @ w1 - rc[k] @ (w1 + d))             # eq. 25: rᵀ J1 d
        delta2 = -float(Ar[k] @ w2 - rc[k] @ (w2 + d))            # −rᵀ J2 d
        if delta1 < 0.0 or delta2 < 0.0:
            D[k] = D1 if delta1 <= delta2 else D2
        else:                                                     # active edge: eq. 26
            tot = delta1 + delta2
            D[k] = 0.5 * (D1 + D2) if tot <= 0.0 else (delta2 * D1 + delta1 * D2) / tot
            active[int(k)] = (basis, "plane" if plane[k] else "cone")
    return D, active


def _tangent_basis(c: int, active: dict) -> np.ndarray:
    """B of eq. 28: identity blocks, (3, 2) tangent blocks on active edges (orthonormal columns)."""
    B = np.zeros((3 * c, 3 * c - len(active)))
    col = 0
    for k in range(c):
        if k in active:
            B[3 * k:3 * k + 3, col:col + 2] = active[k][0]
            col += 2
        else:
            B[3 * k:3 * k + 3, col:col + 3] = np.eye(3)
            col += 3
    return B


def project_on_cone_edge(xk: np.ndarray, fallback_dir: np.ndarray) -> np.ndarray:
    """The nearest point of the cone surface ‖x_t‖ = −x_n (μ = 1) to xk (§III-D)."""
    rho = math.hypot(xk[0], xk[1])
    e = xk[:2] / rho if rho > 0.0 else fallback_dir
    a = 0.5 * (rho - xk[2])
    if a <= 0.0:
        return np.zeros(3)
    return np.array([a * e[0], a * e[1], -a])


def _project_active_cones(x_new: np.ndarray, x: np.ndarray, active: dict) -> np.ndarray:
    out = x_new.copy()
    for k, (_, kind) in active.items():
        if kind == "cone":
            xk = x[3 * k:3 * k + 3]
            out[3 * k:3 * k + 3] = project_on_cone_edge(out[3 * k:3 * k + 3], xk[:2] / max(np.hypot(*xk[:2]), 1e-300))
    return out


# --------------------------------------------------------------------------- line search (§III-C)
def edge_crossings(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sorted α ∈ (0, 1) where p + α u crosses a contact's plane (x_n = 0) or cone (eq. 27 with
    μ = 1, b = 0: ‖x_t(α)‖² = x_n(α)², x_n(α) <= 0) edge."""
    P, U = p.reshape(-1, 3), u.reshape(-1, 3)
    out = []
    pn, un = P[:, 2], U[:, 2]
    nz = un != 0.0
    out.append(-pn[nz] / un[nz])
    a = U[:, 0] ** 2 + U[:, 1] ** 2 - un ** 2
    b = 2.0 * (P[:, 0] * U[:, 0] + P[:, 1] * U[:, 1] - pn * un)
    c0 = P[:, 0] ** 2 + P[:, 1] ** 2 - pn ** 2
    quad = np.abs(a) > 1e-14 * (np.abs(b) + np.abs(c0) + 1e-300)
    disc = b * b - 4.0 * a * c0
    ok = quad & (disc >= 0.0)
    sq = np.sqrt(np.where(ok, disc, 0.0))
    for sign in (1.0, -1.0):
        alpha = (-b[ok] + sign * sq[ok]) / (2.0 * a[ok])
        keep = pn[ok] + alpha * un[ok] <= 0.0
        out.append(alpha[keep])
    lin = ~quad & (b != 0.0)
    alpha = -c0[lin] / b[lin]
    out.append(alpha[pn[lin] + alpha * un[lin] <= 0.0])
    al = np.concatenate(out)
    al = al[(al > 1e-12) & (al < 1.0 - 1e-12)]
    return np.unique(al)


def _cubic_minimizer(l0, l1, d0, d1) -> np.ndarray:
    """Per row, the minimizer in [0, 1] of the cubic Hermite interpolant (values l0, l1, slopes d0,
    d1 on the unit interval); NaN where the minimum is an end point."""
    # h(t) = a t³ + b t² + d0 t + l0
    a = 2.0 * (l0 - l1) + d0 + d1
    b = 3.0 * (l1 - l0) - 2.0 * d0 - d1
    out = np.full(len(l0), np.nan)
    disc = b * b - 3.0 * a * d0
    with np.errstate(divide="ignore", invalid="ignore"):
        cub = np.abs(a) > 1e-14 * (np.abs(b) + np.abs(d0) + 1e-300)
        t_c = np.where(disc >= 0.0, (-b + np.sqrt(np.maximum(disc, 0.0))) / (3.0 * a), np.nan)
        t_q = np.where(b > 0.0, -d0 / (2.0 * b), np.nan)
    t = np.where(cub, t_c, t_q)
    good = np.isfinite(t) & (t > 0.0) & (t < 1.0)
    out[good] = t[good]
    return out


def _edge_aware_search(prob: ScaledContactProblem, x: np.ndarray, xC: np.ndarray, xN: np.ndarray):
    """Best point of the dogleg x → x_C → x_N: every edge crossing, the segment ends and the cubic
    minimizer in each smooth piece (§III-C). Returns (point, ℓ)."""
    starts, ends, steps = [], [], []
    for p, end in ((x, xC), (xC, xN)):
        u = end - p
        if not np.any(u):
            continue
        alphas = np.concatenate([[0.0], edge_crossings(p, u), [1.0]])
        starts.append(p + alphas[:-1, None] * u)
        ends.append(p + alphas[1:, None] * u)
        steps.append(np.diff(alphas)[:, None] * u)
    if not starts:
        return x, math.inf
    P0, P1, S = np.vstack(starts), np.vstack(ends), np.vstack(steps)
    m, c = len(P0), prob.count
    regions = contact_regions((P0 + 0.5 * S).reshape(-1, 3))         # one smooth region per piece
    R, _ = prob.residuals(np.vstack([P0, P1]))
    ell = 0.5 * np.einsum("ij,ij->i", R, R)
    slopes = []
    for P, Rp in ((P0, R[:m]), (P1, R[m:])):                          # ℓ' = rᵀ J u inside the piece
        Du = np.einsum("kij,kj->ki", impulse_jacobian(P.reshape(-1, 3), regions), S.reshape(-1, 3)).reshape(m, 3 * c)
        JU = Du @ prob.A - Du - S
        slopes.append(np.einsum("ij,ij->i", Rp, JU))
    d0, d1 = slopes
    ends = np.vstack([P0, P1])
    t = _cubic_minimizer(ell[:m], ell[m:], d0, d1)
    inner = np.flatnonzero(np.isfinite(t))
    cands, vals = [ends], [ell]
    if len(inner):
        pts = P0[inner] + t[inner, None] * S[inner]
        Rc, _ = prob.residuals(pts)
        cands.append(pts)
        vals.append(0.5 * np.einsum("ij,ij->i", Rc, Rc))
    cands, vals = np.vstack(cands), np.concatenate(vals)
    best = int(np.argmin(vals))
    return cands[best], float(vals[best])


# --------------------------------------------------------------------------- the method
def initial_points(prob: ScaledContactProblem, f_warm: np.ndarray | None = None) -> list:
    """Starting points in the order tried, as (x, name): §III-F's all-sticking start (v = 0,
    f = −Â⁺ q̂, x = v − f); with ``f_warm`` (c, 3, scaled impulses inside the cone) x from it (the
    velocity û = Â f + q̂ made complementary); and the free start x = q̂ (f = 0 where q̂_n >= 0).
    The later ones are the restarts after a local minimum of ℓ (§V-A). The warm start is not tried
    first even when its ℓ is smaller: on the resting FEM stack (near-singular Â, so near-non-unique
    impulses) starting from it lands on other solutions step after step and the cubes kept rocking
    at up to 3e-2 m/s, against 7e-5 m/s from the sticking start (measured, test_contact_physics)."""
    starts = [(np.linalg.pinv(prob.A, rcond=1e-12, hermitian=True) @ prob.q, "stick"), (prob.q.copy(), "free")]
    if f_warm is not None:
        f = f_warm.reshape(-1, 3)
        u = (prob.A @ f.ravel() + prob.q).reshape(-1, 3)
        x = np.empty_like(f)
        loaded = f[:, 2] > 0.0
        # broken contacts: x = v = (û_t, max(û_n, 0))
        x[~loaded, :2] = u[~loaded, :2]
        x[~loaded, 2] = np.maximum(u[~loaded, 2], 0.0)
        # loaded: x_n = −f_n; inside the cone x_t = −f_t, on it x_t = −f_t + slip along −f_t
        ft = f[loaded, :2]
        nf = np.hypot(ft[:, 0], ft[:, 1])
        on = nf >= f[loaded, 2] * (1.0 - 1e-12)
        dirn = -ft / np.maximum(nf, 1e-300)[:, None]
        slip = np.maximum(np.einsum("ki,ki->k", u[loaded, :2], dirn), 0.0) * on
        x[loaded, :2] = -ft + slip[:, None] * dirn
        x[loaded, 2] = -f[loaded, 2]
        starts.append((x.ravel(), "warm"))
    return [starts[0], starts[2], starts[1]] if f_warm is not None else starts


def solve_with_restarts(prob: ScaledContactProblem, starts: list, tol: float = 1e-10,
                        max_iter: int = 100) -> IncpResult:
    """``solve_implicit_complementarity`` from each start in turn until one converges (a restart
    after a local minimum, §V-A), then, if none did, proximal steps from the best point; within
    ``max_iter`` iterations in all. Returns the best result."""
    best, used, history = None, 0, []
    for x0, name in starts:
        res = solve_implicit_complementarity(prob, x0, tol, max(max_iter - used, 1), name)
        used += res.iterations
        history += res.history[1:] if history else res.history
        if best is None or res.residual < best.residual:
            best = res
        if res.converged or used >= max_iter:
            break
    x, f = best.x, best.f
    while not best.converged and used < max_iter:
        # proximal point (§V-A's perturbation of the equation, made exact at its fixed point): solve
        # u = (Â + εI) f + q̂ − ε f_prev, which has a full-rank Â + εI where a rigid body's Â has
        # rank 6, and repeat from its solution; f = f_prev at the fixed point is the problem's
        # answer. ε = ‖r‖/‖f‖: the residual left in Â's null space (a stall's plateau, docs/INCP.md)
        # then moves f by about its own size per proximal step instead of by ‖r‖/ε ≪ ‖f‖
        R, _ = prob.residuals(x[None])
        eps = max(float(np.linalg.norm(R[0])) / max(float(np.linalg.norm(f)), 1e-300), _PROXIMAL_EPS_MIN)
        res = solve_implicit_complementarity(prob.proximal(eps, f), x, tol, max(max_iter - used, 1), "proximal")
        used += max(res.iterations, 1)
        R, F = prob.residuals(res.x[None])
        x, f = res.x, F[0]
        residual = prob.relative_residual(R[0], f, x)
        history += res.history[1:-1] + [residual]
        if residual < best.residual:
            best = IncpResult(x, f, 0, residual, residual < tol, [], best.newton_steps + res.newton_steps,
                              best.line_searches + res.line_searches, "tolerance" if residual < tol else "proximal",
                              best.init if best.init.endswith("+proximal") else best.init + "+proximal")
    best.iterations, best.history = used, history
    return best


def solve_implicit_complementarity(prob: ScaledContactProblem, x0: np.ndarray, tol: float = 1e-10,
                                   max_iter: int = 100, init: str = "given") -> IncpResult:
    """Non-smooth Gauss–Newton on ℓ(x) = ½‖r(x)‖² (§III, pseudocode §III-E) from x0."""
    c = prob.count
    x = np.asarray(x0, np.float64).copy()
    R, F = prob.residuals(x[None])
    r, f = R[0], F[0]
    ell = 0.5 * float(r @ r)
    history = [prob.relative_residual(r, f, x)]
    damping, newton_steps, searches, it, stop = 1e-8, 0, 0, 0, "max_iter"
    converged = history[-1] < tol
    if converged:
        stop = "tolerance"
    while not converged and it < max_iter:
        it += 1
        D, active = _edge_jacobian(prob, x, r)
        J = prob.jacobian(D)
        B = _tangent_basis(c, active) if active else None
        JB = J @ B if B is not None else J
        gb = JB.T @ r                                      # Bᵀ g, eq. 20
        H0 = JB.T @ JB
        base = max(float(np.trace(H0)) / len(H0), 1e-300)
        xi = None
        while xi is None:                                 # Newton point, eq. 22 / 28
            try:
                cf = sla.cho_factor(H0 + damping * base * np.eye(len(H0)), check_finite=False)
                xi = -sla.cho_solve(cf, gb, check_finite=False)
            except (np.linalg.LinAlgError, sla.LinAlgError):
                xi = None
            if xi is None or not np.all(np.isfinite(xi)):
                if damping >= _DAMPING_MAX:
                    xi = np.zeros(len(gb))
                else:
                    xi, damping = None, damping * 10.0
        eps = B @ xi if B is not None else xi
        xN = _project_active_cones(x + eps, x, active)
        Rn, Fn = prob.residuals(xN[None])
        ell_n = 0.5 * float(Rn[0] @ Rn[0])
        model = r + J @ eps
        pred = ell - 0.5 * float(model @ model)
        if pred > 0.0 and ell - ell_n >= 0.5 * pred:       # accept x_N, decrease λ
            x, r, f, ell = xN, Rn[0], Fn[0], ell_n
            newton_steps += 1
            damping = max(damping / 10.0, _DAMPING_MIN)
        else:                                             # increase λ, dogleg with edge-aware search
            damping = min(damping * 10.0, _DAMPING_MAX)
            gp = B @ gb if B is not None else gb
            Jg = J @ gp
            den = float(Jg @ Jg) + damping * base * float(gp @ gp)
            xC = x - gp * (float(gb @ gb) / den) if den > 0.0 else x.copy()   # eq. 24 / 28
            xC = _project_active_cones(xC, x, active)
            searches += 1
            x_best, ell_best = _edge_aware_search(prob, x, xC, xN)
            if not ell_best < ell:
                stop = "local_minimum"
                history.append(history[-1])
                break
            Rb, Fb = prob.residuals(x_best[None])
            x, r, f, ell = x_best, Rb[0], Fb[0], 0.5 * float(Rb[0] @ Rb[0])
        history.append(prob.relative_residual(r, f, x))
        if not math.isfinite(history[-1]):
            stop = "not_finite"
            break
        if history[-1] < tol:
            converged, stop = True, "tolerance"
        elif it >= _STALL_WINDOW and history[-1] > 0.5 * history[-1 - _STALL_WINDOW]:
            stop = "stalled"          # a local minimum of ℓ away from r = 0 (§V-A): caller restarts
            break
    return IncpResult(x, f, it, history[-1], converged, history, newton_steps, searches, stop, init)


# --------------------------------------------------------------------------- the solver
class IncpSolver(DelassusSolver):
    """Todorov's implicit complementarity on the Delassus operator of a factorized A (module
    docstring)."""

    name = "incp"
    defaults = DEFAULTS

    def iterate(self, space: ContactSpace) -> ContactIterate:
        prob = ScaledContactProblem.from_delassus(space.G, space.q, space.mu)
        f_warm = None
        if self.opt["warm_start"] and space.has_warm:
            T = prob.scale
            f_warm = np.where(T > 0.0, space.lam_warm / np.where(T > 0.0, T, 1.0), 0.0)
            f_warm = implicit_impulse(-f_warm)                # back into the cone of the new frame
        res = solve_with_restarts(prob, initial_points(prob, f_warm), float(self.opt["tol"]), int(self.opt["max_iter"]))
        regions = contact_regions(res.x.reshape(-1, 3))
        status = np.choose(regions, [OPEN, STICK, SLIP]).astype(np.int32)
        lam = prob.scale * res.f.reshape(-1, 3)
        return ContactIterate(lam, status, res.iterations, res.residual, res.converged, res.history[1:],
                              {"newton_steps": res.newton_steps, "line_searches": res.line_searches,
                               "stop": res.stop, "init": res.init, "initial_residual": res.history[0]})


def make_incp_solver(model, options: dict) -> IncpSolver:
    return IncpSolver(model, options)


CONTACT_SOLVERS["incp"] = make_incp_solver

"""The Newton path's dense step compiled: one call per step for small systems (issue 31 item 1).

``solve_dense`` does in one compiled call what ``sap.NewtonContactSolver.solve_host`` does in numpy on
its dense branch (``newton_dense.DENSE_MAX_DOFS``): J's per-contact block rows from the contacts'
nodes, frames and virtual-node links (``ContactSet.jacobian_blocks``, ``ContactRows``), the Delassus
estimate (``sap.delassus_estimate``), friction scaling, impacts and midpoint weights, the contact
model (``build_model``: SAP eqs. 29–30, Hunt & Crossley for Lagged / Similar), and the Newton
iterations on ``H = Ã + Jᵀ G J`` (dense Cholesky) with the exact line search and SAP eq. 26's stop
test, the same formulas in the same order, so the iterates agree with the numpy path to round-off
(the sums of BLAS products may round differently). A step on a one-body scene is ~500 numpy calls
of 1–2 µs on length-1 arrays; here it is one call.

Compiled by numba (``pip install femcontact[fast]``; ``cache=True``: compiled once per machine, then
loaded from ``__pycache__``); without numba the solver keeps its numpy path (``available``). The numba
call costs ~1 µs where a quadrants kernel launch with the ~15 arrays this needs costs 20–40 µs on this
CPU (docs/PERFORMANCE.md, 2026-11-28, "The dense Newton step compiled").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from llvmlite import binding
from numba import njit, types
from numba.extending import get_cython_function_address

from ..contact.contacts import OPEN, SLIP, STICK
from . import line_search
from .contact_models import HuntCrossley, LaggedModel, SapModel, SimilarModel
from .host_problem import HostContactProblem
from .newton_dense import ContactRows

SAP, LAGGED, SIMILAR = 0, 1, 2
KINDS = {"sap": SAP, "lagged": LAGGED, "similar": SIMILAR}
# error codes of solve_dense (the caller redoes the step in numpy, which raises the right error)
OK, BAD_FRICTION, NON_FINITE, NOT_SPD = 0, 1, 2, 3
# float options, in this order
OPTIONS = ("dt", "s", "ch", "co", "beta", "impact_speed", "max_recovery_speed", "rel_tol", "abs_tol",
           "max_iterations", "max_line_search_iterations", "alpha_max", "friction_majorize_above",
           "rebound_beta", "midpoint_end")
_TINY = 1e-300
_K = 8          # distinct nodes per contact at most: two sides, four links each
# scipy's LAPACK, the routines ``DenseNewtonMatrix.solve`` calls through scipy.linalg.lapack (the same
# factor, bit for bit), as external symbols so that the compiled code can be cached
for _name in ("dpotrf", "dpotrs", "dgesv"):
    binding.add_symbol(f"femcontact_{_name}", get_cython_function_address("scipy.linalg.cython_lapack", _name))
_dpotrf = types.ExternalFunction("femcontact_dpotrf", types.void(*[types.voidptr] * 5))
_dpotrs = types.ExternalFunction("femcontact_dpotrs", types.void(*[types.voidptr] * 8))
_dgesv = types.ExternalFunction("femcontact_dgesv", types.void(*[types.voidptr] * 8))


# the helpers are called from compiled code only: no Python entry point to generate (less to compile)
_helper = njit(cache=True, no_cpython_wrapper=True)
_rtsafe_start = _helper(line_search.rtsafe_start)      # the numpy path's rtsafe, compiled
_rtsafe_step = _helper(line_search.rtsafe_step)
_rtsafe_done = _helper(line_search.rtsafe_done)


@dataclass
class DenseStep:
    """A compiled step's converged pieces: the host problem, v (3n,) the end-of-step velocity in impulse
    units, Ã dense (3n, 3n), J (the model's rows: S-scaled, ``ContactRows``) and the offset of v_c, S (c, 3)
    the row scaling (γ = S γ̃), G (c, 3, 3) at v, the model's per-contact parameters P (``solve_dense``)
    and ``model()``, the ``contact_models`` object they describe."""

    problem: HostContactProblem
    v: np.ndarray
    At: np.ndarray
    J: ContactRows
    off: np.ndarray
    S: np.ndarray
    G: np.ndarray
    P: np.ndarray
    kind: str
    dt: float

    def contact_velocity(self) -> np.ndarray:
        """(c, 3): the model's contact velocity ``J v + off`` at v (``model().evaluate`` takes it; the impulse
        applied is ``S γ̃``)."""
        return self.J.matvec(self.v).reshape(-1, 3) + self.off

    def model(self):
        """The contact model of this step (``evaluate``, ``line``) as ``sap.build_model`` builds it."""
        P = self.P
        if self.kind == "sap":
            return SapModel(P[:, 0].copy(), P[:, 1].copy(), P[:, 2].copy(), P[:, 3].copy())
        hc = HuntCrossley(P[:, 2].copy(), P[:, 3].copy(), P[:, 4].copy(), self.dt)
        if self.kind == "lagged":
            return LaggedModel(hc, P[:, 0].copy(), P[:, 8].copy(), P[:, 1].copy())
        return SimilarModel(hc, P[:, 0].copy(), P[:, 1].copy())


@_helper
def _jacobian(node_a, node_b, frame, vn_node, vn_weight, n, fixed):
    """J's per-contact block rows (``ContactRows``: nodes (c, K) increasing, blocks (c, K, 3, 3), valid)
    and J_f's blocks (prescribed nodes' columns zeroed); triplets summed in ``jacobian_blocks``' order."""
    c = len(node_a)
    nodes = np.zeros((c, _K), np.int64)
    count = np.zeros(c, np.int64)
    tmp = np.zeros((c, _K, 3, 3))
    for m in range(c):
        for side in range(2):
            node = node_b[m] if side == 0 else node_a[m]
            sign = 1.0 if side == 0 else -1.0
            if node < 0:
                continue
            links = 1 if node < n else 4
            for k in range(links):
                if node < n:
                    nd = node
                else:
                    nd = vn_node[node - n, k]
                    if nd < 0:
                        continue
                q = -1
                for j in range(count[m]):
                    if nodes[m, j] == nd:
                        q = j
                if q < 0:
                    q = count[m]
                    nodes[m, q] = nd
                    count[m] += 1
                for i in range(3):
                    for j in range(3):
                        if node < n:
                            val = sign * frame[m, i, j]
                        else:
                            u = node - n
                            val = sign * (frame[m, i, 0] * vn_weight[u, k, 0, j] + frame[m, i, 1] * vn_weight[u, k, 1, j]
                                          + frame[m, i, 2] * vn_weight[u, k, 2, j])
                        tmp[m, q, i, j] += val
    K = 1
    for m in range(c):
        K = max(K, count[m])
    out_nodes = np.zeros((c, K), np.int64)
    blocks = np.zeros((c, K, 3, 3))
    valid = np.zeros((c, K), np.bool_)
    order = np.empty(_K, np.int64)
    for m in range(c):                    # slots in increasing node order (insertion sort of ≤ 8)
        for q in range(count[m]):
            j = q
            while j > 0 and nodes[m, order[j - 1]] > nodes[m, q]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = q
        for q in range(count[m]):
            out_nodes[m, q] = nodes[m, order[q]]
            valid[m, q] = True
            for i in range(3):
                for j in range(3):
                    blocks[m, q, i, j] = tmp[m, order[q], i, j]
    free = np.zeros((c, K, 3, 3))
    for m in range(c):
        for q in range(K):
            if not fixed[out_nodes[m, q]]:
                for i in range(3):
                    for j in range(3):
                        free[m, q, i, j] = blocks[m, q, i, j]
    return out_nodes, blocks, valid, free


@_helper
def _matvec(nodes, blocks, x, off):
    """(c, 3): J x + off for J's block rows (each row's 3K products summed as numpy's ``sum(axis=2)``)."""
    c, K = nodes.shape
    out = np.empty((c, 3))
    t = np.empty(3 * K)
    for m in range(c):
        for i in range(3):
            for q in range(K):
                base = 3 * nodes[m, q]
                for j in range(3):
                    t[3 * q + j] = blocks[m, q, i, j] * x[base + j]
            out[m, i] = _psum(t, 3 * K) + off[m, i]
    return out


@_helper
def _rmatvec(nodes, blocks, g, n3):
    """Jᵀ g (3n,) for g (c, 3)."""
    c, K = nodes.shape
    out = np.zeros(n3)
    for m in range(c):
        for q in range(K):
            base = 3 * nodes[m, q]
            for j in range(3):
                out[base + j] += (blocks[m, q, 0, j] * g[m, 0] + blocks[m, q, 1, j] * g[m, 1]) + blocks[m, q, 2, j] * g[m, 2]
    return out


@_helper
def _psum(a, n):
    """Σ a[:n] in numpy's order (``add.reduce``: pairwise, eight accumulators per block of ≤ 128)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        r = a[:8].copy()
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _psum(a, n2) + _psum(a[n2:], n - n2)


@_helper
def _norm(x):
    """‖x‖ as ``sap._norm`` (sqrt of the BLAS x·x)."""
    return math.sqrt(np.dot(x, x))


@_helper
def _inverse3(B, k, out):
    """out[k] = B[k]⁻¹ as numpy's ``inv``: LAPACK ``dgesv`` on the identity."""
    a = np.empty(9)
    x = np.zeros(9)
    for i in range(3):
        x[4 * i] = 1.0
        for j in range(3):
            a[3 * j + i] = B[k, i, j]          # column-major
    three = np.array([3], np.int32)
    ipiv = np.zeros(3, np.int32)
    info = np.zeros(1, np.int32)
    _dgesv(three.ctypes, three.ctypes, a.ctypes, three.ctypes, ipiv.ctypes, x.ctypes, three.ctypes, info.ctypes)
    for i in range(3):
        for j in range(3):
            out[k, i, j] = x[3 * j + i]


@_helper
def _delassus(nodes, free_blocks, valid, fixed, Bw, node_body, body_mass):
    """``sap.delassus_estimate``: w_m = Σ_b max(Σ_k tr(J_mk B_k⁻¹ J_mkᵀ)/3, 1/M_b) over the bodies touched."""
    c, K = nodes.shape
    nb = len(body_mass)
    n = len(Bw)
    inv = np.zeros((n, 3, 3))
    done = np.zeros(n, np.bool_)
    per_body = np.zeros(c * nb)
    touched = np.zeros(c * nb, np.bool_)
    any_free = False
    for m in range(c):
        for q in range(K):
            nd = nodes[m, q]
            if not valid[m, q] or fixed[nd]:
                continue
            any_free = True
            if not done[nd]:
                _inverse3(Bw, nd, inv)
                done[nd] = True
            tr = 0.0
            for i in range(3):
                for j in range(3):
                    for k in range(3):
                        tr += free_blocks[m, q, i, j] * inv[nd, j, k] * free_blocks[m, q, i, k]
            per_body[m * nb + node_body[nd]] += tr / 3.0
            touched[m * nb + node_body[nd]] = True
    w = np.zeros(c)
    for m in range(c):
        acc = 0.0
        for b in range(nb):
            x = per_body[m * nb + b]
            fl = 1.0 / max(body_mass[b], 1e-300) if x > 0 else 0.0
            acc += max(x, fl)
        w[m] = acc
    wmin = np.inf
    for m in range(c):
        if w[m] > 0:
            wmin = min(wmin, w[m])
    if wmin == np.inf:
        big = 1.0
        for x in Bw.ravel():
            big = max(big, abs(x))
        wmin = 1.0 / big
    for m in range(c):
        if not w[m] > 0:
            w[m] = wmin
    return w


# ------------------------------------------------------------------ the contact models
@_helper
def _hc_impulse(v, vhat, fe0, dtk, d, dt):
    """Hunt & Crossley n(v), n'(v) (``contact_models.HuntCrossley.impulse``)."""
    if v < vhat:
        a = fe0 - dtk * v
        bb = 1.0 - d * v
        return dt * a * bb, -dt * (dtk * bb + d * a)
    return 0.0, 0.0


@_helper
def _hc_F(v, k, d, fe0, dt):
    return v * fe0 - 0.5 * dt * k * v * v - 0.5 * d * fe0 * v * v + d * dt * k * math.pow(v, 3.0) / 3.0


@_helper
def _evaluate(kind, P, vc, G, gamma, status, cost):
    """cost (c,), γ (c, 3), G (c, 3, 3), status (c,) of ``contact_models``' ``evaluate`` at vc; P the
    model's per-contact parameters P, built in ``solve_dense`` as ``sap.build_model`` builds the model: SAP
    (μ, R_t, R_n, v̂_n); Lagged / Similar (μ, ε, k/θ_n, d, f_e0/θ_n, v̂, F(v̂), dt k/θ_n, n₀/θ_n, dt)."""
    c = len(vc)
    for m in range(c):
        for i in range(3):
            for j in range(3):
                G[m, i, j] = 0.0
        if kind == SAP:
            mu, Rt, Rn, vhn = P[m, 0], P[m, 1], P[m, 2], P[m, 3]
            yt0, yt1 = -vc[m, 0] / Rt, -vc[m, 1] / Rt
            yn = -(vc[m, 2] - vhn) / Rn
            yr = math.sqrt(yt0 * yt0 + yt1 * yt1)
            mu_hat = mu * Rt / Rn
            mu_tilde2 = mu * mu * Rt / Rn
            stick = yr <= mu * yn
            opened = (yn <= -mu_hat * yr) and not stick
            t0, t1 = 0.0, 0.0
            if yr > 0:
                t0, t1 = yt0 / yr, yt1 / yr
            gamma[m, 0] = gamma[m, 1] = gamma[m, 2] = 0.0
            cost[m] = 0.0
            status[m] = OPEN
            if stick:
                gamma[m, 0], gamma[m, 1], gamma[m, 2] = yt0, yt1, yn
                cost[m] = 0.5 * (Rt * (yr * yr) + Rn * (yn * yn))
                if yn > 0:
                    status[m] = STICK
                G[m, 0, 0] = 1.0 / Rt
                G[m, 1, 1] = 1.0 / Rt
                G[m, 2, 2] = 1.0 / Rn
            elif not opened:
                s_hat = mu_hat * yr + yn
                den = 1.0 + mu_tilde2
                gn = s_hat / den
                gamma[m, 2] = gn
                gamma[m, 0] = (mu * gn) * t0
                gamma[m, 1] = (mu * gn) * t1
                cost[m] = 0.5 * Rn / den * (s_hat * s_hat)
                status[m] = SLIP
                f = Rn / den
                sy = s_hat / yr
                tt = (t0, t1)
                for i in range(2):
                    for j in range(2):
                        Pij = tt[i] * tt[j]
                        Ppij = (1.0 if i == j else 0.0) - Pij
                        G[m, i, j] = f * mu_hat * (mu_hat * Pij + sy * Ppij) / (Rt * Rt)
                ytn = f * mu_hat / (Rt * Rn)
                G[m, 0, 2] = G[m, 2, 0] = ytn * t0
                G[m, 1, 2] = G[m, 2, 1] = ytn * t1
                G[m, 2, 2] = f / (Rn * Rn)
            continue
        # Lagged / Similar: P = (mu, eps, k/θ, d, fe0/θ, v̂, F̂, dt k, n0)
        mu, eps, k, d, fe0, vhat, Fhat, dtk, n0 = P[m, 0], P[m, 1], P[m, 2], P[m, 3], P[m, 4], P[m, 5], P[m, 6], P[m, 7], P[m, 8]
        dt = P[m, 9]
        v0, v1, vn = vc[m, 0], vc[m, 1], vc[m, 2]
        vt2 = v0 * v0 + v1 * v1
        s = math.sqrt(vt2 + eps * eps)
        snorm = s - eps
        th0, th1 = v0 / s, v1 / s
        if kind == LAGGED:
            n_, dn = _hc_impulse(vn, vhat, fe0, dtk, d, dt)
            ft = mu * n0
            cost[m] = dt * (Fhat - _hc_F(min(vn, vhat), k, d, fe0, dt)) + ft * snorm
            gamma[m, 0] = -ft * th0
            gamma[m, 1] = -ft * th1
            gamma[m, 2] = n_
            s3 = math.pow(s, 3.0)
            G[m, 0, 0] = ft * (1.0 / s - v0 * v0 / s3)
            G[m, 0, 1] = ft * (0.0 / s - v0 * v1 / s3)
            G[m, 1, 0] = ft * (0.0 / s - v1 * v0 / s3)
            G[m, 1, 1] = ft * (1.0 / s - v1 * v1 / s3)
            G[m, 2, 2] = -dn
        else:
            z = vn - mu * snorm
            n_, dn = _hc_impulse(z, vhat, fe0, dtk, d, dt)
            cost[m] = dt * (Fhat - _hc_F(min(z, vhat), k, d, fe0, dt))
            gamma[m, 0] = -(mu * n_) * th0
            gamma[m, 1] = -(mu * n_) * th1
            gamma[m, 2] = n_
            s3 = math.pow(s, 3.0)
            a = -(mu * mu * dn)
            sc = mu * n_
            tt = (th0, th1)
            vv = (v0, v1)
            for i in range(2):
                for j in range(2):
                    G[m, i, j] = a * (tt[i] * tt[j]) + sc * ((1.0 if i == j else 0.0) / s - vv[i] * vv[j] / s3)
            G[m, 0, 2] = G[m, 2, 0] = (mu * dn) * th0
            G[m, 1, 2] = G[m, 2, 1] = (mu * dn) * th1
            G[m, 2, 2] = -dn
        status[m] = OPEN
        if n_ > 0:
            status[m] = SLIP if math.sqrt(vt2) > eps else STICK


@_helper
def _majorize(P, vc, G):
    """``LaggedModel.majorize_friction``: the friction block of G replaced by μ n₀/s I."""
    for m in range(len(vc)):
        eps = P[m, 1]
        s = math.sqrt(vc[m, 0] * vc[m, 0] + vc[m, 1] * vc[m, 1] + eps * eps)
        g = P[m, 0] * P[m, 8] / s
        G[m, 0, 0] = g
        G[m, 1, 1] = g
        G[m, 0, 1] = 0.0
        G[m, 1, 0] = 0.0


@_helper
def _line_at(kind, P, vc, dvc, a):
    """(Σ Δv_cᵀγ, Σ Δv_cᵀ G Δv_c) at vc + a dvc along dvc (the models' ``line``)."""
    c = len(vc)
    d1s, d2s = np.zeros(c), np.zeros(c)         # per contact, summed as numpy sums them
    for m in range(c):
        if kind == SAP:
            mu, Rt, Rn, vhn = P[m, 0], P[m, 1], P[m, 2], P[m, 3]
            mu_hat = mu * Rt / Rn
            dt0, dt1, dn = dvc[m, 0], dvc[m, 1], dvc[m, 2]
            dt2 = dt0 * dt0 + dt1 * dt1
            yt0 = -vc[m, 0] / Rt + a * (-dt0 / Rt)
            yt1 = -vc[m, 1] / Rt + a * (-dt1 / Rt)
            yn = -(vc[m, 2] - vhn) / Rn + a * (-dn / Rn)
            yr = math.sqrt(yt0 * yt0 + yt1 * yt1)
            stick = yr <= mu * yn
            if stick:
                d1s[m] = (dt0 * yt0 + dt1 * yt1) + dn * yn
                d2s[m] = dt2 / Rt + dn * dn / Rn
            elif not (yn <= -mu_hat * yr):
                den = 1.0 + mu * mu * Rt / Rn
                s_hat = mu_hat * yr + yn
                gn = s_hat / den
                td = (yt0 * dt0 + yt1 * dt1) / yr
                d1s[m] = gn * (mu * td + dn)
                f = Rn / den
                d2s[m] = (f * mu_hat * (mu_hat * td * td + s_hat / yr * (dt2 - td * td)) / (Rt * Rt)
                        + 2.0 * f * mu_hat / (Rt * Rn) * td * dn + f / (Rn * Rn) * (dn * dn))
            continue
        mu, eps, d, fe0, vhat, dtk, n0, dt = P[m, 0], P[m, 1], P[m, 3], P[m, 4], P[m, 5], P[m, 7], P[m, 8], P[m, 9]
        vt0, vt1, vn0 = vc[m, 0], vc[m, 1], vc[m, 2]
        dt0, dt1, dn = dvc[m, 0], dvc[m, 1], dvc[m, 2]
        eps2 = eps * eps
        dt2 = dt0 * dt0 + dt1 * dt1
        b0 = vt0 * dt0 + vt1 * dt1
        u0, u1 = vt0 + a * dt0, vt1 + a * dt1
        s = math.sqrt((u0 * u0 + u1 * u1) + eps2)
        if kind == LAGGED:
            ft = mu * n0
            n_, dnv = _hc_impulse(vn0 + a * dn, vhat, fe0, dtk, d, dt)
            vd = b0 + a * dt2
            d1s[m] = -ft * vd / s + n_ * dn
            d2s[m] = ft * (dt2 / s - vd * vd / math.pow(s, 3.0)) - dnv * (dn * dn)
        else:
            n_, dnz = _hc_impulse(vn0 + a * dn - mu * (s - eps), vhat, fe0, dtk, d, dt)
            td = (b0 + a * dt2) / s
            d1s[m] = n_ * (dn - mu * td)
            d2s[m] = (-((mu * mu) * dnz) * td * td + mu * n_ * (dt2 - td * td) / s
                    + 2.0 * mu * dnz * td * dn - dnz * dn * dn)
    return _psum(d1s, c), _psum(d2s, c)


@_helper
def _line_search(kind, P, vc, dvc, c0, c1, d0, alpha_max, max_ls):
    """``NewtonContactSolver._line_search``: rtsafe on dℓ/dα; returns (α, trials)."""
    if not d0 < 0:
        return 0.0, 0
    scale = -d0
    g, q = _line_at(kind, P, vc, dvc, alpha_max)
    f_max, df_max = (c0 + alpha_max * c1 - g) / scale, (c1 + q) / scale
    trials = 1
    if f_max <= 0:
        return alpha_max, trials
    lo, hi = 0.0, alpha_max
    a = _rtsafe_start(df_max, alpha_max)
    a_tol = line_search.A_TOL * a
    step_old = hi - lo
    for _ in range(max_ls):
        g, q = _line_at(kind, P, vc, dvc, a)
        f, df = (c0 + a * c1 - g) / scale, (c1 + q) / scale
        trials += 1
        if abs(f) <= line_search.F_TOL:
            break
        a, lo, hi, step_old = _rtsafe_step(a, f, df, lo, hi, step_old)
        if _rtsafe_done(step_old, a_tol, lo, hi):
            break
    return a, trials


@_helper
def _cholesky_solve(H, r):
    """H⁻¹ r by LAPACK's ``dpotrf`` / ``dpotrs`` on H's lower triangle; (x, L, info), L column-major."""
    n = len(r)
    L = H.T.copy()                     # its buffer read column-major is H
    x = r.copy()
    lower = np.array([76], np.uint8)   # 'L'
    size = np.array([n], np.int32)
    one = np.array([1], np.int32)
    info = np.zeros(1, np.int32)
    _dpotrf(lower.ctypes, size.ctypes, L.ctypes, size.ctypes, info.ctypes)
    if info[0] != 0:
        return x, L, info[0]
    _dpotrs(lower.ctypes, size.ctypes, one.ctypes, L.ctypes, size.ctypes, x.ctypes, size.ctypes, info.ctypes)
    return x, L, info[0]


# ------------------------------------------------------------------ one step
@njit(cache=True)
def solve_dense(kind, o, blocks_A, dense_at, b, vk, vhat_prev, prescribed, lumped_nodes, lumped_blocks, fixed,
                dof_fixed, node_a, node_b, frame, v_world, v_anchor, phi, mu_axes, vn_node, vn_weight, node_body,
                body_mass, sigma, k_auto, k_sap, tau_d_auto, tau_d, stiffness, hc_d, vs, e_rest):
    """One step's Newton solve (module docstring) from what ``HostContactProblem`` read: A's blocks
    ``blocks_A`` at the flat positions ``dense_at`` of a dense (3n, 3n), b, v_k, the previous v̂, the
    prescribed nodes' v̂ (k, 3), the lumped nodes' mass blocks (``delassus_estimate``), the contacts'
    columns, the virtual nodes' links, and the filled per-pair parameters; ``o``: the float options
    ``OPTIONS``. Returns (v, γ (c, 3) applied, status, iterations, e_m, converged, line-search trials,
    error code, costs, momentum errors, alphas, J's nodes / blocks / valid (S-scaled), G (c, 3, 3), the
    model's parameters P (c, 10), Ã dense, the offset of v_c = J v + off and S (c, 3), γ = S γ̃)."""
    dt, s_, ch, co, beta = o[0], o[1], o[2], o[3], o[4]
    v_imp, max_rec, rel_tol, abs_tol = o[5], o[6], o[7], o[8]
    max_it, max_ls, alpha_max, maj, rb_beta, end = int(o[9]), int(o[10]), o[11], o[12], o[13], o[14] != 0.0
    n3 = len(b)
    n = n3 // 3
    # Ã = (s/c_h) A, b̃ = s b + (s c_o/c_h) A v_k, the warm start, the Delassus blocks (solve_host)
    A = np.zeros((n3, n3))
    flat = blocks_A.ravel()
    for i in range(len(dense_at)):
        A[dense_at[i] // n3, dense_at[i] % n3] = flat[i]
    At = (s_ / ch) * A
    bt = s_ * b + (s_ * co / ch) * (A @ vk) if co != 0.0 else s_ * b + 0.0
    v = ch * vhat_prev + co * vk if co == 0.0 else vk.copy()
    Bw = np.empty((n, 3, 3))
    j = 0
    for i in range(n):
        if fixed[i]:
            for x in range(3):
                v[3 * i + x] = ch * prescribed[j, x] + co * vk[3 * i + x]
            j += 1
        for x in range(3):
            for y in range(3):
                Bw[i, x, y] = At[3 * i + x, 3 * i + y]
    for i in range(len(lumped_nodes)):
        for x in range(3):
            for y in range(3):
                Bw[lumped_nodes[i], x, y] = lumped_blocks[i, x, y]
    c = len(node_a)
    off = np.empty((c, 3))
    for m in range(c):           # ContactSet.world_offset + anchor_offset
        for i in range(3):
            wv = (frame[m, i, 0] * v_world[m, 0] + frame[m, i, 1] * v_world[m, 1]) + frame[m, i, 2] * v_world[m, 2]
            ow = ((-wv) if node_a[m] < 0 else 0.0) + (wv if node_b[m] < 0 else 0.0)
            off[m, i] = ow + ((frame[m, i, 0] * v_anchor[m, 0] + frame[m, i, 1] * v_anchor[m, 1])
                              + frame[m, i, 2] * v_anchor[m, 2])
    nodes, blocks, valid, fblocks = _jacobian(node_a, node_b, frame, vn_node, vn_weight, n, fixed)
    K = nodes.shape[1]
    w = _delassus(nodes, fblocks, valid, fixed, Bw, node_body, body_mass)
    vc_prev = _matvec(nodes, blocks, vk, off)
    vc_hat_prev = _matvec(nodes, blocks, vhat_prev, off) if co != 0.0 else vc_prev
    # friction_scaling
    mu = np.empty(c)
    iso = True
    for m in range(c):
        mu[m] = max(mu_axes[m, 0], mu_axes[m, 1])
        if mu_axes[m, 0] != mu_axes[m, 1]:
            iso = False
        if not (mu[m] >= 0) or not np.isfinite(mu[m]):
            return (v, np.zeros((c, 3)), np.zeros(c, np.int32), 0, 0.0, False, 0, BAD_FRICTION, np.zeros(0),
                    np.zeros(0), np.zeros(0), nodes, blocks, valid, np.zeros((c, 3, 3)), np.zeros((c, 10)), At,
                    off, np.ones((c, 3)))
    T = np.ones((c, 3))
    r_scale = np.ones(c)
    if not iso:
        for m in range(c):
            for i in range(2):
                T[m, i] = mu_axes[m, i] / mu[m] if mu[m] > 0 else 1.0
            r_scale[m] = min(T[m, 0] if T[m, 0] > 0 else 1.0, T[m, 1] if T[m, 1] > 0 else 1.0)
    midpoint = co != 0.0 and not end
    any_e = False
    for m in range(c):
        if e_rest[m] > 0:
            any_e = True
    P = np.zeros((c, 10))
    th = np.ones((c, 3))
    for m in range(c):
        # impacts and the midpoint weights (sap.impacts, contact_weights)
        vn_k = vc_prev[m, 2]
        h = dt if co == 0.0 else 0.5 * dt
        if co != 0.0 and e_rest[m] > 0:
            h = dt
        impact = (vn_k < -v_imp) and (phi[m] + h * vn_k <= 0.0)
        phi0 = phi[m]
        vn0 = vn_k
        if midpoint:
            th[m, 0] = th[m, 1] = 0.5
            th[m, 2] = 1.0 if impact else 0.5
            if th[m, 2] == 1.0:
                phi0 = min(phi0, 0.0)
            vn0 = vc_hat_prev[m, 2]
        rebound = e_rest[m] * max(-vn_k, 0.0) if (any_e and impact) else 0.0
        bounce = rebound > 0
        R_t = sigma[m] * w[m]
        if not iso:
            R_t = R_t * (r_scale[m] * r_scale[m])
        th_t, th_n = th[m, 0], th[m, 2]
        mu_u = mu[m] * th_n / th_t
        if kind == SAP:
            td = beta * dt / math.pi if tau_d_auto[m] else tau_d[m]
            k = k_sap[m]
            if bounce:
                td = 0.0
            beta_n = rb_beta * beta if (bounce and k_auto[m]) else beta
            R_n = max(beta_n * beta_n / (4 * math.pi ** 2) * w[m], 1.0 / (dt * k * (dt + td)))
            vhn = -phi0 / dt if phi0 > 0 else -phi0 / (dt + td)
            if midpoint:
                vhn = min(vhn, max_rec)
            if bounce:
                vhn = max(vhn, rebound)
            P[m, 0], P[m, 1], P[m, 2], P[m, 3] = mu_u, max(R_t * (th_t * th_t), 1e-300), R_n * (th_n * th_n), vhn
            continue
        k = 4 * math.pi ** 2 / (beta * beta * w[m] * dt * dt) if k_auto[m] else stiffness[m]
        d, v_s = hc_d[m], vs[m]
        fe0 = -k * phi0
        n0 = dt * max(fe0, 0.0) * max(0.0, 1.0 - d * vn0)
        eps = max(v_s, th_t * mu[m] * R_t * n0)
        if not iso:
            eps = eps * r_scale[m]
        if bounce:
            if k_auto[m]:
                k = k / (rb_beta * rb_beta)
            fe0 = k * max(-phi0, dt * rebound)
            d = 0.0
        kk, ff = k / th_n, fe0 / th_n
        dtk = dt * kk
        inv_d = 1.0 / d if d > 0 else np.inf
        vhat = min(ff / dtk, inv_d)
        P[m, 0], P[m, 1], P[m, 2], P[m, 3], P[m, 4] = mu_u, eps, kk, d, ff
        P[m, 5], P[m, 6], P[m, 7], P[m, 8], P[m, 9] = vhat, _hc_F(vhat, kk, d, ff, dt), dtk, n0 / th_n, dt
    # S = T θ scales J's rows; off ← S off + T (1 − θ) v_c,k
    scaled = midpoint or not iso
    S = np.ones((c, 3))
    off_m = off
    if scaled:
        off_m = np.empty((c, 3))
        for m in range(c):
            for i in range(3):
                S[m, i] = T[m, i] * th[m, i]
                off_m[m, i] = S[m, i] * off[m, i] + T[m, i] * (1.0 - th[m, i]) * vc_prev[m, i]
                for q in range(K):
                    for j in range(3):
                        blocks[m, q, i, j] *= S[m, i]
                        fblocks[m, q, i, j] *= S[m, i]
    # D of SAP eq. 26 / 32: diag(Ã)^(-1/2), zero on prescribed DOFs
    D = np.zeros(n3)
    for i in range(n3):
        if not dof_fixed[i] and At[i, i] > 0:
            D[i] = 1.0 / math.sqrt(At[i, i])
    # the Newton iterations (FullSpace)
    costs = np.zeros(max_it + 1)
    errors = np.zeros(max_it + 1)
    alphas = np.zeros(max_it + 1)
    G = np.zeros((c, 3, 3))
    gamma = np.zeros((c, 3))
    status = np.zeros(c, np.int32)
    cost_m = np.zeros(c)
    ls_total = 0
    converged = False
    it = 0
    e_m = 0.0
    code = OK
    evaluations = 0
    while True:
        vc = _matvec(nodes, blocks, v, off_m)
        _evaluate(kind, P, vc, G, gamma, status, cost_m)
        Av = At @ v
        r = Av - bt
        jc = _rmatvec(nodes, fblocks, gamma, n3)
        grad = r - jc
        for i in range(n3):
            if dof_fixed[i]:
                grad[i] = 0.0
        quadratic = np.dot(0.5 * v, Av) - np.dot(bt, v)
        gnorm, scale = _norm(D * grad), max(_norm(D * Av), _norm(D * jc))
        cm = _psum(cost_m, c)
        costs[evaluations] = quadratic + cm
        e_m = gnorm / scale if scale > 0 else gnorm
        errors[evaluations] = e_m
        evaluations += 1
        if not np.isfinite(gnorm):
            code = NON_FINITE
            break
        if gnorm < abs_tol + rel_tol * scale:
            converged = True
            break
        if it >= max_it:
            break
        if e_m > maj and kind == LAGGED:
            _majorize(P, vc, G)
        H = np.zeros((n3, n3))
        for m in range(c):             # H = Ã + Σ J_mᵀ G_m J_m (DenseNewtonMatrix.matrix's products)
            Jm = np.empty((3, 3 * K))
            for q in range(K):
                for i in range(3):
                    for j in range(3):
                        Jm[i, 3 * q + j] = fblocks[m, q, i, j]
            Gm = np.empty((3, 3))
            for i in range(3):
                for j in range(3):
                    Gm[i, j] = G[m, i, j]
            Hm = Jm.T.copy() @ (Gm @ Jm)
            for qa in range(K):
                for qb in range(K):
                    for i in range(3):
                        for j in range(3):
                            H[3 * nodes[m, qa] + i, 3 * nodes[m, qb] + j] += Hm[3 * qa + i, 3 * qb + j]
        H = At + H
        dv, _, info = _cholesky_solve(H, -grad)
        if info != 0:
            code = NOT_SPD
            break
        for i in range(n3):
            if dof_fixed[i]:
                dv[i] = 0.0
        dvc = _matvec(nodes, fblocks, dv, np.zeros((c, 3)))
        c0 = np.dot(dv, r)
        c1 = np.dot(dv, At @ dv)
        d0 = np.dot(dv, grad)
        alpha, nls = _line_search(kind, P, vc, dvc, c0, c1, d0, alpha_max, max_ls)
        ls_total += nls
        alphas[it] = alpha
        it += 1
        if alpha == 0.0:
            converged = e_m < 1e3 * max(rel_tol, 1e-12)
            break
        v = v + alpha * dv
    if scaled:
        gamma = S * gamma
    return (v, gamma, status, it, e_m, converged, ls_total, code, costs[:evaluations], errors[:evaluations], alphas[:it],
            nodes, blocks, valid, G, P, At, off_m, S)

"""Contact models of the Newton path: cost ℓ_m, impulse γ_m and Hessian block G_m per contact.

Every model here is a convex function ``ℓ_m(v_c)`` of the contact velocity
``v_c = [v_t1, v_t2, v_n]`` (m/s, contact frame rows (t1, t2, n), ``v_n > 0`` separating)
of one contact, such that

    γ_m = -∂ℓ_m/∂v_c    (impulse, N s, in the contact frame)
    G_m =  ∂²ℓ_m/∂v_c²  (3x3, symmetric positive semidefinite; SAP's extension at kinks)

(docs/THEORY.md §4). Every model also has ``line_derivatives(vc, dvc)``: the two numbers the exact
line search needs along a search line, ``Σ_m Δv_cᵀ γ_m`` and ``Σ_m Δv_cᵀ G_m Δv_c`` (SAP §IV-C),
computed without forming the 3x3 blocks, the cost or the status. All functions are vectorized
over contacts: inputs are arrays of shape ``(c,)`` / ``(c, 3)``, outputs ``cost (c,)``,
``gamma (c, 3)``, ``G (c, 3, 3)`` and a status ``(c,)`` (OPEN / STICK / SLIP, same meaning as
COND: OPEN = no impulse, STICK = inside the regularized stiction region, SLIP = sliding).
No Python loop runs over contacts.

Units: impulses (N s) and velocities (m/s), i.e. the implicit-Euler form of SAP and ICF.
The Newton solver (``solvers.sap``) maps the midpoint integrator onto this form.

Models
------
- ``SapModel``: SAP (Castro, Permenter, Han), ``γ = P_F(y)``, ``y = -R⁻¹(v_c - v̂_c)``,
  analytic projection eq. 27, cost eq. 35, gradient eq. 36, Hessian eq. 37 mapped to
  velocity space, ``G = R⁻¹ ∇²_y ℓ_R R⁻¹``; regularization eqs. 29-30.
- ``LaggedModel`` and ``SimilarModel``: Hunt & Crossley compliance with regularized
  friction (ICF, Castro et al.; formulas as restated in docs/THEORY.md §4). The elastic force at
  the start of the step is ``f_e0 = -k φ₀`` *with its sign*: a positive gap gives a
  negative ``f_e0``, so the impulse only switches on when ``v_n < -φ₀/dt`` (the gap closes
  within the step; speculative contact). The ICF paper writes ``f_e0 = k·max(0, -φ₀)``, which
  would push a body approaching from a positive gap away before it touches; for
  ``φ₀ ≤ 0`` the two agree. The lagged normal impulse uses ``max(0, f_e0)``.
  The cost is shifted so that ``ℓ_m = 0`` where the impulse is zero (``ℓ = -(N(v) - N(v̂))``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contact.contacts import OPEN, SLIP, STICK

_TINY = 1e-300


def _soft_norm(vt: np.ndarray, eps: np.ndarray):
    """s = sqrt(|v_t|² + ε²), ‖v_t‖ₛ = s - ε, t̂ₛ = v_t / s (docs/THEORY.md §4), and |v_t|²."""
    vt2 = np.einsum("ci,ci->c", vt, vt)
    s = np.sqrt(vt2 + eps * eps)
    return s, s - eps, vt / s[:, None], vt2


def _tangent_hessian(vt: np.ndarray, s: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """scale · (I/s - v_t v_tᵀ/s³): the Hessian of scale·‖v_t‖ₛ, shape (c, 2, 2)."""
    eye = np.eye(2)[None]
    outer = vt[:, :, None] * vt[:, None, :]
    return scale[:, None, None] * (eye / s[:, None, None] - outer / (s**3)[:, None, None])


# --------------------------------------------------------------------------- SAP
@dataclass
class SapModel:
    """SAP contact model (SAP §V). All arrays have shape (c,).

    mu: friction coefficient. R_t, R_n: regularization (s/kg, i.e. (m/s)/(N s); eqs. 29-30).
    vhat_n: ``-φ₀/(dt + τ_d)`` (m/s), the stabilization velocity of ``v̂_c = [0, 0, v̂_n]``.
    """

    mu: np.ndarray
    R_t: np.ndarray
    R_n: np.ndarray
    vhat_n: np.ndarray
    name = "sap"

    def evaluate(self, vc: np.ndarray, hessian: bool = True):
        mu, Rt, Rn = self.mu, self.R_t, self.R_n
        c = len(mu)
        yt = -vc[:, :2] / Rt[:, None]
        yn = -(vc[:, 2] - self.vhat_n) / Rn
        yr = np.sqrt(np.einsum("ci,ci->c", yt, yt))
        mu_hat = mu * Rt / Rn
        mu_tilde2 = mu * mu * Rt / Rn
        stick = yr <= mu * yn                     # region I (includes y = 0 with y_n >= 0)
        opened = (yn <= -mu_hat * yr) & ~stick    # region III (closed: zero impulse on its boundary)
        slide = ~(stick | opened)
        that = np.zeros((c, 2))
        nz = yr > 0
        that[nz] = yt[nz] / yr[nz, None]
        gamma = np.zeros((c, 3))
        cost = np.zeros(c)
        # stiction: γ = y, ℓ = ½ (R_t y_r² + R_n y_n²)
        gamma[stick, :2] = yt[stick]
        gamma[stick, 2] = yn[stick]
        cost[stick] = 0.5 * (Rt[stick] * yr[stick] ** 2 + Rn[stick] * yn[stick] ** 2)
        # sliding: γ_n = (y_n + μ̂ y_r)/(1 + μ̃²), γ_t = μ γ_n t̂, ℓ = R_n/(2(1+μ̃²)) (y_n + μ̂ y_r)²
        s_hat = mu_hat[slide] * yr[slide] + yn[slide]
        den = 1.0 + mu_tilde2[slide]
        gn = s_hat / den
        gamma[slide, 2] = gn
        gamma[slide, :2] = (mu[slide] * gn)[:, None] * that[slide]
        cost[slide] = 0.5 * Rn[slide] / den * s_hat**2
        status = np.full(c, OPEN, np.int32)
        status[stick & (yn > 0)] = STICK
        status[slide] = SLIP
        if not hessian:
            return cost, gamma, None, status
        G = np.zeros((c, 3, 3))
        G[stick, 0, 0] = 1.0 / Rt[stick]
        G[stick, 1, 1] = 1.0 / Rt[stick]
        G[stick, 2, 2] = 1.0 / Rn[stick]
        if slide.any():
            # eq. 37 in y, mapped to v_c: G = R⁻¹ ∇²_y ℓ_R R⁻¹ (y = -R⁻¹(v_c - v̂_c); signs cancel)
            t = that[slide]
            P = t[:, :, None] * t[:, None, :]
            Pp = np.eye(2)[None] - P
            mh = mu_hat[slide]
            rn, rt = Rn[slide], Rt[slide]
            f = rn / den
            ytt = f[:, None, None] * mh[:, None, None] * (mh[:, None, None] * P
                                                          + (s_hat / yr[slide])[:, None, None] * Pp)
            G[slide, :2, :2] = ytt / (rt * rt)[:, None, None]
            ytn = (f * mh / (rt * rn))[:, None] * t
            G[slide, :2, 2] = ytn
            G[slide, 2, :2] = ytn
            G[slide, 2, 2] = f / (rn * rn)
        return cost, gamma, G, status

    def line_derivatives(self, vc: np.ndarray, dvc: np.ndarray):
        """(Σ Δv_cᵀγ, Σ Δv_cᵀ G Δv_c) at ``vc`` along ``dvc``: ``evaluate``'s γ and G (same
        regions, same extension at the boundaries) contracted with Δv_c, no 3x3 blocks formed."""
        return self.line(vc, dvc)(0.0)

    def line(self, vc: np.ndarray, dvc: np.ndarray):
        """``α ↦ line_derivatives(vc + α dvc, dvc)`` with what does not depend on α computed once."""
        mu, Rt, Rn = self.mu, self.R_t, self.R_n
        mu_hat = mu * Rt / Rn
        dt_, dn = dvc[:, :2], dvc[:, 2]
        dt2 = np.einsum("ci,ci->c", dt_, dt_)
        dyt = -dt_ / Rt[:, None]
        yt0 = -vc[:, :2] / Rt[:, None]
        yn0 = -(vc[:, 2] - self.vhat_n) / Rn
        dyn = -dn / Rn
        return lambda a: self._line_at(yt0 + a * dyt, yn0 + a * dyn, mu_hat, dt_, dn, dt2)

    def _line_at(self, yt, yn, mu_hat, dt_, dn, dt2):
        mu, Rt, Rn = self.mu, self.R_t, self.R_n
        yr = np.sqrt(np.einsum("ci,ci->c", yt, yt))
        stick = yr <= mu * yn
        slide = ~stick & ~(yn <= -mu_hat * yr)
        # stiction: γ = y, G = R⁻¹
        d1 = np.where(stick, np.einsum("ci,ci->c", dt_, yt) + dn * yn, 0.0)
        d2 = np.where(stick, dt2 / Rt + dn * dn / Rn, 0.0)
        if slide.any():
            i = np.flatnonzero(slide)
            mh, rt, rn, r = mu_hat[i], Rt[i], Rn[i], yr[i]
            den = 1.0 + mu[i] * mu[i] * rt / rn
            s_hat = mh * r + yn[i]
            gn = s_hat / den
            td = np.einsum("ci,ci->c", yt[i], dt_[i]) / r          # t̂ᵀΔv_t, t̂ = y_t/y_r
            d1[i] = gn * (mu[i] * td + dn[i])
            f = rn / den
            d2[i] = (f * mh * (mh * td * td + s_hat / r * (dt2[i] - td * td)) / (rt * rt)
                     + 2.0 * f * mh / (rt * rn) * td * dn[i] + f / (rn * rn) * dn[i] ** 2)
        return float(d1.sum()), float(d2.sum())


# --------------------------------------------------------------------------- Hunt & Crossley
@dataclass
class HuntCrossley:
    """Discrete Hunt & Crossley normal impulse ``n(v) = dt (f_e0 - dt k v)₊ (1 - d v)₊`` (ICF §VI).

    k: stiffness (N/m), d: dissipation (s/m), fe0: ``-k φ₀`` (N, signed), dt: step (s).
    """

    k: np.ndarray
    d: np.ndarray
    fe0: np.ndarray
    dt: float

    def __post_init__(self):
        inv_d = np.divide(1.0, self.d, out=np.full(np.shape(self.d), np.inf), where=self.d > 0)   # 1/d, ∞ at d = 0
        self._dtk = self.dt * self.k                                     # kept: the line search calls impulse often
        self.v_hat = np.minimum(self.fe0 / self._dtk, inv_d)              # impulse is zero for v >= v̂
        self._F_hat = self._F(self.v_hat)

    def _F(self, v):
        """Antiderivative of (f_e0 - dt k v)(1 - d v) (N m/s), F(0) = 0."""
        k, d, fe0, dt = self.k, self.d, self.fe0, self.dt
        return v * fe0 - 0.5 * dt * k * v * v - 0.5 * d * fe0 * v * v + d * dt * k * v**3 / 3.0

    def impulse(self, v):
        """n(v) (N s) and n'(v) (N s per m/s, <= 0)."""
        d, fe0, dt, dtk = self.d, self.fe0, self.dt, self._dtk
        on = v < self.v_hat
        a = fe0 - dtk * v
        bb = 1.0 - d * v
        n = np.where(on, dt * a * bb, 0.0)
        dn = np.where(on, -dt * (dtk * bb + d * a), 0.0)
        return n, dn

    def cost(self, v):
        """-(N(v) - N(v̂)) >= 0 with N' = n: the normal part of ℓ_m (J)."""
        vv = np.minimum(v, self.v_hat)
        return self.dt * (self._F_hat - self._F(vv))


@dataclass
class LaggedModel:
    """ICF Lagged: ``ℓ = -N(v_n) + μ n₀ ‖v_t‖ₛ``, friction with the lagged normal impulse n₀.

    hc: the normal law; mu (c,); n0 (c,): lagged normal impulse (N s); eps (c,): soft-norm
    regularization ``max(v_s, μ R_t n₀)`` (m/s).
    """

    hc: HuntCrossley
    mu: np.ndarray
    n0: np.ndarray
    eps: np.ndarray
    name = "lagged"

    def evaluate(self, vc: np.ndarray, hessian: bool = True):
        vt, vn = vc[:, :2], vc[:, 2]
        s, snorm, that, vt2 = _soft_norm(vt, self.eps)
        n, dn = self.hc.impulse(vn)
        ft = self.mu * self.n0
        cost = self.hc.cost(vn) + ft * snorm
        gamma = np.empty((len(vn), 3))
        gamma[:, :2] = -ft[:, None] * that
        gamma[:, 2] = n
        status = _hc_status(n, vt2, self.eps)
        if not hessian:
            return cost, gamma, None, status
        G = np.zeros((len(vn), 3, 3))
        G[:, :2, :2] = _tangent_hessian(vt, s, ft)
        G[:, 2, 2] = -dn
        return cost, gamma, G, status

    def majorize_friction(self, vc: np.ndarray, G: np.ndarray) -> None:
        """Replace, in place, the friction block of ``G`` (from ``evaluate`` at ``vc``) by the
        isotropic curvature ``μ n₀/s I`` ⪰ ``μ n₀ (I/s − v_t v_tᵀ/s³)``: the curvature of the
        quadratic that majorizes ``μ n₀ ‖v_t‖ₛ`` at v_t (lagged diffusivity). Still a descent
        Hessian; it does not let a Newton step run a sliding contact far through v_t = 0."""
        vt = vc[:, :2]
        s = np.sqrt(np.einsum("ci,ci->c", vt, vt) + self.eps * self.eps)
        G[:, :2, :2] = (self.mu * self.n0 / s)[:, None, None] * np.eye(2)[None]

    def line_derivatives(self, vc: np.ndarray, dvc: np.ndarray):
        """(Σ Δv_cᵀγ, Σ Δv_cᵀ G Δv_c) at ``vc`` along ``dvc`` without the 3x3 blocks (``evaluate``)."""
        return self.line(vc, dvc)(0.0)

    def line(self, vc: np.ndarray, dvc: np.ndarray):
        """``α ↦ line_derivatives(vc + α dvc, dvc)`` with what does not depend on α computed once."""
        vt0, dt_, vn0, dn = vc[:, :2], dvc[:, :2], vc[:, 2], dvc[:, 2]
        eps2 = self.eps * self.eps
        ft = self.mu * self.n0
        dt2 = np.einsum("ci,ci->c", dt_, dt_)
        b0 = np.einsum("ci,ci->c", vt0, dt_)              # v_t·Δv_t at α = 0; + α |Δv_t|² along the line
        dn2 = dn * dn

        def at(a):
            vt = vt0 + a * dt_
            s = np.sqrt(np.einsum("ci,ci->c", vt, vt) + eps2)
            n, dnv = self.hc.impulse(vn0 + a * dn)
            vd = b0 + a * dt2
            d1 = -ft * vd / s + n * dn
            d2 = ft * (dt2 / s - vd * vd / s**3) - dnv * dn2
            return float(d1.sum()), float(d2.sum())
        return at


@dataclass
class SimilarModel:
    """ICF Similar: ``z = v_n - μ‖v_t‖ₛ``, ``ℓ = -N(z)``, ``γ = [-μ n(z) t̂ₛ; n(z)]`` (ICF App. A)."""

    hc: HuntCrossley
    mu: np.ndarray
    eps: np.ndarray
    name = "similar"

    def evaluate(self, vc: np.ndarray, hessian: bool = True):
        vt, vn = vc[:, :2], vc[:, 2]
        mu = self.mu
        s, snorm, that, vt2 = _soft_norm(vt, self.eps)
        z = vn - mu * snorm
        n, dn = self.hc.impulse(z)
        cost = self.hc.cost(z)
        gamma = np.empty((len(vn), 3))
        gamma[:, :2] = -(mu * n)[:, None] * that
        gamma[:, 2] = n
        status = _hc_status(n, vt2, self.eps)
        if not hessian:
            return cost, gamma, None, status
        G = np.zeros((len(vn), 3, 3))
        P = that[:, :, None] * that[:, None, :]
        G[:, :2, :2] = -(mu * mu * dn)[:, None, None] * P + _tangent_hessian(vt, s, mu * n)
        gtn = (mu * dn)[:, None] * that
        G[:, :2, 2] = gtn
        G[:, 2, :2] = gtn
        G[:, 2, 2] = -dn
        return cost, gamma, G, status

    def line_derivatives(self, vc: np.ndarray, dvc: np.ndarray):
        """(Σ Δv_cᵀγ, Σ Δv_cᵀ G Δv_c) at ``vc`` along ``dvc`` without the 3x3 blocks (``evaluate``)."""
        return self.line(vc, dvc)(0.0)

    def line(self, vc: np.ndarray, dvc: np.ndarray):
        """``α ↦ line_derivatives(vc + α dvc, dvc)`` with what does not depend on α computed once."""
        vt0, dt_, vn0, dn = vc[:, :2], dvc[:, :2], vc[:, 2], dvc[:, 2]
        mu, eps = self.mu, self.eps
        eps2, mu2 = eps * eps, mu * mu
        dt2 = np.einsum("ci,ci->c", dt_, dt_)
        b0 = np.einsum("ci,ci->c", vt0, dt_)

        def at(a):
            vt = vt0 + a * dt_
            s = np.sqrt(np.einsum("ci,ci->c", vt, vt) + eps2)
            n, dnz = self.hc.impulse(vn0 + a * dn - mu * (s - eps))
            td = (b0 + a * dt2) / s                                # t̂ₛᵀΔv_t, t̂ₛ = v_t/s
            d1 = n * (dn - mu * td)
            d2 = (-(mu2 * dnz) * td * td + mu * n * (dt2 - td * td) / s
                  + 2.0 * mu * dnz * td * dn - dnz * dn * dn)
            return float(d1.sum()), float(d2.sum())
        return at


def _hc_status(n, vt2, eps):
    """OPEN / STICK / SLIP per contact for normal impulses n and squared slip speeds |v_t|² ``vt2``."""
    status = np.full(len(n), OPEN, np.int32)
    on = n > 0
    slip = np.sqrt(vt2) > eps
    status[on & ~slip] = STICK
    status[on & slip] = SLIP
    return status


MODELS = {"sap": SapModel, "lagged": LaggedModel, "similar": SimilarModel}

"""Friction-cone projections as Taichi functions (COND eq. 23, §III-E), used by COND.

Impulses are in the contact frame, ordered like the frame rows: ``lam = (lam_t1, lam_t2, lam_n)``.
The cone is ellipsoidal in general (COND §III-E):

    C = { lam_n >= 0,  (lam_t1/mu1)^2 + (lam_t2/mu2)^2 <= lam_n^2 }   (isotropic when mu1 == mu2)

- ``project_strict`` (COND eq. 23, "strict"): lam_n = max(lam*_n, 0), then the tangential part
  is the Euclidean projection of lam*_t onto the cross-section {(t1/mu1)^2 + (t2/mu2)^2 <= lam_n^2}
  (a disk of radius mu*lam_n when isotropic). With the diagonal surrogate Delassus operator of
  COND (Gamma = gamma I) this is the exact Signorini-Coulomb solution with maximal dissipation
  (COND Prop. 3 and Prop. 5); for an ellipse the projection is found by a 1-D Newton root find
  on the Lagrange multiplier (monotone, started from a proven lower bound).
- ``project_cone`` (COND eq. 23, "proximal"): Euclidean projection onto C (closed form when
  isotropic; a 1-D bisection on the multiplier when anisotropic). Fixed points are Anitescu's
  CCP (COND eq. 32).

``project(lam_star, mu1, mu2, op)`` dispatches on ``op`` (STRICT or PROXIMAL) and also returns
whether the tangential part was clipped (slip). ``project_batch`` is a kernel for tests and tools.
"""
from ..backend import ti

STRICT, PROXIMAL = 0, 1
_TINY = 1e-300


@ti.func
def project_ellipse(p: ti.math.vec2, a: float, b: float) -> ti.math.vec2:
    """Euclidean projection of the point p onto the filled ellipse (x/a)^2 + (y/b)^2 <= 1 (a, b >= 0).

    Outside points: x = p_x a^2/(a^2+t), y = p_y b^2/(b^2+t) with t > 0 the root of
    f(t) = (p_x a/(a^2+t))^2 + (p_y b/(b^2+t))^2 - 1, convex and decreasing, so Newton from the
    lower bound t_lo = sqrt(p_x^2 a^2 + p_y^2 b^2) - max(a^2, b^2) increases monotonically to it.
    """
    out = p
    a2 = a * a
    b2 = b * b
    inside = p[0] * p[0] * b2 + p[1] * p[1] * a2 <= a2 * b2
    if a2 <= 0.0 and b2 <= 0.0:
        out = ti.Vector([0.0, 0.0])
    elif not inside:
        big = ti.max(a2, b2)
        t = ti.max(ti.sqrt(p[0] * p[0] * a2 + p[1] * p[1] * b2) - big, 0.0)
        for _ in range(60):
            ca = a / (a2 + t)
            cb = b / (b2 + t)
            f = (p[0] * ca) ** 2 + (p[1] * cb) ** 2 - 1.0
            df = -2.0 * ((p[0] * ca) ** 2 / (a2 + t) + (p[1] * cb) ** 2 / (b2 + t))
            if f <= 1e-15 or df >= 0.0:
                break
            t -= f / df
        da = a2 + t
        db = b2 + t
        x = 0.0
        y = 0.0
        if da > 0.0:
            x = p[0] * a2 / da
        if db > 0.0:
            y = p[1] * b2 / db
        # final safety: scale onto the boundary (removes the Newton tolerance)
        s = (x * x) * b2 + (y * y) * a2
        if s > a2 * b2 and s > 0.0:
            k = ti.sqrt(a2 * b2 / s)
            x *= k
            y *= k
        out = ti.Vector([x, y])
    return out


@ti.func
def project_strict(ls: ti.math.vec3, mu1: float, mu2: float) -> ti.math.vec4:
    """Strict operator (COND eq. 23). Returns (lam_t1, lam_t2, lam_n, clipped)."""
    ln = ti.max(ls[2], 0.0)
    lt = ti.Vector([ls[0], ls[1]])
    clipped = 0.0
    if ln <= 0.0:
        if lt.norm_sqr() > 0.0:
            clipped = 1.0
        lt = ti.Vector([0.0, 0.0])
    elif mu1 == mu2:
        r = mu1 * ln
        nt = lt.norm()
        if nt > r:
            clipped = 1.0
            lt = lt * (r / nt) if nt > 0.0 else ti.Vector([0.0, 0.0])
    else:
        a = mu1 * ln
        b = mu2 * ln
        if lt[0] * lt[0] * b * b + lt[1] * lt[1] * a * a > a * a * b * b:
            clipped = 1.0
            lt = project_ellipse(lt, a, b)
    return ti.Vector([lt[0], lt[1], ln, clipped])


@ti.func
def _cone_gap(p: ti.math.vec3, mu1: float, mu2: float, nu: float) -> float:
    """g(nu) of the ellipsoidal-cone KKT system for the multiplier nu (see project_cone)."""
    l1 = p[0] / (1.0 + 2.0 * nu / (mu1 * mu1))
    l2 = p[1] / (1.0 + 2.0 * nu / (mu2 * mu2))
    ln = p[2] / (1.0 - 2.0 * nu)
    return (l1 / mu1) ** 2 + (l2 / mu2) ** 2 - ln * ln


@ti.func
def project_cone(ls: ti.math.vec3, mu1: float, mu2: float) -> ti.math.vec4:
    """Proximal operator: Euclidean projection onto C (COND eq. 23). Returns (lam_t1, lam_t2, lam_n, clipped).

    Isotropic: the closed-form second-order-cone projection. Anisotropic (both mu > 0): the KKT
    point lam_i = p_i/(1 + 2 nu/mu_i^2), lam_n = p_n/(1 - 2 nu) with nu the root of
    g(nu) = sum (lam_i/mu_i)^2 - lam_n^2 on (0, 1/2) for p_n > 0 or (1/2, inf) for p_n < 0, by bisection.
    A zero coefficient reduces the cone to a wedge/ray, handled by projecting the other axis.
    """
    out = ti.Vector([0.0, 0.0, 0.0, 0.0])
    pt = ti.Vector([ls[0], ls[1]])
    pn = ls[2]
    if mu1 == mu2:
        mu = mu1
        nt = pt.norm()
        if nt <= mu * pn:
            out = ti.Vector([ls[0], ls[1], ls[2], 0.0])
        elif mu * nt <= -pn:
            out = ti.Vector([0.0, 0.0, 0.0, 1.0])
        else:
            ln = (mu * nt + pn) / (1.0 + mu * mu)
            scale = mu * ln / nt if nt > 0.0 else 0.0
            out = ti.Vector([pt[0] * scale, pt[1] * scale, ln, 1.0])
    else:
        m1 = ti.max(mu1, 0.0)
        m2 = ti.max(mu2, 0.0)
        inside = pn >= 0.0 and (pt[0] * m2) ** 2 + (pt[1] * m1) ** 2 <= (m1 * m2 * pn) ** 2
        polar = ti.sqrt((m1 * pt[0]) ** 2 + (m2 * pt[1]) ** 2) <= -pn
        if inside:
            out = ti.Vector([ls[0], ls[1], ls[2], 0.0])
        elif polar:
            out = ti.Vector([0.0, 0.0, 0.0, 1.0])
        elif m1 <= 0.0 or m2 <= 0.0:
            # cone degenerates to a 2-D cone in the plane of the nonzero axis (or the ray lam_t = 0)
            k = 0 if m1 > 0.0 else 1
            mu = m1 if m1 > 0.0 else m2
            x = pt[k]
            if mu <= 0.0:
                out = ti.Vector([0.0, 0.0, ti.max(pn, 0.0), 1.0])
            else:
                nt = ti.abs(x)
                ln = 0.0
                xt = 0.0
                if nt <= mu * pn:
                    ln = pn
                    xt = x
                elif mu * nt > -pn:
                    ln = (mu * nt + pn) / (1.0 + mu * mu)
                    xt = mu * ln * (1.0 if x >= 0.0 else -1.0)
                res = ti.Vector([0.0, 0.0, ln, 1.0])
                res[k] = xt
                out = res
        else:
            p = ti.Vector([pt[0], pt[1], pn])
            scale = ti.max(p.norm(), _TINY)
            if ti.abs(p[2]) < 1e-12 * scale:
                p[2] = 1e-12 * scale
            lo = 0.0
            hi = 0.5
            if p[2] < 0.0:
                lo = 0.5
                hi = 1.0
                for _ in range(200):
                    if _cone_gap(p, m1, m2, hi) > 0.0:
                        break
                    lo = hi
                    hi = 2.0 * hi
            for _ in range(120):
                mid = 0.5 * (lo + hi)
                g = _cone_gap(p, m1, m2, mid)
                if p[2] > 0.0:
                    if g > 0.0:
                        lo = mid
                    else:
                        hi = mid
                else:
                    if g < 0.0:
                        lo = mid
                    else:
                        hi = mid
            nu = 0.5 * (lo + hi)
            l1 = p[0] / (1.0 + 2.0 * nu / (m1 * m1))
            l2 = p[1] / (1.0 + 2.0 * nu / (m2 * m2))
            ln = ti.max(p[2] / (1.0 - 2.0 * nu), 0.0)
            out = ti.Vector([l1, l2, ln, 1.0])
    return out


@ti.func
def project(ls: ti.math.vec3, mu1: float, mu2: float, op: ti.i32) -> ti.math.vec4:
    """ProjectFC (COND Alg. 2): op STRICT or PROXIMAL. Returns (lam_t1, lam_t2, lam_n, clipped)."""
    res = ti.Vector([0.0, 0.0, 0.0, 0.0])
    if op == STRICT:
        res = project_strict(ls, mu1, mu2)
    else:
        res = project_cone(ls, mu1, mu2)
    return res


@ti.kernel
def project_batch(lam_star: ti.types.ndarray(), mu: ti.types.ndarray(), op: ti.i32, out: ti.types.ndarray(),
                  clipped: ti.types.ndarray()):
    """out[i] = ProjectFC(lam_star[i]) with mu[i] = (mu1, mu2); clipped[i] = 1 if the tangent was clipped."""
    for i in range(lam_star.shape[0]):
        r = project(lam_star[i], mu[i][0], mu[i][1], op)
        out[i] = ti.Vector([r[0], r[1], r[2]])
        clipped[i] = ti.cast(r[3], ti.i32)

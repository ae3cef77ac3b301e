"""The conjugate-gradient loop in kernels, shared by the step's PCG (``linear.BlockJacobiPCG``) and the
Newton step's (``newton_pcg.NewtonPCG``): each supplies its matvec (``q = A p``, ending in ``record_pq``)
and its start (the residual and preconditioner, ending in ``pcg_begin``); the update, the direction and
the host loop are these. The CG scalars stay on the device in ``S``; past convergence or a breakdown
(pᵀAp ≤ 0) the kernels stop changing x on their own (``_running``: Genesis' per-problem "still active"
flag), so the host reads ``S`` only every ``check_every`` iterations (``pcg_iterations``).
"""
import numpy as np

from .. import backend
from ..backend import ti

# the CG scalars in S (pcg_* kernels): r·z, p·Ap, r·r, r·z of the new residual, b·b, the stop flag
# (set on convergence or breakdown), iterations done, and tol² b·b
RZ, PQ, RR, RZ_NEW, BNORM2, STOP, COUNT, THRESHOLD = range(8)


def pcg_iterations(S, s: np.ndarray, iterate, check_every: int, max_iter: int) -> np.ndarray:
    """Run ``iterate()`` (one CG iteration's launches) until the device scalars ``S`` say converged or
    stopped, or ``max_iter`` iterations, reading ``S`` (8 numbers) every ``check_every`` iterations and
    nothing else; ``s``: S as read after the start. Returns the last S read."""
    done = 0
    while s[RR] > s[THRESHOLD] and s[STOP] == 0.0 and done < max_iter:
        for _ in range(min(check_every, max_iter - done)):
            iterate()
            done += 1
        s = backend.read(S)
    return s


@ti.func
def pcg_begin(b: ti.template(), r: ti.template(), z: ti.template(), p: ti.template(), pinv: ti.template(),
              S: ti.template(), tol2: float, n: ti.i32):
    """Given the residual r and the preconditioner P (``pinv``): z = p = P r and
    S = (r·z, 0, r·r, 0, b·b, 0, 0, tol² b·b) (the start shared by every PCG here)."""
    out = ti.Vector.zero(float, 3)
    for i in range(n):
        ri = r[i]
        zi = pinv[i] @ ri
        z[i] = zi
        p[i] = zi
        out += ti.Vector([b[i].norm_sqr(), ri.dot(zi), ri.norm_sqr()])
    S[RZ] = out[1]
    S[PQ] = 0.0
    S[RR] = out[2]
    S[RZ_NEW] = 0.0
    S[BNORM2] = out[0]
    S[STOP] = 0.0
    S[COUNT] = 0.0
    S[THRESHOLD] = tol2 * out[0]


@ti.func
def _running(S: ti.template()) -> ti.i32:
    """1 while CG runs: not stopped and r·r above tol² b·b."""
    return ti.i32(S[STOP] == 0.0 and S[RR] > S[THRESHOLD])


@ti.func
def record_pq(S: ti.template(), s):
    """S[PQ] = s = p·Ap; a breakdown (p·Ap ≤ 0 or not finite) of a running CG sets the stop flag."""
    S[PQ] = s
    if _running(S) and not (s > 0.0 and s < 1e300):
        S[STOP] = 1.0


@ti.kernel
def pcg_update(x: ti.types.ndarray(), r: ti.types.ndarray(), z: ti.types.ndarray(), p: ti.types.ndarray(),
               q: ti.types.ndarray(), pinv: ti.types.ndarray(), S: ti.types.ndarray(), n: ti.i32):
    """While running: x += α p; r -= α q; z = P r with α = r·z / p·Ap; S[RR], S[RZ_NEW] updated."""
    run = _running(S)
    alpha = 0.0
    if run:
        alpha = S[RZ] / S[PQ]
    out = ti.Vector.zero(float, 2)
    for i in range(n):
        if run:
            x[i] += alpha * p[i]
            ri = r[i] - alpha * q[i]
            r[i] = ri
            zi = pinv[i] @ ri
            z[i] = zi
            out += ti.Vector([ri.norm_sqr(), ri.dot(zi)])
    if run:
        S[RR] = out[0]
        S[RZ_NEW] = out[1]
        S[COUNT] += 1.0


@ti.kernel
def pcg_direction(z: ti.types.ndarray(), p: ti.types.ndarray(), S: ti.types.ndarray(), n: ti.i32):
    """While running: p = z + β p, β = r·z (new) / r·z (old)."""
    run = ti.i32(S[STOP] == 0.0 and S[RZ_NEW] != 0.0)
    beta = 0.0
    if run:
        beta = S[RZ_NEW] / S[RZ]
    for i in range(n):
        if run:
            p[i] = z[i] + beta * p[i]
    if run:
        S[RZ] = S[RZ_NEW]
        S[RZ_NEW] = 0.0


@ti.kernel
def pcg_zero(a: ti.types.ndarray(), n: ti.i32):
    for i in range(n):
        a[i] = ti.Vector.zero(float, 3)

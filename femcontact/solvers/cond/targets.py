"""Normal targets of COND's contacts: the condition ``J_n v̂ ≥ t_m`` (eq. 11 with φ̃ = −t_m).

From the gap φ, the step-start normal velocity ``v_n,k``, restitution e and the recovery speed
``v_rec = min(recovery |φ|/dt, max_recovery_speed)``:

- midpoint, ``t_e = ((1−e)/2) min(v_n,k, 0)``: φ ≥ 0: ``t = min(−φ/dt, t_e)`` (speculative gap);
  φ < 0: ``t = t_e + v_rec``; the tangential bias ``−½ J_t v_k`` makes stick mean ``v_{k+1,t} = 0``;
- implicit Euler: φ ≥ 0: ``t = −φ/dt``; φ < 0: ``t = max(v_rec, −e min(v_n,k, 0))``.

``cond_targets`` also packs the contacts into the CONTACT tables. docs/COND.md, "Normal target".
``normal_targets`` is the same rule vectorized in numpy for the host solvers (NCP-PGS) that impose
the condition on the same ``J_n v̂``.
"""
import numpy as np

from ...backend import ti
from ...math.smallmat import mv

from ...contact.emit import side_velocity
from ...contact.schema import CONTACT_SET_F as SF, CONTACT_SET_I as SI
from .layout import CONTACT, CONTACT_NODES, ITER_F, ITER_I


@ti.func
def normal_target(ph, vnk, e, dt, recovery, vrec_max, midpoint) -> float:
    """t_m of one contact (module docstring)."""
    vrec = ti.min(recovery * ti.abs(ph) / dt, vrec_max)
    t = 0.0
    if midpoint != 0:
        te = 0.5 * (1.0 - e) * ti.min(vnk, 0.0)
        if ph >= 0.0:
            t = ti.min(-ph / dt, te)
        else:
            t = te + vrec
    else:
        if ph >= 0.0:
            t = -ph / dt
        else:
            t = ti.max(vrec, -e * ti.min(vnk, 0.0))
    return t


def normal_targets(phi, vnk, e, dt: float, recovery: float, vrec_max: float, midpoint: bool) -> np.ndarray:
    """``normal_target`` for arrays of contacts (numpy, float64): t_m from the gaps ``phi``, the
    step-start normal velocities ``vnk`` and the restitutions ``e`` (module docstring)."""
    phi, vnk, e = (np.asarray(x, dtype=np.float64) for x in (phi, vnk, e))
    vrec = np.minimum(recovery * np.abs(phi) / dt, vrec_max)
    if midpoint:
        te = 0.5 * (1.0 - e) * np.minimum(vnk, 0.0)
        return np.where(phi >= 0.0, np.minimum(-phi / dt, te), te + vrec)
    return np.where(phi >= 0.0, -phi / dt, np.maximum(vrec, -e * np.minimum(vnk, 0.0)))


@ti.kernel
def cond_targets(v_old: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray(),
                 sf: ti.types.ndarray(), si: ti.types.ndarray(), rest_table: ti.types.ndarray(), RT: ti.types.ndarray(),
                 Cf: ti.types.ndarray(), Ci: ti.types.ndarray(), Pf: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """CONTACT rows of this step: frame, μ, φ̃ = −t_m, world velocity, λ = 0, the (nodalized) nodes and
    the tangential bias (the stiction anchor's R v_anchor, and −½ J_t v_k under the midpoint rule) from the
    ContactSet's tables ``sf`` / ``si``. e per contact from the contact-parameter table's restitution column
    (NaN: default). Scalars from ``Pf`` / ``Pi`` (``layout.ITER_F`` / ``ITER_I``)."""
    n0, nc, n_rest = ITER_I.n0.get(Pi, 0), ITER_I.nc.get(Pi, 0), ITER_I.n_rest.get(Pi, 0)
    midpoint, dt, e_default = ITER_I.midpoint.get(Pi, 0), ITER_F.dt.get(Pf, 0), ITER_F.restitution.get(Pf, 0)
    recovery, vrec_max = ITER_F.recovery.get(Pf, 0), ITER_F.vrec_max.get(Pf, 0)
    for m in range(nc):
        R = SF.frame.get(sf, m)
        vw = SF.v_world.get(sf, m)
        vb = side_velocity(SI.node_b.get(si, m), n0, vn_node, vn_weight, v_old, ti.Vector.zero(float, 3))
        va = side_velocity(SI.node_a.get(si, m), n0, vn_node, vn_weight, v_old, vw)
        vck = mv(R, vb - va)
        e = e_default
        p = SI.param.get(si, m)
        if p >= 0 and p < n_rest:
            r = rest_table[p]
            if r == r:  # not NaN
                e = ti.min(ti.max(r, 0.0), 1.0)
        t = normal_target(SF.phi.get(sf, m), vck[2], e, dt, recovery, vrec_max, midpoint)
        CONTACT.frame.put(Cf, m, R)
        CONTACT.mu.put_at(Cf, m, 0, SF.mu.at(sf, m, 0))
        CONTACT.mu.put_at(Cf, m, 1, SF.mu.at(sf, m, 1))
        CONTACT.phi_tilde.put(Cf, m, -t)
        CONTACT.v_world.put(Cf, m, vw)
        CONTACT.lam.put(Cf, m, ti.Vector.zero(float, 3))
        CONTACT.lam_shift.put(Cf, m, ti.Vector.zero(float, 3))
        CONTACT_NODES.node.put_at(Ci, m, 0, RT[2 * m])
        CONTACT_NODES.node.put_at(Ci, m, 1, RT[2 * m + 1])
        anchor = mv(R, SF.v_anchor.get(sf, m))
        bias = ti.Vector([anchor[0], anchor[1]])
        if midpoint != 0:
            bias -= 0.5 * ti.Vector([vck[0], vck[1]])
        CONTACT.bias.put_at(Cf, m, 0, bias[0])
        CONTACT.bias.put_at(Cf, m, 1, bias[1])

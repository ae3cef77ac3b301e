"""Virtual nodes (COND §IV-A, eq. 14/15): the solver's node table and the virtual-node gains k_v.

``cond_nodalize`` routes every contact side on a real row that is a rod (block-step) row, or that an
earlier contact has claimed, through a solver-private virtual node ``J_v = [I]``, so no node is in
two contacts and Γ = J W Jᵀ is diagonal (Prop. 2); ``cond_pack_virtual`` copies the ContactSet's
virtual nodes (detection's point Jacobians) and those extra ones into the ``VIRTUAL`` tables;
``cond_gains`` sets ``k_v = virtual_gain · m_eff`` with ``1/m_eff = Σ_k ‖W_k‖_F² / (3 d_k)``
(block-Jacobi compliance, ``d_k = tr(A_kk)/3``), the exact 3x3 compliance on a spin row, the rod's own
compliance ``(A_rod⁻¹)_kk`` on a rod row, and ``rigid_gain · tr(J_v A_pp⁻¹ J_vᵀ)/3``⁻¹ from the 6x6
block on a rigid body (docs/COND.md, "Virtual-node gain"). ``cond_compliance_shift`` moves a
contact's targets by its damper compliance so that the contact law holds on the body's own
velocity, not on the virtual node's (docs/COND.md, "Damper compliance").
"""
from ...backend import ti
from ...math.smallmat import inv3, mm, mmT, mTm
from .groups import KIND_RIGID_LIN, KIND_ROD, KIND_SPIN
from ...contact.schema import CONTACT_SET_I
from .layout import CONTACT, CONTACT_NODES, HAS_BLOCKS, HAS_RODS, ITER_F, ITER_I, VIRTUAL, VIRTUAL_NODES


@ti.func
def _route(node, kind: ti.template(), claim: ti.template(), RT: ti.template(), count: ti.template(), n0, nv, nc):
    """The node a contact side on ``node`` acts on: the world, a detection virtual node or the first
    claim of a real row as they are; a rod row, or a real row already claimed, through a new
    solver-private virtual node ``J_v = [I]`` (n0 + nv + k, its row in RT[2 nc + k])."""
    out = node
    if node >= 0 and node < n0:
        if kind[node] == KIND_ROD or ti.atomic_add(claim[node], 1) > 0:
            k = ti.atomic_add(count[0], 1)
            out = n0 + nv + k
            RT[2 * nc + k] = node
    return out


@ti.kernel
def cond_nodalize(si: ti.types.ndarray(), kind: ti.types.ndarray(),
                  claim: ti.types.ndarray(), RT: ti.types.ndarray(), count: ti.types.ndarray(),
                  Pi: ti.types.ndarray()) -> ti.i32:
    """COND's nodalization (Prop. 2): RT[2m + s] = the node side s (a, b) of contact m acts on, so that
    no node, real or virtual, is in two contacts and no contact touches a rod (block-step) row; the
    contacts with the world claim their node first. ``claim`` (n0) and ``count`` (1) start at zero.
    n0, the ContactSet's nv and nc from ``Pi`` (``layout.ITER_I``).
    Returns the number of extra virtual nodes."""
    n0, nv, nc = ITER_I.n0.get(Pi, 0), ITER_I.nv_set.get(Pi, 0), ITER_I.nc.get(Pi, 0)
    for m in range(nc):
        if CONTACT_SET_I.node_a.get(si, m) < 0:
            RT[2 * m] = CONTACT_SET_I.node_a.get(si, m)
            RT[2 * m + 1] = _route(CONTACT_SET_I.node_b.get(si, m), kind, claim, RT, count, n0, nv, nc)
    for m in range(nc):
        if CONTACT_SET_I.node_a.get(si, m) >= 0:
            RT[2 * m] = _route(CONTACT_SET_I.node_a.get(si, m), kind, claim, RT, count, n0, nv, nc)
            RT[2 * m + 1] = _route(CONTACT_SET_I.node_b.get(si, m), kind, claim, RT, count, n0, nv, nc)
    return count[0]


@ti.kernel
def cond_pack_virtual(vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray(), RT: ti.types.ndarray(),
                      VNf: ti.types.ndarray(), VNi: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """VIRTUAL tables of this step: the ContactSet's virtual nodes q < nv, then COND's own (``cond_nodalize``),
    nvx in all (``Pi``)."""
    nv, nvx, nc = ITER_I.nv_set.get(Pi, 0), ITER_I.nv.get(Pi, 0), ITER_I.nc.get(Pi, 0)
    for q in range(nvx):
        for k in range(4):
            j = -1
            Wk = ti.Matrix.zero(float, 3, 3)
            if q < nv:
                j = vn_node[q][k]
                Wk = vn_weight[q, k]
            elif k == 0:
                j = RT[2 * nc + q - nv]
                Wk = ti.Matrix.identity(float, 3)
            VIRTUAL_NODES.node.put_at(VNi, q, k, j)
            VIRTUAL.weight.put_at(VNf, q, k, Wk)


@ti.func
def _rigid_compliance(blocks: ti.template(), diag: ti.template(), pair_slot: ti.template(), VNf: ti.template(),
                      q, j0) -> float:
    """tr(J_v A_pp⁻¹ J_vᵀ)/3 for a virtual node on rigid pair (j0, j0+1), A_pp⁻¹ by its Schur complement."""
    Pi = inv3(blocks[diag[j0]])
    Q = ti.Matrix.zero(float, 3, 3)
    if pair_slot[j0] >= 0:
        Q = blocks[pair_slot[j0]]
    Sa = inv3(blocks[diag[j0 + 1]] - mm(mTm(Q, Pi), Q))
    Pla = -mm(mm(Pi, Q), Sa)
    Pll = Pi - mm(mmT(Pla, Q), Pi)
    W0 = VIRTUAL.weight.at(VNf, q, 0)
    W1 = VIRTUAL.weight.at(VNf, q, 1)
    Cq = mmT(mm(W0, Pll), W0) + mmT(mm(W0, Pla), W1) + mmT(mmT(W1, Pla), W0) + mmT(mm(W1, Sa), W1)
    return Cq.trace() / 3.0


@ti.kernel
def cond_gains(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), kind: ti.types.ndarray(),
               pair_slot: ti.types.ndarray(), CR: ti.types.ndarray(), VNf: ti.types.ndarray(),
               VNi: ti.types.ndarray(), Pf: ti.types.ndarray(), Pi: ti.types.ndarray(), kinds: ti.template()):
    """k_v of every virtual node into the VIRTUAL table (nvx, the gains from ``Pi`` / ``Pf``).
    ``kinds``: the model's spin or rigid block rows (``HAS_BLOCKS``) / rod rows (``HAS_RODS``): their rules
    are compiled only then."""
    nvx, gain, rigid_gain = ITER_I.nv.get(Pi, 0), ITER_F.gain.get(Pf, 0), ITER_F.rigid_gain.get(Pf, 0)
    for q in range(nvx):
        inv_m = 0.0
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                Wk = VIRTUAL.weight.at(VNf, q, k)
                rule = 0
                if ti.static(kinds & HAS_RODS):
                    if CR[j].trace() > 0.0:     # a free rod row: the rod's own 3x3 compliance (blocks.py)
                        rule = 1
                        inv_m += mmT(mm(Wk, CR[j]), Wk).trace() / 3.0
                if ti.static(kinds & HAS_BLOCKS):
                    if rule == 0 and kind[j] == KIND_SPIN:    # a rotational block: its exact 3x3 compliance
                        rule = 1
                        inv_m += mmT(mm(Wk, inv3(blocks[diag[j]])), Wk).trace() / 3.0
                if rule == 0:
                    d = ti.max(blocks[diag[j]].trace() / 3.0, 1e-300)
                    inv_m += (Wk * Wk).sum() / (3.0 * d)
        kv = 0.0
        if inv_m > 0.0:
            kv = gain / inv_m
            if ti.static(kinds & HAS_BLOCKS):
                j0 = VIRTUAL_NODES.node.at(VNi, q, 0)
                if kind[j0] == KIND_RIGID_LIN and VIRTUAL_NODES.node.at(VNi, q, 1) == j0 + 1:
                    # a point on a rigid body: compliance from the 6x6 block (not the trace rule, which a
                    # joint's stiff rows dominate; docs/COND.md)
                    inv_r = _rigid_compliance(blocks, diag, pair_slot, VNf, q, j0)
                    if inv_r > 0.0:
                        kv = rigid_gain / inv_r
        VIRTUAL.gain.put(VNf, q, kv)


@ti.kernel
def cond_compliance_shift(Cf: ti.types.ndarray(), Ci: ti.types.ndarray(), VNf: ti.types.ndarray(),
                          VNi: ti.types.ndarray(), kind: ti.types.ndarray(), Pi: ti.types.ndarray()) -> float:
    """At a converged iterate a virtual node moves at ``J_v v̂ + f/k_v`` (its damper carries the contact
    force f), so the contact law holds on ``u`` while the bodies' own points move at
    ``u − c_m λ``, ``c_m = Σ_sides 1/k_v`` over the sides that are points of rigid bodies. Shift the
    contact's targets (tangential bias, φ̃) by ``−c_m (λ − λ_shift)`` and record λ as ``λ_shift``: at the
    fixed point of repeated shifts the law holds on the bodies' velocity. Deformable sides are left
    alone (docs/COND.md: on a stack of soft cubes the shifted iteration stopped converging). Returns
    max ``c_m ‖λ − λ_shift‖`` (m/s: the largest target change)."""
    n0, nc = ITER_I.n0.get(Pi, 0), ITER_I.nc.get(Pi, 0)
    change = 0.0
    for m in range(nc):
        c = 0.0
        for side in range(2):
            node = CONTACT_NODES.node.at(Ci, m, side)
            if node >= n0:
                q = node - n0
                kv = VIRTUAL.gain.get(VNf, q)
                j0 = VIRTUAL_NODES.node.at(VNi, q, 0)
                if kv > 0.0 and j0 >= 0:
                    if kind[j0] == KIND_RIGID_LIN and VIRTUAL_NODES.node.at(VNi, q, 1) == j0 + 1:
                        c += 1.0 / kv
        if c > 0.0:
            lam = CONTACT.lam.get(Cf, m)
            d = c * (lam - CONTACT.lam_shift.get(Cf, m))
            CONTACT.bias.put_at(Cf, m, 0, CONTACT.bias.at(Cf, m, 0) - d[0])
            CONTACT.bias.put_at(Cf, m, 1, CONTACT.bias.at(Cf, m, 1) - d[1])
            CONTACT.phi_tilde.put(Cf, m, CONTACT.phi_tilde.get(Cf, m) - d[2])
            CONTACT.lam_shift.put(Cf, m, lam)
            ti.atomic_max(change, d.norm())
    return change

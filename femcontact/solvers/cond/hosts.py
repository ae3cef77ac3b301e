"""Host bodies solved with their virtual nodes (COND option ``host_solve``; docs/COND.md, "Hosts").

A free rigid body (rigid pair of rows, 6x6 block H of A) and the virtual nodes on it (``J_q =
[W_q0, W_q1]`` on the pair, damper gain ``k_q``, eq. 14/15) form one subsystem of Ã. Without this
option the body takes the block step on ``H + Σ k_q J_qᵀJ_q`` (every virtual node an anchor at its
current velocity) and the virtual rows a scalar step w_q: a virtual node its contact does not hold
pulls the body back toward its stale velocity, and body and node alternate at a rate
``k c / (1 + k c)`` per iteration (c: the body's compliance at the point; ``rigid_gain`` 100: 0.99).

With it, every iteration solves the body with its virtual nodes for the contact states of the last
projection: a virtual row whose contact left it open (λ_n = 0, separating faster than
``SEPARATING``) is free and eliminated exactly
(Schur complement onto the host: ``y = J_q x + g_q/k_q``), the others are held (an anchor in the
host's block, then the scalar step and COND's one-shot projection, as before):

    K = H + Σ_held k_q J_qᵀJ_q,        Δx = K⁻¹ (g_h + Σ_free J_qᵀ g_q)
    y*_q = y_q − α (J_q Δx + g_q / k_q)  (free),     y*_q = y_q − α w_q g_q  (held)

(g = Ã v − b with the dampers). All rows held is the alternation's step; none held, the exact inverse
of the host + virtual block. A rod is a host the same way: its block-tridiagonal K_rod = Ã_rod with
the held rows' anchors only is refactored when its held set changed (``cond_rod_host_factor``, block LDLᵀ), the
free rows' ``J_qᵀ g_q`` join its right-hand side (``host_rhs``) and ``rod_solve`` gives Δx in V.D_ROD; a
virtual node is a rod's host row when every real node of J_q is a rod row (``on_rod``).

At a fixed point Δx = 0 and g_q = 0 on the free rows, so the host rows
satisfy ``Ã v − b = 0`` and COND's fixed point is unchanged. The state is ``VIRTUAL_NODES.state``
(1 free, 0 held; every virtual row starts held), written in ``cond_iterate``'s contact pass. A body
is a host only if every virtual node on its rows is a point of it (``J_q`` on its pair alone):
``cond_host_mark``. Tried and dropped (docs/PERFORMANCE.md, "Host bodies"): the body's contacts as
one dual projected-gradient block (γ = λ_max of its Delassus operator), and sliding rows held in the
normal only (a sliding box diverged: the stiff normal transients' friction reached the free body).
"""
from ...backend import ti
from ...math.smallmat import inv3, mm, mmT, mTm, mTv, mv
from .blocks import rod_coupling, rod_fill_block, rod_ldl
from .groups import KIND_RIGID_ANG, KIND_RIGID_LIN, KIND_ROD
from .layout import ITER_I, ROW, STEP_HOST, STEP_HOST_ANG, STEP_ROD, VIRTUAL, VIRTUAL_NODES, VROWS

# a contact frees its host's virtual row only while separating faster than this (m/s): the zero-load
# contacts of a resting face chatter between open and held otherwise (4 stacked boxes: 50-131
# iterations with it, the cap from the second step without; docs/PERFORMANCE.md, "Host bodies")
SEPARATING = 1e-4
HOST_H, HOST_K = 2, 5       # WB[2..4, i]: a host's H (ll, la, aa); WB[5..7, i]: this iteration's K
WB_ROWS = 8                 # WB's rows with hosts (2 without)


@ti.func
def on_pair(VNi: ti.template(), kind: ti.template(), q) -> ti.i32:
    """The linear row of the rigid pair virtual node q is a point of (J_q on (j0, j0+1) only), or -1."""
    j0 = VIRTUAL_NODES.node.at(VNi, q, 0)
    out = -1
    if j0 >= 0:
        if kind[j0] == KIND_RIGID_LIN and VIRTUAL_NODES.node.at(VNi, q, 1) == j0 + 1 \
                and VIRTUAL_NODES.node.at(VNi, q, 2) < 0 and VIRTUAL_NODES.node.at(VNi, q, 3) < 0:
            out = j0
    return out


@ti.kernel
def cond_host_mark(kind: ti.types.ndarray(), fixed: ti.types.ndarray(), VNi: ti.types.ndarray(),
                   ok: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """ok[i] = 1 on the linear row of every free rigid pair that no virtual node shares with another
    row (``on_pair``), else 0 (n0, nvx from ``Pi``)."""
    n0, nvx = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0)
    for i in range(n0):
        ok[i] = 0
        if kind[i] == KIND_RIGID_LIN and fixed[i] == 0:
            if fixed[i + 1] == 0:
                ok[i] = 1
    for q in range(nvx):
        if on_pair(VNi, kind, q) < 0:
            for k in range(4):
                j = VIRTUAL_NODES.node.at(VNi, q, k)
                if j >= 0:
                    if kind[j] == KIND_RIGID_LIN:
                        ok[j] = 0
                    elif kind[j] == KIND_RIGID_ANG:
                        ok[j - 1] = 0


@ti.kernel
def cond_host_steps(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), pair_slot: ti.types.ndarray(),
                    RK: ti.types.ndarray(), WB: ti.types.ndarray(), VNf: ti.types.ndarray(), VNi: ti.types.ndarray(),
                    kind: ti.types.ndarray(), ok: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """Per host (``ok``): WB[HOST_H + 0..2, i] = A's blocks ll, la, aa of the pair, its linear row takes
    STEP_HOST (its angular row is i + 1; both after ``blocks.cond_block_inverses``), its virtual rows
    (gain > 0) take STEP_HOST and start held."""
    n0, nvx = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0)
    for i in range(n0):
        if ok[i] != 0:
            WB[HOST_H, i] = blocks[diag[i]]
            WB[HOST_H + 1, i] = ti.Matrix.zero(float, 3, 3)
            if pair_slot[i] >= 0:
                WB[HOST_H + 1, i] = blocks[pair_slot[i]]
            WB[HOST_H + 2, i] = blocks[diag[i + 1]]
            ROW.step.put(RK, i, STEP_HOST)
            ROW.step.put(RK, i + 1, STEP_HOST_ANG)
    for q in range(nvx):
        j0 = on_pair(VNi, kind, q)
        host = 0
        if j0 >= 0:
            host = ok[j0]
        elif on_rod(VNi, kind, q):
            host = 1
        if host != 0 and VIRTUAL.gain.get(VNf, q) > 0.0:
            ROW.step.put(RK, n0 + q, STEP_HOST)
            VIRTUAL_NODES.state.put(VNi, q, 0)
            VIRTUAL_NODES.factored.put(VNi, q, 0)


@ti.func
def on_rod(VNi: ti.template(), kind: ti.template(), q) -> ti.i32:
    """Virtual node q is a point of rods only (every real node of J_q a rod row)."""
    out = 0
    if VIRTUAL_NODES.node.at(VNi, q, 0) >= 0:
        out = 1
    for k in range(4):
        j = VIRTUAL_NODES.node.at(VNi, q, k)
        if j >= 0:
            if kind[j] != KIND_ROD:
                out = 0
    return out


@ti.func
def rod_of(VNi: ti.template(), pos: ti.template(), block_rod: ti.template(), q) -> ti.i32:
    """The rod virtual node q is a point of (its first real node's; -1: not on a rod)."""
    j0 = VIRTUAL_NODES.node.at(VNi, q, 0)
    out = -1
    if j0 >= 0:
        if pos[j0] >= 0:
            out = block_rod[pos[j0] // 2]
    return out


@ti.kernel
def cond_rod_host_factor(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), VNf: ti.types.ndarray(),
                         VNi: ti.types.ndarray(), RK: ti.types.ndarray(), start: ti.types.ndarray(),
                         rows: ti.types.ndarray(), pos: ti.types.ndarray(), slots: ti.types.ndarray(),
                         block_rod: ti.types.ndarray(), dirty: ti.types.ndarray(), DL: ti.types.ndarray(),
                         F: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """Before each ``cond_iterate``: a rod whose host rows changed state since its factor was made (the
    ``factored`` column; ``cond_host_steps`` starts both at held, the state ``blocks.cond_rod_factor``
    factored) gets K_rod = Ã_rod with the anchors of its held virtual rows only (the free ones are
    eliminated through the right-hand side, ``host_rhs``), factored by block LDLᵀ; the others keep
    theirs. A virtual node is a point of one rod (its first node's: ``rod_of``). n0, nv, the rod count
    from ``Pi``; ``block_rod``: each 6x6 block's rod; ``dirty``: one flag per rod (0 on return)."""
    n0, nvx, nrods = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0), ITER_I.nrods.get(Pi, 0)
    for q in range(nvx):
        if ROW.step.get(RK, n0 + q) == STEP_HOST:
            rd = rod_of(VNi, pos, block_rod, q)
            st = VIRTUAL_NODES.state.get(VNi, q)
            if rd >= 0 and st != VIRTUAL_NODES.factored.get(VNi, q):
                dirty[rd] = 1
                VIRTUAL_NODES.factored.put(VNi, q, st)
    for j in range(start[nrods]):
        if dirty[block_rod[j]] != 0:
            rod_fill_block(blocks, fixed, rows, slots, DL, j)
    for q in range(nvx):
        rd = rod_of(VNi, pos, block_rod, q)
        if rd >= 0:
            if dirty[rd] != 0 and not (ROW.step.get(RK, n0 + q) == STEP_HOST and is_free(VNi, q)):
                rod_coupling(VNf, VNi, fixed, pos, DL, q)
    for rd in range(nrods):
        if dirty[rd] != 0:
            rod_ldl(start[rd], start[rd + 1], DL, F)
            dirty[rd] = 0


@ti.func
def is_free(VNi: ti.template(), q) -> ti.i32:
    """Virtual row q is free (its contact open and separating in the last projection), else held."""
    return VIRTUAL_NODES.state.get(VNi, q) != 0


@ti.func
def solved_with_hosts(RK: ti.template(), j) -> ti.i32:
    """Real row j is solved with its virtual rows: a rigid host's row, or a free rod row."""
    s = ROW.step.get(RK, j)
    return s == STEP_HOST or s == STEP_HOST_ANG or s == STEP_ROD


@ti.func
def host_rhs(V: ti.template(), RK: ti.template(), WB: ti.template(), VNf: ti.template(), VNi: ti.template(),
             n0, nv):
    """Before the hosts' solves (module docstring): the right-hand side ``g_h + Σ_free J_qᵀ g_q`` in
    V.F_HOST on every rigid host's and free rod row, and a rigid host's K = H + Σ_held k J_qᵀJ_q in
    WB[5..7] (H in WB[2..4], ``cond_host_steps``; a rod's held anchors are in its factor,
    ``cond_rod_host_factor``)."""
    for i in range(n0):
        if ROW.step.get(RK, i) == STEP_HOST:
            for s in ti.static(range(3)):
                WB[HOST_K + s, i] = WB[HOST_H + s, i]
        if solved_with_hosts(RK, i):
            V[VROWS.F_HOST, i] = V[VROWS.G, i]
    for q in range(nv):
        if ROW.step.get(RK, n0 + q) == STEP_HOST:
            if is_free(VNi, q):
                g = V[VROWS.G, n0 + q]
                for k in range(4):
                    j = VIRTUAL_NODES.node.at(VNi, q, k)
                    if j >= 0:
                        if solved_with_hosts(RK, j):
                            V[VROWS.F_HOST, j] += mTv(VIRTUAL.weight.at(VNf, q, k), g)
            else:
                j0 = VIRTUAL_NODES.node.at(VNi, q, 0)
                if ROW.step.get(RK, j0) == STEP_HOST:
                    kv = VIRTUAL.gain.get(VNf, q)
                    W0 = VIRTUAL.weight.at(VNf, q, 0)
                    W1 = VIRTUAL.weight.at(VNf, q, 1)
                    WB[HOST_K, j0] += kv * mTm(W0, W0)
                    WB[HOST_K + 1, j0] += kv * mTm(W0, W1)
                    WB[HOST_K + 2, j0] += kv * mTm(W1, W1)


@ti.func
def host_step(V: ti.template(), RK: ti.template(), W: ti.template(), WB: ti.template(), VNf: ti.template(),
              VNi: ti.template(), n0, nv, alpha):
    """v* on the rigid hosts and on the hosts' virtual rows (module docstring), after ``host_rhs`` and the
    rods' solve (V.D_ROD = K_rod⁻¹ F_HOST): Δx = K⁻¹ F_HOST on a rigid host (6x6 by the Schur complement
    of its linear block) in V.D_HOST, then the virtual rows, free ``J_q Δx + g_q/k_q``, held ``w_q g_q``."""
    for i in range(n0):
        if ROW.step.get(RK, i) == STEP_HOST:
            Kll = WB[HOST_K, i]
            Kla = WB[HOST_K + 1, i]
            Pinv = inv3(Kll)
            Si = inv3(WB[HOST_K + 2, i] - mm(mTm(Kla, Pinv), Kla))
            Wla = -mm(mm(Pinv, Kla), Si)
            Wll = Pinv - mm(mmT(Wla, Kla), Pinv)
            rl = V[VROWS.F_HOST, i]
            ra = V[VROWS.F_HOST, i + 1]
            dl = mv(Wll, rl) + mv(Wla, ra)
            da = mTv(Wla, rl) + mv(Si, ra)
            V[VROWS.D_HOST, i] = dl
            V[VROWS.D_HOST, i + 1] = da
            V[VROWS.V_STAR, i] = V[VROWS.V, i] - alpha * dl
            V[VROWS.V_STAR, i + 1] = V[VROWS.V, i + 1] - alpha * da
    for q in range(nv):
        i = n0 + q
        if ROW.step.get(RK, i) == STEP_HOST:
            g = V[VROWS.G, i]
            d = W[i] * g
            if is_free(VNi, q):
                jd = ti.Vector.zero(float, 3)       # J_q Δx
                for k in range(4):
                    j = VIRTUAL_NODES.node.at(VNi, q, k)
                    if j >= 0:
                        s = ROW.step.get(RK, j)
                        if s == STEP_ROD:
                            jd += mv(VIRTUAL.weight.at(VNf, q, k), V[VROWS.D_ROD, j])
                        elif s == STEP_HOST or s == STEP_HOST_ANG:
                            jd += mv(VIRTUAL.weight.at(VNf, q, k), V[VROWS.D_HOST, j])
                d = jd + g / VIRTUAL.gain.get(VNf, q)
            V[VROWS.V_STAR, i] = V[VROWS.V, i] - alpha * d


@ti.func
def record_state(VNi: ti.template(), RK: ti.template(), node, n0, lm, eta_n):
    """After a contact's projection: whether it left its side ``node`` free (λ_n = 0 and the normal
    velocity before the impulse, η_n, separating by more than ``SEPARATING``), if that is a host's
    virtual row (``is_free``)."""
    if node >= n0:
        if ROW.step.get(RK, node) == STEP_HOST:
            VIRTUAL_NODES.state.put(VNi, node - n0, ti.select(lm[2] <= 0.0 and eta_n > SEPARATING, 1, 0))

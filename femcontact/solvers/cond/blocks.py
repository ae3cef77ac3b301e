"""Exact block steps of COND: rows that no contact touches take ``W = Ã_block⁻¹`` instead of a scalar.

- spin rows (3x3) and rigid bodies' (linear, angular) pairs (6x6, inverted through the Schur
  complement of the linear block): ``cond_block_diagonal`` gathers Ã's blocks (A plus the
  virtual coupling k_v J_vᵀJ_v, eq. 15), ``cond_block_inverses`` inverts them; ``WB[0, i]`` is the
  row's own block of W, ``WB[1, i]`` its coupling to the partner row;
- free FEM rows (``fem_step`` "block3" / "chebyshev": scalar-kind, not prescribed, no contact side on
  them): ``cond_fem_blocks`` sets ``WB[1, i] = C_i`` (the coupling's diagonal blocks) and
  ``WB[0, i] = D_i⁻¹``, ``D_i = Ã_ii = A_ii + C_i``, and marks the row STEP_FEM (iterate.py);
- rods: with unknowns ``z_j = (ẋ_j, ω_j)`` a rod's sub-block of Ã is block-tridiagonal in 6x6
  blocks D_j, L_j. Block LDLᵀ once per step, ``S_0 = D_0, G_j = L_j S_{j−1}⁻¹, S_j = D_j − G_j L_jᵀ``
  (``cond_rod_factor``), applied each iteration by ``y_j = g_j − G_j y_{j−1}``,
  ``d_j = S_j⁻¹ y_j − G_{j+1}ᵀ d_{j+1}`` (``rod_solve``, parallel over rods). ``cond_rod_compliance``
  gives ``(A_rod⁻¹)_jj`` by the selected-inverse recursion for the virtual-node gains.
  A missing half (the last block's segment) or a prescribed row is an identity row with zero step.
"""
from ...backend import ti
from ...math.smallmat import inv3, mm, mmT, mTm, mv, tr
from .groups import KIND_RIGID_ANG, KIND_RIGID_LIN, KIND_SCALAR, KIND_SPIN
from .layout import (ITER_I, ROD_BLOCKS, ROD_DIAG_OFF, ROD_FACTOR, ROD_ROWS, ROD_SLOTS, ROD_SUB_OFF, ROW, STEP_FEM,
                     STEP_ROD, VIRTUAL, VIRTUAL_NODES, VROWS)


# ------------------------------------------------------------------------------ spin and rigid blocks
@ti.kernel
def cond_block_diagonal(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), kind: ti.types.ndarray(),
                        pair_slot: ti.types.ndarray(), WB: ti.types.ndarray(), VNf: ti.types.ndarray(),
                        VNi: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """WB[0, i] = Ã_ii and WB[1, i] = Ã_i,i+1 (linear half of a rigid pair) on the block rows."""
    n0, nvx = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0)
    for i in range(n0):
        if kind[i] >= KIND_SPIN and kind[i] <= KIND_RIGID_ANG:
            WB[0, i] = blocks[diag[i]]
            WB[1, i] = ti.Matrix.zero(float, 3, 3)
            if kind[i] == KIND_RIGID_LIN and pair_slot[i] >= 0:
                WB[1, i] = blocks[pair_slot[i]]
    for q in range(nvx):
        kv = VIRTUAL.gain.get(VNf, q)
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                if kind[j] >= KIND_SPIN and kind[j] <= KIND_RIGID_ANG:
                    Wk = VIRTUAL.weight.at(VNf, q, k)
                    WB[0, j] += kv * mTm(Wk, Wk)
                    if kind[j] == KIND_RIGID_LIN:
                        for l in range(4):
                            if VIRTUAL_NODES.node.at(VNi, q, l) == j + 1:
                                WB[1, j] += kv * mTm(Wk, VIRTUAL.weight.at(VNf, q, l))


@ti.kernel
def cond_block_inverses(fixed: ti.types.ndarray(), kind: ti.types.ndarray(), WB: ti.types.ndarray(),
                        RK: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """WB ← W on the block rows: 3x3 inverses, and the 6x6 inverse of a free rigid pair by the Schur
    complement (W_ll, W_la in the linear row; W_aa, W_al = W_laᵀ in the angular row; partners in RK)."""
    for i in range(ITER_I.n0.get(Pi, 0)):
        if fixed[i] == 0 and kind[i] == KIND_SPIN:
            WB[0, i] = inv3(WB[0, i])
        elif fixed[i] == 0 and kind[i] == KIND_RIGID_LIN and fixed[i + 1] == 0:
            Pinv = inv3(WB[0, i])
            Q = WB[1, i]
            Si = inv3(WB[0, i + 1] - mm(mTm(Q, Pinv), Q))
            Wla = -mm(mm(Pinv, Q), Si)
            WB[0, i] = Pinv - mm(mmT(Wla, Q), Pinv)
            WB[1, i] = Wla
            WB[0, i + 1] = Si
            WB[1, i + 1] = Wla.transpose()
            ROW.partner.put(RK, i, i + 1)
            ROW.partner.put(RK, i + 1, i)
        elif fixed[i] == 0 and kind[i] == KIND_RIGID_LIN:
            WB[0, i] = inv3(WB[0, i])


@ti.kernel
def cond_fem_free_fraction(fixed: ti.types.ndarray(), kind: ti.types.ndarray(), claim: ti.types.ndarray(),
                           Pi: ti.types.ndarray()) -> float:
    """Fraction of the FEM rows (scalar kind, not prescribed) that no contact side claims (1: none)."""
    fem, free = 0, 0
    for i in range(ITER_I.n0.get(Pi, 0)):
        if kind[i] == KIND_SCALAR and fixed[i] == 0:
            fem += 1
            if claim[i] == 0:
                free += 1
    out = 1.0
    if fem > 0:
        out = free / fem
    return out


@ti.kernel
def cond_fem_blocks(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), fixed: ti.types.ndarray(),
                    kind: ti.types.ndarray(), claim: ti.types.ndarray(), WB: ti.types.ndarray(),
                    RK: ti.types.ndarray(), VNf: ti.types.ndarray(), VNi: ti.types.ndarray(),
                    Pi: ti.types.ndarray()) -> ti.i32:
    """The free FEM rows (scalar kind, not prescribed, ``claim`` 0: no contact side on the row, so Γ
    never sees their step): WB[1, i] = C_i = Σ k_v W_kᵀW_k (the coupling's diagonal block),
    WB[0, i] = Ã_ii⁻¹ = (A_ii + C_i)⁻¹, row step STEP_FEM. Returns their number."""
    n0, nvx = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0)
    count = 0
    for i in range(n0):
        if kind[i] == KIND_SCALAR and fixed[i] == 0 and claim[i] == 0:
            WB[1, i] = ti.Matrix.zero(float, 3, 3)
            ROW.step.put(RK, i, STEP_FEM)
            count += 1
    for q in range(nvx):
        kv = VIRTUAL.gain.get(VNf, q)
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                if ROW.step.get(RK, j) == STEP_FEM:
                    Wk = VIRTUAL.weight.at(VNf, q, k)
                    WB[1, j] += kv * mTm(Wk, Wk)
    for i in range(n0):
        if ROW.step.get(RK, i) == STEP_FEM:
            WB[0, i] = inv3(blocks[diag[i]] + WB[1, i])
    return count


# ------------------------------------------------------------------------------ rods
@ti.func
def _inv6(S):
    """Inverse of a 6x6 SPD matrix (Gauss–Jordan without pivoting: the pivots of an SPD matrix are positive)."""
    M = S
    I = ti.Matrix.identity(float, 6)
    for k in range(6):
        p = 1.0 / M[k, k]
        for c in range(6):
            M[k, c] *= p
            I[k, c] *= p
        for r in range(6):
            if r != k:
                f = M[r, k]
                for c in range(6):
                    M[r, c] -= f * M[k, c]
                    I[r, c] -= f * I[k, c]
    return 0.5 * (I + I.transpose())


@ti.func
def rod_fill(blocks: ti.template(), fixed: ti.template(), rows: ti.template(), slots: ti.template(),
             DL: ti.template(), nb):
    """DL = the rods' 6x6 blocks D_j, L_j of A (identity rows for missing halves and prescribed rows)."""
    for j in range(nb):
        rod_fill_block(blocks, fixed, rows, slots, DL, j)


@ti.func
def rod_fill_block(blocks: ti.template(), fixed: ti.template(), rows: ti.template(), slots: ti.template(),
                   DL: ti.template(), j):
    """DL's block j (``rod_fill``)."""
    for h in range(2):
        r = ROD_ROWS.row.at(rows, j, h)
        ra = r >= 0
        if ra:
            ra = fixed[r] == 0
        for h2 in range(2):
            c = ROD_ROWS.row.at(rows, j, h2)
            cl = -1
            if j > 0:
                cl = ROD_ROWS.row.at(rows, j - 1, h2)
            Md = ti.Matrix.zero(float, 3, 3)
            Ml = ti.Matrix.zero(float, 3, 3)
            s = ROD_SLOTS.diag.at(slots, j, 2 * h + h2)
            if ra and s >= 0 and c >= 0:
                if fixed[c] == 0:
                    Md = blocks[s]
            sl = ROD_SLOTS.sub.at(slots, j, 2 * h + h2)
            if ra and sl >= 0 and cl >= 0:
                if fixed[cl] == 0:
                    Ml = blocks[sl]
            if h == h2 and not ra:
                Md = ti.Matrix.identity(float, 3)
            for a in ti.static(range(3)):
                for b in ti.static(range(3)):
                    DL[j, ROD_DIAG_OFF + 6 * (3 * h + a) + 3 * h2 + b] = Md[a, b]
                    DL[j, ROD_SUB_OFF + 6 * (3 * h + a) + 3 * h2 + b] = Ml[a, b]


@ti.func
def rod_ldl(s0, s1, DL: ti.template(), F: ti.template()):
    """Block LDLᵀ of one rod (blocks s0..s1-1): F.s_inv = S_j⁻¹, F.g = G_j = L_j S_{j−1}⁻¹."""
    Sp = ti.Matrix.zero(float, 6, 6)
    for j in range(s0, s1):
        S = ROD_BLOCKS.diag.get(DL, j)
        if j > s0:
            L = ROD_BLOCKS.sub.get(DL, j)
            G = mm(L, Sp)
            S = S - mmT(G, L)
            ROD_FACTOR.g.put(F, j, G)
        Sp = _inv6(S)
        ROD_FACTOR.s_inv.put(F, j, Sp)


@ti.kernel
def cond_rod_compliance(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), start: ti.types.ndarray(),
                        rows: ti.types.ndarray(), slots: ti.types.ndarray(), DL: ti.types.ndarray(),
                        F: ti.types.ndarray(), CR: ti.types.ndarray(), nrods: ti.i32, nb: ti.i32):
    """CR[i] = (A_rod⁻¹)_ii (3x3) on free rod rows, without the virtual coupling: block LDLᵀ, then
    (A⁻¹)_jj = S_j⁻¹ + G_{j+1}ᵀ (A⁻¹)_{j+1,j+1} G_{j+1}."""
    rod_fill(blocks, fixed, rows, slots, DL, nb)
    for rd in range(nrods):
        s0, s1 = start[rd], start[rd + 1]
        rod_ldl(s0, s1, DL, F)
        Z = ti.Matrix.zero(float, 6, 6)
        for jj in range(s1 - s0):
            j = s1 - 1 - jj
            Zj = ROD_FACTOR.s_inv.get(F, j)
            if j < s1 - 1:
                G = ROD_FACTOR.g.get(F, j + 1)
                Zj += mm(mTm(G, Z), G)
            Z = Zj
            for h in ti.static(range(2)):
                r = ROD_ROWS.row.at(rows, j, h)
                if r >= 0:
                    c = ti.Matrix.zero(float, 3, 3)
                    if fixed[r] == 0:
                        for a in ti.static(range(3)):
                            for b in ti.static(range(3)):
                                c[a, b] = Z[3 * h + a, 3 * h + b]
                    CR[r] = c


@ti.func
def rod_coupling(VNf: ti.template(), VNi: ti.template(), fixed: ti.template(), pos: ti.template(), DL: ti.template(),
                 q):
    """DL += virtual node q's coupling k_q W_kᵀW_l on the pairs of free rod rows it links (the blocks within
    the tridiagonal band)."""
    kv = VIRTUAL.gain.get(VNf, q)
    for k in range(4):
        jk = VIRTUAL_NODES.node.at(VNi, q, k)
        if jk >= 0:
            pk = pos[jk]
            if pk >= 0 and fixed[jk] == 0:
                for l in range(4):
                    jl = VIRTUAL_NODES.node.at(VNi, q, l)
                    if jl >= 0:
                        pl = pos[jl]
                        if pl >= 0 and fixed[jl] == 0:
                            bk, hk, bl, hl = pk // 2, pk % 2, pl // 2, pl % 2
                            off = -1
                            if bk == bl:
                                off = ROD_DIAG_OFF
                            elif bk == bl + 1:
                                off = ROD_SUB_OFF
                            if off >= 0:
                                M = kv * mTm(VIRTUAL.weight.at(VNf, q, k), VIRTUAL.weight.at(VNf, q, l))
                                for a in ti.static(range(3)):
                                    for b in ti.static(range(3)):
                                        ti.atomic_add(DL[bk, off + 6 * (3 * hk + a) + 3 * hl + b], M[a, b])


@ti.kernel
def cond_rod_factor(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), VNf: ti.types.ndarray(),
                    VNi: ti.types.ndarray(), start: ti.types.ndarray(), rows: ti.types.ndarray(),
                    pos: ti.types.ndarray(), slots: ti.types.ndarray(), DL: ti.types.ndarray(),
                    F: ti.types.ndarray(), nvx: ti.i32, nrods: ti.i32, nb: ti.i32):
    """Per-step block LDLᵀ of every rod's Ã_rod (A plus the coupling on pairs of free rod rows)."""
    rod_fill(blocks, fixed, rows, slots, DL, nb)
    for q in range(nvx):
        rod_coupling(VNf, VNi, fixed, pos, DL, q)
    for rd in range(nrods):
        rod_ldl(start[rd], start[rd + 1], DL, F)


@ti.func
def rod_solve(V: ti.template(), RK: ti.template(), start: ti.template(), rows: ti.template(), F: ti.template(),
              nrods, rhs: ti.template()):
    """V.d_rod = Ã_rod⁻¹ V[rhs] (the gradient, or a host's right-hand side: hosts.py) on every free rod row
    (parallel over rods, serial sweeps along each)."""
    for rd in range(nrods):
        s0, s1 = start[rd], start[rd + 1]
        y = ti.Vector.zero(float, 6)
        for j in range(s0, s1):
            g = ti.Vector.zero(float, 6)
            for h in ti.static(range(2)):
                r = ROD_ROWS.row.at(rows, j, h)
                if r >= 0:
                    if ROW.step.get(RK, r) == STEP_ROD:
                        gr = V[rhs, r]
                        for a in ti.static(range(3)):
                            g[3 * h + a] = gr[a]
            if j > s0:
                g -= mv(ROD_FACTOR.g.get(F, j), y)
            y = g
            ROD_FACTOR.y.put(F, j, y)
        d = ti.Vector.zero(float, 6)
        for jj in range(s1 - s0):
            j = s1 - 1 - jj
            dn = mv(ROD_FACTOR.s_inv.get(F, j), ROD_FACTOR.y.get(F, j))
            if j < s1 - 1:
                dn -= mv(tr(ROD_FACTOR.g.get(F, j + 1)), d)
            d = dn
            for h in ti.static(range(2)):
                r = ROD_ROWS.row.at(rows, j, h)
                if r >= 0:
                    if ROW.step.get(RK, r) == STEP_ROD:
                        V[VROWS.D_ROD, r] = ti.Vector([d[3 * h], d[3 * h + 1], d[3 * h + 2]])

"""COND's iteration (Alg. 1-3) as kernels: start values, the fused iteration, the finish.

One iteration (``cond_iterate``, one launch, nothing read back):

    g       = Ã v̂ˡ − b                     (eq. 15: A plus the virtual damper, applied matrix-free)
    v*      = v̂ˡ − α W g                   (eq. 18; W scalar, block, rod block or FEM step; α = 1 or BB2)
    λ_m     = ProjectFC(−(η_m + φ̃_m)/(γ_m + ω)),  η = J v*,  γ_m = w̄_a + w̄_b     (Alg. 2, eq. 23, 33)
    v̂**     = v* + W Jᵀ λ                  (eq. 22)
    v̂ˡ⁺¹    = ν (u (v̂** − v̂ˡ) + v̂ˡ − v̂ˡ⁻¹) + v̂ˡ⁻¹   (Alg. 3)

writing (‖v̂ˡ⁺¹−v̂ˡ‖², ‖v̂ˡ⁺¹‖², α, ‖v̂**−v̂ˡ‖²) to a slot of a small device ring that the host
reads every ``check_every`` iterations (on the CPU through a host view, at no cost).

The FEM step (``fem`` = K > 0 sweeps, rows marked STEP_FEM by ``blocks.cond_fem_blocks``: no contact
side on them, so Γ = J W Jᵀ is unchanged): ``d = p_{K−1}(D⁻¹M) D⁻¹ g``, K Chebyshev steps on
``M d = g`` from d = 0, preconditioned by the 3x3 blocks D = Ã_ii and tuned to the interval
[a, b] of D⁻¹M's spectrum (Saad, Iterative Methods, Alg. 12.1), M = Ã restricted to the FEM rows
(the coupling's off-diagonal blocks dropped). A polynomial in D⁻¹M times D⁻¹, so W is symmetric, and
positive definite since ``x p(x) ∈ (0, 1 + 1/T_K)`` on (0, b]; K = 1 is block Jacobi ``d = D⁻¹g / θ``,
``θ = (a + b)/2``. For K ≥ 2 the step is scaled by ``c = 1/(1 + 1/T_K(σ))``, σ = (b + a)/(b − a), so that
``c x p(x) ≤ 1`` on [a, b] (the Chebyshev error ``1 − x p(x)`` oscillates with amplitude 1/T_K(σ)
there; with c = 1 and 4 sweeps on [b/100, b], λ_max(W A) of a resting cube reached 2.02 through the
coupling to the contact rows' scalar step, with c 1.49: tests/solvers/cond/test_cond_step.py). Unknowns are the real nodes 0..n0-1 then the
virtual nodes; the velocity table V has the rows of ``layout.VROWS``, W the scalar step per row,
RK the row's step kind and partner (``layout.ROW``).
"""
from ...backend import ti
from ...math.smallmat import inv3, mTv, mv

from ..projection import STRICT, project_cone, project_strict
from .blocks import rod_solve
from .groups import KIND_ROD, KIND_SCALAR
from ...contact.schema import CONTACT_SET_F, CONTACT_SET_I
from .hosts import host_rhs, host_step, record_state
from .layout import (CONTACT, CONTACT_NODES, HAS_BLOCKS, HAS_HOSTS, HAS_RODS, ITER_F, ITER_I, ROW,
                     STEP_BLOCK, STEP_FEM, STEP_ROD, STEP_SCALAR, VIRTUAL, VIRTUAL_NODES, VROWS)
from .reduce import group_size, partial_sums
from .step_matrix import inf_norm

BB_LO, BB_HI = 0.01, 10.0    # Barzilai–Borwein α is clamped to this range


@ti.kernel
def cond_pattern(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), P: ti.types.ndarray(), n: ti.i32,
                 nnz: ti.i32):
    """P = [indptr, indices] (A's fixed pattern, packed once per pattern)."""
    for i in range(n + 1):
        P[i] = indptr[i]
    for k in range(nnz):
        P[n + 1 + k] = indices[k]


@ti.kernel
def cond_start(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), b: ti.types.ndarray(),
               fixed: ti.types.ndarray(), v_in: ti.types.ndarray(), kind: ti.types.ndarray(),
               l1: ti.types.ndarray(), tr2: ti.types.ndarray(), rs2: ti.types.ndarray(), l12: ti.types.ndarray(),
               V: ti.types.ndarray(), W: ti.types.ndarray(), RK: ti.types.ndarray(), VNf: ti.types.ndarray(),
               VNi: ti.types.ndarray(), Pf: ti.types.ndarray(), Pi: ti.types.ndarray()) -> float:
    """Scalar steps W (Frobenius on Ã, Gershgorin-capped where the coupling adds to a row), row step
    kinds, and the start values: v̂ warm (or ``D⁻¹ b`` cold), ``A_ii⁻¹ b_i`` on prescribed rows, and
    ``J_v v̂`` on virtual nodes (n0, nvx, warm, the cap from ``Pi`` / ``Pf``). Returns ‖D⁻¹ b‖², the
    velocity scale of the residual."""
    n0, nvx, warm, wcap = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0), ITER_I.warm.get(Pi, 0), ITER_F.wcap.get(Pf, 0)
    scale = 0.0
    for i in range(n0):
        D = blocks[diag[i]]
        w = 0.0
        if fixed[i] == 0 and rs2[i] > 0.0:
            w = tr2[i] / rs2[i]
            if l12[i] > l1[i]:      # a row the virtual coupling touches: Gershgorin cap
                w = ti.min(w, wcap / l12[i])
        dscale = ti.max(D.trace() / 3.0, 1e-300)
        vi = v_in[i]
        if fixed[i] != 0:
            vi = mv(inv3(D), b[i])
        elif warm == 0:
            vi = b[i] / dscale
        zero = ti.Vector.zero(float, 3)
        V[VROWS.V, i] = vi
        V[VROWS.V_PREV, i] = vi
        V[VROWS.G, i] = zero
        V[VROWS.G_PREV, i] = zero
        V[VROWS.B, i] = b[i]
        V[VROWS.D_ROD, i] = zero
        V[VROWS.D_ROD_PREV, i] = zero
        V[VROWS.P_FEM, i] = zero
        V[VROWS.P_FEM_B, i] = zero
        W[i] = w
        step = STEP_SCALAR
        if kind[i] != KIND_SCALAR and fixed[i] == 0:
            step = STEP_BLOCK
            if kind[i] == KIND_ROD:
                step = STEP_ROD
        ROW.step.put(RK, i, step)
        ROW.partner.put(RK, i, -1)
        scale += (b[i] / dscale).norm_sqr()
    for q in range(nvx):
        kv = VIRTUAL.gain.get(VNf, q)
        sw = 0.0
        gv = 0.0
        vv = ti.Vector.zero(float, 3)
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                Wk = VIRTUAL.weight.at(VNf, q, k)
                sw += (Wk * Wk).sum()
                gv += inf_norm(Wk)
                vv += mv(Wk, V[VROWS.V, j])
        w = 0.0
        if kv > 0.0:
            w = ti.min(3.0 * kv / (kv * kv * (3.0 + sw)), wcap / (kv * (1.0 + gv)))
        i = n0 + q
        zero = ti.Vector.zero(float, 3)
        V[VROWS.V, i] = vv
        V[VROWS.V_PREV, i] = vv
        V[VROWS.G, i] = zero
        V[VROWS.G_PREV, i] = zero
        V[VROWS.B, i] = zero
        W[i] = w
        ROW.step.put(RK, i, STEP_SCALAR)
        ROW.partner.put(RK, i, -1)
    return scale


@ti.func
def _block_step(WB: ti.template(), RK: ti.template(), V: ti.template(), i, row: ti.template()):
    """W_i · V[row] on a block row: own block, plus the partner's coupling block of a rigid pair."""
    d = mv(WB[0, i], V[row, i])
    p = ROW.partner.get(RK, i)
    if p >= 0:
        d += mv(WB[1, i], V[row, p])
    return d


@ti.kernel
def cond_iterate(P: ti.types.ndarray(), blocks: ti.types.ndarray(), V: ti.types.ndarray(), W: ti.types.ndarray(),
                 RK: ti.types.ndarray(), WB: ti.types.ndarray(), Cf: ti.types.ndarray(), Ci: ti.types.ndarray(),
                 VNf: ti.types.ndarray(), VNi: ti.types.ndarray(), rod_start: ti.types.ndarray(),
                 rod_rows: ti.types.ndarray(), F: ti.types.ndarray(), S: ti.types.ndarray(), Pf: ti.types.ndarray(),
                 Pi: ti.types.ndarray(), op: ti.template(), bb: ti.template(), kinds: ti.template(),
                 fem: ti.template()):
    """One iteration (module docstring); its norms and α go to ``S[slot]``. The scalars are read from
    ``Pf`` (``layout.ITER_F``: α_in, ν, u, ω, the FEM interval a, b and scale c) and ``Pi``
    (``layout.ITER_I``: slot, n0, nv, nc, nrods). α is α_in when positive, else the previous slot's
    (the iteration before, on the device). Compile-time switches (a scene compiles only its variant):
    ``op`` STRICT | PROXIMAL projection, ``bb`` Barzilai–Borwein α, ``kinds`` the model's spin/rigid block
    rows (``HAS_BLOCKS``) and rod rows (``HAS_RODS``), ``fem`` the number of sweeps of the FEM step on the STEP_FEM rows (0: none;
    module docstring)."""
    alpha_in, nu, u = ITER_F.alpha.get(Pf, 0), ITER_F.nu.get(Pf, 0), ITER_F.u.get(Pf, 0)
    omega, fem_c = ITER_F.omega.get(Pf, 0), ITER_F.fem_c.get(Pf, 0)
    slot, n0, nv, nc = ITER_I.slot.get(Pi, 0), ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0), ITER_I.nc.get(Pi, 0)
    n = n0 + nv
    alpha = alpha_in
    if alpha_in <= 0.0:
        alpha = S[(slot + S.shape[0] - 1) % S.shape[0]][2]
    # gradient g = Ã v̂ − b, the virtual damper f_v = −k_v (J_v v̂_o − v̂_v) matrix-free (eq. 14/15)
    for i in range(n0):
        acc = -V[VROWS.B, i]
        for k in range(P[i], P[i + 1]):
            acc += mv(blocks[k], V[VROWS.V, P[n0 + 1 + k]])
        V[VROWS.G, i] = acc
    for q in range(nv):
        d = -V[VROWS.V, n0 + q]
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                d += mv(VIRTUAL.weight.at(VNf, q, k), V[VROWS.V, j])
        kd = VIRTUAL.gain.get(VNf, q) * d
        V[VROWS.G, n0 + q] = -kd
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                V[VROWS.G, j] += mTv(VIRTUAL.weight.at(VNf, q, k), kd)
    if ti.static(kinds & HAS_HOSTS):      # the hosts' right-hand sides with their free virtual rows (hosts.py)
        host_rhs(V, RK, WB, VNf, VNi, n0, nv)
    # rod rows: d = Ã_rod⁻¹ g (exact block step, before BB, which needs W z = d − d_prev; hosts: K_rod⁻¹ F_HOST)
    if ti.static(kinds & HAS_RODS):
        rod_solve(V, RK, rod_start, rod_rows, F, ITER_I.nrods.get(Pi, 0),
                  ti.static(VROWS.F_HOST if kinds & HAS_HOSTS else VROWS.G))
    if ti.static(fem > 0):
        # FEM rows: d = p(D⁻¹M) D⁻¹ g by K Chebyshev steps on M d = g from d = 0 (module docstring)
        fem_a, fem_b = ITER_F.fem_a.get(Pf, 0), ITER_F.fem_b.get(Pf, 0)
        theta = 0.5 * (fem_b + fem_a)
        delta = 0.5 * (fem_b - fem_a)
        for i in range(n0):
            if ROW.step.get(RK, i) == STEP_FEM:
                gi = V[VROWS.G, i]
                p = mv(WB[0, i], gi) / theta
                V[VROWS.R_FEM, i] = gi
                V[VROWS.P_FEM, i] = p
                V[VROWS.D_FEM, i] = p
        rho = delta / theta
        for s in ti.static(range(fem - 1)):
            # one pass per sweep: the direction alternates between two rows of V (p is read from one by
            # this row's neighbours while this row writes the next into the other; both are zero off the
            # FEM rows: cond_start)
            p_in = ti.static(VROWS.P_FEM if s % 2 == 0 else VROWS.P_FEM_B)
            p_out = ti.static(VROWS.P_FEM_B if s % 2 == 0 else VROWS.P_FEM)
            rho_new = 1.0 / (2.0 * theta / delta - rho)
            c1 = rho_new * rho
            c2 = 2.0 * rho_new / delta
            for i in range(n0):      # r -= M p;  p' = ρ' ρ p + (2ρ'/δ) D⁻¹ r;  d += p'
                if ROW.step.get(RK, i) == STEP_FEM:
                    acc = mv(WB[1, i], V[p_in, i])
                    for k in range(P[i], P[i + 1]):
                        acc += mv(blocks[k], V[p_in, P[n0 + 1 + k]])
                    r = V[VROWS.R_FEM, i] - acc
                    V[VROWS.R_FEM, i] = r
                    p = c1 * V[p_in, i] + c2 * mv(WB[0, i], r)
                    V[p_out, i] = p
                    V[VROWS.D_FEM, i] += p
            rho = rho_new
    if ti.static(bb):
        # Barzilai–Borwein (BB2, preconditioned by W_F): α = sᵀz / zᵀ W_F z, s = v̂ˡ−v̂ˡ⁻¹, z = g − g_prev
        sz = 0.0
        zwz = 0.0
        for i in range(n):
            step = ROW.step.get(RK, i)
            s = V[VROWS.V, i] - V[VROWS.V_PREV, i]
            z = V[VROWS.G, i] - V[VROWS.G_PREV, i]
            if step == STEP_ROD:      # W z = Ã_rod⁻¹ g − Ã_rod⁻¹ g_prev
                sz += s.dot(z)
                zwz += z.dot(V[VROWS.D_ROD, i] - V[VROWS.D_ROD_PREV, i])
            elif step == STEP_BLOCK:      # zᵀ W z with the block step actually taken
                if ti.static(kinds & HAS_BLOCKS):
                    wz = mv(WB[0, i], z)
                    p = ROW.partner.get(RK, i)
                    if p >= 0:
                        wz += mv(WB[1, i], V[VROWS.G, p] - V[VROWS.G_PREV, p])
                    sz += s.dot(z)
                    zwz += z.dot(wz)
            elif W[i] > 0.0:
                sz += s.dot(z)
                zwz += W[i] * z.norm_sqr()
        for i in range(n):
            V[VROWS.G_PREV, i] = V[VROWS.G, i]
            if i < n0:
                V[VROWS.D_ROD_PREV, i] = V[VROWS.D_ROD, i]
        if sz > 0.0 and zwz > 0.0:
            alpha = ti.min(ti.max(sz / zwz, BB_LO), BB_HI)
    # v* = v̂ − α W g
    for i in range(n):
        step = ROW.step.get(RK, i)
        if step == STEP_ROD:          # rod block step (never in a contact: cond_nodalize)
            V[VROWS.V_STAR, i] = V[VROWS.V, i] - alpha * V[VROWS.D_ROD, i]
        elif step == STEP_BLOCK:      # spin / rigid block step (never in a contact)
            if ti.static(kinds & HAS_BLOCKS):
                V[VROWS.V_STAR, i] = V[VROWS.V, i] - alpha * _block_step(WB, RK, V, i, VROWS.G)
        elif step == STEP_FEM:        # FEM step (never in a contact: blocks.cond_fem_blocks)
            if ti.static(fem > 0):
                V[VROWS.V_STAR, i] = V[VROWS.V, i] - (alpha * fem_c) * V[VROWS.D_FEM, i]
        else:
            V[VROWS.V_STAR, i] = V[VROWS.V, i] - (alpha * W[i]) * V[VROWS.G, i]
    if ti.static(kinds & HAS_HOSTS):      # host bodies with their virtual rows (hosts.py), over the above
        host_step(V, RK, W, WB, VNf, VNi, n0, nv, alpha)
    # one-shot contact solve (Alg. 2) and v̂** = v* + W Jᵀ λ
    for m in range(nc):
        R = CONTACT.frame.get(Cf, m)
        na = CONTACT_NODES.node.at(Ci, m, 0)
        nb = CONTACT_NODES.node.at(Ci, m, 1)
        wb = alpha * W[nb]
        wa = 0.0
        va = CONTACT.v_world.get(Cf, m)
        if na >= 0:
            wa = alpha * W[na]
            va = V[VROWS.V_STAR, na]
        gam = wa + wb
        lm = ti.Vector.zero(float, 3)
        if gam > 0.0:
            bias = ti.Vector([CONTACT.bias.at(Cf, m, 0), CONTACT.bias.at(Cf, m, 1), CONTACT.phi_tilde.get(Cf, m)])
            eta = mv(R, V[VROWS.V_STAR, nb] - va) + bias
            ls = -eta / (gam + omega)
            r = ti.Vector.zero(float, 4)
            if ti.static(op == STRICT):
                r = project_strict(ls, CONTACT.mu.at(Cf, m, 0), CONTACT.mu.at(Cf, m, 1))
            else:
                r = project_cone(ls, CONTACT.mu.at(Cf, m, 0), CONTACT.mu.at(Cf, m, 1))
            lm = ti.Vector([r[0], r[1], r[2]])
            if ti.static(kinds & HAS_HOSTS):       # the contact state the next host step uses (hosts.py)
                record_state(VNi, RK, nb, n0, lm, eta[2])
                record_state(VNi, RK, na, n0, lm, eta[2])
            f = mTv(R, lm)
            V[VROWS.V_STAR, nb] += wb * f
            if na >= 0:
                V[VROWS.V_STAR, na] -= wa * f
        CONTACT.lam.put(Cf, m, lm)
    # Chebyshev combination (Alg. 3 line 9) and residual, summed in partials (reduce.py)
    out = ti.Vector.zero(float, 4)
    p = partial_sums(n)
    for b in range(p):
        part = ti.Vector.zero(float, 4)
        for k in range(group_size(n, p, b)):
            i = b + k * p
            vi = V[VROWS.V, i]
            vs = V[VROWS.V_STAR, i]
            vl = V[VROWS.V_PREV, i]
            vn = nu * (u * (vs - vi) + vi - vl) + vl
            V[VROWS.V_PREV, i] = vi
            V[VROWS.V, i] = vn
            part += ti.Vector([(vn - vi).norm_sqr(), vn.norm_sqr(), 0.0, (vs - vi).norm_sqr()])
        out += part
    out[2] = alpha
    S[slot] = out
    ITER_I.slot.put(Pi, 0, (slot + 1) % S.shape[0])     # the next iteration's slot (no upload where no host view)


@ti.kernel
def cond_finish(V: ti.types.ndarray(), W: ti.types.ndarray(), Cf: ti.types.ndarray(), Ci: ti.types.ndarray(),
                v_hat: ti.types.ndarray(), lam: ti.types.ndarray(), sf: ti.types.ndarray(), si: ti.types.ndarray(),
                Pf: ti.types.ndarray(), Pi: ti.types.ndarray()) -> ti.math.vec4:
    """v̂ = v̂** (real part), λ, the ContactSet's impulses (scale·λ, N s) and status (``sf`` / ``si``); returns
    the complementarity measures (max |min(J_n v̂ − t, γ λ_n)|, max cone violation, max(|J_n v̂| + |t|), max ‖λ‖). n0, nc, the
    impulse scale and the last α from ``Pi`` / ``Pf``."""
    n0, nc = ITER_I.n0.get(Pi, 0), ITER_I.nc.get(Pi, 0)
    scale, alpha = ITER_F.impulse_scale.get(Pf, 0), ITER_F.alpha_end.get(Pf, 0)
    for i in range(n0):
        v_hat[i] = V[VROWS.V_STAR, i]
    out = ti.Vector.zero(float, 4)
    for m in range(nc):
        R = CONTACT.frame.get(Cf, m)
        na = CONTACT_NODES.node.at(Ci, m, 0)
        nb = CONTACT_NODES.node.at(Ci, m, 1)
        va = CONTACT.v_world.get(Cf, m)
        wa = 0.0
        if na >= 0:
            va = V[VROWS.V_STAR, na]
            wa = alpha * W[na]
        gam = wa + alpha * W[nb]
        vc = mv(R, V[VROWS.V_STAR, nb] - va)
        lm = CONTACT.lam.get(Cf, m)
        phit = CONTACT.phi_tilde.get(Cf, m)
        gn = vc[2] + phit
        comp = ti.abs(ti.min(gn, gam * lm[2]))
        m1 = CONTACT.mu.at(Cf, m, 0)
        m2 = CONTACT.mu.at(Cf, m, 1)
        ell = 0.0
        if m1 > 0.0 and m2 > 0.0:
            ell = ti.sqrt((lm[0] / m1) ** 2 + (lm[1] / m2) ** 2)
        elif ti.abs(lm[0]) + ti.abs(lm[1]) > 0.0:
            ell = 1e300
        viol = ti.max(ell - lm[2], ti.max(-lm[2], 0.0))
        ti.atomic_max(out[0], comp)
        ti.atomic_max(out[1], viol)
        ti.atomic_max(out[2], ti.abs(vc[2]) + ti.abs(phit))
        ti.atomic_max(out[3], lm.norm())
        st = 0
        if lm[2] > 0.0:
            st = 1
            if m1 <= 0.0 and m2 <= 0.0:
                st = 2
            elif ell >= lm[2] * (1.0 - 1e-9):
                st = 2
        CONTACT_SET_I.status.put(si, m, st)
        lam[m] = lm
        CONTACT_SET_F.impulse.put(sf, m, scale * lm)
    return out

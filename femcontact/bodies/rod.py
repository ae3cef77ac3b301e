"""Cosserat rods (docs/THEORY.md §2; COND §V-C uses one for cable winding): element kernels.

DOFs: node velocities ``ẋ_i`` (translational blocks) and segment angular velocities ``ω_j``
(world frame, rotational blocks whose quaternions ``q_j`` live in ``state.q``; inertia,
gyroscopic term and the Cayley quaternion update are the rotational-block kernels of
``bodies/rigid.py``, shared with rigid bodies). Variations below use world-frame angular
variations ``δθ`` (``δq = ½ (0, δθ) ⊗ q``), which is what ω multiplies.

**Stretch–shear** (segment j between nodes j, j+1, rest length ``l``; Kugelstadt & Schömer 2016,
"Position and orientation based Cosserat rods", eq. 9; Spillmann & Teschner 2007):

    Γ = Rᵀ a − e₃,  a = (x_{j+1} − x_j)/l,   ψ_s = ½ l Γᵀ K_s Γ,  K_s = diag(kGA, kGA, EA)
    δΓ = Rᵀ (δx_{j+1} − δx_j)/l + Rᵀ [a]× δθ_j               (J_s = [−Rᵀ/l, Rᵀ/l, Rᵀ[a]×])

Forces (−∂ψ/∂q) with ``σ_w = R K_s Γ`` (the section force): ``f_j = σ_w``, ``f_{j+1} = −σ_w``,
torque ``τ_j = (x_{j+1} − x_j) × σ_w``.

**Bend–twist** (segments j, j+1, Voronoi length ``l̄ = (l_j + l_{j+1})/2``; Kugelstadt &
Schömer eq. 11, the discrete Darboux vector):

    q_r = q̄_j q_{j+1} (sign with Re ≥ 0),  Ω = (2/l̄) Im(q_r),  κ = Ω − Ω⁰
    ψ_b = ½ l̄ κᵀ K_b κ,  K_b = diag(EI, EI, GJ)
    δΩ = B (δθ_{j+1} − δθ_j),  B = (1/l̄) (w_r I − [v_r]×) R_jᵀ     (q_r = (w_r, v_r))

Torques ``τ_j = Bᵀ m``, ``τ_{j+1} = −Bᵀ m`` with ``m = l̄ K_b κ``. Ω⁰ comes from the initial
frames by the same formula, so the initial shape is exactly stress-free.

**Constraint form and SPD stiffness** (docs/THEORY.md §1, COND eq. 7): both energies are ``½ eᵀ K e``
with ``e = √l Γ`` or ``√l̄ κ``; the stiffness added to ``A`` is the Gauss–Newton part ``Jᵀ K J``
(symmetric positive semi-definite); the geometric part ``Σ σ·∂²e`` (skew x–θ couplings of the
section force, indefinite) is dropped, which keeps ``A`` SPD and makes the rotation of the
section force under a step explicit (stable at the tensions of the tests and scenes; smaller
steps if a cable under very high tension rings). Its tension part alone, ``[σ_T]×`` on the x–θ
blocks and ``t|Δx|(ââᵀ − I)`` on θ–θ (``σ_T = t â``, ``0 ≤ t ≤ kGA``), is PSD together with
``JᵀKJ`` and was tried: it penalises the *linearised* rigid rotation of a tensioned segment (the
straight-line step stretches it), so a stiff rod clamped to a spinning hub trailed 23.7 mm instead
of 0.5 mm, Lagged iterations on the winding dropped only 2.4 → 2.0, and it did not cure the
midpoint whip below; left out. **Integrator:** the midpoint rule has no numerical damping; a soft
cable whipping at large steps (0.5 m, E = 2.954 MPa, released horizontally, 40 segments,
dt = 1e-2: segment rotations of 1–3 rad per step at the tip) gains energy and diverges at
t ≈ 0.7 s (stable at dt = 1e-3, and under implicit Euler at 1e-2), so the cable scenes use
implicit Euler and a diverging midpoint run with rods says so. Integrator scaling: like FEM,
``A += (a_k + a_kb β) JᵀKJ`` and ``b += b_f f`` (midpoint: b in N and N m, λ a force;
Euler: impulses). Rayleigh ``α`` adds ``a_ma α`` times the node mass / segment world inertia.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from typing import NamedTuple

import numpy as np

from ..backend import ti
from .. import backend
from ..math.quaternion import quat_to_matrix
from ..math.smallmat import mm, mmT, mTm, mTv, mv, quat_matrix, skew
from ..spec.rod import SHEAR_COEFFICIENT, darboux


class RodRange(NamedTuple):
    """One rod's table, copied from its spec by ``build_model`` (``model.py``): ``body`` (``BodyRange``),
    global ``nodes`` and ``segments`` blocks, ``quats`` (rotation indices), rest segment lengths (m),
    rest Darboux vectors ((n-1, 3), rad/m), ``radius`` (m), whether it touches itself, its material
    (Young's and shear modulus, Pa; cross-section area and moments ``areas`` (A, I, J); Rayleigh α, β),
    lumped ``node_masses`` (kg), body-frame ``segment_inertias`` (kg m²) and clamped ``anchors``
    (segment indices held to their initial frames)."""

    name: str
    body: object
    nodes: np.ndarray
    segments: np.ndarray
    quats: np.ndarray
    rest_lengths: np.ndarray
    rest_darboux: np.ndarray
    radius: float
    self_contact: bool
    youngs_modulus: float
    shear_modulus: float
    areas: tuple
    rayleigh_alpha: float
    rayleigh_beta: float
    node_masses: np.ndarray
    segment_inertias: np.ndarray
    anchors: tuple

    @property
    def n_segments(self) -> int:
        return len(self.segments)

    @property
    def n_points(self) -> int:
        return len(self.nodes)


@ti.func
def _qmul(a, b):
    return ti.Vector([a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
                      a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
                      a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
                      a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]])


@ti.kernel
def rod_stretch(x: ti.types.ndarray(), quat: ti.types.ndarray(), elem: ti.types.ndarray(),
                qidx: ti.types.ndarray(), l0: ti.types.ndarray(), kdiag: ti.types.ndarray(),
                beta: ti.types.ndarray(), blk: ti.types.ndarray(), blocks: ti.types.ndarray(),
                b: ti.types.ndarray(), k_coef: float, kb_coef: float, f_coef: float, with_matrix: ti.i32) -> float:
    """Stretch–shear elements (module docstring): b += f_coef f; A += (k_coef + kb_coef β) JᵀKJ when
    with_matrix. Returns the elastic energy ψ_s (J)."""
    energy = 0.0
    for e in range(elem.shape[0]):
        ia, ib, s = elem[e][0], elem[e][1], elem[e][2]
        R = quat_matrix(quat[qidx[e]])
        l = l0[e]
        dx = x[ib] - x[ia]
        av = dx / l
        gam = mTv(R, av) - ti.Vector([0.0, 0.0, 1.0])
        K = ti.Matrix([[kdiag[e][0], 0.0, 0.0], [0.0, kdiag[e][1], 0.0], [0.0, 0.0, kdiag[e][2]]])
        sig = mv(R, mv(K, gam))
        energy += 0.5 * l * gam.dot(mv(K, gam))
        b[ia] += f_coef * sig
        b[ib] -= f_coef * sig
        b[s] += f_coef * dx.cross(sig)
        if with_matrix != 0:
            c = k_coef + kb_coef * beta[e]
            Kw = mmT(mm(R, K), R)
            S = skew(av)
            Kxx = (c / l) * Kw
            Kxt = -c * mm(Kw, S)
            Ktt = -(c * l) * mm(mm(S, Kw), S)
            blocks[blk[e][0]] += Kxx           # (a, a)
            blocks[blk[e][1]] -= Kxx           # (a, b)
            blocks[blk[e][2]] += Kxt           # (a, s)
            blocks[blk[e][3]] -= Kxx           # (b, a)
            blocks[blk[e][4]] += Kxx           # (b, b)
            blocks[blk[e][5]] -= Kxt           # (b, s)
            blocks[blk[e][6]] += Kxt.transpose()   # (s, a)
            blocks[blk[e][7]] -= Kxt.transpose()   # (s, b)
            blocks[blk[e][8]] += Ktt           # (s, s)
    return energy


@ti.kernel
def rod_bend(quat: ti.types.ndarray(), qref: ti.types.ndarray(), seg: ti.types.ndarray(), qidx: ti.types.ndarray(),
             lbar: ti.types.ndarray(), omega0: ti.types.ndarray(), kdiag: ti.types.ndarray(),
             beta: ti.types.ndarray(), blk: ti.types.ndarray(), blocks: ti.types.ndarray(), b: ti.types.ndarray(),
             k_coef: float, kb_coef: float, f_coef: float, with_matrix: ti.i32) -> float:
    """Bend–twist elements (module docstring). Returns the elastic energy ψ_b (J). An element with
    ``seg[e][0] < 0`` is a clamp anchor: its first frame is the fixed ``qref[e]``."""
    energy = 0.0
    for e in range(seg.shape[0]):
        s0, s1 = seg[e][0], seg[e][1]
        q0 = qref[e].normalized()
        if s0 >= 0:
            q0 = quat[qidx[e][0]].normalized()
        q1 = quat[qidx[e][1]].normalized()
        qr = _qmul(ti.Vector([q0[0], -q0[1], -q0[2], -q0[3]]), q1)
        if qr[0] < 0:
            qr = -qr
        w = qr[0]
        v = ti.Vector([qr[1], qr[2], qr[3]])
        lb = lbar[e]
        kap = 2.0 * v / lb - omega0[e]
        K = ti.Matrix([[kdiag[e][0], 0.0, 0.0], [0.0, kdiag[e][1], 0.0], [0.0, 0.0, kdiag[e][2]]])
        energy += 0.5 * lb * kap.dot(mv(K, kap))
        R0 = quat_matrix(q0)
        B = mmT(w * ti.Matrix.identity(float, 3) - skew(v), R0) / lb
        tau = mTv(B, lb * mv(K, kap))
        if s0 >= 0:
            b[s0] += f_coef * tau
        b[s1] -= f_coef * tau
        if with_matrix != 0:
            c = k_coef + kb_coef * beta[e]
            Kb = (c * lb) * mm(mTm(B, K), B)
            if s0 >= 0:
                blocks[blk[e][0]] += Kb
                blocks[blk[e][1]] -= Kb
                blocks[blk[e][2]] -= Kb
            blocks[blk[e][3]] += Kb
    return energy


@ti.kernel
def rod_mass_damping(blocks_of: ti.types.ndarray(), qidx: ti.types.ndarray(), amass: ti.types.ndarray(),
                     quat: ti.types.ndarray(), diag: ti.types.ndarray(), blocks: ti.types.ndarray(), coef: float):
    """Rayleigh α: A_ii += coef α M_i (node mass·I, or the segment's world inertia R I_b Rᵀ)."""
    for r in range(blocks_of.shape[0]):
        M = amass[r]
        if qidx[r] >= 0:
            R = quat_matrix(quat[qidx[r]])
            M = mmT(mm(R, M), R)
        blocks[diag[blocks_of[r]]] += coef * M


@ti.kernel
def rod_midpoints(x: ti.types.ndarray(), elem: ti.types.ndarray()):
    """Segment blocks' position slot = segment midpoint (output and broadphase boxes)."""
    for e in range(elem.shape[0]):
        x[elem[e][2]] = 0.5 * (x[elem[e][0]] + x[elem[e][1]])


class RodSystem:
    """Element tables of every rod of a Model (built once) and the per-step rod assembly: a body
    system (``bodies/system.py``)."""

    def __init__(self, model):
        backend.ensure_init()
        self.model = model
        pat = model.pattern
        st_elem, st_q, st_l, st_k, st_beta = [], [], [], [], []
        bd_seg, bd_q, bd_l, bd_om, bd_k, bd_beta, bd_ref = [], [], [], [], [], [], []
        al_blk, al_q, al_m = [], [], []
        self.ranges = model.rod_ranges
        q0 = model.rigid.rot_q0_np
        for r in self.ranges:
            n = r.n_segments
            node, seg, qi = r.nodes, r.segments, r.quats
            A, I, J = r.areas
            E, G = r.youngs_modulus, r.shear_modulus
            st_elem.append(np.stack([node[:-1], node[1:], seg], axis=1))
            st_q.append(qi)
            st_l.append(r.rest_lengths)
            st_k.append(np.tile([SHEAR_COEFFICIENT * G * A, SHEAR_COEFFICIENT * G * A, E * A], (n, 1)))
            st_beta.append(np.full(n, r.rayleigh_beta))
            if n > 1:
                bd_seg.append(np.stack([seg[:-1], seg[1:]], axis=1))
                bd_q.append(np.stack([qi[:-1], qi[1:]], axis=1))
                bd_l.append(0.5 * (r.rest_lengths[1:] + r.rest_lengths[:-1]))
                bd_om.append(r.rest_darboux)
                bd_k.append(np.tile([E * I, E * I, G * J], (n - 1, 1)))
                bd_beta.append(np.full(n - 1, r.rayleigh_beta))
                bd_ref.append(np.tile([1.0, 0.0, 0.0, 0.0], (n - 1, 1)))
            for j in r.anchors:                 # clamps: segment j against its initial frame
                bd_seg.append(np.array([[-1, seg[j]]]))
                bd_q.append(np.array([[-1, qi[j]]]))
                bd_l.append(np.array([0.5 * r.rest_lengths[j]]))
                bd_om.append(np.zeros((1, 3)))
                bd_k.append(np.array([[E * I, E * I, G * J]]))
                bd_beta.append(np.array([r.rayleigh_beta]))
                bd_ref.append(q0[qi[j]][None])
            if r.rayleigh_alpha > 0:
                al_blk += [node, seg]
                al_q += [np.full(r.n_points, -1), qi]
                al_m += [r.rayleigh_alpha * r.node_masses[:, None, None] * np.eye(3)[None],
                         r.rayleigh_alpha * r.segment_inertias]
        cat = lambda L, shape: np.concatenate(L) if L else np.zeros(shape)  # noqa: E731
        self.st_elem_np = cat(st_elem, (0, 3)).astype(np.int64)
        self.n_st = len(self.st_elem_np)
        e = self.st_elem_np
        st_blk = pat.index(np.repeat(e, 3, axis=1).ravel(), np.tile(e, (1, 3)).ravel()).reshape(-1, 9)
        self.st_elem = backend.int_array(e, width=3)
        self.st_q = backend.int_array(cat(st_q, (0,)))
        self.st_l = backend.scalar_array(self.n_st, cat(st_l, (0,)))
        self.st_k = backend.vec3_array(self.n_st, cat(st_k, (0, 3)))
        self.st_beta = backend.scalar_array(self.n_st, cat(st_beta, (0,)))
        self.st_blk = backend.int_array(st_blk, width=9)
        bseg = cat(bd_seg, (0, 2)).astype(np.int64)
        self.n_bd = len(bseg)
        r_, c_ = np.repeat(bseg, 2, axis=1).ravel(), np.tile(bseg, (1, 2)).ravel()
        ok = (r_ >= 0) & (c_ >= 0)
        bd_blk = np.full(len(r_), -1, np.int64)
        bd_blk[ok] = pat.index(r_[ok], c_[ok])
        bd_blk = bd_blk.reshape(-1, 4)
        self.bd_seg = backend.int_array(bseg, width=2)
        self.bd_q = backend.int_array(cat(bd_q, (0, 2)), width=2)
        self.bd_l = backend.scalar_array(self.n_bd, cat(bd_l, (0,)))
        self.bd_om = backend.vec3_array(self.n_bd, cat(bd_om, (0, 3)))
        self.bd_k = backend.vec3_array(self.n_bd, cat(bd_k, (0, 3)))
        self.bd_beta = backend.scalar_array(self.n_bd, cat(bd_beta, (0,)))
        self.bd_blk = backend.int_array(bd_blk, width=4)
        self.bd_ref = ti.Vector.ndarray(4, float, shape=max(self.n_bd, 1))
        if self.n_bd:
            self.bd_ref.from_numpy(np.concatenate(bd_ref).astype(backend.np_real()))
        self.n_al = int(sum(len(a) for a in al_blk))
        if self.n_al:
            self.al_blk = backend.int_array(np.concatenate(al_blk))
            self.al_q = backend.int_array(np.concatenate(al_q))
            self.al_m = backend.mat3_array(self.n_al)
            self.al_m.from_numpy(np.concatenate(al_m).astype(backend.np_real()))
        self._dummy_blocks = backend.mat3_array(1)

    # ---------------------------------------------------------------- per step
    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        """Add every rod's elastic forces to b and stiffness / damping to A (docs/THEORY.md §1)."""
        rod_stretch(state.x, state.q, self.st_elem, self.st_q, self.st_l, self.st_k, self.st_beta, self.st_blk,
                    A.blocks, b, coef.a_k, coef.a_kb, coef.b_f, 1)
        if self.n_bd:
            rod_bend(state.q, self.bd_ref, self.bd_seg, self.bd_q, self.bd_l, self.bd_om, self.bd_k, self.bd_beta, self.bd_blk,
                     A.blocks, b, coef.a_k, coef.a_kb, coef.b_f, 1)
        if self.n_al:
            rod_mass_damping(self.al_blk, self.al_q, self.al_m, state.q, A.diag, A.blocks, coef.a_ma)

    def after_advance(self, state) -> None:
        """Segment midpoints (the segments' position blocks) from the advanced nodes."""
        rod_midpoints(state.x, self.st_elem)

    def elastic_energy(self, state) -> float:
        return self.forces(state)[1]

    def forces(self, state) -> tuple[np.ndarray, float]:
        """((n_blocks, 3) elastic forces on nodes (N) and torques on segments (N m), elastic energy J)."""
        n = self.model.n_nodes
        f = backend.vec3_array(n)
        e = rod_stretch(state.x, state.q, self.st_elem, self.st_q, self.st_l, self.st_k, self.st_beta, self.st_blk,
                        self._dummy_blocks, f, 0.0, 0.0, 1.0, 0)
        if self.n_bd:
            e += rod_bend(state.q, self.bd_ref, self.bd_seg, self.bd_q, self.bd_l, self.bd_om, self.bd_k, self.bd_beta,
                          self.bd_blk, self._dummy_blocks, f, 0.0, 0.0, 1.0, 0)
        return f.to_numpy()[:n].astype(np.float64), float(e)

    def strains(self, x: np.ndarray, quats: np.ndarray) -> list[dict]:
        """Per rod (host, for output): ``range_strains`` of each of ``ranges``."""
        return [self.range_strains(r, x, quats) for r in self.ranges]

    @staticmethod
    def range_strains(r, x: np.ndarray, quats: np.ndarray) -> dict:
        """One rod's (a ``RodRange``) node positions and per-segment stretch Γ₃ (axial strain), shear
        |Γ₁₂|, bend |κ₁₂| (1/m) and twist κ₃ (rad/m), the bend–twist values averaged from the adjacent
        joints to the segments."""
        p = x[r.nodes]
        q = quats[r.quats]
        R = quat_to_matrix(q)
        a = np.diff(p, axis=0) / r.rest_lengths[:, None]
        gam = np.einsum("kji,kj->ki", R, a) - np.array([0.0, 0.0, 1.0])
        n = r.n_segments
        bend = np.zeros(n)
        twist = np.zeros(n)
        if n > 1:
            lbar = 0.5 * (r.rest_lengths[1:] + r.rest_lengths[:-1])
            kap = darboux(q, lbar) - r.rest_darboux
            w = np.zeros(n)
            for arr, val in ((bend, np.linalg.norm(kap[:, :2], axis=1)), (twist, kap[:, 2])):
                arr[:-1] += val
                arr[1:] += val
            w[:-1] += 1
            w[1:] += 1
            bend /= w
            twist /= w
        return {"name": r.name, "points": p, "radius": r.radius, "stretch": gam[:, 2],
                "shear": np.linalg.norm(gam[:, :2], axis=1), "bend": bend, "twist": twist}


__all__ = ["RodSystem"]

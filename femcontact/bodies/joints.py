"""Joints, limits and PD drives as stiff potentials of the constraint form (docs/THEORY.md §1–2).

Every joint contributes ``ψ = ½ eᵀ K e`` with a constraint error ``e(q)`` whose rate is
``ė = J v`` over the blocks it touches, assembled like every elastic element:
``A += (a_k + a_kb β) Jᵀ K J`` and ``b += −b_f Jᵀ K e(q_k)`` (``β`` = the joint's damping time,
which removes the stiff joint mode without touching the motion the joint allows).

Errors and Jacobians (world frame; body A may be the world; ``r = p − x_com``): the joints' rows
(position, orientation, hinge alignment) are those of ``bodies/joint_kinds.py``, one class per kind;
the attachments' are

- attachment of FEM or rod nodes to a rigid body or the world: ``e = x_i − p_A(i)`` per node; to a
  material point of an FEM body: ``e = x_i − Σ_k w_k x_k`` (barycentric weights of the containing
  tet or the nearest surface triangle), ``J = [I, −w_1 I, …, −w_4 I]``;
- orientation attachment of rod segments (a clamp to a rigid body or the world): the weld's
  orientation row on (ω_A, ω_segment).

Joint coordinates ``s`` (hinge angle about its axis, rad, unwrapped: continuous through ±π, each
step taking the branch nearest the last, kept in ``State.joint_angles``; prismatic slide along it, m) with
rate ``ṡ = jᵀ v`` carry one-sided limits (engaged when ``s + dt ṡ`` leaves ``[lower, upper]``: a stiff damper
toward the rate that ends the step at rest on the limit, an inelastic stop under either
integrator, plus 20 % recovery of any overshoot) and PD drives
``½ k_p (s − s*)² `` plus damping ``k_d (ṡ − ṡ*)`` toward targets that may be functions of time;
with an effort limit the drive force ``−k_p (s − s*) − k_d (ṡ − ṡ*)`` plus the joint's gravity
compensation, evaluated at the start of the step, is clamped to ``±max_force`` and then applied as a
constant force (the saturated drive; a feedforward effort is added outside the cap).

Default stiffness ``k = stiffness_factor · m / dt²`` with ``m`` the smaller mass (or inertia for
rotation rows) of the two sides, so the joint error under a load F is about ``F dt² / (1e4 m)``;
an attached rod node (segment) adds ``100 EA/l`` (``100 EI/l``) of its segment, so the attachment
is at most 1 % as compliant as one rod segment however light the node.

Each joint kind is a class of ``bodies/joint_kinds.py`` giving its rows, residual and stiffness;
``JointSystem`` finds their blocks, adds coordinates (limits, drives, efforts, gravity
compensation, mimic couplings) and assembles. Joints are few; they are evaluated on the host with
numpy, vectorized over the joints of a kind (``joint_kinds.Stack``) and over attachment nodes, summed
per joint over its four blocks (a 12×12 matrix, a 12-vector) and scattered into ``A`` and ``b`` by one
kernel in a layout fixed at the first step (measured against the per-joint loop:
docs/PERFORMANCE.md, 2026-11-28 "Joints stacked over joints").
"""
from typing import Optional

import numpy as np

from ..backend import ti

from .. import backend
from ..errors import ParameterError
from ..math.quaternion import cross_matrix as skew, quat_to_matrix
from ..spec.drive import Drive  # noqa: F401 (re-exported: its old home)
from ..spec.joint import JOINT_KINDS, Attachment, JointSpec, locate_points, make_joint  # noqa: F401 (likewise)
from .joint_kinds import (JOINT_CLASSES, STIFFNESS_FACTOR, Configuration, CoordinateJoint, Hinge, MimicCoupling,
                          Side, Stack, block_values, limit_rate, stack_geometry)


@ti.kernel
def scatter_joint_terms(slots: ti.types.ndarray(), mats: ti.types.ndarray(), rows: ti.types.ndarray(),
                        vecs: ti.types.ndarray(), blocks: ti.types.ndarray(), b: ti.types.ndarray()):
    """blocks[slots[k]] += mats[k]; b[rows[k]] += vecs[k] (serial: slots repeat)."""
    ti.loop_config(serialize=True)
    for k in range(slots.shape[0]):
        if slots[k] >= 0:
            blocks[slots[k]] += mats[k]
    ti.loop_config(serialize=True)
    for k in range(rows.shape[0]):
        if rows[k] >= 0:
            b[rows[k]] += vecs[k]


def _pair_terms(J: list, blk: list, k: np.ndarray, e: np.ndarray, sk: float, b_f: float):
    """Per-row springs ``k ½|e|²`` with ``ė = Σ_a J_a v_{blk_a}``: the (row, col, sk·k J_aᵀJ_c) terms of A
    and (row, −b_f k J_aᵀ e) terms of b, rows with a negative block dropped."""
    rows, cols, mats, b_rows, b_vecs = [], [], [], [], []
    for Ja, ba in zip(J, blk):
        JaT = np.transpose(Ja, (0, 2, 1))
        keep = ba >= 0
        b_rows.append(ba[keep])
        b_vecs.append((-b_f * k[:, None] * np.einsum("nij,nj->ni", JaT, e))[keep])
        for Jc, bc in zip(J, blk):
            both = keep & (bc >= 0)
            rows.append(ba[both]), cols.append(bc[both])
            mats.append(((sk * k)[:, None, None] * (JaT @ Jc))[both])
    return (np.concatenate(rows), np.concatenate(cols), np.concatenate(mats), np.concatenate(b_rows),
            np.concatenate(b_vecs))


def _side_blocks(side) -> list:
    """The (linear, angular) blocks of a rigid side; none for the world or an FEM point target."""
    return [] if side is None or side.world else [side.lin, side.lin + 1]


def _rod_segments(rod, seg: np.ndarray):
    """What an attachment needs of segments ``seg`` of a rod (its ``RodRange``): quaternion indices,
    blocks, least principal inertias and bending stiffnesses EI/l."""
    _, I, _ = rod.areas
    inertia = np.linalg.eigvalsh(rod.segment_inertias[seg])[:, 0]
    return rod.quats[seg], rod.segments[seg], inertia, rod.youngs_modulus * I / rod.rest_lengths[seg]


def _rod_element_stiffness(model, body: str, nodes: np.ndarray):
    """(EA/l of the stiffest adjacent segment per node (0 for FEM nodes), EI/l likewise, the rod's
    ``RodRange`` or None)."""
    for rod in model.rod_ranges:
        if rod.name == body:
            A, I, _ = rod.areas
            l = rod.rest_lengths
            lmin = np.minimum(l[np.clip(nodes - 1, 0, len(l) - 1)], l[np.clip(nodes, 0, len(l) - 1)])
            return rod.youngs_modulus * A / lmin, rod.youngs_modulus * I / lmin, rod
    return np.zeros(len(nodes)), np.zeros(len(nodes)), None


class JointSystem:
    """All joints and attachments of a Model: their coupling pairs for the pattern, and per step
    their contributions to A and b (module docstring)."""

    def __init__(self, model, joints: list, attachments: list):
        self.model = model
        dt = model.dt
        x0 = model.rest_positions
        R0 = list(model.rigid.rotation0)
        pairs_r, pairs_c = [], []

        def couple(blocks):
            blocks = [int(b) for b in blocks if b >= 0]
            for a in blocks:
                for c in blocks:
                    pairs_r.append(a)
                    pairs_c.append(c)

        self.joints = [JOINT_CLASSES[j.kind](model, j, x0, R0, dt) for j in joints]
        for joint in self.joints:
            couple(joint.blocks)
        self._setup_robot_terms(model)
        for mimic in self.mimics:          # a mimic row couples the blocks of both joints
            couple(mimic.blocks)
        self.attach, self.orient = [], []
        for a in attachments:
            body = model.body(a.body)
            nodes = np.asarray(a.nodes, np.int64) + body.node_start
            k_el, kr_el, rod = _rod_element_stiffness(model, a.body, np.asarray(a.nodes, np.int64))
            mass = model.mass_np
            if a.target is not None:        # material points of an FEM body: e = x_i − Σ w_k x_k
                tn = np.asarray(a.target_nodes, np.int64) + model.body(a.target).node_start
                w = np.asarray(a.weights, float)
                blocks = np.concatenate([nodes[:, None], np.where(w > 0, tn, -1)], 1)
                coefs = np.concatenate([np.ones((len(nodes), 1)), -w], 1)
                side = None
                local = np.zeros((len(nodes), 3))
                m_t = 1.0 / np.where(w > 0, w * w / mass[tn], 0.0).sum(1)     # mass seen at the point
            else:
                side = Side(model, a.rigid)
                blocks, coefs = nodes[:, None], np.ones((len(nodes), 1))
                local = x0[nodes].copy() if side.world else (x0[nodes] - x0[side.lin]) @ R0[side.k]
                m_t = side.mass
            m = np.minimum(mass[nodes], m_t)
            k = np.full(len(nodes), float(a.stiffness)) if a.stiffness else STIFFNESS_FACTOR * m / dt**2 + 100 * k_el
            self.attach.append(dict(blocks=blocks, coefs=coefs, side=side, local=local, k=k, beta=a.damping or dt))
            for row in blocks:
                couple([*row, *(_side_blocks(side))])
            if len(a.segments):             # rod segments welded in orientation (docs/THEORY.md §2, weld row)
                seg_q, seg_blk, seg_I, kr_seg = _rod_segments(rod, np.asarray(a.segments, np.int64))
                side = Side(model, a.rigid)
                Rseg0 = model.rigid.rot_q0_np[seg_q]
                Rs0 = quat_to_matrix(Rseg0)
                R_rel = Rs0 if side.world else np.einsum("ji,njk->nik", R0[side.k], Rs0)   # R_A0ᵀ R_seg0
                kr = (np.full(len(seg_q), float(a.stiffness)) if a.stiffness else
                      STIFFNESS_FACTOR * np.minimum(seg_I, side.inertia) / dt**2 + 100 * kr_seg)
                self.orient.append(dict(q=seg_q, blocks=seg_blk, side=side, R_rel=R_rel, k=kr,
                                        beta=a.damping or dt))
                for blk in seg_blk:
                    couple([blk, side.lin + 1 if not side.world else -1])
        self.coupling_pairs = (np.array(pairs_r, np.int64), np.array(pairs_c, np.int64))
        self.count = len(self.joints) + len(self.attach) + len(self.orient)
        self._setup_stacks(model)
        self.hinge_position0 = {j.name: (i, j.position0) for i, j in enumerate(self.joints)
                                if isinstance(j, Hinge)}     # hinge name -> (joint index, position0 rad)
        self._cap = (0, 0)     # sizes of the scatter transfer arrays (allocated by _scatter)
        self._slots = None     # the joints' and mimics' A slots and b rows (a fixed layout, set at the first scatter)
        self._actuation = None     # the last step's actuator force terms (actuator_forces)
        self._actuation_until = -1.0

    def _setup_robot_terms(self, model) -> None:
        """The mimic couplings; a clear error for a mimic of a joint that does not exist."""
        by_name = {joint.name: joint for joint in self.joints}
        self.mimics: list[MimicCoupling] = []
        for joint in self.joints:
            if joint.mimic is None:
                continue
            leader = by_name.get(joint.mimic[0])
            if not isinstance(leader, CoordinateJoint):
                raise ParameterError(f"joint {joint.name!r} mimics {joint.mimic[0]!r}, which is not a hinge or "
                                     f"prismatic joint of the scene (joints: {sorted(by_name)})")
            if not isinstance(joint, CoordinateJoint):
                raise ParameterError(f"joint {joint.name!r}: only hinge and prismatic joints can mimic another")
            self.mimics.append(MimicCoupling(joint, leader))

    def _setup_stacks(self, model) -> None:
        """The joints stacked per kind (their rows are evaluated a kind at once), and per coordinate
        joint its limits, the bodies it carries (gravity compensation) and the mimic couplings, as arrays."""
        joints = self.joints
        self.stack_all = Stack(joints)
        kinds: dict = {}
        for i, joint in enumerate(joints):
            kinds.setdefault(type(joint), []).append(i)
        self.coordinates = np.array([i for i, j in enumerate(joints) if isinstance(j, CoordinateJoint)], np.int64)
        self.groups = []
        for cls, idx in kinds.items():
            # the bodies each joint carries: (joint within the kind, centre-of-mass block, mass)
            rigid = model.rigid
            carried = [(n, int(rigid.lin[rigid.index(name)]), float(rigid.mass[rigid.index(name)]))
                       for n, i in enumerate(idx) for name in joints[i].subtree]
            carried = np.array(carried, float).reshape(-1, 3)
            self.groups.append((cls, issubclass(cls, CoordinateJoint), np.array(idx, np.int64), Stack([joints[i] for i in idx]),
                                carried[:, 0].astype(np.int64), carried[:, 1].astype(np.int64), carried[:, 2]))
        coord = [joints[i] for i in self.coordinates]
        self.coordinate_names = [j.name for j in coord]
        self.lower = np.array([j.limit.lower if j.limit else -np.inf for j in coord], float)
        self.upper = np.array([j.limit.upper if j.limit else np.inf for j in coord], float)
        self.k_limit = np.array([j.limit.k if j.limit else 0.0 for j in coord], float)
        index = {id(j): i for i, j in enumerate(joints)}
        self.mimic_follower = np.array([index[id(m.follower)] for m in self.mimics], np.int64)
        self.mimic_leader = np.array([index[id(m.leader)] for m in self.mimics], np.int64)
        self.mimic_multiplier = np.array([m.multiplier for m in self.mimics], float)
        self.mimic_offset = np.array([m.offset for m in self.mimics], float)
        self.mimic_k = np.array([m.follower.k_coordinate for m in self.mimics], float)
        self.mimic_beta = np.array([m.beta for m in self.mimics], float)
        self.mimic_blocks = np.array([m.blocks for m in self.mimics], np.int64).reshape(-1, 8)

    # ------------------------------------------------------------------ per step
    def after_advance(self, state) -> None:
        """Nothing follows from the positions (a body system: ``bodies/system.py``)."""

    def elastic_energy(self, state) -> float:
        """0: joint rows stand for constraints; the energy of their stiff springs (a small constraint
        error times a large stiffness) is not counted as the bodies' elastic energy."""
        return 0.0

    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        """Add every joint's ``(a_k + a_kb β) Jᵀ K J`` to A and ``−b_f Jᵀ K e`` (+ coordinate terms:
        limits, the drives as ``control`` holds them now, efforts, gravity compensation; mimic rows) to b.
        The joints' terms are summed per joint over its 4 blocks (a 12×12 matrix, a 12-vector), a
        kind of joint at once."""
        n, n_rot = self.model.n_nodes, self.model.rigid.n_rot     # read through host views (no copy kernels)
        x = backend.read(state.x, n).astype(np.float64, copy=False)
        v = backend.read(state.v, n).astype(np.float64, copy=False)
        R = (quat_to_matrix(backend.read(state.q, n_rot).astype(np.float64, copy=False)) if n_rot
             else np.zeros((0, 3, 3)))
        conf = Configuration(x, v, R, dt)
        nj = len(self.joints)
        H, f = np.zeros((nj, 12, 12)), np.zeros((nj, 12))
        s, j, gravity = np.zeros(nj), np.zeros((nj, 1, 12)), np.zeros(nj)
        angles = state.joint_angles
        angles = np.zeros(nj) if angles is None or len(angles) != nj else np.array(angles)
        for cls, has_coordinate, idx, st, c_joint, c_block, c_mass in self.groups:
            g = stack_geometry(st, conf)
            _add_rows(H, f, idx, cls.stack_rows(st, g, dt), coef.a_k + coef.a_kb * st.beta, coef.b_f)
            if has_coordinate:
                angles[idx], s[idx], j[idx] = cls.stack_coordinate(st, g, angles[idx])
                if len(c_joint):     # Σ m_b g · ∂c_b/∂s over the bodies each joint carries
                    lever = cls.gravity_lever(g.wA[c_joint], x[c_block], g.pB[c_joint])
                    gravity[idx] = np.bincount(c_joint, c_mass * (lever @ self.model.gravity), len(idx))
        state.joint_angles = angles
        if len(self.coordinates):
            self._coordinate_terms(control, H, f, s, j, gravity, v, coef, t, dt)
        mats, vecs = [_block_matrices(H, 4)], [f.reshape(-1, 3)]
        if self.mimics:                  # e = s − m s_leader − offset, a stiff joint-space spring
            fo, le = self.mimic_follower, self.mimic_leader
            rows = MimicCoupling.stack_rows(s[fo], j[fo], s[le], j[le], self.mimic_multiplier, self.mimic_offset,
                                            self.mimic_k)
            Hm, fm = np.zeros((len(fo), 24, 24)), np.zeros((len(fo), 24))
            _add_rows(Hm, fm, slice(None), [rows], coef.a_k + coef.a_kb * self.mimic_beta, coef.b_f)
            mats.append(_block_matrices(Hm, 8))
            vecs.append(fm.reshape(-1, 3))
        parts = [self._attachment_terms(at, x, conf.pose, coef) for at in self.attach]
        parts += [self._orientation_terms(o, R, coef) for o in self.orient]
        self._scatter(np.concatenate(mats), np.concatenate(vecs), parts, A, b)

    def _coordinate_terms(self, control, H: np.ndarray, f: np.ndarray, s: np.ndarray, j: np.ndarray,
                          gravity: np.ndarray, v: np.ndarray, coef, t: float, dt: float) -> None:
        """Every coordinate joint's limit, drive with gravity compensation (``gravity``: the effort of
        gravity on each joint's coordinate) and feedforward effort on its coordinate ``s`` (rows ``j``),
        added to its ``H``, ``f``; records the actuators' forces of the step (``actuator_forces``).

        With an effort limit the drive's force ``−k_p (s − s*) − k_d (ṡ − ṡ*)`` plus the gravity
        compensation is capped at ``max_force`` and applied as a constant force (the saturated drive);
        unsaturated, its stiffness ``k_p`` (a_k) and damping ``k_d`` (a_kb, as Rayleigh damping enters A)
        act on the coordinate implicitly, with the target rate in b."""
        ci = self.coordinates
        m = len(ci)
        kp, kd, target, vel, has_target = np.zeros(m), np.zeros(m), np.zeros(m), np.zeros(m), np.zeros(m, bool)
        cap, effort, compensated, driven = np.full(m, np.inf), np.zeros(m), np.zeros(m), np.zeros(m, bool)
        for i, name in enumerate(self.coordinate_names):
            d = control.joint_drive(name)
            if d is not None:
                driven[i] = True
                tgt, vel[i] = d.values(t)
                kd[i], kp[i] = d.kd, (0.0 if tgt is None else d.kp)
                if tgt is not None:
                    target[i], has_target[i] = tgt, True
                cap[i] = np.inf if d.max_force is None else d.max_force
            effort[i] = control.joint_effort(name, t)
            compensated[i] = control.gravity_compensated(name)
        s, jc, blocks = s[ci], j[ci, 0], self.stack_all.blocks[ci]
        sdot = (jc * block_values(v, blocks)).sum(1)
        grav = -gravity[ci] * compensated
        engaged, rate = limit_rate(self.lower, self.upper, s, sdot, coef, dt)
        c = np.where(engaged, self.k_limit * dt, 0.0)
        e = np.where(has_target, s - target, 0.0)
        force = -kd * (sdot - vel) - kp * e + grav
        saturated = driven & (np.abs(force) > cap)
        capped = np.sign(force) * np.minimum(np.abs(force), cap)
        free = driven & ~saturated
        w = coef.a_kb * c + np.where(free, coef.a_k * kp + coef.a_kb * kd, 0.0)
        fb = (coef.a_kb * c * rate + coef.b_f * np.where(saturated, capped, np.where(free, -kp * e, 0.0) + grav)
              + np.where(free, coef.a_kb * kd * vel, 0.0) + coef.b_f * effort)
        # the force these rows apply: −kp (e + (a_k/b_f) ṡ̂) − kd (a_kb/b_f)(ṡ̂ − ṡ*) + gravity
        const = np.where(saturated, capped, np.where(free, -kp * e + kd * vel * coef.a_kb / coef.b_f, 0.0) + grav)
        slope = np.where(free, -(kp * coef.a_k + kd * coef.a_kb) / coef.b_f, 0.0)
        H[ci] += w[:, None, None] * (jc[:, :, None] * jc[:, None, :])
        f[ci] += fb[:, None] * jc
        self._actuation = (const + effort, slope, jc, blocks)
        self._actuation_until = t + dt

    @staticmethod
    def _attachment_terms(at: dict, x: np.ndarray, pose, coef):
        """Vectorized over an attachment's nodes: ``e = Σ_c coefs_c x_{blocks_c} − p(i)`` with
        ``J = [coefs_c I …, −I, [r_i]×]`` on (its translational blocks, v_body, ω_body); ``p`` is the
        rigid point, the world point, or 0 for an FEM material-point target (absent blocks are −1)."""
        side, blocks, coefs, k = at["side"], at["blocks"], at["coefs"], at["k"]
        n = len(blocks)
        e = np.einsum("nc,ncj->nj", coefs, x[np.maximum(blocks, 0)])
        eye = np.broadcast_to(np.eye(3), (n, 3, 3))
        J = [coefs[:, c, None, None] * eye for c in range(blocks.shape[1])]
        blk = [blocks[:, c] for c in range(blocks.shape[1])]
        if side is not None and side.world:
            e = e - at["local"]
        elif side is not None:
            c, Rs = pose(side)
            r = at["local"] @ Rs.T
            e = e - (c + r)
            J += [-eye, skew(r)]
            blk += [np.full(n, side.lin), np.full(n, side.lin + 1)]
        return _pair_terms(J, blk, k, e, coef.a_k + coef.a_kb * at["beta"], coef.b_f)

    @staticmethod
    def _orientation_terms(o: dict, R: np.ndarray, coef):
        """Rod segments welded in orientation: ``e = log(R_seg R_relᵀ R_Aᵀ)``, ``J = [I, −I]`` on
        (ω_seg, ω_A) (the weld's orientation row; the world has no block)."""
        side = o["side"]
        Rs = R[o["q"]]
        E = np.einsum("nij,nkj->nik", Rs, o["R_rel"])
        if not side.world:
            E = E @ R[side.k].T
        from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up
        e = Rotation.from_matrix(E).as_rotvec()
        n = len(e)
        eye = np.broadcast_to(np.eye(3), (n, 3, 3))
        J, blk = [eye], [o["blocks"]]
        if not side.world:
            J.append(-eye)
            blk.append(np.full(n, side.lin + 1))
        return _pair_terms(J, blk, o["k"], e, coef.a_k + coef.a_kb * o["beta"], coef.b_f)

    def hinge_coordinate(self, state, joint: str) -> Optional[float]:
        """The unwrapped coordinate (rad, ``position0`` included) of hinge ``joint`` at the last
        assembly (None before the first): a reading from the poses lies within π of it."""
        angles = state.joint_angles
        if angles is None or len(angles) != len(self.joints):
            return None
        if joint not in self.hinge_position0:
            return None
        i, position0 = self.hinge_position0[joint]
        return float(angles[i]) + position0

    def actuator_forces(self, state) -> dict:
        """Generalized force (N m or N) each driven or compensated joint's actuator applied over the
        last step: its PD drive and gravity compensation (capped together at the drive's max_force, as
        applied) plus the feedforward effort, with the implicit terms at the solved rate ``ṡ̂ = j v̂``.
        Empty before the first step (and after a checkpoint is loaded, until the next step)."""
        if self._actuation is None or abs(state.time - self._actuation_until) > 1e-9 * self.model.dt:
            return {}
        const, slope, j, blocks = self._actuation
        v_hat = backend.read(state.v_hat, self.model.n_nodes).astype(np.float64, copy=False)
        force = const + slope * (j * block_values(v_hat, blocks)).sum(1)
        return {name: float(value) for name, value in zip(self.coordinate_names, force)}

    def _fixed_layout(self) -> tuple:
        """A's slots (−1: a world block) and b's rows of the joints' and mimics' block terms, in the
        order of ``_block_matrices``: the same every step."""
        slots, rows = [], []
        for blocks in (self.stack_all.blocks, self.mimic_blocks):
            m = blocks.shape[1]
            r, c = np.repeat(blocks, m, 1).ravel(), np.tile(blocks, (1, m)).ravel()
            both = (r >= 0) & (c >= 0)
            slot = np.full(len(r), -1, np.int64)
            slot[both] = self.model.pattern.index(r[both], c[both])
            slots.append(slot)
            rows.append(blocks.ravel())
        return np.concatenate(slots), np.concatenate(rows)

    def _scatter(self, mats: np.ndarray, vecs: np.ndarray, parts: list, A, b) -> None:
        """Add the joints' block terms (``mats``, ``vecs`` in the fixed layout) and the attachments'
        (row, col, 3x3) / (row, vec) ``parts`` to A and b with one kernel. The transfer arrays are
        kept between steps (A's slots and b's rows written again only where attachments add terms)
        and grow when a step needs more."""
        if self._slots is None:
            self._slots = self._fixed_layout()
        slots, b_rows = self._slots
        if parts:
            rows, cols, p_mats, p_rows, p_vecs = (np.concatenate(z) for z in zip(*parts))
            slots = np.concatenate([slots, self.model.pattern.index(rows, cols) if len(rows) else rows])
            mats, b_rows, vecs = np.concatenate([mats, p_mats]), np.concatenate([b_rows, p_rows]), np.concatenate([vecs, p_vecs])
        n, m = len(slots), len(b_rows)
        layout = bool(parts)
        if n > self._cap[0] or m > self._cap[1] or self._cap[0] == 0:
            self._cap = (max(n, 1, 2 * self._cap[0]), max(m, 1, 2 * self._cap[1]))
            self._slot_arr = backend.int_array(np.zeros(self._cap[0]))
            self._mats = backend.mat3_array(self._cap[0])
            self._rows = backend.int_array(np.zeros(self._cap[1]))
            self._vecs = backend.vec3_array(self._cap[1])
            layout = True
        real = backend.np_real()
        transfers = [(self._mats, mats.astype(real, copy=False), 0.0), (self._vecs, vecs.astype(real, copy=False), 0.0)]
        if layout:
            transfers += [(self._slot_arr, slots.astype(np.int32), -1), (self._rows, b_rows.astype(np.int32), -1)]
        for arr, data, fill in transfers:
            view = backend.host_view(arr)          # CPU: write in place, no copy kernel
            if view is not None:
                view[:len(data)] = data
                view[len(data):] = fill
            else:
                arr.from_numpy(np.concatenate([data, np.full((arr.shape[0] - len(data),) + data.shape[1:], fill,
                                                             data.dtype)]))
        scatter_joint_terms(self._slot_arr, self._mats, self._rows, self._vecs, A.blocks, b)


def _add_rows(H: np.ndarray, f: np.ndarray, idx, rows: list, scale_k, scale_b: float) -> None:
    """``H[idx] += scale_k k JᵀJ`` and ``f[idx] −= scale_b k Jᵀ e`` of stacked Rows (``scale_k`` per joint)."""
    for r in rows:
        JT = r.J.transpose(0, 2, 1)
        H[idx] += (scale_k * r.k)[:, None, None] * (JT @ r.J)
        f[idx] -= (scale_b * r.k)[:, None] * (JT @ r.e[:, :, None])[:, :, 0]


def _block_matrices(H: np.ndarray, m: int) -> np.ndarray:
    """(n, 3m, 3m) -> the (n · m · m, 3, 3) blocks, row block major (``_fixed_layout``'s order)."""
    return H.reshape(-1, m, 3, m, 3).transpose(0, 1, 3, 2, 4).reshape(-1, 3, 3)

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
step taking the branch nearest the last, kept in ``State.host``; prismatic slide along it, m) with
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
numpy (vectorized over attachment nodes) and scattered into ``A`` and ``b`` by one kernel.
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
                          RowSums, Side)

HINGE_ANGLES = "hinge_angles"     # State.host key: each hinge's unwrapped angle at the last assembly


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


def coordinate_rate(j: list, blocks: list, v: np.ndarray) -> float:
    """``ṡ = Σ_a j_a v_a`` of a coordinate with rows ``j`` on ``blocks`` (the world's blocks skipped)."""
    return sum(float((jj @ v[blk])[0]) for jj, blk in zip(j, blocks) if blk >= 0)


class _RodEnds:
    """Rod data an attachment needs: segment blocks, quaternion indices, inertias, stiffnesses."""

    def __init__(self, model, k: int):
        self.model, self.k = model, k
        self.spec = model.rod_specs[k]
        self.br = model.body(self.spec.name)

    def segments(self, seg: np.ndarray):
        spec = self.spec
        q = int(self.model.rod_rot0[self.k]) + seg
        blk = self.br.node_start + spec.n_points + seg
        inertia = np.linalg.eigvalsh(spec.segment_inertias[seg])[:, 0]
        _, I, _ = spec.areas
        return spec, q, blk, inertia, spec.youngs_modulus * I / spec.rest_lengths[seg]


def _rod_element_stiffness(model, body: str, nodes: np.ndarray):
    """(EA/l of the stiffest adjacent segment per node (0 for FEM nodes), EI/l likewise, _RodEnds or None)."""
    for k, spec in enumerate(model.rod_specs):
        if spec.name == body:
            A, I, _ = spec.areas
            l = spec.rest_lengths
            lmin = np.minimum(l[np.clip(nodes - 1, 0, len(l) - 1)], l[np.clip(nodes, 0, len(l) - 1)])
            return spec.youngs_modulus * A / lmin, spec.youngs_modulus * I / lmin, _RodEnds(model, k)
    return np.zeros(len(nodes)), np.zeros(len(nodes)), None


class JointSystem:
    """All joints and attachments of a Model: their coupling pairs for the pattern, and per step
    their contributions to A and b (module docstring)."""

    def __init__(self, model, joints: list, attachments: list):
        self.model = model
        dt = model.dt
        x0 = model.rest_positions
        R0 = [s.rotation for s in model.rigid_specs]
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
                spec, seg_q, seg_blk, seg_I, kr_seg = rod.segments(np.asarray(a.segments, np.int64))
                side = Side(model, a.rigid)
                Rseg0 = model.rot_q0_np[seg_q]
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
        self._cap = (0, 0)     # sizes of the scatter transfer arrays (allocated by _scatter)
        self.actuation: dict = {}   # joint name -> the last step's actuator force terms (actuator_forces)
        self._actuation_until = -1.0

    def _setup_robot_terms(self, model) -> None:
        """Per joint the (rigid index, mass) of the bodies it carries (gravity compensation), and the
        mimic couplings; a clear error for a mimic of a joint that does not exist."""
        by_name = {joint.spec.name: joint for joint in self.joints}
        self.carried = [[(model.rigid_index(name), model.rigid_specs[model.rigid_index(name)].mass)
                         for name in joint.spec.subtree] for joint in self.joints]
        self.mimics: list[MimicCoupling] = []
        for joint in self.joints:
            spec = joint.spec
            if spec.mimic is None:
                continue
            leader = by_name.get(spec.mimic.leader)
            if not isinstance(leader, CoordinateJoint):
                raise ParameterError(f"joint {spec.name!r} mimics {spec.mimic.leader!r}, which is not a hinge or "
                                     f"prismatic joint of the scene (joints: {sorted(by_name)})")
            if not isinstance(joint, CoordinateJoint):
                raise ParameterError(f"joint {spec.name!r}: only hinge and prismatic joints can mimic another")
            self.mimics.append(MimicCoupling(joint, leader))

    # ------------------------------------------------------------------ per step
    def after_advance(self, state) -> None:
        """Nothing follows from the positions (a body system: ``bodies/system.py``)."""

    def elastic_energy(self, state) -> float:
        """0: joint rows stand for constraints; the energy of their stiff springs (a small constraint
        error times a large stiffness) is not counted as the bodies' elastic energy."""
        return 0.0

    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        """Add every joint's ``(a_k + a_kb β) Jᵀ K J`` to A and ``−b_f Jᵀ K e`` (+ coordinate terms:
        limits, the drives as ``control`` holds them now, efforts, gravity compensation; mimic rows) to b."""
        n, n_rot = self.model.n_nodes, self.model.n_rot     # read through host views (no copy kernels)
        x = backend.read(state.x, n).astype(np.float64, copy=False)
        v = backend.read(state.v, n).astype(np.float64, copy=False)
        R = (quat_to_matrix(backend.read(state.q, n_rot).astype(np.float64, copy=False)) if n_rot
             else np.zeros((0, 3, 3)))
        conf = Configuration(x, v, R, dt)
        sums = RowSums()
        self.actuation, self._actuation_until = {}, t + dt
        coords: dict = {}            # joint -> (its coordinate, the coordinate's rows)
        angles = state.host.get(HINGE_ANGLES)
        angles = np.zeros(len(self.joints)) if angles is None or len(angles) != len(self.joints) else np.array(angles)
        for i, joint in enumerate(self.joints):
            g = joint.geometry(conf)
            sums.add_rows(joint.blocks, joint.rows(g, dt), coef.a_k + coef.a_kb * joint.beta, coef.b_f)
            if isinstance(joint, CoordinateJoint):
                angles[i], s, j = joint.coordinate(g, angles[i])
                coords[joint] = (s, j)
                self._coordinate_terms(i, control, sums, x, g, s, j, coordinate_rate(j, joint.blocks, v),
                                       coef, t, dt)
        state.host[HINGE_ANGLES] = angles
        for mimic in self.mimics:        # e = s − m s_leader − offset, a stiff joint-space spring
            sums.add_rows(mimic.blocks, mimic.rows(*coords[mimic.follower], *coords[mimic.leader]),
                          coef.a_k + coef.a_kb * mimic.beta, coef.b_f)
        parts = [sums.arrays()]
        parts += [self._attachment_terms(at, x, conf.pose, coef) for at in self.attach]
        parts += [self._orientation_terms(o, R, coef) for o in self.orient]
        self._scatter(parts, A, b)

    def _coordinate_terms(self, i: int, control, sums: RowSums, x: np.ndarray, g, s: float, j: list, sdot: float,
                          coef, t: float, dt: float) -> None:
        """Joint i's limit, drive with gravity compensation, and feedforward effort on its coordinate
        ``s`` (rows ``j``, rate ``sdot``); records the actuator's force of the step (``actuator_forces``)."""
        joint = self.joints[i]
        spec, blocks = joint.spec, joint.blocks
        gravity = -self._gravity_effort(i, x, g.pB, g.wA) if control.gravity_compensated(spec.name) else 0.0
        if joint.limit is not None:
            joint.limit.add_to(sums, blocks, j, s, sdot, coef, dt)
        const, slope = self._drive_terms(control.joint_drive(spec.name), s, sdot, j, blocks, sums, coef, t, gravity)
        effort = control.joint_effort(spec.name, t)
        if effort != 0.0:
            sums.add(blocks, j, np.zeros((1, 1)), np.zeros(1), 0.0, 0.0, extra_b=np.array([coef.b_f * effort]))
        self.actuation[spec.name] = (const + effort, slope, j, blocks)

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

    def _gravity_effort(self, i: int, x: np.ndarray, anchor: np.ndarray, axis: np.ndarray) -> float:
        """Generalized force of gravity on joint i's coordinate from the bodies it carries:
        ``Σ m_b g · (a × (c_b − p))`` (hinge about axis a through p) or ``Σ m_b g · a`` (prismatic)."""
        g = self.model.gravity
        total = 0.0
        for k, m in self.carried[i]:
            c = x[int(self.model.rigid_lin[k])]
            total += m * float(g @ self.joints[i].gravity_lever(axis, c, anchor))
        return total

    @staticmethod
    def _drive_terms(d, s: float, sdot: float, j: list, blocks: list, sums: RowSums, coef, t: float,
                     gravity: float) -> tuple[float, float]:
        """The actuator's drive plus gravity compensation ``gravity`` (N or N m), whose sum is capped at
        the drive's max_force. Returns the actuator force of the step as ``(c, g)``: ``c + g ṡ̂`` with
        ``ṡ̂`` the solved coordinate rate (the implicit PD terms are linear in it)."""
        one = np.ones((1, 1))
        if d is None:
            if gravity != 0.0:
                sums.add(blocks, j, 0.0 * one, np.zeros(1), 0.0, 0.0, extra_b=np.array([coef.b_f * gravity]))
            return gravity, 0.0
        target, vel = d.values(t)
        force = -d.kd * (sdot - vel) - (0.0 if target is None else d.kp * (s - target)) + gravity
        if d.max_force is not None and abs(force) > d.max_force:
            # saturated: a constant effort along the coordinate (impulse units: b_f)
            capped = float(np.sign(force) * d.max_force)
            sums.add(blocks, j, 0.0 * one, np.zeros(1), 0.0, 0.0, extra_b=np.array([coef.b_f * capped]))
            return capped, 0.0
        kp = 0.0 if target is None else d.kp
        e = np.array([0.0 if target is None else s - target])
        # stiffness kp (a_k), damping kd (a_kb as Rayleigh damping enters A), its target rate in b
        sums.add(blocks, j, kp * one, e, coef.a_k, coef.b_f)
        sums.add(blocks, j, d.kd * one, np.zeros(1), coef.a_kb, 0.0,
                 extra_b=np.array([coef.a_kb * d.kd * vel + coef.b_f * gravity]))
        # the force these rows apply: −kp (e + (a_k/b_f) ṡ̂) − kd (a_kb/b_f)(ṡ̂ − ṡ*) + gravity
        return (-kp * float(e[0]) + d.kd * vel * coef.a_kb / coef.b_f + gravity,
                -(kp * coef.a_k + d.kd * coef.a_kb) / coef.b_f)

    def hinge_coordinate(self, state, joint: str) -> Optional[float]:
        """The unwrapped coordinate (rad, ``position0`` included) of hinge ``joint`` at the last
        assembly (None before the first): a reading from the poses lies within π of it."""
        angles = state.host.get(HINGE_ANGLES)
        if angles is None or len(angles) != len(self.joints):
            return None
        for i, j in enumerate(self.joints):
            if j.spec.name == joint and isinstance(j, Hinge):
                return float(angles[i]) + j.spec.position0
        return None

    def actuator_forces(self, state) -> dict:
        """Generalized force (N m or N) each driven or compensated joint's actuator applied over the
        last step: its PD drive and gravity compensation (capped together at the drive's max_force, as
        applied) plus the feedforward effort, with the implicit terms at the solved rate ``ṡ̂ = j v̂``.
        Empty before the first step (and after a checkpoint is loaded, until the next step)."""
        if not self.actuation or abs(state.time - self._actuation_until) > 1e-9 * self.model.dt:
            return {}
        v_hat = backend.read(state.v_hat, self.model.n_nodes).astype(np.float64, copy=False)
        return {name: const + slope * coordinate_rate(j, blocks, v_hat)
                for name, (const, slope, j, blocks) in self.actuation.items()}

    def _scatter(self, parts: list, A, b) -> None:
        """Add all (row, col, 3x3) terms to A and (row, vec) terms to b with one kernel; the transfer
        arrays are kept between steps and grow when a step needs more."""
        rows, cols, mats, b_rows, b_vecs = (np.concatenate(z) for z in zip(*parts))
        slots = self.model.pattern.index(rows, cols) if len(rows) else np.zeros(0, np.int64)
        n, m = len(slots), len(b_rows)
        if n > self._cap[0] or m > self._cap[1] or self._cap[0] == 0:
            self._cap = (max(n, 1, 2 * self._cap[0]), max(m, 1, 2 * self._cap[1]))
            self._slots = backend.int_array(np.zeros(self._cap[0]))
            self._mats = backend.mat3_array(self._cap[0])
            self._rows = backend.int_array(np.zeros(self._cap[1]))
            self._vecs = backend.vec3_array(self._cap[1])
        real = backend.np_real()
        pad = lambda a, size, fill: np.concatenate([a, np.full((size - len(a),) + a.shape[1:], fill, a.dtype)])
        for arr, data in ((self._slots, pad(slots.astype(np.int32), self._cap[0], -1)),
                          (self._mats, pad(mats.astype(real), self._cap[0], 0)),
                          (self._rows, pad(b_rows.astype(np.int32), self._cap[1], -1)),
                          (self._vecs, pad(b_vecs.astype(real), self._cap[1], 0))):
            view = backend.host_view(arr)          # CPU: write in place, no copy kernel
            if view is not None:
                view[...] = data
            else:
                arr.from_numpy(data)
        scatter_joint_terms(self._slots, self._mats, self._rows, self._vecs, A.blocks, b)

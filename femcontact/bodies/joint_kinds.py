"""One class per joint kind: its constraint rows, residual and stiffness (docs/THEORY.md §1–2).

A joint between side A (a rigid body or the world) and side B (a rigid body) acts on the blocks
``(v_A, ω_A, v_B, ω_B)``. Each of its rows is a stiff spring ``½ eᵀ K e`` on a constraint error
``e(q)`` whose rate is ``ė = J v``; the joint's residual (generalized force) is ``−Σ Jᵀ K e`` and its
stiffness ``Σ Jᵀ K J``: the consistent tangent where the rows hold (``e = 0``), the geometric part
``Σ (∂J)ᵀ K e`` left out (symmetric positive semidefinite, as the rods' Gauss–Newton stiffness).
``JointSystem`` (``bodies/joints.py``) scales them into ``A`` and ``b`` and scatters them.

- ``Ball``: the anchor points meet, ``e = p_B − p_A``, ``J = [−I, [r_A]×, I, −[r_B]×]``;
- ``Weld``: a ball plus the orientation row ``e = log(R_B R_relᵀ R_Aᵀ)``, ``J = [−I, I]`` on (ω_A, ω_B);
- ``Hinge``: a ball plus the alignment row ``e = a_A × a_B``, ``J = [−P, P]``, ``P = I − a aᵀ``;
  coordinate: the angle about the axis, unwrapped, ``j = [−aᵀ, aᵀ]`` on (ω_A, ω_B);
- ``Prismatic``: the ball row across the axis, ``e = P (p_B − p_A)``, ``J = P J_ball``, and the
  weld's orientation row; coordinate: the slide ``s = aᵀ (p_B − p_A)``, ``j = aᵀ J_ball``;
- ``MimicCoupling``: ``e = s − m s_leader − offset`` over the blocks of both joints;
- ``Limit``: a one-sided stop on a coordinate, a damper toward the rate that ends the step at rest
  on the limit (engaged when ``s + dt ṡ`` leaves ``[lower, upper]``).

Every row's error also gets the second-order drift of the step (the anchors and axes turning with
the bodies, rate squared): zero at rest, so residual and stiffness at rest are those of ``e(q)``.
"""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..math.quaternion import cross, cross_matrix as skew

STIFFNESS_FACTOR = 1e4
I3 = np.eye(3)
Z3 = np.zeros((3, 3))
_TURN = np.concatenate([Z3, -I3, Z3, I3], 1)      # an orientation row's J on (v_A, ω_A, v_B, ω_B)


class Side:
    """One side of a joint: a rigid body (blocks lin, lin+1; quaternion index k) or the world."""

    def __init__(self, model, name: Optional[str]):
        self.world = name is None
        if self.world:
            self.k, self.lin, self.mass, self.inertia = -1, -1, np.inf, np.inf
            return
        rigid = model.rigid
        self.k = k = rigid.index(name)
        self.lin = int(rigid.lin[k])
        self.mass = float(rigid.mass[k]) if not rigid.kinematic[k] else np.inf
        self.inertia = float(np.linalg.eigvalsh(rigid.inertia[k])[0]) if not rigid.kinematic[k] else np.inf


@dataclass
class Configuration:
    """The host arrays one assembly reads: block positions ``x`` and velocities ``v`` (a rigid body's
    centre of mass and angular velocity at its blocks lin, lin+1), rotations ``R`` (n_rot, 3, 3)
    and the step ``dt``."""

    x: np.ndarray
    v: np.ndarray
    R: np.ndarray
    dt: float

    def pose(self, side: Side) -> tuple[np.ndarray, np.ndarray]:
        if side.world:
            return np.zeros(3), np.eye(3)
        return self.x[side.lin], self.R[side.k]

    def omega(self, side: Side) -> np.ndarray:
        return np.zeros(3) if side.world else self.v[side.lin + 1]


class Row(NamedTuple):
    """A spring ``½ eᵀ K e`` with ``ė = Σ_a J[a] v_{block a}`` (J: one (r, 3) matrix per block)."""

    J: list
    K: np.ndarray
    e: np.ndarray


class Rows(NamedTuple):
    """One row of each of n joints, stacked: springs ``½ k |e|²`` with ``ė = J v`` over the joint's
    blocks (``J``: (n, r, 3 × blocks), ``k``: (n,), ``e``: (n, r))."""

    J: np.ndarray
    k: np.ndarray
    e: np.ndarray

    def row(self, i: int) -> Row:
        """Joint i's Row (J split per block, K = k I)."""
        J = self.J[i]
        return Row([J[:, c:c + 3] for c in range(0, J.shape[1], 3)], self.k[i] * np.eye(J.shape[0]), self.e[i])


class RowSums:
    """Row terms summed per block: ``matrix[(a, c)]`` (3x3, for A) and ``vector[a]`` (3, for b), in
    the order the blocks are first touched."""

    def __init__(self):
        self.matrix: dict = {}
        self.vector: dict = {}

    def add(self, blocks: list, Js: list, K: np.ndarray, e: np.ndarray, scale_k: float, scale_b: float,
            extra_b: Optional[np.ndarray] = None) -> None:
        """``scale_k Jᵀ K J`` and ``−scale_b Jᵀ K e (+ Jᵀ extra_b)``; blocks < 0 (the world) are dropped."""
        for a, Ja in zip(blocks, Js):
            if a < 0:
                continue
            fa = -scale_b * (Ja.T @ (K @ e))
            if extra_b is not None:
                fa = fa + Ja.T @ extra_b
            self.vector[a] = self.vector.get(a, 0.0) + fa
            for c, Jc in zip(blocks, Js):
                if c >= 0:
                    self.matrix[(a, c)] = self.matrix.get((a, c), 0.0) + scale_k * (Ja.T @ K @ Jc)

    def add_rows(self, blocks: list, rows: list, scale_k: float, scale_b: float) -> None:
        for row in rows:
            self.add(blocks, row.J, row.K, row.e, scale_k, scale_b)


def residual_and_stiffness(blocks: list, rows: list) -> RowSums:
    """``−Σ Jᵀ K e`` per block (``.vector``) and ``Σ Jᵀ K J`` per block pair (``.matrix``)."""
    sums = RowSums()
    sums.add_rows(blocks, rows, 1.0, 1.0)
    return sums


def rotation_log(E: np.ndarray) -> np.ndarray:
    """(n, 3, 3) rotations -> (n, 3) rotation vectors: ``θ/sin θ`` times the axial vector of the
    skew part where ``θ < π/2`` (every joint that holds), scipy's quaternion route beyond."""
    v = 0.5 * np.stack([E[:, 2, 1] - E[:, 1, 2], E[:, 0, 2] - E[:, 2, 0], E[:, 1, 0] - E[:, 0, 1]], -1)
    c = 0.5 * (E[:, 0, 0] + E[:, 1, 1] + E[:, 2, 2] - 1.0)
    sn = np.sqrt((v * v).sum(1))
    out = (np.arctan2(sn, c) / np.where(sn > 0, sn, 1.0))[:, None] * v
    far = c < 0.0
    if far.any():
        from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up
        out[far] = Rotation.from_matrix(E[far]).as_rotvec()
    return out


def _mv(R: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Stacked matrix-vector products ``R_i a_i``."""
    return (R @ a[..., None])[..., 0]


class Stack:
    """The body-frame data of n joints stacked over joints (leading axis), so that rows are
    evaluated for all of them at once; ``blocks`` (n, 4): (v_A, ω_A, v_B, ω_B), −1 for the world."""

    def __init__(self, joints: list):
        self.n = len(joints)
        self.world_A = np.array([j.A.world for j in joints], bool)
        self.body_A = (~self.world_A)[:, None].astype(float)
        self.kA, self.kB = np.array([j.A.k for j in joints]), np.array([j.B.k for j in joints])
        self.blocks = np.array([j.blocks for j in joints], np.int64).reshape(-1, 4)
        for name in ("anchor_A", "axis_A", "anchor_B", "axis_B", "perp_A", "perp_B", "R_rel", "k_lin", "k_rot",
                     "beta"):
            setattr(self, name, np.array([getattr(j, name) for j in joints], float))
        self.position0 = np.array([j.position0 for j in joints], float)


class Geometry(NamedTuple):
    """Anchors and axes in the world of a Stack of joints at one configuration (module docstring);
    every field stacked over the joints."""

    RA: np.ndarray
    RB: np.ndarray
    rA: np.ndarray        # levers p − x_com (0 for the world)
    rB: np.ndarray
    pB: np.ndarray        # the child's anchor point
    e_pos: np.ndarray     # p_B − p_A
    Jpos: np.ndarray      # [−I, [r_A]×, I, −[r_B]×]: (n, 3, 12)
    drift: np.ndarray     # ½ dt² (ω_B×(ω_B×r_B) − ω_A×(ω_A×r_A))
    wA: np.ndarray        # the axis seen by each body
    wB: np.ndarray
    omA: np.ndarray
    omB: np.ndarray


def block_values(v: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """(n, 3 × blocks) values of ``v`` (n_nodes, 3) at ``blocks`` (n, blocks), 0 where a block is −1."""
    return (v[blocks] * (blocks >= 0)[..., None]).reshape(len(blocks), -1)


def stack_geometry(st: Stack, conf: Configuration) -> Geometry:
    """Anchors, levers, axes and the anchors' drift over the step of every joint of ``st`` at ``conf``."""
    dt = conf.dt
    RA, RB = conf.R[st.kA], conf.R[st.kB]
    RA[st.world_A] = I3
    bA = st.body_A
    aA = _mv(RA, st.anchor_A)
    rA = aA * bA
    pA = conf.x[st.blocks[:, 0]] * bA + aA            # the world's anchor is in world coordinates
    rB = _mv(RB, st.anchor_B)
    pB = conf.x[st.blocks[:, 2]] + rB
    wA, wB = _mv(RA, st.axis_A), _mv(RB, st.axis_B)
    # the rows are linear in v̂, but the anchors turn with the bodies: over the step the error
    # also gains ½ dt² (ω_B×(ω_B×r_B) − ω_A×(ω_A×r_A)) (centripetal drift, rate-squared); the
    # spring sees it now, so a fast-turning joint stays closed to O(dt³)
    omA, omB = conf.v[st.blocks[:, 1]] * bA, conf.v[st.blocks[:, 3]]
    drift = 0.5 * dt * dt * (cross(omB, cross(omB, rB)) - cross(omA, cross(omA, rA)))
    Jpos = np.empty((st.n, 3, 12))
    Jpos[:, :, 0:3], Jpos[:, :, 3:6], Jpos[:, :, 6:9], Jpos[:, :, 9:12] = -I3, skew(rA), I3, -skew(rB)
    return Geometry(RA, RB, rA, rB, pB, pB - pA, Jpos, drift, wA, wB, omA, omB)


class JointKind(ABC):
    """A joint of one kind between sides A (parent) and B (child): its blocks, stiffnesses and
    body-frame data (anchor, axis, relative rotation at build). Its rows are evaluated for a Stack
    of joints of the kind at once (``stack_rows``); ``geometry``/``rows``/``coordinate`` are the
    same for this joint alone."""

    def __init__(self, model, spec, x0: np.ndarray, R0: list, dt: float):
        self.name, self.kind, self.position0 = spec.name, spec.kind, spec.position0
        self.subtree = tuple(spec.subtree)      # the rigid bodies it carries (gravity compensation)
        self.mimic = (None if spec.mimic is None else       # (leader, multiplier, offset)
                      (spec.mimic.leader, spec.mimic.multiplier, spec.mimic.offset))
        self.A, self.B = A, B = Side(model, spec.parent), Side(model, spec.child)
        loc = []
        for side in (A, B):
            if side.world:
                loc.append((spec.anchor.copy(), spec.axis.copy(), np.eye(3)))
            else:
                R = R0[side.k]
                loc.append((R.T @ (spec.anchor - x0[side.lin]), R.T @ spec.axis, R))
        (self.anchor_A, self.axis_A, RA0), (self.anchor_B, self.axis_B, RB0) = loc
        m = spec.ref_mass or min(A.mass, B.mass)
        inertia = spec.ref_inertia or min(A.inertia, B.inertia)
        self.k_lin = spec.stiffness or STIFFNESS_FACTOR * m / dt**2
        self.k_rot = spec.stiffness or STIFFNESS_FACTOR * inertia / dt**2
        self.beta = spec.damping or dt
        self.R_rel = RA0.T @ RB0
        perp = np.cross(spec.axis, [1.0, 0, 0] if abs(spec.axis[0]) < 0.9 else [0, 1.0, 0])
        perp /= np.linalg.norm(perp)
        self.perp_A, self.perp_B = RA0.T @ perp, RB0.T @ perp
        self.blocks = [A.lin, A.lin + 1 if not A.world else -1, B.lin, B.lin + 1]
        self.limit: Optional[Limit] = None
        self.own = Stack([self])

    @staticmethod
    @abstractmethod
    def stack_rows(st: Stack, g: Geometry, dt: float) -> list:
        """The Rows of every joint of ``st`` (all of this kind) at geometry ``g`` (errors with the
        step's drift)."""

    def geometry(self, conf: Configuration) -> Geometry:
        """This joint's anchors, levers, axes and drift at ``conf`` (a stack of one)."""
        return stack_geometry(self.own, conf)

    def rows(self, g: Geometry, dt: float) -> list:
        """This joint's Rows at its geometry ``g``."""
        return [r.row(0) for r in self.stack_rows(self.own, g, dt)]

    def residual_and_stiffness(self, conf: Configuration) -> RowSums:
        """The joint's residual ``−Σ Jᵀ K e`` (``.vector``) and stiffness ``Σ Jᵀ K J`` (``.matrix``)."""
        return residual_and_stiffness(self.blocks, self.rows(self.geometry(conf), conf.dt))

    # ------------------------------------------------------------------ shared rows
    @staticmethod
    def _ball_rows(st: Stack, g: Geometry) -> Rows:
        return Rows(g.Jpos, st.k_lin, g.e_pos + g.drift)

    @staticmethod
    def _orientation_rows(st: Stack, g: Geometry, dt: float) -> Rows:
        E = g.RB @ st.R_rel.transpose(0, 2, 1) @ g.RA.transpose(0, 2, 1)       # R_A = I for the world
        # log(exp(dt ω_B) E exp(−dt ω_A)): the second-order (BCH) part ½ dt² ω_A×ω_B
        e_rot = rotation_log(E) + 0.5 * dt * dt * cross(g.omA, g.omB)
        return Rows(np.broadcast_to(_TURN, (st.n, 3, 12)), st.k_rot, e_rot)


class Ball(JointKind):
    @staticmethod
    def stack_rows(st: Stack, g: Geometry, dt: float) -> list:
        return [JointKind._ball_rows(st, g)]


class Weld(JointKind):
    @staticmethod
    def stack_rows(st: Stack, g: Geometry, dt: float) -> list:
        return [JointKind._ball_rows(st, g), JointKind._orientation_rows(st, g, dt)]


class CoordinateJoint(JointKind):
    """A joint with one coordinate (hinge angle, prismatic slide) that limits, drives, efforts,
    gravity compensation and mimic couplings act on."""

    def __init__(self, model, spec, x0: np.ndarray, R0: list, dt: float):
        super().__init__(model, spec, x0, R0, dt)
        if spec.limits is not None:
            self.limit = Limit(*spec.limits, self.k_coordinate)

    @property
    def k_coordinate(self) -> float:
        """Stiffness of the rows along the coordinate (N/m or N m/rad): limits and mimic rows use it."""
        return float(self.coordinate_stiffness(self.own)[0])

    @staticmethod
    @abstractmethod
    def coordinate_stiffness(st: Stack) -> np.ndarray:
        """``k_coordinate`` of every joint of ``st``."""

    @staticmethod
    @abstractmethod
    def stack_coordinate(st: Stack, g: Geometry, last: np.ndarray) -> tuple:
        """(what each joint keeps between steps, given ``last`` of the step before; the coordinate
        ``s`` with ``position0``; its rows ``j``, (n, 1, 12)) of every joint of ``st`` at ``g``."""

    def coordinate(self, g: Geometry, last: float) -> tuple:
        """This joint's (kept value, coordinate ``s``, its rows ``j``: one (1, 3) per block)."""
        kept, s, j = self.stack_coordinate(self.own, g, np.array([last], float))
        return float(kept[0]), float(s[0]), [j[0][:, c:c + 3] for c in range(0, 12, 3)]

    @staticmethod
    @abstractmethod
    def gravity_lever(axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        """``∂(centre)/∂s`` of carried bodies' centres of mass (stacked): gravity's effort is ``m g · lever``."""


class Hinge(CoordinateJoint):
    @staticmethod
    def coordinate_stiffness(st: Stack) -> np.ndarray:
        return st.k_rot

    @staticmethod
    def stack_rows(st: Stack, g: Geometry, dt: float) -> list:
        wA, wB, omA, omB = g.wA, g.wB, g.omA, g.omB
        P = I3 - wA[:, :, None] * wA[:, None, :]
        # second-order change of a_A × a_B as both axes turn (−½ dt² ṡ ω_A×a when aligned)
        tA, tB = cross(omA, wA), cross(omB, wB)
        drift = dt * dt * (0.5 * cross(cross(omA, tA), wB) + 0.5 * cross(wA, cross(omB, tB)) + cross(tA, tB))
        J = np.zeros((st.n, 3, 12))
        J[:, :, 3:6], J[:, :, 9:12] = -P, P
        return [JointKind._ball_rows(st, g), Rows(J, st.k_rot, cross(wA, wB) + drift)]

    @staticmethod
    def stack_coordinate(st: Stack, g: Geometry, last: np.ndarray) -> tuple:
        """The angle about the axis, unwrapped to the branch nearest ``last`` (which it replaces)."""
        uA, uB = _mv(g.RA, st.perp_A), _mv(g.RB, st.perp_B)       # R_A = I for the world
        s = np.arctan2((cross(uA, uB) * g.wA).sum(1), (uA * uB).sum(1))
        angle = s + 2 * np.pi * np.round((last - s) / (2 * np.pi))
        j = np.zeros((st.n, 1, 12))
        j[:, 0, 3:6], j[:, 0, 9:12] = -g.wA, g.wA
        return angle, angle + st.position0, j

    @staticmethod
    def gravity_lever(axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        return cross(axis, centre - anchor)


class Prismatic(CoordinateJoint):
    @staticmethod
    def coordinate_stiffness(st: Stack) -> np.ndarray:
        return st.k_lin

    @staticmethod
    def stack_rows(st: Stack, g: Geometry, dt: float) -> list:
        P = I3 - g.wA[:, :, None] * g.wA[:, None, :]
        return [Rows(P @ g.Jpos, st.k_lin, _mv(P, g.e_pos + g.drift)), JointKind._orientation_rows(st, g, dt)]

    @staticmethod
    def stack_coordinate(st: Stack, g: Geometry, last: np.ndarray) -> tuple:
        """The slide along the axis (``last`` is kept as it is)."""
        return last, (g.wA * g.e_pos).sum(1) + st.position0, g.wA[:, None, :] @ g.Jpos

    @staticmethod
    def gravity_lever(axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        return axis


JOINT_CLASSES = {"weld": Weld, "ball": Ball, "hinge": Hinge, "prismatic": Prismatic}   # by JointSpec.kind


class MimicCoupling:
    """``e = s − m s_leader − offset`` (URDF ``<mimic>``), a stiff joint-space row of the follower's
    coordinate stiffness over the blocks of both joints."""

    def __init__(self, follower: CoordinateJoint, leader: CoordinateJoint):
        self.follower, self.leader = follower, leader
        _, self.multiplier, self.offset = follower.mimic
        self.blocks = list(follower.blocks) + list(leader.blocks)
        self.beta = follower.beta

    @staticmethod
    def stack_rows(s: np.ndarray, j: np.ndarray, s_leader: np.ndarray, j_leader: np.ndarray,
                   multiplier: np.ndarray, offset: np.ndarray, k: np.ndarray) -> Rows:
        """The Rows of n couplings at follower coordinates ``s`` (rows ``j``: (n, 1, 12)) and leader
        coordinates ``s_leader`` (``j_leader``), over the 8 blocks of follower and leader."""
        e = (s - multiplier * s_leader - offset)[:, None]
        return Rows(np.concatenate([j, -multiplier[:, None, None] * j_leader], 2), k, e)

    def rows(self, s: float, j: list, s_leader: float, j_leader: list) -> list:
        """The Row at coordinates ``s`` (rows ``j``, one (1, 3) per block) of the follower and
        ``s_leader`` of the leader."""
        one = lambda value: np.array([value], float)
        rows = self.stack_rows(one(s), np.concatenate(j, 1)[None], one(s_leader), np.concatenate(j_leader, 1)[None],
                               one(self.multiplier), one(self.offset), one(self.follower.k_coordinate))
        return [rows.row(0)]


def limit_rate(lower, upper, s, sdot, coef, dt: float) -> tuple:
    """(engaged, target rate) of one-sided limits on coordinates ``s`` with rates ``sdot`` (numbers
    or stacked): engaged while ``s + dt ṡ`` (speculative: a step before the limit is crossed) lies
    outside ``[lower, upper]``; the rate ``ṡ* = −(v_old/v_hat) ṡ − 0.2 overshoot/dt`` (Limit)."""
    s_next = s + dt * sdot
    below = s_next < lower
    over = np.where(below, np.minimum(s - lower, 0.0), np.maximum(s - upper, 0.0))
    return below | (s_next > upper), -(coef.v_old / coef.v_hat) * sdot - 0.2 * over / dt


class Limit:
    """One-sided limits ``[lower, upper]`` on a coordinate: while ``s + dt ṡ`` lies outside, a damper
    of ``c = k dt`` toward the rate ``ṡ* = −(v_old/v_hat) ṡ − 0.2 overshoot/dt`` (the rate that ends
    the step at rest on the limit, docs/THEORY.md §1, plus 20 % recovery of any overshoot): an
    inelastic stop. Its row is a damper, ``a_kb c jᵀ j`` in A and ``a_kb c ṡ* jᵀ`` in b
    (``limit_rate``, stacked over joints)."""

    def __init__(self, lower: float, upper: float, k: float):
        self.lower, self.upper, self.k = lower, upper, k

    def engaged(self, s: float, sdot: float, dt: float) -> bool:
        return bool(limit_rate(self.lower, self.upper, s, sdot, _NO_COEF, dt)[0])

    def target_rate(self, s: float, sdot: float, coef, dt: float) -> float:
        return float(limit_rate(self.lower, self.upper, s, sdot, coef, dt)[1])

    def add_to(self, sums: RowSums, blocks: list, j: list, s: float, sdot: float, coef, dt: float) -> None:
        """The damper row when engaged; nothing otherwise."""
        engaged, rate = limit_rate(self.lower, self.upper, s, sdot, coef, dt)
        if engaged:
            c = self.k * dt
            sums.add(blocks, j, c * np.ones((1, 1)), np.zeros(1), coef.a_kb, 0.0,
                     extra_b=np.array([coef.a_kb * c * float(rate)]))


class _Coefficients(NamedTuple):
    v_old: float
    v_hat: float


_NO_COEF = _Coefficients(0.0, 1.0)      # engagement does not depend on the integrator

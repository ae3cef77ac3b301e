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

from ..math.quaternion import cross_matrix as skew

STIFFNESS_FACTOR = 1e4
I3 = np.eye(3)
Z3 = np.zeros((3, 3))


class Side:
    """One side of a joint: a rigid body (blocks lin, lin+1; quaternion index k) or the world."""

    def __init__(self, model, name: Optional[str]):
        self.world = name is None
        if self.world:
            self.k, self.lin, self.mass, self.inertia = -1, -1, np.inf, np.inf
            return
        self.k = model.rigid_index(name)
        spec = model.rigid_specs[self.k]
        self.lin = int(model.rigid_lin[self.k])
        self.mass = spec.mass if not spec.kinematic else np.inf
        self.inertia = float(np.linalg.eigvalsh(spec.inertia)[0]) if not spec.kinematic else np.inf


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


class RowSums:
    """Row terms summed per block: ``matrix[(a, c)]`` (3x3, for A) and ``vector[a]`` (3, for b), in
    the order the blocks are first touched (the scatter's order)."""

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

    def arrays(self) -> tuple:
        """(rows, cols, 3x3 terms of A, b rows, 3-vectors of b) as arrays."""
        (r, c), m = (zip(*self.matrix) if self.matrix else ((), ())), list(self.matrix.values())
        return (np.array(r, np.int64), np.array(c, np.int64), np.array(m, float).reshape(-1, 3, 3),
                np.array(list(self.vector), np.int64), np.array(list(self.vector.values()), float).reshape(-1, 3))


def residual_and_stiffness(blocks: list, rows: list) -> RowSums:
    """``−Σ Jᵀ K e`` per block (``.vector``) and ``Σ Jᵀ K J`` per block pair (``.matrix``)."""
    sums = RowSums()
    sums.add_rows(blocks, rows, 1.0, 1.0)
    return sums


class Geometry(NamedTuple):
    """A joint's anchors and axes in the world at one configuration (module docstring)."""

    RA: np.ndarray
    RB: np.ndarray
    rA: np.ndarray        # levers p − x_com (0 for the world)
    rB: np.ndarray
    pB: np.ndarray        # the child's anchor point
    e_pos: np.ndarray     # p_B − p_A
    Jpos: list            # [−I, [r_A]×, I, −[r_B]×]
    drift: np.ndarray     # ½ dt² (ω_B×(ω_B×r_B) − ω_A×(ω_A×r_A))
    wA: np.ndarray        # the axis seen by each body
    wB: np.ndarray
    omA: np.ndarray
    omB: np.ndarray


class JointKind(ABC):
    """A joint of one kind between sides A (parent) and B (child): its blocks, stiffnesses and
    body-frame data (anchor, axis, relative rotation at build), and per configuration its rows."""

    def __init__(self, model, spec, x0: np.ndarray, R0: list, dt: float):
        self.spec = spec
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

    def geometry(self, conf: Configuration) -> Geometry:
        """Anchors, levers, axes and the anchors' drift over the step at ``conf``."""
        A_, B_, dt = self.A, self.B, conf.dt
        (cA, RA), (cB, RB) = conf.pose(A_), conf.pose(B_)
        rA = RA @ self.anchor_A if not A_.world else np.zeros(3)
        rB = RB @ self.anchor_B
        pA = cA + rA if not A_.world else self.anchor_A
        pB = cB + rB
        wA = RA @ self.axis_A if not A_.world else self.axis_A
        wB = RB @ self.axis_B
        # the rows are linear in v̂, but the anchors turn with the bodies: over the step the error
        # also gains ½ dt² (ω_B×(ω_B×r_B) − ω_A×(ω_A×r_A)) (centripetal drift, rate-squared); the
        # spring sees it now, so a fast-turning joint stays closed to O(dt³)
        omA, omB = conf.omega(A_), conf.omega(B_)
        drift = 0.5 * dt * dt * (np.cross(omB, np.cross(omB, rB)) - np.cross(omA, np.cross(omA, rA)))
        return Geometry(RA, RB, rA, rB, pB, pB - pA, [-I3, skew(rA), I3, -skew(rB)], drift, wA, wB, omA, omB)

    @abstractmethod
    def rows(self, g: Geometry, dt: float) -> list:
        """The joint's Rows at geometry ``g`` (errors with the step's drift)."""

    def residual_and_stiffness(self, conf: Configuration) -> RowSums:
        """The joint's residual ``−Σ Jᵀ K e`` (``.vector``) and stiffness ``Σ Jᵀ K J`` (``.matrix``)."""
        return residual_and_stiffness(self.blocks, self.rows(self.geometry(conf), conf.dt))

    # ------------------------------------------------------------------ shared rows
    def _ball_row(self, g: Geometry) -> Row:
        return Row(g.Jpos, self.k_lin * I3, g.e_pos + g.drift)

    def _orientation_row(self, g: Geometry, dt: float) -> Row:
        E = g.RB @ self.R_rel.T @ g.RA.T if not self.A.world else g.RB @ self.R_rel.T
        from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up
        e_rot = Rotation.from_matrix(E).as_rotvec()
        # log(exp(dt ω_B) E exp(−dt ω_A)): the second-order (BCH) part ½ dt² ω_A×ω_B
        return Row([Z3, -I3, Z3, I3], self.k_rot * I3, e_rot + 0.5 * dt * dt * np.cross(g.omA, g.omB))


class Ball(JointKind):
    def rows(self, g: Geometry, dt: float) -> list:
        return [self._ball_row(g)]


class Weld(JointKind):
    def rows(self, g: Geometry, dt: float) -> list:
        return [self._ball_row(g), self._orientation_row(g, dt)]


class CoordinateJoint(JointKind):
    """A joint with one coordinate (hinge angle, prismatic slide) that limits, drives, efforts,
    gravity compensation and mimic couplings act on."""

    def __init__(self, model, spec, x0: np.ndarray, R0: list, dt: float):
        super().__init__(model, spec, x0, R0, dt)
        if spec.limits is not None:
            self.limit = Limit(*spec.limits, self.k_coordinate)

    @property
    @abstractmethod
    def k_coordinate(self) -> float:
        """Stiffness of the rows along the coordinate (N/m or N m/rad): limits and mimic rows use it."""

    @abstractmethod
    def coordinate(self, g: Geometry, last: float) -> tuple:
        """(what the joint keeps between steps, given ``last`` of the step before; the coordinate
        ``s`` with ``position0``; its rows ``j``, one (1, 3) per block) at geometry ``g``."""

    @abstractmethod
    def gravity_lever(self, axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        """``∂(centre)/∂s`` of a carried body's centre of mass: gravity's effort is ``m g · lever``."""


class Hinge(CoordinateJoint):
    @property
    def k_coordinate(self) -> float:
        return self.k_rot

    def rows(self, g: Geometry, dt: float) -> list:
        wA, wB, omA, omB = g.wA, g.wB, g.omA, g.omB
        P = I3 - np.outer(wA, wA)
        # second-order change of a_A × a_B as both axes turn (−½ dt² ṡ ω_A×a when aligned)
        tA, tB = np.cross(omA, wA), np.cross(omB, wB)
        drift = dt * dt * (0.5 * np.cross(np.cross(omA, tA), wB) + 0.5 * np.cross(wA, np.cross(omB, tB))
                           + np.cross(tA, tB))
        return [self._ball_row(g), Row([Z3, -P, Z3, P], self.k_rot * I3, np.cross(wA, wB) + drift)]

    def coordinate(self, g: Geometry, last: float) -> tuple:
        """The angle about the axis, unwrapped to the branch nearest ``last`` (which it replaces)."""
        uA = g.RA @ self.perp_A if not self.A.world else self.perp_A
        uB = g.RB @ self.perp_B
        s = float(np.arctan2(np.cross(uA, uB) @ g.wA, uA @ uB))
        s = angle = s + 2 * np.pi * np.round((last - s) / (2 * np.pi))
        s += self.spec.position0
        return angle, s, [np.zeros((1, 3)), -g.wA[None], np.zeros((1, 3)), g.wA[None]]

    def gravity_lever(self, axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        return np.cross(axis, centre - anchor)


class Prismatic(CoordinateJoint):
    @property
    def k_coordinate(self) -> float:
        return self.k_lin

    def rows(self, g: Geometry, dt: float) -> list:
        P = I3 - np.outer(g.wA, g.wA)
        return [Row([P @ J for J in g.Jpos], self.k_lin * I3, P @ (g.e_pos + g.drift)),
                self._orientation_row(g, dt)]

    def coordinate(self, g: Geometry, last: float) -> tuple:
        """The slide along the axis (``last`` is kept as it is)."""
        s = float(g.wA @ g.e_pos)
        s += self.spec.position0
        return last, s, [g.wA[None] @ J for J in g.Jpos]

    def gravity_lever(self, axis: np.ndarray, centre: np.ndarray, anchor: np.ndarray) -> np.ndarray:
        return axis


JOINT_CLASSES = {"weld": Weld, "ball": Ball, "hinge": Hinge, "prismatic": Prismatic}   # by JointSpec.kind


class MimicCoupling:
    """``e = s − m s_leader − offset`` (URDF ``<mimic>``), a stiff joint-space row of the follower's
    coordinate stiffness over the blocks of both joints."""

    def __init__(self, follower: CoordinateJoint, leader: CoordinateJoint):
        self.follower, self.leader = follower, leader
        self.mimic = follower.spec.mimic
        self.blocks = list(follower.blocks) + list(leader.blocks)
        self.beta = follower.beta

    def rows(self, s: float, j: list, s_leader: float, j_leader: list) -> list:
        """The Row at coordinates ``s`` (rows ``j``) of the follower and ``s_leader`` of the leader."""
        mim = self.mimic
        e = np.array([s - mim.multiplier * s_leader - mim.offset])
        return [Row(list(j) + [-mim.multiplier * jj for jj in j_leader], self.follower.k_coordinate * np.ones((1, 1)), e)]


class Limit:
    """One-sided limits ``[lower, upper]`` on a coordinate: while ``s + dt ṡ`` lies outside, a damper
    of ``c = k dt`` toward the rate ``ṡ* = −(v_old/v_hat) ṡ − 0.2 overshoot/dt`` (the rate that ends
    the step at rest on the limit, docs/THEORY.md §1, plus 20 % recovery of any overshoot): an
    inelastic stop. Its row is a damper, ``a_kb c jᵀ j`` in A and ``a_kb c ṡ* jᵀ`` in b."""

    def __init__(self, lower: float, upper: float, k: float):
        self.lower, self.upper, self.k = lower, upper, k

    def engaged(self, s: float, sdot: float, dt: float) -> bool:
        s_next = s + dt * sdot          # speculative: engage a step before the limit is crossed
        return s_next < self.lower or s_next > self.upper

    def target_rate(self, s: float, sdot: float, coef, dt: float) -> float:
        over = min(s - self.lower, 0.0) if s + dt * sdot < self.lower else max(s - self.upper, 0.0)
        return -(coef.v_old / coef.v_hat) * sdot - 0.2 * over / dt

    def add_to(self, sums: RowSums, blocks: list, j: list, s: float, sdot: float, coef, dt: float) -> None:
        """The damper row when engaged; nothing otherwise."""
        if self.engaged(s, sdot, dt):
            rate = self.target_rate(s, sdot, coef, dt)
            c = self.k * dt
            sums.add(blocks, j, c * np.ones((1, 1)), np.zeros(1), coef.a_kb, 0.0,
                     extra_b=np.array([coef.a_kb * c * rate]))

"""Differential inverse kinematics: a Cartesian path of a link point as joint targets of time.

``cartesian_path`` samples the path every ``step`` s and moves the joints by damped least squares,
``Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ e`` on the position (and, when the path gives one, orientation) error
``e`` of the point, a few Newton iterations per sample, plus a null-space pull toward the start
posture (a redundant arm keeps its elbow). The result is a ``JointTrajectory``: joint positions
and rates at any t by linear interpolation, ready as drive targets (``Robot.follow``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.spatial.transform import Rotation

from ..errors import ParameterError
from ..spec.validation import as_rotation_matrix


@dataclass
class JointTrajectory:
    """Joint positions ``q[k]`` (URDF units) at times ``t[k]`` for the joints ``joints``; the
    path's worst point error ``error`` (m) as the kinematics put it."""

    joints: list
    t: np.ndarray
    q: np.ndarray
    error: float

    def __call__(self, t: float) -> np.ndarray:
        """Joint positions at time t (held at the ends)."""
        return np.array([np.interp(t, self.t, self.q[:, i]) for i in range(self.q.shape[1])])

    def velocity(self, t: float) -> np.ndarray:
        """Joint rates at time t (of the segment holding t; 0 outside the path)."""
        if t < self.t[0] or t >= self.t[-1]:
            return np.zeros(self.q.shape[1])
        k = min(int(np.searchsorted(self.t, t, side="right")) - 1, len(self.t) - 2)
        return (self.q[k + 1] - self.q[k]) / (self.t[k + 1] - self.t[k])


def point_jacobian(robot, q: dict, link: str, point: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(world point (3,), link rotation (3, 3), J (6, n)) of ``point`` (link frame) at joint positions
    ``q`` (dict): rows linear then angular velocity, columns ``robot.joints`` (a mimic's motion goes to
    its leader's column times its multiplier)."""
    fk = robot.forward_kinematics(q)
    T = fk[link]
    p = T[:3, :3] @ point + T[:3, 3]
    column = {j: i for i, j in enumerate(robot.joints)}
    J = np.zeros((6, len(robot.joints)))
    for name in robot.chain(link):
        j = robot.all_joints[name]
        F = fk[j.parent] @ j.origin
        axis = F[:3, :3] @ j.axis
        scale, col = 1.0, name
        if j.mimic is not None:
            scale, col = j.mimic[1], j.mimic[0]
        if j.kind == "prismatic":
            J[:3, column[col]] += scale * axis
        else:
            J[:3, column[col]] += scale * np.cross(axis, p - F[:3, 3])
            J[3:, column[col]] += scale * axis
    return p, T[:3, :3], J


def cartesian_path(robot, link: str, path: Callable, duration: float, *, point=(0.0, 0.0, 0.0),
                   q_start=None, step: float = 0.01, damping: float = 1e-3, iterations: int = 3,
                   null_gain: float = 0.1) -> JointTrajectory:
    """Joint trajectory moving ``point`` (link frame, m) of ``link`` along ``path(t)`` for t in
    [0, duration]: ``path(t)`` returns a world position (3,), or (position, rotation) to also hold
    an orientation (3x3, quaternion wxyz or scipy Rotation). ``q_start``: joint positions at t = 0
    (default: the robot's build pose)."""
    if not (np.isfinite(duration) and duration > 0 and step > 0):
        raise ParameterError(f"cartesian_path: duration and step must be positive, got {duration!r}, {step!r}")
    if link not in robot.link_body:
        raise ParameterError(f"robot {robot.name!r}: no link {link!r} (links: {sorted(robot.link_body)})")
    point = np.asarray(point, float)
    q = robot.positions(q_start)
    home = np.array([q[j] for j in robot.joints])
    lo = np.array([robot.all_joints[j].limits[0] if robot.all_joints[j].limits else -np.inf for j in robot.joints])
    hi = np.array([robot.all_joints[j].limits[1] if robot.all_joints[j].limits else np.inf for j in robot.joints])
    n = int(np.ceil(duration / step))
    ts = np.linspace(0.0, duration, n + 1)
    out, worst = [], 0.0
    for t in ts:
        goal = path(t)
        with_rot = isinstance(goal, tuple)
        x_goal = np.asarray(goal[0] if with_rot else goal, float)
        R_goal = Rotation.from_matrix(as_rotation_matrix(goal[1])) if with_rot else None
        for _ in range(iterations):
            p, R, J = point_jacobian(robot, q, link, point)
            e = x_goal - p
            if with_rot:
                e = np.r_[e, (R_goal * Rotation.from_matrix(R).inv()).as_rotvec()]
            else:
                J = J[:3]
            x = np.array([q[j] for j in robot.joints])
            Jp = J.T @ np.linalg.inv(J @ J.T + damping**2 * np.eye(len(e)))
            dq = Jp @ e + null_gain * (np.eye(len(x)) - Jp @ J) @ (home - x)
            x = np.clip(x + dq, lo, hi)
            q = robot.positions(dict(zip(robot.joints, x)))
        p, _, _ = point_jacobian(robot, q, link, point)
        worst = max(worst, float(np.linalg.norm(p - x_goal)))
        out.append([q[j] for j in robot.joints])
    return JointTrajectory(list(robot.joints), ts, np.array(out), worst)

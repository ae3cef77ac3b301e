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

from .. import geometry_cache
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


IK_VERSION = 1          # of the solver below: in the geometry cache's key of a path


class KinematicChain:
    """The joints from a robot's base to ``link``, ready for many forward-kinematics evaluations of one
    point of that link: each joint frame ``fk[parent] @ origin`` and its motion, as ``Robot.
    forward_kinematics`` composes them (hinges by Rodrigues' formula), with the actuated joints'
    positions ``x`` (array over ``robot.joints``; a mimic's position is ``m x[leader] + offset``)."""

    def __init__(self, robot, link: str):
        parent = {child: (jname, origin, up) for up, kids in robot.tree.items() for jname, origin, child in kids}
        column = {j: i for i, j in enumerate(robot.joints)}
        steps = []
        while link in parent:
            jname, origin, link = parent[link]
            j = robot.all_joints.get(jname)
            if j is None:
                steps.append((origin[:3, :3], origin[:3, 3], None))
                continue
            leader, scale, offset = (j.urdf_name, 1.0, 0.0) if j.mimic is None else j.mimic
            K = np.array([[0.0, -j.axis[2], j.axis[1]], [j.axis[2], 0.0, -j.axis[0]], [-j.axis[1], j.axis[0], 0.0]])
            steps.append((origin[:3, :3], origin[:3, 3], (j.kind == "prismatic", j.axis, K, K @ K,
                                                          column[leader], scale, offset)))
        self.steps = steps[::-1]
        self.R0, self.p0 = robot.base_pose[:3, :3], robot.base_pose[:3, 3]
        self.n = len(robot.joints)

    def pose_and_jacobian(self, x: np.ndarray, point: np.ndarray, jacobian: bool = True):
        """(world point (3,), link rotation (3, 3), J (6, n) or None): rows linear then angular
        velocity of the point, columns ``robot.joints`` (a mimic's motion goes to its leader's column
        times its multiplier)."""
        R, p = self.R0, self.p0
        frames = []
        for R_o, p_o, joint in self.steps:
            p = p + R @ p_o
            R = R @ R_o
            if joint is None:
                continue
            prismatic, axis, K, K2, col, scale, offset = joint
            q = scale * x[col] + offset
            if jacobian:
                frames.append((prismatic, R @ axis, p, col, scale))
            if prismatic:
                p = p + R @ (axis * q)
            else:
                R = R @ (np.eye(3) + np.sin(q) * K + (1.0 - np.cos(q)) * K2)
        tip = R @ point + p
        if not jacobian:
            return tip, R, None
        J = np.zeros((6, self.n))
        for prismatic, axis, origin, col, scale in frames:
            if prismatic:
                J[:3, col] += scale * axis
            else:
                r = tip - origin
                J[:3, col] += scale * np.array([axis[1] * r[2] - axis[2] * r[1], axis[2] * r[0] - axis[0] * r[2],
                                                axis[0] * r[1] - axis[1] * r[0]])
                J[3:, col] += scale * axis
        return tip, R, J


def rotation_vector(R: np.ndarray) -> np.ndarray:
    """Rotation vector (axis times angle in [0, π]) of the rotation matrix R, through its unit
    quaternion (the largest of its four components first: accurate at every angle)."""
    (a, b, c), (d, e, f), (g, h, i) = R.tolist()
    trace = a + e + i
    k = max(range(4), key=(a, e, i, trace).__getitem__)
    if k == 3:
        w, x, y, z = 1.0 + trace, h - f, c - g, d - b
    elif k == 0:
        w, x, y, z = h - f, 1.0 + a - e - i, b + d, c + g
    elif k == 1:
        w, x, y, z = c - g, b + d, 1.0 - a + e - i, f + h
    else:
        w, x, y, z = d - b, c + g, f + h, 1.0 - a - e + i
    if w < 0:
        w, x, y, z = -w, -x, -y, -z
    s = np.sqrt(x * x + y * y + z * z)
    if s == 0.0:
        return np.zeros(3)
    return (2.0 * np.arctan2(s, w) / s) * np.array([x, y, z])


def cartesian_path(robot, link: str, path: Callable, duration: float, *, point=(0.0, 0.0, 0.0),
                   q_start=None, step: float = 0.01, damping: float = 1e-3, iterations: int = 3,
                   null_gain: float = 0.1) -> JointTrajectory:
    """Joint trajectory moving ``point`` (link frame, m) of ``link`` along ``path(t)`` for t in
    [0, duration]: ``path(t)`` returns a world position (3,), or (position, rotation) to also hold
    an orientation (3x3, quaternion wxyz or scipy Rotation). ``q_start``: joint positions at t = 0
    (default: the robot's build pose). A path solved before (the same robot kinematics, goals and
    options) is read from the geometry cache (``femcontact.geometry_cache``)."""
    if not (np.isfinite(duration) and duration > 0 and step > 0):
        raise ParameterError(f"cartesian_path: duration and step must be positive, got {duration!r}, {step!r}")
    if link not in robot.link_body:
        raise ParameterError(f"robot {robot.name!r}: no link {link!r} (links: {sorted(robot.link_body)})")
    point = np.asarray(point, float)
    q = robot.positions(q_start)
    home = np.array([q[j] for j in robot.joints])
    n = int(np.ceil(duration / step))
    ts = np.linspace(0.0, duration, n + 1)
    goals = [path(t) for t in ts]
    with_rot = np.array([isinstance(g, tuple) for g in goals])
    x_goal = np.array([np.asarray(g[0] if r else g, float).reshape(3) for g, r in zip(goals, with_rot)])
    R_goal = np.array([as_rotation_matrix(g[1]) if r else np.eye(3) for g, r in zip(goals, with_rot)])
    key = geometry_cache.content_key(IK_VERSION, np.__version__, robot.kinematics_key(), link, point, home,
                                     ts, x_goal, R_goal, with_rot, damping, iterations, null_gain)
    solved = geometry_cache.cached("ik", key, ["q", "error"], lambda: _solve(
        robot, KinematicChain(robot, link), point, home, x_goal, R_goal, with_rot, damping, iterations, null_gain))
    return JointTrajectory(list(robot.joints), ts, solved["q"], float(solved["error"]))


def _solve(robot, chain: KinematicChain, point, home, x_goal, R_goal, with_rot, damping, iterations,
           null_gain) -> dict:
    """Damped least squares along the sampled goals (module docstring): {q (samples, joints), error (m)}."""
    lo = np.array([robot.all_joints[j].limits[0] if robot.all_joints[j].limits else -np.inf for j in robot.joints])
    hi = np.array([robot.all_joints[j].limits[1] if robot.all_joints[j].limits else np.inf for j in robot.joints])
    x = home.copy()
    out, worst = [], 0.0
    for xg, Rg, rot in zip(x_goal, R_goal, with_rot):
        for _ in range(iterations):
            p, R, J = chain.pose_and_jacobian(x, point)
            e = xg - p
            if rot:
                e = np.r_[e, rotation_vector(Rg @ R.T)]
            else:
                J = J[:3]
            Jp = J.T @ np.linalg.inv(J @ J.T + damping**2 * np.eye(len(e)))
            dq = Jp @ e + null_gain * (np.eye(len(x)) - Jp @ J) @ (home - x)
            x = np.clip(x + dq, lo, hi)
        p, _, _ = chain.pose_and_jacobian(x, point, jacobian=False)
        worst = max(worst, float(np.linalg.norm(p - xg)))
        out.append(x)
    return {"q": np.array(out).reshape(len(out), len(home)), "error": np.array(worst)}

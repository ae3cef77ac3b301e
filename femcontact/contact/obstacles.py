"""Obstacle and contact-pair specifications (what the user asked for), validated.

An obstacle is a shape (``femcontact.contact.shapes``) with a pose, static or kinematic:
``motion(t) -> (position (3,), rotation)`` (rotation as a 3x3 matrix or a quaternion
(w, x, y, z)), or constant ``velocity`` (m/s) and ``angular_velocity`` (rad/s, world frame,
about the obstacle origin). Its point velocity during the step [t, t+dt] is the finite
difference of the pose over the step (exact for constant velocities):
``v(p) = (c(t+dt) - c(t))/dt + ω × (p - c(t))`` with ``ω = log(R(t+dt) R(t)ᵀ)/dt``.

Contact parameters (one ``ContactParams`` per obstacle and per ``set_contact`` pair) become
rows of ``model.contact_params`` with columns ``contacts.CONTACT_PARAM_COLUMNS``; None or NaN
means "automatic" (the solver chooses).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from scipy.spatial.transform import Rotation

from ..errors import ParameterError
from .contacts import CONTACT_PARAM_COLUMNS
from .shapes import Shape


def _nonneg_or_none(value, what: str) -> float:
    if value is None:
        return np.nan
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a non-negative number or None (automatic), got {value!r}") from None
    if np.isnan(v):
        return np.nan
    if not np.isfinite(v) or v < 0:
        raise ParameterError(f"{what} must be a non-negative finite number or None (automatic), got {value!r}")
    return v


def friction_pair(friction, what: str) -> tuple[float, float]:
    """(mu1, mu2) from a number or a pair; both non-negative and finite."""
    arr = np.atleast_1d(np.asarray(friction, dtype=float)) if not isinstance(friction, str) else None
    if arr is None or arr.shape not in ((1,), (2,)) or not np.isfinite(arr).all() or (arr < 0).any():
        raise ParameterError(f"{what}: friction must be a non-negative number or a pair (mu1, mu2), "
                             f"got {friction!r}")
    return (float(arr[0]), float(arr[-1]))


@dataclass
class ContactParams:
    """Per-pair contact parameters. friction: mu or (mu1, mu2) along (t1, t2); restitution in [0, 1];
    stiffness N/m, tau_d s, hc_dissipation s/m (Hunt & Crossley d), stiction_tolerance m/s (> 0),
    sigma (SAP/ICF friction regularization, >= 0); None = automatic."""

    friction: object = 0.5
    restitution: float = 0.0
    stiffness: Optional[float] = None
    tau_d: Optional[float] = None
    hc_dissipation: Optional[float] = None
    stiction_tolerance: Optional[float] = None
    sigma: Optional[float] = None

    def row(self, what: str) -> np.ndarray:
        mu1, mu2 = friction_pair(self.friction, what)
        e = float(self.restitution) if self.restitution is not None else 0.0
        if not np.isfinite(e) or not 0.0 <= e <= 1.0:
            raise ParameterError(f"{what}: restitution must be in [0, 1], got {self.restitution!r}")
        st = _nonneg_or_none(self.stiction_tolerance, f"{what}: stiction_tolerance")
        if st == 0:
            raise ParameterError(f"{what}: stiction_tolerance must be > 0 m/s (e.g. 1e-4), got 0")
        vals = {"mu1": mu1, "mu2": mu2, "restitution": e, "stiction_tolerance": st,
                "stiffness": _nonneg_or_none(self.stiffness, f"{what}: stiffness"),
                "tau_d": _nonneg_or_none(self.tau_d, f"{what}: tau_d"),
                "hc_dissipation": _nonneg_or_none(self.hc_dissipation, f"{what}: hc_dissipation"),
                "sigma": _nonneg_or_none(self.sigma, f"{what}: sigma")}
        return np.array([vals[c] for c in CONTACT_PARAM_COLUMNS], float)

    def merged(self, **overrides) -> "ContactParams":
        d = dict(self.__dict__)
        d.update({k: v for k, v in overrides.items() if v is not None})
        return ContactParams(**d)


PARAM_KEYS = ("friction", "restitution", "stiffness", "tau_d", "hc_dissipation", "stiction_tolerance", "sigma")


def _pose(position, rotation, what: str) -> tuple[np.ndarray, np.ndarray]:
    from ..scene import as_rotation_matrix

    try:
        c = np.asarray(position, dtype=float)
    except (TypeError, ValueError):
        c = np.full(1, np.nan)
    if c.shape != (3,) or not np.isfinite(c).all():
        raise ParameterError(f"{what}: position must be three finite numbers, got {position!r}")
    try:
        R = as_rotation_matrix(rotation)
    except ParameterError as exc:
        raise ParameterError(f"{what}: {exc}") from None
    return c, R


def evaluate_motion(motion: Callable, t: float, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3,3)) from a user's ``motion(t) -> (position, rotation)`` of a
    kinematic obstacle or body, validated; a failing or malformed motion names ``what`` and t."""
    try:
        pos, rot = motion(float(t))
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise ParameterError(f"motion of {what} failed at t={t:g}: must return "
                             f"(position (3,), rotation 3x3 or quaternion wxyz); got error {exc!r}") from None
    return _pose(pos, rot, f"motion of {what} at t={t:g}")


@dataclass
class ObstacleSpec:
    """One obstacle as the user described it."""

    name: str
    shape: Shape
    position: np.ndarray
    rotation: np.ndarray
    motion: Optional[Callable] = None
    velocity: Optional[np.ndarray] = None
    angular_velocity: Optional[np.ndarray] = None
    params: ContactParams = None
    friction_axes: Optional[np.ndarray] = None   # first tangent axis, obstacle local frame

    @property
    def kinematic(self) -> bool:
        return self.motion is not None or self.velocity is not None or self.angular_velocity is not None

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (3,3)) at time t (s), validated."""
        if self.motion is not None:
            return evaluate_motion(self.motion, t, f"obstacle {self.name!r}")
        c, R = self.position, self.rotation
        if self.velocity is not None:
            c = c + self.velocity * t
        if self.angular_velocity is not None:
            R = Rotation.from_rotvec(self.angular_velocity * t).as_matrix() @ R
        return c, R

    def step_motion(self, t: float, dt: float):
        """Pose at t and the rigid velocity over [t, t+dt]: (c, R, v_lin, omega) (world frame)."""
        c0, R0 = self.pose(t)
        if not self.kinematic:
            return c0, R0, np.zeros(3), np.zeros(3)
        c1, R1 = self.pose(t + dt)
        v = (c1 - c0) / dt
        w = Rotation.from_matrix(R1 @ R0.T).as_rotvec() / dt
        if not (np.isfinite(v).all() and np.isfinite(w).all()):
            raise ParameterError(f"motion of obstacle {self.name!r} gives non-finite velocity at t={t:g}")
        return c0, R0, v, w


def make_obstacle(name: str, shape, position, rotation, motion, velocity, angular_velocity,
                  params: ContactParams, friction_axes) -> ObstacleSpec:
    what = f"obstacle {name!r}"
    if not isinstance(shape, Shape):
        raise ParameterError(f"{what}: expected a shape from femcontact.shapes (HalfSpace, Box, Sphere, Capsule, "
                             f"Cylinder, TriangleMesh), got {type(shape).__name__}")
    c, R = _pose(position, rotation, what)
    if motion is not None and not callable(motion):
        raise ParameterError(f"{what}: motion must be a function t -> (position, rotation)")
    if motion is not None and (velocity is not None or angular_velocity is not None):
        raise ParameterError(f"{what}: give either motion= or velocity=/angular_velocity=, not both")
    vel = ang = None
    if velocity is not None:
        vel = np.asarray(velocity, float)
        if vel.shape != (3,) or not np.isfinite(vel).all():
            raise ParameterError(f"{what}: velocity must be three finite numbers (m/s), got {velocity!r}")
    if angular_velocity is not None:
        ang = np.asarray(angular_velocity, float)
        if ang.shape != (3,) or not np.isfinite(ang).all():
            raise ParameterError(f"{what}: angular_velocity must be three finite numbers (rad/s), "
                                 f"got {angular_velocity!r}")
    params.row(what)  # validate now
    axes = None
    if friction_axes is not None:
        axes = np.asarray(friction_axes, float)
        if axes.ndim == 2:
            axes = axes[0]
        if axes.shape != (3,) or not np.isfinite(axes).all() or np.linalg.norm(axes) < 1e-12:
            raise ParameterError(f"{what}: friction_axes must be a non-zero 3-vector (the first tangent axis, "
                                 f"obstacle frame), got {friction_axes!r}")
        axes = axes / np.linalg.norm(axes)
    spec = ObstacleSpec(name, shape, c, R, motion, vel, ang, params, axes)
    if motion is not None:
        spec.pose(0.0)  # fail early on garbage
    return spec

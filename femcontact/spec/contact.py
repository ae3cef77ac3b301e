"""Obstacle and contact-pair specifications (what the user asked for), validated.

An obstacle is a shape (``femcontact.shapes``) with a pose, static or kinematic:
``motion(t) -> (position (3,), rotation)`` (rotation as a 3x3 matrix or a quaternion
(w, x, y, z)), or constant ``velocity`` (m/s) and ``angular_velocity`` (rad/s, world frame,
about the obstacle origin). Its point velocity during the step [t, t+dt] is the finite
difference of the pose over the step (exact for constant velocities):
``v(p) = (c(t+dt) - c(t))/dt + ω × (p - c(t))`` with ``ω = log(R(t+dt) R(t)ᵀ)/dt``.

Contact parameters (one ``ContactParams`` per obstacle and per ``set_contact`` pair) become
rows of ``model.contact_params`` with columns ``spec.names.CONTACT_PARAM_COLUMNS``; None or NaN
means "automatic" (the solver chooses). ``set_contact`` records one ``ContactPair``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..errors import ParameterError
from ..geometry.shapes import Shape
from .names import CONTACT_PARAM_COLUMNS
from .validation import (as_float_array, check_motion, evaluate_motion, non_negative_or_nan, pose, unit_vector,
                         vec3)


def friction_pair(friction, what: str) -> tuple[float, float]:
    """(mu1, mu2) from a number or a pair; both non-negative and finite."""
    arr = np.atleast_1d(as_float_array(friction)) if not isinstance(friction, str) else None
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
        st = non_negative_or_nan(self.stiction_tolerance, f"{what}: stiction_tolerance")
        if st == 0:
            raise ParameterError(f"{what}: stiction_tolerance must be > 0 m/s (e.g. 1e-4), got 0")
        vals = {"mu1": mu1, "mu2": mu2, "restitution": e, "stiction_tolerance": st,
                "stiffness": non_negative_or_nan(self.stiffness, f"{what}: stiffness"),
                "tau_d": non_negative_or_nan(self.tau_d, f"{what}: tau_d"),
                "hc_dissipation": non_negative_or_nan(self.hc_dissipation, f"{what}: hc_dissipation"),
                "sigma": non_negative_or_nan(self.sigma, f"{what}: sigma")}
        return np.array([vals[c] for c in CONTACT_PARAM_COLUMNS], float)

    def merged(self, **overrides) -> "ContactParams":
        d = dict(self.__dict__)
        d.update({k: v for k, v in overrides.items() if v is not None})
        return ContactParams(**d)


PARAM_KEYS = ("friction", "restitution", "stiffness", "tau_d", "hc_dissipation", "stiction_tolerance", "sigma")


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
            from scipy.spatial.transform import Rotation  # scipy.spatial: ~0.3 s of start-up, imported where used
            R = Rotation.from_rotvec(self.angular_velocity * t).as_matrix() @ R
        return c, R

    def step_motion(self, t: float, dt: float):
        """Pose at t and the rigid velocity over [t, t+dt]: (c, R, v_lin, omega) (world frame)."""
        c0, R0 = self.pose(t)
        if not self.kinematic:
            return c0, R0, np.zeros(3), np.zeros(3)
        c1, R1 = self.pose(t + dt)
        v = (c1 - c0) / dt
        if np.array_equal(R1, R0):      # not turning: no angular velocity (and no scipy.spatial, ~0.3 s of start-up)
            w = np.zeros(3)
        else:
            from scipy.spatial.transform import Rotation
            w = Rotation.from_matrix(R1 @ R0.T).as_rotvec() / dt
        if not (np.isfinite(v).all() and np.isfinite(w).all()):
            raise ParameterError(f"motion of obstacle {self.name!r} gives non-finite velocity at t={t:g}")
        return c0, R0, v, w


def make_obstacle(name: str, shape, position, rotation, motion, velocity, angular_velocity,
                  params: ContactParams, friction_axes) -> ObstacleSpec:
    """Validate ``Scene.add_obstacle``'s arguments (``params``: the scene defaults merged with the
    obstacle's own) and build the ObstacleSpec."""
    what = f"obstacle {name!r}"
    if not isinstance(shape, Shape):
        raise ParameterError(f"{what}: expected a shape from femcontact.shapes (HalfSpace, Box, Sphere, Capsule, "
                             f"Cylinder, TriangleMesh), got {type(shape).__name__}")
    c, R = pose(position, rotation, what)
    check_motion(motion, what)
    if motion is not None and (velocity is not None or angular_velocity is not None):
        raise ParameterError(f"{what}: give either motion= or velocity=/angular_velocity=, not both")
    vel = None if velocity is None else vec3(velocity, f"{what}: velocity (m/s)")
    ang = None if angular_velocity is None else vec3(angular_velocity, f"{what}: angular_velocity (rad/s)")
    params.row(what)  # validate now
    axes = None if friction_axes is None else unit_vector(friction_axes, f"{what}: friction_axes (obstacle frame)")
    spec = ObstacleSpec(name, shape, c, R, motion, vel, ang, params, axes)
    if motion is not None:
        spec.pose(0.0)  # fail early on garbage
    return spec


@dataclass
class ContactPair:
    """``Scene.set_contact``: settings of the pair of bodies/obstacles named ``a`` and ``b``; the
    parameters in ``overrides`` that are not None replace the pair's defaults when the model is
    built (the scene's for two bodies, the obstacle's otherwise). ``friction_axes``: the first
    tangent direction (world frame for body pairs, obstacle frame with an obstacle) or None."""

    a: str
    b: str
    enabled: bool = True
    friction_axes: Optional[np.ndarray] = None
    overrides: dict = field(default_factory=dict)


def make_contact_pair(name_a: str, name_b: str, enabled: bool, friction_axes, **overrides) -> ContactPair:
    """Validate ``Scene.set_contact``'s arguments (names are checked when the model is built)."""
    what = f"set_contact({name_a!r}, {name_b!r})"
    if not isinstance(name_a, str) or not isinstance(name_b, str):
        raise ParameterError(f"{what}: give the names of two bodies/obstacles (the same FEM body twice for its "
                             "self-contact)")
    checked = {k: overrides.get(k) for k in PARAM_KEYS}
    ContactParams(**{**checked, "friction": 0.0 if checked["friction"] is None else checked["friction"],
                     "restitution": 0.0 if checked["restitution"] is None else checked["restitution"]}).row(what)
    axes = None if friction_axes is None else unit_vector(friction_axes, f"{what}: friction_axes")
    return ContactPair(name_a, name_b, bool(enabled), axes, checked)

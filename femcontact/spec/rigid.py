"""Rigid bodies as the user describes them: the host side of ``Scene.add_rigid_body``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..geometry.mass import check_inertia, mass_properties
from ..geometry.shapes import Shape
from ..errors import ParameterError
from .force import body_force
from .validation import as_float_array, as_rotation_matrix, check_motion, evaluate_motion, positive, vec3


@dataclass
class RigidBodySpec:
    """One rigid body as the user described it. Pose of the shape's own frame: ``position`` (m)
    and ``rotation`` (3x3); the centre of mass sits at ``com_local`` in that frame. ``motion``
    (t -> (position, rotation)) makes it kinematic (its pose is prescribed, infinite mass)."""

    name: str
    shape: object
    mass: float
    inertia: np.ndarray            # about the centre of mass, shape frame, kg m^2
    com_local: np.ndarray
    position: np.ndarray
    rotation: np.ndarray
    velocity: np.ndarray           # of the centre of mass, m/s
    angular_velocity: np.ndarray   # world frame, rad/s
    motion: Optional[Callable] = None
    forces: list = field(default_factory=list)

    @property
    def kinematic(self) -> bool:
        return self.motion is not None

    @property
    def com(self) -> np.ndarray:
        """Initial centre of mass in the world, m."""
        return self.position + self.rotation @ self.com_local

    def add_force(self, force, point=None) -> None:
        """Apply a world-frame force (3,) N, or a function t -> (3,), at a shape-frame ``point``
        (m; None: the centre of mass, so no torque)."""
        self.forces.append(body_force(force, point, False, f"force on {self.name!r}"))

    def add_torque(self, torque) -> None:
        """Apply a world-frame torque (3,) N m, or a function t -> (3,)."""
        self.forces.append(body_force(torque, None, True, f"torque on {self.name!r}"))

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Prescribed (shape-frame origin, rotation) of a kinematic body at time t."""
        return evaluate_motion(self.motion, t, f"rigid body {self.name!r}")


def make_rigid_body(name: str, shape, density: Optional[float], mass: Optional[float], inertia, position,
                    rotation, velocity, angular_velocity, motion: Optional[Callable]) -> RigidBodySpec:
    """Validate ``Scene.add_rigid_body``'s arguments and compute the mass properties: from
    ``density``, or ``mass`` with the shape's inertia scaled to it, or ``mass`` and ``inertia``."""
    what = f"rigid body {name!r}"
    if not isinstance(shape, Shape):
        raise ParameterError(f"{what}: expected a shape from femcontact.shapes, got {type(shape).__name__}")
    check_motion(motion, what)
    if (density is None) == (mass is None) and motion is None:
        raise ParameterError(f"{what}: give exactly one of density= (kg/m^3) or mass= (kg)")
    for value, label in ((density, "density"), (mass, "mass")):
        if value is not None:
            positive(value, f"{what}: {label}")
    try:
        with np.errstate(over="raise", invalid="raise"):
            m1, com, I1 = mass_properties(shape, 1.0)
            if density is not None:
                m, I = m1 * density, I1 * density
            else:
                m = float(mass) if mass is not None else m1 * 1000.0
                I = I1 * (m / m1)
    except (OverflowError, FloatingPointError):
        m, I = np.inf, np.full((3, 3), np.inf)
    if inertia is not None:
        I = check_inertia(as_float_array(inertia), what)
    if not (np.isfinite(m) and m > 0 and np.isfinite(I).all()):
        raise ParameterError(f"{what}: its mass or inertia is not a finite positive number (shape "
                             f"{type(shape).__name__}, density {density!r}, mass {mass!r}): check the units "
                             "(metres, kg/m^3)")
    R = as_rotation_matrix(rotation)
    spec = RigidBodySpec(name, shape, float(m), I, com, vec3(position, f"position of {what}"), R,
                         vec3(velocity, f"velocity of {what}"),
                         vec3(angular_velocity, f"angular_velocity of {what}"), motion)
    if motion is not None:
        spec.position, spec.rotation = spec.pose(0.0)
    return spec

"""Prescribed motions as the user asked for them: node drives (FEM bodies and rods) and PD drives
on joint coordinates. Plain records; they are checked where they are made (``FemBodySpec.drive``,
``RodSpec.drive``, ``JointSpec.set_drive``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import numpy as np

PositionDrive = Callable[[float, np.ndarray], np.ndarray]
VelocityDrive = Callable[[float], np.ndarray]
Target = Union[float, Callable[[float], float]]


@dataclass
class NodeDrive:
    """Prescribed motion of some blocks of a body (body-local indices: FEM nodes; rod nodes or
    segments, whose velocity is then an angular velocity)."""

    nodes: np.ndarray
    position: Optional[PositionDrive] = None  # (t, x0 (k,3)) -> positions (k,3), m
    velocity: Optional[VelocityDrive] = None  # t -> (3,) or (k,3), m/s (rad/s on rod segments)



@dataclass
class Drive:
    """A PD drive on a joint coordinate: target position (m or rad) and/or velocity, gains, effort
    limit (N or N m; None: unlimited). ``target``/``velocity`` may be numbers or functions of t."""

    kp: float
    kd: float
    target: Optional[Target] = None
    velocity: Target = 0.0
    max_force: Optional[float] = None

    def values(self, t: float) -> tuple[Optional[float], float]:
        s = self.target(t) if callable(self.target) else self.target
        v = self.velocity(t) if callable(self.velocity) else self.velocity
        return (None if s is None else float(s)), float(v)

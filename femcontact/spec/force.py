"""External loads as the user asked for them: nodal forces (FEM bodies, rods) and forces or
torques on rigid bodies, constant or functions of time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ParameterError
from .validation import vec3


@dataclass
class NodalForce:
    """An external force on some nodes: constant (3,) N or a function of time."""

    nodes: np.ndarray
    force: object
    mode: str = "total"  # "total": distributed by lumped mass; "per_node": on every node


def nodal_force(nodes: np.ndarray, force, mode: str, what: str) -> NodalForce:
    """A checked NodalForce: ``force`` a constant (3,) or a function of time, ``mode`` as above."""
    if mode not in ("total", "per_node"):
        raise ParameterError(f"force mode must be 'total' or 'per_node', got {mode!r}")
    return NodalForce(nodes, force if callable(force) else vec3(force, what), mode)


@dataclass
class BodyForce:
    """A force (3,) N or function t -> (3,) on a rigid body, at a body-frame point (None: the centre
    of mass); or a torque (3,) N m (world frame) when ``torque`` is True."""

    value: object
    point: Optional[np.ndarray] = None
    torque: bool = False


def body_force(value, point, torque: bool, what: str) -> BodyForce:
    """A checked BodyForce: ``value`` a constant (3,) or a function of time; ``point`` None or (3,)."""
    if not callable(value):
        value = vec3(value, what)
    pt = None if point is None else vec3(point, f"point of {what}")
    return BodyForce(value, pt, torque)

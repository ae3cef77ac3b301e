"""Linear springs and dampers as the user describes them: the host side of ``Scene.add_spring``.
The force they exert is ``femcontact.bodies.springs.SpringSystem``'s."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ParameterError
from .validation import as_float_array, non_negative


@dataclass
class SpringSpec:
    """A spring–damper between rigid body ``body_a`` and rigid body ``body_b`` (None: the world).

    ``anchor_a`` / ``anchor_b``: the anchors as world points at build time (m); each moves with
    its body from there (the world's stays put). Force on B ``−k (ℓ − ℓ₀) n − c (n·(ṗ_B − ṗ_A)) n`` with
    ``ℓ = |p_B − p_A|``, ``n = (p_B − p_A)/ℓ``; the opposite on A."""

    name: str
    body_a: str
    body_b: Optional[str]
    anchor_a: np.ndarray
    anchor_b: np.ndarray
    stiffness: float           # k, N/m
    damping: float             # c, N s/m
    rest_length: float         # ℓ₀, m


def _point(value, what: str) -> np.ndarray:
    p = as_float_array(value)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise ParameterError(f"{what} must be a world point (3 finite numbers, m), got {value!r}")
    return p


def make_spring(name: str, body_a, body_b, anchor_a, anchor_b, stiffness, damping, rest_length,
                bodies: dict) -> SpringSpec:
    """Validate ``Scene.add_spring``'s arguments. ``bodies``: name -> (kind, spec) of the scene's
    bodies. Anchors default to the rigid bodies' centres of mass; the world side needs its point."""
    what = f"spring {name!r}"
    if body_a is None:
        raise ParameterError(f"{what}: body_a must be a body; only body_b may be None (the world)")
    if body_a == body_b:
        raise ParameterError(f"{what}: both ends are on the same body {body_a!r}")
    anchors = []
    for role, body, anchor in (("body_a", body_a, anchor_a), ("body_b", body_b, anchor_b)):
        if body is None:
            if anchor is None:
                raise ParameterError(f"{what}: anchor_b (a world point, m) is required when body_b is None "
                                     "(the world)")
            anchors.append(_point(anchor, f"{what}: anchor_b"))
            continue
        if body not in bodies:
            raise ParameterError(f"{what}: {role} {body!r} is not a body of the scene (bodies: {sorted(bodies)})")
        kind, spec = bodies[body]
        if kind != "rigid":
            raise ParameterError(f"{what}: {role} {body!r} is a {kind} body; springs connect rigid bodies or a "
                                 "rigid body and the world (glue FEM or rod nodes with scene.attach)")
        anchors.append(spec.com.copy() if anchor is None else _point(anchor, f"{what}: anchor of {role}"))
    k = non_negative(stiffness, f"{what}: stiffness (N/m)")
    c = non_negative(damping, f"{what}: damping (N s/m)")
    length = float(np.linalg.norm(anchors[1] - anchors[0]))
    l0 = length if rest_length is None else non_negative(rest_length, f"{what}: rest_length (m)")
    return SpringSpec(name, body_a, body_b, anchors[0], anchors[1], k, c, l0)

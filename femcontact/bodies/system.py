"""The step-time interface of a body system, and the systems of a Model.

A body system owns one kind of element's part of the step: it adds its forces to ``b`` and its
stiffness and damping to ``A`` (docs/THEORY.md §1), updates what follows from the new positions
after the advance, and reports its stored elastic energy. The Simulator loops over
``body_systems(model)`` and never asks which kind a system is. Masses, gravity and the rotational
blocks are the common inertial part: the rigid bodies' system (``Model.rigid``, ``rigid.RigidSystem``:
its tables, kernels and loads) runs inside the fused inertial launch and advance
(``assembly/integrator.py``), not in this loop; prescribed motions and loads are ``prescribed.py``'s.
"""
from __future__ import annotations

from typing import Protocol

from .fem import FemSystem
from .rod import RodSystem


class BodySystem(Protocol):
    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        """Add this system's forces to b and its stiffness / damping blocks to A for the step [t, t+dt]."""

    def after_advance(self, state) -> None:
        """Update what follows from the advanced positions (e.g. a rod's segment midpoints)."""

    def elastic_energy(self, state) -> float:
        """Elastic energy stored in this system at ``state`` (J)."""


def body_systems(model) -> list:
    """The Model's body systems in assembly order: joints, springs, FEM elements, rods."""
    systems: list = []
    if model.joints is not None:
        systems.append(model.joints)
    if model.springs is not None:
        systems.append(model.springs)
    if model.n_tets:
        systems.append(FemSystem(model))
    if model.rod_ranges:
        systems.append(RodSystem(model))
    return systems

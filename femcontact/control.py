"""Control: what the user changes between steps on purpose.

Specs describe the scene as built and are never changed afterwards; a ``Control`` starts from
them (copies) and is what the step reads for commands that may change during a run:

- the PD drives of hinge and prismatic joints (target position or a function of time, target rate,
  gains, effort limit): ``set_joint_drive`` (for a gripper: ``ParallelGripper.set_width(width,
  sim.control)``);
- joint efforts (a feedforward force or torque on a joint coordinate, ``set_joint_effort``) and
  gravity compensation per joint (``set_gravity_compensation``: the joint adds the effort that
  balances the weight of everything it carries, from the current poses; drive plus compensation
  stay within the drive's max_force); ``set_joint_targets``
  commands many drives at once (a robot's: ``femcontact.robots.Robot.set_targets``);
- the external loads, by name: the ``add_force`` / ``add_torque`` calls of the specs (named
  ``"<body>:<k>"``, k counting that body's loads) and any a script sets with ``set_force`` /
  ``set_torque`` (constant or a function of time), or removes with ``remove_load``.

A script changes it between steps through ``sim.control``; the next step reads it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from .errors import ParameterError
from .spec.drive import Drive, Target
from .spec.force import BodyForce, NodalForce, body_force, nodal_force
from .spec.rigid import RigidBodySpec
from .spec.rod import RodSpec
from .spec.validation import non_negative, positive_or_none

_KEEP = object()


def _target(value, what: str):
    if value is None or callable(value):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a number or a function of time, got {value!r}") from None
    if not math.isfinite(x):
        raise ParameterError(f"{what} must be finite, got {value!r}")
    return x


@dataclass(frozen=True)
class Load:
    """An external load on body ``body``: a ``NodalForce`` (FEM body or rod; node indices within the
    body) or a ``BodyForce`` (rigid body)."""

    body: str
    force: NodalForce | BodyForce


class Control:
    """The joint drives and external loads of a run (see the module docstring)."""

    def __init__(self, joint_drives: dict[str, Drive], loads: Optional[dict[str, Load]] = None,
                 bodies: Optional[dict] = None, joints: Optional[dict] = None):
        self._drives = {name: replace(d) for name, d in joint_drives.items()}
        self._joints = dict(joints or {})           # name -> JointSpec, read only
        self._efforts: dict = {}
        self._gravity = {name for name, j in self._joints.items() if j.gravity_compensation}
        self._loads = dict(loads or {})
        self._bodies = dict(bodies or {})           # name -> spec, read only (node selections)
        self.loads_version = 0                      # bumped by every change of the loads

    @classmethod
    def from_scene(cls, scene) -> "Control":
        """The drives and loads the scene's specs were built with."""
        loads = {f"{b.name}:{k}": Load(b.name, f) for b in scene.all_bodies for k, f in enumerate(b.forces)}
        return cls({j.name: j.drive for j in scene.joints if j.drive is not None}, loads,
                   {b.name: b for b in scene.all_bodies}, {j.name: j for j in scene.joints})

    @property
    def loads(self) -> dict[str, Load]:
        """The external loads now, by name (a copy)."""
        return dict(self._loads)

    def _body(self, body: str):
        spec = self._bodies.get(body)
        if spec is None:
            raise ParameterError(f"no body named {body!r} (bodies: {sorted(self._bodies)})")
        return spec

    def set_force(self, name: str, body: str, force, *, nodes=None, mode: str = "total", point=None) -> None:
        """Apply (or replace) the load ``name`` from the next step on: a world-frame force (3,) N or a
        function t -> (3,) on body ``body``. FEM body or rod: on the ``nodes`` selected (as
        ``add_force``: None = all), split by lumped mass (``mode="total"``) or on every node
        (``"per_node"``). Rigid body: at the shape-frame ``point`` (None: the centre of mass)."""
        spec = self._body(body)
        what = f"load {name!r} on {body!r}"
        if isinstance(spec, RigidBodySpec):
            if nodes is not None:
                raise ParameterError(f"{what}: a rigid body takes a point=, not nodes=")
            load = body_force(force, point, False, what)
        else:
            if point is not None:
                raise ParameterError(f"{what}: an FEM body or rod takes nodes=, not point=")
            load = nodal_force(spec.select(nodes), force, mode, what)
        self._set(name, Load(body, load))

    def set_torque(self, name: str, body: str, torque, *, segments=-1) -> None:
        """Apply (or replace) the load ``name``: a world-frame torque (3,) N m or t -> (3,) on a rigid
        body, or on each of the given ``segments`` of a rod."""
        spec = self._body(body)
        what = f"load {name!r} on {body!r}"
        if isinstance(spec, RigidBodySpec):
            load = body_force(torque, None, True, what)
        elif isinstance(spec, RodSpec):
            load = nodal_force(spec.segment_block(segments), torque, "per_node", what)
        else:
            raise ParameterError(f"{what}: torques act on rigid bodies and rods, not on FEM body {body!r}")
        self._set(name, Load(body, load))

    def remove_load(self, name: str) -> None:
        """Remove the load ``name`` from the next step on."""
        if name not in self._loads:
            raise ParameterError(f"no load named {name!r} (loads: {sorted(self._loads)})")
        del self._loads[name]
        self.loads_version += 1

    def set_load(self, name: str, load: Load) -> None:
        """Apply (or replace) the load ``name`` by a ``Load`` as ``loads`` lists them (``femcontact.diff``
        varies a load's value this way)."""
        if not isinstance(load, Load):
            raise ParameterError(f"load {name!r} must be a Load, got {type(load).__name__}")
        self._set(name, load)

    def _set(self, name: str, load: Load) -> None:
        if not isinstance(name, str) or not name:
            raise ParameterError(f"a load's name must be a non-empty string, got {name!r}")
        self._loads[name] = load
        self.loads_version += 1

    @property
    def driven_joints(self) -> list[str]:
        return sorted(self._drives)

    def joint_drive(self, joint: str) -> Optional[Drive]:
        """The drive of ``joint`` now (None: the joint has none)."""
        return self._drives.get(joint)

    def set_joint_drive(self, joint: str, *, target: Target | None = _KEEP, velocity: Target = _KEEP,
                        kp: Optional[float] = None, kd: Optional[float] = None,
                        max_force: Optional[float] = _KEEP) -> Drive:
        """Change the drive of ``joint`` from the next step on: target (m or rad, a number or a
        function of t; None drives the rate only), velocity (target rate), kp, kd, max_force (N or
        N m; None: unlimited). Arguments left out keep their value."""
        d = self._drives.get(joint)
        if d is None:
            raise ParameterError(f"joint {joint!r} has no drive to command; give it one with "
                                 f"joint.set_drive(...) when building the scene (driven joints: {self.driven_joints})")
        what = f"joint {joint!r}: drive"
        d = replace(d,
                    target=d.target if target is _KEEP else _target(target, f"{what} target"),
                    velocity=d.velocity if velocity is _KEEP else _target(velocity, f"{what} velocity"),
                    kp=d.kp if kp is None else non_negative(kp, f"{what} kp"),
                    kd=d.kd if kd is None else non_negative(kd, f"{what} kd"),
                    max_force=d.max_force if max_force is _KEEP else positive_or_none(max_force, f"{what} max_force"))
        if d.velocity is None:
            raise ParameterError(f"{what} velocity must be a number or a function of time, not None")
        self._drives[joint] = d
        return d

    def set_joint_targets(self, targets: dict, velocities: Optional[dict] = None) -> None:
        """Command the drives of several joints from the next step on: ``targets`` {joint: position
        (m or rad) or function of t}, ``velocities`` {joint: target rate} (joints left out keep theirs)."""
        for joint, target in targets.items():
            self.set_joint_drive(joint, target=target)
        for joint, vel in (velocities or {}).items():
            self.set_joint_drive(joint, velocity=vel)

    def _joint(self, joint: str):
        if joint not in self._joints:
            raise ParameterError(f"no joint named {joint!r} (joints: {sorted(self._joints)})")
        j = self._joints[joint]
        if j.kind not in ("hinge", "prismatic"):
            raise ParameterError(f"joint {joint!r} is a {j.kind} joint: only hinge and prismatic joints have a "
                                 "coordinate to push")
        return j

    def set_joint_effort(self, joint: str, effort: Target) -> None:
        """A feedforward force (N, prismatic) or torque (N m, hinge) along the coordinate of ``joint``
        from the next step on (a number or a function of t; 0 removes it), added to its drive and
        gravity compensation, not limited by the drive's max_force."""
        self._joint(joint)
        self._efforts[joint] = _target(effort, f"joint {joint!r}: effort")

    def effort_command(self, joint: str) -> Target:
        """The feedforward effort of ``joint`` as commanded: a number or a function of time (0 when none)."""
        return self._efforts.get(joint, 0.0)

    def joint_effort(self, joint: str, t: float) -> float:
        """The feedforward effort of ``joint`` at time t (0 when none was set)."""
        e = self._efforts.get(joint, 0.0)
        return float(e(t)) if callable(e) else float(e)

    def set_gravity_compensation(self, joints, on: bool = True) -> None:
        """Switch gravity compensation of the given joint names on or off from the next step on."""
        for joint in ([joints] if isinstance(joints, str) else joints):
            self._joint(joint)
            (self._gravity.add if on else self._gravity.discard)(joint)

    def gravity_compensated(self, joint: str) -> bool:
        return joint in self._gravity

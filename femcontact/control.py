"""Control: what the user changes between steps on purpose.

Specs describe the scene as built and are never changed afterwards; a ``Control`` starts from
them (copies) and is what the step reads for commands that may change during a run: the PD drives
of hinge and prismatic joints (target position or a function of time, target rate, gains, effort
limit). A script changes it between steps through ``sim.control`` (for a gripper:
``ParallelGripper.set_width(width, sim.control)``).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

from .errors import ParameterError
from .spec.drive import Drive, Target
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


class Control:
    """The joint drives of a run, by joint name (see the module docstring)."""

    def __init__(self, joint_drives: dict[str, Drive]):
        self._drives = {name: replace(d) for name, d in joint_drives.items()}

    @classmethod
    def from_joints(cls, joints) -> "Control":
        """The drives the joint specs were built with."""
        return cls({j.name: j.drive for j in joints if j.drive is not None})

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

"""A two-finger parallel gripper built from rigid bodies, prismatic joints and PD drives.

The palm is a kinematic rigid box following ``palm_motion(t) -> (position, rotation)``; each
finger is a rigid box on a prismatic joint to the palm, sliding along the palm's closing axis
(local x), with a PD drive on its slide ``s`` (m, positive = closing, 0 = fully open). Command it
between steps with ``set_width`` (position control) or ``set_grip_force`` (the fingers close
until they squeeze with that force: a drive target beyond contact, effort-limited).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..control import Control
from ..errors import ParameterError
from ..geometry import shapes
from ..scene import Scene
from ..spec.validation import as_rotation_matrix


class ParallelGripper:
    """Adds a palm and two fingers named ``{name}_palm``, ``{name}_left``, ``{name}_right`` to a scene.

    position/rotation: initial palm pose; opening: initial gap between the finger pads (m);
    finger_half_extents: finger box half-sizes (x across the gap, y, z along the finger), m;
    palm_motion: t -> (position, rotation) of the palm (default: stays put); finger_mass (kg);
    stiffness kp (N/m) and damping kd (N s/m) of the finger drives (default: 20 Hz, ζ = 1);
    max_force: effort limit of each finger drive (N). Pad friction: the scene's body-body default
    or ``scene.set_contact(f"{name}_left", other, friction=...)``.
    """

    def __init__(self, scene: Scene, name: str = "gripper", position=(0.0, 0.0, 0.2), rotation=None,
                 opening: float = 0.1, finger_half_extents=(0.01, 0.02, 0.04), palm_motion: Optional[Callable] = None,
                 finger_mass: float = 0.1, kp: Optional[float] = None, kd: Optional[float] = None,
                 max_force: float = 20.0):
        if not isinstance(opening, (int, float)) or not opening > 0:
            raise ParameterError(f"gripper {name!r}: opening must be a positive width in m, got {opening!r}")
        R = as_rotation_matrix(rotation)
        pos = np.asarray(position, float)
        h = np.asarray(finger_half_extents, float)
        self.name, self.opening = name, float(opening)
        palm_h = np.array([opening / 2 + 2 * h[0], h[1], 0.01])
        palm_offset = np.array([0.0, 0.0, h[2] + palm_h[2]])        # palm sits above the fingers
        motion = palm_motion or (lambda t: (pos, R))
        self.palm = scene.add_rigid_body(shapes.Box(palm_h), motion=lambda t: _offset(motion(t), palm_offset),
                                         name=f"{name}_palm")
        omega = 2 * np.pi * 20.0
        kp = finger_mass * omega**2 if kp is None else kp
        kd = 2.0 * np.sqrt(kp * finger_mass) if kd is None else kd
        self.fingers, self.joints = [], []
        for side, sign in (("left", -1.0), ("right", 1.0)):
            c = pos + R @ np.array([sign * (opening / 2 + h[0]), 0.0, 0.0])
            f = scene.add_rigid_body(shapes.Box(h), mass=finger_mass, position=c, rotation=R, name=f"{name}_{side}")
            j = scene.add_joint("prismatic", self.palm.name, f.name, anchor=c, axis=R @ [-sign, 0.0, 0.0],
                                limits=(-0.01, opening / 2 + 0.01), name=f"{name}_{side}_slide")
            j.set_drive(kp=kp, kd=kd, target=0.0, max_force=max_force)
            scene.set_contact(self.palm.name, f.name, enabled=False)
            self.fingers.append(f)
            self.joints.append(j)
        scene.set_contact(self.fingers[0].name, self.fingers[1].name, enabled=False)
        self._max_force = max_force

    def set_width(self, width: float, control: Optional[Control] = None, max_force: Optional[float] = None) -> None:
        """Drive the pads to ``width`` m apart (position control, effort-limited): in the scene
        being built, or during a run through ``control`` (``sim.control``)."""
        self._command(0.5 * (self.opening - float(width)), self._max_force if max_force is None else max_force,
                      control)

    def set_grip_force(self, force: float, control: Optional[Control] = None) -> None:
        """Close until each pad presses with ``force`` N (target: fully closed; effort = force), in
        the scene being built or during a run through ``control`` (``sim.control``)."""
        if not force > 0:
            raise ParameterError(f"grip force must be positive, got {force!r}")
        self._command(0.5 * self.opening + 0.01, float(force), control)

    def _command(self, target: float, max_force: Optional[float], control: Optional[Control]) -> None:
        for j in self.joints:
            if control is None:
                j.set_drive(kp=j.drive.kp, kd=j.drive.kd, target=target, max_force=max_force)
            else:
                control.set_joint_drive(j.name, target=target, max_force=max_force)

    def width(self, sim) -> float:
        """Current gap between the pads (m)."""
        (cl, Rl), (cr, _) = (sim.rigid_pose(f.name) for f in self.fingers)
        h = self.fingers[0].shape.half_extents[0]
        return float(np.dot(cr - cl, Rl[:, 0]) - 2 * h)


def _offset(pose, offset):
    p, R = pose
    R = as_rotation_matrix(R)
    return np.asarray(p, float) + R @ offset, R

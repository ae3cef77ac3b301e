"""ICF paper §XII-B, the grasp stress test (Figs. 20-21): a parallel gripper holds a bronze rod near
its top end and moves it along a horizontal circle of 3 cm radius at frequency f. The rod hangs
from the grasp like a compound pendulum; far below its pendulum frequency the grasp is secure,
near it the rod swings up, rocks in the grasp, slides and falls. Time to failure t_f: the rod's
centre is 5 cm below where the grasp holds it.

Setup: the paper gives the bronze, the 3 cm circle and the failure mode, not the rod's size or the
grip. Here the rod is a capsule (1 cm radius, 16 cm long, 8800 kg/m³) held 1 cm below its top by
rigid pads (a capsule is balls along its axis: about ten contacts, not the ~500 of a cylinder's rim
samples); each pad is pressed by a force on its slide (force control, a light damper). The pads
block the rod's swing across them; along them it turns only by slipping against the friction
torque, as the paper's rod rocks in the Franka hand. The circle's radius is ramped up over 1 s.
Grip 8 N per pad, μ 0.5 (weight 4.2 N against 2 μ F = 8 N). Expected (tests/scenes/test_grasp_scenes.py,
measured, dt 2 ms): f_p = 1.59 Hz (pendulum_frequency()); at 0.8 Hz held for 8 s (slid 0.7 mm,
tilt < 0.3°); t_f = 3.8 s at 1.4 Hz, 2.5 s at 1.6 Hz: t_f falls as f nears f_p.
Solver: Lagged (the paper's choice for grasping), implicit Euler.
Run: femcontact run scenes/grasp_stress.py --out out/grasp_stress
"""
import math

import numpy as np

import femcontact as fc
from femcontact.geometry.mass import mass_properties
from femcontact.kits import ParallelGripper

ROD_LENGTH, ROD_RADIUS, DENSITY = 0.16, 0.01, 8800.0     # tip to tip (m), m, kg/m³ (bronze)
GRASP_BELOW_TOP = 0.01                                  # the grasp point below the rod's top (m)
CIRCLE, RAMP = 0.03, 1.0                                # palm circle radius (m), its ramp-up time (s)
START = np.array([0.0, 0.0, 0.5])                       # grasp point at t = 0 (m)
FINGER = (0.01, 0.02, 0.02)                             # finger half extents (m): across, along y, height
FAIL_DROP = 0.05                                        # failure: the rod 5 cm below its held position (m)


def rod_shape() -> fc.shapes.Capsule:
    return fc.shapes.Capsule(ROD_RADIUS, ROD_LENGTH / 2 - ROD_RADIUS)


def pendulum_frequency() -> float:
    """Small-swing frequency (Hz) of the rod about the grasp point (its capsule mass properties)."""
    m, _, I = mass_properties(rod_shape(), DENSITY)
    d = ROD_LENGTH / 2 - GRASP_BELOW_TOP
    return math.sqrt(m * 9.81 * d / (I[0, 0] + m * d * d)) / (2 * math.pi)


def palm_path(frequency: float, ramp: float = RAMP):
    """Grasp point over time: a horizontal circle of radius CIRCLE, its radius ramped up over ``ramp`` s."""
    w = 2 * math.pi * frequency

    def pose(t: float):
        a = CIRCLE * min(t / ramp, 1.0) if ramp > 0 else CIRCLE
        return START + np.array([a * math.cos(w * t) - a, a * math.sin(w * t), 0.0]), None
    return pose


def build(frequency: float | None = None, grip_force: float = 8.0, friction: float = 0.5, solver: str = "lagged",
          dt: float = 2e-3, duration: float = 8.0) -> fc.Scene:
    """frequency: of the circle (Hz), default the rod's pendulum frequency; grip_force: per pad (N)."""
    f = pendulum_frequency() if frequency is None else float(frequency)
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=duration, frame_dt=0.02,
                     friction=friction, name="grasp_stress")
    rod_centre = START - np.array([0.0, 0.0, ROD_LENGTH / 2 - GRASP_BELOW_TOP])
    scene.add_rigid_body(rod_shape(), density=DENSITY, position=tuple(rod_centre), name="rod")
    gripper = ParallelGripper(scene, position=START, opening=2 * ROD_RADIUS + 0.002, palm_motion=palm_path(f),
                              finger_half_extents=FINGER, max_force=grip_force)
    for joint, finger, sign in zip(gripper.joints, gripper.fingers, (1.0, -1.0)):
        joint.set_drive(kp=0.0, kd=5.0, target=None)          # force control: a light damper on each slide
        finger.add_force(np.array([sign * grip_force, 0.0, 0.0]))
    scene.gripper = gripper
    return scene


def drop(sim) -> float:
    """How far (m) the rod's centre is below where the grasp holds it (0 while held)."""
    palm, _ = sim.rigid_pose("gripper_palm")
    held = palm[2] - (FINGER[2] + 0.01) - (ROD_LENGTH / 2 - GRASP_BELOW_TOP)   # the palm sits above the fingers
    return float(held - sim.rigid_pose("rod")[0][2])


def time_to_failure(sim, duration: float | None = None) -> float | None:
    """Steps ``sim`` until the rod has dropped FAIL_DROP (returns that time, s) or the run ends (None)."""
    end = sim.scene.duration if duration is None else duration
    while sim.state.time < end - 1e-9:
        sim.step()
        if drop(sim) > FAIL_DROP:
            return float(sim.state.time)
    return None


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/grasp_stress"))

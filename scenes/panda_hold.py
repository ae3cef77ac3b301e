"""A Franka Panda (arm and hand, URDF from example-robot-data) holds its "ready" pose under gravity.

Every joint has a PD drive toward its start position (critically damped, 0.05 s) and gravity
compensation; the arm should not move: its fingertips stay within 0.1 mm of the forward
kinematics for the whole run (about 1e-6 m measured; tests/robots/test_robots.py). With
``wave=True`` joint 1 swings ±0.3 rad (0.5 Hz) through a target that is a function of time.
With --out the run also writes ``panda_joints.csv`` (joint positions, rates, actuator torques,
the hand's and fingers' contact force) beside ``run.pvd``, and every link as a piece ``panda/<link>``.
Needs the optional extra: pip install ".[robots]".
Run: femcontact run scenes/panda_hold.py --out out/panda_hold
"""
import numpy as np

import femcontact as fc


def build(duration: float = 5.0, dt: float = 1e-2, gravity_compensation: bool = True, wave: bool = False,
          solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=dt, duration=duration, frame_dt=0.05, solver=solver, name="panda_hold")
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    robot = scene.add_robot("panda", gravity_compensation=gravity_compensation)
    if wave:
        q1 = robot.q0["panda_joint1"]
        drive = next(j for j in scene.joints if j.name == "panda.panda_joint1").drive
        drive.target = lambda t: q1 + 0.3 * np.sin(np.pi * t)
        drive.velocity = lambda t: 0.3 * np.pi * np.cos(np.pi * t)
    scene.panda = robot
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/panda_hold"))

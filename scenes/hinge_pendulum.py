"""A rigid bar on a hinge to the world, released 0.3 rad from vertical.
Small-amplitude period 2 pi sqrt(I / (m g d)) (tests/test_joints.py checks it at 0.05 rad).
Run: femcontact run scenes/hinge_pendulum.py --out out/hinge_pendulum
"""
import numpy as np
from scipy.spatial.transform import Rotation

import femcontact as fc

HALF_LENGTH = 0.25
PIVOT = np.array([0.0, 0.0, 1.0])


def build(theta0: float = 0.3) -> fc.Scene:
    R = Rotation.from_rotvec([0, theta0, 0]).as_matrix()
    scene = fc.Scene(dt=1e-2, duration=3.0, name="hinge_pendulum")
    scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, HALF_LENGTH)), density=1000.0,
                         position=PIVOT - R @ [0, 0, HALF_LENGTH], rotation=R, name="bar")
    scene.add_joint("hinge", None, "bar", anchor=PIVOT, axis=(0, 1, 0), name="hinge")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/hinge_pendulum"))

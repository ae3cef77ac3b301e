"""A rigid bar on a hinge to the world, released 0.3 rad from vertical.
Small-amplitude period 2 pi sqrt(I / (m g d)) (tests/bodies/test_joints.py checks it at 0.05 rad).
Run: femcontact run scenes/hinge_pendulum.py --out out/hinge_pendulum
"""
import numpy as np
from scipy.spatial.transform import Rotation

import femcontact as fc

HALF_LENGTH = 0.25
PIVOT = np.array([0.0, 0.0, 1.0])


def build(theta0: float = 0.3, half_length: float = HALF_LENGTH, integrator: str = "midpoint",
          body: str = "bar") -> fc.Scene:
    """``body``: the bar's name. The hinge is ``scene.joints[0]``."""
    R = Rotation.from_rotvec([0, theta0, 0]).as_matrix()
    scene = fc.Scene(dt=1e-2, integrator=integrator, duration=3.0, name="hinge_pendulum")
    scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, half_length)), density=1000.0,
                         position=PIVOT - R @ [0, 0, half_length], rotation=R, name=body)
    scene.add_joint("hinge", None, body, anchor=PIVOT, axis=(0, 1, 0), name="hinge")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/hinge_pendulum"))

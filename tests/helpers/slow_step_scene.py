"""A soft cube on the ground whose steps from ``slow_from`` s on take ``pause`` s each (its force
function sleeps): a run stuck in a long step, for the Ctrl-C tests (tests/simulator/test_stop.py)."""
import time

import numpy as np

import femcontact as fc


def build(pause: float = 60.0, slow_from: float = 0.015) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver="cond", integrator="euler", duration=1.0,
                     name="slow_step")
    cube = scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0),
                              position=(0.0, 0.0, 0.051), name="cube")

    def push(t: float) -> np.ndarray:
        if t >= slow_from:
            time.sleep(pause)
        return np.zeros(3)

    cube.add_force(push)
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene

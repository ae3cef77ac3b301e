"""A soft ball squeezed between two kinematic plates, then lifted (COND §V-D style grasp).

The plates close for 0.5 s, then lift at 0.1 m/s while holding their grip. With mu = 1 the ball
is carried up; with friction 0.05 it slips out and falls back (``build(friction=0.05)``).
"""
import numpy as np

import femcontact as fc

RADIUS = 0.04
SQUEEZE = 0.006      # each plate moves in this far beyond touching
CLOSE_T, LIFT_V = 0.5, 0.1


HALF_THICKNESS = 0.005


def plate_motion(side: float):
    """Pose of a plate: its inner face starts 5 mm off the ball and ends SQUEEZE inside it."""
    def motion(t: float):
        inner = RADIUS + 0.005 - (0.005 + SQUEEZE) * min(t / CLOSE_T, 1.0)
        lift = LIFT_V * max(t - CLOSE_T, 0.0)
        return np.array([side * (inner + HALF_THICKNESS), 0.0, RADIUS + lift]), None
    return motion


def build(friction: float = 1.0, solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=3.0, name="ball_squeeze")
    scene.add_fem_body(
        fc.meshes.sphere(radius=RADIUS, resolution=6),
        material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0,
                             rayleigh_alpha=1.0, rayleigh_beta=2e-3),
        position=(0.0, 0.0, RADIUS), name="ball")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    for side, name in ((-1.0, "left_plate"), (1.0, "right_plate")):
        scene.add_obstacle(fc.shapes.Box(half_extents=(HALF_THICKNESS, 0.05, 0.05)), motion=plate_motion(side),
                           friction=friction, name=name)
    return scene

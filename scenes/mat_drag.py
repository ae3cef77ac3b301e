"""A soft mat (E = 50 kPa, nu = 0.3 as in COND §V-C) dragged over the floor by a clamp on one edge.

The clamped edge nodes are driven: lifted 2 cm and pulled back over the mat at 0.1 m/s, so the mat
folds; the floor friction decides whether it sticks or slips (``build(friction=0.1)`` vs 1.0).
``build(resolution=...)`` sets the cells along the long side (benchmarks use 12 to 60).
"""
import numpy as np

import femcontact as fc

SIZE = (0.3, 0.2, 0.01)


def clamp_path(t: float, x0: np.ndarray) -> np.ndarray:
    lift = min(t / 0.2, 1.0) * 0.02
    pull = 0.1 * max(t - 0.2, 0.0)
    return x0 + np.array([-pull, 0.0, lift])


def build(resolution: int = 24, friction: float = 0.5, solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=2.0, name="mat_drag")
    nx = resolution
    mat = scene.add_fem_body(
        fc.meshes.box(SIZE, (nx, max(1, round(nx * SIZE[1] / SIZE[0])), 2)),
        material=fc.Material(youngs_modulus=5e4, poisson_ratio=0.3, density=200.0,
                             rayleigh_alpha=0.5, rayleigh_beta=5e-3),
        position=(0.0, 0.0, SIZE[2] / 2), name="mat")
    mat.drive(f"x > {SIZE[0] / 2 - 1e-6}", position=clamp_path)
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=friction, name="floor")
    return scene

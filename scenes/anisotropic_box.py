"""The anisotropic friction test of COND §V-F: a box on a floor with mu1 = 0.2 along x and
mu2 = 0.8 along y, pushed by 0.5 N along y for 0.5 s, then by 0.5 N along x for 0.5 s.
It creeps slowly while pushed along the high-friction axis, then speeds up along x."""
import numpy as np

import femcontact as fc

MASS_DENSITY = 100.0      # kg/m^3: a 0.1 m box of 0.1 kg, so 0.5 N exceeds mu m g in both axes


def push(t: float) -> np.ndarray:
    return np.array([0.0, 0.5, 0.0]) if t < 0.5 else np.array([0.5, 0.0, 0.0])


def build(solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=1.0, name="anisotropic_box")
    box = scene.add_fem_body(
        fc.meshes.box((0.1, 0.1, 0.1), 3),
        material=fc.Material(youngs_modulus=1e6, poisson_ratio=0.3, density=MASS_DENSITY, rayleigh_beta=1e-3),
        position=(0.0, 0.0, 0.05), name="box")
    box.add_force(push, mode="total")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=(0.2, 0.8), friction_axes=(1, 0, 0),
                       name="floor")
    return scene

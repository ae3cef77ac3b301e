"""Capstan: a cable wrapped half a turn over a fixed drum (mu = 0.3), held by 1 N on one end and
pulled down at 5 cm/s on the other. While it slides, the pulled end's tension is
T_hold e^{mu pi} = 2.57 N (printed at the end from the drive's reaction; tests/scenes/test_scenes.py
checks it within 5%, measured 2.52 N; tests/bodies/test_rods.py checks the stick/slip threshold within 5%)."""
import numpy as np
from scipy.spatial.transform import Rotation

import femcontact as fc

MU, RC, R, LEG, NSEG, NLEG = 0.3, 0.1, 0.001, 0.2, 40, 8


def build(density: float = 1e4, rayleigh_alpha: float = 2.0, mu: float = MU, solver: str = "lagged",
          solver_options=None, pull_force=None) -> fc.Scene:
    """``pull_force`` (N): None drives the pulled end down at 5 cm/s; a number loads it with that
    force instead (tests/bodies/test_rods.py: stick/slip at 0.95 and 1.05 e^{mu pi} N)."""
    rp = RC + R
    th = np.linspace(0, np.pi, NSEG + 1)
    pts = np.r_[np.c_[np.full(NLEG, rp), np.zeros(NLEG), np.linspace(-LEG, 0, NLEG, endpoint=False)],
                np.c_[rp * np.cos(th), 0 * th, rp * np.sin(th)],
                np.c_[np.full(NLEG, -rp), np.zeros(NLEG), np.linspace(0, -LEG, NLEG + 1)[1:]]]
    scene = fc.Scene(dt=2e-3, integrator="euler", solver=solver, gravity=(0, 0, 0), duration=1.0, name="capstan",
                     solver_options=solver_options)
    cable = scene.add_rod(pts, R, youngs_modulus=1e9, density=density, rayleigh_alpha=rayleigh_alpha, rest_shape="straight",
                          self_contact=False, name="cable")
    scene.add_obstacle(fc.shapes.Cylinder(radius=RC, half_length=0.1), rotation=Rotation.from_rotvec([np.pi / 2, 0, 0]),
                       friction=mu, name="drum")
    cable.add_force((0, 0, -1.0), nodes=[0], mode="per_node")
    if pull_force is None:
        cable.drive([len(pts) - 1], velocity=lambda t: (0.0, 0.0, -0.05 * min(1.0, t / 0.2)))
    else:
        cable.add_force((0, 0, -pull_force), nodes=[len(pts) - 1], mode="per_node")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/capstan", progress=True))
    x = sim.rod_positions("cable")
    f, _ = sim.rod_forces()
    end = sim.model.body("cable").node_start + len(x) - 1
    print(f"pulled-end tension {np.linalg.norm(f[end]):.3f} N, capstan e^(mu pi) x 1 N = {np.exp(MU * np.pi):.3f} N")

"""Clutter (SAP paper §VI-C, with walls): 40 rigid spheres and boxes dropped into a box.

Four columns of ``per_column`` objects (default 10: 40 bodies), an arbitrary but fixed mix of
spheres (radius 5 cm) and boxes (10 cm sides), density 1000 kg/m³ (0.524 kg / 1 kg), friction
1.0 on every surface, dropped into an 80 × 80 × 80 cm container made of five static obstacle
boxes (a floor and four walls). dt = 10 ms. The paper sets k = 1e12 N/m (near-rigid) and
τ_d = dt; here the contact stiffness is the solver's automatic near-rigid value (SAP: R_n of
eq. 29; Lagged: the same estimate as a stiffness). Benchmark (b) of issue 13 (tools/bench_step.py).

    femcontact run scenes/clutter.py --solver lagged --out out/clutter
"""
import numpy as np

import femcontact as fc

SIZE = 0.8          # inner container edge (m)
WALL = 0.05         # wall thickness (m)
PITCH = 0.11        # vertical spacing of the objects of one column (m)


def build(solver: str = "lagged", per_column: int = 10, integrator: str = "euler", seed: int = 3) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver, integrator=integrator, duration=10.0, name="clutter", friction=1.0)
    h, t = SIZE / 2, WALL / 2
    walls = [((0.0, 0.0, -t), (h + WALL, h + WALL, t)),                     # floor, top face at z = 0
             ((h + t, 0.0, h), (t, h + WALL, h)), ((-h - t, 0.0, h), (t, h + WALL, h)),
             ((0.0, h + t, h), (h, t, h)), ((0.0, -h - t, h), (h, t, h))]
    for k, (c, half) in enumerate(walls):
        scene.add_obstacle(fc.shapes.Box(half), position=c, friction=1.0, name=f"wall{k}")
    rng = np.random.default_rng(seed)
    k = 0
    for cx, cy in ((-0.2, -0.2), (0.2, -0.2), (-0.2, 0.2), (0.2, 0.2)):
        for level in range(per_column):
            z = 0.06 + level * PITCH
            xy = (cx + rng.uniform(-0.01, 0.01), cy + rng.uniform(-0.01, 0.01))
            if rng.uniform() < 0.5:
                shape = fc.shapes.Sphere(0.05)
                rot = None
            else:
                shape = fc.shapes.Box((0.05, 0.05, 0.05))
                a = rng.uniform(0, np.pi)
                rot = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
            scene.add_rigid_body(shape, density=1000.0, position=(*xy, z), rotation=rot, name=f"obj{k:02d}")
            k += 1
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(steps=100, progress=True))

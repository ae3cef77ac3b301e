"""A pile: small soft cubes and balls dropped in a staggered grid onto the ground.

``layers`` layers of ``per_side`` x ``per_side`` objects (default 3 x 3 x 3 = 27, about 3k DOF),
cubes and balls alternating like a checkerboard. Each layer is shifted by a third of the spacing
from the one below and dropped from a little higher, so the objects land on each other rather
than in columns: the pile has FEM-ground contacts and many FEM-FEM (vertex-in-tet) contacts,
which slide, stick and roll off each other. Used by tools/bench_newton.py as the "dropped pile
of 20-40 objects" of issue 6.

    femcontact run scenes/pile.py --out out/pile
    python -c "import runpy; s = runpy.run_path('scenes/pile.py')['build'](layers=4)"   # 36 objects
"""
import numpy as np

import femcontact as fc

SIZE = 0.04          # cube edge and ball diameter (m)
GAP = 0.015          # horizontal gap between neighbours of one layer (m)


def build(layers: int = 3, per_side: int = 3, resolution: int = 2, solver: str = "cond",
          friction: float = 0.5, youngs_modulus: float = 1e5) -> fc.Scene:
    """layers x per_side² objects; ``resolution``: cells along a cube's edge (a ball gets 2x)."""
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=1.5, name="pile",
                     friction=friction)
    material = fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=0.35, density=500.0,
                           rayleigh_alpha=1.0, rayleigh_beta=2e-3)
    cube = fc.meshes.box((SIZE, SIZE, SIZE), resolution)
    ball = fc.meshes.sphere(radius=SIZE / 2, resolution=2 * resolution)
    pitch = SIZE + GAP
    rng = np.random.default_rng(7)
    k = 0
    for layer in range(layers):
        shift = (layer % 3) * pitch / 3.0                  # staggered: each layer a third of a pitch over
        z = SIZE / 2 + 0.005 + layer * (SIZE + 0.02)       # dropped from 5 mm + 2 cm per layer
        for i in range(per_side):
            for j in range(per_side):
                x = (i - (per_side - 1) / 2) * pitch + shift
                y = (j - (per_side - 1) / 2) * pitch + shift
                mesh = cube if (i + j + layer) % 2 == 0 else ball
                angle = rng.uniform(-0.3, 0.3)             # a small random yaw so faces do not line up
                rot = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0],
                                [0.0, 0.0, 1.0]])
                scene.add_fem_body(mesh, material, position=(x, y, z), rotation=rot, name=f"obj{k:02d}")
                k += 1
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=friction, name="ground")
    return scene

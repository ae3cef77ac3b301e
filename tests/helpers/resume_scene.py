"""Small scenes in contact for the resume and fault tests: one body of each type on frictional ground.

``build(solver, body)``; the command line cannot pass ``body``, so it defaults to
``$FEMCONTACT_TEST_BODY`` (fem, rigid or rod).
"""
import os

import femcontact as fc


def build(solver: str = "cond", body: str = "", duration: float = 0.12) -> fc.Scene:
    body = body or os.environ.get("FEMCONTACT_TEST_BODY", "fem")
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator="euler", duration=duration,
                     name=f"resume_{body}")
    if body == "fem":
        scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0),
                           position=(0.0, 0.0, 0.051), velocity=(0.3, 0.0, 0.0), name="cube")
    elif body == "rigid":
        scene.add_rigid_body(fc.shapes.Box((0.03, 0.03, 0.03)), density=1000.0, position=(0.0, 0.0, 0.031),
                             velocity=(0.4, 0.0, 0.0), angular_velocity=(0.0, 0.0, 2.0), name="block")
    elif body == "rod":
        scene.add_rod(fc.meshes.rod_straight((-0.1, 0.0, 0.006), (0.1, 0.0, 0.006), 6), radius=0.004,
                      material=fc.Material(2.954e6, 0.49, 1200.0), velocity=(0.2, 0.1, 0.0), name="cable")
    else:
        raise ValueError(f"body must be fem, rigid or rod, not {body!r}")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene

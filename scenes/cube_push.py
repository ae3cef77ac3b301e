"""A soft cube pushed across the floor by a kinematic paddle moving at 0.1 m/s."""
import femcontact as fc


def build(solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=2.0, name="cube_push")
    scene.add_fem_body(
        fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=4),
        material=fc.Material(youngs_modulus=2e5, poisson_ratio=0.4, density=1000.0,
                             rayleigh_alpha=1.0, rayleigh_beta=2e-3),
        position=(0.0, 0.0, 0.05), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.4, name="ground")
    scene.add_obstacle(fc.shapes.Box(half_extents=(0.01, 0.08, 0.04)), position=(-0.08, 0.0, 0.05),
                       velocity=(0.1, 0.0, 0.0), friction=0.2, name="paddle")
    return scene

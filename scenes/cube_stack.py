"""Two soft cubes stacked on the ground, settling at rest (FEM–FEM and FEM–ground contact)."""
import femcontact as fc


def build(solver: str = "cond") -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=2.0, name="cube_stack")
    material = fc.Material(youngs_modulus=2e5, poisson_ratio=0.4, density=1000.0,
                           rayleigh_alpha=1.0, rayleigh_beta=2e-3)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 4), material, position=(0.0, 0.0, 0.05), name="lower")
    scene.add_fem_body(fc.meshes.box((0.08, 0.08, 0.08), 4), material, position=(0.005, 0.0, 0.141), name="upper")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.6, name="ground")
    return scene

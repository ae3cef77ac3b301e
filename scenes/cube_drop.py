"""A soft cube dropped onto the ground (inelastic contact, COND).

The contact is inelastic (restitution 0), but a soft cube still hops a little: the impact
squashes it and its stored elastic energy relaunches it. ``build(youngs_modulus=1e7)`` gives
a stiff cube that lands dead.
"""
import femcontact as fc


def build(solver: str = "cond", youngs_modulus: float = 1e5, restitution: float = 0.0) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, duration=2.0, name="cube_drop")
    scene.add_fem_body(
        fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=4, symmetric=True),   # lands straight
        material=fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=0.4, density=1000.0,
                             rayleigh_alpha=1.0, rayleigh_beta=2e-3),
        position=(0.0, 0.0, 0.15), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, restitution=restitution, name="ground")
    return scene

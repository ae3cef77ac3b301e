"""A tiny scene for the sweep tests: a soft cube sliding on frictional ground; build() takes the swept keywords."""
import femcontact as fc


def build(friction: float = 0.5, youngs_modulus: float = 1e5) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver="cond", duration=0.1, name="sweep_cube")
    scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=2),
                       material=fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=0.4, density=1000.0),
                       position=(0.0, 0.0, 0.051), velocity=(0.5, 0.0, 0.0), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=friction, name="ground")
    return scene


def metrics(sim: fc.Simulator) -> dict:
    """How far the cube slid (m): the sweep's table gets this column."""
    return {"slide": float(sim.body_positions("cube")[:, 0].mean())}

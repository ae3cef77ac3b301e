"""A 3-turn coil of cable dropped on the ground: the turns stack on each other (self-contact
between non-adjacent segments) instead of collapsing flat."""
import femcontact as fc

R = 0.005


def build(height: float = 0.05) -> fc.Scene:
    """``height``: the coil's centre above the ground (m)."""
    scene = fc.Scene(dt=5e-3, integrator="euler", solver="lagged", duration=1.0, name="cable_coil")
    scene.add_rod(fc.meshes.rod_helix(0.05, 3 * R, 3.0, center=(0, 0, height)), R, youngs_modulus=1e6, density=1000.0,
                  rayleigh_alpha=2.0, rest_shape="straight", name="coil")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.3, name="ground")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/cable_coil", progress=True))

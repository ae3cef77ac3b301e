"""A soft cube falling freely under gravity (no ground): x(t) = x0 + g t^2 / 2."""
import femcontact as fc


def build() -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), integrator="midpoint", duration=1.0, name="free_fall")
    scene.add_fem_body(
        fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=4),
        material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0),
        position=(0.0, 0.0, 1.0), name="cube")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/free_fall"))
    print("lowest point:", sim.body_positions("cube")[:, 2].min())

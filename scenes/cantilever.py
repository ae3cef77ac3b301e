"""A soft beam clamped at x = 0, sagging under its own weight.

Slender beam L = 1 m, square 0.1 m section, E = 1e7 Pa, rho = 1000 kg/m^3, light
Rayleigh damping so it settles towards the static Euler–Bernoulli deflection
w L^4 / (8 E I) = 0.147 m (a linear-tet mesh is stiffer at coarse resolution).
"""
import femcontact as fc

LENGTH, HEIGHT = 1.0, 0.1


def build(resolution=(40, 4, 4), youngs_modulus: float = 1e7, dt: float = 1e-2, integrator: str = "midpoint",
          linear_solver: str = "auto") -> fc.Scene:
    """``resolution``: cells along (x, y, z); ``dt``, ``integrator`` and ``linear_solver`` as in
    ``fc.Scene`` (tests/scenes/test_scenes.py takes huge implicit-Euler steps for the static sag)."""
    scene = fc.Scene(dt=dt, gravity=(0.0, 0.0, -9.81), integrator=integrator, duration=3.0, name="cantilever",
                     linear_solver=linear_solver)
    beam = scene.add_fem_body(
        fc.meshes.box(size=(LENGTH, HEIGHT, HEIGHT), resolution=resolution, center=(LENGTH / 2, 0.0, 0.0)),
        material=fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=0.3, density=1000.0,
                             rayleigh_alpha=2.0, rayleigh_beta=1e-3),
        name="beam")
    beam.pin("x < 1e-6")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/cantilever", progress=True))
    print("tip deflection:", sim.body_positions("beam")[:, 2].min())

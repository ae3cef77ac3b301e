"""A steel-like rod (Cosserat, 20 segments) clamped at x = 0, sagging under its own weight.

L = 1 m, radius 1 cm, E = 2 GPa: static tip deflection w L^4/(8 E I) = 24.5 mm
(tests/bodies/test_rods.py checks 3%; measured 0.2%).
"""
import femcontact as fc


def build(n_segments: int = 20, youngs_modulus: float = 2e9, radius: float = 0.01, density: float = 1000.0,
          length: float = 1.0, dt: float = 1e-2, gravity=(0.0, 0.0, -9.81)) -> fc.Scene:
    scene = fc.Scene(dt=dt, gravity=gravity, integrator="euler", solver="lagged", duration=2.0, name="rod_cantilever")
    rod = scene.add_rod(fc.meshes.rod_straight((0, 0, 0), (length, 0, 0), n_segments), radius=radius,
                        material=fc.Material(youngs_modulus, 0.3, density, rayleigh_alpha=5.0), self_contact=False,
                        name="rod")
    rod.clamp("start")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(out="out/rod_cantilever", progress=True))
    print("tip:", sim.rod_positions("rod")[-1])

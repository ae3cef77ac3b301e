"""ICF paper §XI-B, the falling steel sphere: a steel ball (diameter 0.1 m, ρ 7800 kg/m³) dropped
from 5 cm with a horizontal velocity v0 = 2 m/s onto ground with μ = 0.3. It lands sliding and
without spin, slides while friction spins it up, and then rolls without friction.

Known answers (rigid sphere, inelastic impact): it lands at t_i = √(2h/g) with v_z = √(2gh); the
friction impulse to make it roll is 2 m v0 / 7, supplied by μ times the landing impulse m v_z
and then by μ m g per second, so it rolls from t_r = t_i + (2 v0/7 − μ v_z) / (μ g) (when
2 v0/7 > μ v_z) at 5 v0/7 (angular momentum about the contact point is conserved).
What to expect (ICF Fig. 6): Lagged brings the normal velocity to zero at landing; SAP and Similar
keep it at μ |v_t| while the ball slides (gliding) and touch down only when it rolls.
tests/scenes/test_paper_scenes.py checks these.
Run: femcontact run scenes/steel_sphere.py --out out/steel_sphere
"""
import femcontact as fc

RADIUS, DENSITY = 0.05, 7800.0


def build(solver: str = "lagged", v0: float = 2.0, mu: float = 0.3, height: float = 0.05, dt: float = 2e-3,
          duration: float = 0.4) -> fc.Scene:
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=duration, name="steel_sphere")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(RADIUS), density=DENSITY, position=(0, 0, RADIUS + height),
                         velocity=(v0, 0, 0), name="ball")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/steel_sphere"))

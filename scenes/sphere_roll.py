"""A solid sphere thrown sliding (v0 = 2 m/s, no spin) starts to roll at t = 2 v0 / (7 mu g),
then rolls on at 5 v0 / 7.
Run: femcontact run scenes/sphere_roll.py --out out/sphere_roll
"""
import femcontact as fc


def build(solver: str = "cond", v0: float = 2.0, mu: float = 0.3, dt: float = 1e-2, solver_options=None) -> fc.Scene:
    scene = fc.Scene(dt=dt, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=1.0, name="sphere_roll", solver_options=solver_options)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=1000.0, position=(0, 0, 0.05), velocity=(v0, 0, 0),
                         name="ball")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/sphere_roll"))

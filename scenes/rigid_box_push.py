"""A rigid box pushed across the floor (COND §V-B): F = 1.5 mu m g from t = 0.1 s.

Expected: x(t) = (F/m - mu g) t^2 / 2 after the push starts (tests/bodies/test_rigid.py checks it).
Run: femcontact run scenes/rigid_box_push.py --out out/rigid_box_push
"""
import femcontact as fc

MU, MASS, G = 0.5, 1.0, 9.81


def build(solver: str = "cond", force_ratio: float = 1.5, mu: float = MU) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=1.0, name="rigid_box_push")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, name="ground")
    box = scene.add_rigid_body(fc.shapes.Box((0.05, 0.05, 0.05)), mass=MASS, position=(0, 0, 0.05), name="box")
    box.add_force(lambda t: (force_ratio * mu * MASS * G if t >= 0.1 - 1e-9 else 0.0, 0.0, 0.0))
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/rigid_box_push"))

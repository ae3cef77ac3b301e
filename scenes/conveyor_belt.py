"""ICF paper §XI-A, the oscillating conveyor belt: a rigid box (0.1 m, 1 kg) rests on a belt that
oscillates along x as x_b(t) = A (1 − cos 2π f t), A = 0.1 m, f = 1 Hz, friction μ = 0.3. The belt's
peak acceleration A (2π f)² = 3.9 m/s² exceeds μ g = 2.9 m/s², so the box alternates between
sticking to the belt and sliding on it at the Coulomb acceleration ±μ g.

What to expect (ICF Fig. 3): under Lagged (the default here) the box never moves vertically and
the normal force equals its weight, sticking or sliding; under SAP and Similar the box rises off
the belt while it slides (the *gliding* artefact of their convex approximations, a gap growing
like dt μ |v_t|) and settles back when it sticks. tests/scenes/test_paper_scenes.py checks both.
Run: femcontact run scenes/conveyor_belt.py --out out/conveyor_belt
"""
import math

import femcontact as fc

SIZE, MASS = 0.1, 1.0


def belt_motion(amplitude: float, frequency: float):
    """The belt's pose at time t: x_b = A (1 − cos 2π f t) (starting at rest), no rotation."""
    w = 2.0 * math.pi * frequency
    return lambda t: ((amplitude * (1.0 - math.cos(w * t)), 0.0, 0.0), None)


def build(solver: str = "lagged", mu: float = 0.3, amplitude: float = 0.1, frequency: float = 1.0,
          dt: float = 1e-2, duration: float = 3.0) -> fc.Scene:
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=duration, name="conveyor_belt")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, motion=belt_motion(amplitude, frequency), name="belt")
    scene.add_rigid_body(fc.shapes.Box((SIZE / 2,) * 3), density=MASS / SIZE**3, position=(0, 0, SIZE / 2),
                         name="box")
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/conveyor_belt"))

"""ICF paper §XI-C, the sliding rod that jams (Painlevé's paradox): a rigid rod (1 m long, 2 cm in
diameter, 1 kg) leans at θ0 = 60° on the ground on one end and slides with that end leading at
v0 = 2 m/s, friction μ = 1.5. For a thin rod the contact end's normal acceleration is
(N/m)(1 + 3 cos²θ − 3 μ sinθ cosθ) − g + ...; past μ > (1 + 3 cos²θ)/(3 sinθ cosθ) (1.35 at 60°)
friction turns the rod into the ground faster than the normal force can push it back, and there
is no sliding solution with finite forces: the rod jams — its end sticks and the impulsive force
throws it up into the air ("impact without collision").

What to expect (ICF Figs. 9–10): the contact end slides, stops dead (stiction for a short while)
and the rod jumps off the ground; with μ = 0.3 it slides and falls flat instead.
The jump is the release of the energy the compliant contact stores during the jam, so it needs the
paper's setting: a stiff but compliant contact without normal dissipation and a step that resolves
it (``stiffness=1e7`` N/m, the Hertz estimate for steel; ``dissipation=0``; ``dt=1e-4``): the end
sticks at 21 ms and leaves the ground by 1.7 mm at 26 ms (Lagged, measured). With the default
near-rigid, dissipative contact at dt = 1 ms the end jams and the rod pivots up about it without
leaving the ground. tests/scenes/test_paper_scenes.py checks all three.
Run: femcontact run scenes/painleve_rod.py --out out/painleve_rod
"""
import math

import numpy as np
from scipy.spatial.transform import Rotation

import femcontact as fc

HALF_LENGTH, RADIUS, MASS = 0.5, 0.01, 1.0


def build(solver: str = "lagged", mu: float = 1.5, theta0_deg: float = 60.0, v0: float = 2.0, dt: float = 1e-3,
          duration: float = 0.6, stiffness: float | None = None, dissipation: float | None = None) -> fc.Scene:
    """stiffness (N/m) and dissipation (Hunt & Crossley d in s/m; for SAP its τ_d in s) of the
    rod–ground contact; None: the solver's automatic values."""
    th = math.radians(theta0_deg)
    rot = Rotation.from_rotvec([0.0, math.pi / 2 - th, 0.0]).as_matrix()   # axis (local z) to (cos θ, 0, sin θ)
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=duration, name="painleve_rod")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, name="ground")
    scene.add_rigid_body(fc.shapes.Capsule(RADIUS, HALF_LENGTH), mass=MASS, rotation=rot,
                         position=(0.0, 0.0, HALF_LENGTH * math.sin(th) + RADIUS), velocity=(-v0, 0.0, 0.0),
                         name="rod")
    if stiffness is not None or dissipation is not None:
        damping = {"tau_d": dissipation} if solver == "sap" else {"hc_dissipation": dissipation}
        scene.set_contact("rod", "ground", stiffness=stiffness, **damping)
    return scene


def contact_end(sim) -> tuple[np.ndarray, np.ndarray]:
    """World position and velocity of the rod's lower end (the centre of its lower cap)."""
    (c, R), (v, w) = sim.rigid_pose("rod"), sim.rigid_velocity("rod")
    r = np.asarray(R) @ np.array([0.0, 0.0, -HALF_LENGTH])
    return c + r, v + np.cross(w, r)


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/painleve_rod"))

"""A rigid two-finger gripper grasps a soft ball, lifts it 10 cm and holds it (COND §V-D).

The fingers close with a commanded grip force (effort-limited PD drives on prismatic joints),
then the palm rises; with friction 0.5 the ball comes along, with 0.05 it slips out.
Run: femcontact run scenes/gripper_ball.py --out out/gripper_ball
"""
import numpy as np

import femcontact as fc
from femcontact.kits import ParallelGripper

RADIUS = 0.04
LIFT = 0.1
T_CLOSE, T_LIFT = 0.4, 1.4          # close until T_CLOSE, rise until T_LIFT, then hold


def palm_height(t: float) -> float:
    """Lift profile of the palm above its start (m): smooth rise between T_CLOSE and T_LIFT."""
    u = np.clip((t - T_CLOSE) / (T_LIFT - T_CLOSE), 0.0, 1.0)
    return LIFT * (3 * u * u - 2 * u**3)


def build(friction: float = 0.5, grip_force: float = 8.0, resolution: int = 3, solver: str = "lagged",
          duration: float = 3.4) -> fc.Scene:
    integrator = "midpoint" if solver == "cond" else "euler"
    scene = fc.Scene(dt=1e-2, solver=solver, integrator=integrator, duration=duration, frame_dt=0.02,
                     friction=friction, name="gripper_ball")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    scene.add_fem_body(fc.meshes.sphere(radius=RADIUS, resolution=resolution),
                       fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0, rayleigh_beta=0.01),
                       position=(0, 0, RADIUS), name="ball")
    start = np.array([0.0, 0.0, RADIUS])
    gripper = ParallelGripper(scene, position=start, opening=2 * RADIUS + 0.02,
                              palm_motion=lambda t: (start + [0, 0, palm_height(t)], None))
    gripper.set_grip_force(grip_force)
    scene.gripper = gripper
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/gripper_ball"))

"""A Franka Panda grips a soft ball from the floor and lifts it (COND §V-D, Fig. 9: gripping a soft ball).

The ball (E = 1 MPa, nu = 0.4, friction 0.5 as in the paper; radius 3 cm, 1000 kg/m³; the
resolution-3 mesh holds 0.100 kg)
lies on the floor in front of the robot. The hand starts pointing down with its open fingers
(8 cm apart) around the ball's equator. Until ``T_CLOSE`` the fingers close: the finger drive's
target runs to fully closed and its effort is capped at ``grip_force`` (N, on the finger joint;
the mimic finger shares it, so each pad presses with about half of it). Then the hand's tool
point rises ``LIFT`` m along a vertical line (joint targets from the differential-IK helper,
``Robot.cartesian_path``) and holds.

What to expect: the ball comes along with the hand (from the closed grip on, its centre follows
the tool point within 0.2 mm; the tool point rises 99 mm, as gravity compensation does not know
the payload), and while held the net contact force on the hand and fingers (``panda_joints.csv``:
``ee_force_z``) balances the ball's weight, -m g = -0.98 N (-0.982 N measured). tests/scenes/test_panda_scenes.py measures both.

Solver: "lagged" (the Newton-type contact solver) by default: COND runs into its 500-iteration
cap on every step once the two fingers squeeze the ball from both sides (measured from step 11
on, 0.3 to 0.7 s a step against 0.12 s for "lagged"; scenes/gripper_ball.py shows the same), and
its unconverged steps let the arm stray from its path (the tool point 77 mm off by t = 1.6 s,
though the ball stays in the grip); ``solver="cond"`` runs it.

``resolution``: the ball mesh's subdivisions (``fc.meshes.sphere``; 3 by default). Needs the
optional extra ``pip install ".[robots]"``. Run: femcontact run scenes/panda_soft_ball.py --out out/panda_soft_ball
"""
import numpy as np

import femcontact as fc

RADIUS = 0.03
DENSITY = 1000.0
SPOT = (0.5, 0.0)                          # x, y of the ball on the floor (m)
LIFT = 0.1
T_CLOSE, T_LIFT = 0.4, 1.4                 # close until T_CLOSE, rise until T_LIFT, then hold


def lift_height(t: float) -> float:
    """Height (m) of the tool point above its start: smooth rise between T_CLOSE and T_LIFT."""
    u = float(np.clip((t - T_CLOSE) / (T_LIFT - T_CLOSE), 0.0, 1.0))
    return LIFT * (3 * u * u - 2 * u**3)


def build(friction: float = 0.5, grip_force: float = 20.0, resolution: int = 3, solver: str = "lagged",
          dt: float = 1e-2, duration: float = 2.0) -> fc.Scene:
    mesh = fc.meshes.sphere(radius=RADIUS, resolution=resolution)
    # resting on its lowest nodes (resolution 3 has none on the axes: 27.1 mm from the centre)
    center = np.array([*SPOT, -mesh.vertices[:, 2].min()])
    # grasp pose: the hand pointing down, its tool point at the ball's centre, fingers open (differential
    # IK from the ready pose on a throwaway robot: joint positions are fixed when a robot is added)
    probe = fc.Scene().add_robot("panda")
    fk = probe.forward_kinematics()["panda_hand_tcp"]
    start, R_down = fk[:3, 3], fk[:3, :3]
    approach = probe.cartesian_path("panda_hand_tcp", lambda t: (start + min(t, 1.0) * (center - start), R_down),
                                    duration=1.0, step=0.01)
    q_grasp = approach.q[-1]

    scene = fc.Scene(dt=dt, duration=duration, frame_dt=0.02, solver=solver, friction=friction,
                     name="panda_soft_ball")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=friction, name="ground")
    scene.add_fem_body(mesh,
                       fc.Material(youngs_modulus=1e6, poisson_ratio=0.4, density=DENSITY, rayleigh_beta=0.01),
                       position=center, name="ball")
    # a stiff finger drive (its default gains are for the 15 g finger: far too soft to squeeze)
    robot = scene.add_robot("panda", joint_positions=q_grasp, kp={"panda_finger_joint1": 2000.0},
                            kd={"panda_finger_joint1": 20.0})
    lift = robot.cartesian_path("panda_hand_tcp", lambda t: (center + [0.0, 0.0, lift_height(t)], R_down),
                                duration=duration, q_start=q_grasp, step=0.01)
    q_open = float(q_grasp[-1])
    robot.set_trajectory(scene, lift)
    finger = next(j for j in scene.joints if j.name == robot.all_joints["panda_finger_joint1"].name).drive
    finger.target = lambda t: q_open * max(0.0, 1.0 - t / T_CLOSE)        # close, then squeeze
    finger.velocity = lambda t: -q_open / T_CLOSE if t < T_CLOSE else 0.0
    finger.max_force = float(grip_force)
    scene.panda = robot
    scene.lift_path = lift
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/panda_soft_ball"))

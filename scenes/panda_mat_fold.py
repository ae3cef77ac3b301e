"""A Franka Panda folds a soft mat lying on the floor (COND §V-D, Fig. 7: soft mat folding).

The mat (E = 50 kPa, nu = 0.3 as in the paper; 30 x 20 x 1 cm, 200 kg/m³) lies in front of the
robot. Its far edge is held by the hand: the grasp is modelled as the top row of edge nodes glued
to the hand (``Scene.attach``, stiff springs) at the hand's tool point, the fingers closed above
it, contact between the hand (and fingers) and the mat off. The hand, pointing down, carries the
edge along a half circle over the mid-line of the mat (radius ``reach`` times half the mat
length) toward the robot, so the far half is flipped onto the near half; the joint targets come
from the differential-IK helper (``Robot.cartesian_path``) and the drives follow them. The path
ends at the height it starts at, so the flipped flap's face (the mat's top before the fold) is
laid onto the near half's top and rests there on the mat's self-contact (``self_contact``: about
40 contacts between the two halves at the end).

Friction between mat and floor is ``friction``. What to expect (the paper's result): at μ = 1.0
the near edge of the mat, which stays on the floor, does not slip while the far half is lifted
and laid over (0.2 mm measured); at μ = 0.1 it first sticks (2.6 mm of creep while the flap
rises), then slides toward the robot as the flap is pulled over: the whole mat is dragged, 283
mm, until it stops against the robot's base. tests/scenes/test_panda_scenes.py measures both.

``resolution``: cells along the long side (default 15: 16 x 11 x 2 nodes, 1056 DOF of the mat,
about the paper's 1081-DOF case; its 4438-DOF case is about resolution 30 with 2 cells through the
thickness, which this scene keeps at 1).

Solver: "lagged" (the Newton-type contact solver) by default: COND hits its 500-iteration cap on
every step of this scene (1.4 s a step at resolution 12 against 0.2 to 0.3 s for "lagged"; the
hand 14 mm off its path at t = 0.4 s against 3 mm); ``solver="cond"`` runs it. Needs the optional extra
``pip install ".[robots]"``. Run: femcontact run scenes/panda_mat_fold.py --out out/panda_mat_fold
"""
import numpy as np

import femcontact as fc

SIZE = (0.3, 0.2, 0.01)          # mat (m): x toward/away from the robot, y across, z thickness
NEAR = 0.35                      # x of the mat's near edge (m)
HOLD = 0.015                     # height of the hand's tool point above the mat's top (m)
T_SETTLE, T_FOLD = 0.2, 2.0      # the mat settles, then the fold takes T_FOLD s


def fold_angle(t: float) -> float:
    """Angle (rad) of the held edge about the fold line: 0 -> π, smooth start and stop."""
    u = float(np.clip((t - T_SETTLE) / T_FOLD, 0.0, 1.0))
    return np.pi * (3 * u * u - 2 * u**3)


def tool_path(t: float, reach: float = 1.0) -> np.ndarray:
    """World position (m) of the hand's tool point at time t: a half circle over the mat's
    mid-line from above the far edge to the same height above the near edge."""
    r = reach * SIZE[0] / 2
    xc, z0 = NEAR + SIZE[0] / 2, SIZE[2] + HOLD
    a = fold_angle(t)
    return np.array([xc + r * np.cos(a), 0.0, z0 + r * np.sin(a)])


def build(friction: float = 1.0, resolution: int = 15, reach: float = 1.0, solver: str = "lagged",
          dt: float = 1e-2, duration: float = None, self_contact: bool = True) -> fc.Scene:
    duration = T_SETTLE + T_FOLD + 0.3 if duration is None else duration
    # grasp pose: the hand pointing down with its tool point above the far edge, by differential IK
    # from the Panda's ready pose (a throwaway robot: joint positions are fixed when a robot is added)
    probe = fc.Scene().add_robot("panda")
    R_down = probe.forward_kinematics()["panda_hand_tcp"][:3, :3]
    start = probe.forward_kinematics()["panda_hand_tcp"][:3, 3]
    grasp = tool_path(0.0, reach)
    approach = probe.cartesian_path("panda_hand_tcp", lambda t: (start + min(t, 1.0) * (grasp - start), R_down),
                                    duration=1.0, step=0.01)
    q_grasp = approach.q[-1].copy()
    q_grasp[-1] = 0.0                              # fingers closed

    scene = fc.Scene(dt=dt, duration=duration, frame_dt=0.05, solver=solver, friction=friction,
                     name="panda_mat_fold")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=friction, name="ground")
    nx = resolution
    mat = scene.add_fem_body(
        fc.meshes.box(SIZE, (nx, max(1, round(nx * SIZE[1] / SIZE[0])), 1)),
        material=fc.Material(youngs_modulus=5e4, poisson_ratio=0.3, density=200.0,
                             rayleigh_alpha=0.5, rayleigh_beta=5e-3),
        position=(NEAR + SIZE[0] / 2, 0.0, SIZE[2] / 2), name="mat", self_contact=self_contact)
    robot = scene.add_robot("panda", joint_positions=q_grasp)
    for body in robot.end_effector_bodies:
        scene.set_contact(body, mat.name, enabled=False)       # the held edge is glued, not pinched
    far = NEAR + SIZE[0]
    scene.attach(mat.name, f"(x > {far - 1e-6}) & (z > {SIZE[2] - 1e-6})", to=robot.link_body["panda_hand_tcp"][0])
    fold = robot.cartesian_path("panda_hand_tcp", lambda t: (tool_path(t, reach), R_down), duration=duration,
                                step=0.01)
    robot.set_trajectory(scene, fold)
    scene.panda = robot
    scene.fold_path = fold
    return scene


if __name__ == "__main__":
    sim = fc.Simulator(build())
    print(sim.run(progress=True, out="out/panda_mat_fold"))

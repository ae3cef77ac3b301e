"""A Franka Panda winds a cable onto a standing cylinder (COND §V-D, Fig. 8: cable winding).

The cable (a Cosserat rod; E = 2.954 MPa, nu = 0.49, friction 1.3 as in the paper; 4 mm radius,
1200 kg/m³, ``LENGTH`` = 0.25 m) lies straight on the floor, tangent to the cylinder (3 cm radius,
5 cm tall: its top stays under the hand); its tail end is fixed to the cylinder's foot
(``Scene.attach`` to the world), its other end is held by the hand: the end node glued to the
hand at its tool point (a pin: the cable turns freely there), the fingers closed on it, contact
between hand and cable off. The hand, pointing down, lays the cable around the cylinder: its
tool point runs along the involute of the cylinder, so the free part between the cylinder and
the hand stays straight and taut while it shortens from ``LENGTH`` to ``FREE_END`` (0.95 turn
wound), at ``SPEED`` along its path after a 0.5 s ramp, rising ``PITCH`` (2.5 cable radii) per
turn; the joint targets come from the differential-IK helper (``Robot.cartesian_path``).

End-effector force (the paper's F/T-sensor trace, Fig. 8c): the force the cable pulls the hand
with, its first segment's axial force ``E A ε`` along the segment (``end_effector_force``); the
run's ``panda_joints.csv`` reports only contact forces, which are zero here (the end is glued).
``python scenes/panda_cable_winding.py`` runs it and writes the trace to
``out/panda_cable_winding/end_effector_force.csv``. What to expect: the cable wraps the cylinder
as the hand goes round (the wound part sticks: μ = 1.3; measured: 5.74 of the 5.88 rad wound lie on
it at the end), the tool point stays within 5 mm of its path, and the pull on the hand stays of
the order of the cable's weight and floor drag (0.08 to 0.32 N, mean 0.24 N, while winding);
tests/scenes/test_panda_scenes.py measures the wrap and the trace.

Solver "lagged" with implicit Euler, as scenes/cable_winding.py (the same cable without the robot).
``segments``: cable segments (50 by default, 5 mm each). Needs the optional extra
``pip install ".[robots]"``. Run: femcontact run scenes/panda_cable_winding.py --out out/panda_cable_winding
"""
import numpy as np

import femcontact as fc

R_DRUM, H_DRUM = 0.03, 0.05                # cylinder radius and height (m): its top stays under the hand
AXIS = np.array([0.55, 0.0])               # x, y of the cylinder's axis
R_CABLE, LENGTH, E_CABLE = 0.004, 0.25, 2.954e6
R_WIND = R_DRUM + R_CABLE                  # radius of the cable's centre line on the cylinder
FREE_END = 0.05                            # free length left between cylinder and hand at the end (m)
HAND_HEIGHT = 0.03                         # tool point's start height (m)
PITCH = 2.5 * R_CABLE                      # rise per turn (m)
SPEED, T_RAMP = 0.25, 0.5                  # tool point speed along its path (m/s), reached after T_RAMP s


def wound_angle(t: float) -> float:
    """Angle (rad) of cable wound onto the cylinder at time t: the tool point's path length S(t)
    along the involute is (L² − L_free²) / (2 R_WIND) with L_free = L − R_WIND θ."""
    s = SPEED * (t * t / (2 * T_RAMP) if t < T_RAMP else t - T_RAMP / 2)
    free = np.sqrt(max(LENGTH**2 - 2 * R_WIND * s, FREE_END**2))
    return (LENGTH - free) / R_WIND


def tool_path(t: float) -> np.ndarray:
    """Tool point (m): the end of the taut free part, tangent to the cylinder where the cable
    leaves it (counter-clockwise from +x seen from above), raised by the pitch."""
    a = wound_angle(t)
    free = LENGTH - R_WIND * a
    p = AXIS + R_WIND * np.array([np.cos(a), np.sin(a)]) + free * np.array([-np.sin(a), np.cos(a)])
    return np.array([p[0], p[1], HAND_HEIGHT + PITCH * a / (2 * np.pi)])


def end_effector_force(sim) -> np.ndarray:
    """Force (N, world) the cable pulls the hand with now: its last segment's axial force
    ``E A (l / l0 − 1)`` along the segment, toward the cable."""
    points = sim.scene.body("cable").points                  # the rod's nodes as built
    x = sim.body_positions("cable")[:len(points)]             # (its orientation blocks follow the nodes)
    d = x[-2] - x[-1]
    length = float(np.linalg.norm(d))
    rest = float(np.linalg.norm(points[-2] - points[-1]))
    return E_CABLE * np.pi * R_CABLE**2 * (length / rest - 1.0) * d / length


def duration_needed() -> float:
    """Time (s) the tool point takes to wind the cable down to FREE_END."""
    return (LENGTH**2 - FREE_END**2) / (2 * R_WIND * SPEED) + T_RAMP / 2


def build(segments: int = 50, solver: str = "lagged", integrator: str = "euler", dt: float = 1e-2,
          duration: float = None) -> fc.Scene:
    duration = duration_needed() + 0.3 if duration is None else duration
    probe = fc.Scene().add_robot("panda")            # the grasp pose by differential IK from "ready"
    fk = probe.forward_kinematics()["panda_hand_tcp"]
    start, R_down = fk[:3, 3], fk[:3, :3]
    grasp = tool_path(0.0)
    approach = probe.cartesian_path("panda_hand_tcp", lambda t: (start + min(t, 1.0) * (grasp - start), R_down),
                                    duration=1.0, step=0.01)
    q_grasp = approach.q[-1].copy()
    q_grasp[-1] = 0.0                                # fingers closed on the cable

    scene = fc.Scene(dt=dt, duration=duration, frame_dt=0.05, solver=solver, integrator=integrator,
                     name="panda_cable_winding")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=1.3, name="ground")
    scene.add_obstacle(fc.shapes.Cylinder(radius=R_DRUM, half_length=H_DRUM / 2),
                       position=(*AXIS, H_DRUM / 2), friction=1.3, name="cylinder")
    # the cable: from the cylinder's foot along +y on the floor, rising to the hand over its last 4 cm
    tail = np.array([AXIS[0] + R_WIND, AXIS[1], R_CABLE])
    pts = fc.meshes.rod_straight(tail, tail + np.array([0.0, LENGTH, 0.0]), segments)
    rise = np.clip((pts[:, 1] - (LENGTH - 0.04)) / 0.04, 0.0, 1.0)
    pts[:, 2] = R_CABLE + rise * (grasp[2] - R_CABLE)
    seg = np.diff(pts, axis=0)                       # equal segments, the last node at the tool point
    pts = np.vstack([pts[:1], pts[0] + np.cumsum(seg / np.linalg.norm(seg, axis=1)[:, None], axis=0)
                     * (LENGTH / segments)])
    pts += (grasp - pts[-1]) * np.linspace(0.0, 1.0, len(pts))[:, None]
    cable = scene.add_rod(pts, R_CABLE, material=fc.Material(E_CABLE, 0.49, 1200.0, rayleigh_alpha=1.0),
                          rest_shape="straight", name="cable")
    robot = scene.add_robot("panda", joint_positions=q_grasp)
    for body in robot.end_effector_bodies:
        scene.set_contact(body, cable.name, enabled=False)
    scene.attach(cable.name, "start")                                    # the tail, fixed at the cylinder
    scene.attach(cable.name, "end", to=robot.link_body["panda_hand_tcp"][0])
    wind = robot.cartesian_path("panda_hand_tcp", lambda t: (tool_path(t), R_down), duration=duration,
                                q_start=q_grasp, step=0.01)
    robot.set_trajectory(scene, wind)
    scene.panda = robot
    scene.wind_path = wind
    return scene


if __name__ == "__main__":
    from pathlib import Path

    out = Path("out/panda_cable_winding")
    scene = build()
    sim = fc.Simulator(scene)
    rows = ["time,force_x,force_y,force_z,force"]
    for _ in range(round(scene.duration / scene.dt)):
        sim.step()
        f = end_effector_force(sim)
        rows.append(",".join(repr(float(v)) for v in (sim.state.time, *f, np.linalg.norm(f))))
    out.mkdir(parents=True, exist_ok=True)
    (out / "end_effector_force.csv").write_text("\n".join(rows) + "\n")
    print(f"{out / 'end_effector_force.csv'}: {len(rows) - 1} rows")

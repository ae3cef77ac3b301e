"""Robot output (issue 17 item 6): ``<robot>_joints.csv`` beside the ``.pvd`` and the links in the series.

Known answers: a saturating PD step of a one-joint robot against the ODE ``I q̈ = clip(kp (q* − q) −
kd q̇, ±effort)`` and its torque column against that law; a cube resting on a drive-held paddle (the
paddle's contact force is the cube's weight, the joint torque the static moment of both weights);
capped gravity compensation (the capped torque and the fall it allows); a resumed run's CSV equal to
an uninterrupted run's; the written link meshes at the forward kinematics of the measured joints.
"""
import csv
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import femcontact as fc

pytest.importorskip("yourdfpy")                 # the optional extra femcontact[robots]; CI installs it
from femcontact.io.vtk import read_series  # noqa: E402
from tests.helpers.scenes_util import needs_panda  # noqa: E402

G = 9.81
ARM = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base">
    <inertial><mass value="1"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
    <collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>
  </link>
  <link name="paddle">
    <inertial><origin xyz="{com}"/><mass value="{m}"/>
      <inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
    <collision><origin xyz="{d} 0 0"/><geometry><box size="{length} 0.1 0.02"/></geometry></collision>
  </link>
  <joint name="hinge" type="revolute">
    <origin xyz="0 0 {h}"/><parent link="base"/><child link="paddle"/><axis xyz="{axis}"/>
    <limit effort="{effort}" lower="-3" upper="3" velocity="5"/>
  </joint>
</robot>
"""


def _arm(tmp_path, d=0.2, m=1.0, axis="0 0 1", effort=100.0, h=1.0, com=None):
    """A base and a paddle (box 2d long from the hinge along x, centre of mass at ``com``, default its
    centre) on a revolute joint at height h."""
    path = tmp_path / "arm.urdf"
    path.write_text(ARM.format(d=d, m=m, length=2 * d, axis=axis, effort=effort, h=h, com=com or f"{d} 0 0"))
    return str(path)


def _csv(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], float)


def test_joint_csv_follows_a_saturating_pd_step_and_its_torque_law(tmp_path):
    """Vertical axis (no gravity torque), default gains, effort limit 1 N m: a 0.3 rad step saturates
    the drive for its first 50 ms. The CSV's angle follows the ODE within 1 % of the step, its rate the angle's
    slope, its torque the capped PD law at the row's state; t = 0 has no step yet (nan)."""
    dt, step, effort, tau = 2e-3, 0.3, 1.0, 0.05
    scene = fc.Scene(dt=dt, integrator="euler")     # the step's force is then the law at its end state
    robot = scene.add_robot(_arm(tmp_path, effort=effort), drive_time_constant=tau)
    sim = fc.Simulator(scene)
    robot.set_targets(sim.control, [step])
    seen = {}
    sim.run(duration=0.2, out=tmp_path / "out", every=4,
            callback=lambda s: seen.__setitem__(round(s.state.time / dt), robot.joint_positions(s)[0]))
    header, rows = _csv(tmp_path / "out" / "arm_joints.csv")
    assert header == ["time", "hinge.position", "hinge.velocity", "hinge.torque", *(f"links_force_{c}" for c in "xyz")]
    t, q, qd, tq = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    pvd_times = [time for time, _ in read_series(tmp_path / "out" / "run.pvd")]
    np.testing.assert_array_equal(t, pvd_times)                     # one row per frame, the frame's time
    np.testing.assert_array_equal(q[1:], [seen[round(x / dt)] for x in t[1:]])  # the simulator's own state
    assert math.isnan(tq[0]) and np.all(np.isfinite(tq[1:])) and np.all(rows[:, 4:] == 0.0)
    drive = scene.joints[0].drive
    inertia = drive.kp * tau**2                                     # default gains: kp = I / tau^2

    def rhs(_, y):
        return [y[1], float(np.clip(drive.kp * (step - y[0]) - drive.kd * y[1], -effort, effort)) / inertia]

    ode = solve_ivp(rhs, (0, t[-1]), [0.0, 0.0], t_eval=t, rtol=1e-10, atol=1e-12, max_step=1e-3).y
    assert np.abs(q - ode[0]).max() < 0.01 * step
    slope = np.gradient(q, t)
    assert np.abs(qd - slope)[2:-2].max() < 0.03 * np.abs(qd).max()
    law = drive.kp * (step - q) - drive.kd * qd
    saturated, free = np.abs(law) > 1.2 * effort, np.abs(law) < 0.8 * effort
    assert saturated[1:].sum() >= 3 and free.sum() >= 8
    np.testing.assert_array_equal(tq[saturated & (t > 0)], effort * np.sign(law[saturated & (t > 0)]))
    assert np.abs(tq - law)[free & (t > 0)].max() < 1e-3 * effort
    print(f"saturating PD step: angle within {np.abs(q - ode[0]).max():.2e} rad of the ODE, "
          f"torque within {np.abs(tq - law)[free & (t > 0)].max():.2e} N m of the law")


def test_a_cube_on_a_held_paddle_gives_its_weight_and_the_static_torque(tmp_path):
    """A 0.5 kg cube settles on a horizontal paddle (1 kg, centre 0.2 m out; hinge about y held by a
    stiff drive with gravity compensation). After 0.5 s the paddle's (end effector's) contact force
    is the cube's weight and the joint torque balances both weights' moments about the hinge."""
    dt, m_p, d, m_c = 1e-2, 1.0, 0.2, 0.5
    scene = fc.Scene(solver="cond", dt=dt)
    scene.add_robot(_arm(tmp_path, d=d, m=m_p, axis="0 1 0"), kp=3000.0, kd=60.0, end_effector="paddle")
    cube = scene.add_rigid_body(fc.shapes.Box([0.025] * 3), mass=m_c, position=(0.3, 0.0, 1.0 + 0.01 + 0.0255),
                                name="cube")
    sim = fc.Simulator(scene)
    sim.run(duration=0.5, out=tmp_path / "out", every=25)
    header, rows = _csv(tmp_path / "out" / "arm_joints.csv")
    assert header[-3:] == ["ee_force_x", "ee_force_y", "ee_force_z"]
    last = rows[-1]
    force, torque = last[-3:], last[3]
    np.testing.assert_allclose(force, [0.0, 0.0, -m_c * G], atol=0.01 * m_c * G)
    x_cube = sim.rigid_pose(cube.name)[0][0]
    # about +y: gravity at x > 0 turns the paddle down (+y); the drive holds it with −g Σ m x
    expected = -G * (m_p * d + m_c * x_cube)
    assert torque == pytest.approx(expected, rel=0.01)
    assert abs(last[1]) < 2e-3                                      # the paddle stays level
    print(f"paddle: contact force {force} N (weight {m_c * G:.4f} N), torque {torque:.4f} N m "
          f"(static {expected:.4f} N m)")
    # femcontact.read attributes the series' contacts to the same bodies: the robot's (all its links)
    # and the cube's forces per frame are the CSV's end-effector force and its opposite
    res = fc.read(tmp_path / "out")
    ee = np.array([r[-3:] for r in rows])
    np.testing.assert_allclose(res.contact_force("arm"), ee, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.contact_force("cube"), -ee, rtol=1e-9, atol=1e-12)


def test_gravity_compensation_is_capped_at_the_effort_limit(tmp_path):
    """A pendulum at 0.6 rad whose compensation needs m g d sin 0.6 = 2.77 N m but whose effort limit
    is 1 N m: the actuator gives exactly 1 N m and the pendulum starts to fall at
    (1 − m g d sin q0) / I_pivot (within 2 % after 0.05 s)."""
    dt, d, m, q0, effort = 1e-3, 0.5, 1.0, 0.6, 1.0
    scene = fc.Scene(dt=dt)
    robot = scene.add_robot(_arm(tmp_path, m=m, axis="0 1 0", effort=effort, com=f"0 0 -{d}"), joint_positions=[q0],
                            kp=0.0, kd=0.0, gravity_compensation=True)
    sim = fc.Simulator(scene)
    sim.run(duration=0.05, out=tmp_path / "out", every=10)
    _, rows = _csv(tmp_path / "out" / "arm_joints.csv")
    needed = m * G * d * np.sin(rows[1:, 1])
    assert np.all(needed > 2 * effort)
    np.testing.assert_array_equal(rows[1:, 3], effort)              # capped, as applied
    alpha = (effort - m * G * d * np.sin(q0)) / (1e-3 + m * d * d)
    t = sim.state.time
    assert robot.joint_positions(sim)[0] - q0 == pytest.approx(0.5 * alpha * t * t, rel=0.02)


def test_resumed_run_keeps_its_csv_consistent_with_the_pvd(tmp_path):
    """Killed after frame 10 with its last checkpoint at step 8 (and a torn row at the end): the resumed
    run drops the rows after t(8) and rewrites them; the CSV then equals the uninterrupted run's."""
    dt = 1e-2

    def build():
        scene = fc.Scene(dt=dt)
        robot = scene.add_robot(_arm(tmp_path, axis="0 1 0"), joint_positions=[0.4], gravity_compensation=False)
        return scene, robot

    scene, robot = build()
    sim = fc.Simulator(scene)
    robot.set_targets(sim.control, [0.0])       # not the build pose: the resumed drive is commanded again
    sim.run(steps=12, out=tmp_path / "whole", every=2)
    scene, robot = build()
    sim = fc.Simulator(scene)
    robot.set_targets(sim.control, [0.0])
    ckpt = tmp_path / "at8.npz"
    sim.run(steps=10, out=tmp_path / "part", every=2,
            callback=lambda s: s.save_checkpoint(ckpt) if s.state.step == 8 else None)
    part = tmp_path / "part" / "arm_joints.csv"
    with open(part, "a") as f:
        f.write("0.11,0.0")                     # a row torn by the kill
    scene, robot = build()
    sim = fc.Simulator(scene)
    robot.set_targets(sim.control, [0.0])
    sim.load_checkpoint(ckpt)
    sim.run(steps=4, out=tmp_path / "part", every=2, append=True)
    (h1, whole), (h2, resumed) = _csv(tmp_path / "whole" / "arm_joints.csv"), _csv(part)
    assert h1 == h2 and len(resumed) == len(whole) == 7
    np.testing.assert_array_equal(resumed[:, 0], [time for time, _ in read_series(tmp_path / "part" / "run.pvd")])
    np.testing.assert_allclose(resumed, whole, rtol=1e-9, atol=1e-12)


@needs_panda
def test_panda_links_are_written_in_their_pose_and_its_fingers_feel_nothing_in_free_air(tmp_path):
    """Every Panda link with geometry is a piece ``panda/<link>`` whose points are the link's mesh at
    the forward kinematics of the measured joint positions; holding its pose in free air, the hand
    and fingers report zero contact force."""
    scene = fc.Scene(solver="cond", dt=1e-2)
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    q = np.array(fc.robots.PANDA_READY) + [0.3, 0.1, -0.2, 0.2, 0.4, -0.3, 0.5, -0.01]
    robot = scene.add_robot("panda", joint_positions=q)
    sim = fc.Simulator(scene)
    sim.run(steps=3, out=tmp_path / "out", every=1)
    time, pieces = read_series(tmp_path / "out" / "run.pvd")[-1]
    fk = robot.forward_kinematics(robot.joint_positions(sim))
    meshes = robot.link_meshes()
    assert len(meshes) == 11 and {f"panda/{link}" for link in meshes} <= set(pieces)
    for link, (v, f, source) in meshes.items():
        T = fk[link]
        np.testing.assert_allclose(np.asarray(pieces[f"panda/{link}"].points), v @ T[:3, :3].T + T[:3, 3], atol=1e-5)
        assert pieces[f"panda/{link}"].n_cells == len(f) and source == "collision"
    _, rows = _csv(tmp_path / "out" / "panda_joints.csv")
    assert rows.shape == (4, 1 + 3 * 9 + 3) and np.all(rows[:, -3:] == 0.0)
    np.testing.assert_allclose(rows[-1, 1:-3:3], [robot.joint_position(sim, j) for j in robot.all_joints])

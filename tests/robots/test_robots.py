"""URDF robots (issue 17 items 1-3): import, joint-space control, articulation accuracy, bad input.

Known answers: a one-link URDF pendulum's period, the Panda's forward kinematics against
yourdfpy's own, the Panda holding its pose under gravity at the fingertips, a critically damped
PD step response, a mimic finger following its leader, gravity compensation balancing a
pendulum."""
import time
import warnings

import numpy as np
import pytest

import femcontact as fc
from femcontact.robots import PANDA_READY
from tests.helpers.oscillation import measured_period
from tests.helpers.scenes_util import load_scene, needs_panda

yourdfpy = pytest.importorskip("yourdfpy")      # the optional extra femcontact[robots]; CI installs it

G = 9.81
TIP = np.array([0.0, 0.0076, 0.045, 1.0])      # rubber tip of a Panda finger, its link frame
FINGERS = ("panda_leftfinger", "panda_rightfinger")

PENDULUM = """<?xml version="1.0"?>
<robot name="pendulum">
  <link name="base">
    <inertial><mass value="1"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>
    <collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>
  </link>
  <link name="bob">
    <inertial><origin xyz="0 0 -{d}"/><mass value="{m}"/>
      <inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/></inertial>
    <collision><origin xyz="0 0 -{d}"/><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
  <joint name="{jname}" type="{jtype}">
    <origin xyz="0 0 1"/><parent link="base"/><child link="bob"/><axis xyz="0 1 0"/>
    <limit effort="100" lower="-3" upper="3" velocity="5"/>
  </joint>
  {extra}
</robot>
"""


def _write(tmp_path, text: str, name: str = "robot.urdf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _pendulum(tmp_path, d=0.5, m=1.0, i=1e-3, jtype="revolute", extra="", jname="hinge"):
    return _write(tmp_path, PENDULUM.format(d=d, m=m, i=i, jtype=jtype, extra=extra, jname=jname))


def _tips(robot, sim=None):
    if sim is None:
        fk = robot.forward_kinematics()
        return np.array([(fk[link] @ TIP)[:3] for link in FINGERS])
    return np.array([(robot.link_pose(sim, link) @ TIP)[:3] for link in FINGERS])


# ---------------------------------------------------------------------------------------------- import
def test_urdf_pendulum_swings_at_its_analytic_period(tmp_path):
    """One revolute link, no drive gains, no compensation: T = 2 pi sqrt(I_pivot / (m g d)) within 1%."""
    d, m, i = 0.5, 1.0, 1e-3
    scene = fc.Scene(dt=1e-2, name="urdf_pendulum")
    robot = scene.add_robot(_pendulum(tmp_path, d, m, i), joint_positions=[0.05], kp=0.0, kd=0.0,
                            gravity_compensation=False)
    assert robot.joints == ["hinge"] and robot.bodies == ["pendulum.base", "pendulum.bob"]
    sim = fc.Simulator(scene)
    T = 2 * np.pi * np.sqrt((i + m * d * d) / (m * G * d))
    assert measured_period(sim, "pendulum.bob", 2.2 * T) == pytest.approx(T, rel=0.01)
    assert abs(robot.joint_positions(sim)[0]) < 0.06


@needs_panda
def test_panda_loads_fast_and_matches_yourdfpy_forward_kinematics():
    scene = fc.Scene(dt=1e-2)
    t0 = time.perf_counter()
    fc.Scene().add_robot("panda")                          # a first load fills the SDF cache
    cold = time.perf_counter() - t0
    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    q = np.array(PANDA_READY) + rng.uniform(-0.3, 0.3, 8) * [1, 1, 1, 1, 1, 1, 1, 0.05]
    robot = scene.add_robot("panda", joint_positions=q, base_pose=((0.1, -0.2, 0.3), np.eye(3)))
    load = time.perf_counter() - t0
    print(f"Panda load: {cold:.2f} s (first), {load:.2f} s (cached SDFs)")
    assert load < 2.0
    assert len(robot.joints) == 8 and len(robot.bodies) == 10       # link8, hand, tcp merged into link7
    ref = yourdfpy.URDF.load(str(robot.urdf_path), load_meshes=False, build_collision_scene_graph=False)
    ref.update_cfg({j: v for j, v in zip(robot.joints, q)} | {"panda_finger_joint2": q[7]})
    fk = robot.forward_kinematics(q)
    for link, (body, T_bl) in robot.link_body.items():
        T_ref = ref.get_transform(link, ref.base_link)
        assert np.abs(np.linalg.inv(robot.base_pose) @ fk[link] - T_ref).max() < 1e-9, link
        spec = scene.body(body)
        T_body = np.eye(4)
        T_body[:3, :3], T_body[:3, 3] = spec.rotation, spec.position
        assert np.abs(T_body @ T_bl - fk[link]).max() < 1e-9, link      # the bodies sit where FK puts them
    # mass properties: the merged link7 body carries link7 and the hand, about their common centre
    urdf = {link.name: link for link in ref.robot.links}
    assert scene.body("panda.panda_link7").mass == pytest.approx(urdf["panda_link7"].inertial.mass + 0.73)
    assert scene.body("panda.panda_link1").mass == pytest.approx(urdf["panda_link1"].inertial.mass)
    j2 = scene.joints[[j.name for j in scene.joints].index("panda.panda_finger_joint2")]
    assert j2.mimic.leader == "panda.panda_finger_joint1" and j2.drive is None
    assert scene.joints[0].limits == (-2.8973, 2.8973) and scene.joints[0].drive.max_force == 87.0


def test_robot_self_contact_is_off_and_package_paths_resolve(tmp_path):
    pkg = tmp_path / "my_pkg"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf").mkdir()
    import trimesh
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(str(pkg / "meshes" / "cube.stl"))
    mesh = '<collision><geometry><mesh filename="package://my_pkg/meshes/cube.stl"/></geometry></collision>'
    text = PENDULUM.format(d=0.5, m=1.0, i=1e-3, jtype="continuous", extra="", jname="hinge").replace(
        '<collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>', mesh)
    scene = fc.Scene()
    robot = scene.add_robot(_write(pkg / "urdf", text))
    assert isinstance(scene.body("pendulum.base").shape, fc.shapes.TriangleMesh)
    assert scene.joints[0].limits is None                                # continuous: no limits
    assert [(p.a, p.b, p.enabled) for p in scene.contact_pairs] == [(*robot.bodies, False)]


def test_a_first_load_samples_the_mesh_sdf_in_the_background_and_caches_it(tmp_path, monkeypatch):
    """With an empty SDF cache, add_robot returns before the grid is sampled; the grid then read is the
    one TriangleMesh samples itself (bit for bit), it is cached, and a second load reads it back."""
    monkeypatch.setenv("FEMCONTACT_CACHE_DIR", str(tmp_path / "cache"))
    pkg = tmp_path / "my_pkg"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf").mkdir()
    import trimesh
    trimesh.creation.icosphere(subdivisions=2, radius=0.05).export(str(pkg / "meshes" / "ball.stl"))
    mesh = '<collision><geometry><mesh filename="package://my_pkg/meshes/ball.stl"/></geometry></collision>'
    text = PENDULUM.format(d=0.5, m=1.0, i=1e-3, jtype="revolute", extra="", jname="hinge").replace(
        '<collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>', mesh)
    path = _write(pkg / "urdf", text)
    scene = fc.Scene()
    scene.add_robot(path)
    shape = scene.body("pendulum.base").shape
    ref = fc.shapes.TriangleMesh(shape.vertices, shape.faces, resolution=24)
    np.testing.assert_array_equal(shape.grid, ref.grid)
    assert list((tmp_path / "cache" / "geometry").glob("sdf-*.npz"))       # under the kernel cache root
    again = fc.Scene()
    again.add_robot(path)
    np.testing.assert_array_equal(again.body("pendulum.base").shape.grid, ref.grid)


# ---------------------------------------------------------------------------------------------- control
def test_gravity_compensation_and_a_joint_effort_hold_a_pendulum_off_vertical(tmp_path):
    """No drive gains: compensation alone holds the pendulum at 0.6 rad; without it, a constant
    effort m g d sin(0.6) does the same; with neither it falls."""
    d, m, q0 = 0.5, 1.0, 0.6
    path = _pendulum(tmp_path, d, m)

    def run(comp: bool, effort: float) -> float:
        scene = fc.Scene(dt=1e-2)
        robot = scene.add_robot(path, joint_positions=[q0], kp=0.0, kd=0.0, gravity_compensation=comp)
        sim = fc.Simulator(scene)
        if effort:
            sim.control.set_joint_effort("pendulum.hinge", effort)
        sim.run(duration=0.5, progress=False)
        return robot.joint_positions(sim)[0] - q0

    assert abs(run(True, 0.0)) < 1e-4
    assert abs(run(False, m * G * d * np.sin(q0))) < 1e-4
    assert run(False, 0.0) < -0.05


def test_pd_step_response_is_critically_damped_at_the_drive_time_constant(tmp_path):
    """Default gains: kp = I/tau^2, kd = 2 I/tau for the inertia the joint carries; a step of the
    target gives s(t) = step (1 - (1 + t/tau) e^(-t/tau)) (no gravity: the axis is vertical)."""
    tau, step, dt = 0.05, 0.2, 2e-3
    text = PENDULUM.format(d=0.3, m=2.0, i=1e-3, jtype="revolute", extra="", jname="hinge").replace(
        '<axis xyz="0 1 0"/>', '<axis xyz="0 0 1"/>').replace('xyz="0 0 -0.3"', 'xyz="0.3 0 0"')
    scene = fc.Scene(dt=dt)
    robot = scene.add_robot(_write(tmp_path, text), drive_time_constant=tau)
    sim = fc.Simulator(scene)
    robot.set_targets(sim.control, [step])                   # through Control, not the spec
    ts, qs = [], []
    for _ in range(int(0.3 / dt)):
        sim.step()
        ts.append(sim.state.time)
        qs.append(robot.joint_positions(sim)[0])
    ts, qs = np.array(ts), np.array(qs)
    expected = step * (1 - (1 + ts / tau) * np.exp(-ts / tau))
    assert np.abs(qs - expected).max() < 0.02 * step
    assert scene.joints[0].drive.target == 0.0                # the spec is untouched
    # measured time constant: the time to reach 1 - 2/e of the step is tau
    t_tau = np.interp(1 - 2 / np.e, qs / step, ts)
    print(f"1-DOF step: time constant {t_tau:.4f} s (drive {tau} s), worst deviation "
          f"{np.abs(qs - expected).max() / step:.3g} of the step")
    assert t_tau == pytest.approx(tau, rel=0.03)


def test_a_continuous_joint_reaches_a_target_beyond_pi_and_keeps_its_turns_in_a_checkpoint(tmp_path):
    """A continuous joint about a vertical axis driven to 4 rad (> π) settles there: the angle is
    unwrapped (not wrapped to 4 − 2π, where the drive would push forever), the bob sits at azimuth
    4 rad, and a checkpoint carries the turn so a loaded run reads and holds 4 rad."""
    d, target = 0.3, 4.0
    text = PENDULUM.format(d=d, m=2.0, i=1e-3, jtype="continuous", extra="", jname="hinge").replace(
        '<axis xyz="0 1 0"/>', '<axis xyz="0 0 1"/>').replace(f'xyz="0 0 -{d}"', f'xyz="{d} 0 0"')
    path = _write(tmp_path, text)

    def make():
        scene = fc.Scene(dt=1e-2)
        robot = scene.add_robot(path)
        sim = fc.Simulator(scene)
        robot.set_targets(sim.control, [target])
        return robot, sim

    robot, sim = make()
    sim.run(duration=0.7, progress=False)
    assert robot.joint_positions(sim)[0] == pytest.approx(target, abs=2e-3)
    c = sim.rigid_pose("pendulum.bob")[0]
    assert np.arctan2(c[1], c[0]) + 2 * np.pi == pytest.approx(target, abs=2e-3)     # the bob turned 4 rad
    assert np.hypot(c[0], c[1]) == pytest.approx(d, rel=5e-3)
    sim.save_checkpoint(tmp_path / "c.npz")
    robot2, sim2 = make()
    sim2.load_checkpoint(tmp_path / "c.npz")
    assert robot2.joint_positions(sim2)[0] == pytest.approx(target, abs=2e-3)
    for _ in range(10):                                   # holds there (wrapped, the drive would spin it)
        sim2.step()
        assert robot2.joint_positions(sim2)[0] == pytest.approx(target, abs=2e-3)


@needs_panda
def test_panda_mimic_finger_follows_its_leader():
    scene = fc.Scene(dt=1e-2)
    robot = scene.add_robot("panda")
    sim = fc.Simulator(scene)
    sim.control.set_joint_drive("panda.panda_finger_joint1", target=0.01)
    worst = 0.0
    for _ in range(30):
        sim.step()
        worst = max(worst, abs(robot.joint_position(sim, "panda_finger_joint2")
                               - robot.joint_position(sim, "panda_finger_joint1")))
    assert robot.joint_position(sim, "panda_finger_joint1") == pytest.approx(0.01, abs=1e-3)
    print(f"mimic error {worst:.3g} m")
    assert worst < 1e-6


@needs_panda
@pytest.mark.slow
@pytest.mark.sample
def test_panda_holds_its_pose_under_gravity_for_5_s():
    """scenes/panda_hold.py: gravity compensation, targets at the start pose; the fingertips stay
    within 0.1 mm of the forward kinematics for 5 s (issue 17)."""
    scene = load_scene("panda_hold").build()
    robot = scene.panda
    sim = fc.Simulator(scene)
    ref = _tips(robot)
    worst = 0.0
    for _ in range(500):
        sim.step()
        worst = max(worst, float(np.linalg.norm(_tips(robot, sim) - ref, axis=1).max()))
    print(f"fingertip error over 5 s: {worst:.3g} m")
    assert worst < 1e-4


@needs_panda
def test_without_gravity_compensation_the_panda_sags():
    scene = fc.Scene(dt=1e-2)
    robot = scene.add_robot("panda", gravity_compensation=False)
    sim = fc.Simulator(scene)
    ref = _tips(robot)
    sim.run(steps=20, progress=False)
    assert np.linalg.norm(_tips(robot, sim) - ref, axis=1).max() > 1e-3


# ---------------------------------------------------------------------------------------------- bad input
def test_missing_urdf_file_is_named():
    with pytest.raises(fc.ParameterError, match="not found"):
        fc.Scene().add_robot("/nonexistent/robot.urdf")


def test_missing_mesh_file_is_named(tmp_path):
    text = PENDULUM.format(d=0.5, m=1.0, i=1e-3, jtype="revolute", extra="", jname="hinge").replace(
        '<box size="0.05 0.05 0.05"/>', '<mesh filename="package://nopkg/missing.stl"/>')
    with pytest.raises(fc.ParameterError, match="missing.stl"):
        fc.Scene().add_robot(_write(tmp_path, text))


def test_unsupported_joint_type_is_named(tmp_path):
    with pytest.raises(fc.ParameterError, match="'hinge'.*'planar'"):
        fc.Scene().add_robot(_pendulum(tmp_path, jtype="planar"))


@pytest.mark.parametrize("m, i, match", [(1.0, 0.0, "positive definite"), (1.0, -1e-3, "positive definite"),
                                         (0.0, 0.0, "zero mass")])
def test_bad_link_inertia_is_refused(tmp_path, m, i, match):
    with pytest.raises(fc.ParameterError, match=match):
        fc.Scene().add_robot(_pendulum(tmp_path, m=m, i=i))


def test_mimic_of_a_missing_joint_is_named(tmp_path):
    extra = """<link name="bob2"><inertial><mass value="1"/>
      <inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial></link>
      <joint name="follower" type="revolute"><parent link="base"/><child link="bob2"/><axis xyz="1 0 0"/>
      <limit effort="1" lower="-1" upper="1" velocity="1"/><mimic joint="ghost"/></joint>"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # bob2 has no collision geometry
        with pytest.raises(fc.ParameterError, match="'follower' mimics 'ghost'"):
            fc.Scene().add_robot(_pendulum(tmp_path, extra=extra))


def test_start_outside_the_limits_and_a_link_without_collision_geometry(tmp_path):
    with pytest.raises(fc.ParameterError, match="outside its limits"):
        fc.Scene().add_robot(_pendulum(tmp_path), joint_positions=[3.5])
    text = PENDULUM.format(d=0.5, m=1.0, i=1e-3, jtype="revolute", extra="", jname="hinge").replace(
        '<collision><origin xyz="0 0 -0.5"/><geometry><sphere radius="0.03"/></geometry></collision>', "")
    with pytest.warns(UserWarning, match="'bob' has no collision geometry"):
        fc.Scene().add_robot(_write(tmp_path, text))


@needs_panda
def test_panda_joint_step_settles_at_the_drive_time_constant():
    """A 0.1 rad step of joint 1's target: the joint reaches 1 - 2/e of it after about tau (the
    other joints' drives hold them; the arm's coupling makes it a few per cent off the 1-DOF curve)."""
    tau, step, dt = 0.05, 0.1, 5e-3
    scene = fc.Scene(dt=dt)
    robot = scene.add_robot("panda", drive_time_constant=tau)
    sim = fc.Simulator(scene)
    q0 = np.array([robot.q0[j] for j in robot.joints])
    robot.set_targets(sim.control, q0 + step * np.eye(8)[0])
    ts, qs = [], []
    for _ in range(int(0.3 / dt)):
        sim.step()
        ts.append(sim.state.time)
        qs.append(robot.joint_positions(sim)[0] - q0[0])
    ts, qs = np.array(ts), np.array(qs)
    t_tau = np.interp(1 - 2 / np.e, qs / step, ts)
    print(f"Panda joint 1 step: time constant {t_tau:.4f} s (drive {tau} s)")
    assert t_tau == pytest.approx(tau, rel=0.1)
    assert qs[-1] == pytest.approx(step, rel=0.02)
    assert np.abs(qs - step * (1 - (1 + ts / tau) * np.exp(-ts / tau))).max() < 0.05 * step


@needs_panda
def test_cartesian_path_by_differential_ik_is_followed_by_the_drives():
    """The hand's tool point moves 10 cm along x and down 5 cm, keeping its orientation, with a
    smooth start and stop: the joint path puts it on the line within 1e-6 m (kinematics), the
    driven arm tracks it within 5 mm while moving and ends within 0.1 mm of the goal."""
    scene = fc.Scene(dt=1e-2)
    robot = scene.add_robot("panda")
    fk = robot.forward_kinematics()
    start, R0 = fk["panda_hand_tcp"][:3, 3], fk["panda_hand_tcp"][:3, :3]
    goal = lambda t: start + np.array([0.1, 0.0, -0.05]) * (lambda u: 3 * u * u - 2 * u**3)(min(t, 1.0))
    path = robot.cartesian_path("panda_hand_tcp", lambda t: (goal(t), R0), duration=1.0)
    assert path.error < 1e-6
    sim = fc.Simulator(scene)
    robot.follow(sim.control, path)
    worst = 0.0
    for _ in range(150):
        sim.step()
        worst = max(worst, float(np.linalg.norm(robot.link_pose(sim, "panda_hand_tcp")[:3, 3] - goal(sim.state.time))))
    final = float(np.linalg.norm(robot.link_pose(sim, "panda_hand_tcp")[:3, 3] - goal(1.0)))
    print(f"Cartesian tracking: worst {worst:.3g} m, final {final:.3g} m")
    assert worst < 5e-3 and final < 1e-4


@needs_panda
@pytest.mark.slow
def test_panda_links_stay_on_their_kinematics_at_rated_joint_speeds():
    """Joints 1-7 swing 0.3 rad at their rated speeds (2.175 / 2.61 rad/s peak): the fingertips of
    the simulated links stay within 0.1 mm of the forward kinematics of the measured joint positions
    at dt = 2.5 ms (the error is second order in dt: 0.57 mm at 10 ms, 0.15 mm at 5 ms)."""
    dt, amp = 2.5e-3, 0.3
    scene = fc.Scene(dt=dt)
    robot = scene.add_robot("panda")
    sim = fc.Simulator(scene)
    q0 = np.array([robot.q0[j] for j in robot.joints])
    w = np.array([2.175] * 4 + [2.61] * 3) / amp
    robot.set_targets(sim.control,
                      {j: (lambda t, i=i: q0[i] + amp * np.sin(w[i] * t)) for i, j in enumerate(robot.joints[:7])},
                      {j: (lambda t, i=i: amp * w[i] * np.cos(w[i] * t)) for i, j in enumerate(robot.joints[:7])})
    worst = 0.0
    for _ in range(int(0.6 / dt)):
        sim.step()
        fk = robot.forward_kinematics(robot.joint_positions(sim))
        for link in FINGERS:
            worst = max(worst, float(np.linalg.norm(robot.link_pose(sim, link) @ TIP - fk[link] @ TIP)))
    print(f"articulation error at rated speeds: {worst:.3g} m")
    assert worst < 1e-4


def test_a_floating_base_robot_falls_freely_and_targets_go_through_control(tmp_path):
    """fixed_base=False: the base is a free body; the robot's centre of mass falls at g while the
    joint drive (commanded through Control.set_joint_targets) turns the bob."""
    scene = fc.Scene(dt=1e-2)
    robot = scene.add_robot(_pendulum(tmp_path), fixed_base=False, gravity_compensation=False)
    sim = fc.Simulator(scene)
    masses = [scene.body(b).mass for b in robot.bodies]
    com = lambda: sum(m * sim.rigid_pose(b)[0] for m, b in zip(masses, robot.bodies)) / sum(masses)
    c0 = com()
    sim.control.set_joint_targets({"pendulum.hinge": 0.2})
    sim.run(steps=20, progress=False)
    t = sim.state.time
    np.testing.assert_allclose(com(), c0 + [0, 0, -0.5 * G * t * t], atol=1e-6)
    assert robot.joint_positions(sim)[0] > 0.1
    with pytest.raises(fc.ParameterError, match="no joint named"):
        sim.control.set_joint_effort("pendulum.nope", 1.0)


def test_mesh_grids_nobody_can_touch_are_not_sampled(tmp_path):
    """The contact tables upload a mesh's SDF grid only if some body may touch it: a robot's links
    (their mutual contacts off) on a half-space never read theirs, so the Simulator does not wait
    for them; a body placed in contact with the link gets it."""
    import trimesh
    stl = tmp_path / "cube.stl"
    trimesh.creation.box(extents=(0.1, 0.1, 0.1)).export(str(stl))
    mesh = f'<collision><geometry><mesh filename="{stl}"/></geometry></collision>'
    text = PENDULUM.format(d=0.5, m=1.0, i=1e-3, jtype="continuous", extra="", jname="hinge").replace(
        '<collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>', mesh)
    path = _write(tmp_path, text)
    scene = fc.Scene(solver="cond")
    scene.add_robot(path, base_pose=((0, 0, 2.0), np.eye(3)))
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    sim = fc.Simulator(scene)
    assert sim.collision.tables.grid.shape[0] == 1                        # the empty placeholder only
    scene.add_rigid_body(fc.shapes.Sphere(0.02), density=100.0, position=(3.0, 0, 0.02), name="ball")
    sim = fc.Simulator(scene)
    grids = [b.shape.grid.size for b in scene.rigid_bodies if isinstance(b.shape, fc.shapes.TriangleMesh)]
    assert sim.collision.tables.grid.shape[0] == sum(grids) > 1

"""The COND paper's Franka Panda scenes (§V-D; issue 17, item 5) measured as numbers.

- scenes/panda_mat_fold.py (Fig. 7): the hand folds a soft mat over; at μ = 1.0 the half that stays
  on the floor does not slip, at μ = 0.1 it sticks, then slides toward the robot; the held edge
  follows the hand; nothing sinks into the floor; the run's energy check does not fire.
- scenes/panda_soft_ball.py (Fig. 9): the hand grips a soft ball and lifts it 10 cm; the ball
  rises with the hand, and while held the contact force on hand and fingers balances its weight.
- scenes/panda_cable_winding.py (Fig. 8): the hand lays a cable onto a cylinder; it wraps, and
  the end-effector force trace (the cable's pull on the hand) stays small and taut.

Each runs a robot with a soft body or a cable for 2 to 4 s of simulated time (200 to 400 steps
of 0.1 to 0.3 s on CPU, 30 to 70 s a test): slow tests.
"""

import numpy as np
import pytest

import femcontact as fc
from tests.helpers.scenes_util import HAVE_PANDA, load_scene

pytest.importorskip("yourdfpy")      # the optional extra femcontact[robots]; CI installs it
if not HAVE_PANDA:
    pytest.skip("example-robot-data (femcontact[robots]) not installed", allow_module_level=True)

G = 9.81


def _run_mat_fold(friction: float):
    """Run scenes/panda_mat_fold.py at ``friction``; per step: time, mean x-slip of the near edge
    (m), distance of the held edge from the hand (m, less its start offset), of the hand from the
    commanded path (m), lowest node height (m). Returns (arrays..., final mat positions, module)."""
    mod = load_scene("panda_mat_fold")
    scene = mod.build(friction=friction)
    sim = fc.Simulator(scene)               # energy_check on (default): a divergence raises
    robot = scene.panda
    x0 = sim.body_positions("mat").copy()
    near = np.flatnonzero(x0[:, 0] < mod.NEAR + 1e-6)
    held = np.flatnonzero((x0[:, 0] > mod.NEAR + mod.SIZE[0] - 1e-6) & (x0[:, 2] > mod.SIZE[2] - 1e-6))
    offset = x0[held].mean(0) - robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
    rows = []
    for _ in range(round(scene.duration / scene.dt)):
        sim.step()
        x = sim.body_positions("mat")
        tcp = robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
        rows.append((sim.state.time, float((x[near, 0] - x0[near, 0]).mean()),
                     float(np.linalg.norm(x[held].mean(0) - offset - tcp)),
                     float(np.linalg.norm(tcp - mod.tool_path(sim.state.time))), float(x[:, 2].min())))
    t, slip, edge, track, zmin = map(np.array, zip(*rows))
    own = int((sim.contacts.to_numpy()["node_a"] >= 0).sum())      # the mat's self-contacts at the end
    assert own > 10, f"the flap does not lie on the near half ({own} self-contacts)"
    return t, slip, edge, track, zmin, sim.body_positions("mat"), x0, mod


def _check_fold_kinematics(edge, track, zmin, x, x0, mod):
    assert edge.max() < 1e-3            # the held edge stays on the hand (glued; 0.43 mm measured)
    assert track.max() < 15e-3          # the drives lag the path at its fastest (10 mm measured)
    assert zmin.min() > -1e-3           # no node sinks 1 mm into the floor
    # the far half lies over the near half: the held edge ends above the near edge
    held = (x0[:, 0] > mod.NEAR + mod.SIZE[0] - 1e-6)
    assert x[held, 0].mean() < mod.NEAR + 0.05
    assert x[held, 2].min() > mod.SIZE[2] - 1e-3
    # the flap's face (the mat's top before the fold) lies on the near half, not in it
    flap = (x0[:, 0] > mod.NEAR + mod.SIZE[0] / 2 + 0.05) & (x0[:, 2] > mod.SIZE[2] - 1e-6)
    assert x[flap, 2].min() > mod.SIZE[2] - 1e-3


@pytest.mark.slow
def test_panda_mat_fold_high_friction_never_slips():
    """μ = 1.0 (COND Fig. 7b): the near edge on the floor slides less than 2 mm during the whole
    fold (0.2 mm measured at resolution 15)."""
    t, slip, edge, track, zmin, x, x0, mod = _run_mat_fold(1.0)
    print(f"mat fold μ=1.0: near-edge slip {1e3 * np.abs(slip).max():.2f} mm, held edge {1e3 * edge.max():.2f} mm "
          f"from the hand, hand {1e3 * track.max():.1f} mm from its path, lowest node {1e3 * zmin.min():.2f} mm")
    assert np.abs(slip).max() < 2e-3
    _check_fold_kinematics(edge, track, zmin, x, x0, mod)


@pytest.mark.slow
def test_panda_mat_fold_low_friction_sticks_then_slips():
    """μ = 0.1 (COND Fig. 7a): while the flap is lifted (first 0.6 s of the fold) the near edge
    creeps by less than 5 mm (2.6 mm measured), then it is dragged toward the robot: more than
    50 mm by the end of the fold (283 mm measured: the whole mat is dragged until it meets
    the robot's base)."""
    t, slip, edge, track, zmin, x, x0, mod = _run_mat_fold(0.1)
    early = t < mod.T_SETTLE + 0.6
    print(f"mat fold μ=0.1: near-edge slip {1e3 * np.abs(slip[early]).max():.2f} mm until t = "
          f"{mod.T_SETTLE + 0.6:.1f} s, {1e3 * slip[-1]:.1f} mm at the end; held edge {1e3 * edge.max():.2f} mm "
          f"from the hand, lowest node {1e3 * zmin.min():.2f} mm")
    assert np.abs(slip[early]).max() < 5e-3
    assert slip[-1] < -50e-3
    assert edge.max() < 1e-3 and zmin.min() > -1e-3


@pytest.mark.slow
def test_panda_soft_ball_is_lifted_and_its_weight_held():
    """From the closed grip on, the ball's centre rises with the hand's tool point (10 cm) within
    1 mm (0.20 mm measured) and creeps less than 0.2 mm over the hold (0.03 mm); over the hold the
    net contact force on hand and fingers is -m g within 3% in z (0.2% measured) and near zero
    across. (The hand itself rises 99 mm: gravity compensation does not know the payload.)"""
    mod = load_scene("panda_soft_ball")
    scene = mod.build()
    sim = fc.Simulator(scene)
    robot = scene.panda
    weight = scene.body("ball").mesh.volume() * mod.DENSITY * G
    tcp0 = robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
    t, rel, hold = [], [], []
    for _ in range(round(scene.duration / scene.dt)):
        sim.step()
        tcp = robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
        if sim.state.time >= mod.T_CLOSE - 1e-9:
            c = sim.body_positions("ball").mean(0)
            if not rel:
                c_close, tcp_close = c, tcp
            t.append(sim.state.time)
            rel.append(np.linalg.norm((c - c_close) - (tcp - tcp_close)))
        if sim.state.time > mod.T_LIFT + 0.2:
            forces = sim.rigid_contact_forces()
            hold.append(sum(forces[b] for b in robot.end_effector_bodies))
    rise = tcp[2] - tcp0[2]
    t, rel, hold = np.array(t), np.array(rel), np.array(hold)
    held = t > mod.T_LIFT + 0.2
    creep = rel[held].max() - rel[held].min()
    f = hold.mean(0)
    print(f"soft ball: hand rose {1e3 * rise:.1f} mm, ball centre {1e3 * (c[2] - c_close[2] + tcp_close[2] - tcp0[2]):.1f}"
          f" mm (worst lag {1e3 * rel.max():.2f} mm, creep while held {1e3 * creep:.3f} mm); contact force while held "
          f"{f.round(3)} N, weight {weight:.3f} N")
    assert rise == pytest.approx(mod.LIFT, abs=2e-3)
    assert rel.max() < 1e-3
    assert creep < 0.2e-3
    assert f[2] == pytest.approx(-weight, rel=0.03)
    assert np.hypot(f[0], f[1]) < 0.03 * weight


@pytest.mark.slow
def test_panda_cable_winding_wraps_the_cylinder_with_a_small_steady_pull():
    """scenes/panda_cable_winding.py (COND Fig. 8): the hand lays the cable along the involute;
    at the end the cable lies on the cylinder over at least 85% of the wound angle (5.9 rad), the
    tail stays fixed, the held end follows the hand, nothing sinks 1 mm into the floor, and the
    end-effector force trace (the cable's pull on the hand) stays taut and small: between 0.05 and
    1 N over the winding. Measured: 5.74 rad on the cylinder, hand 4.9 mm from its path, pull
    0.08 to 0.32 N (mean 0.24 N)."""
    mod = load_scene("panda_cable_winding")
    scene = mod.build()
    sim = fc.Simulator(scene)
    robot = scene.panda
    n = len(scene.body("cable").points)
    offset = sim.body_positions("cable")[n - 1] - robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
    rows = []
    for _ in range(round(scene.duration / scene.dt)):
        sim.step()
        x = sim.body_positions("cable")[:n]
        tcp = robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
        rows.append((sim.state.time, float(np.linalg.norm(tcp - mod.tool_path(sim.state.time))),
                     float(np.linalg.norm(x[-1] - offset - tcp)), float(x[:, 2].min() - mod.R_CABLE),
                     float(np.linalg.norm(mod.end_effector_force(sim)))))
    t, track, held, zmin, force = map(np.array, zip(*rows))
    radial = np.linalg.norm(x[:, :2] - mod.AXIS, axis=1)
    on = radial < mod.R_WIND + 1.5e-3
    angle = np.unwrap(np.arctan2(x[:, 1] - mod.AXIS[1], x[:, 0] - mod.AXIS[0]))
    wrap = float(angle[on].max() - angle[on].min())
    wound = mod.wound_angle(t[-1])
    winding = (t > mod.T_RAMP) & (t < mod.duration_needed())
    print(f"cable winding: {on.sum()} of {n} nodes on the cylinder over {wrap:.2f} rad (wound {wound:.2f} rad); "
          f"hand {1e3 * track.max():.1f} mm from its path, end {1e3 * held.max():.2f} mm from the hand, lowest "
          f"{1e3 * zmin.min():.2f} mm; pull on the hand {force[winding].min():.3f} to {force[winding].max():.3f} N, "
          f"mean {force[winding].mean():.3f} N")
    assert wrap > 0.85 * wound
    assert np.linalg.norm(x[0] - np.array([*mod.AXIS, 0.0]) - [mod.R_WIND, 0.0, mod.R_CABLE]) < 1e-3
    assert track.max() < 6e-3 and held.max() < 1e-3 and zmin.min() > -1e-3
    assert 0.05 < force[winding].min() and force[winding].max() < 1.0


@pytest.mark.slow
def test_panda_soft_ball_under_cond_still_carries_the_ball():
    """The same grip and the first 0.4 s of the lift under COND: from the closed grip on the ball's
    centre follows the tool point within 1 mm (0.07 mm measured; 9.3 mm risen) and rises with it.
    COND runs into its 500-iteration cap once the fingers squeeze the ball (68 of the 80 steps;
    0.4 to 1.4 s a step on a shared 2-core machine, the test 114 s), and
    its unconverged steps let the arm stray from its path (the tool point is 12 mm off by
    t = 0.8 s, 77 mm by t = 1.6 s, against 3 mm under "lagged"): why the scene's default is
    "lagged". Only the grip is checked here."""
    mod = load_scene("panda_soft_ball")
    scene = mod.build(solver="cond", duration=mod.T_CLOSE + 0.4)
    sim = fc.Simulator(scene)
    robot = scene.panda
    rel, iterations = [], []
    for _ in range(round(scene.duration / scene.dt)):
        iterations.append(sim.step().iterations)
        tcp = robot.link_pose(sim, "panda_hand_tcp")[:3, 3]
        if sim.state.time >= mod.T_CLOSE - 1e-9:
            c = sim.body_positions("ball").mean(0)
            if not rel:
                c_close, tcp_close = c, tcp
            rel.append(np.linalg.norm((c - c_close) - (tcp - tcp_close)))
    rise = c[2] - c_close[2]
    print(f"soft ball under COND: ball rose {1e3 * rise:.1f} mm with the hand (worst lag {1e3 * max(rel):.2f} mm); "
          f"iterations: {sum(i >= 500 for i in iterations)} of {len(iterations)} steps at the cap")
    assert max(rel) < 1e-3
    assert rise > 5e-3

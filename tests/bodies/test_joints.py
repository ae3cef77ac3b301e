"""Joints, limits, drives and the parallel gripper (issue 5), with known answers."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import femcontact as fc
from tests.helpers.oscillation import measured_period
from femcontact.geometry import shapes
from tests.helpers.scenes_util import load_scene

G = 9.81


def _pendulum(theta0=0.05, half_length=0.25, integrator="midpoint"):
    """scenes/hinge_pendulum.py (released at 0.3 rad there), the bar named "rod"."""
    pivot = np.array([0.0, 0.0, 1.0])
    module = load_scene("hinge_pendulum")
    assert np.array_equal(module.PIVOT, pivot)
    scene = module.build(theta0=theta0, half_length=half_length, integrator=integrator, body="rod")
    return scene, scene.joints[0], pivot


def test_hinge_pendulum_small_amplitude_period():
    """T = 2 pi sqrt(I / (m g d)) within 1% (I about the pivot, d = pivot to centre of mass)."""
    scene, _, pivot = _pendulum()
    sim = fc.Simulator(scene)
    spec = sim.scene.rigid_bodies[0]
    d = 0.25
    I = spec.inertia[1, 1] + spec.mass * d * d
    T = 2 * np.pi * np.sqrt(I / (spec.mass * G * d))
    assert measured_period(sim, "rod", 2.2 * T) == pytest.approx(T, rel=0.01)
    c, R = sim.rigid_pose("rod")
    assert np.linalg.norm(c + R @ [0, 0, d] - pivot) < 1e-5        # the hinge holds
    assert abs(R[1, 0]) < 1e-6 and abs(R[1, 2]) < 1e-6              # no rotation off the hinge axis


def test_hinge_drive_reaches_its_target_angle_and_limits_stop_a_slider():
    scene, joint, _ = _pendulum(theta0=0.0)
    joint.set_drive(kp=50.0, kd=5.0, target=0.3)
    sim = fc.Simulator(scene)
    sim.run(steps=300)
    c, R = sim.rigid_pose("rod")
    angle = Rotation.from_matrix(R).as_rotvec()[1]
    spec = sim.scene.rigid_bodies[0]
    # static balance: kp (θ - θ*) = -m g d sin θ
    expected = 0.3 - spec.mass * G * 0.25 * np.sin(angle) / 50.0
    assert angle == pytest.approx(expected, abs=2e-3)

    scene = fc.Scene(dt=1e-2)
    scene.add_rigid_body(shapes.Box((0.05, 0.05, 0.05)), mass=1.0, position=(0, 0, 1), name="slider")
    scene.add_joint("prismatic", None, "slider", axis=(0, 0, 1), limits=(-0.2, 0.2))
    sim = fc.Simulator(scene)
    sim.run(steps=200)
    assert sim.rigid_pose("slider")[0][2] == pytest.approx(0.8, abs=1e-3)   # rests on its lower limit
    assert np.allclose(sim.rigid_pose("slider")[0][:2], 0.0, atol=1e-9)


def test_bad_joint_definitions_are_refused_at_build_time():
    scene = fc.Scene()
    scene.add_rigid_body(shapes.Sphere(0.1), density=1000.0, name="a")
    scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=1), fc.Material(1e5, 0.3, 1000.0), name="soft")
    with pytest.raises(fc.ParameterError, match="not a body"):
        scene.add_joint("hinge", "nobody", "a", axis=(0, 0, 1))
    with pytest.raises(fc.ParameterError, match="axis"):
        scene.add_joint("hinge", None, "a", axis=(0, 0, 0))
    with pytest.raises(fc.ParameterError, match="lower <= upper"):
        scene.add_joint("prismatic", None, "a", axis=(0, 0, 1), limits=(0.2, -0.2))
    with pytest.raises(fc.ParameterError, match="unknown joint kind"):
        scene.add_joint("screw", None, "a")
    with pytest.raises(fc.ParameterError, match="fem body"):
        scene.add_joint("ball", None, "soft")
    joint = scene.add_joint("ball", None, "a")
    with pytest.raises(fc.ParameterError, match="only hinge and prismatic"):
        joint.set_drive(kp=1.0)


def test_fem_nodes_attached_to_a_rigid_body_follow_it():
    """A soft block glued by its top face to a kinematic rigid plate that moves up at 0.1 m/s."""
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, 0))
    scene.add_rigid_body(shapes.Box((0.06, 0.06, 0.01)), position=(0, 0, 0.06),
                         motion=lambda t: ((0, 0, 0.06 + 0.1 * t), None), name="plate")
    body = scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=2, center=(0, 0, 0)),
                              fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=0.01), name="soft")
    top = scene.attach("soft", "z > 0.049", "plate")
    sim = fc.Simulator(scene)
    sim.run(steps=100)
    x = sim.body_positions("soft")
    assert np.allclose(x[top, 2], 0.05 + 0.1, atol=1e-4)
    assert x[:, 2].mean() == pytest.approx(0.1, abs=2e-3)   # the block comes along


@pytest.mark.slow
@pytest.mark.sample
def test_gripper_lifts_and_holds_a_soft_ball_with_little_slip():
    """mu = 0.5: lifted 10 cm and held 2 s with relative slip at the pads below 1 mm."""
    gb = load_scene("gripper_ball")

    scene = gb.build(friction=0.5)
    sim = fc.Simulator(scene)
    sim.run(duration=gb.T_LIFT + 0.1)
    x = sim.body_positions("ball")
    pads = np.flatnonzero(np.abs(x[:, 0]) > np.abs(x[:, 0]).max() - 0.005)
    rel0 = x[pads, 2].mean() - sim.rigid_pose("gripper_left")[0][2]
    sim.run(duration=2.0)
    x = sim.body_positions("ball")
    assert x[:, 2].min() > 0.08                                       # off the ground by ~10 cm
    assert abs(x[pads, 2].mean() - sim.rigid_pose("gripper_left")[0][2] - rel0) < 1e-3


@pytest.mark.slow
def test_gripper_drops_a_slippery_ball():
    gb = load_scene("gripper_ball")

    sim = fc.Simulator(gb.build(friction=0.05))
    sim.run(duration=gb.T_LIFT + 1.0)
    assert sim.body_positions("ball")[:, 2].min() < 0.005          # still on the ground


@pytest.mark.slow
@pytest.mark.sample
def test_soft_fingers_lift_a_rigid_cylinder_without_visible_penetration():
    """COND §V-D soft gripper: two FEM fingers squeeze and lift a rigid cylinder 5 cm; the deepest
    contact stays within 1% of the mean surface edge length."""
    sfc = load_scene("soft_fingers_cylinder")

    sim = fc.Simulator(sfc.build())
    deepest = 0.0
    for _ in range(160):
        st = sim.step()
        if st.contacts:
            deepest = min(deepest, float(sim.contacts.to_numpy()["phi"].min()))
    assert sim.rigid_pose("cylinder")[0][2] == pytest.approx(sfc.R_CYL + sfc.LIFT, abs=3e-3)
    assert -deepest < 0.01 * sim.model.contact.mean_edge

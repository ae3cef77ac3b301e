"""Control: drive commands changed between steps reach the step; specs stay as built."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import femcontact as fc
from femcontact import shapes
from femcontact.kits import ParallelGripper

G = 9.81


def _driven_bar():
    """A 0.5 m bar hanging from a hinge about y at z = 1, PD-driven toward 0 rad."""
    scene = fc.Scene(solver="cond", dt=1e-2, integrator="euler")
    scene.add_rigid_body(shapes.Box((0.02, 0.02, 0.25)), density=1000.0, position=(0, 0, 0.75), name="bar")
    joint = scene.add_joint("hinge", None, "bar", anchor=(0, 0, 1), axis=(0, 1, 0), name="hinge")
    joint.set_drive(kp=50.0, kd=5.0, target=0.0)
    return scene, joint


def _angle(sim) -> float:
    return float(Rotation.from_matrix(sim.rigid_pose("bar")[1]).as_rotvec()[1])


def test_a_new_target_set_through_control_is_reached_and_the_spec_is_untouched():
    scene, joint = _driven_bar()
    sim = fc.Simulator(scene)
    sim.run(steps=50)
    assert abs(_angle(sim)) < 1e-6                                   # hangs at its target
    sim.control.set_joint_drive("hinge", target=0.3)
    sim.run(steps=300)
    m = sim.scene.rigid_bodies[0].mass
    # static balance kp (θ − θ*) = −m g d sin θ, d = 0.25 m below the hinge
    theta = _angle(sim)
    assert theta == pytest.approx(0.3 - m * G * 0.25 * np.sin(theta) / 50.0, abs=2e-3)
    assert joint.drive.target == 0.0 and sim.control.joint_drive("hinge").target == 0.3
    # a stiff rate-only drive turns the bar at its target rate (gravity lags it by m g d sin θ / kd)
    sim.control.set_joint_drive("hinge", target=None, velocity=1.0, kd=200.0)
    a0 = _angle(sim)
    sim.run(steps=20)
    assert _angle(sim) - a0 == pytest.approx(0.2, rel=0.02)


def test_gripper_width_commanded_during_a_run():
    scene = fc.Scene(dt=1e-2, integrator="euler", gravity=(0, 0, 0))
    gripper = ParallelGripper(scene, position=(0, 0, 0.5), opening=0.1)
    gripper.set_width(0.1)
    sim = fc.Simulator(scene)
    sim.run(steps=30)
    assert gripper.width(sim) == pytest.approx(0.1, abs=1e-3)
    gripper.set_width(0.06, sim.control)
    sim.run(steps=60)
    assert gripper.width(sim) == pytest.approx(0.06, abs=1e-3)


def test_bad_commands_are_refused():
    scene, _ = _driven_bar()
    scene.add_rigid_body(shapes.Sphere(0.05), density=1000.0, position=(1, 0, 1), name="ball")
    scene.add_joint("hinge", None, "ball", anchor=(1, 0, 1), axis=(0, 1, 0), name="free")
    sim = fc.Simulator(scene)
    with pytest.raises(fc.ParameterError, match="no drive"):
        sim.control.set_joint_drive("free", target=0.1)
    with pytest.raises(fc.ParameterError, match="target must be"):
        sim.control.set_joint_drive("hinge", target="up")
    with pytest.raises(fc.ParameterError, match="kp"):
        sim.control.set_joint_drive("hinge", kp=-1.0)
    with pytest.raises(fc.ParameterError, match="finite"):
        sim.control.set_joint_drive("hinge", target=float("nan"))


def test_loads_set_through_control_reach_the_step_and_the_specs_stay_as_built():
    """Zero gravity, no contacts: a rigid box gains F/m per second while a load acts and keeps its
    velocity once the load is removed; an FEM body's momentum grows by F t for a load split over its
    nodes; a load from the spec can be replaced by name and the spec keeps its own."""
    scene = fc.Scene(solver="cond", dt=1e-2, gravity=(0, 0, 0), integrator="euler")
    box = scene.add_rigid_body(shapes.Box((0.1, 0.1, 0.1)), density=1000.0, position=(0, 0, 1), name="box")
    box.add_force((1.0, 0.0, 0.0))
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), resolution=2),
                       fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0), position=(1, 0, 1),
                       name="soft")
    sim = fc.Simulator(scene)
    m = sim.scene.rigid_bodies[0].mass
    assert sorted(sim.control.loads) == ["box:0"]
    sim.run(steps=10)
    assert sim.rigid_velocity("box")[0][0] == pytest.approx(1.0 * 0.1 / m, rel=1e-9)
    sim.control.set_force("box:0", "box", (0.0, 3.0, 0.0))            # replaced by name
    sim.control.set_force("pull", "soft", (0.0, 0.0, 2.0))            # split over all nodes by mass
    sim.run(steps=10)
    v = sim.rigid_velocity("box")[0]
    assert v[0] == pytest.approx(0.1 / m, rel=1e-9) and v[1] == pytest.approx(3.0 * 0.1 / m, rel=1e-9)
    momentum = (sim.model.mass_np[:, None] * sim.state.velocities())[sim.model.body("soft").node_start:][:27].sum(0)
    assert momentum[2] == pytest.approx(2.0 * 0.1, rel=1e-9)
    sim.control.remove_load("box:0")
    sim.control.set_force("pull", "soft", lambda t: (0.0, 0.0, 0.0))  # a function of time, zero
    sim.run(steps=10)
    assert sim.rigid_velocity("box")[0][1] == pytest.approx(0.3 / m, rel=1e-9)
    assert np.array_equal(box.forces[0].value, [1.0, 0.0, 0.0])       # the spec is as built


def test_bad_loads_are_refused():
    scene = fc.Scene(solver="cond", gravity=(0, 0, 0))
    scene.add_rigid_body(shapes.Box((0.1, 0.1, 0.1)), density=1000.0, name="box")
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), resolution=1),
                       fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0), position=(1, 0, 0),
                       name="soft")
    sim = fc.Simulator(scene)
    with pytest.raises(fc.ParameterError, match="no body named 'lid'"):
        sim.control.set_force("f", "lid", (1, 0, 0))
    with pytest.raises(fc.ParameterError, match="point="):
        sim.control.set_force("f", "box", (1, 0, 0), nodes=[0])
    with pytest.raises(fc.ParameterError, match="nodes="):
        sim.control.set_force("f", "soft", (1, 0, 0), point=(0, 0, 0))
    with pytest.raises(fc.ParameterError, match="torques act on"):
        sim.control.set_torque("t", "soft", (0, 0, 1))
    with pytest.raises(fc.ParameterError, match="no load named"):
        sim.control.remove_load("f")
    with pytest.raises(fc.ParameterError):
        sim.control.set_force("f", "box", (1, 0))
    assert sim.control.loads == {}

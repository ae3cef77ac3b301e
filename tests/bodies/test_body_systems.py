"""Body systems (femcontact/bodies/system.py): the Simulator's loop over them, and each system's
stored elastic energy against the closed form for a uniform stretch."""
import math

import numpy as np
import pytest

import femcontact as fc


def test_each_system_stores_the_energy_of_a_uniform_stretch():
    E, nu, r, e = 1e5, 0.3, 0.01, 1e-3
    scene = fc.Scene(gravity=(0, 0, 0))
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), resolution=2),
                       fc.Material(youngs_modulus=E, poisson_ratio=nu, density=1000.0), name="cube")
    scene.add_rod(fc.meshes.rod_straight((0, 0, 1), (0.5, 0, 1), 10), r, youngs_modulus=1e6, density=1000.0,
                  name="cable")
    sim = fc.Simulator(scene)
    assert [type(s).__name__ for s in sim.systems] == ["FemSystem", "RodSystem"]
    x = sim.state.positions()
    x[:, 0] *= 1.0 + e                              # uniaxial strain e along x, everywhere
    sim.state.x.from_numpy(x)
    fem_system, rod_system = sim.systems
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    # corotated linear elasticity, F = diag(1 + e, 1, 1): ε = diag(e, 0, 0), W = V (μ e² + λ e²/2)
    assert fem_system.elastic_energy(sim.state) == pytest.approx(1e-3 * (mu + 0.5 * lam) * e**2, rel=1e-9)
    # a straight rod stretched by e: ½ EA e² L
    assert rod_system.elastic_energy(sim.state) == pytest.approx(0.5 * 1e6 * math.pi * r**2 * e**2 * 0.5, rel=1e-9)
    total = fem_system.elastic_energy(sim.state) + rod_system.elastic_energy(sim.state)
    assert sim.energy()["elastic"] == pytest.approx(total, rel=1e-12)


def test_joints_are_a_system_assembled_before_the_elements():
    scene = fc.Scene(solver="cond")
    scene.add_rigid_body(fc.shapes.Box((0.1, 0.1, 0.1)), density=1000.0, position=(0, 0, 0.5), name="a")
    scene.add_rigid_body(fc.shapes.Box((0.1, 0.1, 0.1)), density=1000.0, position=(0.2, 0, 0.5), name="b")
    scene.add_joint("hinge", "a", "b", anchor=(0.1, 0, 0.5), axis=(0, 1, 0))
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), resolution=1), fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0),
                       position=(0, 0, 0.05), name="pad")
    sim = fc.Simulator(scene)
    assert [type(s).__name__ for s in sim.systems] == ["JointSystem", "FemSystem"]
    assert sim.systems[0].elastic_energy(sim.state) == 0.0
    sim.step()                                      # the loop assembles and advances every system
    assert np.isfinite(sim.state.positions()).all()

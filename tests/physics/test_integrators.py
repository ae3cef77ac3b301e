"""Both integrators of docs/THEORY.md §1: free fall, energy behaviour, prescribed nodes."""
import numpy as np
import pytest

import femcontact as fc

G = np.array([0.0, 0.0, -9.81])


def _falling(integrator, dt=1e-2):
    scene = fc.Scene(dt=dt, gravity=G, integrator=integrator)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0), velocity=(0.5, 0, 1.0),
                       name="cube")
    return fc.Simulator(scene)


def test_free_fall_midpoint_is_exact():
    sim = _falling("midpoint")
    x0 = sim.body_positions("cube")
    v0 = np.array([0.5, 0, 1.0])
    sim.run(steps=100)
    t = sim.state.time
    np.testing.assert_allclose(sim.body_positions("cube"), x0 + v0 * t + 0.5 * G * t**2, atol=1e-12)
    np.testing.assert_allclose(sim.body_velocities("cube"), np.tile(v0 + G * t, (len(x0), 1)), atol=1e-12)


def test_free_fall_implicit_euler_matches_its_exact_discrete_solution():
    """Implicit Euler: v_n = v0 + g t_n exactly; x_n = x0 + v0 t_n + g t_n (t_n + dt)/2, which is g t^2/2
    plus the method's known O(dt) lag g t dt / 2."""
    dt = 1e-2
    sim = _falling("euler", dt)
    x0 = sim.body_positions("cube")
    v0 = np.array([0.5, 0, 1.0])
    sim.run(steps=100)
    t = sim.state.time
    np.testing.assert_allclose(sim.body_velocities("cube"), np.tile(v0 + G * t, (len(x0), 1)), atol=1e-12)
    np.testing.assert_allclose(sim.body_positions("cube"), x0 + v0 * t + 0.5 * G * t * (t + dt), atol=1e-12)


def _plucked_beam(integrator):
    scene = fc.Scene(dt=2e-3, gravity=(0, 0, 0), integrator=integrator)
    beam = scene.add_fem_body(fc.meshes.box((0.5, 0.05, 0.05), (10, 1, 1), center=(0.25, 0, 0)),
                              fc.Material(1e6, 0.3, 1000.0), name="beam")
    beam.pin("x < 1e-9")
    X = beam.positions
    beam.velocity[:, 2] = 0.5 * (X[:, 0] / 0.5) ** 2      # bending-mode-like initial velocity
    return fc.Simulator(scene)


def test_midpoint_conserves_energy_and_euler_dissipates():
    energies = {}
    for integ in ("midpoint", "euler"):
        sim = _plucked_beam(integ)
        e0 = sim.energy()["total"]
        history = []
        for _ in range(10):
            sim.run(steps=100)
            history.append(sim.energy()["total"])
        energies[integ] = (e0, np.array(history))
    e0, hist = energies["midpoint"]
    assert np.abs(hist - e0).max() < 0.01 * e0, (hist - e0) / e0
    e0, hist = energies["euler"]
    assert hist[-1] < 0.5 * e0                       # numerical dissipation of implicit Euler
    assert np.all(np.diff(hist) < 0)


def test_driven_nodes_follow_their_prescription():
    scene = fc.Scene(dt=1e-2, gravity=G)
    body = scene.add_fem_body(fc.meshes.box((0.2, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0), name="b")
    left = body.drive("x < -0.0999", position=lambda t, x0: x0 + [0.0, 0.0, 0.1 * t])
    right = body.drive("x > 0.0999", velocity=lambda t: (0.2, 0.0, 0.0))
    sim = fc.Simulator(scene)
    x0 = sim.body_positions("b")
    sim.run(steps=50)
    x = sim.body_positions("b")
    np.testing.assert_allclose(x[left], x0[left] + [0, 0, 0.05], atol=1e-12)
    np.testing.assert_allclose(x[right], x0[right] + [0.1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(sim.body_velocities("b")[right], np.tile([0.2, 0, 0], (len(right), 1)), atol=1e-12)


@pytest.mark.parametrize("mode", ["total", "per_node"])
def test_external_force_accelerates_the_centre_of_mass(mode):
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, 0), integrator="euler")
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0), name="b")
    body.add_force((2.0, 0.0, 0.0), mode=mode)
    sim = fc.Simulator(scene)
    sim.run(steps=10)
    m = sim.model.mass_np
    total = 2.0 if mode == "total" else 2.0 * len(m)
    vcom = (m[:, None] * sim.body_velocities("b")).sum(0) / m.sum()
    np.testing.assert_allclose(vcom, [total / m.sum() * 0.1, 0, 0], rtol=1e-9, atol=1e-12)

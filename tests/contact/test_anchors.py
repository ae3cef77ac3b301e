"""Stiction anchors (femcontact/contact/anchors.py, docs/THEORY.md §4 "Stiction anchors").

Known answers: a cube pushed along the ground by F below the friction limit μ m g does not move at all
once it sticks, under every solver and both integrators (with the regularized laws it creeps at the
speed test_soak.py's creep tests measure: Lagged 9.8e-7 m per step at F = 0.7 μ m g); above the limit
it slides with x(t) = ½ (F/m − μ g) t² as without anchors; contact identities match by key and point.
"""
import numpy as np
import pytest

import femcontact as fc
from femcontact import backend
from femcontact.contact.anchors import MIDPOINT_END_GAIN, ContactMemory
from femcontact.contact.contacts import ContactSet

MU, SIDE, RHO = 0.5, 0.1, 1000.0


def _pushed(solver: str, integrator: str, ratio: float, stiction: str, steps: int):
    """A stiff 0.1 m cube on the ground pushed by F = ratio·μ m g along x: the bottom nodes' mean x per step."""
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator=integrator, stiction=stiction)
    body = scene.add_fem_body(fc.meshes.box((SIDE,) * 3, resolution=2, center=(0.0, 0.0, SIDE / 2)),
                              fc.Material(youngs_modulus=1e7, poisson_ratio=0.3, density=RHO, rayleigh_beta=1e-3))
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=MU)
    body.add_force((ratio * MU * 9.81 * RHO * SIDE**3, 0.0, 0.0), mode="total")
    sim = fc.Simulator(scene)
    bottom = sim.state.positions()[:, 2] < 1e-6
    xs = []
    for _ in range(steps):
        sim.step()
        xs.append(sim.state.positions()[bottom, 0].mean())
    return np.array(xs), sim


STUCK = [("lagged", "euler"), ("cond", "midpoint"), pytest.param("sap", "midpoint", marks=pytest.mark.slow),
         pytest.param("lagged", "midpoint", marks=pytest.mark.slow), pytest.param("sap", "euler", marks=pytest.mark.slow),
         pytest.param("similar", "euler", marks=pytest.mark.slow), pytest.param("cond", "euler", marks=pytest.mark.slow),
         pytest.param("pgs", "midpoint", marks=pytest.mark.slow)]


@pytest.mark.parametrize("solver,integrator", STUCK)
def test_a_cube_pushed_below_the_friction_limit_stops(solver, integrator):
    """F = 0.7 μ m g: after the first second the bottom face does not move (< 1e-9 m per step over the
    second second; measured 2e-14 … 3.6e-10). Regularized Lagged creeps 9.8e-7 m per step here
    (ε r/√(1 − r²) dt, test_regularized_stiction_still_creeps)."""
    xs, _ = _pushed(solver, integrator, 0.7, "anchored", 200)
    creep = abs(xs[-1] - xs[99]) / 100
    print(solver, integrator, "x(1 s)", xs[99], "creep per step", creep)
    assert creep < 1e-9, (solver, integrator, creep)
    assert abs(xs[-1]) < 1e-3                      # it stuck early (the first steps slide while the load builds)


def test_regularized_stiction_still_creeps():
    """The control: the same push with the Lagged model's own law creeps at its regularized speed."""
    xs, _ = _pushed("lagged", "euler", 0.7, "regularized", 120)
    creep = (xs[-1] - xs[59]) / 60
    expect = 1e-2 * 1e-4 * 0.7 / np.sqrt(1.0 - 0.7**2)   # dt ε r/√(1 − r²), ε = v_s = 1e-4 m/s
    np.testing.assert_allclose(creep, expect, rtol=0.02)


@pytest.mark.parametrize("solver,integrator", [("lagged", "euler"), ("cond", "midpoint")])
def test_anchors_let_a_cube_slide_above_the_friction_limit(solver, integrator):
    """F = 1.5 μ m g: the cube slides with a = F/m − μ g = 0.5 μ g, as without anchors (within 2%)."""
    xs, sim = _pushed(solver, integrator, 1.5, "anchored", 60)
    t = 1e-2 * np.arange(1, 61)
    a = np.polyfit(t[20:], xs[20:], 2)[0] * 2.0
    np.testing.assert_allclose(a, 0.5 * MU * 9.81, rtol=0.02)


def _contacts(n: int, pairs, points, links=()) -> ContactSet:
    cs = ContactSet(n, capacity=8, virtual_capacity=4)
    cs.count, cs.n_virtual = len(pairs), len(links)
    cs.write("node_a", np.array([a for a, _ in pairs], np.int32))
    cs.write("node_b", np.array([b for _, b in pairs], np.int32))
    cs.write("point", np.array(points, float))
    if links:
        backend.write(cs.vn_node, np.array(links, np.int32))
    return cs


def test_contacts_continue_the_remembered_one_with_their_sides_and_the_nearest_point():
    """Sides (world −1, node, virtual node → n + its first link) pick the candidates, the nearest point
    (ties: the earlier) among them, within the radius; the memory survives a checkpoint round trip."""
    n = 4
    span = 2 * n + 2
    key = lambda a, b: (a + 1) * span + (b + 1)                       # noqa: E731  (the checkpoint's int64 key)
    prev_keys = [key(-1, 0), key(1, 2), key(1, 2), key(3, 1), key(-1, n + 1), key(1, 2)]
    prev_pts = [[0.0, 0, 0], [1.0, 0, 0], [2.0, 0, 0], [5.0, 0, 0], [7.0, 0, 0], [1.0, 0, 0]]
    memory = ContactMemory(n)
    memory.restore(prev_keys, prev_pts, np.arange(18.0).reshape(6, 3))
    cs = _contacts(n, [(1, 2), (1, 2), (-1, 0), (2, 0), (3, 1), (-1, n)],
                   [[1.9, 0, 0], [1.05, 0, 0], [0.0, 0, 0.5], [0.0, 0, 0], [5.0, 0, 0], [7.1, 0, 0]],
                   links=[(1, 2, -1, -1)])                           # virtual node n: first link node 1
    np.testing.assert_array_equal(memory.match(cs), [2, 1, 0, -1, 3, 4])
    np.testing.assert_array_equal(memory.match(cs, radius=0.2), [2, 1, -1, -1, 3, 4])
    cs2 = _contacts(n, [(1, 2)], [[1.0, 0, 0]])                      # equally near 1 and 5: the earlier
    np.testing.assert_array_equal(memory.match(cs2), [1])
    saved = memory.memory()
    np.testing.assert_array_equal(saved["keys"], prev_keys)
    again = ContactMemory(n, capacity=1)
    again.restore(saved["keys"], saved["points"], saved["values"])
    np.testing.assert_array_equal(again.match(cs), [2, 1, 0, -1, 3, 4])
    np.testing.assert_array_equal(again.values(), np.arange(18.0).reshape(6, 3))
    memory.store(cs, np.array(cs.read("point")["point"]), np.ones((6, 3)))   # this step's contacts replace them
    np.testing.assert_array_equal(memory.match(cs), np.arange(6))


def test_midpoint_end_gain_damps_the_slip_recurrence():
    """s_{k+2} = (1 − β) s_{k+1} − β s_k (StictionAnchors doc): undamped at β = 1, a double root √2 − 1
    at β = 3 − 2√2."""
    for beta, radius in ((1.0, 1.0), (MIDPOINT_END_GAIN, np.sqrt(2.0) - 1.0)):
        roots = np.roots([1.0, -(1.0 - beta), beta])
        np.testing.assert_allclose(np.abs(roots), radius, rtol=1e-6)


def test_unknown_stiction_mode_is_refused():
    with pytest.raises(fc.ParameterError, match="stiction"):
        fc.Scene(stiction="exact")

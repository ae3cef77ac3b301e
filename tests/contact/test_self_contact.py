"""FEM self-contact (``add_fem_body(..., self_contact=True)``; contact/detection.py, 4.).

Known answers: a body made of two separate soft cubes, the upper one dropped onto the lower one,
rests on it with its whole weight carried by the self-contacts (within 1%) and at the height the
same two cubes reach as two bodies; without self-contact it falls through; a compact body's own
neighbours never touch it (no self-contact at rest, the same trajectory as without).
"""
import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import ParameterError

BOX = fc.meshes.box((0.1,) * 3, resolution=2)
MAT = fc.Material(1e5, 0.4, 1000.0, rayleigh_alpha=1.0, rayleigh_beta=2e-3)
LIFT = np.array([0.02, 0.0, 0.25])            # the upper cube at rest: 0.15 m above the lower one
WEIGHT = 1000.0 * 0.1**3 * 9.81              # of one cube, N


def _scene(solver: str, one_body: bool, self_contact: bool = True) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81), solver=solver, integrator="euler")
    if one_body:
        two = fc.meshes.TetMesh(np.r_[BOX.vertices, BOX.vertices + LIFT], np.r_[BOX.tets, BOX.tets + BOX.n_vertices])
        scene.add_fem_body(two, MAT, position=(0, 0, 0.05), name="pair", self_contact=self_contact)
    else:
        scene.add_fem_body(BOX, MAT, position=(0, 0, 0.05), name="lower")
        scene.add_fem_body(BOX, MAT, position=LIFT + (0, 0, 0.05), name="upper")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.6, name="ground")
    return scene


def _upper(sim: fc.Simulator) -> tuple:
    """(positions of the upper cube's nodes, the contact force on them, N)."""
    n = BOX.n_vertices
    if "pair" in [b.name for b in sim.model.bodies]:
        nodes = sim.model.body("pair").node_start + n + np.arange(n)
    else:
        nodes = sim.model.body("upper").node_start + np.arange(n)
    d = sim.contacts.to_numpy()
    force = (sim.contacts.jacobian(True, d).T @ d["impulse"].ravel()).reshape(-1, 3) / sim.scene.dt
    return sim.state.positions()[nodes], force[nodes].sum(0)


@pytest.mark.parametrize("solver", ["lagged", pytest.param("cond", marks=pytest.mark.slow),
                                    pytest.param("sap", marks=pytest.mark.slow)])
def test_upper_part_rests_on_the_lower_with_its_weight(solver):
    sim = fc.Simulator(_scene(solver, one_body=True))
    sim.run(steps=200)
    x, f = _upper(sim)
    assert f[2] == pytest.approx(WEIGHT, rel=0.01)
    assert np.abs(f[:2]).max() < 0.01 * WEIGHT
    assert sim.energy()["kinetic"] < 1e-3
    two = fc.Simulator(_scene(solver, one_body=False))
    two.run(steps=200)
    x2, f2 = _upper(two)
    assert np.abs(x - x2).max() < 1e-3, "self-contact and body-body contact disagree on where the cube rests"
    assert x[:, 2].min() > 0.09                     # on the lower cube (its top at 0.1, squeezed), not through it


def test_without_self_contact_the_parts_pass_through_each_other():
    sim = fc.Simulator(_scene("lagged", one_body=True, self_contact=False))
    sim.run(steps=200)
    x, f = _upper(sim)
    assert x[:, 2].min() < 0.01                     # fell through the lower cube onto the ground
    assert not (sim.contacts.to_numpy()["node_a"] >= 0).any()


def test_a_compact_body_never_touches_its_own_neighbours():
    """A soft cube dropped on the ground with self-contact on: its surface vertices are all within the
    rest gap of their neighbouring triangles, so no self-contact appears and nothing changes."""
    runs = []
    for flag in (True, False):
        scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81), solver="lagged", integrator="euler")
        scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=3), MAT, position=(0, 0, 0.06), name="cube",
                           self_contact=flag)
        scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.6, name="ground")
        sim = fc.Simulator(scene)
        self_contacts = 0
        for _ in range(40):
            sim.step()
            self_contacts += int((sim.contacts.to_numpy()["node_a"] >= 0).sum())
        runs.append((sim.state.positions(), self_contacts))
    assert runs[0][1] == 0
    np.testing.assert_allclose(runs[0][0], runs[1][0], atol=1e-9)


def test_self_contact_friction_is_set_like_any_pair():
    scene = _scene("lagged", one_body=True)
    scene.set_contact("pair", "pair", friction=0.2)
    sim = fc.Simulator(scene)
    sim.run(steps=30)
    d = sim.contacts.to_numpy()
    own = d["node_a"] >= 0
    assert own.any() and np.allclose(d["mu"][own], 0.2)


def test_bad_self_contact_input_is_refused():
    scene = _scene("lagged", one_body=False)
    with pytest.raises(ParameterError, match=r"set_contact\('lower', 'lower'\).*self_contact=True"):
        scene.set_contact("lower", "lower", friction=0.2)
    scene = _scene("lagged", one_body=True)
    scene.set_contact("pair", "pair", friction=0.2)
    scene.fem_bodies[0].self_contact = False                     # changed after set_contact: refused at build
    with pytest.raises(ParameterError, match=r"set_contact\('pair', 'pair'\).*self_contact=True"):
        fc.Simulator(scene)
    with pytest.raises(ParameterError, match="self_contact must be True or False"):
        fc.Scene().add_fem_body(BOX, MAT, self_contact="yes")

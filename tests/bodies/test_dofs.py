"""DofGroups: the block structure solvers see, built from every body type."""
import numpy as np

import femcontact as fc
from femcontact.dofs import POINT, RIGID_ANGULAR, RIGID_LINEAR, SPIN
from femcontact.model import Model


def test_dof_groups_of_fem_rigid_and_rod():
    scene = fc.Scene(dt=1e-2)
    mesh = fc.meshes.box((0.1,) * 3, resolution=1, center=(0, 0, 0.05))
    cube = scene.add_fem_body(mesh, fc.Material(1e5, 0.4, 1000.0), name="cube")
    cube.pin("z < 1e-9")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=1000.0, position=(0, 0, 1), name="ball")
    scene.add_rigid_body(fc.shapes.Box((0.1, 0.1, 0.1)), density=1000.0, name="plate",
                         motion=lambda t: ((0, 0, 0), None))
    scene.add_rod(fc.meshes.rod_straight((0, 0, 2), (1, 0, 2), 4), radius=0.01,
                  material=fc.Material(1e6, 0.4, 1000.0), name="cable")
    g = Model(scene).dofs
    assert g.n == 8 + 2 + 2 + 5 + 4
    np.testing.assert_array_equal(g.kind, [POINT] * 8 + [RIGID_LINEAR, RIGID_ANGULAR] * 2 + [POINT] * 5 + [SPIN] * 4)
    np.testing.assert_array_equal(g.partner[8:12], [9, 8, 11, 10])
    np.testing.assert_array_equal(g.body, [0] * 8 + [1, 1, 2, 2] + [3] * 9)
    np.testing.assert_array_equal(g.rigid_linear, [8, 10])
    np.testing.assert_array_equal(g.rotational, [9, 11, 17, 18, 19, 20])
    # masses: the cube's lumped node masses sum to its mass; the ball's to 4/3 pi r^3 rho
    np.testing.assert_allclose(g.body_mass[:2], [1.0, 4.0 / 3.0 * np.pi * 0.05**3 * 1000.0], rtol=1e-12)
    np.testing.assert_allclose(g.body_mass[3], np.pi * 0.01**2 * 1.0 * 1000.0, rtol=1e-12)
    assert g.mass[9] == 0 and np.all(g.mass[17:] == 0)
    # one chain: points 12..16, spins 17..20, the last point without a spin
    assert g.n_chains == 1
    np.testing.assert_array_equal(g.chain(0), [[12, 17], [13, 18], [14, 19], [15, 20], [16, -1]])
    np.testing.assert_array_equal(np.flatnonzero(g.lumped), np.arange(12, 17))
    # prescribed: the cube's 4 bottom nodes and the kinematic plate
    bottom = np.flatnonzero(mesh.vertices[:, 2] < 1e-9)
    assert len(bottom) == 4
    np.testing.assert_array_equal(np.flatnonzero(g.prescribed), [*bottom, 10, 11])

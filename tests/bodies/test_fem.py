"""Corotational FEM: invariance, patch test, SPD assembly, stiffness vs finite differences."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import femcontact as fc
from tests.helpers.fdcheck import central_jacobian

E, NU, RHO = 1e6, 0.3, 1000.0


def _sim(mesh, integrator="midpoint", dt=1e-2, gravity=(0, 0, 0), material=None):
    scene = fc.Scene(dt=dt, gravity=gravity, integrator=integrator)
    scene.add_fem_body(mesh, material or fc.Material(E, NU, RHO), name="b")
    return fc.Simulator(scene)


def test_rigid_translation_and_rotation_give_zero_force():
    sim = _sim(fc.meshes.box((0.3, 0.2, 0.1), 3))
    X = sim.model.rest_positions
    R = Rotation.from_rotvec([0.3, -1.1, 2.0]).as_matrix()
    scale = E * 0.1**2 * 1e-12   # round-off level of a nodal force
    for x in (X + [0.5, -2.0, 1.0], X @ R.T, X @ R.T + [1.0, 2.0, 3.0]):
        f = sim.elastic_forces(x)
        assert np.abs(f).max() < scale, np.abs(f).max()


def test_inverted_element_gives_proper_rotation_and_restoring_force():
    mesh = fc.meshes.TetMesh(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]), np.array([[0, 1, 2, 3]]))
    sim = _sim(mesh)
    x = mesh.vertices.copy()
    x[3, 2] = -0.5                               # push the apex through the base: inverted
    f = sim.elastic_forces(x)
    assert np.isfinite(f).all()
    assert f[3, 2] > 0                           # pushes the apex back up
    assert np.abs(f.sum(axis=0)).max() < 1e-9 * np.abs(f).max()   # no net force


def test_patch_uniform_stretch_gives_exact_linear_stress():
    sim = _sim(fc.meshes.box((1.0, 1.0, 1.0), 3))
    X = sim.model.rest_positions
    eps = np.diag([1e-3, -2e-4, 5e-4])
    sim.state.x.from_numpy(X @ (np.eye(3) + eps).T)
    mu, lam = fc.Material(E, NU, RHO).lame
    sigma = 2 * mu * eps + lam * np.trace(eps) * np.eye(3)
    s = sigma - np.trace(sigma) / 3 * np.eye(3)
    vm = np.sqrt(1.5 * (s * s).sum())
    np.testing.assert_allclose(sim.von_mises(), vm, rtol=1e-9)
    # interior nodes feel no net force; the face's internal forces pull back with -sigma n times its area
    f = sim.elastic_forces(X @ (np.eye(3) + eps).T)
    interior = np.all(np.abs(X) < 0.5 - 1e-9, axis=1)
    assert np.abs(f[interior]).max() < 1e-9 * np.abs(f).max()
    face = np.isclose(X[:, 0], 0.5)
    np.testing.assert_allclose(f[face].sum(axis=0), -sigma @ [1.0, 0, 0] * 1.0, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("integrator", ["midpoint", "euler"])
def test_system_matrix_is_spd(integrator):
    sim = _sim(fc.meshes.box((0.4, 0.2, 0.2), 3), integrator=integrator)
    rng = np.random.default_rng(0)
    sim.state.x.from_numpy(sim.model.rest_positions + 0.01 * rng.standard_normal(sim.model.rest_positions.shape))
    A = sim.system_matrix().toarray()
    assert np.abs(A - A.T).max() < 1e-10 * np.abs(A).max()
    assert np.linalg.eigvalsh(A).min() > 0


def test_stiffness_matches_finite_difference_of_forces():
    mesh = fc.meshes.box((0.4, 0.2, 0.2), 2)
    dt = 1e-2
    sim = _sim(mesh, integrator="euler", dt=dt)
    X = sim.model.rest_positions
    R = Rotation.from_rotvec([0.4, 0.2, -0.7]).as_matrix()
    rng = np.random.default_rng(1)
    x0 = X @ R.T + 1e-5 * rng.standard_normal(X.shape)   # rotated, strain ~1e-4
    sim.state.x.from_numpy(x0)
    sim.assemble()
    A = sim.A.to_scipy().toarray()
    M = np.kron(np.diag(sim.model.mass_np), np.eye(3))
    K = (A - M) / dt**2                          # Euler: A = M + dt^2 K without damping
    Kfd = -central_jacobian(lambda x: sim.elastic_forces(x.reshape(-1, 3)).ravel(), x0.ravel(), 1e-7)
    # Linear corotation drops dR/dx, a term proportional to the strain (1e-4 here).
    assert np.abs(K - Kfd).max() < 2e-3 * np.abs(K).max()

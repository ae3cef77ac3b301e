"""Bad input raises a clear error naming the problem, before any step runs."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import MeshError, ParameterError

TET = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
MAT = fc.Material(1e5, 0.3, 1000.0)


def _scene():
    return fc.Scene(dt=1e-2)


@pytest.mark.parametrize("kwargs, words", [
    (dict(youngs_modulus=0.0, poisson_ratio=0.3, density=1.0), "youngs_modulus"),
    (dict(youngs_modulus=-1.0, poisson_ratio=0.3, density=1.0), "youngs_modulus"),
    (dict(youngs_modulus=1.0, poisson_ratio=0.5, density=1.0), "poisson_ratio"),
    (dict(youngs_modulus=1.0, poisson_ratio=-1.0, density=1.0), "poisson_ratio"),
    (dict(youngs_modulus=1.0, poisson_ratio=0.3, density=0.0), "density"),
    (dict(youngs_modulus=float("nan"), poisson_ratio=0.3, density=1.0), "youngs_modulus"),
    (dict(youngs_modulus=1.0, poisson_ratio=0.3, density=1.0, rayleigh_beta=-1.0), "rayleigh_beta"),
])
def test_bad_material(kwargs, words):
    with pytest.raises(ParameterError, match=words):
        fc.Material(**kwargs)


def test_inverted_tet_is_named():
    mesh = fc.meshes.TetMesh(np.vstack([TET, TET + [2, 0, 0]]), [[0, 1, 2, 3], [5, 4, 6, 7]])
    with pytest.raises(MeshError, match=r"tet 1 .* inverted"):
        _scene().add_fem_body(mesh, MAT)


def test_zero_volume_tet_is_named():
    verts = np.vstack([TET, [[2, 0, 0], [3, 0, 0], [4, 0, 0], [5, 0, 0]]])
    mesh = fc.meshes.TetMesh(verts, [[0, 1, 2, 3], [4, 5, 6, 7]])
    with pytest.raises(MeshError, match=r"tet 1 .* zero volume"):
        _scene().add_fem_body(mesh, MAT)


def test_nan_coordinates_are_named():
    verts = TET.copy()
    verts[2, 1] = np.nan
    with pytest.raises(MeshError, match="vertex 2"):
        _scene().add_fem_body(fc.meshes.TetMesh(verts, [[0, 1, 2, 3]]), MAT)


def test_pinned_index_out_of_range():
    body = _scene().add_fem_body(fc.meshes.TetMesh(TET, [[0, 1, 2, 3]]), MAT)
    with pytest.raises(ParameterError, match="node index 7 out of range"):
        body.pin([0, 7])


def test_bad_predicate_and_drive():
    body = _scene().add_fem_body(fc.meshes.TetMesh(TET, [[0, 1, 2, 3]]), MAT)
    with pytest.raises(ParameterError, match="predicate"):
        body.pin("w < 1")
    with pytest.raises(ParameterError, match="exactly one"):
        body.drive([0])


@pytest.mark.parametrize("kwargs, words", [
    (dict(integrator="verlet"), "unknown integrator 'verlet'"),
    (dict(solver="magic"), "unknown solver 'magic'"),
    (dict(dt=0.0), "dt must be a positive"),
    (dict(gravity=(0, 0)), "gravity"),
    (dict(linear_solver="qr"), "linear_solver"),
])
def test_bad_scene_parameters(kwargs, words):
    with pytest.raises(ParameterError, match=words):
        fc.Scene(**kwargs)


def test_node_prescribed_twice_is_refused():
    scene = _scene()
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), MAT, name="b")
    body.pin("x < 0")
    body.drive([0, 7], velocity=lambda t: (0.0, 0.0, 0.1))
    with pytest.raises(ParameterError, match="node 0 of body 'b' is prescribed by two"):
        fc.Simulator(scene)


def test_diverging_run_names_the_step(tmp_path):
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, 0))
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), MAT, name="b")
    body.drive([0], velocity=lambda t: (0.0, 0.0, 1e9 if t > 0.03 else 0.0))
    sim = fc.Simulator(scene)
    with pytest.raises(fc.SimulationError, match=r"step 4 .*diverged"):
        sim.run(steps=10, out=tmp_path)
    from femcontact.io.vtk import read_pvd_entries

    assert len(read_pvd_entries(tmp_path / "run.pvd")) == 4   # frames 0..3 stay readable

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
        sim.run(steps=10, out=tmp_path, every=1)
    from femcontact.io.vtk import read_pvd_entries

    assert len(read_pvd_entries(tmp_path / "run.pvd")) == 4   # frames 0..3 stay readable


@pytest.mark.parametrize("name", ["future", "FUTURE"])
def test_planned_solver_fails_at_scene(name, monkeypatch):
    """An advertised-but-unimplemented solver is refused when the Scene is made, not at the first step
    (no solver is planned-only now that "incp" is implemented: a made-up one stands in)."""
    from femcontact.spec import names

    monkeypatch.setattr(names, "PLANNED_SOLVERS", ("future",))
    with pytest.raises(ParameterError, match=rf"solver '{name}' is not implemented.*cond, sap, lagged, similar"):
        fc.Scene(solver=name)
    scene = fc.Scene(solver="cond")
    with pytest.raises(ParameterError, match="not implemented"):
        scene.solver = name
    assert scene.solver == "cond"
    assert fc.Scene(solver="INCP").solver == "incp"


def test_solver_names_are_exactly_the_registered_solvers():
    """The static SOLVER_NAMES (checked without importing any solver) match what the solver modules register."""
    import importlib

    from femcontact import solvers

    assert fc.Scene(solver="Lagged").solver == "lagged"
    for module in solvers.SOLVER_MODULES:
        importlib.import_module(f"femcontact.solvers.{module}")
    assert sorted(solvers.CONTACT_SOLVERS) == sorted(solvers.SOLVER_NAMES)
    # make_contact_solver imports only SOLVER_MODULE[name]: that module must be the one registering it
    assert sorted(solvers.SOLVER_MODULE) == sorted(solvers.SOLVER_NAMES)
    for name, module in solvers.SOLVER_MODULE.items():
        assert solvers.CONTACT_SOLVERS[name].__module__.startswith(f"femcontact.solvers.{module}"), name
    assert not set(solvers.PLANNED_SOLVERS) & set(solvers.SOLVER_NAMES)


def test_specs_live_in_spec_and_the_old_shim_modules_are_gone():
    """Specs moved to femcontact.spec; the scene and the joints still name theirs, the package root's
    and contact's re-export shims are deleted (issue 30)."""
    from pathlib import Path

    from femcontact import spec
    from femcontact.bodies.joints import Attachment, JointSpec
    from femcontact.scene import FemBodySpec, RigidBodySpec, as_rotation_matrix

    assert fc.Material is spec.Material
    assert (FemBodySpec, RigidBodySpec, JointSpec, Attachment) == (
        spec.FemBodySpec, spec.RigidBodySpec, spec.JointSpec, spec.Attachment)
    assert as_rotation_matrix(None).shape == (3, 3)
    root = Path(fc.__file__).parent
    for old in ("materials.py", "selection.py", "rod_spec.py", "contact/obstacles.py", "gripper.py", "smallmat.py",
                "contact/shapes.py"):
        assert not (root / old).exists(), old


@pytest.mark.parametrize("call, words", [
    (lambda v: v.vec3((1, 2), "gravity"), "gravity must be three finite numbers"),
    (lambda v: v.vec3((0, np.nan, 0), "velocity"), "velocity must be three finite"),
    (lambda v: v.positive(0.0, "dt"), "dt must be a positive number"),
    (lambda v: v.positive("1", "dt"), "dt must be a positive number"),
    (lambda v: v.positive_or_none(-1.0, "stiffness"), "stiffness must be a positive number or None"),
    (lambda v: v.non_negative(-1e-9, "kd"), "kd must be a non-negative number"),
    (lambda v: v.non_negative_or_nan(np.inf, "tau_d"), "tau_d must be a non-negative finite number"),
    (lambda v: v.as_rotation_matrix(np.diag([1.0, 1.0, -1.0])), "rotation must be"),
    (lambda v: v.as_rotation_matrix((0.0, 0.0, 0.0, 0.0)), "quaternion"),
    (lambda v: v.unit_vector((0.0, 0.0, 0.0), "axis"), "axis must be a non-zero 3-vector"),
    (lambda v: v.check_drive("drive", None, None), "exactly one"),
    (lambda v: v.check_drive("drive", None, (0.0, 0.0, 1.0)), "function of time"),
    (lambda v: v.evaluate_motion(lambda t: 1 / 0, 0.5, "box"), r"motion of box failed at t=0.5"),
    (lambda v: v.evaluate_motion(lambda t: ((0, 0), None), 0.0, "box"), "position must be three"),
])
def test_validation_helpers_name_the_problem(call, words):
    from femcontact.spec import validation

    with pytest.raises(ParameterError, match=words):
        call(validation)


def test_validation_helpers_return_canonical_values():
    from femcontact.spec import validation as v

    assert v.positive(np.int64(2), "n") == 2.0
    assert v.positive_or_none(None, "k") is None
    assert np.isnan(v.non_negative_or_nan(None, "k"))
    np.testing.assert_allclose(v.unit_vector([[0.0, 3.0, 4.0]], "axis"), [0.0, 0.6, 0.8])
    np.testing.assert_allclose(v.as_rotation_matrix((0.0, 0.0, 0.0, 1.0)), np.diag([-1.0, -1.0, 1.0]), atol=1e-15)
    c, R = v.evaluate_motion(lambda t: ((t, 0, 0), None), 2.0, "box")
    np.testing.assert_allclose(c, [2.0, 0, 0])
    np.testing.assert_allclose(R, np.eye(3))

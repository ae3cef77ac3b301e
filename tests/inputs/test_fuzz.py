"""Property-based fuzzing: random and corrupted mesh files of every supported format, random mesh
arrays, and random scene, material, contact and solver parameters. The only outcomes allowed are a
valid result (checked) or one of femcontact's own errors; anything else (IndexError, ValueError from
numpy or meshio, a hang past the deadline) fails.

CI runs a fixed, modest set of examples (60 per test, ``derandomize``; about 15 s in all). For a longer random
search: ``FEMCONTACT_FUZZ_EXAMPLES=2000 FEMCONTACT_FUZZ_RANDOM=1 pytest tests/inputs/test_fuzz.py``.
No Taichi kernel runs here.
"""
from __future__ import annotations

import itertools
import math
import os
import warnings
from datetime import timedelta
from pathlib import Path

import meshio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import femcontact as fc
from femcontact.errors import FemcontactError
from femcontact.meshes import load, validate
from femcontact.meshes.surface import boundary_faces
from femcontact.solvers.cond.options import CondOptions

EXAMPLES = int(os.environ.get("FEMCONTACT_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=20), database=None,
                derandomize=os.environ.get("FEMCONTACT_FUZZ_RANDOM", "0") != "1",
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

# (suffix, meshio file_format, write options, surface?) : every format the loader reads and tests
FORMATS = [
    (".msh", "gmsh22", {"binary": False}, False), (".msh", "gmsh22", {"binary": True}, False),
    (".msh", "gmsh", {"binary": False}, False), (".vtk", None, {"binary": False}, False),
    (".vtk", None, {"binary": True}, False), (".vtu", None, {}, False), (".vtu", None, {"binary": False}, False),
    (".mesh", "medit", {}, False), (".inp", "abaqus", {}, False), (".xdmf", None, {}, False),
    (".bdf", "nastran", {}, False), (".stl", None, {"binary": False}, True), (".stl", None, {"binary": True}, True),
    (".obj", None, {}, True), (".ply", None, {"binary": False}, True), (".ply", None, {"binary": True}, True),
    (".off", None, {}, True),
]
SUFFIXES = sorted({f[0] for f in FORMATS} | {".med", ".e", ".exo", ".nas", ".meshb", ".xmf"})
_counter = itertools.count()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[tuple[str, bytes]]:
    """A valid file of each format: a 2x2x2 box (tets, or its boundary triangles for surfaces)."""
    box = fc.meshes.box((1.0, 1.0, 1.0), 2)
    folder = tmp_path_factory.mktemp("seeds")
    out = []
    for k, (suffix, fmt, kw, surface) in enumerate(FORMATS):
        cells = [("triangle", boundary_faces(box))] if surface else [("tetra", box.tets)]
        path = folder / f"seed{k}{suffix}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meshio.write(path, meshio.Mesh(box.vertices, cells), file_format=fmt, **kw)
        assert load(path).volume() == pytest.approx(1.0, rel=0.02)      # the seed itself is valid
        out.append((suffix, path.read_bytes()))
    return out


@pytest.fixture(autouse=True)
def _short_read_timeout(monkeypatch):
    """A reader that loops on a corrupt file is cut off after 3 s here (60 s by default)."""
    from femcontact.meshes import io as mesh_io

    monkeypatch.setattr(mesh_io, "READ_TIMEOUT_S", 3.0)


def _outcome(fn, *args, **kwargs):
    """fn's result, or None when it raised one of our errors; any other exception propagates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except FemcontactError as exc:
            assert str(exc), "our errors always say something"
            return None


def _check_mesh(mesh) -> None:
    """A mesh the loader or the validator returns is simulation-ready."""
    if mesh is None:
        return
    assert isinstance(mesh, fc.meshes.TetMesh) and mesh.n_tets > 0
    assert np.isfinite(mesh.vertices).all()
    assert mesh.tets.min() >= 0 and mesh.tets.max() < mesh.n_vertices
    assert (mesh.signed_volumes() > 0).all()


def _load_bytes(folder: Path, suffix: str, data: bytes):
    path = folder / f"fuzz{next(_counter)}{suffix}"
    path.write_bytes(data)
    try:
        return _outcome(load, path)
    finally:
        path.unlink()


# ----------------------------------------------------------------------------- mesh files
@FUZZ
@given(suffix=st.sampled_from(SUFFIXES), data=st.binary(max_size=600))
def test_loader_on_random_bytes(tmp_path, suffix, data):
    _check_mesh(_load_bytes(tmp_path, suffix, data))


TOKENS = [b"nan", b"-1", b"0", b"1e300", b"-1e300", b"inf", b"99999999", b"2147483648", b" ", b"\n", b"\x00", b"$"]
MUTATION = st.tuples(st.sampled_from(["cut", "flip", "insert", "delete", "token"]),
                     st.floats(0.0, 1.0), st.binary(min_size=1, max_size=8), st.sampled_from(TOKENS))


def _mutate(data: bytes, mutations) -> bytes:
    b = bytearray(data)
    for op, where, junk, token in mutations:
        i = min(int(where * len(b)), max(len(b) - 1, 0))
        if op == "cut":
            del b[i:]
        elif op == "flip" and b:
            b[i] ^= junk[0] or 0xFF
        elif op == "insert":
            b[i:i] = junk
        elif op == "delete":
            del b[i:i + len(junk) * 8]
        else:
            b[i:i] = token
    return bytes(b)


@FUZZ
@given(which=st.integers(0, len(FORMATS) - 1), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_loader_on_corrupted_files(tmp_path, seeds, which, mutations):
    suffix, data = seeds[which]
    _check_mesh(_load_bytes(tmp_path, suffix, _mutate(data, mutations)))


# ----------------------------------------------------------------------------- mesh arrays
COORD = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-2.0, 2.0),
                  st.sampled_from([0.0, 1.0, 1e7, -1e300]))


@st.composite
def tet_meshes(draw):
    n = draw(st.integers(0, 10))
    vertices = draw(hnp.arrays(np.float64, (n, 3), elements=COORD))
    m = draw(st.integers(0, 8))
    tets = draw(hnp.arrays(np.int64, (m, 4), elements=st.integers(-2, n + 1)))
    return fc.meshes.TetMesh(vertices, tets, name="fuzz")


@FUZZ
@given(mesh=tet_meshes(), repair=st.booleans(), min_quality=st.sampled_from([0.0, 1e-3, 0.5]))
def test_validator_on_random_arrays(mesh, repair, min_quality):
    _check_mesh(_outcome(validate, mesh, min_quality=min_quality, repair=repair))
    body = _outcome(fc.Scene().add_fem_body, mesh, fc.Material(1e5, 0.3, 1000.0))
    if body is not None:
        assert np.isfinite(body.positions).all() and (mesh.signed_volumes() > 0).all()


# ----------------------------------------------------------------------------- parameters
ANY = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.booleans(), st.none(),
                st.text(max_size=4), st.lists(st.floats(-10, 10), max_size=4), st.just(np.float32(0.3)),
                st.just(np.int64(3)))
NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.floats(-2.0, 2.0))


@FUZZ
@given(e=st.one_of(NUMBER, ANY), nu=st.one_of(NUMBER, ANY), rho=st.one_of(NUMBER, ANY), alpha=ANY, beta=ANY)
def test_material_parameters(e, nu, rho, alpha, beta):
    mat = _outcome(fc.Material, e, nu, rho, rayleigh_alpha=alpha, rayleigh_beta=beta)
    if mat is not None:
        assert mat.youngs_modulus > 0 and -1 < mat.poisson_ratio < 0.5 and mat.density > 0
        assert all(math.isfinite(x) for x in (*mat.lame, mat.rayleigh_alpha, mat.rayleigh_beta))


@FUZZ
@given(dt=st.one_of(NUMBER, ANY), gravity=ANY, duration=NUMBER, frame_dt=st.one_of(st.none(), NUMBER),
       friction=st.one_of(NUMBER, ANY, st.tuples(NUMBER, NUMBER)), margin=st.one_of(st.none(), NUMBER),
       integrator=st.sampled_from(["midpoint", "euler", "rk4", "", 3]),
       solver=st.sampled_from(["cond", "SAP", "lagged", "similar", "pgs", "incp", "magic", None, 1]),
       linear=st.sampled_from(["auto", "pcg", "direct", "qr"]), linear_tol=NUMBER)
def test_scene_parameters(dt, gravity, duration, frame_dt, friction, margin, integrator, solver, linear,
                          linear_tol):
    scene = _outcome(fc.Scene, dt=dt, gravity=gravity, duration=duration, frame_dt=frame_dt, friction=friction,
                     contact_margin=margin, integrator=integrator, solver=solver, linear_solver=linear,
                     linear_tol=linear_tol)
    if scene is not None:
        assert 0 < scene.dt < math.inf and np.isfinite(scene.gravity).all() and scene.gravity.shape == (3,)
        assert scene.solver in ("cond", "sap", "lagged", "similar", "pgs", "incp")


@FUZZ
@given(friction=st.one_of(st.none(), NUMBER, ANY, st.tuples(NUMBER, NUMBER)), restitution=NUMBER,
       stiffness=st.one_of(st.none(), NUMBER), tau_d=st.one_of(st.none(), NUMBER),
       stiction=st.one_of(st.none(), NUMBER), sigma=st.one_of(st.none(), NUMBER), position=ANY, rotation=ANY,
       velocity=ANY, pair_friction=st.one_of(st.none(), NUMBER, ANY))
def test_contact_and_placement_parameters(friction, restitution, stiffness, tau_d, stiction, sigma, position,
                                          rotation, velocity, pair_friction):
    scene = fc.Scene()
    mat = fc.Material(1e5, 0.3, 1000.0)
    _outcome(scene.add_fem_body, fc.meshes.box((0.1, 0.1, 0.1), 1), mat, position=position, rotation=rotation,
             velocity=velocity, name="a")
    _outcome(scene.add_obstacle, fc.shapes.HalfSpace(), position=position, rotation=rotation, friction=friction,
             restitution=restitution, stiffness=stiffness, tau_d=tau_d, stiction_tolerance=stiction, sigma=sigma,
             name="ground")
    _outcome(scene.set_contact, "a", "ground", friction=pair_friction, restitution=restitution)
    _outcome(scene.add_rigid_body, fc.shapes.Sphere(0.05), density=1000.0, position=position, rotation=rotation,
             velocity=velocity, angular_velocity=velocity, name="ball")
    for body in scene.all_bodies:
        assert np.isfinite(body.positions if hasattr(body, "positions") else body.position).all()


COND_KEYS = ["operator", "omega", "step", "recycle", "chebyshev", "chebyshev_start", "rho", "rho_adapt",
             "under_relaxation", "tol", "max_iter", "warm_start", "restitution", "recovery", "max_recovery_speed",
             "virtual_gain", "rigid_gain", "contact_free", "tolerance", "iterations"]


@FUZZ
@given(options=st.dictionaries(st.one_of(st.sampled_from(COND_KEYS), st.text(max_size=5)),
                               st.one_of(ANY, st.sampled_from(["strict", "proximal", "bb", "frobenius", "linear"])),
                               max_size=5))
def test_cond_solver_options(options):
    opts = _outcome(CondOptions.from_dict, options)
    if opts is not None:
        assert opts.tol > 0 and opts.max_iter >= 1 and opts.operator in ("strict", "proximal")


@FUZZ
@given(selector=st.one_of(st.lists(st.integers(), max_size=6), st.lists(st.booleans(), max_size=10),
                          st.lists(st.floats(), max_size=3), st.integers(-3, 10), st.sampled_from(
                              ["x < 0", "z > 0.09", "abs(x) < 1", "x", "x <", "y > 1", "(x > 0) & (y > 0)"])),
       value=st.one_of(ANY, hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=5),
                                       elements=st.floats(allow_nan=True, allow_infinity=True))),
       kind=st.sampled_from(["velocity", "position", "force", "pin"]))
def test_node_selections_and_drives(selector, value, kind):
    scene = fc.Scene()
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), fc.Material(1e5, 0.3, 1000.0), name="a")
    if kind == "velocity":
        idx = _outcome(body.drive, selector, velocity=lambda t: value)
    elif kind == "position":
        idx = _outcome(body.drive, selector, position=lambda t, x0: value)
    elif kind == "force":
        idx = _outcome(body.add_force, value, nodes=selector)
    else:
        idx = _outcome(body.pin, selector)
    if idx is not None:
        assert len(idx) > 0 and idx.min() >= 0 and idx.max() < body.n_nodes


@FUZZ
@given(points=st.one_of(ANY, hnp.arrays(np.float64, st.tuples(st.integers(0, 6), st.integers(2, 4)), elements=COORD)),
       radius=st.one_of(NUMBER, ANY), e=st.one_of(st.none(), NUMBER), nu=st.one_of(st.none(), NUMBER),
       density=st.one_of(st.none(), NUMBER), shear=st.one_of(st.none(), NUMBER), velocity=ANY,
       rest=st.sampled_from(["initial", "straight", "curved", None]), d1=st.one_of(st.none(), ANY))
def test_rod_parameters(points, radius, e, nu, density, shear, velocity, rest, d1):
    rod = _outcome(fc.Scene().add_rod, points, radius, youngs_modulus=e, poisson_ratio=nu, density=density,
                   shear_modulus=shear, velocity=velocity, rest_shape=rest, d1=d1, name="r")
    if rod is not None:
        assert np.isfinite(rod.points).all() and len(rod.points) >= 2 and rod.radius > 0


SHAPES = st.one_of(                # (constructor, its arguments): made in the test, where errors are caught
    st.tuples(st.just(fc.shapes.Box), st.tuples(ANY)), st.tuples(st.just(fc.shapes.Sphere), st.tuples(ANY)),
    st.tuples(st.just(fc.shapes.Capsule), st.tuples(NUMBER, NUMBER)),
    st.tuples(st.just(fc.shapes.Cylinder), st.tuples(NUMBER, NUMBER)),
    st.tuples(st.just(fc.shapes.HalfSpace), st.tuples(ANY, st.one_of(NUMBER, ANY))))


@FUZZ
@given(shape=st.one_of(SHAPES, ANY), density=st.one_of(st.none(), NUMBER), mass=st.one_of(st.none(), NUMBER),
       inertia=st.one_of(st.none(), ANY), position=ANY, rotation=ANY, omega=ANY,
       joint=st.sampled_from(["weld", "ball", "hinge", "prismatic", "screw"]), anchor=st.one_of(st.none(), ANY),
       axis=st.one_of(st.none(), ANY), limits=st.one_of(st.none(), ANY, st.tuples(NUMBER, NUMBER)),
       stiffness=st.one_of(st.none(), NUMBER))
def test_rigid_body_and_joint_parameters(shape, density, mass, inertia, position, rotation, omega, joint, anchor,
                                         axis, limits, stiffness):
    scene = fc.Scene()
    if isinstance(shape, tuple):
        shape = _outcome(shape[0], *shape[1])
    body = _outcome(scene.add_rigid_body, shape, density=density, mass=mass, inertia=inertia, position=position,
                    rotation=rotation, angular_velocity=omega, name="r")
    if body is None:
        return
    assert body.mass > 0 and np.isfinite(body.inertia).all() and np.isfinite(body.position).all()
    spec = _outcome(scene.add_joint, joint, None, "r", anchor=anchor, axis=axis, limits=limits, stiffness=stiffness)
    if spec is not None:
        assert np.isfinite(spec.anchor).all() and abs(np.linalg.norm(spec.axis) - 1) < 1e-9

"""The bad-input catalogue: every row is one bad input, refused before any step runs with our own
error type and a message that names the offending item (and says how to fix it).

Rows run no Taichi kernel: meshes, materials and scene settings are refused while the Scene is
built; overlaps, drive shapes and solver options at the latest when the Simulator is made (which
steps nothing); the CLI refuses its options before the backend starts.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import meshio
import numpy as np
import pytest

import femcontact as fc
from femcontact.sweep import parse_params
from femcontact.cli import build_parser
from femcontact.errors import FemcontactError, MeshError, ParameterError
from femcontact.meshes import load

ROOT = Path(__file__).resolve().parents[2]
MAT = fc.Material(1e5, 0.3, 1000.0)
TET = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])


# ----------------------------------------------------------------------------- helpers
def _body(mesh, **kw):
    return fc.Scene().add_fem_body(mesh, MAT, name="b", **kw)


def _cube_scene(**scene_kw) -> tuple[fc.Scene, object]:
    scene = fc.Scene(**scene_kw)
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), MAT, position=(0, 0, 0.05), name="cube")
    return scene, body


def _write(path: Path, points, cells) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meshio.write(path, meshio.Mesh(np.asarray(points, float), cells))
    return path


def _icosphere():
    from femcontact.geometry.shapes import Sphere

    v, f = Sphere(1.0).surface()
    return np.asarray(v, float), np.asarray(f, np.int64)


def _nonmanifold_stl(tmp: Path) -> Path:
    """Two closed tetrahedron surfaces that share one edge: closed, but that edge has four triangles."""
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, -1, 0], [0, 0, -1.0]])
    faces = []
    for i, j, k, m in ((0, 1, 2, 3), (0, 1, 4, 5)):
        faces += [[j, k, m], [i, m, k], [i, j, m], [i, k, j]]
    return _write(tmp / "fin.stl", v, [("triangle", np.array(faces))])


def _open_stl(tmp: Path) -> Path:
    v, f = _icosphere()
    return _write(tmp / "open.stl", v, [("triangle", f[:-3])])


def _nan_vtu(tmp: Path) -> Path:
    box = fc.meshes.box((1, 1, 1), 2)
    v = box.vertices.copy()
    v[5, 2] = np.nan
    return _write(tmp / "nan.vtu", v, [("tetra", box.tets)])


def _truncated_msh(tmp: Path) -> Path:
    box = fc.meshes.box((1, 1, 1), 3)
    p = _write(tmp / "cut.msh", box.vertices, [("tetra", box.tets)])
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return p


def _empty_file(tmp: Path) -> Path:
    p = tmp / "empty.vtu"
    p.write_bytes(b"")
    return p


def _with_nan(points: np.ndarray, k: int) -> np.ndarray:
    out = np.array(points, float)
    out[k, 1] = np.nan
    return out


def _renamed_body(scene: fc.Scene) -> None:
    scene.add_fem_body(fc.meshes.box(), MAT, name="cube")


def _hanging_ply(tmp: Path):
    """A PLY file cut inside its header, after a comment: meshio's reader loops forever on it."""
    from femcontact.meshes import io as mesh_io

    p = tmp / "cut.ply"
    p.write_bytes(b"ply\nformat binary_little_endian 1.0\ncomment Created by ")
    limit, mesh_io.READ_TIMEOUT_S = mesh_io.READ_TIMEOUT_S, 1.0
    try:
        load(p)
    finally:
        mesh_io.READ_TIMEOUT_S = limit


def _rod(points, radius: float = 0.01):
    return fc.Scene().add_rod(points, radius, youngs_modulus=1e6, density=1000.0, name="cable")


def _sim(scene):
    fc.Simulator(scene)        # raises before any step (and before any kernel runs)


def _overlapping_cubes():
    scene = fc.Scene()
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 3), MAT, name="left")
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 3), MAT, position=(0.02, 0, 0), name="right")
    return scene


def _cube_in_ground():
    scene = fc.Scene()
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), MAT, position=(0, 0, -0.03), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    return scene


def _rod_scene(z: float = 0.01, radius: float = 0.01):
    """A straight 0.3 m cable of 30 segments along x at height z over the ground."""
    scene = fc.Scene()
    pts = np.stack([np.linspace(-0.15, 0.15, 31), np.zeros(31), np.full(31, z)], axis=1)
    scene.add_rod(pts, radius, youngs_modulus=1e6, density=1000.0, name="cable")
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    return scene, pts


def _rod_through_cube():
    scene, _ = _rod_scene(z=0.2)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 3), MAT, position=(0, 0, 0.2), name="cube")
    return scene


def _crossing_rods():
    scene, pts = _rod_scene(z=0.1)
    scene.add_rod(pts[:, [1, 0, 2]], 0.01, youngs_modulus=1e6, density=1000.0, name="other")
    return scene


def _ball_in_cube():
    scene = fc.Scene()
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 3), MAT, position=(0, 0, 0.05), name="cube")
    scene.add_rigid_body(fc.shapes.Sphere(0.03), density=500.0, position=(0, 0, 0.05), name="ball")
    return scene


def _with_option(solver: str, **options):
    scene, _ = _cube_scene(solver=solver, solver_options=options)
    return scene


def _named_file(tmp: Path, name: str) -> Path:
    """A file that exists and is not a scene script (a mesh, a note)."""
    path = tmp / name
    path.write_text("not a scene\n")
    return path


def _scene_file(tmp: Path, text: str) -> Path:
    p = tmp / "scene.py"
    p.write_text(text)
    return p


def _cli(tmp: Path, *argv: str, scene: Path | None = None, out: Path | None = None) -> None:
    scene = scene or ROOT / "scenes" / "free_fall.py"
    out = out or tmp / "out"
    args = build_parser().parse_args(["run", str(scene), "--out", str(out), "--no-progress", *argv])
    args.func(args)


def _a_file(tmp: Path) -> Path:
    p = tmp / "taken"
    p.write_text("")
    return p


# ----------------------------------------------------------------------------- the catalogue
# (id, make(tmp_path) -> raises, exception type, regex fragment naming the item and the fix)
CASES = [
    # meshes
    ("mesh-empty", lambda t: _body(fc.meshes.TetMesh(np.zeros((0, 3)), np.zeros((0, 4), int))),
     MeshError, r"mesh of body 'b' has no tetrahedra; give a volume mesh"),
    ("mesh-empty-file", lambda t: load(_empty_file(t)), MeshError, r"mesh file is empty: .*empty\.vtu"),
    ("mesh-missing-file", lambda t: load(t / "nope.msh"), MeshError, r"mesh file not found: .*nope\.msh"),
    ("mesh-nan-coordinates", lambda t: _body(fc.meshes.TetMesh(_with_nan(TET, 2), [[0, 1, 2, 3]])),
     MeshError, r"mesh of body 'b': 1 vertices have NaN .* vertex 2 .*fix or remove"),
    ("mesh-nan-in-file", lambda t: load(_nan_vtu(t)), MeshError, r"nan: 1 vertices have NaN .* vertex 5"),
    ("mesh-inverted-tet", lambda t: _body(fc.meshes.TetMesh(np.vstack([TET, TET + [2, 0, 0]]),
                                                            [[0, 1, 2, 3], [5, 4, 6, 7]])),
     MeshError, r"tet 1 of body 'b' is inverted .*swap two vertices"),
    ("mesh-zero-volume-tet", lambda t: _body(fc.meshes.TetMesh(np.vstack([TET, [[2, 0, 0], [3, 0, 0], [4, 0, 0],
                                                                               [5, 0, 0]]]),
                                                               [[0, 1, 2, 3], [4, 5, 6, 7]])),
     MeshError, r"tet 1 of body 'b' has zero volume.*remove or repair"),
    ("mesh-degenerate-on-load", lambda t: fc.meshes.validate(fc.meshes.TetMesh(
        np.vstack([TET, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 1e-9]]]), [[0, 1, 2, 3], [4, 5, 6, 7]],
        name="sliver")),
     MeshError, r"sliver: 1 degenerate tets .*indices \[1\].*Remesh"),
    ("mesh-nonmanifold-surface", lambda t: load(_nonmanifold_stl(t)), MeshError,
     r"surface of fin is not manifold: .*Separate touching parts"),
    ("mesh-open-surface", lambda t: load(_open_stl(t)), MeshError,
     r"surface of open is not closed \(open\).*close the holes"),
    ("mesh-wrong-cell-types", lambda t: load(_write(t / "lines.vtu", TET, [("line", [[0, 1], [1, 2], [2, 3]])])),
     MeshError, r"lines\.vtu has no volume cells and no surface triangles .*found: line \(3\); "
                r"give a file with tetrahedra"),
    ("mesh-single-triangle", lambda t: load(_write(t / "flat.vtu", TET[:3], [("triangle", [[0, 1, 2]])])),
     MeshError, r"surface of flat has 1 triangles; a closed surface needs at least 4: give a closed surface"),
    ("mesh-huge-coordinates", lambda t: _body(fc.meshes.box((1e7, 1e7, 1e7), 1)),
     MeshError, r"mesh of body 'b': .*farther than 1e\+06 m .*scale the mesh"),
    ("mesh-huge-placement", lambda t: _body(fc.meshes.box((0.1, 0.1, 0.1), 1), position=(1e9, 0, 0)),
     MeshError, r"body 'b' placed at position \[1000000000\.0, 0\.0, 0\.0\]: .*farther than 1e\+06 m"),
    ("mesh-duplicate-points", lambda t: _body(fc.meshes.TetMesh(np.vstack([TET, TET + [1, 0, 0]]),
                                                                [[0, 1, 2, 3], [4, 5, 6, 7]])),
     MeshError, r"vertices 1 and 4 of body 'b' are duplicate points .*merge them with femcontact\.meshes\.validate"),
    ("mesh-unused-vertex", lambda t: _body(fc.meshes.TetMesh(np.vstack([TET, [[5.0, 5.0, 5.0]]]), [[0, 1, 2, 3]])),
     MeshError, r"vertex 4 of body 'b' belongs to no tet .*remove them"),
    ("mesh-index-out-of-range", lambda t: _body(fc.meshes.TetMesh(TET, [[0, 1, 2, 9]])),
     MeshError, r"tet 0 of body 'b' refers to a vertex outside 0\.\.3; tets index rows"),
    ("mesh-unknown-suffix", lambda t: load(_write(t / "m.vtu", TET, [("tetra", [[0, 1, 2, 3]])]).rename(t / "m.xyz")),
     MeshError, r"unknown mesh file type '\.xyz' .*supported: "),
    ("mesh-truncated-file", lambda t: load(_truncated_msh(t)), MeshError, r"could not read .*cut\.msh .*corrupt"),
    ("mesh-reader-hangs", _hanging_ply, MeshError,
     r"could not read .*cut\.ply .*did not finish within 1 s"),
    ("mesh-not-a-tetmesh", lambda t: fc.Scene().add_fem_body("cube.vtu", MAT, name="b"),
     MeshError, r"body 'b': expected a femcontact\.meshes\.TetMesh, got str"),
    # materials
    ("material-E-zero", lambda t: fc.Material(0.0, 0.3, 1000.0), ParameterError, r"youngs_modulus must be > 0 Pa"),
    ("material-E-negative", lambda t: fc.Material(-1e5, 0.3, 1000.0), ParameterError,
     r"youngs_modulus must be > 0 Pa, got -100000"),
    ("material-nu-half", lambda t: fc.Material(1e5, 0.5, 1000.0), ParameterError,
     r"poisson_ratio must lie in \(-1, 0\.5\), got 0\.5 .*use e\.g\. 0\.49"),
    ("material-nu-minus-one", lambda t: fc.Material(1e5, -1.0, 1000.0), ParameterError,
     r"poisson_ratio must lie in \(-1, 0\.5\), got -1\.0 \(-1 and below give a negative"),
    ("material-density-zero", lambda t: fc.Material(1e5, 0.3, 0.0), ParameterError, r"density must be > 0 kg/m\^3"),
    ("material-nan", lambda t: fc.Material(float("nan"), 0.3, 1000.0), ParameterError,
     r"youngs_modulus must be a finite number, got nan"),
    ("material-string", lambda t: fc.Material(1e5, "0.3", 1000.0), ParameterError,
     r"poisson_ratio must be a finite number, got '0\.3'"),
    ("material-bool", lambda t: fc.Material(True, 0.3, 1000.0), ParameterError,
     r"youngs_modulus must be a finite number, got True"),
    ("material-int-beyond-float", lambda t: fc.Material(10**400, 0.3, 1000.0), ParameterError,
     r"youngs_modulus must be a finite number"),
    ("material-negative-damping", lambda t: fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=-1.0), ParameterError,
     r"rayleigh_alpha must be >= 0"),
    ("material-wrong-type", lambda t: fc.Scene().add_fem_body(fc.meshes.box(), "rubber", name="b"),
     ParameterError, r"body 'b': expected a femcontact\.Material, got str"),
    # scene
    ("scene-overlapping-bodies", lambda t: _sim(_overlapping_cubes()), ParameterError,
     r"body 'left' and body 'right' overlap at the start: .*move one of them"),
    ("scene-body-in-ground", lambda t: _sim(_cube_in_ground()), ParameterError,
     r"body 'cube' and obstacle 'ground' overlap at the start: .* m inside 'ground'"),
    ("scene-rigid-inside-body", lambda t: _sim(_ball_in_cube()), ParameterError,
     r"rigid body 'ball' and body 'cube' overlap at the start"),
    ("scene-rod-in-ground", lambda t: _sim(_rod_scene(z=-0.05)[0]), ParameterError,
     r"rod 'cable' and obstacle 'ground' overlap at the start: .* 0\.06 m inside 'ground'"),
    ("scene-rod-through-body", lambda t: _sim(_rod_through_cube()), ParameterError,
     r"rod 'cable' and body 'cube' overlap at the start"),
    ("scene-rods-crossing", lambda t: _sim(_crossing_rods()), ParameterError,
     r"rod 'cable' and rod 'other' overlap at the start"),
    ("scene-selection-matches-nothing", lambda t: _cube_scene()[1].pin("x < -1"), ParameterError,
     r"pin on 'cube': the node selection 'x < -1' matches no node; the body spans x in \[-0\.05, 0\.05\]"),
    ("scene-force-selection-empty", lambda t: _cube_scene()[1].add_force((0, 0, 1), nodes=[]), ParameterError,
     r"force on 'cube': the node selection \[\] matches no node"),
    ("scene-bad-predicate", lambda t: _cube_scene()[1].pin("w < 1"), ParameterError,
     r"cannot evaluate node predicate 'w < 1'"),
    ("scene-drive-wrong-shape", lambda t: _cube_scene()[1].drive("z > 0.09", velocity=lambda t: (0.0, 1.0)),
     ParameterError, r"drive on 'cube': the velocity function returned shape \(2,\) at t=0; it must return "
                     r"shape \(3,\) or \(4, 3\)"),
    ("scene-position-drive-wrong-shape", lambda t: _cube_scene()[1].drive(
        "z > 0.09", position=lambda t, x0: x0[0]), ParameterError,
     r"drive on 'cube': the position function returned shape \(3,\) at t=0; it must return shape \(4, 3\)"),
    ("scene-drive-raises", lambda t: _cube_scene()[1].drive("z > 0.09", velocity=lambda t: 1 / t),
     ParameterError, r"drive on 'cube': the velocity function failed at t=0 \(ZeroDivisionError"),
    ("scene-dt-zero", lambda t: fc.Scene(dt=0.0), ParameterError, r"dt must be a positive number, got 0\.0"),
    ("scene-dt-negative", lambda t: fc.Scene(dt=-1e-3), ParameterError, r"dt must be a positive number, got -0\.001"),
    ("scene-unknown-solver", lambda t: fc.Scene(solver="magic"), ParameterError,
     r"unknown solver 'magic'; choose one of cond, sap, lagged, similar"),
    ("scene-unknown-integrator", lambda t: fc.Scene(integrator="verlet"), ParameterError,
     r"unknown integrator 'verlet'; choose one of"),
    ("scene-unknown-cond-option", lambda t: _sim(_with_option("cond", tolerance=1e-6)), ParameterError,
     r"unknown COND option\(s\) 'tolerance'; known options: .*tol"),
    ("scene-unknown-sap-option", lambda t: _sim(_with_option("sap", tol=1e-6)), ParameterError,
     r"unknown option\(s\) \['tol'\] for solver 'sap'; known: "),
    ("scene-option-wrong-type", lambda t: _sim(_with_option("cond", max_iter="100")), ParameterError,
     r"COND option max_iter must be an integer, got '100'"),
    ("scene-option-wrong-choice", lambda t: _sim(_with_option("cond", step="newton")), ParameterError,
     r"COND option step must be 'frobenius' or 'bb'"),
    ("scene-gravity-shape", lambda t: fc.Scene(gravity=(0, -9.81)), ParameterError,
     r"gravity must be three finite numbers"),
    ("scene-negative-friction", lambda t: _cube_scene()[0].add_obstacle(fc.shapes.HalfSpace(), friction=-0.1),
     ParameterError, r"friction"),
    ("scene-no-bodies", lambda t: _sim(fc.Scene()), ParameterError, r"the scene has no bodies; add one with"),
    ("scene-duplicate-name", lambda t: _renamed_body(_cube_scene()[0]),
     ParameterError, r"a body or obstacle named 'cube' already exists"),
    ("rod-duplicate-points", lambda t: _rod([[0, 0, 0], [0, 0, 0], [1, 0, 0]]), ParameterError,
     r"rod 'cable': segment 0 has zero length \(points 0 and 1 coincide\); remove duplicate points"),
    ("rod-radius-zero", lambda t: _rod([[0, 0, 0], [1, 0, 0]], 0.0), ParameterError,
     r"rod 'cable': radius \(m\) must be a positive number, got 0\.0"),
    ("rod-spin-drive-wrong-shape", lambda t: _rod(fc.meshes.rod_straight((0, 0, 0), (1, 0, 0), 4)).drive(
        segments=[-1], angular_velocity=lambda t: (0.0, 0.0)), ParameterError,
     r"angular_velocity drive on rod 'cable': the velocity function returned shape \(2,\)"),
    # command line (femcontact run ...)
    ("cli-missing-scene", lambda t: _cli(t, scene=t / "nope.py"), FemcontactError,
     r"scene script '.*nope\.py' not found; give the path of a \.py file"),
    ("cli-scene-is-a-mesh", lambda t: _cli(t, scene=_named_file(t, "cube.vtu")), FemcontactError,
     r"scene script '.*cube\.vtu' is not a \.py file; .* femcontact\.meshes\.load\('.*cube\.vtu'\) inside build"),
    ("cli-scene-is-text", lambda t: _cli(t, scene=_named_file(t, "notes.txt")), FemcontactError,
     r"scene script '.*notes\.txt' is not a \.py file; give a Python script that defines build\(\)"),
    ("cli-scene-without-build", lambda t: _cli(t, scene=_scene_file(t, "x = 1\n")), FemcontactError,
     r"scene\.py' defines no build\(\) function; add 'def build\(\) -> femcontact\.Scene:'"),
    ("cli-scene-syntax-error", lambda t: _cli(t, scene=_scene_file(t, "def build(:\n")), FemcontactError,
     r"scene\.py' has a syntax error at line 1: .*fix it"),
    ("cli-build-returns-no-scene", lambda t: _cli(t, scene=_scene_file(t, "def build():\n    pass\n")),
     FemcontactError, r"build\(\) in .*scene\.py returned NoneType, not a femcontact\.Scene; end build\(\) with"),
    ("cli-steps-zero", lambda t: _cli(t, "--steps", "0"), FemcontactError, r"--steps must be at least 1, got 0"),
    ("cli-steps-negative", lambda t: _cli(t, "--steps", "-3"), FemcontactError, r"--steps must be at least 1, got -3"),
    ("cli-dt-zero", lambda t: _cli(t, "--dt", "0"), ParameterError, r"--dt \(step size in s\) must be a positive"),
    ("cli-dt-negative", lambda t: _cli(t, "--dt", "-0.01"), ParameterError, r"--dt .* must be a positive number"),
    ("cli-duration-negative", lambda t: _cli(t, "--duration", "-1"), ParameterError,
     r"--duration .* must be a positive"),
    ("cli-every-zero", lambda t: _cli(t, "--every", "0"), FemcontactError, r"--every must be at least 1"),
    ("cli-out-unwritable", lambda t: _cli(t, out=_a_file(t) / "sub"), FemcontactError,
     r"--out '.*taken/sub' is not writable .*choose a folder you can write to"),
    ("cli-out-is-a-file", lambda t: _cli(t, out=_a_file(t)), FemcontactError,
     r"--out '.*taken' is a file, not a folder"),
    ("cli-unknown-solver", lambda t: _cli(t, "--solver", "magic", "--steps", "1"), ParameterError,
     r"unknown solver 'magic'"),
    # sweeps (femcontact.sweep / femcontact sweep): refused before any run
    ("sweep-unknown-parameter", lambda t: fc.sweep(ROOT / "tests/helpers/sweep_scene.py", {"stiffness": [1, 2]},
                                                   out=t / "s"),
     ParameterError, r"'stiffness' is not a keyword of build\(\).*friction, youngs_modulus"),
    ("sweep-empty-list", lambda t: fc.sweep(ROOT / "tests/helpers/sweep_scene.py", {"friction": []}, out=t / "s"),
     ParameterError, r"empty list"),
    ("sweep-empty-range", lambda t: parse_params(["friction=0.1:1:0"]), ParameterError, r"friction.*empty"),
]


def test_catalogue_is_large_and_distinct():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 25


@pytest.mark.parametrize("make, error, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused(tmp_path, monkeypatch, make, error, words):
    from femcontact import simulator

    def no_step(self, *args, **kwargs):   # a bad input must be refused before any step runs
        raise AssertionError("a step ran")

    monkeypatch.setattr(simulator.Simulator, "step", no_step)
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # repairs on load say so by warning; not what is tested here
        with pytest.raises(error, match=words):
            make(tmp_path)


def test_touching_and_excused_bodies_are_not_called_overlapping():
    """The overlap check refuses overlaps only: resting contact, a shallow overlap (below half an
    edge), and overlapping pairs whose contact is disabled or that are attached all pass."""
    from femcontact.spec.overlap import check_initial_overlap

    scene = fc.Scene()
    cube = fc.meshes.box((0.1, 0.1, 0.1), 3)
    scene.add_fem_body(cube, MAT, position=(0, 0, 0.05), name="bottom")            # on the ground
    scene.add_fem_body(cube, MAT, position=(0.01, 0, 0.149), name="top")           # 1 mm into "bottom"
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(0.02), density=500.0, position=(0.2, 0, 0.02), name="ball")
    check_initial_overlap(scene)
    scene.add_fem_body(cube, MAT, position=(0.02, 0, 0.05), name="ghost")          # deep inside "bottom"
    with pytest.raises(ParameterError, match="'ghost' and body 'bottom' overlap|'bottom' and body 'ghost' overlap"):
        check_initial_overlap(scene)
    scene.set_contact("ghost", "bottom", enabled=False)
    scene.set_contact("ghost", "ground", enabled=False)
    scene.set_contact("ghost", "top", enabled=False)
    check_initial_overlap(scene)


def test_rods_resting_or_excused_are_not_called_overlapping():
    """A cable lying on the ground (centre line one radius up, or on the ground plane: its radius
    is within the tolerance) passes; a crossing pair passes once their contact is disabled."""
    from femcontact.spec.overlap import check_initial_overlap

    for z in (0.01, 0.0):
        check_initial_overlap(_rod_scene(z=z)[0])
    scene = _crossing_rods()
    scene.set_contact("cable", "other", enabled=False)
    check_initial_overlap(scene)


def test_hanging_reader_is_cut_off_outside_the_main_thread(tmp_path):
    """A Dask worker or a GUI loads meshes in a worker thread, where SIGALRM never arrives: the
    reader is interrupted in that thread and the caller gets its error in time, with no thread left behind."""
    import threading
    import time

    outcome = {}

    def load_in_thread():
        start = time.monotonic()
        try:
            _hanging_ply(tmp_path)
        except MeshError as exc:
            outcome["error"] = str(exc)
        outcome["seconds"] = time.monotonic() - start

    worker = threading.Thread(target=load_in_thread)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the load hung in a non-main thread"
    assert "did not finish within 1 s" in outcome["error"], outcome
    assert outcome["seconds"] < 10, outcome
    for t in threading.enumerate():
        if t.name.startswith("femcontact"):
            t.join(2)
            assert not t.is_alive(), f"thread {t.name} was left running"


def test_reader_errors_pass_through_the_thread_watchdog(tmp_path):
    """Off the main thread, a reader's own error still becomes the MeshError naming the file."""
    import threading

    bad = tmp_path / "bad.vtu"
    bad.write_text("<VTKFile>not a mesh")
    errors = []
    worker = threading.Thread(target=lambda: errors.append(pytest.raises(MeshError, load, bad).value))
    worker.start()
    worker.join(60)
    assert errors and "bad.vtu" in str(errors[0]), errors

"""Mesh import pipeline: formats, tetrahedralization, validation, surfaces, primitives, CLI."""
from __future__ import annotations

import argparse
import io
import sys
import time
import warnings

import meshio
import numpy as np
import pytest

from femcontact.errors import MeshError, ParameterError
from femcontact.meshes import (
    MeshWarning, TetMesh, boundary_faces, box, cylinder, data_file, finger, load, plate, quality_report,
    rod_arc, rod_helix, rod_straight, save, sphere, surface_area, surface_vertices, validate,
)
from femcontact.meshes.cli import add_mesh_commands, mesh_convert, mesh_info
from femcontact.meshes.io import _gather_tets

try:
    import tetgen  # noqa: F401
    HAVE_TETGEN = True
except ImportError:
    HAVE_TETGEN = False
needs_tetgen = pytest.mark.skipif(not HAVE_TETGEN, reason="tetgen not installed (pip install 'femcontact[meshing]')")
try:
    import h5py  # noqa: F401
    HAVE_H5PY = True
except ImportError:
    HAVE_H5PY = False


def icosphere_surface(radius=1.0, nsub=3):
    """Closed triangulated sphere (vertices, faces), built by subdividing an icosahedron."""
    t = (1 + 5**0.5) / 2
    v = np.array([[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
                  [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]], float)
    f = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
                  [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
                  [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    for _ in range(nsub):
        verts = list(v)
        cache = {}

        def mid(a, b):
            k = (min(a, b), max(a, b))
            if k not in cache:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                cache[k] = len(verts) - 1
            return cache[k]

        nf = []
        for a, b, c in f:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            nf += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        v, f = np.array(verts), np.array(nf)
    return radius * v, f


def hex_grid(n=(2, 3, 2), size=(2.0, 3.0, 1.0)):
    xs = [np.linspace(0, s, k + 1) for s, k in zip(size, n)]
    X, Y, Z = np.meshgrid(*xs, indexing="ij")
    pts = np.stack([X.ravel(), Y.ravel(), Z.ravel()], 1)
    nx, ny, nz = n

    def vid(i, j, k):
        return (i * (ny + 1) + j) * (nz + 1) + k

    i, j, k = (a.ravel() for a in np.meshgrid(*map(np.arange, n), indexing="ij"))
    hexes = np.stack([vid(i, j, k), vid(i + 1, j, k), vid(i + 1, j + 1, k), vid(i, j + 1, k),
                      vid(i, j, k + 1), vid(i + 1, j, k + 1), vid(i + 1, j + 1, k + 1), vid(i, j + 1, k + 1)], 1)
    return pts, hexes


# ----------------------------------------------------------------------------- formats

FORMATS = [
    ("gmsh22.msh", "gmsh22"), ("gmsh4.msh", "gmsh"), ("m.vtu", None), ("m.vtk", None),
    ("m.mesh", "medit"), ("m.inp", "abaqus"), ("m.xdmf", None),
]


@pytest.mark.parametrize("fname,fmt", FORMATS, ids=[f[0] for f in FORMATS])
def test_format_round_trip(tmp_path, fname, fmt):
    if fname.endswith(".xdmf") and not HAVE_H5PY:
        pytest.skip("xdmf needs h5py (pip install h5py)")
    ref = box((1.0, 2.0, 3.0), (2, 3, 4))
    path = tmp_path / fname
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meshio.write(path, meshio.Mesh(ref.vertices, [("tetra", ref.tets)]), file_format=fmt)
    m = load(path)
    assert isinstance(m, TetMesh)
    assert m.n_vertices == 3 * 4 * 5 and m.n_tets == 6 * 24
    assert m.volume() == pytest.approx(6.0, rel=1e-12)
    assert (m.signed_volumes() > 0).all()


@pytest.mark.parametrize("suffix", [".vtu", ".msh", ".inp", ".mesh"])
def test_save_then_load(tmp_path, suffix):
    ref = sphere(0.05, 4)
    save(ref, tmp_path / f"s{suffix}")
    m = load(tmp_path / f"s{suffix}")
    assert (m.n_vertices, m.n_tets) == (ref.n_vertices, ref.n_tets)
    assert m.volume() == pytest.approx(ref.volume(), rel=1e-9)


def test_save_surface_format_writes_boundary(tmp_path):
    ref = box((1, 1, 1), 3)
    save(ref, tmp_path / "b.stl")
    s = meshio.read(tmp_path / "b.stl")
    assert len(s.cells_dict["triangle"]) == len(boundary_faces(ref)) == 6 * 9 * 2


def test_scale_millimetres_to_metres(tmp_path):
    mm = box((100.0, 50.0, 20.0), (4, 2, 1))
    save(mm, tmp_path / "mm.vtu")
    m = load(tmp_path / "mm.vtu", scale=1e-3)
    assert m.volume() == pytest.approx(0.1 * 0.05 * 0.02, rel=1e-12)
    r = quality_report(m)
    assert np.allclose(np.subtract(r.bbox_max, r.bbox_min), [0.1, 0.05, 0.02])
    with pytest.raises(ParameterError):
        load(tmp_path / "mm.vtu", scale=0.0)


# ----------------------------------------------------------------------------- cell conversion

def test_hex_to_tet_keeps_volume_and_conforms(tmp_path):
    pts, hexes = hex_grid((2, 3, 2), (2.0, 3.0, 1.0))
    # shuffle global numbering so the lowest-index diagonals vary from cell to cell
    perm = np.random.default_rng(0).permutation(len(pts))
    inv = np.argsort(perm)
    meshio.write(tmp_path / "h.vtu", meshio.Mesh(pts[perm], [("hexahedron", inv[hexes])]))
    m = load(tmp_path / "h.vtu")
    assert m.n_tets == 6 * len(hexes) and m.n_vertices == len(pts)
    assert m.volume() == pytest.approx(6.0, rel=1e-14, abs=0)
    assert (m.signed_volumes() > 0).all()
    # conforming: internal faces pair up, so the boundary is exactly the box surface
    assert surface_area(m) == pytest.approx(2 * (2 * 3 + 3 * 1 + 2 * 1), rel=1e-13)


def test_wedges_pyramids_and_quadratic_tets(tmp_path):
    pts, hexes = hex_grid((2, 1, 1), (2.0, 1.0, 1.0))
    h0, h1 = hexes
    # first hex -> two wedges (split along the diagonal plane 0-2-6-4), second stays a hex
    w = np.array([[h0[0], h0[1], h0[2], h0[4], h0[5], h0[6]], [h0[0], h0[2], h0[3], h0[4], h0[6], h0[7]]])
    meshio.write(tmp_path / "mixed.vtu", meshio.Mesh(pts, [("wedge", w), ("hexahedron", h1[None])]))
    m = load(tmp_path / "mixed.vtu")
    assert m.volume() == pytest.approx(2.0, rel=1e-14)
    assert surface_area(m) == pytest.approx(2 * (2 + 2 + 1), rel=1e-13)
    # tetra10 -> linear tets, mid-edge nodes dropped
    ref = box((1, 1, 1), 2)
    e = [(0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3)]
    mids = np.concatenate([(ref.vertices[ref.tets[:, a]] + ref.vertices[ref.tets[:, b]]) / 2 for a, b in e])
    n0, m_t = ref.n_vertices, ref.n_tets
    t10 = np.column_stack([ref.tets] + [n0 + k * m_t + np.arange(m_t) for k in range(6)])
    meshio.write(tmp_path / "q.vtu", meshio.Mesh(np.vstack([ref.vertices, mids]), [("tetra10", t10)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeshWarning)  # mid-edge nodes shared by neighbours get merged
        q = load(tmp_path / "q.vtu")
    assert (q.n_vertices, q.n_tets) == (ref.n_vertices, ref.n_tets)
    assert q.volume() == pytest.approx(1.0, rel=1e-12)


def test_unsupported_cell_type_names_types():
    mm = meshio.Mesh(np.zeros((8, 3)), [("polyhedron8", np.arange(8)[None]), ("triangle", np.array([[0, 1, 2]]))])
    with pytest.raises(MeshError, match="polyhedron8.*found"):
        _gather_tets(mm, "x.vtu")


# ----------------------------------------------------------------------------- surfaces -> tets

@needs_tetgen
def test_tetrahedralized_sphere_volume_and_quality(tmp_path):
    v, f = icosphere_surface(1.0, nsub=4)
    meshio.write(tmp_path / "ball.stl", meshio.Mesh(v, [("triangle", f)]))
    m = load(tmp_path / "ball.stl", edge_length=0.25)
    exact = 4 / 3 * np.pi
    assert abs(m.volume() / exact - 1) < 0.02
    r = quality_report(m)
    assert r.n_inverted == 0 and (m.signed_volumes() > 0).all()
    assert r.min_volume_quality > 1e-3 and r.min_dihedral > 1.0
    assert r.max_edge < 0.25 * 1.6
    # max_volume refines: more tets, same volume
    m2 = load(tmp_path / "ball.stl", max_volume=0.0005)
    assert m2.n_tets > m.n_tets and abs(m2.volume() / exact - 1) < 0.02


@needs_tetgen
@pytest.mark.parametrize("suffix", [".obj", ".ply", ".off"])
def test_surface_formats_tetrahedralize(tmp_path, suffix):
    v, f = icosphere_surface(0.5, nsub=2)
    meshio.write(tmp_path / f"s{suffix}", meshio.Mesh(v, [("triangle", f)]))
    m = load(tmp_path / f"s{suffix}")
    assert m.volume() == pytest.approx(4 / 3 * np.pi * 0.125, rel=0.05)


def test_open_surface_is_refused(tmp_path):
    v, f = icosphere_surface(1.0, nsub=2)
    meshio.write(tmp_path / "open.stl", meshio.Mesh(v, [("triangle", f[:-2])]))
    if HAVE_TETGEN:
        with pytest.raises(MeshError, match="not closed"):
            load(tmp_path / "open.stl")
    from femcontact.meshes.surface import check_closed_surface
    with pytest.raises(MeshError, match=r"not closed \(open\).*boundary edges"):
        check_closed_surface(v, f[:-2])


def test_nonmanifold_surface_is_refused():
    from femcontact.meshes.surface import check_closed_surface
    v, f = icosphere_surface(1.0, nsub=1)
    v2 = np.vstack([v, [[3.0, 3.0, 3.0]]])
    a, b = f[0, 0], f[0, 1]
    f2 = np.vstack([f, [[b, a, len(v)], [a, b, len(v)]]])  # a fin hanging off one edge
    with pytest.raises(MeshError, match="not manifold"):
        check_closed_surface(v2, f2)


def test_missing_tetgen_says_what_to_install(tmp_path, monkeypatch):
    v, f = icosphere_surface(1.0, nsub=1)
    meshio.write(tmp_path / "s.stl", meshio.Mesh(v, [("triangle", f)]))
    monkeypatch.setitem(sys.modules, "tetgen", None)
    with pytest.raises(MeshError, match="pip install"):
        load(tmp_path / "s.stl")


# ----------------------------------------------------------------------------- bad files

def test_missing_file(tmp_path):
    with pytest.raises(MeshError, match="not found"):
        load(tmp_path / "nope.msh")


@pytest.mark.parametrize("suffix,fmt", [(".msh", "gmsh22"), (".msh", "gmsh"), (".vtu", None), (".inp", "abaqus"),
                                        (".vtk", None), (".mesh", "medit")])
def test_truncated_file(tmp_path, suffix, fmt):
    ref = box((1, 1, 1), 3)
    p = tmp_path / f"t{suffix}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meshio.write(p, meshio.Mesh(ref.vertices, [("tetra", ref.tets)]), file_format=fmt)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(MeshError, match=str(p.name)):
        load(p)


@pytest.mark.parametrize("name", ["junk.msh", "junk.vtu", "junk.stl", "junk.inp", "empty.vtk"])
def test_corrupt_file(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b"" if name.startswith("empty") else bytes(range(256)) * 4)
    with pytest.raises(MeshError):
        load(p)


def test_unknown_suffix(tmp_path):
    p = tmp_path / "m.xyz"
    p.write_text("1 2 3\n")
    with pytest.raises(MeshError, match="unknown mesh file type"):
        load(p)


# ----------------------------------------------------------------------------- validation

def test_inverted_order_tets_are_fixed():
    ref = box((1, 1, 1), 3)
    bad = ref.copy()
    idx = np.arange(0, bad.n_tets, 5)
    bad.tets[idx] = bad.tets[idx][:, [1, 0, 2, 3]]
    assert (bad.signed_volumes()[idx] < 0).all()
    with pytest.warns(MeshWarning, match=f"reordered {len(idx)} inverted"):
        fixed, log = validate(bad, return_log=True)
    assert log.flipped_tets == len(idx)
    assert (fixed.signed_volumes() > 0).all() and fixed.volume() == pytest.approx(1.0)
    with pytest.raises(MeshError, match="inverted"):
        validate(bad, repair=False)


def test_degenerate_tets_refused_with_indices():
    ref = box((1, 1, 1), 2)
    v = np.vstack([ref.vertices, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 1e-9]]])
    n = ref.n_vertices
    t = np.vstack([ref.tets, [[n, n + 1, n + 2, n + 3]], [[0, 0, 1, 2]]])
    with pytest.raises(MeshError, match=rf"degenerate.*indices \[{ref.n_tets}, {ref.n_tets + 1}\].*min_quality"):
        validate(TetMesh(v, t, name="bad"), warn=False)


def test_nan_vertex_refused_by_index():
    m = box((1, 1, 1), 2)
    m.vertices[7, 1] = np.nan
    with pytest.raises(MeshError, match="vertex 7"):
        validate(m)


def test_duplicate_and_unreferenced_vertices_repaired():
    ref = box((1, 1, 1), 3)
    n = ref.n_vertices
    v = np.vstack([ref.vertices, ref.vertices + 1e-13, [[5.0, 5.0, 5.0]]])  # copies + 1 stray vertex
    t = ref.tets.copy()
    t[::2] += n  # half the tets use the copies: the mesh is split along seams until merged
    with pytest.warns(MeshWarning):
        m, log = validate(TetMesh(v, t), return_log=True)
    assert m.n_vertices == n and log.merged_vertices > 0 and log.removed_vertices > 0
    assert len(boundary_faces(m)) == len(boundary_faces(ref))


def test_validate_rejects_out_of_range_and_params():
    with pytest.raises(MeshError, match="outside"):
        validate(TetMesh(np.zeros((3, 3)), [[0, 1, 2, 3]]))
    with pytest.raises(ParameterError):
        validate(box(), min_quality=2.0)


def test_quality_report_values():
    r = quality_report(box((1, 1, 1), 2))
    assert (r.n_vertices, r.n_tets) == (27, 48)
    assert r.volume == pytest.approx(1.0)
    assert r.min_dihedral == pytest.approx(45.0) and r.max_dihedral == pytest.approx(90.0)
    assert r.min_edge == pytest.approx(0.5) and r.max_edge == pytest.approx(0.5 * 3**0.5)
    assert r.bbox_min == pytest.approx((-0.5, -0.5, -0.5))
    s = str(r)
    assert "tetrahedra:      48" in s and "dihedral" in s and "aspect ratio" in s


# ----------------------------------------------------------------------------- boundary

def test_box_boundary_faces_point_outward_and_area():
    size = np.array([1.0, 2.0, 3.0])
    m = box(size, (3, 4, 5), center=(1.0, -1.0, 2.0))
    f = boundary_faces(m)
    assert f.dtype == np.int64 and f.shape == (2 * 2 * (3 * 4 + 4 * 5 + 3 * 5), 3)
    x = m.vertices[f]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    out = x.mean(axis=1) - np.array([1.0, -1.0, 2.0])
    assert (np.einsum("ij,ij->i", n, out) > 0).all()
    assert 0.5 * np.linalg.norm(n, axis=1).sum() == pytest.approx(2 * (2 + 6 + 3))
    sv = surface_vertices(m)
    assert len(sv) == 4 * 5 * 6 - 2 * 3 * 4 and (np.diff(sv) > 0).all()


def test_sphere_boundary_outward_and_closed():
    from femcontact.meshes.surface import check_closed_surface, enclosed_volume
    m = sphere(1.0, 6)
    f = boundary_faces(m)
    check_closed_surface(m.vertices, f)
    assert enclosed_volume(m.vertices, f) == pytest.approx(m.volume(), rel=1e-12)


def test_boundary_faces_fast_on_100k_tets():
    m = box((1, 1, 1), (30, 30, 20))  # 108k tets
    assert m.n_tets > 100_000
    t0 = time.perf_counter()
    f = boundary_faces(m)
    sv = surface_vertices(m)
    dt = time.perf_counter() - t0
    assert len(f) == 4 * (30 * 30 + 2 * 30 * 20) and len(sv) > 0
    assert dt < 1.0, f"boundary extraction took {dt:.2f} s"


# ----------------------------------------------------------------------------- primitives

@pytest.mark.parametrize("make,exact,rtol", [
    (lambda: box((0.1, 0.2, 0.3), 5), 0.006, 1e-12),
    (lambda: sphere(0.05, 8), 4 / 3 * np.pi * 0.05**3, 0.025),
    (lambda: sphere(0.05, 16), 4 / 3 * np.pi * 0.05**3, 0.006),
    (lambda: cylinder(0.02, 0.1, 8), np.pi * 0.02**2 * 0.1, 0.01),
    (lambda: plate((0.3, 0.2, 0.01), 12, n_thickness=2), 0.3 * 0.2 * 0.01, 1e-12),
    (lambda: finger(0.08, 0.01, 6, tip="round"), np.pi * 0.01**2 * 0.07 + 2 / 3 * np.pi * 0.01**3, 0.02),
    (lambda: finger(0.08, 0.01, 6, tip="flat"), np.pi * 0.01**2 * 0.08, 0.02),
], ids=["box", "sphere8", "sphere16", "cylinder", "plate", "finger_round", "finger_flat"])
def test_primitives_oriented_and_volume(make, exact, rtol):
    m = make()
    assert (m.signed_volumes() > 0).all()
    assert m.volume() == pytest.approx(exact, rel=rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to repair
        validate(m)
    r = quality_report(m)
    if m.name in ("sphere", "cylinder", "finger"):
        assert r.min_dihedral > 20.0 and r.max_dihedral < 130.0


def test_primitive_details():
    p = plate((0.3, 0.3, 0.01), 10, n_thickness=3)
    z = np.unique(np.round(p.vertices[:, 2], 12))
    assert len(z) == 4
    f = finger(0.08, 0.01, 4)
    assert f.vertices[:, 2].min() == pytest.approx(0.0) and f.vertices[:, 2].max() == pytest.approx(0.08)
    with pytest.raises(ParameterError):
        sphere(-1.0)
    with pytest.raises(ParameterError):
        finger(tip="pointy")


def test_rods():
    s = rod_straight((0, 0, 0), (1, 0, 0), 10)
    assert s.shape == (11, 3) and np.allclose(np.diff(s[:, 0]), 0.1)
    a = rod_arc(0.2, np.pi / 2, 8, center=(1, 1, 0))
    assert a.shape == (9, 3) and np.allclose(np.linalg.norm(a - [1, 1, 0], axis=1), 0.2)
    assert np.allclose(a[0], [1.2, 1, 0]) and np.allclose(a[-1], [1, 1.2, 0])
    a2 = rod_arc(0.1, np.pi, 6, normal=(1, 0, 0))
    assert np.allclose(a2[:, 0], 0) and np.allclose(np.linalg.norm(a2, axis=1), 0.1)
    h = rod_helix(0.05, 0.02, 2.0)
    assert h.shape == (49, 3) and h[-1, 2] == pytest.approx(0.04) and np.allclose(np.hypot(h[:, 0], h[:, 1]), 0.05)
    with pytest.raises(ParameterError):
        rod_straight((0, 0, 0), (0, 0, 0))


# ----------------------------------------------------------------------------- data + CLI

@pytest.mark.parametrize("name", ["cube.vtu", "soft_ball.vtu", "mat.vtu", "finger.vtu"])
def test_shipped_meshes_load(name):
    p = data_file(name)
    assert p.stat().st_size < 300_000
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = load(p)
    assert m.n_tets > 0 and (m.signed_volumes() > 0).all()


@needs_tetgen
def test_shipped_surface_tetrahedralizes():
    p = data_file("torus.obj")
    assert p.stat().st_size < 300_000
    m = load(p)
    R, r = 0.04, 0.015
    assert m.volume() == pytest.approx(2 * np.pi**2 * R * r**2, rel=0.03)


def test_cli_registration_and_info(tmp_path):
    parser = argparse.ArgumentParser(prog="femcontact")
    add_mesh_commands(parser.add_subparsers(dest="command"))
    save(box((1, 1, 1), 2), tmp_path / "b.vtu")
    args = parser.parse_args(["mesh", "info", str(tmp_path / "b.vtu")])
    assert args.func(args) == 0
    out = io.StringIO()
    assert mesh_info(tmp_path / "b.vtu", out=out) == 0
    text = out.getvalue()
    assert "tetrahedra:      48" in text and "vertices:        27" in text and "dihedral" in text
    assert mesh_info(tmp_path / "missing.vtu") == 1
    args = parser.parse_args(["mesh", "convert", "a.stl", "b.vtu", "--edge-length", "0.1", "--scale", "1e-3",
                              "--tetrahedralize", "--max-volume", "1e-6"])
    assert args.edge_length == 0.1 and args.scale == 1e-3 and args.tetrahedralize and args.max_volume == 1e-6


def test_cli_convert(tmp_path, capsys):
    save(box((10.0, 10.0, 10.0), 2), tmp_path / "b.vtu")
    assert mesh_convert(tmp_path / "b.vtu", tmp_path / "b.msh", scale=1e-3) == 0
    m = load(tmp_path / "b.msh")
    assert m.n_tets == 48 and m.volume() == pytest.approx(1e-6)
    assert mesh_convert(tmp_path / "b.vtu", tmp_path / "nodir" / "b.msh") == 1
    assert "error:" in capsys.readouterr().err
    if HAVE_TETGEN:
        v, f = icosphere_surface(1.0, nsub=2)
        meshio.write(tmp_path / "s.stl", meshio.Mesh(v, [("triangle", f)]))
        assert mesh_convert(tmp_path / "s.stl", tmp_path / "s.vtu", edge_length=0.3) == 0
        assert load(tmp_path / "s.vtu").n_tets > 100


def test_gmsh_physical_groups_become_cell_sets(tmp_path):
    s = sphere(1.0, 4)
    f = boundary_faces(s)
    tag = np.where(s.vertices[s.tets].mean(axis=1)[:, 0] > 0, 1, 2)
    mm = meshio.Mesh(s.vertices, [("triangle", f), ("tetra", s.tets)],
                     cell_data={"gmsh:physical": [np.full(len(f), 9), tag], "gmsh:geometrical": [np.ones(len(f), int), tag]})
    meshio.write(tmp_path / "g.msh", mm, file_format="gmsh22")
    m = load(tmp_path / "g.msh")  # boundary triangles are ignored, tets kept
    assert m.n_tets == s.n_tets
    assert {k: len(v) for k, v in m.cell_sets.items()} == {"physical:1": (tag == 1).sum(), "physical:2": (tag == 2).sum()}
    meshio.write(tmp_path / "a.inp", meshio.Mesh(s.vertices, [("tetra", s.tets)], cell_sets={"LEFT": [np.flatnonzero(tag == 2)]}))
    a = load(tmp_path / "a.inp")
    assert np.array_equal(np.sort(a.cell_sets["LEFT"]), np.flatnonzero(tag == 2))


@needs_tetgen
def test_remesh_volume_mesh_from_its_boundary(tmp_path):
    save(box((1.0, 1.0, 1.0), 2), tmp_path / "b.vtu")
    m = load(tmp_path / "b.vtu", tetrahedralize=True, edge_length=0.2)
    assert m.n_tets > 200 and m.volume() == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(ParameterError, match="already a volume mesh"):
        load(tmp_path / "b.vtu", edge_length=0.2)


@pytest.mark.parametrize("resolution", [(4, 4, 4), (2, 4, 6)])
def test_symmetric_box_is_mirror_symmetric_about_its_centre_planes(resolution):
    """Each reflection x→−x, y→−y, z→−z maps ``box(..., symmetric=True)``'s set of tets onto itself (even
    cell counts): the one-way Kuhn split is stiffer along one diagonal, and a symmetric drop drifts."""
    mesh = box((0.2, 0.1, 0.3), resolution, center=(1.0, -2.0, 0.5), symmetric=True)
    local = mesh.vertices - np.array([1.0, -2.0, 0.5])
    key = {tuple(np.round(v, 9)): i for i, v in enumerate(local)}
    tets = {frozenset(t) for t in mesh.tets.tolist()}
    for axis in range(3):
        flip = local.copy()
        flip[:, axis] *= -1.0
        image = np.array([key[tuple(np.round(v, 9))] for v in flip])
        assert {frozenset(image[t]) for t in mesh.tets.tolist()} == tets

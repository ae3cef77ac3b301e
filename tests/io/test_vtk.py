"""VTK time-series writer: readable by meshio and PyVista, atomic, re-run safe, fast."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import meshio
import numpy as np
import pytest
import pyvista as pv

from femcontact.errors import ParameterError
from femcontact.io import vtk as fvtk
from femcontact.io.vtk import SeriesWriter, read_pvd_entries, read_series, sanitize_name
from femcontact.meshes import box

TIMES = [0.0, 0.0125, 0.1]


def body_mesh(tm, k: int) -> meshio.Mesh:
    n = tm.n_vertices
    u = np.zeros((n, 3))
    u[:, 2] = -0.01 * k * (tm.vertices[:, 0] + 0.5) ** 2
    return meshio.Mesh(
        tm.vertices + u, [("tetra", tm.tets)],
        point_data={"displacement": u, "velocity": u * 10.0 + 1e-3 * np.arange(n)[:, None]},
        cell_data={"von_mises": [np.linspace(0.0, 1e5 * (k + 1), tm.n_tets)]},
    )


def cloud(k: int) -> meshio.Mesh:
    pts = np.column_stack([np.linspace(-0.5, 0.5, k + 2), np.zeros(k + 2), np.full(k + 2, -0.1)])
    return meshio.Mesh(pts, [], point_data={"impulse": np.ones((k + 2, 3)) * k})


def write_series(out: Path, polydata: bool = True, basename: str = "run", compress: bool = True) -> Path:
    tm = box((1, 0.2, 0.2), 4)
    with SeriesWriter(out, basename, polydata=polydata, compress=compress) as w:
        for k, t in enumerate(TIMES):
            w.write(t, {"body": body_mesh(tm, k), "contacts": cloud(k)})
        assert w.n_frames == 3
    return w.pvd_path


def test_series_loads_in_meshio_and_pyvista(tmp_path):
    pvd = write_series(tmp_path)
    assert pvd == tmp_path / "run.pvd"
    tm = box((1, 0.2, 0.2), 4)

    # every frame file in meshio (.vtu) / PyVista (.vtp), with exact float64 values
    for k in range(3):
        m = meshio.read(tmp_path / "run" / "body" / f"body_{k:06d}.vtu")
        ref = body_mesh(tm, k)
        assert m.cells[0].type == "tetra" and np.array_equal(m.cells[0].data, tm.tets)
        assert np.array_equal(m.points, ref.points)
        assert m.point_data["velocity"].dtype == np.float64
        assert np.array_equal(m.point_data["displacement"], ref.point_data["displacement"])
        assert np.array_equal(m.cell_data["von_mises"][0], ref.cell_data["von_mises"][0])
        c = pv.read(tmp_path / "run" / "contacts" / f"contacts_{k:06d}.vtp")
        assert isinstance(c, pv.PolyData) and c.n_points == k + 2 and c.n_verts == k + 2
        assert np.array_equal(c.point_data["impulse"], cloud(k).point_data["impulse"])

    # the collection in PyVista
    reader = pv.PVDReader(str(pvd))
    assert reader.time_values == TIMES
    for k, t in enumerate(TIMES):
        reader.set_active_time_value(t)
        mb = reader.read()
        assert mb.n_blocks == 2
        body = next(b for b in mb if b.n_cells == tm.n_tets)
        assert {"displacement", "velocity"} <= set(body.point_data)
        assert "von_mises" in body.cell_data
        assert body.cell_data["von_mises"].max() == pytest.approx(1e5 * (k + 1))
    assert isinstance(pv.read(pvd), pv.MultiBlock)

    frames = read_series(pvd)
    assert [t for t, _ in frames] == TIMES
    assert set(frames[2][1]) == {"body", "contacts"}

    # part indices stable per piece name; file paths relative
    entries = read_pvd_entries(pvd)
    assert {(e["name"], e["part"]) for e in entries} == {("body", 0), ("contacts", 1)}
    for el in ET.parse(pvd).getroot().iter("DataSet"):
        assert not os.path.isabs(el.get("file"))


@pytest.mark.parametrize("compress", [True, False])
def test_all_vtu_mode_is_meshio_readable(tmp_path, compress):
    pvd = write_series(tmp_path, polydata=False, compress=compress)
    assert ("vtkZLibDataCompressor" in pvd.parent.joinpath("run/body/body_000000.vtu").read_text()) == compress
    for e in read_pvd_entries(pvd):
        assert e["file"].suffix == ".vtu"
        meshio.read(e["file"])
    assert pv.PVDReader(str(pvd)).time_values == TIMES


def test_polyline_surface_and_late_or_empty_pieces(tmp_path):
    tm = box((1, 0.2, 0.2), 2)
    rod = meshio.Mesh(np.random.default_rng(0).random((5, 3)),
                      [("line", np.column_stack([np.arange(4), np.arange(1, 5)]))],
                      point_data={"radius": np.full(5, 0.01)}, cell_data={"tension": [np.arange(4.0)]})
    tri = meshio.Mesh(np.eye(3), [("vertex", np.array([[0]])), ("triangle", np.array([[0, 1, 2]]))],
                      cell_data={"id": [np.array([7.0]), np.array([9.0])]})
    with SeriesWriter(tmp_path) as w:
        w.write(0.0, {"body": body_mesh(tm, 0), "rod": rod})
        w.write(1.0, {"body": body_mesh(tm, 1), "rod": rod, "contacts": meshio.Mesh(np.zeros((0, 3)), []),
                      "floor": tri})
        w.write(2.0, {"body": body_mesh(tm, 2), "contacts": cloud(2)})
    frames = dict(read_series(w.pvd_path))
    assert set(frames[0.0]) == {"body", "rod"}
    assert set(frames[1.0]) == {"body", "rod", "contacts", "floor"}
    assert frames[1.0]["contacts"].n_points == 0  # empty piece: valid empty dataset
    assert set(frames[2.0]) == {"body", "contacts"}  # absent piece: no file this frame
    r = frames[0.0]["rod"]
    assert isinstance(r, pv.PolyData) and r.n_lines == 4 and "radius" in r.point_data
    f = frames[1.0]["floor"]
    # vtkPolyData orders verts before polys: cell data must follow
    assert f.n_verts == 1 and f.GetNumberOfPolys() == 1
    assert list(f.cell_data["id"]) == [7.0, 9.0]
    parts = {e["name"]: e["part"] for e in read_pvd_entries(w.pvd_path)}
    assert parts == {"body": 0, "rod": 1, "contacts": 2, "floor": 3}
    assert pv.PVDReader(str(w.pvd_path)).time_values == [0.0, 1.0, 2.0]


def test_names_are_sanitized_and_kept(tmp_path):
    assert sanitize_name("../a b/c") == "_a_b_c"
    assert sanitize_name("") == "piece"
    with SeriesWriter(tmp_path) as w:
        w.write(0.0, {"cube #1/left": cloud(0), "cube #1_left": cloud(1)})
    entries = read_pvd_entries(w.pvd_path)
    assert [e["name"] for e in entries] == ["cube #1/left", "cube #1_left"]
    files = [e["file"] for e in entries]
    assert len(set(files)) == 2
    for f in files:
        assert f.is_file() and Path(tmp_path).resolve() in f.parents


def _listed_and_readable(pvd: Path) -> list[float]:
    ET.parse(pvd)  # valid XML
    entries = read_pvd_entries(pvd)
    for e in entries:
        assert ".tmp-" not in e["file"].name
        ds = pv.read(e["file"])
        assert ds.n_points > 0
    return sorted({e["time"] for e in entries})


def test_crash_mid_frame_keeps_series_valid(tmp_path, monkeypatch):
    tm = box((1, 0.2, 0.2), 4)
    w = SeriesWriter(tmp_path)
    w.write(0.0, {"body": body_mesh(tm, 0), "contacts": cloud(0)})
    w.write(0.5, {"body": body_mesh(tm, 1), "contacts": cloud(1)})

    real_fsync, calls = os.fsync, []

    def failing_fsync(fd):  # the frame's 2nd file dies after its bytes are on disk, before os.replace
        calls.append(fd)
        if len(calls) == 3:
            raise OSError("simulated crash: disk gone")
        real_fsync(fd)

    monkeypatch.setattr(fvtk.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="simulated crash"):
        w.write(1.0, {"body": body_mesh(tm, 2), "contacts": cloud(2)})
    monkeypatch.setattr(fvtk.os, "fsync", real_fsync)

    assert w.n_frames == 2
    assert _listed_and_readable(w.pvd_path) == [0.0, 0.5]
    assert not list(tmp_path.rglob(".tmp-*"))  # the failed temp file was removed
    # the run can go on after the error
    w.write(1.0, {"body": body_mesh(tm, 2), "contacts": cloud(2)})
    assert _listed_and_readable(w.pvd_path) == [0.0, 0.5, 1.0]


def test_killed_process_leaves_valid_series(tmp_path):
    """A process killed inside a write (no cleanup at all) leaves a valid .pvd of complete frames."""
    script = textwrap.dedent(f"""
        import os, numpy as np, meshio
        from femcontact.io import vtk as fvtk
        from femcontact.meshes import box
        tm = box((1, 0.2, 0.2), 4)
        w = fvtk.SeriesWriter({str(tmp_path)!r})
        mesh = meshio.Mesh(tm.vertices, [("tetra", tm.tets)], point_data={{"velocity": tm.vertices}})
        w.write(0.0, {{"body": mesh}})
        w.write(0.1, {{"body": mesh}})
        fvtk.os.replace = lambda *a: os._exit(3)   # killed between fsync and rename
        w.write(0.2, {{"body": mesh}})
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert _listed_and_readable(tmp_path / "run.pvd") == [0.0, 0.1]
    stale = list(tmp_path.rglob(".tmp-*"))
    assert stale  # the half-done temp file is left on disk, but not listed
    SeriesWriter(tmp_path).close()  # a re-run clears it
    assert not list(tmp_path.rglob(".tmp-*"))


def test_rerun_drops_old_frames_only(tmp_path):
    tm = box((1, 0.2, 0.2), 2)
    with SeriesWriter(tmp_path) as w:
        for k in range(5):
            w.write(k * 0.1, {"body": body_mesh(tm, k), "old_piece": cloud(k)})
    write_series(tmp_path, basename="other")
    (tmp_path / "notes.txt").write_text("keep")
    (tmp_path / "run" / "body" / "keep.vtu").write_text("not a frame of ours")

    with SeriesWriter(tmp_path) as w2:
        assert _listed_and_readable(w2.pvd_path) == []  # fresh, valid, empty collection
        for k in range(2):
            w2.write(k * 1.0, {"body": body_mesh(tm, k)})
    assert sorted(p.name for p in (tmp_path / "run" / "body").iterdir()) == [
        "body_000000.vtu", "body_000001.vtu", "keep.vtu"]
    assert not (tmp_path / "run" / "old_piece").exists()
    assert _listed_and_readable(w2.pvd_path) == [0.0, 1.0]
    assert (tmp_path / "notes.txt").read_text() == "keep"
    assert pv.PVDReader(str(tmp_path / "other.pvd")).time_values == TIMES  # other basename untouched


def test_bad_input_is_refused(tmp_path):
    tm = box((1, 0.2, 0.2), 2)
    with SeriesWriter(tmp_path) as w:
        w.write(0.0, {"body": body_mesh(tm, 0)})
        with pytest.raises(ParameterError, match="increase"):
            w.write(0.0, {"body": body_mesh(tm, 0)})
        bad = body_mesh(tm, 0)
        bad.point_data["velocity"] = bad.point_data["velocity"][:-1]
        with pytest.raises(ParameterError, match="velocity"):
            w.write(1.0, {"body": bad})
        assert w.n_frames == 1
    with pytest.raises(ParameterError, match="closed"):
        w.write(2.0, {"body": body_mesh(tm, 0)})


def test_write_is_fast(tmp_path):
    tm = box((1, 1, 1), (12, 12, 12))
    assert tm.n_tets >= 10_000
    with SeriesWriter(tmp_path) as w:
        dts = []
        for k in range(3):
            mesh = body_mesh(tm, k)
            t0 = time.perf_counter()
            w.write(float(k), {"body": mesh, "contacts": cloud(k)})
            dts.append(time.perf_counter() - t0)
    assert sorted(dts)[1] < 0.1, dts  # median of 3

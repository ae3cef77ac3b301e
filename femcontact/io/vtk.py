"""VTK time-series output: one ``.pvd`` collection listing per-frame ``.vtu``/``.vtp`` files.

Layout of ``out_dir`` for ``SeriesWriter(out_dir, basename="run")``::

    out_dir/run.pvd                          the collection (ParaView / PyVista open this)
    out_dir/run/<piece>/<piece>_000000.vtu   a piece with volume cells (tets, ...)
    out_dir/run/<piece>/<piece>_000000.vtp   a piece with only vertex/line/triangle/quad cells,
                                             or a bare point cloud (no cells: vertex cells added)

The frame number is the writer's frame counter, shared by every piece of a frame.
A piece absent from a frame's ``pieces`` dict has no file (and no ``.pvd`` entry) for
that frame; a piece given with zero points is written as a valid empty dataset.
Files are VTK XML, binary (base64 inline), zlib-compressed by default, written by
VTK's own XML writers so ParaView and PyVista read them alike. Every file is
written atomically (temp file in the same folder, fsync, ``os.replace``), so a
killed run leaves a ``.pvd`` that is valid XML and lists only complete frames.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    import meshio
    import pyvista

__all__ = ["SeriesWriter", "read_series", "read_pvd_entries", "pvd_frames", "sanitize_name", "atomic_write_bytes",
           "check_output_dir", "earlier_run", "check_series_mark"]

# Cell types a vtkPolyData holds, in the order vtkPolyData numbers its cells.
_POLY_KIND = {"vertex": 0, "line": 1, "triangle": 2, "quad": 2, "polygon": 2}
_FRAME_RE = r"_\d{6}\.vt[up]"
_TMP_PREFIX = ".tmp-"


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _umask_mode()  # what a plain open() would give (mkstemp makes 0600)


def sanitize_name(name: str) -> str:
    """File-name-safe version of a piece name (letters, digits, ``_-.``; no leading dot)."""
    s = re.sub(r"[^A-Za-z0-9_.\-]+", "_", str(name)).lstrip(".")
    return s or "piece"


@contextlib.contextmanager
def _atomic_target(path: Path):
    """Yield a temp file name beside ``path`` (same suffix); on success fsync it and ``os.replace`` it
    onto ``path``, on any error remove it. The folder is fsynced after the rename."""
    # the temp name keeps the real suffix: VTK's XML writers silently write an empty file when the
    # file name ends with "_" (which mkstemp's random part sometimes does)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX + path.name + ".", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, os.replace."""
    with _atomic_target(Path(path)) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


MIN_FREE_BYTES = 16 * 2**20  # refuse to start a run into a folder with less free space than this


def check_output_dir(out_dir: str | os.PathLike, *, what: str = "output folder", min_free: int = MIN_FREE_BYTES,
                     create: bool = True) -> Path:
    """Prove ``out_dir`` writable (a probe file written and removed) with at least ``min_free`` bytes
    free; raise ``ParameterError`` naming the folder and the fix otherwise. Call it before a run starts
    so an unusable folder is reported before any step, not at the first frame. ``create``: make the
    folder now; False leaves a missing folder to the run's first file (a run that fails before it
    leaves no empty folder behind) and probes the nearest existing folder above it instead."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"{what} {str(out)!r} is a file, not a folder; choose another --out")
    probe_dir = out
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ParameterError(f"{what} {str(out)!r} is not writable ({exc.strerror or exc}: the output folder "
                                 "cannot be created); choose a folder you can write to with --out") from None
    elif not out.is_dir():
        probe_dir = next(p for p in out.absolute().parents if p.exists())
        if not probe_dir.is_dir():
            raise ParameterError(f"{what} {str(out)!r} is not writable ({probe_dir} is a file: the output folder "
                                 "cannot be created); choose a folder you can write to with --out")
    try:
        fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX + "probe.", dir=probe_dir)
        try:
            os.write(fd, b"femcontact")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        cause = "" if probe_dir == out else ": the output folder cannot be created"
        raise ParameterError(f"{what} {str(out)!r} is not writable ({exc.strerror or exc}{cause}); choose a folder "
                             "you can write to with --out") from None
    try:
        import shutil

        free = shutil.disk_usage(probe_dir).free
    except OSError:  # pragma: no cover - no statvfs
        free = None
    if free is not None and free < min_free:
        raise ParameterError(f"{what} {str(out)!r} has only {free / 2**20:.1f} MiB free (need at least "
                             f"{min_free / 2**20:.0f} MiB); free some space or choose another --out")
    return out


def earlier_run(out_dir: str | os.PathLike, basename: str = "run") -> str | None:
    """What the series ``out_dir/<basename>.pvd`` of an earlier run holds (e.g. "run.pvd: 4 frames,
    t = 0 … 0.03 s"), or None where there is none: a new run must not replace it unasked."""
    pvd = Path(out_dir) / f"{sanitize_name(basename)}.pvd"
    if not pvd.is_file():
        return None
    try:
        times = sorted({e["time"] for e in read_pvd_entries(pvd)})
        held = f"{len(times)} frames, t = {times[0]:g} … {times[-1]:g} s" if times else "no frames"
    except Exception:  # noqa: BLE001 - an unreadable series is still somebody's earlier run
        held = "a series that could not be read"
    return f"{pvd.name}: {held}"


# ---------------------------------------------------------------------------
# meshio.Mesh -> VTK dataset
# ---------------------------------------------------------------------------

def _vtk_type_table() -> dict[str, int]:
    try:
        from meshio._vtk_common import meshio_to_vtk_type

        return dict(meshio_to_vtk_type)
    except Exception:  # pragma: no cover - meshio internals moved
        return {"vertex": 1, "line": 3, "triangle": 5, "polygon": 7, "quad": 9,
                "tetra": 10, "hexahedron": 12, "wedge": 13, "pyramid": 14, "tetra10": 24}


def _blocks(mesh: "meshio.Mesh") -> list[tuple[str, np.ndarray]]:
    out = []
    for block in mesh.cells:
        data = np.asarray(block.data, dtype=np.int64)
        if data.ndim == 1:
            data = data.reshape(-1, 1)
        out.append((block.type, data))
    return out


def _cell_array(conn_blocks: list[np.ndarray]):
    """vtkCellArray from a list of (n_i, k_i) connectivity blocks (keeps numpy copies alive in VTK)."""
    from vtkmodules.util.numpy_support import numpy_to_vtkIdTypeArray
    from vtkmodules.vtkCommonDataModel import vtkCellArray

    sizes = np.concatenate([np.full(len(b), b.shape[1], dtype=np.int64) for b in conn_blocks]) \
        if conn_blocks else np.zeros(0, np.int64)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    conn = np.concatenate([b.ravel() for b in conn_blocks]) if conn_blocks else np.zeros(0, np.int64)
    ca = vtkCellArray()
    ca.SetData(numpy_to_vtkIdTypeArray(offsets.astype(np.int64), deep=True),
               numpy_to_vtkIdTypeArray(conn.astype(np.int64), deep=True))
    return ca


def _vtk_array(name: str, values: Any, n: int, where: str, piece: str):
    from vtkmodules.util.numpy_support import numpy_to_vtk

    a = np.asarray(values)
    if a.dtype == bool:
        a = a.astype(np.uint8)
    if a.dtype.kind not in "iuf":
        raise ParameterError(f"piece {piece!r}: {where} {name!r} must be numeric, got dtype {a.dtype}")
    if a.ndim == 0 or a.shape[0] != n:
        raise ParameterError(
            f"piece {piece!r}: {where} {name!r} has {a.shape[0] if a.ndim else 0} rows, expected {n}")
    a = np.ascontiguousarray(a.reshape(n, -1) if a.ndim > 2 else a)
    arr = numpy_to_vtk(a, deep=True)
    arr.SetName(str(name))
    return arr


def _is_polydata(mesh: "meshio.Mesh") -> bool:
    return all(b.type in _POLY_KIND for b in mesh.cells)


def _to_vtk(mesh: "meshio.Mesh", piece: str, time: float, polydata: bool = True):
    """Convert a meshio.Mesh to vtkPolyData (only vertex/line/surface cells) or vtkUnstructuredGrid."""
    from vtkmodules.util.numpy_support import numpy_to_vtk
    from vtkmodules.vtkCommonCore import vtkPoints
    from vtkmodules.vtkCommonDataModel import vtkPolyData, vtkUnstructuredGrid

    pts = np.asarray(mesh.points, dtype=np.float64)
    if pts.size == 0:
        pts = np.zeros((0, 3))
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise ParameterError(f"piece {piece!r}: points must be (n, 3), got shape {pts.shape}")
    if pts.shape[1] == 2:
        pts = np.column_stack([pts, np.zeros(len(pts))])
    n = len(pts)
    vpts = vtkPoints()
    vpts.SetData(numpy_to_vtk(np.ascontiguousarray(pts), deep=True))

    blocks = _blocks(mesh)
    for t, b in blocks:
        if len(b) and (b.min() < 0 or b.max() >= n):
            raise ParameterError(f"piece {piece!r}: {t} cells index points outside 0..{n - 1}")
    order = list(range(len(blocks)))
    if polydata and _is_polydata(mesh):
        ds = vtkPolyData()
        ds.SetPoints(vpts)
        if not blocks and n:  # bare point cloud: one vertex cell per point so it renders everywhere
            ds.SetVerts(_cell_array([np.arange(n, dtype=np.int64).reshape(-1, 1)]))
        order = sorted(order, key=lambda i: _POLY_KIND[blocks[i][0]])  # vtkPolyData's cell order
        for kind, setter in ((0, ds.SetVerts), (1, ds.SetLines), (2, ds.SetPolys)):
            sel = [blocks[i][1] for i in order if _POLY_KIND[blocks[i][0]] == kind and len(blocks[i][1])]
            if sel:
                setter(_cell_array(sel))
    else:
        from vtkmodules.util.numpy_support import numpy_to_vtk as _n2v

        table = _vtk_type_table()
        ds = vtkUnstructuredGrid()
        ds.SetPoints(vpts)
        missing = [t for t, _ in blocks if t not in table]
        if missing:
            raise ParameterError(f"piece {piece!r}: cell types {missing} have no VTK equivalent")
        if not blocks and n:  # bare point cloud: one vertex cell per point
            blocks, order = [("vertex", np.arange(n, dtype=np.int64).reshape(-1, 1))], [0]
        if blocks:
            types = np.concatenate([np.full(len(b), table[t], dtype=np.uint8) for t, b in blocks])
            ds.SetCells(_n2v(types, deep=True), _cell_array([b for _, b in blocks]))

    for name, values in (mesh.point_data or {}).items():
        ds.GetPointData().AddArray(_vtk_array(name, values, n, "point_data", piece))
    n_cells = sum(len(b) for _, b in blocks)
    if mesh.cell_data and not mesh.cells:
        raise ParameterError(f"piece {piece!r}: cell_data given but the mesh has no cells")
    for name, per_block in (mesh.cell_data or {}).items():
        if isinstance(per_block, np.ndarray) and len(blocks) == 1 and per_block.ndim >= 1 \
                and per_block.shape[0] == n_cells:
            per_block = [per_block]
        if len(per_block) != len(blocks):
            raise ParameterError(
                f"piece {piece!r}: cell_data {name!r} needs one array per cell block "
                f"({len(blocks)}), got {len(per_block)}")
        arrays = [np.asarray(per_block[i]) for i in order]
        values = np.concatenate(arrays, axis=0) if arrays else np.zeros(0)
        ds.GetCellData().AddArray(_vtk_array(name, values, n_cells, "cell_data", piece))
    for name, values in (mesh.field_data or {}).items():
        ds.GetFieldData().AddArray(_field_array(name, values, piece))
    tv = numpy_to_vtk(np.array([time], dtype=np.float64), deep=True)
    tv.SetName("TimeValue")
    ds.GetFieldData().AddArray(tv)
    return ds


def _field_array(name: str, values: Any, piece: str):
    """A field-data array (one per dataset, any length): strings as a vtkStringArray, else numeric."""
    from vtkmodules.util.numpy_support import numpy_to_vtk
    from vtkmodules.vtkCommonCore import vtkStringArray

    a = np.asarray(values)
    if a.dtype.kind in "US":
        arr = vtkStringArray()
        for v in a.ravel():
            arr.InsertNextValue(str(v))
    elif a.dtype.kind in "iufb":
        a = np.atleast_1d(a.astype(np.uint8) if a.dtype == bool else a)
        arr = numpy_to_vtk(np.ascontiguousarray(a.reshape(len(a), -1) if a.ndim > 2 else a), deep=True)
    else:
        raise ParameterError(f"piece {piece!r}: field_data {name!r} must be strings or numbers, got dtype {a.dtype}")
    arr.SetName(str(name))
    return arr


def _write_dataset(ds, path: Path, compress: bool) -> None:
    """Write ``ds`` with VTK's XML writer to a temp file beside ``path``, fsync it, then os.replace."""
    from vtkmodules.vtkIOXML import vtkXMLPolyDataWriter, vtkXMLUnstructuredGridWriter

    with _atomic_target(path) as tmp:
        w = vtkXMLPolyDataWriter() if ds.IsA("vtkPolyData") else vtkXMLUnstructuredGridWriter()
        w.SetInputData(ds)
        w.SetFileName(tmp)
        # inline base64 binary: raw appended data is smaller but meshio misreads it whenever the
        # raw bytes happen to parse as XML text; base64 is read reliably by meshio, ParaView, PyVista
        w.SetDataModeToBinary()
        w.SetHeaderTypeToUInt64()
        if compress:
            w.SetCompressorTypeToZLib()
            w.SetCompressionLevel(1)
        else:
            w.SetCompressorTypeToNone()
        if not w.Write() or os.path.getsize(tmp) == 0:
            raise OSError(f"VTK could not write {path} (disk full or folder not writable?)")


# ---------------------------------------------------------------------------
# the writer
# ---------------------------------------------------------------------------

class SeriesWriter:
    """Writes a ``.pvd`` time series of per-piece VTK XML files (see the module doc for the layout).

    A new series into a folder that holds one of the same basename replaces it: the files its
    ``.pvd`` lists, the frame files a killed run wrote past them and stale temp files go; nothing
    else (a file the old ``.pvd`` does not own is never deleted, and a frame that would land on
    one is refused). Callers decide whether replacing is wanted (``earlier_run``; the CLI and
    ``Simulator.run`` refuse unless told to overwrite). ``append=True`` instead continues
    the existing series (a resumed run): frames up to ``keep_until`` (a frame time; None keeps all)
    stay listed, later ones are dropped and their files removed, and numbering continues.
    """

    def __init__(self, out_dir: str | os.PathLike, basename: str = "run", *,
                 compress: bool = True, polydata: bool = True, append: bool = False,
                 keep_until: float | None = None, workers: int = 1) -> None:
        """``compress``: zlib level 1 (2-8x smaller files, ~12 ms vs ~8 ms for a 10k-tet frame). ``polydata``: write pieces with only
        vertex/line/surface cells (and bare point clouds) as ``.vtp``; False writes every piece as
        ``.vtu`` (meshio can read ``.vtu`` but not ``.vtp``; ParaView and PyVista read both).
        ``workers``: threads that write a frame's piece files at once (1: one after another; several
        let their fsyncs share the file system's journal commits: ``Simulator.run`` uses 8)."""
        self.out_dir = Path(out_dir)
        self.polydata = bool(polydata)
        self.basename = sanitize_name(basename)
        self.compress = bool(compress)
        self.workers = max(1, int(workers))
        self._pool = None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.out_dir / self.basename
        self._entries: list[tuple[float, int, str, str]] = []  # (time, part, name, relpath)
        self._parts: dict[str, int] = {}      # piece name -> part index
        self._dirs: dict[str, str] = {}       # piece name -> sanitized folder/file stem
        self._n_frames = 0
        self._last_time: float | None = None
        self._closed = False
        import vtkmodules.vtkCommonDataModel  # noqa: F401  (import VTK now, not in the first write)
        import vtkmodules.vtkIOXML  # noqa: F401

        if append and self.pvd_path.is_file():
            self._reopen(keep_until)
        else:
            self._remove_previous_run()
        self._write_pvd()

    # -- properties ---------------------------------------------------------
    @property
    def pvd_path(self) -> Path:
        """Path of the ``.pvd`` collection file."""
        return self.out_dir / f"{self.basename}.pvd"

    @property
    def n_frames(self) -> int:
        """Number of frames completely written."""
        return self._n_frames

    @property
    def piece_names(self) -> list[str]:
        """Piece names seen so far, in part-index order."""
        return list(self._parts)

    # -- public API ---------------------------------------------------------
    def write(self, time: float, pieces: Mapping[str, "meshio.Mesh"]) -> None:
        """Write one frame at ``time`` (strictly increasing) with ``pieces`` {name: meshio.Mesh}."""
        if self._closed:
            raise ParameterError("SeriesWriter is closed; open a new one to write more frames")
        time = float(time)
        if not np.isfinite(time):
            raise ParameterError(f"frame time must be finite, got {time}")
        if self._last_time is not None and time <= self._last_time:
            raise ParameterError(
                f"frame times must increase strictly: got {time} after {self._last_time}")
        frame = self._n_frames
        jobs = []                   # (name, path, mesh)
        for name, mesh in pieces.items():
            name = str(name)
            stem = self._stem(name)
            ext = ".vtp" if self.polydata and _is_polydata(mesh) else ".vtu"      # as _to_vtk decides
            folder = self.data_dir / stem
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{stem}_{frame:06d}{ext}"
            if path.exists():       # not this series' (its own were removed at the start): never replaced
                raise ParameterError(f"{path} exists but is not listed in {self.pvd_path.name}; this run does "
                                     "not replace a file it did not write: move it away or choose another "
                                     "output folder")
            jobs.append((name, path, mesh))

        def put(job) -> None:
            name, path, mesh = job
            _write_dataset(_to_vtk(mesh, name, time, self.polydata), path, self.compress)

        try:
            if len(jobs) > 1 and self.workers > 1:
                # the pieces' files at once: their fsyncs then share the file system's journal commits
                # (a frame of 46 pieces: 0.5 s one after another, 0.03 s on 8 threads)
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="femcontact-vtk")
                futures = [self._pool.submit(put, job) for job in jobs]
                errors = [f.exception() for f in futures]
                first = next((e for e in errors if e is not None), None)
                if first is not None:
                    raise first
            else:
                for job in jobs:
                    put(job)
        except BaseException:
            for _, path, _ in jobs:     # the frame's files already placed: unlisted, so the frame can be retried
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        new_entries = [(time, self._part(name), name, path.relative_to(self.out_dir).as_posix())
                       for name, path, _ in jobs]
        self._entries.extend(new_entries)
        self._n_frames += 1
        self._last_time = time
        self._write_pvd()

    def mark(self) -> dict[str, str]:
        """What identifies this series as written so far (frame count, last frame time, a digest of
        the last frame's files), stored in a checkpoint so a resume can tell that the series in the
        folder is the one the checkpoint continues (``check_series_mark``)."""
        last = [e for e in self._entries if e[0] == self._last_time]
        return {"series_frames": str(self._n_frames), "series_time": repr(self._last_time),
                "series_digest": _frame_digest(self.out_dir, [(name, rel) for _, _, name, rel in last])}

    def close(self) -> None:
        """Finish the series (the ``.pvd`` is already complete after every frame)."""
        if not self._closed:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
            self._write_pvd()
            self._closed = True

    def __enter__(self) -> "SeriesWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SeriesWriter({str(self.pvd_path)!r}, n_frames={self._n_frames})"

    # -- internals ----------------------------------------------------------
    def _part(self, name: str) -> int:
        if name not in self._parts:
            self._parts[name] = len(self._parts)
        return self._parts[name]

    def _stem(self, name: str) -> str:
        if name not in self._dirs:
            base = sanitize_name(name)
            stem, k = base, 2
            used = set(self._dirs.values())
            while stem in used:
                stem, k = f"{base}_{k}", k + 1
            self._dirs[name] = stem
        return self._dirs[name]

    def _write_pvd(self) -> None:
        root = ET.Element("VTKFile", type="Collection", version="1.0", byte_order="LittleEndian",
                          header_type="UInt64")
        coll = ET.SubElement(root, "Collection")
        for time, part, name, rel in self._entries:
            ET.SubElement(coll, "DataSet", timestep=repr(time), part=str(part),
                          name=name, file=rel)
        ET.indent(root)
        data = b'<?xml version="1.0"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"
        atomic_write_bytes(self.pvd_path, data)

    def _reopen(self, keep_until: float | None) -> None:
        """Take over the frames of the existing ``.pvd`` up to ``keep_until``; remove the files of the
        frames after it (and stale temp files), so the continued series lists every frame once."""
        try:
            entries = read_pvd_entries(self.pvd_path)
        except (ET.ParseError, ValueError) as exc:
            raise ParameterError(f"cannot append to {self.pvd_path}: it is not a readable .pvd ({exc}); "
                                 "start a fresh run into another folder") from None
        times = sorted({e["time"] for e in entries})
        kept_times = [t for t in times if keep_until is None or t <= keep_until]
        for e in entries:
            rel = e["file"].relative_to(self.out_dir.resolve()).as_posix()
            if e["time"] in kept_times:
                self._entries.append((e["time"], self._part(e["name"]), e["name"], rel))
                self._dirs.setdefault(e["name"], e["file"].parent.name)
            else:
                e["file"].unlink(missing_ok=True)
        self._n_frames = len(kept_times)
        self._last_time = kept_times[-1] if kept_times else None
        if self.data_dir.is_dir():  # frame files beyond the kept ones (written after the .pvd) and temps
            for folder in self.data_dir.iterdir():
                if not folder.is_dir():
                    continue
                for f in folder.iterdir():
                    m = re.match(re.escape(folder.name) + r"_(\d{6})\.vt[up]$", f.name)
                    if (m and int(m.group(1)) >= self._n_frames) or f.name.startswith(_TMP_PREFIX):
                        f.unlink()
        for tmp in self.out_dir.glob(f"{_TMP_PREFIX}{self.basename}.pvd.*"):
            tmp.unlink(missing_ok=True)

    def _remove_previous_run(self) -> None:
        """Delete what the old ``.pvd`` of this basename owns: the files it lists, frame files past
        them in its pieces' folders (written by a killed run before the ``.pvd`` listed them), temp
        files there, and the ``.pvd``; then the folders left empty. Nothing else is touched."""
        pvd = self.pvd_path
        for tmp in self.out_dir.glob(f"{_TMP_PREFIX}{self.basename}.pvd.*"):
            tmp.unlink(missing_ok=True)
        if not pvd.exists():
            return
        try:
            entries = read_pvd_entries(pvd)
        except (ET.ParseError, ValueError, OSError):
            entries = []                     # unreadable: it owns no file we could name
        data_dir = self.data_dir.resolve()
        n_frames = len({e["time"] for e in entries})
        folders = set()
        for e in entries:
            f = e["file"]
            if f.parent.parent == data_dir:  # only inside <basename>/<piece>/
                f.unlink(missing_ok=True)
                folders.add(f.parent)
        for folder in folders:
            pat = re.compile(re.escape(folder.name) + r"_(\d{6})\.vt[up]$")
            tmp_pat = re.compile(re.escape(_TMP_PREFIX + folder.name) + _FRAME_RE + r"\..+$")
            for f in folder.iterdir() if folder.is_dir() else ():
                m = pat.match(f.name)
                if f.is_file() and ((m and int(m.group(1)) >= n_frames) or tmp_pat.match(f.name)):
                    f.unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()               # only if now empty
        pvd.unlink()
        with contextlib.suppress(OSError):
            self.data_dir.rmdir()


def _frame_digest(out_dir: Path, files: list[tuple[str, str]]) -> str:
    """sha256 over the piece names and bytes of one frame's files (``(name, path relative to out_dir)``)."""
    import hashlib

    h = hashlib.sha256()
    for name, rel in sorted(files):
        h.update(name.encode() + b"\0")
        try:
            h.update((Path(out_dir) / rel).read_bytes())
        except OSError:
            h.update(b"\1missing")
    return h.hexdigest()


def check_series_mark(pvd_path: str | os.PathLike, mark: Mapping[str, str], what: str = "the checkpoint") -> None:
    """Refuse (``ParameterError``) to continue the series ``pvd_path`` from a state whose series
    ``mark`` (``SeriesWriter.mark``) it does not hold: fewer frames, another time at the marked frame,
    or other bytes in that frame's files (a later run into the folder replaced the series)."""
    pvd_path = Path(pvd_path)
    fix = ("start a fresh run (another --out, or --overwrite), or resume from the checkpoint of the run "
           "that wrote this series")
    if not pvd_path.is_file():
        raise ParameterError(f"cannot continue {pvd_path}: it does not exist, so {what} has no series to append "
                             f"to; {fix}")
    try:
        entries = read_pvd_entries(pvd_path)
    except (ET.ParseError, ValueError) as exc:
        raise ParameterError(f"cannot continue {pvd_path}: it is not a readable .pvd ({exc}); {fix}") from None
    times = sorted({e["time"] for e in entries})
    n, t = int(mark["series_frames"]), mark["series_time"]
    t = None if t == "None" else float(t)
    if n == 0:
        return
    held = f"{len(times)} frames, t = {times[0]:g} … {times[-1]:g} s" if times else "no frames"
    if len(times) < n or times[n - 1] != t:
        raise ParameterError(f"{pvd_path} does not hold the series {what} continues: {what} was saved after frame "
                             f"{n - 1} at t = {t:g} s, the series holds {held} (another run was written into the "
                             f"folder since); {fix}")
    last = [(e["name"], e["file"]) for e in entries if e["time"] == t]
    if _frame_digest(pvd_path.parent, last) != mark["series_digest"]:
        raise ParameterError(f"{pvd_path} does not hold the series {what} continues: its frame at t = {t:g} s "
                             f"differs from the one {what} was saved after (another run was written into the "
                             f"folder since); {fix}")


# ---------------------------------------------------------------------------
# reading back
# ---------------------------------------------------------------------------

def read_pvd_entries(pvd_path: str | os.PathLike) -> list[dict[str, Any]]:
    """Parse a ``.pvd``: list of {time, part, name, file (absolute Path)} in file order."""
    pvd_path = Path(pvd_path)
    root = ET.parse(pvd_path).getroot()
    coll = root.find("Collection")
    if coll is None:
        raise ValueError(f"{pvd_path} is not a VTK Collection file")
    out = []
    for el in coll.findall("DataSet"):
        part = int(el.get("part", 0))
        out.append({
            "time": float(el.get("timestep", 0.0)),
            "part": part,
            "name": el.get("name") or f"part{part}",
            "file": (pvd_path.parent / el.get("file")).resolve(),
        })
    return out


def pvd_frames(pvd_path: str | os.PathLike) -> list[tuple[float, list[dict[str, Any]]]]:
    """The entries of a ``.pvd`` (``read_pvd_entries``) grouped into frames: ``[(time, [entry, ...]), ...]``
    sorted by time, each frame's entries in file order. Reads no frame file."""
    by_time: dict[float, list[dict[str, Any]]] = {}
    for e in read_pvd_entries(pvd_path):
        by_time.setdefault(e["time"], []).append(e)
    return sorted(by_time.items(), key=lambda kv: kv[0])


def read_series(pvd_path: str | os.PathLike) -> list[tuple[float, dict[str, "pyvista.DataSet"]]]:
    """Load every frame of a ``.pvd``: ``[(time, {piece name: pyvista dataset}), ...]`` sorted by time
    (everything at once; ``femcontact.read`` loads pieces on demand)."""
    import pyvista as pv

    return [(t, {e["name"]: pv.read(e["file"]) for e in entries}) for t, entries in pvd_frames(pvd_path)]

"""Load and save meshes through meshio; tetrahedralize surface files."""
from __future__ import annotations

import contextlib
import ctypes
import io
import signal
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from ..errors import MeshError, ParameterError
from .convert import IGNORED_TYPES, LINEAR_OF, SURFACE_TYPES, cells_to_tets
from .quality import signed_volumes
from .surface import boundary_faces
from .types import TetMesh
from .validate import DEFAULT_MIN_QUALITY, check_coordinates, validate

#: Suffixes read as closed surfaces and tetrahedralized.
SURFACE_SUFFIXES = {".stl", ".obj", ".ply", ".off"}
#: Volume formats that are tested; any other format meshio reads is tried too.
VOLUME_SUFFIXES = {".msh", ".vtu", ".vtk", ".mesh", ".meshb", ".inp", ".xdmf", ".xmf", ".med", ".e", ".exo", ".bdf", ".nas"}


def _meshio():
    try:
        import meshio
    except ImportError as e:  # pragma: no cover - meshio is a core dependency
        raise MeshError("reading mesh files needs meshio: pip install meshio") from e
    return meshio


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for double in (".vol.gz", ".post.gz", ".dato.gz"):
        if name.endswith(double):
            return double
    return path.suffix.lower()


#: Seconds meshio may spend on one file before it counts as hung (some of its readers loop forever
#: on a file truncated in its header); plus one second per MB of file.
READ_TIMEOUT_S = 60.0


class _ReadTimeout(BaseException):
    """Raised by the watchdog inside a hung reader (a BaseException, so readers cannot swallow it)."""


@contextlib.contextmanager
def _alarm(seconds: float):
    """Interrupt the block after ``seconds`` by SIGALRM (main thread only, where signals arrive).

    A timer the program set itself is kept: when it is due first, the alarm stays off and that
    timer fires as planned; otherwise it is re-armed afterwards with the time it had left."""
    theirs = signal.getitimer(signal.ITIMER_REAL)
    if 0 < theirs[0] <= seconds:
        yield
        return

    def on_alarm(signum, frame):
        raise _ReadTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if theirs[0] > 0:
            signal.setitimer(signal.ITIMER_REAL, max(theirs[0] - (time.monotonic() - start), 1e-3), theirs[1])


@contextlib.contextmanager
def _thread_alarm(seconds: float):
    """Interrupt the block after ``seconds`` outside the main thread, where no signal arrives (a
    Dask worker's task thread, a GUI's loader thread): a timer raises the error in this thread
    through CPython's ``PyThreadState_SetAsyncExc``, which, like SIGALRM's handler, lands at the next
    bytecode (meshio's hanging readers loop in Python)."""
    ident = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    armed = [True]

    def fire():
        with lock:
            if armed[0]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(_ReadTimeout))

    timer = threading.Timer(seconds, fire)
    timer.name, timer.daemon = "femcontact-read-timeout", True
    timer.start()
    try:
        yield
    finally:
        with lock:
            armed[0] = False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, None)      # drop one not yet delivered
        timer.cancel()


def _watchdog(seconds: float):
    """The block's time limit: SIGALRM in the main thread, the thread alarm elsewhere."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _alarm(seconds)
    return _thread_alarm(seconds)


def read_meshio(path, file_format: str | None = None):
    """meshio.read with every failure turned into a MeshError that names the file."""
    meshio = _meshio()
    path = Path(path)
    if not path.exists():
        raise MeshError(f"mesh file not found: {path}")
    if path.is_dir():
        raise MeshError(f"mesh path is a directory, not a file: {path}")
    if path.stat().st_size == 0:
        raise MeshError(f"mesh file is empty: {path}")
    suffix = _suffix(path)
    if file_format is None and suffix not in meshio.extension_to_filetypes:
        known = ", ".join(sorted(VOLUME_SUFFIXES | SURFACE_SUFFIXES))
        raise MeshError(f"unknown mesh file type '{suffix}' for {path}; supported: {known} (and others meshio reads)")
    if file_format is not None:
        formats = [file_format]
    else:
        formats = list(meshio.extension_to_filetypes.get(suffix, []))
        formats.sort(key=lambda f: f != "gmsh")  # .msh: gmsh before ansys
    errors = []
    for fmt in formats:
        out, err = io.StringIO(), io.StringIO()
        try:
            # meshio prints and calls sys.exit() on some failures: contain both
            limit = READ_TIMEOUT_S + path.stat().st_size / 1e6
            with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    _watchdog(limit):
                warnings.simplefilter("ignore")
                return meshio.read(path, file_format=fmt)
        except _ReadTimeout:
            errors.append(f"{fmt}: the reader did not finish within {limit:.0f} s (it loops on this file)")
        except ImportError as e:
            hint = " (pip install h5py)" if "h5py" in str(e) or suffix in (".xdmf", ".xmf", ".med", ".h5m") else ""
            raise MeshError(f"reading {path} needs an optional package: {e}{hint}") from e
        except MemoryError:
            errors.append(f"{fmt}: out of memory")
        except (Exception, SystemExit) as e:  # meshio raises many types for corrupt files
            msg = str(e).strip() or type(e).__name__
            if isinstance(e, SystemExit):
                printed = " ".join((out.getvalue() + " " + err.getvalue()).split())
                errors.append(f"{fmt}: {(printed or 'reader gave up')[:200]}")
            else:
                errors.append(f"{fmt}: {type(e).__name__}: {msg[:200]}")
    raise MeshError(
        f"could not read {path} as a {suffix} mesh: the file is corrupt, truncated or not in that "
        f"format ({'; '.join(errors)})"
    )


def _block_data(block, path, corners: int) -> np.ndarray:
    """A cell block's connectivity as (k, >= corners) int64, or a MeshError naming the file."""
    try:
        data = np.asarray(block.data, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        data = None
    if data is None or data.ndim != 2 or (len(data) and data.shape[1] < corners):
        shape = None if data is None else data.shape
        raise MeshError(f"{path}: its {block.type} cells have connectivity of shape {shape}, not (k, {corners}) "
                        "node indices; the file is corrupt or truncated")
    return data


def _gather_tets(mm, path):
    """Tets, cell sets, and whether only surface cells were found."""
    blocks, found, refused = [], [], []
    for block in mm.cells:
        ct = block.type
        found.append(f"{ct} ({len(block.data)})")
        if ct in LINEAR_OF:
            blocks.append(block)
        elif ct not in IGNORED_TYPES:
            refused.append(ct)
    if refused:
        raise MeshError(
            f"{path}: unsupported volume cell types {sorted(set(refused))}; found {', '.join(found)}. "
            "Supported: tetra, tetra10 (made linear), hexahedron(20/27), wedge(15/18), pyramid(13) "
            "(split into tetrahedra). Remesh with tetrahedra (e.g. gmsh -3) otherwise."
        )
    return blocks, found


def _cell_sets(mm, tet_ranges, owners_per_block, block_index_of):
    """Map gmsh physical tags, medit refs and meshio cell sets onto tet indices."""
    sets: dict[str, np.ndarray] = {}
    for key in ("gmsh:physical", "medit:ref", "CellEntityIds"):
        data = mm.cell_data.get(key)
        if data is None:
            continue
        tags = np.concatenate([
            np.asarray(data[bi])[owners_per_block[j]] for j, bi in enumerate(block_index_of)
        ]) if block_index_of else np.zeros(0)
        for tag in np.unique(tags):
            sets[f"{key.split(':')[-1]}:{int(tag)}"] = np.flatnonzero(tags == tag)
        break
    for name, per_block in (mm.cell_sets or {}).items():
        idx = []
        for j, bi in enumerate(block_index_of):
            if bi >= len(per_block) or per_block[bi] is None:
                continue
            cells = np.asarray(per_block[bi], dtype=np.int64).ravel()
            if cells.size == 0:
                continue
            owner = owners_per_block[j]
            idx.append(tet_ranges[j] + np.flatnonzero(np.isin(owner, cells)))
        if idx:
            sets[str(name)] = np.concatenate(idx)
    return sets


def load(path, scale: float = 1.0, *, tetrahedralize: bool | None = None, max_volume: float | None = None,
         edge_length: float | None = None, min_quality: float = DEFAULT_MIN_QUALITY, repair: bool = True,
         file_format: str | None = None, name: str | None = None) -> TetMesh:
    """Read a volume mesh (or a closed surface, tetrahedralized) into a validated TetMesh.

    path: any file meshio reads: .msh (gmsh 2/4), .vtu, .vtk, .mesh (medit), .inp (Abaqus),
        .xdmf (needs h5py), ... Surfaces .stl/.obj/.ply/.off are tetrahedralized (needs
        the `tetgen` package).
    scale: multiplies coordinates (``scale=1e-3`` for a file in millimetres), applied
        before max_volume / edge_length, which are in metres.
    tetrahedralize: None = only when the file has no volume cells but triangles;
        True = tetrahedralize the boundary surface even of a volume mesh (remesh).
    max_volume / edge_length: size targets for tetrahedralization (m^3 / m).
    min_quality, repair: passed to validate().
    Hexahedra, wedges and pyramids become conforming tets; quadratic cells become linear.
    """
    if not (np.isfinite(scale) and scale > 0):
        raise ParameterError(f"scale must be a positive number, got {scale}")
    path = Path(path)
    mm = read_meshio(path, file_format)
    try:
        points = np.asarray(mm.points, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as e:
        raise MeshError(f"{path}: point coordinates are not numbers ({e}); the file is corrupt") from None
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise MeshError(f"{path}: points have shape {points.shape}; expected (n, 3)")
    if points.shape[1] == 2:
        raise MeshError(f"{path} is a 2D mesh (points have 2 coordinates); a volume mesh is needed")
    points = points * scale
    mesh_name = name or path.stem
    blocks, found = _gather_tets(mm, path)

    if not blocks or tetrahedralize:
        tris = []
        for block in mm.cells:
            if block.type in ("triangle", "triangle6", "triangle7"):
                tris.append(_block_data(block, path, 3)[:, :3])
            elif block.type in ("quad", "quad8", "quad9"):
                q = _block_data(block, path, 4)[:, :4]
                tris += [q[:, [0, 1, 2]], q[:, [0, 2, 3]]]
        if blocks:  # remesh a volume mesh from its boundary
            tmp = _blocks_to_mesh(mm, blocks, points, mesh_name)[0]
            tris = [boundary_faces(tmp)]
        if not tris:
            raise MeshError(
                f"{path} has no volume cells and no surface triangles to tetrahedralize; found: "
                f"{', '.join(found) or 'no cells'}; give a file with tetrahedra (or hexahedra, wedges, pyramids) "
                "or a closed triangle surface"
            )
        if tetrahedralize is False:
            raise MeshError(f"{path} has only surface cells ({', '.join(found)}); pass tetrahedralize=True")
        from .tetrahedralize import tetrahedralize_surface

        check_coordinates(points, str(path))
        mesh = tetrahedralize_surface(points, np.concatenate(tris), max_volume=max_volume,
                                      edge_length=edge_length, name=mesh_name)
    else:
        if max_volume is not None or edge_length is not None:
            raise ParameterError(
                f"{path} is already a volume mesh; max_volume/edge_length only apply with tetrahedralize=True"
            )
        mesh, _ = _blocks_to_mesh(mm, blocks, points, mesh_name)
    return validate(mesh, min_quality=min_quality, repair=repair)


def _blocks_to_mesh(mm, blocks, points, name):
    tets, owners, ranges, block_index_of = [], [], [], []
    offset = 0
    all_blocks = list(mm.cells)
    for block in blocks:
        data = _block_data(block, name, {"tetra": 4, "hexahedron": 8, "wedge": 6, "pyramid": 5}[LINEAR_OF[block.type]])
        if data.size and (data.min() < 0 or data.max() >= len(points)):
            raise MeshError(f"{name}: {block.type} cells reference points outside 0..{len(points) - 1}")
        t, own = cells_to_tets(block.type, data)
        if LINEAR_OF[block.type] != "tetra" and len(t):
            # orientation of split cells follows the file's node-order convention: normalize it
            neg = signed_volumes(points, t) < 0
            t[neg] = t[neg][:, [0, 2, 1, 3]]
        tets.append(t)
        owners.append(own)
        ranges.append(offset)
        offset += len(t)
        block_index_of.append(next(i for i, b in enumerate(all_blocks) if b is block))
    t = np.concatenate(tets) if tets else np.zeros((0, 4), np.int64)
    mesh = TetMesh(points, t, name=name)
    try:
        mesh.cell_sets = _cell_sets(mm, ranges, owners, block_index_of)
    except Exception:  # cell sets are a convenience; never fail a load on them
        mesh.cell_sets = {}
    return mesh, owners


def save(mesh: TetMesh, path, file_format: str | None = None, **kwargs) -> Path:
    """Write a TetMesh with meshio (format from the suffix).

    Volume formats get the tets; surface formats (.stl/.obj/.ply/.off) get the
    outward boundary triangles. Cell sets are not written.
    """
    meshio = _meshio()
    path = Path(path)
    suffix = _suffix(path)
    if file_format is None and suffix not in meshio.extension_to_filetypes:
        raise MeshError(f"unknown mesh file type '{suffix}' for {path}")
    if not path.parent.exists():
        raise MeshError(f"directory does not exist: {path.parent}")
    if suffix in SURFACE_SUFFIXES:
        faces = boundary_faces(mesh)
        used = np.unique(faces)
        remap = np.full(mesh.n_vertices, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        out = meshio.Mesh(mesh.vertices[used], [("triangle", remap[faces])])
    else:
        out = meshio.Mesh(mesh.vertices, [("tetra", mesh.tets)])
    if suffix == ".stl":
        kwargs.setdefault("binary", True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meshio.write(path, out, file_format=file_format, **kwargs)
    except ImportError as e:
        raise MeshError(f"writing {path} needs an optional package: {e} (pip install h5py for xdmf)") from e
    except Exception as e:
        raise MeshError(f"could not write {path}: {type(e).__name__}: {e}") from e
    return path


def data_file(name: str) -> Path:
    """Path of a mesh shipped in the repository's top-level ``meshes/`` folder."""
    root = Path(__file__).resolve().parents[2] / "meshes"
    p = root / name
    if not p.exists():
        avail = sorted(x.name for x in root.glob("*")) if root.exists() else []
        raise MeshError(f"no shipped mesh '{name}' in {root}; available: {avail}")
    return p

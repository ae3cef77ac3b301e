"""Tetrahedralize closed triangle surfaces with TetGen (the `tetgen` package, optional)."""
from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager

import numpy as np

from ..errors import MeshError, ParameterError
from .surface import check_closed_surface, enclosed_volume, row_keys, triangle_areas
from .types import TetMesh
from .validate import MeshWarning, check_coordinates, merge_duplicate_vertices

INSTALL_HINT = "pip install 'femcontact[meshing]'  (or: pip install tetgen)"


@contextmanager
def _quiet_fd():
    """Silence C-level stdout on fd 1 (TetGen prints "parsing switches" even with -Q)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (AttributeError, OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _surface_arrays(vertices, faces, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, 3) finite float vertices and (k, 3) int faces indexing them, or a MeshError naming ``name``."""
    try:
        v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError) as e:
        raise MeshError(f"surface of {name}: vertices must be (n, 3) and faces (k, 3) indices ({e})") from None
    check_coordinates(v, f"surface of {name}")
    if len(f) and (f.min() < 0 or f.max() >= len(v)):
        bad = int(np.flatnonzero(((f < 0) | (f >= len(v))).any(axis=1))[0])
        raise MeshError(f"surface of {name}: triangle {bad} refers to a vertex outside 0..{len(v) - 1}; "
                        "the file is corrupt or truncated")
    return v, f


def clean_surface(vertices, faces, what="surface"):
    """Merge duplicate vertices, drop degenerate and duplicate triangles and unused vertices.

    Returns (vertices, faces, notes) where notes lists the non-routine repairs made.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    notes = []
    diag = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0))) if len(v) else 0.0
    v, remap, _ = merge_duplicate_vertices(v, 1e-9 * diag)  # routine for STL: not reported
    f = remap[f]
    area = triangle_areas(v, f)
    degen = (f[:, 0] == f[:, 1]) | (f[:, 1] == f[:, 2]) | (f[:, 0] == f[:, 2]) | (area <= 1e-14 * diag**2)
    if degen.any():
        notes.append(f"removed {int(degen.sum())} zero-area triangles")
        f = f[~degen]
    key = row_keys(np.sort(f, axis=1), len(v))
    _, first = np.unique(key, return_index=True)
    if len(first) < len(f):
        notes.append(f"removed {len(f) - len(first)} duplicate triangles")
        f = f[np.sort(first)]
    used = np.zeros(len(v), dtype=bool)
    used[f.ravel()] = True
    if not used.all():
        m = np.cumsum(used) - 1
        v, f = v[used], m[f]
    return v, f, notes


def tetrahedralize_surface(vertices, faces, max_volume: float | None = None, edge_length: float | None = None,
                           min_ratio: float = 1.5, min_dihedral: float = 10.0, preserve_surface: bool = False,
                           name: str = "tetrahedralized") -> TetMesh:
    """Fill a closed, manifold triangle surface with quality tetrahedra (TetGen).

    max_volume: largest tet volume (m^3). edge_length: target edge length (m), turned
    into the volume of a regular tet with that edge (the smaller of the two wins).
    Neither: TetGen's quality mesh with only the surface's own resolution.
    min_ratio (radius-edge bound, > 1) and min_dihedral (degrees) control quality.
    preserve_surface: keep the input triangles exactly (no Steiner points on the surface).
    An open or non-manifold surface is refused with a MeshError that says so; duplicate
    vertices, zero-area and duplicate triangles are repaired (a MeshWarning says so).
    """
    for label, val in (("max_volume", max_volume), ("edge_length", edge_length)):
        if val is not None and not (np.isfinite(val) and val > 0):
            raise ParameterError(f"{label} must be a positive number, got {val}")
    if min_ratio <= 1.0:
        raise ParameterError(f"min_ratio must be > 1 (radius-edge ratio), got {min_ratio}")
    vertices, faces = _surface_arrays(vertices, faces, name)
    v, f, notes = clean_surface(vertices, faces, name)
    check_closed_surface(v, f, what=f"surface of {name}", check_orientation=False)
    try:   # after the surface checks: an open or non-manifold surface is refused even without TetGen
        import tetgen
    except ImportError as e:
        raise MeshError(f"tetrahedralizing a surface mesh needs the TetGen wrapper: {INSTALL_HINT}") from e
    if notes:
        warnings.warn(f"{name}: repaired surface before tetrahedralizing: {'; '.join(notes)}", MeshWarning,
                      stacklevel=2)
    vol_target = None
    if edge_length is not None:
        vol_target = edge_length**3 / (6.0 * np.sqrt(2.0))
    if max_volume is not None:
        vol_target = max_volume if vol_target is None else min(vol_target, max_volume)
    enclosed = abs(enclosed_volume(v, f))
    if vol_target is not None and enclosed / vol_target > 5e6:
        raise ParameterError(
            f"max_volume/edge_length would make about {enclosed / vol_target:.2g} tets from a volume of "
            f"{enclosed:.3g}; check the unit scale (scale=1e-3 for millimetres)"
        )
    switches = f"pq{min_ratio:g}/{min_dihedral:g}"
    if vol_target is not None:
        switches += f"a{vol_target:.6g}"
    if preserve_surface:
        switches += "Y"
    switches += "Q"
    try:
        gen = tetgen.TetGen(v, f.astype(np.int32))
        with _quiet_fd():
            out = gen.tetrahedralize(switches=switches)
    except Exception as e:
        raise MeshError(
            f"TetGen failed on the surface of {name} ({type(e).__name__}: {e}); the surface may "
            "self-intersect. Repair it (e.g. MeshLab, pymeshfix) and try again."
        ) from e
    nodes, elems = np.asarray(out[0], dtype=np.float64), np.asarray(out[1], dtype=np.int64)
    if len(elems) == 0:
        raise MeshError(f"TetGen produced no tetrahedra for {name}; is the surface self-intersecting?")
    elems = elems[:, :4]
    mesh = TetMesh(nodes, elems, name=name)
    neg = mesh.signed_volumes() < 0
    mesh.tets[neg] = mesh.tets[neg][:, [0, 2, 1, 3]]
    return mesh

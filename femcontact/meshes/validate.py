"""Validation and repair of tet meshes before they are simulated."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import MeshError, ParameterError
from .quality import volume_quality
from .surface import face_counts, row_keys
from .types import TetMesh

#: Default threshold on the volume quality 6*sqrt(2)*V / l_max^3 (1 = regular tet).
DEFAULT_MIN_QUALITY = 1e-3
#: Vertices closer than this fraction of the bounding-box diagonal are merged.
DEFAULT_MERGE_TOL = 1e-9
#: Largest accepted |coordinate| in m: beyond it a mesh is in the wrong unit (or corrupt), and
#: its volumes and stiffnesses would lose all precision or overflow.
MAX_COORDINATE = 1e6


class MeshWarning(UserWarning):
    """A mesh was repaired on load (the message says what was changed)."""


@dataclass
class ValidationLog:
    """What validate() changed."""

    merged_vertices: int = 0
    removed_vertices: int = 0
    flipped_tets: int = 0
    removed_duplicate_tets: int = 0
    notes: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.merged_vertices or self.removed_vertices or self.flipped_tets or self.removed_duplicate_tets)

    def __str__(self) -> str:
        parts = []
        if self.merged_vertices:
            parts.append(f"merged {self.merged_vertices} duplicate vertices")
        if self.removed_vertices:
            parts.append(f"removed {self.removed_vertices} unreferenced vertices")
        if self.flipped_tets:
            parts.append(f"reordered {self.flipped_tets} inverted tets (vertex order only)")
        if self.removed_duplicate_tets:
            parts.append(f"removed {self.removed_duplicate_tets} duplicate tets")
        return "; ".join(parts + self.notes) or "no changes"


def check_finite(vertices: np.ndarray, what: str = "mesh") -> None:
    """Refuse NaN or infinite coordinates, naming the first bad vertices."""
    bad = ~np.isfinite(vertices).all(axis=1)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise MeshError(
            f"{what}: {len(idx)} vertices have NaN or infinite coordinates, e.g. vertex {idx[0]} = "
            f"{vertices[idx[0]].tolist()} (indices {idx[:10].tolist()}{' ...' if len(idx) > 10 else ''}); "
            "fix or remove these vertices in the mesh file"
        )


def check_coordinates(vertices: np.ndarray, what: str = "mesh") -> None:
    """Refuse NaN/infinite coordinates and coordinates beyond ``MAX_COORDINATE`` m, naming a vertex."""
    check_finite(vertices, what)
    if len(vertices) == 0:
        return
    big = np.abs(vertices).max(axis=1) > MAX_COORDINATE
    if big.any():
        idx = np.flatnonzero(big)
        raise MeshError(
            f"{what}: {len(idx)} vertices lie farther than {MAX_COORDINATE:g} m from the origin, e.g. vertex "
            f"{idx[0]} = {vertices[idx[0]].tolist()}; coordinates are in metres: scale the mesh "
            "(load(..., scale=1e-3) for millimetres) or move it near the origin"
        )


def merge_duplicate_vertices(vertices: np.ndarray, tol: float):
    """Return (new_vertices, old->new index map, n_merged); vertices within tol are merged."""
    n = len(vertices)
    if n < 2:
        return vertices, np.arange(n), 0
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pairs = cKDTree(vertices).query_pairs(r=tol, output_type="ndarray") if tol > 0 else np.zeros((0, 2), int)
    if tol == 0 or len(pairs) == 0:
        # exact duplicates
        _, first, inv = np.unique(vertices, axis=0, return_index=True, return_inverse=True)
        if len(first) == n:
            return vertices, np.arange(n), 0
        inv = inv.reshape(-1)
        order = np.argsort(first)
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        return vertices[first[order]], remap[inv], n - len(first)
    g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    ncomp, labels = connected_components(g, directed=False)
    # keep the first vertex (lowest index) of each group, in original order
    first = np.full(ncomp, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n))
    order = np.argsort(first)
    remap = np.empty(ncomp, dtype=np.int64)
    remap[order] = np.arange(ncomp)
    return vertices[first[order]], remap[labels], n - ncomp


def remove_unreferenced(mesh: TetMesh) -> int:
    used = np.zeros(mesh.n_vertices, dtype=bool)
    used[mesh.tets.ravel()] = True
    n_removed = int((~used).sum())
    if n_removed:
        remap = np.cumsum(used) - 1
        mesh.vertices = mesh.vertices[used]
        mesh.tets = remap[mesh.tets]
    return n_removed


def validate(mesh: TetMesh, min_quality: float = DEFAULT_MIN_QUALITY, merge_tol: float = DEFAULT_MERGE_TOL,
             repair: bool = True, warn: bool = True, return_log: bool = False):
    """Check and repair a tet mesh; return a new valid TetMesh (the input is not changed).

    Refuses (MeshError): NaN/inf coordinates (naming the vertex), tet indices out of
    range, degenerate tets (volume quality 6*sqrt(2)*|V|/l_max^3 below ``min_quality``;
    the message lists their indices), faces shared by more than two tets.
    Repairs (when ``repair``; otherwise refuses): tets whose vertex order is inverted
    (two vertices swapped), duplicate vertices (closer than ``merge_tol`` times the
    bounding-box diagonal) merged, unreferenced vertices removed, duplicate tets removed.
    A MeshWarning says what was repaired when ``warn``. ``return_log``: also return a
    ValidationLog.
    """
    if not (0.0 <= min_quality < 1.0):
        raise ParameterError(f"min_quality must be in [0, 1) (1 = regular tet), got {min_quality}")
    name = mesh.name or "mesh"
    m = mesh.copy()
    log = ValidationLog()
    if m.n_tets == 0:
        raise MeshError(f"{name} has no tetrahedra; a simulation mesh needs tetrahedra (a surface file is "
                        "tetrahedralized by femcontact.meshes.load)")
    if m.tets.min() < 0 or m.tets.max() >= m.n_vertices:
        bad = np.flatnonzero(((m.tets < 0) | (m.tets >= m.n_vertices)).any(axis=1))
        raise MeshError(f"{name}: tets {bad[:10].tolist()} reference vertices outside 0..{m.n_vertices - 1}")

    used = np.zeros(m.n_vertices, dtype=bool)
    used[m.tets.ravel()] = True
    check_coordinates(np.where(used[:, None], m.vertices, 0.0), name)  # unused junk vertices are dropped below
    if repair:
        log.removed_vertices = remove_unreferenced(m)
    elif not used.all():
        raise MeshError(f"{name}: {int((~used).sum())} vertices are not used by any tet")

    # duplicate vertices
    diag = float(np.linalg.norm(m.vertices.max(axis=0) - m.vertices.min(axis=0)))
    new_v, remap, n_merged = merge_duplicate_vertices(m.vertices, merge_tol * diag)
    if n_merged:
        if not repair:
            raise MeshError(f"{name}: {n_merged} duplicate vertices (pass repair=True to merge them)")
        m.vertices, m.tets = new_v, remap[m.tets]
        log.merged_vertices = n_merged

    # degenerate elements (including tets that repeat a vertex after merging)
    q = volume_quality(m.vertices, m.tets)
    degenerate = np.abs(q) < min_quality
    if degenerate.any():
        idx = np.flatnonzero(degenerate)
        raise MeshError(
            f"{name}: {len(idx)} degenerate tets (volume quality 6*sqrt(2)*|V|/l_max^3 below "
            f"min_quality={min_quality:g}; 1 = regular tet): indices {idx[:20].tolist()}"
            f"{' ...' if len(idx) > 20 else ''}, qualities {np.round(np.abs(q[idx[:5]]), 8).tolist()}. "
            "Remesh these regions or lower min_quality if you know what you do."
        )

    # inverted vertex order
    neg = q < 0
    if neg.any():
        if not repair:
            raise MeshError(f"{name}: {int(neg.sum())} tets have inverted vertex order, e.g. {np.flatnonzero(neg)[:10].tolist()}")
        m.tets[neg] = m.tets[neg][:, [0, 2, 1, 3]]
        log.flipped_tets = int(neg.sum())

    # duplicate tets, then conformity: no face may be shared by more than two tets
    key = row_keys(np.sort(m.tets, axis=1), m.n_vertices)
    _, first = np.unique(key, return_index=True)
    if len(first) < m.n_tets:
        if not repair:
            raise MeshError(f"{name}: {m.n_tets - len(first)} duplicate tets")
        keep = np.sort(first)
        log.removed_duplicate_tets = m.n_tets - len(keep)
        m.tets = m.tets[keep]
        m.cell_sets = {}
        log.notes.append("cell sets dropped because tets were removed")
    _, _, counts = face_counts(m)
    if (counts > 2).any():
        bad = np.unique(np.flatnonzero(counts > 2) // 4)
        raise MeshError(
            f"{name}: {int((counts > 2).sum() // 3)} faces are shared by more than two tets (overlapping "
            f"or folded elements), in tets {bad[:20].tolist()}. The mesh must be conforming."
        )
    if warn and log.changed:
        warnings.warn(f"{name} repaired: {log}", MeshWarning, stacklevel=2)
    return (m, log) if return_log else m

"""Boundary surface extraction and closed-surface checks (vectorized numpy)."""
from __future__ import annotations

import numpy as np

from ..errors import MeshError
from .quality import OUTWARD_FACES, signed_volumes
from .types import TetMesh


def row_keys(sorted_rows: np.ndarray, n: int) -> np.ndarray:
    """Unique int64 key per row of sorted non-negative ints < n (any column count)."""
    k = sorted_rows.shape[1]
    if n > 0 and float(n) ** k < 2**62:
        key = np.zeros(len(sorted_rows), dtype=np.int64)
        for j in range(k):
            key = key * n + sorted_rows[:, j]
        return key
    _, inv = np.unique(sorted_rows, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


def _all_faces(mesh: TetMesh) -> np.ndarray:
    """(4m, 3) outward faces of every tet (orientation-corrected per tet)."""
    tets = mesh.tets
    if len(tets) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    neg = signed_volumes(mesh.vertices, tets) < 0
    if neg.any():
        tets = tets.copy()
        tets[neg] = tets[neg][:, [0, 2, 1, 3]]
    return tets[:, OUTWARD_FACES].reshape(-1, 3)


def face_counts(mesh: TetMesh):
    """(faces (4m,3), key (4m,), counts per face (4m,)): how many tets share each face."""
    faces = _all_faces(mesh)
    key = row_keys(np.sort(faces, axis=1), mesh.n_vertices)
    _, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    return faces, key, counts[inv.reshape(-1)]


def boundary_faces(mesh: TetMesh) -> np.ndarray:
    """(k, 3) int64 boundary triangles, right-hand normal pointing out of the solid.

    A face is on the boundary when exactly one tet has it. Orientation follows
    the owning tet, so inverted tets are handled.
    """
    faces, _, counts = face_counts(mesh)
    return np.ascontiguousarray(faces[counts == 1], dtype=np.int64)


def surface_vertices(mesh: TetMesh) -> np.ndarray:
    """Sorted unique indices of the vertices on the boundary surface."""
    return np.unique(boundary_faces(mesh))


def triangle_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    x = vertices[faces]
    return 0.5 * np.linalg.norm(np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), axis=1)


def surface_area(mesh: TetMesh) -> float:
    return float(triangle_areas(mesh.vertices, boundary_faces(mesh)).sum())


def enclosed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Signed volume enclosed by a closed triangle surface (positive if normals point out)."""
    x = vertices[faces]
    return float(np.einsum("ij,ij->i", x[:, 0], np.cross(x[:, 1], x[:, 2])).sum() / 6.0)


def check_closed_surface(vertices: np.ndarray, faces: np.ndarray, what: str = "surface",
                         check_orientation: bool = True) -> None:
    """Raise MeshError unless every edge is shared by exactly two triangles, consistently oriented."""
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) < 4:
        raise MeshError(f"{what} has {len(faces)} triangles; a closed surface needs at least 4: give a closed "
                        "surface (or a volume mesh) that encloses the body")
    n = len(vertices)
    directed = faces[:, [[0, 1], [1, 2], [2, 0]]].reshape(-1, 2)
    undirected = np.sort(directed, axis=1)
    ukey = row_keys(undirected, n)
    uniq, first, counts = np.unique(ukey, return_index=True, return_counts=True)

    def _examples(mask, k=5):
        e = undirected[first[mask]][:k]
        return ", ".join(f"({a}, {b}) at {np.round(vertices[a], 6).tolist()}" for a, b in e)

    open_edges = counts == 1
    if open_edges.any():
        raise MeshError(
            f"{what} is not closed (open): {int(open_edges.sum())} boundary edges are used by only one "
            f"triangle, e.g. edges between vertices {_examples(open_edges)}. Only a closed (watertight) "
            "surface encloses a volume: close the holes in your CAD tool or with "
            "pyvista's PolyData.fill_holes / MeshLab before tetrahedralizing."
        )
    nonmanifold = counts > 2
    if nonmanifold.any():
        raise MeshError(
            f"{what} is not manifold: {int(nonmanifold.sum())} edges are shared by more than two triangles, "
            f"e.g. edges between vertices {_examples(nonmanifold)}. Separate touching parts or remove "
            "internal faces before tetrahedralizing."
        )
    if not check_orientation:
        return
    dkey = row_keys(directed, n)
    _, dcounts = np.unique(dkey, return_counts=True)
    if (dcounts > 1).any():
        raise MeshError(
            f"{what} is not consistently oriented: {int((dcounts > 1).sum())} edges are traversed in the same "
            "direction by both neighbouring triangles (flipped normals or a Moebius-like surface). "
            "Re-orient the normals consistently (e.g. pyvista's PolyData.compute_normals(auto_orient_normals=True))."
        )

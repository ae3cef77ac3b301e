"""Element quality measures and a mesh quality report (vectorized numpy)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .types import TetMesh

# Local vertex pairs of the six tet edges, and for each edge the two local
# vertices *not* on it (the faces opposite them share that edge).
EDGES = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
_OPPOSITE = np.array([[2, 3], [1, 3], [1, 2], [0, 3], [0, 2], [0, 1]])
# Faces opposite local vertex i, outward for a positively oriented tet.
OUTWARD_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])

_SQRT2 = np.sqrt(2.0)


def edge_lengths(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """(m, 6) lengths of the six edges of each tet."""
    x = vertices[tets]
    return np.linalg.norm(x[:, EDGES[:, 0]] - x[:, EDGES[:, 1]], axis=2)


def signed_volumes(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    x = vertices[tets]
    a, b, c = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]
    return np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0


def volume_quality(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """(m,) signed volume / volume of the regular tet with the longest edge.

    1 for a regular tet, ~0.27 for a Kuhn (cube-split) tet, 0 for a flat one,
    negative for an inverted one. Scale invariant.
    """
    lmax = edge_lengths(vertices, tets).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = 6.0 * _SQRT2 * signed_volumes(vertices, tets) / lmax**3
    return np.where(lmax > 0, q, 0.0)


def _face_area_vectors(vertices, tets):
    """(m, 4, 3) area vectors of the faces opposite each vertex (outward if positive)."""
    x = vertices[tets]
    f = x[:, OUTWARD_FACES]  # (m, 4, 3 verts, 3)
    return 0.5 * np.cross(f[:, :, 1] - f[:, :, 0], f[:, :, 2] - f[:, :, 0])


def dihedral_angles(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """(m, 6) interior dihedral angles in degrees at the six edges."""
    n = _face_area_vectors(vertices, tets)
    norm = np.linalg.norm(n, axis=2, keepdims=True)
    n = n / np.where(norm > 0, norm, 1.0)
    cos = -np.einsum("mkj,mkj->mk", n[:, _OPPOSITE[:, 0]], n[:, _OPPOSITE[:, 1]])
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def aspect_ratios(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """(m,) longest edge / (2*sqrt(6) * inradius): 1 for a regular tet, inf for a flat one."""
    vol = np.abs(signed_volumes(vertices, tets))
    area = np.linalg.norm(_face_area_vectors(vertices, tets), axis=2).sum(axis=1)
    lmax = edge_lengths(vertices, tets).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_in = 3.0 * vol / area
        ar = lmax / (2.0 * np.sqrt(6.0) * r_in)
    return np.where(vol > 0, ar, np.inf)


@dataclass
class QualityReport:
    """Summary of a tet mesh. Lengths in the mesh unit (m), angles in degrees."""

    n_vertices: int
    n_tets: int
    volume: float
    min_edge: float
    max_edge: float
    mean_edge: float
    aspect_ratio_min: float
    aspect_ratio_mean: float
    aspect_ratio_max: float
    min_dihedral: float
    max_dihedral: float
    min_volume_quality: float
    n_inverted: int
    bbox_min: tuple
    bbox_max: tuple

    def __str__(self) -> str:
        lo = ", ".join(f"{v:.4g}" for v in self.bbox_min)
        hi = ", ".join(f"{v:.4g}" for v in self.bbox_max)
        ext = ", ".join(f"{b - a:.4g}" for a, b in zip(self.bbox_min, self.bbox_max))
        return "\n".join([
            f"vertices:        {self.n_vertices}",
            f"tetrahedra:      {self.n_tets}",
            f"volume:          {self.volume:.6g}",
            f"bounding box:    [{lo}] .. [{hi}]  (size {ext})",
            f"edge length:     min {self.min_edge:.4g}  mean {self.mean_edge:.4g}  max {self.max_edge:.4g}",
            f"aspect ratio:    min {self.aspect_ratio_min:.3g}  mean {self.aspect_ratio_mean:.3g}"
            f"  max {self.aspect_ratio_max:.3g}  (1 = regular tet)",
            f"dihedral angle:  min {self.min_dihedral:.2f} deg  max {self.max_dihedral:.2f} deg",
            f"volume quality:  min {self.min_volume_quality:.3g}  (1 = regular, 0 = flat)",
            f"inverted tets:   {self.n_inverted}",
        ])


def quality_report(mesh: TetMesh) -> QualityReport:
    """Counts, volume, bounding box, edge lengths, aspect ratios and dihedral angles."""
    v, t = mesh.vertices, mesh.tets
    if len(t) == 0:
        nan = float("nan")
        bmin = tuple(v.min(axis=0)) if len(v) else (nan,) * 3
        bmax = tuple(v.max(axis=0)) if len(v) else (nan,) * 3
        return QualityReport(len(v), 0, 0.0, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0, bmin, bmax)
    e = edge_lengths(v, t)
    ar = aspect_ratios(v, t)
    dih = dihedral_angles(v, t)
    vol = signed_volumes(v, t)
    q = volume_quality(v, t)
    used = v[np.unique(t)]
    return QualityReport(
        n_vertices=len(v), n_tets=len(t), volume=float(np.abs(vol).sum()),
        min_edge=float(e.min()), max_edge=float(e.max()), mean_edge=float(e.mean()),
        aspect_ratio_min=float(ar.min()), aspect_ratio_mean=float(ar[np.isfinite(ar)].mean()) if np.isfinite(ar).any() else float("inf"),
        aspect_ratio_max=float(ar.max()),
        min_dihedral=float(dih.min()), max_dihedral=float(dih.max()),
        min_volume_quality=float(q.min()), n_inverted=int((vol < 0).sum()),
        bbox_min=tuple(float(a) for a in used.min(axis=0)),
        bbox_max=tuple(float(a) for a in used.max(axis=0)),
    )

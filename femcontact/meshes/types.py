"""Mesh containers shared by every part of the package."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TetMesh:
    """A linear tetrahedral mesh.

    vertices: (n, 3) float64 positions in metres.
    tets: (m, 4) int64 vertex indices, positive orientation
        (``det[x1-x0, x2-x0, x3-x0] > 0``).
    """

    vertices: np.ndarray
    tets: np.ndarray
    name: str = ""
    cell_sets: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vertices = np.ascontiguousarray(self.vertices, dtype=np.float64).reshape(-1, 3)
        self.tets = np.ascontiguousarray(self.tets, dtype=np.int64).reshape(-1, 4)

    @property
    def n_vertices(self) -> int:
        return len(self.vertices)

    @property
    def n_tets(self) -> int:
        return len(self.tets)

    def signed_volumes(self) -> np.ndarray:
        """(m,) signed volume of each tet, m^3 (positive for correct orientation)."""
        x = self.vertices[self.tets]
        d = x[:, 1:] - x[:, :1]
        return np.linalg.det(d) / 6.0

    def volume(self) -> float:
        """Total volume, m^3."""
        return float(np.abs(self.signed_volumes()).sum())

    def copy(self) -> "TetMesh":
        return TetMesh(self.vertices.copy(), self.tets.copy(), self.name, dict(self.cell_sets))

    def mean_edge_length(self) -> float:
        """Mean length of the six edges of all tets, m."""
        x = self.vertices[self.tets]
        pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
        return float(np.mean([np.linalg.norm(x[:, a] - x[:, b], axis=1).mean() for a, b in pairs]))

"""Primitive meshes with a resolution parameter."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .types import TetMesh

# Six tets per hexahedral cell (Kuhn subdivision along the main diagonal 0-6):
# conforming across cells because every cell is split the same way.
_KUHN = np.array([[0, 1, 2, 6], [0, 2, 3, 6], [0, 3, 7, 6], [0, 7, 4, 6], [0, 4, 5, 6], [0, 5, 1, 6]])


def _grid_counts(size, resolution) -> tuple[int, int, int]:
    size = np.asarray(size, dtype=float)
    if np.ndim(resolution) == 0:
        h = size.max() / int(resolution)
        counts = np.maximum(1, np.round(size / h).astype(int))
    else:
        counts = np.asarray(resolution, dtype=int)
    if np.any(counts < 1):
        raise ParameterError(f"resolution must be >= 1 cell along each axis, got {counts.tolist()}")
    return tuple(int(c) for c in counts)


def box(size=(1.0, 1.0, 1.0), resolution=4, center=(0.0, 0.0, 0.0)) -> TetMesh:
    """Structured tetrahedral box.

    size: (lx, ly, lz) edge lengths in m. resolution: cells along the longest edge
    (an int; the other axes get as many cells as keep them near cubic) or (nx, ny, nz).
    center: box centre in m. Six tets per cell.
    """
    size = np.asarray(size, dtype=float)
    if size.shape != (3,) or np.any(~np.isfinite(size)) or np.any(size <= 0):
        raise ParameterError(f"box size must be three positive lengths, got {size.tolist()}")
    nx, ny, nz = _grid_counts(size, resolution)
    xs = [np.linspace(-s / 2, s / 2, n + 1) for s, n in zip(size, (nx, ny, nz))]
    X, Y, Z = np.meshgrid(*xs, indexing="ij")
    verts = np.stack([X.ravel(), Y.ravel(), Z.ravel()], axis=1) + np.asarray(center, dtype=float)

    def vid(i, j, k):
        return (i * (ny + 1) + j) * (nz + 1) + k

    i, j, k = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    i, j, k = i.ravel(), j.ravel(), k.ravel()
    corners = np.stack([
        vid(i, j, k), vid(i + 1, j, k), vid(i + 1, j + 1, k), vid(i, j + 1, k),
        vid(i, j, k + 1), vid(i + 1, j, k + 1), vid(i + 1, j + 1, k + 1), vid(i, j + 1, k + 1),
    ], axis=1)
    tets = corners[:, _KUHN].reshape(-1, 4)
    mesh = TetMesh(verts, tets, name="box")
    vol = mesh.signed_volumes()
    flip = vol < 0
    mesh.tets[flip] = mesh.tets[flip][:, [0, 2, 1, 3]]
    return mesh

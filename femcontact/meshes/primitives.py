"""Primitive meshes with a resolution parameter.

All primitives are structured: a grid of hexahedral cells, each split into six
Kuhn tets, then (for round shapes) mapped onto the shape. Round shapes mirror
the split per octant so that every tet touching the curved surface also has a
vertex inside the body (no surface slivers); the split stays conforming.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .types import TetMesh

# Six tets per hexahedral cell (Kuhn subdivision along the main diagonal 0-6):
# conforming across cells because every cell is split the same way.
_KUHN = np.array([[0, 1, 2, 6], [0, 2, 3, 6], [0, 3, 7, 6], [0, 7, 4, 6], [0, 4, 5, 6], [0, 5, 1, 6]])
# local corner (di, dj, dk) of hex vertex 0..7
_CORNER = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]])


def _grid_counts(size, resolution) -> tuple[int, int, int]:
    size = np.asarray(size, dtype=float)
    if np.ndim(resolution) == 0:
        if not float(resolution) >= 1:
            raise ParameterError(f"resolution must be >= 1 cell, got {resolution}")
        h = size.max() / int(resolution)
        counts = np.maximum(1, np.round(size / h).astype(int))
    else:
        counts = np.asarray(resolution, dtype=int)
    if counts.shape != (3,) or np.any(counts < 1):
        raise ParameterError(f"resolution must be >= 1 cell along each axis, got {np.asarray(counts).tolist()}")
    return tuple(int(c) for c in counts)


def _check_positive(label, *values):
    for v in values:
        if not (np.isfinite(v) and v > 0):
            raise ParameterError(f"{label} must be positive, got {v}")


def _structured(xs, ys, zs, mirror_at=None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and Kuhn tets of the tensor grid xs x ys x zs.

    mirror_at: (cx, cy, cz) or None. Cells whose centre is below c along an axis
    use the Kuhn split mirrored along that axis, so the split diagonal points away
    from c. Mirroring along one axis keeps the diagonals of the faces normal to
    that axis, so neighbours stay conforming.
    """
    nx, ny, nz = len(xs) - 1, len(ys) - 1, len(zs) - 1
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    verts = np.stack([X.ravel(), Y.ravel(), Z.ravel()], axis=1)
    i, j, k = (a.ravel() for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
    ijk = np.stack([i, j, k], axis=1)  # (c, 3)
    if mirror_at is None:
        flip = np.zeros((len(ijk), 3), dtype=bool)
    else:
        centres = np.stack([(xs[i] + xs[i + 1]) / 2, (ys[j] + ys[j + 1]) / 2, (zs[k] + zs[k + 1]) / 2], axis=1)
        flip = centres < np.asarray(mirror_at)[None, :] - 1e-12
    corner = np.where(flip[:, None, :], 1 - _CORNER[None], _CORNER[None])  # (c, 8, 3)
    cid = ijk[:, None, :] + corner
    vid = (cid[..., 0] * (ny + 1) + cid[..., 1]) * (nz + 1) + cid[..., 2]  # (c, 8)
    tets = vid[:, _KUHN].reshape(-1, 4)
    return verts, tets


def _orient(mesh: TetMesh) -> TetMesh:
    vol = mesh.signed_volumes()
    flip = vol < 0
    mesh.tets[flip] = mesh.tets[flip][:, [0, 2, 1, 3]]
    return mesh


def box(size=(1.0, 1.0, 1.0), resolution=4, center=(0.0, 0.0, 0.0), symmetric: bool = False) -> TetMesh:
    """Structured tetrahedral box.

    size: (lx, ly, lz) edge lengths in m. resolution: cells along the longest edge
    (an int; the other axes get as many cells as keep them near cubic) or (nx, ny, nz).
    center: box centre in m. Six tets per cell (Kuhn split). symmetric: split each cell along the
    diagonal that points away from the centre (the split mirrored in each octant), so the mesh is
    mirror-symmetric about the centre planes for even cell counts. The default one-way split is
    stiffer along one diagonal: a soft cube dropped straight drifts sideways on it (4.1 mm in 100
    steps under lagged, 0.76 mm under COND; < 1e-11 mm symmetric, scenes/cube_drop.py).
    """
    size = np.asarray(size, dtype=float)
    if size.shape != (3,) or np.any(~np.isfinite(size)) or np.any(size <= 0):
        raise ParameterError(f"box size must be three positive lengths, got {size.tolist()}")
    nx, ny, nz = _grid_counts(size, resolution)
    xs = [np.linspace(-s / 2, s / 2, n + 1) for s, n in zip(size, (nx, ny, nz))]
    verts, tets = _structured(*xs, mirror_at=(0.0, 0.0, 0.0) if symmetric else None)
    verts = verts + np.asarray(center, dtype=float)
    return _orient(TetMesh(verts, tets, name="box"))


def _square_to_disk(x, y):
    """Map [-1,1]^2 onto the unit disk: square core in the middle, round at the rim."""
    t = np.maximum(np.abs(x), np.abs(y))
    r = np.hypot(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(r > 0, t / r, 1.0)  # factor that puts (x, y) on the circle of radius t
    w = t  # blend: cube-like at the centre, circle at the rim
    f = (1 - w) + w * s
    return x * f, y * f


def _cube_to_ball(x, y, z):
    """Map [-1,1]^3 onto the unit ball (consistent with _square_to_disk on z = 0)."""
    t = np.maximum(np.maximum(np.abs(x), np.abs(y)), np.abs(z))
    r = np.sqrt(x * x + y * y + z * z)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(r > 0, t / r, 1.0)
    f = (1 - t) + t * s
    return x * f, y * f, z * f


def _round_counts(resolution: int, label: str) -> int:
    n = int(resolution)
    if n < 2:
        raise ParameterError(f"{label} resolution must be >= 2 cells across, got {resolution}")
    return n


def sphere(radius=0.05, resolution=8, center=(0.0, 0.0, 0.0)) -> TetMesh:
    """Tetrahedral ball: a structured cube grid (resolution cells across) mapped onto the ball.

    Volume (inscribed polyhedron) -6.7% at resolution 4, -1.8% at 8, -0.45% at 16.
    All tets positively oriented; min dihedral angle 31-39 deg, max 107-121 deg.
    """
    _check_positive("sphere radius", radius)
    n = _round_counts(resolution, "sphere")
    g = np.linspace(-1.0, 1.0, n + 1)
    v, t = _structured(g, g, g, mirror_at=(0.0, 0.0, 0.0))
    x, y, z = _cube_to_ball(v[:, 0], v[:, 1], v[:, 2])
    verts = radius * np.stack([x, y, z], axis=1) + np.asarray(center, dtype=float)
    return _orient(TetMesh(verts, t, name="sphere"))


def cylinder(radius=0.05, height=0.1, resolution=8, center=(0.0, 0.0, 0.0), n_height=None) -> TetMesh:
    """Tetrahedral cylinder along z: a structured disk grid (resolution cells across) extruded.

    n_height: cells along the axis (default: keeps cells near cubic).
    """
    _check_positive("cylinder radius/height", radius, height)
    n = _round_counts(resolution, "cylinder")
    nz = int(n_height) if n_height is not None else max(1, int(round(height / (2 * radius / n))))
    if nz < 1:
        raise ParameterError(f"n_height must be >= 1, got {n_height}")
    g = np.linspace(-1.0, 1.0, n + 1)
    zs = np.linspace(-height / 2, height / 2, nz + 1)
    v, t = _structured(g, g, zs, mirror_at=(0.0, 0.0, 0.0))
    x, y = _square_to_disk(v[:, 0], v[:, 1])
    verts = np.stack([radius * x, radius * y, v[:, 2]], axis=1) + np.asarray(center, dtype=float)
    return _orient(TetMesh(verts, t, name="cylinder"))


def plate(size=(0.2, 0.2, 0.01), resolution=16, n_thickness=2, center=(0.0, 0.0, 0.0)) -> TetMesh:
    """Thin mat/plate: a box with ``resolution`` cells along its longest in-plane edge and
    ``n_thickness`` cells through the thickness (size[2], along z)."""
    size = np.asarray(size, dtype=float)
    if size.shape != (3,) or np.any(~(size > 0)):
        raise ParameterError(f"plate size must be three positive lengths (lx, ly, thickness), got {size.tolist()}")
    if int(n_thickness) < 1:
        raise ParameterError(f"n_thickness must be >= 1, got {n_thickness}")
    h = max(size[0], size[1]) / int(resolution)
    nx, ny = (max(1, int(round(s / h))) for s in size[:2])
    m = box(size, (nx, ny, int(n_thickness)), center)
    m.name = "plate"
    return m


def finger(length=0.08, radius=0.01, resolution=6, tip="round", center=(0.0, 0.0, 0.0)) -> TetMesh:
    """Finger-like beam along +z: round cross-section, rounded (hemispherical) or flat tip.

    The base (z = 0 relative to ``center``) is flat, for clamping; the tip is at
    z = length. resolution: cells across the diameter.
    """
    _check_positive("finger length/radius", length, radius)
    n = _round_counts(resolution, "finger")
    if tip not in ("round", "flat"):
        raise ParameterError(f"finger tip must be 'round' or 'flat', got {tip!r}")
    cap = radius if tip == "round" else 0.0
    shaft = length - cap
    if shaft <= 0:
        raise ParameterError(f"finger length {length} must exceed its radius {radius} for a round tip")
    h = 2.0 / n  # cell size in the normalized cross-section
    nz_shaft = max(1, int(round(shaft / radius / h)))
    g = np.linspace(-1.0, 1.0, n + 1)
    zs = np.linspace(-shaft / radius, 0.0, nz_shaft + 1)
    if tip == "round":
        zs = np.concatenate([zs, np.linspace(0.0, 1.0, n // 2 + 1)[1:]])
    v, t = _structured(g, g, zs, mirror_at=(0.0, 0.0, 0.0))
    x, y, z = v[:, 0], v[:, 1], v[:, 2]
    top = z > 0
    bx, by, bz = _cube_to_ball(x[top], y[top], z[top])
    dx, dy = _square_to_disk(x, y)
    dx[top], dy[top] = bx, by
    dz = z.copy()
    dz[top] = bz
    verts = radius * np.stack([dx, dy, dz], axis=1)
    verts[:, 2] += shaft
    verts += np.asarray(center, dtype=float)
    return _orient(TetMesh(verts, t, name="finger"))

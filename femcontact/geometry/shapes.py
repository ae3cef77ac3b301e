"""Obstacle shapes: signed distance functions in the shape's own (local) frame.

Every shape knows, in its local frame (metres):

- ``sdf(points) -> (phi (k,), normal (k, 3))``: signed distance (negative inside) and the
  outward unit normal (the gradient of the distance), in numpy, for the host and tests;
- ``kind`` and ``packed()``: an integer code and 8 floats the detection kernels read
  (``narrowphase.shape_sdf`` evaluates the same functions in Taichi);
- ``surface(extent)``: a triangle surface (vertices, faces) for output (a half-space is a
  finite square patch of half-size ``extent``).

Shapes: HalfSpace, Box, Sphere, Capsule (axis local z), Cylinder (axis local z),
TriangleMesh (a closed triangle surface turned into a signed-distance grid at build time,
trilinear lookup at run time) and Compound (several finite shapes placed in one frame: a rigid
body made of parts; the kernels evaluate its parts' own SDFs, each in its frame, and take the
nearest, exactly as the host's ``sdf``). Pose (position, rotation, motion) belongs to the obstacle,
not to the shape (``scene.add_obstacle``).
"""
from __future__ import annotations

import abc

import numpy as np

from ..errors import ParameterError
from .closest import closest_point_on_triangles  # noqa: F401 (public as femcontact.shapes.closest_point_on_triangles)
from .sdf_grid import signed_distance_grid

HALFSPACE, BOX, SPHERE, CAPSULE, CYLINDER, MESH, COMPOUND = range(7)
# Floats per part in a compound's kernel table (``Compound.kernel_table``): kind, the 8 packed floats,
# rotation row-major (9), position (3), offset of a mesh part's grid from the table's start.
PART_REC = 22

__all__ = ["Shape", "HalfSpace", "Box", "Sphere", "Capsule", "Cylinder", "TriangleMesh", "Compound",
           "closest_point_on_triangles"]


def _positive(value, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a positive number in metres, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ParameterError(f"{what} must be a positive number in metres, got {value!r}")
    return v


def _safe_normalize(v: np.ndarray, fallback=(0.0, 0.0, 1.0)) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    out = np.where(n > 1e-300, v / np.where(n > 1e-300, n, 1.0), np.asarray(fallback, float))
    return out


class Shape(abc.ABC):
    """Base class of obstacle shapes (see module docstring)."""

    kind = -1

    @abc.abstractmethod
    def packed(self) -> np.ndarray:
        """Parameters the detection kernels read (fixed-length float array)."""

    @abc.abstractmethod
    def sdf(self, points) -> tuple[np.ndarray, np.ndarray]:
        """Signed distance (m) and outward unit normal at (k, 3) points in the local frame."""

    @abc.abstractmethod
    def surface(self, extent: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Triangle surface (vertices, faces) for output."""

    @abc.abstractmethod
    def bounding_radius(self) -> float:
        """Radius (m) of a ball around the local origin holding the shape (inf for a half-space)."""


class _AxialShape(Shape):
    """A shape about local z given by a radius and a half length (capsule, cylinder)."""

    def __init__(self, radius: float = 0.1, half_length: float = 0.5):
        name = type(self).__name__
        self.radius = _positive(radius, f"{name} radius")
        self.half_length = _positive(half_length, f"{name} half_length")

    def packed(self):
        return np.array([self.radius, self.half_length, 0, 0, 0, 0, 0, 0], float)


class HalfSpace(Shape):
    """The solid ``normal · p <= offset`` (local frame); ``normal`` is its outward unit normal."""

    kind = HALFSPACE

    def __init__(self, normal=(0.0, 0.0, 1.0), offset: float = 0.0):
        try:
            n = np.asarray(normal, dtype=float)
        except (TypeError, ValueError, OverflowError):
            n = np.zeros(0)
        if n.shape != (3,) or not np.isfinite(n).all() or np.linalg.norm(n) < 1e-12:
            raise ParameterError(f"HalfSpace normal must be a non-zero 3-vector, got {normal!r}")
        try:
            off = np.nan if isinstance(offset, (bool, str)) else float(offset)
        except (TypeError, ValueError, OverflowError):
            off = np.nan
        if not np.isfinite(off):
            raise ParameterError(f"HalfSpace offset must be finite, got {offset!r}")
        self.normal = n / np.linalg.norm(n)
        self.offset = float(off)

    def packed(self):
        return np.array([*self.normal, self.offset, 0, 0, 0, 0], float)

    def sdf(self, points):
        p = np.asarray(points, float).reshape(-1, 3)
        return p @ self.normal - self.offset, np.tile(self.normal, (len(p), 1))

    def surface(self, extent: float = 1.0):
        n = self.normal
        a = np.array([1.0, 0, 0]) if abs(n[0]) < 0.9 else np.array([0, 1.0, 0])
        t1 = np.cross(n, a)
        t1 /= np.linalg.norm(t1)
        t2 = np.cross(n, t1)
        c = self.offset * n
        corners = [c + extent * (sx * t1 + sy * t2) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        return np.array(corners), np.array([[0, 1, 2], [0, 2, 3]])

    def bounding_radius(self):
        return np.inf


class Box(Shape):
    """Box centred at the local origin with half-extents (hx, hy, hz) in m."""

    kind = BOX

    def __init__(self, half_extents=(0.5, 0.5, 0.5)):
        try:
            h = np.asarray(half_extents, dtype=float)
        except (TypeError, ValueError, OverflowError):
            h = np.zeros(0)
        if h.shape != (3,):
            raise ParameterError(f"Box half_extents must be three positive numbers, got {half_extents!r}")
        self.half_extents = np.array([_positive(x, "Box half_extents") for x in h])

    def packed(self):
        return np.array([*self.half_extents, 0, 0, 0, 0, 0], float)

    def sdf(self, points):
        p = np.asarray(points, float).reshape(-1, 3)
        h = self.half_extents
        q = np.abs(p) - h
        qp = np.maximum(q, 0.0)
        out = np.linalg.norm(qp, axis=1)
        inside = np.minimum(q.max(axis=1), 0.0)
        phi = out + inside
        sgn = np.where(p >= 0, 1.0, -1.0)
        n_out = sgn * qp / np.where(out > 0, out, 1.0)[:, None]
        k = np.argmax(q, axis=1)
        n_in = np.zeros_like(p)
        n_in[np.arange(len(p)), k] = sgn[np.arange(len(p)), k]
        return phi, np.where((out > 0)[:, None], n_out, n_in)

    def surface(self, extent: float = 1.0):
        h = self.half_extents
        v = np.array([[sx, sy, sz] for sz in (-1, 1) for sy in (-1, 1) for sx in (-1, 1)], float) * h
        f = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                      [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]])
        return v, f

    def bounding_radius(self):
        return float(np.linalg.norm(self.half_extents))


def _revolve(profile_r, profile_z, n_theta=24):
    """Closed surface of revolution about z from a profile (r, z) running bottom to top."""
    th = np.linspace(0, 2 * np.pi, n_theta, endpoint=False)
    rings = []
    for r, z in zip(profile_r, profile_z):
        rings.append(np.stack([r * np.cos(th), r * np.sin(th), np.full_like(th, z)], 1))
    v = np.concatenate(rings)
    faces = []
    nr = len(profile_r)
    for i in range(nr - 1):
        for j in range(n_theta):
            a, b = i * n_theta + j, i * n_theta + (j + 1) % n_theta
            c, d = a + n_theta, b + n_theta
            faces += [[a, b, d], [a, d, c]]
    bottom, top = len(v), len(v) + 1
    v = np.vstack([v, [0, 0, profile_z[0]], [0, 0, profile_z[-1]]])
    for j in range(n_theta):
        a, b = j, (j + 1) % n_theta
        faces.append([bottom, b, a])
        a, b = (nr - 1) * n_theta + j, (nr - 1) * n_theta + (j + 1) % n_theta
        faces.append([top, a, b])
    return v, np.array(faces)


class Sphere(Shape):
    """Ball of ``radius`` m centred at the local origin."""

    kind = SPHERE

    def __init__(self, radius: float = 0.5):
        self.radius = _positive(radius, "Sphere radius")

    def packed(self):
        return np.array([self.radius, 0, 0, 0, 0, 0, 0, 0], float)

    def sdf(self, points):
        p = np.asarray(points, float).reshape(-1, 3)
        d = np.linalg.norm(p, axis=1)
        return d - self.radius, _safe_normalize(p)

    def surface(self, extent: float = 1.0):
        a = np.linspace(-np.pi / 2, np.pi / 2, 13)[1:-1]
        return _revolve(self.radius * np.cos(a), self.radius * np.sin(a))

    def bounding_radius(self):
        return self.radius


class Capsule(_AxialShape):
    """Segment from (0,0,-half_length) to (0,0,+half_length) swept by a ball of ``radius`` m."""

    kind = CAPSULE

    def sdf(self, points):
        p = np.asarray(points, float).reshape(-1, 3)
        c = np.zeros_like(p)
        c[:, 2] = np.clip(p[:, 2], -self.half_length, self.half_length)
        d = p - c
        return np.linalg.norm(d, axis=1) - self.radius, _safe_normalize(d)

    def surface(self, extent: float = 1.0):
        a = np.linspace(-np.pi / 2, np.pi / 2, 12)[1:-1]
        r = self.radius * np.cos(a)
        z = self.radius * np.sin(a) + np.where(a < 0, -self.half_length, self.half_length)
        return _revolve(r, z)

    def bounding_radius(self):
        return self.radius + self.half_length


class Cylinder(_AxialShape):
    """Solid cylinder of ``radius`` m about local z, from z = -half_length to +half_length."""

    kind = CYLINDER

    def sdf(self, points):
        p = np.asarray(points, float).reshape(-1, 3)
        rho = np.hypot(p[:, 0], p[:, 1])
        radial = np.zeros_like(p)
        ok = rho > 1e-300
        radial[ok, 0] = p[ok, 0] / rho[ok]
        radial[ok, 1] = p[ok, 1] / rho[ok]
        radial[~ok, 0] = 1.0
        dr = rho - self.radius
        dz = np.abs(p[:, 2]) - self.half_length
        sz = np.where(p[:, 2] >= 0, 1.0, -1.0)
        axial = np.zeros_like(p)
        axial[:, 2] = sz
        out = np.hypot(np.maximum(dr, 0), np.maximum(dz, 0))
        phi = out + np.minimum(np.maximum(dr, dz), 0.0)
        n_out = (radial * np.maximum(dr, 0)[:, None] + axial * np.maximum(dz, 0)[:, None]) / np.where(
            out > 0, out, 1.0)[:, None]
        n_in = np.where((dr > dz)[:, None], radial, axial)
        return phi, np.where((out > 0)[:, None], n_out, n_in)

    def surface(self, extent: float = 1.0):
        return _revolve(np.full(2, self.radius), np.array([-self.half_length, self.half_length]), 32)

    def bounding_radius(self):
        return float(np.hypot(self.radius, self.half_length))


class GridShape(Shape):
    """A shape the detection kernels read as a signed-distance grid (kind MESH; TriangleMesh): ``origin`` (3,),
    ``spacing`` (m), ``dims`` (3,) and ``grid`` (dims) of distances at the grid nodes."""

    kind = MESH

    def packed(self):
        return np.array([*self.origin, self.spacing, *self.dims.astype(float), 0.0], float)

    def _trilinear(self, p):
        g, h = self.grid, self.spacing
        hi = (self.dims - 1) * h + self.origin
        pc = np.clip(p, self.origin, hi)
        extra = np.linalg.norm(p - pc, axis=1)
        u = (pc - self.origin) / h
        i = np.clip(np.floor(u).astype(int), 0, self.dims - 2)
        f = u - i
        phi = np.zeros(len(p))
        grad = np.zeros((len(p), 3))
        for dx in (0, 1):
            for dy in (0, 1):
                for dz in (0, 1):
                    val = g[i[:, 0] + dx, i[:, 1] + dy, i[:, 2] + dz]
                    wx = f[:, 0] if dx else 1 - f[:, 0]
                    wy = f[:, 1] if dy else 1 - f[:, 1]
                    wz = f[:, 2] if dz else 1 - f[:, 2]
                    phi += wx * wy * wz * val
                    grad[:, 0] += (1 if dx else -1) * wy * wz * val / h
                    grad[:, 1] += wx * (1 if dy else -1) * wz * val / h
                    grad[:, 2] += wx * wy * (1 if dz else -1) * val / h
        n = np.where((extra > 0)[:, None], p - pc, grad)
        return phi + extra, _safe_normalize(n)


class TriangleMesh(GridShape):
    """A closed, outward-oriented triangle surface (vertices (n,3) m, faces (k,3)) as an obstacle.

    At construction its signed distance is sampled on a regular grid (``resolution`` cells along
    the longest side, ``padding`` m around the bounding box; default padding = 10 % of the
    longest side + 2 cells): at each node exactly the distance to the nearest triangle, negative
    inside; lookups are trilinear, so distances are exact to about a cell size near the surface.
    Outside the grid the distance is that of the nearest grid point plus the distance to it (an
    overestimate that is exact far away in the grid's direction).
    """

    kind = MESH

    def __init__(self, vertices, faces, resolution: int = 32, padding: float | None = None, *,
                 sample: bool = True):
        """``sample=False``: the grid is sampled at its first read, or by whoever ``defer`` names."""
        v = np.asarray(vertices, float).reshape(-1, 3)
        f = np.asarray(faces, np.int64).reshape(-1, 3)
        if len(v) < 4 or len(f) < 4 or not np.isfinite(v).all():
            raise ParameterError("TriangleMesh needs a closed surface: at least 4 finite vertices and 4 faces")
        if f.min() < 0 or f.max() >= len(v):
            raise ParameterError("TriangleMesh faces refer to vertices that do not exist")
        if not isinstance(resolution, (int, np.integer)) or resolution < 4:
            raise ParameterError(f"TriangleMesh resolution must be an integer >= 4, got {resolution!r}")
        lo, hi = v.min(0), v.max(0)
        size = float((hi - lo).max())
        if size <= 0:
            raise ParameterError("TriangleMesh has zero size")
        h = size / resolution
        pad = (0.1 * size + 2 * h) if padding is None else float(padding)
        if not np.isfinite(pad) or pad < 0:
            raise ParameterError(f"TriangleMesh padding must be a non-negative number, got {padding!r}")
        self.vertices, self.faces = v, f
        self.origin = lo - pad
        self.spacing = h
        self.dims = np.ceil((hi + pad - self.origin) / h).astype(int) + 1
        self._grid, self._pending = None, None
        if sample:
            self.grid = self.sample_grid()

    def defer(self, future) -> None:
        """Let a ``concurrent.futures.Future`` that returns ``sample_grid()`` (sampling in the
        background) provide the grid: its first read waits for it, and raises its errors then."""
        self._pending = future

    @property
    def grid(self) -> np.ndarray:
        """The sampled signed distances (``dims``), m."""
        if self._grid is None:
            self.grid = self._pending.result() if self._pending is not None else self.sample_grid()
        return self._grid

    @grid.setter
    def grid(self, value: np.ndarray) -> None:
        if not (value.min() < 0):
            raise ParameterError("TriangleMesh has no inside: is the surface closed and outward-oriented?")
        self._grid, self._pending = value, None

    def sample_grid(self) -> np.ndarray:
        """The signed distances at the grid nodes (the class docstring), computed now."""
        return signed_distance_grid(self.vertices[self.faces], self.origin, self.spacing, self.dims)

    def sdf(self, points):
        return self._trilinear(np.asarray(points, float).reshape(-1, 3))

    def surface(self, extent: float = 1.0):
        return self.vertices, self.faces

    def bounding_radius(self):
        return float(np.linalg.norm(self.vertices, axis=1).max())


# ---------------------------------------------------------------- compound shapes
def _rotation(value, what: str) -> np.ndarray:
    """None (identity), a 3x3 rotation matrix, a quaternion (w, x, y, z) or a scipy Rotation."""
    if value is None:
        return np.eye(3)
    if hasattr(value, "as_matrix"):
        return np.asarray(value.as_matrix(), float).reshape(3, 3)
    try:
        a = np.asarray(value, float)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.shape == (4,) and np.isfinite(a).all() and np.linalg.norm(a) > 0:
        w, x, y, z = a / np.linalg.norm(a)
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    if a.shape == (3, 3) and np.isfinite(a).all() and np.allclose(a @ a.T, np.eye(3), atol=1e-6) \
            and np.linalg.det(a) > 0:
        return a
    raise ParameterError(f"{what}: rotation must be None, a 3x3 rotation matrix, a quaternion (w, x, y, z) or a "
                         f"scipy Rotation, got {value!r}")


class Compound(Shape):
    """A rigid shape made of parts ``[(shape, position, rotation), ...]`` placed in its own frame
    (each part rotated by ``rotation``, then moved to ``position``, m; rotation None, 3x3,
    quaternion wxyz or scipy Rotation; a bare shape is a part at the origin). Parts are finite shapes (Box, Sphere, Capsule, Cylinder,
    TriangleMesh), not half-spaces or other compounds.

    Signed distance: the minimum over the parts, with the nearest part's normal (``sdf``). The
    detection kernels evaluate the same thing at run time (``kernel_table``: each part's kind,
    packed parameters and pose, read by ``narrowphase.shape_sdf``), so a compound's distance and
    normal are exact wherever its parts' are (a TriangleMesh part keeps its own grid), however thin
    a part is. (Until issue 17 the kernels read a grid of the min sampled with 32 cells along the
    compound: on a 10 mm x 20 mm bar under 8-11 mm cells that tilted face normals by up to 14° and
    moved gaps by 0.2 mm; on a 4 mm plate, gaps by 1.6 mm.)
    Surface (output) and contact points (``geometry.proxies``): the parts', those inside another part left out.
    Mass properties (``geometry.mass.mass_properties``): the sum of the parts' (parallel-axis
    theorem); where parts overlap, the overlap is counted once per part.
    """

    kind = COMPOUND

    def __init__(self, parts):
        try:
            items = list(parts)
        except TypeError:
            items = None
        if not items:
            raise ParameterError("Compound needs a non-empty list of (shape, position, rotation) parts")
        self.parts = []
        for i, item in enumerate(items):
            what = f"Compound part {i}"
            if isinstance(item, Shape):
                item = (item,)
            if not isinstance(item, (tuple, list)) or not 1 <= len(item) <= 3:
                raise ParameterError(f"{what}: expected (shape, position, rotation), got {item!r}")
            shape, position, rotation = (*item, None, None)[:3]
            if not isinstance(shape, Shape) or isinstance(shape, (HalfSpace, Compound)):
                raise ParameterError(f"{what}: a part must be a Box, Sphere, Capsule, Cylinder or TriangleMesh, "
                                     f"got {type(shape).__name__}")
            try:
                t = np.zeros(3) if position is None else np.asarray(position, float)
            except (TypeError, ValueError):
                t = np.zeros(0)
            if t.shape != (3,) or not np.isfinite(t).all():
                raise ParameterError(f"{what}: position must be 3 finite numbers (m), got {position!r}")
            self.parts.append((shape, t, _rotation(rotation, what)))

    def packed(self):
        return np.array([len(self.parts), 0, 0, 0, 0, 0, 0, 0], float)

    def kernel_table(self) -> np.ndarray:
        """What ``narrowphase.shape_sdf`` reads for this shape (flat floats): ``PART_REC`` floats per
        part (kind, its 8 packed floats, rotation row-major, position, offset of its grid from the
        table's start for a TriangleMesh part, else 0), then the mesh parts' grids."""
        records, grids = np.zeros((len(self.parts), PART_REC)), []
        off = len(self.parts) * PART_REC
        for k, (shape, t, R) in enumerate(self.parts):
            records[k, 0] = shape.kind
            records[k, 1:9] = shape.packed()
            records[k, 9:18] = R.ravel()
            records[k, 18:21] = t
            if shape.kind == MESH:
                records[k, 21] = off
                grids.append(shape.grid.ravel())
                off += shape.grid.size
        return np.concatenate([records.ravel(), *grids])

    def part_sdf(self, points) -> tuple[np.ndarray, np.ndarray]:
        """(k, parts) signed distances of (k, 3) points to every part and (k, parts, 3) normals."""
        p = np.asarray(points, float).reshape(-1, 3)
        phis, normals = [], []
        for shape, t, R in self.parts:
            phi, n = shape.sdf((p - t) @ R)
            phis.append(phi)
            normals.append(n @ R.T)
        return np.stack(phis, 1), np.stack(normals, 1)

    def sdf(self, points):
        phi, n = self.part_sdf(points)
        k = np.argmin(phi, axis=1)
        rows = np.arange(len(phi))
        return phi[rows, k], n[rows, k]

    def surface(self, extent: float = 1.0):
        verts, faces, off = [], [], 0
        for shape, t, R in self.parts:
            v, f = shape.surface(extent)
            verts.append(v @ R.T + t)
            faces.append(f + off)
            off += len(v)
        return np.concatenate(verts), np.concatenate(faces)

    def bounding_radius(self):
        return float(max(np.linalg.norm(t) + s.bounding_radius() for s, t, _ in self.parts))

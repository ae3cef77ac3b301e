"""Contact proxies and surface samples of shapes (host, numpy), in the shape's frame.

``contact_proxies``: the points (balls, rim circles) with which a rigid body touches obstacles and
other rigid bodies; ``surface_samples``: surface points with their normal cones, tested against FEM
tets. A compound's are its parts', those buried in another part left out.
"""
from __future__ import annotations

import numpy as np

from . import shapes as S
from .mass import mass_properties

# contact proxy kinds (body frame): a sphere (radius 0: a point) and a circle (cylinder rims)
PROXY_SPHERE, PROXY_CIRCLE = 0, 1
# which obstacles a proxy is tested against
PROXY_ANY, PROXY_HALFSPACE_ONLY, PROXY_NOT_HALFSPACE = 0, 1, 2


def _outside_other_parts(shape, k: int, points: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Mask of compound part k's points (balls of ``radius``) not buried inside another part."""
    if len(shape.parts) == 1 or not len(points):
        return np.ones(len(points), bool)
    phi, _ = shape.part_sdf(points)
    phi[:, k] = np.inf
    return phi.min(1) >= -radius - 1e-9 * (1.0 + shape.bounding_radius())


def contact_proxies(shape) -> dict:
    """Body-frame points that can touch other things, for rigid-vs-obstacle and rigid-vs-rigid
    detection: arrays ``point`` (k,3), ``radius`` (k,), ``kind`` (PROXY_*), ``axis`` (k,3) of
    circles, ``against`` (PROXY_ANY / HALFSPACE_ONLY / NOT_HALFSPACE).

    Sphere: its centre with its radius (exact against every SDF). Capsule: balls along the axis.
    Cylinder: its two rim circles against half-spaces (exact lowest point, so it rolls smoothly)
    and rim/cap samples against everything else. Box: corners, edge midpoints and face centres (26 points; few redundant contacts keep COND converging). Mesh: its
    vertices. Points with radius r touch where ``sdf(p) < r``.
    """
    P, r, kind, axis, against = [], [], [], [], []

    def add(points, radius=0.0, k=PROXY_SPHERE, ax=(0.0, 0.0, 1.0), ag=PROXY_ANY):
        points = np.atleast_2d(np.asarray(points, float))
        P.append(points)
        r.append(np.full(len(points), radius))
        kind.append(np.full(len(points), k))
        axis.append(np.tile(ax, (len(points), 1)))
        against.append(np.full(len(points), ag))

    if isinstance(shape, S.Sphere):
        add([0.0, 0.0, 0.0], shape.radius)
    elif isinstance(shape, S.Capsule):
        n = max(2, int(np.ceil(2 * shape.half_length / shape.radius)) + 1)
        add(np.c_[np.zeros(n), np.zeros(n), np.linspace(-shape.half_length, shape.half_length, n)], shape.radius)
    elif isinstance(shape, S.Cylinder):
        R, h = shape.radius, shape.half_length
        add([[0, 0, -h], [0, 0, h]], R, PROXY_CIRCLE, ag=PROXY_HALFSPACE_ONLY)
        th = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        ring = np.c_[R * np.cos(th), R * np.sin(th)]
        nz = max(2, int(np.ceil(2 * h / (R * 2 * np.pi / 24))) + 1)
        for z in np.linspace(-h, h, nz):
            add(np.c_[ring, np.full(len(th), z)], ag=PROXY_NOT_HALFSPACE)
        for z in (-h, h):
            add(np.c_[0.5 * ring, np.full(len(th), z)], ag=PROXY_NOT_HALFSPACE)
            add([0, 0, z], ag=PROXY_NOT_HALFSPACE)
    elif isinstance(shape, S.Box):
        hx = shape.half_extents
        g = np.linspace(-1, 1, 3)
        pts = np.array([[x, y, z] for x in g for y in g for z in g])
        on_surface = (np.abs(pts) == 1).any(1)
        add(pts[on_surface] * hx)
    elif isinstance(shape, S.TriangleMesh):
        add(np.unique(shape.vertices[shape.faces.ravel()], axis=0))
    elif isinstance(shape, S.Compound):                  # the parts' proxies, those buried in another left out
        for k, (part, t, R) in enumerate(shape.parts):
            px = contact_proxies(part)
            keep = _outside_other_parts(shape, k, px["point"] @ R.T + t,
                                        np.where(px["kind"] == PROXY_SPHERE, px["radius"], np.inf))
            for pt, rad, kd, ax, ag in zip(px["point"][keep] @ R.T + t, px["radius"][keep], px["kind"][keep],
                                           px["axis"][keep] @ R.T, px["against"][keep]):
                add(pt, rad, kd, ax, ag)
    else:
        mass_properties(shape, 1.0)  # raises the clear error
    return {"point": np.concatenate(P), "radius": np.concatenate(r), "kind": np.concatenate(kind).astype(np.int32),
            "axis": np.concatenate(axis), "against": np.concatenate(against).astype(np.int32)}


def surface_samples(shape, n_sphere: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Body-frame surface points tested against FEM tets (``detection.detect_rigid_in_fem``), each with
    the axis ``g`` (k, 3, unit, outward) and cosine (k,) of the half-angle of a cone around it that
    holds the surface's outward normals there (its normal cone: one direction on a smooth or flat
    part, the faces' normals at an edge, corner or mesh vertex). Points: the radius-0 contact
    proxies (box corners, edge midpoints, face centres; mesh vertices; cylinder rims, sides, caps);
    a sphere gets ``n_sphere`` Fibonacci points, a capsule those on its end caps plus rings of 12; a
    compound its parts' (those inside another part left out)."""
    if isinstance(shape, S.Compound):
        out = []
        for k, (part, t, R) in enumerate(shape.parts):
            p, g, c = surface_samples(part, n_sphere)
            p, g = p @ R.T + t, g @ R.T
            keep = _outside_other_parts(shape, k, p, np.zeros(len(p)))
            out.append((p[keep], g[keep], c[keep]))
        return tuple(np.concatenate(z) for z in zip(*out))
    if isinstance(shape, (S.Sphere, S.Capsule)):
        k = np.arange(n_sphere) + 0.5
        z = 1 - 2 * k / n_sphere
        th = np.pi * (1 + 5**0.5) * k
        u = np.c_[np.sqrt(1 - z * z) * np.cos(th), np.sqrt(1 - z * z) * np.sin(th), z]
        if isinstance(shape, S.Sphere):
            return shape.radius * u, u, np.ones(len(u))
        h, r = shape.half_length, shape.radius
        th = np.linspace(0, 2 * np.pi, 12, endpoint=False)
        zs = np.linspace(-h, h, max(2, int(np.ceil(2 * h / r)) + 1))
        side = np.tile(np.c_[np.cos(th), np.sin(th), np.zeros(12)], (len(zs), 1))
        p = np.r_[r * u + np.c_[0 * z, 0 * z, np.sign(z) * h], r * side + np.c_[0 * side[:, :2], np.repeat(zs, 12)]]
        g = np.r_[u, side]
        return p, g, np.ones(len(p))
    px = contact_proxies(shape)
    p = px["point"][(px["radius"] == 0) & (px["kind"] == PROXY_SPHERE)]
    if isinstance(shape, S.Box):
        f = np.isclose(np.abs(p), shape.half_extents) * np.sign(p)      # the faces each point is on
        n_faces = (f != 0).sum(1)
    elif isinstance(shape, S.Cylinder):
        rim = np.isclose(np.hypot(p[:, 0], p[:, 1]), shape.radius)
        cap = np.isclose(np.abs(p[:, 2]), shape.half_length)
        radial = p[:, :2] / np.maximum(np.hypot(p[:, 0], p[:, 1]), 1e-300)[:, None]
        f = np.c_[radial * rim[:, None], np.sign(p[:, 2]) * cap]
        n_faces = rim.astype(int) + cap
    else:                                                  # mesh: the faces around each vertex
        return p, *_vertex_cones(shape, p)
    g = f / np.linalg.norm(f, axis=1, keepdims=True)
    return p, g, 1.0 / np.sqrt(n_faces)                    # box and cylinder faces meet at right angles


def _vertex_cones(shape, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Axis (area-weighted vertex normal) and cosine of the smallest cone around it holding the unit
    normals of the faces at each of the mesh vertices p."""
    v, f = shape.vertices, shape.faces
    fn = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    un = fn / np.linalg.norm(fn, axis=1, keepdims=True)
    g, c = np.zeros_like(p), np.ones(len(p))
    # the faces at p[i]: those with a corner at p[i] (np.isclose per coordinate); matched vertex by
    # vertex (a face corner is a vertex), in blocks, then through a vertex -> faces incidence list
    corner_of = np.argsort(f.ravel(), kind="stable")
    starts = np.searchsorted(f.ravel()[corner_of], np.arange(len(v) + 1))
    atol = 1e-12 * (1 + np.abs(p).max(1))
    for lo in range(0, len(p), 256):
        near = np.isclose(v[None], p[lo:lo + 256, None], atol=atol[lo:lo + 256, None, None]).all(2)
        for i, row in enumerate(near, lo):
            at = np.unique(np.concatenate([corner_of[starts[w]:starts[w + 1]] for w in np.flatnonzero(row)]
                                          + [np.zeros(0, np.int64)]) // 3)
            n = fn[at].sum(0)
            g[i] = n / np.linalg.norm(n)
            c[i] = max((un[at] @ g[i]).min(), 0.0)
    return g, c

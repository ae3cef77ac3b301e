"""Bodies that overlap when the run starts: found on the host before anything is compiled.

A body placed inside another (or below the ground) cannot be pushed out by a contact solver in a
step or two: the first steps explode or the bodies stay fused. ``check_initial_overlap`` refuses
such a scene, naming the pair and the depth. Resting contact (depth 0) and shallow overlaps (below
half an edge length of the meshes involved, or a tenth of a rigid shape's size) pass, as do pairs
whose contact is disabled, attached or joined pairs, and pairs of two prescribed bodies. A rod
(cable) overlaps where its surface — its centreline points widened by its radius — reaches more
than half a segment length, or its radius if that is larger, into a body, an obstacle or another
rod.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..geometry.closest import closest_point_on_triangles
from ..geometry.shapes import HalfSpace
from ..meshes.surface import boundary_faces

_K_TETS = 8          # candidate tets per point (nearest centroids)
_K_FACES = 24        # candidate boundary triangles per point for the depth


class _Fem:
    """What the check needs of one FEM body: positions, tets, boundary triangles, edge length."""

    def __init__(self, spec):
        self.name = spec.name
        self.x = np.asarray(spec.positions, float)
        self.tets = spec.mesh.tets
        self.faces = boundary_faces(spec.mesh)
        e = self.x[self.faces] - self.x[self.faces[:, [1, 2, 0]]]
        self.h = float(np.linalg.norm(e, axis=2).mean()) if len(self.faces) else 0.0
        self.lo, self.hi = self.x.min(axis=0), self.x.max(axis=0)
        self._tree = self._ftree = None

    def depth_inside(self, p: np.ndarray) -> np.ndarray:
        """Depth (m) of points p inside this body (0 outside)."""
        depth = np.zeros(len(p))
        sel = np.flatnonzero(((p >= self.lo) & (p <= self.hi)).all(axis=1))
        if sel.size == 0:
            return depth
        if self._tree is None:
            from scipy.spatial import cKDTree     # scipy.spatial: ~0.3 s of start-up, imported where used
            x = self.x[self.tets]
            self._tree = cKDTree(x.mean(axis=1))
            self._x0 = x[:, 0]
            self._inv = np.linalg.inv(np.transpose(x[:, 1:] - x[:, :1], (0, 2, 1)))
            c = self.x[self.faces].mean(axis=1)
            self._ftree = cKDTree(c)
        q = p[sel]
        k = min(_K_TETS, len(self.tets))
        _, cand = self._tree.query(q, k=k)
        cand = cand.reshape(len(q), k)
        lam = np.einsum("nkij,nkj->nki", self._inv[cand], q[:, None, :] - self._x0[cand])
        inside = ((lam >= -1e-9).all(axis=2) & (lam.sum(axis=2) <= 1 + 1e-9)).any(axis=1)
        if not inside.any():
            return depth
        qi = q[inside]
        kf = min(_K_FACES, len(self.faces))
        _, fc = self._ftree.query(qi, k=kf)
        fc = fc.reshape(len(qi), kf)
        tri = self.x[self.faces[fc]]                                   # (n, kf, 3, 3)
        pts = np.repeat(qi, kf, axis=0)
        closest, _ = closest_point_on_triangles(pts, *(tri[:, :, j].reshape(-1, 3) for j in range(3)))
        dist = np.linalg.norm(pts - closest, axis=1).reshape(len(qi), kf).min(axis=1)
        depth[sel[inside]] = dist
        return depth


def _shape_depth(shape, position, rotation, p: np.ndarray) -> np.ndarray:
    """Depth (m) of world points p inside a placed shape (0 outside)."""
    local = (np.asarray(p, float) - position) @ np.asarray(rotation)
    phi, _ = shape.sdf(local)
    return np.maximum(-np.asarray(phi, float), 0.0)


def _shape_points(shape, position, rotation) -> np.ndarray:
    """World surface sample of a placed finite shape."""
    v, _ = shape.surface(1.0)
    return np.asarray(v, float) @ np.asarray(rotation).T + position


def _refuse(kind_a: str, a: str, kind_b: str, b: str, depth: float, tol: float, where: np.ndarray) -> None:
    raise ParameterError(
        f"{kind_a} {a!r} and {kind_b} {b!r} overlap at the start: a point of {a!r} at "
        f"{np.round(where, 6).tolist()} lies {depth:.3g} m inside {b!r} (more than the {tol:.3g} m allowed); "
        f"move one of them (position=...) so they at most touch, or disable their contact with "
        f"scene.set_contact({a!r}, {b!r}, enabled=False)")


class _Rod:
    """What the check needs of one rod: centreline points (nodes and midpoints), radius, tolerance."""

    def __init__(self, spec):
        self.name, self.r = spec.name, float(spec.radius)
        self.x = np.asarray(spec.positions, float)
        nodes = np.asarray(spec.points, float)
        seg = np.linalg.norm(np.diff(nodes, axis=0), axis=1)
        self.tol = max(0.5 * float(seg.max()) if len(seg) else 0.0, self.r)
        self.lo, self.hi = self.x.min(axis=0) - self.r, self.x.max(axis=0) + self.r


def _check_rods(rods: list, fems: list, rigids: list, obstacles: list, skip: set) -> None:
    """Rod surfaces against FEM bodies, rigid bodies, obstacles and other rods (module docstring)."""
    for i, a in enumerate(rods):
        for b in fems:
            if frozenset((a.name, b.name)) in skip or (a.hi < b.lo).any() or (b.hi < a.lo).any():
                continue
            d = b.depth_inside(a.x)
            pen = np.where(d > 0.0, d + a.r, 0.0)
            tol = max(a.tol, 0.5 * b.h)
            if pen.max() > tol:
                k = int(np.argmax(pen))
                _refuse("rod", a.name, "body", b.name, float(pen[k]), tol, a.x[k])
        shapes = [(o.name, "obstacle", o.shape, c, R) for o, c, R in obstacles]
        shapes += [(r.name, "rigid body", r.shape, c, R) for r, c, R in rigids]
        for name, kind, shape, c, R in shapes:
            if frozenset((a.name, name)) in skip:
                continue
            phi, _ = shape.sdf((a.x - c) @ np.asarray(R))
            pen = a.r - np.asarray(phi, float)
            if pen.max() > a.tol:
                k = int(np.argmax(pen))
                _refuse("rod", a.name, kind, name, float(pen[k]), a.tol, a.x[k])
        for b in rods[i + 1:]:
            if frozenset((a.name, b.name)) in skip or (a.hi < b.lo).any() or (b.hi < a.lo).any():
                continue
            from scipy.spatial import cKDTree
            dist, k = cKDTree(b.x).query(a.x)
            pen = a.r + b.r - dist
            tol = max(a.tol, b.tol)
            if pen.max() > tol:
                j = int(np.argmax(pen))
                _refuse("rod", a.name, "rod", b.name, float(pen[j]), tol, a.x[j])


def check_initial_overlap(scene) -> None:
    """Raise ParameterError if two bodies, or a body and an obstacle, overlap at t = 0 (module docstring)."""
    skip = {frozenset((p.a, p.b)) for p in scene.contact_pairs if not p.enabled}
    skip |= {frozenset((a.body, a.rigid if a.rigid is not None else a.target)) for a in scene.attachments}
    skip |= {frozenset((j.parent, j.child)) for j in scene.joints}
    fems = [_Fem(s) for s in scene.fem_bodies if s.mesh.n_tets]
    rigids = []
    for r in scene.rigid_bodies:
        c, R = r.pose(0.0) if r.kinematic else (r.position, r.rotation)
        rigids.append((r, np.asarray(c, float), np.asarray(R, float)))
    obstacles = [(o, *o.pose(0.0)) for o in scene.obstacles]

    for a in fems:
        for b in fems:
            if a is b or frozenset((a.name, b.name)) in skip:
                continue
            if (a.hi < b.lo).any() or (b.hi < a.lo).any():
                continue
            d = b.depth_inside(a.x)
            tol = 0.5 * max(a.h, b.h)
            if d.max() > tol:
                i = int(np.argmax(d))
                _refuse("body", a.name, "body", b.name, float(d[i]), tol, a.x[i])
        for o, c, R in obstacles:
            if frozenset((a.name, o.name)) in skip:
                continue
            d = _shape_depth(o.shape, c, R, a.x)
            tol = 0.5 * a.h
            if d.max() > tol:
                i = int(np.argmax(d))
                _refuse("body", a.name, "obstacle", o.name, float(d[i]), tol, a.x[i])
        for r, c, R in rigids:
            if frozenset((a.name, r.name)) in skip or (
                    np.maximum(a.lo - c, 0) + np.maximum(c - a.hi, 0)).max() > r.shape.bounding_radius():
                continue
            d = _shape_depth(r.shape, c, R, a.x)
            tol = max(0.5 * a.h, 0.1 * r.shape.bounding_radius())
            if d.max() > tol:
                i = int(np.argmax(d))
                _refuse("body", a.name, "rigid body", r.name, float(d[i]), tol, a.x[i])
            pts = _shape_points(r.shape, c, R)       # a rigid body inside an FEM body
            d = a.depth_inside(pts)
            if d.max() > tol:
                i = int(np.argmax(d))
                _refuse("rigid body", r.name, "body", a.name, float(d[i]), tol, pts[i])

    for r, c, R in rigids:
        pts = _shape_points(r.shape, c, R)
        size = r.shape.bounding_radius()
        others = [(o.name, "obstacle", o.shape, oc, oR, True) for o, oc, oR in obstacles]
        others += [(s.name, "rigid body", s.shape, sc, sR, s.kinematic) for s, sc, sR in rigids if s is not r]
        for name, kind, shape, oc, oR, prescribed in others:
            if frozenset((r.name, name)) in skip or (r.kinematic and prescribed):
                continue
            other_size = np.inf if isinstance(shape, HalfSpace) else shape.bounding_radius()
            if np.linalg.norm(c - oc) > size + other_size:
                continue
            tol = 0.1 * min(size, other_size)
            d = _shape_depth(shape, oc, oR, pts)
            if d.max() > tol:
                i = int(np.argmax(d))
                _refuse("rigid body", r.name, kind, name, float(d[i]), tol, pts[i])

    _check_rods([_Rod(s) for s in scene.rods], fems, rigids, obstacles, skip)

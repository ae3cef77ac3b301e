"""Closest points on triangles (host, numpy; Ericson, Real-Time Collision Detection 5.1.5)."""
from __future__ import annotations

import numpy as np


def closest_weights(p, a, b, c):
    """Barycentric weights (v, w) of b and c of the closest points on triangles (a, b, c) to points p,
    all component-major (3, k) (Ericson, RTCD 5.1.5: the seven Voronoi regions, later tests first so
    that the earlier ones win where regions touch)."""
    ab, ac = b - a, c - a
    ap, bp, cp = p - a, p - b, p - c
    d1, d2 = (ab * ap).sum(0), (ac * ap).sum(0)
    d3, d4 = (ab * bp).sum(0), (ac * bp).sum(0)
    d5, d6 = (ab * cp).sum(0), (ac * cp).sum(0)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1.0 / (va + vb + vc)
        v, w = vb * den, vc * den                                   # inside the face
        e43, e56 = d4 - d3, d5 - d6
        m = (va <= 0) & (e43 >= 0) & (e56 >= 0)                      # edge bc
        t = e43 / (e43 + e56)
        v, w = np.where(m, 1 - t, v), np.where(m, t, w)
        m = (vb <= 0) & (d2 >= 0) & (d6 <= 0)                        # edge ac
        t = d2 / (d2 - d6)
        v, w = np.where(m, 0.0, v), np.where(m, t, w)
        m = (d6 >= 0) & (d5 <= d6)                                   # vertex c
        v, w = np.where(m, 0.0, v), np.where(m, 1.0, w)
        m = (vc <= 0) & (d1 >= 0) & (d3 <= 0)                        # edge ab
        t = d1 / (d1 - d3)
        v, w = np.where(m, t, v), np.where(m, 0.0, w)
        m = (d3 >= 0) & (d4 <= d3)                                   # vertex b
        v, w = np.where(m, 1.0, v), np.where(m, 0.0, w)
        m = (d1 <= 0) & (d2 <= 0)                                    # vertex a
        v, w = np.where(m, 0.0, v), np.where(m, 0.0, w)
    return v, w


def closest_point_on_triangles(p, a, b, c):
    """Closest points on triangles (a, b, c) to points p, all (k, 3) (Ericson, RTCD 5.1.5).

    Returns (q (k, 3), barycentric weights (k, 3) of a, b, c)."""
    p, a, b, c = (np.ascontiguousarray(np.asarray(x, float).T) for x in (p, a, b, c))
    v, w = closest_weights(p, a, b, c)
    q = a + v * (b - a) + w * (c - a)
    return q.T, np.stack([1 - v - w, v, w], axis=1)

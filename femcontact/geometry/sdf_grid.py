"""Signed-distance grids of closed triangle surfaces (host, numpy): at every node of a regular grid
exactly the distance to the nearest triangle (``nearest_triangle_distances``), negative inside (the
parity of ray crossings, ``ray_crossings``). ``shapes.TriangleMesh`` samples its grid with
``signed_distance_grid``; docs/THEORY.md "Mesh SDF grids"."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .closest import closest_weights


def signed_distance_grid(tri: np.ndarray, origin: np.ndarray, h: float, dims) -> np.ndarray:
    """The signed distances (``dims``) at the nodes ``origin + h * index`` to the closed surface of the
    triangles ``tri`` (k, 3, 3): exact distances, negative inside."""
    nx, ny, nz = dims
    xs, ys, zs = (origin[i] + h * np.arange(dims[i]) for i in range(3))
    best = nearest_triangle_distances(origin, h, dims, tri)        # exact: see there
    diff = ray_crossings(tri, xs, ys, zs, h)
    crossings = np.cumsum(diff, axis=2)[:, :, :nz].reshape(-1)
    sign = np.where(crossings % 2 == 1, -1.0, 1.0)
    return (sign * best).reshape(nx, ny, nz)


def ray_crossings(tri, xs, ys, zs, h, chunk: int = 1 << 21) -> np.ndarray:
    """Where the rays up +z through the grid columns (x, y nudged off edges by 1e-7 cells) cross the
    triangles ``tri`` (k, 3, 3): an (nx, ny, nz + 1) array with +1 at the bottom of a crossed column
    and -1 at the first node above the crossing, whose cumulative sum along z counts the crossings
    above each node. All (triangle, column under its bounding box) pairs at once, ``chunk`` at a time."""
    nx, ny, nz = len(xs), len(ys), len(zs)
    diff = np.zeros(nx * ny * (nz + 1), np.int64)
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    lo, hi = tri.min(1), tri.max(1)
    i0, i1 = np.searchsorted(xs, lo[:, 0]), np.searchsorted(xs, hi[:, 0], "right")
    j0, j1 = np.searchsorted(ys, lo[:, 1]), np.searchsorted(ys, hi[:, 1], "right")
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    ni, nj = np.maximum(i1 - i0, 0), np.maximum(j1 - j0, 0)
    count = np.where(np.abs(det) < 1e-300, 0, ni * nj)
    ends = np.cumsum(count)
    start = 0
    while start < len(tri):                 # triangles [start, stop) hold at most ``chunk`` pairs (or one)
        base = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, base + chunk, "right")), start + 1)
        t = np.repeat(np.arange(start, stop), count[start:stop])
        first = ends[start:stop] - count[start:stop] - base        # each triangle's first pair in the chunk
        k = np.arange(len(t)) - np.repeat(first, count[start:stop])
        ii, jj = i0[t] + k // nj[t], j0[t] + k % nj[t]
        px, py = xs[ii] + 1.234567e-7 * h, ys[jj] + 2.345678e-7 * h
        at, bt, ct, dt = a[t], b[t], c[t], det[t]
        l1 = ((px - at[:, 0]) * (ct[:, 1] - at[:, 1]) - (ct[:, 0] - at[:, 0]) * (py - at[:, 1])) / dt
        l2 = ((bt[:, 0] - at[:, 0]) * (py - at[:, 1]) - (px - at[:, 0]) * (bt[:, 1] - at[:, 1])) / dt
        inside = (l1 >= 0) & (l2 >= 0) & (l1 + l2 <= 1)
        zc = at[inside, 2] + l1[inside] * (bt[inside, 2] - at[inside, 2]) + l2[inside] * (ct[inside, 2] - at[inside, 2])
        column = (ii[inside] * ny + jj[inside]) * (nz + 1)
        diff += np.bincount(column, minlength=len(diff))
        diff -= np.bincount(column + np.searchsorted(zs, zc), minlength=len(diff))   # nodes below: 0..kz-1
        start = stop
    return diff.reshape(nx, ny, nz + 1)


def _offsets(p, corners, t):
    """Points p (3, k) less their closest points on the triangles ``t`` (k,) of ``corners`` (9, triangles)."""
    g = np.take(corners, t, axis=1)
    a, b, c = g[0:3], g[3:6], g[6:9]
    v, w = closest_weights(p, a, b, c)
    return p - (a + v * (b - a) + w * (c - a))


def _norm3(x):
    return np.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


def _within(x):
    """A bound x (m) widened by a margin for rounding: comparisons against it keep every triangle that can tie."""
    return x * (1 + 1e-6) + 1e-12


def nearest_triangle_distances(origin, h, dims, tri, chunk: int = 1 << 20) -> np.ndarray:
    """The distance from the grid nodes (``origin + h * index``, flattened C-order over ``dims``) to the
    nearest of the triangles ``tri`` (k, 3, 3): exactly the brute-force minimum over all triangles.

    The node grid is cut into blocks of 2^L nodes a side, L = top (one block) .. 0 (the nodes); r is the
    largest distance from a block's centre Q to its nodes. A block carries (at least) every triangle that
    is the nearest to one of its nodes, with its distance f and gradient g = (Q - q) / f at Q (q its
    closest point). Why that is exact: a child's nodes are its parent's, so what it must carry is in its
    parent's set. A triangle T nearest to a node P of the child has f_T(Q_c) <= f_T(P) + r <= d(P) + r
    <= U + 2 r (f is 1-Lipschitz; U: the distance at Q_c of any triangle, computed for the candidate with
    the lowest bound), and as f_T is convex, f_T(Q) + g . (Q_c - Q) <= f_T(Q_c): the child computes f
    exactly (the same arithmetic as brute force) for each candidate whose bound is within U + 2 r. It
    carries on those with f_T(Q_c) - D <= min(2 r, |g* - g_T| r + r^2 / (2 D)), D and g* those of its
    nearest so far, q* its closest point: at a node P = Q_c + e, f_T(P) >= f_T(Q_c) + g_T . e (convexity)
    and d(P) <= |P - q*| <= D + g* . e + |e|^2 / (2 D). At a node (r = 0) the nearest triangle is thus
    computed and the minimum is the brute-force one. Where a distance is tiny its gradient is noise and
    only the Lipschitz bounds serve; a margin (``_within``) and slacks on g absorb rounding. Children are
    taken ``chunk`` (child, candidate) pairs at a time."""
    dims = np.asarray(dims, np.int64)
    nt = len(tri)
    corners = np.ascontiguousarray(tri.reshape(nt, 9).T)
    scale = max(np.abs(tri).max(), np.abs(origin).max(), np.abs(origin + h * (dims - 1)).max())
    top = max(int(np.ceil(np.log2(dims.max()))), 1)
    cents, radius, par, count = [], [], [], []
    for L in range(top + 1):
        b = 1 << L
        nb = -(-dims // b)
        lo = [np.arange(nb[a]) * b for a in range(3)]
        hi = [np.minimum(lo[a] + b, dims[a]) - 1 for a in range(3)]
        cents.append(np.stack(np.meshgrid(*(origin[a] + h * ((lo[a] + hi[a]) / 2) for a in range(3)),
                                          indexing="ij"), 0).reshape(3, -1))
        radius.append(_norm3(np.meshgrid(*(h * (hi[a] - lo[a]) / 2 for a in range(3)), indexing="ij")).reshape(-1))
        count.append(int(np.prod(nb)))
        if L:
            i, j, k = np.meshgrid(*(np.arange(n) >> 1 for n in prev), indexing="ij")
            par.append(((i * nb[1] + j) * nb[2] + k).reshape(-1))
        prev = nb

    def carried(ch, tt, dist, off, d, r):
        """The pairs (block ch, triangle tt) a block carries, with their gradients and slacks."""
        lin = dist >= 1e-6 * scale
        g = off * np.where(lin, 1 / np.where(lin, dist, 1.0), 0.0)
        near = np.flatnonzero(dist <= d[ch])
        gs = np.zeros((3, len(d)))
        gs[:, ch[near]] = g[:, near]                   # the gradient of a nearest triangle
        rc = r[ch]
        curve = rc * rc / (2 * np.maximum(d, 1e-6 * scale))[ch]     # used where d >= 1e-6 scale
        bound = np.where(lin & (d >= 1e-6 * scale)[ch],
                         np.minimum(2 * rc, (_norm3(g - gs[:, ch]) + 1e-7) * rc + curve), 2 * rc)
        keep = np.flatnonzero(dist <= _within(d[ch] + bound))
        return ch[keep], tt[keep], dist[keep], g[:, keep], np.where(lin, 1e-7, 1.0)[keep]

    tt = np.arange(nt)                  # the top block: every triangle, exactly
    off = _offsets(np.repeat(cents[top], nt, axis=1), corners, tt)
    dist = _norm3(off)
    cb, ct, cf, cg, cs = carried(np.zeros(nt, np.int64), tt, dist, off, dist.min(keepdims=True), radius[top])
    for L in range(top - 1, -1, -1):
        pr = par[L]
        step = cents[L] - cents[L + 1][:, pr]
        sn = _norm3(step)
        pcount = np.bincount(cb, minlength=count[L + 1])
        cnt = pcount[pr]
        if not cnt.all():               # only where a distance came out NaN
            raise ParameterError("TriangleMesh has a degenerate triangle (two coincident corners): its distance is "
                                 "not a number")
        pstart = np.cumsum(pcount) - pcount
        ends = np.cumsum(cnt)
        d = np.empty(count[L])
        out = []
        c0 = 0
        while c0 < count[L]:            # children [c0, c1): at most ``chunk`` pairs (or one child)
            c1 = max(int(np.searchsorted(ends, (ends[c0 - 1] if c0 else 0) + chunk, "right")), c0 + 1)
            n = cnt[c0:c1]
            start = np.cumsum(n) - n
            ch = np.repeat(np.arange(c0, c1), n)                  # (child, candidate) pairs, child-major
            src = np.arange(int(n.sum())) - np.repeat(start - pstart[pr[c0:c1]], n)
            lower = (cf[src] + cg[0][src] * step[0][ch] + cg[1][src] * step[1][ch] + cg[2][src] * step[2][ch]
                     - cs[src] * sn[ch])
            tt = ct[src]
            low = np.minimum.reduceat(lower, start)
            cand = np.flatnonzero(lower <= low[ch - c0])
            first = cand[np.r_[True, ch[cand][1:] != ch[cand][:-1]]]     # each child's lowest bound
            Q = cents[L][:, c0:c1]
            o1 = _offsets(Q, corners, tt[first])
            U = _norm3(o1)
            m = lower <= _within(U + 2 * radius[L][c0:c1])[ch - c0]
            m[first] = False
            sel = np.flatnonzero(m)
            o2 = _offsets(np.take(Q, ch[sel] - c0, axis=1), corners, tt[sel])
            d2 = _norm3(o2)
            np.minimum.at(U, ch[sel] - c0, d2)
            d[c0:c1] = U
            if L:
                dist = np.full(len(lower), np.inf)
                dist[first], dist[sel] = _norm3(o1), d2
                off = np.zeros((3, len(lower)))
                off[:, first], off[:, sel] = o1, o2
                out.append(carried(ch - c0, tt, dist, off, U, radius[L][c0:c1]))
                out[-1] = (out[-1][0] + c0,) + out[-1][1:]
            c0 = c1
        if not L:
            return d
        cb, ct, cf, cs = (np.concatenate([o[i] for o in out]) for i in (0, 1, 2, 4))
        cg = np.concatenate([o[3] for o in out], axis=1)

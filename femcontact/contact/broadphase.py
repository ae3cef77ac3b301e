"""Broadphase: a spatial hash of axis-aligned cells (size ``h``) over triangles or tets.

Every item (up to 4 nodes; a triangle repeats its last node) is entered in every cell its
bounding box overlaps; a cell (i, j, k) maps to bucket ``hash(i, j, k) mod table_size``, so
no scene bounds are needed and hash collisions only add candidates. Built per step by one
kernel on ndarrays (the same on CPU and GPU): buckets have a fixed number of slots, filled
with atomic counters; a fuller bucket is reported and the host grows the slots and rebuilds.
Only items that come near another body they may touch (body bounding boxes, ``body_boxes``)
are entered, so a resting stack hashes only the layers at its interfaces.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np
import taichi as ti

P1, P2, P3 = 73856093, 19349663, 83492791


@ti.func
def bucket(i, j, k, size):
    hv = (i * P1) ^ (j * P2) ^ (k * P3)
    return (hv % size + size) % size


@ti.func
def cell_of(p, h):
    return ti.Vector([ti.cast(ti.floor(p[0] / h), ti.i32), ti.cast(ti.floor(p[1] / h), ti.i32),
                      ti.cast(ti.floor(p[2] / h), ti.i32)])


@ti.func
def _item_box(items: ti.template(), x: ti.template(), e):
    lo = x[items[e][0]]
    hi = lo
    for k in ti.static(range(1, 4)):
        y = x[items[e][k]]
        lo = ti.min(lo, y)
        hi = ti.max(hi, y)
    return lo, hi


@ti.kernel
def body_boxes(x: ti.types.ndarray(), node_body: ti.types.ndarray(), n: ti.i32, n_bodies: ti.i32,
               lo: ti.types.ndarray(), hi: ti.types.ndarray()):
    """Axis-aligned box of every body: a local min/max over chunks of 64 nodes, one atomic per chunk
    and body (nodes of a body are contiguous)."""
    for b, k in ti.ndrange(n_bodies, 3):
        lo[b, k] = 1e300
        hi[b, k] = -1e300
    for c in range((n + 63) // 64):
        i0 = c * 64
        i1 = ti.min(i0 + 64, n)
        b = node_body[i0]
        l = x[i0]
        u = x[i0]
        for i in range(i0, i1):
            if node_body[i] != b:
                for k in ti.static(range(3)):
                    ti.atomic_min(lo[b, k], l[k])
                    ti.atomic_max(hi[b, k], u[k])
                b = node_body[i]
                l = x[i]
                u = x[i]
            l = ti.min(l, x[i])
            u = ti.max(u, x[i])
        for k in ti.static(range(3)):
            ti.atomic_min(lo[b, k], l[k])
            ti.atomic_max(hi[b, k], u[k])


@ti.kernel
def read4(a: ti.types.ndarray()) -> ti.types.vector(4, ti.i32):
    """The first four entries of an i32 ndarray (one small launch instead of a full to_numpy)."""
    return ti.Vector([a[0], a[1], a[2], a[3]])


@ti.func
def near_other_body(lo_p, hi_p, ba, node_body: ti.template(), pair_row: ti.template(), box_lo: ti.template(),
                    box_hi: ti.template(), n_bodies, pad):
    """True when the box [lo_p, hi_p] of something on body ba comes within pad of a body it may touch."""
    near = False
    for b in range(n_bodies):
        if b != ba and pair_row[ba, b] >= 0:
            ok = True
            for k in ti.static(range(3)):
                if lo_p[k] > box_hi[b, k] + pad or hi_p[k] < box_lo[b, k] - pad:
                    ok = False
            if ok:
                near = True
    return near


@ti.kernel
def grid_fill(items: ti.types.ndarray(), n_items: ti.i32, x: ti.types.ndarray(), h: float, size: ti.i32,
              counts: ti.types.ndarray(), entries: ti.types.ndarray(), node_body: ti.types.ndarray(),
              pair_row: ti.types.ndarray(), box_lo: ti.types.ndarray(), box_hi: ti.types.ndarray(),
              n_bodies: ti.i32, pad: float, stats: ti.types.ndarray(), stat: ti.i32):
    """Enter every item near another body in the buckets of the cells its box overlaps; the largest
    bucket fill goes to stats[stat] (a fill above entries.shape[1] means: grow and rebuild)."""
    K = entries.shape[1]
    for e in range(n_items):
        lo, hi = _item_box(items, x, e)
        if near_other_body(lo, hi, node_body[items[e][0]], node_body, pair_row, box_lo, box_hi, n_bodies, pad):
            c0, c1 = cell_of(lo, h), cell_of(hi, h)
            for i, j, k in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
                bk = bucket(i, j, k, size)
                slot = ti.atomic_add(counts[bk], 1)
                if slot < K:
                    entries[bk, slot] = e
                ti.atomic_max(stats[stat], slot + 1)


class HashGrid:
    """Spatial hash over a fixed item list (node indices (k, 4), i32) with cell size h (m):
    ``entries[b, :min(counts[b], K)]`` are the items in bucket b (fixed K slots per bucket, grown
    when a build reports a fuller bucket)."""

    def __init__(self, items: np.ndarray, h: float, size: int):
        items = np.asarray(items, np.int32).reshape(-1, 4)
        self.n_items = len(items)
        self.h = float(h)
        self.size = int(size)
        self.items = ti.Vector.ndarray(4, ti.i32, shape=max(self.n_items, 1))
        if self.n_items:
            self.items.from_numpy(items)
        self.counts = ti.ndarray(ti.i32, shape=self.size)
        self.alloc(8)

    def alloc(self, slots: int) -> None:
        self.slots = int(slots)
        self.entries = ti.ndarray(ti.i32, shape=(self.size, self.slots))

    def build(self, x, node_body, pair_row, box_lo, box_hi, n_bodies, pad, stats, stat) -> None:
        """Hash the items at node positions x (vec3 ndarray); the caller checks stats[stat] <= slots."""
        self.counts.fill(0)
        if self.n_items:
            grid_fill(self.items, self.n_items, x, self.h, self.size, self.counts, self.entries, node_body,
                      pair_row, box_lo, box_hi, n_bodies, pad, stats, stat)

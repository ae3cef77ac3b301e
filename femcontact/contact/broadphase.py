"""Broadphase: a spatial hash of axis-aligned cells (size ``h``) over triangles or tets.

Every item (up to 4 nodes; a triangle repeats its last node) is entered in every cell its
bounding box overlaps; a cell (i, j, k) maps to bucket ``hash(i, j, k) mod table_size``, so
no scene bounds are needed and hash collisions only add candidates. Built per step by three
kernels (count, serial prefix sum, fill) on ndarrays, the same on CPU and GPU:
``entries[start[b]:start[b+1]]`` are the items of bucket b.

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
def grid_count(items: ti.types.ndarray(), n_items: ti.i32, x: ti.types.ndarray(), h: float,
               size: ti.i32, counts: ti.types.ndarray()):
    for e in range(n_items):
        lo, hi = _item_box(items, x, e)
        c0, c1 = cell_of(lo, h), cell_of(hi, h)
        for i, j, k in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            ti.atomic_add(counts[bucket(i, j, k, size)], 1)


@ti.kernel
def grid_scan(counts: ti.types.ndarray(), start: ti.types.ndarray(), cursor: ti.types.ndarray(),
              size: ti.i32) -> ti.i32:
    total = 0
    ti.loop_config(serialize=True)
    for b in range(size):
        start[b] = total
        cursor[b] = total
        total += counts[b]
        counts[b] = 0
    start[size] = total
    return total


@ti.kernel
def grid_fill(items: ti.types.ndarray(), n_items: ti.i32, x: ti.types.ndarray(), h: float, size: ti.i32,
              cursor: ti.types.ndarray(), entries: ti.types.ndarray()):
    for e in range(n_items):
        lo, hi = _item_box(items, x, e)
        c0, c1 = cell_of(lo, h), cell_of(hi, h)
        for i, j, k in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            entries[ti.atomic_add(cursor[bucket(i, j, k, size)], 1)] = e


class HashGrid:
    """Spatial hash over a fixed item list (node indices (k, 4), i32) with cell size h (m)."""

    def __init__(self, items: np.ndarray, h: float):
        items = np.asarray(items, np.int32).reshape(-1, 4)
        self.n_items = len(items)
        self.h = float(h)
        self.size = int(2 ** max(10, int(np.ceil(np.log2(max(4 * self.n_items, 1))))))
        self.items = ti.Vector.ndarray(4, ti.i32, shape=max(self.n_items, 1))
        if self.n_items:
            self.items.from_numpy(items)
        self.counts = ti.ndarray(ti.i32, shape=self.size)
        self.counts.fill(0)
        self.start = ti.ndarray(ti.i32, shape=self.size + 1)
        self.cursor = ti.ndarray(ti.i32, shape=self.size)
        self._alloc(max(8 * self.n_items, 16))

    def _alloc(self, cap: int) -> None:
        self.capacity = cap
        self.entries = ti.ndarray(ti.i32, shape=cap)

    def build(self, x) -> int:
        """Hash the items at node positions x (vec3 ndarray); returns the number of entries."""
        if not self.n_items:
            self.start.fill(0)
            return 0
        grid_count(self.items, self.n_items, x, self.h, self.size, self.counts)
        total = grid_scan(self.counts, self.start, self.cursor, self.size)
        if total > self.capacity:
            self._alloc(max(total, 2 * self.capacity))
        grid_fill(self.items, self.n_items, x, self.h, self.size, self.cursor, self.entries)
        return total

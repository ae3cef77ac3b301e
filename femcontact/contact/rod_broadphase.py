"""Broadphase of the rod contact passes: a spatial hash of expanded item boxes (rod segments, FEM
surface triangles), built per step by one kernel (``broadphase.bucket``/``cell_of``, the FEM
HashGrid's hashing, but every item entered and each entry tagged with its cell so hash collisions
add no candidates and a pair is met once).

An item's box is the box of its nodes grown by ``rad + pad + dt·max|v|`` (its radius, half the
contact margin, its speed). Two segments whose closest points are within ``ra + rb + margin +
dt(|va| + |vb|)`` have overlapping boxes (per axis the box gap is at most that distance), so the
narrow phase sees every pair the all-pairs loop would emit, and emits the same contacts.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np
import taichi as ti

from .. import backend
from .broadphase import bucket, cell_of


@ti.kernel
def item_grid_fill(items: ti.types.ndarray(), n_items: ti.i32, rad: ti.types.ndarray(), x: ti.types.ndarray(),
                   v: ti.types.ndarray(), pad: float, dt: float, h: float, size: ti.i32, counts: ti.types.ndarray(),
                   entries: ti.types.ndarray(), ecell: ti.types.ndarray(), lo: ti.types.ndarray(),
                   hi: ti.types.ndarray(), stats: ti.types.ndarray(), vmax: ti.types.ndarray()):
    """Box of every item (nodes items[e][0..3]) grown by rad[e] + pad + dt·(its fastest node speed) into
    lo/hi; the item entered in the bucket of every cell the box overlaps with that cell in ecell; the
    fullest bucket in stats[0] (above entries.shape[1]: grow and rebuild); the fastest item in vmax[0]."""
    K = entries.shape[1]
    for e in range(n_items):
        l = x[items[e][0]]
        u = l
        s = 0.0
        for k in ti.static(range(4)):
            y = x[items[e][k]]
            l = ti.min(l, y)
            u = ti.max(u, y)
            s = ti.max(s, v[items[e][k]].norm())
        ti.atomic_max(vmax[0], s)
        g = rad[e] + pad + dt * s
        l -= g
        u += g
        lo[e] = l
        hi[e] = u
        c0, c1 = cell_of(l, h), cell_of(u, h)
        for i, j, k in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            bk = bucket(i, j, k, size)
            slot = ti.atomic_add(counts[bk], 1)
            if slot < K:
                entries[bk, slot] = e
                ecell[bk, slot] = ti.Vector([i, j, k])
            ti.atomic_max(stats[0], slot + 1)


@ti.kernel
def _read_stat(stats: ti.types.ndarray()) -> ti.i32:
    return stats[0]


class ItemGrid:
    """Spatial hash over a fixed item list (node indices (n, 4); a segment repeats its last node) with
    cell size h (m): ``entries[b, :counts[b]]`` the items in bucket b, ``ecell`` their cells,
    ``lo``/``hi`` the grown item boxes of the last build, ``vmax[0]`` the fastest item's speed."""

    def __init__(self, items: np.ndarray, rad: np.ndarray, h: float):
        items = np.asarray(items, np.int32).reshape(-1, 4)
        self.n_items = len(items)
        self.h = float(h)
        self.size = int(2 ** np.ceil(np.log2(max(1024, 8 * self.n_items))))
        self.items = backend.int_array(items, width=4)
        self.rad = backend.scalar_array(max(self.n_items, 1), np.asarray(rad, float) if self.n_items else None)
        self.lo = backend.vec3_array(max(self.n_items, 1))
        self.hi = backend.vec3_array(max(self.n_items, 1))
        self.counts = ti.ndarray(ti.i32, shape=self.size)
        self.stats = ti.ndarray(ti.i32, shape=1)
        self.vmax = backend.scalar_array(1)
        self._alloc(8)

    def _alloc(self, slots: int) -> None:
        self.slots = int(slots)
        self.entries = ti.ndarray(ti.i32, shape=(self.size, self.slots))
        self.ecell = ti.Vector.ndarray(3, ti.i32, shape=(self.size, self.slots))

    def build(self, x, v, pad: float, dt: float) -> None:
        """Hash the items at positions x with speeds from v; grows the bucket slots until all fit."""
        while True:
            self.counts.fill(0)
            self.stats.fill(0)
            self.vmax.fill(0)
            item_grid_fill(self.items, self.n_items, self.rad, x, v, pad, dt, self.h, self.size, self.counts,
                           self.entries, self.ecell, self.lo, self.hi, self.stats, self.vmax)
            fill = int(_read_stat(self.stats))
            if fill <= self.slots:
                return
            self._alloc(max(2 * self.slots, fill))

    @property
    def args(self) -> tuple:
        """(h, size, counts, entries, ecell, lo, hi, vmax) for the query kernels."""
        return (self.h, self.size, self.counts, self.entries, self.ecell, self.lo, self.hi, self.vmax)

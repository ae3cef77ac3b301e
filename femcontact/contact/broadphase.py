"""Broadphase: the one spatial hash of axis-aligned cells (size ``h``) that every contact pass
queries (``SpatialHash``), and the body bounding boxes that gate it.

An item (up to 4 nodes: a tet, a triangle repeating its last node, a rod segment repeating its
end) is entered in every cell its box overlaps; a cell (i, j, k) maps to bucket
``hash(i, j, k) mod table_size``, so no scene bounds are needed; each entry is tagged with its
cell, so a query can drop hash-collision candidates and meet a pair once. Built per step by one
kernel on ndarrays (the same on CPU and GPU): buckets have a fixed number of slots, filled with
atomic counters; a fuller bucket is reported and the host grows the slots and rebuilds. Two ways
to fill it (one insertion, ``_enter``):

- ``build_near_bodies`` (FEM triangles and tets): the item's own box, and only items that come
  near another body they may touch (``body_boxes``), so a resting stack hashes only the layers at
  its interfaces.
- ``build_grown`` (rod segments, and FEM triangles for rods): every item, its box grown by
  ``rad + pad + dt·max|v|`` (its radius, a pad, its speed); two items whose closest points are
  within ``ra + rb + 2 pad + dt(|va| + |vb|)`` then have overlapping boxes (per axis the box gap
  is at most that distance), so a query over overlapping boxes sees every pair the all-pairs loop
  would emit.

Either build reports its fullest bucket in a counter the caller checks (``pipeline.collide``: grow
the slots with ``alloc`` and rebuild).

Bounded loops: every walk over the cells of a box (an item entered, a query around a point) goes
through ``cell_range``, which clamps cell coordinates (no i32 overflow for far or non-finite points)
and walks no box of more cells than its grid allows (``MAX_CELLS_ROD``, ``MAX_CELLS_FEM``): a larger
one is skipped and its width reported in a counter, and ``pipeline.collide`` coarsens that grid for
the step (the widest box then spans ``TARGET_SPAN`` cells) and reruns, or, for non-finite positions,
stops with a SimulationError. Without it a cable at 70 m/s with dt = 0.05 grows each segment's box
by 3.5 m: 10^5 cells of 4.5 cm per segment, all in a table of 1024 buckets, and one step's pair
query took minutes; a faster one never ended.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np

from ..backend import ti
from .. import backend
from .schema import NODES

P1, P2, P3 = 73856093, 19349663, 83492791
MAX_CELLS_ROD = 512    # cells one box of the rod grid may cover (cell_range): 8 per axis; its boxes grow with speed
MAX_CELLS_FEM = 1 << 18   # of the FEM grid (64 per axis: coarse slabs beside fine bodies stay as they are)
TARGET_SPAN = 4        # a coarsened grid gives the widest box this many cells along an axis
FAR = 1 << 29          # cell coordinates are clamped to [-FAR, FAR] (differences stay within i32)
WIDE_FEM, WIDE_ROD = 6, 7    # the counters (pipeline.py) where the FEM and the rod grids report a box too large


@ti.func
def bucket(i, j, k, size):
    hv = (i * P1) ^ (j * P2) ^ (k * P3)
    return (hv % size + size) % size


@ti.func
def cell_of(p, h):
    """The cell holding p, its coordinates clamped to [-FAR, FAR] (also for far or non-finite p)."""
    c = ti.min(ti.max(ti.floor(p / h), -FAR), FAR)
    return ti.min(ti.max(ti.cast(c, ti.i32), -FAR), FAR)


@ti.func
def cell_range(lo, hi, h, counters: ti.template(), wide):
    """Cells (c0, c1) of the box [lo, hi] for ``ti.ndrange((c0[0], c1[0] + 1), ...)``; a box of more
    cells than the grid ``wide`` (WIDE_FEM or WIDE_ROD) allows, or with a non-finite corner, gets no
    cells (c1 = c0 - 1) and its width along its widest axis (2·FAR: non-finite) goes to
    counters[wide] (module docstring: the caller coarsens the grid or stops)."""
    c0, c1 = cell_of(lo, h), cell_of(hi, h)
    d = c1 - c0 + 1
    cells = ti.cast(d[0], float) * ti.cast(d[1], float) * ti.cast(d[2], float)
    limit = float(MAX_CELLS_FEM)
    if wide == WIDE_ROD:
        limit = float(MAX_CELLS_ROD)
    if d.min() < 1:                         # hi below lo: only from non-finite coordinates
        ti.atomic_max(counters[wide], 2 * FAR)
        c1 = c0 - 1
    elif cells > limit:
        ti.atomic_max(counters[wide], d.max())
        c1 = c0 - 1
    return c0, c1


@ti.func
def _item_box(items: ti.template(), x: ti.template(), e):
    lo = x[items[e][0]]
    hi = lo
    for k in ti.static(range(1, 4)):
        y = x[items[e][k]]
        lo = ti.min(lo, y)
        hi = ti.max(hi, y)
    return lo, hi


# columns of the body box table ``boxes`` (n_bodies, 6): the low corner, then the high corner
BOX_LO, BOX_HI, BOX_WIDTH = 0, 3, 6


@ti.kernel
def body_boxes(x: ti.types.ndarray(), nodes: ti.types.ndarray(), n: ti.i32, n_bodies: ti.i32,
               boxes: ti.types.ndarray()):
    """Axis-aligned box of every body (``boxes``: ``BOX_LO``, ``BOX_HI``): a local min/max over chunks of
    64 nodes, one atomic per chunk and body (nodes of a body are contiguous)."""
    for b, k in ti.ndrange(n_bodies, 3):
        boxes[b, BOX_LO + k] = 1e300
        boxes[b, BOX_HI + k] = -1e300
    for c in range((n + 63) // 64):
        i0 = c * 64
        i1 = ti.min(i0 + 64, n)
        b = NODES.body.get(nodes, i0)
        l = x[i0]
        u = x[i0]
        for i in range(i0, i1):
            if NODES.body.get(nodes, i) != b:
                for k in ti.static(range(3)):
                    ti.atomic_min(boxes[b, BOX_LO + k], l[k])
                    ti.atomic_max(boxes[b, BOX_HI + k], u[k])
                b = NODES.body.get(nodes, i)
                l = x[i]
                u = x[i]
            l = ti.min(l, x[i])
            u = ti.max(u, x[i])
        for k in ti.static(range(3)):
            ti.atomic_min(boxes[b, BOX_LO + k], l[k])
            ti.atomic_max(boxes[b, BOX_HI + k], u[k])


@ti.func
def near_other_body(lo_p, hi_p, ba, nodes: ti.template(), pair_row: ti.template(), boxes: ti.template(),
                    n_bodies, pad):
    """True when the box [lo_p, hi_p] of something on body ba comes within pad of a body it may touch
    (itself too when it has self-contact: ``pair_row[ba, ba] >= 0``)."""
    near = False
    for b in range(n_bodies):
        if pair_row[ba, b] >= 0:
            ok = True
            for k in ti.static(range(3)):
                if lo_p[k] > boxes[b, BOX_HI + k] + pad or hi_p[k] < boxes[b, BOX_LO + k] - pad:
                    ok = False
            if ok:
                near = True
    return near


# a hash's buckets are one i32 table ``entries`` (size, 1 + slots): column 0 the bucket's count (it may exceed
# the slots: reported, ``_enter``), then its items; ``ecell`` (size, slots) the items' cells
@ti.func
def bucket_fill(entries: ti.template(), bk):
    """Number of items held in bucket bk (its count, capped at the slots)."""
    return ti.min(entries[bk, 0], entries.shape[1] - 1)


@ti.func
def bucket_item(entries: ti.template(), bk, sl):
    """Item in slot sl of bucket bk (sl < ``bucket_fill``)."""
    return entries[bk, 1 + sl]


@ti.func
def _enter(e, lo, hi, h, size, entries: ti.template(), ecell: ti.template(), stats: ti.template(), stat, wide):
    """Enter item e in the bucket of every cell the box [lo, hi] overlaps, tagged with the cell;
    the fullest bucket's fill goes to stats[stat], a box too wide to enter to stats[wide]
    (``cell_range``)."""
    c0, c1 = cell_range(lo, hi, h, stats, wide)
    for i, j, k in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
        bk = bucket(i, j, k, size)
        slot = ti.atomic_add(entries[bk, 0], 1)
        if slot < entries.shape[1] - 1:
            entries[bk, 1 + slot] = e
            ecell[bk, slot] = ti.Vector([i, j, k])
        ti.atomic_max(stats[stat], slot + 1)


@ti.kernel
def clear_buckets(entries: ti.types.ndarray()):
    """Empty every bucket (column 0 of ``entries``)."""
    for bk in range(entries.shape[0]):
        entries[bk, 0] = 0


@ti.kernel
def fill_near_bodies(items: ti.types.ndarray(), n_items: ti.i32, x: ti.types.ndarray(), h: float, size: ti.i32,
                     entries: ti.types.ndarray(), ecell: ti.types.ndarray(),
                     nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(), boxes: ti.types.ndarray(),
                     n_bodies: ti.i32, pad: float, stats: ti.types.ndarray(),
                     stat: ti.i32, wide: ti.i32):
    """``SpatialHash.build_near_bodies``: every item near another body, by its own box."""
    for e in range(n_items):
        lo, hi = _item_box(items, x, e)
        if near_other_body(lo, hi, NODES.body.get(nodes, items[e][0]), nodes, pair_row, boxes, n_bodies, pad):
            _enter(e, lo, hi, h, size, entries, ecell, stats, stat, wide)


@ti.kernel
def fill_grown(items: ti.types.ndarray(), n_items: ti.i32, rad: ti.types.ndarray(), x: ti.types.ndarray(),
               v: ti.types.ndarray(), pad: float, dt: float, h: float, size: ti.i32, entries: ti.types.ndarray(),
               ecell: ti.types.ndarray(), lo: ti.types.ndarray(),
               hi: ti.types.ndarray(), stats: ti.types.ndarray(), stat: ti.i32, wide: ti.i32,
               vmax: ti.types.ndarray()):
    """``SpatialHash.build_grown``: every item by its box grown by rad[e] + pad + dt·(its fastest node
    speed), kept in lo/hi; the fastest item's speed in vmax[0]."""
    for e in range(n_items):
        l, u = _item_box(items, x, e)
        s = 0.0
        for k in ti.static(range(4)):
            s = ti.max(s, v[items[e][k]].norm())
        ti.atomic_max(vmax[0], s)
        g = rad[e] + pad + dt * s
        lo[e] = l - g
        hi[e] = u + g
        _enter(e, l - g, u + g, h, size, entries, ecell, stats, stat, wide)


class SpatialHash:
    """Spatial hash over a fixed item list (node indices (n, 4), i32) with cell size h (m):
    ``entries[b, 0]`` is bucket b's count and ``entries[b, 1:1 + min(count, slots)]`` its items
    (``bucket_fill``, ``bucket_item``), ``ecell[b, :slots]`` their cells;
    after ``build_grown``, ``lo``/``hi`` are the grown item boxes and ``vmax[0]`` the fastest item's
    speed. ``size`` buckets (a power of two)."""

    def __init__(self, items: np.ndarray, h: float, size: int, rad: np.ndarray | None = None):
        items = np.asarray(items, np.int32).reshape(-1, 4)
        self.n_items = len(items)
        self.h = float(h)
        self.size = int(size)
        self.items = backend.int_array(items, width=4)
        if rad is not None:                  # tables of build_grown
            n = max(self.n_items, 1)
            self.rad = backend.scalar_array(n, np.asarray(rad, float) if self.n_items else None)
            self.lo, self.hi = backend.vec3_array(n), backend.vec3_array(n)
            self.vmax = backend.scalar_array(1)
        self.alloc(8)

    def alloc(self, slots: int) -> None:
        self.slots = int(slots)
        self.entries = ti.ndarray(ti.i32, shape=(self.size, 1 + self.slots))
        self.ecell = ti.Vector.ndarray(3, ti.i32, shape=(self.size, self.slots))

    def build_near_bodies(self, x, nodes, pair_row, boxes, n_bodies, pad, stats, stat, wide) -> None:
        """Hash the items near another body at node positions x (vec3 ndarray); the caller checks
        stats[stat] <= slots and stats[wide] == 0 (``cell_range``)."""
        clear_buckets(self.entries)
        if self.n_items:
            fill_near_bodies(self.items, self.n_items, x, self.h, self.size, self.entries, self.ecell,
                             nodes, pair_row, boxes, n_bodies, pad, stats, stat, wide)

    def build_grown(self, x, v, pad: float, dt: float, stats, stat, wide) -> None:
        """Hash every item by its grown box at positions x, speeds v; the caller checks
        stats[stat] <= slots and stats[wide] == 0 (``cell_range``)."""
        clear_buckets(self.entries)
        self.vmax.fill(0)
        fill_grown(self.items, self.n_items, self.rad, x, v, pad, dt, self.h, self.size, self.entries, self.ecell,
                   self.lo, self.hi, stats, stat, wide, self.vmax)

"""Layout schema of COND's packed work arrays: named columns, generated offsets and accessors.

A :class:`Table` is a 2-D ndarray ``(rows, width)`` of one dtype (float or i32) whose columns are
declared once by name and kind (scalar ``s``, ``v3``, ``m3``, ``v6``, ``m6``, each possibly repeated
``count`` times). Offsets are computed here and nowhere else; each column carries generated
``ti.func`` accessors used inside kernels::

    CONTACT.frame.get(Cf, m)            # 3x3 matrix of contact m
    VIRTUAL.weight.at(VNf, q, k)        # k-th 3x3 weight of virtual node q (k may be a runtime index)
    CONTACT.lam.put(Cf, m, lm)

Integer data (node indices) live in integer tables, real data in real ones. :class:`Rows` names the
rows of the vec3 velocity table ``V`` (shape ``(rows, unknowns)``).
"""

import numpy as np

from ... import backend
from ...backend import ti

_KIND_WIDTH = {"s": 1, "v3": 3, "m3": 9, "v6": 6, "m6": 36}


def _loader(kind: str, off: int, width: int):
    """ti.funcs ``get(a, row)``, ``at(a, row, k)``, ``put(a, row, x)``, ``put_at(a, row, k, x)``
    for one column of ``kind`` at ``off`` (element k at ``off + width k``). Element loops are runtime
    loops over compile-time bounds (LLVM unrolls them): ``ti.static`` unrolling here cost Taichi's front
    end 9-36 statements per call on every start-up (femcontact/smallmat.py). The closure's ``off``,
    ``width`` and ``n`` are read through ``ti.static``: compile-time values, which quadrants' fast cache
    accepts (the cache folder's source fingerprint keys them, backend.py)."""
    if kind == "s":
        @ti.func
        def at(a: ti.template(), row, k):
            return a[row, ti.static(off) + k]

        @ti.func
        def put_at(a: ti.template(), row, k, x):
            a[row, ti.static(off) + k] = x
    elif kind in ("v3", "v6"):
        n = 3 if kind == "v3" else 6

        @ti.func
        def at(a: ti.template(), row, k):
            b = ti.static(off) + ti.static(width) * k
            out = ti.Vector.zero(float, ti.static(n))
            for r in range(ti.static(n)):
                out[r] = a[row, b + r]
            return out

        @ti.func
        def put_at(a: ti.template(), row, k, x):
            b = ti.static(off) + ti.static(width) * k
            for r in range(ti.static(n)):
                a[row, b + r] = x[r]
    else:
        n = 3 if kind == "m3" else 6

        @ti.func
        def at(a: ti.template(), row, k):
            b = ti.static(off) + ti.static(width) * k
            out = ti.Matrix.zero(float, ti.static(n), ti.static(n))
            for r in range(ti.static(n)):
                for c in range(ti.static(n)):
                    out[r, c] = a[row, b + ti.static(n) * r + c]
            return out

        @ti.func
        def put_at(a: ti.template(), row, k, x):
            b = ti.static(off) + ti.static(width) * k
            for r in range(ti.static(n)):
                for c in range(ti.static(n)):
                    a[row, b + ti.static(n) * r + c] = x[r, c]

    @ti.func
    def get(a: ti.template(), row):
        return at(a, row, 0)

    @ti.func
    def put(a: ti.template(), row, x):
        put_at(a, row, 0, x)

    return get, at, put, put_at


class Column:
    """One named column group of a :class:`Table`: ``count`` elements of ``kind`` from ``off``."""

    def __init__(self, name: str, kind: str, count: int, off: int):
        self.name, self.kind, self.count, self.off = name, kind, count, off
        self.width = _KIND_WIDTH[kind]
        self.span = self.width * count
        self.get, self.at, self.put, self.put_at = _loader(kind, off, self.width)


class Table:
    """A packed 2-D work array: ``Table(name, dtype, [(column, kind[, count]), ...])``."""

    def __init__(self, name: str, dtype, columns):
        self.name, self.dtype = name, dtype
        self.columns: dict[str, Column] = {}
        off = 0
        for spec in columns:
            cname, kind = spec[0], spec[1]
            count = spec[2] if len(spec) > 2 else 1
            col = Column(cname, kind, count, off)
            self.columns[cname] = col
            setattr(self, cname, col)
            off += col.span
        self.width = off

    def alloc(self, rows: int):
        """A zeroed ``(max(rows, 1), width)`` ndarray of this table."""
        arr = ti.ndarray(self.dtype, shape=(max(int(rows), 1), self.width))
        arr.fill(0)
        return arr

    def upload(self, rows: int, **columns: np.ndarray):
        """A ``(max(rows, 1), width)`` ndarray whose columns are ``columns`` (name -> array of ``rows``
        elements, each of the column's kind), the others zero: the inverse of ``unpack``."""
        dtype = np.int32 if self.dtype == ti.i32 else backend.np_real()
        data = np.zeros((max(int(rows), 1), self.width), dtype)
        for name, value in columns.items():
            col = self.columns[name]
            data[:rows, col.off: col.off + col.span] = np.asarray(value).reshape(rows, col.span)
        arr = ti.ndarray(self.dtype, shape=data.shape)
        arr.from_numpy(data)
        return arr

    def unpack(self, array: np.ndarray) -> dict[str, np.ndarray]:
        """Host view: column name -> ``(rows, count, *element shape)`` slice of a downloaded table."""
        out = {}
        shape = {"s": (), "v3": (3,), "m3": (3, 3), "v6": (6,), "m6": (6, 6)}
        for name, c in self.columns.items():
            out[name] = array[:, c.off: c.off + c.span].reshape((array.shape[0], c.count) + shape[c.kind])
        return out


class Rows:
    """Names of the rows of a vec3 table (``V[Rows.NAME, i]``), numbered in declaration order. The
    names are upper case: kernels read them as module constants, which quadrants' fast cache accepts
    (the cache folder's source fingerprint keys them, backend.py)."""

    def __init__(self, *names: str):
        self.names = names
        for k, name in enumerate(names):
            setattr(self, name, k)
        self.count = len(names)


# ------------------------------------------------------------------------------------------ schemas
# the ContactSet (contact/contacts.py; defined here, beside Table, so that both the contact package and COND
# import them without a cycle): per contact its frame (rows t1, t2, n), gap, friction (μ1, μ2), the world's
# velocity, the stiction anchors' offset, point, impulse; its sides (-1: world), contact-parameter row and
# status. Detection writes them (contact/emit.py), every solver reads them: two kernel arguments, not eleven.
CONTACT_SET_F = Table("contact_set_f", float, [("frame", "m3"), ("phi", "s"), ("mu", "s", 2), ("v_world", "v3"),
                                               ("v_anchor", "v3"), ("point", "v3"), ("impulse", "v3")])
CONTACT_SET_I = Table("contact_set_i", ti.i32, [("node_a", "s"), ("node_b", "s"), ("param", "s"), ("status", "s")])
# per contact m: rotation R (rows: t1, t2, n), friction (μ1, μ2), normal bias φ̃ = −t_m (eq. 11),
# the obstacle side's world velocity, λ, the tangential bias (midpoint stick, module solver) and the
# λ whose virtual-damper compliance shift is in φ̃ and the bias (virtual.cond_compliance_shift)
CONTACT = Table("contact", float, [("frame", "m3"), ("mu", "s", 2), ("phi_tilde", "s"), ("v_world", "v3"),
                                   ("lam", "v3"), ("bias", "s", 2), ("lam_shift", "v3")])
CONTACT_NODES = Table("contact_nodes", ti.i32, [("node", "s", 2)])        # side a, side b (-1: world)
# per virtual node q: J_v = Σ_k weight_k on real node node_k (-1 unused), gain k_v (eq. 14/15)
VIRTUAL = Table("virtual", float, [("weight", "m3", 4), ("gain", "s")])
VIRTUAL_NODES = Table("virtual_nodes", ti.i32, [("node", "s", 4)])
# per unknown: its step (STEP_*) and, for a rigid pair, the partner row (-1 none)
ROW = Table("row", ti.i32, [("step", "s"), ("partner", "s")])
STEP_SCALAR, STEP_BLOCK, STEP_ROD, STEP_FEM = 0, 1, 2, 3
# rod block-tridiagonal factor (blocks.py): per 6x6 block j the rows of its halves (node, segment)
ROD_ROWS = Table("rod_rows", ti.i32, [("row", "s", 2)])
ROD_SLOTS = Table("rod_slots", ti.i32, [("diag", "s", 4), ("sub", "s", 4)])     # A's slots of D_j and L_j
ROD_BLOCKS = Table("rod_blocks", float, [("diag", "m6"), ("sub", "m6")])      # D_j, L_j of Ã_rod
# their offsets as module constants for kernels that pick one at run time (``off = ti.static(...)`` in a
# run-time branch would bind a Python name, not assign the kernel variable)
ROD_DIAG_OFF, ROD_SUB_OFF = ROD_BLOCKS.diag.off, ROD_BLOCKS.sub.off
ROD_FACTOR = Table("rod_factor", float, [("s_inv", "m6"), ("g", "m6"), ("y", "v6")])   # S_j⁻¹, G_j, sweep
# rows of the velocity table V: v̂ˡ, v̂ˡ⁻¹, v* / v̂**, gradient, previous gradient, b,
# rod block step Ã_rod⁻¹ g and its previous value, the FEM step W_F g (``fem_step``, iterate.py) with
# its Chebyshev direction (two buffers: a sweep reads one and writes the other) and residual
VROWS = Rows("V", "V_PREV", "V_STAR", "G", "G_PREV", "B", "D_ROD", "D_ROD_PREV", "D_FEM", "P_FEM", "P_FEM_B",
             "R_FEM")
# COND's scalars (one row each): a float or an int outside [-5, 256] among a kernel's arguments makes
# quadrants marshal every argument afresh on each launch (docs/PERFORMANCE.md, issue 28), so every COND
# kernel reads them from these, written through the host view (``HostScalars``). Per iteration: α in
# (≤ 0: the previous slot's), ν, the ring slot (advanced by cond_iterate itself); per solve: u, ω, the FEM
# interval [a, b] and scale c, the Gershgorin cap of W (``cond_start``), the impulse scale and the last α
# (``cond_finish``), the virtual gains (``cond_gains``), dt, the default restitution, the recovery and its
# speed cap (``cond_targets``), W's spectral scale (``cond_scale_rows``); the real row count n0, all virtual
# nodes nv (the ContactSet's nv_set, then COND's own), the contacts nc, rods, restitution-table rows,
# midpoint (0/1), warm start (0/1).
ITER_F = Table("iter_f", float, [("alpha", "s"), ("nu", "s"), ("u", "s"), ("omega", "s"), ("fem_a", "s"),
                                 ("fem_b", "s"), ("fem_c", "s"), ("wcap", "s"), ("impulse_scale", "s"),
                                 ("alpha_end", "s"), ("gain", "s"), ("rigid_gain", "s"), ("dt", "s"),
                                 ("restitution", "s"), ("recovery", "s"), ("vrec_max", "s"), ("w_scale", "s")])
ITER_I = Table("iter_i", ti.i32, [("slot", "s"), ("n0", "s"), ("nv", "s"), ("nc", "s"), ("nrods", "s"),
                                  ("nv_set", "s"), ("n_rest", "s"), ("midpoint", "s"), ("warm", "s")])
# which row kinds a model has besides scalar rows (a compile-time template of cond_iterate and cond_gains)
HAS_BLOCKS, HAS_RODS = 1, 2


class HostScalars:
    """A one-row :class:`Table` of kernel scalars kept on the host and the device: ``set`` writes the
    device copy in place through the host view where there is one (the CPU: no launch), else marks it
    for ``sync``, which uploads it (one copy) before the launch that reads it."""

    def __init__(self, table: Table):
        self.table = table
        self.array = table.alloc(1)
        self.view = backend.host_view(self.array)
        dtype = np.int32 if table.dtype == ti.i32 else backend.np_real()
        self.host = self.view if self.view is not None else np.zeros((1, table.width), dtype)
        self.stale = False

    def set(self, **values) -> None:
        """Write the named scalar columns (an upload is due only where a value changed)."""
        row = self.host[0]
        for name, value in values.items():
            off = self.table.columns[name].off
            old = row[off]
            row[off] = value
            if self.view is None and not row[off] == old:
                self.stale = True

    def mirror(self, **values) -> None:
        """Record values a kernel wrote into the device copy itself (the host copy follows; no upload)."""
        row = self.host[0]
        for name, value in values.items():
            row[self.table.columns[name].off] = value

    def sync(self):
        """The device array, uploaded first if ``set`` changed it where there is no host view."""
        if self.stale:
            self.array.from_numpy(self.host)
            self.stale = False
        return self.array

"""Layout schema of packed kernel work arrays: named columns, generated offsets and accessors.

A :class:`Table` is a 2-D ndarray ``(rows, width)`` of one dtype (float or i32) whose columns are
declared once by name and kind (scalar ``s``, ``v3``, ``m3``, ``v6``, ``m6``, each possibly repeated
``count`` times). Offsets are computed here and nowhere else; each column carries generated
``ti.func`` accessors used inside kernels::

    CONTACT.frame.get(Cf, m)            # 3x3 matrix of contact m
    VIRTUAL.weight.at(VNf, q, k)        # k-th 3x3 weight of virtual node q (k may be a runtime index)
    CONTACT.lam.put(Cf, m, lm)

Integer data (node indices) live in integer tables, real data in real ones. :class:`Rows` names the
rows of a vec3 table (``V[Rows.NAME, i]``); :class:`HostScalars` is a one-row table of kernel scalars
written on the host. The tables themselves are declared by their users: COND's work arrays in
``solvers/cond/layout.py``, the detection tables in ``contact/schema.py``.
"""
import numpy as np

from . import backend
from .backend import ti

_KIND_WIDTH = {"s": 1, "v3": 3, "m3": 9, "v6": 6, "m6": 36}


def _loader(kind: str, off: int, width: int):
    """ti.funcs ``get(a, row)``, ``at(a, row, k)``, ``put(a, row, x)``, ``put_at(a, row, k, x)``
    for one column of ``kind`` at ``off`` (element k at ``off + width k``). Element loops are runtime
    loops over compile-time bounds (LLVM unrolls them): ``ti.static`` unrolling here cost Taichi's front
    end 9-36 statements per call on every start-up (math/smallmat.py). The closure's ``off``,
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

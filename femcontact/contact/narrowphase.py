"""Narrowphase geometry as Taichi functions: obstacle SDFs, closest point on a triangle,
point-in-tet, contact frames. Used by the detection kernels (``detection.py``); the numpy
twins of the SDFs live in ``geometry/shapes.py`` (tests compare the two).

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from ..backend import ti
from ..math.smallmat import inv3, mTv, mv
from ..geometry.shapes import BOX, CAPSULE, COMPOUND, CYLINDER, HALFSPACE, MESH, PART_REC, SPHERE

# Column layout of the static obstacle table ``obs_f`` (O, OBS_F): the shape's 8 packed floats,
# then its bounding radius (inf for a half-space), then a rigid body's centre of mass in its shape frame (3).
OBS_F = 12
BOUND = 8
COM = 9
# Per-step pose table ``obs_pose`` (O, OBS_POSE) of every SDF entity (obstacles, then rigid bodies):
# R row-major (9), shape origin c (3), v (3), omega (3), centre of mass (3; rigid bodies).
OBS_POSE = 21


@ti.func
def _sgn(x):
    return 1.0 if x >= 0.0 else -1.0


@ti.func
def _grid_at(grid: ti.template(), off, ny, nz, i, j, k):
    return grid[off + (i * ny + j) * nz + k]


@ti.func
def _primitive_sdf(kind, a, grid: ti.template(), goff, p):
    """Signed distance and outward unit normal at local point p of one primitive shape: ``kind`` and
    its 8 packed floats ``a`` (``shapes.*.packed``); a mesh's grid starts at ``goff`` in ``grid``."""
    phi = 0.0
    n = ti.Vector([0.0, 0.0, 1.0])
    if kind == HALFSPACE:
        nn = ti.Vector([a[0], a[1], a[2]])
        phi = nn.dot(p) - a[3]
        n = nn
    elif kind == BOX:
        h = ti.Vector([a[0], a[1], a[2]])
        s = ti.Vector([_sgn(p[0]), _sgn(p[1]), _sgn(p[2])])
        q = ti.abs(p) - h
        qp = ti.max(q, 0.0)
        out = qp.norm()
        if out > 0.0:
            phi = out
            n = s * qp / out
        else:
            k = 0
            if q[1] > q[k]:
                k = 1
            if q[2] > q[k]:
                k = 2
            phi = q[k]
            n = ti.Vector([0.0, 0.0, 0.0])
            n[k] = s[k]
    elif kind == SPHERE:
        d = p.norm()
        phi = d - a[0]
        if d > 0.0:
            n = p / d
    elif kind == CAPSULE:
        c = ti.Vector([0.0, 0.0, ti.math.clamp(p[2], -a[1], a[1])])
        d = p - c
        dn = d.norm()
        phi = dn - a[0]
        if dn > 0.0:
            n = d / dn
    elif kind == CYLINDER:
        rho = ti.sqrt(p[0] * p[0] + p[1] * p[1])
        radial = ti.Vector([1.0, 0.0, 0.0])
        if rho > 0.0:
            radial = ti.Vector([p[0] / rho, p[1] / rho, 0.0])
        axial = ti.Vector([0.0, 0.0, _sgn(p[2])])
        dr = rho - a[0]
        dz = ti.abs(p[2]) - a[1]
        b0, b1 = ti.max(dr, 0.0), ti.max(dz, 0.0)
        out = ti.sqrt(b0 * b0 + b1 * b1)
        if out > 0.0:
            phi = out
            n = (radial * b0 + axial * b1) / out
        else:
            phi = ti.max(dr, dz)
            n = radial if dr > dz else axial
    elif kind == MESH:
        org = ti.Vector([a[0], a[1], a[2]])
        hs = a[3]
        nx, ny, nz = ti.cast(a[4], ti.i32), ti.cast(a[5], ti.i32), ti.cast(a[6], ti.i32)
        hi = org + hs * ti.Vector([nx - 1.0, ny - 1.0, nz - 1.0])
        pc = ti.min(ti.max(p, org), hi)
        extra = (p - pc).norm()
        u = (pc - org) / hs
        i0 = ti.min(ti.max(ti.cast(ti.floor(u[0]), ti.i32), 0), nx - 2)
        j0 = ti.min(ti.max(ti.cast(ti.floor(u[1]), ti.i32), 0), ny - 2)
        k0 = ti.min(ti.max(ti.cast(ti.floor(u[2]), ti.i32), 0), nz - 2)
        f = u - ti.Vector([i0 * 1.0, j0 * 1.0, k0 * 1.0])
        val = 0.0
        g = ti.Vector([0.0, 0.0, 0.0])
        for dx, dy, dz in ti.static(ti.ndrange(2, 2, 2)):
            v = _grid_at(grid, goff, ny, nz, i0 + dx, j0 + dy, k0 + dz)
            wx = f[0] if dx else 1.0 - f[0]
            wy = f[1] if dy else 1.0 - f[1]
            wz = f[2] if dz else 1.0 - f[2]
            val += wx * wy * wz * v
            g += ti.Vector([(1.0 if dx else -1.0) * wy * wz, wx * (1.0 if dy else -1.0) * wz,
                            wx * wy * (1.0 if dz else -1.0)]) * v / hs
        phi = val + extra
        if extra > 0.0:
            g = p - pc
        gn = g.norm()
        if gn > 0.0:
            n = g / gn
    return phi, n


@ti.func
def shape_sdf(kind, obs_f: ti.template(), o, grid: ti.template(), goff, p):
    """Signed distance and outward unit normal of obstacle o's shape at local point p
    (the same functions as ``shapes.*.sdf``). A compound is evaluated exactly, part by part: its
    table (``shapes.Compound.kernel_table``) starts at ``goff`` in ``grid``, one record of
    ``PART_REC`` floats per part (kind, packed floats, rotation row-major, position, offset of a
    mesh part's grid), and the nearest part gives the distance and the normal. Every shape runs
    through the same loop (one part, read from ``obs_f``) so that the primitives are inlined once."""
    n_parts = 1
    if kind == COMPOUND:
        n_parts = ti.cast(obs_f[o, 0], ti.i32)
    phi = 0.0
    n = ti.Vector([0.0, 0.0, 1.0])
    for q in range(n_parts):
        kq = kind
        a = ti.Vector([0.0] * 8)
        R = ti.Matrix.identity(float, 3)
        t = ti.Vector([0.0, 0.0, 0.0])
        off = goff
        if kind == COMPOUND:
            base = goff + q * PART_REC
            kq = ti.cast(grid[base], ti.i32)
            for i in ti.static(range(8)):
                a[i] = grid[base + 1 + i]
            for i, j in ti.static(ti.ndrange(3, 3)):
                R[i, j] = grid[base + 9 + 3 * i + j]
            for i in ti.static(range(3)):
                t[i] = grid[base + 18 + i]
            off = goff + ti.cast(grid[base + 21], ti.i32)
        else:
            for i in ti.static(range(8)):
                a[i] = obs_f[o, i]
        ph, nq = _primitive_sdf(kq, a, grid, off, mTv(R, p - t))
        if q == 0 or ph < phi:
            phi = ph
            n = mv(R, nq)
    return phi, n


@ti.func
def closest_on_triangle(p, a, b, c):
    """Closest point on triangle abc to p and its barycentric weights (Ericson, RTCD 5.1.5)."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = ab.dot(ap), ac.dot(ap)
    bp = p - b
    d3, d4 = ab.dot(bp), ac.dot(bp)
    cp = p - c
    d5, d6 = ab.dot(cp), ac.dot(cp)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    w = ti.Vector([0.0, 0.0, 0.0])
    if d1 <= 0.0 and d2 <= 0.0:
        w = ti.Vector([1.0, 0.0, 0.0])
    elif d3 >= 0.0 and d4 <= d3:
        w = ti.Vector([0.0, 1.0, 0.0])
    elif vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        w = ti.Vector([1.0 - v, v, 0.0])
    elif d6 >= 0.0 and d5 <= d6:
        w = ti.Vector([0.0, 0.0, 1.0])
    elif vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        v = d2 / (d2 - d6)
        w = ti.Vector([1.0 - v, 0.0, v])
    elif va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        v = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        w = ti.Vector([0.0, 1.0 - v, v])
    else:
        den = va + vb + vc
        v, u = vb / den, vc / den
        w = ti.Vector([1.0 - v - u, v, u])
    return w[0] * a + w[1] * b + w[2] * c, w


@ti.func
def in_tet(p, x0, x1, x2, x3, eps):
    """True when p lies in the tet (barycentric coordinates >= -eps)."""
    D = ti.Matrix.cols([x1 - x0, x2 - x0, x3 - x0])
    inside = False
    det = D.determinant()
    if ti.abs(det) > 0.0:
        l = mv(inv3(D), p - x0)
        inside = l[0] >= -eps and l[1] >= -eps and l[2] >= -eps and l[0] + l[1] + l[2] <= 1.0 + eps
    return inside


@ti.func
def contact_frame(n, axis):
    """Rows (t1, t2, n): t1 = axis projected onto the tangent plane (if it has one), else any."""
    t1 = axis - axis.dot(n) * n
    if t1.norm() < 1e-6:
        helper = ti.Vector([1.0, 0.0, 0.0]) if ti.abs(n[0]) < 0.9 else ti.Vector([0.0, 1.0, 0.0])
        t1 = helper - helper.dot(n) * n
    t1 = t1.normalized()
    t2 = n.cross(t1)
    return ti.Matrix.rows([t1, t2, n])

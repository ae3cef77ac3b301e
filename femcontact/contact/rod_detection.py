"""Rod contacts (docs/THEORY.md §3): Cosserat rod segments are capsules of the rod's radius around the
centre line; every contact lands in the one ContactSet as the rest of ``detection.py``'s do: the rod
side of a contact is always a virtual node (a point Jacobian) on the rod's surface
point, ``J_v = [(1−t) I, t I, −[r]×]`` on the segment's two nodes and its rotational block
(``r`` from the centre line to the surface point; at a node, the node and one adjacent segment).
The point thus moves with the centre line and the segment's spin, ``v = (1−t) v_a + t v_b + ω × r``,
so a cable can roll and friction sees its twist.

Four kernels, run by the rod passes of the collision pipeline (``pipeline.py``) after the FEM and
rigid passes:

1. ``detect_rod_sdf`` — rods against every SDF entity (obstacles, then rigid bodies, the table of
   ``detection.py``): each rod node as a sphere of the rod radius (S-contact, or a D-contact with a
   virtual node on the rigid body via ``world_side``), plus the interior minimum of the SDF along
   each segment (ternary search) where it lies clearly below both ends (a convex obstacle edge or a
   cylinder between two nodes).
2. ``detect_rod_pairs`` — segment against segment, of two rods or of one rod with itself (pairs
   closer than ``1 + ceil(3r/l)`` segments along the rod are skipped: they touch by construction):
   closest points of the two segments, gap ``d − r_a − r_b``, a D-contact between two segment
   points. Duplicates at a shared node are dropped (a closest point at the far end of a segment
   is left to the next segment, where it is the near end).
3. ``detect_fem_vertex_rod`` and ``detect_rod_node_fem`` — FEM surface vertices against rod capsules, and
   rod nodes against FEM surface triangles (virtual node on the triangle, barycentric weights).

**Speculative contacts.** A pair is reported when its gap is below ``margin + dt·|v_rel|``
(``v_rel`` the relative velocity of the two closest points at the start of the step), so two
cables crossing at 1 m/s with dt = 1e-2 see each other the step before they would touch and the
solver keeps ``φ + dt v_n ≥ 0``. Broadphase: a spatial hash of grown segment and FEM-triangle boxes
(``broadphase.SpatialHash.build_grown``), built once per step; it yields the contacts of the all-pairs loops
(``CollisionPipeline.rod_broadphase = "all"``, kept as the reference), except that a rod node deeper inside an
FEM body than its speculative reach no longer finds the far surface.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from ..backend import ti
from .emit import emit, pose_of, triangle_point_node, world_side
from .broadphase import WIDE_ROD, bucket, bucket_fill, bucket_item, cell_of, cell_range
from .narrowphase import BOUND, closest_on_triangle, contact_frame, shape_sdf
from .schema import DETECT_F, DETECT_I, NODES, PARAM_F, ROD_NODES, SDF
from ..math.smallmat import mTv, mv, skew


@ti.func
def _segment_point(ia, ib, t, seg, off, counters: ti.template(), vn_node: ti.template(), vn_weight: ti.template(),
                   n_nodes):
    """A new virtual node at the rod-surface point ``off`` (world offset from the centre line) of the
    point at parameter t of segment (ia, ib): ``J_v = [(1−t) I, t I, −[off]×]`` on the two nodes and
    the segment's rotational block ``seg`` (its spin ω × off, like a rigid point; an end point keeps
    only its node)."""
    v = ti.atomic_add(counters[1], 1)
    node = n_nodes + v
    if v < vn_node.shape[0]:
        spin = -skew(off)
        if t <= 0.0 or t >= 1.0 or ia == ib:
            vn_node[v] = ti.Vector([ib if t >= 1.0 else ia, seg, -1, -1])
            vn_weight[v, 0] = ti.Matrix.identity(float, 3)
            vn_weight[v, 1] = spin
            vn_weight[v, 2] = ti.Matrix.zero(float, 3, 3)
        else:
            vn_node[v] = ti.Vector([ia, ib, seg, -1])
            vn_weight[v, 0] = (1.0 - t) * ti.Matrix.identity(float, 3)
            vn_weight[v, 1] = t * ti.Matrix.identity(float, 3)
            vn_weight[v, 2] = spin
        vn_weight[v, 3] = ti.Matrix.zero(float, 3, 3)
    return node


@ti.func
def _sdf_world(o, p, sdf: ti.template(), obs_f: ti.template(), obs_pose: ti.template(), grid: ti.template()):
    R, c = pose_of(obs_pose, o)
    phi, nl = shape_sdf(SDF.kind.get(sdf, o), obs_f, o, grid, SDF.aux.get(sdf, o), mTv(R, p - c))
    return phi, mv(R, nl)


@ti.func
def _segments_closest(p1, q1, p2, q2):
    """Parameters (s, t) of the closest points of segments p1q1 and p2q2 (Ericson, RTCD §5.1.9)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = d1.dot(d1)
    e = d2.dot(d2)
    f = d2.dot(r)
    c = d1.dot(r)
    b = d1.dot(d2)
    den = a * e - b * b
    s = 0.0
    if den > 1e-12 * a * e:
        s = ti.math.clamp((b * f - c * e) / den, 0.0, 1.0)
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = ti.math.clamp(-c / a, 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = ti.math.clamp((b - c) / a, 0.0, 1.0)
    return s, t


@ti.kernel
def detect_rod_sdf(x: ti.types.ndarray(), v: ti.types.ndarray(), rod_nodes: ti.types.ndarray(),
                   rn_rad: ti.types.ndarray(), rs_elem: ti.types.ndarray(), rs_rad: ti.types.ndarray(),
                   det_f: ti.types.ndarray(), det_i: ti.types.ndarray(), nodes: ti.types.ndarray(),
                   pair_row: ti.types.ndarray(), sdf: ti.types.ndarray(), obs_f: ti.types.ndarray(),
                   obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(), params: ti.types.ndarray(),
                   counters: ti.types.ndarray(), c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                   vn_weight: ti.types.ndarray()):
    """Rod nodes (spheres) and segment interiors against SDF entities (module docstring, 1). Scalars
    (``det_f``/``det_i``): margin, dt; rod node, rod segment and node counts."""
    n_obs = sdf.shape[0]                    # the SDF entities (the pass runs only when there are some)
    margin, dt = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0)
    n_rn, n_rs, n_nodes = DETECT_I.n_rn.get(det_i, 0), DETECT_I.n_rs.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    for k in range(n_rn + n_rs):
        for o in range(n_obs):
            ia = 0
            ib = 0
            sg = 0
            rad = 0.0
            if k < n_rn:
                ia = ROD_NODES.node.get(rod_nodes, k)
                ib = ia
                sg = ROD_NODES.seg.get(rod_nodes, k)
                rad = rn_rad[k]
            else:
                ia = rs_elem[k - n_rn][0]
                ib = rs_elem[k - n_rn][1]
                sg = rs_elem[k - n_rn][2]
                rad = rs_rad[k - n_rn]
            row = pair_row[NODES.body.get(nodes, ia), SDF.entity.get(sdf, o)]
            other = SDF.rigid.get(sdf, o)
            use = row >= 0 and not (NODES.fixed.get(nodes, ia) == 1 and NODES.fixed.get(nodes, ib) == 1)
            if use and other >= 0:
                use = not (NODES.fixed.get(nodes, ia) == 1 and NODES.fixed.get(nodes, ib) == 1
                           and NODES.fixed.get(nodes, other) == 1)
            if use:
                pa, pb = x[ia], x[ib]
                reach = margin + dt * ti.max(v[ia].norm(), v[ib].norm())
                R, c = pose_of(obs_pose, o)
                mid = 0.5 * (pa + pb)
                if mTv(R, mid - c).norm() <= obs_f[o, BOUND] + reach + rad + 0.5 * (pb - pa).norm():
                    t = 0.0
                    phi = 0.0
                    n = ti.Vector([0.0, 0.0, 1.0])
                    hit = False
                    # One SDF call site: the shape dispatch inlines large code (every primitive and a mesh's grid),
                    # and each call site costs LLVM seconds to compile. A node is evaluated at pa; a segment at pa,
                    # pb, 12 ternary-search pairs on its interior (m1 then m2) and its minimum: 27 evaluations in
                    # that order, the same points and comparisons as calling the SDF at each.
                    n_eval = 1 if k < n_rn else 27
                    phi0, phi1, f1 = 0.0, 0.0, 0.0
                    lo, hi, m1, m2 = 0.0, 1.0, 0.0, 0.0
                    for e in range(n_eval):
                        q = pa
                        if e == 1:
                            q = pb
                        elif e < 26 and e % 2 == 0:
                            m1 = lo + (hi - lo) / 3.0
                            m2 = hi - (hi - lo) / 3.0
                            q = pa + m1 * (pb - pa)
                        elif e < 26:
                            q = pa + m2 * (pb - pa)
                        elif e == 26:
                            t = 0.5 * (lo + hi)
                            q = pa + t * (pb - pa)
                        f, g = _sdf_world(o, q, sdf, obs_f, obs_pose, grid)
                        if e == 0:
                            phi0 = f
                            phi = f
                            n = g
                        elif e == 1:
                            phi1 = f
                        elif e < 26 and e % 2 == 0:
                            f1 = f
                        elif e < 26:
                            if f1 < f:
                                hi = m2
                            else:
                                lo = m1
                        else:
                            phi = f
                            n = g
                    if k < n_rn:
                        phi -= rad
                        hit = phi < reach
                    else:                          # interior minimum along the segment
                        hit = 0.02 < t < 0.98 and phi < ti.min(phi0, phi1) - 0.25 * rad
                        phi -= rad
                        hit = hit and phi < reach
                    if hit:
                        p = pa + t * (pb - pa)
                        q = p - (phi + rad) * n           # on the entity's surface
                        node_a, vw = world_side(o, q, obs_pose, sdf, counters, vn_node, vn_weight, n_nodes)
                        nb = _segment_point(ia, ib, t, sg, -rad * n, counters, vn_node, vn_weight, n_nodes)
                        F = contact_frame(n, mv(R, PARAM_F.axis.get(params, row)))
                        emit(node_a, nb, F, phi, params, vw, q, row, counters, c_f, c_i)


@ti.func
def _segment_pair(i, j, x: ti.template(), v: ti.template(), rs_elem: ti.template(), rs_rad: ti.template(),
                  rs_info: ti.template(), nodes: ti.template(), pair_row: ti.template(),
                  params: ti.template(), margin, dt, n_nodes,
                  counters: ti.template(), c_f: ti.template(), c_i: ti.template(), vn_node: ti.template(),
                  vn_weight: ti.template()):
    """Narrow phase of segments i < j (module docstring, 2): bounding-sphere test, closest points,
    a D-contact between the two segment points when the gap is below the speculative reach."""
    a0, a1 = rs_elem[i][0], rs_elem[i][1]
    ra = rs_rad[i]
    pa0, pa1 = x[a0], x[a1]
    ca = 0.5 * (pa0 + pa1)
    ha = 0.5 * (pa1 - pa0).norm()
    va = ti.max(v[a0].norm(), v[a1].norm())
    b0, b1 = rs_elem[j][0], rs_elem[j][1]
    row = pair_row[NODES.body.get(nodes, a0), NODES.body.get(nodes, b0)]
    if rs_info[i][0] == rs_info[j][0]:
        row = -1
        if rs_info[i][3] >= 0 and rs_info[j][1] - rs_info[i][1] > rs_info[i][3]:
            row = 0
    if row >= 0 and not (NODES.fixed.get(nodes, a0) == 1 and NODES.fixed.get(nodes, a1) == 1
                         and NODES.fixed.get(nodes, b0) == 1 and NODES.fixed.get(nodes, b1) == 1):
        pb0, pb1 = x[b0], x[b1]
        rb = rs_rad[j]
        reach = margin + dt * (va + ti.max(v[b0].norm(), v[b1].norm()))
        cb = 0.5 * (pb0 + pb1)
        if (ca - cb).norm() <= ha + 0.5 * (pb1 - pb0).norm() + ra + rb + reach:
            s, t = _segments_closest(pa0, pa1, pb0, pb1)
            skip = (s >= 1.0 and rs_info[i][2] == 0) or (t >= 1.0 and rs_info[j][2] == 0)
            if not skip:
                p = pa0 + s * (pa1 - pa0)
                q = pb0 + t * (pb1 - pb0)
                d = (q - p).norm()
                vrel = ((1 - t) * v[b0] + t * v[b1]) - ((1 - s) * v[a0] + s * v[a1])
                reach = margin + dt * vrel.norm()
                phi = d - ra - rb
                if phi < reach:
                    n = ti.Vector([0.0, 0.0, 1.0])
                    if d > 1e-9 * (ha + ra):
                        n = (q - p) / d
                    else:
                        n = (pa1 - pa0).cross(pb1 - pb0).normalized()
                    na = _segment_point(a0, a1, s, rs_elem[i][2], ra * n, counters, vn_node, vn_weight, n_nodes)
                    nb = _segment_point(b0, b1, t, rs_elem[j][2], -rb * n, counters, vn_node, vn_weight, n_nodes)
                    F = contact_frame(n, PARAM_F.axis.get(params, row))
                    emit(na, nb, F, phi, params, ti.Vector([0.0, 0.0, 0.0]), p + ra * n, row, counters,
                          c_f, c_i)


@ti.kernel
def detect_rod_pairs(x: ti.types.ndarray(), v: ti.types.ndarray(), rs_elem: ti.types.ndarray(),
                     rs_rad: ti.types.ndarray(), rs_info: ti.types.ndarray(), n_rs: ti.i32,
                     nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                     params: ti.types.ndarray(), margin: float, dt: float, n_nodes: ti.i32,
                     counters: ti.types.ndarray(), c_f: ti.types.ndarray(), c_i: ti.types.ndarray(),
                     vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """Segment–segment contacts between rods and within one rod (module docstring, 2), all pairs
    (the reference of the grid pass). rs_info[i] = (rod, index in rod, is last segment, self-contact
    skip (-1: no self-contact))."""
    for i in range(n_rs):
        for j in range(i + 1, n_rs):
            _segment_pair(i, j, x, v, rs_elem, rs_rad, rs_info, nodes, pair_row, params, margin, dt,
                          n_nodes, counters, c_f, c_i, vn_node, vn_weight)


@ti.kernel
def detect_rod_pairs_grid(x: ti.types.ndarray(), v: ti.types.ndarray(), rs_elem: ti.types.ndarray(),
                          rs_rad: ti.types.ndarray(), rs_info: ti.types.ndarray(), det_f: ti.types.ndarray(),
                          det_i: ti.types.ndarray(), entries: ti.types.ndarray(),
                          ecell: ti.types.ndarray(), lo: ti.types.ndarray(), hi: ti.types.ndarray(),
                          nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                          params: ti.types.ndarray(), counters: ti.types.ndarray(),
                          c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """``detect_rod_pairs`` over the segment grid (``broadphase.SpatialHash``): pairs i < j whose grown
    boxes overlap, each met once (in the cell holding the low corner of the boxes' overlap). Scalars
    (``det_f``/``det_i``): margin, dt, the rod grid's cell size and bucket count; segment and node counts."""
    margin, dt, h = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0), DETECT_F.rod_h.get(det_f, 0)
    n_rs, n_nodes, size = DETECT_I.n_rs.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0), DETECT_I.rod_size.get(det_i, 0)
    for i in range(n_rs):
        li, ui = lo[i], hi[i]
        c0, c1 = cell_range(li, ui, h, counters, WIDE_ROD)
        for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            bk = bucket(ci, cj, ck, size)
            cell = ti.Vector([ci, cj, ck])
            for sl in range(bucket_fill(entries, bk)):
                j = bucket_item(entries, bk, sl)
                if j > i and (ecell[bk, sl] == cell).all():
                    lj, uj = lo[j], hi[j]
                    if (ti.max(li, lj) <= ti.min(ui, uj)).all() and (cell_of(ti.max(li, lj), h) == cell).all():
                        _segment_pair(i, j, x, v, rs_elem, rs_rad, rs_info, nodes, pair_row, params,
                                      margin, dt, n_nodes, counters, c_f, c_i, vn_node, vn_weight)


@ti.func
def _nearer_capsule(j, i, p, best, bs, bt, x: ti.template(), rs_elem: ti.template(), rs_rad: ti.template(),
                    nodes: ti.template(), pair_row: ti.template()):
    """(best gap, segment, parameter) after trying capsule j for point p of FEM node i."""
    a0, a1 = rs_elem[j][0], rs_elem[j][1]
    if pair_row[NODES.body.get(nodes, i), NODES.body.get(nodes, a0)] >= 0 \
            and not (NODES.fixed.get(nodes, i) == 1 and NODES.fixed.get(nodes, a0) == 1 and NODES.fixed.get(nodes, a1) == 1):
        d = x[a1] - x[a0]
        t = ti.math.clamp((p - x[a0]).dot(d) / d.dot(d), 0.0, 1.0)
        phi = (p - (x[a0] + t * d)).norm() - rs_rad[j]
        if phi < best or (phi == best and j < bs):
            best = phi
            bs = j
            bt = t
    return best, bs, bt


@ti.func
def _nearer_triangle(e, i, p, best, bt, x: ti.template(), tris: ti.template(), nodes: ti.template(),
                     pair_row: ti.template()):
    """(best distance, triangle) after trying surface triangle e for rod node i at p."""
    tv = tris[e]
    if pair_row[NODES.body.get(nodes, i), NODES.body.get(nodes, tv[0])] >= 0:
        q, w = closest_on_triangle(p, x[tv[0]], x[tv[1]], x[tv[2]])
        d = (p - q).norm()
        if d < best or (d == best and e < bt):
            best = d
            bt = e
    return best, bt


@ti.kernel
def detect_fem_vertex_rod(x: ti.types.ndarray(), v: ti.types.ndarray(), surf: ti.types.ndarray(),
                          rs_elem: ti.types.ndarray(), rs_rad: ti.types.ndarray(), det_f: ti.types.ndarray(),
                          det_i: ti.types.ndarray(), use_grid: ti.template(), s_entries: ti.types.ndarray(),
                          s_ecell: ti.types.ndarray(), s_vmax: ti.types.ndarray(), nodes: ti.types.ndarray(),
                          pair_row: ti.types.ndarray(), params: ti.types.ndarray(), counters: ti.types.ndarray(),
                          c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                          vn_weight: ti.types.ndarray()):
    """Rods against FEM bodies (module docstring, 3), first half: FEM surface vertex vs nearest rod capsule
    (side A the rod point). With ``use_grid`` the nearest is sought among the segment hash's items within
    ``margin + dt(|v_i| + vmax)`` of the vertex (``broadphase.SpatialHash.build_grown``; the same item whenever
    the all-items search would emit a contact), else among all segments (the reference). Ties go to the lower
    index either way. Scalars (``det_f``/``det_i``): margin, dt, the rod grid's cell size and bucket count;
    FEM surface vertex, rod segment and node counts."""
    margin, dt, h = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0), DETECT_F.rod_h.get(det_f, 0)
    size, n_nodes = DETECT_I.rod_size.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_rs, n_surf = DETECT_I.n_rs.get(det_i, 0), DETECT_I.n_surf.get(det_i, 0)
    for k in range(n_surf):
        i = surf[k]
        p = x[i]
        best = 1e30
        bs = -1
        bt = 0.0
        if ti.static(use_grid):
            g = 0.5 * margin + dt * (v[i].norm() + s_vmax[0])
            c0, c1 = cell_range(p - g, p + g, h, counters, WIDE_ROD)
            for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
                bk = bucket(ci, cj, ck, size)
                for sl in range(bucket_fill(s_entries, bk)):
                    if (s_ecell[bk, sl] == ti.Vector([ci, cj, ck])).all():
                        best, bs, bt = _nearer_capsule(bucket_item(s_entries, bk, sl), i, p, best, bs, bt, x,
                                                       rs_elem, rs_rad, nodes, pair_row)
        else:
            for j in range(n_rs):
                best, bs, bt = _nearer_capsule(j, i, p, best, bs, bt, x, rs_elem, rs_rad, nodes, pair_row)
        if bs >= 0:
            a0, a1 = rs_elem[bs][0], rs_elem[bs][1]
            q = x[a0] + bt * (x[a1] - x[a0])
            vrel = v[i] - ((1 - bt) * v[a0] + bt * v[a1])
            if best < margin + dt * vrel.norm():
                d = (p - q).norm()
                n = (p - q) / ti.max(d, 1e-300)
                row = pair_row[NODES.body.get(nodes, i), NODES.body.get(nodes, a0)]
                na = _segment_point(a0, a1, bt, rs_elem[bs][2], rs_rad[bs] * n, counters, vn_node, vn_weight,
                                    n_nodes)
                nb = i
                emit(na, nb, contact_frame(n, PARAM_F.axis.get(params, row)), best, params,
                     ti.Vector([0.0, 0.0, 0.0]), q + rs_rad[bs] * n, row, counters, c_f, c_i)


@ti.kernel
def detect_rod_node_fem(x: ti.types.ndarray(), v: ti.types.ndarray(), rod_nodes: ti.types.ndarray(),
                        rn_rad: ti.types.ndarray(), tris: ti.types.ndarray(), det_f: ti.types.ndarray(),
                        det_i: ti.types.ndarray(), use_grid: ti.template(), t_entries: ti.types.ndarray(),
                        t_ecell: ti.types.ndarray(), t_vmax: ti.types.ndarray(), nodes: ti.types.ndarray(),
                        pair_row: ti.types.ndarray(), params: ti.types.ndarray(), counters: ti.types.ndarray(),
                        c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                        vn_weight: ti.types.ndarray()):
    """Rods against FEM bodies (module docstring, 3), second half: rod node vs nearest FEM surface triangle
    (side A the triangle point), over the rod-facing triangle hash with ``use_grid`` (as
    ``detect_fem_vertex_rod``), else over all of them. Scalars (``det_f``/``det_i``): margin, dt, the rod
    grid's cell size and bucket count; rod node, rod-facing triangle and node counts."""
    margin, dt, h = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0), DETECT_F.rod_h.get(det_f, 0)
    size, n_nodes = DETECT_I.rod_size.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_rn, n_tris = DETECT_I.n_rn.get(det_i, 0), DETECT_I.n_rod_tris.get(det_i, 0)
    for k in range(n_rn):
        i = ROD_NODES.node.get(rod_nodes, k)
        p = x[i]
        rad = rn_rad[k]
        best = 1e30
        bt = -1
        if ti.static(use_grid):
            g = rad + 0.5 * margin + dt * (v[i].norm() + t_vmax[0])
            c0, c1 = cell_range(p - g, p + g, h, counters, WIDE_ROD)
            for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
                bk = bucket(ci, cj, ck, size)
                for sl in range(bucket_fill(t_entries, bk)):
                    if (t_ecell[bk, sl] == ti.Vector([ci, cj, ck])).all():
                        best, bt = _nearer_triangle(bucket_item(t_entries, bk, sl), i, p, best, bt, x, tris,
                                                    nodes, pair_row)
        else:
            for e in range(n_tris):
                best, bt = _nearer_triangle(e, i, p, best, bt, x, tris, nodes, pair_row)
        if bt >= 0 and not (NODES.fixed.get(nodes, i) == 1 and NODES.fixed.get(nodes, tris[bt][0]) == 1
                            and NODES.fixed.get(nodes, tris[bt][1]) == 1
                            and NODES.fixed.get(nodes, tris[bt][2]) == 1):
            tv = tris[bt]
            a, b, c = x[tv[0]], x[tv[1]], x[tv[2]]
            q, w = closest_on_triangle(p, a, b, c)
            fn = (b - a).cross(c - a).normalized()
            inside = (p - q).dot(fn) < 0.0
            n = fn
            if best > 1e-12:
                n = (p - q) / best
                if inside:
                    n = -n
            phi = best - rad
            if inside:
                phi = -best - rad
            vq = w[0] * v[tv[0]] + w[1] * v[tv[1]] + w[2] * v[tv[2]]
            if phi < margin + dt * (v[i] - vq).norm():
                row = pair_row[NODES.body.get(nodes, tv[0]), NODES.body.get(nodes, i)]
                na = triangle_point_node(tv, w, counters, vn_node, vn_weight, n_nodes)
                nb = _segment_point(i, i, 0.0, ROD_NODES.seg.get(rod_nodes, k), -rad * n, counters, vn_node,
                                    vn_weight, n_nodes)
                emit(na, nb, contact_frame(n, PARAM_F.axis.get(params, row)), phi, params,
                     ti.Vector([0.0, 0.0, 0.0]),
                      q, row, counters, c_f, c_i)

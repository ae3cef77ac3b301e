"""The FEM, rigid and obstacle contact kernels of the collision pipeline (``pipeline.py``; docs/THEORY.md
§3, COND §III-A).

The passes run them in this order on the state at the start of the step (rigid proxies against SDF
entities, ``detect_rigid``, between 1. and 2.):

1. **S-contacts** (FEM surface vertex vs obstacle): for every surface vertex and obstacle with
   ``phi < margin`` (obstacle SDF in its current pose): ``node_a = -1``, ``node_b`` = the vertex,
   normal = the obstacle's outward normal (from the obstacle into the body), ``phi`` = signed
   distance, ``point`` = the obstacle surface point ``x - phi n``, ``v_world`` = the obstacle's
   velocity at that point over the step (``obstacles.ObstacleSpec.step_motion``).
2. **D-contacts** (FEM surface vertex of body B vs body A != B): the vertex is *inside* A when a
   tet of A contains it (spatial hash over tets), and its gap is the distance to the nearest
   boundary triangle of A (spatial hash over surface triangles; rings widen for deep points; among
   the triangles facing against the vertex's own outward normal, ``vertex_normals``):
   ``phi = -d`` inside, ``+d`` outside (reported when ``d < margin``). Side A is a **virtual
   node** at the closest point of that triangle (``vn_node`` = its 3 nodes, ``vn_weight`` =
   barycentric weights x I); normal from A into B (``(x - q)/d`` outside, ``(q - x)/d`` inside,
   the triangle's outward normal when d ~ 0). Up to two bodies A per vertex.
3. **Rigid samples in FEM bodies** (``detect_rigid_in_fem``): the same search (``_body_contacts``)
   for rigid surface samples, side B a virtual node ``[I, −[r]×]`` on the rigid body; catches a
   box corner or mesh vertex pressed between the vertices of a coarse FEM body. A sample's reach
   is ``margin + dt |v_p|`` (its speed, as for the rigid proxies against SDF entities), so a fast
   rigid body's contact exists the step before it touches; the rigid bodies' broadphase boxes
   grow by the same bound so the FEM triangles and tets within that reach are hashed.
   An FEM vertex within ``dedup = min(margin, DEDUP · mean edge)`` (``tables.py``) of a sample of a rigid body
   gets no contact against that body in 1.: the sample's contact is the same place (its gap to the
   FEM surface is at most their distance, so it is reported), and two would double the contact's
   stiffness of a compliant contact; the sample's normal, from the FEM
   triangle kept in the rigid surface's normal cone, is the well-defined one at a box edge or corner.

4. **Self-contacts** (``detect_self``, FEM bodies added with ``self_contact=True``): a surface
   vertex against its own body's surface triangles within ``margin``, leaving out those within
   ``self_gap`` of it at rest (``setup.SELF_CONTACT_REST_GAP`` longest surface edges: its neighbours
   and, for a mat one or two elements thick, the opposite face). Only the near side is searched (no
   in-tet test: a vertex always lies in its own body's tets), so a vertex that has crossed a triangle
   by more than ``margin`` is lost, as in any proximity-based self-contact.

Contact sides: a real node (an FEM vertex), the world (-1) or a virtual node, i.e. a point
Jacobian of up to four weighted blocks (a triangle point, a rigid-body point). Detection does not
nodalize: several contacts may share a real node; COND routes all but one of them through
virtual nodes of its own (``solvers/cond/virtual.py``), the Newton path needs nothing of the kind.

Prescribed (pinned/driven) nodes: a contact whose every node is prescribed (a prescribed vertex
against an obstacle, or against a triangle of prescribed nodes) is skipped: nothing free takes
part. Otherwise the prescribed node stays in the contact as an ordinary node; its v̂ is known and
the solvers keep it at its prescribed value (W = 0 / eliminated), so the impulse acts on the free
side only.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from ..backend import ti
from .broadphase import (BOX_HI, BOX_LO, WIDE_FEM, bucket, bucket_fill, bucket_item, cell_of, cell_range,
                         near_other_body)
from .emit import (emit, pose_of, rigid_point_node, rigid_point_reach, triangle_point_node,
                   world_side)
from .narrowphase import BOUND, COM, closest_on_triangle, contact_frame, in_tet, shape_sdf
from ..math.smallmat import mTv, mv, quat_matrix
from .schema import DETECT_F, DETECT_I, NODES, PARAM_F, SAMPLE_F, SAMPLE_I, PROXY_F, PROXY_I, SDF
from ..geometry.shapes import HALFSPACE

MAX_RINGS = 8          # deep-penetration search: up to margin + MAX_RINGS * h around a vertex
SLOTS = 2              # bodies A considered per vertex in D-contacts


@ti.kernel
def detect_obstacles(x: ti.types.ndarray(), surf: ti.types.ndarray(), det_f: ti.types.ndarray(),
                     det_i: ti.types.ndarray(), nodes: ti.types.ndarray(),
                     pair_row: ti.types.ndarray(), sdf: ti.types.ndarray(),
                     obs_f: ti.types.ndarray(),
                     obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(), params: ti.types.ndarray(),
                     s_range: ti.types.ndarray(), samp_f: ti.types.ndarray(),
                     counters: ti.types.ndarray(), c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                     vn_weight: ti.types.ndarray()):
    n_obs = sdf.shape[0]                    # the SDF entities (the pass runs only when there are some)
    margin, dedup = DETECT_F.margin.get(det_f, 0), DETECT_F.dedup.get(det_f, 0)
    n_surf, n_nodes = DETECT_I.n_surf.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    for s in range(n_surf):
        i = surf[s]
        if NODES.fixed.get(nodes, i) == 0:
            xi = x[i]
            for o in range(n_obs):
                row = pair_row[NODES.body.get(nodes, i), SDF.entity.get(sdf, o)]
                if row >= 0:
                    R, c = pose_of(obs_pose, o)
                    pl = mTv(R, xi - c)
                    if pl.norm() <= obs_f[o, BOUND] + margin:
                        kind = SDF.kind.get(sdf, o)
                        phi, nl = shape_sdf(kind, obs_f, o, grid, SDF.aux.get(sdf, o), pl)
                        dup = False                 # a rigid surface sample at this vertex (module doc, 3.)
                        for j in range(s_range[o, 0], s_range[o, 1]):
                            if (c + mv(R, SAMPLE_F.point.get(samp_f, j)) - xi).norm() < dedup:
                                dup = True
                        if phi < margin and not dup:
                            n = mv(R, nl)
                            q = xi - phi * n
                            node_a, vw = world_side(o, q, obs_pose, sdf, counters, vn_node, vn_weight,
                                                     n_nodes)
                            F = contact_frame(n, mv(R, PARAM_F.axis.get(params, row)))
                            nb = i
                            emit(node_a, nb, F, phi, params, vw, q, row, counters, c_f, c_i)


@ti.func
def _into_cone(n, a, c):
    """n turned toward the unit axis a until the angle between them is at most arccos(c)."""
    r = n
    ca = n.dot(a)
    if ca < c:
        t = n - ca * a
        tn = t.norm()
        r = a
        if tn > 1e-12:
            r = c * a + ti.sqrt(ti.max(1.0 - c * c, 0.0)) * t / tn
    return r


@ti.kernel
def vertex_normals(x: ti.types.ndarray(), surf: ti.types.ndarray(), n_surf: ti.i32, tris: ti.types.ndarray(),
                   n_tris: ti.i32, nrm: ti.types.ndarray()):
    """Area-weighted outward normal (unnormalized) of every FEM surface vertex: the sum of its surface
    triangles' ``(b − a) × (c − a)``; ``_body_contacts`` reads only its direction's sign against a face."""
    for s in range(n_surf):
        nrm[surf[s]] = ti.Vector([0.0, 0.0, 0.0])
    for t in range(n_tris):
        tv = tris[t]
        fn = (x[tv[1]] - x[tv[0]]).cross(x[tv[2]] - x[tv[0]])
        for k in ti.static(range(3)):
            nrm[tv[k]] += fn


@ti.func
def _faces_against(x: ti.template(), tv, own):
    """Whether triangle tv's outward normal opposes the outward normal ``own`` of the point meeting it
    (``vertex_normals``): only such a face can press that point (``_body_contacts``, ``detect_self``)."""
    return (x[tv[1]] - x[tv[0]]).cross(x[tv[2]] - x[tv[0]]).dot(own) < 0.0


@ti.func
def _body_contacts(p, bv, i, lin, com, g, cg, own, x: ti.template(), nodes: ti.template(),
                   pair_row: ti.template(), tris: ti.template(), tri_entries: ti.template(),
                   tets: ti.template(), tet_entries: ti.template(), h, size, params: ti.template(), margin, n_nodes,
                   counters: ti.template(), c_f: ti.template(), c_i: ti.template(),
                   vn_node: ti.template(), vn_weight: ti.template()):
    """D-contacts of point p on body bv against the FEM bodies A != bv (module docstring, 2.): side B
    is FEM node i when i >= 0, else a virtual node at p on the rigid body
    with blocks (lin, lin+1) and centre of mass com (``rigid_point_node``). The normal, from the
    nearest boundary triangle (vertex–face), is then kept in the cone ``n·(−g) ≥ cg`` of the
    rigid surface's inward normals at p (``surface_samples``): a force on a rigid point must push
    into one of the faces there, so a flat face pressed into a curved FEM surface is pushed along its
    own normal (cg = -2 for an FEM vertex: no cone).

    The nearest face is ambiguous where a face of A is coplanar with p's own surface (two cubes stacked
    flush: an edge vertex 3e-5 m into, or just above, the top face lies ~0 from the shared side plane, and
    that side face would push it sideways, docs/THEORY.md §3): only faces of A whose outward normal
    opposes p's own outward normal ``own`` (``vertex_normals``, or the rigid sample's axis g) are taken,
    and the nearest face of any orientation only when no opposed face is within reach."""
    sb = ti.Vector([-1] * SLOTS)          # body A of each slot
    sin = ti.Vector([0] * SLOTS)          # p inside A
    sd = ti.Vector([1e30] * SLOTS)        # best distance
    st = ti.Vector([-1] * SLOTS)          # best triangle among the faces opposing own
    sa = ti.Vector([1e30] * SLOTS)        # best distance and triangle of any orientation (fallback)
    ta = ti.Vector([-1] * SLOTS)
    # 1. inside which other bodies? (tets of p's cell)
    cc = cell_of(p, h)
    bk = bucket(cc[0], cc[1], cc[2], size)
    for e in range(bucket_fill(tet_entries, bk)):
        t = bucket_item(tet_entries, bk, e)
        tv = tets[t]
        ba = NODES.body.get(nodes, tv[0])
        if ba != bv and pair_row[ba, bv] >= 0:
            if in_tet(p, x[tv[0]], x[tv[1]], x[tv[2]], x[tv[3]], 1e-9):
                k = -1
                for z in ti.static(range(SLOTS)):
                    if k < 0 and (sb[z] == ba or sb[z] < 0):
                        k = z
                if k >= 0:
                    sb[k] = ba
                    sin[k] = 1
    # 2. nearest boundary triangle of each such body, rings widening for deep points
    need_deep = 0
    for z in ti.static(range(SLOTS)):
        need_deep += sin[z]
    rings = MAX_RINGS if need_deep > 0 else 0
    r = margin
    for ring in range(rings + 1):
        r = margin + ring * h
        c0, c1 = cell_range(p - r, p + r, h, counters, WIDE_FEM)
        for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            b2 = bucket(ci, cj, ck, size)
            for e in range(bucket_fill(tri_entries, b2)):
                t = bucket_item(tri_entries, b2, e)
                tv = tris[t]
                ba = NODES.body.get(nodes, tv[0])
                if ba != bv and pair_row[ba, bv] >= 0:
                    q, w = closest_on_triangle(p, x[tv[0]], x[tv[1]], x[tv[2]])
                    d = (p - q).norm()
                    k = -1
                    for z in ti.static(range(SLOTS)):
                        if k < 0 and sb[z] == ba:
                            k = z
                    if k < 0 and d < margin:
                        for z in ti.static(range(SLOTS)):
                            if k < 0 and sb[z] < 0:
                                k = z
                        if k >= 0:
                            sb[k] = ba
                    if k >= 0:
                        if d < sa[k]:
                            sa[k] = d
                            ta[k] = t
                        if d < sd[k] and _faces_against(x, tv, own):
                            sd[k] = d
                            st[k] = t
        done = 1
        for z in ti.static(range(SLOTS)):
            if sin[z] == 1 and sd[z] > r:
                done = 0
        if done == 1:
            break
    for z in ti.static(range(SLOTS)):
        if st[z] < 0:
            sd[z] = sa[z]
            st[z] = ta[z]
    # 3. one D-contact per slot
    fixed_b = 0
    if i >= 0:
        fixed_b = NODES.fixed.get(nodes, i)
    else:
        fixed_b = NODES.fixed.get(nodes, lin)
    for z in range(SLOTS):      # a runtime loop: the contact code below is inlined once, not SLOTS times
        if st[z] >= 0 and (sin[z] == 1 or sd[z] < margin):
            tv = tris[st[z]]
            if not (fixed_b == 1 and NODES.fixed.get(nodes, tv[0]) == 1 and NODES.fixed.get(nodes, tv[1]) == 1
                    and NODES.fixed.get(nodes, tv[2]) == 1):
                a, b, c = x[tv[0]], x[tv[1]], x[tv[2]]
                q, w = closest_on_triangle(p, a, b, c)
                d = sd[z]
                fn = (b - a).cross(c - a).normalized()
                n = fn
                if d > 1e-12 * h:
                    n = (p - q) / d
                    if sin[z] == 1:
                        n = -n
                if cg > -1.0:
                    n = _into_cone(n, -g, cg)
                phi = d
                if sin[z] == 1:
                    phi = -d
                row = pair_row[sb[z], bv]
                F = contact_frame(n, PARAM_F.axis.get(params, row))
                na = triangle_point_node(tv, w, counters, vn_node, vn_weight, n_nodes)
                nb = 0
                if i >= 0:
                    nb = i
                else:
                    nb = rigid_point_node(lin, p, com, counters, vn_node, vn_weight, n_nodes)
                emit(na, nb, F, phi, params, ti.Vector([0.0, 0.0, 0.0]), q, row, counters,
                      c_f, c_i)


@ti.kernel
def detect_bodies(x: ti.types.ndarray(), surf: ti.types.ndarray(), det_f: ti.types.ndarray(),
                  det_i: ti.types.ndarray(),
                  nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                  tris: ti.types.ndarray(), tri_entries: ti.types.ndarray(), tets: ti.types.ndarray(),
                  tet_entries: ti.types.ndarray(),
                  boxes: ti.types.ndarray(), params: ti.types.ndarray(), counters: ti.types.ndarray(),
                  c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray(),
                  nrm: ti.types.ndarray()):
    """FEM surface vertices against the other FEM bodies' tets (``_body_contacts``); ``nrm`` their
    outward normals (``vertex_normals``). Scalars (``det_f``/``det_i``): margin, the FEM grid's cell size
    and bucket count, node, surface vertex and body counts."""
    margin, h = DETECT_F.margin.get(det_f, 0), DETECT_F.fem_h.get(det_f, 0)
    size, n_nodes = DETECT_I.fem_size.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_surf = DETECT_I.n_surf.get(det_i, 0)
    n_bodies = DETECT_I.n_bodies.get(det_i, 0)
    for s in range(n_surf):
        i = surf[s]
        bv = NODES.body.get(nodes, i)
        p = x[i]
        if near_other_body(p, p, bv, nodes, pair_row, boxes, n_bodies, margin):
            _body_contacts(p, bv, i, -1, p, p, -2.0, nrm[i], x, nodes, pair_row, tris, tri_entries, tets,
                           tet_entries, h, size, params, margin, n_nodes, counters,
                           c_f, c_i,
                           vn_node, vn_weight)


@ti.kernel
def detect_self(x: ti.types.ndarray(), rest: ti.types.ndarray(), self_surf: ti.types.ndarray(),
                det_f: ti.types.ndarray(), det_i: ti.types.ndarray(),
                self_gap: ti.types.ndarray(), nodes: ti.types.ndarray(),
                pair_row: ti.types.ndarray(), tris: ti.types.ndarray(), tri_entries: ti.types.ndarray(), params: ti.types.ndarray(), counters: ti.types.ndarray(),
                c_f: ti.types.ndarray(), c_i: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray(),
                nrm: ti.types.ndarray()):
    """Self-contacts (module docstring, 4.): a surface vertex of a self-contact body against its own
    surface triangles within ``margin`` that were farther than ``self_gap`` from it at rest (not its
    neighbours, not the opposite face of a thin mat). One contact per vertex, with the nearest such
    triangle whose outward normal opposes the vertex's own (``nrm``, as in ``_body_contacts``; the
    nearest of any orientation when none does): side A a virtual node at the closest point, the gap
    negative once the vertex has crossed the triangle's face (behind it, straight along its outward
    normal, so the closest point is its foot in the closed triangle; a point beyond a convex edge,
    nearest the edge at a slant, counts as outside), the normal from the triangle to the vertex (the triangle's own
    normal when crossed or touching). Scalars (``det_f``/``det_i``): margin, the FEM grid's cell size and
    bucket count, node and self-contact vertex counts."""
    margin, h = DETECT_F.margin.get(det_f, 0), DETECT_F.fem_h.get(det_f, 0)
    size, n_nodes = DETECT_I.fem_size.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_self = DETECT_I.n_self.get(det_i, 0)
    for s in range(n_self):
        i = self_surf[s]
        bv = NODES.body.get(nodes, i)
        p, p0, gap = x[i], rest[i], self_gap[bv]
        own = nrm[i]
        best, bt = margin, -1           # nearest opposing triangle
        best_any, bt_any = margin, -1   # nearest of any orientation (fallback)
        c0, c1 = cell_range(p - margin, p + margin, h, counters, WIDE_FEM)
        for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            b2 = bucket(ci, cj, ck, size)
            for e in range(bucket_fill(tri_entries, b2)):
                t = bucket_item(tri_entries, b2, e)
                tv = tris[t]
                if NODES.body.get(nodes, tv[0]) == bv and tv[0] != i and tv[1] != i and tv[2] != i:
                    q, w = closest_on_triangle(p, x[tv[0]], x[tv[1]], x[tv[2]])
                    d = (p - q).norm()
                    if d < best:                    # best_any <= best
                        q0, w0 = closest_on_triangle(p0, rest[tv[0]], rest[tv[1]], rest[tv[2]])
                        if (p0 - q0).norm() > gap:
                            if d < best_any:
                                best_any, bt_any = d, t
                            if _faces_against(x, tv, own):
                                best, bt = d, t
        if bt < 0:
            best, bt = best_any, bt_any
        if bt >= 0:
            tv = tris[bt]
            if not (NODES.fixed.get(nodes, i) == 1 and NODES.fixed.get(nodes, tv[0]) == 1 and NODES.fixed.get(nodes, tv[1]) == 1
                    and NODES.fixed.get(nodes, tv[2]) == 1):
                a, b, c = x[tv[0]], x[tv[1]], x[tv[2]]
                q, w = closest_on_triangle(p, a, b, c)
                fn = (b - a).cross(c - a).normalized()
                n = fn
                phi = best
                inner = -(p - q).dot(fn) >= (1.0 - 1e-6) * best     # behind the face, within its prism
                if inner and best > 0.0:                  # crossed the face (beyond a convex edge: outside)
                    phi = -best
                elif best > 1e-12 * h:
                    n = (p - q) / best
                row = pair_row[bv, bv]
                F = contact_frame(n, PARAM_F.axis.get(params, row))
                na = triangle_point_node(tv, w, counters, vn_node, vn_weight, n_nodes)
                emit(na, i, F, phi, params, ti.Vector([0.0, 0.0, 0.0]), q, row, counters,
                     c_f, c_i)


@ti.kernel
def detect_rigid_in_fem(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(),
                        samp_f: ti.types.ndarray(), samp_i: ti.types.ndarray(), det_f: ti.types.ndarray(),
                        det_i: ti.types.ndarray(), nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                        tris: ti.types.ndarray(), tri_entries: ti.types.ndarray(), tets: ti.types.ndarray(),
                        tet_entries: ti.types.ndarray(),
                        boxes: ti.types.ndarray(), params: ti.types.ndarray(), counters: ti.types.ndarray(),
                        c_f: ti.types.ndarray(), c_i: ti.types.ndarray(),
                        vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """Rigid surface samples (``geometry.proxies.surface_samples``) against the FEM bodies' tets
    (``_body_contacts``): a box corner or mesh vertex pressed between the vertices of a coarse FEM
    body, which the FEM-vertex-vs-SDF direction of ``detect_obstacles`` cannot see. A sample's
    reach grows with its speed as a proxy's does in ``detect_rigid`` (``rigid_point_reach``), so a
    fast body pressing into a slab is caught the step before it touches. The samples: ``samp_f``/``samp_i``
    (schema.SAMPLE_F/I); scalars (``det_f``/``det_i``): margin, dt, the FEM grid's cell size and bucket
    count, node, body and sample counts."""
    margin, dt, h = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0), DETECT_F.fem_h.get(det_f, 0)
    size, n_nodes = DETECT_I.fem_size.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_bodies, n_samp = DETECT_I.n_bodies.get(det_i, 0), DETECT_I.n_samp.get(det_i, 0)
    for j in range(n_samp):
        k = SAMPLE_I.rigid.get(samp_i, j)
        lin = SAMPLE_I.lin.get(samp_i, j)
        com = x[lin]
        R = quat_matrix(quat[k])
        p = com + mv(R, SAMPLE_F.point.get(samp_f, j) - SAMPLE_F.com.get(samp_f, j))
        bv = SAMPLE_I.body.get(samp_i, j)
        reach = rigid_point_reach(v, lin, p, com, margin, dt)
        if near_other_body(p, p, bv, nodes, pair_row, boxes, n_bodies, reach):
            g = mv(R, SAMPLE_F.axis.get(samp_f, j))
            _body_contacts(p, bv, -1, lin, com, g, SAMPLE_F.cos.get(samp_f, j), g, x, nodes, pair_row, tris,
                           tri_entries, tets, tet_entries, h, size, params, reach, n_nodes, counters,
                           c_f, c_i,
                           vn_node, vn_weight)


@ti.kernel
def rigid_boxes(obs_pose: ti.types.ndarray(), obs_f: ti.types.ndarray(), o0: ti.i32, n_rigid: ti.i32,
                rigid_body: ti.types.ndarray(), dt: float, boxes: ti.types.ndarray()):
    """Rigid bodies' boxes for the broadphase: shape origin ± (bounding radius + dt × the fastest
    surface point's speed bound |v| + |w| (radius + |origin - com|)), so the FEM triangles and tets
    within a fast sample's grown reach (``rigid_point_reach``) are hashed (``body_boxes`` sees
    only the centre of mass and the angular block)."""
    for k in range(n_rigid):
        o = o0 + k
        c = ti.Vector([obs_pose[o, 9], obs_pose[o, 10], obs_pose[o, 11]])
        com = ti.Vector([obs_pose[o, 18], obs_pose[o, 19], obs_pose[o, 20]])
        vl = ti.Vector([obs_pose[o, 12], obs_pose[o, 13], obs_pose[o, 14]])
        w = ti.Vector([obs_pose[o, 15], obs_pose[o, 16], obs_pose[o, 17]])
        rad = obs_f[o, BOUND]
        grow = rad + dt * (vl.norm() + w.norm() * (rad + (c - com).norm()))
        for a in ti.static(range(3)):
            boxes[rigid_body[k], BOX_LO + a] = c[a] - grow
            boxes[rigid_body[k], BOX_HI + a] = c[a] + grow


@ti.func
def _com_local(obs_f: ti.template(), o):
    """Centre of mass of rigid SDF entity o in its shape frame (``obs_f``'s ``COM`` columns)."""
    return ti.Vector([obs_f[o, COM], obs_f[o, COM + 1], obs_f[o, COM + 2]])


@ti.func
def _rigid_poses(x: ti.template(), v: ti.template(), quat: ti.template(), sdf: ti.template(),
                 obs_f: ti.template(), o0, n_rigid, obs_pose: ti.template()):
    """Rows o0.. of the SDF pose table from the rigid bodies' state (rigid k has quaternion k and SDF row
    o0 + k, whose ``rigid`` column is its first velocity block)."""
    for k in range(n_rigid):
        o = o0 + k
        lin = SDF.rigid.get(sdf, o)
        R = quat_matrix(quat[k])
        com = x[lin]
        c = com - mv(R, _com_local(obs_f, o))
        for a, bb in ti.static(ti.ndrange(3, 3)):
            obs_pose[o, 3 * a + bb] = R[a, bb]
        for a in ti.static(range(3)):
            obs_pose[o, 9 + a] = c[a]
            obs_pose[o, 12 + a] = v[lin][a]
            obs_pose[o, 15 + a] = v[lin + 1][a]
            obs_pose[o, 18 + a] = com[a]


@ti.kernel
def rigid_poses(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(), sdf: ti.types.ndarray(),
                obs_f: ti.types.ndarray(), o0: ti.i32, n_rigid: ti.i32, obs_pose: ti.types.ndarray()):
    """``_rigid_poses`` as a launch of its own (when a pass before ``detect_rigid`` reads the poses)."""
    _rigid_poses(x, v, quat, sdf, obs_f, o0, n_rigid, obs_pose)


@ti.kernel
def detect_rigid(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(),
                 proxy_f: ti.types.ndarray(), proxy_i: ti.types.ndarray(), det_f: ti.types.ndarray(),
                 det_i: ti.types.ndarray(), nodes: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                 sdf: ti.types.ndarray(), obs_f: ti.types.ndarray(), obs_pose: ti.types.ndarray(),
                 grid: ti.types.ndarray(), params: ti.types.ndarray(),
                 poses: ti.template(), counters: ti.types.ndarray(),
                 c_f: ti.types.ndarray(), c_i: ti.types.ndarray(),
                 vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """Rigid contact proxies (``geometry.proxies.contact_proxies``, table ``PROXY_F``/``PROXY_I``) against
    every other SDF entity.

    A proxy of radius r at world point p touches entity A where ``sdf_A(p) - r < margin +
    dt |v_p|`` (the margin grows with the proxy's speed so fast bodies are caught a step early).
    A circle proxy (cylinder rim) against a half-space tests its lowest point and the three
    points a quarter turn apart. Side B is a virtual node on the rigid body at the touching
    point; side A is the world or a virtual node on the other rigid body (``world_side``).

    ``poses`` (compile-time bool): write the rigid bodies' rows of ``obs_pose`` first (``_rigid_poses``,
    its own loop, finished before the proxies' loop starts), saving ``rigid_poses``' launch when this is
    the step's first reader of the poses (``CollisionPipeline._prepare``).
    """
    n_obs = sdf.shape[0]                    # the SDF entities: obstacles, then rigid bodies
    margin, dt = DETECT_F.margin.get(det_f, 0), DETECT_F.dt.get(det_f, 0)
    n_prox, n_nodes = DETECT_I.n_prox.get(det_i, 0), DETECT_I.n_nodes.get(det_i, 0)
    n_rigid = DETECT_I.n_rigid.get(det_i, 0)
    o0 = n_obs - n_rigid                    # the rigid bodies are the last n_rigid of the n_obs SDF entities
    if ti.static(poses):
        _rigid_poses(x, v, quat, sdf, obs_f, o0, n_rigid, obs_pose)
    for j in range(n_prox):
        k = PROXY_I.rigid.get(proxy_i, j)
        lin = SDF.rigid.get(sdf, o0 + k)
        R = quat_matrix(quat[k])
        com = x[lin]
        p0 = com + mv(R, PROXY_F.point.get(proxy_f, j) - _com_local(obs_f, o0 + k))
        reach = rigid_point_reach(v, lin, p0, com, margin, dt)
        rad = PROXY_F.radius.get(proxy_f, j)
        p_kind, p_against = PROXY_I.kind.get(proxy_i, j), PROXY_I.against.get(proxy_i, j)
        for o in range(n_obs):
            row = pair_row[SDF.entity.get(sdf, o0 + k), SDF.entity.get(sdf, o)]
            other = SDF.rigid.get(sdf, o)
            kind = SDF.kind.get(sdf, o)
            use = row >= 0 and other != lin
            if use and other >= 0:
                use = not (NODES.fixed.get(nodes, lin) == 1 and NODES.fixed.get(nodes, other) == 1)
            elif use:
                use = NODES.fixed.get(nodes, lin) == 0
            if use and p_against == 1 and kind != HALFSPACE:
                use = False
            if use and p_against == 2 and kind == HALFSPACE:
                use = False
            if use:
                Ro, co = pose_of(obs_pose, o)
                n_pts = 1
                u = ti.Vector([0.0, 0.0, 0.0])
                w = ti.Vector([0.0, 0.0, 0.0])
                if p_kind == 1:            # circle vs half-space: lowest point and quarter turns
                    nw = mv(Ro, ti.Vector([obs_f[o, 0], obs_f[o, 1], obs_f[o, 2]]))
                    a = mv(R, PROXY_F.axis.get(proxy_f, j))
                    u = nw - nw.dot(a) * a
                    if u.norm() < 1e-9:
                        u = a.cross(ti.Vector([1.0, 0.0, 0.0]))
                        if u.norm() < 1e-6:
                            u = a.cross(ti.Vector([0.0, 1.0, 0.0]))
                    u = u.normalized()
                    w = a.cross(u)
                    n_pts = 4
                for t in range(n_pts):
                    p = p0
                    r_eff = rad
                    if p_kind == 1:
                        r_eff = 0.0
                        if t == 0:
                            p = p0 - rad * u
                        elif t == 1:
                            p = p0 + rad * u
                        elif t == 2:
                            p = p0 + rad * w
                        else:
                            p = p0 - rad * w
                    pl = mTv(Ro, p - co)
                    if pl.norm() <= obs_f[o, BOUND] + reach + r_eff:
                        phi, nl = shape_sdf(kind, obs_f, o, grid, SDF.aux.get(sdf, o), pl)
                        phi -= r_eff
                        if phi < reach:
                            n = mv(Ro, nl)
                            pb = p - r_eff * n          # touching point on this body
                            q = pb - phi * n            # on the other entity
                            node_a, vw = world_side(o, q, obs_pose, sdf, counters, vn_node, vn_weight,
                                                     n_nodes)
                            nb = rigid_point_node(lin, pb, com, counters, vn_node, vn_weight, n_nodes)
                            F = contact_frame(n, mv(Ro, PARAM_F.axis.get(params, row)))
                            emit(node_a, nb, F, phi, params, vw, q, row, counters, c_f, c_i)


@ti.kernel
def sdf_points(points: ti.types.ndarray(), n: ti.i32, o: ti.i32, sdf: ti.types.ndarray(),
               obs_f: ti.types.ndarray(), obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(),
               out_phi: ti.types.ndarray(), out_n: ti.types.ndarray()):
    """World-frame signed distance and outward normal of obstacle o at n points (tests, queries)."""
    for j in range(n):
        R, c = pose_of(obs_pose, o)
        phi, nl = shape_sdf(SDF.kind.get(sdf, o), obs_f, o, grid, SDF.aux.get(sdf, o), mTv(R, points[j] - c))
        out_phi[j] = phi
        out_n[j] = mv(R, nl)

"""Contact detection: fills the ContactSet every step (docs/THEORY.md §3, COND §III-A).

Kernels run in this order on the state at the start of the step (rigid proxies against SDF
entities, ``detect_rigid``, between 1. and 2.):

1. **S-contacts** (FEM surface vertex vs obstacle): for every surface vertex and obstacle with
   ``phi < margin`` (obstacle SDF in its current pose): ``node_a = -1``, ``node_b`` = the vertex,
   normal = the obstacle's outward normal (from the obstacle into the body), ``phi`` = signed
   distance, ``point`` = the obstacle surface point ``x - phi n``, ``v_world`` = the obstacle's
   velocity at that point over the step (``obstacles.ObstacleSpec.step_motion``).
2. **D-contacts** (FEM surface vertex of body B vs body A != B): the vertex is *inside* A when a
   tet of A contains it (spatial hash over tets), and its gap is the distance to the nearest
   boundary triangle of A (spatial hash over surface triangles; rings widen for deep points):
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
   An FEM vertex within ``dedup = min(margin, DEDUP · mean edge)`` of a sample of a rigid body
   gets no contact against that body in 1.: the sample's contact is the same place (its gap to the
   FEM surface is at most their distance, so it is reported), and two would double the contact's
   stiffness of a compliant contact; the sample's normal, from the FEM
   triangle kept in the rigid surface's normal cone, is the well-defined one at a box edge or corner.

Nodalization (COND Prop. 2): every contact claims its real node with an atomic counter; a node
already claimed routes the contact through a fresh virtual node of its own (``vn_node = [i]``,
weight I), so no real or virtual node is in two contacts and ``Γ = J W Jᵀ`` is diagonal.
S-contacts claim first. Which of several contacts on one node keeps the real node is decided by
the (parallel) order; the physics does not depend on it.

Prescribed (pinned/driven) nodes: a contact whose every node is prescribed (a prescribed vertex
against an obstacle, or against a triangle of prescribed nodes) is skipped: nothing free takes
part. Otherwise the prescribed node stays in the contact as an ordinary node; its v̂ is known and
the solvers keep it at its prescribed value (W = 0 / eliminated), so the impulse acts on the free
side only.

Overflow: contacts and virtual nodes are appended with atomic counters; writes beyond capacity
are dropped *and counted*, and the host grows the ContactSet and reruns the pass, so no contact
is ever lost.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np
import taichi as ti

from .. import backend
from .broadphase import SpatialHash, body_boxes, bucket, cell_of, near_other_body, read4
from .emit import claim_node, emit, pose_of, rigid_point_node, rigid_point_reach, triangle_point_node, world_side
from .narrowphase import BOUND, OBS_F, OBS_POSE, closest_on_triangle, contact_frame, in_tet, shape_sdf
from ..bodies.rigid import contact_proxies, quat_matrix, surface_samples
from ..smallmat import mTv, mv
from .rod_detection import RodContacts
from .shapes import HALFSPACE, MESH

MAX_RINGS = 8          # deep-penetration search: up to margin + MAX_RINGS * h around a vertex
SLOTS = 2              # bodies A considered per vertex in D-contacts
DEDUP = 0.25           # FEM vertex within min(margin, DEDUP * mean edge) of a rigid sample: left to the sample


@ti.kernel
def detect_obstacles(x: ti.types.ndarray(), surf: ti.types.ndarray(), n_surf: ti.i32,
                     node_body: ti.types.ndarray(), fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                     sdf_entity: ti.types.ndarray(), sdf_rigid: ti.types.ndarray(),
                     n_obs: ti.i32, obs_kind: ti.types.ndarray(), obs_f: ti.types.ndarray(),
                     obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(), mus: ti.types.ndarray(),
                     axes: ti.types.ndarray(), margin: float, s_range: ti.types.ndarray(),
                     s_point: ti.types.ndarray(), dedup: float, n_nodes: ti.i32, claim: ti.types.ndarray(),
                     counters: ti.types.ndarray(), c_node_a: ti.types.ndarray(), c_node_b: ti.types.ndarray(),
                     c_frame: ti.types.ndarray(), c_phi: ti.types.ndarray(), c_mu: ti.types.ndarray(),
                     c_vw: ti.types.ndarray(), c_point: ti.types.ndarray(), c_param: ti.types.ndarray(),
                     c_imp: ti.types.ndarray(), c_status: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                     vn_weight: ti.types.ndarray()):
    for s in range(n_surf):
        i = surf[s]
        if fixed[i] == 0:
            xi = x[i]
            for o in range(n_obs):
                row = pair_row[node_body[i], sdf_entity[o]]
                if row >= 0:
                    R, c = pose_of(obs_pose, o)
                    pl = mTv(R, xi - c)
                    if pl.norm() <= obs_f[o, BOUND] + margin:
                        kind = obs_kind[o, 0]
                        phi, nl = shape_sdf(kind, obs_f, o, grid, obs_kind[o, 1], pl)
                        dup = False                 # a rigid surface sample at this vertex (module doc, 3.)
                        for j in range(s_range[o, 0], s_range[o, 1]):
                            if (c + mv(R, s_point[j]) - xi).norm() < dedup:
                                dup = True
                        if phi < margin and not dup:
                            n = mv(R, nl)
                            q = xi - phi * n
                            node_a, vw = world_side(o, q, obs_pose, sdf_rigid, counters, vn_node, vn_weight,
                                                     n_nodes)
                            F = contact_frame(n, mv(R, axes[row]))
                            nb = claim_node(i, claim, counters, vn_node, vn_weight, n_nodes)
                            emit(node_a, nb, F, phi, mus[row], vw, q, row, counters, c_node_a, c_node_b, c_frame,
                                  c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status)


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


@ti.func
def _body_contacts(p, bv, i, lin, com, g, cg, x: ti.template(), fixed: ti.template(), node_body: ti.template(),
                   pair_row: ti.template(), tris: ti.template(), tri_counts: ti.template(),
                   tri_entries: ti.template(), tets: ti.template(), tet_counts: ti.template(),
                   tet_entries: ti.template(), h, size, mus: ti.template(), axes: ti.template(), margin, n_nodes,
                   claim: ti.template(), counters: ti.template(), c_node_a: ti.template(), c_node_b: ti.template(),
                   c_frame: ti.template(), c_phi: ti.template(), c_mu: ti.template(), c_vw: ti.template(),
                   c_point: ti.template(), c_param: ti.template(), c_imp: ti.template(), c_status: ti.template(),
                   vn_node: ti.template(), vn_weight: ti.template()):
    """D-contacts of point p on body bv against the FEM bodies A != bv (module docstring, 2.): side B
    is FEM node i (claimed, ``claim_node``) when i >= 0, else a virtual node at p on the rigid body
    with blocks (lin, lin+1) and centre of mass com (``rigid_point_node``). The normal, from the
    nearest boundary triangle (vertex–face), is then kept in the cone ``n·(−g) ≥ cg`` of the
    rigid surface's inward normals at p (``surface_samples``): a force on a rigid point must push
    into one of the faces there, so a flat face pressed into a curved FEM surface is pushed along its
    own normal (cg = -2 for an FEM vertex: no cone)."""
    KT, KE = tri_entries.shape[1], tet_entries.shape[1]
    sb = ti.Vector([-1] * SLOTS)          # body A of each slot
    sin = ti.Vector([0] * SLOTS)          # p inside A
    sd = ti.Vector([1e30] * SLOTS)        # best distance
    st = ti.Vector([-1] * SLOTS)          # best triangle
    # 1. inside which other bodies? (tets of p's cell)
    cc = cell_of(p, h)
    bk = bucket(cc[0], cc[1], cc[2], size)
    for e in range(ti.min(tet_counts[bk], KE)):
        t = tet_entries[bk, e]
        tv = tets[t]
        ba = node_body[tv[0]]
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
        c0 = cell_of(p - r, h)
        c1 = cell_of(p + r, h)
        for ci, cj, ck in ti.ndrange((c0[0], c1[0] + 1), (c0[1], c1[1] + 1), (c0[2], c1[2] + 1)):
            b2 = bucket(ci, cj, ck, size)
            for e in range(ti.min(tri_counts[b2], KT)):
                t = tri_entries[b2, e]
                tv = tris[t]
                ba = node_body[tv[0]]
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
                    if k >= 0 and d < sd[k]:
                        sd[k] = d
                        st[k] = t
        done = 1
        for z in ti.static(range(SLOTS)):
            if sin[z] == 1 and sd[z] > r:
                done = 0
        if done == 1:
            break
    # 3. one D-contact per slot
    fixed_b = 0
    if i >= 0:
        fixed_b = fixed[i]
    else:
        fixed_b = fixed[lin]
    for z in range(SLOTS):      # a runtime loop: the contact code below is inlined once, not SLOTS times
        if st[z] >= 0 and (sin[z] == 1 or sd[z] < margin):
            tv = tris[st[z]]
            if not (fixed_b == 1 and fixed[tv[0]] == 1 and fixed[tv[1]] == 1 and fixed[tv[2]] == 1):
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
                F = contact_frame(n, axes[row])
                na = triangle_point_node(tv, w, counters, vn_node, vn_weight, n_nodes)
                nb = 0
                if i >= 0:
                    nb = claim_node(i, claim, counters, vn_node, vn_weight, n_nodes)
                else:
                    nb = rigid_point_node(lin, p, com, counters, vn_node, vn_weight, n_nodes)
                emit(na, nb, F, phi, mus[row], ti.Vector([0.0, 0.0, 0.0]), q, row, counters,
                      c_node_a, c_node_b, c_frame, c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status)


@ti.kernel
def detect_bodies(x: ti.types.ndarray(), surf: ti.types.ndarray(), n_surf: ti.i32,
                  node_body: ti.types.ndarray(), fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                  tris: ti.types.ndarray(), tri_counts: ti.types.ndarray(), tri_entries: ti.types.ndarray(),
                  tets: ti.types.ndarray(), tet_counts: ti.types.ndarray(), tet_entries: ti.types.ndarray(),
                  h: float, size: ti.i32, box_lo: ti.types.ndarray(), box_hi: ti.types.ndarray(), n_bodies: ti.i32,
                  mus: ti.types.ndarray(), axes: ti.types.ndarray(), margin: float,
                  n_nodes: ti.i32, claim: ti.types.ndarray(), counters: ti.types.ndarray(),
                  c_node_a: ti.types.ndarray(), c_node_b: ti.types.ndarray(), c_frame: ti.types.ndarray(),
                  c_phi: ti.types.ndarray(), c_mu: ti.types.ndarray(), c_vw: ti.types.ndarray(),
                  c_point: ti.types.ndarray(), c_param: ti.types.ndarray(), c_imp: ti.types.ndarray(),
                  c_status: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """FEM surface vertices against the other FEM bodies' tets (``_body_contacts``)."""
    for s in range(n_surf):
        i = surf[s]
        bv = node_body[i]
        p = x[i]
        if near_other_body(p, p, bv, node_body, pair_row, box_lo, box_hi, n_bodies, margin):
            _body_contacts(p, bv, i, -1, p, p, -2.0, x, fixed, node_body, pair_row, tris, tri_counts, tri_entries, tets,
                           tet_counts, tet_entries, h, size, mus, axes, margin, n_nodes, claim, counters,
                           c_node_a, c_node_b, c_frame, c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status,
                           vn_node, vn_weight)


@ti.kernel
def detect_rigid_in_fem(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(), s_rigid: ti.types.ndarray(),
                        s_point: ti.types.ndarray(), s_axis: ti.types.ndarray(), s_cos: ti.types.ndarray(),
                        n_samp: ti.i32, rigid_lin: ti.types.ndarray(),
                        com_local: ti.types.ndarray(), rigid_body: ti.types.ndarray(), node_body: ti.types.ndarray(),
                        fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(), tris: ti.types.ndarray(),
                        tri_counts: ti.types.ndarray(), tri_entries: ti.types.ndarray(), tets: ti.types.ndarray(),
                        tet_counts: ti.types.ndarray(), tet_entries: ti.types.ndarray(), h: float, size: ti.i32,
                        box_lo: ti.types.ndarray(), box_hi: ti.types.ndarray(), n_bodies: ti.i32,
                        mus: ti.types.ndarray(), axes: ti.types.ndarray(), margin: float, dt: float,
                        n_nodes: ti.i32, claim: ti.types.ndarray(), counters: ti.types.ndarray(),
                        c_node_a: ti.types.ndarray(),
                        c_node_b: ti.types.ndarray(), c_frame: ti.types.ndarray(), c_phi: ti.types.ndarray(),
                        c_mu: ti.types.ndarray(), c_vw: ti.types.ndarray(), c_point: ti.types.ndarray(),
                        c_param: ti.types.ndarray(), c_imp: ti.types.ndarray(), c_status: ti.types.ndarray(),
                        vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """Rigid surface samples (``bodies.rigid.surface_samples``) against the FEM bodies' tets
    (``_body_contacts``): a box corner or mesh vertex pressed between the vertices of a coarse FEM
    body, which the FEM-vertex-vs-SDF direction of ``detect_obstacles`` cannot see. A sample's
    reach grows with its speed as a proxy's does in ``detect_rigid`` (``rigid_point_reach``), so a
    fast body pressing into a slab is caught the step before it touches."""
    for j in range(n_samp):
        k = s_rigid[j]
        lin = rigid_lin[k]
        com = x[lin]
        R = quat_matrix(quat[k])
        p = com + mv(R, s_point[j] - com_local[k])
        bv = rigid_body[k]
        reach = rigid_point_reach(v, lin, p, com, margin, dt)
        if near_other_body(p, p, bv, node_body, pair_row, box_lo, box_hi, n_bodies, reach):
            _body_contacts(p, bv, -1, lin, com, mv(R, s_axis[j]), s_cos[j], x, fixed, node_body, pair_row, tris, tri_counts, tri_entries, tets,
                           tet_counts, tet_entries, h, size, mus, axes, reach, n_nodes, claim, counters,
                           c_node_a, c_node_b, c_frame, c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status,
                           vn_node, vn_weight)


@ti.kernel
def rigid_boxes(obs_pose: ti.types.ndarray(), obs_f: ti.types.ndarray(), o0: ti.i32, n_rigid: ti.i32,
                rigid_body: ti.types.ndarray(), dt: float, box_lo: ti.types.ndarray(), box_hi: ti.types.ndarray()):
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
            box_lo[rigid_body[k], a] = c[a] - grow
            box_hi[rigid_body[k], a] = c[a] + grow


@ti.kernel
def rigid_poses(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(), lin: ti.types.ndarray(),
                com_local: ti.types.ndarray(), o0: ti.i32, n_rigid: ti.i32, obs_pose: ti.types.ndarray()):
    """Rows o0.. of the SDF pose table from the rigid bodies' state (rigid k has quaternion k)."""
    for k in range(n_rigid):
        R = quat_matrix(quat[k])
        com = x[lin[k]]
        c = com - mv(R, com_local[k])
        o = o0 + k
        for a, bb in ti.static(ti.ndrange(3, 3)):
            obs_pose[o, 3 * a + bb] = R[a, bb]
        for a in ti.static(range(3)):
            obs_pose[o, 9 + a] = c[a]
            obs_pose[o, 12 + a] = v[lin[k]][a]
            obs_pose[o, 15 + a] = v[lin[k] + 1][a]
            obs_pose[o, 18 + a] = com[a]


@ti.kernel
def detect_rigid(x: ti.types.ndarray(), v: ti.types.ndarray(), quat: ti.types.ndarray(),
                 p_rigid: ti.types.ndarray(), p_point: ti.types.ndarray(), p_radius: ti.types.ndarray(),
                 p_kind: ti.types.ndarray(), p_axis: ti.types.ndarray(), p_against: ti.types.ndarray(),
                 n_prox: ti.i32, rigid_lin: ti.types.ndarray(), com_local: ti.types.ndarray(),
                 rigid_body: ti.types.ndarray(), fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                 sdf_entity: ti.types.ndarray(), sdf_rigid: ti.types.ndarray(), n_obs: ti.i32,
                 obs_kind: ti.types.ndarray(), obs_f: ti.types.ndarray(), obs_pose: ti.types.ndarray(),
                 grid: ti.types.ndarray(), mus: ti.types.ndarray(), axes: ti.types.ndarray(), margin: float,
                 dt: float, n_nodes: ti.i32, counters: ti.types.ndarray(), c_node_a: ti.types.ndarray(),
                 c_node_b: ti.types.ndarray(), c_frame: ti.types.ndarray(), c_phi: ti.types.ndarray(),
                 c_mu: ti.types.ndarray(), c_vw: ti.types.ndarray(), c_point: ti.types.ndarray(),
                 c_param: ti.types.ndarray(), c_imp: ti.types.ndarray(), c_status: ti.types.ndarray(),
                 vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    """Rigid contact proxies (``bodies.rigid.contact_proxies``) against every other SDF entity.

    A proxy of radius r at world point p touches entity A where ``sdf_A(p) - r < margin +
    dt |v_p|`` (the margin grows with the proxy's speed so fast bodies are caught a step early).
    A circle proxy (cylinder rim) against a half-space tests its lowest point and the three
    points a quarter turn apart. Side B is a virtual node on the rigid body at the touching
    point; side A is the world or a virtual node on the other rigid body (``world_side``).
    """
    for j in range(n_prox):
        k = p_rigid[j]
        lin = rigid_lin[k]
        R = quat_matrix(quat[k])
        com = x[lin]
        p0 = com + mv(R, p_point[j] - com_local[k])
        reach = rigid_point_reach(v, lin, p0, com, margin, dt)
        rad = p_radius[j]
        for o in range(n_obs):
            row = pair_row[rigid_body[k], sdf_entity[o]]
            other = sdf_rigid[o]
            kind = obs_kind[o, 0]
            use = row >= 0 and other != lin
            if use and other >= 0:
                use = not (fixed[lin] == 1 and fixed[other] == 1)
            elif use:
                use = fixed[lin] == 0
            if use and p_against[j] == 1 and kind != HALFSPACE:
                use = False
            if use and p_against[j] == 2 and kind == HALFSPACE:
                use = False
            if use:
                Ro, co = pose_of(obs_pose, o)
                n_pts = 1
                u = ti.Vector([0.0, 0.0, 0.0])
                w = ti.Vector([0.0, 0.0, 0.0])
                if p_kind[j] == 1:            # circle vs half-space: lowest point and quarter turns
                    nw = mv(Ro, ti.Vector([obs_f[o, 0], obs_f[o, 1], obs_f[o, 2]]))
                    a = mv(R, p_axis[j])
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
                    if p_kind[j] == 1:
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
                        phi, nl = shape_sdf(kind, obs_f, o, grid, obs_kind[o, 1], pl)
                        phi -= r_eff
                        if phi < reach:
                            n = mv(Ro, nl)
                            pb = p - r_eff * n          # touching point on this body
                            q = pb - phi * n            # on the other entity
                            node_a, vw = world_side(o, q, obs_pose, sdf_rigid, counters, vn_node, vn_weight,
                                                     n_nodes)
                            nb = rigid_point_node(lin, pb, com, counters, vn_node, vn_weight, n_nodes)
                            F = contact_frame(n, mv(Ro, axes[row]))
                            emit(node_a, nb, F, phi, mus[row], vw, q, row, counters, c_node_a, c_node_b,
                                  c_frame, c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status)


@ti.kernel
def sdf_points(points: ti.types.ndarray(), n: ti.i32, o: ti.i32, obs_kind: ti.types.ndarray(),
               obs_f: ti.types.ndarray(), obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(),
               out_phi: ti.types.ndarray(), out_n: ti.types.ndarray()):
    """World-frame signed distance and outward normal of obstacle o at n points (tests, queries)."""
    for j in range(n):
        R, c = pose_of(obs_pose, o)
        phi, nl = shape_sdf(obs_kind[o, 0], obs_f, o, grid, obs_kind[o, 1], mTv(R, points[j] - c))
        out_phi[j] = phi
        out_n[j] = mv(R, nl)


class Detector:
    """Per-step contact detection for a Model; ``detect(state, contacts, dt)`` fills the ContactSet
    and returns the number of contacts."""

    def __init__(self, model):
        backend.ensure_init()
        cd = model.contact
        self.model, self.data = model, cd
        real = backend.np_real()
        self.n_nodes = model.n_nodes
        self.n_bodies = len(model.bodies)
        self.obstacles = cd.obstacles
        self.n_obs = len(cd.obstacles)
        self.margin = float(cd.margin)
        self.surf = backend.int_array(cd.surf_nodes)
        self.n_surf = len(cd.surf_nodes)
        self.node_body = backend.int_array(cd.node_body)
        self.fixed = backend.int_array(cd.fixed)
        E = max(self.n_bodies + self.n_obs, 1)
        self.pair_row = ti.ndarray(ti.i32, shape=(E, E))
        self.pair_row.from_numpy(np.ascontiguousarray(cd.pair_row, np.int32).reshape(E, E))
        self.mus = ti.Vector.ndarray(2, float, shape=len(cd.params))
        self.mus.from_numpy(np.ascontiguousarray(cd.params[:, :2], real))
        self.axes = backend.vec3_array(len(cd.axes), cd.axes)
        # SDF entities: obstacles (pose prescribed), then rigid bodies (pose from the state)
        rigid = model.rigid_specs
        self.n_rigid = len(rigid)
        self.n_sdf = self.n_obs + self.n_rigid
        sdf_shapes = [ob.shape for ob in self.obstacles] + [r.shape for r in rigid]
        O = max(self.n_sdf, 1)
        kinds = np.zeros((O, 2), np.int32)
        obs_f = np.zeros((O, OBS_F))
        grids, off = [], 0
        for k, shape in enumerate(sdf_shapes):
            kinds[k, 0] = shape.kind
            obs_f[k, :8] = shape.packed()
            obs_f[k, BOUND] = shape.bounding_radius()
            if shape.kind == MESH:
                kinds[k, 1] = off
                grids.append(shape.grid.ravel())
                off += shape.grid.size
        rigid_body = np.zeros(len(rigid), np.int32)
        for k, r in enumerate(rigid):
            rigid_body[k] = [b.name for b in model.bodies].index(r.name)
        self.sdf_entity = backend.int_array(np.r_[self.n_bodies + np.arange(self.n_obs), rigid_body])
        self.sdf_rigid = backend.int_array(np.r_[np.full(self.n_obs, -1), model.rigid_lin])
        self._build_proxies(model, rigid_body)
        obs_f[:, BOUND] = np.where(np.isfinite(obs_f[:, BOUND]), obs_f[:, BOUND], 1e30)
        self.obs_kind = ti.ndarray(ti.i32, shape=(O, 2))
        self.obs_kind.from_numpy(kinds)
        self.obs_f = ti.ndarray(float, shape=(O, OBS_F))
        self.obs_f.from_numpy(obs_f.astype(real))
        self.grid = backend.scalar_array(max(off, 1), np.concatenate(grids) if grids else None)
        self.obs_pose = ti.ndarray(float, shape=(O, OBS_POSE))
        self.claim = ti.ndarray(ti.i32, shape=max(self.n_nodes, 1))
        self.counters = ti.ndarray(ti.i32, shape=4)
        # body-body broadphase only when some body pair may collide
        # (a pair with an FEM body on one side and an FEM or rigid body on the other: the tets and
        # triangles hashed here are FEM ones; rigid–rigid pairs are detect_rigid's, rods' RodContacts')
        B = self.n_bodies
        fem_b = [i for i, b in enumerate(model.bodies) if b.kind == "fem"]
        other_b = [i for i, b in enumerate(model.bodies) if b.kind in ("fem", "rigid")]
        self.has_bodies = B > 1 and bool(fem_b) and bool((cd.pair_row[np.ix_(fem_b, other_b)] >= 0).any())
        if self.has_bodies:
            h = max(2.0 * self.margin, cd.mean_edge, 1e-9)
            self.h = h
            t = cd.surf_tris
            self.tris_np = np.concatenate([t, t[:, 2:]], axis=1).astype(np.int32)
            n_items = len(t) + model.n_tets
            size = int(2 ** int(np.clip(np.ceil(np.log2(max(n_items, 1))), 10, 20)))
            self.tri_grid = SpatialHash(self.tris_np, h, size)
            self.tet_grid = SpatialHash(model.tets_np.astype(np.int32), h, size)
            self.box_lo = ti.ndarray(float, shape=(self.n_bodies, 3))
            self.box_hi = ti.ndarray(float, shape=(self.n_bodies, 3))
        self.pose_np = np.zeros((max(self.n_sdf, 1), OBS_POSE))   # rigid rows: filled by rigid_poses
        self.rod_contacts = None                                  # rods: contact/rod_detection.py
        if model.rod_specs:
            self.rod_contacts = RodContacts(model, self)
        self.last_time = None

    def _build_proxies(self, model, rigid_body: np.ndarray) -> None:
        """Rigid bodies' contact proxies (body frame, relative to the shape origin) and tables."""
        px = [contact_proxies(r.shape) for r in model.rigid_specs]
        self.n_prox = sum(len(p["radius"]) for p in px)
        cat = (lambda key: np.concatenate([p[key] for p in px])) if px else (lambda key: np.zeros((0, 3)))
        self.p_rigid = backend.int_array(np.concatenate([np.full(len(p["radius"]), k) for k, p in enumerate(px)])
                                         if px else np.zeros(0))
        self.p_point = backend.vec3_array(self.n_prox, cat("point"))
        self.p_radius = backend.scalar_array(self.n_prox, cat("radius") if px else None)
        self.p_kind = backend.int_array(cat("kind") if px else np.zeros(0))
        self.p_axis = backend.vec3_array(self.n_prox, cat("axis"))
        self.p_against = backend.int_array(cat("against") if px else np.zeros(0))
        self.rigid_lin = backend.int_array(model.rigid_lin)
        self.com_local = backend.vec3_array(self.n_rigid, np.array([r.com_local for r in model.rigid_specs]))
        self.rigid_body = backend.int_array(rigid_body)
        # surface samples against FEM tets, for rigid bodies that may touch an FEM body
        fem = [i for i, b in enumerate(model.bodies) if b.kind == "fem"]
        touch = [k for k, b in enumerate(rigid_body) if (self.data.pair_row[b, fem] >= 0).any()] if fem else []
        samp = [surface_samples(model.rigid_specs[k].shape) for k in touch]
        self.n_samp = sum(len(s[0]) for s in samp)
        self.s_rigid = backend.int_array(np.concatenate([np.full(len(s[0]), k) for k, s in zip(touch, samp)])
                                         if samp else np.zeros(0))
        cat = (lambda i: np.concatenate([s[i] for s in samp])) if samp else (lambda i: None)
        self.s_point, self.s_axis = backend.vec3_array(self.n_samp, cat(0)), backend.vec3_array(self.n_samp, cat(1))
        self.s_cos = backend.scalar_array(self.n_samp, cat(2))
        # SDF entity o's samples are s_range[o, 0]:s_range[o, 1] (obstacles, and rigid bodies whose
        # samples are not searched (no body-body pairs): none); an FEM vertex within dedup of one of
        # them leaves that contact to the sample (module docstring, 3.)
        rng = np.zeros((max(self.n_sdf, 1), 2), np.int32)
        B = self.n_bodies
        if B > 1 and (self.data.pair_row[:B, :B] >= 0).any():
            off = 0
            for k, s in zip(touch, samp):
                rng[self.n_obs + k] = off, off + len(s[0])
                off += len(s[0])
        self.s_range = ti.ndarray(ti.i32, shape=rng.shape)
        self.s_range.from_numpy(rng)
        self.dedup = min(self.margin, DEDUP * float(self.data.mean_edge))

    def update_obstacles(self, t: float, dt: float) -> np.ndarray:
        """Pose and velocity of every obstacle for the step [t, t+dt] (host, O(obstacles))."""
        for k, ob in enumerate(self.obstacles):
            c, R, v, w = ob.step_motion(t, dt)
            self.pose_np[k, :18] = np.concatenate([R.ravel(), c, v, w])
        if self.n_obs:
            view = backend.host_view(self.obs_pose)
            if view is not None:             # CPU: write the obstacle rows in place (no copy kernel)
                view[:self.n_obs] = self.pose_np[:self.n_obs]
            else:
                self.obs_pose.from_numpy(self.pose_np.astype(backend.np_real()))
        return self.pose_np

    def obstacle_sdf(self, name_or_index, points, t: float = 0.0) -> tuple:
        """(phi (k,), normal (k, 3)) of one obstacle at world points (k, 3) at time t, evaluated by
        the detection kernels' own SDF code."""
        o = name_or_index if isinstance(name_or_index, int) else \
            [ob.name for ob in self.obstacles].index(name_or_index)
        self.update_obstacles(t, self.model.dt)
        pts = np.asarray(points, float).reshape(-1, 3)
        phi, nrm = backend.scalar_array(len(pts)), backend.vec3_array(len(pts))
        sdf_points(backend.vec3_array(len(pts), pts), len(pts), o, self.obs_kind, self.obs_f, self.obs_pose,
                   self.grid, phi, nrm)
        return (phi.to_numpy()[:len(pts)].astype(np.float64), nrm.to_numpy()[:len(pts)].astype(np.float64))

    def obstacle_poses(self, t: float) -> list:
        """[(position, rotation)] of every obstacle at time t."""
        return [ob.pose(t) for ob in self.obstacles]

    def detect(self, state, contacts, dt: float) -> int:
        """Fill ``contacts`` for the step starting at ``state``; returns the contact count."""
        if self.n_obs:
            self.update_obstacles(state.time, dt)
        if self.n_rigid:
            rigid_poses(state.x, state.v, state.q, self.rigid_lin, self.com_local, self.n_obs, self.n_rigid,
                        self.obs_pose)
        if self.has_bodies:
            body_boxes(state.x, self.node_body, self.n_nodes, self.n_bodies, self.box_lo, self.box_hi)
            if self.n_rigid:
                rigid_boxes(self.obs_pose, self.obs_f, self.n_obs, self.n_rigid, self.rigid_body, dt, self.box_lo,
                            self.box_hi)
        counters_v, claim_v = backend.host_view(self.counters), backend.host_view(self.claim)
        while True:
            if counters_v is not None:        # CPU: zero in place, no fill kernels
                counters_v[:] = 0
                claim_v[:] = 0
            else:
                self.counters.fill(0)
                self.claim.fill(0)
            if self.has_bodies:
                common = (self.node_body, self.pair_row, self.box_lo, self.box_hi, self.n_bodies)
                self.tri_grid.build_near_bodies(state.x, *common, self.margin + self.h, self.counters, 2)
                self.tet_grid.build_near_bodies(state.x, *common, self.margin, self.counters, 3)
            c = contacts
            args = (self.claim, self.counters, c.node_a, c.node_b, c.frame, c.phi, c.mu, c.v_world, c.point,
                    c.param, c.impulse, c.status, c.vn_node, c.vn_weight)
            sdf = (self.sdf_entity, self.sdf_rigid, self.n_sdf, self.obs_kind, self.obs_f, self.obs_pose)
            if self.n_sdf and self.n_surf:
                detect_obstacles(state.x, self.surf, self.n_surf, self.node_body, self.fixed, self.pair_row,
                                 *sdf, self.grid, self.mus, self.axes, self.margin, self.s_range, self.s_point,
                                 self.dedup, self.n_nodes, *args)
            if self.n_prox:
                detect_rigid(state.x, state.v, state.q, self.p_rigid, self.p_point, self.p_radius, self.p_kind,
                             self.p_axis, self.p_against, self.n_prox, self.rigid_lin, self.com_local,
                             self.rigid_body, self.fixed, self.pair_row, *sdf, self.grid, self.mus, self.axes,
                             self.margin, dt, self.n_nodes, self.counters, *args[2:])
            if self.has_bodies:
                tg, eg = self.tri_grid, self.tet_grid
                detect_bodies(state.x, self.surf, self.n_surf, self.node_body, self.fixed, self.pair_row,
                              tg.items, tg.counts, tg.entries, eg.items, eg.counts, eg.entries, self.h, tg.size,
                              self.box_lo, self.box_hi, self.n_bodies, self.mus, self.axes, self.margin, self.n_nodes,
                              *args)
                if self.n_samp:
                    detect_rigid_in_fem(state.x, state.v, state.q, self.s_rigid, self.s_point, self.s_axis, self.s_cos,
                                        self.n_samp, self.rigid_lin,
                                        self.com_local, self.rigid_body, self.node_body, self.fixed, self.pair_row,
                                        tg.items, tg.counts, tg.entries, eg.items, eg.counts, eg.entries, self.h,
                                        tg.size, self.box_lo, self.box_hi, self.n_bodies, self.mus, self.axes,
                                        self.margin, dt, self.n_nodes, *args)
            if self.rod_contacts is not None:
                self.rod_contacts.detect(state, dt, args, sdf)
            n_c, n_v, fill_t, fill_e = (int(v) for v in (counters_v[:4] if counters_v is not None
                                                          else read4(self.counters)))
            if self.has_bodies and (fill_t > self.tri_grid.slots or fill_e > self.tet_grid.slots):
                for g, fill in ((self.tri_grid, fill_t), (self.tet_grid, fill_e)):
                    if fill > g.slots:
                        g.alloc(max(fill, 2 * g.slots))
                continue
            if n_c <= contacts.capacity and n_v <= contacts.virtual_capacity:
                contacts.count, contacts.n_virtual = n_c, n_v
                return n_c
            contacts.ensure_capacity(n_c, n_v)


def build_detector(model) -> Detector:
    """The contact detector of a Model (obstacles and body-body pairs as the scene set them)."""
    return Detector(model)

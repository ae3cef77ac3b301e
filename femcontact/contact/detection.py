"""Contact detection: fills the ContactSet every step (MATH.md §3, COND §III-A).

Two kernels, run in this order on the state at the start of the step:

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
from .broadphase import HashGrid, body_boxes, bucket, cell_of, near_other_body, read4
from .contacts import OPEN
from .narrowphase import BOUND, OBS_F, OBS_POSE, closest_on_triangle, contact_frame, in_tet, shape_sdf
from .shapes import MESH

MAX_RINGS = 8          # deep-penetration search: up to margin + MAX_RINGS * h around a vertex
SLOTS = 2              # bodies A considered per vertex in D-contacts


@ti.func
def _claim_node(i, claim: ti.template(), counters: ti.template(), vn_node: ti.template(),
                vn_weight: ti.template(), n_nodes):
    """The node a contact on real node i acts on: i itself if unclaimed, else a new virtual node."""
    node = i
    if ti.atomic_add(claim[i], 1) > 0:
        v = ti.atomic_add(counters[1], 1)
        node = n_nodes + v
        if v < vn_node.shape[0]:
            vn_node[v] = ti.Vector([i, -1, -1, -1])
            vn_weight[v, 0] = ti.Matrix.identity(float, 3)
            for k in ti.static(range(1, 4)):
                vn_weight[v, k] = ti.Matrix.zero(float, 3, 3)
    return node


@ti.func
def _emit(node_a, node_b, R, phi_m, mu_m, vw, pt, row, counters: ti.template(), c_node_a: ti.template(),
          c_node_b: ti.template(), c_frame: ti.template(), c_phi: ti.template(), c_mu: ti.template(),
          c_vw: ti.template(), c_point: ti.template(), c_param: ti.template(), c_imp: ti.template(),
          c_status: ti.template()):
    m = ti.atomic_add(counters[0], 1)
    if m < c_node_a.shape[0]:
        c_node_a[m] = node_a
        c_node_b[m] = node_b
        c_frame[m] = R
        c_phi[m] = phi_m
        c_mu[m] = mu_m
        c_vw[m] = vw
        c_point[m] = pt
        c_param[m] = row
        c_imp[m] = ti.Vector([0.0, 0.0, 0.0])
        c_status[m] = OPEN


@ti.kernel
def detect_obstacles(x: ti.types.ndarray(), surf: ti.types.ndarray(), n_surf: ti.i32,
                     node_body: ti.types.ndarray(), fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                     n_bodies: ti.i32, n_obs: ti.i32, obs_kind: ti.types.ndarray(), obs_f: ti.types.ndarray(),
                     obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(), mus: ti.types.ndarray(),
                     axes: ti.types.ndarray(), margin: float, n_nodes: ti.i32, claim: ti.types.ndarray(),
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
                row = pair_row[node_body[i], n_bodies + o]
                if row >= 0:
                    R = ti.Matrix([[obs_pose[o, 0], obs_pose[o, 1], obs_pose[o, 2]],
                                   [obs_pose[o, 3], obs_pose[o, 4], obs_pose[o, 5]],
                                   [obs_pose[o, 6], obs_pose[o, 7], obs_pose[o, 8]]])
                    c = ti.Vector([obs_pose[o, 9], obs_pose[o, 10], obs_pose[o, 11]])
                    pl = R.transpose() @ (xi - c)
                    if pl.norm() <= obs_f[o, BOUND] + margin:
                        kind = obs_kind[o, 0]
                        phi, nl = shape_sdf(kind, obs_f, o, grid, obs_kind[o, 1], pl)
                        if phi < margin:
                            n = R @ nl
                            q = xi - phi * n
                            vl = ti.Vector([obs_pose[o, 12], obs_pose[o, 13], obs_pose[o, 14]])
                            w = ti.Vector([obs_pose[o, 15], obs_pose[o, 16], obs_pose[o, 17]])
                            vw = vl + w.cross(q - c)
                            F = contact_frame(n, R @ axes[row])
                            nb = _claim_node(i, claim, counters, vn_node, vn_weight, n_nodes)
                            _emit(-1, nb, F, phi, mus[row], vw, q, row, counters, c_node_a, c_node_b, c_frame,
                                  c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status)


@ti.kernel
def detect_bodies(x: ti.types.ndarray(), surf: ti.types.ndarray(), n_surf: ti.i32,
                  node_body: ti.types.ndarray(), fixed: ti.types.ndarray(), pair_row: ti.types.ndarray(),
                  tris: ti.types.ndarray(), tri_counts: ti.types.ndarray(), tri_entries: ti.types.ndarray(),
                  tets: ti.types.ndarray(), tet_counts: ti.types.ndarray(), tet_entries: ti.types.ndarray(),
                  h: float, size: ti.i32, box_lo: ti.types.ndarray(), box_hi: ti.types.ndarray(), n_bodies: ti.i32, mus: ti.types.ndarray(), axes: ti.types.ndarray(), margin: float,
                  n_nodes: ti.i32, claim: ti.types.ndarray(), counters: ti.types.ndarray(),
                  c_node_a: ti.types.ndarray(), c_node_b: ti.types.ndarray(), c_frame: ti.types.ndarray(),
                  c_phi: ti.types.ndarray(), c_mu: ti.types.ndarray(), c_vw: ti.types.ndarray(),
                  c_point: ti.types.ndarray(), c_param: ti.types.ndarray(), c_imp: ti.types.ndarray(),
                  c_status: ti.types.ndarray(), vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray()):
    KT, KE = tri_entries.shape[1], tet_entries.shape[1]
    for s in range(n_surf):
        i = surf[s]
        bv = node_body[i]
        p = x[i]
        if not near_other_body(p, p, bv, node_body, pair_row, box_lo, box_hi, n_bodies, margin):
            continue
        sb = ti.Vector([-1] * SLOTS)          # body A of each slot
        sin = ti.Vector([0] * SLOTS)          # vertex inside A
        sd = ti.Vector([1e30] * SLOTS)        # best distance
        st = ti.Vector([-1] * SLOTS)          # best triangle
        # 1. inside which other bodies? (tets of the vertex's cell)
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
        for z in ti.static(range(SLOTS)):
            if st[z] >= 0 and (sin[z] == 1 or sd[z] < margin):
                tv = tris[st[z]]
                if not (fixed[i] == 1 and fixed[tv[0]] == 1 and fixed[tv[1]] == 1 and fixed[tv[2]] == 1):
                    a, b, c = x[tv[0]], x[tv[1]], x[tv[2]]
                    q, w = closest_on_triangle(p, a, b, c)
                    d = sd[z]
                    fn = (b - a).cross(c - a).normalized()
                    n = fn
                    if d > 1e-12 * h:
                        n = (p - q) / d
                        if sin[z] == 1:
                            n = -n
                    phi = d
                    if sin[z] == 1:
                        phi = -d
                    row = pair_row[sb[z], bv]
                    F = contact_frame(n, axes[row])
                    va = ti.atomic_add(counters[1], 1)
                    if va < vn_node.shape[0]:
                        vn_node[va] = ti.Vector([tv[0], tv[1], tv[2], -1])
                        for k in ti.static(range(3)):
                            vn_weight[va, k] = w[k] * ti.Matrix.identity(float, 3)
                        vn_weight[va, 3] = ti.Matrix.zero(float, 3, 3)
                    nb = _claim_node(i, claim, counters, vn_node, vn_weight, n_nodes)
                    _emit(n_nodes + va, nb, F, phi, mus[row], ti.Vector([0.0, 0.0, 0.0]), q, row, counters,
                          c_node_a, c_node_b, c_frame, c_phi, c_mu, c_vw, c_point, c_param, c_imp, c_status)


@ti.kernel
def sdf_points(points: ti.types.ndarray(), n: ti.i32, o: ti.i32, obs_kind: ti.types.ndarray(),
               obs_f: ti.types.ndarray(), obs_pose: ti.types.ndarray(), grid: ti.types.ndarray(),
               out_phi: ti.types.ndarray(), out_n: ti.types.ndarray()):
    """World-frame signed distance and outward normal of obstacle o at n points (tests, queries)."""
    for j in range(n):
        R = ti.Matrix([[obs_pose[o, 0], obs_pose[o, 1], obs_pose[o, 2]],
                       [obs_pose[o, 3], obs_pose[o, 4], obs_pose[o, 5]],
                       [obs_pose[o, 6], obs_pose[o, 7], obs_pose[o, 8]]])
        c = ti.Vector([obs_pose[o, 9], obs_pose[o, 10], obs_pose[o, 11]])
        phi, nl = shape_sdf(obs_kind[o, 0], obs_f, o, grid, obs_kind[o, 1], R.transpose() @ (points[j] - c))
        out_phi[j] = phi
        out_n[j] = R @ nl


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
        # obstacles: static table, grids, per-step pose
        O = max(self.n_obs, 1)
        kinds = np.zeros((O, 2), np.int32)
        obs_f = np.zeros((O, OBS_F))
        grids, off = [], 0
        for k, ob in enumerate(self.obstacles):
            kinds[k, 0] = ob.shape.kind
            obs_f[k, :8] = ob.shape.packed()
            obs_f[k, BOUND] = ob.shape.bounding_radius()
            if ob.shape.kind == MESH:
                kinds[k, 1] = off
                grids.append(ob.shape.grid.ravel())
                off += ob.shape.grid.size
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
        B = self.n_bodies
        self.has_bodies = B > 1 and bool((cd.pair_row[:B, :B] >= 0).any())
        if self.has_bodies:
            h = max(2.0 * self.margin, cd.mean_edge, 1e-9)
            self.h = h
            t = cd.surf_tris
            self.tris_np = np.concatenate([t, t[:, 2:]], axis=1).astype(np.int32)
            n_items = len(t) + model.n_tets
            size = int(2 ** int(np.clip(np.ceil(np.log2(max(n_items, 1))), 10, 20)))
            self.tri_grid = HashGrid(self.tris_np, h, size)
            self.tet_grid = HashGrid(model.tets_np.astype(np.int32), h, size)
            self.box_lo = ti.ndarray(float, shape=(self.n_bodies, 3))
            self.box_hi = ti.ndarray(float, shape=(self.n_bodies, 3))
        self.pose_np = np.zeros((O, OBS_POSE))
        self.last_time = None

    def update_obstacles(self, t: float, dt: float) -> np.ndarray:
        """Pose and velocity of every obstacle for the step [t, t+dt] (host, O(obstacles))."""
        for k, ob in enumerate(self.obstacles):
            c, R, v, w = ob.step_motion(t, dt)
            self.pose_np[k] = np.concatenate([R.ravel(), c, v, w])
        if self.n_obs:
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
        if self.has_bodies:
            body_boxes(state.x, self.node_body, self.n_nodes, self.n_bodies, self.box_lo, self.box_hi)
        while True:
            self.counters.fill(0)
            self.claim.fill(0)
            if self.has_bodies:
                common = (self.node_body, self.pair_row, self.box_lo, self.box_hi, self.n_bodies)
                self.tri_grid.build(state.x, *common, self.margin + self.h, self.counters, 2)
                self.tet_grid.build(state.x, *common, self.margin, self.counters, 3)
            c = contacts
            args = (self.claim, self.counters, c.node_a, c.node_b, c.frame, c.phi, c.mu, c.v_world, c.point,
                    c.param, c.impulse, c.status, c.vn_node, c.vn_weight)
            if self.n_obs and self.n_surf:
                detect_obstacles(state.x, self.surf, self.n_surf, self.node_body, self.fixed, self.pair_row,
                                 self.n_bodies, self.n_obs, self.obs_kind, self.obs_f, self.obs_pose, self.grid,
                                 self.mus, self.axes, self.margin, self.n_nodes, *args)
            if self.has_bodies:
                tg, eg = self.tri_grid, self.tet_grid
                detect_bodies(state.x, self.surf, self.n_surf, self.node_body, self.fixed, self.pair_row,
                              tg.items, tg.counts, tg.entries, eg.items, eg.counts, eg.entries, self.h, tg.size,
                              self.box_lo, self.box_hi, self.n_bodies, self.mus, self.axes, self.margin, self.n_nodes, *args)
            n_c, n_v, fill_t, fill_e = (int(v) for v in read4(self.counters))
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

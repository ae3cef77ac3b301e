"""The collision pipeline: ``CollisionPipeline.collide(state, contacts, dt)`` fills the ContactSet for
the step starting at ``state`` (docs/THEORY.md §3, COND §III-A).

It runs a fixed list of passes, each a small unit over the one static ``DetectionTables`` bundle
(``tables.py``) and the step's buffers (SDF poses, body boxes, the spatial hashes of
``broadphase.py``, the counters); only the passes the scene can use are in
the list, so only their kernels compile:

1. ``ObstaclePass`` — FEM surface vertices against SDF entities (obstacles, rigid bodies);
2. ``RigidProxyPass`` — rigid bodies' proxies against SDF entities;
3. ``BodyPass`` — FEM surface vertices inside / near other FEM bodies (hashed tets, triangles; only
   when two FEM bodies may touch), ``SelfPass`` — and near their own body's surface (self-contact);
4. ``RigidInFemPass`` — rigid surface samples inside / near FEM bodies;
5. ``RodSdfPass``, ``RodPairPass``, ``RodFemPass`` — rods against SDF entities, rods, FEM bodies.

The kernels are in ``detection.py`` (1–4) and ``rod_detection.py`` (5); what every pass writes
per contact is in ``emit.py``.

Overflow, in one place: contacts and virtual nodes are appended with atomic counters, hash buckets
have a fixed number of slots; writes beyond capacity are dropped *and counted* (``counters``:
contacts, virtual nodes, fullest bucket of each hash), and ``collide`` grows what overflowed and
reruns every pass, so no contact is ever lost. A box too wide for its grid (``broadphase.cell_range``)
is counted the same way: ``collide`` coarsens that grid for the step and reruns, or stops with a
SimulationError naming the body and the step when positions or speeds are not finite.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""

import numpy as np

from ..backend import ti
from ..errors import SimulationError
from .. import backend
from .broadphase import BOX_WIDTH, FAR, TARGET_SPAN, WIDE_FEM, WIDE_ROD, SpatialHash, body_boxes
from .detection import (detect_bodies, detect_obstacles, detect_rigid, detect_rigid_in_fem, detect_self,
                        rigid_boxes, rigid_poses, sdf_points, vertex_normals)
from .narrowphase import OBS_POSE
from .rod_detection import (detect_fem_vertex_rod, detect_rod_node_fem, detect_rod_pairs, detect_rod_pairs_grid,
                            detect_rod_sdf)
from .tables import DetectionTables

# counters: contacts, virtual nodes, the fullest bucket of each hash, then the widest box of the FEM
# and the rod grids (WIDE_FEM, WIDE_ROD: broadphase.cell_range)
N_CONTACTS, N_VIRTUAL, FILL_TRI, FILL_TET, FILL_SEG, FILL_ROD_TRI = range(6)
N_COUNTERS = 8
MAX_COARSEN = 8        # coarsenings of one grid within a step before collide gives up (SimulationError)


@ti.kernel
def read_counters(a: ti.types.ndarray()) -> ti.types.vector(8, ti.i32):
    """The counters in one small launch (GPU; the CPU reads them in place)."""
    return ti.Vector([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])


class StepBuffers:
    """What the passes share within one step: SDF poses (obstacles from their motion, rigid bodies
    from the state), body boxes, spatial hashes and the counters."""

    def __init__(self, t: DetectionTables) -> None:
        self.obs_pose = ti.ndarray(float, shape=(max(t.n_sdf, 1), OBS_POSE))
        self.pose_np = np.zeros((max(t.n_sdf, 1), OBS_POSE))
        self.counters = ti.ndarray(ti.i32, shape=N_COUNTERS)
        self.hashes: list = []                  # (hash, counter slot) checked for overflow by collide
        self.grids: list = []                   # (hashes sharing one cell size, WIDE_* slot, base cell size)
        if t.has_bodies:
            n_items = len(t.tri_items) + len(t.tet_items)
            size = int(2 ** int(np.clip(np.ceil(np.log2(max(n_items, 1))), 10, 20)))
            self.tri_hash = SpatialHash(t.tri_items, t.h, size)
            self.tet_hash = SpatialHash(t.tet_items, t.h, size)
            self.boxes = ti.ndarray(float, shape=(t.n_bodies, BOX_WIDTH))
            self.normals = backend.vec3_array(t.n_nodes)        # FEM surface vertices' (vertex_normals)
            self.hashes += [(self.tri_hash, FILL_TRI), (self.tet_hash, FILL_TET)]
            self.grids.append(([self.tri_hash, self.tet_hash], WIDE_FEM, t.h))
        if t.n_rs:
            def grown(items, rad):
                return SpatialHash(items, t.rod_h, int(2 ** np.ceil(np.log2(max(1024, 8 * len(items))))), rad)

            e = t.rs_elem_np
            self.seg_hash = grown(np.c_[e[:, :2], e[:, 1], e[:, 1]], t.rs_rad_np)
            self.hashes.append((self.seg_hash, FILL_SEG))
            if t.rod_fem:
                tris = t.rod_tris_np
                self.rod_tri_hash = grown(np.c_[tris, tris[:, 2]], np.zeros(len(tris)))
                self.hashes.append((self.rod_tri_hash, FILL_ROD_TRI))
            self.grids.append(([self.seg_hash] + ([self.rod_tri_hash] if t.rod_fem else []), WIDE_ROD, t.rod_h))


class Pass:
    """A detection pass: ``run(state, dt, out, sdf)`` appends its contacts, reading the static tables
    ``t`` and the step's buffers ``b``."""

    def __init__(self, t: DetectionTables, b: StepBuffers) -> None:
        self.t, self.b = t, b


class ObstaclePass(Pass):
    """FEM surface vertices against SDF entities (S-contacts; detection.py, 1.)."""

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t = self.t
        detect_obstacles(state.x, t.surf, t.det_f.sync(), t.det_i.sync(), t.nodes, t.pair_row, *sdf,
                         t.grid, t.params, t.s_range, t.samp_f, *out)


class RigidProxyPass(Pass):
    """Rigid bodies' proxies against SDF entities (``detect_rigid``); with ``poses`` it also writes the
    rigid bodies' SDF poses first (the pipeline's first reader of them: ``CollisionPipeline``)."""

    def __init__(self, t: DetectionTables, b: StepBuffers, poses: bool = False) -> None:
        super().__init__(t, b)
        self.poses = poses

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t = self.t
        t.set_dt(dt)
        detect_rigid(state.x, state.v, state.q, t.proxy_f, t.proxy_i, t.det_f.sync(), t.det_i.sync(), t.nodes,
                     t.pair_row, *sdf, t.grid, t.params, self.poses, *out)


class BodyPass(Pass):
    """FEM surface vertices of one body inside / near another FEM body (D-contacts; detection.py, 2.),
    over the hashed tets and triangles."""

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t, b = self.t, self.b
        tg, eg = b.tri_hash, b.tet_hash
        t.set_grid(tg)
        detect_bodies(state.x, t.surf, t.det_f.sync(), t.det_i.sync(), t.nodes, t.pair_row, tg.items,
                      tg.entries, eg.items, eg.entries, b.boxes, t.params, *out, b.normals)


class SelfPass(Pass):
    """FEM surface vertices against their own body's surface (self-contact; detection.py, 4.)."""

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t, tg = self.t, self.b.tri_hash
        t.set_grid(tg)
        detect_self(state.x, t.rest, t.self_surf, t.det_f.sync(), t.det_i.sync(), t.self_gap, t.nodes,
                    t.pair_row, tg.items, tg.entries, t.params, *out, self.b.normals)


class RigidInFemPass(Pass):
    """Rigid surface samples inside / near FEM bodies (detection.py, 3.)."""

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t, b = self.t, self.b
        tg, eg = b.tri_hash, b.tet_hash
        t.set_dt(dt)
        t.set_grid(tg)
        detect_rigid_in_fem(state.x, state.v, state.q, t.samp_f, t.samp_i, t.det_f.sync(), t.det_i.sync(), t.nodes,
                            t.pair_row, tg.items, tg.entries, eg.items, eg.entries, b.boxes,
                            t.params, *out)


class RodSdfPass(Pass):
    """Rod nodes and segments against SDF entities (rod_detection.py, 1.)."""

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t = self.t
        t.set_dt(dt)
        detect_rod_sdf(state.x, state.v, t.rod_nodes, t.rn_rad, t.rs_elem, t.rs_rad, t.det_f.sync(), t.det_i.sync(),
                       t.nodes, t.pair_row, *sdf, t.grid, t.params, *out)


class RodPairPass(Pass):
    """Rod segments against rod segments, other rods' and their own (rod_detection.py, 2.): over the
    segment hash (``grid``, default) or all pairs (``all``, the reference)."""

    def __init__(self, t: DetectionTables, b: StepBuffers) -> None:
        super().__init__(t, b)
        self.broadphase = "grid"

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t, sg = self.t, self.b.seg_hash
        if self.broadphase == "grid":
            t.set_dt(dt)
            t.set_grid(rod_hash=sg)
            detect_rod_pairs_grid(state.x, state.v, t.rs_elem, t.rs_rad, t.rs_info, t.det_f.sync(), t.det_i.sync(),
                                  sg.entries, sg.ecell, sg.lo, sg.hi, t.nodes, t.pair_row, t.params, *out)
        else:
            detect_rod_pairs(state.x, state.v, t.rs_elem, t.rs_rad, t.rs_info, t.n_rs, t.nodes,
                             t.pair_row, t.params, t.margin, dt, t.n_nodes, *out)


class RodFemPass(Pass):
    """FEM surface vertices against rod capsules and rod nodes against FEM surface triangles
    (rod_detection.py, 3.), over the segment and triangle hashes (``grid``) or all items (``all``)."""

    def __init__(self, t: DetectionTables, b: StepBuffers) -> None:
        super().__init__(t, b)
        self.broadphase = "grid"

    def run(self, state, dt: float, out: tuple, sdf: tuple) -> None:
        t, sg, tg = self.t, self.b.seg_hash, self.b.rod_tri_hash
        t.set_dt(dt)
        t.set_grid(rod_hash=sg)
        grid, det_f, det_i = self.broadphase == "grid", t.det_f.sync(), t.det_i.sync()
        detect_fem_vertex_rod(state.x, state.v, t.surf, t.rs_elem, t.rs_rad, det_f, det_i, grid, sg.entries,
                              sg.ecell, sg.vmax, t.nodes, t.pair_row, t.params, *out)
        detect_rod_node_fem(state.x, state.v, t.rod_nodes, t.rn_rad, t.rod_tris, det_f, det_i, grid, tg.entries,
                            tg.ecell, tg.vmax, t.nodes, t.pair_row, t.params, *out)


class CollisionPipeline:
    """Per-step contact detection for a Model: ``collide(state, contacts, dt)`` fills the ContactSet and
    returns the number of contacts (module docstring)."""

    def __init__(self, model) -> None:
        self.model = model
        self.tables = t = DetectionTables(model)
        self.buffers = b = StepBuffers(t)
        self.obstacles = t.obstacles
        self._static_rows: dict = {}       # obstacle -> the (position, rotation) arrays its pose row was written from
        self.passes: list = []
        if t.n_sdf and t.n_surf:
            self.passes.append(ObstaclePass(t, b))
        # the rigid poses are written by the proxies' kernel when it is the first to read them (no FEM
        # pass before it, no body boxes of rigid bodies in _prepare): one launch less per step
        self.fused_poses = bool(t.n_prox and not self.passes and not t.has_bodies)
        if t.n_prox:
            self.passes.append(RigidProxyPass(t, b, poses=self.fused_poses))
        if t.has_bodies:
            if t.fem_pairs:           # its contacts are between two FEM bodies: none without such a pair
                self.passes.append(BodyPass(t, b))
            if t.n_self:
                self.passes.append(SelfPass(t, b))
            if t.n_samp:
                self.passes.append(RigidInFemPass(t, b))
        if t.n_rn and t.n_sdf:
            self.passes.append(RodSdfPass(t, b))
        if t.rod_pairs:
            self.passes.append(RodPairPass(t, b))
        if t.rod_fem:
            self.passes.append(RodFemPass(t, b))

    @property
    def rod_broadphase(self) -> str:
        """"grid" (the segment and triangle hashes, default) or "all" (all pairs: the reference)."""
        rod = [p for p in self.passes if isinstance(p, (RodPairPass, RodFemPass))]
        return rod[0].broadphase if rod else "grid"

    @rod_broadphase.setter
    def rod_broadphase(self, mode: str) -> None:
        if mode not in ("grid", "all"):
            raise ValueError(f"rod_broadphase must be 'grid' or 'all', not {mode!r}")
        for p in self.passes:
            if isinstance(p, (RodPairPass, RodFemPass)):
                p.broadphase = mode

    def update_obstacles(self, t: float, dt: float) -> np.ndarray:
        """Pose and velocity of every obstacle for the step [t, t+dt] (host, O(obstacles)). A static
        obstacle's row is rewritten only when its spec's position or rotation is another array than the
        one last written (~10 µs a step saved on a resting sphere, issue 28)."""
        b, n_obs = self.buffers, self.tables.n_obs
        moved = False
        for k, ob in enumerate(self.obstacles):
            last = self._static_rows.get(k)
            if not ob.kinematic and last is not None and last[0] is ob.position and last[1] is ob.rotation:
                continue
            c, R, v, w = ob.step_motion(t, dt)
            b.pose_np[k, :18] = np.concatenate([R.ravel(), c, v, w])
            self._static_rows[k] = None if ob.kinematic else (ob.position, ob.rotation)
            moved = True
        if n_obs and moved:
            view = backend.host_view(b.obs_pose)
            if view is not None:             # CPU: write the obstacle rows in place (no copy kernel)
                view[:n_obs] = b.pose_np[:n_obs]
            else:
                b.obs_pose.from_numpy(b.pose_np.astype(backend.np_real()))
        return b.pose_np

    def obstacle_sdf(self, name_or_index, points, t: float = 0.0) -> tuple:
        """(phi (k,), normal (k, 3)) of one obstacle at world points (k, 3) at time t, evaluated by
        the detection kernels' own SDF code."""
        o = name_or_index if isinstance(name_or_index, int) else \
            [ob.name for ob in self.obstacles].index(name_or_index)
        self.update_obstacles(t, self.model.dt)
        pts = np.asarray(points, float).reshape(-1, 3)
        phi, nrm = backend.scalar_array(len(pts)), backend.vec3_array(len(pts))
        tb = self.tables
        sdf_points(backend.vec3_array(len(pts), pts), len(pts), o, tb.sdf, tb.obs_f, self.buffers.obs_pose,
                   tb.grid, phi, nrm)
        return (phi.to_numpy()[:len(pts)].astype(np.float64), nrm.to_numpy()[:len(pts)].astype(np.float64))

    def _prepare(self, state, dt: float) -> None:
        """The step's SDF poses, body boxes and FEM surface normals (before any pass)."""
        t, b = self.tables, self.buffers
        if t.n_obs:
            self.update_obstacles(state.time, dt)
        if t.n_rigid and not self.fused_poses:
            rigid_poses(state.x, state.v, state.q, t.sdf, t.obs_f, t.n_obs, t.n_rigid, b.obs_pose)
        if t.has_bodies:
            body_boxes(state.x, t.nodes, t.n_nodes, t.n_bodies, b.boxes)
            vertex_normals(state.x, t.surf, t.n_surf, b.tri_hash.items, len(t.tri_items), b.normals)
            if t.n_rigid:
                rigid_boxes(b.obs_pose, t.obs_f, t.n_obs, t.n_rigid, t.rigid_body, dt, b.boxes)

    def _build_hashes(self, state, dt: float) -> None:
        t, b = self.tables, self.buffers
        if t.has_bodies:
            common = (t.nodes, t.pair_row, b.boxes, t.n_bodies)
            b.tri_hash.build_near_bodies(state.x, *common, t.margin + t.h, b.counters, FILL_TRI, WIDE_FEM)
            b.tet_hash.build_near_bodies(state.x, *common, t.margin, b.counters, FILL_TET, WIDE_FEM)
        if t.rod_pairs or t.rod_fem:
            b.seg_hash.build_grown(state.x, state.v, 0.5 * t.margin, dt, b.counters, FILL_SEG, WIDE_ROD)
            if t.rod_fem:
                b.rod_tri_hash.build_grown(state.x, state.v, 0.5 * t.margin, dt, b.counters, FILL_ROD_TRI, WIDE_ROD)

    def collide(self, state, contacts, dt: float) -> int:
        """Fill ``contacts`` for the step starting at ``state``; returns the contact count."""
        t, b = self.tables, self.buffers
        self._prepare(state, dt)
        counters_v = backend.host_view(b.counters)
        sdf = (t.sdf, t.obs_f, b.obs_pose)
        coarsened = dict.fromkeys(range(len(b.grids)), 0)
        for hashes, _, h0 in b.grids:           # each step starts from the tables' cell sizes
            for h in hashes:
                h.h = h0
        while True:
            if counters_v is not None:        # CPU: zero in place, no fill kernels
                counters_v[:] = 0
            else:
                b.counters.fill(0)
            self._build_hashes(state, dt)
            c = contacts
            out = (b.counters, c.cf, c.ci, c.vn_node, c.vn_weight)
            for p in self.passes:
                p.run(state, dt, out, sdf)
            n = (counters_v[:N_COUNTERS].tolist() if counters_v is not None     # one C call: Python ints
                 else [int(v) for v in read_counters(b.counters)])
            wide = [k for k, (_, slot, _) in enumerate(b.grids) if n[slot] > 0]
            for k in wide:
                self._coarsen(state, k, n[b.grids[k][1]], coarsened[k])
                coarsened[k] += 1
            if wide:
                continue
            full = [(h, n[slot]) for h, slot in b.hashes if n[slot] > h.slots]
            for h, fill in full:
                h.alloc(max(fill, 2 * h.slots))
            if full:
                continue
            if n[N_CONTACTS] <= contacts.capacity and n[N_VIRTUAL] <= contacts.virtual_capacity:
                contacts.count, contacts.n_virtual = n[N_CONTACTS], n[N_VIRTUAL]
                return n[N_CONTACTS]
            contacts.ensure_capacity(n[N_CONTACTS], n[N_VIRTUAL])

    def _coarsen(self, state, k: int, width: int, times: int) -> None:
        """Grid k of the step buffers saw a box too large, ``width`` cells along its widest axis
        (``broadphase.cell_range``): scale its cell size so that box spans TARGET_SPAN cells; stop with a SimulationError naming the body
        and the step when positions or speeds are not finite or the grid was coarsened MAX_COARSEN times."""
        hashes, _, h0 = self.buffers.grids[k]
        if width < 2 * FAR and times < MAX_COARSEN:
            x, v = state.positions(), state.velocities()
            if np.isfinite(x).all() and np.isfinite(v).all():
                for h in hashes:
                    h.h *= width / TARGET_SPAN
                return
        raise self._runaway(state)

    def _runaway(self, state) -> SimulationError:
        """The error of a step whose contact detection cannot bound its cell walks: the body with
        non-finite (or else the farthest / fastest) nodes, the step and the likely cause."""
        x, v = state.positions(), state.velocities()
        bad = ~(np.isfinite(x).all(1) & np.isfinite(v).all(1))
        size = np.where(bad, np.inf, np.maximum(np.abs(np.nan_to_num(x)).max(1), 0.0)
                        + self.model.dt * np.abs(np.nan_to_num(v)).max(1))
        node = int(np.argmax(size))
        body = next(b for b in self.model.bodies if b.node_start <= node < b.node_start + b.node_count)
        what = ("has non-finite positions or velocities (NaN or inf)" if bad.any() else
                f"reaches {np.abs(x[node]).max():.3g} m from the origin at {np.linalg.norm(v[node]):.3g} m/s, "
                "beyond what the contact grid can cover")
        return SimulationError(
            f"step {state.step + 1} (from t = {state.time:.6g} s): contact detection stopped: body {body.name!r} "
            f"{what}. Likely cause: the run diverged (exploding positions): try a smaller --dt, a softer "
            "material or a gentler prescribed motion. Frames written so far are intact.")

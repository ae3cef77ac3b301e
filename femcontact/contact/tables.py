"""``DetectionTables``: every static table the contact passes read, built once per Model from its
``ContactData`` (``setup.py``) and uploaded as Taichi ndarrays. Nothing here changes during a run;
the per-step buffers (poses, body boxes, spatial hashes, counters) belong to the pipeline.

Entities: bodies ``0..B-1``, obstacles ``B..B+O-1`` (``pair_row``). SDF entities: obstacles
``0..O-1`` (pose prescribed) then rigid bodies ``O..O+R-1`` (pose from the state).
"""
from __future__ import annotations

import numpy as np

from ..backend import ti
from .. import backend
from ..geometry.proxies import contact_proxies, surface_samples
from ..layout import HostScalars
from .narrowphase import BOUND, COM, OBS_F
from .schema import DETECT_F, DETECT_I, NODES, PARAM_F, ROD_NODES, SAMPLE_F, SAMPLE_I, PROXY_F, PROXY_I, SDF
from ..geometry.shapes import COMPOUND, MESH

DEDUP = 0.25           # FEM vertex within min(margin, DEDUP * mean edge) of a rigid sample: left to the sample


class DetectionTables:
    """Static contact tables of a Model (module docstring); attributes are grouped by the passes that
    read them: common, SDF entities, rigid proxies, rigid surface samples, FEM hash items, rods."""

    def __init__(self, model) -> None:
        backend.ensure_init()
        cd = model.contact
        self.obstacles = cd.obstacles
        self.mean_edge = float(cd.mean_edge)
        # common
        self.n_nodes = model.n_nodes
        self.n_bodies = len(model.bodies)
        self.n_obs = len(cd.obstacles)
        self.margin = float(cd.margin)
        self.surf = backend.int_array(cd.surf_nodes)
        self.n_surf = len(cd.surf_nodes)
        self.nodes = NODES.upload(self.n_nodes, body=cd.node_body, fixed=cd.fixed)     # schema.NODES
        E = max(self.n_bodies + self.n_obs, 1)
        self.pair_row_np = np.ascontiguousarray(cd.pair_row, np.int32).reshape(E, E)
        self.pair_row = ti.ndarray(ti.i32, shape=(E, E))
        self.pair_row.from_numpy(self.pair_row_np)
        self.params = PARAM_F.upload(len(cd.params), mu=cd.params[:, :2], axis=cd.axes)
        kinds = [b.kind for b in model.bodies]
        self.fem_bodies = [i for i, k in enumerate(kinds) if k == "fem"]
        self.rod_bodies = [i for i, k in enumerate(kinds) if k == "rod"]
        self._sdf_entities(model)
        self._rigid_proxies(model)
        self._rigid_samples(model)
        self._fem_items(model, cd)
        self._rods(model, cd)
        # the detection kernels' scalars (schema.DETECT_F/I; dt: ``set_dt`` each step, grids: ``set_grid``)
        self.det_f, self.det_i = HostScalars(DETECT_F), HostScalars(DETECT_I)
        self.det_f.set(margin=self.margin, dedup=self.dedup)
        self.det_i.set(n_nodes=self.n_nodes, n_surf=self.n_surf, n_prox=self.n_prox, n_self=self.n_self,
                       n_rigid=self.n_rigid, n_bodies=self.n_bodies, n_rn=self.n_rn, n_rs=self.n_rs,
                       n_samp=self.n_samp, n_rod_tris=self.n_rod_tris)
        self._dt = None

    def set_dt(self, dt: float) -> None:
        """The step's dt into ``det_f`` (written only when it changes)."""
        if dt != self._dt:
            self.det_f.set(dt=dt)
            self._dt = dt

    def set_grid(self, fem_hash=None, rod_hash=None) -> None:
        """The FEM and rod hashes' cell sizes and bucket counts into ``det_f`` / ``det_i`` (``collide`` may
        coarsen a grid)."""
        if fem_hash is not None:
            self.det_f.set(fem_h=fem_hash.h)
            self.det_i.set(fem_size=fem_hash.size)
        if rod_hash is not None:
            self.det_f.set(rod_h=rod_hash.h)
            self.det_i.set(rod_size=rod_hash.size)

    def any_pair(self, a: list, b: list) -> bool:
        """True when some entity of ``a`` may touch some entity of ``b``."""
        return bool(a) and bool(b) and bool((self.pair_row_np[np.ix_(a, b)] >= 0).any())

    def _sdf_entities(self, model) -> None:
        """Obstacles then rigid bodies: kind, packed shape floats, bounding radius, mesh SDF grids and
        compound part tables (``grid``, offset in the ``SDF`` table's ``aux`` column)."""
        rigid = model.rigid
        self.n_rigid = len(rigid.names)
        self.n_sdf = self.n_obs + self.n_rigid
        O = max(self.n_sdf, 1)
        kinds = np.zeros((O, 2), np.int32)
        obs_f = np.zeros((O, OBS_F))
        grids, off = [], 0
        names = [b.name for b in model.bodies]
        self.rigid_body_np = np.array([names.index(name) for name in rigid.names], np.int32)
        entity = np.r_[self.n_bodies + np.arange(self.n_obs), self.rigid_body_np].astype(int)
        bodies = list(range(self.n_bodies))
        for k, shape in enumerate([ob.shape for ob in self.obstacles] + rigid.shapes):
            kinds[k, 0] = shape.kind
            obs_f[k, :8] = shape.packed()
            obs_f[k, BOUND] = shape.bounding_radius()
            # a mesh's SDF grid (a compound's part table) is read only by the bodies that may touch it (a
            # robot's links, whose mutual contacts are off, touching only the ground never read theirs):
            # sample it then only
            others = [b for b in bodies if b != entity[k]]
            if shape.kind in (MESH, COMPOUND) and self.any_pair([int(entity[k])], others):
                data = shape.grid.ravel() if shape.kind == MESH else shape.kernel_table()
                kinds[k, 1] = off
                grids.append(data)
                off += data.size
        obs_f[:, BOUND] = np.where(np.isfinite(obs_f[:, BOUND]), obs_f[:, BOUND], 1e30)
        for k, com in enumerate(rigid.com_local):
            obs_f[self.n_obs + k, COM: COM + 3] = com
        self.rigid_body = backend.int_array(self.rigid_body_np)
        n = self.n_sdf
        self.sdf = SDF.upload(n, kind=kinds[:n, 0], aux=kinds[:n, 1], entity=entity,
                            rigid=np.r_[np.full(self.n_obs, -1), rigid.lin])
        self.obs_f = ti.ndarray(float, shape=(O, OBS_F))
        self.obs_f.from_numpy(obs_f.astype(backend.np_real()))
        self.grid = backend.scalar_array(max(off, 1), np.concatenate(grids) if grids else None)

    def _rigid_proxies(self, model) -> None:
        """Rigid bodies' contact proxies against SDF entities (body frame, relative to the shape origin)."""
        px = [contact_proxies(shape) for shape in model.rigid.shapes]
        self.n_prox = sum(len(p["radius"]) for p in px)
        cat = (lambda key: np.concatenate([p[key] for p in px])) if px else (lambda key: np.zeros((0, 3)))
        f, i = {}, {}
        if px:
            f = {"point": cat("point"), "axis": cat("axis"), "radius": cat("radius")}
            i = {"rigid": np.concatenate([np.full(len(p["radius"]), k) for k, p in enumerate(px)]),
                 "kind": cat("kind"), "against": cat("against")}
        self.proxy_f = PROXY_F.upload(self.n_prox, **f)
        self.proxy_i = PROXY_I.upload(self.n_prox, **i)

    def _rigid_samples(self, model) -> None:
        """Surface samples of rigid bodies that may touch an FEM body (searched in FEM tets), and per SDF
        entity the range of its samples (an FEM vertex within ``dedup`` of one leaves that contact to
        the sample: detection.py, 3.)."""
        touch = [k for k, b in enumerate(self.rigid_body_np) if self.any_pair([int(b)], self.fem_bodies)]
        samp = [surface_samples(model.rigid.shapes[k]) for k in touch]
        self.n_samp = sum(len(s[0]) for s in samp)
        f, i = {}, {}
        if samp:
            per = lambda value: np.concatenate([np.full(len(s[0]), v) for v, s in zip(value, samp)])   # noqa: E731
            f = {"point": np.concatenate([s[0] for s in samp]), "axis": np.concatenate([s[1] for s in samp]),
                 "cos": np.concatenate([s[2] for s in samp]),
                 "com": np.concatenate([np.tile(model.rigid.com_local[k], (len(s[0]), 1))
                                        for k, s in zip(touch, samp)])}
            i = {"rigid": per(touch), "lin": per([model.rigid.lin[k] for k in touch]),
                 "body": per([self.rigid_body_np[k] for k in touch])}
        self.samp_f = SAMPLE_F.upload(self.n_samp, **f)
        self.samp_i = SAMPLE_I.upload(self.n_samp, **i)
        rng = np.zeros((max(self.n_sdf, 1), 2), np.int32)
        B = self.n_bodies
        if B > 1 and (self.pair_row_np[:B, :B] >= 0).any():
            off = 0
            for k, s in zip(touch, samp):
                rng[self.n_obs + k] = off, off + len(s[0])
                off += len(s[0])
        self.s_range = ti.ndarray(ti.i32, shape=rng.shape)
        self.s_range.from_numpy(rng)
        self.dedup = min(self.margin, DEDUP * self.mean_edge)

    def _fem_items(self, model, cd) -> None:
        """FEM surface triangles and tets for the body-body hash, when an FEM body may touch an FEM or
        rigid body (rigid–rigid pairs are the proxies', rods' the rod passes')."""
        fem_or_rigid = [i for i, b in enumerate(model.bodies) if b.kind in ("fem", "rigid")]
        self.has_bodies = self.any_pair(self.fem_bodies, fem_or_rigid)      # a self-contact body touches itself
        fem = self.fem_bodies
        between = self.pair_row_np[np.ix_(fem, fem)] >= 0
        np.fill_diagonal(between, False)
        self.fem_pairs = bool(between.any())         # two different FEM bodies may touch (``BodyPass``)
        self.h = max(2.0 * self.margin, self.mean_edge, 1e-9)
        t = cd.surf_tris
        self.tri_items = np.concatenate([t, t[:, 2:]], axis=1).astype(np.int32)
        self.tet_items = model.tets_np.astype(np.int32)
        # self-contact: the surface vertices of bodies with it, their rest positions and gaps
        self_nodes = cd.surf_nodes[cd.self_gap[cd.node_body[cd.surf_nodes]] > 0] if len(cd.surf_nodes) else []
        self.n_self = len(self_nodes)
        self.self_surf = backend.int_array(np.asarray(self_nodes, np.int32))
        self.rest = backend.vec3_array(self.n_nodes, model.rest_positions) if self.n_self else None
        self.self_gap = backend.scalar_array(max(self.n_bodies, 1), cd.self_gap if self.n_bodies else None)

    def _rods(self, model, cd) -> None:
        """Rod nodes (radius, a segment at each node), segments (two nodes, the frame's spin block,
        radius, info: rod, index, last flag, self-contact skip) and the FEM triangles rods may touch."""
        self.n_rn = self.n_rs = self.n_rod_tris = 0
        self.rod_pairs = self.rod_fem = False
        rods = model.rod_ranges
        if not rods:
            return
        nodes, nrad, nseg, elem, srad, info = [], [], [], [], [], []
        for k, rod in enumerate(rods):
            n, npt = rod.n_segments, rod.n_points
            node = rod.nodes
            nodes.append(node)
            nrad.append(np.full(npt, rod.radius))
            nseg.append(rod.segments[np.minimum(np.arange(npt), n - 1)])   # a segment at each node
            elem.append(np.stack([node[:-1], node[1:], rod.segments], axis=1))
            srad.append(np.full(n, rod.radius))
            skip = 1 + int(np.ceil(3.0 * rod.radius / rod.rest_lengths.min())) if rod.self_contact else -1
            info.append(np.stack([np.full(n, k), np.arange(n), (np.arange(n) == n - 1).astype(int),
                                  np.full(n, skip)], axis=1))
        self.n_rn = int(sum(len(a) for a in nodes))
        self.n_rs = int(sum(len(a) for a in elem))
        self.rod_nodes = ROD_NODES.upload(self.n_rn, node=np.concatenate(nodes), seg=np.concatenate(nseg))
        self.rn_rad = backend.scalar_array(self.n_rn, np.concatenate(nrad))
        self.rs_elem_np = np.concatenate(elem)
        self.rs_rad_np = np.concatenate(srad)
        self.rs_elem = backend.int_array(self.rs_elem_np, width=3)
        self.rs_rad = backend.scalar_array(self.n_rs, self.rs_rad_np)
        self.rs_info = backend.int_array(np.concatenate(info), width=4)
        self.rod_pairs = ((len(rods) > 1 and self.any_pair(self.rod_bodies, self.rod_bodies))
                          or any(r.self_contact and r.n_segments > 3 for r in rods))
        self.rod_fem = self.any_pair(self.rod_bodies, self.fem_bodies) and len(cd.surf_tris) > 0
        self.rod_tris_np = cd.surf_tris
        self.rod_tris = backend.int_array(cd.surf_tris, width=3) if self.rod_fem else None
        self.n_rod_tris = len(cd.surf_tris)
        h = max(float(max(r.rest_lengths.max() for r in rods)) + 2 * float(self.rs_rad_np.max()), 1e-9)
        if self.rod_fem:
            x0 = model.rest_positions[cd.surf_tris]
            h = max(h, float(np.linalg.norm(x0 - np.roll(x0, 1, axis=1), axis=2).mean()))
        self.rod_h = h

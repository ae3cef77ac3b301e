"""Model: the static part of a simulation, built once from a Scene.

Holds the DOF map (every body's nodes get a contiguous range of 3-vector blocks in
the one global velocity vector), rest shapes, lumped masses, element data and the
block sparsity pattern of ``A``. Nothing in it changes during a run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backend import ti
from . import backend
from .assembly.sparse import BlockPattern
from .dofs import DofGroups, DofGroupsBuilder
from .bodies.joints import JointSystem
from .bodies.springs import spring_system
from .math.quaternion import quat_from_matrix
from .contact.setup import build_contact_data
from .scene import Scene


@dataclass(frozen=True)
class BodyRange:
    """Where one body lives in the global arrays."""

    name: str
    kind: str          # "fem" or "rigid" (blocks: centre-of-mass velocity, angular velocity)
    node_start: int
    node_count: int
    tet_start: int
    tet_count: int

    @property
    def nodes(self) -> slice:
        return slice(self.node_start, self.node_start + self.node_count)

    @property
    def tets(self) -> slice:
        return slice(self.tet_start, self.tet_start + self.tet_count)


class Model:
    """Static simulation data on Taichi ndarrays (plus numpy copies for the host side)."""

    def __init__(self, scene: Scene):
        backend.ensure_init()
        self.scene = scene
        self.dt = scene.dt
        self.integrator = scene.integrator
        self.gravity = scene.gravity.copy()
        self.bodies: list[BodyRange] = []
        rest, vel, tets, mats = [], [], [], []
        node0 = tet0 = 0
        for spec in scene.fem_bodies:
            self.bodies.append(BodyRange(spec.name, "fem", node0, spec.n_nodes, tet0, spec.mesh.n_tets))
            rest.append(spec.positions)
            vel.append(spec.velocity)
            tets.append(spec.mesh.tets + node0)
            mats.append(np.repeat([[*spec.material.lame, spec.material.density, spec.material.rayleigh_alpha,
                                    spec.material.rayleigh_beta]], spec.mesh.n_tets, axis=0))
            node0 += spec.n_nodes
            tet0 += spec.mesh.n_tets
        self.n_fem_nodes = node0
        self.n_tets = tet0
        node0 = self._add_rigid_bodies(node0, rest, vel)
        node0 = self._add_rods(node0, rest, vel)
        self.n_nodes = node0
        self.rest_positions = np.concatenate(rest) if rest else np.zeros((0, 3))
        self.initial_velocities = np.concatenate(vel) if vel else np.zeros((0, 3))
        self.tets_np = np.concatenate(tets) if tets else np.zeros((0, 4), np.int64)
        mats = np.concatenate(mats) if mats else np.zeros((0, 5))
        self._build_elements(mats)
        self._build_rotational()
        self.coupling_pairs: list = []   # (rows, cols) block pairs added by couplings (joints)
        self.coupling_pairs += self._rod_pairs
        self.joints = None
        if scene.joints or scene.attachments:
            self.joints = JointSystem(self, scene.joints, scene.attachments)
            self.coupling_pairs.append(self.joints.coupling_pairs)
        self.springs = spring_system(self, scene.springs)      # None without springs
        if self.springs is not None:
            self.coupling_pairs.append(self.springs.coupling_pairs)
        self.pattern = self._build_pattern()
        self.dofs = self._build_dof_groups()
        self._build_contact()

    # ------------------------------------------------------------------ rigid bodies and rotational blocks
    def _add_rigid_bodies(self, node0: int, rest: list, vel: list) -> int:
        """Two blocks per rigid body (centre-of-mass velocity, world angular velocity); fills the
        rotational-block tables (``rot_*_np``) that rods will share."""
        self.rigid_specs = list(self.scene.rigid_bodies)
        rot_block, rot_inertia, rot_q = [], [], []
        self.rigid_lin = np.zeros(len(self.rigid_specs), np.int64)
        self._block_mass = []
        for k, spec in enumerate(self.rigid_specs):
            self.bodies.append(BodyRange(spec.name, "rigid", node0, 2, self.n_tets, 0))
            self.rigid_lin[k] = node0
            rest.append(np.stack([spec.com, np.zeros(3)]))
            vel.append(np.stack([spec.velocity, spec.angular_velocity]))
            self._block_mass.append((node0, spec.mass))
            rot_block.append(node0 + 1)
            rot_inertia.append(spec.inertia)
            rot_q.append(quat_from_matrix(spec.rotation))
            node0 += 2
        self.rot_block_np = np.array(rot_block, np.int64)
        self.rot_inertia_np = np.array(rot_inertia, float).reshape(-1, 3, 3)
        self.rot_q0_np = np.array(rot_q, float).reshape(-1, 4)
        self._build_rigid_table()
        return node0

    def _build_rigid_table(self) -> None:
        """Per rigid body (``rigid_specs`` order), what the run reads instead of the specs: ``rigid_names``,
        ``rigid_com_local_np`` (n, 3; centre of mass in the shape frame, m), ``rigid_mass_np`` (kg),
        ``rigid_kinematic_np`` (bool: pose prescribed) and ``rigid_surfaces`` ((verts, int64 faces) in the
        shape frame, for output)."""
        specs = self.rigid_specs
        self.rigid_names = [s.name for s in specs]
        self.rigid_com_local_np = np.array([s.com_local for s in specs], float).reshape(-1, 3)
        self.rigid_mass_np = np.array([s.mass for s in specs], float)
        self.rigid_kinematic_np = np.array([s.kinematic for s in specs], bool)
        surfaces = [s.shape.surface() for s in specs]
        self.rigid_surfaces = [(v, np.asarray(f, np.int64)) for v, f in surfaces]

    def _add_rods(self, node0: int, rest: list, vel: list) -> int:
        """Cosserat rods (``femcontact.spec.rod``): per rod its n+1 node blocks (lumped mass) then its n
        segment blocks (rotational: inertia ρ l diag(I, I, J), quaternion appended after the rigid
        bodies' in ``rot_*_np``). Records ``rod_specs`` and the block pairs the rod elements couple
        (stretch–shear: nodes j, j+1 and segment j; bend–twist: segments j, j+1) in ``_rod_pairs``."""
        self.rod_specs = list(self.scene.rods)
        self._rod_pairs = []
        if not self.rod_specs:
            return node0
        rot_block, rot_inertia, rot_q = [self.rot_block_np], [self.rot_inertia_np], [self.rot_q0_np]
        self.rod_rot0 = np.zeros(len(self.rod_specs), np.int64)    # index of each rod's first quaternion
        for k, spec in enumerate(self.rod_specs):
            n, npt = spec.n_segments, spec.n_points
            self.bodies.append(BodyRange(spec.name, "rod", node0, spec.n_nodes, self.n_tets, 0))
            rest.append(spec.positions)
            vel.append(spec.block_velocities)
            for i, m in enumerate(spec.node_masses):
                self._block_mass.append((node0 + i, float(m)))
            self.rod_rot0[k] = sum(len(r) for r in rot_block)
            seg = node0 + npt + np.arange(n)
            rot_block.append(seg)
            rot_inertia.append(spec.segment_inertias)
            rot_q.append(spec.quats)
            j = np.arange(n)
            trip = np.stack([node0 + j, node0 + j + 1, seg], axis=1)          # (n, 3) stretch elements
            self._rod_pairs.append((np.repeat(trip, 3, axis=1), np.tile(trip, (1, 3))))
            pair = np.stack([seg[:-1], seg[1:]], axis=1)                        # (n-1, 2) bend elements
            self._rod_pairs.append((np.repeat(pair, 2, axis=1), np.tile(pair, (1, 2))))
            node0 += spec.n_nodes
        self.rot_block_np = np.concatenate(rot_block).astype(np.int64)
        self.rot_inertia_np = np.concatenate(rot_inertia).reshape(-1, 3, 3)
        self.rot_q0_np = np.concatenate(rot_q).reshape(-1, 4)
        return node0

    def _build_rotational(self) -> None:
        n = len(self.rot_block_np)
        self.n_rot = n
        self.rot_block = backend.int_array(self.rot_block_np)
        self.rot_inertia = backend.mat3_array(n)
        if n:
            self.rot_inertia.from_numpy(self.rot_inertia_np.astype(backend.np_real()))
        self.is_rotational = np.zeros(self.n_nodes, bool)
        self.is_rotational[self.rot_block_np] = True

    def rigid_index(self, name: str) -> int:
        if name in self.rigid_names:
            return self.rigid_names.index(name)
        raise KeyError(f"no rigid body named {name!r}; rigid bodies: {self.rigid_names}")

    # ------------------------------------------------------------------ contact (femcontact.contact)
    def _build_contact(self) -> None:
        """Static contact data: surfaces, obstacles, ``contact_params`` (rows x CONTACT_PARAM_COLUMNS),
        entity pair table; see ``femcontact.contact.setup``."""
        self.contact = build_contact_data(self)
        self.contact_params = self.contact.params
        self.obstacles = self.contact.obstacles
        # True when anything in the scene can touch (some body-body or body-obstacle pair is enabled)
        self.needs_contact = bool((self.contact.pair_row >= 0).any()) or any(r.self_contact for r in self.rod_specs)

    @property
    def n_dofs(self) -> int:
        return 3 * self.n_nodes

    @property
    def fem_bodies(self) -> list:
        """(BodyRange, FemBodySpec) of every FEM body."""
        return [(b, spec) for b, spec in zip(self.bodies, self.scene.fem_bodies)]

    def body(self, name: str) -> BodyRange:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(f"no body named {name!r}; bodies: {[b.name for b in self.bodies]}")

    def _build_elements(self, mats: np.ndarray) -> None:
        X = self.rest_positions[self.tets_np]                       # (m, 4, 3)
        Dm = np.transpose(X[:, 1:] - X[:, :1], (0, 2, 1))           # columns x_a - x_0
        vol = np.linalg.det(Dm) / 6.0
        self.dm_inv_np = np.linalg.inv(Dm) if len(Dm) else np.zeros((0, 3, 3))
        self.volumes_np = vol
        mu, lam, rho, alpha, beta = mats.T if len(mats) else (np.zeros(0),) * 5
        node_mass = np.zeros(self.n_nodes)
        node_mass_alpha = np.zeros(self.n_nodes)
        np.add.at(node_mass, self.tets_np.ravel(), np.repeat(rho * vol / 4.0, 4))
        for block, m in self._block_mass:
            node_mass[block] = m
        np.add.at(node_mass_alpha, self.tets_np.ravel(), np.repeat(alpha * rho * vol / 4.0, 4))
        self.mass_np = node_mass
        real = backend.np_real()
        self.tets = backend.int_array(self.tets_np, width=4)
        self.dm_inv = backend.mat3_array(self.n_tets)
        if self.n_tets:
            self.dm_inv.from_numpy(self.dm_inv_np.astype(real))
        self.vol = backend.scalar_array(self.n_tets, vol)
        self.mu = backend.scalar_array(self.n_tets, mu)
        self.lam = backend.scalar_array(self.n_tets, lam)
        self.beta = backend.scalar_array(self.n_tets, beta)
        self.mass = backend.scalar_array(self.n_nodes, node_mass)
        self.mass_alpha = backend.scalar_array(self.n_nodes, node_mass_alpha)
        self.gravity_arr = backend.vec3_array(1, self.gravity[None])

    def _build_dof_groups(self) -> DofGroups:
        """The block structure solvers see (``femcontact.dofs``): FEM nodes are points, a rigid body
        a linear/angular pair, a rod a chain of points and spins; prescribed: pinned or driven
        nodes and kinematic rigid bodies."""
        groups = DofGroupsBuilder()
        prescribed = np.zeros(self.n_nodes, bool)
        specs = {s.name: s for s in [*self.scene.fem_bodies, *self.rod_specs]}
        for b in self.bodies:
            if b.kind == "rigid":
                spec = self.rigid_specs[self.rigid_index(b.name)]
                groups.add_rigid(spec.mass)
                prescribed[b.nodes] = spec.kinematic
            elif b.kind == "rod":
                spec = specs[b.name]
                groups.add_chain(self.mass_np[b.node_start: b.node_start + spec.n_points], spec.n_segments)
            else:
                groups.add_points(self.mass_np[b.nodes])
            if b.kind != "rigid":
                for d in specs[b.name].drives:
                    prescribed[b.node_start + np.asarray(d.nodes, np.int64)] = True
        return groups.build(prescribed)

    def _build_pattern(self) -> BlockPattern:
        t = self.tets_np
        rows = np.repeat(t, 4, axis=1).ravel()   # (a, b) pairs, a-major: a*4 + b
        cols = np.tile(t, (1, 4)).ravel()
        for r, c in self.coupling_pairs:          # joints, rods: blocks they couple
            rows = np.concatenate([rows, np.asarray(r, np.int64).ravel()])
            cols = np.concatenate([cols, np.asarray(c, np.int64).ravel()])
        pattern = BlockPattern(self.n_nodes, rows, cols)
        blk = pattern.index(rows[: 16 * self.n_tets], cols[: 16 * self.n_tets]).reshape(-1, 16).astype(np.int32)
        self.tet_blocks = ti.ndarray(ti.i32, shape=(max(self.n_tets, 1), 16))
        if self.n_tets:
            self.tet_blocks.from_numpy(blk)
        return pattern

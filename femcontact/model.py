"""Model: the static part of a simulation, built once from a Scene.

Holds the DOF map (every body's nodes get a contiguous range of 3-vector blocks in
the one global velocity vector), rest shapes, lumped masses, element data, the per-system
tables (rigid bodies, rods, prescribed motions, joints, springs, contact) and the block
sparsity pattern of ``A``. Nothing in it changes during a run, and it keeps no spec: the
constructor is the one place the Scene's specs are read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backend import ti
from . import backend
from .assembly.sparse import BlockPattern
from .dofs import DofGroups, DofGroupsBuilder
from .bodies.joints import JointSystem
from .bodies.prescribed import Pose, PrescribedGroup
from .bodies.rigid import RigidSystem
from .bodies.rod import RodRange
from .bodies.springs import spring_system
from .errors import ParameterError
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
    """Static simulation data on Taichi ndarrays (plus numpy copies for the host side), built once from a
    Scene, which it does not keep: nothing after this constructor reads a spec.

    Arrays: rest positions, initial velocities, lumped masses, tet tables and element data; ``bodies``
    (``BodyRange``); the per-system tables: ``rigid`` (``RigidSystem``: rigid bodies and the rotational
    blocks), ``rod_ranges`` (a ``RodRange`` per rod), ``prescribed`` (a ``PrescribedGroup`` per pin,
    drive or kinematic rigid body), ``joints`` / ``springs`` (their systems, None without any),
    ``contact`` (``ContactData``); ``pattern`` (the block pattern of A) and ``dofs`` (``DofGroups``).
    """

    def __init__(self, scene: Scene):
        backend.ensure_init()
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
        self._block_mass = []
        rigid0 = node0
        node0 = self._add_rigid_bodies(scene.rigid_bodies, node0, rest, vel)
        node0, rod_rotations = self._add_rods(scene.rods, node0, rest, vel, len(scene.rigid_bodies))
        self.n_nodes = node0
        self.rigid = RigidSystem(scene.rigid_bodies, rigid0, rod_rotations)
        self.rest_positions = np.concatenate(rest) if rest else np.zeros((0, 3))
        self.initial_velocities = np.concatenate(vel) if vel else np.zeros((0, 3))
        self.tets_np = np.concatenate(tets) if tets else np.zeros((0, 4), np.int64)
        mats = np.concatenate(mats) if mats else np.zeros((0, 5))
        self._build_elements(mats)
        self.is_rotational = np.zeros(self.n_nodes, bool)
        self.is_rotational[self.rigid.rot_block_np] = True
        self.prescribed = self._build_prescribed(scene)
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
        self._build_contact(scene)

    # ------------------------------------------------------------------ rigid bodies and rods
    def _add_rigid_bodies(self, specs: list, node0: int, rest: list, vel: list) -> int:
        """Two blocks per rigid body (centre-of-mass velocity, world angular velocity); the rest of a
        rigid body's tables is ``RigidSystem``'s."""
        for spec in specs:
            self.bodies.append(BodyRange(spec.name, "rigid", node0, 2, self.n_tets, 0))
            rest.append(np.stack([spec.com, np.zeros(3)]))
            vel.append(np.stack([spec.velocity, spec.angular_velocity]))
            self._block_mass.append((node0, spec.mass))
            node0 += 2
        return node0

    def _add_rods(self, specs: list, node0: int, rest: list, vel: list, n_rot: int) -> tuple:
        """Cosserat rods (``femcontact.spec.rod``): per rod its n+1 node blocks (lumped mass) then its n
        segment blocks (rotational: inertia ρ l diag(I, I, J), quaternion after the ``n_rot`` before it).
        Records a ``RodRange`` per rod in ``rod_ranges`` and the block pairs the rod elements couple
        (stretch–shear: nodes j, j+1 and segment j; bend–twist: segments j, j+1) in ``_rod_pairs``;
        returns the next block and the segments' (blocks, inertias, quaternions) for ``RigidSystem``."""
        self.rod_ranges: list[RodRange] = []
        self._rod_pairs = []
        rot_block, rot_inertia, rot_q = [], [], []
        for spec in specs:
            n, npt = spec.n_segments, spec.n_points
            body = BodyRange(spec.name, "rod", node0, spec.n_nodes, self.n_tets, 0)
            self.bodies.append(body)
            rest.append(spec.positions)
            vel.append(spec.block_velocities)
            for i, m in enumerate(spec.node_masses):
                self._block_mass.append((node0 + i, float(m)))
            seg = node0 + npt + np.arange(n)
            self.rod_ranges.append(RodRange(
                spec.name, body, node0 + np.arange(npt), seg, n_rot + np.arange(n), spec.rest_lengths.copy(),
                spec.rest_darboux.copy(), float(spec.radius), bool(spec.self_contact), spec.youngs_modulus,
                spec.shear_modulus, tuple(spec.areas), spec.rayleigh_alpha, spec.rayleigh_beta,
                spec.node_masses.copy(), spec.segment_inertias.copy(), tuple(int(j) for j in spec.anchors)))
            n_rot += n
            rot_block.append(seg)
            rot_inertia.append(spec.segment_inertias)
            rot_q.append(spec.quats)
            j = np.arange(n)
            trip = np.stack([node0 + j, node0 + j + 1, seg], axis=1)          # (n, 3) stretch elements
            self._rod_pairs.append((np.repeat(trip, 3, axis=1), np.tile(trip, (1, 3))))
            pair = np.stack([seg[:-1], seg[1:]], axis=1)                        # (n-1, 2) bend elements
            self._rod_pairs.append((np.repeat(pair, 2, axis=1), np.tile(pair, (1, 2))))
            node0 += spec.n_nodes
        return node0, (rot_block, rot_inertia, rot_q)

    def _build_prescribed(self, scene: Scene) -> list:
        """The prescribed-motion table: a ``PrescribedGroup`` per pin or drive of an FEM body or rod (in
        scene order) then per kinematic rigid body; a clear error for a node prescribed twice."""
        groups = []
        for spec in [*scene.fem_bodies, *scene.rods]:   # rods: same drive records
            start = self.body(spec.name).node_start
            for d in spec.drives:
                kind, motion = ("velocity", d.velocity) if d.velocity is not None else ("position", d.position)
                groups.append(PrescribedGroup(d.nodes + start, kind, motion, spec.name, spec.positions[d.nodes].copy(),
                                              placed=spec.positions[d.nodes].copy()))
        for k, spec in enumerate(scene.rigid_bodies):
            if spec.kinematic:
                groups.append(PrescribedGroup(np.arange(2) + self.body(spec.name).node_start, "pose", spec.motion,
                                              spec.name, Pose(*spec.pose(0.0)), rigid=k))
        index = np.concatenate([g.index for g in groups]) if groups else np.zeros(0, np.int64)
        uniq, counts = np.unique(index, return_counts=True)
        if np.any(counts > 1):
            node = int(uniq[counts > 1][0])
            body = next(b for b in self.bodies if b.node_start <= node < b.node_start + b.node_count)
            raise ParameterError(f"node {node - body.node_start} of body {body.name!r} is prescribed by two pin/drive "
                                 "calls; select disjoint node sets")
        self.prescribed_mask = np.zeros(self.n_nodes, bool)
        self.prescribed_mask[index] = True
        return groups

    # ------------------------------------------------------------------ contact (femcontact.contact)
    def _build_contact(self, scene: Scene) -> None:
        """Static contact data: surfaces, obstacles, ``contact_params`` (rows x CONTACT_PARAM_COLUMNS),
        entity pair table; see ``femcontact.contact.setup``."""
        self.contact = build_contact_data(self, scene)
        self.contact_params = self.contact.params
        self.obstacles = self.contact.obstacles
        # True when anything in the scene can touch (some body-body or body-obstacle pair is enabled)
        self.needs_contact = bool((self.contact.pair_row >= 0).any()) or any(r.self_contact for r in self.rod_ranges)

    @property
    def n_dofs(self) -> int:
        return 3 * self.n_nodes

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
        nodes and kinematic rigid bodies (``prescribed_mask``)."""
        groups = DofGroupsBuilder()
        rods = iter(self.rod_ranges)
        rigid = iter(self.rigid.mass)
        for b in self.bodies:
            if b.kind == "rigid":
                groups.add_rigid(next(rigid))
            elif b.kind == "rod":
                rod = next(rods)
                groups.add_chain(self.mass_np[b.node_start: b.node_start + rod.n_points], rod.n_segments)
            else:
                groups.add_points(self.mass_np[b.nodes])
        return groups.build(self.prescribed_mask)

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

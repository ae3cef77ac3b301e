"""Rigid bodies (docs/THEORY.md §2): the rotational-block kernels (mass properties and contact proxies:
``geometry/mass.py``, ``geometry/proxies.py``).

A rigid body owns two DOF blocks of the global velocity vector: its centre-of-mass velocity
``v`` (a translational block, lumped mass ``m``) and its angular velocity ``ω`` in the world
frame (a *rotational* block). Rotational blocks (rigid bodies and, with the same kernels, rod
segments) carry a body-frame inertia ``I_b`` and an orientation quaternion ``q = (w, x, y, z)``
in the State; their world inertia is ``I_w = R I_bᵀ R``.

**Gyroscopic term.** The block alone obeys the integrator applied to Euler's equations in the
body frame, ``a_m I Ω̂ = b_m I Ω_k − b_f Ω̂ × I Ω̂`` (θ = ½ for the midpoint rule, 1 for implicit
Euler). ``assemble_rotational_block`` solves this 3x3 problem by Newton and adds ``a_m I_w`` to the
diagonal block of ``A`` and ``b_m I_w ω_k − b_f R (Ω̂ × I Ω̂)`` to ``b``, so a free body gets
exactly that solution while contacts and joints see the SPD block ``a_m I_w`` (the gyroscopic
coupling is lagged to the free solution).

**Rotation update.** ``advance_rotation_block`` turns the step's ω̂ into ``q ← cay(dt ω̂) ⊗ q`` (the
Cayley map, quaternion ∝ (1, dt ω̂/2)) and carries the end-of-step velocity with the body
(``ω ← cay(dt ω̂) ω``). With the implicit midpoint solve above this is the Lie–Poisson
midpoint scheme: a free body conserves its kinetic energy and its world angular momentum
exactly (to the Newton tolerance), near the unstable intermediate axis too.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np

from .. import backend
from ..backend import ti
from ..math.quaternion import cayley_velocity, quat_from_matrix
from ..math.smallmat import inv3, mm, mmT, mTv, mv, quat_matrix, skew


@ti.func
def assemble_rotational_block(r, blocks_of: ti.template(), inertia: ti.template(), quat: ti.template(),
                              v: ti.template(), diag: ti.template(), blocks: ti.template(), b: ti.template(),
                              a_m, b_m, b_f):
    """Rotational block r: A_ii += a_m I_w; b_i += b_m I_w ω_k − b_f R (Ω̂ × I Ω̂) (module docstring; run by the
    fused step kernels). Units follow the integrator's λ scaling (midpoint: torques, N m; Euler: angular impulses)."""
    i = blocks_of[r]
    R = quat_matrix(quat[r])
    Ib = inertia[r]
    Om_k = mTv(R, v[i])
    Om = Om_k
    for _ in range(8):   # Newton on g(Ω) = a_m I Ω − b_m I Ω_k + b_f Ω × I Ω
        IOm = mv(Ib, Om)
        g = a_m * IOm - b_m * mv(Ib, Om_k) + b_f * Om.cross(IOm)
        Jg = a_m * Ib + b_f * (mm(skew(Om), Ib) - skew(IOm))
        Om -= mv(inv3(Jg), g)
    Iw = mmT(mm(R, Ib), R)
    blocks[diag[i]] += a_m * Iw
    b[i] += b_m * mv(Iw, v[i]) - b_f * mv(R, Om.cross(mv(Ib, Om)))


@ti.func
def advance_rotation_block(r, blocks_of: ti.template(), quat: ti.template(), v_hat: ti.template(),
                           v: ti.template(), fixed: ti.template(), dt):
    """Rotational block r: q ← cay(dt ω̂) ⊗ q, and the end-of-step ω of a free block turns with the body
    (module docstring; run by the fused step kernels after the generic advance, which set ω_{k+1} in the
    start-of-step frame)."""
    i = blocks_of[r]
    h = 0.5 * dt * v_hat[i]
    d = ti.Vector([1.0, h[0], h[1], h[2]]).normalized()
    q = quat[r]
    qn = ti.Vector([d[0] * q[0] - d[1] * q[1] - d[2] * q[2] - d[3] * q[3],
                    d[0] * q[1] + d[1] * q[0] + d[2] * q[3] - d[3] * q[2],
                    d[0] * q[2] - d[1] * q[3] + d[2] * q[0] + d[3] * q[1],
                    d[0] * q[3] + d[1] * q[2] - d[2] * q[1] + d[3] * q[0]]).normalized()
    quat[r] = qn
    if fixed[i] == 0:
        v[i] = mv(quat_matrix(d), v[i])


class RigidSystem:
    """The rigid bodies of a Model, built once from their specs (``RigidBodySpec``) — the one place a rigid
    body's physics is set up — and the Model's rotational blocks.

    Per rigid body (scene order): ``names``, ``lin`` (its centre-of-mass block; ``lin + 1`` is its
    angular block), ``mass`` (kg), ``inertia`` (body frame, kg m²), ``com_local`` (centre of mass in the
    shape frame, m), ``rotation0`` (3x3, at t = 0), ``kinematic`` (pose prescribed), ``shapes`` (the
    ``geometry.shapes`` the contact tables read) and ``surfaces`` ((verts, int64 faces), shape frame, for
    output). Rotational blocks, rigid bodies first then rod segments (which share the kernels above):
    ``rot_block_np`` (global block), ``rot_inertia_np`` (body frame), ``rot_q0_np`` (quaternion at t = 0),
    ``n_rot``, and the device copies ``rot_block`` / ``rot_inertia``.

    Per step its blocks are part of the common inertial launch (``assemble_rotational_block`` in
    ``assembly.integrator.assemble_inertial``) and of the advance (``advance_rotation_block``: the
    Cayley update); on the host ``add_loads`` turns a ``Control``'s rigid-body forces into block forces
    and torques and ``pose_velocity`` gives a kinematic body's v̂ between two poses.
    """

    def __init__(self, specs: list, first_block: int, rod_rotations=((), (), ())):
        """``specs``: the RigidBodySpecs, two blocks each from ``first_block``; ``rod_rotations``: the rod
        segments' (blocks, body-frame inertias, quaternions) lists, appended after the rigid bodies'."""
        n = len(specs)
        self.names = [s.name for s in specs]
        self.lin = first_block + 2 * np.arange(n, dtype=np.int64)
        self.mass = np.array([s.mass for s in specs], float)
        self.inertia = np.array([s.inertia for s in specs], float).reshape(-1, 3, 3)
        self.com_local = np.array([s.com_local for s in specs], float).reshape(-1, 3)
        self.rotation0 = np.array([s.rotation for s in specs], float).reshape(-1, 3, 3)
        self.kinematic = np.array([s.kinematic for s in specs], bool)
        self.shapes = [s.shape for s in specs]
        self.surfaces = [(v, np.asarray(f, np.int64)) for v, f in (s.shape.surface() for s in specs)]
        blocks, inertias, quats = rod_rotations
        self.rot_block_np = np.concatenate([self.lin + 1, *blocks]).astype(np.int64)
        self.rot_inertia_np = np.concatenate([self.inertia, *inertias]).reshape(-1, 3, 3)
        q0 = np.array([quat_from_matrix(s.rotation) for s in specs], float).reshape(-1, 4)
        self.rot_q0_np = np.concatenate([q0, *quats]).reshape(-1, 4)
        self.n_rot = len(self.rot_block_np)
        self.rot_block = backend.int_array(self.rot_block_np)
        self.rot_inertia = backend.mat3_array(self.n_rot)
        if self.n_rot:
            self.rot_inertia.from_numpy(self.rot_inertia_np.astype(backend.np_real()))

    def index(self, name: str) -> int:
        """Index of rigid body ``name`` (a KeyError naming the rigid bodies if there is none)."""
        if name in self.names:
            return self.names.index(name)
        raise KeyError(f"no rigid body named {name!r}; rigid bodies: {self.names}")

    def add_loads(self, f: np.ndarray, rotations: np.ndarray, loads: list, t: float, value_at) -> None:
        """Add rigid-body loads ``(k, force)`` (``spec.force.BodyForce``) at time t to the block forces ``f``
        (n, 3): a torque (N m) to the angular block; a force (N) to the centre-of-mass block and, applied
        at a shape-frame point, its moment about the centre of mass, turned with the body (``rotations``:
        (n_rot, 3, 3) now). ``value_at(value, t)`` evaluates a constant or a function of time."""
        for k, bf in loads:
            lin = int(self.lin[k])
            value = value_at(bf.value, t)
            if bf.torque:
                f[lin + 1] += value
                continue
            f[lin] += value
            if bf.point is not None:
                f[lin + 1] += np.cross(rotations[k] @ (bf.point - self.com_local[k]), value)

    def pose_velocity(self, k: int, pose0, pose1, dt: float) -> np.ndarray:
        """(2, 3) v̂ of kinematic body k moved from ``pose0`` to ``pose1`` ((shape origin, rotation) each)
        in dt: its centre of mass's mean velocity and the Cayley angular velocity."""
        (c0, R0), (c1, R1) = pose0, pose1
        com = self.com_local[k]
        return np.stack([(c1 + R1 @ com - c0 - R0 @ com) / dt, cayley_velocity(R0, R1, dt)])

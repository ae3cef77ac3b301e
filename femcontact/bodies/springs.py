"""Linear springs and dampers between rigid bodies or a rigid body and the world, implicit in the
step system like every elastic element (docs/THEORY.md §1).

A spring joins anchor points ``p_A``, ``p_B`` (each fixed in its body, or a world point):
``d = p_B − p_A``, ``ℓ = |d|``, ``n = d / ℓ``, energy ``½ k (ℓ − ℓ₀)²``, force on B
``f = −k (ℓ − ℓ₀) n − c n nᵀ ḋ`` (the opposite on A), with ``ḋ = J v`` over the blocks
``(v_A, ω_A, v_B, ω_B)``, ``J = [−I, [r_A]×, I, −[r_B]×]`` (``r = p − x_com``). Per step

    A += Jᵀ (a_k K_t + a_kb c n nᵀ) J,     b += b_f Jᵀ f_k,

with the consistent tangent ``K_t = k n nᵀ + k max(0, 1 − ℓ₀/ℓ) (I − n nᵀ)``: the transverse
(geometric) part is kept while the spring is stretched and dropped while it is compressed, so A
stays symmetric positive definite (as the rods' Gauss–Newton stiffness); the anchors' turning
with the bodies (the rotational geometric stiffness) is left out likewise. A zero-rest-length spring
is exactly linear (``K_t = k I``, ``f = −k d``). When the anchors (nearly) coincide
(``ℓ ≤ 1e-12 m + 1e-9 ℓ₀``) the direction is undefined: the force is ``−k d`` (no push along
an unknown direction), the tangent ``k I`` and the damper acts on the whole relative velocity
(``c I``).

The force is wanted where the integrator evaluates it, at ``x_k + h v̂`` with ``h = a_k / b_f``
(``dt/2`` for the midpoint rule, ``dt`` for implicit Euler). It is linearized about the
configuration predicted at the current velocities (``x_k + h v_k``, rotations ``exp(h ω_k) R_k``):
``f(x_k + h v̂) ≈ f_pred − K_t h J (v̂ − v_k)``, so ``b`` gets ``b_f Jᵀ f_pred + a_k Jᵀ K_t J v_k``.
Linearizing about ``x_k`` instead puts the levers and the force direction half a step behind
on turning bodies, a first-order loss of energy and angular momentum (2% of the energy in 1 s at
dt 0.01 on two spinning bodies); about the prediction, what is left is second order (what the
dropped compressive and rotational geometric terms see of ``v̂ − v_k``). Under the midpoint rule
(``a_k = dt/2``, ``a_kb = 1``, ``b_f = 1``) a spring on a body that does not turn is the implicit
midpoint rule exactly: it keeps the energy and its period is ``2 atan(ω dt/2)/ω`` long.
"""
from typing import Optional

import numpy as np

from .. import backend
from ..errors import ParameterError
from ..math.quaternion import cross_matrix as skew, quat_to_matrix
from .joints import scatter_joint_terms


class _Ends:
    """One end of every spring: rigid index (−1: the world), linear block, anchor (body frame
    relative to the centre of mass, or the world point)."""

    def __init__(self, model, names: list, anchors: np.ndarray):
        rigid = model.rigid
        self.k = np.array([-1 if n is None else rigid.index(n) for n in names], np.int64)
        self.lin = np.array([-1 if k < 0 else int(rigid.lin[k]) for k in self.k], np.int64)
        self.local = anchors.copy()
        for i, k in enumerate(self.k):
            if k >= 0:              # body frame at t = 0: rotation0, centre of mass at its rest block
                self.local[i] = rigid.rotation0[k].T @ (anchors[i] - model.rest_positions[self.lin[i]])

    def points(self, x: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World anchor points (m, 3) and their levers r = p − x_com (0 for the world)."""
        body = self.k >= 0
        r = np.zeros_like(self.local)
        r[body] = np.einsum("mij,mj->mi", R[self.k[body]], self.local[body])
        p = self.local.copy()
        p[body] = x[self.lin[body]] + r[body]
        return p, r

    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        body = self.k >= 0
        return np.where(body, self.lin, -1), np.where(body, self.lin + 1, -1)


class SpringSystem:
    """All springs of a Model (module docstring): their block pairs for the pattern of A and, per
    step, their terms in A and b (a body system: ``bodies/system.py``)."""

    def __init__(self, model, specs: list):
        if not specs:
            raise ParameterError("SpringSystem needs at least one spring")
        self.model = model
        self.specs = list(specs)
        self.a = _Ends(model, [s.body_a for s in specs], np.array([s.anchor_a for s in specs], float))
        self.b = _Ends(model, [s.body_b for s in specs], np.array([s.anchor_b for s in specs], float))
        self.k = np.array([s.stiffness for s in specs], float)
        self.c = np.array([s.damping for s in specs], float)
        self.l0 = np.array([s.rest_length for s in specs], float)
        blocks = np.stack([*self.a.blocks(), *self.b.blocks()], 1)          # (m, 4)
        self.blocks = blocks
        rows = np.repeat(blocks, 4, axis=1).reshape(-1)
        cols = np.tile(blocks, (1, 4)).reshape(-1)
        keep = (rows >= 0) & (cols >= 0)
        self.coupling_pairs = (rows[keep], cols[keep])
        self._slots = None

    # ------------------------------------------------------------------ geometry
    def _geometry(self, state, h: float = 0.0):
        """(d, ℓ, r_A, r_B) now, or at the configuration predicted ``h`` s ahead at the current
        velocities (positions ``x + h v``, rotations ``exp(h ω) R``)."""
        n, n_rot = self.model.n_nodes, self.model.rigid.n_rot
        x = backend.read(state.x, n).astype(np.float64, copy=False)
        R = (quat_to_matrix(backend.read(state.q, n_rot).astype(np.float64, copy=False)) if n_rot
             else np.zeros((0, 3, 3)))
        if h != 0.0:
            v = backend.read(state.v, n).astype(np.float64, copy=False)
            x = x + h * v
            if n_rot:
                from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up
                R = Rotation.from_rotvec(h * v[self.model.rigid.rot_block_np[:n_rot]]).as_matrix() @ R
        pA, rA = self.a.points(x, R)
        pB, rB = self.b.points(x, R)
        d = pB - pA
        length = np.linalg.norm(d, axis=1)
        return d, length, rA, rB

    def lengths(self, state) -> np.ndarray:
        """Current length of every spring (m)."""
        return self._geometry(state)[1]

    def elastic_energy(self, state) -> float:
        """``Σ ½ k (ℓ − ℓ₀)²`` (J)."""
        _, length, _, _ = self._geometry(state)
        return float(0.5 * np.sum(self.k * (length - self.l0) ** 2))

    def after_advance(self, state) -> None:
        """Nothing follows from the positions."""

    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        """Add ``Jᵀ (a_k K_t + a_kb c n nᵀ) J`` to A and ``b_f Jᵀ f + a_k Jᵀ K_t J v_k`` to b for every
        spring, all evaluated at the predicted configuration (module docstring)."""
        d, length, rA, rB = self._geometry(state, coef.a_k / coef.b_f)
        n_nodes = self.model.n_nodes
        vel = backend.read(state.v, n_nodes).astype(np.float64, copy=False)
        vb = np.where(self.blocks[:, :, None] >= 0, vel[np.maximum(self.blocks, 0)], 0.0)     # (m, 4, 3)
        m = len(d)
        small = length <= 1e-12 + 1e-9 * self.l0
        safe = np.where(small, 1.0, length)
        nrm = np.where(small[:, None], 0.0, d / safe[:, None])
        nn = np.einsum("mi,mj->mij", nrm, nrm)
        eye = np.broadcast_to(np.eye(3), (m, 3, 3))
        geo = np.where(small, 1.0, np.maximum(0.0, 1.0 - self.l0 / safe))
        K = self.k[:, None, None] * np.where(small[:, None, None], eye, nn + geo[:, None, None] * (eye - nn))
        D = self.c[:, None, None] * np.where(small[:, None, None], eye, nn)
        f = -self.k[:, None] * (d - self.l0[:, None] * nrm)                  # on B, world frame
        S = coef.a_k * K + coef.a_kb * D
        J = [-eye, skew(rA), eye, -skew(rB)]
        d_rate = sum(np.einsum("mij,mj->mi", Ji, vb[:, i]) for i, Ji in enumerate(J))     # J v_k
        rhs = coef.b_f * f + coef.a_k * np.einsum("mij,mj->mi", K, d_rate)
        mats = np.empty((m, 4, 4, 3, 3))
        vecs = np.empty((m, 4, 3))
        for i, Ji in enumerate(J):
            JiT = np.transpose(Ji, (0, 2, 1))
            vecs[:, i] = np.einsum("mij,mj->mi", JiT, rhs)
            JiTS = JiT @ S
            for j, Jj in enumerate(J):
                mats[:, i, j] = JiTS @ Jj
        self._scatter(mats.reshape(-1, 3, 3), vecs.reshape(-1, 3), A, b)

    def _scatter(self, mats: np.ndarray, vecs: np.ndarray, A, b) -> None:
        """One kernel adds the (4x4 blocks per spring) terms to A and the 4 per spring to b; rows and
        slots of the world's blocks are −1 (skipped)."""
        if self._slots is None:
            rows = np.repeat(self.blocks, 4, axis=1).reshape(-1)
            cols = np.tile(self.blocks, (1, 4)).reshape(-1)
            keep = (rows >= 0) & (cols >= 0)
            slots = np.full(len(rows), -1, np.int64)
            slots[keep] = self.model.pattern.index(rows[keep], cols[keep])
            self._slots = backend.int_array(slots.astype(np.int32))
            self._rows = backend.int_array(self.blocks.reshape(-1).astype(np.int32))
            self._mats = backend.mat3_array(len(slots))
            self._vecs = backend.vec3_array(len(self.blocks.reshape(-1)))
        real = backend.np_real()
        for arr, data in ((self._mats, mats.astype(real)), (self._vecs, vecs.astype(real))):
            view = backend.host_view(arr)
            if view is not None:
                view[...] = data
            else:
                arr.from_numpy(data)
        scatter_joint_terms(self._slots, self._mats, self._rows, self._vecs, A.blocks, b)


def spring_system(model, specs: list) -> Optional[SpringSystem]:
    """The Model's SpringSystem, or None when the scene has no spring."""
    return SpringSystem(model, specs) if specs else None

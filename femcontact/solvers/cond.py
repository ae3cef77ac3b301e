"""COND: velocity-level fixed-point iteration with contact nodalization and diagonalization.

Implements COND (papers/cond-lee-lee-lee.md) Alg. 1-3 on the step system ``A v̂ = b + Jᵀλ``
(MATH.md §1, §3, §5), entirely in Taichi kernels:

    v*      = v̂ˡ − W (A v̂ˡ − b)                          (COND eq. 18, A incl. virtual coupling eq. 15)
    λ_m     = ProjectFC( −(η_m + φ̃_m) / (γ_m + ω) ),  η = J v*,  γ_m = w̄_a + w̄_b   (Alg. 2, eq. 23, 33)
    v̂**     = v* + W Jᵀ λ                                 (eq. 22)
    v̂ˡ⁺¹    = ν (u (v̂** − v̂ˡ) + v̂ˡ − v̂ˡ⁻¹) + v̂ˡ⁻¹       (Chebyshev, Alg. 3)

One kernel launch and one scalar read-back per iteration (the kernel's phases: gradient with
the matrix-free virtual-node damper, optional Barzilai–Borwein step, v*, the per-contact
projection and update, the Chebyshev combination and the residual reductions).

Unknowns are the real nodes ``0..n-1`` plus this step's virtual nodes ``n..n+V-1``; the
virtual damper of COND eq. 14/15, ``f_v = −k_v (J_v v̂_o − v̂_v)``, is applied matrix-free.

**Virtual-node gain k_v.** Per virtual node, ``k_v = virtual_gain · m_eff`` with
``1/m_eff = Σ_k ‖W_k‖_F² / (3 d_k)``, ``d_k = tr(A_kk)/3`` the diagonal scale of node k's
block of A and ``W_k`` the 3×3 weights of J_v: ``m_eff`` is the point's effective mass
(units of A: kg/s for the midpoint rule, kg for Euler) under the block-Jacobi approximation
``J_v D⁻¹ J_vᵀ``, so the damper's compliance ``1/k_v`` is ``1/virtual_gain`` of the point's own
local compliance, whatever the body type and units (barycentric FEM weights or rigid
``[I, −[r]×]``). Default virtual_gain = 10; larger is more exact (COND Prop. 1) and converges slower.
A point on a rigid body (links ``(lin, lin+1)`` of a rigid 6x6 block step) gets ``rigid_gain``
(default 100) instead, with ``1/m_eff = tr(J_v A_pp⁻¹ J_vᵀ)/3`` from the body's 6x6 block ``A_pp``
(the trace rule on a jointed body — a gripper finger on a prismatic joint, A's linear block
eig (20, 1.5e5, 1.5e5) — took m_eff from the joint's stiff rows, k_v ≈ 4.5e6× the finger's
inertia along its free axis: the finger + virtual-node mode then moved ~1e-7 per iteration, the
step-norm test passed with the finger unresolved and SAP eq. 32 e_m was 0.6): at convergence the body moves at ``λ/k_v`` relative to its stuck virtual
node (the damper's lag), so a resting body sinks until penetration recovery balances it
(``|φ| ≈ dt λ/(recovery k_v)``: 0.65 mm for a 5 cm sphere at dt = 1e-2 with gain 10, 0.065 mm
with 100) and a stuck one creeps at ``λ_t/k_v`` (1.4 mm/s on a 20° ramp at 10, 0.14 at 100).
The body's exact block step includes ``Σ k_v J_vᵀJ_v``, so the stiffer tie costs no iterations
there (a three-box stack: 390 iterations at 10, 336 at 100, tol 1e-8).

**Rod block step.** Each Cosserat rod's rows take the exact step ``W_rod = Ã_rod⁻¹``, ``Ã_rod`` the
rod's diagonal sub-block of A plus the virtual coupling's blocks ``k_v J_vᵀJ_v`` on its rows. With
the unknowns ordered ``z_j = (ẋ_j, ω_j)`` (node j, segment j; the last node alone) it is
block-tridiagonal in 6x6 blocks; ``cond_rod_factor`` factors it once per step (block LDLᵀ), and the
iteration kernel applies it by a serial forward/backward sweep per rod (parallel across rods).
Prescribed rows and the missing segment of the last block are identity rows with zero step. W need
not be diagonal there because no contact acts on a rod row: a contact on a real rod node (a node
claimed by its first contact) is moved onto a solver-private virtual node ``J_v = [I]`` on it
(``cond_reroute``; numbered after the ContactSet's, so ``virtual_velocities`` is unchanged). The
stiff stretch (EA dt²/m ≈ 4400× the node mass on the winding cable) made κ(W A) ≳ 5000 with a
nodal W; the block step takes it out of the iteration. A virtual node on rod rows takes
``1/m_eff = Σ_k tr(W_k C_k W_kᵀ) / 3`` with ``C_k = (A_rod⁻¹)_kk`` (3x3) (``cond_rod_compliance``: the
factorization and the selected-inverse recursion for the diagonal blocks), not the trace rule: the stretch and shear stiffness dominate
``tr(A_kk)`` but not the lateral compliance, and the trace rule put k_v at ~1e4× the point's lateral
mass, so the rod/virtual-node alternation (a two-block Jacobi converging at ≈ √(k_v c/(1 + k_v c)))
stalled. What remains slow is that alternation for groups of neighbouring virtual nodes (the
cable on the drum: the bending length, (dt² EI/ρA)^¼ ≈ 0.18 m, spans ~25 segments, so a group is
~15× as compliant as one point; taking k_v from the group's compliance halved the iterations but
let a cable resting on the ground sink 9 % of its radius, so it is not done). Winding cable, 160
segments: without the block step 500 iterations (the cap) every step; with it ~205 while rod
contacts acted on the centre line; ~380 since their J_v carries the segment's spin ``−[r]×``
(the plain iteration's rate went from ≈ 0.94 to ≈ 0.995 per iteration: presumably the same group
effect through twist, whose length scale dt √(G/ρ) ≈ 0.29 m is longer still; not analysed).

**Step matrix W** (one scalar per node, so Γ = J W Jᵀ is diagonal, COND Prop. 2):
``step="frobenius"``: ``w̄_i = tr(A_ii) / Σ_j ‖A_ij‖_F²`` (COND §IV-C.1), the virtual coupling's
blocks added to the rows it touches (cross terms of a modified diagonal block dropped); the
A-part is recomputed every ``recycle`` steps. ``step="bb"``: ``W = α W_F`` with the scalar α from
the preconditioned Barzilai–Borwein rule (COND §IV-C.2), ``α = sᵀz / zᵀ W_F z`` (BB2), ``s = v̂ˡ−v̂ˡ⁻¹``,
``z = A s`` (from successive gradients, no extra matvec), clamped to [0.01, 10]. W = 0 on
prescribed nodes (they keep the value their eliminated rows give, ``A_ii⁻¹ b_i``).
Gershgorin cap (``step="frobenius"``; BB scales the whole W by its own α): on the rows the virtual coupling touches (real nodes of a J_v, and the virtual
nodes) ``w̄_i ≤ 1.9 / Σ_j ‖Ã_ij‖_∞`` (Ã = A plus the virtual coupling, triangle-inequality bound),
so those rows cannot push an eigenvalue of W Ã above 1.9 (the linear part of the iteration,
I − W Ã, stays a contraction; COND Thm. 2 needs ‖I − W A‖ < 1). The Frobenius rule alone does not
bound the spectrum: where several virtual nodes hang on one triangle (a fine ball resting on a
coarse cube face: 7–9 virtual nodes, Σ k_v ≈ 30–60 × the node's own diagonal), λ_max(W Ã)
reached 2.86 and the plain iteration diverged (scenes/pile.py, step 9). Rows without virtual
coupling keep the Frobenius value (for FEM rows Gershgorin is 1.5–2× pessimistic: λ_max(W A) is
1.6–1.8 in the scenes here, and capping them would slow the slow modes for nothing). But the
Frobenius rule alone does not bound λ_max(W A) below 2 on every mesh: a slab of flat tets
(2 × 2 × 5 cm, E = 100 kPa, dt = 1e-2) reaches 2.2 and the plain iteration diverged at its
corners, far from any contact. So every ``_SCALE_EVERY`` steps 16 power iterations estimate
λ̃ = λ_max(W_F A) on the scalar-step rows (Rayleigh quotient of ``A x = λ W_F⁻¹ x``) and those
rows' W_F is scaled by ``min(1, 1.7/λ̃)`` (``w_scale``; 0.78 on that slab, 1 where λ̃ ≤ 1.7). The
Rayleigh quotient approaches λ_max from below: on that slab, whose top eigenvalues cluster
(2.264, 2.267, 2.283), 16 steps give 2.19 (4% low), hence the 1.7 target under the limit 2.

**Normal target (restitution and penetration).** The normal condition is
``J_n v̂ ≥ t_m`` (COND eq. 11 with φ̃ = −t_m), built from the gap φ (m), the step-start normal
velocity ``v_n,k = J_n v_k`` (m/s), restitution e (per contact from the ``restitution``
column of ``model.contact_params`` via ``contacts.param``, else the option) and the
penetration-recovery speed ``v_rec = min(recovery · |φ|/dt, max_recovery_speed)``:

- midpoint (v_{k+1} = 2 v̂ − v_k), with ``t_e = ((1−e)/2) · min(v_n,k, 0)``:
  ``φ ≥ 0``: ``t = min(−φ/dt, t_e)``  (speculative: may close the gap exactly within the step,
  but an impact is never required to stop harder than the restitution bound, so the end
  velocity is ≥ −e v_n,k and there is no bounce beyond e);
  ``φ < 0``: ``t = t_e + v_rec``  (end velocity −e v_n,k + 2 v_rec at most: no popping).
  Friction acts on the end-of-step tangential velocity: the tangential part of η gets the bias
  ``−½ J_t v_k``, so stick means ``J_t v̂ = ½ J_t v_k`` (``v_{k+1,t} = 0``) and slip opposes
  ``v_{k+1,t}``. (With stick as ``J_t v̂ = 0``, as in COND eq. 11, a stuck midpoint node keeps
  ``v_{k+1,t} = −v_{k,t}``: an undamped ±v flip every step.)
- implicit Euler (v_{k+1} = v̂): ``φ ≥ 0``: ``t = −φ/dt``; ``φ < 0``: ``t = max(v_rec, −e · min(v_n,k, 0))``.

**Residual and stopping.** ``θ = ‖v̂ˡ⁺¹ − v̂ˡ‖₂ / max(‖v̂ˡ⁺¹‖₂, ‖D⁻¹b‖₂)`` over all (real and
virtual) node velocities, ``D`` the diagonal of A: relative to the step's velocity scale,
floored by the unconstrained velocity so a body at rest still has a scale. Stop when
``θ < tol`` or after ``max_iter`` iterations. The returned v̂ is the last ``v̂**`` (which satisfies
the surrogate Signorini–Coulomb conditions exactly with the returned λ, COND Remark 1).
COND's θ (Alg. 1 line 13) is the absolute ``‖v̂ˡ⁺¹ − v̂ˡ‖`` with thresholds 1e-6 to 1e-3 "adjusted
according to the scenario" (§V-E); ours is relative. θ is a step norm, i.e. the W-scaled
momentum residual, not the error: for a plain iteration contracting at rate ϱ the error is
about θ/(1 − ϱ). On the dragged mat (E = 50 kPa, 5 mm layers: A's diagonal is ~480× its mass
part, κ(W A) ≈ 2850, ϱ = 0.9994) the plain iteration stops at tol 1e-5 after ~90 iterations with
the step's velocity change hardly resolved (relative error 1.6e-2, the warm start's own error is
1.7e-2), and its SAP eq. 32 momentum error e_m is ~3e-3 at tol 1e-5 and ~3e-4 at 1e-6.

**Chebyshev** (Alg. 3): ν = 1 for the first ``chebyshev_start`` iterations; ϱ from COND eq. 34,
``min(‖Δˡ‖/‖Δˡ⁻¹‖, 1)``, evaluated on those unaccelerated iterates (the largest of the last three
ratios, at most 0.999; with ``rho_adapt`` at least ``1 − 1.25 (1 − ϱ_prev)``, ϱ_prev the ϱ the previous step ended with: recycled, but decaying when no longer needed). Eq. 34 on
a few early iterates measures the fast modes, not the spectral radius (0.85–0.97 on the mat,
whose ϱ is 0.9994), and a Chebyshev iteration tuned to ϱ̃ < ϱ leaves the modes above ϱ̃ converging
at ``(x + √(x²−ϱ̃²))/(1 + √(1−ϱ̃²))`` (0.9977 per iteration for x = 0.9994, ϱ̃ = 0.965: barely
faster than plain). ``rho_adapt`` (default) corrects ϱ from the accelerated iterates: every 24
iterations (after 8 of settling) the observed rate r of the step norms gives the limiting
eigenvalue x = (c² + ϱ̃²)/(2c), c = r (1 + √(1−ϱ̃²)) (the formula above solved for x); if x is
clearly larger the recurrence restarts with ϱ̃ = 1 − 1.5 (1 − x), at most 0.9995. It stays
below x on purpose: the strict operator makes the iteration non-symmetric (friction couples the
normal into the tangent), and Chebyshev tuned to ϱ̃ converges only for eigenvalues inside the
ellipse with foci ±ϱ̃ through 1, whose half-width √(1−ϱ̃²) shrinks to 0.02 at ϱ̃ = 0.9998: on
the mat ϱ̃ = 0.9997 diverged slowly while 0.9994 converged. If the step norm stops decreasing
after an increase (or the residual grows 100× above its value when acceleration began), ϱ̃ backs
off (1 − ϱ̃ tripled) under a lowered ceiling. The plain step that restarts the recurrence is not
tested for convergence (an accelerated step is ~1/(1−ϱ̃) times the residual, a plain one ~1
times). Not with ``step="bb"`` (its α changes the iteration every step). ``rho`` fixes ϱ
instead; ``rho_adapt=False`` holds the eq. 34 value for the step.

Options (``Scene(solver="cond", solver_options={...})``), validated in ``CondOptions``:
operator "strict" | "proximal" (default strict); omega ≥ 0 (proximal regularization Ω = ω I,
COND eq. 33, in units of J v̂ per λ; default 0); step "frobenius" | "bb"; recycle ≥ 1 (steps a
Frobenius W is reused; default 1); chebyshev (default True); chebyshev_start (default 8);
rho (None = estimate; else in (0, 1)); rho_adapt (default True); under_relaxation u in (0, 1] (default 0.9);
tol (default 1e-6); max_iter (default 500); warm_start (default True: start from the incoming
v̂, i.e. the previous step's solution; virtual nodes always from J_v v̂_o; λ needs no warm start
because every iteration recomputes it from v*); restitution e in [0, 1] (default 0);
recovery in [0, 1] (fraction of the penetration recovered per step, default 0.2);
max_recovery_speed ≥ 0 (m/s, default 0.05); virtual_gain > 0 (default 10); rigid_gain > 0 (default 100).
"""
import math
import time
from dataclasses import dataclass, fields
from typing import Optional

import numpy as np
import taichi as ti

from .. import backend
from ..errors import ParameterError
from .base import SolveStats
from .projection import PROXIMAL, STRICT, project

_BB_LO, _BB_HI = 0.01, 10.0
_POWER_STEPS = 16     # power iterations for λ_max(W_F A) (step="frobenius") ...
_SCALE_EVERY = 25     # ... every this many steps (W_F A's spectrum moves little between steps)
_LAMBDA_TARGET = 1.7  # W_F is scaled so that the estimated λ_max(W_F A) is at most this (the estimate is low)
_W_CAP = 1.9          # Gershgorin cap w_i Σ_j ‖Ã_ij‖_∞ ≤ 1.9 on rows the virtual coupling touches
_RHO_MAX = 0.999
_RHO_ADAPT_MAX = 0.9995   # ϱ adapted from the accelerated rate stays below this
_ADAPT_SETTLE, _ADAPT_WINDOW = 8, 24   # iterations after a (re)start before the rate check; window of the check
_ADAPT_MARGIN = 1.5       # adapted ϱ = 1 − margin (1 − x): below the estimated eigenvalue x
_RHO_DECAY = 1.25          # the recycled ϱ starts a step at 1 − decay (1 − ϱ_prev) (module docstring)


@dataclass
class CondOptions:
    operator: str = "strict"
    omega: float = 0.0
    step: str = "frobenius"
    recycle: int = 1
    chebyshev: bool = True
    chebyshev_start: int = 8
    rho: Optional[float] = None
    rho_adapt: bool = True
    under_relaxation: float = 0.9
    tol: float = 1e-6
    max_iter: int = 500
    warm_start: bool = True
    restitution: float = 0.0
    recovery: float = 0.2
    max_recovery_speed: float = 0.05
    virtual_gain: float = 10.0
    rigid_gain: float = 100.0

    @classmethod
    def from_dict(cls, options: Optional[dict]) -> "CondOptions":
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ParameterError(f"unknown COND option(s) {', '.join(map(repr, unknown))}; "
                                 f"known options: {', '.join(sorted(known))}")
        o = cls(**options)
        o.validate()
        return o

    def validate(self) -> None:
        def num(name, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
            val = getattr(self, name)
            ok_type = isinstance(val, (int, np.integer)) if integer else isinstance(val, (int, float, np.number))
            if isinstance(val, bool) or not ok_type or not math.isfinite(float(val)):
                kind = "an integer" if integer else "a finite number"
                raise ParameterError(f"COND option {name} must be {kind}, got {val!r}")
            v = float(val)
            bad = (lo is not None and (v <= lo if lo_open else v < lo)) or \
                  (hi is not None and (v >= hi if hi_open else v > hi))
            if bad:
                lb = "" if lo is None else ("(" if lo_open else "[") + f"{lo:g}"
                ub = "inf)" if hi is None else f"{hi:g}" + (")" if hi_open else "]")
                raise ParameterError(f"COND option {name} must be in {lb or '(-inf'}, {ub}, got {val!r}")

        if self.operator not in ("strict", "proximal"):
            raise ParameterError(f"COND option operator must be 'strict' or 'proximal', got {self.operator!r}")
        if self.step not in ("frobenius", "bb"):
            raise ParameterError(f"COND option step must be 'frobenius' or 'bb' (Barzilai-Borwein), got {self.step!r}")
        for name in ("chebyshev", "warm_start", "rho_adapt"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterError(f"COND option {name} must be True or False, got {getattr(self, name)!r}")
        num("omega", 0.0)
        num("recycle", 1, integer=True)
        num("chebyshev_start", 2, integer=True)
        if self.rho is not None:
            num("rho", 0.0, 1.0, lo_open=True, hi_open=True)
        num("under_relaxation", 0.0, 1.0, lo_open=True)
        num("tol", 0.0, lo_open=True)
        num("max_iter", 1, integer=True)
        num("restitution", 0.0, 1.0)
        num("recovery", 0.0, 1.0)
        num("max_recovery_speed", 0.0)
        num("virtual_gain", 0.0, lo_open=True)
        num("rigid_gain", 0.0, lo_open=True)


# ---------------------------------------------------------------------------------------------- kernels
# Packed work arrays (each ndarray argument costs ~8 µs per launch from Python here, so the
# iteration kernel takes five):
#   P  (i32)          indptr (n0+1) followed by the column indices of A's pattern
#   V  (vec3, 8 × N)  rows 0 v̂ˡ, 1 v̂ˡ⁻¹, 2 v*/v̂**, 3 gradient, 4 previous gradient, 5 b, 6 (w̄, 0, 0)
#   C  (f, c × 20)    per contact: frame R row-major [0:9], mu1 [9], mu2 [10], −t [11], v_world [12:15],
#                     λ [15:18], node_a [18], node_b [19], tangential bias [20:22]
#   VN (f, V × 41)    per virtual node: J_v nodes [0:4] (−1 unused), 3×3 weights [4:40] row-major, k_v [40]
_P_STRIDE = 22
_VN_STRIDE = 41


@ti.func
def _side_velocity(node, n0, vn_node: ti.template(), vn_weight: ti.template(), v: ti.template(), world):
    """Velocity of one side of a contact: a real node's v, a virtual node's J_v v, or ``world`` (node -1)."""
    out = world
    if node >= n0:
        out = ti.Vector.zero(float, 3)
        for k in ti.static(range(4)):
            j = vn_node[node - n0][k]
            if j >= 0:
                out += vn_weight[node - n0, k] @ v[j]
    elif node >= 0:
        out = v[node]
    return out


@ti.func
def _frame(C: ti.types.ndarray(), m: ti.i32) -> ti.math.mat3:
    return ti.Matrix([[C[m, 0], C[m, 1], C[m, 2]], [C[m, 3], C[m, 4], C[m, 5]], [C[m, 6], C[m, 7], C[m, 8]]])


@ti.func
def _vweight(VN: ti.types.ndarray(), q: ti.i32, k: ti.template()) -> ti.math.mat3:
    o = 4 + 9 * k
    return ti.Matrix([[VN[q, o + 0], VN[q, o + 1], VN[q, o + 2]], [VN[q, o + 3], VN[q, o + 4], VN[q, o + 5]],
                      [VN[q, o + 6], VN[q, o + 7], VN[q, o + 8]]])


@ti.kernel
def cond_pattern(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), P: ti.types.ndarray(), n: ti.i32,
                 nnz: ti.i32):
    """P = [indptr, indices] (A's fixed pattern, packed once per model)."""
    for i in range(n + 1):
        P[i] = indptr[i]
    for k in range(nnz):
        P[n + 1 + k] = indices[k]


@ti.func
def _inf_norm(M: ti.math.mat3) -> float:
    """‖M‖_∞ = max_r Σ_c |M_rc| of a 3x3 block."""
    out = 0.0
    for r in ti.static(range(3)):
        out = ti.max(out, ti.abs(M[r, 0]) + ti.abs(M[r, 1]) + ti.abs(M[r, 2]))
    return out


@ti.kernel
def cond_weights_base(indptr: ti.types.ndarray(), blocks: ti.types.ndarray(), diag: ti.types.ndarray(),
                      tr: ti.types.ndarray(), rs: ti.types.ndarray(), l1: ti.types.ndarray(), n: ti.i32):
    """Frobenius-rule ingredients of A's block rows (COND §IV-C.1): tr(A_ii) and Σ_j ‖A_ij‖_F²;
    and the Gershgorin row bound Σ_j ‖A_ij‖_∞ (≥ every scalar row's Σ |a_rc| of the block row)."""
    for i in range(n):
        s = 0.0
        g = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += (blocks[k] * blocks[k]).sum()
            g += _inf_norm(blocks[k])
        tr[i] = blocks[diag[i]].trace()
        rs[i] = s
        l1[i] = g


@ti.kernel
def cond_power_step(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                    tr: ti.types.ndarray(), rs: ti.types.ndarray(), fixed: ti.types.ndarray(),
                    blockstep: ti.types.ndarray(), x: ti.types.ndarray(), y: ti.types.ndarray(),
                    out: ti.types.ndarray(), c: float, n: ti.i32):
    """One power-iteration step on W_F A over the scalar-step rows (W_F = tr/rs, zero on prescribed and
    block rows): y = W_F A (c x); out += (xᵀAx, xᵀW_F⁻¹x, yᵀy) for x = c·x, whose ratio is the
    Rayleigh quotient of A x = λ W_F⁻¹ x."""
    for i in range(n):
        w = 0.0
        if fixed[i] == 0 and blockstep[i] == 0 and rs[i] > 0.0:
            w = tr[i] / rs[i]
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += blocks[k] @ (c * x[indices[k]])
        yi = w * acc
        if w > 0.0:
            xi = c * x[i]
            out[0] += xi.dot(acc)
            out[1] += xi.dot(xi) / w
            out[2] += yi.dot(yi)
        y[i] = yi


@ti.kernel
def cond_scale_rows(tr: ti.types.ndarray(), blockstep: ti.types.ndarray(), s: float, n: ti.i32):
    """tr_i *= s on the scalar-step rows (W_F = s·tr/rs)."""
    for i in range(n):
        if blockstep[i] == 0:
            tr[i] *= s


@ti.kernel
def cond_setup(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), b: ti.types.ndarray(),
               fixed: ti.types.ndarray(), v_in: ti.types.ndarray(), v_old: ti.types.ndarray(),
               tr: ti.types.ndarray(), rs: ti.types.ndarray(), tr2: ti.types.ndarray(), rs2: ti.types.ndarray(),
               l1: ti.types.ndarray(), l12: ti.types.ndarray(), V: ti.types.ndarray(), VN: ti.types.ndarray(), C: ti.types.ndarray(),
               vn_node: ti.types.ndarray(), vn_weight: ti.types.ndarray(), vn_gain: ti.types.ndarray(),
               node_a: ti.types.ndarray(), node_b: ti.types.ndarray(), frame: ti.types.ndarray(),
               phi: ti.types.ndarray(), v_world: ti.types.ndarray(), mu: ti.types.ndarray(),
               param: ti.types.ndarray(), rest_table: ti.types.ndarray(), blockstep: ti.types.ndarray(),
               pair_slot: ti.types.ndarray(), WB: ti.types.ndarray(), WB2: ti.types.ndarray(), RT: ti.types.ndarray(),
               CR: ti.types.ndarray(), n0: ti.i32, nv: ti.i32, nvx: ti.i32, nc: ti.i32, n_rest: ti.i32, warm: ti.i32, midpoint: ti.i32,
               gain: float, rigid_gain: float, dt: float, e_default: float, recovery: float, vrec_max: float,
               wcap: float) -> float:
    """Per-step setup: k_v (written to the ContactSet too), W (Frobenius), initial v̂ (real,
    prescribed, virtual), the packed contact rows and the normal targets t_m (module docstring).
    Returns ‖D⁻¹ b‖² (the velocity scale of the residual)."""
    # virtual nodes: gains from the effective mass of the point (module docstring), packed copy
    # (q ≥ nv: the solver's own virtual nodes on rod rows, cond_reroute)
    for q in range(nvx):
        for k in ti.static(range(4)):
            j = -1
            Wk = ti.Matrix.zero(float, 3, 3)
            if q < nv:
                j = vn_node[q][k]
                Wk = vn_weight[q, k]
            else:
                if ti.static(k == 0):
                    j = RT[2 * nc + q - nv]
                    Wk = ti.Matrix.identity(float, 3)
            VN[q, k] = ti.cast(j, float)
            for r in ti.static(range(3)):
                for c in ti.static(range(3)):
                    VN[q, 4 + 9 * k + 3 * r + c] = Wk[r, c]
    for q in range(nvx):
        inv_m = 0.0
        for k in ti.static(range(4)):
            j = ti.cast(VN[q, k], ti.i32)
            Wk = _vweight(VN, q, k)
            if j >= 0:
                if CR[j].trace() > 0.0:     # a free rod row: the rod's own 3x3 compliance (cond_rod_compliance)
                    inv_m += (Wk @ CR[j] @ Wk.transpose()).trace() / 3.0
                elif blockstep[j] == 1:      # a rotational block (rigid spin): its exact 3x3 compliance
                    inv_m += (Wk @ blocks[diag[j]].inverse() @ Wk.transpose()).trace() / 3.0
                else:
                    d = ti.max(blocks[diag[j]].trace() / 3.0, 1e-300)
                    inv_m += (Wk * Wk).sum() / (3.0 * d)
        kv = 0.0
        j0 = ti.cast(VN[q, 0], ti.i32)
        if inv_m > 0.0:
            kv = gain / inv_m
            if blockstep[j0] == 2 and ti.cast(VN[q, 1], ti.i32) == j0 + 1:     # a point on a rigid body
                # its compliance from the body's 6x6 block, J_v A_pp⁻¹ J_vᵀ (not the trace rule: a
                # joint's stiff rows dominate tr(A_kk) but leave the free directions at the body's
                # inertia, so the trace rule overstated m_eff there by up to ~1e6 and froze the
                # body's motion along them; module docstring)
                Pi = blocks[diag[j0]].inverse()
                Q = ti.Matrix.zero(float, 3, 3)
                if pair_slot[j0] >= 0:
                    Q = blocks[pair_slot[j0]]
                Sa = (blocks[diag[j0 + 1]] - Q.transpose() @ Pi @ Q).inverse()
                Pla = -Pi @ Q @ Sa
                Pll = Pi - Pla @ Q.transpose() @ Pi
                W0 = _vweight(VN, q, 0)
                W1 = _vweight(VN, q, 1)
                Cq = W0 @ Pll @ W0.transpose() + W0 @ Pla @ W1.transpose() \
                    + W1 @ Pla.transpose() @ W0.transpose() + W1 @ Sa @ W1.transpose()
                inv_r = Cq.trace() / 3.0
                if inv_r > 0.0:
                    kv = rigid_gain / inv_r
        if q < nv:
            vn_gain[q] = kv
        VN[q, 40] = kv
    for i in range(n0):
        tr2[i] = tr[i]
        rs2[i] = rs[i]
        l12[i] = l1[i]
        if blockstep[i] != 0:
            WB[i] = blocks[diag[i]]
            WB2[i] = ti.Matrix.zero(float, 3, 3)
            if blockstep[i] == 2 and pair_slot[i] >= 0:
                WB2[i] = blocks[pair_slot[i]]
    # the virtual coupling's blocks (COND eq. 15) in the real rows they touch
    for q in range(nvx):
        kv = VN[q, 40]
        for k in ti.static(range(4)):
            j = ti.cast(VN[q, k], ti.i32)
            if j >= 0:
                Wk = _vweight(VN, q, k)
                if blockstep[j] != 0:
                    WB[j] += kv * (Wk.transpose() @ Wk)
                if blockstep[j] == 2:
                    for l in ti.static(range(4)):
                        if ti.cast(VN[q, l], ti.i32) == j + 1:
                            WB2[j] += kv * (Wk.transpose() @ _vweight(VN, q, l))
                tr2[j] += kv * (Wk * Wk).sum()
                add = kv * kv * (Wk * Wk).sum()
                g = kv * _inf_norm(Wk.transpose())
                for l in ti.static(range(4)):
                    if VN[q, l] >= 0.0:
                        M = kv * (Wk.transpose() @ _vweight(VN, q, l))
                        add += (M * M).sum()
                        g += _inf_norm(M)
                rs2[j] += add
                l12[j] += g
    scale = 0.0
    for i in range(n0):
        D = blocks[diag[i]]
        w = 0.0
        if fixed[i] == 0 and rs2[i] > 0.0:
            w = tr2[i] / rs2[i]
            if l12[i] > l1[i]:      # a row the virtual coupling touches: Gershgorin cap (module docstring)
                w = ti.min(w, wcap / l12[i])
        dscale = ti.max(D.trace() / 3.0, 1e-300)
        vi = v_in[i]
        if fixed[i] != 0:
            vi = D.inverse() @ b[i]
        elif warm == 0:
            vi = b[i] / dscale
        V[0, i] = vi
        V[1, i] = vi
        V[3, i] = ti.Vector.zero(float, 3)
        V[4, i] = ti.Vector.zero(float, 3)
        V[5, i] = b[i]
        V[7, i] = ti.Vector.zero(float, 3)
        V[8, i] = ti.Vector.zero(float, 3)
        V[6, i] = ti.Vector([w, 0.0, 0.0])
        if blockstep[i] != 0 and fixed[i] == 0:
            V[6, i] = ti.Vector([w, 1.0, -1.0])
            if blockstep[i] == 4:          # a rod row: the rod's block step (V[7] = Ã_rod⁻¹ g)
                V[6, i] = ti.Vector([w, 2.0, -1.0])
        scale += (b[i] / dscale).norm_sqr()
    # block steps: 3x3 inverses, and the 6x6 inverse of a rigid body's (linear, angular) pair by
    # its Schur complement (W_ll, W_la in the linear row; W_aa, W_al = W_laᵀ in the angular row)
    for i in range(n0):
        if fixed[i] == 0 and blockstep[i] == 1:
            WB[i] = WB[i].inverse()
        elif fixed[i] == 0 and blockstep[i] == 2 and fixed[i + 1] == 0:
            Pi = WB[i].inverse()
            Q = WB2[i]
            Si = (WB[i + 1] - Q.transpose() @ Pi @ Q).inverse()
            Wla = -Pi @ Q @ Si
            WB[i] = Pi - Wla @ Q.transpose() @ Pi
            WB2[i] = Wla
            WB[i + 1] = Si
            WB2[i + 1] = Wla.transpose()
            V[6, i][2] = ti.cast(i + 1, float)
            V[6, i + 1][2] = ti.cast(i, float)
        elif fixed[i] == 0 and blockstep[i] == 2:
            WB[i] = WB[i].inverse()
    for q in range(nvx):
        kv = VN[q, 40]
        sw = 0.0
        gv = 0.0
        vv = ti.Vector.zero(float, 3)
        for k in ti.static(range(4)):
            j = ti.cast(VN[q, k], ti.i32)
            if j >= 0:
                Wk = _vweight(VN, q, k)
                sw += (Wk * Wk).sum()
                gv += _inf_norm(Wk)
                vv += Wk @ V[0, j]
        w = 0.0
        if kv > 0.0:
            w = ti.min(3.0 * kv / (kv * kv * (3.0 + sw)), wcap / (kv * (1.0 + gv)))
        i = n0 + q
        V[0, i] = vv
        V[1, i] = vv
        V[3, i] = ti.Vector.zero(float, 3)
        V[4, i] = ti.Vector.zero(float, 3)
        V[5, i] = ti.Vector.zero(float, 3)
        V[6, i] = ti.Vector([w, 0.0, 0.0])
    # contacts: packed rows and normal targets
    for m in range(nc):
        R = frame[m]
        nb = node_b[m]
        na = node_a[m]
        vb = _side_velocity(nb, n0, vn_node, vn_weight, v_old, ti.Vector.zero(float, 3))
        va = _side_velocity(na, n0, vn_node, vn_weight, v_old, v_world[m])
        vck = R @ (vb - va)
        vnk = vck[2]
        e = e_default
        p = param[m]
        if p >= 0 and p < n_rest:
            r = rest_table[p]
            if r == r:  # not NaN
                e = ti.min(ti.max(r, 0.0), 1.0)
        ph = phi[m]
        vrec = ti.min(recovery * ti.abs(ph) / dt, vrec_max)
        t = 0.0
        if midpoint != 0:
            te = 0.5 * (1.0 - e) * ti.min(vnk, 0.0)
            if ph >= 0.0:
                t = ti.min(-ph / dt, te)
            else:
                t = te + vrec
        else:
            if ph >= 0.0:
                t = -ph / dt
            else:
                t = ti.max(vrec, -e * ti.min(vnk, 0.0))
        for r in ti.static(range(3)):
            for c in ti.static(range(3)):
                C[m, 3 * r + c] = R[r, c]
        vw = v_world[m]
        C[m, 9] = mu[m][0]
        C[m, 10] = mu[m][1]
        C[m, 11] = -t
        C[m, 12] = vw[0]
        C[m, 13] = vw[1]
        C[m, 14] = vw[2]
        C[m, 15] = 0.0
        C[m, 16] = 0.0
        C[m, 17] = 0.0
        C[m, 18] = ti.cast(RT[2 * m], float)
        C[m, 19] = ti.cast(RT[2 * m + 1], float)
        C[m, 20] = -0.5 * vck[0] if midpoint != 0 else 0.0
        C[m, 21] = -0.5 * vck[1] if midpoint != 0 else 0.0
    return scale


# ---------------------------------------------------------------------------------------------- rod block step
# Per rod, unknowns z_j = (ẋ_j, ω_j) (node j, segment j; the last node alone): its diagonal
# sub-block of Ã (A plus the virtual coupling k_v J_vᵀJ_v on its rows) is block-tridiagonal in
# 6x6 blocks D_j (diagonal) and L_j = Ã(z_j, z_{j−1}). Block LDLᵀ once per step:
#   S_0 = D_0,  G_j = L_j S_{j−1}⁻¹,  S_j = D_j − G_j L_jᵀ;
# each iteration d = Ã_rod⁻¹ g by  y_j = g_j − G_j y_{j−1},  d_j = S_j⁻¹ y_j − G_{j+1}ᵀ d_{j+1}.
# A missing half (the last block's segment) or a prescribed row is an identity row with zero step.
#   RI (i32): [0, nrods] block starts per rod; [rows_at + 2 j + h] row of half h of block j (−1: none);
#             [pos_at + i] 2·block + half of real row i (−1: not a rod row)
#   RSL (i32, NB × 8): A's slots of D_j (xx, xθ, θx, θθ) and L_j (same order; −1 absent)
#   DL (f, NB × 72): D_j, L_j row-major; F (f, NB × 78): S_j⁻¹ [0:36], G_j [36:72], sweep vector [72:78]
_F_STRIDE = 78


@ti.func
def _inv6(S):
    """Inverse of a 6x6 SPD matrix (Gauss–Jordan without pivoting: the pivots of an SPD matrix are positive)."""
    M = S
    I = ti.Matrix.identity(float, 6)
    for k in ti.static(range(6)):
        p = 1.0 / M[k, k]
        for c in ti.static(range(6)):
            M[k, c] *= p
            I[k, c] *= p
        for r in ti.static(range(6)):
            if ti.static(r != k):
                f = M[r, k]
                for c in ti.static(range(6)):
                    M[r, c] -= f * M[k, c]
                    I[r, c] -= f * I[k, c]
    return 0.5 * (I + I.transpose())


@ti.func
def _get6(A: ti.types.ndarray(), j, off: ti.template()):
    M = ti.Matrix.zero(float, 6, 6)
    for r in ti.static(range(6)):
        for c in ti.static(range(6)):
            M[r, c] = A[j, off + 6 * r + c]
    return M


@ti.func
def _put6(A: ti.types.ndarray(), j, off: ti.template(), M):
    for r in ti.static(range(6)):
        for c in ti.static(range(6)):
            A[j, off + 6 * r + c] = M[r, c]


@ti.kernel
def cond_reroute(node_a: ti.types.ndarray(), node_b: ti.types.ndarray(), blockstep: ti.types.ndarray(),
                 RT: ti.types.ndarray(), n0: ti.i32, nv: ti.i32, nc: ti.i32) -> ti.i32:
    """A contact on a real rod row (a rod node claimed by its first contact) is moved onto a
    solver-private virtual node ``J_v = [I]`` on that row (numbered after the ContactSet's), so
    no contact touches a row of a rod's block step and Γ = J W Jᵀ stays diagonal.
    RT[2m + s] = the node side s (a, b) of contact m acts on; RT[2 nc + k] = the row of extra virtual node k.
    Returns the number of extra virtual nodes."""
    cnt = 0
    ti.loop_config(serialize=True)
    for m in range(nc):
        for s in ti.static(range(2)):
            node = node_a[m]
            if ti.static(s == 1):
                node = node_b[m]
            out = node
            if node >= 0 and node < n0:
                if blockstep[node] == 4:
                    out = n0 + nv + cnt
                    RT[2 * nc + cnt] = node
                    cnt += 1
            RT[2 * m + s] = out
    return cnt


@ti.kernel
def fill_reroute(node_a: ti.types.ndarray(), node_b: ti.types.ndarray(), RT: ti.types.ndarray(), nc: ti.i32):
    """RT[2m + s] = the contact's own nodes (no contact on a rod row)."""
    for m in range(nc):
        RT[2 * m] = node_a[m]
        RT[2 * m + 1] = node_b[m]


@ti.func
def _rod_fill(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), RI: ti.types.ndarray(), RSL: ti.types.ndarray(),
              DL: ti.types.ndarray(), nb, rows_at):
    """DL = the rods' 6x6 blocks D_j, L_j of A (identity rows for missing halves and prescribed rows)."""
    for j in range(nb):
        for h in ti.static(range(2)):
            r = RI[rows_at + 2 * j + h]
            ra = r >= 0
            if ra:
                ra = fixed[r] == 0
            for h2 in ti.static(range(2)):
                c = RI[rows_at + 2 * j + h2]
                cl = -1
                if j > 0:
                    cl = RI[rows_at + 2 * (j - 1) + h2]
                Md = ti.Matrix.zero(float, 3, 3)
                Ml = ti.Matrix.zero(float, 3, 3)
                s = RSL[j, 2 * h + h2]
                if ra and s >= 0 and c >= 0:
                    if fixed[c] == 0:
                        Md = blocks[s]
                sl = RSL[j, 4 + 2 * h + h2]
                if ra and sl >= 0 and cl >= 0:
                    if fixed[cl] == 0:
                        Ml = blocks[sl]
                if ti.static(h == h2):
                    if not ra:
                        Md = ti.Matrix.identity(float, 3)
                for a in ti.static(range(3)):
                    for b in ti.static(range(3)):
                        DL[j, 6 * (3 * h + a) + 3 * h2 + b] = Md[a, b]
                        DL[j, 36 + 6 * (3 * h + a) + 3 * h2 + b] = Ml[a, b]


@ti.func
def _rod_ldl(s0, s1, DL: ti.types.ndarray(), F: ti.types.ndarray()):
    """Block LDLᵀ of one rod's 6x6 block-tridiagonal matrix (blocks s0..s1-1 of DL: diagonal at 0,
    sub-diagonal L_j at 36): F[j, 0:36] = S_j⁻¹ (pivot inverses), F[j, 36:72] = G_j = L_j S_{j−1}⁻¹."""
    Sp = ti.Matrix.zero(float, 6, 6)
    for j in range(s0, s1):
        S = _get6(DL, j, 0)
        if j > s0:
            L = _get6(DL, j, 36)
            G = L @ Sp
            S = S - G @ L.transpose()
            _put6(F, j, 36, G)
        Sp = _inv6(S)
        _put6(F, j, 0, Sp)


@ti.kernel
def cond_rod_compliance(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), RI: ti.types.ndarray(),
                        RSL: ti.types.ndarray(), DL: ti.types.ndarray(), F: ti.types.ndarray(), CR: ti.types.ndarray(),
                        nrods: ti.i32, nb: ti.i32, rows_at: ti.i32):
    """CR[i] = (A_rod⁻¹)_ii (3x3) on free rod rows: the rod's compliance at a node, without the
    virtual coupling (m_eff of its virtual nodes, module docstring): block LDLᵀ as in
    ``cond_rod_factor``, then the selected-inverse recursion (A⁻¹)_jj = S_j⁻¹ + G_{j+1}ᵀ (A⁻¹)_{j+1,j+1} G_{j+1}."""
    _rod_fill(blocks, fixed, RI, RSL, DL, nb, rows_at)
    for rd in range(nrods):
        s0, s1 = RI[rd], RI[rd + 1]
        _rod_ldl(s0, s1, DL, F)
        Z = ti.Matrix.zero(float, 6, 6)
        for jj in range(s1 - s0):
            j = s1 - 1 - jj
            Zj = _get6(F, j, 0)
            if j < s1 - 1:
                G = _get6(F, j + 1, 36)
                Zj += G.transpose() @ Z @ G
            Z = Zj
            for h in ti.static(range(2)):
                r = RI[rows_at + 2 * j + h]
                if r >= 0:
                    c = ti.Matrix.zero(float, 3, 3)
                    if fixed[r] == 0:
                        for a in ti.static(range(3)):
                            for b in ti.static(range(3)):
                                c[a, b] = Z[3 * h + a, 3 * h + b]
                    CR[r] = c


@ti.kernel
def cond_rod_factor(blocks: ti.types.ndarray(), fixed: ti.types.ndarray(), VN: ti.types.ndarray(),
                    RI: ti.types.ndarray(), RSL: ti.types.ndarray(), DL: ti.types.ndarray(), F: ti.types.ndarray(),
                    nvx: ti.i32, nrods: ti.i32, nb: ti.i32, rows_at: ti.i32, pos_at: ti.i32):
    """Per-step block LDLᵀ of every rod's Ã_rod (see above)."""
    _rod_fill(blocks, fixed, RI, RSL, DL, nb, rows_at)
    # the virtual coupling k_v W_kᵀ W_l on pairs of free rod rows (tridiagonal by construction)
    for q in range(nvx):
        kv = VN[q, 40]
        for k in ti.static(range(4)):
            jk = ti.cast(VN[q, k], ti.i32)
            if jk >= 0:
                pk = RI[pos_at + jk]
                if pk >= 0 and fixed[jk] == 0:
                    for l in ti.static(range(4)):
                        jl = ti.cast(VN[q, l], ti.i32)
                        if jl >= 0:
                            pl = RI[pos_at + jl]
                            if pl >= 0 and fixed[jl] == 0:
                                bk, hk, bl, hl = pk // 2, pk % 2, pl // 2, pl % 2
                                off = -1
                                if bk == bl:
                                    off = 0
                                elif bk == bl + 1:
                                    off = 36
                                if off >= 0:
                                    M = kv * (_vweight(VN, q, k).transpose() @ _vweight(VN, q, l))
                                    for a in ti.static(range(3)):
                                        for b in ti.static(range(3)):
                                            ti.atomic_add(DL[bk, off + 6 * (3 * hk + a) + 3 * hl + b], M[a, b])
    for rd in range(nrods):
        _rod_ldl(RI[rd], RI[rd + 1], DL, F)


@ti.func
def _rod_solve(V: ti.types.ndarray(), RI: ti.types.ndarray(), F: ti.types.ndarray(), nrods, rows_at):
    """V[7] = Ã_rod⁻¹ V[3] on every free rod row (parallel over rods, serial sweeps along each)."""
    for rd in range(nrods):
        s0, s1 = RI[rd], RI[rd + 1]
        y = ti.Vector.zero(float, 6)
        for j in range(s0, s1):
            g = ti.Vector.zero(float, 6)
            for h in ti.static(range(2)):
                r = RI[rows_at + 2 * j + h]
                if r >= 0:
                    if V[6, r][1] > 1.5:
                        gr = V[3, r]
                        for a in ti.static(range(3)):
                            g[3 * h + a] = gr[a]
            if j > s0:
                g -= _get6(F, j, 36) @ y
            y = g
            for a in ti.static(range(6)):
                F[j, 72 + a] = y[a]
        d = ti.Vector.zero(float, 6)
        for jj in range(s1 - s0):
            j = s1 - 1 - jj
            yj = ti.Vector.zero(float, 6)
            for a in ti.static(range(6)):
                yj[a] = F[j, 72 + a]
            dn = _get6(F, j, 0) @ yj
            if j < s1 - 1:
                dn -= _get6(F, j + 1, 36).transpose() @ d
            d = dn
            for h in ti.static(range(2)):
                r = RI[rows_at + 2 * j + h]
                if r >= 0:
                    if V[6, r][1] > 1.5:
                        V[7, r] = ti.Vector([d[3 * h], d[3 * h + 1], d[3 * h + 2]])


@ti.kernel
def cond_iterate(P: ti.types.ndarray(), blocks: ti.types.ndarray(), V: ti.types.ndarray(), C: ti.types.ndarray(),
                 VN: ti.types.ndarray(), WB: ti.types.ndarray(), WB2: ti.types.ndarray(), RI: ti.types.ndarray(),
                 F: ti.types.ndarray(), n0: ti.i32, nv: ti.i32, nc: ti.i32, nrods: ti.i32, rows_at: ti.i32,
                 alpha_in: float, bb: ti.i32, nu: float, u: float, op: ti.i32, omega: float) -> ti.math.vec4:
    """One VL-FPI iteration (COND Alg. 1/3) on the packed arrays (see above).
    Returns (‖v̂ˡ⁺¹−v̂ˡ‖², ‖v̂ˡ⁺¹‖², α, ‖v̂**−v̂ˡ‖²)."""
    n = n0 + nv
    # gradient g = A v̂ − b of the augmented system (COND eq. 15), virtual damper matrix-free
    for i in range(n0):
        acc = -V[5, i]
        for k in range(P[i], P[i + 1]):
            acc += blocks[k] @ V[0, P[n0 + 1 + k]]
        V[3, i] = acc
    for q in range(nv):
        d = -V[0, n0 + q]
        for k in ti.static(range(4)):
            j = ti.cast(VN[q, k], ti.i32)
            if j >= 0:
                d += _vweight(VN, q, k) @ V[0, j]
        kd = VN[q, 40] * d
        V[3, n0 + q] = -kd
        for k in ti.static(range(4)):
            j = ti.cast(VN[q, k], ti.i32)
            if j >= 0:
                V[3, j] += _vweight(VN, q, k).transpose() @ kd
    # rod rows: d = Ã_rod⁻¹ g (exact block step, before BB, which needs W z = d − d_prev)
    _rod_solve(V, RI, F, nrods, rows_at)
    # Barzilai-Borwein (BB2, preconditioned by W_F): α = sᵀz / zᵀ W_F z
    alpha = alpha_in
    if bb != 0:
        sz = 0.0
        zwz = 0.0
        for i in range(n):
            w = V[6, i][0]
            s = V[0, i] - V[1, i]
            z = V[3, i] - V[4, i]
            if i < n0 and V[6, i][1] > 1.5:      # rod row: W z = Ã_rod⁻¹ g − Ã_rod⁻¹ g_prev
                sz += s.dot(z)
                zwz += z.dot(V[7, i] - V[8, i])
            elif i < n0 and V[6, i][1] > 0.5:      # block row: zᵀ W z with the block step actually taken
                wz = WB[i] @ z
                p = ti.cast(V[6, i][2], ti.i32)
                if p >= 0:
                    wz += WB2[i] @ (V[3, p] - V[4, p])
                sz += s.dot(z)
                zwz += z.dot(wz)
            elif w > 0.0:
                sz += s.dot(z)
                zwz += w * z.norm_sqr()
        for i in range(n):
            V[4, i] = V[3, i]
            if i < n0:
                V[8, i] = V[7, i]
        if sz > 0.0 and zwz > 0.0:
            alpha = ti.min(ti.max(sz / zwz, 0.01), 10.0)
    # v* = v̂ − W g
    for i in range(n):
        if i < n0 and V[6, i][1] > 1.5:      # rod block step (never in a contact: cond_reroute)
            V[2, i] = V[0, i] - alpha * V[7, i]
        elif i < n0 and V[6, i][1] > 0.5:      # block step (rigid bodies; never in a contact)
            d = WB[i] @ V[3, i]
            p = ti.cast(V[6, i][2], ti.i32)
            if p >= 0:
                d += WB2[i] @ V[3, p]
            V[2, i] = V[0, i] - alpha * d
        else:
            V[2, i] = V[0, i] - (alpha * V[6, i][0]) * V[3, i]
    # one-shot contact solve (Alg. 2) and v̂** = v* + W Jᵀ λ
    for m in range(nc):
        R = _frame(C, m)
        na = ti.cast(C[m, 18], ti.i32)
        nb = ti.cast(C[m, 19], ti.i32)
        wb = alpha * V[6, nb][0]
        wa = 0.0
        va = ti.Vector([C[m, 12], C[m, 13], C[m, 14]])
        if na >= 0:
            wa = alpha * V[6, na][0]
            va = V[2, na]
        gam = wa + wb
        lm = ti.Vector.zero(float, 3)
        if gam > 0.0:
            eta = R @ (V[2, nb] - va) + ti.Vector([C[m, 20], C[m, 21], C[m, 11]])
            r = project(-eta / (gam + omega), C[m, 9], C[m, 10], op)
            lm = ti.Vector([r[0], r[1], r[2]])
            f = R.transpose() @ lm
            V[2, nb] += wb * f
            if na >= 0:
                V[2, na] -= wa * f
        C[m, 15] = lm[0]
        C[m, 16] = lm[1]
        C[m, 17] = lm[2]
    # Chebyshev combination (Alg. 3 line 9) and residual
    out = ti.Vector.zero(float, 4)
    for i in range(n):
        vi = V[0, i]
        vs = V[2, i]
        vl = V[1, i]
        vn = nu * (u * (vs - vi) + vi - vl) + vl
        V[1, i] = vi
        V[0, i] = vn
        out += ti.Vector([(vn - vi).norm_sqr(), vn.norm_sqr(), 0.0, (vs - vi).norm_sqr()])
    out[2] = alpha
    return out


@ti.kernel
def cond_finish(V: ti.types.ndarray(), C: ti.types.ndarray(), v_hat: ti.types.ndarray(),
                lam: ti.types.ndarray(), impulse: ti.types.ndarray(), status: ti.types.ndarray(),
                n0: ti.i32, nc: ti.i32, scale: float, alpha: float) -> ti.math.vec4:
    """v̂ = v̂** (real part), λ, impulses (scale·λ, N s) and status; returns the complementarity
    measures (max |min(J_n v̂ − t, γ λ_n)|, max cone violation, max(|J_n v̂| + |t|), max ‖λ‖)."""
    for i in range(n0):
        v_hat[i] = V[2, i]
    out = ti.Vector.zero(float, 4)
    for m in range(nc):
        R = _frame(C, m)
        na = ti.cast(C[m, 18], ti.i32)
        nb = ti.cast(C[m, 19], ti.i32)
        va = ti.Vector([C[m, 12], C[m, 13], C[m, 14]])
        wa = 0.0
        if na >= 0:
            va = V[2, na]
            wa = alpha * V[6, na][0]
        gam = wa + alpha * V[6, nb][0]
        vc = R @ (V[2, nb] - va)
        lm = ti.Vector([C[m, 15], C[m, 16], C[m, 17]])
        gn = vc[2] + C[m, 11]
        comp = ti.abs(ti.min(gn, gam * lm[2]))
        m1 = C[m, 9]
        m2 = C[m, 10]
        ell = 0.0
        if m1 > 0.0 and m2 > 0.0:
            ell = ti.sqrt((lm[0] / m1) ** 2 + (lm[1] / m2) ** 2)
        elif ti.abs(lm[0]) + ti.abs(lm[1]) > 0.0:
            ell = 1e300
        viol = ti.max(ell - lm[2], ti.max(-lm[2], 0.0))
        ti.atomic_max(out[0], comp)
        ti.atomic_max(out[1], viol)
        ti.atomic_max(out[2], ti.abs(vc[2]) + ti.abs(C[m, 11]))
        ti.atomic_max(out[3], lm.norm())
        st = 0
        if lm[2] > 0.0:
            st = 1
            if m1 <= 0.0 and m2 <= 0.0:
                st = 2
            elif ell >= lm[2] * (1.0 - 1e-9):
                st = 2
        status[m] = st
        lam[m] = lm
        impulse[m] = scale * lm
    return out


# ---------------------------------------------------------------------------------------------- solver
class CondSolver:
    """COND contact solver (see the module docstring); one instance per Model, reused every step."""

    name = "cond"

    def __init__(self, model, options: Optional[dict] = None):
        self.options = CondOptions.from_dict(options)
        self.model = model
        self.n0 = int(model.n_nodes)
        self._cap = 0
        self._alloc(self.n0 + 64)
        self._tr = backend.scalar_array(self.n0)
        self._rs = backend.scalar_array(self.n0)
        self._tr2 = backend.scalar_array(self.n0)
        self._rs2 = backend.scalar_array(self.n0)
        self._l1 = backend.scalar_array(self.n0)
        self._px = backend.vec3_array(self.n0)
        self._py = backend.vec3_array(self.n0)
        self._pout = backend.scalar_array(3)
        self.w_scale = 1.0
        self._steps_since_scale = None
        self._l12 = backend.scalar_array(self.n0)
        # rigid-body and rotational blocks take a 3x3 block step (they are never contact nodes,
        # so W stays diagonal on every node a contact touches and Γ = J W Jᵀ stays diagonal)
        step_blocks = np.zeros(self.n0, np.int32)      # 1: 3x3 block, 2: linear half of a rigid pair, 3: its angular half
        step_blocks[np.asarray(getattr(model, "rot_block_np", []), np.int64)] = 1
        pair_slot = np.full(self.n0, -1, np.int64)
        for lin in getattr(model, "rigid_lin", []):
            lin = int(lin)
            step_blocks[lin: lin + 2] = (2, 3)
            try:
                pair_slot[lin] = model.pattern.index([lin], [lin + 1])[0]
            except ValueError:
                pass
        self._rod_tables(model, step_blocks)
        self._blockstep = backend.int_array(step_blocks)
        self._pair_slot = backend.int_array(pair_slot)
        self._WB = backend.mat3_array(self.n0)
        self._WB2 = backend.mat3_array(self.n0)
        self._ccap = 0
        self._alloc_contacts(64)
        self._vcap = 0
        self._alloc_virtual(16)
        self._P = None
        self._P_key = None
        self._steps_since_w = None
        self._rest = None
        self._rest_key = None
        self._last_nc = self._last_nv = 0
        self.history: list[float] = []   # residual θ per iteration of the last solve
        self.rho_estimate: Optional[float] = None
        self._rho_prev: Optional[float] = None     # ϱ the last solve ended with (adaptive Chebyshev)

    def _rod_tables(self, model, step_blocks: np.ndarray) -> None:
        """Rod block step (module docstring): rows of every rod get blockstep 4 and the tables
        RI / RSL of the 6x6 block-tridiagonal Ã_rod (see ``cond_rod_factor``)."""
        specs = list(getattr(model, "rod_specs", []))
        self.n_rods = len(specs)
        starts, rows = [0], []
        for spec in specs:
            node0 = int(model.body(spec.name).node_start)
            npt, n = int(spec.n_points), int(spec.n_segments)
            x = node0 + np.arange(npt)
            th = np.full(npt, -1, np.int64)
            th[:n] = node0 + npt + np.arange(n)
            rows.append(np.stack([x, th], axis=1))
            starts.append(starts[-1] + npt)
            step_blocks[node0: node0 + spec.n_nodes] = 4
        nb = starts[-1]
        rows = np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 2), np.int64)
        pos = np.full(self.n0, -1, np.int64)
        for h in range(2):
            ok = rows[:, h] >= 0
            pos[rows[ok, h]] = 2 * np.arange(nb)[ok] + h
        keys, npat = model.pattern.keys, model.pattern.n

        def slot(r, c):
            q = np.where((r >= 0) & (c >= 0), r * npat + c, -1)
            idx = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
            return np.where((q >= 0) & (keys[idx] == q), idx, -1)

        prev = np.full((nb, 2), -1, np.int64)
        first = np.zeros(nb, bool)
        first[np.array(starts[:-1], np.int64)] = True
        if nb:
            prev[1:] = rows[:-1]
            prev[first] = -1
        rsl = np.full((max(nb, 1), 8), -1, np.int64)
        for h in range(2):
            for h2 in range(2):
                rsl[:nb, 2 * h + h2] = slot(rows[:, h], rows[:, h2])
                rsl[:nb, 4 + 2 * h + h2] = slot(rows[:, h], prev[:, h2])
        self.n_rod_blocks = nb
        self._rod_rows_at = self.n_rods + 1
        self._rod_pos_at = self._rod_rows_at + 2 * nb
        self._RI = backend.int_array(np.concatenate([np.array(starts, np.int64), rows.ravel(), pos]))
        self._RSL = ti.ndarray(ti.i32, shape=rsl.shape)
        self._RSL.from_numpy(rsl.astype(np.int32))
        self._DL = ti.ndarray(float, shape=(max(nb, 1), 72))
        self._F = ti.ndarray(float, shape=(max(nb, 1), _F_STRIDE))
        self._CR = backend.mat3_array(self.n0)
        self._CR.from_numpy(np.zeros((max(self.n0, 1), 3, 3), backend.np_real()))

    def _spectral_scale(self, A, fixed) -> float:
        """min(1, 1.7/λ̃), λ̃ the largest eigenvalue of W_F A on the scalar-step rows estimated by
        ``_POWER_STEPS`` power iterations (module docstring, step matrix)."""
        n0 = self.n0
        x, y = self._px, self._py
        rng = np.random.default_rng(0)
        x.from_numpy(rng.standard_normal((x.shape[0], 3)).astype(backend.np_real()))
        out = self._pout
        lam, c = 0.0, 1.0
        for _ in range(_POWER_STEPS):
            out.from_numpy(np.zeros(3, backend.np_real()))
            cond_power_step(A.indptr, A.indices, A.blocks, self._tr, self._rs, fixed, self._blockstep, x, y, out,
                            c, n0)
            num, den, yy = (float(v) for v in out.to_numpy())
            if not den > 0.0 or not yy > 0.0:
                return 1.0
            lam = num / den
            c = 1.0 / math.sqrt(yy)
            x, y = y, x
        return min(1.0, _LAMBDA_TARGET / lam) if lam > 0.0 else 1.0

    def _alloc(self, cap: int) -> None:
        self._cap = cap
        self.V = ti.Vector.ndarray(3, float, shape=(9, cap))

    def _alloc_contacts(self, cap: int) -> None:
        self._ccap = cap
        self.C = ti.ndarray(float, shape=(cap, _P_STRIDE))
        self.lam = backend.vec3_array(cap)
        self._RT = ti.ndarray(ti.i32, shape=4 * cap)

    def _alloc_virtual(self, cap: int) -> None:
        self._vcap = cap
        self.VN = ti.ndarray(float, shape=(cap, _VN_STRIDE))

    def _pattern(self, A):
        if self._P is None or self._P_key is not A.pattern:
            n, nnz = A.n, A.pattern.nnzb
            self._P = ti.ndarray(ti.i32, shape=n + 1 + max(nnz, 1))
            cond_pattern(A.indptr, A.indices, self._P, n, nnz)
            self._P_key = A.pattern
        return self._P

    def _restitution_table(self):
        table = getattr(self.model, "contact_params", None)
        key = None
        if table is not None:
            table = np.asarray(table, dtype=np.float64)
            key = (table.shape, table.tobytes())
        if self._rest is None or key != self._rest_key:
            col = None
            if table is not None and table.ndim == 2 and len(table):
                from ..contact.contacts import CONTACT_PARAM_COLUMNS
                k = CONTACT_PARAM_COLUMNS.index("restitution")
                if table.shape[1] > k:
                    col = table[:, k]
            self._n_rest = 0 if col is None else len(col)
            self._rest = backend.scalar_array(max(self._n_rest, 1), np.full(1, np.nan) if col is None else col)
            self._rest_key = key
        return self._rest, self._n_rest

    # ------------------------------------------------------------------ API
    def virtual_velocities(self) -> np.ndarray:
        """(V, 3) virtual-node velocities v̂_v of the last solve (m/s)."""
        return self.V.to_numpy()[2, self.n0:self.n0 + self._last_nv].astype(np.float64)

    def lambdas(self) -> np.ndarray:
        """(c, 3) the last solve's λ in the contact frame (midpoint: N; Euler: N s)."""
        return self.lam.to_numpy()[: self._last_nc].astype(np.float64)

    def solve(self, problem) -> SolveStats:
        """Solve one step (StepProblem); v̂ is written to problem.v_hat, impulses and status to the contacts."""
        o = self.options
        t_start = time.perf_counter()
        c = problem.contacts
        nc, nv = int(c.count), int(c.n_virtual)
        n0 = self.n0
        if nc > self._ccap:
            self._alloc_contacts(max(nc, 2 * self._ccap))
        if self.n_rods and nc:
            nx = cond_reroute(c.node_a, c.node_b, self._blockstep, self._RT, n0, nv, nc)
        else:
            nx = 0
            fill_reroute(c.node_a, c.node_b, self._RT, nc)
        nvx = nv + nx
        if n0 + nvx > self._cap:
            self._alloc(max(n0 + nvx, n0 + 2 * (self._cap - n0)))
        if nvx > self._vcap:
            self._alloc_virtual(max(nvx, 2 * self._vcap))
        A = problem.A
        P = self._pattern(A)
        if self._steps_since_w is None or self._steps_since_w >= o.recycle:
            cond_weights_base(A.indptr, A.blocks, A.diag, self._tr, self._rs, self._l1, n0)
            if o.step == "frobenius":
                if self._steps_since_scale is None or self._steps_since_scale >= _SCALE_EVERY:
                    self.w_scale = self._spectral_scale(A, problem.fixed)
                    self._steps_since_scale = 0
                if self.w_scale < 1.0:
                    cond_scale_rows(self._tr, self._blockstep, self.w_scale, n0)
            self._steps_since_w = 0
        self._steps_since_w += 1
        if self._steps_since_scale is not None:
            self._steps_since_scale += 1
        rest, n_rest = self._restitution_table()
        if self.n_rods:
            cond_rod_compliance(A.blocks, problem.fixed, self._RI, self._RSL, self._DL, self._F, self._CR,
                                self.n_rods, self.n_rod_blocks, self._rod_rows_at)
        midpoint = 1 if problem.integrator == "midpoint" else 0
        scale2 = cond_setup(A.blocks, A.diag, problem.b, problem.fixed, problem.v_hat, problem.state.v,
                            self._tr, self._rs, self._tr2, self._rs2, self._l1, self._l12, self.V, self.VN, self.C,
                            c.vn_node, c.vn_weight, c.vn_gain, c.node_a, c.node_b, c.frame, c.phi, c.v_world, c.mu,
                            c.param, rest, self._blockstep, self._pair_slot, self._WB, self._WB2, self._RT, self._CR, n0, nv, nvx, nc, n_rest, int(bool(o.warm_start)), midpoint,
                            float(o.virtual_gain), float(o.rigid_gain), float(problem.dt), float(o.restitution), float(o.recovery),
                            float(o.max_recovery_speed), _W_CAP if o.step == "frobenius" else 1e300)
        if self.n_rods:
            cond_rod_factor(A.blocks, problem.fixed, self.VN, self._RI, self._RSL, self._DL, self._F, nvx,
                            self.n_rods, self.n_rod_blocks, self._rod_rows_at, self._rod_pos_at)
        vscale = max(math.sqrt(max(scale2, 0.0)), 1e-12)
        op = STRICT if o.operator == "strict" else PROXIMAL
        bb = 1 if o.step == "bb" else 0
        u = float(o.under_relaxation)
        omega = float(o.omega)
        rho = o.rho
        nu = 1.0
        alpha = 1.0
        dnorms: list[float] = []
        self.history = []
        converged = False
        theta = math.inf
        it = 0
        cheb_on = bool(o.chebyshev)
        accel_from = int(o.chebyshev_start)
        # (not with Barzilai-Borwein: its α changes W every iteration, so there is no fixed
        # iteration whose eigenvalue the observed rate could reveal)
        adapt = cheb_on and o.rho is None and bool(o.rho_adapt) and o.step == "frobenius"
        rho_ceiling = _RHO_ADAPT_MAX
        check_at = None
        estimate_at = accel_from - 1
        theta_at_accel = None
        restarts = adaptations = 0
        t_loop = time.perf_counter()
        for it in range(1, o.max_iter + 1):
            l = it - 1
            if not cheb_on or rho is None or l < accel_from:
                nu = 1.0
            elif l == accel_from:
                nu = 2.0 / (2.0 - rho * rho)
            else:
                nu = 4.0 / (4.0 - rho * rho * nu)
            out = cond_iterate(P, A.blocks, self.V, self.C, self.VN, self._WB, self._WB2, self._RI, self._F, n0, nvx, nc,
                               self.n_rods, self._rod_rows_at, alpha, bb, nu, u, op, omega)
            dv2, vv2, alpha = float(out[0]), float(out[1]), float(out[2])
            dn = math.sqrt(max(dv2, 0.0))
            theta = dn / max(math.sqrt(max(vv2, 0.0)), vscale)
            self.history.append(theta)
            if not math.isfinite(theta):
                break
            # (not on the plain step that restarts an accelerated recurrence: the accelerated steps
            # it follows are ~1/(1−ϱ) times the residual, the plain one ~1 times, so it would stop
            # the iteration at a much larger residual than an accelerated step with the same θ)
            if theta < o.tol and not (l < accel_from and accel_from > int(o.chebyshev_start)):
                converged = True
                break
            dnorms.append(dn)
            if cheb_on and o.rho is None and l == estimate_at:
                # COND eq. 34 on the unaccelerated iterates (the largest of the last three ratios)
                ratios = [dnorms[k] / dnorms[k - 1] for k in range(max(1, len(dnorms) - 3), len(dnorms))
                          if dnorms[k - 1] > 0.0]
                rho = min(max(ratios) if ratios else 0.0, 1.0, _RHO_MAX)
                if adapt and self._rho_prev is not None and restarts == 0:
                    # the previous step's adapted ϱ (recycled, like W), its gap 1 − ϱ widened by
                    # _RHO_DECAY so a value that is no longer needed decays (kept as is it ratcheted:
                    # on the winding cable ϱ stuck at the 0.9995 ceiling while the plain rate was
                    # 0.94, and the over-tuned recurrence took 340 iterations where the plain one
                    # took 230; the gap doubled cost the dragged mat 5 % more iterations, 1.25 none)
                    rho = max(rho, 1.0 - _RHO_DECAY * (1.0 - self._rho_prev))
                if rho <= 0.0:
                    rho = None
                self.rho_estimate = rho
            if cheb_on and rho is not None and l == accel_from:
                theta_at_accel = theta
                check_at = l + _ADAPT_SETTLE + _ADAPT_WINDOW
            if theta_at_accel is not None and l > accel_from and theta > 100.0 * theta_at_accel and restarts < 5:
                restarts += 1      # divergent acceleration: restart the recurrence (ϱ from eq. 34 again)
                rho_ceiling = min(rho_ceiling, 1.0 - 1.5 * (1.0 - rho))
                rho = 0.9 * rho
                accel_from = l + 2
                estimate_at = l + 1
                theta_at_accel = check_at = None
            elif adapt and check_at is not None and l >= check_at:
                # ϱ too small? The mode that limits the accelerated iteration converges at the
                # observed rate r; for a Chebyshev iteration tuned to ϱ an eigenvalue x > ϱ of the
                # plain iteration converges at (x + √(x²−ϱ²)) / (1 + √(1−ϱ²)), so x = (c²+ϱ²)/(2c),
                # c = r (1 + √(1−ϱ²)). Restart with ϱ = x when it is clearly larger.
                k = _ADAPT_WINDOW
                now = max(dnorms[l - 3: l + 1])
                before = max(dnorms[l - k - 3: l - k + 1])
                check_at = l + k
                if before > 0.0 and now > 0.0:
                    r = (now / before) ** (1.0 / k)
                    cr = r * (1.0 + math.sqrt(max(1.0 - rho * rho, 0.0)))
                    x = (cr * cr + rho * rho) / (2.0 * cr)
                    if r >= 1.0 and adaptations > 0 and restarts < 5:
                        # no progress over the window after raising ϱ: back off and cap
                        rho_ceiling = min(rho_ceiling, 1.0 - 1.5 * (1.0 - rho))
                        rho = max(1.0 - 3.0 * (1.0 - rho), 0.0)
                        restarts += 1
                        accel_from = l + 2
                        theta_at_accel = check_at = None
                    elif r < 1.0 and x > rho + 0.25 * (1.0 - rho) and rho < rho_ceiling:
                        # stay on the safe side of x (an overestimate shrinks the region where the
                        # iteration converges to a thin ellipse around [−ϱ, ϱ]; see the docstring)
                        rho = min(1.0 - _ADAPT_MARGIN * (1.0 - x), rho_ceiling)
                        adaptations += 1
                        accel_from = l + 2
                        theta_at_accel = check_at = None
        if adapt:
            self._rho_prev = rho if (converged and rho is not None) else None
        loop_s = time.perf_counter() - t_loop
        self._last_nc, self._last_nv = nc, nv
        comp = cond_finish(self.V, self.C, problem.v_hat, self.lam, c.impulse, c.status, n0, nc,
                           float(problem.coef.impulse_scale), alpha)
        comp_n = float(comp[0]) / max(float(comp[2]), 1e-300) if nc else 0.0
        comp_c = float(comp[1]) / max(float(comp[3]), 1e-300) if nc else 0.0
        elapsed = time.perf_counter() - t_start
        extra = {"contacts": nc, "virtual_nodes": nv, "complementarity_normal": comp_n,
                 "cone_violation": comp_c, "chebyshev_rho": rho if cheb_on else None,
                 "chebyshev_restarts": restarts, "chebyshev_adaptations": adaptations,
                 "alpha": alpha, "ms": 1e3 * elapsed, "us_per_iteration": 1e6 * loop_s / max(it, 1)}
        return SolveStats(it, theta, converged and math.isfinite(theta), extra)


def make_cond_solver(model, options: dict) -> CondSolver:
    return CondSolver(model, options)


def _register() -> None:
    from . import CONTACT_SOLVERS

    CONTACT_SOLVERS["cond"] = make_cond_solver


_register()

"""Step matrix W of COND: one scalar per scalar-step node, so Γ = J W Jᵀ is diagonal (Prop. 2).

- Frobenius rule (§IV-C.1): ``w̄_i = tr(Ã_ii) / Σ_j ‖Ã_ij‖_F²``, Ã = A plus the virtual coupling
  ``k_v J_vᵀJ_v`` of eq. 15 (``cond_weights_base`` for A's part, ``cond_coupling`` adds the coupling);
- Gershgorin cap on rows the coupling touches: ``w̄_i ≤ 1.9 / Σ_j ‖Ã_ij‖_∞`` (keeps ‖I − W Ã‖ < 1
  there, Thm. 2);
- power-iteration scale: every ``SCALE_EVERY`` steps ``POWER_STEPS`` power iterations estimate
  λ̃ = λ_max(W_F A) on the scalar-step rows and W_F is scaled by ``min(1, 1.7/λ̃)``
  (:func:`spectral_scale`);
- Barzilai–Borwein (§IV-C.2): the scalar α is computed inside the iteration kernel (``iterate.py``).

docs/COND.md records why each rule is there.
"""
import math

import numpy as np

from ...backend import ti
from ... import backend
from ...math.smallmat import inv3, mTm, mv
from .groups import KIND_SCALAR
from .layout import ITER_F, ITER_I, VIRTUAL, VIRTUAL_NODES

POWER_STEPS = 16      # power iterations for λ_max(W_F A) ...
SCALE_EVERY = 25      # ... every this many steps (W_F A's spectrum moves little between steps)
LAMBDA_TARGET = 1.7   # W_F is scaled so that the estimated λ_max(W_F A) is at most this (the estimate is low)
W_CAP = 1.9           # Gershgorin cap w_i Σ_j ‖Ã_ij‖_∞ ≤ 1.9 on rows the virtual coupling touches
FEM_MARGIN = 1.2      # the FEM step's interval [a, b]: b = FEM_MARGIN × the (low) estimate of λ_max(D⁻¹A) ...
FEM_RATIO = 100.0     # ... and a = b / FEM_RATIO (iterate.py, fem_step)


@ti.func
def inf_norm(M: ti.math.mat3) -> float:
    """‖M‖_∞ = max_r Σ_c |M_rc| of a 3x3 block."""
    out = 0.0
    for r in ti.static(range(3)):
        out = ti.max(out, ti.abs(M[r, 0]) + ti.abs(M[r, 1]) + ti.abs(M[r, 2]))
    return out


@ti.kernel
def cond_weights_base(indptr: ti.types.ndarray(), blocks: ti.types.ndarray(), diag: ti.types.ndarray(),
                      tr: ti.types.ndarray(), rs: ti.types.ndarray(), l1: ti.types.ndarray(),
                      Pi: ti.types.ndarray()):
    """A's part of the Frobenius rule, tr(A_ii) and Σ_j ‖A_ij‖_F², and the Gershgorin row bound
    Σ_j ‖A_ij‖_∞ (≥ every scalar row's Σ |a_rc| of the block row), on the n0 rows (``Pi``)."""
    for i in range(ITER_I.n0.get(Pi, 0)):
        s = 0.0
        g = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += (blocks[k] * blocks[k]).sum()
            g += inf_norm(blocks[k])
        tr[i] = blocks[diag[i]].trace()
        rs[i] = s
        l1[i] = g


@ti.kernel
def cond_power_step(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                    tr: ti.types.ndarray(), rs: ti.types.ndarray(), fixed: ti.types.ndarray(),
                    kind: ti.types.ndarray(), x: ti.types.ndarray(), y: ti.types.ndarray(),
                    out: ti.types.ndarray(), c: float, n: ti.i32):
    """One power-iteration step on W_F A over the scalar-step rows (W_F = tr/rs, zero on prescribed and
    block rows): y = W_F A (c x); out += (xᵀAx, xᵀW_F⁻¹x, yᵀy) for x = c·x, whose ratio is the
    Rayleigh quotient of A x = λ W_F⁻¹ x."""
    for i in range(n):
        w = 0.0
        if fixed[i] == 0 and kind[i] == KIND_SCALAR and rs[i] > 0.0:
            w = tr[i] / rs[i]
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += mv(blocks[k], c * x[indices[k]])
        yi = w * acc
        if w > 0.0:
            xi = c * x[i]
            out[0] += xi.dot(acc)
            out[1] += xi.dot(xi) / w
            out[2] += yi.dot(yi)
        y[i] = yi


@ti.kernel
def cond_power_step_block(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                          diag: ti.types.ndarray(), fixed: ti.types.ndarray(), kind: ti.types.ndarray(),
                          x: ti.types.ndarray(), y: ti.types.ndarray(), out: ti.types.ndarray(), c: float,
                          n: ti.i32):
    """One power-iteration step on D⁻¹A over the free scalar-kind rows, D = A's 3x3 diagonal blocks:
    y = D⁻¹ A (c x); out += (xᵀAx, xᵀDx, yᵀy) for x = c·x (Rayleigh quotient of A x = λ D x)."""
    for i in range(n):
        acc = ti.Vector.zero(float, 3)
        for k in range(indptr[i], indptr[i + 1]):
            acc += mv(blocks[k], c * x[indices[k]])
        yi = ti.Vector.zero(float, 3)
        if fixed[i] == 0 and kind[i] == KIND_SCALAR:
            D = blocks[diag[i]]
            if D.trace() > 0.0:
                yi = mv(inv3(D), acc)
                xi = c * x[i]
                out[0] += xi.dot(acc)
                out[1] += xi.dot(mv(D, xi))
                out[2] += yi.dot(yi)
        y[i] = yi


def fem_interval(lmax: float, sweeps: int) -> tuple[float, float, float]:
    """(a, b, c) of the FEM step (iterate.py): its interval [a, b] of D⁻¹M's spectrum from the power
    estimate ``lmax`` of λ_max(D⁻¹A), and the scale c = 1/(1 + 1/T_K(σ)) that keeps ``c x p(x) ≤ 1``
    on [a, b] for K ≥ 2 sweeps (1 for block Jacobi, whose ``x/θ ≤ 2b/(a + b)`` is ≤ 1.65 on the
    true spectrum, like the Frobenius step's 1.7)."""
    b = FEM_MARGIN * lmax
    a = b / FEM_RATIO
    c = 1.0
    if sweeps >= 2 and b > 0.0:
        c = 1.0 / (1.0 + 1.0 / math.cosh(sweeps * math.acosh((b + a) / (b - a))))
    return a, b, c


def block_lambda_max(A, fixed, kind, x, y, out) -> float:
    """λ̃ ≈ λ_max(D⁻¹A) on the free scalar-kind rows (D: A's 3x3 diagonal blocks), ``POWER_STEPS``
    power iterations from a fixed random start; a Rayleigh quotient, so at most the true value
    (0.0 where there are no such rows)."""
    lam = _rayleigh_power(lambda x, y, c: cond_power_step_block(A.indptr, A.indices, A.blocks, A.diag, fixed,
                                                                kind, x, y, out, c, A.n), x, y, out)
    return 0.0 if lam is None else lam


def _rayleigh_power(step, x, y, out) -> "float | None":
    """``POWER_STEPS`` power iterations from a fixed random start: ``step(x, y, c)`` writes y from the
    scaled iterate c·x and (xᵀAx, xᵀDx, ‖y‖²) into ``out``; the last Rayleigh quotient, or None
    where a quotient is undefined (no rows of the kind)."""
    rng = np.random.default_rng(0)
    x.from_numpy(rng.standard_normal((x.shape[0], 3)).astype(backend.np_real()))
    lam, c = 0.0, 1.0
    for _ in range(POWER_STEPS):
        out.from_numpy(np.zeros(3, backend.np_real()))
        step(x, y, c)
        num, den, yy = (float(v) for v in out.to_numpy())
        if not den > 0.0 or not yy > 0.0:
            return None
        lam = num / den
        c = 1.0 / math.sqrt(yy)
        x, y = y, x
    return lam


@ti.kernel
def cond_scale_rows(tr: ti.types.ndarray(), kind: ti.types.ndarray(), Pf: ti.types.ndarray(), Pi: ti.types.ndarray()):
    """tr_i *= s on the scalar-step rows (W_F = s·tr/rs; s: ``Pf``'s w_scale)."""
    s = ITER_F.w_scale.get(Pf, 0)
    for i in range(ITER_I.n0.get(Pi, 0)):
        if kind[i] == KIND_SCALAR:
            tr[i] *= s


def spectral_scale(A, fixed, kind, tr, rs, x, y, out) -> float:
    """min(1, 1.7/λ̃), λ̃ the largest eigenvalue of W_F A on the scalar-step rows estimated by
    ``POWER_STEPS`` power iterations from a fixed random start (x, y, out: work arrays)."""
    lam = _rayleigh_power(lambda x, y, c: cond_power_step(A.indptr, A.indices, A.blocks, tr, rs, fixed, kind,
                                                          x, y, out, c, A.n), x, y, out)
    return min(1.0, LAMBDA_TARGET / lam) if lam is not None and lam > 0.0 else 1.0


@ti.kernel
def cond_coupling(tr: ti.types.ndarray(), rs: ti.types.ndarray(), l1: ti.types.ndarray(), tr2: ti.types.ndarray(),
                  rs2: ti.types.ndarray(), l12: ti.types.ndarray(), VNf: ti.types.ndarray(), VNi: ti.types.ndarray(),
                  Pi: ti.types.ndarray()):
    """tr2, rs2, l12: the Frobenius and Gershgorin row sums of Ã = A + Σ k_v J_vᵀJ_v (eq. 15), the
    coupling's blocks added to the real rows they touch (cross terms of a modified diagonal block dropped)."""
    n0, nvx = ITER_I.n0.get(Pi, 0), ITER_I.nv.get(Pi, 0)
    for i in range(n0):
        tr2[i] = tr[i]
        rs2[i] = rs[i]
        l12[i] = l1[i]
    for q in range(nvx):
        kv = VIRTUAL.gain.get(VNf, q)
        for k in range(4):
            j = VIRTUAL_NODES.node.at(VNi, q, k)
            if j >= 0:
                Wk = VIRTUAL.weight.at(VNf, q, k)
                tr2[j] += kv * (Wk * Wk).sum()
                add = kv * kv * (Wk * Wk).sum()
                g = kv * inf_norm(Wk.transpose())
                for l in range(4):
                    if VIRTUAL_NODES.node.at(VNi, q, l) >= 0:
                        M = kv * mTm(Wk, VIRTUAL.weight.at(VNf, q, l))
                        add += (M * M).sum()
                        g += inf_norm(M)
                rs2[j] += add
                l12[j] += g

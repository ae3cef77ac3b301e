"""Integrators of docs/THEORY.md §1 as coefficients of one assembly path, plus node kernels.

Both integrators give ``A v̂ = b`` with

    A = a_m M + a_ma (alpha M) + Σ_e (a_k + a_kb beta_e) K_e
    b = b_m M v_k + b_f (f_el(q_k) + f_ext)

- passive midpoint (COND eq. 9): v̂ = (v_k + v_{k+1})/2, a_m = b_m = 2/dt, a_ma = 1,
  a_k = dt/2, a_kb = 1, b_f = 1, v_{k+1} = 2 v̂ - v_k. λ in ``A v̂ = b + Jᵀλ`` is a force (N).
- implicit Euler (SAP eq. 15, θ = 1): v̂ = v_{k+1}, a_m = b_m = 1, a_ma = dt, a_k = dt²,
  a_kb = dt, b_f = dt, v_{k+1} = v̂. λ is an impulse (N s).

Positions always advance as q_{k+1} = q_k + dt v̂.
"""
from dataclasses import dataclass

import numpy as np

from .. import backend
from ..backend import ti
from ..bodies.rigid import advance_rotation_block, assemble_rotational_block
from ..errors import ParameterError
from ..math.smallmat import mv
from ..spec.names import INTEGRATORS


@dataclass(frozen=True)
class StepCoefficients:
    a_m: float
    a_ma: float
    a_k: float
    a_kb: float
    b_m: float
    b_f: float
    v_hat: float   # v_{k+1} = v_hat * v̂ + v_old * v_k
    v_old: float
    impulse_scale: float  # contact impulse (N s) = impulse_scale * λ


def coefficients(integrator: str, dt: float) -> StepCoefficients:
    """Coefficients of A, b and the velocity update for ``integrator`` at step ``dt`` (s)."""
    if integrator == "midpoint":
        return StepCoefficients(2.0 / dt, 1.0, dt / 2.0, 1.0, 2.0 / dt, 1.0, 2.0, -1.0, dt)
    if integrator == "euler":
        return StepCoefficients(1.0, dt, dt * dt, dt, 1.0, dt, 1.0, 0.0, 1.0)
    raise ParameterError(f"unknown integrator {integrator!r}; choose one of {', '.join(INTEGRATORS)}")


@ti.kernel
def assemble_nodes(mass: ti.types.ndarray(), mass_alpha: ti.types.ndarray(), v: ti.types.ndarray(),
                   f_ext: ti.types.ndarray(), gravity: ti.types.ndarray(), diag: ti.types.ndarray(),
                   blocks: ti.types.ndarray(), b: ti.types.ndarray(),
                   a_m: float, a_ma: float, b_m: float, b_f: float):
    """Mass and damping diagonal of A; b = b_m M v_k + b_f (M g + f_ext). Run after A is zeroed."""
    for i in range(mass.shape[0]):
        m = mass[i]
        blocks[diag[i]] += (a_m * m + a_ma * mass_alpha[i]) * ti.Matrix.identity(float, 3)
        b[i] = b_m * m * v[i] + b_f * (m * gravity[0] + f_ext[i])


@ti.kernel
def eliminate_prescribed(indptr: ti.types.ndarray(), indices: ti.types.ndarray(), blocks: ti.types.ndarray(),
                         diag: ti.types.ndarray(), b: ti.types.ndarray(), fixed: ti.types.ndarray(),
                         v_fixed: ti.types.ndarray(), n: ti.i32):
    """Impose v̂_i = v_fixed_i on prescribed nodes, keeping A symmetric positive definite.

    Free rows move the known columns to the right-hand side; off-diagonal blocks in
    prescribed rows and columns are zeroed; a prescribed row keeps its diagonal block
    D_ii and gets b_i = D_ii v_fixed_i, so its solution is exactly v_fixed_i.
    """
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j != i and (fixed[i] != 0 or fixed[j] != 0):
                if fixed[i] == 0:
                    b[i] -= mv(blocks[k], v_fixed[j])
                blocks[k] = ti.Matrix.zero(float, 3, 3)
        if fixed[i] != 0:
            b[i] = mv(blocks[diag[i]], v_fixed[i])


@ti.func
def advance_node(i, x: ti.template(), v: ti.template(), v_hat: ti.template(), fixed: ti.template(),
                 v_end: ti.template(), dt, c_hat, c_old):
    """Node i of ``advance``; returns its |v|^2 (inf for NaN or inf)."""
    x[i] += dt * v_hat[i]
    vn = c_hat * v_hat[i] + c_old * v[i]
    if fixed[i] != 0:
        vn = v_end[i]
    v[i] = vn
    s = vn.norm_sqr()
    if not (s <= 1e300):  # catches NaN and inf
        s = ti.math.inf
    return s


@ti.kernel
def advance(x: ti.types.ndarray(), v: ti.types.ndarray(), v_hat: ti.types.ndarray(), fixed: ti.types.ndarray(),
            v_end: ti.types.ndarray(), dt: float, c_hat: float, c_old: float) -> float:
    """x += dt v̂; v = c_hat v̂ + c_old v (prescribed nodes: v = v_end). Returns max |v|^2 (NaN-propagating)."""
    vmax = 0.0
    for i in range(x.shape[0]):
        ti.atomic_max(vmax, advance_node(i, x, v, v_hat, fixed, v_end, dt, c_hat, c_old))
    return vmax


@ti.kernel
def kinetic_and_gravity(mass: ti.types.ndarray(), x: ti.types.ndarray(), v: ti.types.ndarray(),
                        gravity: ti.types.ndarray(), out: ti.types.ndarray()):
    """out[0] = ½ Σ m |v|², out[1] = -Σ m g·x (J)."""
    for i in range(mass.shape[0]):
        out[0] += 0.5 * mass[i] * v[i].norm_sqr()
        out[1] += -mass[i] * gravity[0].dot(x[i])


# ---------------------------------------------------------------- fused step kernels (one launch each)
# The step kernels take the scene's constants from one small ndarray (``coefficient_array``) instead
# of float arguments: a float (or an int outside [-5, 256]) argument makes quadrants marshal every
# argument of the launch afresh (its launch context is then not cached: ~6 µs per float argument on a
# 2-core CPU, docs/PERFORMANCE.md "Step overhead and the COND iteration").
C_A_M, C_A_MA, C_B_M, C_B_F, C_DT, C_V_HAT, C_V_OLD = range(7)
N_COEF = 7


def coefficient_array(coef: StepCoefficients, dt: float):
    """The constants the step kernels read, as a device ndarray (``C_*`` indices), written once."""
    return backend.scalar_array(N_COEF, np.array([coef.a_m, coef.a_ma, coef.b_m, coef.b_f, dt, coef.v_hat,
                                                  coef.v_old], np.float64))


@ti.kernel
def assemble_inertial(blocks: ti.types.ndarray(), diag: ti.types.ndarray(), mass: ti.types.ndarray(),
                      mass_alpha: ti.types.ndarray(), v: ti.types.ndarray(), f_ext: ti.types.ndarray(),
                      gravity: ti.types.ndarray(), b: ti.types.ndarray(), rot_block: ti.types.ndarray(),
                      rot_inertia: ti.types.ndarray(), quat: ti.types.ndarray(), n_rot: ti.i32,
                      C: ti.types.ndarray()):
    """A = 0, then ``assemble_nodes``, then the first n_rot rotational blocks of
    ``bodies.rigid.assemble_rotational_block``: the three launches that start every step's assembly as
    one (the top-level loops run in order, each finished before the next; same arithmetic).
    C: ``coefficient_array``."""
    for k in blocks:
        blocks[k] = ti.Matrix.zero(float, 3, 3) + 0.0
    for i in range(mass.shape[0]):
        m = mass[i]
        blocks[diag[i]] += (C[C_A_M] * m + C[C_A_MA] * mass_alpha[i]) * ti.Matrix.identity(float, 3)
        b[i] = C[C_B_M] * m * v[i] + C[C_B_F] * (m * gravity[0] + f_ext[i])
    for r in range(n_rot):
        assemble_rotational_block(r, rot_block, rot_inertia, quat, v, diag, blocks, b, C[C_A_M], C[C_B_M], C[C_B_F])


@ti.func
def advance_blocks(x: ti.template(), v: ti.template(), v_hat: ti.template(), fixed: ti.template(),
                   v_end: ti.template(), rot_block: ti.template(), quat: ti.template(), n_rot,
                   C: ti.template(), speed2: ti.template()):
    """``advance_all``'s loops, for kernels that run them with more work in the same launch
    (``contact.anchors.advance_and_remember``)."""
    vmax = 0.0
    for i in range(x.shape[0]):
        ti.atomic_max(vmax, advance_node(i, x, v, v_hat, fixed, v_end, C[C_DT], C[C_V_HAT], C[C_V_OLD]))
    for r in range(n_rot):
        advance_rotation_block(r, rot_block, quat, v_hat, v, fixed, C[C_DT])
    speed2[0] = vmax


@ti.kernel
def advance_all(x: ti.types.ndarray(), v: ti.types.ndarray(), v_hat: ti.types.ndarray(), fixed: ti.types.ndarray(),
                v_end: ti.types.ndarray(), rot_block: ti.types.ndarray(), quat: ti.types.ndarray(), n_rot: ti.i32,
                C: ti.types.ndarray(), speed2: ti.types.ndarray()):
    """``advance`` then the first n_rot blocks of ``bodies.rigid.advance_rotation_block`` in one launch
    (dt, c_hat, c_old from C: ``coefficient_array``). ``speed2[0]``: max |v|^2 (NaN-propagating) of the
    generic advance (an output array, not a return value: a returned f64 costs quadrants ~7 µs a launch)."""
    advance_blocks(x, v, v_hat, fixed, v_end, rot_block, quat, n_rot, C, speed2)

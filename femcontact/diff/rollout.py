"""Rollout gradients by the adjoint method over the steps (issue 33 item 2).

For a run of N steps S_k = Φ(S_{k−1}, u_k, θ) (S: the state outputs x, R, v, v̂ of ``inputs.OUTPUTS``,
whose layout the state inputs share) and a loss L = Σ_k ℓ_k(S_k), the reverse sweep

    a_N = ∂ℓ_N/∂S_N,   a_{k−1} = (∂Φ/∂S_{k−1})ᵀ a_k + ∂ℓ_{k−1}/∂S_{k−1},
    dL/du_k = (∂Φ/∂u_k)ᵀ a_k,   dL/dθ = Σ_k (∂Φ/∂θ)ᵀ a_k,   dL/dS_0 = a_0

takes each step's vector-Jacobian product from ``StepDerivatives.vjp`` (the implicit function theorem at
that step's converged solution, ``step.py``), rebuilt from the stored start and end States of the step:
the forward pass keeps one ``Snapshot`` per step (x, v, v̂ and rotations: 4 × 3n floats, 96 kB per 1k DOF;
100 steps at 10k DOF: 96 MB), no factorization is stored: each step's H is refactored in the reverse sweep (dense, or one sparse
factorization at its final v; the last step reuses the solver's Schur factor: ``StepSolve``).

Cost: a step's ``vjp`` is computed column by column over its inputs (two residual probes each), so the
reverse sweep costs Σ over steps of (state size + number of controls and parameters) probe pairs: fine
for rigid bodies, robots and small deformables, not for 10k-DOF bodies (docs/GRADIENTS.md). Held fixed,
not differentiated: the stiction anchors' memory (use ``stiction="regularized"`` for exact rollout
gradients through sticking contacts), the prescribed groups' positions, the joints' unwrapped angles."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import ParameterError, SimulationError
from ..spec.names import NEWTON_SOLVERS
from .inputs import STATE_INPUTS, end_state, output_sizes, resolve, restore, snapshot
from .step import StepDerivatives, check_precision

#: loss(k, state) -> (ℓ_k, ∂ℓ_k/∂S_k flat over ``output_sizes``), or None for no loss at step k
StepLoss = Callable[[int, dict], "tuple[float, np.ndarray] | None"]
#: controls(sim, k): set step k's controls (loads, efforts, drive targets) before step k runs (k = 1..steps)
StepControls = Callable[[object, int], None]


@dataclass
class RolloutGradient:
    """A rollout's loss and its gradient: ``initial_state`` dL/dS_0 (flat, ``output_sizes`` layout),
    ``per_step[name]`` (steps, size) dL/du_k for each non-state input (a control's effect on step k, or a
    parameter's through step k), ``params[name]`` their sum over the steps (dL/dθ of a scene parameter)."""

    loss: float
    initial_state: np.ndarray
    per_step: dict
    params: dict


def _checked(sim, steps, wrt, what: str) -> list:
    check_precision()
    if sim.contact_solver.name not in NEWTON_SOLVERS:
        raise ParameterError(f"{what}: solver {sim.contact_solver.name!r} has no step derivatives; use one of "
                             f"{', '.join(NEWTON_SOLVERS)}")
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ParameterError(f"{what}: steps must be a positive integer, got {steps!r}")
    names = [wrt] if isinstance(wrt, str) else list(wrt)
    if any(n in STATE_INPUTS for n in names):
        raise ParameterError(f"{what}: the initial state's gradient is always returned; wrt names controls and "
                             f"parameters only, got {names}")
    return names


def _step(sim, k: int, controls: StepControls | None) -> None:
    if controls is not None:
        controls(sim, k)
    st = sim.step()
    if not st.converged:
        raise SimulationError(f"rollout: step {st.step} ended unconverged; its derivative is not defined "
                              "(tighten rel_tol or raise max_iterations)")


def rollout(sim, steps: int, loss: StepLoss, wrt=(), controls: StepControls | None = None) -> RolloutGradient:
    """Run ``steps`` steps of ``sim`` and return L = Σ_k loss(k, S_k) (k = 1..steps, S_k the state after
    step k as ``inputs.end_state`` gives it) with its gradient with respect to the initial state and the
    non-state inputs ``wrt`` (controls, scene parameters; ``inputs.resolve``), by the reverse sweep of the
    module docstring. ``controls(sim, k)``, if given, sets step k's controls before it runs, in the forward
    pass and again before step k is differentiated in the reverse sweep (so a time-varying control's
    derivative is taken about its own value at step k). ``sim`` is left at the end of the rollout."""
    names = _checked(sim, steps, wrt, "rollout")
    inputs = resolve(sim, list(STATE_INPUTS) + names)
    sizes = output_sizes(sim.model)
    n_state = sum(sizes.values())
    snaps = [snapshot(sim)]
    total, grads = 0.0, []
    for k in range(1, steps + 1):
        _step(sim, k, controls)
        snaps.append(snapshot(sim))
        out = loss(k, end_state(sim))
        value, g = (0.0, np.zeros(n_state)) if out is None else out
        g = np.asarray(g, float).ravel()
        if g.shape != (n_state,):
            raise ParameterError(f"rollout: the loss gradient at step {k} has {g.size} entries, expected {n_state} "
                                 f"(femcontact.diff.output_sizes: {sizes})")
        total += float(value)
        grads.append(g)
    per_step = {i.name: np.zeros((steps, i.size)) for i in inputs[len(STATE_INPUTS):]}
    a = grads[-1]
    for k in range(steps - 1, -1, -1):
        if controls is not None:
            controls(sim, k + 1)
            inputs = resolve(sim, list(STATE_INPUTS) + names)
        row = StepDerivatives(sim, inputs, snaps[k], snaps[k + 1], last_step=k == steps - 1).vjp(a)
        j = n_state
        for i in inputs[len(STATE_INPUTS):]:
            per_step[i.name][k] = row[j:j + i.size]
            j += i.size
        a = row[:n_state] + (grads[k - 1] if k >= 1 else 0.0)
    restore(sim, snaps[-1])
    return RolloutGradient(total, a, per_step, {n: p.sum(axis=0) for n, p in per_step.items()})


@dataclass
class RolloutTangents:
    """A rollout's states and their forward sensitivities: ``states[k]`` the ``end_state`` after step k
    (k = 0: the start), ``tangents[k]`` (n_state, n_wrt) dS_k/dθ (flat ``output_sizes`` rows, one column
    per entry of the inputs ``wrt`` in order; zero at k = 0)."""

    states: list
    tangents: list


def rollout_tangents(sim, steps: int, wrt, controls: StepControls | None = None) -> RolloutTangents:
    """Run ``steps`` steps of ``sim`` carrying the forward sensitivities of the state to the scene parameters
    (or controls held over the run) ``wrt``: T_k = (∂Φ/∂S) T_{k−1} + ∂Φ/∂θ, each column one ``jvp`` of the
    step just taken (one probe pair and one solve with the step's own factor), so the cost is steps × (number
    of parameters) jvps whatever the state size: the Jacobian of a trajectory for least squares, where the
    adjoint (``rollout``) would pay the state's columns at every step. ``controls`` as in ``rollout``."""
    names = _checked(sim, steps, wrt, "rollout_tangents")
    sizes = output_sizes(sim.model)
    n_state = sum(sizes.values())
    start = snapshot(sim)
    inputs = resolve(sim, list(STATE_INPUTS) + names)
    n_wrt = sum(i.size for i in inputs[len(STATE_INPUTS):])
    states, tangents = [end_state(sim)], [np.zeros((n_state, n_wrt))]
    for k in range(1, steps + 1):
        _step(sim, k, controls)
        end = snapshot(sim)
        if controls is not None:
            inputs = resolve(sim, list(STATE_INPUTS) + names)
        d = StepDerivatives(sim, inputs, start, end, last_step=True)
        T = np.empty((n_state, n_wrt))
        for j in range(n_wrt):
            e = np.zeros(n_wrt)
            e[j] = 1.0
            T[:, j] = d.jvp(np.concatenate([tangents[-1][:, j], e]))
        restore(sim, end)
        states.append(end_state(sim))
        tangents.append(T)
        start = end
    return RolloutTangents(states, tangents)

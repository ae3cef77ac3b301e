"""Central finite differences of a whole simulator step: the reference ``StepDerivatives`` is checked
against (tests/diff/), reusable by users for any input ``inputs.resolve`` names.

Each column steps the simulator from the tracked start-of-step State (``Simulator.track_derivatives``)
with the input moved by ± h (``Input.step`` times ``scale``), reads the end state, and restores the
State bit for bit (``inputs.restore``); the simulator is left as it was after its step (State, step log,
observers reset; its contact set and A, b hold the last difference step's)."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .inputs import end_state, output_difference, resolve, restore, snapshot
from .step import check_precision


def step_jacobian(sim, wrt=("x", "R", "v"), scale: float = 10.0, richardson: bool = False) -> np.ndarray:
    """d(end state)/d(inputs) of ``sim``'s last step by central differences (rows and columns as
    ``StepDerivatives.jacobian()``), with steps ``scale`` times the inputs' own ``Input.step``.
    ``richardson``: (4 D(h/2) − D(h))/3, which cancels the O(h²) error of the central difference D(h)
    (twice the steps; for stiff couplings, a hinge's springs, where the end state curves within h)."""
    check_precision()
    start = getattr(sim, "step_start", None)
    if start is None or not sim.stats:
        raise ParameterError("finite differences need a tracked step: call sim.track_derivatives() before sim.step()")
    inputs = resolve(sim, wrt)
    end = snapshot(sim)
    last_solve = getattr(sim, "last_solve", None)
    cols = []
    try:
        for inp in inputs:
            h = scale * inp.step
            for j in range(inp.size):
                col = _central(sim, start, inp, j, h)
                if richardson:
                    col = (4.0 * _central(sim, start, inp, j, 0.5 * h) - col) / 3.0
                cols.append(col)
    finally:
        restore(sim, end, stepped=True)
        sim.step_start, sim.last_solve = start, last_solve
    return np.stack(cols, axis=1)


def _central(sim, start, inp, j: int, h: float) -> np.ndarray:
    """(end(p + h e_j) − end(p − h e_j)) / 2h, stepping from the State ``start``."""
    e = np.zeros(inp.size)
    e[j] = h
    ends = []
    for sign in (1.0, -1.0):
        restore(sim, start, stepped=True)
        undo = inp.apply(sim, sign * e)
        try:
            sim.step()
        finally:
            if undo is not None:
                undo()
        ends.append(end_state(sim))
    return output_difference(ends[0], ends[1]) / (2 * h)

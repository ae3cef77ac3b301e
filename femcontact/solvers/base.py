"""The one interface between the step loop and every contact solver."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class StepProblem:
    """Everything a contact solver sees for one step: ``A v̂ = b + Jᵀλ`` plus contacts.

    model, state: the Model and the State at the start of the step (positions q_k, velocities v_k).
    A, b: the assembled BlockSparseMatrix and right-hand side (prescribed nodes already eliminated).
    v_hat: vec3 ndarray, warm start in, solution out (length >= model.n_nodes).
    fixed: i32 ndarray, 1 for prescribed nodes (the solver must not change their v̂).
    contacts: the ContactSet of this step (count > 0).
    coef: integrator coefficients (coef.impulse_scale converts λ to an impulse in N s).
    dt: step size (s); integrator: "midpoint" or "euler".
    """

    model: Any
    state: Any
    A: Any
    b: Any
    v_hat: Any
    fixed: Any
    contacts: Any
    coef: Any
    dt: float
    integrator: str


@dataclass
class SolveStats:
    """What a solve did: iterations, final residual, convergence, and solver-specific extras."""

    iterations: int = 0
    residual: float = 0.0
    converged: bool = True
    extra: dict = field(default_factory=dict)


class ContactSolver(Protocol):
    """A contact solver: ``solve`` one step; ``memory``/``restore`` what it carries from one step to
    the next (saved in checkpoints so a resumed run continues bit for bit)."""

    name: str

    def solve(self, problem: StepProblem) -> SolveStats: ...

    def memory(self) -> dict: ...

    def restore(self, memory: dict) -> None: ...

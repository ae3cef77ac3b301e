"""The one interface between the step loop and every contact solver: the step contract.

Every step, with or without contacts, is one ``solver.solve(StepProblem)``; zero contacts is the
ordinary case ``A v̂ = b`` of every solver (``solve_without_contacts``: the step's linear solver).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np

from ..assembly.integrator import StepCoefficients
from ..assembly.sparse import BlockSparseMatrix
from ..contact.contacts import CONTACT_PARAM_COLUMNS, ContactSet
from ..dofs import DofGroups
from ..model import Model
from ..state import State
from .linear import BlockJacobiPCG, DirectSolver, LinearSolveStats


@dataclass
class StepProblem:
    """Everything a solver sees for one step: ``A v̂ = b + Jᵀλ`` plus contacts.

    model, state: the Model and the State at the start of the step (positions q_k, velocities
    ``v_k`` = ``state.v``). A, b: the assembled matrix and right-hand side with the prescribed
    blocks eliminated (a prescribed row keeps its diagonal block and ``b`` gives its prescribed
    v̂). v_hat: vec3 ndarray, warm start in, solution out (length >= model.n_nodes). fixed: i32
    ndarray, 1 on prescribed blocks (the solver must not change their v̂). contacts: this step's
    ContactSet (``count`` may be 0). coef: integrator coefficients (``coef.impulse_scale``
    converts λ to an impulse in N s). dt: step size (s); integrator: "midpoint" or "euler".
    linear: the step's SPD solver, used when there are no contacts.
    """

    model: Model
    state: State
    A: BlockSparseMatrix
    b: object
    v_hat: object
    fixed: object
    contacts: ContactSet
    coef: StepCoefficients
    dt: float
    integrator: str
    linear: Optional[DirectSolver | BlockJacobiPCG] = None

    @property
    def dofs(self) -> DofGroups:
        """The block structure of the unknowns (kinds, rigid pairs, chains, masses, prescribed)."""
        return self.model.dofs

    @property
    def v_start(self):
        """Velocities at the start of the step (vec3 ndarray)."""
        return self.state.v

    def contact_params(self) -> dict[str, np.ndarray]:
        """The contact-parameter table by column name (one row per obstacle or body pair; NaN:
        the solver picks), indexed by ``contacts.param``."""
        table = self.model.contact_params
        return {name: table[:, k] for k, name in enumerate(CONTACT_PARAM_COLUMNS)}


def solve_without_contacts(problem: StepProblem) -> LinearSolveStats:
    """The zero-contact case of every solver: ``A v̂ = b`` by the step's linear solver."""
    if problem.linear is None:
        raise ValueError("a StepProblem without contacts needs its linear solver (StepProblem.linear)")
    return problem.linear.solve(problem.A, problem.b, problem.v_hat)


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
    #: under the midpoint rule, friction acts on the end-of-step velocity v_{k+1} (stick: v_{k+1,t} = 0)
    #: rather than on v̂, the velocity that moves the positions (contact.anchors)
    friction_on_end_velocity: bool

    def solve(self, problem: StepProblem) -> SolveStats: ...

    def memory(self) -> dict: ...

    def restore(self, memory: dict) -> None: ...

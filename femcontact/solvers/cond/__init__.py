"""COND (papers/cond-lee-lee-lee.md): velocity-level fixed-point iteration with contact
nodalization and diagonalization, Alg. 1-3, on the step system ``A v̂ = b + Jᵀλ``.

Parts (one job each; docs/COND.md explains the design and records the measurements):

- ``options``: CondOptions and their validation;
- ``layout``: schema of the packed work arrays, generated offsets and accessors;
- ``groups``: the only reader of body-type data (block structure of the unknowns);
- ``virtual``: virtual-node tables and gains k_v (eq. 14/15);
- ``step_matrix``: W (Frobenius, Gershgorin cap, power-iteration scale; BB in ``iterate``);
- ``blocks``: exact block steps (spin 3x3, rigid 6x6, rod block-tridiagonal LDLᵀ);
- ``targets``: normal targets (speculative gaps, restitution, recovery; eq. 11);
- ``chebyshev``: the host-side Chebyshev schedule (Alg. 3, eq. 34);
- ``iterate``: start values, the fused iteration kernel, the finish;
- ``solver``: CondSolver.solve, memory() / restore().
"""
from .options import CondOptions
from .solver import CondSolver

__all__ = ["CondOptions", "CondSolver", "make_cond_solver"]


def make_cond_solver(model, options: dict) -> CondSolver:
    return CondSolver(model, options)


def _register() -> None:
    from .. import CONTACT_SOLVERS

    CONTACT_SOLVERS["cond"] = make_cond_solver


_register()

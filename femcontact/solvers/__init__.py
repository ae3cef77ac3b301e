"""Solvers of the step system ``A v̂ = b + Jᵀλ``, chosen by name.

Without contacts every solver family reduces to the SPD solve ``A v̂ = b``, done by
the linear solver (``solvers.linear``). Contact solvers register a factory
``factory(model, options: dict) -> ContactSolver`` in ``CONTACT_SOLVERS`` under their name
(see ``solvers.base`` for the interface) when their module is imported.

``SOLVER_NAMES`` lists the implemented solvers, statically, in the leaf ``spec/names.py``, so that
``Scene(solver=...)`` can refuse any other name at once without importing (and compiling) the solver
modules; ``SOLVER_MODULES`` are the modules that register them. ``PLANNED_SOLVERS`` are named in the
literature and planned but not implemented: asking for one fails with a message that says so.
"""
import importlib

from ..errors import ParameterError
from ..spec.names import AUTO_SOLVER, PLANNED_SOLVERS, SOLVER_NAMES, check_solver_name

__all__ = ["CONTACT_SOLVERS", "PLANNED_SOLVERS", "SOLVER_MODULE", "SOLVER_MODULES", "SOLVER_NAMES",
           "check_solver_name", "make_contact_solver"]

SOLVER_MODULES = ("cond", "sap", "pgs", "incp")  # sap: "sap", "lagged", "similar"; the others their own name
# the module that registers each solver: only that one is imported (the others import scipy.linalg, cvxopt, ...)
SOLVER_MODULE = {"cond": "cond", "sap": "sap", "lagged": "sap", "similar": "sap", "pgs": "pgs", "incp": "incp"}
CONTACT_SOLVERS: dict = {}


def make_contact_solver(name: str, model, options: dict):
    """Instantiate the contact solver ``name`` for ``model`` (importing the solver's module, which
    registers it in ``CONTACT_SOLVERS``)."""
    name = check_solver_name(name)
    if name == AUTO_SOLVER:
        raise ParameterError("solver 'auto' names no solver: the Simulator picks one for the scene "
                             "(femcontact.convergence.choose_solver)")
    importlib.import_module(f"{__name__}.{SOLVER_MODULE[name]}")
    return CONTACT_SOLVERS[name](model, dict(options or {}))

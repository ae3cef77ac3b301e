"""Solvers of the step system ``A v̂ = b + Jᵀλ``, chosen by name.

Without contacts every solver family reduces to the SPD solve ``A v̂ = b``, done by
the linear solver (``solvers.linear``). Contact solvers register a factory
``factory(model, options: dict) -> ContactSolver`` in ``CONTACT_SOLVERS`` under their name
(see ``solvers.base`` for the interface) when their module is imported.

``SOLVER_NAMES`` lists the implemented solvers, statically, so that ``Scene(solver=...)`` can
refuse any other name at once without importing (and compiling) the solver modules;
``SOLVER_MODULES`` are the modules that register them. ``PLANNED_SOLVERS`` are named in the
literature and planned but not implemented: asking for one fails with a message that says so.
"""
import importlib

from ..errors import ParameterError

SOLVER_NAMES = ("cond", "sap", "lagged", "similar", "pgs", "incp")
SOLVER_MODULES = ("cond", "sap", "pgs", "incp")  # sap: "sap", "lagged", "similar"; the others their own name
# the module that registers each solver: only that one is imported (the others import scipy.linalg, cvxopt, ...)
SOLVER_MODULE = {"cond": "cond", "sap": "sap", "lagged": "sap", "similar": "sap", "pgs": "pgs", "incp": "incp"}
PLANNED_SOLVERS: tuple[str, ...] = ()
CONTACT_SOLVERS: dict = {}


def check_solver_name(name: str) -> str:
    """Return ``name`` (lower case) if this version implements that solver, else raise a clear
    ParameterError."""
    key = name.lower() if isinstance(name, str) else name
    if key in SOLVER_NAMES:
        return key
    if key in PLANNED_SOLVERS:
        raise ParameterError(f"solver {name!r} is not implemented in this version; choose one of "
                             f"{', '.join(SOLVER_NAMES)}")
    raise ParameterError(f"unknown solver {name!r}; choose one of {', '.join(SOLVER_NAMES)}")


def make_contact_solver(name: str, model, options: dict):
    """Instantiate the contact solver ``name`` for ``model`` (importing the solver's module, which
    registers it in ``CONTACT_SOLVERS``)."""
    name = check_solver_name(name)
    importlib.import_module(f"{__name__}.{SOLVER_MODULE[name]}")
    return CONTACT_SOLVERS[name](model, dict(options or {}))

"""Solvers of the step system ``A v̂ = b + Jᵀλ``, chosen by name.

Without contacts every solver family reduces to the SPD solve ``A v̂ = b``, done by
the linear solver (``solvers.linear``). Contact solvers register a factory
``factory(model, options: dict) -> ContactSolver`` in ``CONTACT_SOLVERS`` under their name
(see ``solvers.base`` for the interface).
"""
from ..errors import ParameterError

SOLVER_NAMES = ("cond", "sap", "lagged", "similar", "pgs", "incp")
CONTACT_SOLVERS: dict = {}


def check_solver_name(name: str) -> str:
    """Return ``name`` if it names a solver family, else raise a clear ParameterError."""
    if not isinstance(name, str) or name.lower() not in SOLVER_NAMES:
        raise ParameterError(f"unknown solver {name!r}; choose one of {', '.join(SOLVER_NAMES)}")
    return name.lower()


def make_contact_solver(name: str, model, options: dict):
    """Instantiate the registered contact solver ``name`` for ``model``."""
    _register_builtin()
    if name not in CONTACT_SOLVERS:
        available = ", ".join(sorted(CONTACT_SOLVERS)) or "none"
        raise ParameterError(f"contact solver {name!r} is not available in this version (available: {available})")
    return CONTACT_SOLVERS[name](model, dict(options or {}))


def _register_builtin() -> None:
    """Import the solver modules so they register themselves."""
    import importlib

    for module in ("cond", "sap", "pgs", "incp"):
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise

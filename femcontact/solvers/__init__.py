"""Solvers of the step system ``A v̂ = b + Jᵀλ``, chosen by name.

Without contacts every solver family reduces to the SPD solve ``A v̂ = b``, done by
block-Jacobi PCG (``solvers.linear``). Contact solvers register a factory in
``CONTACT_SOLVERS`` under their name.
"""
from ..errors import ParameterError

SOLVER_NAMES = ("cond", "sap", "lagged", "similar", "pgs", "incp")
CONTACT_SOLVERS: dict = {}


def check_solver_name(name: str) -> str:
    """Return ``name`` if it names a solver family, else raise a clear ParameterError."""
    if not isinstance(name, str) or name.lower() not in SOLVER_NAMES:
        raise ParameterError(f"unknown solver {name!r}; choose one of {', '.join(SOLVER_NAMES)}")
    return name.lower()

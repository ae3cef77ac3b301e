"""The names a scene's step settings take, and the columns of the contact-parameter table.

A leaf (it imports nothing from femcontact but ``errors``), so that ``Scene`` checks a name without
importing, and so compiling, the solvers, and every layer may read it: ``INTEGRATORS``
(``assembly/integrator.py``), ``SOLVER_NAMES`` (the contact solvers ``solvers.make_contact_solver``
makes; ``AUTO_SOLVER``: the default, the one that converges on the scene's kind, chosen by
``convergence.choose_solver``; ``PLANNED_SOLVERS``: named in the literature, not implemented), ``LINEAR_SOLVERS``
(``solvers/linear.py``) and ``CONTACT_PARAM_COLUMNS``, the columns of ``model.contact_params``
(one row per obstacle or body pair, written by ``spec.contact.ContactParams.row``, read by the
solvers; NaN means "automatic").
"""
from __future__ import annotations

from ..errors import ParameterError

INTEGRATORS = ("midpoint", "euler")
SOLVER_NAMES = ("cond", "sap", "lagged", "similar", "pgs", "incp")
NEWTON_SOLVERS = ("sap", "lagged", "similar")     # the SAP Newton path (solvers/sap.py)
DELASSUS_SOLVERS = ("pgs", "incp")                  # the contact-space baselines (solvers/delassus.py)
AUTO_SOLVER = "auto"
PLANNED_SOLVERS: tuple[str, ...] = ()
LINEAR_SOLVERS = ("auto", "pcg", "direct")
CONTACT_PARAM_COLUMNS = ("mu1", "mu2", "stiffness", "tau_d", "hc_dissipation", "stiction_tolerance", "sigma",
                         "restitution")


def check_solver_name(name: str) -> str:
    """Return ``name`` (lower case) if this version implements that solver or it is ``AUTO_SOLVER``,
    else raise a clear ParameterError."""
    key = name.lower() if isinstance(name, str) else name
    if key in SOLVER_NAMES or key == AUTO_SOLVER:
        return key
    if key in PLANNED_SOLVERS:
        raise ParameterError(f"solver {name!r} is not implemented in this version; choose one of "
                             f"{', '.join(SOLVER_NAMES)}")
    raise ParameterError(f"unknown solver {name!r}; choose one of {', '.join(SOLVER_NAMES)}, or {AUTO_SOLVER!r}")

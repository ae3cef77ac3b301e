"""femcontact: deformable bodies, cables and rigid bodies in frictional contact.

Public API: Scene (builder), Material, Simulator (step loop and output), meshes
(primitives, import), shapes (obstacle geometry), backend (arch and precision), spec (the
records Scene makes: FemBodySpec, RigidBodySpec, RodSpec, ObstacleSpec, JointSpec, ...), sweep
(parameter sweeps on Dask, returning a pandas DataFrame), read (a run's frames, contact forces and
per-step statistics: ``io/results.py``), plot (contact force, stick/slip and e_m against time), view
(the interactive viewer of a run's output, also in Jupyter).

The names are imported at their first use (PEP 562), not with the package: importing a kernel
module declares its kernels and so fixes the kernel runtime, which ``femcontact run --runtime``
chooses after reading its options (``backend.select_runtime``); ``femcontact --help`` stays fast.
"""
from __future__ import annotations

import importlib

from .errors import FemcontactError, MeshError, ParameterError, SimulationError
from .sweep import sweep  # the function (no kernels at import); the module is femcontact.sweep in sys.modules

__version__ = "0.1.0"

# public name -> (module, attribute or None for the module itself)
_LAZY = {"Scene": (".scene", "Scene"), "Material": (".spec", "Material"), "Simulator": (".simulator", "Simulator"),
         "StepStats": (".stepper", "StepStats"), "RunSummary": (".simulator", "RunSummary"),
         "meshes": (".meshes", None), "shapes": (".geometry.shapes", None), "backend": (".backend", None),
         "spec": (".spec", None), "read": (".io.results", "read"), "plot": (".io.results", "plot"),
         "view": (".io.viewer", "view")}

__all__ = ["Scene", "Material", "Simulator", "StepStats", "RunSummary", "meshes", "shapes", "backend", "spec",
           "read", "plot", "view", "FemcontactError", "MeshError", "ParameterError", "SimulationError", "sweep"]


def __getattr__(name: str):
    """Import a public name at its first use (module docstring)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module, __name__)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

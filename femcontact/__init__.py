"""femcontact: deformable bodies, cables and rigid bodies in frictional contact.

Public API: Scene (builder), Material, Simulator (step loop and output), meshes
(primitives, import), shapes (obstacle geometry), backend (arch and precision), spec (the
records Scene makes: FemBodySpec, RigidBodySpec, RodSpec, ObstacleSpec, JointSpec, ...), sweep
(parameter sweeps on Dask, returning a pandas DataFrame).
"""
from . import backend, meshes, spec
from .contact import shapes
from .errors import FemcontactError, MeshError, ParameterError, SimulationError
from .spec import Material
from .scene import Scene
from .simulator import RunSummary, Simulator, StepStats
from .sweep import sweep  # the function; the module is femcontact.sweep in sys.modules

__version__ = "0.1.0"

__all__ = ["Scene", "Material", "Simulator", "StepStats", "RunSummary", "meshes", "shapes", "backend", "spec",
           "FemcontactError", "MeshError", "ParameterError", "SimulationError", "sweep"]

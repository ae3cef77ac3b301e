"""Exceptions a user can cause, each with a message that says what to fix."""


class FemcontactError(Exception):
    """Base class of every error femcontact raises on purpose."""


class ParameterError(FemcontactError, ValueError):
    """A scene, material or solver parameter is out of its valid range."""


class MeshError(FemcontactError, ValueError):
    """A mesh is missing, unreadable, or not a valid simulation mesh."""


class SimulationError(FemcontactError, RuntimeError):
    """A run diverged or a solver failed; the message names the step and the likely cause."""

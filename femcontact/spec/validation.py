"""Checks of user-supplied values, shared by every layer.

This is the leaf of the package: it imports nothing from femcontact but ``errors`` (the
architecture test holds it to that), so any module may use it without risking a cycle. Each
helper returns the value in canonical form or raises a ParameterError naming ``what``.
"""
from __future__ import annotations

import math
import sys
from typing import Callable, Optional

import numpy as np

from ..errors import ParameterError


def require(cond: bool, message: str) -> None:
    """Raise ParameterError(message) unless ``cond``."""
    if not cond:
        raise ParameterError(message)


def as_float_array(value) -> np.ndarray:
    """``value`` as a float array, or an array holding one NaN when it is not numbers at all."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        return np.full(1, np.nan)


def vec3(value, what: str) -> np.ndarray:
    """(3,) float array of three finite numbers."""
    arr = as_float_array(value)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ParameterError(f"{what} must be three finite numbers, got {value!r}")
    return arr


def is_finite_number(value) -> bool:
    """True for a finite real number (Python or numpy; not a bool, and not an int too large for a float)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def positive(value, what: str) -> float:
    """A finite number > 0, as float."""
    if not is_finite_number(value) or value <= 0:
        raise ParameterError(f"{what} must be a positive number, got {value!r}")
    return float(value)


def positive_or_none(value, what: str) -> Optional[float]:
    """None (automatic) or a finite number > 0."""
    if value is None:
        return None
    if not is_finite_number(value) or value <= 0:
        raise ParameterError(f"{what} must be a positive number or None, got {value!r}")
    return float(value)


def non_negative(value, what: str) -> float:
    """A finite number >= 0, as float."""
    if not is_finite_number(value) or value < 0:
        raise ParameterError(f"{what} must be a non-negative number, got {value!r}")
    return float(value)


def non_negative_or_nan(value, what: str) -> float:
    """None or NaN (both: automatic, returned as NaN) or a finite number >= 0."""
    if value is None:
        return np.nan
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a non-negative number or None (automatic), got {value!r}") from None
    if np.isnan(v):
        return np.nan
    if not np.isfinite(v) or v < 0:
        raise ParameterError(f"{what} must be a non-negative finite number or None (automatic), got {value!r}")
    return v


def as_rotation_matrix(rotation) -> np.ndarray:
    """3x3 rotation matrix from None, a 3x3 matrix, a quaternion (w, x, y, z) or a scipy Rotation."""
    if rotation is None:
        return np.eye(3)
    scipy_rotation = sys.modules.get("scipy.spatial.transform")     # a Rotation exists only once it is imported
    if scipy_rotation is not None and isinstance(rotation, scipy_rotation.Rotation):
        return rotation.as_matrix()
    arr = as_float_array(rotation)
    if arr.shape == (4,):
        if not np.isfinite(arr).all() or np.linalg.norm(arr) == 0:
            raise ParameterError(f"rotation quaternion must be finite and non-zero, got {rotation!r}")
        from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up, imported where used
        return Rotation.from_quat(arr[[1, 2, 3, 0]]).as_matrix()
    if arr.shape == (3, 3) and np.isfinite(arr).all():
        if np.allclose(arr @ arr.T, np.eye(3), atol=1e-6) and np.linalg.det(arr) > 0:
            return arr
    raise ParameterError("rotation must be a 3x3 rotation matrix, a quaternion (w, x, y, z) "
                         f"or a scipy Rotation, got {rotation!r}")


def pose(position, rotation, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3, 3)) of a placed object, validated; errors start with ``what``."""
    try:
        c = np.asarray(position, dtype=float)
    except (TypeError, ValueError):
        c = np.full(1, np.nan)
    if c.shape != (3,) or not np.isfinite(c).all():
        raise ParameterError(f"{what}: position must be three finite numbers, got {position!r}")
    try:
        R = as_rotation_matrix(rotation)
    except ParameterError as exc:
        raise ParameterError(f"{what}: {exc}") from None
    return c, R


def evaluate_motion(motion: Callable, t: float, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3,3)) from a user's ``motion(t) -> (position, rotation)`` of a
    kinematic obstacle or body, validated; a failing or malformed motion names ``what`` and t."""
    try:
        pos, rot = motion(float(t))
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise ParameterError(f"motion of {what} failed at t={t:g}: must return "
                             f"(position (3,), rotation 3x3 or quaternion wxyz); got error {exc!r}") from None
    return pose(pos, rot, f"motion of {what} at t={t:g}")


def check_motion(motion, what: str) -> None:
    """None or a callable ``motion(t) -> (position, rotation)``."""
    if motion is not None and not callable(motion):
        raise ParameterError(f"{what}: motion must be a function t -> (position, rotation)")


def check_drive(what: str, position, velocity) -> None:
    """Exactly one of a position drive f(t, x0) and a velocity drive f(t), and it is callable."""
    if (position is None) == (velocity is None):
        raise ParameterError(f"{what}: give exactly one of position= or velocity=")
    if not callable(position or velocity):
        raise ParameterError(f"{what}: position/velocity must be a function of time")


def check_drive_output(what: str, position, velocity, x0: np.ndarray, t: float = 0.0) -> None:
    """Call a drive once at ``t`` and refuse it unless it returns finite values of the right shape:
    ``position(t, x0) -> (k, 3)`` or ``velocity(t) -> (3,) | (k, 3)`` for the k = len(x0) nodes."""
    k = len(x0)
    kind, want = ("position", f"({k}, 3)") if position is not None else ("velocity", f"(3,) or ({k}, 3)")
    try:
        value = position(float(t), np.array(x0, float)) if position is not None else velocity(float(t))
        arr = np.asarray(value, dtype=float)
    except ParameterError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise ParameterError(f"{what}: the {kind} function failed at t={t:g} ({type(exc).__name__}: {exc}); "
                             f"it must return an array of shape {want}") from None
    shapes = [(k, 3)] if position is not None else [(3,), (k, 3)]
    if arr.shape not in shapes:
        raise ParameterError(f"{what}: the {kind} function returned shape {arr.shape} at t={t:g}; it must return "
                             f"shape {want} for the {k} selected nodes")
    if not np.isfinite(arr).all():
        raise ParameterError(f"{what}: the {kind} function returned NaN or infinite values at t={t:g}")


def unit_vector(value, what: str) -> np.ndarray:
    """A non-zero 3-vector (the first row of a (k, 3) array is taken), normalized."""
    arr = as_float_array(value)
    if arr.ndim == 2:
        arr = arr[0]
    if arr.shape != (3,) or not np.isfinite(arr).all() or np.linalg.norm(arr) < 1e-12:
        raise ParameterError(f"{what} must be a non-zero 3-vector, got {value!r}")
    return arr / np.linalg.norm(arr)

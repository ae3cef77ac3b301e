"""Quaternions ``(w, x, y, z)`` and rotations on the host (numpy): products, rotation matrices, and
the angular velocity of a Cayley step, and cross-product matrices. Their kernel twins (``quat_matrix``,
``skew``) are in ``smallmat``."""
from __future__ import annotations

import numpy as np


_CYCLE1, _CYCLE2 = np.array([1, 2, 0]), np.array([2, 0, 1])      # (a_y, a_z, a_x), (a_z, a_x, a_y)
# [r]× = r @ _SKEW reshaped: _SKEW[k, 3 i + j] = −ε_ijk
_SKEW = -np.einsum("ijk->kij", np.array([[[0, 0, 0], [0, 0, 1], [0, -1, 0]], [[0, 0, -1], [0, 0, 0], [1, 0, 0]],
                                         [[0, 1, 0], [-1, 0, 0], [0, 0, 0]]], float)).reshape(3, 9)


def cross_matrix(r: np.ndarray) -> np.ndarray:
    """(..., 3) -> (..., 3, 3) cross-product matrices ``[r]×`` (``[r]× u = r × u``)."""
    return (np.asarray(r, float) @ _SKEW).reshape(np.shape(r)[:-1] + (3, 3))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a × b`` over the last axis (stacks of 3-vectors): four gathers and three products, ~5 µs
    where ``np.cross``'s axis handling costs ~30 µs a call."""
    return a.take(_CYCLE1, -1) * b.take(_CYCLE2, -1) - a.take(_CYCLE2, -1) * b.take(_CYCLE1, -1)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b of (..., 4) quaternions."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, float), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, float), -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (the inverse of a unit quaternion)."""
    return np.asarray(q, float) * np.array([1.0, -1.0, -1.0, -1.0])


def quat_from_matrix(R: np.ndarray) -> np.ndarray:
    """The unit quaternion (w, x, y, z) of a 3x3 rotation matrix."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return np.array([w, x, y, z])


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) quaternions (w, x, y, z) -> (..., 3, 3) rotation matrices."""
    q = np.asarray(q, float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def cayley_velocity(R0: np.ndarray, R1: np.ndarray, dt: float) -> np.ndarray:
    """The ω whose Cayley step ``cay(dt ω)`` takes R0 to R1 (kinematic bodies track poses exactly)."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R1 @ R0.T).as_quat()
    if w < 0:
        x, y, z, w = -x, -y, -z, -w
    return 2.0 * np.array([x, y, z]) / (w * dt)

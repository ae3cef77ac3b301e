"""Rod (cable) centre-line polylines: (n_segments + 1, 3) point arrays in m."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def _n(n_segments) -> int:
    n = int(n_segments)
    if n < 1:
        raise ParameterError(f"n_segments must be >= 1, got {n_segments}")
    return n


def _vec3(v, label):
    a = np.asarray(v, dtype=float)
    if a.shape != (3,) or not np.isfinite(a).all():
        raise ParameterError(f"{label} must be three finite numbers, got {v}")
    return a


def rod_straight(start=(0.0, 0.0, 0.0), end=(1.0, 0.0, 0.0), n_segments=20) -> np.ndarray:
    """Evenly spaced points from start to end."""
    a, b = _vec3(start, "start"), _vec3(end, "end")
    if np.allclose(a, b):
        raise ParameterError("rod start and end coincide")
    s = np.linspace(0.0, 1.0, _n(n_segments) + 1)[:, None]
    return a + s * (b - a)


def _frame(normal):
    nrm = _vec3(normal, "normal")
    ln = np.linalg.norm(nrm)
    if ln == 0:
        raise ParameterError("normal must be non-zero")
    nrm = nrm / ln
    helper = np.array([1.0, 0.0, 0.0]) if abs(nrm[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(helper, nrm)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(nrm, e1), nrm


def rod_arc(radius=0.1, angle=np.pi, n_segments=20, center=(0.0, 0.0, 0.0), start_angle=0.0,
            normal=(0.0, 0.0, 1.0)) -> np.ndarray:
    """Circular arc of ``radius`` spanning ``angle`` rad (2*pi: closed circle, last point
    repeats the first) in the plane through ``center`` with the given ``normal``
    (counter-clockwise about it; for normal +z the arc starts at center + radius*(cos a0, sin a0, 0))."""
    if not (radius > 0):
        raise ParameterError(f"arc radius must be positive, got {radius}")
    if angle == 0:
        raise ParameterError("arc angle must be non-zero")
    e1, e2, _ = _frame(normal)
    if np.allclose(_vec3(normal, "normal") / np.linalg.norm(normal), [0, 0, 1]):
        e1, e2 = np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
    th = start_angle + np.linspace(0.0, angle, _n(n_segments) + 1)
    return _vec3(center, "center") + radius * (np.cos(th)[:, None] * e1 + np.sin(th)[:, None] * e2)


def rod_helix(radius=0.05, pitch=0.02, turns=3.0, n_segments=None, center=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Helix about the z axis through ``center``, starting at center + (radius, 0, 0) and
    rising ``pitch`` per turn. n_segments default: 24 per turn."""
    if not (radius > 0) or not (turns > 0):
        raise ParameterError(f"helix radius and turns must be positive, got {radius}, {turns}")
    n = _n(n_segments if n_segments is not None else max(1, int(np.ceil(24 * turns))))
    th = np.linspace(0.0, 2 * np.pi * turns, n + 1)
    pts = np.stack([radius * np.cos(th), radius * np.sin(th), pitch * th / (2 * np.pi)], axis=1)
    return pts + _vec3(center, "center")

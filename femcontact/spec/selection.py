"""Selecting nodes of a body: index lists, boolean masks, region predicates."""
from __future__ import annotations

from typing import Callable, Union

import numpy as np

from ..errors import ParameterError

NodeSelector = Union[None, str, Callable[[np.ndarray], np.ndarray], np.ndarray, list, range]


def select_nodes(selector: NodeSelector, positions: np.ndarray, body: str = "body") -> np.ndarray:
    """Sorted unique node indices of a body picked by ``selector``.

    selector: None (all nodes); an index list/array; a boolean mask of length n;
    a predicate string over the coordinates ``x, y, z`` (m, world frame at placement)
    such as ``"x < 0.001"`` or ``"(z > 0.1) & (abs(x) < 0.02)"``; or a callable taking
    the (n, 3) positions and returning a mask or indices.
    """
    n = len(positions)
    if selector is None:
        return np.arange(n)
    if isinstance(selector, str):
        env = {"x": positions[:, 0], "y": positions[:, 1], "z": positions[:, 2], "np": np, "abs": np.abs}
        try:
            result = eval(selector, {"__builtins__": {}}, env)  # noqa: S307 - the user's own scene script
        except Exception as exc:
            raise ParameterError(f"cannot evaluate node predicate {selector!r} on {body}: {exc}") from None
        selector = np.broadcast_to(np.asarray(result), (n,))
    elif callable(selector):
        selector = np.asarray(selector(positions))
    arr = np.asarray(selector)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ParameterError(f"node mask for {body} has shape {arr.shape}, expected ({n},)")
        idx = np.flatnonzero(arr)
    else:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise ParameterError(f"node indices for {body} must be integers, got dtype {arr.dtype}")
        idx = np.unique(arr.astype(np.int64).ravel())
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise ParameterError(f"node index {int(bad[0])} out of range for {body} with {n} nodes")
    return idx


def require_nodes(idx: np.ndarray, selector: NodeSelector, positions: np.ndarray, what: str) -> np.ndarray:
    """``idx`` if it picks at least one node; else a ParameterError naming ``selector`` and the
    body's extent, so a predicate that misses every node is caught when the scene is built."""
    if len(idx):
        return idx
    lo, hi = positions.min(axis=0), positions.max(axis=0)
    span = ", ".join(f"{c} in [{a:.4g}, {b:.4g}]" for c, a, b in zip("xyz", lo, hi))
    raise ParameterError(f"{what}: the node selection {selector!r} matches no node; the body spans {span} m: "
                         "widen the predicate or pass node indices")

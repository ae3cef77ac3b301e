"""Central finite differences for the consistent-tangent tests (contact models, joints).

``central_jacobian(f, x, h)`` is ``∂f/∂x`` by central differences along each component of the last
axis of ``x``, batched over its leading axes: for ``x`` of shape ``(..., n)`` and ``f(x)`` of shape
``(..., *out)`` the result has shape ``(..., *out, n)``; when ``f`` returns a tuple, one such array
per entry (one evaluation of ``f`` per perturbation). The error is the truncation ``O(h² f''')``
plus the rounding ``O(ε |f| / h)`` (ε the machine epsilon): for a smooth ``f`` take ``h`` about
``ε^{1/3}`` times the scale of ``x`` (both errors ~1e-11 relative), smaller where ``f`` is only
piecewise smooth so that the two points rarely straddle a kink.

``scaled_error(approx, exact)`` is the largest error of a symmetric matrix in the units of its own
diagonal, ``max |D^{-1/2} (approx − exact) D^{-1/2}|`` with ``D = diag(|exact|)``: a tangent whose
rows mix metres and radians (levers of 0.1 m, stiffnesses 1e8 N/m and 1e4 N m) is judged per
pair of coordinates, not against its largest entry alone.
"""
import numpy as np


def central_jacobian(f, x: np.ndarray, h: float):
    """∂f/∂x at x by central differences of step h (module docstring); a tuple when f returns one."""
    x = np.asarray(x, float)
    columns = []
    for i in range(x.shape[-1]):
        e = np.zeros(x.shape[-1])
        e[i] = h
        plus, minus = f(x + e), f(x - e)
        if isinstance(plus, tuple):
            columns.append(tuple((np.asarray(p) - np.asarray(m)) / (2 * h) for p, m in zip(plus, minus)))
        else:
            columns.append((np.asarray(plus) - np.asarray(minus)) / (2 * h))
    if isinstance(columns[0], tuple):
        return tuple(np.stack(c, axis=-1) for c in zip(*columns))
    return np.stack(columns, axis=-1)


def scaled_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """max |D^{-1/2} (approx − exact) D^{-1/2}|, D = diag(|exact|) (module docstring); a zero
    diagonal entry (a coordinate the matrix does not see) is scaled by the largest one."""
    d = np.abs(np.diag(exact))
    d = np.sqrt(np.where(d > 0, d, d.max()))
    return float(np.abs((approx - exact) / d[:, None] / d[None, :]).max())

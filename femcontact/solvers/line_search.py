"""The exact line search's safeguarded Newton–bisection (rtsafe) on f(α) = dℓ/dα / |dℓ/dα(0)| (SAP §IV-C).

Shared by the numpy path (``sap.NewtonContactSolver._line_search``) and the compiled one
(``newton_compiled._line_search``, which compiles these same functions with numba), so the two take the same
trials. Plain floats in and out; no numpy arrays, no numba import here.
"""
import math

F_TOL = 1e-8            # stop at |f| below this (Drake's SAP tolerance)
A_TOL = 1e-8            # ... or at a correction below this fraction of the first guess


def rtsafe_start(df_max: float, a_max: float) -> float:
    """The first trial: the minimizer of the quadratic with the curvature at α_max, ``min(1/f'(α_max), α_max)``
    (= 1 where ℓ is quadratic along the line: the full Newton step), or α_max/2 where that is not inside."""
    a = min(1.0 / df_max, a_max) if df_max > 0 else 0.5 * a_max
    if not (0.0 < a < a_max):
        a = 0.5 * a_max
    return a


def rtsafe_step(a: float, f: float, df: float, lo: float, hi: float, step_old: float):
    """One rtsafe step from the trial ``a`` with f(a), f'(a) in the bracket [lo, hi]: the bracket shrunk to the
    sign change, then the Newton step where it stays inside and halves the step before last, else bisection.
    Returns (a_new, lo, hi, |a_new − a|)."""
    if f < 0:
        lo = a
    else:
        hi = a
    a_newton = a - f / df if df > 0 else math.nan
    if not (lo < a_newton < hi) or abs(2 * f) > abs(step_old * df):
        a_new = 0.5 * (lo + hi)
    else:
        a_new = a_newton
    return a_new, lo, hi, abs(a_new - a)


def rtsafe_done(step: float, a_tol: float, lo: float, hi: float) -> bool:
    """The bracket or the step is below round-off."""
    return step <= a_tol or hi - lo <= 1e-14 * hi

"""Chebyshev acceleration schedule of COND (Alg. 3), host side and free of Taichi.

Per iteration l the solver asks :meth:`ChebyshevSchedule.weight` for ν (the combination
``v̂ˡ⁺¹ = ν (u (v̂** − v̂ˡ) + v̂ˡ − v̂ˡ⁻¹) + v̂ˡ⁻¹``), then reports the step norm ‖Δˡ‖ with
:meth:`record`. ν = 1 for the first ``start`` iterations; then ν₁ = 2/(2 − ϱ²),
νₗ = 4/(4 − ϱ² νₗ₋₁). ϱ is COND eq. 34, ``min(‖Δˡ‖/‖Δˡ⁻¹‖, 1)`` on the unaccelerated iterates
(largest of the last three ratios, ≤ 0.999), raised to ``1 − 1.25 (1 − ϱ_prev)`` with the ϱ the
previous step ended with (recycled, decaying), and corrected from the accelerated rate every
24 iterations (``adapt``); a divergent or stalled acceleration backs off. docs/COND.md derives the
formulas and records the measurements behind the constants.

:class:`PaperChebyshevSchedule` (``chebyshev_schedule="paper"``) is Alg. 3 as printed: ϱ from
eq. 34 on the last two step norms, re-estimated after every iteration (line 14), nothing else.
``make_schedule`` picks one from the options.
"""
from __future__ import annotations

import math
from typing import Optional

RHO_MAX = 0.999            # eq. 34 estimate at most this
RHO_ADAPT_MAX = 0.9995     # ϱ adapted from the accelerated rate stays below this
ADAPT_SETTLE, ADAPT_WINDOW = 8, 24   # iterations after a (re)start before the rate check; its window
ADAPT_MARGIN = 1.5         # adapted ϱ = 1 − margin (1 − x): below the estimated eigenvalue x
RHO_DECAY = 1.25           # the recycled ϱ starts a step at 1 − decay (1 − ϱ_prev)


def chebyshev_weight(first: bool, rho: float, nu: float) -> float:
    """Alg. 3 line 8: ν = 2/(2 − ϱ²) on the first accelerated iteration, else 4/(4 − ϱ² ν_prev)."""
    return 2.0 / (2.0 - rho * rho) if first else 4.0 / (4.0 - rho * rho * nu)


class ChebyshevSchedule:
    """ν and ϱ for one solve.

    enabled: Chebyshev on; start: plain iterations before acceleration (``chebyshev_start``);
    rho: a fixed ϱ (None: estimate by eq. 34); adapt: correct ϱ from the accelerated rate (only
    meaningful with a fixed W, i.e. not under Barzilai–Borwein); rho_prev: the ϱ carried from the
    previous solve (None: none).
    """

    def __init__(self, enabled: bool, start: int, rho: Optional[float] = None, adapt: bool = True,
                 rho_prev: Optional[float] = None):
        self.enabled = bool(enabled)
        self.start = int(start)
        self.fixed = rho is not None
        self.adapt = self.enabled and not self.fixed and bool(adapt)
        self.rho = rho
        self.rho_prev = rho_prev
        self.estimate: Optional[float] = None     # the last eq. 34 value (diagnostic)
        self.nu = 1.0
        self.dnorms: list[float] = []
        self.accel_from = self.start
        self.estimate_at = self.start - 1
        self.theta_at_accel: Optional[float] = None
        self.check_at: Optional[int] = None
        self.ceiling = RHO_ADAPT_MAX
        self.restarts = 0
        self.adaptations = 0

    def weight(self, l: int) -> float:
        """ν for iteration l (0-based); 1 while not accelerating."""
        rho = self.rho
        if not self.enabled or rho is None or l < self.accel_from:
            self.nu = 1.0
        else:
            self.nu = chebyshev_weight(l == self.accel_from, rho, self.nu)
        return self.nu

    def may_stop(self, l: int) -> bool:
        """False on the plain steps that restart an accelerated recurrence: the accelerated steps
        they follow are ~1/(1−ϱ) times the residual, a plain one ~1 times, so a θ test there would
        stop at a much larger residual than an accelerated step with the same θ."""
        return not (l < self.accel_from and self.accel_from > self.start)

    def record(self, l: int, theta: float, dn: float) -> None:
        """Take iteration l's relative step norm θ and absolute step norm ‖Δˡ‖; update ϱ."""
        d = self.dnorms
        d.append(dn)
        if self.enabled and not self.fixed and l == self.estimate_at:
            ratios = [d[k] / d[k - 1] for k in range(max(1, len(d) - 3), len(d)) if d[k - 1] > 0.0]
            rho = min(max(ratios) if ratios else 0.0, 1.0, RHO_MAX)         # eq. 34
            if self.adapt and self.rho_prev is not None and self.restarts == 0:
                rho = max(rho, 1.0 - RHO_DECAY * (1.0 - self.rho_prev))      # recycled, decaying
            self.rho = rho if rho > 0.0 else None
            self.estimate = self.rho
        rho = self.rho
        if self.enabled and rho is not None and l == self.accel_from:
            self.theta_at_accel = theta
            self.check_at = l + ADAPT_SETTLE + ADAPT_WINDOW
        if self.theta_at_accel is not None and l > self.accel_from and theta > 100.0 * self.theta_at_accel \
                and self.restarts < 5:
            # divergent acceleration: restart the recurrence (ϱ from eq. 34 again)
            self.restarts += 1
            self.ceiling = min(self.ceiling, 1.0 - 1.5 * (1.0 - rho))
            self.rho = 0.9 * rho
            self.accel_from = l + 2
            self.estimate_at = l + 1
            self.theta_at_accel = self.check_at = None
        elif self.adapt and self.check_at is not None and l >= self.check_at:
            self._adapt(l, rho)

    def _adapt(self, l: int, rho: float) -> None:
        """A Chebyshev iteration tuned to ϱ converges at r = (x + √(x²−ϱ²)) / (1 + √(1−ϱ²)) on a
        plain-iteration eigenvalue x > ϱ; solved for x from the observed rate r over the window."""
        k = ADAPT_WINDOW
        d = self.dnorms
        now = max(d[l - 3: l + 1])
        before = max(d[l - k - 3: l - k + 1])
        self.check_at = l + k
        if not (before > 0.0 and now > 0.0):
            return
        r = (now / before) ** (1.0 / k)
        cr = r * (1.0 + math.sqrt(max(1.0 - rho * rho, 0.0)))
        x = (cr * cr + rho * rho) / (2.0 * cr)
        if r >= 1.0 and self.adaptations > 0 and self.restarts < 5:
            # no progress over the window after raising ϱ: back off and cap
            self.ceiling = min(self.ceiling, 1.0 - 1.5 * (1.0 - rho))
            self.rho = max(1.0 - 3.0 * (1.0 - rho), 0.0)
            self.restarts += 1
            self.accel_from = l + 2
            self.theta_at_accel = self.check_at = None
        elif r < 1.0 and x > rho + 0.25 * (1.0 - rho) and rho < self.ceiling:
            # stay on the safe side of x (an overestimate shrinks the convergence region to a thin
            # ellipse around [−ϱ, ϱ]; docs/COND.md)
            self.rho = min(1.0 - ADAPT_MARGIN * (1.0 - x), self.ceiling)
            self.adaptations += 1
            self.accel_from = l + 2
            self.theta_at_accel = self.check_at = None

    def carry(self, converged: bool) -> Optional[float]:
        """The ϱ to hand to the next solve: this solve's final ϱ if it converged (adaptive mode),
        else None; without adaptation the incoming value unchanged."""
        if not self.adapt:
            return self.rho_prev
        return self.rho if (converged and self.rho is not None) else None


class PaperChebyshevSchedule:
    """Alg. 3 literally: ν = 1 for l < l_s (``start``), ν = 2/(2 − ϱ²) at l_s, νₗ₊₁ = 4/(4 − ϱ² νₗ)
    after, with ϱ = min(‖Δˡ‖/‖Δˡ⁻¹‖, 1) (eq. 34) recomputed after every iteration (line 14) from
    the (accelerated) step norms. No restarts, no adaptation, nothing carried between solves.
    The same interface as :class:`ChebyshevSchedule`."""

    restarts = adaptations = 0

    def __init__(self, start: int):
        self.start = int(start)
        self.rho: Optional[float] = None
        self.estimate: Optional[float] = None
        self.nu = 1.0
        self._last: Optional[float] = None       # ‖Δˡ⁻¹‖

    def weight(self, l: int) -> float:
        rho = 0.0 if self.rho is None else self.rho
        self.nu = 1.0 if l < self.start else chebyshev_weight(l == self.start, rho, self.nu)
        return self.nu

    def may_stop(self, l: int) -> bool:
        return True

    def record(self, l: int, theta: float, dn: float) -> None:
        if self._last is not None and self._last > 0.0:
            self.rho = self.estimate = min(dn / self._last, 1.0)      # eq. 34
        self._last = dn

    def carry(self, converged: bool) -> None:
        return None


def make_schedule(acceleration: str, schedule: str, start: int, rho: Optional[float], adapt: bool,
                  rho_prev: Optional[float]):
    """The ν schedule of one acceleration run: the paper's (``schedule="paper"``) or the adaptive one
    (also the ν = 1 of Anderson and none: ``enabled`` only under Chebyshev)."""
    if acceleration == "chebyshev" and schedule == "paper":
        return PaperChebyshevSchedule(start)
    return ChebyshevSchedule(acceleration == "chebyshev", start, rho, adapt=adapt, rho_prev=rho_prev)

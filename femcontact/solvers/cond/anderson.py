"""Anderson acceleration of COND's fixed point (type II, AA(m); docs/COND.md, "Anderson acceleration").

The unaccelerated COND iteration (Alg. 1 with ν = 1) is a fixed-point map over every velocity row
(real and virtual nodes), ``x ↦ G(x) = x + u (v̂**(x) − x)``. With ``f_k = G(x_k) − x_k`` and the
last m differences ``ΔF = [f_{j+1} − f_j]``, ``ΔG = [G(x_{j+1}) − G(x_j)]``, AA(m) takes

    γ = argmin ‖f_k − ΔF γ‖  (normal equations, Tikhonov-regularized),   x_{k+1} = G(x_k) − ΔG γ.

Everything runs on the device in one launch per iteration (``anderson_step``): record the new
difference columns, update one row of the Gram matrix ΔFᵀΔF, solve the m×m system by Cholesky
(serially, m ≤ HISTORY_MAX), mix. Safeguard: an extrapolation whose residual comes back larger
than ``SAFEGUARD`` × the smallest residual since the history began, ``STALL_WINDOW`` × m
iterations without a new smallest residual (a history spanning several pieces of the piecewise
affine map), a non-positive pivot, or a wild solve (‖γ‖₁ > ``GAMMA_MAX``) drops the history and
keeps the plain step ``x_{k+1} = G(x_k)``.
"""
import numpy as np

from ... import backend
from ...backend import ti
from .layout import VROWS
from .reduce import group_size, partial_sums

HISTORY_MAX = 16       # the history m is at most this
SAFEGUARD = 4.0        # residual growth over the history's best that discards the history
GAMMA_MAX = 1e4        # a larger ‖γ‖₁ is an ill-conditioned extrapolation: discard
REGULARIZATION = 1e-10  # Tikhonov weight relative to the Gram matrix's largest diagonal entry

# real state (one ndarray): Gram matrix, its Cholesky factor, right-hand side, γ, best residual
GRAM, CHOL = 0, HISTORY_MAX * HISTORY_MAX
RHS, GAMMA = 2 * HISTORY_MAX * HISTORY_MAX, 2 * HISTORY_MAX * HISTORY_MAX + HISTORY_MAX
BEST = GAMMA + HISTORY_MAX
REAL_STATE = BEST + 1
# integer state: stored columns, next column, f/G of the previous iterate kept, current iterate mixed, restarts,
# iterations since the best residual last improved, the number of rows (an argument instead would make
# quadrants marshal every argument on each launch: layout.ITER_I)
COUNT, SLOT, HAVE_PREV, MIXED, RESTARTS, STALL, ROWS = range(7)
INT_STATE = 7
STALL_WINDOW = 2       # × m iterations without a new best residual: the history is stale, restart it


@ti.func
def _restart(Si: ti.template()):
    """Forget the difference columns (the previous iterate's f and G stay valid)."""
    Si[COUNT] = 0
    Si[SLOT] = 0
    Si[MIXED] = 0
    Si[RESTARTS] += 1


@ti.kernel
def anderson_step(V: ti.types.ndarray(), H: ti.types.ndarray(), Sf: ti.types.ndarray(), Si: ti.types.ndarray(),
                  m: ti.i32):
    """One AA(m) update after a plain iteration (V[v] = G(x_k), V[v_prev] = x_k) over the ``Si[ROWS]``
    rows. History H rows: ΔF columns 0..m-1, ΔG columns m..2m-1, then f and G of the previous iterate
    (2m, 2m+1)."""
    n = Si[ROWS]
    slot = Si[SLOT]
    had_prev = Si[HAVE_PREV]
    f2 = 0.0
    p = partial_sums(n)              # sums over the rows in partials (reduce.py)
    for b in range(p):
        part2 = 0.0
        for k in range(group_size(n, p, b)):
            i = b + k * p
            g = V[VROWS.V, i]
            f = g - V[VROWS.V_PREV, i]
            if had_prev != 0:
                H[slot, i] = f - H[2 * m, i]
                H[m + slot, i] = g - H[2 * m + 1, i]
            H[2 * m, i] = f
            H[2 * m + 1, i] = g
            part2 += f.norm_sqr()
        f2 += part2
    record = 0
    for _ in range(1):
        fn = ti.sqrt(f2)
        Si[HAVE_PREV] = 1
        if fn < Sf[BEST]:
            Si[STALL] = 0
        else:
            Si[STALL] += 1
        if (Si[MIXED] != 0 and fn > SAFEGUARD * Sf[BEST]) or Si[STALL] >= STALL_WINDOW * m:
            _restart(Si)
            Si[STALL] = 0
            Sf[BEST] = fn
        else:
            Sf[BEST] = ti.min(Sf[BEST], fn)
            if had_prev != 0:
                record = 1
                Si[COUNT] = ti.min(Si[COUNT] + 1, m)
    dots = ti.Vector.zero(float, 2 * HISTORY_MAX)
    for b in range(p):          # (a guard around a loop would make it serial: the guard is inside)
        if record != 0:
            part = ti.Vector.zero(float, 2 * HISTORY_MAX)
            for k in range(group_size(n, p, b)):
                i = b + k * p
                d = H[slot, i]
                f = H[2 * m, i]
                for j in ti.static(range(HISTORY_MAX)):
                    if j < m:
                        dj = H[j, i]
                        part[j] += d.dot(dj)
                        part[HISTORY_MAX + j] += dj.dot(f)
            dots += part
    mix = 0
    for _ in range(1):
        Si[MIXED] = 0
        if record != 0:
            for j in ti.static(range(HISTORY_MAX)):
                if j < m:
                    Sf[GRAM + slot * HISTORY_MAX + j] = dots[j]
                    Sf[GRAM + j * HISTORY_MAX + slot] = dots[j]
                    Sf[RHS + j] = dots[HISTORY_MAX + j]
            Si[SLOT] = (slot + 1) % m
            k = Si[COUNT]
            big = 0.0
            for j in range(k):
                big = ti.max(big, Sf[GRAM + j * HISTORY_MAX + j])
            reg = REGULARIZATION * ti.max(big, 1e-300)
            ok = 1
            # Cholesky of (ΔFᵀΔF + reg I)[:k, :k]
            for r in range(k):
                for c in range(r + 1):
                    s = Sf[GRAM + r * HISTORY_MAX + c]
                    if r == c:
                        s += reg
                    for q in range(c):
                        s -= Sf[CHOL + r * HISTORY_MAX + q] * Sf[CHOL + c * HISTORY_MAX + q]
                    if r == c:
                        if s > 0.0:
                            Sf[CHOL + r * HISTORY_MAX + r] = ti.sqrt(s)
                        else:
                            ok = 0
                            Sf[CHOL + r * HISTORY_MAX + r] = 1.0
                    else:
                        Sf[CHOL + r * HISTORY_MAX + c] = s / Sf[CHOL + c * HISTORY_MAX + c]
            # forward then backward substitution: γ = (L Lᵀ)⁻¹ rhs
            for r in range(k):
                s = Sf[RHS + r]
                for q in range(r):
                    s -= Sf[CHOL + r * HISTORY_MAX + q] * Sf[GAMMA + q]
                Sf[GAMMA + r] = s / Sf[CHOL + r * HISTORY_MAX + r]
            for t in range(k):
                r = k - 1 - t
                s = Sf[GAMMA + r]
                for q in range(r + 1, k):
                    s -= Sf[CHOL + q * HISTORY_MAX + r] * Sf[GAMMA + q]
                Sf[GAMMA + r] = s / Sf[CHOL + r * HISTORY_MAX + r]
            total = 0.0
            for j in range(k):
                total += ti.abs(Sf[GAMMA + j])
            if ok == 0 or not (total <= GAMMA_MAX):      # also catches NaN
                _restart(Si)
            else:
                mix = k
                Si[MIXED] = 1
    for i in range(n):
        if mix > 0:
            x = V[VROWS.V, i]
            for j in range(mix):
                x -= Sf[GAMMA + j] * H[m + j, i]
            V[VROWS.V, i] = x


class AndersonMixer:
    """AA(m) for COND's iteration: history columns and state on the device (``anderson_step``)."""

    def __init__(self, history: int, cap: int):
        if not 1 <= history <= HISTORY_MAX:
            raise ValueError(f"Anderson history must be in [1, {HISTORY_MAX}], got {history}")
        self.m = int(history)
        self.cap = 0
        self.alloc(cap)
        self.Sf = ti.ndarray(float, shape=REAL_STATE)
        self.Si = ti.ndarray(ti.i32, shape=INT_STATE)
        self._sf, self._si = backend.host_view(self.Sf), backend.host_view(self.Si)
        self._rows = -1

    def alloc(self, cap: int) -> None:
        """History columns for ``cap`` velocity rows (grown with COND's work arrays)."""
        if cap > self.cap:
            self.cap = cap
            self.H = ti.Vector.ndarray(3, float, shape=(2 * self.m + 2, cap))

    def reset(self) -> None:
        """Start of a solve: no history, no restarts (through the host views where there are: no launch)."""
        if self._si is not None:
            self._si[:] = 0
            self._sf[:] = 0.0
            self._sf[BEST] = np.inf
        else:
            self.Si.fill(0)
            self.Sf.fill(0.0)
            self.Sf[BEST] = np.inf
        self._rows = -1

    def advance(self, V, n: int) -> None:
        """After a plain iteration over ``n`` rows: record, and overwrite V[v] with x_{k+1}."""
        if n != self._rows:
            if self._si is not None:
                self._si[ROWS] = n
            else:
                self.Si[ROWS] = n
            self._rows = n
        anderson_step(V, self.H, self.Sf, self.Si, self.m)

    @property
    def restarts(self) -> int:
        """Histories discarded by the safeguard in this solve (reads the device)."""
        return int(self.Si[RESTARTS])

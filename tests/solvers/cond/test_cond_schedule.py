"""COND's host-side parts on synthetic data: the Chebyshev schedule (Alg. 3, eq. 34) fed with
made-up step-norm sequences, and the layout schema of the packed work arrays. No kernels run."""
import math

import numpy as np
import pytest

from femcontact.solvers.cond import chebyshev as cb
from femcontact.solvers.cond import layout
from femcontact.solvers.cond.chebyshev import ChebyshevSchedule


def _feed(s: ChebyshevSchedule, norms, theta=None):
    """Run the schedule over step norms (θ = norm unless given); returns the ν of each iteration."""
    nus = []
    for l, dn in enumerate(norms):
        nus.append(s.weight(l))
        s.record(l, dn if theta is None else theta[l], dn)
    return nus


def test_plain_iterations_then_eq34_estimate_and_chebyshev_weights():
    r = 0.8
    s = ChebyshevSchedule(True, 8)
    nus = _feed(s, [r ** l for l in range(12)])
    assert nus[:8] == [1.0] * 8                      # unaccelerated while ϱ is measured
    assert s.rho == pytest.approx(r, rel=1e-12)      # eq. 34: ‖Δˡ‖/‖Δˡ⁻¹‖
    nu1 = 2.0 / (2.0 - r * r)
    nu2 = 4.0 / (4.0 - r * r * nu1)
    assert nus[8] == pytest.approx(nu1) and nus[9] == pytest.approx(nu2)
    assert all(1.0 < nu < 2.0 for nu in nus[8:])


def test_largest_of_last_three_ratios_and_cap():
    s = ChebyshevSchedule(True, 8)
    norms = [1.0, 0.5, 0.25, 0.125, 0.0625, 0.05, 0.045, 0.03]     # last ratios 0.8, 0.9, 0.667
    _feed(s, norms)
    assert s.rho == pytest.approx(0.9)
    s = ChebyshevSchedule(True, 8)
    _feed(s, [1.1 ** l for l in range(8)])           # growing: capped at RHO_MAX
    assert s.rho == cb.RHO_MAX


def test_recycled_rho_decays():
    s = ChebyshevSchedule(True, 8, rho_prev=0.99)
    _feed(s, [0.5 ** l for l in range(8)])
    assert s.rho == pytest.approx(1.0 - cb.RHO_DECAY * 0.01)    # max(0.5, 1 − 1.25 (1 − 0.99))
    s = ChebyshevSchedule(True, 8, rho_prev=0.99, adapt=False)  # recycling belongs to the adaptive mode
    _feed(s, [0.5 ** l for l in range(8)])
    assert s.rho == pytest.approx(0.5)


def test_fixed_rho_and_disabled():
    s = ChebyshevSchedule(True, 4, rho=0.6)
    nus = _feed(s, [0.9 ** l for l in range(6)])
    assert s.rho == 0.6 and nus[4] == pytest.approx(2.0 / (2.0 - 0.36))
    s = ChebyshevSchedule(False, 4)
    assert _feed(s, [0.9 ** l for l in range(20)]) == [1.0] * 20 and s.rho is None


def test_adaptation_raises_rho_from_the_accelerated_rate():
    """Tuned to ϱ = 0.5, the iteration is observed to converge at 0.99 per iteration: the limiting
    eigenvalue x solves r = (x + √(x²−ϱ²))/(1 + √(1−ϱ²)); ϱ becomes 1 − 1.5 (1 − x) and the
    recurrence restarts two iterations later (no stopping on that plain step)."""
    rho, r = 0.5, 0.99
    s = ChebyshevSchedule(True, 8)
    plain = [rho ** l for l in range(8)]
    check = 8 + cb.ADAPT_SETTLE + cb.ADAPT_WINDOW
    acc = [plain[-1] * r ** (l - 7) for l in range(8, check + 1)]
    _feed(s, plain + acc)
    cr = r * (1.0 + math.sqrt(1.0 - rho * rho))
    x = (cr * cr + rho * rho) / (2.0 * cr)
    assert s.adaptations == 1 and s.restarts == 0
    assert s.rho == pytest.approx(min(1.0 - cb.ADAPT_MARGIN * (1.0 - x), cb.RHO_ADAPT_MAX))
    assert s.accel_from == check + 2
    assert not s.may_stop(check + 1) and s.weight(check + 1) == 1.0
    assert s.may_stop(check + 2) and s.weight(check + 2) > 1.0
    assert s.carry(converged=True) == s.rho and s.carry(converged=False) is None


def test_matching_rate_keeps_rho():
    """Converging at the rate Chebyshev promises for ϱ (no eigenvalue above ϱ): no adaptation."""
    rho = 0.9
    s = ChebyshevSchedule(True, 8)
    rate = rho / (1.0 + math.sqrt(1.0 - rho * rho))     # asymptotic Chebyshev rate for spectrum [−ϱ, ϱ]
    norms = [rho ** l for l in range(8)] + [rho ** 7 * rate ** k for k in range(1, 80)]
    _feed(s, norms)
    assert s.adaptations == 0 and s.restarts == 0 and s.rho == pytest.approx(rho)


def test_divergent_acceleration_restarts_lower():
    rho = 0.9
    s = ChebyshevSchedule(True, 8)
    norms = [rho ** l for l in range(8)]
    theta = list(norms) + [norms[-1] * 2.0 ** k for k in range(1, 9)]     # grows 2x per iteration
    _feed(s, theta, theta=theta)
    assert s.restarts == 1
    assert s.rho == pytest.approx(0.9 * rho)       # 0.9 ϱ until eq. 34 is evaluated again
    assert s.ceiling == pytest.approx(1.0 - 1.5 * (1.0 - rho))


def test_stall_after_adaptation_backs_off():
    s = ChebyshevSchedule(True, 8)
    s.rho, s.adaptations, s.accel_from = 0.99, 1, 8
    s.estimate_at = -1
    s.check_at = 8 + cb.ADAPT_SETTLE + cb.ADAPT_WINDOW
    n = s.check_at + 1
    _feed(s, [1.0] * n)                              # no progress at all
    assert s.restarts == 1 and s.rho == pytest.approx(1.0 - 3.0 * 0.01)
    assert s.ceiling == pytest.approx(1.0 - 1.5 * 0.01)


def test_paper_schedule_reestimates_rho_every_iteration():
    """Alg. 3 as printed: ν = 1 before l_s, then the recurrence with ϱ = min(‖Δˡ‖/‖Δˡ⁻¹‖, 1) of the
    latest two step norms (eq. 34, line 14), whatever the norms do; nothing carried to the next solve."""
    norms = [1.0, 0.5, 0.4, 0.36, 0.3, 0.33, 0.2, 0.1]
    s = cb.PaperChebyshevSchedule(3)
    nus, rhos = [], []
    for l, dn in enumerate(norms):
        nus.append(s.weight(l))
        s.record(l, dn, dn)
        rhos.append(s.rho)
    assert rhos[0] is None
    assert rhos[1:] == pytest.approx([min(norms[k] / norms[k - 1], 1.0) for k in range(1, len(norms))])
    assert rhos[5] == 1.0                                        # a growing norm: ϱ = 1 (the min in eq. 34)
    assert nus[:3] == [1.0] * 3
    nu = 2.0 / (2.0 - rhos[2] ** 2)
    assert nus[3] == pytest.approx(nu)                           # l = l_s: ϱ of the iteration before
    for l in range(4, len(norms)):
        nu = 4.0 / (4.0 - rhos[l - 1] ** 2 * nu)
        assert nus[l] == pytest.approx(nu)
    assert s.may_stop(5) and s.carry(True) is None and s.restarts == s.adaptations == 0
    assert isinstance(cb.make_schedule("chebyshev", "paper", 8, None, True, 0.9), cb.PaperChebyshevSchedule)
    assert not cb.make_schedule("anderson", "adaptive", 8, None, True, None).enabled


def test_layout_columns_are_contiguous_and_typed():
    for table in (layout.CONTACT, layout.CONTACT_NODES, layout.VIRTUAL, layout.VIRTUAL_NODES, layout.ROW,
                  layout.ROD_ROWS, layout.ROD_SLOTS, layout.ROD_BLOCKS, layout.ROD_FACTOR):
        end = 0
        for c in table.columns.values():
            assert c.off == end
            end += c.span
        assert end == table.width
    from femcontact.backend import ti
    for table in (layout.CONTACT_NODES, layout.VIRTUAL_NODES, layout.ROW, layout.ROD_ROWS, layout.ROD_SLOTS):
        assert table.dtype == ti.i32
    assert layout.VIRTUAL.width == 4 * 9 + 1
    a = np.arange(2 * layout.CONTACT.width, dtype=float).reshape(2, -1)
    cols = layout.CONTACT.unpack(a)
    assert cols["frame"].shape == (2, 1, 3, 3) and cols["mu"].shape == (2, 2)
    assert cols["lam"][1, 0, 0] == a[1, layout.CONTACT.lam.off]
    assert len(set(layout.VROWS.names)) == layout.VROWS.count

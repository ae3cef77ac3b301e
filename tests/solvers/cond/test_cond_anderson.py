"""Anderson acceleration of COND (solvers/cond/anderson.py): the AA(m) kernel on maps with known fixed
points, and COND with acceleration="anderson" against the analytic answers and the Chebyshev solution."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.solvers.cond.anderson import AndersonMixer
from femcontact.solvers.cond.layout import VROWS
from tests.solvers.cond.test_cond import _cube_sim, _one_step_problem, _settled_then_pushed, _com_velocity

G = 9.81


def _iterate(G_map, x0, history=None, tol=1e-10, max_iter=5000):
    """Fixed-point iteration of ``G_map`` on (rows, 3) arrays through the device kernel (history None:
    plain). Returns (x, iterations, restarts)."""
    from femcontact.backend import ti
    n = len(x0)
    V = ti.Vector.ndarray(3, float, shape=(VROWS.count, n))
    mixer = AndersonMixer(history, n) if history else None
    if mixer:
        mixer.reset()
    x = x0.copy()
    table = np.zeros((VROWS.count, n, 3))
    for k in range(1, max_iter + 1):
        g = G_map(x)
        if np.linalg.norm(g - x) < tol * max(np.linalg.norm(g), 1.0):
            return g, k, mixer.restarts if mixer else 0
        if mixer is None:
            x = g
            continue
        table[VROWS.V_PREV], table[VROWS.V] = x, g
        V.from_numpy(table)
        mixer.advance(V, n)
        x = V.to_numpy()[VROWS.V].astype(np.float64)
    return x, max_iter, mixer.restarts if mixer else 0


def _linear_map(n, rate, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((3 * n, 3 * n)))
    M = Q @ np.diag(np.linspace(-rate, rate, 3 * n)) @ Q.T
    c = rng.standard_normal(3 * n)
    return M, c


def test_anderson_solves_a_linear_fixed_point_in_at_most_dim_plus_one_steps():
    """AA(m) with m ≥ dim on a linear map is GMRES in disguise: exact after dim + 1 iterations."""
    fc.backend.ensure_init()
    n = 3                                     # 9 unknowns, history 12
    M, c = _linear_map(n, 0.95)
    x_star = np.linalg.solve(np.eye(3 * n) - M, c).reshape(n, 3)
    G_map = lambda x: (M @ x.ravel() + c).reshape(n, 3)   # noqa: E731
    x_plain, it_plain, _ = _iterate(G_map, np.zeros((n, 3)))
    x_aa, it_aa, restarts = _iterate(G_map, np.zeros((n, 3)), history=12)
    np.testing.assert_allclose(x_aa, x_star, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(x_plain, x_star, rtol=1e-7, atol=1e-7)
    assert it_aa <= 3 * n + 3, it_aa         # dim + 1, plus the first plain step and rounding
    assert it_plain > 200                    # 0.95ᵏ < 1e-10
    assert restarts == 0


def test_anderson_finds_the_fixed_point_of_a_projected_map():
    """A non-smooth map like COND's (an affine contraction followed by a projection onto z ≥ 0):
    AA(8) converges to the plain iteration's fixed point in far fewer iterations."""
    fc.backend.ensure_init()
    n = 40
    M, c = _linear_map(n, 0.99, seed=1)

    def G_map(x):
        y = (M @ x.ravel() + c).reshape(n, 3)
        y[:, 2] = np.maximum(y[:, 2], 0.0)
        return y

    x_plain, it_plain, _ = _iterate(G_map, np.zeros((n, 3)), tol=1e-12, max_iter=20000)
    x_aa, it_aa, _ = _iterate(G_map, np.zeros((n, 3)), history=8, tol=1e-12)
    assert np.any(x_plain[:, 2] == 0.0) and np.any(x_plain[:, 2] > 0.0)   # both branches active
    np.testing.assert_allclose(x_aa, x_plain, atol=1e-9 * np.abs(x_plain).max())
    assert it_aa < 0.35 * it_plain, (it_aa, it_plain)


def test_anderson_resting_cube_carries_its_weight():
    sim, _ = _cube_sim(nu=0.0, options={"acceleration": "anderson"})
    m = sim.model.mass_np.sum()
    for _ in range(30):
        sim.step()
        assert sim.last_solve.converged
    d = sim.contacts.to_numpy()
    assert d["impulse"][:, 2].sum() == pytest.approx(m * G * sim.scene.dt, rel=1e-2)


@pytest.mark.parametrize("factor", [1.5, 0.5])
def test_anderson_pushed_cube_slides_or_sticks(factor):
    """The pushed cube of test_cond under Anderson: slides at F/m − μg, or stays stuck."""
    mu, m = 0.5, 1000.0 * 0.1**3
    F = factor * mu * m * G
    sim, _ = _settled_then_pushed((F, 0, 0), options={"acceleration": "anderson"})
    v0 = _com_velocity(sim)
    sim.step()
    dv = (_com_velocity(sim) - v0)[0]
    if factor > 1:
        assert dv == pytest.approx((F / m - mu * G) * sim.scene.dt, rel=1e-2)
    else:
        assert abs(dv) < 0.1 * F / m * sim.scene.dt


def test_anderson_agrees_with_chebyshev_and_beats_plain_on_stiff_multicontact():
    res, counts = {}, {}
    for accel in ("none", "chebyshev", "anderson"):
        sim, _ = _cube_sim(E=1e7, res=4, options={"acceleration": accel, "tol": 1e-9, "max_iter": 20000})
        st = sim.contact_solver.solve(_one_step_problem(sim))
        assert st.converged, accel
        counts[accel] = st.iterations
        res[accel] = sim.contacts.to_numpy()["impulse"]
    scale = np.abs(res["none"]).max()
    for accel in ("chebyshev", "anderson"):
        np.testing.assert_allclose(res[accel], res["none"], atol=1e-5 * scale)
    assert counts["anderson"] < 0.5 * counts["none"], counts


def test_reading_the_residual_every_k_iterations_keeps_the_answer():
    """check_every=k (GPU-ready: norms stay on the device, read every k iterations) stops at the first
    read after θ < tol: the same solution, at most k − 1 iterations later, and the same θ history
    (the iteration itself is unchanged)."""
    runs = {}
    for k in (1, 7):
        sim, _ = _cube_sim(E=1e7, res=4, options={"acceleration": "anderson", "tol": 1e-9, "max_iter": 20000,
                                                  "check_every": k, "compliance_passes": 0})
        st = sim.contact_solver.solve(_one_step_problem(sim))
        assert st.converged, k
        runs[k] = (st.iterations, sim.contacts.to_numpy()["impulse"], list(sim.contact_solver.history))
    (it1, lam1, h1), (it7, lam7, h7) = runs[1], runs[7]
    assert it7 % 7 == 0 and it1 <= it7 < it1 + 7, (it1, it7)
    np.testing.assert_allclose(h7[:it1], h1, rtol=1e-9, atol=0.0)
    np.testing.assert_allclose(lam7, lam1, atol=1e-6 * np.abs(lam1).max())


def test_check_every_is_refused_under_chebyshev():
    with pytest.raises(fc.errors.ParameterError, match="check_every"):
        _cube_sim(options={"acceleration": "chebyshev", "check_every": 4})


def test_default_tolerance_is_floored_in_float32():
    """θ stalls at ~1e-7..1e-6 in float32 on stiff contact, so an unset tol never goes below 1e-6 there
    (an explicit tol is kept); float64 keeps DEFAULT_TOL. Checked in a fresh float32 process."""
    import subprocess
    import sys

    from femcontact.solvers.cond.options import CondOptions, DEFAULT_TOL, F32_TOL_FLOOR

    assert CondOptions.from_dict({}).tol == DEFAULT_TOL["anderson"] < F32_TOL_FLOOR
    code = ("import femcontact as fc; fc.backend.init('cpu', 'f32'); "
            "from femcontact.solvers.cond.options import CondOptions as O; "
            "print(O.from_dict({}).tol, O.from_dict({'tol': 1e-8}).tol, O.from_dict({'acceleration': 'chebyshev'}).tol)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert [float(x) for x in out[-3:]] == [F32_TOL_FLOOR, 1e-8, max(DEFAULT_TOL["chebyshev"], F32_TOL_FLOOR)]

"""Todorov's implicit nonlinear complementarity (``solver="incp"``): the map that satisfies
complementarity and the exact cone for any x, the edge geometry of the line search, the solve on
random contact problems, the step contract, and the paper's claims on scenes (the residual at
convergence certifies Signorini–Coulomb to 1e-8 relative; iteration counts on the stack and the
grasp, printed).

The scenes with known answers that every solver runs (pushed box x(t) = ½(F/m − μg)t², box below
friction, incline stick/slide, resting stack weights within 1%, thrown sphere rolling at
2v0/(7μg), held ball and capstan against Lagged or the analytic answer) are test_agreement_matrix's;
the anisotropic box and checkpoints are parametrized over solvers with "incp" added next to "pgs"
(test_contact_physics, test_sap, test_checkpoint); the option checks and prescribed nodes are test_pgs's,
parametrized over both Delassus solvers.
"""
import numpy as np
import pytest

import femcontact as fc
from femcontact.contact.contacts import OPEN, SLIP, STICK
from femcontact.solvers.incp import (ScaledContactProblem, contact_regions, edge_crossings, implicit_impulse,
                                     initial_points, project_on_cone_edge, solve_with_restarts)
from femcontact.solvers.pgs import local_solve
from tests.helpers.scenes_util import load_scene

RNG = np.random.default_rng(16)
G_ACC = 9.81


def _random_delassus(c):
    """A random symmetric positive definite 3c × 3c operator."""
    M = RNG.normal(size=(3 * c, 3 * c))
    return M @ M.T / (3 * c) + 0.05 * np.eye(3 * c)


def _rigid_box_problem(c):
    """G = J M⁻¹ Jᵀ and q = J v of a rigid box (1 kg, 0.1 m) on the ground at c points of its bottom
    face, thrown with a random velocity into the ground (rank 6: the contacts of one rigid body)."""
    pts = np.column_stack([RNG.uniform(-0.05, 0.05, size=(c, 2)), np.full(c, -0.05)])
    m, inertia = 1.0, 1.0 * 0.1**2 / 6
    rows = []
    for p in pts:
        ang = RNG.uniform(0, 2 * np.pi)
        t1 = np.array([np.cos(ang), np.sin(ang), 0.0])
        frame = np.array([t1, np.cross([0, 0, 1.0], t1), [0, 0, 1.0]])          # rows t1, t2, n
        skew = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
        rows.append(np.hstack([frame, -frame @ skew]))                         # u = R (v + ω × p)
    J = np.vstack(rows)
    Minv = np.diag([1 / m] * 3 + [1 / inertia] * 3)
    v = RNG.normal(size=6) * [1, 1, 0.3, 3, 3, 3] - [0, 0, 0.5, 0, 0, 0]
    return J @ Minv @ J.T, J @ v


def assert_signorini_coulomb(G, q, mu, lam, status=None, rtol=1e-8):
    """λ (c, 3) and u = G λ + q (rows t1, t2, n) satisfy, to ``rtol`` relative: λ_n >= 0, u_n >= 0,
    λ_n u_n = 0, the exact (elliptic) cone, stick ⇒ u_t = 0, slip ⇒ λ on the cone and maximal
    dissipation λ_t = −λ_n (μ1² u1, μ2² u2)/‖(μ1 u1, μ2 u2)‖ (its direction error weighted by the
    slip speed relative to the velocity scale). Returns the worst relative violation."""
    c = len(mu)
    u = (G @ lam.ravel() + q).reshape(c, 3)
    su = max(np.abs(q).max(), np.abs(G @ lam.ravel()).max(), 1e-300)
    sl = max(np.abs(lam).max(), 1e-300)
    worst = 0.0
    worst = max(worst, -lam[:, 2].min() / sl, -u[:, 2].min() / su, np.abs(lam[:, 2] * u[:, 2]).max() / (sl * su))
    safe = np.where(mu > 0, mu, 1.0)
    ell = np.hypot(lam[:, 0] / safe[:, 0], lam[:, 1] / safe[:, 1])
    assert np.all(lam[mu[:, 0] == 0, 0] == 0) and np.all(lam[mu[:, 1] == 0, 1] == 0)
    worst = max(worst, ((ell - lam[:, 2]) / np.maximum(lam[:, 2].max(), 1e-300)).max())
    # tangential: stick (inside) ⇒ u_t = 0; on the cone ⇒ λ_t opposes the slip, maximal dissipation
    loaded = lam[:, 2] > 1e-12 * sl
    inside = loaded & (ell < lam[:, 2] * (1 - 1e-6))
    if inside.any():
        worst = max(worst, np.abs(u[inside, :2]).max() / su)
    on = loaded & ~inside
    for m in np.flatnonzero(on):
        d = np.array([mu[m, 0] * u[m, 0], mu[m, 1] * u[m, 1]])
        nd = np.linalg.norm(d)
        if nd <= 1e-9 * su:
            continue                              # on the cone edge at zero slip: stick and slip agree
        expect = -lam[m, 2] * np.array([mu[m, 0] * d[0], mu[m, 1] * d[1]]) / nd
        # a velocity error of rtol·su turns a slip direction of size nd by rtol·su/nd: the direction of
        # a slow slip is measured in that unit
        worst = max(worst, np.abs(lam[m, :2] - expect).max() / sl * min(1.0, nd / su))
    if status is not None:
        assert np.all(status[lam[:, 2] == 0] == OPEN)
    assert worst <= rtol, worst
    return worst


# --------------------------------------------------------------------------- the map (eqs. 10-14)
def test_map_satisfies_complementarity_and_the_exact_cone_for_any_x():
    """f(x), v(x) = f + x: f_n >= 0, v_n >= 0, f_n v_n = 0; ‖f_t‖ <= f_n; v_t ∥ −f_t with v_t = 0
    inside the cone (Fig. 1C), for random x and for points on the plane, the cone and the apex."""
    x = RNG.normal(size=(2000, 3))
    x[:50, 2] = 0.0                                             # on the plane edge
    x[50:100, 2] = -np.hypot(x[50:100, 0], x[50:100, 1])       # on the cone edge
    x[100] = 0.0                                                # the apex
    f = implicit_impulse(x)
    v = f + x
    assert np.all(f[:, 2] >= 0) and np.all(v[:, 2] >= 0)
    assert np.all(f[:, 2] * v[:, 2] == 0)
    nf = np.hypot(f[:, 0], f[:, 1])
    assert np.all(nf <= f[:, 2] * (1 + 1e-15))
    cross = f[:, 0] * v[:, 1] - f[:, 1] * v[:, 0]
    assert np.abs(cross).max() <= 1e-14 * (1 + np.abs(x).max() ** 2)
    assert np.all(f[:, 0] * v[:, 0] + f[:, 1] * v[:, 1] <= 1e-15)
    region = contact_regions(x)
    np.testing.assert_array_equal(v[region == 1, :2], 0.0)
    slip = region == 2
    np.testing.assert_allclose(nf[slip], f[slip, 2], rtol=1e-14)


def test_edge_crossings_and_the_cone_projection():
    """Eq. 27: the α found lie on the plane or the cone of some contact; §III-D: the projection is
    on the cone and no sampled cone point is nearer."""
    for _ in range(50):
        p, u = RNG.normal(size=12), RNG.normal(size=12)
        for a in edge_crossings(p, u):
            y = (p + a * u).reshape(4, 3)
            on_plane = np.abs(y[:, 2]) <= 1e-12 * np.abs(y).max()
            on_cone = (y[:, 2] <= 0) & (np.abs(np.hypot(y[:, 0], y[:, 1]) + y[:, 2]) <= 1e-10 * np.abs(y).max())
            assert np.any(on_plane | on_cone), a
    th = np.linspace(-np.pi, np.pi, 721)
    for _ in range(50):
        xk = RNG.normal(size=3)
        pk = project_on_cone_edge(xk, np.array([1.0, 0.0]))
        assert abs(np.hypot(pk[0], pk[1]) + pk[2]) <= 1e-14 * (1 + np.abs(pk).max()) and pk[2] <= 0
        rho = np.linspace(0, 3 * np.abs(xk).max(), 400)
        cone = np.stack([np.outer(rho, np.cos(th)).ravel(), np.outer(rho, np.sin(th)).ravel(),
                         -np.repeat(rho, len(th))], axis=1)
        assert np.linalg.norm(pk - xk) <= np.linalg.norm(cone - xk, axis=1).min() + 1e-12


# --------------------------------------------------------------------------- random contact problems
@pytest.mark.parametrize("mus", [(0.5, 0.5), (0.2, 0.8), (1.0, 0.1)])
def test_one_contact_agrees_with_the_exact_local_solve(mus):
    """On one contact (G SPD: the answer is unique) INCP's λ equals PGS's closed-form local solve."""
    mu = np.array([mus])
    seen = set()
    for _ in range(100):
        G = _random_delassus(1)
        q = RNG.normal(size=3)
        prob = ScaledContactProblem.from_delassus(G, q, mu)
        res = solve_with_restarts(prob, initial_points(prob), tol=1e-12, max_iter=100)
        assert res.converged, res.history
        lam = prob.scale * res.f.reshape(-1, 3)
        ref, status = local_solve(G, q, mus[0], mus[1], np.linalg.inv(G))
        seen.add(status)
        np.testing.assert_allclose(lam[0], ref, atol=1e-8 * max(1.0, np.abs(ref).max()))
    assert seen == {OPEN, STICK, SLIP}


@pytest.mark.parametrize("c, rigid", [(8, False), (20, False), (4, True), (12, True)])
def test_residual_at_convergence_certifies_signorini_coulomb(c, rigid):
    """Todorov's claim: at convergence the impulses and velocities satisfy complementarity and the
    exact (here also elliptic) cone to 1e-8 relative, on random problems with full-rank Delassus
    operators and on a thrown rigid box (rank 6), cold started (§III-F).

    Full rank: every problem converges. The rigid box's Delassus operator has rank 6 for 3c
    unknowns and ℓ has local minima away from r = 0 (the paper's §V-A: J singular); with the
    restarts and proximal steps 39/40 (c = 4), 40/40 (c = 8) and 37/40 (c = 12) converged when
    measured, so at least 90% must."""
    iters, failed = [], 0
    for _ in range(20):
        G, q = _rigid_box_problem(c) if rigid else (_random_delassus(c), RNG.normal(size=3 * c))
        mu = RNG.uniform(0.1, 1.0, size=(c, 2))
        prob = ScaledContactProblem.from_delassus(G, q, mu)
        res = solve_with_restarts(prob, initial_points(prob), tol=1e-10, max_iter=200)
        if not res.converged:
            failed += 1
            continue
        lam = prob.scale * res.f.reshape(-1, 3)
        assert_signorini_coulomb(G, q, mu, lam)
        iters.append(res.iterations)
    print(f"c={c} rigid={rigid}: converged {20 - failed}/20, iterations median {np.median(iters):.0f}, "
          f"max {max(iters)}")
    assert failed <= (2 if rigid else 0)


# --------------------------------------------------------------------------- the step contract
def _capture(sim):
    """Wrap the solver's contact-space iteration to keep (space, result) of every step."""
    seen = []
    solver = sim.contact_solver
    inner = solver.iterate

    def iterate(space):
        out = inner(space)
        seen.append((space, out))
        return out

    solver.iterate = iterate
    return seen


def test_pushed_box_statistics_and_certificate():
    """The box pushed at 1.5 μ m g: every step converges to 1e-10 with the Signorini–Coulomb
    certificate, no contact sticks once pushed; SolveStats carry iterations, residual, e_m, contacts
    and the ms split (factorization, Delassus, iteration)."""
    sim = fc.Simulator(load_scene("rigid_box_push").build(solver="incp", force_ratio=1.5))
    seen = _capture(sim)
    iters = []
    for _ in range(20):
        sim.step()
        st = sim.last_solve
        ex = st.extra
        assert st.converged and st.residual < 1e-10
        assert ex["contacts"] == sim.contacts.count > 0
        assert ex["momentum_error"] < 1e-8
        assert ex["ms_factorization"] > 0 and ex["ms_delassus"] > 0 and ex["ms_iteration"] > 0
        assert len(ex["residuals"]) == st.iterations
        space, res = seen[-1]
        assert_signorini_coulomb(space.G, space.q, space.mu, res.lam, res.status)
        iters.append(st.iterations)
    ex = sim.last_solve.extra      # sliding: no contact sticks (rank-6 G: some may carry nothing)
    assert ex["stick"] == 0 and ex["slip"] >= 3 and ex["open"] + ex["slip"] == sim.contacts.count
    print("pushed box iterations per step:", iters)


# --------------------------------------------------------------------------- iteration counts
def _iteration_counts(scene, steps, label):
    sim = fc.Simulator(scene)
    seen = _capture(sim)
    rows = []
    for _ in range(steps):
        sim.step()
        st = sim.last_solve
        if not st.extra.get("contacts"):
            continue
        ex = st.extra
        space, res = seen[-1]
        rows.append((st.iterations, st.converged, ex["contacts"], ex["newton_steps"], ex["line_searches"],
                     ex["init"], ex["ms_factorization"] + ex["ms_delassus"], ex["ms_iteration"]))
        if st.converged:
            assert_signorini_coulomb(space.G, space.q, space.mu, res.lam, res.status)
    it = np.array([r[0] for r in rows])
    conv = np.array([r[1] for r in rows])
    print(f"{label}: {len(rows)} steps with contacts (max {max(r[2] for r in rows)}), iterations median "
          f"{np.median(it):.0f} mean {it.mean():.1f} max {it.max()}, converged {conv.mean():.0%}, Newton points "
          f"{sum(r[3] for r in rows)}, line searches {sum(r[4] for r in rows)}, ms factorization+Delassus "
          f"{np.mean([r[6] for r in rows]):.1f}, ms iteration {np.mean([r[7] for r in rows]):.1f}")
    return it, conv


@pytest.mark.slow      # 36 s; CI runs incp through the parametrized known-answer tests
def test_iteration_counts_on_the_stack_and_the_grasp():
    """The paper reports about 5 iterations per step without warm start on robotics scenes. Printed
    here for the resting FEM stack (cube_stack, 70 contacts) and the rigid gripper closing on the soft
    ball (gripper_ball), cold (warm_start=False: §III-F's all-sticking start) and warm. Every
    converged step carries the 1e-8 certificate.

    Measured (tol 1e-10, max_iter 100): stack, first 40 steps (the cubes drop and settle), median 10
    iterations, 85-88% of the steps converged (the others stop at the cap, residual 1e-8 to 1e-6);
    grasp, first 6 steps (up to 71 contacts, rigid fingers: rank-deficient Delassus), 3 of 6 (cold)
    and 4 of 6 (warm) steps converged (2 and 4 with the proximal ε = 1e-2 used before issue 16),
    median 90 (cold) and 34 (warm) iterations: the others stall on plateaus of ℓ in Â's null space
    at residuals 4e-9 to 3e-7 and run to the 100-iteration cap in proximal steps (docs/INCP.md).
    Far from the paper's ~5: its balls have full-rank Delassus operators."""
    for warm in (False, True):
        stack = load_scene("cube_stack").build(solver="incp")
        stack.solver_options = {**stack.solver_options, "warm_start": warm}
        it, conv = _iteration_counts(stack, 40, f"stack (warm_start={warm})")
        assert conv.mean() >= 0.8
        grip = load_scene("gripper_ball").build(solver="incp")
        grip.solver_options = {**grip.solver_options, "warm_start": warm}
        it, conv = _iteration_counts(grip, 6, f"grasp (warm_start={warm})")
        assert conv.mean() >= 0.3        # 0.5 and 0.67 measured: at the edge of round-off between runs

"""COND's stop (issue 32 item 1): every answer is held to SAP eq. 32's momentum error e_m (default
momentum_tol 1e-4, θ the inner criterion), every step reports its e_m and how the solve ended, a solve
that cannot reach its tolerance ends at max_iter saying so; and the paper's literal Chebyshev
schedule (Alg. 3, ϱ from eq. 34 every iteration, item 2) converges to Anderson's solution."""
import csv

import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import ParameterError
from femcontact.solvers.cond import CondSolver
from femcontact.solvers.cond.options import DEFAULT_MOMENTUM_TOL

from tests.solvers.cond.test_cond import _cube_sim

G = 9.81


def _drop_scene(options=None):
    """A soft cube (2 cells, E 1e5) released 3 cm above the ground: contact-free steps, the landing, rest."""
    scene = fc.Scene(dt=1e-2, solver="cond", solver_options=options or {})
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=1e-3),
                       position=(0.0, 0.0, 0.08), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


def test_every_step_reports_e_m_and_meets_the_default_tolerance(tmp_path):
    sim = fc.Simulator(_drop_scene())
    assert sim.contact_solver.options.momentum_tol == DEFAULT_MOMENTUM_TOL == 1e-4
    sim.run(steps=15, out=tmp_path)
    contact_steps = [s for s in sim.stats if s.contacts]
    assert contact_steps and len(contact_steps) < len(sim.stats)      # both kinds of step happened
    for s in sim.stats:
        assert s.converged, s
        if s.contacts:
            assert s.e_m is not None and 0.0 <= s.e_m <= 1e-4, s
        else:
            assert s.e_m is None and s.residual < 1e-8, s            # the step's linear solve: its own residual
    extra = sim.last_solve.extra
    assert extra["stop"] == "converged" and extra["momentum_checks"] >= 1
    assert extra["momentum_error"] == sim.stats[-1].e_m
    with open(tmp_path / "steps.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 15
    assert [float(r["e_m"]) if r["e_m"] else None for r in rows] == [s.e_m for s in sim.stats]
    assert all((r["e_m"] != "") == (int(r["contacts"]) > 0) for r in rows)


def test_tighter_momentum_tol_only_adds_iterations():
    """The e_m stop continues the same acceleration run: a tighter momentum_tol reaches it in more
    iterations, never fewer, and reports the tightened inner tol."""
    its, ems = {}, {}
    for tol in (1e-4, 1e-9):
        sim, _ = _cube_sim(E=1e5, nu=0.3, options={"momentum_tol": tol})
        sim.run(steps=8)
        its[tol] = [s.iterations for s in sim.stats]
        ems[tol] = [s.e_m for s in sim.stats]
        assert all(s.converged and s.e_m <= tol for s in sim.stats)
    assert sum(its[1e-9]) > sum(its[1e-4]) and max(ems[1e-9]) <= 1e-9


def test_unreachable_tolerance_ends_at_the_cap_and_says_so():
    sim, _ = _cube_sim(E=1e5, options={"momentum_tol": 1e-14, "max_iter": 40})
    st = sim.step()
    extra = sim.last_solve.extra
    assert st.iterations == 40 and not st.converged and not sim.last_solve.converged
    assert extra["stop"] == "cap" and st.e_m == extra["momentum_error"] > 1e-14


def test_absolute_theta_is_the_papers_rule_and_e_m_is_still_reported():
    """theta="absolute": stop on ‖v̂ˡ⁺¹ − v̂ˡ‖ < tol in m/s (Alg. 1 line 13) with the e_m stop off."""
    sim, _ = _cube_sim(E=1e5, options={"theta": "absolute", "tol": 1e-5, "momentum_tol": None})
    sim.run(steps=3)
    solver = sim.contact_solver
    assert sim.last_solve.converged and solver.history[-1] < 1e-5 <= max(solver.history[:-1])
    assert sim.stats[-1].e_m is not None and sim.stats[-1].e_m > 0.0


def _one_step(options, steps=1):
    sim, _ = _cube_sim(E=1e5, nu=0.3, force=(0.2 * 0.5 * G, 0.0, 0.0), options=options)
    sim.run(steps=steps)
    return sim


def test_paper_chebyshev_converges_to_andersons_solution():
    """The same steps (a soft cube on the ground pushed sideways at 0.2 μmg: sticking contacts) solved
    by Anderson and by the paper's schedule, both to e_m ≤ 1e-9: the same velocities and impulses."""
    res = {}
    for name, opts in (("anderson", {}), ("paper", {"acceleration": "chebyshev", "chebyshev_schedule": "paper"})):
        sim = _one_step({"momentum_tol": 1e-9, "tol": 1e-4, "max_iter": 20000, **opts}, steps=3)
        assert all(s.converged and s.e_m <= 1e-9 for s in sim.stats), [(s.iterations, s.e_m) for s in sim.stats]
        if name == "paper":
            assert sim.contact_solver.options.acceleration == "chebyshev"
            assert sim.last_solve.extra["chebyshev_restarts"] == 0
        res[name] = (sim.state.velocities(), sim.contacts.to_numpy()["impulse"])
    (va, ia), (vp, ip) = res["anderson"], res["paper"]
    np.testing.assert_allclose(vp, va, rtol=0, atol=1e-6 * np.abs(va).max() + 1e-9)
    np.testing.assert_allclose(ip, ia, rtol=0, atol=1e-5 * np.abs(ia).max())


@pytest.mark.parametrize("bad, match", [
    ({"theta": "scaled"}, "theta"), ({"chebyshev_schedule": "literal"}, "chebyshev_schedule"),
    ({"chebyshev_schedule": "paper", "acceleration": "anderson"}, "needs acceleration='chebyshev'"),
    ({"chebyshev_schedule": "paper", "rho": 0.9}, "no fixed rho"), ({"momentum_tol": 0.0}, "momentum_tol"),
])
def test_bad_stop_and_schedule_options_are_clear_errors(bad, match):
    sim, _ = _cube_sim(res=1)
    with pytest.raises(ParameterError, match=match):
        CondSolver(sim.model, bad)


def test_paper_schedule_alone_selects_chebyshev():
    sim, _ = _cube_sim(res=1)
    assert CondSolver(sim.model, {"chebyshev_schedule": "paper"}).options.acceleration == "chebyshev"

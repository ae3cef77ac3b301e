"""The Newton path's dense step compiled (``solvers.newton_compiled``, numba) against the numpy path.

Both paths solve the same ``StepProblem`` each step (lockstep: the numpy solver's answer advances
the scene): the Newton iteration counts, convergence flags and statuses must be identical, v̂ and the
impulses equal to round-off (the compiled step uses the same formulas and the same LAPACK Cholesky;
numpy's ``x**3`` rounds differently from libm's ``pow`` on AVX-512 CPUs, so Lagged/Similar may differ
in the last bits), on a drop with impact, a box thrown with anisotropic friction, a ball with
restitution and a kinematic (prescribed) body pushing a box, under every Newton model and both
integrators. Runs where numba is installed (``pip install femcontact[fast]``).
"""
import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import ParameterError
from femcontact.solvers.host_problem import HostContactProblem
from femcontact.solvers.sap import STEP_COLUMNS, NewtonContactSolver

numba = pytest.importorskip("numba", reason="the compiled path is the optional extra femcontact[fast] (CI installs it); without numba the numpy path runs, tested in test_sap.py")


def _drop(solver, integrator):
    scene = fc.Scene(dt=1e-2, solver=solver, integrator=integrator, duration=1.0)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=7800.0, position=(0, 0, 0.1), velocity=(0.3, 0, 0),
                         name="ball")
    return scene


def _thrown_box(solver, integrator):          # anisotropic friction (ICF App. B), 4 contacts
    scene = fc.Scene(dt=5e-3, solver=solver, integrator=integrator, duration=1.0)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=(0.2, 0.8), friction_axes=(1, 0, 0), name="floor")
    scene.add_rigid_body(fc.shapes.Box((0.05, 0.05, 0.025)), density=500.0, position=(0, 0, 0.026),
                         velocity=(0.7, 0.7, 0.0), name="box")
    return scene


def _bounce(solver, integrator):              # restitution 0.5: the rebound target of an impact
    scene = fc.Scene(dt=5e-3, solver=solver, integrator=integrator, duration=1.0)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.3, name="floor")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=1000.0, position=(0, 0, 0.08), name="ball")
    scene.set_contact("ball", "floor", restitution=0.5)
    return scene


def _pushed(solver, integrator):              # a kinematic pusher: prescribed nodes in J
    scene = fc.Scene(dt=1e-2, solver=solver, integrator=integrator, duration=1.0)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.4, name="floor")
    scene.add_rigid_body(fc.shapes.Box((0.05, 0.05, 0.05)), density=500.0, position=(0, 0, 0.05), name="box")
    scene.add_rigid_body(fc.shapes.Sphere(0.03), density=1000.0, position=(-0.08, 0, 0.05), name="pusher",
                         motion=lambda t: ((-0.08 + 0.2 * t, 0.0, 0.05), np.eye(3)))
    return scene


SCENES = {"drop": _drop, "thrown_box": _thrown_box, "bounce": _bounce, "pushed": _pushed}


def _lockstep(build, solver, integrator, steps):
    """Per step (numpy result, compiled result) on the same StepProblem."""
    scene = build(solver, integrator)
    scene.solver_options = {**scene.solver_options, "compiled": False}
    sim = fc.Simulator(scene)
    numpy_path = sim.contact_solver
    compiled = NewtonContactSolver(sim.model, {**scene.solver_options, "compiled": True}, solver)
    pairs = []
    solve = numpy_path.solve

    def both(problem):
        if int(problem.contacts.count):
            pairs.append((numpy_path.solve_host(HostContactProblem(problem, STEP_COLUMNS, numpy_path._mask)),
                          compiled.solve_host(HostContactProblem(problem, STEP_COLUMNS, compiled._mask))))
        return solve(problem)
    numpy_path.solve = both
    for _ in range(steps):
        sim.step()
    assert numpy_path.compiled is None and compiled.compiled is not None
    return pairs, compiled


@pytest.mark.parametrize("integrator", ["euler", "midpoint"])
@pytest.mark.parametrize("solver", ["lagged", "sap", "similar"])
@pytest.mark.parametrize("name", list(SCENES))
def test_compiled_step_agrees_with_numpy(name, solver, integrator):
    pairs, compiled = _lockstep(SCENES[name], solver, integrator, 60)
    assert len(pairs) > 10
    assert compiled.last_stats.extra["linear_solver"] == "dense-compiled"
    newton = 0
    for a, b in pairs:
        assert b.stats.iterations == a.stats.iterations
        assert b.stats.converged == a.stats.converged
        np.testing.assert_array_equal(b.status, a.status)
        scale = max(np.abs(a.v_hat).max(), 1e-12)
        np.testing.assert_allclose(b.v_hat, a.v_hat, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(b.impulse, a.impulse, rtol=0, atol=1e-11 * max(np.abs(a.impulse).max(), 1e-12))
        assert b.stats.residual == pytest.approx(a.stats.residual, rel=1e-6, abs=1e-13)
        newton += a.stats.iterations
    assert newton > 0                 # the comparison covers Newton iterations, not only converged warm starts


def test_dense_step_keeps_the_model_and_its_impulses():
    """``last_dense``: the model object, J and the offset reproduce the step's impulses (γ = S γ̃)."""
    pairs, compiled = _lockstep(_thrown_box, "lagged", "midpoint", 20)
    step, result = compiled.last_dense, pairs[-1][1]
    _, gamma, G, _ = step.model().evaluate(step.contact_velocity(), hessian=True)
    np.testing.assert_allclose(step.S * gamma, result.impulse, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(G, step.G, rtol=1e-12, atol=1e-12 * np.abs(step.G).max())


def test_compiled_option_must_be_a_bool():
    sim = fc.Simulator(_drop("lagged", "euler"))
    with pytest.raises(ParameterError, match="compiled"):
        NewtonContactSolver(sim.model, {"compiled": "yes"}, "lagged")

"""Frictional contact with known answers (issue 4; docs/THEORY.md §7), solved by COND (and, where
parametrized over ``solver``, by NCP-PGS and incp too: the same answers). The pushed cube and the
incline, for every solver, are in test_agreement_matrix.py.
"""
import numpy as np
import pytest

import femcontact as fc
from tests.helpers.scenes_util import load_scene

G = 9.81
def centre(sim, name):
    m = sim.model.mass_np[sim.model.body(name).nodes]
    return (m[:, None] * sim.body_positions(name)).sum(0) / m.sum()


def test_dropped_cube_does_not_bounce_and_rests_without_penetration():
    module = load_scene("cube_drop")
    sim = fc.Simulator(module.build(youngs_modulus=1e7))   # stiff: no elastic rebound of its own
    mesh_edge = fc.meshes.box((0.1, 0.1, 0.1), 4).mean_edge_length()
    drop = sim.body_positions("cube")[:, 2].min()
    touched, peak_after = False, 0.0
    for _ in range(150):
        sim.step()
        zmin = sim.body_positions("cube")[:, 2].min()
        touched = touched or zmin < 1e-3
        if touched:
            peak_after = max(peak_after, zmin)
    assert touched
    assert peak_after < 0.01 * drop, peak_after
    assert sim.body_positions("cube")[:, 2].min() > -0.01 * mesh_edge


@pytest.mark.parametrize("solver", ["cond", pytest.param("pgs", marks=pytest.mark.slow),
                                    pytest.param("incp", marks=pytest.mark.slow)])
def test_stacked_cubes_carry_their_weight_without_jitter(solver):
    module = load_scene("cube_stack")
    sim = fc.Simulator(module.build(solver=solver))
    sim.run(duration=1.5)
    speeds = []
    for _ in range(20):
        sim.step()
        speeds.append(np.abs(sim.state.velocities()).max())
    c = sim.contacts.to_numpy()
    ground = c["node_a"] == -1
    weight_impulse = sim.model.mass_np.sum() * G * sim.scene.dt
    assert abs(c["impulse"][ground, 2].sum() - weight_impulse) < 0.01 * weight_impulse
    if solver == "pgs" and max(speeds) >= 1e-4:
        # NCP-PGS stops at its 500-sweep cap on the stack every step (residual ~1e-6 and flat, 50 of 70
        # contacts sticking): the weight is carried (asserted above) but the cubes keep moving (measured
        # ~2e-2 m/s), the slow convergence COND §V-D describes
        pytest.xfail(f"PGS leaves the stack moving at {max(speeds):.2g} m/s (500-sweep cap)")
    assert max(speeds) < 1e-4, max(speeds)


def _squeeze(friction):
    module = load_scene("ball_squeeze")
    sim = fc.Simulator(module.build(friction=friction))
    sim.run(duration=0.5 + 2.0)             # close, then lift at 0.1 m/s for 2 s
    return sim, module


@pytest.mark.slow
@pytest.mark.sample
def test_squeezed_ball_is_lifted_with_high_friction():
    sim, module = _squeeze(1.0)
    lift = module.LIFT_V * 2.0
    z = centre(sim, "ball")[2]
    assert abs(z - (module.RADIUS + lift)) < 0.1 * lift, z


@pytest.mark.slow
def test_squeezed_ball_slips_out_with_low_friction():
    sim, module = _squeeze(0.05)
    assert centre(sim, "ball")[2] < module.RADIUS + 0.02


@pytest.mark.parametrize("solver", ["cond", pytest.param("pgs", marks=pytest.mark.slow),
                                    pytest.param("incp", marks=pytest.mark.slow)])
def test_anisotropic_box_is_slow_along_the_high_friction_axis(solver):
    module = load_scene("anisotropic_box")
    sim = fc.Simulator(module.build(solver=solver))
    sim.run(duration=0.5)
    p_half = centre(sim, "box")
    statuses, tangents = [], []
    for _ in range(50):
        sim.step()
        c = sim.contacts.to_numpy()
        slip = c["status"] == 2
        if slip.any():
            lam = c["impulse"][slip]
            mu = c["mu"][slip]
            # maximal-dissipation slip: the friction impulse lies on the ellipse boundary
            on_ellipse = (lam[:, 0] / mu[:, 0]) ** 2 + (lam[:, 1] / mu[:, 1]) ** 2
            tangents.append(np.abs(np.sqrt(on_ellipse) - lam[:, 2]).max() / lam[:, 2].max())
    p_end = centre(sim, "box")
    y_speed = p_half[1] / 0.5                       # first half: pushed along y (mu2 = 0.8)
    x_speed = (p_end[0] - p_half[0]) / 0.5          # second half: pushed along x (mu1 = 0.2)
    assert 0 < y_speed < x_speed / 3
    assert tangents and max(tangents) < 1e-6


def _mean_iterations(scene, chebyshev, settle, steps):
    scene.solver_options = {**scene.solver_options, "acceleration": "chebyshev" if chebyshev else "none", "tol": 1e-5, "max_iter": 3000}
    sim = fc.Simulator(scene)
    sim.run(duration=settle)
    sim.stats.clear()
    sim.run(steps=steps)
    return np.mean([s.iterations for s in sim.stats if s.contacts])


@pytest.mark.slow
@pytest.mark.parametrize("scene_name, kwargs, settle", [
    pytest.param("ball_squeeze", dict(friction=1.0), 0.6, marks=pytest.mark.sample),
    ("mat_drag", dict(resolution=12), 0.4)])                # 82 s: slow only, the ball is CI's sample
def test_chebyshev_lowers_cond_iterations(scene_name, kwargs, settle):
    """COND Table II: Chebyshev acceleration (Alg. 3) needs fewer iterations at the same tolerance.

    On the stiffness-dominated mat (κ(W A) ≈ 2850) this needs the adaptive ϱ of solvers/cond/chebyshev.py:
    with eq. 34 alone (ϱ ≈ 0.97 for a true 0.9994) it took 445-630 iterations per step against
    the plain iteration's 64-1483. Measured (1053 DOF, tol 1e-5, 10 steps after 0.4 s): 182 with
    Chebyshev, 706 without; after 0.6 s 78 vs 256; after 1.0 s 27 vs 39 (the mat slides steadily
    and the warm start is nearly the answer)."""
    module = load_scene(scene_name)
    with_cheb = _mean_iterations(module.build(**kwargs), True, settle, 10)
    without = _mean_iterations(module.build(**kwargs), False, settle, 10)
    print(f"{scene_name}: mean COND iterations {with_cheb:.1f} with Chebyshev, {without:.1f} without")
    assert with_cheb < 0.9 * without

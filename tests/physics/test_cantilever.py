"""Cantilever under self-weight: static tip deflection converges to Euler–Bernoulli w L^4 / (8 E I)."""
import numpy as np
import pytest

import femcontact as fc

L, H, E, RHO = 1.0, 0.1, 1e8, 1000.0   # tip deflection 1.5% of L: the linear regime of EB
EB_TIP = RHO * 9.81 * H * H * L**4 / (8 * E * H**4 / 12)


def static_tip_deflection(n: int) -> float:
    """Quasi-static solve: implicit Euler with a huge step is a Newton iteration on K(x) u = f."""
    scene = fc.Scene(dt=1e3, gravity=(0, 0, -9.81), integrator="euler", linear_solver="direct")
    beam = scene.add_fem_body(fc.meshes.box((L, H, H), (10 * n, n, n), center=(L / 2, 0, 0)),
                              fc.Material(E, 0.0, RHO), name="beam")
    beam.pin("x < 1e-9")
    sim = fc.Simulator(scene)
    tip = np.isclose(sim.model.rest_positions[:, 0], L)
    previous = 0.0
    for _ in range(6):
        sim.state.v.from_numpy(np.zeros((sim.model.n_nodes, 3)))
        sim.step()
        deflection = -(sim.body_positions("beam")[tip, 2].mean())
        if abs(deflection - previous) < 1e-6 * deflection:
            break
        previous = deflection
    return deflection


def test_cantilever_converges_to_euler_bernoulli():
    ratios = [static_tip_deflection(n) / EB_TIP for n in (2, 4, 8)]
    print("tip / EB at 20x2x2, 40x4x4, 80x8x8:", ratios)
    assert ratios[0] < ratios[1] < ratios[2] <= 1.02      # monotone from below (linear tets are stiff)
    assert abs(ratios[2] - 1.0) < 0.05
    # the error falls at second order in the element size
    assert (1 - ratios[1]) / (1 - ratios[2]) > 3.0

"""Rollout gradients (femcontact.diff.rollout, the adjoint over the steps) against central finite
differences of whole rollouts: a box sliding on the ground under Lagged (regularized stiction)."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import shapes
from femcontact.diff import output_sizes, restore, rollout, snapshot
from femcontact.diff.inputs import resolve
from femcontact.errors import ParameterError

STEPS = 6


def sliding_box(integrator="euler"):
    sc = fc.Scene(dt=1e-2, integrator=integrator, solver="lagged", stiction="regularized",
                  solver_options={"rel_tol": 1e-12, "abs_tol": 1e-16})
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.3, stiffness=1e5, hc_dissipation=10.0)
    box = sc.add_rigid_body(shapes.Box((0.2, 0.2, 0.1)), density=500, position=(0, 0, 0.1), velocity=(1.0, 0.2, 0),
                            angular_velocity=(0, 0, 0.5), name="box")
    box.add_force((1.0, 0.0, 0.0))
    sim = fc.Simulator(sc)
    for _ in range(3):
        sim.step()
    return sim


def final_position_loss(sim):
    """ℓ_N = x-coordinate of the box's centre plus its spin rate squared (both smooth while it slides)."""
    sizes = output_sizes(sim.model)
    n = sum(sizes.values())
    i_spin = sizes["x"] + sizes["R"] + 3 * 1 + 2       # v of block 1 (angular), z

    def loss(k, state):
        if k != STEPS:
            return None
        g = np.zeros(n)
        g[0] = 1.0
        g[i_spin] = 2.0 * state["v"][1, 2]
        return state["x"][0, 0] + state["v"][1, 2] ** 2, g
    return loss


def rollout_value(sim, loss, start, change=None):
    """L of a plain rollout from ``start`` with ``change()`` (returning its undo) applied first."""
    restore(sim, start, stepped=True)
    undo = change() if change else None
    try:
        for k in range(1, STEPS + 1):
            sim.step()
        from femcontact.diff import end_state
        return loss(STEPS, end_state(sim))[0]
    finally:
        if undo:
            undo()


@pytest.mark.parametrize("integrator", ["euler", pytest.param("midpoint", marks=pytest.mark.slow)])
def test_rollout_gradient_against_fd(integrator):
    sim = sliding_box(integrator)
    loss = final_position_loss(sim)
    start = snapshot(sim)
    wrt = ["mu:ground", "force:box:0"]
    g = rollout(sim, STEPS, loss, wrt)
    assert g.per_step["force:box:0"].shape == (STEPS, 3)
    ins = {i.name: i for i in resolve(sim, ["mu:ground", "force:box:0", "v"])}
    checks = []
    h = 1e-6
    # μ (every step), the load during step 3 only, and the initial velocity's x component
    fd_mu = (rollout_value(sim, loss, start, lambda: ins["mu:ground"].apply(sim, np.array([h])))
             - rollout_value(sim, loss, start, lambda: ins["mu:ground"].apply(sim, np.array([-h])))) / (2 * h)
    checks.append(("mu", g.params["mu:ground"][0], fd_mu))

    def force_at_step3(sign):
        restore(sim, start, stepped=True)
        for k in range(1, STEPS + 1):
            undo = ins["force:box:0"].apply(sim, np.array([sign * h, 0, 0])) if k == 3 else None
            sim.step()
            if undo:
                undo()
        from femcontact.diff import end_state
        return loss(STEPS, end_state(sim))[0]
    checks.append(("force step 3", g.per_step["force:box:0"][2, 0], (force_at_step3(1) - force_at_step3(-1)) / (2 * h)))

    def v0(sign):
        def change():
            restore(sim, start, stepped=True)
            ins["v"].apply(sim, np.eye(ins["v"].size)[0] * sign * h)
        return change
    sizes = output_sizes(sim.model)
    iv = sizes["x"] + sizes["R"]
    checks.append(("v0_x", g.initial_state[iv],
                   (rollout_value(sim, loss, start, v0(1)) - rollout_value(sim, loss, start, v0(-1))) / (2 * h)))
    for name, a, b in checks:
        print(f"| rollout {STEPS} steps ({integrator}) | {name} | {abs(a - b) / abs(b):.1e} |")
        assert b != 0 and abs(a - b) <= 1e-4 * abs(b), (name, a, b)


def test_rollout_refuses_state_names_and_cond():
    sim = sliding_box()
    with pytest.raises(ParameterError, match="initial state"):
        rollout(sim, 2, lambda k, s: None, ["v"])
    sc = fc.Scene(dt=1e-2, solver="cond")
    sc.add_rigid_body(shapes.Box((0.1, 0.1, 0.1)), density=500, position=(0, 0, 1.0), name="box")
    with pytest.raises(ParameterError, match="sap, lagged, similar"):
        rollout(fc.Simulator(sc), 2, lambda k, s: None)

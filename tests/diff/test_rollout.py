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


def _set_load_x(sim, fx):
    from dataclasses import replace
    load = sim.control.loads["box:0"]
    sim.control.set_load("box:0", replace(load, force=replace(load.force, value=np.array([fx, 0.0, 0.0]))))


def test_rollout_with_per_step_controls_against_fd():
    """``controls(sim, k)`` sets a different load at every step; the reverse sweep differentiates step k
    about its own load: dL/du_k against central differences of whole rollouts."""
    sim = sliding_box()
    loss = final_position_loss(sim)
    start = snapshot(sim)
    u = np.array([0.5, 2.0, -1.0, 1.5, 0.0, 3.0])
    g = rollout(sim, STEPS, loss, ["force:box:0"], controls=lambda s, k: _set_load_x(s, u[k - 1]))
    from femcontact.diff import end_state
    h = 1e-6

    def value(k_changed, sign):
        restore(sim, start, stepped=True)
        for k in range(1, STEPS + 1):
            _set_load_x(sim, u[k - 1] + (sign * h if k == k_changed else 0.0))
            sim.step()
        return loss(STEPS, end_state(sim))[0]
    for k in (2, 5):
        fd = (value(k, 1) - value(k, -1)) / (2 * h)
        print(f"| rollout {STEPS} steps, per-step loads | dL/du_{k} | {abs(g.per_step['force:box:0'][k - 1, 0] - fd) / abs(fd):.1e} |")
        assert fd != 0 and abs(g.per_step["force:box:0"][k - 1, 0] - fd) <= 1e-4 * abs(fd)


def test_rollout_tangents_against_fd_and_adjoint():
    """Forward sensitivities dS_k/dμ (``rollout_tangents``) against central differences of whole rollouts,
    and their final-step loss gradient against the adjoint's dL/dμ."""
    from femcontact.diff import end_state, rollout_tangents
    sim = sliding_box()
    loss = final_position_loss(sim)
    start = snapshot(sim)
    tan = rollout_tangents(sim, STEPS, ["mu:ground"])
    assert len(tan.states) == STEPS + 1 and tan.tangents[-1].shape == (sum(output_sizes(sim.model).values()), 1)
    mu = resolve(sim, ["mu:ground"])[0]
    h = 1e-6

    def x_final(sign):
        restore(sim, start, stepped=True)
        undo = mu.apply(sim, np.array([sign * h]))
        try:
            for _ in range(STEPS):
                sim.step()
            return end_state(sim)["x"].ravel()
        finally:
            undo()
    fd = (x_final(1) - x_final(-1)) / (2 * h)
    n_x = output_sizes(sim.model)["x"]
    err = np.abs(tan.tangents[-1][:n_x, 0] - fd).max() / np.abs(fd).max()
    print(f"| rollout_tangents {STEPS} steps | dx_N/dμ | {err:.1e} |")
    assert err <= 1e-4
    restore(sim, start, stepped=True)
    adj = rollout(sim, STEPS, loss, ["mu:ground"]).params["mu:ground"][0]
    _, grad = loss(STEPS, tan.states[-1])
    assert grad @ tan.tangents[-1][:, 0] == pytest.approx(adj, rel=1e-6)

"""Contact-implicit trajectory optimization (issue 33 item 3): a planar pusher — a rigid sphere finger held
up against gravity and driven only by an applied horizontal force, no kinematic prescription — pushes a
rigid box over frictional ground to a target in 0.5 s at dt 10 ms. No contact sequence is prescribed: the
finger starts 1 cm behind the box, the decision variables are the finger's force at every step, and when
(whether) the finger touches, pushes or lets go comes out of the optimization.

Method: single shooting with the rollout gradient (``femcontact.diff.rollout``: the adjoint over the steps,
each step differentiated by the implicit function theorem at its converged Lagged solution) and L-BFGS-B.
Cost: ‖p_box(T) − target‖² / (1 cm)² + effort · Σ_k ‖u_k‖² (N²). Initial guess: a constant push of
``PUSH0`` along x (it brings the finger to the box; the optimizer shapes the force from there).
Known answer: the final box position within 1 cm of the target (tests/diff/test_uses.py).
Run: femcontact run scenes/push_trajopt.py --out out/push_trajopt    (the initial guess's constant push)
     python scenes/push_trajopt.py out/push_trajopt                   (the optimization; cost.png there)
"""
from __future__ import annotations

import time

import numpy as np

import femcontact as fc

DT, STEPS = 1e-2, 50                          # 0.5 s
BOX_HALF, BOX_MASS, MU_GROUND = 0.05, 0.5, 0.3
FINGER_RADIUS, FINGER_MASS, MU_FINGER = 0.02, 0.1, 0.2
GAP = 0.01                                    # the finger's start: 1 cm behind the box
TARGET = np.array([0.10, 0.02, BOX_HALF])     # the box's centre at T (start: the origin at BOX_HALF height)
PUSH0 = 3.0                                   # N: the initial guess, a constant push along x
EFFORT = 1e-4                                 # weight of Σ‖u_k‖² against the (1 cm)²-scaled terminal error
G = 9.81
RETRIES = 3                                   # re-evaluations near a point where a step is not differentiable


def build(push: float = PUSH0, duration: float = STEPS * DT) -> fc.Scene:
    """The scene with a constant finger force ``push`` along x (the optimization sets it per step)."""
    scene = fc.Scene(dt=DT, integrator="euler", solver="lagged", stiction="regularized", duration=duration,
                     solver_options={"rel_tol": 1e-10, "abs_tol": 1e-14}, name="push_trajopt")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=MU_GROUND, stiffness=1e5, hc_dissipation=5.0, name="ground")
    scene.add_rigid_body(fc.shapes.Box((BOX_HALF,) * 3), mass=BOX_MASS, position=(0.0, 0.0, BOX_HALF), name="box")
    finger = scene.add_rigid_body(fc.shapes.Sphere(FINGER_RADIUS), mass=FINGER_MASS,
                                  position=(-BOX_HALF - FINGER_RADIUS - GAP, 0.0, BOX_HALF), name="finger")
    finger.add_force((push, 0.0, FINGER_MASS * G))          # load finger:0: the control, and its weight carried
    scene.set_contact("finger", "box", friction=MU_FINGER, stiffness=1e4, hc_dissipation=5.0)
    return scene


def _set_force(sim, u) -> None:
    """Set the finger's load to the horizontal force ``u`` (2,) N plus its weight carried."""
    from dataclasses import replace

    load = sim.control.loads["finger:0"]
    force = np.array([u[0], u[1], FINGER_MASS * G])
    sim.control.set_load("finger:0", replace(load, force=replace(load.force, value=force)))


def optimize(steps: int = STEPS, target=TARGET, push: float = PUSH0, max_iterations: int = 60,
             stop_distance: float = 1e-3) -> dict:
    """Minimize the module docstring's cost over the finger forces u_k (steps, 2) by L-BFGS-B with the
    rollout gradient; one Simulator, each evaluation restarted from the initial State; stops at
    ``max_iterations`` or once an iterate's final box position is within ``stop_distance`` (m) of ``target``.
    Returns the forces, the cost and the box's distance to ``target`` per iteration (index 0: the initial
    guess), the counts and the wall / CPU time."""
    from scipy.optimize import minimize

    from femcontact.diff import NonSmoothStep, output_sizes, restore, rollout, snapshot
    from femcontact.diff.inputs import translational

    target = np.asarray(target, float)
    sim = fc.Simulator(build(push))
    start = snapshot(sim)
    sizes = output_sizes(sim.model)
    n_state = sum(sizes.values())
    block = sim.model.body("box").node_start                              # the box's translational block
    box = int(np.flatnonzero(translational(sim.model) == block)[0])       # its rows 3 box .. 3 box + 3 of x
    scale = 1e-2 ** -2

    def evaluate(flat):
        u = flat.reshape(steps, 2)

        def loss(k, state):
            if k != steps:
                return None
            e = state["x"][box] - target
            g = np.zeros(n_state)
            g[3 * box:3 * box + 3] = 2.0 * scale * e
            return scale * float(e @ e), g

        for retry in range(RETRIES + 1):
            # a contact candidate entering or leaving within a probe (NonSmoothStep): the gradient is not
            # defined at u; take value and gradient at a point 1e-4 N × retry away (counted in ``retries``)
            shift = 1e-4 * retry * np.cos(np.arange(u.size)).reshape(u.shape)
            restore(sim, start, stepped=True)
            try:
                res = rollout(sim, steps, loss, ["force:finger:0"],
                              controls=lambda s, k: _set_force(s, u[k - 1] + shift[k - 1]))
                break
            except NonSmoothStep:
                if retry == RETRIES:
                    raise
                retries.append(len(evaluations))
        grad = res.per_step["force:finger:0"][:, :2] + 2.0 * EFFORT * u
        final = sim.state.positions()[block].copy()
        rollouts.append(retry)
        evaluations[flat.tobytes()] = (res.loss + EFFORT * float(flat @ flat), float(np.linalg.norm(final - target)))
        return evaluations[flat.tobytes()][0], grad.ravel()

    evaluations: dict = {}
    retries: list = []
    rollouts: list = []
    iterations: list = []
    u0 = np.tile([push, 0.0], (steps, 1)).ravel()
    wall, cpu = time.perf_counter(), time.process_time()
    evaluate(u0)
    iterations.append(evaluations[u0.tobytes()])

    def iterate(intermediate_result):
        iterations.append(evaluations[np.asarray(intermediate_result.x, float).tobytes()])
        if iterations[-1][1] <= stop_distance:
            raise StopIteration

    fit = minimize(evaluate, u0, jac=True, method="L-BFGS-B", callback=iterate,
                   options={"maxiter": max_iterations, "ftol": 1e-12, "gtol": 1e-8})
    return {"forces": fit.x.reshape(steps, 2), "cost": [c for c, _ in iterations],
            "distance": [d for _, d in iterations], "iterations": int(fit.nit),
            "evaluations": len(rollouts), "retries": len(retries),
            "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "status": fit.message}


def main(out: str = "out/push_trajopt", steps: int = STEPS) -> dict:
    """Optimize, print the result and plot the cost per iteration (OUT/cost.png)."""
    from femcontact.io.results import plot_history

    found = optimize(steps)
    print(f"push_trajopt: final box distance to target {1e3 * found['distance'][-1]:.2f} mm (start "
          f"{1e3 * found['distance'][0]:.1f} mm), cost {found['cost'][0]:.4g} -> {found['cost'][-1]:.4g}, "
          f"{found['iterations']} L-BFGS-B iterations, {found['evaluations']} rollouts with gradient, "
          f"{found['wall_s']:.1f} s wall / {found['cpu_s']:.1f} s CPU")
    plot_history(found["cost"], f"{out}/cost.png", f"push_trajopt: finger forces over {steps} steps (L-BFGS-B)")
    np.savetxt(f"{out}/forces.csv", found["forces"], delimiter=",", header="fx_N,fy_N", comments="")
    return found


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:2])

"""System identification through contact (issue 33 item 3): a soft FEM cube (8 nodes) thrown tilted onto
the ground lands on an edge, tips flat and slides to a stop; from its recorded node positions, μ (cube–ground)
and Young's modulus E are recovered by Gauss–Newton least squares (scipy.optimize.least_squares) with the
Jacobian of the positions from forward sensitivities through the steps (femcontact.diff.rollout_tangents:
the implicit function theorem at each converged Lagged step), starting from values 2× off.

Known answer: MU, YOUNG (the values the recording was made with); tests/diff/test_uses.py checks the
recovered values within 1%. ``build()`` is the recorded scene itself.
Run: femcontact run scenes/sysid_cube.py --out out/sysid_cube      (the recording)
     python scenes/sysid_cube.py out/sysid_cube                     (the identification, printed)
"""
from __future__ import annotations

import time

import numpy as np

import femcontact as fc

MU, YOUNG = 0.4, 2.0e4          # the truth: friction (cube–ground) and Young's modulus (Pa)
SIZE, DENSITY, POISSON = 0.1, 1000.0, 0.3
TILT = np.radians(15.0)         # about y: the cube lands on its leading edge and tips flat
DT, STEPS = 1e-2, 30


def build(mu: float = MU, youngs_modulus: float = YOUNG, duration: float = STEPS * DT) -> fc.Scene:
    scene = fc.Scene(dt=DT, integrator="euler", solver="lagged", stiction="regularized", duration=duration,
                     solver_options={"rel_tol": 1e-10, "abs_tol": 1e-14}, name="sysid_cube")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=mu, stiffness=1e5, hc_dissipation=5.0, name="ground")
    c, s = np.cos(TILT), np.sin(TILT)
    rot = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    lift = 0.5 * SIZE * (c + s) + 2e-3            # the lowest edge 2 mm above the ground
    scene.add_fem_body(fc.meshes.box((SIZE,) * 3, resolution=1),
                       fc.Material(youngs_modulus=youngs_modulus, poisson_ratio=POISSON, density=DENSITY),
                       position=(0.0, 0.0, lift), rotation=rot, velocity=(1.0, 0.0, 0.0), name="cube")
    return scene


def record(steps: int = STEPS, mu: float = MU, youngs_modulus: float = YOUNG) -> np.ndarray:
    """The recorded data: node positions (steps, nodes, 3) after each step of the scene at ``mu``, ``E``."""
    sim = fc.Simulator(build(mu, youngs_modulus))
    out = []
    for _ in range(steps):
        sim.step()
        out.append(sim.state.positions().copy())
    return np.array(out)


def identify(recorded: np.ndarray, mu0: float, youngs_modulus0: float, tol: float = 1e-10) -> dict:
    """Recover (μ, E) from ``recorded`` node positions (``record``) by least squares over log μ, log E
    (scipy.optimize.least_squares, Levenberg–Marquardt) from (mu0, youngs_modulus0): residuals x_k(θ) − x_k^rec
    over every step and node, Jacobian dx_k/dθ from ``femcontact.diff.rollout_tangents`` (a fresh Simulator
    per evaluation, the evaluations cached so a Jacobian at an accepted point reuses its rollout). Returns
    the values, the cost per evaluation, the counts and the wall / CPU time."""
    from scipy.optimize import least_squares

    from femcontact.diff import output_sizes, rollout_tangents

    steps = len(recorded)
    cache: dict = {}
    history: list = []

    def evaluate(p):
        key = tuple(np.round(p, 15))
        if key not in cache:
            mu, E = np.exp(p)
            sim = fc.Simulator(build(mu, E))
            n_x = output_sizes(sim.model)["x"]
            tan = rollout_tangents(sim, steps, ["mu:ground", "E:cube"])
            r = np.concatenate([(s["x"] - rec).ravel() for s, rec in zip(tan.states[1:], recorded)])
            J = np.concatenate([T[:n_x] for T in tan.tangents[1:]]) * np.exp(p)     # d/d log θ
            cache.clear()
            cache[key] = (r, J)
            history.append(0.5 * float(r @ r))
        return cache[key]

    wall, cpu = time.perf_counter(), time.process_time()
    fit = least_squares(lambda p: evaluate(p)[0], np.log([mu0, youngs_modulus0]), jac=lambda p: evaluate(p)[1],
                        method="lm", xtol=tol, ftol=tol, gtol=tol)
    mu, E = np.exp(fit.x)
    return {"mu": float(mu), "youngs_modulus": float(E), "cost": history, "evaluations": int(fit.nfev),
            "jacobians": int(fit.njev), "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "status": fit.message}


def main(out: str = "out/sysid_cube", steps: int = STEPS) -> dict:
    """Record at (MU, YOUNG), identify from 2× off (2 MU, YOUNG / 2), print, and plot the cost per rollout
    (OUT/cost.png)."""
    from femcontact.io.results import plot_history

    found = identify(record(steps), 2 * MU, YOUNG / 2)
    print(f"sysid_cube: mu {found['mu']:.6g} (truth {MU}, error {abs(found['mu'] / MU - 1):.1e}), "
          f"E {found['youngs_modulus']:.6g} Pa (truth {YOUNG:g}, error {abs(found['youngs_modulus'] / YOUNG - 1):.1e}), "
          f"{found['evaluations']} rollouts, {found['jacobians']} Jacobians, "
          f"{found['wall_s']:.1f} s wall / {found['cpu_s']:.1f} s CPU")
    plot_history(found["cost"], f"{out}/cost.png", "system identification (μ, E) of sysid_cube",
                 "½ Σ‖x_k(θ) − x_k,rec‖² (m²)")
    return found


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:2])

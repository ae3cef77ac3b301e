"""Newton path benchmark: a box resting / pushed on a half-space, per solver and linear solver.

Usage: python tools/bench_newton.py [--res 2 4 8] [--steps 100]
Prints DOF, contacts, mean Newton iterations, line-search trials and ms per solve (host numpy/scipy).
"""
import argparse
import time

import numpy as np

import femcontact as fc
from femcontact.contact import shapes


def run(kind, res, steps, linear):
    scene = fc.Scene(dt=1e-2, integrator="euler", solver=kind, solver_options={"linear_solver": linear})
    mesh = fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=res, center=(0, 0, 0.05))
    body = scene.add_fem_body(mesh, fc.Material(youngs_modulus=1e7, poisson_ratio=0.3, density=1000.0,
                                                rayleigh_beta=1e-3), name="box")
    body.add_force(lambda t: np.array([1.5 * 0.5 * 1.0 * 9.81 if t >= 0.2 else 0.0, 0.0, 0.0]))
    scene.add_obstacle(shapes.HalfSpace(normal=(0, 0, 1)), friction=0.5, name="ground")
    sim = fc.Simulator(scene)
    its, ls, ms, nc = [], [], [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        st = sim.step()
        ex = sim.last_solve.extra if hasattr(sim.last_solve, "extra") else {}
        its.append(st.iterations)
        ls.append(ex.get("line_search_iterations", 0))
        ms.append(st.ms_solve)
        nc.append(st.contacts)
    wall = time.perf_counter() - t0
    print(f"{kind:8s} {linear:8s} res {res:2d} DOF {sim.model.n_dofs:6d} contacts {np.mean(nc):6.1f} "
          f"Newton it {np.mean(its):5.2f} (max {max(its)}) LS trials {np.mean(ls):5.1f} "
          f"solve {np.median(ms):7.2f} ms/step (median)  total {1e3 * wall / steps:7.2f} ms/step")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--res", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--linear", nargs="+", default=["cholmod", "splu"])
    a = p.parse_args()
    for res in a.res:
        for kind in ("lagged", "sap", "similar"):
            for lin in a.linear:
                run(kind, res, a.steps, lin)

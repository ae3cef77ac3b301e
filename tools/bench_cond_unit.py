"""Micro-benchmark of one COND iteration: a cube of ~N DOF resting on z = 0 with hand-made contacts.

Usage: python tools/bench_cond_unit.py [--res 6 9] [--arch cpu]
Prints DOF, contacts, iterations to tol, µs per iteration (whole solve / iterations), µs per
bare cond_iterate launch (timed in a loop), and the floor next to it: one launch of an empty kernel
and one launch of a bare block-sparse matvec y = A x over the same matrix (issue 15 item 5: an
iteration should cost at most 2 matvecs), for each acceleration.
"""
import argparse
import os
import time

import numpy as np


def build(res, E=1e6, dt=1e-2):
    import femcontact as fc
    from femcontact.contact.contacts import ContactSet

    scene = fc.Scene(dt=dt)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), res, center=(0, 0, 0.05)), fc.Material(E, 0.3, 1000.0),
                       name="cube")
    sim = fc.Simulator(scene)
    sim.assemble()
    x = sim.state.positions()
    bot = np.where(np.abs(x[:, 2]) < 1e-9)[0]
    cs = ContactSet(sim.model.n_nodes, capacity=len(bot))
    k = len(bot)
    cs.write("node_a", np.full(k, -1, np.int32))
    cs.write("node_b", bot.astype(np.int32))
    cs.write("frame", np.tile(np.eye(3), (k, 1, 1)))
    cs.write("phi", np.zeros(k))
    cs.write("mu", np.full((k, 2), 0.5))
    cs.write("param", np.full(k, -1, np.int32))
    cs.count = k
    return sim, cs


def _empty_kernel():
    """One launch of an empty kernel: the launch floor."""
    import taichi as ti

    @ti.kernel
    def empty(x: ti.types.ndarray()):
        pass

    return empty


def _time(f, reps=200):
    f()
    t = time.perf_counter()
    for _ in range(reps):
        f()
    return (time.perf_counter() - t) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, nargs="+", default=[6, 9])
    ap.add_argument("--arch", default=os.environ.get("FEMCONTACT_ARCH", "cpu"))
    args = ap.parse_args()
    import femcontact as fc
    from femcontact.solvers.base import StepProblem
    from femcontact.solvers.cond import CondSolver

    fc.backend.init(args.arch, "f64")
    from femcontact import backend
    empty = _empty_kernel()
    for res, accel in ((r, a) for r in args.res for a in ("anderson", "chebyshev")):
        sim, cs = build(res)
        sol = CondSolver(sim.model, {"max_iter": 2000, "acceleration": accel})
        p = StepProblem(sim.model, sim.state, sim.A, sim.b, sim.v_hat, sim.fixed, cs, sim.coef, sim.scene.dt,
                        sim.scene.integrator)
        sol.solve(p)  # compile
        sim.v_hat.from_numpy(np.zeros((sim.model.n_nodes, 3)))
        t = time.perf_counter()
        st = sol.solve(p)
        wall = time.perf_counter() - t
        A, c = sim.A, cs
        n0 = sim.model.n_nodes
        reps = 200
        t = time.perf_counter()
        for _ in range(reps):
            sol.iterate_once(A, 0, c.count, 1.0, 1.0)
        bare = (time.perf_counter() - t) / reps
        x, y = backend.vec3_array(n0), backend.vec3_array(n0)
        t_empty = _time(lambda: empty(x))
        t_mv = _time(lambda: A.matvec(x, y))
        us = st.extra["us_per_iteration"]
        print(f"arch {fc.backend.config()['arch']}  {accel:9s} DOF {3 * n0}  contacts {cs.count}  "
              f"iterations {st.iterations}  converged {st.converged}  solve {1e3 * wall:.2f} ms  {us:.0f} us/iteration "
              f"({us / (1e6 * t_mv):.1f} matvecs)  bare cond_iterate {1e6 * bare:.0f} us  floor: empty launch "
              f"{1e6 * t_empty:.0f} us, matvec {1e6 * t_mv:.0f} us", flush=True)


if __name__ == "__main__":
    main()

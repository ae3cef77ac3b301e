"""Cost of step derivatives (femcontact.diff) against the step itself (issue 33 item 5).

1. a resting FEM cube (``--small`` nodes per edge, ≤ 300 DOF): the full-state Jacobian (x, v) of one step
   against the step's own time;
2. a resting FEM cube of ``--large`` nodes per edge (17: 14.7k DOF): a vector-Jacobian product over the
   scene parameters (μ, E, ρ), over the start velocities v (the closed-form columns: one transposed solve),
   and a Jacobian-vector product over the whole state and those parameters, against the step (and the same
   products at the small size).
The Jacobians are timed twice in one run: "fallback" (every ∂r/∂p column by residual differences,
``step.ANALYTIC_COLUMNS = False``, the state before the closed-form columns) and "analytic".
Wall and CPU (process_time) times, minimum and median of ``--repeat`` runs. OPENBLAS_NUM_THREADS=1.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python tools/bench_diff.py [--small 4] [--large 17] [--repeat 3]
"""
import argparse
import statistics
import time

import numpy as np

import femcontact as fc
import femcontact.diff  # noqa: F401  (fc.diff)
from femcontact import shapes
from femcontact.diff import step as diff_step


def cube(nodes_per_edge: int, solver: str = "lagged") -> fc.Simulator:
    sc = fc.Scene(dt=1e-2, integrator="euler", solver=solver, solver_options={"rel_tol": 1e-10})
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4, hc_dissipation=10.0)
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=nodes_per_edge - 1),
                    fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=1.0), position=(0, 0, 0.05), name="cube")
    sim = fc.Simulator(sc, energy_check=None)
    sim.track_derivatives()
    return sim


def timed(fn, repeat: int):
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return out, walls, cpus


def report(what: str, walls, cpus) -> str:
    return (f"{what:42s} wall min {1e3 * min(walls):9.1f} ms med {1e3 * statistics.median(walls):9.1f} ms | "
            f"cpu min {1e3 * min(cpus):9.1f} ms med {1e3 * statistics.median(cpus):9.1f} ms")


def run_case(nodes: int, wrt, product: str, repeat: int, settle: int, analytic: bool = True) -> None:
    diff_step.ANALYTIC_COLUMNS = analytic
    sim = cube(nodes)
    for _ in range(settle):
        sim.step()
    start = fc.diff.snapshot(sim)

    def one_step():
        fc.diff.restore(sim, start, stepped=True)
        return sim.step()
    st, w_step, c_step = timed(one_step, repeat)
    print(f"{nodes}^3 nodes, {sim.model.n_dofs} DOF, {st.contacts} contacts, {st.iterations} Newton iterations")
    print(report("step", w_step, c_step))

    def derive():
        d = sim.step_derivatives(wrt)
        if product == "jacobian":
            return d.jacobian(), d
        if product == "jvp":
            return d.jvp(np.ones(d.n_inputs)), d
        return d.vjp(np.ones(d.n_outputs)), d
    (res, d), w_d, c_d = timed(derive, repeat)
    mode = "analytic" if analytic else "fallback"
    print(report(f"{product} wrt {','.join(wrt)} ({d.n_inputs} cols, {d.solver_kind}, {mode})", w_d, c_d))
    print(f"ratio (min wall) {min(w_d) / min(w_step):.1f}x, (min cpu) {min(c_d) / min(c_step):.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=4)
    ap.add_argument("--large", type=int, default=17)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-large", action="store_true")
    a = ap.parse_args()
    for analytic in (False, True):
        run_case(a.small, ["x", "v"], "jacobian", a.repeat, settle=5, analytic=analytic)
        run_case(a.small, ["v"], "jacobian", a.repeat, settle=5, analytic=analytic)
    run_case(a.small, ["mu:ground", "E:cube", "rho:cube"], "vjp", a.repeat, settle=5)
    run_case(a.small, ["v"], "vjp", a.repeat, settle=5)
    run_case(a.small, ["x", "v", "mu:ground", "E:cube", "rho:cube"], "jvp", a.repeat, settle=5)
    if not a.skip_large:
        run_case(a.large, ["mu:ground", "E:cube", "rho:cube"], "vjp", a.repeat, settle=3)
        run_case(a.large, ["v"], "vjp", a.repeat, settle=3)
        run_case(a.large, ["x", "v", "mu:ground", "E:cube", "rho:cube"], "jvp", a.repeat, settle=3)


if __name__ == "__main__":
    main()

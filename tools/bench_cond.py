"""COND Table I / II style benchmark: iterations and solver time per step for each acceleration.

    python tools/bench_cond.py [--scene mat_drag|gripper_ball|cube_drop|cable_winding|clutter]
                               [--sizes ...] [--accel chebyshev anderson none] [--steps 20] [--settle S]
                               [--tol 1e-5] [--fem-step jacobi block3 chebyshev:4] [--arch cpu]

Scenes (``--sizes`` and ``--settle`` default per scene):

- ``mat_drag`` (scenes/mat_drag.py): sizes 12 26 (mat cells along its long side: about 1k and
  4.4k DOF; 48 and 98 give 15k and 60k), settle 0.4 s (the clamp lifts and pulls the mat).
- ``gripper_ball`` (scenes/gripper_ball.py under COND): sizes 7 10 (ball resolution: about 1.7k
  and 4k DOF, the COND paper's 1664 and 4397), settle 1.5 s (lifted, held).
- ``cube_drop``: the peers' soft cube (box 0.1 m, 8 or 16 cells per edge: 2,187 / 14,739 DOF,
  E 1e5, ν 0.4, ρ 1000, dropped 5 cm, dt 10 ms, implicit Euler), settle 0.1 s (landed).
- ``cable_winding`` (scenes/cable_winding.py under COND, Euler): 160 / 320 segments, settle 1 s
  (wound onto the drum).
- ``clutter`` (scenes/clutter.py under COND, Euler): 4 columns of 10 rigid bodies, settle 0.5 s.

``--fem-step`` lists the steps of the free FEM rows to compare (COND option ``fem_step``;
``chebyshev:K`` sets ``fem_sweeps`` K; default: the solver's default).

For each size, FEM step and acceleration, runs the scene for ``--settle`` s and then measures
``--steps`` steps at a COND tolerance ``--tol`` (default 1e-5: looser thresholds stop the
unaccelerated iteration early on a slowly converging stiff mat, which looks like "fewer
iterations" but is a different answer). Prints DOF, mean contacts, dynamics (assembly) ms,
detection ms, COND solver ms and iterations per step, ms per iteration, the share of steps that
converged, and the median SAP eq. 32 momentum error e_m of the solutions
(``solvers.sap.momentum_error``, evaluated outside the timings; the same scale
tools/bench_newton.py prints for the Newton path), so rows compare at the accuracy they reach.
COND paper for scale (C++/Eigen/OpenMP, quad-core desktop): soft mat 1.06 ms at 1081 DOF,
3.80 ms at 4438 DOF; gripper + soft ball 1664 DOF / 101 contacts 2.95 ms, 4397 DOF / 263
contacts 6.11 ms; 14,681 DOF 16.9 ms.
"""
import argparse

import numpy as np

import femcontact as fc
from femcontact.bench.cases import PRESETS
from femcontact.bench.measure import Recorder

SCENES = ("mat_drag", "gripper_ball", "cube_drop", "cable_winding", "clutter")     # of bench.cases.PRESETS
SETTLE = {"cube_drop": 0.1}                 # s: landed (the Table I presets' settle otherwise)


def fem_options(spec: str) -> dict:
    """COND options of a ``--fem-step`` entry: ``jacobi``, ``block3`` or ``chebyshev[:K]``."""
    if spec == "default":
        return {}
    step, _, k = spec.partition(":")
    return {"fem_step": step, **({"fem_sweeps": int(k)} if k else {})}


def bench(build, steps: int, accel: str, tol: float, max_iter: int, settle: float, fem: str = "default") -> dict:
    """Run the scene for ``settle`` s under COND with these options, then measure ``steps`` steps."""
    scene = build()
    scene.solver_options = {**scene.solver_options, "acceleration": accel, "tol": tol, "max_iter": max_iter,
                            **fem_options(fem)}
    sim = fc.Simulator(scene)
    sim.run(duration=settle)
    sim.stats.clear()
    rec = Recorder(sim.contact_solver)
    sim.contact_solver = rec
    sim.run(steps=steps)
    s, r = sim.stats, rec.records
    em = [x["e_m"] for x in r if np.isfinite(x["e_m"])]
    return {"dof": sim.model.n_dofs, "contacts": np.mean([x.contacts for x in s]),
            "dynamics": np.mean([x.ms_assembly for x in s]), "detection": np.mean([x.ms_detection for x in s]),
            "solver": np.mean([x["ms"] for x in r]) if r else 0.0, "iters": np.mean([x.iterations for x in s]),
            "step": np.mean([x.ms_total for x in s]) - rec.ms_check / steps,
            "converged": np.mean([x["converged"] for x in r]) if r else 1.0,
            "e_m": float(np.median(em)) if em else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", default="mat_drag", choices=SCENES)
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="scene sizes (see above)")
    ap.add_argument("--accel", nargs="+", default=["chebyshev", "anderson", "none"],
                    choices=["chebyshev", "anderson", "none"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--settle", type=float, default=None, help="simulated seconds before the measured steps")
    ap.add_argument("--tol", type=float, nargs="+", default=[1e-5],
                    help="COND stopping thresholds (relative step norm); several give iterations against e_m")
    ap.add_argument("--max-iter", type=int, default=3000)
    ap.add_argument("--fem-step", nargs="+", default=["default"],
                    help="FEM-row steps to compare: jacobi, block3, chebyshev[:K] (default: the solver's)")
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", default="f64")
    args = ap.parse_args()
    cfg = fc.backend.init(args.arch, args.precision)
    build, sizes, settle, _ = PRESETS[args.scene]
    settle = SETTLE.get(args.scene, settle)
    sizes = args.sizes or sizes
    args.settle = settle if args.settle is None else args.settle
    print(f"backend {cfg['arch']} {cfg['precision']}; scene {args.scene}; {args.steps} measured steps after "
          f"{args.settle:g} s; max_iter {args.max_iter}")
    print(f"{'DOF':>7} {'contacts':>9} {'fem step':>12} {'accel':>9} {'tol':>7} {'dynamics ms':>12} {'detect ms':>10} {'solver ms':>10} "
          f"{'iters':>7} {'ms/iter':>8} {'conv':>5} {'e_m':>9} {'step ms':>8}")
    for n in sizes:
        for fem, accel, tol in ((f, a, t) for f in args.fem_step for a in args.accel for t in args.tol):
            r = bench(lambda: build(n, "cond"), args.steps, accel, tol, args.max_iter, args.settle, fem)
            print(f"{r['dof']:>7} {r['contacts']:>9.0f} {fem:>12} {accel:>9} {tol:>7.0e} {r['dynamics']:>12.2f} "
                  f"{r['detection']:>10.2f} {r['solver']:>10.2f} {r['iters']:>7.1f} "
                  f"{r['solver'] / max(r['iters'], 1):>8.3f} {r['converged']:>5.2f} {r['e_m']:>9.2e} "
                  f"{r['step']:>8.2f}", flush=True)


if __name__ == "__main__":
    main()

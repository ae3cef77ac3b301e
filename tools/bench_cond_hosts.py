"""COND with host bodies solved with their virtual nodes (issue 32 item 3): before / after side by side.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python tools/bench_cond_hosts.py
        [--scenes clutter:2 clutter gripper_ball cable_winding mat_drag] [--steps 20]
        [--modes alternate exact] [--momentum-tol 1e-4] [--lagged]

For each Table I scene (``bench.cases.PRESETS`` at its first size or at ``scene:size``, settled for the
preset's time) and
each COND ``host_solve`` mode ("alternate": the hosts' block steps and their virtual nodes alternate,
as before; "exact": each host solved together with its virtual nodes), runs ``--steps`` measured steps
at COND's defaults (e_m ≤ ``--momentum-tol``, ``max_iter`` 500, θ < ``--tol``) and prints per contact step the median
and max iterations, the steps at the cap, the median and max e_m (SAP eq. 32) and the deepest
penetration (mm) over the measured steps, the solver's median ms per contact step and the whole step's
median wall and CPU (process) ms; ``--lagged`` adds the Lagged row for the penetration comparison.
"""
import argparse
import time

import numpy as np

import femcontact as fc
from femcontact.bench.cases import PRESETS
from femcontact.bench.measure import Recorder


def measure(scene_name: str, solver: str, options: dict, steps: int, size=None) -> dict:
    build, sizes, settle, _ = PRESETS[scene_name]
    scene = build(sizes[0] if size is None else size, solver)
    scene.solver_options = {**(scene.solver_options or {}), **options}
    sim = fc.Simulator(scene, unconverged_stop=None)      # the alternation's settle may stay at the cap
    sim.run(duration=settle)
    rec = Recorder(sim.contact_solver)
    sim.contact_solver = rec
    pen = 0.0
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        sim.run(steps=1)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        c = sim.contacts
        if c is not None and c.count:
            pen = max(pen, -float(np.min(c.to_numpy()["phi"])))
    r = [x for x in rec.records if x["contacts"]]
    it = np.array([x["iterations"] for x in r]) if r else np.zeros(1)
    em = np.array([x["e_m"] for x in r]) if r else np.full(1, np.nan)
    return {"dof": sim.model.n_dofs, "contacts": np.mean([x["contacts"] for x in r]) if r else 0,
            "it_med": float(np.median(it)), "it_max": int(it.max()), "cap": int(np.sum(it >= 500)),
            "em_med": float(np.median(em)), "em_max": float(np.max(em)), "pen_mm": 1e3 * pen,
            "ms": float(np.median([x["ms"] for x in r])) if r else 0.0,
            "wall_ms": 1e3 * float(np.median(wall)), "cpu_ms": 1e3 * float(np.median(cpu))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", nargs="+", default=["clutter:2", "clutter", "gripper_ball", "cable_winding", "mat_drag"])
    ap.add_argument("--modes", nargs="+", default=["alternate", "exact"], choices=["alternate", "exact"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--momentum-tol", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=None,
                    help="COND's inner θ threshold (default: the solver's; 1e-2 lets e_m decide, as in the "
                         "accuracy table)")
    ap.add_argument("--lagged", action="store_true", help="add Lagged's row (penetration reference)")
    ap.add_argument("--arch", default="cpu")
    args = ap.parse_args()
    fc.backend.init(args.arch, "f64")
    print(f"{'scene':<14} {'solver':<16} {'DOF':>6} {'contacts':>8} {'it med':>7} {'it max':>7} {'cap':>4} "
          f"{'e_m med':>9} {'e_m max':>9} {'pen mm':>7} {'ms med':>8} {'step ms':>8} {'cpu ms':>8}", flush=True)
    for spec in args.scenes:
        name, _, size = spec.partition(":")
        theta = {} if args.tol is None else {"tol": args.tol}
        runs = [(f"cond {m}", "cond", {"host_solve": m == "exact", "momentum_tol": args.momentum_tol, **theta})
                for m in args.modes]
        if args.lagged:
            runs.append(("lagged", "lagged", {}))
        for label, solver, opts in runs:
            r = measure(name, solver, opts, args.steps, int(size) if size else None)
            print(f"{spec:<14} {label:<16} {r['dof']:>6} {r['contacts']:>8.0f} {r['it_med']:>7.0f} {r['it_max']:>7} "
                  f"{r['cap']:>4} {r['em_med']:>9.1e} {r['em_max']:>9.1e} {r['pen_mm']:>7.2f} {r['ms']:>8.1f} "
                  f"{r['wall_ms']:>8.1f} {r['cpu_ms']:>8.1f}",
                  flush=True)


if __name__ == "__main__":
    main()

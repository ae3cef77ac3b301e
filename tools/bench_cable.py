"""Cable benchmark (issue 7): the COND §V-C winding scene at the paper's two sizes, plus the
coil drop, on the Newton path and COND. Prints the columns of COND Table I: DOF, contacts,
iterations, dynamics ms (assembly + detection; detection alone) and solver ms per step (means over the timed
steps, after warm-up steps that wind the cable onto the drum so contacts exist).

    PYTHONPATH=. python tools/bench_cable.py [--steps 50] [--warmup 100] [--arch cpu]

The paper reports 967 DOF / 130 contacts in 0.64 ms and 1927 DOF / 249 contacts in 1.22 ms
of solver time (GPU). Numbers go into issue notes, never into timed tests.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact.cli import load_scene_module

ROOT = Path(__file__).resolve().parents[1]


def _scene(name):
    return load_scene_module(ROOT / "scenes" / f"{name}.py")


def run(label, scene, warmup, steps):
    sim = fc.Simulator(scene)
    try:
        sim.run(steps=warmup)
        st = sim.run(steps=steps) and sim.stats[-steps:]
    except fc.errors.SimulationError as exc:
        print(f"{label:<40} diverged: {str(exc).split('. Likely')[0]}", flush=True)
        return
    dof = sim.model.n_dofs
    c = np.mean([s.contacts for s in st])
    it = np.mean([s.iterations for s in st])
    dyn = np.mean([s.ms_assembly + s.ms_detection for s in st])
    det = np.mean([s.ms_detection for s in st])
    sol = np.mean([s.ms_solve for s in st])
    print(f"{label:<40} {dof:>6} {c:>9.0f} {it:>7.1f} {dyn:>12.2f} {det:>10.2f} {sol:>10.2f}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--arch", default=None)
    a = ap.parse_args(argv)
    fc.backend.init(a.arch, "f64")
    winding, coil = _scene("cable_winding"), _scene("cable_coil")
    print(f"{'scene / solver':<40} {'DOF':>6} {'contacts':>9} {'iters':>7} {'dynamics ms':>12} {'detect ms':>10} {'solver ms':>10}")
    for seg in (160, 320):
        run(f"winding {seg} seg / lagged euler", winding.build(seg), a.warmup, a.steps)
        for step in ("frobenius", "bb"):        # build() integrates with implicit Euler
            sc = winding.build(seg, solver="cond")
            sc.solver_options = {"step": step, "max_iter": 500}
            run(f"winding {seg} seg / cond euler {step}", sc, a.warmup, a.steps)
    run("coil / lagged euler", coil.build(), a.warmup, a.steps)


if __name__ == "__main__":
    sys.exit(main())

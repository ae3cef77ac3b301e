"""Assembly and linear-solve cost per step on cube meshes of about 1k, 10k and 100k DOF.

    python tools/bench_assembly.py [--arch cpu] [--steps 5] [--sizes 6 14 31]

Prints DOF, tets, assembly ms (A and b of one step, corotational FEM + mass terms) and
linear-solve ms and iterations per step for the Taichi block-Jacobi PCG (relative tolerance
1e-8) and, up to 30k DOF, the sparse direct solve (SuperLU). A soft cube (E = 1e5 Pa) falls under
gravity with midpoint steps of 10 ms; the first step (kernel compilation) is excluded.
"""
import argparse
import time

import numpy as np

import femcontact as fc


def bench(cells: int, solver: str, steps: int) -> dict:
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81), linear_solver=solver)
    body = scene.add_fem_body(fc.meshes.box((0.2, 0.2, 0.2), cells), fc.Material(1e5, 0.4, 1000.0), name="cube")
    body.pin("z < -0.0999")
    sim = fc.Simulator(scene)
    sim.step()   # compile
    sim.stats.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        sim.step()
    wall = (time.perf_counter() - t0) / steps
    s = sim.stats
    return {"dof": sim.model.n_dofs, "tets": sim.model.n_tets,
            "assembly": np.mean([x.ms_assembly for x in s]), "solve": np.mean([x.ms_solve for x in s]),
            "iters": np.mean([x.iterations for x in s]), "step": 1e3 * wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", default="f64")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[6, 14, 31], help="cells per cube edge")
    args = ap.parse_args()
    cfg = fc.backend.init(args.arch, args.precision)
    print(f"backend {cfg['arch']} {cfg['precision']}")
    print(f"{'solver':>7} {'DOF':>8} {'tets':>8} {'assembly ms':>12} {'solve ms':>10} {'iters':>7} {'step ms':>9}")
    for cells in args.sizes:
        for solver in ("pcg", "direct"):
            if solver == "direct" and 3 * (cells + 1) ** 3 > 30000:
                continue
            r = bench(cells, solver, args.steps)
            print(f"{solver:>7} {r['dof']:>8} {r['tets']:>8} {r['assembly']:>12.2f} {r['solve']:>10.2f} "
                  f"{r['iters']:>7.1f} {r['step']:>9.2f}", flush=True)


if __name__ == "__main__":
    main()

"""COND on the dragged mat and on the gripper holding a soft ball (COND Table I / II style).

    python tools/bench_cond.py [--scene mat_drag|gripper_ball] [--sizes ...] [--steps 20] [--settle S]
                               [--tol 1e-5] [--arch cpu]

Scenes (``--sizes`` and ``--settle`` default per scene):

- ``mat_drag`` (scenes/mat_drag.py): sizes 12 26 48 98 (mat cells along its long side: about
  1k, 4.4k, 15k, 60k DOF), settle 0.4 s (the clamp lifts and starts pulling, the mat lies on
  the floor).
- ``gripper_ball`` (scenes/gripper_ball.py under COND): sizes 7 10 (ball resolution: about
  1.7k and 4k DOF, the COND paper's 1664 and 4397), settle 1.5 s (lifted, held).

For each size and with Chebyshev acceleration on and off, runs the scene for ``--settle`` s
and then measures
``--steps`` steps at a COND tolerance ``--tol`` (default 1e-5: looser thresholds stop the
unaccelerated iteration early on a slowly converging stiff mat, which looks like "fewer
iterations" but is a different answer). Prints DOF, mean contacts, dynamics (assembly) ms, detection ms, COND
solver ms and iterations per step, ms per iteration, and the median SAP eq. 32 momentum error
e_m of the solutions (``solvers.sap.momentum_error``, evaluated outside the timings; the same
scale tools/bench_newton.py prints for the Newton path). COND paper for scale (C++/Eigen/OpenMP, quad-core
desktop): soft mat 1.06 ms at 1081 DOF, 3.80 ms at 4438 DOF; gripper + soft ball 1664 DOF / 101
contacts 2.95 ms, 4397 DOF / 263 contacts 6.11 ms.
"""
import argparse
import time
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact.cli import load_scene_module
from femcontact.solvers.sap import momentum_error

ROOT = Path(__file__).resolve().parents[1]


PRESETS = {   # scene: (default sizes, default settle s, extra build arguments)
    "mat_drag": ([12, 26, 48, 98], 0.4, {}),
    "gripper_ball": ([7, 10], 1.5, {"solver": "cond"}),
}


def load_scene(name: str):
    """Import scenes/<name>.py (through the CLI's scene loader)."""
    return load_scene_module(ROOT / "scenes" / f"{name}.py")


class _MomentumError:
    """Wraps the contact solver: SAP eq. 32 momentum error of each solution (host side, not timed)."""

    def __init__(self, inner):
        self.inner, self.name, self.e_m, self.ms = inner, inner.name, [], 0.0

    def solve(self, problem):
        st = self.inner.solve(problem)
        t0 = time.perf_counter()
        self.e_m.append(momentum_error(problem))
        self.ms += 1e3 * (time.perf_counter() - t0)
        return st


def bench(build, steps: int, chebyshev: bool, tol: float, max_iter: int, settle: float) -> dict:
    scene = build()
    scene.solver_options = {**scene.solver_options, "chebyshev": chebyshev, "tol": tol, "max_iter": max_iter}
    sim = fc.Simulator(scene)
    sim.run(duration=settle)
    sim.stats.clear()
    wrap = _MomentumError(sim.contact_solver)
    sim.contact_solver = wrap
    t0 = time.perf_counter()
    sim.run(steps=steps)
    wall = (time.perf_counter() - t0 - 1e-3 * wrap.ms) / steps
    s = sim.stats
    return {"dof": sim.model.n_dofs, "contacts": np.mean([x.contacts for x in s]),
            "dynamics": np.mean([x.ms_assembly for x in s]), "detection": np.mean([x.ms_detection for x in s]),
            "solver": np.mean([x.ms_solve for x in s]) - wrap.ms / steps, "iters": np.mean([x.iterations for x in s]),
            "step": 1e3 * wall, "e_m": float(np.median(wrap.e_m)) if wrap.e_m else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", default="mat_drag", choices=sorted(PRESETS))
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="build(resolution=...) values")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--settle", type=float, default=None, help="simulated seconds before the measured steps")
    ap.add_argument("--tol", type=float, default=1e-5, help="COND stopping threshold (relative step norm)")
    ap.add_argument("--max-iter", type=int, default=3000)
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", default="f64")
    args = ap.parse_args()
    cfg = fc.backend.init(args.arch, args.precision)
    module = load_scene(args.scene)
    sizes, settle, extra = PRESETS[args.scene]
    sizes = args.sizes or sizes
    args.settle = settle if args.settle is None else args.settle
    print(f"backend {cfg['arch']} {cfg['precision']}; scene {args.scene}; {args.steps} measured steps after "
          f"{args.settle:g} s; tol {args.tol:g}, max_iter {args.max_iter}")
    print(f"{'DOF':>7} {'contacts':>9} {'cheb':>5} {'dynamics ms':>12} {'detect ms':>10} {'solver ms':>10} "
          f"{'iters':>7} {'ms/iter':>8} {'e_m':>9} {'step ms':>8}")
    for n in sizes:
        for cheb in (True, False):
            r = bench(lambda: module.build(resolution=n, **extra), args.steps, cheb, args.tol, args.max_iter, args.settle)
            print(f"{r['dof']:>7} {r['contacts']:>9.0f} {'on' if cheb else 'off':>5} {r['dynamics']:>12.2f} "
                  f"{r['detection']:>10.2f} {r['solver']:>10.2f} {r['iters']:>7.1f} "
                  f"{r['solver'] / max(r['iters'], 1):>8.3f} {r['e_m']:>9.2e} {r['step']:>8.2f}", flush=True)


if __name__ == "__main__":
    main()

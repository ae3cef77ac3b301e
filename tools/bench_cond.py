"""COND Table I / II style benchmark: iterations and solver time per step for each acceleration.

    python tools/bench_cond.py [--scene mat_drag|gripper_ball|cube_drop|cable_winding|clutter]
                               [--sizes ...] [--accel chebyshev anderson none] [--steps 20] [--settle S]
                               [--tol 1e-5] [--arch cpu]

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

For each size and each acceleration, runs the scene for ``--settle`` s and then measures
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
import time
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact.cli import load_scene_module
from femcontact.solvers.sap import momentum_error

ROOT = Path(__file__).resolve().parents[1]


def load_scene(name: str):
    """Import scenes/<name>.py (through the CLI's scene loader)."""
    return load_scene_module(ROOT / "scenes" / f"{name}.py")


def cube_drop(cells: int) -> fc.Scene:
    """The peers' soft-cube drop: a 0.1 m box of ``cells`` cells per edge dropped 5 cm (Euler)."""
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver="cond", integrator="euler", name="cube_drop")
    scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=cells, center=(0.0, 0.0, 0.1)),
                       material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


PRESETS = {   # scene: (builder of one size, default sizes, default settle s)
    "mat_drag": (lambda n: load_scene("mat_drag").build(resolution=n), [12, 26], 0.4),
    "gripper_ball": (lambda n: load_scene("gripper_ball").build(resolution=n, solver="cond"), [7, 10], 1.5),
    "cube_drop": (cube_drop, [8, 16], 0.1),
    "cable_winding": (lambda n: load_scene("cable_winding").build(segments=n, solver="cond"), [160, 320], 1.0),
    "clutter": (lambda n: load_scene("clutter").build(solver="cond", per_column=n), [10], 0.5),
}


class _MomentumError:
    """Wraps the contact solver: SAP eq. 32 momentum error of each solution (host side, not timed)."""

    def __init__(self, inner):
        self.inner, self.name, self.e_m, self.converged, self.ms = inner, inner.name, [], [], 0.0

    def solve(self, problem):
        st = self.inner.solve(problem)
        self.converged.append(bool(st.converged))
        t0 = time.perf_counter()
        self.e_m.append(momentum_error(problem))
        self.ms += 1e3 * (time.perf_counter() - t0)
        return st


def bench(build, steps: int, accel: str, tol: float, max_iter: int, settle: float) -> dict:
    scene = build()
    scene.solver_options = {**scene.solver_options, "acceleration": accel, "tol": tol, "max_iter": max_iter}
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
            "step": 1e3 * wall, "converged": np.mean(wrap.converged) if wrap.converged else 1.0,
            "e_m": float(np.median(wrap.e_m)) if wrap.e_m else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", default="mat_drag", choices=sorted(PRESETS))
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="scene sizes (see above)")
    ap.add_argument("--accel", nargs="+", default=["chebyshev", "anderson", "none"],
                    choices=["chebyshev", "anderson", "none"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--settle", type=float, default=None, help="simulated seconds before the measured steps")
    ap.add_argument("--tol", type=float, nargs="+", default=[1e-5],
                    help="COND stopping thresholds (relative step norm); several give iterations against e_m")
    ap.add_argument("--max-iter", type=int, default=3000)
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", default="f64")
    args = ap.parse_args()
    cfg = fc.backend.init(args.arch, args.precision)
    build, sizes, settle = PRESETS[args.scene]
    sizes = args.sizes or sizes
    args.settle = settle if args.settle is None else args.settle
    print(f"backend {cfg['arch']} {cfg['precision']}; scene {args.scene}; {args.steps} measured steps after "
          f"{args.settle:g} s; max_iter {args.max_iter}")
    print(f"{'DOF':>7} {'contacts':>9} {'accel':>9} {'tol':>7} {'dynamics ms':>12} {'detect ms':>10} {'solver ms':>10} "
          f"{'iters':>7} {'ms/iter':>8} {'conv':>5} {'e_m':>9} {'step ms':>8}")
    for n in sizes:
        for accel, tol in ((a, t) for a in args.accel for t in args.tol):
            r = bench(lambda: build(n), args.steps, accel, tol, args.max_iter, args.settle)
            print(f"{r['dof']:>7} {r['contacts']:>9.0f} {accel:>9} {tol:>7.0e} {r['dynamics']:>12.2f} "
                  f"{r['detection']:>10.2f} {r['solver']:>10.2f} {r['iters']:>7.1f} "
                  f"{r['solver'] / max(r['iters'], 1):>8.3f} {r['converged']:>5.2f} {r['e_m']:>9.2e} "
                  f"{r['step']:>8.2f}", flush=True)


if __name__ == "__main__":
    main()

"""Which solver converges on which kind of scene: the measurement behind ``Scene(solver="auto")``
(``femcontact.convergence.choose_solver``; docs/PERFORMANCE.md, "Convergence monitor and the auto solver").

Runs each scene script with each solver for a number of steps from its start (no stop on unconverged
steps) and prints, per run: the steps, the steps with contacts, the unconverged steps
(``femcontact.convergence.ConvergenceMonitor``), the worst e_m (SAP eq. 32), the median iterations and ms
per contact step, and what ``"auto"`` picks for the scene.

    python tools/bench_auto.py                          # every row, COND and Lagged
    python tools/bench_auto.py --rows gripper_ball mat_drag --solvers cond lagged --steps 40
"""
from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact.convergence import choose_solver

ROOT = Path(__file__).resolve().parents[1]
# row: (scene script, build() keyword arguments, steps); rigid bodies / robots first, then deformable only
ROWS = {
    "gripper_ball": ("gripper_ball", {}, 80),             # jointed rigid fingers (prismatic, PD) + FEM ball
    "soft_fingers": ("soft_fingers_cylinder", {}, 60),    # driven FEM fingers + a rigid cylinder
    "clutter": ("clutter", {"per_column": 3}, 60),        # rigid bodies only, in a bin
    "rigid_box_push": ("rigid_box_push", {}, 50),         # one rigid box pushed on the ground
    "cube_drop": ("cube_drop", {}, 50),                   # FEM cube onto the ground
    "pile": ("pile", {"layers": 2, "per_side": 2}, 40),   # FEM bodies onto each other
    "mat_drag": ("mat_drag", {"resolution": 12}, 30),     # FEM mat dragged on the floor (1k DOF)
    "cable_winding": ("cable_winding", {}, 30),           # Cosserat rod onto a drum
}


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scenes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(row: str, solver: str, steps: int) -> dict:
    script, kwargs, default_steps = ROWS[row]
    scene = load(script).build(solver=solver, **kwargs)
    sim = fc.Simulator(scene, unconverged_stop=None)
    scene.solver = "auto"
    picked = choose_solver(scene, sim.model)[0]
    t0 = time.perf_counter()
    summary = sim.run(steps=steps or default_steps)
    wall = time.perf_counter() - t0
    contact = [s for s in sim.stats if s.contacts]
    c = summary.convergence
    return {"row": row, "auto": picked, "solver": sim.contact_solver.name, "integrator": scene.integrator, "dof": sim.model.n_dofs,
            "steps": c.steps, "contact_steps": len(contact), "unconverged": c.unconverged_steps,
            "worst_e_m": c.worst_e_m, "median_iterations": float(np.median([s.iterations for s in contact])) if contact else 0.0,
            "median_ms": float(np.median([s.ms_total for s in contact])) if contact else 0.0, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--solvers", nargs="+", default=["cond", "lagged"])
    parser.add_argument("--steps", type=int, default=0, help="steps per run (default: the row's own)")
    args = parser.parse_args()
    print("| row | DOF | auto picks | solver (integrator) | steps (with contact) | unconverged | worst e_m | "
          "median iterations | median ms/contact step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in args.rows:
        for solver in args.solvers:
            r = measure(row, solver, args.steps)
            em = "—" if r["worst_e_m"] is None else f"{r['worst_e_m']:.1e}"
            print(f"| {row} | {r['dof']:,} | {r['auto']} | {r['solver']} ({r['integrator']}) | {r['steps']} "
                  f"({r['contact_steps']}) | {r['unconverged']} | {em} | {r['median_iterations']:.0f} | "
                  f"{r['median_ms']:.0f} |", flush=True)


if __name__ == "__main__":
    main()

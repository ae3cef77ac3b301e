"""Scaling of COND and Lagged on the soft-cube drop, for a GPU (issue 28 item 4). Not a timed test.

    python tools/bench_gpu.py --out DIR [--arch cuda] [--precisions f64 f32] [--dofs 100k 300k 1M]
                              [--solvers cond lagged lagged-pcg] [--steps 3] [--budget 360] [--case-cap 100]

A solver ``NAME-LINEAR`` is solver NAME with option ``linear_solver`` LINEAR (``lagged-pcg``: the Newton
step's PCG in kernels, solvers/newton_pcg.py; plain ``lagged`` takes "auto", which is that PCG on a GPU
from ``newton_linear.PCG_MIN_DOFS_GPU`` unknowns and CHOLMOD on the host below).

The scene is the peers' soft cube (0.1 m box, E 1e5, ν 0.4, ρ 1000, implicit Euler, dt 10 ms,
μ 0.5 on a half-space ground) at N cells per edge, N chosen so that 3 (N+1)³ is nearest the asked
DOF (100k → N 31, 98,304 DOF; 300k → 45, 292,008; 1M → 68, 985,527). It starts at rest with its
bottom face 0.2 mm above the ground, so the first step already has contacts. Step 1 (kernel
compilation, warm starts) is not measured; then ``--steps`` steps are.

Each case (solver × size × precision) runs in a process of its own (the precision is fixed when
the runtime starts), with a time cap: the share of ``--budget`` left, at most ``--case-cap`` s. A
case that overruns is killed and reported as such, and a solver that overran is not tried at a
larger size; so the whole run ends within the budget whatever the machine.

Per case: DOF, contacts, iterations per step, ms per iteration and per step with the split
detection / assembly / solve (``StepStats``; each step ends with a host read, so the step time
includes the device's work), e_m (SAP eq. 32 momentum error of the last step, outside the
timings), seconds to build the model and to take the first step, and the floor measured in the
same process: one empty kernel launch and one bare block-sparse matvec of the same A (µs, device
synchronized), with the ratio of a COND iteration to that matvec. Newton rows name their linear
solver; with the PCG, CG iterations per Newton iteration (``cg_per_newton``) and the linear solve's
ms per CG iteration over that matvec (``cg_per_matvec``: upload, preconditioner and read-back
included). Writes ``DIR/report.json`` and ``DIR/report.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("solver", "precision", "cells", "dof", "contacts", "iterations", "ms_per_iter", "ms_step",
           "ms_detection", "ms_assembly", "ms_solve", "e_m", "matvec_us", "iter_per_matvec", "linear",
           "cg_per_newton", "cg_per_matvec", "launch_us", "build_s", "first_step_s", "status")


def cells_for(dof: float) -> int:
    """Cells per edge N whose 3 (N+1)³ DOF is nearest ``dof``."""
    n = max(int(round((dof / 3.0) ** (1.0 / 3.0))) - 1, 1)
    return min((n - 1, n, n + 1), key=lambda k: abs(3 * (k + 1) ** 3 - dof) if k >= 1 else math.inf)


def parse_dof(text: str) -> float:
    text = text.strip().lower()
    scale = {"k": 1e3, "m": 1e6}.get(text[-1], 1.0)
    return float(text[:-1] if text[-1] in "km" else text) * scale


# ---------------------------------------------------------------- one case (child process)
def cube_scene(cells: int, solver: str):
    """The soft cube at ``cells`` per edge, at rest 0.2 mm above the ground (module docstring); ``solver``:
    a solver name, or ``NAME-LINEAR`` for option ``linear_solver`` = LINEAR."""
    import femcontact as fc

    solver, _, linear = solver.partition("-")
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator="euler", name="cube_scaling",
                     solver_options={"linear_solver": linear} if linear else None)
    scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=cells, center=(0.0, 0.0, 0.0502)),
                       material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


def run_case(solver: str, cells: int, steps: int, arch: str, precision: str) -> dict:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    import femcontact as fc
    from femcontact.assembly.sparse import bsr_matvec
    from femcontact.bench.measure import Recorder

    cfg = fc.backend.init(arch, precision)
    ti = fc.backend.ti
    t0 = time.perf_counter()
    sim = fc.Simulator(cube_scene(cells, solver))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sim.step()
    ti.sync()
    first_s = time.perf_counter() - t0
    rec = Recorder(sim.contact_solver)
    linear = getattr(sim.contact_solver, "linear", None)
    cg0, solve_ms = getattr(linear, "total_iterations", 0), []
    sim.stats.clear()
    walls = []
    for k in range(steps):
        if k == steps - 1:
            sim.contact_solver = rec          # e_m of the last step only (a host-side check, not timed)
        t0 = time.perf_counter()
        sim.step()
        ti.sync()
        walls.append(1e3 * (time.perf_counter() - t0) - (rec.ms_check if k == steps - 1 else 0.0))
        extra = getattr(getattr(rec.inner, "last_stats", None), "extra", None) or {}
        solve_ms.append(float(extra.get("ms_linear", 0.0)))          # the Newton path's linear solves
    st = sim.stats
    cg = getattr(linear, "total_iterations", 0) - cg0

    @ti.kernel
    def empty():
        pass

    empty()
    ti.sync()
    launches = []
    for _ in range(200):
        t = time.perf_counter()
        empty()
        ti.sync()
        launches.append(time.perf_counter() - t)
    A = sim.A
    y = fc.backend.vec3_array(A.n)
    bsr_matvec(A.indptr, A.indices, A.blocks, sim.state.v, y, A.n)
    ti.sync()
    reps = 20
    t = time.perf_counter()
    for _ in range(reps):
        bsr_matvec(A.indptr, A.indices, A.blocks, sim.state.v, y, A.n)
    ti.sync()
    matvec_us = 1e6 * (time.perf_counter() - t) / reps
    iters = statistics.mean(s.iterations for s in st)
    ms_solve = statistics.median(s.ms_solve for s in st)
    ms_iter = ms_solve / iters if iters else float("nan")
    em = rec.records[-1]["e_m"] if rec.records else float("nan")
    return {"solver": solver, "precision": cfg["precision"], "arch": cfg["arch"], "runtime": fc.backend.describe(),
            "cells": cells, "dof": sim.model.n_dofs, "contacts": int(statistics.median(s.contacts for s in st)),
            "iterations": iters, "ms_per_iter": ms_iter, "ms_step": statistics.median(walls),
            "ms_detection": statistics.median(s.ms_detection for s in st),
            "ms_assembly": statistics.median(s.ms_assembly for s in st), "ms_solve": ms_solve,
            "e_m": float(em) if em is not None else float("nan"), "matvec_us": matvec_us,
            "iter_per_matvec": 1e3 * ms_iter / matvec_us if matvec_us > 0 else float("nan"),
            "linear": getattr(linear, "name", None) if solver != "cond" else None,
            "cg_per_newton": cg / max(sum(s.iterations for s in st), 1) if cg else None,
            "cg_per_matvec": 1e3 * sum(solve_ms) / cg / matvec_us if cg and matvec_us > 0 else None,
            "launch_us": 1e6 * statistics.median(launches), "build_s": build_s, "first_step_s": first_s,
            "converged": bool(rec.records[-1]["converged"]) if rec.records else None,
            "finite": bool(np.isfinite(sim.state.x.to_numpy()).all()), "status": "ok"}


# ---------------------------------------------------------------- the run (parent)
def _cell(v) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "–"
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
    return "–" if v is None else str(v)


def markdown(rows: list, header: dict) -> str:
    lines = [f"# GPU scaling: COND and Lagged on the soft-cube drop", "",
             f"{header['date_utc']} · {header['device']} · {header['runtime']} · commit {header['commit']} · "
             f"{header['steps']} measured steps per case after one unmeasured step · budget {header['budget_s']} s, "
             f"used {header['wall_s']:.0f} s", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in COLUMNS) + " |" for r in rows]
    lines += ["", "ms columns are medians per step; ms_per_iter = solve ms / iterations; iter_per_matvec = one "
              "iteration's time over one bare block-sparse matvec of the same A (device synchronized); "
              "e_m: SAP eq. 32 momentum error of the last measured step; linear: the Newton step's linear "
              "solver; cg_per_newton: CG iterations per Newton iteration; cg_per_matvec: the Newton linear "
              "solves' ms per CG iteration over that matvec."]
    return "\n".join(lines) + "\n"


def device_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return out or "no NVIDIA GPU"
    except (OSError, subprocess.SubprocessError):
        return "no NVIDIA GPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="report folder (report.json, report.md)")
    ap.add_argument("--arch", default="cuda")
    ap.add_argument("--precisions", nargs="+", default=["f64", "f32"], choices=["f64", "f32"])
    ap.add_argument("--dofs", nargs="+", default=["100k", "300k", "1M"])
    ap.add_argument("--solvers", nargs="+", default=["cond", "lagged"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budget", type=float, default=360.0, help="seconds for all cases together")
    ap.add_argument("--case-cap", type=float, default=100.0, help="seconds at most for one case")
    ap.add_argument("--case", help=argparse.SUPPRESS)        # child: solver:cells:precision:json_path
    args = ap.parse_args()
    if args.case:
        solver, cells, precision, path = args.case.split(":", 3)
        row = run_case(solver, int(cells), args.steps, args.arch, precision)
        Path(path).write_text(json.dumps(row))
        return 0
    if args.out is None:
        ap.error("--out DIR is required")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: list = []
    overran: set = set()
    cases = [(p, s, cells_for(parse_dof(d))) for p in args.precisions for d in args.dofs for s in args.solvers]
    # solver by solver (COND's sizes before Lagged's slow host factorizations), then precision, then size
    cases.sort(key=lambda c: (args.solvers.index(c[1]), args.precisions.index(c[0]), c[2]))
    for precision, solver, cells in cases:
        left = args.budget - (time.perf_counter() - start)
        base = {"solver": solver, "precision": precision, "cells": cells, "dof": 3 * (cells + 1) ** 3}
        if (solver, precision) in overran:
            rows.append({**base, "status": "skipped: a smaller size overran its cap"})
            continue
        if left < 20:
            rows.append({**base, "status": "skipped: budget spent"})
            continue
        cap = min(left, args.case_cap)
        tmp = args.out / f".case_{solver}_{cells}_{precision}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--case", f"{solver}:{cells}:{precision}:{tmp}",
               "--steps", str(args.steps), "--arch", args.arch]
        print(f"bench_gpu: {solver} {precision} {cells} cells ({base['dof']:,} DOF), cap {cap:.0f} s", flush=True)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap)
            if proc.returncode == 0 and tmp.is_file():
                row = json.loads(tmp.read_text())
                tmp.unlink()
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                row = {**base, "status": "failed: " + " / ".join(tail)[:300]}
                overran.add((solver, precision))
        except subprocess.TimeoutExpired:
            row = {**base, "status": f"overran its {cap:.0f} s cap"}
            overran.add((solver, precision))
        row["case_s"] = time.perf_counter() - t0
        print("bench_gpu:   " + "  ".join(f"{c} {_cell(row.get(c))}" for c in COLUMNS[3:]), flush=True)
        rows.append(row)
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    runtime = next((r["runtime"] for r in rows if "runtime" in r), os.environ.get("FEMCONTACT_RUNTIME", "quadrants"))
    header = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": device_name(),
              "runtime": runtime, "commit": commit, "steps": args.steps, "budget_s": args.budget,
              "wall_s": time.perf_counter() - start}
    (args.out / "report.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    (args.out / "report.md").write_text(markdown(rows, header))
    print(markdown(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())

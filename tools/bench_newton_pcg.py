"""The Newton step's PCG in kernels against the direct solves, on the soft-cube drop (issue 31 item 5).
Not a timed test.

    python tools/bench_newton_pcg.py [--dofs 2k 15k] [--precisions f64 f32] [--steps 3] [--arch cpu]
                                     [--variants cholmod schur pcg pcg_cold pcg_1e-6] [--json PATH]
                                     [--md PATH] [--budget SECONDS]

The scene is tools/bench_gpu.py's soft cube (E 1e5, ν 0.4, ρ 1000, implicit Euler, dt 10 ms, μ 0.5,
at rest 0.2 mm above the ground: contacts from step 1), solved by Lagged. Variants (option
``linear_solver`` and the PCG's settings): ``cholmod`` (full H, CHOLMOD per Newton iteration),
``schur`` (the CPU's "auto" for this size: Ã factored once per step, newton_schur), ``pcg`` (kernels,
warm start, rtol 1e-10), ``pcg_cold`` (x₀ = 0), ``pcg_1e-6`` (rtol 1e-6). One process per precision
(fixed when the runtime starts), every variant in it, each on its own simulator: one unmeasured
step (kernel compilation), then ``--steps`` measured steps. ``--budget``: seconds for everything; a
precision's process still running then is killed and the rows it finished are kept (tools/gpu_check.sh).

Per case: Newton iterations per step, e_m (SAP eq. 32, the solver's own), ms per step (wall and
process CPU, medians), the linear solves' ms per step, CG iterations per Newton iteration and the
linear ms per CG iteration (everything of the solve: upload, preconditioner, start, read-back), and,
measured in the same process on the same A and contacts (least of 50, device synchronized): one CG
iteration's three launches (``cg_iter_us``), one bare ``bsr_matvec`` of A and one bare
``newton_matvec_dot`` of H (µs), with the CG iteration's ratio to that H matvec.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

VARIANTS = {"cholmod": ("cholmod", {}), "schur": ("schur", {}), "pcg": ("pcg", {}),
            "pcg_cold": ("pcg", {"warm_start": False}), "pcg_1e-6": ("pcg", {"rtol": 1e-6})}


def run_case(variant: str, cells: int, steps: int) -> dict:
    import numpy as np

    import femcontact as fc
    from bench_gpu import cube_scene

    option, settings = VARIANTS[variant]
    scene = cube_scene(cells, "lagged")
    scene.solver_options = {**scene.solver_options, "linear_solver": option}
    sim = fc.Simulator(scene)
    solver = sim.contact_solver
    for key, value in settings.items():
        setattr(solver.linear, key, value)
    sim.step()
    walls, cpus, its, ems, lin, cg = [], [], [], [], [], []
    for _ in range(steps):
        cg0 = getattr(solver.linear, "total_iterations", 0)
        t0, c0 = time.perf_counter(), time.process_time()
        sim.step()
        walls.append(1e3 * (time.perf_counter() - t0))
        cpus.append(1e3 * (time.process_time() - c0))
        st = solver.last_stats
        its.append(st.iterations)
        ems.append(st.extra["momentum_error"])
        lin.append(st.extra["ms_linear"])
        cg.append(getattr(solver.linear, "total_iterations", 0) - cg0)
    row = {"variant": variant, "dof": sim.model.n_dofs, "contacts": st.extra["contacts"],
           "linear": st.extra["linear_solver"], "newton": statistics.mean(its), "e_m": max(ems),
           "converged": bool(st.converged), "ms_step": statistics.median(walls), "cpu_ms_step": statistics.median(cpus),
           "ms_linear": statistics.median(lin)}
    if option == "pcg":
        n_newton = max(sum(its), 1)
        row["cg_per_newton"] = sum(cg) / n_newton
        row["ms_per_cg"] = sum(lin) / max(sum(cg), 1)
        row.update(_matvecs(sim, solver))
        row["cg_iter_per_matvec"] = row["cg_iter_us"] / row["h_matvec_us"]
    return row


def _matvecs(sim, solver) -> dict:
    """µs of one bare bsr_matvec of A, one newton_matvec_dot of H (the last step's contacts) and one CG
    iteration's three launches (S set running before each, outside the time), least of 50 each."""
    import numpy as np

    import femcontact as fc
    from femcontact.assembly.sparse import bsr_matvec
    from femcontact.solvers.cg_kernels import RR, STOP, THRESHOLD, pcg_direction, pcg_update
    from femcontact.solvers.newton_pcg import newton_matvec_dot

    ti = fc.backend.ti
    A, pcg = sim.A, solver.linear
    y = fc.backend.vec3_array(A.n)
    w, a = pcg._work, pcg._arrays
    running = fc.backend.read(pcg.S)
    running[STOP], running[RR], running[THRESHOLD] = 0.0, 1.0, 0.0

    def h_matvec(p, q):
        newton_matvec_dot(A.indptr, A.indices, A.blocks, pcg._scale, a["nodes"], a["jb"], a["G"], a["u"], pcg._K,
                          pcg._c, p, q, pcg.S, A.n)

    def cg_iteration():
        h_matvec(w["p"], w["q"])
        pcg_update(w["x"], w["r"], w["z"], w["p"], w["q"], w["pinv"], pcg.S, A.n)
        pcg_direction(w["z"], w["p"], pcg.S, A.n)

    def least(call, reset=None) -> float:
        out = []
        for _ in range(51):
            if reset is not None:
                reset()
            ti.sync()
            t = time.perf_counter()
            call()
            ti.sync()
            out.append(1e6 * (time.perf_counter() - t))
        return min(out[1:])

    return {"a_matvec_us": least(lambda: bsr_matvec(A.indptr, A.indices, A.blocks, w["p"], y, A.n)),
            "h_matvec_us": least(lambda: h_matvec(w["p"], y)),
            "cg_iter_us": least(cg_iteration, lambda: fc.backend.write(pcg.S, running.astype(np.asarray(running).dtype)))}


def cells_for(text: str) -> int:
    from bench_gpu import cells_for as nearest, parse_dof
    return nearest(parse_dof(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dofs", nargs="+", default=["2k", "15k"])
    ap.add_argument("--precisions", nargs="+", default=["f64", "f32"], choices=["f64", "f32"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path, help="the table as markdown")
    ap.add_argument("--budget", type=float, help="seconds for all precisions together")
    ap.add_argument("--child", help=argparse.SUPPRESS)       # precision:json_path (one process per precision)
    args = ap.parse_args()
    if args.child:
        import femcontact as fc
        precision, path = args.child.split(":", 1)
        fc.backend.init(args.arch, precision)
        rows = []
        for d in args.dofs:
            for v in args.variants:
                row = {"precision": precision, **run_case(v, cells_for(d), args.steps)}
                print("bench_newton_pcg: " + json.dumps(row), flush=True)
                rows.append(row)
                Path(path).write_text(json.dumps(rows))        # after every row: a killed run keeps its rows
        return 0
    rows, failed, start = [], False, time.perf_counter()
    for precision in args.precisions:
        tmp = Path(f"/tmp/bench_newton_pcg_{precision}_{time.time_ns()}.json")
        cmd = [sys.executable, __file__, "--child", f"{precision}:{tmp}", "--steps", str(args.steps),
               "--arch", args.arch, "--dofs", *args.dofs, "--variants", *args.variants]
        left = None if args.budget is None else args.budget - (time.perf_counter() - start)
        if left is not None and left < 10:
            print(f"bench_newton_pcg: {precision} skipped, budget spent", file=sys.stderr)
            failed = True
            continue
        try:
            proc = subprocess.run(cmd, text=True, capture_output=True, timeout=left)
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
                failed = True
        except subprocess.TimeoutExpired:
            print(f"bench_newton_pcg: {precision} stopped at the budget", file=sys.stderr)
            failed = True
        if tmp.is_file():
            rows += json.loads(tmp.read_text())
            tmp.unlink()
    cols = ("precision", "dof", "contacts", "variant", "newton", "e_m", "ms_step", "cpu_ms_step", "ms_linear",
            "cg_per_newton", "ms_per_cg", "cg_iter_us", "a_matvec_us", "h_matvec_us", "cg_iter_per_matvec")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r.get(c) for c in cols]
        lines.append("| " + " | ".join("–" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)
                                       for v in cells) + " |")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

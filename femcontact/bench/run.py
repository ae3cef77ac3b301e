"""``femcontact bench``: the COND paper's tables (and the SAP clutter and soft-cube drop) measured
with our solvers, printed and written as Markdown, CSV and PNG with the papers' numbers beside ours.

Tables (``--table``): ``table1`` (COND Table I: mat, cable, gripper + soft ball, soft gripper;
DOF, constraints, max contacts, dynamics/detection/solver ms, iterations, e_m per solver),
``table2`` (COND Table II: COND's iterations under each acceleration), ``fig11`` (COND Fig. 11:
solver ms against DOF on the mat, log–log slope per solver, speed-up over NCP-PGS), ``clutter``
(SAP §VI-C: 40 rigid bodies in a box), ``cube_drop`` (the peers' soft cube, 100 steps from the
drop), ``pgs_convergence`` (COND §V-D, Fig. 9b: residual against sweeps/iterations, PGS against
COND, on the symmetric grip of ``scenes/symmetric_grip.py``, its one-pad control and the jointed
gripper; histories as CSV and JSON), ``accuracy`` (Table I at a stated accuracy: COND's iterations and ms
to e_m ≤ 1e-3 and ≤ 1e-6 under Anderson and the paper's Chebyshev schedule, beside the paper's own rule,
its Chebyshev with the absolute step norm below a threshold, and the paper's numbers). ``--quick`` runs
small sizes and few steps (CI); ``--rows`` picks Table I rows (``mat_drag/12``). Every measurement of a
run is made once (a row Table I and Fig. 11 share is reused). docs/BENCHMARKS.md explains the columns.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..errors import FemcontactError
from . import cases as C
from .report import (fit_slope, format_table, machine_record, plot_convergence, plot_scaling, write_csv,
                     write_json, write_table)

TABLES = ("table1", "table2", "fig11", "clutter", "cube_drop", "pgs_convergence", "accuracy")
QUICK_TABLES = ("table1", "table2", "fig11", "pgs_convergence")
SOLVERS = ("cond", "pgs", "lagged", "incp", "sap", "similar")
DEFAULT_SOLVERS = {"table1": ("cond", "pgs", "lagged", "sap", "incp"), "fig11": ("cond", "pgs", "lagged"),
                   "clutter": ("cond", "sap", "lagged", "pgs"), "cube_drop": ("cond", "sap", "lagged", "pgs")}
QUICK_SETTLE = 0.25          # s: the mat is on the floor and the clamp lifting
QUICK_SOLVERS = ("cond", "pgs")
GRIP_OPTIONS = {"max_iter": 500, "warm_start": False}     # the paper's PGS cap; both start from zero
ROW_COLUMNS = ("scene", "size", "solver", "dof", "constraints", "max_contacts", "dynamics_ms", "detection_ms",
               "solver_ms", "iterations", "ms_per_iteration", "converged", "e_m")
# accuracy: COND stop rules, (label, COND options). The e_m stops start θ loose (LOOSE_THETA) and let the
# e_m checks tighten it (docs/COND.md, "Residual and stopping"); the paper's rule is Alg. 3 with the
# absolute ‖v̂ˡ⁺¹ − v̂ˡ‖ < PAPER_THETA (m/s; the paper: 1e-6 … 1e-3 "according to the scenario"; 1e-4
# reproduces its count on the mat) and no e_m stop
LOOSE_THETA, PAPER_THETA = 1e-2, 1e-4
PAPER_CHEBYSHEV = {"chebyshev_schedule": "paper"}
ACCURACY_RULES = (
    ("default (θ < 1e-7, e_m ≤ 1e-4)", {}),
    ("anderson, e_m ≤ 1e-3", {"momentum_tol": 1e-3, "tol": LOOSE_THETA}),
    ("anderson, e_m ≤ 1e-6", {"momentum_tol": 1e-6, "tol": LOOSE_THETA}),
    ("adaptive chebyshev, e_m ≤ 1e-3", {"acceleration": "chebyshev", "momentum_tol": 1e-3, "tol": LOOSE_THETA}),
    ("adaptive chebyshev, e_m ≤ 1e-6", {"acceleration": "chebyshev", "momentum_tol": 1e-6, "tol": LOOSE_THETA}),
    ("paper chebyshev, e_m ≤ 1e-3", {**PAPER_CHEBYSHEV, "momentum_tol": 1e-3, "tol": LOOSE_THETA}),
    ("paper chebyshev, e_m ≤ 1e-6", {**PAPER_CHEBYSHEV, "momentum_tol": 1e-6, "tol": LOOSE_THETA}),
    (f"paper's rule: paper chebyshev, abs θ < {PAPER_THETA:g}",
     {**PAPER_CHEBYSHEV, "theta": "absolute", "tol": PAPER_THETA, "momentum_tol": None}),
)


@dataclass
class Plan:
    """What one ``femcontact bench`` run measures (from the command line, ``plan``)."""

    tables: Sequence[str]
    solvers: Optional[Sequence[str]]
    quick: bool
    steps: int
    out: Path
    small: bool = False
    scenes: Optional[Sequence[str]] = None
    rows: Optional[Sequence[str]] = None
    fig11_sizes: Optional[Sequence[int]] = None
    plots: bool = True
    progress: bool = True
    cache: dict = field(default_factory=dict)

    def solvers_for(self, table: str) -> list:
        if self.solvers:
            return list(self.solvers)
        return list(QUICK_SOLVERS if self.quick else DEFAULT_SOLVERS[table])


# ----------------------------------------------------------------------------- the cases per table
TABLE1_SCENES = ("mat_drag", "cable_winding", "gripper_ball", "soft_gripper")


def scenarios(p: Plan) -> list:
    """The Table I / II scenarios of the plan (``--scenes``, default all four)."""
    return [n for n in TABLE1_SCENES if not p.scenes or n in p.scenes]


def table1_cases(p: Plan) -> list:
    if p.quick:
        return [C.case("mat_drag", 6, settle=QUICK_SETTLE)]
    cases = [C.case(n, s) for n in scenarios(p) for s in C.PRESETS[n][1][:1 if p.small and not p.rows else None]]
    return [c for c in cases if not p.rows or c.label in p.rows]


def table1_row_labels() -> list:
    """Every Table I row as ``scene/size`` (what ``--rows`` takes)."""
    return [f"{n}/{s}" for n in TABLE1_SCENES for s in C.PRESETS[n][1]]


def table2_cases(p: Plan) -> list:
    if p.quick:
        return [C.case("mat_drag", 6, settle=QUICK_SETTLE)]
    return [C.case(n, C.PRESETS[n][1][0]) for n in scenarios(p)]


def fig11_sizes(p: Plan) -> list:
    if p.fig11_sizes:
        return list(p.fig11_sizes)
    return [4, 6] if p.quick else [12, 26, 48]


def mat_case(p: Plan, n: int) -> C.Case:
    return C.case("mat_drag", n, settle=QUICK_SETTLE if p.quick else None)


def clutter_case(p: Plan) -> C.Case:
    return C.case("clutter", 2 if p.quick else 10, settle=0.3 if p.quick else 1.0)


def cube_cases(p: Plan) -> list:
    sizes = C.PRESETS["cube_drop"][1][:1 if p.small else None]
    return [C.case("cube_drop", 4)] if p.quick else [C.case("cube_drop", n) for n in sizes]


def grip_cases(p: Plan) -> list:
    """pgs_convergence's cases: the symmetric grip (two pads), its one-pad control and the ball held
    by the jointed rigid gripper (Table I's); --quick: the symmetric grip at resolution 4 only."""
    if p.quick:
        return [C.case("symmetric_grip", 4, settle=0.25)]
    return [C.case("symmetric_grip", 6), C.case("one_pad", 6), C.case("gripper_ball", 7)]


def jobs(p: Plan) -> list:
    """Every measurement (case, solver, options, steps, history) the plan's tables need, once each."""
    from ..solvers.cond.options import ACCELERATIONS

    out = []
    for t in p.tables:
        if t == "table1":
            out += [(c, s, {}, p.steps, False) for c in table1_cases(p) for s in p.solvers_for(t)]
        elif t == "table2":
            out += [(c, "cond", {"acceleration": a}, p.steps, False) for c in table2_cases(p) for a in ACCELERATIONS]
        elif t == "fig11":
            out += [(mat_case(p, n), s, {}, p.steps, False) for n in fig11_sizes(p) for s in p.solvers_for(t)]
        elif t == "clutter":
            out += [(clutter_case(p), s, {}, p.steps, False) for s in p.solvers_for(t)]
        elif t == "cube_drop":
            out += [(c, s, {}, 10 if p.quick else 100, False) for c in cube_cases(p) for s in p.solvers_for(t)]
        elif t == "pgs_convergence":
            out += [(c, s, GRIP_OPTIONS, 1, True) for c in grip_cases(p) for s in ("pgs", "cond")]
        elif t == "accuracy":
            out += [(c, "cond", o, p.steps, False) for c in table1_cases(p) for _, o in ACCURACY_RULES]
    seen, unique = set(), []
    for j in out:
        k = _key(*j)
        if k not in seen:
            seen.add(k)
            unique.append(j)
    return unique


def _key(case, solver, options, steps, history) -> tuple:
    return (case.scene, case.size, case.settle, solver, tuple(sorted(options.items())), steps, history)


# ----------------------------------------------------------------------------- measuring
def run_jobs(p: Plan) -> None:
    """Measure every job not measured yet, settling each case once, with a progress bar on stderr."""
    import tempfile

    from tqdm import tqdm

    from .measure import Settled, measure, solver_options     # the simulator's kernels: once options are read

    todo = [j for j in jobs(p) if _key(*j) not in p.cache]
    bar = tqdm(total=len(todo), unit="run", file=sys.stderr, disable=not p.progress, dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}] {postfix}")
    groups: dict = {}
    for j in todo:                                    # one settle per case: its solvers in a row
        groups.setdefault((j[0].scene, j[0].size, j[0].settle), []).append(j)
    with tempfile.TemporaryDirectory(prefix="femcontact_bench_") as tmp:
        for group in groups.values():
            case = group[0][0]
            bar.set_postfix_str(f"{case.label}: settling {case.settle:g} s", refresh=True)
            t0 = time.perf_counter()
            try:
                settled = Settled(case, Path(tmp))
            except FemcontactError as exc:
                settled, error = None, f"settling failed: {exc}"
            settle_s = time.perf_counter() - t0
            for _, solver, options, steps, history in group:
                bar.set_postfix_str(f"{case.label} {solver}" + "".join(f" {v}" for v in options.values()),
                                    refresh=True)
                t0 = time.perf_counter()
                try:
                    if settled is None:
                        raise FemcontactError(error)
                    row = measure(settled, solver, steps, solver_options(solver, **options), history=history)
                except FemcontactError as exc:
                    row = {"scene": case.scene, "size": case.size, "solver": solver, "error": str(exc)}
                row["wall_s"], row["settle_wall_s"] = time.perf_counter() - t0, settle_s
                p.cache[_key(case, solver, options, steps, history)] = row
                with open(p.out / "rows.jsonl", "a") as f:     # each row as soon as it is measured
                    f.write(json.dumps({**{k: v for k, v in row.items() if k != "histories"},
                                        "options": options}) + "\n")
                bar.update(1)
            settled = None
    bar.close()


def _row(p: Plan, case, solver, options=None, steps=None, history=False) -> dict:
    return dict(p.cache[_key(case, solver, options or {}, p.steps if steps is None else steps, history)])


# ----------------------------------------------------------------------------- the tables
def table1(p: Plan, machine: dict) -> str:
    rows = []
    for c in table1_cases(p):
        for s in p.solvers_for("table1"):
            r = _row(p, c, s)
            paper = c.paper.get(s) if c.paper else None
            if c.paper:
                r.update(paper_dof=c.paper["dof"], paper_max_contacts=c.paper["contacts"])
            if paper:
                r.update(paper_dynamics_ms=paper[0], paper_solver_ms=paper[1], paper_iterations=paper[2])
            rows.append(r)
    cols = ROW_COLUMNS + ("paper_dof", "paper_max_contacts", "paper_dynamics_ms", "paper_solver_ms",
                          "paper_iterations")
    notes = ("COND paper Table I with our numbers. Every solver starts from the same state (the case "
             "settled once under Lagged), one warm-up step, then the mean per step. constraints = 3 x max "
             "contacts (contact rows); the paper's 'Constraint num.' (5355 for the 1081-DOF mat) counts "
             "more than that and is not defined in its text, so it is not compared. e_m: SAP eq. 32 "
             "momentum error of the solutions (median).")
    return _emit(p, "table1", "COND Table I: solver cost per step", rows, cols, notes, machine)


def table2(p: Plan, machine: dict) -> str:
    from ..solvers.cond.options import ACCELERATIONS

    rows = []
    for c in table2_cases(p):
        paper = C.PAPER_TABLE2.get(c.scene)
        for a in ACCELERATIONS:
            r = _row(p, c, "cond", {"acceleration": a})
            r["acceleration"] = a
            if paper and a in ("none", "chebyshev"):
                r["paper_dof"], r["paper_iterations"] = paper[0], paper[1 if a == "none" else 2]
            rows.append(r)
    cols = ("scene", "size", "dof", "acceleration", "iterations", "solver_ms", "ms_per_iteration", "converged",
            "e_m", "paper_dof", "paper_iterations")
    notes = ("COND paper Table II: average COND iterations per step without acceleration ('none'), with "
             "Chebyshev (Alg. 3) and with Anderson AA(m), each at its default stop threshold "
             "(solvers/cond/options.py DEFAULT_TOL: thresholds chosen to give about the same e_m); compare "
             "iterations only between rows with about the same e_m.")
    return _emit(p, "table2", "COND Table II: iterations per acceleration", rows, cols, notes, machine)


def fig11(p: Plan, machine: dict) -> str:
    rows, series = [], {}
    for n in fig11_sizes(p):
        for s in p.solvers_for("fig11"):
            r = _row(p, mat_case(p, n), s)
            rows.append(r)
            if "solver_ms" in r:
                d, m = series.setdefault(s, ([], []))
                d.append(r["dof"])
                m.append(r["solver_ms"])
    pgs = {r["dof"]: r["solver_ms"] for r in rows if r["solver"] == "pgs" and "solver_ms" in r}
    for r in rows:
        if r.get("dof") in pgs and "solver_ms" in r:
            r["speedup_over_pgs"] = pgs[r["dof"]] / r["solver_ms"]
    paper = {s: ([C.PAPER_TABLE1[("mat_drag", i)]["dof"] for i in (0, 1)],
                 [C.PAPER_TABLE1[("mat_drag", i)][s][1] for i in (0, 1)]) for s in ("cond", "pgs")}
    slopes = []
    for s, (d, m) in sorted(series.items()):
        if len(set(d)) >= 2:
            slopes.append({"solver": s, "slope": fit_slope(d, m)[0], "dof_min": min(d), "dof_max": max(d)})
    for s, (d, m) in paper.items():
        slopes.append({"solver": f"{s} (paper, Table I mat points)", "slope": fit_slope(d, m)[0],
                       "dof_min": min(d), "dof_max": max(d)})
    text = _emit(p, "fig11", "COND Fig. 11: solver time against DOF on the mat", rows,
                 ("scene", "size", "solver", "dof", "max_contacts", "solver_ms", "iterations", "ms_per_iteration",
                  "converged", "e_m", "speedup_over_pgs"),
                 "Solver ms per step against DOF on the dragged mat; slope: least-squares fit of log ms "
                 "against log DOF (fig11_slopes.csv). The paper's Fig. 11 is a picture without numbers; its "
                 "two mat points of Table I (1081 and 4438 DOF) give the paper's slopes.", machine)
    text += "\n\n" + _emit(p, "fig11_slopes", "Fig. 11 log-log slopes", slopes,
                           ("solver", "slope", "dof_min", "dof_max"), "ms ~ c DOF^slope.", machine)
    if p.plots and series:
        plot_scaling(p.out / "fig11.png", series, paper)
    return text


def clutter(p: Plan, machine: dict) -> str:
    c = clutter_case(p)
    rows = [_row(p, c, s) for s in p.solvers_for("clutter")]
    notes = (f"SAP paper §VI-C clutter (walls, {4 * c.size} rigid bodies, dt 10 ms), measured after {c.settle:g} s. "
             f"The paper gives its numbers in words: about {C.PAPER_CLUTTER['steady_iterations']} SAP iterations "
             f"per step once warm-started at steady state, {C.PAPER_CLUTTER['transient_iterations_step60']} at "
             f"step 60 of the transient, e_m below {C.PAPER_CLUTTER['e_m_below']:g}.")
    return _emit(p, "clutter", "SAP clutter", rows, ROW_COLUMNS, notes, machine)


def cube_drop(p: Plan, machine: dict) -> str:
    steps = 10 if p.quick else 100
    rows = []
    for c in cube_cases(p):
        for s in p.solvers_for("cube_drop"):
            r = _row(p, c, s, steps=steps)
            if "solver_ms" in r:
                r["total_s"] = 1e-3 * steps * (r["solver_ms"] + r["dynamics_ms"] + r["detection_ms"])
            rows.append(r)
    notes = (f"The peers' soft cube: 0.1 m, E 1e5, nu 0.4, rho 1000, dropped 5 cm, dt 10 ms, implicit Euler, "
             f"{steps} steps from the drop (the first step unmeasured), each solver on its own trajectory. "
             "total_s: dynamics + detection + solver over the steps.")
    return _emit(p, "cube_drop", "Soft-cube drop", rows, ROW_COLUMNS + ("total_s",), notes, machine)


GRIP_LEVEL = 1e-4           # pgs_convergence: iterations to bring the residual below this


def convergence_figures(h) -> dict:
    """Residual history -> its first and 10th residuals, the last, the iterations to ``GRIP_LEVEL``
    (None: not reached) and the mean rate per iteration from the 10th to the last (linear
    convergence: residual_k ~ rate^k)."""
    h = [float(x) for x in h]
    below = next((k + 1 for k, x in enumerate(h) if 0 <= x < GRIP_LEVEL), None)
    rate = None
    if len(h) > 10 and h[9] > 0 and h[-1] > 0:
        rate = (h[-1] / h[9]) ** (1.0 / (len(h) - 10))
    return {"residual_first": h[0] if h else None, "residual_10": h[9] if len(h) > 9 else None,
            "residual_last": h[-1] if h else None, "iterations_to_1e-4": below, "rate_per_iteration": rate}


GRIP_TITLES = {"symmetric_grip": "symmetric grip (two pads)", "one_pad": "one pad (control, same force)",
               "gripper_ball": "rigid gripper + ball (jointed fingers)"}


def pgs_convergence(p: Plan, machine: dict) -> str:
    rows, panels, hist_rows = [], {}, []
    json_out: dict = {"cases": {}}
    for c in grip_cases(p):
        hist = {}
        for s in ("pgs", "cond"):
            r = _row(p, c, s, GRIP_OPTIONS, steps=1, history=True)
            h = r.pop("histories", [[]])[0]
            hist[s] = h
            r.update(convergence_figures(h))
            rows.append(r)
            hist_rows += [{"scene": c.scene, "size": c.size, "solver": s, "iteration": k + 1, "residual": x}
                          for k, x in enumerate(h)]
        json_out["cases"][c.label] = hist
        if len(json_out) == 1:                          # the first case (the symmetric grip) at the top level
            json_out.update(hist)
        dof = next((r["dof"] for r in rows if r.get("scene") == c.scene and "dof" in r), "?")
        panels[f"{GRIP_TITLES.get(c.scene, c.scene)}, {dof} DOF"] = {
            "NCP-PGS" if k == "pgs" else "COND": v for k, v in hist.items()}
    text = _emit(p, "pgs_convergence", "COND §V-D: convergence on the symmetric grip", rows,
                 ("scene", "size", "solver", "dof", "max_contacts", "iterations", "converged",
                  "iterations_to_1e-4", "rate_per_iteration", "residual_first", "residual_10", "residual_last",
                  "e_m", "solver_ms"),
                 "One step per case, both solvers started cold (no warm start) from the same settled state, at "
                 "most 500 iterations (the paper's PGS cap). symmetric_grip: the soft ball (E 1 MPa) squeezed "
                 "between two pads (scenes/symmetric_grip.py); one_pad: the same ball pressed on one pad by a "
                 "body force of about the same pad force (the control: same contact patch, nothing opposite); "
                 "gripper_ball: Table I's jointed rigid gripper. Residual: each solver's own stop measure "
                 "(PGS: relative impulse change of a sweep; COND: relative velocity step theta), so compare "
                 "iterations, rates, and e_m for the accuracy reached. rate_per_iteration: (residual_last / "
                 "residual_10)^(1/(iterations - 10)).", machine)
    write_json(p.out / "pgs_convergence_history.json", json_out)
    write_csv(p.out / "pgs_convergence_history.csv", hist_rows, ("scene", "size", "solver", "iteration", "residual"))
    if p.plots:
        plot_convergence(p.out / "pgs_convergence.png", panels, "residual against iterations, one cold step")
    return text


def accuracy(p: Plan, machine: dict) -> str:
    rows = []
    for c in table1_cases(p):
        paper = c.paper.get("cond") if c.paper else None
        for label, o in ACCURACY_RULES:
            r = _row(p, c, "cond", o)
            r["rule"] = label
            if paper:
                r.update(paper_dof=c.paper["dof"], paper_solver_ms=paper[1], paper_iterations=paper[2])
            rows.append(r)
    cols = ("scene", "size", "dof", "rule", "iterations", "solver_ms", "ms_per_iteration", "converged", "e_m",
            "e_m_max", "paper_dof", "paper_iterations", "paper_solver_ms")
    notes = ("COND paper Table I at a stated accuracy: COND's iterations and solver ms per step when it stops on "
             "SAP eq. 32's momentum error e_m (momentum_tol; θ the inner criterion, started at "
             f"{LOOSE_THETA:g} and tightened by the e_m checks, whose host-side cost is in solver_ms) under "
             "Anderson AA(8), our adaptive Chebyshev schedule and the paper's (Alg. 3, ϱ from eq. 34 every "
             "iteration), "
             "beside COND's default stop and the paper's own rule (its Chebyshev, absolute step norm "
             f"‖v̂ˡ⁺¹ − v̂ˡ‖ < {PAPER_THETA:g} m/s, no e_m stop) and the paper's Table I numbers (whose stop is "
             "that rule at a threshold 'adjusted between 1e-6 and 1e-3 according to the scenario'). "
             "converged < 1: steps that ended at max_iter (500) above the tolerance. e_m: median, e_m_max: "
             "largest over the measured steps.")
    return _emit(p, "accuracy", "COND Table I at a stated accuracy", rows, cols, notes, machine)


BUILDERS: dict[str, Callable[[Plan, dict], str]] = {
    "table1": table1, "table2": table2, "fig11": fig11, "clutter": clutter, "cube_drop": cube_drop,
    "pgs_convergence": pgs_convergence, "accuracy": accuracy}


def _emit(p: Plan, name: str, title: str, rows, cols, notes: str, machine: dict) -> str:
    errors = [r for r in rows if "error" in r]
    text = f"== {title} ==\n{format_table(rows, cols)}"
    if errors:
        text += "\n" + "\n".join(f"  {r['scene']}/{r['size']} {r['solver']}: {r['error']}" for r in errors)
    write_table(p.out, name, title, rows, cols, notes, machine)
    return text


# ----------------------------------------------------------------------------- entry points
def run(p: Plan, cfg: dict) -> dict:
    """Measure the plan's tables and write ``out/machine.json``, ``out/<table>.md|csv`` and the plots;
    print each table. Returns {table: rows as written}."""
    p.out.mkdir(parents=True, exist_ok=True)
    machine = machine_record(cfg)
    write_json(p.out / "machine.json", machine)
    run_jobs(p)
    for t in p.tables:
        print(BUILDERS[t](p, machine), flush=True)
    print(f"femcontact bench: results in {p.out}", flush=True)
    return p.cache


def cmd_bench(args: argparse.Namespace) -> int:
    from .. import backend
    from ..io.vtk import check_output_dir

    for name in args.solvers or ():
        if name not in SOLVERS:
            raise FemcontactError(f"--solvers: unknown solver {name!r}; choose from {', '.join(SOLVERS)}")
    for name in args.scenes or ():
        if name not in TABLE1_SCENES:
            raise FemcontactError(f"--scenes: unknown scenario {name!r}; choose from {', '.join(TABLE1_SCENES)}")
    labels = table1_row_labels()
    for name in args.rows or ():
        if name not in labels:
            raise FemcontactError(f"--rows: unknown Table I row {name!r}; choose from {', '.join(labels)}")
    if args.steps is not None and args.steps < 1:
        raise FemcontactError(f"--steps must be at least 1, got {args.steps}")
    tables = args.table or (QUICK_TABLES if args.quick else TABLES)
    out = check_output_dir(Path(args.out), what="--out")
    cfg = backend.init(args.arch, args.precision)
    plan = Plan(tables=tables, solvers=args.solvers, quick=args.quick,
                steps=args.steps or (2 if args.quick else 20), out=out, small=args.small, scenes=args.scenes, rows=args.rows,
                fig11_sizes=args.fig11_sizes, plots=not args.no_plots, progress=not args.no_progress)
    print(f"femcontact bench: {', '.join(tables)} on {cfg['arch']} ({cfg['precision']}), "
          f"{plan.steps} measured steps per row{' (quick)' if args.quick else ''}", flush=True)
    run(plan, cfg)
    return 0


def add_bench_command(sub) -> None:
    """The ``bench`` subcommand of ``femcontact``."""
    b = sub.add_parser("bench", help="benchmark the solvers on the COND paper's tables",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--table", nargs="+", choices=TABLES, default=None, metavar="TABLE",
                   help=f"tables to run, of {' '.join(TABLES)} (default: all; with --quick: "
                        f"{' '.join(QUICK_TABLES)})")
    b.add_argument("--solvers", nargs="+", default=None, metavar="SOLVER",
                   help="solvers compared in table1, fig11, clutter and cube_drop (default per table: "
                        + "; ".join(f"{k} {' '.join(v)}" for k, v in DEFAULT_SOLVERS.items()) + ")")
    b.add_argument("--quick", action="store_true", help="small sizes and few steps (CI: under a minute)")
    b.add_argument("--small", action="store_true", help="table1 and cube_drop: only the smaller size")
    b.add_argument("--scenes", nargs="+", default=None, metavar="SCENARIO",
                   help=f"table1/table2 scenarios, of {' '.join(TABLE1_SCENES)} (default: all)")
    b.add_argument("--rows", nargs="+", default=None, metavar="SCENE/SIZE",
                   help="table1 and accuracy: only these Table I rows, e.g. mat_drag/12 cable_winding/160 "
                        "(default: all, or the smaller ones with --small)")
    b.add_argument("--fig11-sizes", type=int, nargs="+", default=None, metavar="N",
                   help="mat cells along its long side for fig11 (default 12 26 48: 1k, 4.4k, 15k DOF; "
                        "98 and 126 give 59k and 97k)")
    b.add_argument("--steps", type=int, default=None, metavar="N",
                   help="measured steps per row (default 20, quick 2; cube_drop always runs 100, quick 10)")
    b.add_argument("--out", default="out/bench", help="folder for the .md, .csv, .png and machine.json files")
    b.add_argument("--arch", default="cpu", choices=["auto", "cpu", "cuda", "vulkan", "metal"], help="Taichi backend")
    b.add_argument("--precision", default="f64", choices=["f64", "f32"], help="floating-point precision")
    b.add_argument("--no-plots", action="store_true", help="skip the PNG plots (no matplotlib needed)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_bench)

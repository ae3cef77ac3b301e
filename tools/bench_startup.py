"""Start-up benchmark (issue 28): command -> first step of ``femcontact run SCENE --steps 1``, cold (a fresh,
empty kernel cache) and warm (a second run on the same cache), per scene and runtime.

Reports the "first step done N s after start" line (counted from process start; in trees before issue 28
from the start of ``cmd_run``, which leaves out the interpreter and imports) and the process's wall time;
``--repeat N`` warm runs per row, medians (``--stat min``: minima). ``--compare-ref REF`` runs the same table for an older commit checked out as a git worktree (e.g.
b495b98, Taichi as shipped before the runtime work; it too gets a fresh FEMCONTACT_CACHE_DIR per row). Targets: warm <= 3 s, cold <= 20 s on the default
runtime. ``--interleave-ref REF`` times REF cold and warm too, interleaved with this tree scene by scene.
Writes CSV and Markdown to --out. A benchmark, not a test: numbers depend on the machine's load.

    python tools/bench_startup.py --scenes cube_drop clutter --runtimes quadrants taichi --out out/startup
"""
from __future__ import annotations

import argparse
import csv
import importlib.metadata
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_STEP = re.compile(r"first step done ([0-9.]+) s after start")
NEEDS_ROBOT = "panda_"      # these scenes load the Panda from example-robot-data
KEEP_BYTECODE_SETTING = False   # --env-bytecode: keep the caller's PYTHONDONTWRITEBYTECODE
WARM_TARGET, COLD_TARGET = 3.0, 20.0


def run_once(tree: Path, scene: str, runtime: str, cache: Path, out: Path) -> tuple[float | None, float, str, float]:
    """One ``femcontact run`` of ``tree``'s femcontact: (first step s after start, process wall s, error,
    process CPU s: user + system of the whole run, which other jobs' load inflates far less than wall time)."""
    env = dict(os.environ, PYTHONPATH=str(tree), FEMCONTACT_CACHE_DIR=str(cache), FEMCONTACT_RUNTIME=runtime,
               FEMCONTACT_ARCH=os.environ.get("FEMCONTACT_ARCH", "cpu"))
    if not KEEP_BYTECODE_SETTING:
        # as an installed package runs: Python caches the compiled modules (the cold run writes them)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "femcontact", "run", str(tree / "scenes" / f"{scene}.py"),
                           "--steps", "1", "--no-progress", "--out", str(out)], capture_output=True, text=True,
                          env=env, cwd=tree, timeout=1800)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    m = FIRST_STEP.search(proc.stdout)
    error = "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1][:120]
    return (float(m.group(1)) if m else None), wall, error, cpu


def _have_robot_data() -> bool:
    """example-robot-data (a data-only distribution: no importable module) is installed."""
    try:
        importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


STAT = statistics.median     # --stat min: the minimum of the warm runs (robust on a loaded machine)


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return STAT(values) if values else None


def measure(tree: Path, label: str, scenes: list[str], runtimes: list[str], warm_only: bool,
            repeat: int = 1, cold_repeat: int = 1) -> list[dict]:
    """``cold_repeat`` cold runs (each on a fresh, empty cache) and ``repeat`` warm runs (on the last cold
    run's cache) per scene and runtime of ``tree``; medians reported (``--stat min``: minima)."""
    rows = []
    for runtime in runtimes:
        for scene in scenes:
            load0 = os.getloadavg()[0]
            with tempfile.TemporaryDirectory(prefix="fc_startup_") as tmp:
                colds = [run_once(tree, scene, runtime, Path(tmp) / f"cache{k}", Path(tmp) / f"c{k}")
                         for k in range(cold_repeat)]
                cache = Path(tmp) / f"cache{cold_repeat - 1}"
                warm = [run_once(tree, scene, runtime, cache, Path(tmp) / f"o{k + 1}") for k in range(repeat)]
            cold = (_median([c[0] for c in colds]), _median([c[1] for c in colds]),
                    next((c[2] for c in colds if c[2]), ""), _median([c[3] for c in colds]))
            row = {"tree": label, "scene": scene, "runtime": runtime,
                   "cold_first_step_s": None if warm_only else cold[0], "cold_wall_s": None if warm_only else cold[1],
                   "warm_first_step_s": _median([w[0] for w in warm]), "warm_wall_s": _median([w[1] for w in warm]),
                   "cold_cpu_s": None if warm_only else cold[3], "warm_cpu_s": _median([w[3] for w in warm]),
                   "load": _load(load0), "error": cold[2] or next((w[2] for w in warm if w[2]), "")}
            rows.append(row)
            print(_fmt(row), flush=True)
    return rows


def _load(load0: float) -> str:
    """The machine's 1-minute load average at the row's start and end ("a-b"): the runs' wall times
    mean something only beside it (the CPU columns far less inflated)."""
    return f"{load0:.1f}-{os.getloadavg()[0]:.1f}"


def measure_interleaved(trees: list[tuple[Path, str]], scenes: list[str], runtimes: list[str],
                        repeat: int = 1) -> list[dict]:
    """``measure`` for several trees at once, interleaved per scene (each tree's cold run, then warm round
    k of every tree in turn), so that a machine whose load drifts loads every tree alike."""
    rows = []
    for runtime in runtimes:
        for scene in scenes:
            load0 = os.getloadavg()[0]
            with tempfile.TemporaryDirectory(prefix="fc_startup_") as tmp:
                caches = [Path(tmp) / f"cache{t}" for t in range(len(trees))]
                colds = [run_once(tree, scene, runtime, caches[t], Path(tmp) / f"o{t}-0")
                         for t, (tree, _) in enumerate(trees)]
                warms = [[] for _ in trees]
                for k in range(repeat):
                    for t, (tree, _) in enumerate(trees):
                        warms[t].append(run_once(tree, scene, runtime, caches[t], Path(tmp) / f"o{t}-{k + 1}"))
            for (tree, label), cold, warm in zip(trees, colds, warms):
                row = {"tree": label, "scene": scene, "runtime": runtime,
                       "cold_first_step_s": cold[0], "cold_wall_s": cold[1],
                       "warm_first_step_s": _median([w[0] for w in warm]),
                       "warm_wall_s": _median([w[1] for w in warm]),
                       "cold_cpu_s": cold[3], "warm_cpu_s": _median([w[3] for w in warm]),
                       "load": _load(load0), "error": cold[2] or next((w[2] for w in warm if w[2]), "")}
                rows.append(row)
                print(_fmt(row), flush=True)
    return rows


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _fmt(row: dict) -> str:
    miss = []
    if row["tree"] == "this" and row["runtime"] == "quadrants":
        if row["warm_first_step_s"] is not None and row["warm_first_step_s"] > WARM_TARGET:
            miss.append("warm")
        if row["cold_first_step_s"] is not None and row["cold_first_step_s"] > COLD_TARGET:
            miss.append("cold")
    return (f"| {row['tree']} | {row['scene']} | {row['runtime']} | {_num(row['cold_first_step_s'])} | "
            f"{_num(row['cold_wall_s'])} | {_num(row['warm_first_step_s'])} | {_num(row['warm_wall_s'])} | "
            f"{_num(row['cold_cpu_s'])} | {_num(row['warm_cpu_s'])} | "
            f"{', '.join(miss) or ''} | {row.get('load', '')} | {row['error']} |")


HEADER = ("| tree | scene | runtime | cold: first step (s) | cold: wall (s) | warm: first step (s) | "
          "warm: wall (s) | cold: CPU (s) | warm: CPU (s) | misses target | load (1-min, start-end) | error |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def worktree(ref: str, where: Path) -> Path:
    """A detached git worktree of ``ref`` under ``where`` (removed by the caller)."""
    path = where / f"ref-{ref}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True,
                   capture_output=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", nargs="*", default=None, help="scene names in scenes/ (default: all)")
    ap.add_argument("--runtimes", nargs="*", default=["quadrants", "taichi"])
    ap.add_argument("--compare-ref", default=None, metavar="REF", help="also time this git ref (warm runs)")
    ap.add_argument("--ref-runtimes", nargs="*", default=["taichi"], help="runtimes for --compare-ref")
    ap.add_argument("--interleave-ref", default=None, metavar="REF",
                    help="time this git ref too, cold and warm on --runtimes, interleaved with this tree scene by "
                         "scene (before/after on a machine whose load drifts)")
    ap.add_argument("--repeat", type=int, default=1, help="warm runs per scene (medians reported)")
    ap.add_argument("--cold-repeat", type=int, default=1,
                    help="cold runs per scene, each on a fresh empty cache (medians, or minima with --stat min)")
    ap.add_argument("--stat", choices=("median", "min"), default="median", help="of the warm (and cold) runs")
    ap.add_argument("--out", default="out/startup", help="folder for startup.csv and startup.md")
    ap.add_argument("--env-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE from the environment (default: drop it, so that the warm "
                         "runs load femcontact's modules from the bytecode cache the cold run wrote, as installed "
                         "packages do)")
    args = ap.parse_args(argv)
    scenes = args.scenes or sorted(p.stem for p in (ROOT / "scenes").glob("*.py"))
    notes = []
    global KEEP_BYTECODE_SETTING, STAT
    KEEP_BYTECODE_SETTING = args.env_bytecode
    STAT = min if args.stat == "min" else statistics.median
    if any(s.startswith(NEEDS_ROBOT) for s in scenes) and not _have_robot_data():
        skipped = [s for s in scenes if s.startswith(NEEDS_ROBOT)]
        scenes = [s for s in scenes if not s.startswith(NEEDS_ROBOT)]
        notes.append(f"skipped (example-robot-data not installed): {', '.join(skipped)}")
    print(HEADER, flush=True)
    if args.interleave_ref:
        with tempfile.TemporaryDirectory(prefix="fc_ref_") as tmp:
            tree = worktree(args.interleave_ref, Path(tmp))
            try:
                rows = measure_interleaved([(ROOT, "this"), (tree, args.interleave_ref)], scenes, args.runtimes,
                                           repeat=args.repeat)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    else:
        rows = measure(ROOT, "this", scenes, args.runtimes, warm_only=False, repeat=args.repeat,
                       cold_repeat=args.cold_repeat)
    if args.compare_ref:
        with tempfile.TemporaryDirectory(prefix="fc_ref_") as tmp:
            tree = worktree(args.compare_ref, Path(tmp))
            try:
                # old trees: FEMCONTACT_RUNTIME is ignored where there was only Taichi
                rows += measure(tree, args.compare_ref, scenes, args.ref_runtimes, warm_only=True, repeat=args.repeat)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "startup.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "startup.md").write_text("\n".join([HEADER, *map(_fmt, rows), "", *notes]) + "\n")
    for note in notes:
        print(note)
    print(f"wrote {out / 'startup.csv'} and {out / 'startup.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

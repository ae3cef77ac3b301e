"""Parameter sweeps on Dask: one simulation per keyword-parameter combination of a scene's ``build()``.

``sweep("scenes/cube_drop.py", {"youngs_modulus": [1e4, 1e5], "restitution": [0.0, 0.5]}, out="out/s")``
runs the product of the values (or the rows of a list of dicts) on a Dask ``LocalCluster`` of
processes (one simulation per process, Taichi on the CPU with ``cpu_threads`` threads each) or on an
existing scheduler (``scheduler="tcp://host:8786"``; its workers must import femcontact, read the
scene path and run one thread each, ``dask worker ADDRESS --nthreads 1``: Taichi compiles kernels
only in the thread that initialised it). Each run writes ``OUT/run_XXXX/run.pvd`` (unless ``output=False``) and
``OUT/run_XXXX/result.json``, the done marker: re-running the sweep skips runs whose result is
there. The rows are gathered into ``OUT/results.csv`` (written atomically) and a plot of a metric
against the first parameter, ``OUT/summary.png``. A failed run is a row with ``status="failed"``
and its error; it does not stop the others.

Parameter text (``--param name=VALUES``): ``0.1,0.5,1.0`` (a list; ints, floats, true/false and
words are recognised), ``a:b:N`` (N values spaced linearly from a to b), ``a:b:logN`` (N values
spaced logarithmically; a, b > 0).
"""
from __future__ import annotations

import argparse
import inspect
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import ParameterError
from .io.vtk import atomic_write_bytes, check_output_dir
from .scene_script import load_scene_module

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["sweep", "parse_values", "parse_params", "read_params_file", "expand_runs", "check_scene_parameters",
           "run_one", "add_sweep_command"]

RESULT = "result.json"          # per-run done marker and row
RESULTS = "results.csv"
SUMMARY = "summary.png"
STANDARD_COLUMNS = ("run", "repeat", "status", "error", "steps", "simulated_time", "wall_s", "run_s",
                    "mean_iterations", "unconverged_steps", "worst_e_m", "max_contacts", "kinetic_energy",
                    "elastic_energy", "potential_energy", "total_energy", "com_x", "com_y", "com_z")


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------

def _scalar(text: str, name: str) -> Any:
    t = text.strip()
    if not t:
        raise ParameterError(f"parameter {name!r}: empty value in the list; write values separated by commas, "
                             "e.g. 0.1,0.5,1.0")
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    return t


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ParameterError(f"parameter {name!r}: range bound {text!r} is not a number; a range is a:b:N or "
                             "a:b:logN") from None


def parse_values(name: str, text: str) -> list:
    """The values of ``--param name=TEXT``: a comma list, ``a:b:N`` (linear) or ``a:b:logN`` (log-spaced)."""
    text = text.strip()
    if not text:
        raise ParameterError(f"parameter {name!r} has no values; give a list (0.1,0.5), a range a:b:N or a:b:logN")
    if ":" not in text:
        return [_scalar(t, name) for t in text.split(",")]
    parts = text.split(":")
    if len(parts) != 3:
        raise ParameterError(f"parameter {name!r}: range {text!r} must have the form a:b:N or a:b:logN")
    a, b = _number(parts[0], name), _number(parts[1], name)
    spec = parts[2].strip().lower()
    log = spec.startswith("log")
    count = spec[3:] if log else spec
    if not count.isdigit():
        raise ParameterError(f"parameter {name!r}: range {text!r} needs a whole number of values after the second "
                             "colon (a:b:5 or a:b:log5)")
    n = int(count)
    if n < 1:
        raise ParameterError(f"parameter {name!r}: range {text!r} is empty (0 values); ask for at least one")
    if log:
        if a <= 0 or b <= 0:
            raise ParameterError(f"parameter {name!r}: log range {text!r} needs positive bounds")
        values = np.logspace(math.log10(a), math.log10(b), n) if n > 1 else np.array([a])
    else:
        values = np.linspace(a, b, n) if n > 1 else np.array([a])
    out = [float(f"{v:.12g}") for v in values]
    integral = not log and all(p.strip().lstrip("+-").isdigit() for p in parts[:2])
    if integral and all(v == int(v) for v in out):
        return [int(v) for v in out]
    return out


def parse_params(specs: Iterable[str]) -> dict[str, list]:
    """``["friction=0.1,0.5", "youngs_modulus=1e4:1e6:log3"]`` -> ``{"friction": [...], ...}``."""
    params: dict[str, list] = {}
    for spec in specs:
        name, sep, text = str(spec).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParameterError(f"--param {spec!r} must be NAME=VALUES, e.g. friction=0.1,0.5,1.0")
        if name in params:
            raise ParameterError(f"parameter {name!r} given twice; give all its values in one --param")
        params[name] = parse_values(name, text)
    return params


def read_params_file(path: str | os.PathLike) -> list[dict]:
    """Runs from a CSV file: a header of parameter names, one run per row."""
    import csv

    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"parameter file {str(path)!r} not found")
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise ParameterError(f"parameter file {str(path)!r} needs a header of parameter names and at least one row")
    header = [h.strip() for h in rows[0]]
    if any(not h for h in header) or len(set(header)) != len(header):
        raise ParameterError(f"parameter file {str(path)!r}: the header {rows[0]} must name each column once")
    runs = []
    for k, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ParameterError(f"parameter file {str(path)!r}, line {k}: {len(row)} values for {len(header)} "
                                 "columns")
        runs.append({h: _scalar(c, h) for h, c in zip(header, row)})
    return runs


def expand_runs(params: Mapping[str, Sequence] | Sequence[Mapping[str, Any]], repeat: int = 1) -> list[dict]:
    """The runs of a sweep, in a fixed order: ``[{"run": i, "repeat": r, "params": {...}}, ...]``. A mapping of
    value lists gives their product (the first parameter varies slowest); a list of dicts gives its rows."""
    if not isinstance(repeat, (int, np.integer)) or repeat < 1:
        raise ParameterError(f"repeat must be a positive integer, got {repeat!r}")
    if isinstance(params, Mapping):
        for name, values in params.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                values = [values]
            if not list(values):
                raise ParameterError(f"parameter {name!r} has an empty list of values; give at least one")
        names = list(params)
        lists = [list(v) if isinstance(v, Iterable) and not isinstance(v, (str, bytes)) else [v]
                 for v in params.values()]
        combos = [dict(zip(names, c)) for c in itertools.product(*lists)]
    else:
        combos = [dict(c) for c in params]
    if not combos:
        raise ParameterError("the sweep has no runs; give at least one parameter value")
    return [{"run": i * repeat + r, "repeat": r, "params": c} for i, c in enumerate(combos) for r in range(repeat)]


# ---------------------------------------------------------------------------
# scenes
# ---------------------------------------------------------------------------

_MODULES: dict[tuple[str, float], Any] = {}


def _load_scene(path: str | os.PathLike):
    """Import a scene script by path (cached per process by path and modification time)."""
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime if path.is_file() else None)
    if key not in _MODULES:
        _MODULES[key] = load_scene_module(path)
    return _MODULES[key]


def check_scene_parameters(scene: str | os.PathLike, names: Iterable[str], build=None) -> list[str]:
    """Refuse parameter names that are not keywords of the scene's ``build()`` (the script's, or the
    ``build`` function given); return the accepted ones."""
    build = _load_scene(scene).build if build is None else build
    sig = inspect.signature(build)
    accepted = [p.name for p in sig.parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return accepted
    for name in names:
        if name not in accepted:
            raise ParameterError(
                f"parameter {name!r} is not a keyword of build() in {scene}; it accepts: "
                f"{', '.join(accepted) if accepted else 'no parameters (add keyword arguments to build())'}")
    return accepted


# ---------------------------------------------------------------------------
# one run (in a worker)
# ---------------------------------------------------------------------------

def _final_metrics(sim) -> dict:
    e = sim.energy()
    m = sim.model
    x = sim.state.positions()
    mass = np.asarray(m.mass_np, float)[: len(x)]
    keep = ~np.asarray(m.is_rotational, bool)[: len(x)] & (mass > 0)
    com = (mass[keep, None] * x[keep]).sum(0) / max(mass[keep].sum(), 1e-300) if keep.any() else np.full(3, np.nan)
    return {"kinetic_energy": e["kinetic"], "elastic_energy": e["elastic"], "potential_energy": e["gravity"],
            "total_energy": e["total"], "com_x": float(com[0]), "com_y": float(com[1]), "com_z": float(com[2])}


def _scene_metrics(module, sim) -> dict:
    fn = getattr(module, "metrics", None)
    if fn is None:
        return {}
    values = fn(sim)
    if not isinstance(values, Mapping):
        raise ParameterError(f"metrics(sim) in the scene returned {type(values).__name__}, not a dict")
    out = {}
    for k, v in values.items():
        k = str(k)
        if isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, (int, float, str, bool)) and v is not None:
            raise ParameterError(f"metrics(sim) in the scene returned {k!r} = {v!r}; give numbers or strings")
        out[k if k not in STANDARD_COLUMNS else f"scene_{k}"] = v
    return out


def run_one(task: Mapping[str, Any]) -> dict:
    """Run one simulation of a sweep (in a Dask worker) and write its ``result.json``; return its row.

    ``task``: scene (path), params, run, repeat, run_dir, steps or duration, output, every, arch,
    precision, deterministic, cpu_threads. Every exception of the run is caught into the row."""
    t_start = time.perf_counter()
    if task.get("cpu_threads"):
        os.environ.setdefault("FEMCONTACT_CPU_THREADS", str(int(task["cpu_threads"])))
    run_dir = Path(task["run_dir"])
    row: dict[str, Any] = {"run": task["run"], "repeat": task["repeat"], **task["params"], "status": "ok",
                           "error": ""}
    sim = None
    try:
        from . import backend
        from .scene import Scene
        from .simulator import Simulator

        backend.init(task.get("arch") or "cpu", task.get("precision"),
                     deterministic=bool(task.get("deterministic")))
        module = _load_scene(task["scene"])
        scene = module.build(**task["params"])
        if not isinstance(scene, Scene):
            raise ParameterError(f"build() in {task['scene']} returned {type(scene).__name__}, not a Scene")
        sim = Simulator(scene)
        summary = sim.run(steps=task.get("steps"), duration=task.get("duration"),
                          out=run_dir if task.get("output", True) else None, every=task.get("every"),
                          overwrite=True)   # run_dir is this sweep's: an unfinished or failed try is replaced
        row.update(steps=summary.steps, simulated_time=summary.simulated_time, run_s=summary.wall_s,
                   mean_iterations=summary.mean_iterations, unconverged_steps=summary.convergence.unconverged_steps,
                   worst_e_m=summary.convergence.worst_e_m,
                   max_contacts=max((s.contacts for s in sim.stats), default=0))
        row.update(_final_metrics(sim))
        row.update(_scene_metrics(module, sim))
    except Exception as exc:  # noqa: BLE001 - a failed run is a row, never the end of the sweep
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        if sim is not None:
            row.update(steps=len(sim.stats), simulated_time=sim.state.time)
    row["wall_s"] = time.perf_counter() - t_start
    _write_result(run_dir, row)
    return row


def _write_result(run_dir: Path, row: Mapping[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(run_dir / RESULT, json.dumps(row, default=_json_default, indent=1).encode())


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def _read_result(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / RESULT).read_text())
    except (OSError, ValueError):
        return None


def _same_params(row: Mapping[str, Any], run: Mapping[str, Any]) -> bool:
    return row.get("repeat") == run["repeat"] and all(
        k in row and _jsonable(row[k]) == _jsonable(v) for k, v in run["params"].items())


def _jsonable(v):
    return json.loads(json.dumps(v, default=_json_default))


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------

def sweep(scene: str | os.PathLike, params: Mapping[str, Sequence] | Sequence[Mapping[str, Any]], *,
          repeat: int = 1, out: str | os.PathLike = "out/sweep", steps: int | None = None,
          duration: float | None = None, output: bool = True, every: int | None = None,
          workers: int | None = None, scheduler: str | None = None, client: Any = None,
          cpu_threads: int = 1, arch: str = "cpu", precision: str | None = None, deterministic: bool = False,
          metric: str | None = None, retry_failed: bool = False, progress: bool = True) -> "pandas.DataFrame":
    """Run ``scene`` (a scene script path) for every parameter combination; return the results table.

    params: ``{name: [values]}`` (product) or a list of ``{name: value}`` runs; every name must be a
    keyword of the scene's ``build()``. repeat: runs per combination. out: folder of ``run_XXXX/``,
    ``results.csv`` and ``summary.png``. steps / duration: per run (default the scene's duration).
    output: write each run's ``.pvd``. workers: processes of the local cluster (default: one per core,
    at most one per run); scheduler: address of a running Dask scheduler instead; client: an existing
    ``distributed.Client``. cpu_threads: Taichi CPU threads per run. deterministic: one thread, runs
    repeat bit for bit. metric: column plotted against the first parameter (default: the scene's first
    ``metrics()`` value, else ``com_z``). retry_failed: rerun runs recorded as failed (finished runs
    are always skipped). Rows are in run order; ``status`` is ``ok`` or ``failed`` (``error`` says why).
    """
    import pandas as pd

    scene = Path(scene).resolve()
    runs = expand_runs(params, repeat)
    names = list(dict.fromkeys(k for r in runs for k in r["params"]))
    check_scene_parameters(scene, names)
    if steps is not None and duration is not None:
        raise ParameterError("give either steps or duration per run, not both")
    if steps is not None and (not isinstance(steps, (int, np.integer)) or steps < 1):
        raise ParameterError(f"steps must be a positive integer, got {steps!r}")
    if workers is not None and (not isinstance(workers, (int, np.integer)) or workers < 1):
        raise ParameterError(f"workers must be a positive integer, got {workers!r}")
    out = check_output_dir(out)
    width = max(4, len(str(len(runs) - 1)))
    tasks, rows = [], {}
    for r in runs:
        run_dir = out / f"run_{r['run']:0{width}d}"
        done = _read_result(run_dir)
        if done is not None and _same_params(done, r) and (done.get("status") == "ok" or not retry_failed):
            rows[r["run"]] = done
            continue
        tasks.append({"scene": str(scene), "params": r["params"], "run": r["run"], "repeat": r["repeat"],
                      "run_dir": str(run_dir), "steps": steps, "duration": duration, "output": output,
                      "every": every, "arch": arch, "precision": precision, "deterministic": deterministic,
                      "cpu_threads": cpu_threads})
    atomic_write_bytes(out / "sweep.json", json.dumps(
        {"scene": str(scene), "names": names, "runs": len(runs), "repeat": repeat, "steps": steps,
         "duration": duration, "output": output}, indent=1).encode())
    skipped = len(rows)
    if tasks:
        _run_tasks(tasks, rows, out, names, metric, workers, scheduler, client, progress, skipped, len(runs))
    table = _table(rows, names)
    _write_table(table, out)
    _plot(table, names, metric, out / SUMMARY)
    table.attrs.update(skipped=skipped, out=str(out))
    return table


def _run_tasks(tasks, rows, out, names, metric, workers, scheduler, client, progress, skipped, total) -> None:
    from distributed import Client, LocalCluster, as_completed

    own = []
    if client is None:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout="10s")
            except OSError as exc:
                raise ParameterError(f"cannot reach the Dask scheduler at {scheduler!r} ({exc}); start one with "
                                     "`dask scheduler` (and workers with `dask worker ADDRESS`) or drop "
                                     "--scheduler to use a local cluster") from None
        else:
            n = workers or max(1, min(os.cpu_count() or 1, len(tasks)))
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   env={"FEMCONTACT_CPU_THREADS": str(tasks[0]["cpu_threads"] or 1)})
            client = Client(cluster)
            own += [client, cluster]
        if not own:
            own.append(client)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=skipped, unit="run", dynamic_ncols=True, desc="sweep")
    try:
        futures = {}
        for t in tasks:
            f = client.submit(run_one, t, pure=False, key=f"femcontact-run-{t['run']}-{os.getpid()}-{time.time_ns()}")
            futures[f] = t
        last_write = 0.0
        for f in as_completed(futures):
            t = futures[f]
            try:
                row = f.result()
            except Exception as exc:  # noqa: BLE001 - the worker died (killed, out of memory, ...)
                row = {"run": t["run"], "repeat": t["repeat"], **t["params"], "status": "failed",
                       "error": f"{type(exc).__name__}: {exc}"}
                _write_result(Path(t["run_dir"]), row)
            rows[t["run"]] = row
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"failed {sum(r.get('status') != 'ok' for r in rows.values())}")
            if time.monotonic() - last_write > 2.0:      # the table so far, for a look during a long sweep
                _write_table(_table(rows, names), out)
                last_write = time.monotonic()
    finally:
        if bar is not None:
            bar.close()
        for obj in own:
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - closing a dead cluster must not hide the results
                pass


def _table(rows: Mapping[int, Mapping[str, Any]], names: Sequence[str]) -> "pandas.DataFrame":
    import pandas as pd

    df = pd.DataFrame([rows[k] for k in sorted(rows)])
    first = ["run", "repeat", *names, "status", "error"]
    cols = [c for c in first if c in df.columns] + [c for c in df.columns if c not in first]
    return df[cols].reset_index(drop=True) if len(df) else df


def _write_table(df: "pandas.DataFrame", out: Path) -> None:
    atomic_write_bytes(out / RESULTS, df.to_csv(index=False).encode())


def _default_metric(df: "pandas.DataFrame", names: Sequence[str]) -> str | None:
    """The scene's first numeric ``metrics()`` column, else ``com_z``."""
    extra = [c for c in df.columns if c not in STANDARD_COLUMNS and c not in names]
    for c in [*extra, "com_z", "kinetic_energy"]:
        if c in df.columns and np.issubdtype(df[c].dtype, np.number):
            return c
    return None


def _plot(df: "pandas.DataFrame", names: Sequence[str], metric: str | None, path: Path) -> None:
    """``metric`` of the finished runs against the first parameter, one line per combination of the others."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if metric is None:
        metric = _default_metric(df, names)
    elif metric not in df.columns:
        raise ParameterError(f"metric {metric!r} is not a column of the results; choose one of "
                             f"{', '.join(c for c in df.columns if c not in ('status', 'error'))}")
    fig = Figure(figsize=(6.4, 4.2), dpi=100)     # no pyplot: the caller's backend is left alone
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    x_name = names[0] if names else "run"
    if metric is not None and len(ok) and x_name in ok.columns:
        others = [n for n in names[1:] if n in ok.columns]
        groups = ok.groupby(others, dropna=False) if others else [((), ok)]
        numeric = np.issubdtype(ok[x_name].dtype, np.number)
        cats = sorted(ok[x_name].astype(str).unique()) if not numeric else None
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            g = g.sort_values(x_name) if numeric else g
            x = g[x_name].to_numpy() if numeric else [cats.index(str(v)) for v in g[x_name]]
            label = ", ".join(f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}"
                              for n, v in zip(others, key)) or None
            ax.plot(x, g[metric].to_numpy(dtype=float), "o-", label=label)
        if numeric and (ok[x_name] > 0).all() and ok[x_name].max() >= 100 * ok[x_name].min():
            ax.set_xscale("log")
        if cats is not None:
            ax.set_xticks(range(len(cats)), cats)
        if others:
            ax.legend(fontsize="small")
    ax.set_xlabel(x_name)
    ax.set_ylabel(metric or "(no numeric metric)")
    n_failed = int((df["status"] != "ok").sum()) if "status" in df.columns else 0
    ax.set_title(f"{len(ok)} runs" + (f", {n_failed} failed" if n_failed else ""))
    fig.tight_layout()
    tmp = path.with_name(f".tmp-{path.name}")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

def cmd_sweep(args: argparse.Namespace) -> int:
    """``femcontact sweep``: parse the parameters, run, print where the table and plot went."""
    if not args.param and not args.params_file:
        raise ParameterError("give the parameters to sweep with --param NAME=VALUES (or --params-file FILE.csv)")
    if args.param and args.params_file:
        raise ParameterError("give --param or --params-file, not both")
    params = read_params_file(args.params_file) if args.params_file else parse_params(args.param)
    out = Path(args.out) if args.out else Path("out") / f"sweep_{Path(args.scene).stem}"
    df = sweep(args.scene, params, repeat=args.repeat, out=out, steps=args.steps, duration=args.duration,
               output=not args.no_output, every=args.every, workers=args.workers, scheduler=args.scheduler,
               cpu_threads=args.cpu_threads, deterministic=args.deterministic, metric=args.metric,
               retry_failed=args.retry_failed, progress=not args.no_progress)
    failed = int((df["status"] != "ok").sum())
    print(f"femcontact: {len(df)} runs ({df.attrs.get('skipped', 0)} finished before, skipped), {failed} failed")
    for _, r in df[df["status"] != "ok"].iterrows():
        print(f"  run {int(r['run'])}: {r['error']}")
    print(f"table: {out / RESULTS}\nplot:  {out / SUMMARY}")
    return 1 if failed == len(df) else 0


def add_sweep_command(sub) -> None:
    """Add ``femcontact sweep`` to the command line's subparsers."""
    p = sub.add_parser(
        "sweep", help="run a scene over a grid of build() parameters on Dask",
        description="Run SCENE.py once per combination of --param values (keywords of its build()), in parallel "
                    "on a Dask local cluster or an existing scheduler; write OUT/run_XXXX/ per run, OUT/results.csv "
                    "and OUT/summary.png. Re-running skips finished runs.")
    p.add_argument("scene", metavar="SCENE.py", help="scene script whose build() takes the swept keywords")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUES",
                   help="values of a build() keyword: 0.1,0.5,1.0 or a:b:N (linear) or a:b:logN (log-spaced); "
                        "repeat for more parameters (their product is run)")
    p.add_argument("--params-file", default=None, metavar="FILE.csv",
                   help="runs as rows of a CSV file whose header names the parameters (instead of --param)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per combination (default 1)")
    p.add_argument("--out", default=None, help="output folder (default out/sweep_<scene name>)")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--duration", type=float, default=None, metavar="T",
                        help="simulated time per run in s (default: the scene's duration)")
    length.add_argument("--steps", type=int, default=None, metavar="N", help="steps per run")
    p.add_argument("--every", type=int, default=None, metavar="K", help="write a frame every K steps")
    p.add_argument("--no-output", action="store_true", help="no .pvd per run, only the results table")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes of the local cluster (default: one per core)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on an existing Dask scheduler (tcp://host:8786) instead of a local cluster")
    p.add_argument("--cpu-threads", type=int, default=1, metavar="N", help="Taichi CPU threads per run (default 1)")
    p.add_argument("--deterministic", action="store_true", help="one thread per run: runs repeat bit for bit")
    p.add_argument("--metric", default=None, help="column plotted against the first parameter in summary.png")
    p.add_argument("--retry-failed", action="store_true", help="rerun the runs recorded as failed")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `femcontact sweep`")

"""What the benchmark writes: the machine record, tables as text, Markdown and CSV, the log–log
slope fit, and the plots (Fig. 11 and the PGS convergence picture; matplotlib, extra ``bench``).
Every file is written atomically (``io.vtk.atomic_write_bytes``)."""
from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..errors import FemcontactError
from ..io.vtk import atomic_write_bytes


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record(cfg: dict) -> dict:
    """The machine and software a result was measured on: CPU model, cores, kernel runtime, arch and
    precision (``cfg`` from ``backend.init``), Python/runtime/NumPy versions, git commit, UTC date."""
    from .. import __version__, backend

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:        # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {"cpu_model": cpu_model(), "cores": os.cpu_count(), "usable_cores": usable,
            "machine": platform.machine(), "system": platform.platform(), "arch": str(cfg.get("arch")),
            "precision": str(cfg.get("precision")), "python": sys.version.split()[0],
            "runtime": f"{backend.RUNTIME} {backend.RUNTIME_VERSION}", "numpy": np.__version__, "femcontact": __version__,
            "git_commit": commit,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def fit_slope(dof: Sequence[float], ms: Sequence[float]) -> tuple[float, float]:
    """Least-squares line through (log DOF, log ms): returns (slope, prefactor) of ms ≈ c · DOF^slope.
    Needs two or more distinct positive points."""
    x, y = np.asarray(dof, float), np.asarray(ms, float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if len(np.unique(x[ok])) < 2:
        raise FemcontactError("a log-log slope needs at least two sizes with positive times; run more sizes")
    slope, intercept = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
    return float(slope), float(math.exp(intercept))


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        a = abs(v)
        return f"{v:.2e}" if (a and (a < 1e-2 or a >= 1e5)) else f"{v:.3g}" if a < 10 else f"{v:.1f}"
    return str(v)


def format_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """Rows as aligned text, one line each."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    width = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, width))]
    lines += ["  ".join(x.rjust(w) for x, w in zip(line, width)) for line in cells]
    return "\n".join(lines)


def markdown_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def write_table(out: Path, name: str, title: str, rows: Sequence[dict], columns: Sequence[str],
                notes: str = "", machine: Optional[dict] = None) -> None:
    """``out/<name>.md`` (title, notes, the table, the machine) and ``out/<name>.csv`` (every column
    of every row, machine fields prefixed ``machine_``)."""
    md = [f"# {title}", "", notes.strip(), "", markdown_table(rows, columns), ""]
    if machine:
        md += ["Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items() if k in (
            "cpu_model", "cores", "arch", "precision", "python", "runtime", "numpy", "git_commit", "date_utc")), ""]
    atomic_write_bytes(out / f"{name}.md", "\n".join(md).encode())
    keys = list(dict.fromkeys(k for r in rows for k in r if not isinstance(r[k], (list, dict))))
    mkeys = [f"machine_{k}" for k in sorted(machine or {})]
    tagged = [{**r, **{f"machine_{k}": v for k, v in (machine or {}).items()}} for r in rows]
    write_csv(out / f"{name}.csv", tagged, keys + mkeys)


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> None:
    """Plain CSV of ``columns`` (a data file, no machine columns: the table's CSV has those)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([r.get(k, "") for k in columns])
    atomic_write_bytes(path, buf.getvalue().encode())


def write_json(path: Path, data: dict) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=1, default=str) + "\n").encode())


def _figure(nplots: int = 1, size=(6.4, 4.4)):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise FemcontactError("the benchmark plots need matplotlib: pip install 'femcontact[bench]' "
                              "(or pass --no-plots)") from None
    fig = Figure(figsize=(size[0] * nplots, size[1]), dpi=100)    # no pyplot: the caller's backend stays
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, nplots)


def _save(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())


def plot_scaling(path: Path, series: dict, paper: Optional[dict] = None, baseline: str = "pgs") -> None:
    """Fig. 11: solver ms against DOF, log–log, one line per solver with its fitted slope in the
    legend (left), and the speed-up over ``baseline`` (right). series: solver -> (dof list, ms list);
    paper: solver -> (dof list, ms list), drawn hollow."""
    fig, (ax, ax2) = _figure(2)
    for name, (dof, ms) in sorted(series.items()):
        label = name
        if len(set(dof)) >= 2:
            label += f" (slope {fit_slope(dof, ms)[0]:.2f})"
        line, = ax.loglog(dof, ms, "o-", label=label)
        if paper and name in paper:
            pd, pm = paper[name]
            ax.loglog(pd, pm, "s--", mfc="none", color=line.get_color(),
                      label=f"{name}, paper (slope {fit_slope(pd, pm)[0]:.2f})")
        if baseline in series and name != baseline:
            bd, bm = series[baseline]
            common = sorted(set(dof) & set(bd))
            sp = [bm[bd.index(d)] / ms[dof.index(d)] for d in common]
            if common:
                ax2.loglog(common, sp, "o-", color=line.get_color(), label=f"{baseline} / {name}")
            if paper and name in paper and baseline in paper:
                pd, pm = paper[name]
                ax2.loglog(pd, [b / m for b, m in zip(paper[baseline][1], pm)], "s--", mfc="none",
                             color=line.get_color(), label=f"{baseline} / {name}, paper")
    ax.set_xlabel("DOF (system dimension)")
    ax.set_ylabel("solver time per step (ms)")
    ax.set_title("mat: solver time against DOF")
    ax.legend(fontsize=8)
    ax2.set_xlabel("DOF")
    ax2.set_ylabel(f"speed-up over {baseline}")
    ax2.set_title("speed-up")
    if ax2.lines:
        ax2.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_convergence(path: Path, panels: dict, title: str) -> None:
    """Residual against iterations (sweeps for PGS), log scale: one panel per case, one line per
    solver. panels: panel title -> {solver label: residual history}."""
    fig, axes = _figure(len(panels))
    axes = np.atleast_1d(axes)
    for ax, (name, histories) in zip(axes, panels.items()):
        for label, h in histories.items():
            h = [x for x in h if x > 0]
            if h:
                ax.semilogy(np.arange(1, len(h) + 1), h, label=f"{label} ({len(h)} iterations)")
        ax.set_xlabel("iteration (PGS: sweep)")
        ax.set_ylabel("relative residual (each solver's own stop measure)")
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)

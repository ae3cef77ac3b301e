"""Benchmarks (``femcontact bench``, ``tools/bench_tables.py``): the COND paper's Table I, Table II
and Fig. 11, the SAP clutter and the peers' soft-cube drop, with the papers' numbers beside ours.

``cases`` (named scenes, sizes, the papers' numbers), ``measure`` (settle, swap in the solver,
time the steps, e_m), ``report`` (machine record, Markdown/CSV, slope fit, plots), ``run`` (the
tables and the command line). Its names are imported at their first use (PEP 562), so building the
command line (``add_bench_command``) imports no kernel before ``--runtime`` is read.
"""
from __future__ import annotations

import importlib

_LAZY = {"PRESETS": ".cases", "Case": ".cases", "case": ".cases", "measure": ".measure", "fit_slope": ".report",
         "machine_record": ".report", "TABLES": ".run", "Plan": ".run", "add_bench_command": ".run",
         "cmd_bench": ".run", "run": ".run"}

__all__ = ["PRESETS", "Case", "case", "measure", "fit_slope", "machine_record", "TABLES", "Plan",
           "add_bench_command", "cmd_bench", "run"]


def __getattr__(name: str):
    """Import a public name at its first use (module docstring)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value

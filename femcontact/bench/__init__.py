"""Benchmarks (``femcontact bench``, ``tools/bench_tables.py``): the COND paper's Table I, Table II
and Fig. 11, the SAP clutter and the peers' soft-cube drop, with the papers' numbers beside ours.

``cases`` (named scenes, sizes, the papers' numbers), ``measure`` (settle, swap in the solver,
time the steps, e_m), ``report`` (machine record, Markdown/CSV, slope fit, plots), ``run`` (the
tables and the command line).
"""
from .cases import PRESETS, Case, case
from .measure import measure
from .report import fit_slope, machine_record
from .run import TABLES, Plan, add_bench_command, cmd_bench, run

__all__ = ["PRESETS", "Case", "case", "measure", "fit_slope", "machine_record", "TABLES", "Plan",
           "add_bench_command", "cmd_bench", "run"]

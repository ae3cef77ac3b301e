"""CSV files that grow by whole rows: ``OUT/steps.csv`` and the robots' ``<robot>_joints.csv``.

Rows are appended with one ``write`` per batch (O_APPEND) and fsynced, so a killed run leaves only
whole rows (a torn last line is dropped when the file is reopened). A resumed run reopens the file
keeping the rows up to the resume time and continues; a new run starts it afresh (header only).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable, Optional

from ..errors import ParameterError
from .vtk import atomic_write_bytes

__all__ = ["CsvLog", "STEPS_CSV", "STEPS_COLUMNS", "steps_row"]

STEPS_CSV = "steps.csv"
#: the columns of OUT/steps.csv: one row per completed step, each a field of ``StepStats``
STEPS_COLUMNS = ("step", "time", "iterations", "residual", "e_m", "contacts", "ms_detection", "ms_assembly",
                 "ms_solve", "ms_total", "converged")


def _field(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def steps_row(stats) -> str:
    """One line of steps.csv for a ``StepStats`` (times and residuals exact, ms to 1 µs; no e_m: empty;
    converged: 1, or 0 where the step's solve ended unconverged, ``femcontact.convergence``)."""
    return ",".join(f"{getattr(stats, c):.3f}" if c.startswith("ms_") else _field(getattr(stats, c))
                    for c in STEPS_COLUMNS) + "\n"


class CsvLog:
    """``path`` with ``columns`` as header; ``append`` keeps an existing file's rows whose
    ``time_column`` value is at most ``keep_until`` (all when None) and continues it."""

    def __init__(self, path: str | os.PathLike, columns: Iterable[str], *, append: bool = False,
                 keep_until: Optional[float] = None, time_column: int = 0) -> None:
        self.path = Path(path)
        self.header = ",".join(columns) + "\n"
        rows = self._kept_rows(keep_until, time_column) if append and self.path.is_file() else []
        atomic_write_bytes(self.path, (self.header + "".join(rows)).encode())

    def _kept_rows(self, keep_until: Optional[float], time_column: int) -> list[str]:
        lines = self.path.read_text().splitlines(keepends=True)
        if not lines or lines[0] != self.header:
            raise ParameterError(f"cannot append to {self.path}: its columns are not this run's; start a fresh run "
                                 "into another folder")
        n = self.header.count(",") + 1
        kept = []
        for line in lines[1:]:
            fields = line.rstrip("\n").split(",")
            if not line.endswith("\n") or len(fields) != n:
                break                                   # a torn last row of a killed run
            if keep_until is None or float(fields[time_column]) <= keep_until:
                kept.append(line)
        return kept

    def append(self, lines: list[str]) -> None:
        """Append whole ``lines`` (each ending in a newline) with one write and an fsync."""
        if not lines:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, "".join(lines).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

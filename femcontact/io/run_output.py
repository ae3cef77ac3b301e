"""What ``Simulator.run(out=...)`` writes into its output folder, and the rules that keep it safe.

``OUT/run.pvd`` and its frames (``SeriesWriter``), ``OUT/steps.csv`` (one row per completed step,
``csvlog.STEPS_COLUMNS``) and each robot's ``OUT/<robot>_joints.csv`` (``io/robot_output.py``). The
step loop gathers a frame's data as host numpy copies and hands it to a ``BackgroundWriter`` thread,
which converts and writes the files while the next steps run (at most ``depth`` frames wait, so a
slow disk slows the run instead of filling memory); it writes a frame's piece files on
``PIECE_WORKERS`` threads at once, so their fsyncs share journal commits. ``close`` writes every frame handed over, also
after an exception or Ctrl-C in the loop.

Safety rules: a new run into a folder that holds an earlier series is refused unless ``overwrite``;
a continued series (``append``, a resumed run) must be the one the loaded checkpoint was saved
beside (``vtk.check_series_mark``), and its frames and rows after the checkpoint's time are dropped.
"""
from __future__ import annotations

import time as _time
from pathlib import Path
from typing import Any, Optional

from ..errors import ParameterError, SimulationError
from .background import BackgroundWriter
from .csvlog import STEPS_COLUMNS, STEPS_CSV, CsvLog, steps_row
from .vtk import SeriesWriter, check_series_mark, earlier_run

__all__ = ["RunOutput", "WRITER_DEPTH"]

WRITER_DEPTH = 3        # frames that may wait for the writer thread
PIECE_WORKERS = 8       # threads writing one frame's piece files at once (SeriesWriter(workers=...))
_MARK_KEYS = ("series_frames", "series_time", "series_digest")


class RunOutput:
    """The output of one ``Simulator.run`` of ``sim`` (a ``femcontact.Simulator``; not imported here:
    the simulator imports this module) into ``out`` (module docstring)."""

    def __init__(self, sim: Any, out: str | Path, *, append: bool = False, overwrite: bool = False,
                 depth: int = WRITER_DEPTH) -> None:
        self.sim = sim
        self.out = Path(out)
        if append:
            if "series_frames" in sim.state.meta:
                check_series_mark(self.out / "run.pvd", sim.state.meta)
        elif not overwrite:
            held = earlier_run(self.out)
            if held is not None:
                raise ParameterError(
                    f"out {str(self.out)!r} holds an earlier run ({held}); nothing was changed. Give another out "
                    "folder, overwrite=True to replace that run, or continue it: load_checkpoint(out/"
                    "'checkpoint.npz') then run(..., out=out, append=True)")
        keep = sim.state.time if append else None
        self.series = SeriesWriter(self.out, append=append, keep_until=keep, workers=PIECE_WORKERS)
        self.steps = CsvLog(self.out / STEPS_CSV, STEPS_COLUMNS, append=append, keep_until=keep, time_column=1)
        self.robots = None
        if sim.scene.robots:
            from .robot_output import RobotCsvWriter

            self.robots = RobotCsvWriter(self.out, sim.scene.robots, append=append, keep_until=keep)
        self._rows_from = len(sim.stats)        # sim.stats[_rows_from:]: steps whose rows are not handed over
        self.thread = BackgroundWriter(depth)

    @property
    def pvd_path(self) -> Path:
        return self.series.pvd_path

    def _step_rows(self) -> list[str]:
        rows = [steps_row(st) for st in self.sim.stats[self._rows_from:]]
        self._rows_from = len(self.sim.stats)
        return rows

    def frame(self) -> None:
        """Hand the current frame (and the step rows up to it) to the writer thread."""
        sim = self.sim
        t0 = _time.perf_counter()
        step, time = sim.state.step, sim.state.time
        pieces = sim.frame_pieces()
        robot_rows = self.robots.rows(sim) if self.robots is not None else None
        rows = self._step_rows()

        def job() -> None:
            try:
                self.series.write(time, pieces)
                if robot_rows is not None:      # after the frame: a row never precedes its frame
                    self.robots.append(robot_rows)
                self.steps.append(rows)
            except OSError as exc:
                raise SimulationError(
                    f"could not write the frame of step {step} (t = {time:.6g} s) to {self.out}: {exc}. Frames "
                    "written before are intact; free some space or choose another --out") from exc

        try:
            self.thread.submit(job)
        finally:
            sim.timers["output"] += _time.perf_counter() - t0

    def _flush_rows(self) -> None:
        rows = self._step_rows()
        if rows:
            self.thread.submit(lambda: self.steps.append(rows))

    def checkpoint(self, path: Path) -> None:
        """Save the simulator's checkpoint once everything handed over is written, with the series'
        mark in it (so a resume can check that the series is still this one)."""
        t0 = _time.perf_counter()
        self._flush_rows()
        self.thread.flush()
        self.sim.state.meta.update(self.series.mark())
        self.sim.save_checkpoint(path)
        self.sim.timers["output"] += _time.perf_counter() - t0

    def close(self, failed: Optional[BaseException] = None) -> None:
        """Write everything handed over and finish the series. After a failure of the loop
        (``failed``) a writer error is chained to the run's own exception, not raised over it."""
        t0 = _time.perf_counter()
        errors = []
        for action in (self._flush_rows, self.thread.close, self.series.close):
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - the first is raised below
                errors.append(exc)
        self.sim.timers["output"] += _time.perf_counter() - t0
        if failed is not None or errors:
            for key in _MARK_KEYS:      # the state is not the series' end: no mark for a later save
                self.sim.state.meta.pop(key, None)
        else:
            self.sim.state.meta.update(self.series.mark())
        if errors and failed is None:
            raise errors[0]
        if errors and failed.__context__ is None:
            failed.__context__ = errors[0]

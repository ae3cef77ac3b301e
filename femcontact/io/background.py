"""A writer thread: output jobs run in order beside the step loop, at most ``depth`` waiting.

The step loop hands each frame's host data (numpy copies) over with ``submit``; when ``depth``
jobs wait, ``submit`` blocks until one is done, so memory stays bounded and a slow disk slows the
run instead of filling memory. The first error of a job is raised in the submitting thread by the
next ``submit``, ``flush`` or ``close``, and no later job runs (the files never hold a frame after
a failed one). ``close`` runs every job submitted before it, so an exception or Ctrl-C in the loop
still leaves every frame handed over written.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Optional

__all__ = ["BackgroundWriter"]

_STOP = object()


class BackgroundWriter:
    """Runs ``fn()`` jobs on one daemon thread in submission order (module docstring)."""

    def __init__(self, depth: int = 3, name: str = "femcontact-writer") -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._closed = False
        self._raised = False
        self.busy_s = 0.0           # time the thread spent in jobs, s
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is _STOP:
                    return
                if self._error is None:
                    t0 = time.perf_counter()
                    try:
                        job()
                    except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                        self._error = exc
                    self.busy_s += time.perf_counter() - t0
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None and not self._raised:
            self._raised = True
            raise self._error

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job``; blocks while ``depth`` jobs wait. Raises the error of an earlier job."""
        if self._closed:
            raise RuntimeError("BackgroundWriter is closed")
        self._raise()
        self._queue.put(job)

    def flush(self) -> None:
        """Wait until every submitted job ran; raise the first error of one."""
        self._queue.join()
        self._raise()

    def close(self) -> None:
        """Run the jobs still waiting, stop the thread, raise the first error of a job (once)."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
        self._raise()

"""Where a cold start's compile time goes, kernel by kernel (issue 28). A benchmark, not a test.

    FEMCONTACT_CACHE_DIR=$(mktemp -d) python tools/compile_times.py [--report FILE] run scenes/panda_mat_fold.py --steps 1 --out OUT

Runs ``femcontact`` with the given arguments in this process and reports, for every kernel that was
materialized or launched, the process CPU seconds of its front end (``Kernel.materialize``: the runtime's
Python AST transform, with every ``ti.func`` inlined) and of its first launch (the runtime's IR passes and
LLVM, or loading the cached kernel, plus one run of it), largest first, to stderr (or ``--report FILE``).
With an empty ``FEMCONTACT_CACHE_DIR`` that is the cold start; on a filled one, the warm load. CPU
seconds, not wall: on a shared machine the load inflates them far less.
"""
import os
import sys
import time

REPORT = None
if len(sys.argv) > 2 and sys.argv[1] == "--report":
    REPORT = sys.argv[2]
    del sys.argv[1:3]

from femcontact import backend  # noqa: E402

backend.select_runtime()
Kernel = (sys.modules["quadrants.lang.kernel"].Kernel if backend.RUNTIME == "quadrants"
          else sys.modules["taichi.lang.kernel_impl"].Kernel)
TIMES: dict[str, list] = {}             # name -> [front end s, first launch s, first launches]
_seen: set = set()
_materialize, _launch = Kernel.materialize, Kernel.launch_kernel


def _entry(kernel) -> list:
    return TIMES.setdefault(kernel.func.__qualname__, [0.0, 0.0, 0])


def materialize(self, key=None, *args, **kwargs):
    t0 = time.process_time()
    try:
        return _materialize(self, key, *args, **kwargs)
    finally:
        _entry(self)[0] += time.process_time() - t0


def launch_kernel(self, key, *args, **kwargs):
    first = (id(self), key) not in _seen
    t0 = time.process_time()
    try:
        return _launch(self, key, *args, **kwargs)
    finally:
        if first:
            _seen.add((id(self), key))
            e = _entry(self)
            e[1] += time.process_time() - t0
            e[2] += 1


def report() -> None:
    rows = sorted(TIMES.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    front, first = sum(v[0] for _, v in rows), sum(v[1] for _, v in rows)
    lines = [f"{backend.RUNTIME} {backend.RUNTIME_VERSION}: process CPU {time.process_time():.2f} s, kernels "
             f"{len(rows)}: front end {front:.2f} s, first launches {first:.2f} s",
             f"{'total':>7} {'front':>6} {'launch':>6}  kernel (CPU s)"]
    lines += [f"{fe + c:7.2f} {fe:6.2f} {c:6.2f}  {name}" + (f" ({n} variants)" if n > 1 else "")
              for name, (fe, c, n) in rows]
    text = "\n".join(lines) + "\n"
    if REPORT:
        with open(REPORT, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)


if __name__ == "__main__":
    Kernel.materialize, Kernel.launch_kernel = materialize, launch_kernel
    from femcontact.cli import main
    try:
        rc = main(sys.argv[1:])
    finally:
        report()
    sys.exit(rc)

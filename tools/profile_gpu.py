"""Where a step's time goes on a device: per-kernel device time (the runtime's kernel profiler) and
the host side (cProfile), for the soft cube of tools/bench_gpu.py. Not a timed test.

    python tools/profile_gpu.py [--cells 31] [--solver cond] [--steps 2] [--arch cuda] [--top 25]

Step 1 (compilation) is not profiled. The kernel table (the runtime's own) lists each kernel task's
launches and total, mean and max device time over the profiled steps; the host table the
functions with the largest cumulative time.
"""
import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import femcontact as fc  # noqa: E402
from bench_gpu import cube_scene  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=31)
    ap.add_argument("--solver", default="cond")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--arch", default="cuda")
    ap.add_argument("--precision", default="f64")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    ti = fc.backend.ti
    orig_init = ti.init
    ti.init = lambda *args, **kw: orig_init(*args, **{**kw, "kernel_profiler": True})
    fc.backend.init(a.arch, a.precision)
    sim = fc.Simulator(cube_scene(a.cells, a.solver))
    sim.step()
    ti.sync()
    ti.profiler.clear_kernel_profiler_info()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(a.steps):
        sim.step()
    ti.sync()
    prof.disable()
    wall = time.perf_counter() - t0
    st = sim.stats[-a.steps:]
    print(f"{fc.backend.describe()}: {a.solver}, {sim.model.n_dofs} DOF, {a.steps} steps, {1e3 * wall / a.steps:.1f} "
          f"ms/step, iterations {[s.iterations for s in st]}, contacts {[s.contacts for s in st]}")
    print(f"device time in kernels: {1e3 * ti.profiler.get_kernel_profiler_total_time() / a.steps:.1f} ms/step")
    ti.profiler.print_kernel_profiler_info("count")       # per kernel task: launches, total, mean, max
    pstats.Stats(prof).sort_stats("cumulative").print_stats(a.top)


if __name__ == "__main__":
    main()

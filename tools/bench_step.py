"""Per-step fixed cost of the step loop (issue 13, "What must be shown"). Not a timed test.

    python tools/bench_step.py [--scenes sphere clutter cube] [--solvers lagged cond]
                               [--warmup 10] [--steps 100] [--kernel-time] [--save out.npz]
                               [--compare before.npz]

Scenes: ``sphere`` one rigid sphere (r 5 cm, steel 7800 kg/m³) resting on a half-space ground,
measured from rest; ``clutter`` scenes/clutter.py (40 rigid spheres and boxes dropped into a
box of 5 static obstacle boxes), measured over its first steps (the drop and the pile-up);
``gripper_ball`` scenes/gripper_ball.py (a rigid two-finger gripper on prismatic joints lifts a
soft ball) and ``panda_ball`` scenes/panda_soft_ball.py (the Panda's hand lifts one) measured during
the lift; ``panda`` scenes/panda_hold.py (no contacts: joints);
``cube`` the 2,187-DOF soft cube (``fc.meshes.box((0.1,)*3, resolution=8)``, E 1e5, ν 0.4,
ρ 1000, Rayleigh α 1, β 2e-3 as scenes/cube_drop.py) dropped 5 cm onto the ground, 100 steps.
Integrator: implicit Euler under the Newton path, the midpoint rule under COND (as the
scenes in scenes/ choose).

Per scene × solver it prints DOF, mean contacts, mean solver iterations, the median and mean
wall ms per step (``StepStats.ms_total`` over the measured steps; warm-up steps, which include
compilation, are left out), the detection / assembly / solve split (median ms), kernel launches
per step, the process CPU ms per step (all threads; less sensitive than wall time to other
processes on a shared machine), the ms per step spent inside Taichi kernel calls (argument marshalling + launch +
execution) and that time per launch (``us/l``, µs), the least ms of a whole step and of its solve over
the measured steps (``ms min``, ``slv min``), the process CPU ms per step inside the contact solver's
``solve`` (``slv cpu``; CPU time is not inflated by waiting for a core: with ``--serial`` and
``OPENBLAS_NUM_THREADS=1`` the most repeatable number on a shared machine), and the
contact solver's momentum error e_m (SAP eq. 32; median and max over the steps). Launches are counted by wrapping the runtime's ``Kernel.__call__`` (``taichi.lang.kernel_impl``,
``quadrants.lang.kernel``; every ``@ti.kernel`` call goes through it; the wrapper costs < 1 µs). The
runtime is ``femcontact.backend``'s (``FEMCONTACT_RUNTIME=quadrants|taichi``), named in the first line. With ``--kernel-time`` Taichi's
kernel profiler is switched on (``ti.init(kernel_profiler=True)``) and the kernels' own execution
time is reported too; then "python" = wall − kernel execution (profiling slows launches a little,
so the wall ms of that run are not the reference numbers).

Floor: the cost of one empty kernel launch (µs, median of 2000) and one bare ``bsr_matvec`` of
the scene's A (µs), the least any step can cost.

``--serial`` runs Taichi on one CPU thread: detection appends contacts with atomic counters, so
with several threads their order, and with it the round-off of every solve, changes from run to
run (the 40-body clutter then drifts apart by ~1e-5 between two runs of the same code); on one
thread two versions can be compared bit for bit. ``--save`` writes the final positions, velocities and per-step iteration counts of every run to
an .npz; ``--compare`` checks them against such a file (max relative position difference).
"""
import argparse
import statistics
import types
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))        # after PYTHONPATH: PYTHONPATH=/other/tree runs that tree

import femcontact as fc  # noqa: E402
from femcontact.backend import RUNTIME, ti  # noqa: E402
from femcontact.cli import load_scene_module  # noqa: E402


# ---------------------------------------------------------------- launch counting
def _kernel_class() -> type:
    """The runtime's kernel class whose ``__call__`` every kernel launch goes through (Taichi:
    ``taichi.lang.kernel_impl.Kernel``; quadrants: ``quadrants.lang.kernel.Kernel``)."""
    import importlib

    for mod in (f"{RUNTIME}.lang.kernel", f"{RUNTIME}.lang.kernel_impl"):
        try:
            cls = getattr(importlib.import_module(mod), "Kernel", None)
        except ImportError:
            continue
        if cls is not None:
            return cls
    raise RuntimeError(f"no Kernel class found in {RUNTIME}.lang")


class LaunchCounter:
    """Counts every kernel call and the wall time spent inside them."""

    def __init__(self):
        kernel_impl = types.SimpleNamespace(Kernel=_kernel_class())
        self.count = 0
        self.seconds = 0.0
        self.by_name: dict = {}
        self._orig = kernel_impl.Kernel.__call__
        counter = self

        def counted(kernel, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return counter._orig(kernel, *args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                counter.count += 1
                counter.seconds += dt
                name = getattr(kernel.func, "__name__", "?")
                n, s = counter.by_name.get(name, (0, 0.0))
                counter.by_name[name] = (n + 1, s + dt)

        kernel_impl.Kernel.__call__ = counted

    def reset(self):
        self.count, self.seconds, self.by_name = 0, 0.0, {}


# ---------------------------------------------------------------- scenes
def sphere_scene(solver: str) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=10.0, name="sphere_rest")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=7800.0, position=(0, 0, 0.05), name="ball")
    return scene


def clutter_scene(solver: str) -> fc.Scene:
    mod = load_scene_module(ROOT / "scenes" / "clutter.py")
    return mod.build(solver=solver, integrator="midpoint" if solver == "cond" else "euler")


def cube_scene(solver: str) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     duration=1.0, name="cube_drop_r8")
    scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=8),
                       fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0,
                                   rayleigh_alpha=1.0, rayleigh_beta=2e-3),
                       position=(0.0, 0.0, 0.1), name="cube")          # bottom 5 cm above the ground
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    return scene


def scene_file(name: str, **kw):
    """A builder for scenes/<name>.py (its ``build(solver=..., **kw)``)."""
    return lambda solver: load_scene_module(ROOT / "scenes" / f"{name}.py").build(solver=solver, **kw)


SCENES = {"sphere": (sphere_scene, 200), "clutter": (clutter_scene, 100), "cube": (cube_scene, 100),
          # issue 31's small Newton scenes (scenes/*.py as written; ``--warmup`` sets where measuring starts)
          "box": (scene_file("rigid_box_push"), 100), "cylinder": (scene_file("spring_cylinder"), 100),
          "clutter_rest": (scene_file("clutter"), 50), "panda": (scene_file("panda_hold"), 100),
          "gripper_ball": (scene_file("gripper_ball"), 50), "panda_ball": (scene_file("panda_soft_ball"), 50)}
# clutter from t = 0.5 s (SAP §VI-C's transient), at rest from 4 s; the gripper's ball from t = 0.6 s (lifted)
WARMUP = {"clutter": 50, "clutter_rest": 400, "gripper_ball": 60, "panda_ball": 60}


# ---------------------------------------------------------------- floor
@ti.kernel
def _empty():
    pass


def floor_us(sim) -> tuple:
    from femcontact.assembly.sparse import bsr_matvec

    _empty()
    ts = []
    for _ in range(2000):
        t0 = time.perf_counter()
        _empty()
        ts.append(time.perf_counter() - t0)
    A = sim.A
    y = fc.backend.vec3_array(A.n)
    A.matvec(sim.state.v, y)
    tm = []
    for _ in range(200):
        t0 = time.perf_counter()
        bsr_matvec(A.indptr, A.indices, A.blocks, sim.state.v, y, A.n)
        tm.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(ts), 1e6 * statistics.median(tm)


# ---------------------------------------------------------------- one run
def run(name: str, solver: str, warmup: int, steps: int, counter: LaunchCounter, kernel_time: bool) -> dict:
    build, default_steps = SCENES[name]
    steps = steps or default_steps
    sim = fc.Simulator(build(solver))
    for _ in range(warmup):
        sim.step()
    solver, solve_cpu = sim.contact_solver, [0.0]
    solve = solver.solve

    def timed_solve(problem):              # CPU time of the contact solve: not inflated by waiting for a core
        c0 = time.process_time()
        try:
            return solve(problem)
        finally:
            solve_cpu[0] += time.process_time() - c0
    solver.solve = timed_solve
    counter.reset()
    if kernel_time:
        ti.profiler.clear_kernel_profiler_info()
    t0, c0 = time.perf_counter(), time.process_time()
    stats = [sim.step() for _ in range(steps)]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    solver.solve = solve
    k_exec = ti.profiler.get_kernel_profiler_total_time() if kernel_time else float("nan")   # s
    launches, in_kernels, by_name = counter.count, counter.seconds, dict(counter.by_name)
    ms = [s.ms_total for s in stats]
    f_empty, f_matvec = floor_us(sim)
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:8]
    return {
        "scene": name, "solver": solver, "dof": 3 * sim.model.n_nodes, "steps": steps,
        "contacts": float(np.mean([s.contacts for s in stats])),
        "iterations": float(np.mean([s.iterations for s in stats])),
        "iters": np.array([s.iterations for s in stats]),
        "e_m_median": float(np.median([s.e_m for s in stats if s.e_m is not None] or [np.nan])),
        "e_m_max": float(np.max([s.e_m for s in stats if s.e_m is not None] or [np.nan])),
        "ms_min": min(ms), "ms_solve_min": min(s.ms_solve for s in stats), "solve_cpu_ms": 1e3 * solve_cpu[0] / steps,
        "ms_median": statistics.median(ms), "ms_mean": float(np.mean(ms)), "wall_ms": 1e3 * wall / steps,
        "cpu_ms": 1e3 * cpu / steps,
        "ms_detection": statistics.median(s.ms_detection for s in stats),
        "ms_assembly": statistics.median(s.ms_assembly for s in stats),
        "ms_solve": statistics.median(s.ms_solve for s in stats),
        "ms_advance": statistics.median(s.ms_total - s.ms_detection - s.ms_assembly - s.ms_solve for s in stats),
        "launches": launches / steps, "ms_in_kernels": 1e3 * in_kernels / steps,
        "ms_kernel_exec": 1e3 * k_exec / steps, "floor_empty_us": f_empty, "floor_matvec_us": f_matvec,
        "x": sim.state.positions(), "v": sim.state.velocities(), "top": top,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES))
    p.add_argument("--solvers", nargs="+", default=["lagged", "cond"])
    p.add_argument("--warmup", type=int, default=None,
                   help="steps before measuring (default 10; clutter 50 = t 0.5 s, clutter_rest 400 = t 4 s)")
    p.add_argument("--steps", type=int, default=0, help="measured steps (default per scene: 200/100/100)")
    p.add_argument("--kernel-time", action="store_true", help="switch on Taichi's kernel profiler")
    p.add_argument("--serial", action="store_true",
                   help="one CPU thread: detection's atomic counters then order the contacts the same way "
                        "every run, so two versions can be compared bit for bit (with threads the clutter "
                        "is not reproducible even on one version)")
    p.add_argument("--top", action="store_true", help="print the most launched kernels per run")
    p.add_argument("--save", type=str, default=None)
    p.add_argument("--compare", type=str, default=None)
    a = p.parse_args(argv)
    extra = {}
    if a.kernel_time:
        extra["kernel_profiler"] = True
    if a.serial:
        extra["cpu_max_num_threads"] = 1
    if extra:
        orig_init = ti.init
        ti.init = lambda *args, **kw: orig_init(*args, **{**kw, **extra})
    fc.backend.init()
    print(f"runtime: {RUNTIME} {fc.backend.RUNTIME_VERSION}")
    counter = LaunchCounter()
    ref = dict(np.load(a.compare)) if a.compare else None
    saved = {}
    hdr = (f"{'scene':8s} {'solver':7s} {'DOF':>5s} {'contacts':>8s} {'iters':>6s} {'ms med':>8s} {'ms mean':>8s} "
           f"{'detect':>7s} {'assem':>7s} {'solve':>8s} {'advance':>7s} {'launch':>7s} {'ms in k':>8s} {'us/l':>6s} "
           f"{'k exec':>7s} {'cpu ms':>7s} {'empty us':>8s} {'Av us':>7s} {'ms min':>7s} {'slv min':>7s} {'slv cpu':>7s} {'e_m med':>8s} {'e_m max':>8s}")
    print(hdr)
    for name in a.scenes:
        for solver in a.solvers:
            warmup = a.warmup if a.warmup is not None else WARMUP.get(name, 10)
            r = run(name, solver, warmup, a.steps, counter, a.kernel_time)
            line = (f"{name:8s} {solver:7s} {r['dof']:5d} {r['contacts']:8.1f} {r['iterations']:6.2f} "
                    f"{r['ms_median']:8.3f} {r['ms_mean']:8.3f} {r['ms_detection']:7.3f} {r['ms_assembly']:7.3f} "
                    f"{r['ms_solve']:8.3f} {r['ms_advance']:7.3f} {r['launches']:7.1f} {r['ms_in_kernels']:8.3f} "
                    f"{1e3 * r['ms_in_kernels'] / max(r['launches'], 1e-9):6.1f} "
                    f"{r['ms_kernel_exec']:7.3f} {r['cpu_ms']:7.3f} {r['floor_empty_us']:8.1f} {r['floor_matvec_us']:7.1f} "
                    f"{r['ms_min']:7.3f} {r['ms_solve_min']:7.3f} {r['solve_cpu_ms']:7.3f} {r['e_m_median']:8.1e} {r['e_m_max']:8.1e}")
            key = f"{name}_{solver}"
            if ref is not None and f"{key}_x" in ref:
                x0 = ref[f"{key}_x"]
                rel = float(np.max(np.abs(r["x"] - x0)) / max(np.max(np.abs(x0)), 1e-300))
                same = np.array_equal(ref[f"{key}_iters"], r["iters"])
                line += f"   Δx/|x| {rel:.2e} iters {'same' if same else 'DIFFER'}"
            print(line, flush=True)
            if a.top:
                for kname, (n, s) in r["top"]:
                    print(f"      {kname:32s} {n / r['steps']:6.1f}/step {1e6 * s / max(n, 1):7.1f} us/call")
            saved[f"{key}_x"], saved[f"{key}_v"], saved[f"{key}_iters"] = r["x"], r["v"], r["iters"]
    if a.save:
        np.savez(a.save, **saved)


if __name__ == "__main__":
    main()

"""Step overhead outside the contact solve, and COND's cost per iteration (issue 28). Not a timed test.

    PYTHONPATH=<checkout> python tools/bench_overhead.py [--part sphere cube] [--solvers cond lagged]
                                                       [--steps 300] [--repeat 3] [--profile]

Works on both runtimes (``FEMCONTACT_RUNTIME``); run it against two checkouts (PYTHONPATH picks
which femcontact is imported) to compare before and after in one sitting.

``sphere``: tools/bench_step.py's resting sphere (r 5 cm, steel, on a half-space, friction 0.5;
COND under the midpoint rule, lagged under implicit Euler). After 20 warm-up steps, ``--steps`` steps
are timed whole (``sim.step()``), with the contact solve (``contact_solver.solve``) timed inside
them; "outside" = step − solve: its minimum over all steps, and the median over steps (the least
of ``--repeat`` rounds). On a shared machine the minima are the robust numbers (a step that was
not preempted). A second pass times the parts per step by wrapping them (each wrapper adds
~0.3 µs), reported as minimum / median over ``--repeat`` × ``--steps`` steps:
assembly (``stepper.assemble``), detection (``CollisionPipeline.collide``), the anchors' apply,
the advance with the anchors' update (``update``, which runs ``fused.advance_and_remember``: one launch;
``advance_all`` + ``after_advance`` where there are no anchors), energy monitor (``after_step``). Launches per step count every kernel call of the runtime.

``cube``: the 2,187-DOF soft cube of tools/bench_step.py dropped onto the ground under COND (``--fem-step``
auto: the default FEM step, ``fem_sweeps`` Chebyshev sweeps; jacobi: without it); after
its first 40 steps (contact established) every step's µs per COND iteration
(``SolveStats.extra["us_per_iteration"]``: the iteration loop's wall time / iterations) is taken,
and in the same process one bare ``bsr_matvec`` of its A, one bare ``iterate_once`` (``cond_iterate``) and one
bare ``anderson_step`` launch, in turn, 400 rounds (``bare_launches``): their least and median µs, and the
iteration (``cond_iterate`` + ``anderson_step``, the two launches an iteration makes) in matvecs on the minima.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact import backend
from femcontact.backend import ti

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import _kernel_class, cube_scene, sphere_scene  # noqa: E402  (the same scenes, one launch hook)


class Launches:
    """Counts kernel launches by name while active."""

    def __init__(self):
        self.K = _kernel_class()
        self.orig = self.K.__call__
        self.by_name: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.least: dict[str, float] = {}

    def __enter__(self):
        orig, by_name, seconds, least = self.orig, self.by_name, self.seconds, self.least

        def counted(kernel, *a, **kw):
            name = kernel.func.__name__
            by_name[name] = by_name.get(name, 0) + 1
            t0 = time.perf_counter()
            try:
                return orig(kernel, *a, **kw)
            finally:
                dt = time.perf_counter() - t0
                seconds[name] = seconds.get(name, 0.0) + dt
                least[name] = min(least.get(name, dt), dt)

        self.K.__call__ = counted
        return self

    def __exit__(self, *exc):
        self.K.__call__ = self.orig


def _wrap(obj, attr: str, acc: dict, key: str) -> None:
    f = getattr(obj, attr)

    def timed(*a, **kw):
        t0 = time.perf_counter()
        try:
            return f(*a, **kw)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t0

    setattr(obj, attr, timed)


def sphere(solver: str, steps: int, repeat: int, profile: bool) -> dict:
    sim = fc.Simulator(sphere_scene(solver))
    for _ in range(20):
        sim.step()
    solve_t = {}
    _wrap(sim.contact_solver, "solve", solve_t, "solve")
    outside, total = [], []
    for _ in range(repeat):
        o, t = [], []
        for _ in range(steps):
            solve_t["solve"] = 0.0
            t0 = time.perf_counter()
            sim.step()
            dt = time.perf_counter() - t0
            t.append(dt)
            o.append(dt - solve_t["solve"])
        outside.append(o)
        total.append(t)
    outside_min = min(min(o) for o in outside)
    outside = [statistics.median(o) for o in outside]
    total = [statistics.median(t) for t in total]
    # parts
    import femcontact.simulator as simmod
    parts: dict[str, float] = {}
    _wrap(getattr(simmod, "stepper", sim), "assemble", parts, "assembly")    # the step calls stepper.assemble
    if sim.collision is not None:
        _wrap(sim.collision, "collide", parts, "detection")
    if sim.anchors is not None:
        # the update runs the advance in its launch (fused.advance_and_remember): timed as one part
        _wrap(sim.anchors, "apply", parts, "anchors_apply")
        _wrap(sim.anchors, "update", parts, "advance+anchors_update")
    if sim.energy_monitor is not None:
        _wrap(sim.energy_monitor, "after_step", parts, "energy")
    adv_name = next((n for n in ("advance_step", "advance_all") if hasattr(simmod.integ, n)), None)
    orig_adv = getattr(simmod.integ, adv_name)
    holder = type("H", (), {})()
    setattr(holder, adv_name, orig_adv)
    _wrap(holder, adv_name, parts, "advance")
    setattr(simmod.integ, adv_name, getattr(holder, adv_name))
    for system in sim.systems:
        _wrap(system, "after_advance", parts, "advance")
    solve_t["solve"] = 0.0
    per_step: dict[str, list] = {}
    for _ in range(repeat * steps):
        parts.clear()
        sim.step()
        for k, v in parts.items():
            per_step.setdefault(k, []).append(v)
    with Launches() as L:
        for _ in range(steps):
            sim.step()
    setattr(simmod.integ, adv_name, orig_adv)
    parts = {k: 1e6 * min(v) for k, v in per_step.items()}
    parts_med = {k: 1e6 * statistics.median(v) for k, v in per_step.items()}
    launches = {k: v / steps for k, v in L.by_name.items()}
    launch_us = {k: 1e6 * v / max(L.by_name[k], 1) for k, v in L.seconds.items()}
    launch_min_us = {k: 1e6 * v for k, v in L.least.items()}
    prof = None
    if profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(steps):
            sim.step()
        pr.disable()
        prof = pstats.Stats(pr)
    return {"outside_us": 1e6 * min(outside), "outside_min_us": 1e6 * outside_min, "step_us": 1e6 * min(total),
            "parts_us": parts, "parts_med_us": parts_med,
            "launches": sum(launches.values()), "by_name": launches, "launch_us": launch_us,
            "launch_min_us": launch_min_us, "prof": prof,
            "iters": float(np.mean([s.iterations for s in sim.stats[-steps:]]))}


def floor(sim) -> tuple[float, float]:
    """(µs of one empty launch, µs of one bare bsr_matvec of sim.A), medians."""
    from femcontact.assembly.sparse import bsr_matvec

    x = backend.vec3_array(1)

    @ti.kernel
    def empty(a: ti.types.ndarray()):
        pass

    A = sim.A
    y = backend.vec3_array(A.n)
    empty(x)
    A.matvec(sim.state.v, y)

    def med(f, reps):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(ts)

    return (med(lambda: empty(x), 2000),
            med(lambda: bsr_matvec(A.indptr, A.indices, A.blocks, sim.state.v, y, A.n), 400))


def cube(steps: int, fem_step: str = "auto") -> dict:
    scene = cube_scene("cond")
    scene.solver_options["fem_step"] = fem_step
    sim = fc.Simulator(scene)
    for _ in range(40):
        sim.step()
    us, its = [], []
    with Launches() as L:
        for _ in range(steps):
            sim.step()
            us.append(sim.last_solve.extra["us_per_iteration"])
            its.append(sim.last_solve.iterations)
    total_its = sum(its)
    per_it = {k: v / total_its for k, v in L.by_name.items()}
    e_us, mv_us = floor(sim)
    sol = sim.contact_solver
    nc = int(sim.contacts.count)
    nvx = sol._last_nv
    bare = bare_launches(sim, nvx, nc)
    return {"us_per_it": statistics.median(us), "us_per_it_min": min(us), "matvec_us": mv_us,
            "empty_us": e_us, "bare_iterate_us": bare["iterate"][1], "iters": float(np.mean(its)),
            "launches_per_it": per_it, "contacts": nc, "bare": bare, "sweeps": sol._fem if sol.fem_rows else 0}


def bare_launches(sim, nvx: int, nc: int, rounds: int = 400) -> dict:
    """(least, median) µs of one bare launch of ``bsr_matvec`` of sim.A, ``cond_iterate`` (``iterate_once``)
    and ``anderson_step`` (the mixer's ``advance``), launched in turn in each of ``rounds`` rounds so the three
    see the same load; the iteration's ratio to the matvec is taken on the minima (the launches that were
    not preempted)."""
    from femcontact.assembly.sparse import bsr_matvec

    A, sol = sim.A, sim.contact_solver
    y = backend.vec3_array(A.n)
    mixer = sol._mixer if sol.options.acceleration == "anderson" else None
    calls = {"matvec": lambda: bsr_matvec(A.indptr, A.indices, A.blocks, sim.state.v, y, A.n),
             "iterate": lambda: sol.iterate_once(sim.A, nvx, nc, 1.0, 1.0)}
    if mixer is not None:
        calls["anderson"] = lambda: mixer.advance(sol.V, sol.n0 + nvx)
    ts = {k: [] for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    return {k: (1e6 * min(v), 1e6 * statistics.median(v)) for k, v in ts.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", nargs="+", default=["sphere", "cube"], choices=["sphere", "cube"])
    p.add_argument("--solvers", nargs="+", default=["cond", "lagged"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="cProfile the sphere's steps (top 25 by tottime)")
    p.add_argument("--launches", action="store_true",
                   help="print launches per step by kernel, mean and least µs per launch inside the steps")
    p.add_argument("--fem-step", nargs="+", default=["auto"],
                   help="COND fem_step of the cube (auto: the default, fem_sweeps Chebyshev sweeps; jacobi: none)")
    a = p.parse_args(argv)
    backend.init()
    src = fc.__file__
    print(f"runtime {backend.RUNTIME} {backend.RUNTIME_VERSION}  femcontact {src}", flush=True)
    if "sphere" in a.part:
        for solver in a.solvers:
            r = sphere(solver, a.steps, a.repeat, a.profile)
            parts = "  ".join(f"{k} {v:.0f}/{r['parts_med_us'][k]:.0f}" for k, v in sorted(r["parts_us"].items()))
            print(f"sphere {solver:7s} step {r['step_us']:7.1f} us  outside solve: min {r['outside_min_us']:6.1f} "
                  f"median {r['outside_us']:7.1f} us  launches/step {r['launches']:5.1f}  iters {r['iters']:.1f}  "
                  f"parts min/median (us): {parts}  sum of minima {sum(r['parts_us'].values()):.0f}", flush=True)
            if a.launches:
                for k, v in sorted(r["by_name"].items(), key=lambda kv: -kv[1]):
                    print(f"      {k:36s} {v:5.2f}/step {r['launch_us'][k]:7.1f} us/launch (least "
                          f"{r['launch_min_us'][k]:6.1f})")
            if r["prof"] is not None:
                r["prof"].sort_stats("tottime").print_stats(25)
    for fem_step in (a.fem_step if "cube" in a.part else []):
        r = cube(min(a.steps, 60), fem_step)
        b = r["bare"]
        mv = b["matvec"][0]
        it = b["iterate"][0] + b.get("anderson", (0.0, 0.0))[0]
        print(f"cube cond fem_step {fem_step}  DOF 2187  contacts {r['contacts']}  iters/step {r['iters']:.0f}  "
              f"us/iteration median {r['us_per_it']:.1f} (min {r['us_per_it_min']:.1f})  empty launch "
              f"{r['empty_us']:.1f} us  ratio {r['us_per_it'] / r['matvec_us']:.2f} matvecs (median/median)", flush=True)
        bare = "  ".join(f"{k} {lo:.1f}/{med:.1f}" for k, (lo, med) in b.items())
        print(f"    bare launches, least/median us: {bare}  iteration (cond_iterate + anderson_step) {it:.1f} us = "
              f"{it / mv:.2f} matvecs (least); FEM sweeps {r['sweeps']}", flush=True)
        if a.launches:
            for k, v in sorted(r["launches_per_it"].items(), key=lambda kv: -kv[1]):
                print(f"      {k:36s} {v:6.3f}/iteration")


if __name__ == "__main__":
    sys.exit(main())

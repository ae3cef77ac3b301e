"""Newton path (Lagged, SAP) side by side with COND on the same scenes in the same run (issue 6).

    python tools/bench_newton.py [--scenes mat12 mat26 pile] [--solvers lagged sap cond] [--steps 10]
                                 [--integrator euler] [--cond-tol 1e-5] [--linear auto [cholmod schur]] [--arch cpu]
                                 [--option friction_majorize_above=inf] [--ordering auto|metis|amd]
                                 [--settle 0.09]

Scenes: ``mat12`` / ``mat26`` the dragged mat (scenes/mat_drag.py, 1053 / 4428 DOF) measured after
0.4 s (the clamp has lifted and pulls, the mat lies on the floor); ``pile`` the dropped pile
(scenes/pile.py, 27 soft cubes and balls, 6009 DOF) measured after 0.3 s (the objects land on
the ground and on each other); ``box`` the stiff box of the earlier version, pushed on the ground;
``clutter`` the SAP paper's 40 rigid bodies in a box (scenes/clutter.py, 240 DOF) measured after
0.5 s (the falling columns collapse: SAP §VI-C's transient) and ``clutter_rest`` after 4 s (at
rest); ``cube8`` / ``cube16`` / ``cube26`` / ``cube33`` the soft-cube drop of the benchmarks
(femcontact/bench/cases.py, 2,187 / 14,739 / 59,049 / 118,098 DOF) measured from 0.1 s (the impact)
on (``--settle`` moves the start); ``matI`` / ``softgrip`` the COND Table I mat (scenes/mat_drag.py at
resolution 26) and soft gripper (scenes/soft_fingers_cylinder.py at resolution 20, 14,118 DOF) measured
from 0.4 s and 0.2 s (the fingers hold the cylinder).
Each solver runs the scene from the start (so each follows its own trajectory) and measures
``--steps`` steps. COND runs once per ``--cond-tol`` value. Per solver it prints DOF, mean contacts, Newton iterations (COND: VL-FPI
iterations), line-search trials per Newton iteration and linear-solve ms (Newton path only: H's
assembly, factorization and solve and the direction's products; the Schur path: Ã's factorization too), total solver ms per step, the momentum error
e_m of SAP eq. 32 (evaluated by ``solvers.sap.momentum_error`` on every solver's output, so
COND's stopping threshold is measured on the same scale; median and max over the steps) and the
deepest penetration at the end, the largest relative difference ``dv`` of v̂ from the first
``--linear`` path's, and the median CPU time per solve (``cpu ms``, the process's: the measure that a
shared machine's load leaves alone where the solve runs on one thread, OPENBLAS_NUM_THREADS=1). With CHOLMOD (``--linear auto`` up to ``DIRECT_MAX_DOFS``) a second
line splits the linear solve per contact step: numeric factorizations (count, ms), solves, symbolic
analyses with their ordering (``--ordering``: the ``CholmodSolver`` ordering), and the process's
peak RSS so far.

Several ``--linear`` values (e.g. ``--linear cholmod schur``: the full-H path and the Schur path of
``solvers/newton_schur.py``): the scene settles under the first; each measured step's problem is then
solved by every one from the same warm start (the first one's answer kept), one row each, and ``dv``
gives the largest relative difference of v̂ from the first one's over the steps: before and after
on identical problems in one run.

Integrator: implicit Euler for every solver by default (the form SAP and ICF are derived in;
COND supports it too), so the columns compare solvers, not integrators. ``--integrator
midpoint`` runs the scenes as written.
"""
import argparse
import resource
import time
from pathlib import Path

import numpy as np

import femcontact as fc
from femcontact.bench.cases import cube_drop
from femcontact.cli import load_scene_module
from femcontact.solvers import make_contact_solver
from femcontact.solvers.newton_linear import CholmodSolver
from femcontact.solvers.newton_schur import SchurSolver
from femcontact.solvers.sap import momentum_error

ROOT = Path(__file__).resolve().parents[1]


def load_scene(name: str):
    """Import scenes/<name>.py (through the CLI's scene loader)."""
    return load_scene_module(ROOT / "scenes" / f"{name}.py")


def box_scene(solver: str) -> fc.Scene:
    scene = fc.Scene(dt=1e-2, solver=solver)
    mesh = fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=4, center=(0, 0, 0.05))
    body = scene.add_fem_body(mesh, fc.Material(youngs_modulus=1e7, poisson_ratio=0.3, density=1000.0,
                                                rayleigh_beta=1e-3), name="box")
    body.add_force(lambda t: np.array([1.5 * 0.5 * 1.0 * 9.81 if t >= 0.2 else 0.0, 0.0, 0.0]))
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.5, name="ground")
    return scene


SCENES = {
    # name: (builder(solver) -> Scene, settle time in s)
    "mat12": (lambda solver: load_scene("mat_drag").build(resolution=12, solver=solver), 0.4),
    "mat26": (lambda solver: load_scene("mat_drag").build(resolution=26, solver=solver), 0.4),
    "pile": (lambda solver: load_scene("pile").build(solver=solver), 0.3),
    "box": (box_scene, 0.2),
    "clutter": (lambda solver: load_scene("clutter").build(solver=solver), 0.5),
    "clutter_rest": (lambda solver: load_scene("clutter").build(solver=solver), 4.0),
    "cube8": (lambda solver: cube_drop(8, solver), 0.1),
    "cube16": (lambda solver: cube_drop(16, solver), 0.1),
    "cube26": (lambda solver: cube_drop(26, solver), 0.1),
    "cube33": (lambda solver: cube_drop(33, solver), 0.1),
    "matI": (lambda solver: load_scene("mat_drag").build(resolution=26, solver=solver), 0.4),
    "softgrip": (lambda solver: load_scene("soft_fingers_cylinder").build(resolution=20, solver=solver), 0.2),
}


class _CholmodClock:
    """Stands in for ``cvxopt.cholmod`` inside one CholmodSolver: counts and times its calls."""

    def __init__(self, cholmod):
        self._cholmod = cholmod
        self.ms = {"symbolic": 0.0, "numeric": 0.0, "solve": 0.0}
        self.calls = {"symbolic": 0, "numeric": 0, "solve": 0}

    def __getattr__(self, name):
        fn = getattr(self._cholmod, name)
        if name not in self.ms:
            return fn

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ms[name] += 1e3 * (time.perf_counter() - t0)
                self.calls[name] += 1
        return timed


class _Timed:
    """Wraps the contact solvers of one scene (label -> solver): each problem is solved by every one
    from the same warm start, the first one's answer kept; per label its wall time and e_m (SAP eq. 32)
    per solve, and how far its v̂ is from the first one's."""

    def __init__(self, paths: dict):
        self.paths = paths
        first = next(iter(paths.values()))
        self.name = getattr(first, "name", "?")
        self.records = {label: [] for label in paths}

    def solve(self, problem):
        labels = list(self.paths)
        warm = problem.v_hat.to_numpy().copy() if len(labels) > 1 else None
        answers = {}
        for label in reversed(labels):            # the first one last: its answer stays in the problem
            if warm is not None:
                problem.v_hat.from_numpy(warm)
            t0, c0 = time.perf_counter(), time.process_time()
            st = self.paths[label].solve(problem)
            ms, cpu_ms = 1e3 * (time.perf_counter() - t0), 1e3 * (time.process_time() - c0)
            ex = getattr(st, "extra", None) or {}
            answers[label] = problem.v_hat.to_numpy().copy() if warm is not None else None
            self.records[label].append({
                "iterations": st.iterations, "ms": ms, "cpu_ms": cpu_ms, "ms_linear": ex.get("ms_linear", np.nan),
                "ls": ex.get("line_search_iterations", np.nan), "contacts": problem.contacts.count,
                "e_m": momentum_error(problem), "converged": st.converged, "path": ex.get("linear_solver"),
                "answer": answers[label]})
        for label in labels:
            rec, ref = self.records[label][-1], answers[labels[0]]
            a = rec.pop("answer")
            rec["dv"] = 0.0 if a is None else float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300))
        return st

    def memory(self):
        return {}

    def restore(self, memory):
        pass


def _users(solver) -> list:
    """A Newton solver's CHOLMOD users: its full-H and its Schur solver, where it has them."""
    return [u for u in (getattr(solver, "linear", None), getattr(solver, "schur", None))
            if isinstance(u, (CholmodSolver, SchurSolver))]


def _clocks(solver) -> tuple:
    """(clock, CHOLMOD users) for a Newton solver: every cvxopt.cholmod call of its users counted and timed."""
    users = _users(solver)
    if not users:
        return None, users
    clock = _CholmodClock(users[0]._cholmod)
    for u in users:
        u._cholmod = clock
    return clock, users


def linear_options(lin: str) -> dict:
    """Solver options of one ``--linear`` entry: a linear solver, "+reuse" appended for ``factor_reuse``."""
    name, plus, extra = lin.partition("+")
    if plus and extra != "reuse":
        raise SystemExit(f"--linear {lin!r}: the only suffix is '+reuse'")
    return {"linear_solver": name, **({"factor_reuse": True} if plus else {})}


def _reuse(solver):
    """(factorizations, restarts per reused step) of a Newton solver's Schur path with factor reuse, else None."""
    schur = getattr(solver, "schur", None)
    if schur is None or not schur.reuse:
        return None
    return schur.factorizations, list(schur.restarts)


def run(scene_name: str, solver: str, steps: int, integrator: str, cond_tol: float, cond_max_iter: int,
        linear: list, options: dict = None, ordering: str = "auto", settle: float = None) -> dict:
    """One row per entry of ``linear`` (COND: one row), the scene settled under the first."""
    build, default_settle = SCENES[scene_name]
    settle = default_settle if settle is None else settle
    scene = build(solver)
    scene.integrator = integrator
    if solver == "cond":
        scene.solver_options = {**scene.solver_options, "tol": cond_tol, "max_iter": cond_max_iter}
        linear = ["-"]
    else:
        scene.solver_options = {**scene.solver_options, **linear_options(linear[0]), **(options or {})}
    sim = fc.Simulator(scene)
    for u in _users(sim.contact_solver):
        u.ordering = ordering
    sim.run(duration=settle)
    paths = {linear[0]: sim.contact_solver}
    for lin in linear[1:]:
        base = {k: v for k, v in scene.solver_options.items() if k != "factor_reuse"}
        paths[lin] = make_contact_solver(solver, sim.model, {**base, **linear_options(lin)})
        for u in _users(paths[lin]):
            u.ordering = ordering
    clocks = {label: _clocks(path) for label, path in paths.items()}
    timed = _Timed(paths)
    sim.contact_solver = timed
    analyses0 = {label: [u.analyses for u in users] for label, (_, users) in clocks.items()}
    sim.run(steps=steps)
    c = sim.contacts.to_numpy() if sim.contacts is not None and sim.contacts.count else {"phi": np.zeros(1)}
    pen = 1e3 * max(0.0, -float(np.min(c["phi"])))
    out = {}
    for label, r in timed.records.items():
        if not r:
            out[label] = {"dof": sim.model.n_dofs, "solves": 0}
            continue
        em = np.array([x["e_m"] for x in r])
        clock, users = clocks[label]
        split = None
        if clock is not None:
            k = max(1, sum(x["contacts"] > 0 for x in r))
            split = {"numeric": clock.calls["numeric"] / k, "ms_numeric": clock.ms["numeric"] / k,
                     "ms_solve": clock.ms["solve"] / k, "ms_symbolic": clock.ms["symbolic"] / k,
                     "analyses": sum(u.analyses for u in users) - sum(analyses0[label]),
                     "ordering": "/".join(sorted({str(u.ordering_used) for u in users if u.ordering_used}))}
        paths_used = sorted({str(x["path"]) for x in r})
        out[label] = {
            "split": split, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "dof": sim.model.n_dofs, "solves": len(r), "contacts": np.mean([x["contacts"] for x in r]),
            "iters": np.mean([x["iterations"] for x in r]), "max_iters": max(x["iterations"] for x in r),
            "iter_list": [x["iterations"] for x in r],
            "ls_per_iter": np.sum([x["ls"] for x in r]) / max(1, sum(x["iterations"] for x in r)),
            "ms_linear": np.mean([x["ms_linear"] for x in r]), "ms": np.mean([x["ms"] for x in r]),
            "ms_median": np.median([x["ms"] for x in r]), "ms_min": np.min([x["ms"] for x in r]),
            "cpu_median": np.median([x["cpu_ms"] for x in r]), "cpu_mean": np.mean([x["cpu_ms"] for x in r]),
            "cpu_list": [round(x["cpu_ms"]) for x in r], "dv_list": [x["dv"] for x in r],
            "reuse": _reuse(paths[label]),
            "e_m": np.median(em), "e_m_max": em.max(), "dv": max(x["dv"] for x in r),
            "converged": sum(x["converged"] for x in r), "pen_mm": pen, "paths": "+".join(paths_used)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", nargs="+", default=["mat12", "mat26", "pile"], choices=sorted(SCENES))
    ap.add_argument("--solvers", nargs="+", default=["lagged", "sap", "cond"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--integrator", default="euler", choices=["euler", "midpoint"])
    ap.add_argument("--cond-tol", type=float, nargs="+", default=[1e-5, 1e-7],
                    help="COND stopping thresholds (relative step norm); one COND row per value")
    ap.add_argument("--cond-max-iter", type=int, default=3000)
    ap.add_argument("--linear", nargs="+", default=["auto"],
                    help="Newton linear solver(s): auto, cholmod, splu, pcg, schur; several: each measured "
                         "problem solved by each (the scene settles under the first)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Newton-path solver option (repeatable), e.g. friction_majorize_above=inf")
    ap.add_argument("--ordering", default="auto", choices=["auto", "metis", "amd"],
                    help="CHOLMOD fill-reducing ordering (newton_linear.CholmodSolver)")
    ap.add_argument("--settle", type=float, default=None, help="start of the measured steps (s; default per scene)")
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--precision", default="f64")
    args = ap.parse_args()
    options = {}
    for item in args.option:
        key, _, value = item.partition("=")
        for cast in (int, float, str):               # numbers ("inf" included), else the string
            try:
                options[key] = cast(value)
                break
            except ValueError:
                continue
    cfg = fc.backend.init(args.arch, args.precision)
    print(f"backend {cfg['arch']} {cfg['precision']}; integrator {args.integrator}; {args.steps} measured steps "
          f"per run; COND max_iter {args.cond_max_iter}; Newton linear solver {args.linear}")
    print(f"{'scene':>8} {'solver':>16} {'DOF':>6} {'contacts':>8} {'iters':>7} {'(max)':>6} {'conv':>5} "
          f"{'ls/it':>6} {'lin ms':>8} {'solver ms':>10} {'(median)':>9} {'(min)':>8} {'e_m':>9} {'(max)':>9} "
          f"{'pen mm':>7} {'dv':>8} {'cpu ms':>8}")
    for name in args.scenes:
        runs = [(s, None) for s in args.solvers if s != "cond"]
        runs += [("cond", tol) for tol in args.cond_tol] if "cond" in args.solvers else []
        for solver, tol in runs:
            rows = run(name, solver, args.steps, args.integrator, tol, args.cond_max_iter, args.linear,
                       options if solver != "cond" else None, args.ordering, args.settle)
            for lin, r in rows.items():
                label = f"cond {tol:.0e}" if tol is not None else (solver if lin == "auto" else f"{solver}/{lin}")
                if not r["solves"]:
                    print(f"{name:>8} {label:>16} {r['dof']:>6}  (no contacts in the measured steps)")
                    continue
                lin_ms = "-" if not np.isfinite(r["ms_linear"]) else f"{r['ms_linear']:.1f}"
                lsi = "-" if not np.isfinite(r["ls_per_iter"]) else f"{r['ls_per_iter']:.1f}"
                print(f"{name:>8} {label:>16} {r['dof']:>6} {r['contacts']:>8.0f} {r['iters']:>7.1f} "
                      f"{r['max_iters']:>6d} {r['converged']:>2d}/{r['solves']:<2d} {lsi:>6} {lin_ms:>8} {r['ms']:>10.1f} "
                      f"{r['ms_median']:>9.1f} {r['ms_min']:>8.1f} {r['e_m']:>9.2e} {r['e_m_max']:>9.2e} "
                      f"{r['pen_mm']:>7.3f} {r['dv']:>8.1e} {r['cpu_median']:>8.1f}", flush=True)
                sp_ = r["split"]
                if sp_ is not None:
                    print(f"{'':>25} path {r['paths']}; iterations {r['iter_list']}; per contact step: "
                          f"{sp_['numeric']:.1f} factorizations {sp_['ms_numeric']:.0f} ms, solves "
                          f"{sp_['ms_solve']:.0f} ms, symbolic {sp_['ms_symbolic']:.0f} ms; {sp_['analyses']} "
                          f"analyses ({sp_['ordering']}); peak RSS {r['rss_mb']:.0f} MB", flush=True)
                print(f"{'':>25} cpu ms per step {r['cpu_list']} (mean {r['cpu_mean']:.0f})"
                      + ("" if r["reuse"] is None else f"; factor reuse: {r['reuse'][0]} factorizations "
                         f"since the start, restarts per reused step {r['reuse'][1]}; dv per step "
                         + " ".join(f"{d:.0e}" for d in r["dv_list"])), flush=True)


if __name__ == "__main__":
    main()

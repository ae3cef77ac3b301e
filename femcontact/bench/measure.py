"""The measuring loop: settle a case once, hand it to each solver, time the steps, check the answers.

A case is settled once per benchmark run (``Settled``): it runs its settle time under the Newton
path's Lagged solver (few iterations per step, so settling is cheap whatever the measured solver
costs) and is saved as a checkpoint. Each measured solver starts from that checkpoint in the same
Simulator (``Simulator.contact_solver`` replaced by a fresh solver), takes one unmeasured warm-up
step (kernels compile, warm starts fill) and then ``steps`` measured steps; so the solvers of a
row solve the same contact configuration.

Per measured step the wrapper records the solver's own wall time, iterations, convergence,
contacts, its residual history, and the SAP eq. 32 momentum error e_m
(``solvers.sap.momentum_error``) of the solution, evaluated outside the timings; the Delassus
solvers (pgs, incp) evaluate e_m inside their solve, and that time (``ms_certificate``) is
taken off too.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import FemcontactError
from ..simulator import Simulator
from ..solvers import make_contact_solver
from ..solvers.sap import momentum_error



class Recorder:
    """Wraps a contact solver: per solve its wall time (ms), iterations, convergence, contacts,
    residual history and e_m (SAP eq. 32, host side, not in the time)."""

    def __init__(self, inner, history: bool = False):
        self.inner, self.name, self.keep_history = inner, inner.name, history
        self.records: list[dict] = []
        self.ms_check = 0.0          # time spent on e_m: inside the step's solve time, not in "ms"

    def solve(self, problem):
        t0 = time.perf_counter()
        st = self.inner.solve(problem)
        ms = 1e3 * (time.perf_counter() - t0)
        extra = getattr(st, "extra", None) or {}      # a contact-free step: the linear solve's stats
        ms -= float(extra.get("ms_certificate", 0.0))
        contacts = int(problem.contacts.count)
        t1 = time.perf_counter()
        e_m = momentum_error(problem) if contacts else float("nan")
        self.ms_check += 1e3 * (time.perf_counter() - t1)
        rec = {"ms": ms, "iterations": int(st.iterations), "converged": bool(st.converged), "contacts": contacts,
               "e_m": e_m}
        if self.keep_history:
            hist = extra.get("residuals", getattr(self.inner, "history", None)) if contacts else None
            rec["history"] = [float(h) for h in hist] if hist is not None else []
        self.records.append(rec)
        return st

    def memory(self) -> dict:
        return self.inner.memory()

    def restore(self, memory: dict) -> None:
        self.inner.restore(memory)


def solver_options(solver: str, acceleration: Optional[str] = None, **options) -> dict:
    """Options of a measured solver: COND's ``acceleration`` (ignored by the others) and the options
    given (a None is passed on: COND's ``momentum_tol=None`` turns its e_m stop off); the rest stay
    the solver's defaults."""
    opts = dict(options)
    if solver == "cond" and acceleration is not None:
        opts["acceleration"] = acceleration
    return opts


SETTLE_SOLVER = "lagged"


class Settled:
    """``case`` built (under COND's integrator choice) and run for ``settle`` s under
    ``SETTLE_SOLVER``, then saved to ``folder`` as a checkpoint that ``measure`` restores."""

    def __init__(self, case, folder: Path, settle: Optional[float] = None):
        self.case = case
        self.sim = Simulator(case.build("cond"))
        self.own = self.sim.contact_solver
        self.sim.contact_solver = make_contact_solver(SETTLE_SOLVER, self.sim.model, {})
        self.settle = case.settle if settle is None else settle
        if self.settle > 0:
            self.sim.run(duration=self.settle)
        self.sim.contact_solver = self.own
        self.path = self.sim.save_checkpoint(Path(folder) / f"{case.scene}_{case.size}.npz")

    def restore(self, solver: str, options: dict):
        """The Simulator back at the settled state, with a fresh ``solver`` (options) in charge."""
        sim = self.sim
        sim.contact_solver = self.own
        sim.load_checkpoint(self.path)
        sim.contact_solver = make_contact_solver(solver, sim.model, options)
        return sim


def _prime(settled: Settled, solver: str, options: dict, steps: int) -> None:
    """Step ``solver`` from the settled state until its first contact solve (at most ``steps`` + 1
    steps, unmeasured): a case without contacts at its start (the cube drop) would otherwise
    compile the solver's contact kernels inside the measured steps."""
    sim = settled.restore(solver, options)
    rec = Recorder(sim.contact_solver)
    sim.contact_solver = rec
    for _ in range(steps + 1):
        sim.step()
        if rec.records[-1]["contacts"]:
            return


def measure(settled: Settled, solver: str, steps: int, options: Optional[dict] = None,
            history: bool = False) -> dict:
    """From the settled state, run one warm-up and ``steps`` measured steps under ``solver`` with
    ``options``; return the row: DOF, mean and max contacts, dynamics (assembly), detection and
    solver ms per step, mean iterations, ms per iteration, converged share, median and largest e_m, and (with
    ``history``) each measured step's residual history."""
    case = settled.case
    options = dict(options or {})
    sim = settled.restore(solver, options)
    rec = Recorder(sim.contact_solver, history)
    sim.contact_solver = rec
    sim.step()                                           # warm-up: compile, fill warm starts
    if not rec.records[-1]["contacts"]:
        _prime(settled, solver, options, steps)          # no contact yet: compile on an unmeasured run
        sim = settled.restore(solver, options)
        rec = Recorder(sim.contact_solver, history)
        sim.contact_solver = rec
        sim.step()
    rec.records.clear()
    sim.stats.clear()
    for _ in range(steps):
        sim.step()
    st, r = sim.stats, rec.records
    if not r:
        raise FemcontactError(f"{case.label}: no contact solve in the measured steps")
    solve_ms = float(np.mean([x["ms"] for x in r]))
    iters = float(np.mean([x["iterations"] for x in r]))
    em = [x["e_m"] for x in r if np.isfinite(x["e_m"])]
    row = {"scene": case.scene, "size": case.size, "solver": solver, "dof": int(sim.model.n_dofs),
           "contacts": float(np.mean([x["contacts"] for x in r])), "max_contacts": int(max(x["contacts"] for x in r)),
           "dynamics_ms": float(np.mean([x.ms_assembly for x in st])),
           "detection_ms": float(np.mean([x.ms_detection for x in st])),
           "solver_ms": solve_ms, "iterations": iters, "ms_per_iteration": solve_ms / max(iters, 1.0),
           "converged": float(np.mean([x["converged"] for x in r])),
           "e_m": float(np.median(em)) if em else float("nan"), "e_m_max": float(max(em)) if em else float("nan"),
           "steps": steps,
           "settle_s": settled.settle}
    row["constraints"] = 3 * row["max_contacts"]
    if history:
        row["histories"] = [x["history"] for x in r]
    return row

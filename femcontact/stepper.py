"""One time step of a Simulator (docs/ARCHITECTURE.md, "Following one step"): assemble, collide,
solve, advance, observe. Orchestration only: each stage is a call into the package that owns it.

1. ``assemble``: loads and prescribed motions (``bodies/prescribed.py``), the inertial part
   (``assembly/integrator.py``), each body system's forces and stiffness (``bodies/system.py``), the
   observers' ``before_elimination``, the prescribed blocks eliminated;
2. ``CollisionPipeline.collide`` (``contact/pipeline.py``) and ``StictionAnchors.apply``;
3. ``contact_solver.solve(StepProblem)`` (``solvers/``);
4. the advance (``integ.advance_all``, or with anchors ``fused.advance_and_remember``), each system's
   ``after_advance``, the divergence check, time and step counters;
5. each observer's ``after_step`` (``StepObserver``: the energy monitor, any a caller adds to
   ``Simulator.observers``), then the ``StepStats``.
"""
from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from . import backend, fused
from .assembly import integrator as integ
from .contact.anchors import offset_work
from .errors import SimulationError
from .solvers.base import SolveStats, StepProblem

MAX_SPEED = 1e4  # m/s; faster than this is taken as a diverged step
# the cause a step's divergence names for a rod under the midpoint rule (the energy monitor's wording too)
RODS_MIDPOINT_CAUSE = ("rods under the midpoint rule, which has no numerical damping (a cable whipping faster than "
                       "the step resolves gains energy: use integrator='euler' or a smaller dt)")


@dataclass
class StepStats:
    """What one step cost and did."""

    step: int
    time: float                 # simulated time at the end of the step, s
    iterations: int = 0         # linear / contact solver iterations
    residual: float = 0.0       # final relative residual
    contacts: int = 0
    ms_detection: float = 0.0
    ms_assembly: float = 0.0
    ms_solve: float = 0.0
    ms_total: float = 0.0
    e_m: Optional[float] = None  # the contact solver's final momentum error (SAP eq. 32), where it reports one
    converged: bool = True      # the solve met its stop (False: e.g. COND at max_iter, SolveStats.extra["stop"])


@dataclass
class StepRecord:
    """What an observer is shown after a step: the step's problem (model, State at its end, A, b, v̂,
    contacts with their impulses, coefficients), the solve's stats, ``f_ext`` (the loads alone), whether
    there are loads, and ``offset_work()`` (``Simulator.contact_offset_work``)."""

    problem: StepProblem
    solve: SolveStats
    f_ext: Any
    loads: bool
    offset_work: Callable[[], float]


class StepObserver(Protocol):
    """A per-step observer (``Simulator.observers``); hooks the step calls in this order."""

    def before_elimination(self, A, b) -> None:
        """A and b assembled, their prescribed rows not yet eliminated."""

    def after_step(self, step: StepRecord) -> None:
        """The step is done (State advanced, time and step counted); may raise SimulationError to stop."""

    def reset(self, state) -> None:
        """The State was replaced (a checkpoint loaded) or changed on purpose by a script."""


class PeakSpeed:
    """The advance's largest |v|² (a one-element device array, read through the host view)."""

    def __init__(self) -> None:
        self.array = backend.scalar_array(1)
        self._view = backend.host_view(self.array)

    def read(self) -> float:
        return float(self._view[0] if self._view is not None else self.array.to_numpy()[0])


def assemble(sim) -> None:
    """Build A and b of ``sim``'s coming step (docs/THEORY.md §1) with prescribed nodes eliminated."""
    m, s, dt, integrator = sim.model, sim.state, sim.model.dt, sim.model.integrator
    sim.loads.update(s, s.time + (0.5 * dt if integrator == "midpoint" else 0.0))
    sim.drives.scatter(s, dt, integrator, sim.v_fixed, sim.v_end)
    # A = 0, masses and damping, rigid and rod rotational blocks: one launch (assemble_inertial)
    integ.assemble_inertial(sim.A.blocks, sim.A.diag, m.mass, m.mass_alpha, s.v, sim.f_ext, m.gravity_arr,
                            sim.b, m.rigid.rot_block, m.rigid.rot_inertia, s.q, m.rigid.n_rot, sim.coef_array)
    for system in sim.systems:
        system.assemble(s, sim.control, sim.A, sim.b, sim.coef, s.time, dt)
    if sim.drives.count:
        for observer in sim.observers:
            observer.before_elimination(sim.A, sim.b)
        integ.eliminate_prescribed(sim.A.indptr, sim.A.indices, sim.A.blocks, sim.A.diag, sim.b, sim.fixed,
                                   sim.v_fixed, m.n_nodes)


def collide(sim) -> int:
    """The coming step's contacts into ``sim.contacts`` (with the stiction anchors applied); their count."""
    if sim.collision is None:
        sim.contacts.count = 0
        return 0
    n_contacts = sim.collision.collide(sim.state, sim.contacts, sim.model.dt)
    if sim.anchors is not None:
        sim.anchors.apply(sim.contacts)
    return n_contacts


def step_problem(sim) -> StepProblem:
    """The ``StepProblem`` of ``sim``'s assembled and collided coming step."""
    s = sim.state
    return StepProblem(sim.model, s, sim.A, sim.b, s.v_hat, sim.fixed, sim.contacts, sim.coef, sim.model.dt,
                       sim.model.integrator, sim.linear)


def step(sim) -> StepStats:
    """Advance ``sim`` one time step (module docstring); returns and records its ``StepStats``."""
    s, dt = sim.state, sim.model.dt
    t0 = _time.perf_counter()
    assemble(sim)
    t1 = _time.perf_counter()
    n_contacts = collide(sim)
    t1b = _time.perf_counter()
    problem = step_problem(sim)
    lin = sim.contact_solver.solve(problem)
    t2 = _time.perf_counter()
    if not math.isfinite(lin.residual):
        raise diverged(sim, "the solver produced non-finite values")
    _advance(sim, lin.converged)
    vmax2 = sim.peak_speed.read()
    for system in sim.systems:
        system.after_advance(s)
    if not (vmax2 <= MAX_SPEED**2):
        raise diverged(sim, f"a node speed reached {math.sqrt(vmax2):.3g} m/s")
    s.time += dt
    s.step += 1
    if sim.observers:
        record = StepRecord(problem, lin, sim.f_ext, bool(sim.control.loads), sim.contact_offset_work)
        for observer in sim.observers:
            observer.after_step(record)
    t3 = _time.perf_counter()
    sim.timers["assembly"] += t1 - t0
    sim.timers["detection"] += t1b - t1
    sim.timers["solve"] += t2 - t1b
    st = StepStats(s.step, s.time, lin.iterations, lin.residual, n_contacts, 1e3 * (t1b - t1), 1e3 * (t1 - t0),
                   1e3 * (t2 - t1b), 1e3 * (t3 - t0), getattr(lin, "extra", {}).get("momentum_error"),
                   bool(lin.converged))
    sim.last_solve = lin
    sim.stats.append(st)
    return st


def _advance(sim, converged: bool) -> None:
    """x += dt v̂, v from the integrator, rotations by Cayley (one launch); with stiction anchors applied
    this step, their update runs in the same launch (``fused.advance_and_remember``)."""
    s, m = sim.state, sim.model

    def advance_and_remember(*update) -> None:
        fused.advance_and_remember(s.x, s.v, sim.fixed, sim.v_end, m.rigid.rot_block, s.q, m.rigid.n_rot, sim.coef_array,
                                   sim.peak_speed.array, *update)

    if sim.anchors is None or not sim.anchors.update(sim.contacts, s.v_hat, converged, advance_and_remember):
        integ.advance_all(s.x, s.v, s.v_hat, sim.fixed, sim.v_end, m.rigid.rot_block, s.q, m.rigid.n_rot, sim.coef_array,
                          sim.peak_speed.array)


def contact_offset_work(anchors, contacts) -> float:
    """``Σ_m γ_mᵀ o_m`` of this step's contacts (``contact.anchors.offset_power``: their impulses times the
    velocity the moving world and the stiction anchors add); the energy monitor's supplied work is its
    negative. From the anchors' update launch when there are anchors, else one launch."""
    return anchors.offset_work(contacts) if anchors is not None else offset_work(contacts)


def diverged(sim, what: str) -> SimulationError:
    """The error that stops a step that diverged, naming the step and the likely causes."""
    rods = RODS_MIDPOINT_CAUSE + ", " if sim.rods is not None and sim.model.integrator == "midpoint" else ""
    return SimulationError(
        f"step {sim.state.step + 1} (from t = {sim.state.time:.6g} s) diverged: {what}. Likely causes: {rods}dt = "
        f"{sim.model.dt:g} s too large for the stiffest material (try a smaller --dt), an element "
        "inverted by a violent load, or a prescribed motion with a jump. Frames written so far are intact.")

"""No silent unconverged steps: which solver ``Scene(solver="auto")`` runs, and a run's convergence record.

``choose_solver(scene, model)``: the contact solver a scene runs. An explicit ``solver=`` is kept; ``"auto"``
(the default) picks the solver that converges on that kind of scene: ``"lagged"`` where a dynamic rigid
body (a free body, a robot's link, a jointed finger) can touch something, ``"cond"`` otherwise
(deformable bodies and rods against obstacles, kinematic bodies and each other). Measured
(``tools/bench_auto.py``, docs/PERFORMANCE.md "Convergence monitor and the auto solver";
docs/BENCHMARKS.md): COND ends most steps at its iteration cap on the rigid gripper with a soft ball, the
soft fingers on a rigid cylinder and the rigid clutter, where Lagged converges every step (median 1–5
Newton iterations); on the mats, cables and soft cubes COND converges and stays cheap as the mesh grows
(4.4k-DOF mat: 212 ms against Lagged's 2 s).

``StopRule`` / ``stop_rule(solver)``: what a solver's "converged" means (the quantity its tolerance
bounds, the tolerance, its iteration cap) and which options change it. Every solver reports it per
step in ``SolveStats.converged`` (COND: e_m ≤ momentum_tol within max_iter, ``extra["stop"]``; SAP,
Lagged, Similar: SAP eq. 32's e_m ≤ rel_tol within max_iterations; NCP-PGS and Todorov's iNCP: their
own contact-space residual ≤ tol within max_iter; a step without contacts: the linear solve's residual
≤ linear_tol), with e_m (SAP eq. 32) beside it where the step had contacts.

``ConvergenceMonitor``: fed each ``StepStats`` of a ``Simulator.run``; counts the steps that end
unconverged, keeps the worst e_m and its step, warns once (``ConvergenceWarning``, the first
unconverged step: step, solver, e_m against the tolerance, what to change) and stops the run with a
``SimulationError`` after ``stop_after`` consecutive unconverged steps (``DEFAULT_UNCONVERGED_STOP``;
None: never). ``summary()`` is what ``RunSummary``, ``OUT/run.json`` (key "convergence") report.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from .errors import ParameterError, SimulationError
from .spec.names import AUTO_SOLVER, DELASSUS_SOLVERS, NEWTON_SOLVERS

DEFAULT_UNCONVERGED_STOP = 50       # consecutive unconverged steps after which Simulator.run stops


class ConvergenceWarning(UserWarning):
    """A step of a run ended unconverged (given once per run, at the first such step)."""


def choose_solver(scene, model) -> tuple[str, Optional[str]]:
    """(solver name, why it was chosen: None for an explicit ``solver=``) for ``scene`` and its Model
    (module docstring: lagged where a dynamic rigid body can touch something, else cond)."""
    if scene.solver != AUTO_SOLVER:
        return scene.solver, None
    if not model.needs_contact:
        return "cond", "auto: nothing can touch, so every step is the linear solve"
    dynamic = [s.name for s in scene.rigid_bodies if not s.kinematic]
    if dynamic:
        kind = "a robot's links" if scene.robots else f"{len(dynamic)} dynamic rigid bodies"
        return "lagged", f"auto: {kind} in contact, where COND ends at its iteration cap and Lagged converges"
    return "cond", "auto: deformable bodies and rods in contact, where COND converges"


def make_scene_solver(scene, model):
    """(the contact solver ``scene`` runs, made with its ``solver_options``; why it was chosen, None for
    an explicit ``solver=``). Options the chosen solver does not know name the choice."""
    from .solvers import make_contact_solver

    name, why = choose_solver(scene, model)
    try:
        return make_contact_solver(name, model, scene.solver_options), why
    except ParameterError as exc:
        if why is None:
            raise
        raise ParameterError(f"{exc} (the scene's solver is {AUTO_SOLVER!r}, which picked {name!r}: {why}; give "
                             "Scene(solver=...) for these solver_options)") from None


@dataclass(frozen=True)
class StopRule:
    """What ``SolveStats.converged`` means for one solver: ``measure`` (``"e_m"``, SAP eq. 32, or the
    solver's own ``"residual"``) at most ``tolerance`` within ``cap`` iterations, and the options that
    change it (``advice``)."""

    solver: str
    measure: str
    tolerance: float
    cap: int
    advice: str


def stop_rule(name: str, solver) -> StopRule:
    """The StopRule of the contact solver ``solver`` (``make_contact_solver(name, ...)``)."""
    lagged = "" if name in NEWTON_SOLVERS else ", or solver='lagged' (Newton; converges on grasps and rigid contact)"
    if not hasattr(solver, "options" if name == "cond" else "opt"):      # a solver swapped in by the user
        return StopRule(name, "residual", math.nan, 0, "see the solver's options")
    if name == "cond":
        o = solver.options
        measure, tol = ("e_m", o.momentum_tol) if o.momentum_tol is not None else ("theta", o.tol)
        return StopRule(name, measure, float(tol), int(o.max_iter),
                        f"raise solver_options max_iter (now {o.max_iter}) or loosen momentum_tol (now {o.momentum_tol})"
                        + lagged)
    if name in NEWTON_SOLVERS:
        o = solver.opt
        return StopRule(name, "e_m", float(o["rel_tol"]), int(o["max_iterations"]),
                        f"raise solver_options max_iterations (now {o['max_iterations']}) or loosen rel_tol "
                        f"(now {o['rel_tol']:g}), or take a smaller dt")
    if name in DELASSUS_SOLVERS:
        o = solver.opt
        return StopRule(name, "residual", float(o["tol"]), int(o["max_iter"]),
                        f"raise solver_options max_iter (now {o['max_iter']}) or loosen tol (now {o['tol']:g})" + lagged)
    return StopRule(name, "residual", math.nan, 0, "see the solver's options")      # a solver from elsewhere


@dataclass
class ConvergenceSummary:
    """A run's convergence: steps run (from ``first_step``), how many ended unconverged, the longest
    run of consecutive ones, the first, the worst e_m (SAP eq. 32) over the steps with contacts and
    its step, and the solver's stop rule (``measure`` ≤ ``tolerance`` within ``max_iterations``)."""

    solver: str
    measure: str
    tolerance: float
    max_iterations: int
    first_step: int
    steps: int = 0
    unconverged_steps: int = 0
    longest_unconverged_run: int = 0
    first_unconverged_step: Optional[int] = None
    worst_e_m: Optional[float] = None
    worst_e_m_step: Optional[int] = None

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        worst = ("" if self.worst_e_m is None else
                 f"; worst e_m {self.worst_e_m:.2g} at step {self.worst_e_m_step}")
        bound = f"{self.measure} <= {self.tolerance:g} within {self.max_iterations} iterations"
        if not self.unconverged_steps:
            return f"solver {self.solver}: every step converged ({bound}){worst}"
        return (f"solver {self.solver}: {self.unconverged_steps} of {self.steps} steps unconverged ({bound}; "
                f"first at step {self.first_unconverged_step}, longest run {self.longest_unconverged_run}){worst}")


class ConvergenceMonitor:
    """Counts a run's unconverged steps, warns at the first, stops after ``stop_after`` in a row (module
    docstring). ``warn(message)``: how the warning is given (default ``warnings.warn`` with
    ``ConvergenceWarning``)."""

    def __init__(self, rule: StopRule, first_step: int, stop_after: Optional[int] = DEFAULT_UNCONVERGED_STOP,
                 warn: Optional[Callable[[str], None]] = None):
        self.rule = rule
        self.stop_after = check_unconverged_stop(stop_after)
        self.warn = warn or (lambda msg: warnings.warn(msg, ConvergenceWarning, stacklevel=4))
        self.summary = ConvergenceSummary(rule.solver, rule.measure, rule.tolerance, rule.cap, first_step)
        self._run = 0           # consecutive unconverged steps up to now

    def observe(self, st) -> None:
        """Take one step's ``StepStats``; raises SimulationError at ``stop_after`` unconverged in a row."""
        s = self.summary
        s.steps += 1
        if st.e_m is not None and math.isfinite(st.e_m) and (s.worst_e_m is None or st.e_m > s.worst_e_m):
            s.worst_e_m, s.worst_e_m_step = float(st.e_m), st.step
        if st.converged:
            self._run = 0
            return
        s.unconverged_steps += 1
        self._run += 1
        s.longest_unconverged_run = max(s.longest_unconverged_run, self._run)
        if s.first_unconverged_step is None:
            s.first_unconverged_step = st.step
            self.warn(f"step {st.step} (t = {st.time:.6g} s) ended unconverged: {self.describe(st)}. Later steps "
                      f"are counted, not reported (the run's summary has them). What to change: {self.rule.advice}"
                      + self._stop_note())
        if self.stop_after is not None and self._run >= self.stop_after:
            raise SimulationError(
                f"step {st.step} (t = {st.time:.6g} s): the {self.rule.solver} contact solve has ended unconverged "
                f"for {self._run} consecutive steps (steps {st.step - self._run + 1}–{st.step}; this one: "
                f"{self.describe(st)}), so the run was stopped. What to change: {self.rule.advice}. To let such a "
                "run go on, Simulator(..., unconverged_stop=None) or femcontact run --unconverged-stop 0. Frames "
                "and steps.csv rows written so far are intact.")

    def describe(self, st) -> str:
        """What one unconverged step's solve reported, against the stop rule."""
        r = self.rule
        if not st.contacts and st.e_m is None:
            return (f"the step's linear solve (no contacts) ended at relative residual {st.residual:.2g} after "
                    f"{st.iterations} iterations")
        value = st.e_m if r.measure == "e_m" else st.residual
        capped = 0 < r.cap <= st.iterations
        how = f"at its cap of {r.cap} iterations" if capped else f"after {st.iterations} iterations"
        parts = [f"solver {r.solver} stopped {how}"]
        if value is not None:
            parts.append(f"{r.measure} {value:.3g} against its tolerance {r.tolerance:g}")
        if r.measure != "e_m" and st.e_m is not None:
            parts.append(f"e_m {st.e_m:.2g}")
        return ", ".join(parts + [f"{st.contacts} contacts"])

    def _stop_note(self) -> str:
        return ("" if self.stop_after is None else
                f"; the run stops after {self.stop_after} unconverged steps in a row")


def check_unconverged_stop(value) -> Optional[int]:
    """``unconverged_stop``: a positive number of steps, or None (never stop)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"unconverged_stop must be a positive number of consecutive steps or None (never stop), "
                             f"got {value!r}")
    return value

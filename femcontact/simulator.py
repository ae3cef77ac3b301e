"""Simulator: builds a Scene's Model, State and step parts, and runs them: ``step`` (one step:
``stepper.py``), ``run`` (many, with output: ``io/run_output.py``), checkpoints (the State written
out: ``state.py``) and queries (``queries.py``)."""
from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

from .backend import ti
from . import backend, queries, stepper
from .assembly import integrator as integ
from .assembly.sparse import BlockSparseMatrix
from .control import Control
from .convergence import (DEFAULT_UNCONVERGED_STOP, ConvergenceMonitor, ConvergenceSummary, check_unconverged_stop,
                          make_scene_solver, stop_rule)
from .energy_monitor import EnergyMonitor
from .errors import ParameterError
from .io import frames
from .math.quaternion import quat_to_matrix
from .model import Model
from .spec.overlap import check_initial_overlap
from .scene import Scene
from .contact.anchors import MIDPOINT_END_GAIN, StictionAnchors
from .contact.contacts import ContactSet
from .bodies.prescribed import LoadSystem, PrescribedSystem
from .bodies.rod import RodSystem
from .bodies.system import body_systems
from .contact.pipeline import CollisionPipeline
from .diff import inputs as diff_inputs
from .solvers.linear import make_linear_solver
from .state import State
from .stepper import MAX_SPEED, StepObserver, StepStats

if TYPE_CHECKING:
    from .diff.step import StepDerivatives

__all__ = ["Simulator", "StepStats", "RunSummary", "MAX_SPEED", "DEFAULT_FRAME_RATE"]

DEFAULT_FRAME_RATE = 50.0  # frames per simulated second written when a scene sets no frame_dt (frame_dt 0.02 s)


@dataclass
class RunSummary:
    """Totals of a ``Simulator.run``."""

    dofs: int
    steps: int
    simulated_time: float
    wall_s: float
    timers: dict = field(default_factory=dict)
    mean_iterations: float = 0.0
    output: Optional[Path] = None
    writer_s: float = 0.0       # time the background writer thread spent writing, s (beside the steps)
    convergence: Optional[ConvergenceSummary] = None    # unconverged steps, worst e_m (convergence.py)

    def __str__(self) -> str:
        t = self.timers
        other = max(self.wall_s - sum(t.values()), 0.0)
        lines = [
            f"DOF {self.dofs}  steps {self.steps}  simulated {self.simulated_time:.4g} s  "
            f"wall {self.wall_s:.2f} s ({1e3 * self.wall_s / max(self.steps, 1):.2f} ms/step)",
            "wall time: " + "  ".join(f"{k} {v:.2f} s" for k, v in t.items()) + f"  other {other:.2f} s"
            + (f"  (writer thread busy {self.writer_s:.2f} s beside the steps)" if self.writer_s else ""),
            f"mean solver iterations per step: {self.mean_iterations:.1f}",
        ]
        if self.convergence is not None:
            lines.append(str(self.convergence))
        if self.output is not None:
            lines.append(f"output: {self.output}  (femcontact view {self.output.parent}, femcontact.read, or ParaView)")
        return "\n".join(lines)



class Simulator:
    """Runs a Scene: ``step()`` advances one step, ``run()`` many with output.

    arch / precision: see ``femcontact.backend.init`` (None keeps the current setting).
    energy_check: stop a run whose total energy grows more than this many times the scene's energy
    scale beyond what forces, drives and moving obstacles supplied (``femcontact.energy_monitor``;
    None: no check); energy_check_every: evaluate the energy every this many steps.
    unconverged_stop: ``run`` stops with a SimulationError after this many consecutive steps whose solve
    ended unconverged (``femcontact.convergence``; None: never). The scene's solver "auto" is resolved
    here: ``contact_solver.name`` is the one run, ``solver_choice`` says why (None for an explicit solver).
    ``observers``: the step observers (``stepper.StepObserver``), the energy monitor first; append one
    to watch every step.
    """

    def __init__(self, scene: Scene, *, arch: Optional[str] = None, precision: Optional[str] = None,
                 energy_check: Optional[float] = 10.0, energy_check_every: int = 10,
                 unconverged_stop: Optional[int] = DEFAULT_UNCONVERGED_STOP):
        if not isinstance(scene, Scene):
            raise ParameterError(f"Simulator needs a femcontact.Scene, got {type(scene).__name__}")
        if not scene.all_bodies:
            raise ParameterError("the scene has no bodies; add one with scene.add_fem_body(...) or "
                                 "scene.add_rigid_body(...)")
        check_initial_overlap(scene)      # host-side, before any Taichi data is made
        backend.init(arch, precision)
        self.scene = scene
        self.model = m = Model(scene)
        self.state = State(m)
        n = m.n_nodes
        self.coef = integ.coefficients(scene.integrator, scene.dt)
        self.coef_array = integ.coefficient_array(self.coef, scene.dt)     # the step kernels' constants
        self.peak_speed = stepper.PeakSpeed()                              # the advance's max |v|²
        self.A = BlockSparseMatrix(m.pattern)
        self.b = backend.vec3_array(n)
        self.linear = make_linear_solver(scene.linear_solver, n, tol=scene.linear_tol)
        self.control = Control.from_scene(scene)     # drives and loads a script changes between steps
        self.drives = PrescribedSystem(m)
        self.state.prescribed = self.drives.start()
        self.loads = LoadSystem(m, self.control)
        self.fixed = backend.scalar_array(n, m.dofs.prescribed.astype(np.int32), dtype=ti.i32)
        self.v_fixed = backend.vec3_array(n)
        self.v_end = backend.vec3_array(n)
        self.stats: list[StepStats] = []
        self.timers = {"detection": 0.0, "assembly": 0.0, "solve": 0.0, "output": 0.0}
        # one solve path: every step is solver.solve(StepProblem); without contacts that is A v̂ = b
        self.contacts = ContactSet(n)
        self.collision = CollisionPipeline(m) if m.needs_contact else None
        self.unconverged_stop = check_unconverged_stop(unconverged_stop)
        self.contact_solver, self.solver_choice = make_scene_solver(scene, m)
        self.convergence: Optional[ConvergenceMonitor] = None       # the last run's (run())
        self.anchors = None
        if scene.stiction == "anchored" and self.collision is not None:
            end = scene.integrator == "midpoint" and self.contact_solver.friction_on_end_velocity
            self.anchors = StictionAnchors(n, scene.dt, MIDPOINT_END_GAIN if end else 1.0)
            self.state.anchors = self.anchors.slips
        self.tracking_derivatives = False    # track_derivatives(): keep each step's start State (step_start)
        self.step_start = None
        self._energy_out = backend.scalar_array(2)
        self.systems = body_systems(m)              # joints, springs, FEM, rods: bodies/system.py
        self.rods = next((s for s in self.systems if isinstance(s, RodSystem)), None)
        self.observers: list[StepObserver] = []
        self.energy_monitor = None
        if energy_check is not None:
            if not (isinstance(energy_check, (int, float)) and energy_check > 0):
                raise ParameterError(f"energy_check must be a positive factor or None, got {energy_check!r}")
            if not isinstance(energy_check_every, (int, np.integer)) or energy_check_every < 1:
                raise ParameterError(f"energy_check_every must be a positive integer, got {energy_check_every!r}")
            self.energy_monitor = EnergyMonitor(m, scene, self.A.pattern, self._energy_of, self.state,
                                                solver=self.contact_solver.name, offset_work=self.anchors is not None, rods=self.rods is not None,
                                                factor=energy_check, every=energy_check_every)
            self.observers.append(self.energy_monitor)

    @property
    def v_hat(self):
        """The last step's solution v̂ (vec3 ndarray), warm start of the next; kept in the State."""
        return self.state.v_hat

    @property
    def f_ext(self):
        """The step's external loads (vec3 ndarray, ``LoadSystem``; gravity apart)."""
        return self.loads.f_ext

    @property
    def contact_solver(self):
        """The contact solver (``solvers/``); its memory is part of the State (``State.solver``)."""
        return self._contact_solver

    @contact_solver.setter
    def contact_solver(self, solver) -> None:
        self._contact_solver = self.state.solver = solver

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | Path) -> Path:
        """Write the State (``State.save``: positions, velocities, rotations, warm start, the prescribed
        groups' positions, joint angles, stiction anchors and the contact solver's memory) to ``path``
        (.npz, written atomically); a fresh Simulator of the same scene continues from it bit for bit
        (``load_checkpoint``)."""
        return self.state.save(path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue from a checkpoint written by ``save_checkpoint`` for the same scene and solver."""
        self.state.load(path)
        for observer in self.observers:
            observer.reset(self.state)

    # ------------------------------------------------------------------ stepping
    def assemble(self) -> None:
        """Build A and b of the coming step (docs/THEORY.md §1) with prescribed nodes eliminated."""
        stepper.assemble(self)

    def step(self) -> StepStats:
        """Advance one time step (``stepper.step``)."""
        if self.tracking_derivatives:
            self.step_start = diff_inputs.snapshot(self)
        return stepper.step(self)

    def track_derivatives(self, on: bool = True) -> None:
        """Keep each step's start-of-step State in memory (``step_start``) so that ``step_derivatives``
        can differentiate the step just taken (a copy of x, v, v̂ and the rotations per step)."""
        self.tracking_derivatives = bool(on)
        if not on:
            self.step_start = None

    def step_derivatives(self, wrt: str | Sequence[str] = ("x", "R", "v")) -> "StepDerivatives":
        """The derivatives of the last step's end state (positions ``x`` of the translational blocks,
        rotations ``R`` as world-frame rotation vectors, velocities ``v``, the solution ``v_hat``: the next
        step's warm start) with respect to ``wrt``: the
        start-of-step state ("x", "R", "v", "v_hat"), the step's controls ("force:<load>",
        "effort:<joint>", "target:<joint>") and scene parameters ("mu:<pair>", "stiffness:<pair>",
        "dissipation:<pair>", "E:<body>", "rho:<body>", "mass:<body>"); ``femcontact.diff.inputs``.

        By the implicit function theorem at the converged Newton step (ICF §X-B, eq. 29:
        dv/dθ = −H⁻¹ ∂r/∂θ with the step's own H; ``femcontact.diff.step``). Needs a Newton-path solver
        (sap, lagged, similar), ``track_derivatives()`` before the step and a converged step; returns a
        ``StepDerivatives`` (``jacobian``, ``jvp``, ``vjp``)."""
        from .diff.step import step_derivatives

        return step_derivatives(self, wrt)

    def contact_offset_work(self) -> float:
        """``Σ_m γ_mᵀ o_m`` of this step's contacts (``stepper.contact_offset_work``)."""
        return stepper.contact_offset_work(self.anchors, self.contacts)

    def run(self, duration: Optional[float] = None, steps: Optional[int] = None, out: Optional[str | Path] = None,
            every: Optional[int] = None, progress: bool = False,
            callback: Optional[Callable[["Simulator"], None]] = None, *,
            checkpoint_every: Optional[int] = None, checkpoint: Optional[str | Path] = None,
            append: bool = False, overwrite: bool = False) -> RunSummary:
        """Advance ``steps`` steps (or ``duration`` s; default: the scene's duration).

        out: folder for the VTK series (``out/run.pvd``), ``out/steps.csv`` (one row per step) and
        the robots' joint CSVs (``io/run_output.py``), written by a background thread; a folder that
        holds an earlier run's series is refused unless ``overwrite`` (which replaces that series)
        or ``append``. every: write a frame at every step number that is a multiple of k, and at the
        last step (default: the scene's frame_dt, else ``DEFAULT_FRAME_RATE`` frames per simulated
        second, never more than one per step; 1 writes every step); progress: show a progress bar;
        callback(sim) is called after every step.
        checkpoint_every: save a checkpoint (``save_checkpoint``) at every step number that is a
        multiple of it and at the last step, to ``checkpoint`` (default ``out/checkpoint.npz``), after
        that step's frame is written. append: continue the series already in ``out`` from a loaded
        checkpoint (a resumed run: refused unless the series is the one that checkpoint was saved
        beside; frames and rows after the current time are dropped and rewritten).
        """
        n_steps = self._count_steps(duration, steps)
        if every is None:
            every = max(1, round((self.scene.frame_dt or 1.0 / DEFAULT_FRAME_RATE) / self.model.dt))
        if not isinstance(every, int) or every < 1:
            raise ParameterError(f"every must be a positive integer, got {every!r}")
        if checkpoint_every is not None:
            if not isinstance(checkpoint_every, (int, np.integer)) or checkpoint_every < 1:
                raise ParameterError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
            if checkpoint is None and out is None:
                raise ParameterError("checkpoint_every needs a checkpoint path or an out folder to write it to")
            checkpoint = Path(checkpoint) if checkpoint is not None else Path(out) / "checkpoint.npz"
        output = None
        if out is not None:
            from .io.run_output import RunOutput

            output = RunOutput(self, out, append=append, overwrite=overwrite)
        start = _time.perf_counter()
        it0 = len(self.stats)
        self.convergence = ConvergenceMonitor(stop_rule(self.contact_solver.name, self.contact_solver),
                                              self.state.step, self.unconverged_stop)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=n_steps, unit="step", dynamic_ncols=True, mininterval=0.5)
        failed = None
        try:
            if output is not None and self.state.step == 0 and output.series.n_frames == 0:
                output.frame()
            for k in range(n_steps):
                st = self.step()
                self.convergence.observe(st)
                if callback is not None:
                    callback(self)
                last = k + 1 == n_steps
                if output is not None and (self.state.step % every == 0 or last):
                    output.frame()
                if checkpoint_every is not None and (self.state.step % checkpoint_every == 0 or last):
                    if output is not None:
                        output.checkpoint(checkpoint)
                    else:
                        t0 = _time.perf_counter()
                        self.save_checkpoint(checkpoint)
                        self.timers["output"] += _time.perf_counter() - t0
                if bar is not None:
                    bar.update(1)
                    bad = self.convergence.summary.unconverged_steps
                    bar.set_postfix_str(f"t={st.time:.4g}s {st.ms_total:.1f}ms/step it={st.iterations}"
                                        + (f" unconverged={bad}" if bad else ""))
        except BaseException as exc:
            failed = exc
            raise
        finally:
            if bar is not None:
                bar.close()
            if output is not None:          # drains the writer: every frame handed over is written
                output.close(failed)
        wall = _time.perf_counter() - start
        done = self.stats[it0:]
        return RunSummary(self.model.n_dofs, len(done), self.state.time, wall, dict(self.timers),
                          float(np.mean([s.iterations for s in done])) if done else 0.0,
                          None if output is None else Path(output.pvd_path),
                          0.0 if output is None else output.thread.busy_s, self.convergence.summary)

    def _count_steps(self, duration, steps) -> int:
        if steps is not None and duration is not None:
            raise ParameterError("give either steps or duration, not both")
        if steps is not None:
            if not isinstance(steps, (int, np.integer)) or steps < 0:
                raise ParameterError(f"steps must be a non-negative integer, got {steps!r}")
            return int(steps)
        duration = self.scene.duration if duration is None else duration
        if not isinstance(duration, (int, float)) or not math.isfinite(duration) or duration < 0:
            raise ParameterError(f"duration must be a non-negative number of seconds, got {duration!r}")
        return int(round(duration / self.model.dt))

    # ------------------------------------------------------------------ output
    def frame_pieces(self) -> dict:
        """The current frame as meshio meshes, one per body (for writers), with contact also the obstacles
        and a ``contacts`` point cloud (``io/frames.py`` says what each piece holds)."""
        pieces = frames.body_pieces(self.model, self.state, self.von_mises())
        pieces.update(frames.robot_pieces(self.scene.robots, self))
        if self.rods is not None:
            pieces.update(frames.rod_pieces(self.rods, self.state))
        if self.collision is not None:
            pieces.update(frames.contact_pieces(self.model, self.state, self.contacts, self.model.dt,
                                                self.scene.robots))
        return pieces

    # ------------------------------------------------------------------ queries (queries.py)
    def actuator_forces(self) -> dict[str, float]:
        """Per joint (scene name) the generalized force (N m or N) its actuator applied over the last
        step: drive and gravity compensation as capped, plus feedforward effort
        (``JointSystem.actuator_forces``; empty before the first step)."""
        joints = self.model.joints
        return {} if joints is None else joints.actuator_forces(self.state)

    def rigid_contact_forces(self) -> dict[str, np.ndarray]:
        """Net contact force (N, world frame) on every rigid body over the last step (``queries``)."""
        return queries.rigid_contact_forces(self.model, self.contacts, self.model.dt, self.collision is not None)

    def rod_positions(self, name: str) -> np.ndarray:
        """(n+1, 3) centre-line node positions of a rod now, m."""
        return self.state.positions()[queries.rod(self.rods, name).nodes]

    def rod_frames(self, name: str) -> np.ndarray:
        """(n, 3, 3) segment frames of a rod now (columns d1, d2, d3; d3 along the segment)."""
        return quat_to_matrix(self.state.quaternions()[queries.rod(self.rods, name).quats])

    def rod_strains(self, name: str) -> dict:
        """Per-segment strains of a rod now: stretch, shear, bend (1/m), twist (rad/m)."""
        return queries.rod_strains(self.rods, self.state, name)

    def rod_forces(self) -> tuple[np.ndarray, float]:
        """(all blocks' elastic rod forces (N) / torques (N m), rod elastic energy J) now."""
        return self.rods.forces(self.state)

    def von_mises(self) -> np.ndarray:
        """(n_tets,) von Mises stress of every element, Pa."""
        return queries.von_mises(self.model, self.state)

    def elastic_forces(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """(n, 3) elastic nodal forces (N) at positions x (default: current)."""
        return queries.elastic_forces(self.model, self.state, x)

    def energy(self) -> dict:
        """Kinetic (translational and rotational), elastic and gravitational potential energy (J)."""
        return self._energy_of(self.state)

    def _energy_of(self, state: State) -> dict:
        return queries.energy(self.model, state, self.systems, self._energy_out)

    def system_matrix(self):
        """A of the most recently assembled step as a scipy CSR matrix (assembles if none yet)."""
        if not self.stats:
            self.assemble()
        return self.A.to_scipy()

    def rigid_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(centre of mass (3,) m, rotation (3, 3)) of a rigid body now."""
        return queries.rigid_pose(self.model, self.state, name)

    def rigid_velocity(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(centre-of-mass velocity (3,) m/s, angular velocity (3,) rad/s), world frame."""
        return queries.rigid_velocity(self.model, self.state, name)

    def set_rigid_velocity(self, name: str, linear=None, angular=None) -> None:
        """Set a rigid body's centre-of-mass velocity (m/s) and/or world angular velocity (rad/s) now
        (e.g. to throw a settled object); the next step starts from it."""
        queries.set_rigid_velocity(self.model, self.state, name, linear, angular)
        for observer in self.observers:
            observer.reset(self.state)     # the script changed the energy on purpose

    def body_positions(self, name: str) -> np.ndarray:
        """(n, 3) current node positions of a body, m."""
        return self.state.positions()[queries.body(self.model, name).nodes]

    def body_velocities(self, name: str) -> np.ndarray:
        """(n, 3) current node velocities of a body, m/s."""
        return self.state.velocities()[queries.body(self.model, name).nodes]

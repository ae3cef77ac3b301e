"""Simulator: the step loop (drives, assembly, solve, advance), stats and output."""
from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .backend import ti
from . import backend
from .assembly import integrator as integ
from .assembly.sparse import BlockSparseMatrix
from .bodies import fem
from .control import Control
from .convergence import (DEFAULT_UNCONVERGED_STOP, ConvergenceMonitor, ConvergenceSummary, check_unconverged_stop,
                          make_scene_solver, stop_rule)
from .energy_monitor import RODS_MIDPOINT_CAUSE, EnergyMonitor
from . import fused
from .errors import ParameterError, SimulationError
from .math.quaternion import cayley_velocity, quat_to_matrix
from .model import Model
from .spec.overlap import check_initial_overlap
from .scene import Scene
from .spec.rigid import RigidBodySpec
from .spec.validation import vec3 as _vec3
from .contact.anchors import MIDPOINT_END_GAIN, StictionAnchors, offset_work
from .contact.contacts import ContactSet
from .bodies.rod import RodSystem
from .bodies.system import body_systems
from .contact.pipeline import CollisionPipeline
from .solvers.base import StepProblem
from .solvers.linear import make_linear_solver
from .state import State

MAX_SPEED = 1e4  # m/s; faster than this is taken as a diverged step
DEFAULT_FRAME_RATE = 50.0  # frames per simulated second written when a scene sets no frame_dt (frame_dt 0.02 s)


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


class _Drives:
    """Host side of prescribed nodes: which nodes, and their v̂ and end-of-step velocity per step."""

    def __init__(self, scene: Scene, model: Model):
        self.groups = []    # (global indices, drive, current positions of its nodes)
        self.placed = []    # positions of each group's nodes at placement (x0 of position drives)
        for spec in [*scene.fem_bodies, *scene.rods]:   # rods: same drive records
            start = model.body(spec.name).node_start
            for d in spec.drives:
                idx = d.nodes + start
                self.groups.append((idx, d, spec.positions[d.nodes].copy()))
                self.placed.append(spec.positions[d.nodes].copy())
        for spec in scene.rigid_bodies:
            if spec.kinematic:
                idx = np.arange(2) + model.body(spec.name).node_start
                self.groups.append((idx, spec, spec.pose(0.0)))
                self.placed.append(None)
        self.index = np.concatenate([g[0] for g in self.groups]) if self.groups else np.zeros(0, np.int64)
        uniq, counts = np.unique(self.index, return_counts=True)
        if np.any(counts > 1):
            node = int(uniq[counts > 1][0])
            body = next(b for b in model.bodies if b.node_start <= node < b.node_start + b.node_count)
            raise ParameterError(f"node {node - body.node_start} of body {body.name!r} is prescribed by two pin/drive "
                                 "calls; select disjoint node sets")
        self.count = len(self.index)

    def memory(self) -> dict[str, np.ndarray]:
        """The current positions (poses) of the prescribed groups, which each step advances."""
        out = {}
        for k, (_, d, x_now) in enumerate(self.groups):
            if isinstance(d, RigidBodySpec):
                out[f"drive{k}_c"], out[f"drive{k}_R"] = (np.asarray(a, float) for a in x_now)
            else:
                out[f"drive{k}"] = np.asarray(x_now, float)
        return out

    def restore(self, memory: dict[str, np.ndarray]) -> None:
        """Set the groups' current positions from ``memory()`` of a run of the same scene."""
        for k, (idx, d, _) in enumerate(self.groups):
            if isinstance(d, RigidBodySpec):
                x_now = (memory[f"drive{k}_c"], memory[f"drive{k}_R"])
            else:
                x_now = memory[f"drive{k}"]
            self.groups[k] = (idx, d, x_now)

    def values(self, t: float, dt: float, integrator: str) -> tuple[np.ndarray, np.ndarray]:
        """(k, 3) v̂ and (k, 3) end-of-step velocity of all prescribed nodes for the step from t."""
        v_hat, v_end = [], []
        for k, (idx, d, x_now) in enumerate(self.groups):
            if isinstance(d, RigidBodySpec):
                (c0, R0), (c1, R1) = x_now, d.pose(t + dt)
                w = cayley_velocity(R0, R1, dt)
                vh = np.stack([(c1 + R1 @ d.com_local - c0 - R0 @ d.com_local) / dt, w])
                ve = vh
                x_next = (c1, R1)
            elif d.velocity is not None:
                t_hat = t + (0.5 * dt if integrator == "midpoint" else dt)
                vh = np.broadcast_to(np.asarray(d.velocity(t_hat), float), (len(idx), 3))
                ve = np.broadcast_to(np.asarray(d.velocity(t + dt), float), (len(idx), 3))
                x_next = x_now + dt * vh
            else:
                x_next = np.asarray(d.position(t + dt, self.placed[k]), float)
                if x_next.shape != (len(idx), 3) or not np.isfinite(x_next).all():
                    raise ParameterError(f"position drive returned shape {x_next.shape} or non-finite values "
                                         f"at t={t + dt:g}; expected ({len(idx)}, 3)")
                vh = (x_next - x_now) / dt
                ve = vh
            if not (np.isfinite(vh).all() and np.isfinite(ve).all()):
                raise ParameterError(f"velocity drive returned non-finite values at t={t:g}")
            self.groups[k] = (idx, d, x_next)
            v_hat.append(vh)
            v_end.append(ve)
        return np.concatenate(v_hat), np.concatenate(v_end)


class Simulator:
    """Runs a Scene: ``step()`` advances one step, ``run()`` many with output.

    arch / precision: see ``femcontact.backend.init`` (None keeps the current setting).
    energy_check: stop a run whose total energy grows more than this many times the scene's energy
    scale beyond what forces, drives and moving obstacles supplied (``femcontact.energy_monitor``;
    None: no check); energy_check_every: evaluate the energy every this many steps.
    unconverged_stop: ``run`` stops with a SimulationError after this many consecutive steps whose solve
    ended unconverged (``femcontact.convergence``; None: never). The scene's solver "auto" is resolved
    here: ``contact_solver.name`` is the one run, ``solver_choice`` says why (None for an explicit solver).
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
        self.model = Model(scene)
        self.state = State(self.model)
        n = self.model.n_nodes
        self.coef = integ.coefficients(scene.integrator, scene.dt)
        self._coef_arr = integ.coefficient_array(self.coef, scene.dt)     # the step kernels' constants
        self._speed2 = backend.scalar_array(1)                             # advance_all's max |v|²
        self._speed2_view = backend.host_view(self._speed2)
        self.A = BlockSparseMatrix(self.model.pattern)
        self.b = backend.vec3_array(n)
        self.linear = make_linear_solver(scene.linear_solver, n, tol=scene.linear_tol)
        self.control = Control.from_scene(scene)     # drives and loads a script changes between steps
        self.drives = _Drives(scene, self.model)
        self.fixed = backend.scalar_array(n, self.model.dofs.prescribed.astype(np.int32), dtype=ti.i32)
        self.v_fixed = backend.vec3_array(n)
        self.v_end = backend.vec3_array(n)
        self._drive_index = backend.int_array(self.drives.index)
        self._drive_vals = backend.vec3_array(self.drives.count)
        self._drive_end = backend.vec3_array(self.drives.count)
        self._collect_forces()
        self.f_ext = backend.vec3_array(n, self._static_force)
        self.stats: list[StepStats] = []
        self.timers = {"detection": 0.0, "assembly": 0.0, "solve": 0.0, "output": 0.0}
        # one solve path: every step is solver.solve(StepProblem); without contacts that is A v̂ = b
        self.contacts = ContactSet(n)
        self.collision = CollisionPipeline(self.model) if self.model.needs_contact else None
        self.unconverged_stop = check_unconverged_stop(unconverged_stop)
        self.contact_solver, self.solver_choice = make_scene_solver(scene, self.model)
        self.convergence: Optional[ConvergenceMonitor] = None       # the last run's (run())
        self.anchors = None
        if scene.stiction == "anchored" and self.collision is not None:
            end = scene.integrator == "midpoint" and self.contact_solver.friction_on_end_velocity
            self.anchors = StictionAnchors(n, scene.dt, MIDPOINT_END_GAIN if end else 1.0)
        self._energy_out = backend.scalar_array(2)
        self.systems = body_systems(self.model)              # joints, FEM, rods: bodies/system.py
        self.rods = next((s for s in self.systems if isinstance(s, RodSystem)), None)
        self.energy_monitor = None
        if energy_check is not None:
            if not (isinstance(energy_check, (int, float)) and energy_check > 0):
                raise ParameterError(f"energy_check must be a positive factor or None, got {energy_check!r}")
            if not isinstance(energy_check_every, (int, np.integer)) or energy_check_every < 1:
                raise ParameterError(f"energy_check_every must be a positive integer, got {energy_check_every!r}")
            self.energy_monitor = EnergyMonitor(self, energy_check, energy_check_every)

    @property
    def v_hat(self):
        """The last step's solution v̂ (vec3 ndarray), warm start of the next; kept in the State."""
        return self.state.v_hat

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | Path) -> Path:
        """Write everything the next step depends on (state, warm start, the prescribed groups'
        positions, the contact solver's memory) to ``path`` (.npz, written atomically); a fresh
        Simulator of the same scene continues from it bit for bit (``load_checkpoint``)."""
        self.state.host = {**self.state.host, **self.drives.memory(),      # with the joints' unwrapped angles
                           **(self.anchors.memory() if self.anchors is not None else {})}
        self.state.solver_memory = self.contact_solver.memory()
        return self.state.save(path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue from a checkpoint written by ``save_checkpoint`` for the same scene."""
        self.state.load(path)
        if self.energy_monitor is not None:
            self.energy_monitor.reset()
        try:
            self.drives.restore(self.state.host)
            if self.anchors is not None:
                self.anchors.restore(self.state.host)
            self.contact_solver.restore(self.state.solver_memory)
        except KeyError as exc:
            raise ParameterError(f"checkpoint {path} lacks {exc.args[0]!r}: it was written by another scene "
                                 "or solver") from None

    # ------------------------------------------------------------------ setup
    def _collect_forces(self) -> None:
        """The loads of ``self.control`` as a static nodal array plus the time-dependent and rigid
        ones (rebuilt when a script changes the loads)."""
        m = self.model
        static = np.zeros((m.n_nodes, 3))
        timed, rigid_forces = [], []
        rigid_index = {r.name: k for k, r in enumerate(m.rigid_specs)}
        for load in self.control.loads.values():
            f = load.force
            if load.body in rigid_index:
                k = rigid_index[load.body]
                rigid_forces.append((k, int(m.rigid_lin[k]), f))
                continue
            idx = f.nodes + m.body(load.body).node_start
            mass = m.mass_np[idx]
            weights = (mass / mass.sum())[:, None] if f.mode == "total" else np.ones((len(idx), 1))
            if callable(f.force):
                timed.append((idx, weights, f.force))
            else:
                np.add.at(static, idx, weights * f.force)
        self._static_force, self._timed_forces, self._rigid_forces = static, timed, rigid_forces
        self._loads_version = self.control.loads_version

    def _update_forces(self, t: float) -> None:
        """f_ext of the step: the loads of ``self.control`` at time t."""
        if self._loads_version != self.control.loads_version:
            self._collect_forces()
            if not (self._timed_forces or self._rigid_forces):
                backend.write(self.f_ext, self._static_force)
        if not (self._timed_forces or self._rigid_forces):
            return
        f = self._static_force.copy()
        for idx, weights, fn in self._timed_forces:
            np.add.at(f, idx, weights * self._force_value(fn, t))
        if self._rigid_forces:
            R = quat_to_matrix(backend.read(self.state.q, self.model.n_rot).astype(np.float64, copy=False))
            for k, lin, bf in self._rigid_forces:
                value = self._force_value(bf.value, t)
                if bf.torque:
                    f[lin + 1] += value
                    continue
                f[lin] += value
                if bf.point is not None:
                    f[lin + 1] += np.cross(R[k] @ (bf.point - self.model.rigid_specs[k].com_local), value)
        backend.write(self.f_ext, f)         # host view on the CPU: no copy kernel

    @staticmethod
    def _force_value(fn, t: float) -> np.ndarray:
        if not callable(fn):
            return fn
        value = np.asarray(fn(t), float)
        if value.shape != (3,) or not np.isfinite(value).all():
            raise ParameterError(f"force function returned {value!r} at t={t:g}; expected 3 finite numbers")
        return value

    # ------------------------------------------------------------------ stepping
    def assemble(self) -> None:
        """Build A and b of the coming step (docs/THEORY.md §1) with prescribed nodes eliminated."""
        m, c, s = self.model, self.coef, self.state
        self._update_forces(s.time + (0.5 * self.scene.dt if self.scene.integrator == "midpoint" else 0.0))
        if self.drives.count:
            vh, ve = self.drives.values(s.time, self.scene.dt, self.scene.integrator)
            backend.write(self._drive_vals, vh)
            backend.write(self._drive_end, ve)
            integ.scatter_prescribed(self._drive_index, self._drive_vals, self._drive_end, self.v_fixed, self.v_end,
                         self.drives.count)
        # A = 0, masses and damping, rigid and rod rotational blocks: one launch (assemble_inertial)
        integ.assemble_inertial(self.A.blocks, self.A.diag, m.mass, m.mass_alpha, s.v, self.f_ext, m.gravity_arr,
                                self.b, m.rot_block, m.rot_inertia, s.q, m.n_rot, self._coef_arr)
        for system in self.systems:
            system.assemble(s, self.control, self.A, self.b, c, s.time, self.scene.dt)
        if self.drives.count:
            if self.energy_monitor is not None:
                self.energy_monitor.before_elimination()
            integ.eliminate_prescribed(self.A.indptr, self.A.indices, self.A.blocks, self.A.diag, self.b,
                                       self.fixed, self.v_fixed, m.n_nodes)

    def step(self) -> StepStats:
        """Advance one time step."""
        t0 = _time.perf_counter()
        self.assemble()
        t1 = _time.perf_counter()
        if self.collision is not None:
            n_contacts = self.collision.collide(self.state, self.contacts, self.scene.dt)
            if self.anchors is not None:
                self.anchors.apply(self.contacts)
        else:
            n_contacts = self.contacts.count = 0
        t1b = _time.perf_counter()
        problem = StepProblem(self.model, self.state, self.A, self.b, self.v_hat, self.fixed, self.contacts,
                              self.coef, self.scene.dt, self.scene.integrator, self.linear)
        lin = self.contact_solver.solve(problem)
        t2 = _time.perf_counter()
        if not math.isfinite(lin.residual):
            raise self._diverged("the solver produced non-finite values")
        s = self.state
        if self.anchors is None or not self.anchors.update(self.contacts, self.v_hat, lin.converged,
                                                           self._advance_and_remember):
            integ.advance_all(s.x, s.v, self.v_hat, self.fixed, self.v_end, self.model.rot_block, s.q,
                              self.model.n_rot, self._coef_arr, self._speed2)     # else in the update's launch
        vmax2 = float(self._speed2_view[0] if self._speed2_view is not None else self._speed2.to_numpy()[0])
        for system in self.systems:
            system.after_advance(s)
        if not (vmax2 <= MAX_SPEED**2):
            raise self._diverged(f"a node speed reached {math.sqrt(vmax2):.3g} m/s")
        s.time += self.scene.dt
        s.step += 1
        if self.energy_monitor is not None:
            self.energy_monitor.after_step()
        t3 = _time.perf_counter()
        self.timers["assembly"] += t1 - t0
        self.timers["detection"] += t1b - t1
        self.timers["solve"] += t2 - t1b
        st = StepStats(s.step, s.time, lin.iterations, lin.residual, n_contacts, 1e3 * (t1b - t1),
                       1e3 * (t1 - t0), 1e3 * (t2 - t1b), 1e3 * (t3 - t0), getattr(lin, "extra", {}).get("momentum_error"),
                       bool(lin.converged))
        self.last_solve = lin
        self.stats.append(st)
        return st

    def _advance_and_remember(self, *update) -> None:
        """The advance and the anchors' update (its kernel arguments: ``update``) in one launch."""
        s = self.state
        fused.advance_and_remember(s.x, s.v, self.fixed, self.v_end, self.model.rot_block, s.q, self.model.n_rot,
                                   self._coef_arr, self._speed2, *update)

    def contact_offset_work(self) -> float:
        """``Σ_m γ_mᵀ o_m`` of this step's contacts (``contact.anchors.offset_power``: their impulses times the
        velocity the moving world and the stiction anchors add); the energy monitor's supplied work is its
        negative. From the anchors' update launch when there are anchors, else one launch."""
        if self.anchors is not None:
            return self.anchors.offset_work(self.contacts)
        return offset_work(self.contacts)

    def _diverged(self, what: str) -> SimulationError:
        rods = ""
        if self.rods is not None and self.scene.integrator == "midpoint":
            rods = RODS_MIDPOINT_CAUSE + ", "
        return SimulationError(
            f"step {self.state.step + 1} (from t = {self.state.time:.6g} s) diverged: {what}. Likely causes: {rods}dt = "
            f"{self.scene.dt:g} s too large for the stiffest material (try a smaller --dt), an element "
            "inverted by a violent load, or a prescribed motion with a jump. Frames written so far are intact.")

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
            every = max(1, round((self.scene.frame_dt or 1.0 / DEFAULT_FRAME_RATE) / self.scene.dt))
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
        return int(round(duration / self.scene.dt))

    # ------------------------------------------------------------------ output and queries
    def frame_pieces(self) -> dict:
        """The current frame as meshio meshes, one per body (for writers); with contact, also one
        triangle piece per obstacle (its surface in the current pose; a half-space as a square patch
        sized to the scene; point data ``obstacle`` = 1 marks it for renderers) and a ``contacts`` point cloud (vertex cells at the contact points, point
        data ``normal``, ``impulse`` (world frame, N s), ``force`` (= impulse/dt, N), ``gap`` (m),
        ``state`` (0 open, 1 stick, 2 slip), ``body_a``/``body_b`` (index into the field data
        ``body_names``, -1 the world or an obstacle; ``force`` acts on B, its opposite on A), field data
        ``body_robots`` (per body its robot's name, or "")."""
        pieces = self._body_pieces()
        pieces.update(self._robot_pieces())
        if self.rods is not None:
            pieces.update(self._rod_pieces())
        if self.collision is not None:
            pieces.update(self._contact_pieces())
        return pieces

    def _contact_pieces(self) -> dict:
        import meshio

        pieces = {}
        x = self.state.positions()
        lo, hi = (x.min(0), x.max(0)) if len(x) else (np.zeros(3), np.ones(3))
        extent = max(float(np.max(hi - lo)), 1e-3)
        for ob in self.model.obstacles:
            c, R = ob.pose(self.state.time)
            v, f = ob.shape.surface(extent)
            if ob.shape.kind == 0:  # half-space: centre the patch under the bodies
                n = R @ ob.shape.normal
                mid = 0.5 * (lo + hi)
                plane_pt = c + R @ (ob.shape.offset * ob.shape.normal)
                shift = (mid - plane_pt) - np.dot(mid - plane_pt, n) * n
                pts = v @ R.T + c + shift
            else:
                pts = v @ R.T + c
            pieces[ob.name] = meshio.Mesh(np.asarray(pts, float), [("triangle", np.asarray(f, np.int64))],
                                          point_data={"obstacle": np.ones(len(pts), np.int32)})
        d = self.contacts.to_numpy()
        k = len(d["phi"])
        imp = d["impulse_world"] if k else np.zeros((0, 3))
        starts = np.array([b.node_start for b in self.model.bodies], np.int64)
        body_a, body_b = (np.where(n < 0, -1, np.searchsorted(starts, n, side="right") - 1).astype(np.int32)
                          for n in self.contacts.side_nodes(d))
        robot_of = {b: r.name for r in self.scene.robots for b in r.bodies}
        pieces["contacts"] = meshio.Mesh(
            self._contact_points_now(d), [("vertex", np.arange(k, dtype=np.int64)[:, None])],
            point_data={"normal": d["normal"] if k else np.zeros((0, 3)), "impulse": imp,
                        "force": imp / self.scene.dt, "gap": d["phi"] if k else np.zeros(0),
                        "state": (d["status"] if k else np.zeros(0)).astype(np.int32),
                        "body_a": body_a, "body_b": body_b},
            field_data={"body_names": np.array([b.name for b in self.model.bodies]),
                        "body_robots": np.array([robot_of.get(b.name, "") for b in self.model.bodies])})
        return pieces

    def _contact_points_now(self, d: dict) -> np.ndarray:
        """The contact points carried over the step with the bodies: detection found them at the
        step's start, the frame shows the bodies at its end (a body sliding at v would otherwise
        be drawn v·dt ahead of its contacts). A point moves by dt times its bodies' mean velocity
        (the body side alone against an obstacle)."""
        if not len(d["phi"]):
            return np.zeros((0, 3))
        va, vb = self.contacts.side_velocities(self.state.velocities(), d)
        on_world = (d["node_a"] < 0)[:, None]
        return d["point"] + self.scene.dt * np.where(on_world, vb, 0.5 * (va + vb))

    def _body_pieces(self) -> dict:
        import meshio

        x, v = self.state.positions(), self.state.velocities()
        vm = self.von_mises()
        pieces = {}
        for b, _ in self.model.fem_bodies:
            tets = self.model.tets_np[b.tets] - b.node_start
            pieces[b.name] = meshio.Mesh(
                x[b.nodes], [("tetra", tets)],
                point_data={"displacement": x[b.nodes] - self.model.rest_positions[b.nodes], "velocity": v[b.nodes]},
                cell_data={"von_mises": [vm[b.tets]]})
        for k, spec in enumerate(self.model.rigid_specs):
            c, R = self.rigid_pose(spec.name)
            v, f = spec.shape.surface()
            lin, ang = self.rigid_velocity(spec.name)
            pts = (v - spec.com_local) @ R.T + c
            pieces[spec.name] = meshio.Mesh(pts, [("triangle", np.asarray(f, np.int64))],
                                            point_data={"velocity": lin + np.cross(ang, pts - c)})
        return pieces

    def _robot_pieces(self) -> dict:
        """Every link of every robot with geometry (visual meshes, else collision meshes:
        ``Robot.link_meshes``) as a triangle piece ``"<robot>/<link>"`` in its pose now."""
        import meshio

        return {f"{robot.name}/{link}": meshio.Mesh(v, [("triangle", f)])
                for robot in self.scene.robots for link, (v, f) in robot.link_surfaces(self).items()}

    def actuator_forces(self) -> dict[str, float]:
        """Per joint (scene name) the generalized force (N m or N) its actuator applied over the last
        step: drive and gravity compensation as capped, plus feedforward effort
        (``JointSystem.actuator_forces``; empty before the first step)."""
        joints = self.model.joints
        return {} if joints is None else joints.actuator_forces(self.state)

    def rigid_contact_forces(self) -> dict[str, np.ndarray]:
        """Net contact force (N, world frame) on every rigid body over the last step: the body's
        translational block of ``Jᵀλ / dt`` (λ: the contact impulses; bodies without contact: 0)."""
        m = self.model
        forces = np.zeros((m.n_nodes, 3))
        if self.collision is not None and self.contacts.count:
            d = self.contacts.to_numpy()
            forces = (self.contacts.jacobian(True, d).T @ d["impulse"].ravel()).reshape(-1, 3) / self.scene.dt
        return {spec.name: forces[int(m.rigid_lin[k])].copy() for k, spec in enumerate(m.rigid_specs)}

    def _rod_pieces(self) -> dict:
        """Each rod as a polyline: point data ``radius`` (m, for ParaView's tube filter) and
        ``velocity``; cell data per segment ``stretch`` (axial strain), ``shear``, ``bend`` (1/m),
        ``twist`` (rad/m) (``RodSystem.strains``)."""
        import meshio

        x, v = self.state.positions(), self.state.velocities()
        pieces = {}
        for d, (spec, br, node, seg, qi) in zip(self.rods.strains(x, self.state.quaternions()), self.rods.ranges):
            n = spec.n_segments
            lines = np.stack([np.arange(n), np.arange(1, n + 1)], axis=1).astype(np.int64)
            pieces[spec.name] = meshio.Mesh(
                d["points"], [("line", lines)],
                point_data={"radius": np.full(n + 1, spec.radius), "velocity": v[node]},
                cell_data={k: [d[k]] for k in ("stretch", "shear", "bend", "twist")})
        return pieces

    def rod_positions(self, name: str) -> np.ndarray:
        """(n+1, 3) centre-line node positions of a rod now, m."""
        return self.state.positions()[self._rod(name)[2]]

    def rod_frames(self, name: str) -> np.ndarray:
        """(n, 3, 3) segment frames of a rod now (columns d1, d2, d3; d3 along the segment)."""
        return quat_to_matrix(self.state.quaternions()[self._rod(name)[4]])

    def rod_strains(self, name: str) -> dict:
        """Per-segment strains of a rod now: stretch, shear, bend (1/m), twist (rad/m)."""
        k = [r[0].name for r in self.rods.ranges].index(self._rod(name)[0].name)
        return self.rods.strains(self.state.positions(), self.state.quaternions())[k]

    def rod_forces(self) -> tuple[np.ndarray, float]:
        """(all blocks' elastic rod forces (N) / torques (N m), rod elastic energy J) now."""
        return self.rods.forces(self.state)

    def _rod(self, name: str):
        for r in (self.rods.ranges if self.rods is not None else []):
            if r[0].name == name:
                return r
        raise ParameterError(f"no rod named {name!r}; rods: {[s.name for s in self.model.rod_specs]}")

    def von_mises(self) -> np.ndarray:
        """(n_tets,) von Mises stress of every element, Pa."""
        m = self.model
        if not m.n_tets:
            return np.zeros(0)          # no FEM body: nothing to compile or launch
        out = backend.scalar_array(m.n_tets)
        fem.von_mises_stress(self.state.x, m.tets, m.dm_inv, m.mu, m.lam, out)
        return out.to_numpy()[: m.n_tets].astype(np.float64)

    def elastic_forces(self, x: Optional[np.ndarray] = None) -> np.ndarray:
        """(n, 3) elastic nodal forces (N) at positions x (default: current)."""
        m = self.model
        xa = self.state.x if x is None else backend.vec3_array(m.n_nodes, x)
        f = backend.vec3_array(m.n_nodes)
        fem.elastic_forces(xa, m.tets, m.dm_inv, m.vol, m.mu, m.lam, f)
        return f.to_numpy()[: m.n_nodes].astype(np.float64)

    def energy(self) -> dict:
        """Kinetic (translational and rotational), elastic and gravitational potential energy (J)."""
        m, s = self.model, self.state
        backend.write(self._energy_out, np.zeros(2, backend.np_real()))     # host views on the CPU: no copy kernels
        integ.kinetic_and_gravity(m.mass, s.x, s.v, m.gravity_arr, self._energy_out)
        kin, grav = (float(e) for e in backend.read(self._energy_out, 2))
        if m.n_rot:
            R = quat_to_matrix(s.quaternions())
            w = s.velocities()[m.rot_block_np]
            Om = np.einsum("kji,kj->ki", R, w)
            kin += 0.5 * float(np.einsum("ki,kij,kj->", Om, m.rot_inertia_np, Om))
        elastic = sum(system.elastic_energy(s) for system in self.systems)
        return {"kinetic": kin, "elastic": elastic, "gravity": grav, "total": kin + elastic + grav}

    def system_matrix(self):
        """A of the most recently assembled step as a scipy CSR matrix (assembles if none yet)."""
        if not self.stats:
            self.assemble()
        return self.A.to_scipy()

    def rigid_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(centre of mass (3,) m, rotation (3, 3)) of a rigid body now."""
        k = self._rigid(name)
        lin = int(self.model.rigid_lin[k])
        return self.state.positions()[lin], quat_to_matrix(self.state.quaternions()[k])

    def rigid_velocity(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(centre-of-mass velocity (3,) m/s, angular velocity (3,) rad/s), world frame."""
        lin = int(self.model.rigid_lin[self._rigid(name)])
        v = self.state.velocities()
        return v[lin], v[lin + 1]

    def set_rigid_velocity(self, name: str, linear=None, angular=None) -> None:
        """Set a rigid body's centre-of-mass velocity (m/s) and/or world angular velocity (rad/s) now
        (e.g. to throw a settled object); the next step starts from it."""
        lin = int(self.model.rigid_lin[self._rigid(name)])
        v, real = self.state.velocities(), backend.np_real()
        for k, value, what in ((lin, linear, "linear"), (lin + 1, angular, "angular")):
            if value is not None:
                v[k] = _vec3(value, f"{what} velocity of {name!r}")
        self.state.v.from_numpy(v.astype(real))
        v_hat = self.v_hat.to_numpy()
        v_hat[: len(v)] = v
        self.v_hat.from_numpy(v_hat.astype(real))
        if self.energy_monitor is not None:
            self.energy_monitor.reset()     # the script changed the energy on purpose

    def _rigid(self, name: str) -> int:
        try:
            return self.model.rigid_index(name)
        except KeyError as exc:
            raise ParameterError(str(exc.args[0])) from None

    def body_positions(self, name: str) -> np.ndarray:
        """(n, 3) current node positions of a body, m."""
        return self.state.positions()[self._body(name).nodes]

    def body_velocities(self, name: str) -> np.ndarray:
        """(n, 3) current node velocities of a body, m/s."""
        return self.state.velocities()[self._body(name).nodes]

    def _body(self, name: str):
        try:
            return self.model.body(name)
        except KeyError as exc:
            raise ParameterError(str(exc.args[0])) from None


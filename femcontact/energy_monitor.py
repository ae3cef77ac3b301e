"""Divergence stop for energy growth (issue 14, docs/THEORY.md "Energy budget").

A run is stopped when its total mechanical energy ``E = kinetic + elastic + gravity`` (the
``Simulator.energy()`` sum) exceeds its start value plus the work the outside supplied,

    growth = E_k − E_0 − W_ext − W_drive − W_world,

by far more than the scene's energy scale: ``growth > factor · scale``, with

    scale = (K + U)_0 + M |g| L + Σ|ΔW_ext| + Σ|ΔW_drive| + Σ|ΔW_world|

(``(K + U)_0`` the kinetic and elastic energy at the start, ``M`` the free mass, ``L`` the diagonal
of the bodies' bounding box at the start, the sums accumulated per step in absolute value) and
``factor`` = 10 by default. The supplied work is measured every step:

- ``W_ext``: applied forces and torques, ``dt f_extᵀ v̂`` (positions advance by ``dt v̂``);
- ``W_drive``: prescribed nodes (drives, kinematic rigid bodies), ``s r_iᵀ v̂_i`` with ``r_i`` the
  reaction of the prescribed row before its elimination, ``r = A_i v̂ − b_i − (Jᵀγ)_i / s``
  (``s`` = impulse_scale: the row in force units under the midpoint rule, in impulse units under
  implicit Euler);
- ``W_world``: moving obstacles and belts through contact, ``−Σ_m γ_mᵀ o_m`` with ``o_m`` the
  world's contribution to the contact velocity (``solvers.sap``).

Joint and drive potentials of ``joints`` are not in ``E``; their work shows up as a small growth
well inside the factor. Gravity is in ``E`` (potential). Every solver's run is checked: the monitor
is a step observer (``stepper.StepObserver``) that reads only what its hooks are given (A's prescribed
rows before their elimination; after the step the ``StepRecord``: the State, v̂, the loads and the
contacts' impulses). The energy is
evaluated every ``every`` steps (default 1); ``factor=None`` switches the check off
(``Scene.solver_options`` is not used: ``Simulator(scene, energy_check=...)``).
"""
from __future__ import annotations


import numpy as np

from . import backend
from .errors import SimulationError
from .spec.names import NEWTON_SOLVERS
from .stepper import RODS_MIDPOINT_CAUSE


class EnergyMonitor:
    """Tracks the energy budget of a run and raises SimulationError when it is exceeded: a step
    observer (``stepper.StepObserver``) whose hooks the step calls, reading only what they are given.

    model, scene: the run's; pattern: the block pattern of A; energy(state) -> ``Simulator.energy()``'s
    dict; offset_work: whether contacts can have a constant velocity part whose work is supplied (a
    moving obstacle, the stiction anchors); rods: whether the scene has rods (for the message).
    """

    def __init__(self, model, scene, pattern, energy, state, *, solver: str, offset_work: bool, rods: bool,
                 factor: float = 10.0, every: int = 1):
        self.model, self.energy, self.rods = model, energy, rods
        self.integrator, self.dt = scene.integrator, scene.dt
        self.fem_undamped = {b.name: b.material.rayleigh_alpha == 0 and b.material.rayleigh_beta == 0
                             for b in scene.fem_bodies}     # FEM body name -> no Rayleigh damping (message)
        self.solver = solver        # the contact solver run (the scene's "auto" resolved)
        self.factor = float(factor)
        self.every = max(1, int(every))
        n = model.n_nodes
        presc = np.asarray(model.dofs.prescribed, bool)[:n]
        self.presc_nodes = np.flatnonzero(presc)
        self.free = ~presc
        if len(self.presc_nodes):
            self.row_blocks = np.concatenate([np.arange(pattern.indptr[i], pattern.indptr[i + 1])
                                              for i in self.presc_nodes])
            self.row_of_block = np.repeat(np.arange(len(self.presc_nodes)),
                                          [pattern.indptr[i + 1] - pattern.indptr[i] for i in self.presc_nodes])
            self.col_of_block = pattern.col[self.row_blocks]
        self.nnzb = pattern.nnzb
        # v_c has a constant part whose work is supplied: a moving obstacle's velocity, the stiction anchors'
        self.offset_work = any(ob.kinematic for ob in model.obstacles) or offset_work
        self.free_mass = float(np.asarray(model.mass_np, float)[:n][~presc].sum())
        self._saved = None
        self.reset(state)

    def reset(self, state) -> None:
        """Start the budget from ``state`` (after loading a checkpoint, or a script's change of a velocity)."""
        e = self.energy(state)
        self.E0 = e["total"]
        x = state.positions()
        L = float(np.linalg.norm(x.max(0) - x.min(0))) if len(x) else 0.0
        g = float(np.linalg.norm(self.model.gravity))
        self.scale0 = e["kinetic"] + e["elastic"] + self.free_mass * g * L
        self.W = 0.0        # signed supplied work, J
        self.W_abs = 0.0    # its absolute increments, J
        self.last = None

    # ------------------------------------------------------------------ per step
    def before_elimination(self, A, b) -> None:
        """Keep the prescribed rows of A and b before ``eliminate_prescribed`` overwrites them."""
        if not len(self.presc_nodes):
            return
        blocks = backend.read(A.blocks, self.nnzb)
        rhs = backend.read(b, self.model.n_nodes)
        self._saved = (np.array(blocks[self.row_blocks], np.float64), np.array(rhs[self.presc_nodes], np.float64))

    def after_step(self, step) -> None:
        """Add this step's supplied work and check the budget (``step``: the ``stepper.StepRecord``). The
        step's v̂ is read to the host only when something can supply work (loads, prescribed rows, a
        moving obstacle in contact)."""
        c = int(step.problem.contacts.count)
        if step.loads or self._saved is not None or (self.offset_work and c):
            dW = self._supplied_work(step, c)
            self.W += dW
            self.W_abs += abs(dW)
        if (step.problem.state.step % self.every) == 0:
            self.check(step.problem.state)

    def _supplied_work(self, step, c: int) -> float:
        """Work (J) the loads, the prescribed rows' reactions and moving obstacles did over the step."""
        p = step.problem
        s = float(p.coef.impulse_scale)
        n = self.model.n_nodes
        dW = 0.0
        v_hat = None
        if step.loads or self._saved is not None:      # f_ext holds the loads alone (gravity apart)
            v_hat = backend.read(p.v_hat, n).astype(np.float64, copy=False)
            f_ext = backend.read(step.f_ext, n)
            if np.any(f_ext):
                free = self.free
                dW += p.dt * float(np.einsum("ij,ij->", f_ext[free], v_hat[free]))
        cd = p.contacts.to_numpy() if c and self._saved is not None else None
        if self._saved is not None:
            blocks, b = self._saved
            r = -b.copy()
            np.add.at(r, self.row_of_block, np.einsum("kij,kj->ki", blocks, v_hat[self.col_of_block]))
            if cd is not None:
                jg = (p.contacts.jacobian(expand_virtual=True, data=cd).T @ cd["impulse"].ravel()).reshape(-1, 3)
                r -= jg[self.presc_nodes] / s
            dW += s * float(np.einsum("ij,ij->", r, v_hat[self.presc_nodes]))
            self._saved = None
        if self.offset_work and c:            # the anchors' update launch sums it; else one launch
            dW -= step.offset_work()
        return dW

    def check(self, state) -> None:
        e = self.energy(state)
        growth = e["total"] - self.E0 - self.W
        scale = max(self.scale0 + self.W_abs, 1e-9)
        self.last = (growth, scale)
        if not (growth <= self.factor * scale):
            raise self._error(state, e, growth, scale)

    # ------------------------------------------------------------------ message
    def _error(self, state, e: dict, growth: float, scale: float) -> SimulationError:
        m = self.model
        v = state.velocities()
        kin = 0.5 * np.asarray(m.mass_np, float)[: len(v)] * np.einsum("ij,ij->i", v, v)
        best, best_k, best_v = None, -1.0, 0.0
        for b in m.bodies:
            nodes = np.arange(b.node_start, b.node_start + b.node_count)
            k = float(kin[nodes].sum())
            if k > best_k:
                best, best_k = b, k
                best_v = float(np.sqrt(np.einsum("ij,ij->i", v[nodes], v[nodes]).max())) if len(nodes) else 0.0
        name = best.name if best is not None else "?"
        cause = self._cause(name)
        what = (f"the total energy grew to {e['total']:.4g} J (kinetic {e['kinetic']:.4g} J, elastic "
                f"{e['elastic']:.4g} J), {growth:.4g} J more than the start energy {self.E0:.4g} J plus the "
                f"{self.W:.4g} J that forces, drives and moving obstacles supplied (over {self.factor:g}x the "
                f"scene's energy scale {scale:.3g} J); body {name!r} holds the most kinetic energy "
                f"({best_k:.4g} J, node speeds up to {best_v:.3g} m/s)")
        return SimulationError(
            f"step {state.step} (t = {state.time:.6g} s) diverged: {what}. Likely cause: {cause}. "
            "Frames written so far are intact.")

    def _cause(self, name: str) -> str:
        fem = name in self.fem_undamped
        undamped = self.fem_undamped.get(name, False)
        midpoint = self.integrator == "midpoint"
        newton = self.solver in NEWTON_SOLVERS
        if midpoint and undamped and newton:
            return (f"an undamped soft body ({name!r}, no Rayleigh damping) under the midpoint rule with a compliant "
                    f"contact model ({self.solver!r}): the midpoint rule does not damp the body's fast modes, and a "
                    "contact model that is not applied consistently with the velocity that moves the contact "
                    "point pumps energy into them (solver option midpoint_contact='end' does this). Use the "
                    "default midpoint_contact, add Rayleigh damping (rayleigh_beta), use integrator='euler', or "
                    "a smaller dt")
        if midpoint and self.rods and not fem:
            return RODS_MIDPOINT_CAUSE
        if midpoint and undamped:
            return ("an undamped body under the midpoint rule, which has no numerical damping: use "
                    "integrator='euler', add Rayleigh damping or take a smaller dt")
        return (f"dt = {self.dt:g} s too large for the stiffest material or the contact stiffness (try a smaller "
                "dt), an element inverted by a violent load, or a prescribed motion with a jump")

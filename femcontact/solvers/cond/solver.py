"""CondSolver: one COND solve per step (COND Alg. 1), composed from the package's parts.

``solve`` = set up the step (virtual nodes and gains, W, block steps, start values, normal
targets), iterate (``cond_iterate`` with Anderson mixing or under the Chebyshev schedule) until
the relative step norm ``θ = ‖v̂ˡ⁺¹ − v̂ˡ‖ / max(‖v̂ˡ⁺¹‖, ‖D⁻¹b‖) < tol``,
finish (v̂ = v̂**, λ, impulses, status), evaluate SAP eq. 32's e_m and, while it is above
``momentum_tol``, go on with a tighter tol (the same acceleration run continued); then shift the
targets by the virtual dampers' compliance and solve again (``compliance_passes``).
``memory()`` / ``restore()`` carry everything that one solve hands to the next.
"""
import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from ...backend import ti
from ... import backend
from ...contact.contacts import CONTACT_PARAM_COLUMNS
from ...layout import HostScalars
from ..base import SolveStats, StepProblem, solve_without_contacts
from ..projection import PROXIMAL, STRICT
from ..sap import momentum_error
from . import blocks, step_matrix
from .anderson import AndersonMixer
from .chebyshev import make_schedule
from .groups import block_tables
from .iterate import cond_finish, cond_iterate, cond_pattern, cond_start
from .hosts import WB_ROWS, cond_host_mark, cond_host_steps, cond_rod_host_factor
from .layout import (CONTACT, CONTACT_NODES, HAS_BLOCKS, HAS_HOSTS, HAS_RODS, ITER_F, ITER_I, ROD_BLOCKS,
                     ROD_FACTOR, ROD_ROWS, ROD_SLOTS, ROW, VIRTUAL, VIRTUAL_NODES, VROWS)
from .options import FEM_AUTO_FREE, CondOptions, default_tol
from .targets import cond_targets
from .virtual import cond_compliance_shift, cond_gains, cond_nodalize, cond_pack_virtual

# e_m stop: the next inner tol is tol · EM_MARGIN · momentum_tol / e_m (e_m ∝ θ near the solution),
# at least EM_MIN_FACTOR and at most EM_MARGIN times the last
EM_MARGIN, EM_MIN_FACTOR = 0.7, 0.01


@dataclass
class _Progress:
    """Where a solve stands: iterations in all, the last θ, the BB step α, compliance shifts made,
    and the current acceleration run (ν schedule, Anderson mixer, its iterations ``l``, and the
    iteration that met the last θ test, not yet handed to them: (θ, ‖Δ‖))."""

    sched: object
    mixer: Optional[AndersonMixer]
    it: int = 0
    l: int = 0
    theta: float = math.inf
    alpha: float = 1.0
    shifts: int = 0
    converged: bool = False
    pending: Optional[tuple] = None
    shifted: bool = False            # the targets were shifted after the current run's last iteration

    def restart(self, sched, mixer) -> None:
        """A new acceleration run (after a compliance shift)."""
        self.sched, self.mixer, self.l, self.pending, self.shifted = sched, mixer, 0, None, False


class CondSolver:
    """COND contact solver (docs/COND.md); one instance per Model, reused every step."""

    name = "cond"
    friction_on_end_velocity = True          # "Normal target": the tangential bias −½ J_t v_k

    def __init__(self, model, options: Optional[dict] = None):
        self.options = CondOptions.from_dict(options)
        self.model = model
        n0 = self.n0 = int(model.n_nodes)
        groups = block_tables(model)
        self.n_rods, self.n_rod_blocks = groups.n_rods, groups.n_rod_blocks
        self._has_blocks = groups.has_blocks
        self._hosts = bool(self.options.host_solve and self.options.step == "frobenius"
                           and (groups.has_rigid or self.n_rods > 0))
        self._rod_hosts = self._hosts and self.n_rods > 0      # rods refactored as their held sets change (hosts.py)
        self._block_rod = backend.int_array(np.repeat(np.arange(self.n_rods, dtype=np.int32),
                                                      np.diff(groups.rod_start)))
        self._rod_dirty = backend.int_array(np.zeros(max(self.n_rods, 1), np.int32))
        self._fixed = None                                     # the solve's prescribed rows (_setup)
        self._kinds = (HAS_BLOCKS * bool(self._has_blocks) | HAS_RODS * (self.n_rods > 0)
                       | HAS_HOSTS * self._hosts)      # compile-time switch
        self._blockstep = backend.int_array(groups.step_kind)
        self._claim = backend.int_array(np.zeros(n0, np.int32))      # nodalization (cond_nodalize)
        self._count = backend.int_array(np.zeros(1, np.int32))
        self._pair_slot = backend.int_array(groups.pair_slot)
        self._host_ok = backend.int_array(np.zeros(n0, np.int32))          # hosts.py
        self._rod_start = backend.int_array(groups.rod_start)
        self._rod_pos = backend.int_array(groups.rod_pos)
        self._rod_rows = ROD_ROWS.alloc(self.n_rod_blocks)
        self._rod_slots = ROD_SLOTS.alloc(self.n_rod_blocks)
        if self.n_rod_blocks:
            self._rod_rows.from_numpy(groups.rod_rows.astype(np.int32))
            self._rod_slots.from_numpy(groups.rod_slots.astype(np.int32))
        self._DL = ROD_BLOCKS.alloc(self.n_rod_blocks)
        self._F = ROD_FACTOR.alloc(self.n_rod_blocks)
        self._CR = backend.mat3_array(n0)
        self._CR.from_numpy(np.zeros((max(n0, 1), 3, 3), backend.np_real()))
        # W: A's Frobenius / Gershgorin row sums (recycled), with the coupling, and the block steps
        self._tr, self._rs, self._l1 = (backend.scalar_array(n0) for _ in range(3))
        self._tr2, self._rs2, self._l12 = (backend.scalar_array(n0) for _ in range(3))
        self._WB = ti.Matrix.ndarray(3, 3, float, shape=(WB_ROWS if self._hosts else 2, max(n0, 1)))
        self._px, self._py = backend.vec3_array(n0), backend.vec3_array(n0)
        self._pout = backend.scalar_array(3)
        # iteration norms ring (cond_iterate), read every check_every iterations
        self._check_every = self.options.check_every or (
            1 if self.options.acceleration == "chebyshev" else backend.default_check_every())
        self._stats = ti.Vector.ndarray(4, float, shape=self._check_every)
        self._iter_f, self._iter_i = HostScalars(ITER_F), HostScalars(ITER_I)     # cond_iterate's scalars
        self._iter_key = None
        self._cap = self._ccap = self._vcap = 0
        self._alloc(n0 + 64)
        self._alloc_contacts(64)
        self._alloc_virtual(16)
        self._P = self._P_key = None
        self._mixer: Optional[AndersonMixer] = None
        self._rest = self._rest_key = None
        # memory carried between solves (memory() / restore())
        self.w_scale = 1.0
        self.fem_lmax: Optional[float] = None   # estimated λ_max(D⁻¹A) on the FEM rows (fem_step; 0: none)
        fem_step = self.options.fem_step
        if fem_step == "auto":
            fem_step = "chebyshev" if self.options.step == "frobenius" else "jacobi"
        self._fem = {"jacobi": 0, "block3": 1, "chebyshev": self.options.fem_sweeps}[fem_step]
        self._fem_auto = self.options.fem_step == "auto"
        self.fem_rows = 0            # rows that took the FEM step in the last solve
        self._steps_since_w: Optional[int] = None
        self._steps_since_scale: Optional[int] = None
        self._rho_prev: Optional[float] = None     # ϱ the last solve ended with (adaptive Chebyshev)
        self._em_ratio: Optional[float] = None     # e_m / θ at the last solve's last e_m check
        self._last_nc = self._last_nv = 0
        # diagnostics of the last solve
        self.history: list[float] = []   # residual θ per iteration
        self.rho_estimate: Optional[float] = None

    # ------------------------------------------------------------------ work arrays
    def _alloc(self, cap: int) -> None:
        self._cap = cap
        self.V = ti.Vector.ndarray(3, float, shape=(VROWS.count, cap))
        self._W = backend.scalar_array(cap)
        self._RK = ROW.alloc(cap)

    def _alloc_contacts(self, cap: int) -> None:
        self._ccap = cap
        self._Cf = CONTACT.alloc(cap)
        self._Ci = CONTACT_NODES.alloc(cap)
        self.lam = backend.vec3_array(cap)
        self._RT = backend.int_array(np.zeros(4 * cap, np.int32))

    def _alloc_virtual(self, cap: int) -> None:
        self._vcap = cap
        self._VNf = VIRTUAL.alloc(cap)
        self._VNi = VIRTUAL_NODES.alloc(cap)

    def _pattern(self, A):
        if self._P is None or self._P_key is not A.pattern:
            n, nnz = A.n, A.pattern.nnzb
            self._P = ti.ndarray(ti.i32, shape=n + 1 + max(nnz, 1))
            cond_pattern(A.indptr, A.indices, self._P, n, nnz)
            self._P_key = A.pattern
        return self._P

    def _restitution_table(self):
        """Per contact-parameter row the restitution (NaN: the option's default)."""
        table = self.model.contact_params
        key = None
        if table is not None:
            table = np.asarray(table, dtype=np.float64)
            key = (table.shape, table.tobytes())
        if self._rest is None or key != self._rest_key:
            col = None
            if table is not None and table.ndim == 2 and len(table):
                k = CONTACT_PARAM_COLUMNS.index("restitution")
                if table.shape[1] > k:
                    col = table[:, k]
            self._n_rest = 0 if col is None else len(col)
            self._rest = backend.scalar_array(max(self._n_rest, 1), np.full(1, np.nan) if col is None else col)
            self._rest_key = key
        return self._rest, self._n_rest

    # ------------------------------------------------------------------ API
    def virtual_velocities(self) -> np.ndarray:
        """(V, 3) virtual-node velocities v̂_v of the last solve (m/s)."""
        return self.V.to_numpy()[VROWS.V_STAR, self.n0:self.n0 + self._last_nv].astype(np.float64)

    def virtual_gains(self) -> np.ndarray:
        """(V,) gains k_v of the ContactSet's virtual nodes in the last solve (COND eq. 15, N s/m)."""
        return VIRTUAL.unpack(self._VNf.to_numpy())["gain"][:self._last_nv, 0].astype(np.float64)

    def nodalized_jacobian(self, contacts) -> sp.csr_matrix:
        """COND's contact Jacobian of ``contacts`` after nodalization (``cond_nodalize``): rows (t1, t2, n)
        per contact, columns the real nodes, then the ContactSet's virtual nodes, then COND's own
        (3c x 3(n0 + V + extra)); each side is ±R_m on one column block, so with a diagonal W,
        Γ = J W Jᵀ is block diagonal (Prop. 2)."""
        nc, nv = int(contacts.count), int(contacts.n_virtual)
        nvx = self._virtual_nodes(contacts, nc, nv)
        RT = backend.read(self._RT, 2 * nc).reshape(nc, 2)
        R = contacts.read("frame")["frame"]
        rows, cols, vals = [], [], []
        for side, sign in ((0, -1.0), (1, 1.0)):
            m = np.flatnonzero(RT[:, side] >= 0)
            r = (3 * m[:, None, None] + np.arange(3)[None, :, None]) * np.ones((1, 1, 3), int)
            c = 3 * RT[m, side][:, None, None] + np.arange(3)[None, None, :] * np.ones((1, 3, 1), int)
            rows.append(r.ravel()), cols.append(c.ravel()), vals.append((sign * R[m]).ravel())
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(3 * nc, 3 * (self.n0 + nvx)))

    def lambdas(self) -> np.ndarray:
        """(c, 3) the last solve's λ in the contact frame (midpoint: N; Euler: N s)."""
        return self.lam.to_numpy()[: self._last_nc].astype(np.float64)

    def memory(self) -> dict:
        """Everything a solve leaves for the next: the recycled Frobenius/Gershgorin sums of A
        (and their spectral scale), the recycling and power-estimate counters, the Chebyshev ϱ, the
        e_m/θ ratio that predicts the next solve's inner tol,
        and the last solve's λ and virtual velocities (what ``lambdas``/``virtual_velocities``
        return). Counters that are unset are -1, an unset ϱ is NaN."""
        n0 = self.n0
        return {
            "tr": self._tr.to_numpy()[:n0].copy(), "rs": self._rs.to_numpy()[:n0].copy(),
            "l1": self._l1.to_numpy()[:n0].copy(),
            "w_scale": float(self.w_scale), "fem_lmax": float(-1 if self.fem_lmax is None else self.fem_lmax),
            "steps_since_w": float(-1 if self._steps_since_w is None else self._steps_since_w),
            "steps_since_scale": float(-1 if self._steps_since_scale is None else self._steps_since_scale),
            "rho_prev": float("nan") if self._rho_prev is None else float(self._rho_prev),
            "em_ratio": float("nan") if self._em_ratio is None else float(self._em_ratio),
            "lambdas": self.lambdas(), "virtual_velocities": self.virtual_velocities(),
        }

    def restore(self, memory: dict) -> None:
        """Continue from ``memory`` (a dict from :meth:`memory` of a solver on the same Model)."""
        n0 = self.n0
        for name, arr in (("tr", self._tr), ("rs", self._rs), ("l1", self._l1)):
            full = arr.to_numpy()
            full[:n0] = np.asarray(memory[name])
            arr.from_numpy(full)
        self.w_scale = float(memory["w_scale"])
        lm = float(memory.get("fem_lmax", -1.0))
        self.fem_lmax = None if lm < 0 else lm
        s = int(memory["steps_since_w"])
        self._steps_since_w = None if s < 0 else s
        s = int(memory["steps_since_scale"])
        self._steps_since_scale = None if s < 0 else s
        r = float(memory["rho_prev"])
        self._rho_prev = None if math.isnan(r) else r
        r = float(memory.get("em_ratio", math.nan))          # (absent from checkpoints made before it)
        self._em_ratio = None if math.isnan(r) else r
        lam, vv = np.asarray(memory["lambdas"]), np.asarray(memory["virtual_velocities"])
        nc, nv = len(lam), len(vv)
        if nc > self._ccap:
            self._alloc_contacts(nc)
        if n0 + nv > self._cap:
            self._alloc(n0 + nv)
        full = self.lam.to_numpy()
        full[:nc] = lam
        self.lam.from_numpy(full)
        full = self.V.to_numpy()
        full[VROWS.V_STAR, n0:n0 + nv] = vv
        self.V.from_numpy(full)
        self._last_nc, self._last_nv = nc, nv

    # ------------------------------------------------------------------ the step
    def solve(self, problem: StepProblem) -> SolveStats:
        """Solve one step (StepProblem); v̂ is written to problem.v_hat, impulses and status to the contacts.

        Stop (docs/COND.md, "Residual and stopping"): the answer's SAP eq. 32 momentum error e_m at most
        ``momentum_tol``, checked each time θ falls below the inner tol (then tightened from the e_m
        found); an answer that meets it (or whose θ is below the default tol) has its targets shifted
        by the virtual dampers' compliance and is solved again, up to ``compliance_passes`` times.
        ``extra["stop"]`` says how the solve ended: "converged", "cap" (``max_iter`` reached) or
        "diverged" (a non-finite θ)."""
        o = self.options
        if int(problem.contacts.count) == 0 and o.contact_free == "linear":
            return solve_without_contacts(problem)      # the step's linear solve: its own residual, no e_m
        t_start = time.perf_counter()
        c = problem.contacts
        nc, nv = int(c.count), int(c.n_virtual)
        nvx = self._virtual_nodes(c, nc, nv)
        self._iter_f.set(impulse_scale=float(problem.coef.impulse_scale), dt=float(problem.dt),
                         gain=float(o.virtual_gain), rigid_gain=float(o.rigid_gain), restitution=float(o.restitution),
                         recovery=float(o.recovery), vrec_max=float(o.max_recovery_speed),
                         wcap=step_matrix.W_CAP if o.step == "frobenius" else 1e300)
        self._iter_i.set(midpoint=int(problem.integrator == "midpoint"), warm=int(bool(o.warm_start)))
        A = problem.A
        self._update_w(A, problem.fixed)
        scale2 = self._setup(problem, nc, nv, nvx)
        vscale = max(math.sqrt(max(scale2, 0.0)), 1e-12) if o.theta == "relative" else 0.0
        self.history = []
        t_loop = time.perf_counter()
        p = _Progress(*self._accelerators(nvx))
        tol, target, checks = o.tol, o.momentum_tol, 0
        shift_tol = min(o.tol, default_tol(o.acceleration))       # θ at which a shift need not wait for e_m
        if target is not None and self._em_ratio:     # the θ the last solve's e_m/θ predicts (none if e_m was 0)
            tol = min(tol, EM_MARGIN * target / self._em_ratio)
        while True:
            if p.shifted:                   # the targets moved since the run began: a new run
                p.restart(*self._accelerators(nvx))
            self._iterate(A, nvx, nc, vscale, p, tol)
            self._iter_f.set(alpha_end=p.alpha)
            comp = cond_finish(self.V, self._W, self._Cf, self._Ci, problem.v_hat, self.lam, c.cf, c.ci,
                               self._iter_f.sync(), self._iter_i.sync())
            e_m = momentum_error(problem)
            checks += 1
            if p.converged and p.theta > 0.0:
                self._em_ratio = e_m / p.theta
            if not p.converged or p.it >= o.max_iter:
                break
            shift = p.shifts < o.compliance_passes and nvx > 0
            if target is not None and e_m > target and not (shift and tol <= shift_tol):
                # θ < tol but e_m above its tolerance: go on from here with the θ that e_m/θ predicts
                tol *= min(max(EM_MARGIN * target / e_m, EM_MIN_FACTOR), EM_MARGIN)
                continue
            if not shift:
                break
            # an answer that meets e_m, or θ below the acceleration's default tol: shift the targets by
            # the virtual dampers' compliance and solve again (a shift from a loose answer leaves its
            # error in the targets; on the gripper's stalled steps shifting at the default tol ended
            # at a lower e_m than holding the shifts back until e_m was met), unless the shift is below
            # the per-row accuracy (θ's scale: the velocity scale, or 1 m/s for the absolute θ)
            change = float(cond_compliance_shift(self._Cf, self._Ci, self._VNf, self._VNi, self._blockstep,
                                                 self._iter_i.sync()))
            p.shifts += 1
            p.shifted = True
            if change <= tol * (vscale or 1.0) / math.sqrt(self.n0 + nvx):
                break
        converged = p.converged and math.isfinite(p.theta) and (target is None or e_m <= target)
        stop = "converged" if converged else "diverged" if not math.isfinite(p.theta) else "cap"
        loop_s = time.perf_counter() - t_loop
        sched, mixer = p.sched, p.mixer
        self._rho_prev = sched.carry(converged)
        self.rho_estimate = sched.estimate
        self._last_nc, self._last_nv = nc, nv
        comp_n = float(comp[0]) / max(float(comp[2]), 1e-300) if nc else 0.0
        comp_c = float(comp[1]) / max(float(comp[3]), 1e-300) if nc else 0.0
        rho = sched.rho if o.acceleration == "chebyshev" else None
        extra = {"contacts": nc, "virtual_nodes": nv, "complementarity_normal": comp_n,
                 "cone_violation": comp_c, "acceleration": o.acceleration, "chebyshev_rho": rho,
                 "chebyshev_restarts": sched.restarts, "chebyshev_adaptations": sched.adaptations,
                 "anderson_restarts": mixer.restarts if mixer is not None else 0, "compliance_shifts": p.shifts,
                 "alpha": p.alpha, "fem_rows": self.fem_rows, "stop": stop, "momentum_error": e_m,
                 "momentum_checks": checks, "final_tol": tol,
                 "ms": 1e3 * (time.perf_counter() - t_start), "us_per_iteration": 1e6 * loop_s / max(p.it, 1)}
        return SolveStats(p.it, p.theta, converged, extra)

    def _accelerators(self, nvx: int):
        """A fresh ν schedule and Anderson mixer (None unless acceleration='anderson') for one run."""
        o = self.options
        sched = make_schedule(o.acceleration, o.chebyshev_schedule, o.chebyshev_start, o.rho,
                              o.rho_adapt and o.step == "frobenius", self._rho_prev)
        return sched, self._anderson(nvx)

    def _iterate(self, A, nvx: int, nc: int, vscale: float, p: "_Progress", tol: float) -> None:
        """Iterate until θ < tol or ``max_iter`` iterations in all, going on from ``p`` (updated).

        θ = ‖v̂ˡ⁺¹ − v̂ˡ‖ / max(‖v̂ˡ⁺¹‖, vscale), or ‖v̂ˡ⁺¹ − v̂ˡ‖ where vscale is 0 (absolute). The
        iteration norms stay on the device in the ring ``_stats`` and are read every
        ``check_every`` iterations (every one under Chebyshev, whose schedule needs each θ); the
        test then looks at the last θ read, so a solve may run up to check_every − 1 iterations
        past the first θ < tol. The iteration that met the test is handed to the schedule and the
        mixer only if the solve goes on (``_Progress.pending``), as if tol had been tighter."""
        k = self._check_every
        sched, mixer = p.sched, p.mixer
        if p.pending is not None:
            sched.record(p.l - 1, *p.pending)
            if mixer is not None:
                mixer.advance(self.V, self.n0 + nvx)
            p.pending = None
        budget = self.options.max_iter - p.it
        theta, dn, last = p.theta, 0.0, p.l
        for it in range(1, budget + 1):
            l = p.l
            self.iterate_once(A, nvx, nc, p.alpha if it == 1 else -1.0, sched.weight(l), l % k)
            p.l += 1
            p.it += 1
            if p.l % k == 0 or it == budget:
                stats = backend.read(self._stats)
                for j in range(last, p.l):          # the iterations since the last read, in order
                    dv2, vv2, p.alpha = (float(x) for x in stats[j % k, :3])
                    dn = math.sqrt(max(dv2, 0.0))
                    theta = dn / max(math.sqrt(max(vv2, 0.0)), vscale) if vscale else dn
                    self.history.append(theta)
                    if not math.isfinite(theta):
                        p.theta, p.converged = theta, False
                        return
                    if j < l:
                        sched.record(j, theta, dn)
                last = p.l
                if theta < tol and sched.may_stop(l):
                    p.theta, p.converged, p.pending = theta, True, (theta, dn)
                    return
                sched.record(l, theta, dn)
            if mixer is not None:
                mixer.advance(self.V, self.n0 + nvx)
        p.theta, p.converged = theta, False

    def _anderson(self, nvx: int) -> Optional[AndersonMixer]:
        """The AA(m) mixer for this solve (None unless acceleration='anderson'), history cleared."""
        if self.options.acceleration != "anderson":
            return None
        if self._mixer is None:
            self._mixer = AndersonMixer(self.options.anderson_history, self._cap)
        self._mixer.alloc(self._cap)
        self._mixer.reset()
        return self._mixer

    def iterate_once(self, A, nvx: int, nc: int, alpha: float, nu: float, slot: int = 0) -> None:
        """One launch of ``cond_iterate`` on the set-up work arrays (nvx virtual nodes, nc contacts);
        (‖v̂ˡ⁺¹−v̂ˡ‖², ‖v̂ˡ⁺¹‖², α, ‖v̂**−v̂ˡ‖²) go to ``_stats[slot]``; α ≤ 0: the previous slot's.
        The scalars go through ``_iter_f`` / ``_iter_i`` (``layout.HostScalars``), not as arguments."""
        o = self.options
        fem = self._fem if self.fem_rows else 0
        key = (nvx, nc, self.fem_lmax, self._fem, o.under_relaxation, o.omega)
        if key != self._iter_key:         # the solve's constants: written when they change
            fem_a, fem_b, fem_c = step_matrix.fem_interval(self.fem_lmax or 0.0, self._fem)
            self._iter_f.set(u=float(o.under_relaxation), omega=float(o.omega), fem_a=fem_a, fem_b=fem_b,
                             fem_c=fem_c)
            self._iter_i.set(n0=self.n0, nv=nvx, nc=nc, nrods=self.n_rods)
            self._iter_key = key
        self._iter_f.set(alpha=alpha, nu=nu)
        self._iter_i.set(slot=slot)
        if self._rod_hosts:          # the rods' factors with this iteration's held virtual rows (where they changed)
            cond_rod_host_factor(A.blocks, self._fixed, self._VNf, self._VNi, self._RK, self._rod_start,
                                 self._rod_rows, self._rod_pos, self._rod_slots, self._block_rod, self._rod_dirty,
                                 self._DL, self._F, self._iter_i.sync())
        cond_iterate(self._pattern(A), A.blocks, self.V, self._W, self._RK, self._WB, self._Cf, self._Ci,
                     self._VNf, self._VNi, self._rod_start, self._rod_rows, self._F, self._stats,
                     self._iter_f.sync(), self._iter_i.sync(), STRICT if o.operator == "strict" else PROXIMAL,
                     o.step == "bb", self._kinds, fem)
        self._iter_i.mirror(slot=(slot + 1) % self._check_every)     # the kernel advanced it

    def _fem_step_pays(self, fixed, n0: int, nvx: int) -> bool:
        """fem_step "auto": take the FEM sweeps in this step? Only where the stall is the FEM rows'
        stiffness: most FEM rows free (``FEM_AUTO_FREE``) and no virtual node (a body against a rigid
        body or another FEM body stalls on the real–virtual alternation instead: the gripper's held
        ball took 320 instead of 337 iterations at 1.8× the time per step; docs/COND.md, "FEM step")."""
        return nvx == 0 and blocks.cond_fem_free_fraction(fixed, self._blockstep, self._claim,
                                                          self._iter_i.sync()) >= FEM_AUTO_FREE

    def _virtual_nodes(self, c, nc: int, nv: int) -> int:
        """Nodalize (``cond_nodalize``): contact sides on rod rows or on real rows already taken become
        solver-private virtual nodes; grow the work arrays. Returns the number of virtual nodes
        including those."""
        if nc > self._ccap:
            self._alloc_contacts(max(nc, 2 * self._ccap))
        claim, count = backend.host_view(self._claim), backend.host_view(self._count)
        if claim is not None:                 # CPU: zero in place, no fill kernels
            claim[:] = 0
            count[:] = 0
        else:
            self._claim.fill(0)
            self._count.fill(0)
        self._iter_i.set(n0=self.n0, nv_set=nv, nc=nc)
        nx = int(cond_nodalize(c.ci, self._blockstep, self._claim, self._RT, self._count,
                               self._iter_i.sync())) if nc else 0
        nvx = nv + nx
        self._iter_i.set(nv=nvx)
        if self.n0 + nvx > self._cap:
            self._alloc(max(self.n0 + nvx, self.n0 + 2 * (self._cap - self.n0)))
        if nvx > self._vcap:
            self._alloc_virtual(max(nvx, 2 * self._vcap))
        return nvx

    def _update_w(self, A, fixed) -> None:
        """A's part of the Frobenius W every ``recycle`` steps, spectrally scaled every SCALE_EVERY."""
        o = self.options
        if self._steps_since_w is None or self._steps_since_w >= o.recycle:
            self._iter_i.set(n0=self.n0)
            step_matrix.cond_weights_base(A.indptr, A.blocks, A.diag, self._tr, self._rs, self._l1,
                                          self._iter_i.sync())
            if o.step == "frobenius":
                due = self._steps_since_scale is None or self._steps_since_scale >= step_matrix.SCALE_EVERY
                if due:
                    self.w_scale = step_matrix.spectral_scale(A, fixed, self._blockstep, self._tr, self._rs,
                                                              self._px, self._py, self._pout)
                    self._steps_since_scale = 0
                if self._fem and (due or self.fem_lmax is None):    # (none yet: restored from a "jacobi" run)
                    self.fem_lmax = step_matrix.block_lambda_max(A, fixed, self._blockstep, self._px, self._py,
                                                                 self._pout)
                if self.w_scale < 1.0:
                    self._iter_f.set(w_scale=self.w_scale)
                    step_matrix.cond_scale_rows(self._tr, self._blockstep, self._iter_f.sync(), self._iter_i.sync())
            self._steps_since_w = 0
        self._steps_since_w += 1
        if self._steps_since_scale is not None:
            self._steps_since_scale += 1

    def _setup(self, problem, nc: int, nv: int, nvx: int) -> float:
        """Virtual nodes and gains, W with the coupling, block steps, start values, normal targets.
        Returns ‖D⁻¹ b‖²."""
        o, c, A, fixed, n0 = self.options, problem.contacts, problem.A, problem.fixed, self.n0
        self._fixed = fixed
        rest, n_rest = self._restitution_table()
        if self.n_rods:
            blocks.cond_rod_compliance(A.blocks, fixed, self._rod_start, self._rod_rows, self._rod_slots, self._DL,
                                       self._F, self._CR, self.n_rods, self.n_rod_blocks)
        Pf, Pi = self._iter_f.sync(), self._iter_i.sync()      # the solve's scalars (solve, _virtual_nodes)
        cond_pack_virtual(c.vn_node, c.vn_weight, self._RT, self._VNf, self._VNi, Pi)
        cond_gains(A.blocks, A.diag, self._blockstep, self._pair_slot, self._CR, self._VNf, self._VNi, Pf, Pi,
                   self._kinds)
        step_matrix.cond_coupling(self._tr, self._rs, self._l1, self._tr2, self._rs2, self._l12, self._VNf,
                                  self._VNi, Pi)
        if self._hosts:
            cond_host_mark(self._blockstep, fixed, self._VNi, self._host_ok, Pi)
        if self._has_blocks:
            blocks.cond_block_diagonal(A.blocks, A.diag, self._blockstep, self._pair_slot, self._WB, self._VNf,
                                       self._VNi, Pi)
        scale2 = cond_start(A.blocks, A.diag, problem.b, fixed, problem.v_hat, self._blockstep, self._l1, self._tr2,
                            self._rs2, self._l12, self.V, self._W, self._RK, self._VNf, self._VNi, Pf, Pi)
        if self._has_blocks:
            blocks.cond_block_inverses(fixed, self._blockstep, self._WB, self._RK, Pi)
        if self._hosts:
            cond_host_steps(A.blocks, A.diag, self._pair_slot, self._RK, self._WB, self._VNf, self._VNi,
                            self._blockstep, self._host_ok, Pi)
        self.fem_rows = 0
        if self._fem and self.fem_lmax and (not self._fem_auto or self._fem_step_pays(fixed, n0, nvx)):
            self.fem_rows = int(blocks.cond_fem_blocks(A.blocks, A.diag, fixed, self._blockstep, self._claim, self._WB,
                                                       self._RK, self._VNf, self._VNi, Pi))
        self._iter_i.set(n_rest=n_rest)
        cond_targets(problem.state.v, c.vn_node, c.vn_weight, c.cf, c.ci, rest, self._RT, self._Cf, self._Ci, Pf,
                     self._iter_i.sync())
        if self.n_rods:
            blocks.cond_rod_factor(A.blocks, fixed, self._VNf, self._VNi, self._rod_start, self._rod_rows,
                                   self._rod_pos, self._rod_slots, self._DL, self._F, nvx, self.n_rods,
                                   self.n_rod_blocks)
        return scale2

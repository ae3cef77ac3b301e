"""Contact-space reduction shared by the Delassus-operator solvers (NCP-PGS ``pgs.py``, Todorov's
implicit complementarity ``incp.py``).

The step system ``A v̂ = b + Jᵀλ`` is reduced to contact space with a sparse direct factorization
of A (the Newton path's CHOLMOD / SuperLU, ``newton_linear``):

    v* = A⁻¹ b,    G = J_f A⁻¹ J_fᵀ    (the Delassus operator, dense 3c × 3c),    v̂ = v* + A⁻¹ J_fᵀ λ
    u(λ) = G λ + q,   q = J v* + u_world + [bias_t, −t_m]

G is formed ``DELASSUS_BLOCK_BYTES`` of A⁻¹ J_fᵀ at a time (the whole 3n × 3c block would take
18 GB on the 59k-DOF mat, where CHOLMOD crashed for want of it); only G (3c × 3c) is kept.

(``J_f``: J with the prescribed DOFs' columns zeroed: a drive absorbs the contact's reaction;
their prescribed v̂ still enters ``J v*``). ``u`` is the contact velocity of the condition COND
imposes (``cond/targets.py``): ``u_n = J_n v̂ − t_m ≥ 0`` with the velocity-level normal target
``t_m`` from the gap, and under the midpoint rule the tangential bias ``−½ J_t v_k`` so that
stick means ``v_{k+1,t} = 0``. Rows per contact: t1, t2, n.

``DelassusSolver`` holds what both solvers share: option checks, the reduction of the step's
``host_problem.HostContactProblem`` (A, J, J_f, offsets; ``reduce`` → ``ContactSpace``), the warm
start by contact key and nearest point (``memory`` / ``restore``), and the result with the common
statistics (``finish`` → ``SolveResult``, which ``solve`` writes into the problem). A subclass
implements ``iterate(space) -> ContactIterate``.
"""
from __future__ import annotations

import abc
import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..contact.anchors import ContactMemory
from ..contact.contacts import OPEN, SLIP, STICK, restitution_per_contact
from ..errors import ParameterError
from .base import SolveStats, StepProblem, solve_without_contacts
from .cond.targets import normal_targets
from .host_problem import HostContactProblem, PrescribedMask, SolveResult
from .newton_linear import make_newton_linear_solver

DELASSUS_BLOCK_BYTES = 1 << 28     # columns of A⁻¹ J_fᵀ solved at a time: at most this many bytes

DELASSUS_COLUMNS = ("frame", "phi", "mu", "point", "param")     # the contact columns a solve reads

COMMON_DEFAULTS = {"tol": 1e-6, "max_iter": 500, "warm_start": True, "restitution": 0.0, "recovery": 0.2,
                   "max_recovery_speed": 0.05, "linear_solver": "direct"}


def delassus_operator(factor, Jf: sp.csr_matrix) -> np.ndarray:
    """G = J_f A⁻¹ J_fᵀ (3c × 3c, symmetrized) from A's factorization, ``DELASSUS_BLOCK_BYTES`` of A⁻¹ J_fᵀ
    at a time."""
    m, n3 = Jf.shape
    JfT = Jf.T.tocsc()
    G = np.empty((m, m))
    cols = max(1, DELASSUS_BLOCK_BYTES // (8 * max(n3, 1)))
    for j0 in range(0, m, cols):
        j1 = min(j0 + cols, m)
        G[:, j0:j1] = Jf @ factor.solve(JfT[:, j0:j1].toarray())
    G += G.T
    G *= 0.5
    return G


@dataclass
class ContactSpace:
    """One step reduced to contact space: ``u = G λ + q`` for c contacts (rows t1, t2, n each).

    G: (3c, 3c) Delassus operator; q: (3c,) contact velocity at λ = 0; mu: (c, 2) friction on t1, t2;
    lam_warm: (c, 3) warm-start impulses in this step's frames (zeros where none); has_warm: whether
    any contact found its predecessor. v_star, factor (A's), Jf: v̂ = v* + A⁻¹ J_fᵀ λ. The rest is
    bookkeeping for ``finish``."""

    G: np.ndarray
    q: np.ndarray
    mu: np.ndarray
    lam_warm: np.ndarray
    has_warm: bool
    factor: object
    Jf: sp.csr_matrix
    v_star: np.ndarray
    frame: np.ndarray
    points: np.ndarray
    host: HostContactProblem
    ms_factorization: float
    ms_delassus: float
    t_start: float

    @property
    def count(self) -> int:
        return len(self.mu)


@dataclass
class ContactIterate:
    """What a contact-space iteration returns: impulses λ (c, 3), per-contact status (OPEN, STICK,
    SLIP), iterations, final residual and its history, convergence, and extra statistics."""

    lam: np.ndarray
    status: np.ndarray
    iterations: int
    residual: float
    converged: bool
    history: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)


class DelassusSolver(abc.ABC):
    """Base of the solvers on the dense Delassus operator of a factorized A (module docstring)."""

    name = "delassus"
    defaults: dict = COMMON_DEFAULTS
    iteration_word = "iteration"            # statistics key ``us_per_<word>``
    friction_on_end_velocity = True         # COND's rule: q_t gets −½ J_t v_k under the midpoint rule

    def __init__(self, model, options: dict):
        name = self.name
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise ParameterError(f"unknown option(s) {sorted(unknown)} for solver {name!r}; "
                                 f"known: {', '.join(sorted(self.defaults))}")
        o = self.opt = {**self.defaults, **options}
        if not (isinstance(o["tol"], (int, float)) and math.isfinite(o["tol"]) and o["tol"] > 0):
            raise ParameterError(f"{name} option tol must be a positive number, got {o['tol']!r}")
        if isinstance(o["max_iter"], bool) or not isinstance(o["max_iter"], (int, np.integer)) or o["max_iter"] < 1:
            raise ParameterError(f"{name} option max_iter must be a positive integer, got {o['max_iter']!r}")
        if not isinstance(o["warm_start"], (bool, np.bool_)):
            raise ParameterError(f"{name} option warm_start must be True or False, got {o['warm_start']!r}")
        for key, hi in (("restitution", 1.0), ("recovery", 1.0), ("max_recovery_speed", math.inf)):
            v = o[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v <= hi):
                raise ParameterError(f"{name} option {key} must be in [0, {hi:g}], got {v!r}")
        if o["linear_solver"] not in ("direct", "cholmod", "splu"):
            raise ParameterError(f"{name} option linear_solver must be 'direct', 'cholmod' or 'splu' ({name} needs a "
                                 f"factorization of A), got {o['linear_solver']!r}")
        self.model = model
        self.factor = make_newton_linear_solver(o["linear_solver"], model.n_dofs)
        self._mask = PrescribedMask()           # the prescribed mask, read once
        self._last = ContactMemory(model.n_nodes)   # warm start: the last solve's contacts and world-frame λ
        self.history: list[float] = []          # residual per iteration, last solve
        self.last_stats = None

    @abc.abstractmethod
    def iterate(self, space: ContactSpace) -> ContactIterate:
        """Solve the reduced problem ``space`` for the impulses (the subclass's method)."""

    # ------------------------------------------------------------------ memory
    def memory(self) -> dict:
        """The last solve's impulses (λ, world frame) and their contacts' keys: the warm start."""
        d = self._last.memory()
        return {"keys": d["keys"], "lambdas_world": d["values"], "points": d["points"]}

    def restore(self, memory: dict) -> None:
        self._last.restore(memory["keys"], memory["points"], memory["lambdas_world"])

    # ------------------------------------------------------------------ the solve
    def solve(self, problem: StepProblem) -> SolveStats:
        if int(problem.contacts.count) == 0:
            self._last.forget()
            return solve_without_contacts(problem)
        space = self.reduce(problem)
        t1 = time.perf_counter()
        result = self.iterate(space)
        ms_iter = 1e3 * (time.perf_counter() - t1)
        return space.host.apply(self.finish(space, result, ms_iter))

    def reduce(self, problem: StepProblem) -> ContactSpace:
        """Factorize A, form v*, the Delassus operator G, q and the warm-start impulses."""
        t_start = time.perf_counter()
        o = self.opt
        hp = HostContactProblem(problem, DELASSUS_COLUMNS, self._mask)
        c, dt, midpoint = hp.c, hp.dt, hp.midpoint
        A = hp.a_scipy().tocsc()
        J = hp.jacobian_csr()
        Jf = hp.free_columns(J)
        cd = hp.data
        frame = cd["frame"]
        off = hp.off_world

        # factorization, free velocity, Delassus operator
        t0 = time.perf_counter()
        F = self.factor.factorize(A)
        v_star = F.solve(hp.b)
        ta = time.perf_counter()
        Gd = delassus_operator(F, Jf)
        ms_factor = 1e3 * (ta - t0)
        ms_delassus = 1e3 * (time.perf_counter() - ta)

        # normal targets and biases (COND's rule, cond/targets.py), q = u(λ = 0)
        vck = (J @ hp.vk).reshape(c, 3) + off
        e = restitution_per_contact(self.model.contact_params, cd["param"].astype(np.int64), self.opt["restitution"])
        t_m = normal_targets(cd["phi"], vck[:, 2], e, dt, float(o["recovery"]), float(o["max_recovery_speed"]),
                             midpoint)
        q = (J @ v_star).reshape(c, 3) + off + hp.off_anchor
        q[:, 2] -= t_m
        if midpoint:
            q[:, :2] -= 0.5 * vck[:, :2]

        # warm start
        lam = np.zeros((c, 3))
        hit = np.zeros(c, bool)
        if o["warm_start"] and self._last.remembered:
            prev = self._last.match(problem.contacts)
            hit = prev >= 0
            lam[hit] = np.einsum("mij,mj->mi", frame[hit], self._last.values()[prev[hit]])
        return ContactSpace(G=Gd, q=q.ravel(), mu=np.asarray(cd["mu"], np.float64), lam_warm=lam,
                            has_warm=bool(hit.any()), factor=F, Jf=Jf, v_star=v_star, frame=frame,
                            points=cd["point"].copy(), host=hp, ms_factorization=ms_factor, ms_delassus=ms_delassus,
                            t_start=t_start)

    def finish(self, space: ContactSpace, result: ContactIterate, ms_iter: float) -> SolveResult:
        """v̂ = v* + A⁻¹ J_fᵀ λ (prescribed blocks at their v̂), the impulses and statuses, and the statistics
        every Delassus solver reports (plus ``result.extra``); nothing written into the problem."""
        hp = space.host
        c = space.count
        lam = np.asarray(result.lam, np.float64).reshape(c, 3)
        status = np.asarray(result.status, np.int32)
        v_hat = hp.with_prescribed(space.v_star + space.factor.solve(space.Jf.T @ lam.ravel()))
        impulse = hp.s * lam
        u = (space.G @ lam.ravel() + space.q).reshape(c, 3)
        self._last.store(hp.problem.contacts, space.points, np.einsum("mij,mi->mj", space.frame, lam))
        self.history = list(result.history)
        t2 = time.perf_counter()
        e_m = hp.momentum_error(v_hat, impulse)
        ms_cert = 1e3 * (time.perf_counter() - t2)
        scale_u = max(float(np.abs(u).max()), 1e-300)
        res = result.residual
        stats = SolveStats(result.iterations, res, bool(result.converged and math.isfinite(res)), {
            "contacts": c, "momentum_error": e_m, "residuals": list(result.history),
            "normal_violation": float(max(0.0, -u[:, 2].min())),            # m/s: Signorini u_n >= 0
            "complementarity_normal": float(np.abs(lam[:, 2] * u[:, 2]).sum() / max(
                float(np.abs(lam[:, 2]).sum()) * scale_u, 1e-300)),
            "open": int(np.sum(status == OPEN)), "stick": int(np.sum(status == STICK)),
            "slip": int(np.sum(status == SLIP)), "linear_solver": self.factor.name,
            "ms_factorization": space.ms_factorization, "ms_delassus": space.ms_delassus, "ms_iteration": ms_iter,
            "ms_certificate": ms_cert, "ms": 1e3 * (t2 - space.t_start),
            f"us_per_{self.iteration_word}": 1e3 * ms_iter / max(result.iterations, 1), **result.extra,
        })
        self.last_stats = stats
        return SolveResult(v_hat, impulse, status, stats)

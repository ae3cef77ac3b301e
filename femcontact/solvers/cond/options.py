"""COND options (``Scene(solver="cond", solver_options={...})``) and their validation.

operator "strict" | "proximal" (Alg. 2; proximal regularization Ω = ω I, COND eq. 33, ``omega`` in
units of J v̂ per λ); step "frobenius" | "bb" (§IV-C.1 / §IV-C.2); recycle: steps a Frobenius W is
reused; fem_step "auto" | "jacobi" | "block3" | "chebyshev" with fem_sweeps (the step of the FEM rows no contact
touches, ``iterate.py``); acceleration "anderson" (default with step "frobenius") | "chebyshev" (default with "bb") |
"none" with chebyshev_schedule "adaptive" | "paper" (Alg. 3 as printed: ϱ from eq. 34 every
iteration), chebyshev_start, rho, rho_adapt (Alg. 3, eq. 34; ``chebyshev.py``) or anderson_history
(AA(m), ``anderson.py``; Frobenius step only); under_relaxation u.
Stopping: momentum_tol (default ``DEFAULT_MOMENTUM_TOL`` = 1e-4; None: off) is the accuracy of the
answer, SAP eq. 32's momentum error e_m, evaluated on the host; θ (the step norm, Alg. 1 line 13:
theta "relative" to the step's velocity scale, or "absolute" in m/s as in the paper) is the inner
criterion: e_m is first evaluated when θ < tol (None: ``DEFAULT_TOL`` of the acceleration, at least
``F32_TOL_FLOOR`` in float32), and while it is above momentum_tol the iteration goes on with a tighter
tol, up to max_iter iterations in all (then the solve reports stop "cap"). check_every (iterations
between reads of the residual: None = every one on the CPU, 8 on a GPU; Chebyshev needs every θ);
warm_start; restitution,
recovery, max_recovery_speed (normal targets, ``targets.py``); virtual_gain, rigid_gain
(virtual-node gains, ``virtual.py``); compliance_passes (re-solves with the targets shifted by the
virtual dampers' compliance, ``virtual.cond_compliance_shift``); host_solve (each free rigid body and rod solved
together with its virtual nodes every iteration, ``hosts.py``; False: they alternate); contact_free
"linear" | "iterate": a step without contacts is solved exactly by the step's linear solver (default)
or by COND's own iteration. docs/COND.md explains each choice.
"""
import math
from dataclasses import dataclass, fields
from typing import Optional

import numpy as np

from ... import backend
from ...errors import ParameterError
from .anderson import HISTORY_MAX

ACCELERATIONS = ("chebyshev", "anderson", "none")
# the step of the free FEM rows (no contact on them): the scalar Frobenius W, the inverse of A's 3x3
# diagonal block per node, or fem_sweeps Chebyshev sweeps preconditioned by it (docs/COND.md, "FEM step")
FEM_STEPS = ("auto", "jacobi", "block3", "chebyshev")
FEM_SWEEPS_MAX = 8
# "auto": the Chebyshev sweeps in a step where at least this fraction of the FEM rows is free (a soft
# body resting on a few contacts: 8-cell cube 89% free, 230 → 23 iterations), else the scalar step
# (the mat, 42% free, is not helped and pays 1.6× per iteration; docs/COND.md, "FEM step")
FEM_AUTO_FREE = 0.75
# θ is the accelerated step under Chebyshev but the plain fixed-point residual under Anderson and
# "none"; these thresholds give about the same SAP eq. 32 momentum error (docs/COND.md, "Anderson")
DEFAULT_TOL = {"chebyshev": 1e-6, "anderson": 1e-7, "none": 1e-7}
# the accuracy every COND answer is held to by default: SAP eq. 32's e_m (docs/COND.md, "Residual and stopping")
DEFAULT_MOMENTUM_TOL = 1e-4
CHEBYSHEV_SCHEDULES = ("adaptive", "paper")
THETA_NORMS = ("relative", "absolute")
# in float32 θ stalls at ~1e-7..1e-6 on stiff contact (round-off of the step norm): no default below
F32_TOL_FLOOR = 1e-6


def default_tol(acceleration: str) -> float:
    """The θ threshold ``tol`` defaults to under ``acceleration`` (floored in float32)."""
    tol = DEFAULT_TOL[acceleration]
    return max(tol, F32_TOL_FLOOR) if backend.ensure_init()["precision"] == "f32" else tol


@dataclass
class CondOptions:
    operator: str = "strict"
    omega: float = 0.0
    step: str = "frobenius"
    fem_step: str = "auto"
    fem_sweeps: int = 8
    recycle: int = 1
    acceleration: Optional[str] = None
    chebyshev_start: int = 8
    rho: Optional[float] = None
    rho_adapt: bool = True
    chebyshev_schedule: str = "adaptive"
    anderson_history: int = 8
    under_relaxation: float = 0.9
    tol: Optional[float] = None
    theta: str = "relative"
    momentum_tol: Optional[float] = DEFAULT_MOMENTUM_TOL
    max_iter: int = 500
    check_every: Optional[int] = None
    warm_start: bool = True
    restitution: float = 0.0
    recovery: float = 0.2
    max_recovery_speed: float = 0.05
    virtual_gain: float = 10.0
    rigid_gain: float = 100.0
    compliance_passes: int = 2
    contact_free: str = "linear"
    host_solve: bool = False

    @classmethod
    def from_dict(cls, options: Optional[dict]) -> "CondOptions":
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ParameterError(f"unknown COND option(s) {', '.join(map(repr, unknown))}; "
                                 f"known options: {', '.join(sorted(known))}")
        o = cls(**options)
        o.validate()
        return o

    def validate(self) -> None:
        def num(name, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
            val = getattr(self, name)
            ok_type = isinstance(val, (int, np.integer)) if integer else isinstance(val, (int, float, np.number))
            if isinstance(val, bool) or not ok_type or not math.isfinite(float(val)):
                kind = "an integer" if integer else "a finite number"
                raise ParameterError(f"COND option {name} must be {kind}, got {val!r}")
            v = float(val)
            bad = (lo is not None and (v <= lo if lo_open else v < lo)) or \
                  (hi is not None and (v >= hi if hi_open else v > hi))
            if bad:
                lb = "" if lo is None else ("(" if lo_open else "[") + f"{lo:g}"
                ub = "inf)" if hi is None else f"{hi:g}" + (")" if hi_open else "]")
                raise ParameterError(f"COND option {name} must be in {lb or '(-inf'}, {ub}, got {val!r}")

        if self.operator not in ("strict", "proximal"):
            raise ParameterError(f"COND option operator must be 'strict' or 'proximal', got {self.operator!r}")
        if self.contact_free not in ("linear", "iterate"):
            raise ParameterError(f"COND option contact_free must be 'linear' or 'iterate', got {self.contact_free!r}")
        if self.step not in ("frobenius", "bb"):
            raise ParameterError(f"COND option step must be 'frobenius' or 'bb' (Barzilai-Borwein), got {self.step!r}")
        if self.fem_step not in FEM_STEPS:
            raise ParameterError(f"COND option fem_step must be one of {', '.join(map(repr, FEM_STEPS))}, "
                                 f"got {self.fem_step!r}")
        if self.fem_step not in ("jacobi", "auto") and self.step != "frobenius":
            raise ParameterError(f"COND option fem_step={self.fem_step!r} needs step='frobenius'")
        num("fem_sweeps", 1, FEM_SWEEPS_MAX, integer=True)
        if self.chebyshev_schedule not in CHEBYSHEV_SCHEDULES:
            raise ParameterError(f"COND option chebyshev_schedule must be one of "
                                 f"{', '.join(map(repr, CHEBYSHEV_SCHEDULES))}, got {self.chebyshev_schedule!r}")
        if self.theta not in THETA_NORMS:
            raise ParameterError(f"COND option theta must be one of {', '.join(map(repr, THETA_NORMS))}, "
                                 f"got {self.theta!r}")
        if self.acceleration is None:      # Anderson needs the fixed map of the Frobenius step
            paper = self.chebyshev_schedule == "paper"
            self.acceleration = "anderson" if self.step == "frobenius" and not paper else "chebyshev"
        if self.acceleration not in ACCELERATIONS:
            raise ParameterError(f"COND option acceleration must be one of {', '.join(map(repr, ACCELERATIONS))}, "
                                 f"got {self.acceleration!r}")
        if self.acceleration == "anderson" and self.step != "frobenius":
            raise ParameterError("COND option acceleration='anderson' needs step='frobenius' (Barzilai-Borwein "
                                 "changes the fixed-point map every iteration)")
        for name in ("warm_start", "rho_adapt", "host_solve"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ParameterError(f"COND option {name} must be True or False, got {getattr(self, name)!r}")
        num("omega", 0.0)
        num("recycle", 1, integer=True)
        num("chebyshev_start", 2, integer=True)
        num("anderson_history", 1, HISTORY_MAX, integer=True)
        if self.chebyshev_schedule == "paper":
            if self.acceleration != "chebyshev":
                raise ParameterError(f"COND option chebyshev_schedule='paper' needs acceleration='chebyshev', "
                                     f"got {self.acceleration!r}")
            if self.rho is not None:
                raise ParameterError("COND option chebyshev_schedule='paper' estimates ϱ every iteration (eq. 34): "
                                     "it takes no fixed rho")
        if self.rho is not None:
            num("rho", 0.0, 1.0, lo_open=True, hi_open=True)
        num("under_relaxation", 0.0, 1.0, lo_open=True)
        if self.tol is None:
            self.tol = default_tol(self.acceleration)
        num("tol", 0.0, lo_open=True)
        if self.momentum_tol is not None:
            num("momentum_tol", 0.0, lo_open=True)
        num("max_iter", 1, integer=True)
        if self.check_every is not None:
            num("check_every", 1, 64, integer=True)
            if self.check_every > 1 and self.acceleration == "chebyshev":
                raise ParameterError("COND option check_every > 1 needs acceleration 'anderson' or 'none': the "
                                     "Chebyshev schedule adapts ϱ from every iteration's residual")
        num("restitution", 0.0, 1.0)
        num("recovery", 0.0, 1.0)
        num("max_recovery_speed", 0.0)
        num("virtual_gain", 0.0, lo_open=True)
        num("rigid_gain", 0.0, lo_open=True)
        num("compliance_passes", 0, integer=True)

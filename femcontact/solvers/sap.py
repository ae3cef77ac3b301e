"""Newton path: SAP, Lagged and Similar contact solvers (SAP §IV, docs/THEORY.md §4).

Each step minimizes over the end-of-step velocities v

    ℓ(v) = ½ vᵀ Ã v − b̃ᵀ v + Σ_m ℓ_m(J_m v + v_w,m)

(``v_w,m`` the world side's contribution for contacts against the static or moving world)
by Newton's method on ``H = Ã + Jᵀ G J`` (assembled in a pattern kept across iterations and
steps, ``newton_linear.NewtonMatrix``) with an exact line search (safeguarded Newton–bisection,
``rtsafe``, on dℓ/dα using the O(n_c)-per-trial derivatives of SAP §IV-C, ``_line_search``),
stopping when ``‖D ∇ℓ‖ < ε_a + ε_r max(‖D p‖, ‖D j_c‖)`` (SAP eq. 26, ``D = diag(Ã)^{-1/2}``: the mass
(inertia) diagonal of the step, so rotational DOFs count too;
``p = Ã v``, ``j_c = Jᵀγ``) and reporting the momentum error e_m (SAP eq. 32). The contact
models (cost, impulse, Hessian block per contact) live in ``solvers.contact_models``; the
linear solve behind ``solvers.newton_linear``. It runs on the host in numpy, vectorized over
contacts (no Python loop per contact): J as per-contact block rows (``newton_dense.ContactRows``,
no scipy.sparse product per iteration), H dense with LAPACK's Cholesky up to
``newton_dense.DENSE_MAX_DOFS`` unknowns (option ``linear_solver`` "auto"/"direct"), for large
deformables through the Schur complement of Ã on the contact DOFs (``newton_schur``), else in
``NewtonMatrix``'s block pattern for CHOLMOD / SuperLU / PCG; J's layout and the per-pair
parameters are kept while the contacts' nodes and pairs repeat.

Scaling: both integrators are solved in impulse units (the units SAP and ICF are derived in).
The step system ``A v̂ = b + Jᵀλ`` has ``v_{k+1} = c_h v̂ + c_o v_k`` and the impulse over
the step is ``γ = s λ`` (``s = coef.impulse_scale``). Substituting ``v̂ = (v − c_o v_k)/c_h``
for the end-of-step velocity ``v = v_{k+1}`` and multiplying by ``s`` gives

    Ã v = b̃ + Jᵀγ,    Ã = (s/c_h) A,    b̃ = s b + (s c_o/c_h) A v_k.

- implicit Euler (s = 1, c_h = 1, c_o = 0): Ã = A = M + dt D + dt² K, b̃ = b; unchanged.
- passive midpoint (s = dt, c_h = 2, c_o = −1): Ã = (dt/2) A = M + (dt/2) D + (dt²/4) K,
  b̃ = dt b − (dt/2) A v_k, γ = dt λ.

So in both cases ``Ã ≈ M`` (what the Delassus estimate w_m, the regularizations of SAP
eqs. 29–30 and the scaling D of eq. 26 assume). Under implicit Euler the contact velocity entering
ℓ_m is the end-of-step velocity v_{k+1}, as in SAP/ICF. Under the midpoint rule positions advance
by dt v̂ and the step's energy changes by exactly the contact work γᵀJv̂, so each contact law is
evaluated at ``u = θ (J v + v_w) + (1 − θ) v_c,k`` (``contact_weights``): friction at the slip of the
contact point over the step (θ_t = ½, u_t = J_t v̂), the normal law at the true end gap
(θ_n = ½) except for an impact (θ_n = 1: approach faster than |g| dt and meeting by mid-step; the
gap clamped at 0, so the impact ends at rest, inelastic). The model is built in (u, γ̃) with the
applied impulse γ = θ γ̃ (``build_model``): the physical stiffness, cone and regularization are
those of θ = 1. Evaluating everything at v_{k+1} (option ``midpoint_contact="end"``) lets the
contacts pump energy into the undamped fast modes (docs/THEORY.md §4, "Contact under the midpoint
rule"). ``v̂`` is written back as ``(v − c_o v_k)/c_h``; prescribed nodes keep their prescribed v̂
exactly.

Prescribed nodes (``fixed == 1``): their rows of A are already decoupled (diagonal block
only), their end-of-step velocity is set once from that row, their Jacobian columns are
zeroed for the derivatives (the drive absorbs the contact impulse), and their Newton
direction is zero, so they never move off the prescribed velocity. Their velocity still
enters the contact velocities.

Parameters per contact (priority: the pair's row in ``model.contact_params`` when not NaN,
then ``solver_options``, then the automatic value):

- ``stiffness`` k (N/m). SAP: automatic = ∞, i.e. SAP's near-rigid regularization
  ``R_n = β² w/(4π²)`` (eq. 29). Lagged/Similar: automatic = the same near-rigid estimate
  ``k = 4π²/(β² w dt²)`` (the stiffness whose period is dt for the mass 1/w; a free rigid
  body rests ``g dt²/(4π²)`` ≈ 25 µm deep at dt = 1e-2 s, an FEM body less: its nodes' effective
  mass includes ``dt²K``).
- ``tau_d`` (s, SAP dissipation time scale): automatic = β dt/π (SAP §V-B, before eq. 29: critical damping).
- ``hc_dissipation`` d (s/m, Lagged/Similar Hunt & Crossley): default 10 s/m.
- ``stiction_tolerance`` v_s (m/s, Lagged/Similar): default 1e-4.
- ``sigma`` (SAP eq. 30 friction regularization, also ICF's impact softening): 1e-3.
- ``beta`` (eq. 29, options only): 1.
- ``max_recovery_speed`` (m/s, SAP under the midpoint rule, options only): cap of the stabilization
  velocity −φ₀/(dt + τ_d) of a penetrating contact, default 0.1 (the bound 1/d that Lagged and Similar
  get from their default Hunt–Crossley dissipation; see ``build_model``).
- ``midpoint_contact`` (options only): "consistent" (default) or "end" (the pre-issue-14 mapping,
  for comparison); ``impact_speed`` (m/s, options only): the approach speed above which a contact
  is an impact under the midpoint rule, default |g| dt.
- friction: ``contacts.mu`` = (μ₁, μ₂) along the contact frame's (t1, t2). Anisotropic friction
  (ICF App. B, the ellipsoidal cone ‖M⁻¹γ_t‖ ≤ γ_n with M = diag(μ₁, μ₂)) by a change of variables:
  every model is the isotropic one with μ̄ = max(μ₁, μ₂) evaluated at ṽ_t = T v_t, T = M/μ̄, and
  applies γ_t = T γ̃_t (``friction_scaling``); its friction potential is then ‖M v_t‖ times the
  normal impulse, whose minimizer is the maximal-dissipation impulse on the ellipse. In code T is a
  row scaling of J, like θ. The regularizations (SAP's R_t, Lagged/Similar's v_s) are scaled by the
  smallest nonzero ratio so that along every axis they are at most the isotropic ones.
- ``restitution`` e (per pair, else option ``restitution``, default 0): Newton's impact law at the
  velocity level, as COND's targets. An impact (``impacts``: approaching faster than
  ``impact_speed`` and meeting within the step, by mid-step under the midpoint rule) with e > 0
  gets the normal target ``v_{n,k+1} ≥ −e v_{n,k}``: SAP's v̂_n, or the Hunt–Crossley spring's
  zero-impulse speed (f_e0 = k max(−φ₀, dt e|v_{n,k}|), no H&C dissipation on that contact).
  With automatic stiffness the contact is made ``1/REBOUND_BETA²`` times stiffer for that step
  (β = 0.1 in eq. 29) so the regularized answer misses the target by ≈ 0.05% rather than ≈ 2.5%.
  With e = 0 an impact is inelastic, as before.

Delassus estimate per contact: ``w_m = tr(J_m B⁻¹ J_mᵀ)/3`` with ``B`` the 3×3 diagonal
blocks of Ã (``delassus_estimate``), on the expanded Jacobian (virtual nodes through their J_v
weights; prescribed nodes have infinite mass).

Solver options: ``rel_tol`` (ε_r, 1e-6), ``abs_tol`` (ε_a, 1e-14 in √J), ``max_iterations``
(100), ``max_line_search_iterations`` (100), ``alpha_max`` (1.5), ``linear_solver``
("auto", "direct", "cholmod", "splu", "pcg", see ``newton_linear``; "schur": Ã factored once per step
and Newton on the contact DOFs' Schur complement, ``newton_schur``, which "auto" takes for large
deformables on the CPU; "pcg": CG in kernels with H matrix-free on the device, ``newton_pcg``, which
"auto" takes for large systems on a GPU), ``friction_majorize_above``
(0.1; ``inf`` for the exact Hessian throughout), ``factor_reuse`` (False; the Schur path keeps Ã's
factor over steps and converges each step on its own Ã to the same tolerance by restarts,
``newton_schur.ReusedContactSpace``).

Friction Hessian far from the solution (Lagged only): while e_m exceeds
``friction_majorize_above``, the friction block of G is the isotropic curvature ``μ n₀/s I`` of the
quadratic that majorizes ``μ n₀ ‖v_t‖ₛ`` at the current slip (``LaggedModel.majorize_friction``)
instead of its exact Hessian ``μ n₀ (I/s − v_t v_tᵀ/s³)``, whose vanishing radial curvature lets a
Newton step carry a sliding contact far through v_t = 0 when the answer is stiction. H stays
positive definite, so Δv is a descent direction; the line search and the stopping rule use the
exact cost and gradient, so the solution and its accuracy are unchanged, and the last iterations
(e_m below the switch) are exact Newton steps with their quadratic convergence.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import backend
from ..contact.contacts import CONTACT_PARAM_COLUMNS, OPEN, restitution_per_contact
from ..errors import ParameterError, SimulationError
from ..spec.names import NEWTON_SOLVERS
from . import CONTACT_SOLVERS
from .base import SolveStats, StepProblem, solve_without_contacts
from .contact_models import HuntCrossley, LaggedModel, SapModel, SimilarModel
from .host_problem import HostContactProblem, PrescribedMask, SolveResult, momentum_scaling
from .line_search import A_TOL, F_TOL, rtsafe_done, rtsafe_start, rtsafe_step
from .newton_dense import DENSE_MAX_DOFS, ContactRows, DenseNewtonMatrix, dense_index
from .newton_linear import NewtonMatrix, make_newton_linear_solver, solve_newton
from .newton_pcg import NewtonPCG
from .newton_schur import SchurSolver, contact_nodes, make_schur_solver

DEFAULTS = {
    "rel_tol": 1e-6, "abs_tol": 1e-14, "max_iterations": 100, "max_line_search_iterations": 100,
    "alpha_max": 1.5, "linear_solver": "auto", "stiffness": None, "tau_d": None, "hc_dissipation": 10.0,
    "stiction_tolerance": 1e-4, "sigma": 1e-3, "beta": 1.0, "midpoint_contact": "consistent", "impact_speed": None,
    "restitution": 0.0, "max_recovery_speed": 0.1, "friction_majorize_above": 1e-1, "factor_reuse": False,
    "compiled": True,
}
STEP_COLUMNS = ("node_a", "node_b", "frame", "phi", "mu", "v_world", "v_anchor", "param")   # read per step
REBOUND_BETA = 0.1     # eq. 29's β for an impact with restitution (near-rigid, so the rebound is met)
PHYSICAL = ("stiffness", "tau_d", "hc_dissipation", "stiction_tolerance", "sigma")


def _check_params(kind: str, k, tau_d, d, vs, sigma, where: str) -> None:
    """Raise a ParameterError for a bad contact parameter (NaN entries mean automatic and pass)."""
    def bad(x, test):
        x = np.atleast_1d(np.asarray(x, float))
        return bool(np.any(~np.isnan(x) & ~test(x)))

    if bad(k, lambda x: x > 0):
        raise ParameterError(f"contact stiffness must be positive (N/m) or NaN for automatic, got "
                             f"{np.atleast_1d(k)[~(np.atleast_1d(k) > 0)][:3].tolist()} {where}")
    if bad(tau_d, lambda x: (x >= 0) & np.isfinite(x)):
        raise ParameterError(f"SAP dissipation time scale tau_d must be >= 0 s, got {tau_d!r} {where}")
    if bad(d, lambda x: (x >= 0) & np.isfinite(x)):
        raise ParameterError(f"Hunt & Crossley dissipation must be >= 0 s/m, got {d!r} {where}")
    if bad(vs, lambda x: (x > 0) & np.isfinite(x)):
        raise ParameterError(f"stiction tolerance must be > 0 m/s (e.g. 1e-4), got {vs!r} {where}")
    low = (lambda x: (x > 0) & np.isfinite(x)) if kind == "sap" else (lambda x: (x >= 0) & np.isfinite(x))
    if bad(sigma, low):
        need = "> 0" if kind == "sap" else ">= 0"
        raise ParameterError(f"friction regularization sigma must be {need} for solver {kind!r}, got {sigma!r} {where}")


@dataclass
class ContactStep:
    """The contact part of one step's Newton problem, as ``solve_host`` built it (``femcontact.diff``
    differentiates through it): J and J_f in block rows with the rows scaled by S = T θ (module
    docstring), the offsets ``off`` (c, 3) of the model's velocity ``u = J v + off`` and the contact
    model, so that the residual is ``Ã v − b̃ − J_fᵀ γ(J v + off)``."""

    J: ContactRows
    Jf: ContactRows
    off: np.ndarray
    model: object


class NewtonContactSolver:
    """Convex Newton contact solver with contact model ``kind`` in ("sap", "lagged", "similar")."""

    def __init__(self, model, options: dict, kind: str):
        if kind not in NEWTON_SOLVERS:
            raise ParameterError(f"unknown Newton contact model {kind!r}")
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ParameterError(f"unknown option(s) {sorted(unknown)} for solver {kind!r}; "
                                 f"known: {', '.join(sorted(DEFAULTS))}")
        self.name = kind
        self.kind = kind
        self.model = model
        self.opt = {**DEFAULTS, **options}
        o = self.opt
        for key in ("rel_tol", "abs_tol", "alpha_max", "beta", "max_recovery_speed"):
            if not (isinstance(o[key], (int, float)) and math.isfinite(o[key]) and o[key] >= 0):
                raise ParameterError(f"solver option {key} must be a non-negative number, got {o[key]!r}")
        fm = o["friction_majorize_above"]
        if not (isinstance(fm, (int, float)) and fm >= 0):
            raise ParameterError(f"solver option friction_majorize_above must be a number >= 0 (inf: exact Hessian "
                                 f"throughout), got {fm!r}")
        if o["beta"] <= 0 or o["alpha_max"] <= 0:
            raise ParameterError("solver options beta and alpha_max must be positive")
        for key in ("max_iterations", "max_line_search_iterations"):
            if not isinstance(o[key], (int, np.integer)) or o[key] < 1:
                raise ParameterError(f"solver option {key} must be a positive integer, got {o[key]!r}")
        if not isinstance(o["factor_reuse"], (bool, np.bool_)):
            raise ParameterError(f"solver option factor_reuse must be True or False, got {o['factor_reuse']!r}")
        if not isinstance(o["compiled"], bool):
            raise ParameterError(f"solver option compiled must be True or False, got {o['compiled']!r}")
        if o["midpoint_contact"] not in ("consistent", "end"):
            raise ParameterError(f"solver option midpoint_contact must be 'consistent' or 'end', got "
                                 f"{o['midpoint_contact']!r}")
        self.friction_on_end_velocity = o["midpoint_contact"] == "end"
        if o["impact_speed"] is not None and not (isinstance(o["impact_speed"], (int, float))
                                                  and math.isfinite(o["impact_speed"]) and o["impact_speed"] >= 0):
            raise ParameterError(f"solver option impact_speed must be None or a speed >= 0 m/s, got "
                                 f"{o['impact_speed']!r}")
        if not (isinstance(o["restitution"], (int, float)) and 0.0 <= o["restitution"] <= 1.0):
            raise ParameterError(f"solver option restitution must be a number in [0, 1], got {o['restitution']!r}")
        opt_vals = [np.nan if o[key] is None else o[key] for key in PHYSICAL]
        _check_params(kind, *opt_vals, where="(solver_options)")
        self._check_table()
        self._checked_table = model.contact_params   # build_model: checked above
        # small systems (option "auto"/"direct"): dense H, J in block rows, no scipy.sparse (newton_dense)
        self.dense = o["linear_solver"] in ("auto", "direct") and model.n_dofs <= DENSE_MAX_DOFS
        self.hessian = DenseNewtonMatrix() if self.dense else NewtonMatrix()   # H's pattern / scatter, kept
        # the dense step as one compiled call where numba is installed (option compiled; newton_compiled),
        # imported at the first step with contacts (numba's import and cache load: ~1 s CPU)
        self.compiled = None
        self._compile = self.dense and o["compiled"]
        self.last_dense = None             # the compiled path's last step (DenseStep)
        self._model = None                 # the numpy path's last contact model (contact_model)
        self._no_virtual = {"node": np.zeros((0, 4), np.int32), "weight": np.zeros((0, 4, 3, 3))}
        self._no_prescribed = np.zeros((0, 3))
        self._options = None               # ((dt, s, c_h, c_o), the compiled path's float options)
        arch = backend.config()["arch"]
        self.linear = self.hessian if self.dense else make_newton_linear_solver(o["linear_solver"], model.n_dofs, arch)
        self.kernel_pcg = isinstance(self.linear, NewtonPCG)    # H matrix-free on the device (newton_pcg)
        # large deformables: Ã factored once per step, Newton on the contact DOFs' Schur complement
        self.schur = None if self.dense else make_schur_solver(o["linear_solver"], model.n_dofs, arch,
                                                               o["factor_reuse"])
        self._ahat = NewtonMatrix() if self.schur is not None else None    # Ã's lower triangle, pattern kept
        self._dense_A = None               # (pattern, flat positions of its blocks in a dense 3n x 3n)
        self._layout = None                # J's RowLayout of the last step
        self._params = None                # (param rows, table bytes, resolved parameters, restitution)
        dofs = model.dofs
        self.node_body = dofs.body                                     # for the Delassus floor 1/M_body
        self.body_mass = dofs.body_mass if len(dofs.body_mass) else np.zeros(1)
        self.lumped_nodes = np.flatnonzero(dofs.lumped)                # see delassus_estimate
        self.lumped_blocks = dofs.mass[self.lumped_nodes, None, None] * np.eye(3)
        self._mask = PrescribedMask()        # the prescribed mask, read once
        self._no_contacts = None                     # an empty J: Ã's own lower triangle from ``_ahat``
        self.last_stats = None
        self._gravity_norm = float(np.linalg.norm(model.gravity))    # |g| (impact_speed)
        self._scaling = None               # (Ã's diagonal blocks, prescribed DOFs, D of SAP eq. 32)
        self._delassus = {}                # delassus_estimate's index work and block inverses, kept
        self._filled_for = None            # (resolved parameters, their filled arrays): ``_filled``
        self.setup_only = False            # femcontact.diff: ``solve_host`` stops after the step's contact model
        self.contact_step = None           # the last ``solve_host``'s ContactStep

    # ------------------------------------------------------------------ parameters
    def _table(self):
        table = self.model.contact_params
        if table is None:
            return None
        table = np.asarray(table, dtype=float)
        if table.ndim != 2 or table.shape[1] < len(CONTACT_PARAM_COLUMNS) or len(table) == 0:
            return None
        return table

    def _check_table(self) -> None:
        T = self._table()
        if T is None:
            return
        col = {c: T[:, j] for j, c in enumerate(CONTACT_PARAM_COLUMNS)}
        for name in ("mu1", "mu2"):
            if np.any(~np.isnan(col[name]) & ~(col[name] >= 0)):
                raise ParameterError(f"friction coefficient {name} must be >= 0, got {col[name].tolist()} "
                                     "(model.contact_params)")
        _check_params(self.kind, col["stiffness"], col["tau_d"], col["hc_dissipation"], col["stiction_tolerance"],
                      col["sigma"], where="(model.contact_params)")

    def contact_parameters(self, param_rows: np.ndarray) -> dict:
        """Resolved per-contact parameters (NaN = automatic) for rows ``param_rows`` of the table."""
        c = len(param_rows)
        out = {name: np.full(c, np.nan) for name in PHYSICAL}
        T = self._table()
        if T is not None:
            valid = (param_rows >= 0) & (param_rows < len(T))
            for j, name in enumerate(CONTACT_PARAM_COLUMNS):
                if name in out:
                    out[name][valid] = T[param_rows[valid], j]
        for name in PHYSICAL:
            if self.opt[name] is not None:
                out[name] = np.where(np.isnan(out[name]), float(self.opt[name]), out[name])
        return out

    def build_model(self, mu, w, phi0, vn0, param_rows, dt: float, theta=None, rebound=None, reg_scale=None,
                    params: dict | None = None):
        """The contact model of this step for per-contact friction ``mu``, Delassus estimate ``w``
        (1/kg), previous gap ``phi0`` (m) and previous normal velocity ``vn0`` (m/s).

        theta: None, or (c, 3) weights of the contact velocity ``u = θ v_{k+1} + (1 − θ) v_k`` the
        model is evaluated at (rows t1, t2, n; see ``contact_weights``); the model is then built
        in the variables (u, γ̃) with the applied impulse ``γ = θ γ̃``: friction ``μ θ_n/θ_t``,
        stiffness / fe0 / lagged n₀ divided by θ_n, SAP's R multiplied by θ², so that the physical
        impulse as a function of the end-of-step velocity has the same stiffness, friction cone
        and regularization as with θ = 1, while gaps and slip speeds are measured in u.

        rebound: None, or (c,) normal speeds (m/s, ≥ 0) an impact with restitution must leave at
        (``−e v_{n,k}``; 0 elsewhere), see the module docstring. reg_scale: None, or (c,) factors
        ≤ 1 for the friction regularization (anisotropic contacts, ``friction_scaling``). params:
        ``contact_parameters(param_rows)`` when the caller has it."""
        p = self.contact_parameters(param_rows) if params is None else params
        if np.any(~(mu >= 0) | ~np.isfinite(mu)):
            raise ParameterError(f"friction coefficients must be finite and >= 0, got {mu[~(mu >= 0)][:3].tolist()}")
        table = self.model.contact_params
        if table is not self._checked_table:
            # every resolved value is a table entry or an option, both checked at construction; check
            # again only when the model's table object was replaced (not once per step)
            _check_params(self.kind, p["stiffness"], p["tau_d"], p["hc_dissipation"], p["stiction_tolerance"],
                          p["sigma"], where="(contact parameters)")
            self._checked_table = table
        beta = float(self.opt["beta"])
        f = self._filled(p)
        sigma = f["sigma"]
        R_t = sigma * w
        if reg_scale is not None:
            R_t = R_t * reg_scale**2
        rebound = np.zeros(len(w)) if rebound is None else rebound
        bounce = rebound > 0
        th_t, th_n = (1.0, 1.0) if theta is None else (theta[:, 0], theta[:, 2])
        mu_u = mu * th_n / th_t                  # friction cone of γ̃ = γ/θ
        if self.kind == "sap":
            tau_d = np.where(f["tau_d_auto"], beta * dt / math.pi, p["tau_d"])
            k = f["k_sap"]
            tau_d = np.where(bounce, 0.0, tau_d)        # a rebound's dissipation is its restitution
            beta_n = np.where(bounce & f["k_auto"], REBOUND_BETA * beta, beta)
            with np.errstate(divide="ignore"):
                R_n = np.maximum(beta_n**2 / (4 * math.pi**2) * w, 1.0 / (dt * k * (dt + tau_d)))
            # stabilization velocity: −φ₀/(dt + τ_d) for touching pairs (SAP §V-B); a pair still
            # apart (φ₀ > 0) gets −φ₀/dt, so it is pushed only when u_n would close the gap within
            # the step (no dissipation before touch; ICF's φ₀ + dt v_n)
            vhat_n = np.where(phi0 > 0, -phi0 / dt, -phi0 / (dt + tau_d))
            if theta is not None:
                # midpoint rule: an impact ends up to ½ dt |v_n| deep (positions move by dt v̂); SAP's
                # full-rate recovery of that depth would launch the body at ≈ ½|v_n| (a hop after an
                # inelastic impact), so penetrations are recovered at most at max_recovery_speed
                vhat_n = np.minimum(vhat_n, float(self.opt["max_recovery_speed"]))   # (checked >= 0)
            vhat_n = np.where(bounce, np.maximum(vhat_n, rebound), vhat_n)
            return SapModel(mu_u, np.maximum(R_t * th_t**2, 1e-300), R_n * th_n**2, vhat_n)
        k = np.where(f["k_auto"], 4 * math.pi**2 / (beta**2 * w * dt * dt), p["stiffness"])
        d, vs = f["d"], f["vs"]
        fe0 = -k * phi0
        n0 = dt * np.maximum(fe0, 0.0) * np.maximum(0.0, 1.0 - d * vn0)
        eps = np.maximum(vs, th_t * mu * R_t * n0)
        if reg_scale is not None:
            eps = eps * reg_scale
        if bounce.any():
            # the spring releases at the rebound speed: zero impulse for v_n ≥ max(−φ₀/dt, rebound)
            k = np.where(bounce & f["k_auto"], k / REBOUND_BETA**2, k)
            fe0 = np.where(bounce, k * np.maximum(-phi0, dt * rebound), fe0)
            d = np.where(bounce, 0.0, d)
        hc = HuntCrossley(k / th_n, d, fe0 / th_n, dt)
        n0 = n0 / th_n
        mu = mu_u
        if self.kind == "lagged":
            return LaggedModel(hc, mu, n0, eps)
        return SimilarModel(hc, mu, eps)

    def _filled(self, p: dict) -> dict:
        """The step-independent parts of ``build_model`` for the resolved parameters ``p`` (automatic
        values filled in, NaN masks), kept while ``p`` (``_pair_parameters``'s) is the same object."""
        if self._filled_for is None or self._filled_for[0] is not p:
            k_auto = np.isnan(p["stiffness"])
            self._filled_for = (p, {
                "sigma": np.where(np.isnan(p["sigma"]), 1e-3, p["sigma"]), "k_auto": k_auto,
                "k_sap": np.where(k_auto, np.inf, p["stiffness"]), "tau_d_auto": np.isnan(p["tau_d"]),
                "d": np.where(np.isnan(p["hc_dissipation"]), DEFAULTS["hc_dissipation"], p["hc_dissipation"]),
                "vs": np.where(np.isnan(p["stiction_tolerance"]), DEFAULTS["stiction_tolerance"],
                               p["stiction_tolerance"])})
        return self._filled_for[1]

    def contact_weights(self, impact: np.ndarray, co: float):
        """θ (c, 3) of the contact velocity ``u = θ v_{k+1} + (1 − θ) v_k`` per contact, or None
        (θ = 1: implicit Euler, or option ``midpoint_contact="end"``). Under the midpoint rule
        (docs/THEORY.md §4, "Contact under the midpoint rule"):

        - friction: θ_t = ½, u_t = v̂_t, the velocity that moves the contact point over the step;
        - normal: θ_n = ½ (u_n = v̂_n: the gap φ₀ + dt u_n the model predicts is the end-of-step
          gap, so a speculative contact pushes only if the bodies actually meet, and the spring
          dissipates), except for an impact: a contact approaching faster than ``impact_speed``
          (v_{n,k} < −v_imp) that reaches the surface by mid-step at its start velocity
          (φ₀ + dt v_{n,k}/2 ≤ 0; ``impact``, the mask of ``impacts``) gets θ_n = 1 (u_n = v_{n,k+1};
          the caller clamps its gap at 0, so the impact ends at rest: inelastic, or at the rebound
          speed with restitution e > 0).
        """
        if co == 0.0 or self.opt["midpoint_contact"] == "end":
            return None
        theta = np.full((len(impact), 3), 0.5)
        theta[:, 2] = np.where(impact, 1.0, 0.5)
        return theta

    def impacts(self, vc_prev: np.ndarray, phi0: np.ndarray, co: float, dt: float, e=None) -> np.ndarray:
        """Contacts that are impacts this step (bool, c): approaching faster than ``impact_speed``
        and meeting within the step at the start velocity (φ₀ + h v_{n,k} ≤ 0), with h = dt under
        implicit Euler and for restitution e > 0, and h = dt/2 for inelastic contacts under the
        midpoint rule (``contact_weights``: a θ_n = ½ contact meeting in the second half would brake
        the approach inelastically before the rebound step)."""
        vn0 = vc_prev[:, 2]
        h = dt if co == 0.0 else 0.5 * dt
        if co != 0.0 and e is not None:
            h = np.where(e > 0, dt, h)
        return (vn0 < -self.impact_speed(dt)) & (phi0 + h * vn0 <= 0.0)

    def impact_speed(self, dt: float) -> float:
        """Approach speed (m/s) above which a contact is treated as an impact under the midpoint
        rule (θ_n = 1, ``contact_weights``): option ``impact_speed``, else ``|g| dt``, the speed
        gravity gives in one step (a resting contact's normal velocity stays below it)."""
        if self.opt["impact_speed"] is not None:
            return float(self.opt["impact_speed"])
        return self._gravity_norm * dt

    def _pair_parameters(self, param_rows: np.ndarray):
        """(``contact_parameters``, restitution) per contact, kept while the rows and the table repeat."""
        table = self.model.contact_params
        tb = None if table is None else np.asarray(table).tobytes()
        cached = self._params
        if (cached is None or cached[1] != tb or len(cached[0]) != len(param_rows)
                or not np.array_equal(cached[0], param_rows)):
            cached = self._params = (param_rows.copy(), tb, self.contact_parameters(param_rows),
                                     restitution_per_contact(table, param_rows, self.opt["restitution"]))
        return cached[2], cached[3]

    def _dense_matrix(self, A, blocks: np.ndarray) -> np.ndarray:
        """A (3n, 3n) dense from its blocks (the scatter kept per pattern: fixed at build time)."""
        if self._dense_A is None or self._dense_A[0] is not A.pattern:
            self._dense_A = (A.pattern, dense_index(A.pattern).ravel())
        n3 = 3 * A.pattern.n
        out = np.zeros(n3 * n3)
        out[self._dense_A[1]] = blocks.ravel()
        return out.reshape(n3, n3)

    def _schur_setup(self, pattern, blocks: np.ndarray, Jf: ContactRows, fixed: np.ndarray):
        """The Schur solver set up for this step (Ã = ``blocks`` in ``pattern`` factored, the contact
        DOFs last), or None where this step takes the full-H path: no Schur solver, no free node in
        contact, or (option "auto") too many contact DOFs (``SchurSolver.takes``)."""
        if self.schur is None:
            return None
        nodes_c = contact_nodes(Jf, fixed)
        k, n3 = 3 * len(nodes_c), 3 * len(fixed)
        if k == 0 or (self.opt["linear_solver"] == "auto" and not SchurSolver.takes(n3, k)):
            return None
        if self._no_contacts is None:
            self._no_contacts = ContactRows(np.zeros((0, 1), np.int64), np.zeros((0, 1, 3, 3)), len(fixed),
                                            np.zeros((0, 1), bool))
        At = self._ahat
        At.setup((pattern.indptr, pattern.col, blocks), self._no_contacts)
        self.schur.setup(At.lower(np.zeros((0, 3, 3))), At.cols, ("Ã", At.key), Jf, nodes_c, At.block_pattern)
        return self.schur

    # ------------------------------------------------------------------ the solve
    def solve(self, problem: StepProblem) -> SolveStats:
        if int(problem.contacts.count) == 0:
            return solve_without_contacts(problem)
        t_start = time.perf_counter()
        hp = HostContactProblem(problem, STEP_COLUMNS, self._mask)
        return hp.apply(self.solve_host(hp, t_start))

    def solve_host(self, hp: HostContactProblem, t_start: float | None = None) -> SolveResult:
        """One step's Newton solve on ``hp`` (contacts: ``STEP_COLUMNS``), nothing written into the problem."""
        t_start = time.perf_counter() if t_start is None else t_start
        problem = hp.problem
        n, c, dt = hp.n, hp.c, hp.dt
        s, ch, co = hp.s, hp.ch, hp.co
        blocks, b, vk = hp.blocks, hp.b, hp.vk
        fixed, dof_fixed = hp.fixed, hp.dof_fixed
        if self._compile:
            self.compiled, self._compile = compiled_solver(), False
        if self.compiled is not None and not self.setup_only:    # femcontact.diff's probe needs contact_step
            result = self._solve_compiled(hp, t_start)
            if result is not None:
                return result
        cd = hp.data                         # only what the solve uses (no world-frame impulse)
        off = hp.off_world + hp.off_anchor
        if self.dense:
            A = self._dense_matrix(problem.A, blocks)
            At = (s / ch) * A
        else:
            A = hp.a_scipy()
            At = ((s / ch) * A).tocsr()
        # J (Jf: prescribed columns zeroed) in per-contact block rows: products without scipy.sparse
        J, self._layout = hp.jacobian_rows(self._layout)      # the layout kept while the contacts' nodes repeat
        Jf = hp.free_columns(J)
        bt = s * b + ((s * co / ch) * (A @ vk) if co != 0.0 else 0.0)

        # warm start (end-of-step velocity) and prescribed values
        v_prev_hat = backend.read(problem.v_hat, n).astype(np.float64, copy=False).ravel()
        v = ch * v_prev_hat + co * vk if co == 0.0 else vk.copy()
        Adiag = hp.diagonal_blocks()
        if fixed.any():
            v.reshape(n, 3)[fixed] = ch * hp.prescribed_v_hat() + co * vk.reshape(n, 3)[fixed]

        # per-contact data: Delassus estimate from the diagonal blocks of Ã (SAP §V-A)
        Dblk = (s / ch) * Adiag
        Bw = Dblk.copy()
        Bw[self.lumped_nodes] = self.lumped_blocks
        w = delassus_estimate(Jf, Bw, fixed, c, self.node_body, self.body_mass, self._delassus)
        vc_prev = J.matvec(vk).reshape(c, 3) + off
        mu, tscale, reg_scale = friction_scaling(cd["mu"] if c else np.zeros((0, 2)))
        vc_hat_prev = J.matvec(v_prev_hat).reshape(c, 3) + off if co != 0.0 else vc_prev
        param_rows = cd["param"].astype(np.int64)
        p, e = self._pair_parameters(param_rows)
        impact = self.impacts(vc_prev, cd["phi"], co, dt, e)
        theta = self.contact_weights(impact, co)
        phi0 = cd["phi"]
        if theta is not None:
            # an approaching pair that meets by mid-step is modelled on v_{n,k+1} from the surface:
            # its target is "at rest at the end of the step" (φ₀ clamped at 0; contact_weights)
            phi0 = np.where(theta[:, 2] == 1.0, np.minimum(phi0, 0.0), phi0)
        vn0 = vc_prev[:, 2]
        if theta is not None:
            # Lagged n₀'s Hunt–Crossley rate: how fast the gap was closing, i.e. the previous step's
            # v̂ (the warm start), not v_k (which carries the midpoint rule's ±v alternation)
            vn0 = vc_hat_prev[:, 2]
        rebound = None
        if np.any(e > 0):
            rebound = np.where(impact, e * np.maximum(-vc_prev[:, 2], 0.0), 0.0)
        cm = self.build_model(mu, w, phi0, vn0, param_rows, dt, theta, rebound,
                              reg_scale if tscale is not None else None, params=p)
        self._model, self.last_dense = cm, None
        # the model sees T (θ (J v + off) + (1 − θ) v_c,k) (T: anisotropic friction, θ: midpoint
        # weights): scale J's rows by S = T θ, fold the rest into off; the impulse applied is S γ̃
        S = None
        if theta is not None or tscale is not None:
            th = np.ones((c, 3)) if theta is None else theta
            T = np.ones((c, 3))
            if tscale is not None:
                T[:, :2] = tscale
            S = T * th
            J, Jf = J.scale_rows(S), Jf.scale_rows(S)
            off = S * off + T * (1.0 - th) * vc_prev

        self.contact_step = ContactStep(J, Jf, off, cm)       # read by femcontact.diff (implicit derivatives)
        if self.setup_only:
            return None
        if self._scaling is None or self._scaling[1] is not dof_fixed or not np.array_equal(self._scaling[0], Dblk):
            self._scaling = (Dblk, dof_fixed, momentum_scaling(Dblk, dof_fixed))    # kept while Ã's diagonal repeats
        D = self._scaling[2]
        t0 = time.perf_counter()
        schur = self._schur_setup(problem.A.pattern, (s / ch) * blocks, Jf, fixed)
        ms_linear = 1e3 * (time.perf_counter() - t0)       # the Schur path's factorization of Ã
        t0 = time.perf_counter()
        if self.dense:
            self.hessian.setup(At, Jf)
        elif schur is None and self.kernel_pcg:
            self.linear.setup(problem.A, s / ch, Jf)          # Ã = (s/c_h) A on the device, J uploaded
        elif schur is None:
            pat = problem.A.pattern              # Ã in its own 3x3 blocks: no CSR → BSR conversion
            self.hessian.setup((pat.indptr, pat.col, (s / ch) * blocks), Jf)
        ms_setup = 1e3 * (time.perf_counter() - t0)
        o = self.opt
        costs, alphas, errors = [], [], []
        ls_total = 0
        converged = False
        it = 0
        e_m = 0.0
        if schur is not None:       # the iterates on the contact DOFs, the interior recovered at the end
            space = schur.space(v, At, bt, J, off, D, dof_fixed, self._converged)
        else:
            if self.dense:
                solve = self.hessian.solve
            elif self.kernel_pcg:
                solve = self.linear.solve_step
            else:
                def solve(G, r):
                    return solve_newton(self.linear, self.hessian, G, r)
            space = FullSpace(v, At, bt, J, Jf, off, D, dof_fixed, solve)
        while True:
            vc = space.contact_velocity()
            cost_m, gamma, G, status = cm.evaluate(vc, hessian=True)
            quadratic, gnorm, scale = space.gradient(gamma)
            costs.append(quadratic + float(cost_m.sum()))
            e_m = gnorm / scale if scale > 0 else gnorm
            errors.append(e_m)
            if not math.isfinite(gnorm):
                raise SimulationError(f"{self.kind}: non-finite gradient at Newton iteration {it}")
            if self._converged(gnorm, scale):
                converged = True
                break
            if it >= o["max_iterations"]:
                break
            if e_m > o["friction_majorize_above"] and hasattr(cm, "majorize_friction"):
                cm.majorize_friction(vc, G)       # far from the solution: the friction's majorant
            t0 = time.perf_counter()
            dvc, c0, c1, d0 = space.direction(G)
            ms_linear += 1e3 * (time.perf_counter() - t0)
            alpha, nls = self._line_search(cm, vc, dvc, c0, c1, d0)
            ls_total += nls
            alphas.append(alpha)
            it += 1
            if alpha == 0.0:
                # no descent left: the gradient is at round-off level
                converged = e_m < 1e3 * max(o["rel_tol"], 1e-12)
                break
            space.advance(alpha)
        v = space.velocity()

        # outputs: v̂, impulses (N s, contact frame), status
        v_hat = hp.with_prescribed((v - co * vk) / ch)
        ms = 1e3 * (time.perf_counter() - t_start)
        stats = SolveStats(it, e_m, converged, {
            "line_search_iterations": ls_total, "momentum_error": e_m, "contacts": c, "cost": costs,
            "momentum_errors": errors, "alphas": alphas, "ms_linear": ms_linear, "ms_solve": ms,
            "ms_hessian_setup": ms_setup,
            "linear_solver": (schur or self.linear).name, "open": int(np.sum(status == OPEN)),
        })
        self.last_stats = stats
        return SolveResult(v_hat, gamma if S is None else S * gamma, status, stats)

    def _converged(self, gnorm: float, scale: float) -> bool:
        """SAP eq. 26's stop: ‖D∇ℓ‖ < ε_a + ε_r max(‖DÃv‖, ‖DJᵀγ‖)."""
        return gnorm < self.opt["abs_tol"] + self.opt["rel_tol"] * scale

    def _solve_compiled(self, hp: HostContactProblem, t_start: float):
        """``solve_host``'s dense branch as one compiled call (``newton_compiled.solve_dense``: the same
        formulas; its pieces kept in ``last_dense``), or None where the numpy path must run: a bad
        friction coefficient, a non-finite gradient or an H that is not positive definite (the numpy path
        raises the error)."""
        nc = self.compiled
        cd, o = hp.data, self.opt
        p, e = self._pair_parameters(cd["param"].astype(np.int64))
        if self.model.contact_params is not self._checked_table:
            _check_params(self.kind, p["stiffness"], p["tau_d"], p["hc_dissipation"], p["stiction_tolerance"],
                          p["sigma"], where="(contact parameters)")
            self._checked_table = self.model.contact_params
        f = self._filled(p)
        contacts, problem = hp.problem.contacts, hp.problem
        vd = contacts.virtual_to_numpy() if contacts.n_virtual else self._no_virtual
        key = (hp.dt, hp.s, hp.ch, hp.co)
        if self._options is None or self._options[0] != key:       # the float options, kept while dt repeats
            self._options = (key, np.array(
                [hp.dt, hp.s, hp.ch, hp.co, o["beta"], self.impact_speed(hp.dt), o["max_recovery_speed"],
                 o["rel_tol"], o["abs_tol"], o["max_iterations"], o["max_line_search_iterations"],
                 o["alpha_max"], o["friction_majorize_above"], REBOUND_BETA,
                 float(self.opt["midpoint_contact"] == "end")], dtype=np.float64))
        if self._dense_A is None or self._dense_A[0] is not problem.A.pattern:
            self._dense_A = (problem.A.pattern, dense_index(problem.A.pattern).ravel())
        prescribed = hp.prescribed_v_hat() if hp.fixed.any() else self._no_prescribed
        v_prev_hat = backend.read(problem.v_hat, hp.n).astype(np.float64, copy=False).ravel()
        out = nc.solve_dense(nc.KINDS[self.kind], self._options[1], hp.blocks, self._dense_A[1], hp.b, hp.vk,
                             v_prev_hat, prescribed, self.lumped_nodes, self.lumped_blocks, hp.fixed, hp.dof_fixed,
                             cd["node_a"], cd["node_b"], cd["frame"], cd["v_world"], cd["v_anchor"], cd["phi"],
                             cd["mu"], vd["node"], vd["weight"], self.node_body, self.body_mass, f["sigma"],
                             f["k_auto"], f["k_sap"], f["tau_d_auto"], p["tau_d"], p["stiffness"], f["d"], f["vs"], e)
        v, gamma, status, it, e_m, converged, ls_total, code, costs, errors, alphas = out[:11]
        if code != nc.OK:
            return None
        nodes, blocks, valid, G, P, At, off, S = out[11:]
        self._model = None
        self.last_dense = nc.DenseStep(hp, v, At, ContactRows(nodes, blocks, hp.n, valid), off, S, G, P, self.kind,
                                       hp.dt)
        v_hat = hp.with_prescribed((v - hp.co * hp.vk) / hp.ch)
        stats = SolveStats(it, e_m, converged, {
            "line_search_iterations": ls_total, "momentum_error": e_m, "contacts": hp.c, "cost": costs.tolist(),
            "momentum_errors": errors.tolist(), "alphas": alphas.tolist(), "ms_linear": math.nan,
            "ms_solve": 1e3 * (time.perf_counter() - t_start), "ms_hessian_setup": math.nan,
            "linear_solver": "dense-compiled", "open": int(np.count_nonzero(status == OPEN)),
        })
        self.last_stats = stats
        return SolveResult(v_hat, gamma, status, stats)

    def contact_model(self):
        """The contact model (``contact_models``: ``evaluate``, ``line``) of the last step solved with
        contacts, whichever path solved it (None before one)."""
        return self.last_dense.model() if self.last_dense is not None else self._model

    def memory(self) -> dict:
        """Nothing: a Newton solve depends only on its StepProblem (the warm start is in the State)."""
        return {}

    def restore(self, memory: dict) -> None:
        """Nothing to restore (``memory``)."""

    def _line_search(self, cm, vc, dvc, c0: float, c1: float, d0: float):
        """Exact line search: root of dℓ/dα = c0 + α c1 − Δv_cᵀγ(α) on (0, α_max] (SAP §IV-B/C).

        c0 = Δvᵀ(Ã v − b̃), c1 = Δvᵀ Δp, d0 = dℓ/dα(0) < 0. Each trial costs one pass over the
        contacts for the two numbers ``Δv_cᵀγ`` and ``Δv_cᵀ G Δv_c`` (``line_derivatives``: no
        3x3 blocks, cost or status; ``line``: what does not depend on α computed once). If ℓ still decreases at α_max, α_max is taken; otherwise a
        safeguarded Newton–bisection (rtsafe) on f(α) = dℓ/dα / |d0| in the bracket [0, α_max],
        started from the minimizer of the quadratic with the curvature at α_max,
        ``min(−d0/ℓ''(α_max), α_max)`` (= 1 where ℓ is quadratic along the line, the full Newton
        step), stopping at |f| < 1e-8 or a Newton correction below 1e-8 of that guess (the
        tolerances of Drake's SAP implementation). Returns (α, trials)."""
        if not d0 < 0:
            return 0.0, 0

        along = cm.line(vc, dvc)           # the model's derivatives along the line, α-free parts kept

        def deriv(a):
            g, q = along(a)
            return (c0 + a * c1 - g) / scale, (c1 + q) / scale

        scale = -d0
        a_max = float(self.opt["alpha_max"])
        trials = 1
        f_max, df_max = deriv(a_max)
        if f_max <= 0:
            return a_max, trials
        lo, hi = 0.0, a_max
        a = rtsafe_start(df_max, a_max)
        a_tol = A_TOL * a
        step_old = hi - lo
        for _ in range(int(self.opt["max_line_search_iterations"])):
            f, df = deriv(a)
            trials += 1
            if abs(f) <= F_TOL:
                break
            a, lo, hi, step_old = rtsafe_step(a, f, df, lo, hi, step_old)
            if rtsafe_done(step_old, a_tol, lo, hi):
                break
        return a, trials


class FullSpace:
    """The Newton iterate v over all DOFs: ``H Δv = −∇ℓ`` by ``solve(G, r)`` each iteration (dense
    LAPACK or the sparse ``NewtonMatrix`` path). ``newton_schur.ContactSpace`` is its contact-space twin."""

    def __init__(self, v, At, bt, J, Jf, off, D, dof_fixed, solve):
        self.v, self.At, self.bt, self.J, self.Jf, self.off = v, At, bt, J, Jf, off
        self.D, self.dof_fixed, self.solve = D, dof_fixed, solve

    def contact_velocity(self) -> np.ndarray:
        """(c, 3): J v + v_w."""
        return self.J.matvec(self.v).reshape(-1, 3) + self.off

    def gradient(self, gamma: np.ndarray) -> tuple[float, float, float]:
        """(½vᵀÃv − b̃ᵀv, ‖D ∇ℓ‖, max(‖D Ã v‖, ‖D Jᵀγ‖)) for the impulses γ at v (SAP eqs. 26, 32)."""
        Av = self.At @ self.v
        self.r = Av - self.bt
        jc = self.Jf.rmatvec(gamma)
        self.grad = self.r - jc
        self.grad[self.dof_fixed] = 0.0
        D = self.D
        return (float(0.5 * self.v @ Av - self.bt @ self.v), _norm(D * self.grad), max(_norm(D * Av), _norm(D * jc)))

    def direction(self, G: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        """The Newton direction Δv for the blocks G: (J Δv (c, 3), Δvᵀ(Ãv − b̃), ΔvᵀÃΔv, Δvᵀ∇ℓ)."""
        dv = self.solve(G, -self.grad)
        dv[self.dof_fixed] = 0.0
        self.dv = dv
        return (self.Jf.matvec(dv).reshape(-1, 3), float(dv @ self.r), float(dv @ (self.At @ dv)),
                float(dv @ self.grad))

    def advance(self, alpha: float) -> None:
        self.v = self.v + alpha * self.dv

    def velocity(self) -> np.ndarray:
        return self.v


def _norm(x: np.ndarray) -> float:
    """‖x‖₂ of a vector: numpy.linalg.norm's own formula (sqrt of x·x), without its per-call overhead."""
    return math.sqrt(float(x @ x))


def compiled_solver():
    """``newton_compiled`` (the dense step in one numba call) where numba is installed, else None."""
    try:
        from . import newton_compiled
    except ImportError:
        return None
    return newton_compiled


def friction_scaling(mu_axes: np.ndarray):
    """(μ̄, T, r) for friction coefficients ``mu_axes`` (c, 2) along (t1, t2): μ̄ = max(μ₁, μ₂) (c,)
    the isotropic model's coefficient, T = (μ₁, μ₂)/μ̄ (c, 2) the tangential row scaling
    (ICF App. B: ‖M v_t‖ = μ̄ ‖T v_t‖) and r (c,) the smallest nonzero entry of T, which scales the
    friction regularization. T and r are None when every contact is isotropic."""
    mu_axes = np.asarray(mu_axes, dtype=np.float64).reshape(-1, 2)
    mu_bar = mu_axes.max(axis=1)
    if (mu_axes[:, 0] == mu_axes[:, 1]).all():
        return mu_bar, None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        T = np.where(mu_bar[:, None] > 0, mu_axes / mu_bar[:, None], 1.0)
    r = np.where(T > 0, T, 1.0).min(axis=1)
    return mu_bar, T, r


def delassus_estimate(J: "sp.csr_matrix | ContactRows", blocks: np.ndarray, fixed: np.ndarray, c: int,
                      node_body: np.ndarray, body_mass: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """Per-contact Delassus estimate ``w_m`` (1/kg) for the near-rigid regularization (SAP eq. 29).

    Per body touching contact m: ``w_mb = tr(J_mb B⁻¹ J_mbᵀ)/3`` with ``B`` the 3×3 diagonal
    blocks of Ã (each node's effective mass in this step: lumped mass plus ``dt²K + dt D`` of its
    elements, inertia for rotational blocks; SAP §V-A), but never below ``1/M_b``, the compliance
    of the body's rigid translation: for a soft body ``dt²K_ii`` alone can exceed the whole
    body's mass, and the true ``(J Ã⁻¹ Jᵀ)_mm`` is at least ``1/M_b``. ``w_m = Σ_b w_mb``.
    (The solver passes the ``lumped`` blocks of its DofGroups — rod points — with their lumped mass
    as ``B``: their diagonal blocks hold the stretch–shear stiffness that the segment rotations
    relieve, hundreds of times too stiff.)
    Prescribed nodes (``fixed``) have infinite mass; a contact with no free node gets the
    smallest ``w`` of the others.

    ``cache``: a dict the caller keeps across steps (``ContactRows`` only): the index work is kept while
    J's ``nodes`` and ``fixed`` are the same arrays, the block inverses while those blocks repeat, and
    ``w`` itself while J's blocks repeat too (a body at rest)."""
    # per 3x3 block J_mk of J (contact m, node k): tr(J_mk B_k⁻¹ J_mkᵀ)/3, summed per (contact, body);
    # only the blocks of nodes in contact are inverted
    nb = len(body_mass)
    if isinstance(J, ContactRows):
        Jdata = J.blocks.reshape(-1, 3, 3)
        index = None if cache is None else cache.get("index")
        if index is None or index[0] is not J.nodes or index[1] is not fixed:
            index = (J.nodes, fixed) + _delassus_index(np.repeat(np.arange(c), J.nodes.shape[1]), J.nodes.ravel(),
                                                       fixed, node_body, nb)
            if cache is not None:
                cache["index"], cache["inverse"] = index, None
    else:
        Jb = sp.bsr_matrix(J, blocksize=(3, 3))
        index = (None, None) + _delassus_index(np.repeat(np.arange(Jb.shape[0] // 3), np.diff(Jb.indptr)),
                                               Jb.indices, fixed, node_body, nb)
        Jdata = Jb.data
    free, inv_nodes, which, bins = index[2:]
    tr = np.zeros(len(bins))
    if len(inv_nodes):
        Jd = Jdata[free]
        B = blocks[inv_nodes]                  # each node's block inverted once, again only when it changed
        inverse = None if cache is None else cache.get("inverse")
        if inverse is None or not np.array_equal(inverse[0], B):
            inverse = (B, np.linalg.inv(B)[which])
            if cache is not None:
                cache["inverse"] = inverse
        elif cache.get("w") is not None and cache["w"][0] is inverse and np.array_equal(cache["w"][1], Jd):
            return cache["w"][2]               # the same blocks and inverses as last step (a body at rest)
        tr[free] = np.einsum("bij,bjk,bik->b", Jd, inverse[1], Jd) / 3.0
    per_body = np.bincount(bins, weights=tr, minlength=c * nb).reshape(c, nb)
    floor = np.where(per_body > 0, 1.0 / np.maximum(body_mass, 1e-300), 0.0)
    w = np.maximum(per_body, floor).sum(axis=1)
    if np.any(w <= 0):
        w = np.where(w > 0, w, w[w > 0].min() if np.any(w > 0) else 1.0 / np.abs(blocks).max(initial=1.0))
    if cache is not None and len(inv_nodes):
        cache["w"] = (inverse, Jd, w)
    return w


def _delassus_index(contact: np.ndarray, node: np.ndarray, fixed: np.ndarray, node_body: np.ndarray, nb: int):
    """(free blocks mask, the free nodes in contact, each free block's index among them, (contact, body) bin)
    for ``delassus_estimate``'s blocks of J at (``contact``, ``node``)."""
    free = ~fixed[node]
    inv_nodes, which = np.unique(node[free], return_inverse=True)
    return free, inv_nodes, which, contact * nb + node_body[node]


def momentum_error(problem: StepProblem) -> float:
    """SAP eq. 32 momentum error of a solved step, whichever solver solved it.

    Reads the solution ``problem.v_hat`` and the contact impulses (``problem.contacts.read("impulse")``)
    (N s, contact frame) and returns ``‖D (Ã v − b̃ − Jᵀγ)‖ / max(‖D Ã v‖, ‖D Jᵀγ‖)`` in the
    impulse units of the Newton path (module docstring: ``v = v_{k+1}``, ``Ã``, ``b̃``,
    ``D = diag(Ã)^{-1/2}``, prescribed DOFs left out, virtual nodes expanded through ``J_v``),
    i.e. the same number the Newton solvers report as ``extra["momentum_error"]``. For COND
    this measures how far its stopping threshold leaves the momentum balance.
    """
    hp = HostContactProblem(problem, ("impulse",))
    return hp.momentum_error(backend.read(problem.v_hat, hp.n), hp.data["impulse"])


def _factory(kind):
    return lambda model, options: NewtonContactSolver(model, options, kind)


for _kind in NEWTON_SOLVERS:
    CONTACT_SOLVERS[_kind] = _factory(_kind)

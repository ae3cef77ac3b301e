"""Derivatives of one Newton-path step by the implicit function theorem (ICF §X-B, eq. 29).

At the converged step the end-of-step velocity v solves the residual of the Newton path
(``solvers/sap.py``'s module docstring: Ã, b̃, the contact rows J scaled by S = T θ, the offsets)

    r(v; p) = Ã v − b̃ − J_fᵀ γ(J v + off; p) = 0        (free DOFs; prescribed DOFs are given)

so for any input p (start-of-step state, the step's controls, scene parameters; ``inputs.py``)

    dv/dp = −H⁻¹ ∂r/∂p,     H = ∂r/∂v = Ã + J_fᵀ G J_f,   G = −∂γ/∂v_c at the solution   (eq. 29)

H is the step's own Newton matrix at the converged v: dense (Cholesky of the small H refactored at
the final v, ``DENSE_MAX_DOFS``: the solver's last factor is at the previous iterate, and a dense
refactor costs less than one Newton iteration), through the step's Schur complement of Ã (the
solver's factor of this step, ``newton_schur.SchurSolver.solve``: no new sparse factorization; taken when
``step_derivatives`` is called right after the step, its solve being the solver's last), or on
the sparse full-H path by one numeric factorization of H at the final v (scipy SuperLU; the solver's
own factor is of the previous iterate's H and would give the derivative of that linearization).

∂r/∂p is the directional derivative of our own assembly at fixed v: the residual is re-evaluated by
the step's own code (``stepper.assemble``, ``stepper.collide``, the solver's contact model up to the
Newton loop: ``NewtonContactSolver.setup_only``) at p ± h e_j with v held, by central differences
(``probe``). It is exact for what is linear in p (velocities, loads, friction in the stiction
region) up to round-off and O(h²) elsewhere (corotational FEM forces, contact geometry: gap,
normal, Jacobian as functions of the positions, rigid rotations, the Delassus estimate w, which
depends on the masses, E and the positions, so it is differentiated as the simulator has it). The
contact set must be the same at p ± h (a contact opening or closing within the step is not
differentiable: ``NonSmoothStep`` is raised with the column). Where it is clean, ∂r/∂p is in closed form
instead (``velocity_columns``: ∂r/∂v_k = −s b_m M − c_o Ã plus the contact model's lagged terms,
``contact_velocity_columns``): those columns cost no probe, the Jacobian takes them by one solve with several
right-hand sides and the vjp by one transposed solve and a sparse transpose product (docs/GRADIENTS.md says
which columns are analytic and which stay on the residual differences).

The end state follows the advance (``assembly/integrator.py``, ``bodies/rigid.py``): x₁ = x₀ + dt v̂,
v̂ = (v − c_o v_k)/c_h, the rotational blocks R₁ = cay(dt ω̂) R₀ and ω₁ = cay(dt ω̂)(c_h ω̂ + c_o ω_k)
(free blocks), prescribed blocks v₁ = their end velocity. Rotations are reported as world-frame
rotation vectors: dR₁ R₁ᵀ = [δ₁]×, with d cay(a) cay(a)ᵀ = [(I + [a]×/2) da / (1 + |a|²/4)]×.

Where the step is not differentiable the result is the derivative of the branch the solution lies on:
at the stick–slip boundary of SAP (a kink of its projection) G is the one-sided Hessian the solver
uses; Lagged and Similar regularize friction (smooth everywhere); a contact that opens or closes
between p − h and p + h raises ``NonSmoothStep``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import backend, stepper
from ..contact.contacts import restitution_per_contact
from ..errors import ParameterError, SimulationError
from ..math.quaternion import cross, cross_matrix, quat_to_matrix
from ..solvers.host_problem import HostContactProblem
from ..solvers.newton_dense import DenseNewtonMatrix
from ..solvers.sap import DEFAULTS, STEP_COLUMNS, friction_scaling
from ..spec.names import NEWTON_SOLVERS
from .inputs import Input, OUTPUTS, Snapshot, direct_state, output_sizes, resolve, restore, snapshot, translational

DENSE_MAX_DOFS = 1500       # a dense H (LAPACK Cholesky) up to this many DOFs
ANALYTIC_COLUMNS = True     # False: every ∂r/∂p column by residual differences (the baseline of tools/bench_diff.py)


class NonSmoothStep(SimulationError):
    """The step's contact set changes within the differencing step of an input: not differentiable there."""


@dataclass
class Probe:
    """The residual of the step at one input value with the end velocity v held: r (3n,) (zero on the
    prescribed DOFs), the prescribed DOFs' v (3n,), the end velocities ``v_end`` (n, 3) of prescribed
    blocks, the contacts' node signature; and, for the base point, the pieces of H."""

    r: np.ndarray
    v_fixed: np.ndarray
    v_end: np.ndarray
    signature: tuple
    pieces: dict | None = None


def _probe(sim, v_star: np.ndarray, pieces: bool = False) -> Probe:
    """Assemble and collide the coming step of ``sim`` (its State as it is) and evaluate the residual at
    the end velocity ``v_star`` (3n,; its prescribed entries replaced by this step's)."""
    stepper.assemble(sim)
    c = stepper.collide(sim)
    hp = HostContactProblem(stepper.step_problem(sim), STEP_COLUMNS)
    n, s, ch, co = hp.n, hp.s, hp.ch, hp.co
    A = hp.a_scipy()
    vk = hp.vk.copy()
    v = v_star.copy()
    if hp.fixed.any():
        v.reshape(n, 3)[hp.fixed] = ch * hp.prescribed_v_hat() + co * vk.reshape(n, 3)[hp.fixed]
    r = (s / ch) * (A @ v) - s * hp.b - ((s * co / ch) * (A @ vk) if co != 0.0 else 0.0)
    cs = G = None
    if c:
        solver = sim.contact_solver
        solver.setup_only = True
        try:
            solver.solve_host(hp)
        finally:
            solver.setup_only = False
        cs = solver.contact_step
        vc = cs.J.matvec(v).reshape(c, 3) + cs.off
        _, gamma, G, _ = cs.model.evaluate(vc, hessian=pieces)
        r = r - cs.Jf.rmatvec(gamma)
    r[hp.dof_fixed] = 0.0
    v_end = backend.read(sim.v_end, n).astype(np.float64, copy=True)
    signature = (c,) if not c else (c, cs.J.nodes.tobytes())
    extra = None
    if pieces:
        extra = {"At": ((s / ch) * A).tocsr(), "J": None if cs is None else cs.Jf, "G": G, "fixed": hp.fixed.copy(),
                 "dof_fixed": hp.dof_fixed.copy(), "vk": vk, "coef": (s, ch, co), "dt": hp.dt, "contact_step": cs,
                 "vc": None if cs is None else vc, "mu_axes": hp.data["mu"].copy() if c else None,
                 "param_rows": hp.data["param"].astype(np.int64) if c else None}
    return Probe(r, np.where(hp.dof_fixed, v, 0.0), v_end, signature, extra)


class StepSolve:
    """``H⁻¹`` of the step at the converged v (module docstring: dense, Schur, or sparse at the final v)."""

    def __init__(self, sim, pieces: dict, last_step: bool):
        At, Jf, G = pieces["At"], pieces["J"], pieces["G"]
        n3 = At.shape[0]
        solver = sim.contact_solver
        schur = getattr(solver, "schur", None)
        used = getattr(solver, "last_stats", None)
        self.kind = "dense" if n3 <= DENSE_MAX_DOFS else "sparse"
        if (self.kind == "sparse" and last_step and Jf is not None and schur is not None and used is not None
                and used is getattr(sim, "last_solve", None) and used.extra.get("linear_solver") == schur.name):
            # the solver's factor of this step's Ã, kept: a later step's setup rebinds the solver's
            # arrays (it does not write into them), so shallow copies hold this step's
            self.kind = "schur"
            frozen = copy.copy(schur)
            frozen.dense = copy.copy(schur.dense)
            self._solve = lambda r: frozen.solve(G, r)
            self._solve_t = self._solve          # H symmetric (Ã and each G block are)
            return
        if self.kind == "dense":
            from scipy.linalg import cho_factor, cho_solve

            Ad = At.toarray()
            if Jf is not None:
                dm = DenseNewtonMatrix()
                dm.setup(Ad, Jf)
                Ad = dm.matrix(G)
            factor = cho_factor(Ad, lower=True)
            self._solve = self._solve_t = lambda r: cho_solve(factor, r)
            return
        from scipy.sparse.linalg import splu

        H = At
        if Jf is not None:
            Jc = _rows_csr(Jf)
            c = G.shape[0]
            Gb = sp.block_diag(list(G), format="csr") if c else sp.csr_matrix((0, 0))
            H = (At + Jc.T @ Gb @ Jc).tocsc()
        lu = splu(H.tocsc())
        self._solve = lu.solve
        self._solve_t = lambda r: lu.solve(r, trans="T")

    def __call__(self, r: np.ndarray, transpose: bool = False) -> np.ndarray:
        """H⁻¹ r (``transpose``: H⁻ᵀ r) for r (3n,) or (3n, k)."""
        solve = self._solve_t if transpose else self._solve
        if r.ndim == 2 and self.kind == "schur":
            return np.stack([solve(np.ascontiguousarray(r[:, j])) for j in range(r.shape[1])], axis=1)
        return solve(r)


def _unit(n: int, j: int) -> np.ndarray:
    """The unit vector e_j of length n."""
    e = np.zeros(n)
    e[j] = 1.0
    return e


def _rows_csr(J) -> sp.csr_matrix:
    """A ``ContactRows`` as scipy CSR (3c × 3n)."""
    c, width = J.rows.shape[0], J.rows.shape[2]
    rows = np.repeat(np.arange(3 * c), width)
    cols = np.repeat(J.dofs[:, None, :], 3, axis=1).ravel()
    return sp.csr_matrix((J.rows.ravel(), (rows, cols)), shape=(3 * c, 3 * J.n))


def velocity_columns(sim, pieces: dict) -> tuple[np.ndarray, sp.csc_matrix]:
    """∂r/∂v_k in closed form where it is clean: (mask (3n,) of the analytic DOFs of the ``"v"`` input,
    B (3n × 3n, nonzero only in those columns)).

    r = (s/c_h) A v − s b − (s c_o/c_h) A v_k − J_fᵀ γ with b = b_m M v_k + b_f (f_el(x_k) + f_ext)
    (``assembly/integrator.py``): ∂r/∂v_k = −s b_m M − c_o Ã (Ã = (s/c_h) A; rows of prescribed DOFs zero, as
    r's). Clean are the translational blocks of FEM and rigid bodies that are free, in a model without
    joints or springs (their forces read v_k); the contacts' nodes where ``contact_velocity_columns`` has
    the contact model's dependence on v_k in closed form, else they stay on the residual-difference
    fallback, as do rotational blocks (gyroscopic b) and rods."""
    m = sim.model
    coef = sim.coef
    s, co = float(coef.impulse_scale), float(coef.v_old)
    clean = np.zeros(m.n_nodes, bool)
    if m.joints is None and m.springs is None:
        for body in m.bodies:
            if body.kind in ("fem", "rigid"):
                clean[body.node_start:body.node_start + body.node_count] = True
    clean &= ~m.is_rotational
    clean &= ~pieces["fixed"].astype(bool)
    J = pieces["J"]
    contact = None if J is None else contact_velocity_columns(sim, pieces)
    if J is not None and contact is None:
        clean[np.unique(J.nodes[J.valid])] = False
    mask = np.repeat(clean, 3)
    mass = np.repeat(backend.read(m.mass, m.n_nodes).astype(np.float64), 3)
    B = -(s * float(coef.b_m)) * sp.diags(mass) - co * pieces["At"]
    if contact is not None:
        B = B + contact
    free_rows = sp.diags((~pieces["dof_fixed"]).astype(np.float64))
    return mask, (free_rows @ B @ sp.diags(mask.astype(np.float64))).tocsc()


def contact_velocity_columns(sim, pieces: dict) -> sp.csr_matrix | None:
    """The contacts' part of ∂r/∂v_k, −J_fᵀ (∂γ/∂v_n,k) J_n (3n × 3n), where it is clean; None elsewhere.

    Under implicit Euler the contact model reads the start velocity only through v_n,k = (J v_k + off)_n
    (``sap.py``, ``build_model``): the Hunt–Crossley rate of Lagged's lagged normal impulse
    n₀ = dt (f_e0)₊ (1 − d v_n,k)₊ and the friction regularization ε = max(v_s, μ R_t n₀) of Lagged and
    Similar (ICF §VI); SAP's model does not read it. Lagged: γ_t = −μ n₀ v_t/s, s = (|v_t|² + ε²)^½;
    Similar: γ = [−μ n(z) v_t/s; n(z)], z = v_n − μ (s − ε). Not clean, so None: the midpoint rule (weights
    θ and the impact switch on v_c,k), restitution (a rebound speed from v_n,k), anisotropic friction (the
    row scaling T and the regularization's scale)."""
    solver = sim.contact_solver
    cs, co = pieces["contact_step"], pieces["coef"][2]
    if co != 0.0 or cs is None:
        return None
    rows = pieces["param_rows"]
    if friction_scaling(pieces["mu_axes"])[1] is not None:
        return None
    if np.any(restitution_per_contact(sim.model.contact_params, rows, solver.opt["restitution"]) > 0):
        return None
    Jc, Jfc = _rows_csr(cs.J), _rows_csr(cs.Jf)
    c = Jc.shape[0] // 3
    model = cs.model
    if model.name == "sap":
        return sp.csr_matrix((Jc.shape[1], Jc.shape[1]))
    hc, mu, eps, u = model.hc, model.mu, model.eps, pieces["vc"]
    vn0 = Jc[2::3] @ pieces["vk"] + cs.off[:, 2]
    fe0 = np.maximum(hc.fe0, 0.0)
    rate = 1.0 - hc.d * vn0
    n0 = hc.dt * fe0 * np.maximum(rate, 0.0)
    dn0 = np.where(rate > 0.0, -hc.dt * fe0 * hc.d, 0.0)                      # dn₀/dv_n,k
    vs = solver.contact_parameters(rows)["stiction_tolerance"]
    vs = np.where(np.isnan(vs), DEFAULTS["stiction_tolerance"], vs)
    on_n0 = (eps > vs) & (n0 > 0.0)                                            # ε = μ R_t n₀ ∝ n₀
    deps = np.where(on_n0, eps / np.where(n0 > 0.0, n0, 1.0), 0.0) * dn0       # dε/dv_n,k
    vt = u[:, :2]
    s = np.sqrt(np.einsum("ci,ci->c", vt, vt) + eps * eps)
    g = np.zeros((c, 3))                                                        # ∂γ/∂v_n,k
    if model.name == "lagged":
        g[:, :2] = (-mu * dn0 / s + mu * model.n0 * eps * deps / s**3)[:, None] * vt
    else:
        n, dn = hc.impulse(u[:, 2] - mu * (s - eps))
        dz = mu * (1.0 - eps / s) * deps
        g[:, :2] = (-mu * dn * dz / s + mu * n * eps * deps / s**3)[:, None] * vt
        g[:, 2] = dn * dz
    Gv = sp.csr_matrix((g.ravel(), (np.arange(3 * c), np.repeat(np.arange(c), 3))), shape=(3 * c, c))
    return -(Jfc.T @ Gv @ Jc[2::3]).tocsr()


class StepDerivatives:
    """The derivatives of one step's end state with respect to ``inputs`` (``Simulator.step_derivatives``).

    Outputs (``OUTPUTS``, in this order in a flat vector): ``"x"`` the translational blocks' positions,
    ``"R"`` the rotational blocks' rotations as world-frame rotation vectors, ``"v"`` every block's
    velocity, ``"v_hat"`` the step's solution v̂ (the next step's warm start). ``jacobian(output, input)``: the dense block (None: all rows / columns); ``jvp`` and ``vjp``:
    products with the full Jacobian over the requested inputs (flat, in ``inputs`` order)."""

    def __init__(self, sim, inputs: list[Input], start: Snapshot, end: Snapshot, last_step: bool = False):
        """``last_step``: ``end`` is the simulator's State now, right after the step (the solver's Schur
        factor is this step's, and it is taken now); else H is rebuilt from the step's own pieces."""
        self.sim, self.inputs, self._start, self._end = sim, inputs, start, end
        self._last_step = last_step
        m = sim.model
        self.output_sizes = output_sizes(m)
        self.input_sizes = {i.name: i.size for i in inputs}
        s_end = end.arrays
        self._vhat = s_end["v_hat"][:m.n_nodes].astype(np.float64).ravel()
        self._vk = start.arrays["v"][:m.n_nodes].astype(np.float64).ravel()
        self._jac = None
        self._solve = None
        if last_step:
            self._setup()

    # ---------------------------------------------------------------- the step's pieces
    def _setup(self) -> None:
        if self._solve is not None:
            return
        sim = self.sim
        m = sim.model
        self.coef = (float(sim.coef.impulse_scale), float(sim.coef.v_hat), float(sim.coef.v_old))
        s, ch, co = self.coef
        self._vstar = ch * self._vhat + co * self._vk
        base = self._around(lambda: _probe(sim, self._vstar, pieces=True))
        self._base = base
        self._solve = StepSolve(sim, base.pieces, self._last_step)
        self.solver_kind = self._solve.kind
        # the step's rotations: a = dt ω̂, C = cay(a), ω₁ = C (c_h ω̂ + c_o ω_k) for free blocks
        rb = m.rigid.rot_block_np
        dt = m.dt
        vh = self._vhat.reshape(-1, 3)
        a = dt * vh[rb]
        self._rot_a = a
        q_end = self._end.arrays["q"][:m.rigid.n_rot].astype(np.float64)
        q_start = self._start.arrays["q"][:m.rigid.n_rot].astype(np.float64)
        R1, R0 = quat_to_matrix(q_end), quat_to_matrix(q_start)
        self._rot_C = R1 @ np.transpose(R0, (0, 2, 1)) if m.rigid.n_rot else np.zeros((0, 3, 3))
        self._rot_P = (np.eye(3)[None] + 0.5 * cross_matrix(a)) / (1.0 + 0.25 * np.einsum("ki,ki->k", a, a))[:, None, None]
        self._omega1 = self._end.arrays["v"][:m.n_nodes].astype(np.float64)[rb]
        self._free = ~base.pieces["fixed"]
        self._v_mask, self._dr_dv = velocity_columns(sim, base.pieces)
        if not ANALYTIC_COLUMNS:
            self._v_mask = np.zeros_like(self._v_mask)

    def _around(self, fn):
        """Run ``fn`` from the start-of-step State, then put the end-of-step State back."""
        restore(self.sim, self._start)
        try:
            return fn()
        finally:
            restore(self.sim, self._end)

    def _residual_derivative(self, parts: list) -> tuple:
        """Central differences of the probe along the direction ``parts`` [(Input, its change), ...], all
        moved together by ε (the largest step that keeps every input within its own ``Input.step``),
        scaled to a unit step: (dr (3n,), d v_fixed (3n,), d v_end (n, 3))."""
        sim = self.sim
        h = min(inp.step / np.abs(d).max() for inp, d in parts)
        names = ", ".join(inp.name for inp, _ in parts)
        out = []
        try:
            for sign in (1.0, -1.0):
                restore(sim, self._start)
                undos = []
                try:
                    for inp, d in parts:
                        undos.append(inp.apply(sim, sign * h * d))
                    p = _probe(sim, self._vstar)
                finally:
                    for undo in reversed(undos):
                        if undo is not None:
                            undo()
                if p.signature != self._base.signature:
                    raise NonSmoothStep(f"step_derivatives: the contact set changes when {names} moves by ±{h:g} "
                                        "along the requested direction (a contact opening or closing within the "
                                        "step): the step is not differentiable there")
                out.append(p)
        finally:
            restore(sim, self._end)
        plus, minus = out
        return ((plus.r - minus.r) / (2 * h), (plus.v_fixed - minus.v_fixed) / (2 * h),
                (plus.v_end - minus.v_end) / (2 * h))

    def _zero(self, inp: Input) -> np.ndarray:
        """Which unit columns of ``inp`` are zero by construction (bool, inp.size): the warm start v̂_k
        enters the converged step only through Lagged's lagged normal impulse under the midpoint rule
        (``sap.py``: n₀ from the contact's v̂_k), so only there, and only for the blocks in contact, is its
        column nonzero."""
        zero = np.zeros(inp.size, bool)
        if inp.name == "v_hat":
            zero[:] = True
            J = self._base.pieces["J"]
            if J is not None and self.sim.contact_solver.name == "lagged" and self.coef[2] != 0.0:
                nodes = np.unique(J.nodes[J.valid])
                zero.reshape(-1, 3)[nodes] = False
        return zero

    def _analytic(self, inp: Input) -> np.ndarray:
        """Which unit columns of ``inp`` have ∂r/∂p in closed form (bool, inp.size; ``velocity_columns``)."""
        if inp.name == "v":
            return self._v_mask
        return np.zeros(inp.size, bool)

    def _unit_columns(self, inp: Input) -> list:
        """The columns of ``inp`` (flat outputs each): zero columns without a probe (``_zero``), the analytic
        ones (``_analytic``) by one solve with several right-hand sides, the rest by a probe pair each."""
        zero, analytic = self._zero(inp), self._analytic(inp)
        cols = [None] * inp.size
        idx = np.flatnonzero(analytic & ~zero)
        if len(idx):
            dv = -self._solve(self._dr_dv[:, idx].toarray())
            dv[self._base.pieces["dof_fixed"]] = 0.0
            dvend = np.zeros((self.sim.model.n_nodes, 3))
            for k, j in enumerate(idx):
                cols[j] = self._outputs(dv[:, k], dvend, direct_state(inp, _unit(inp.size, j), self.sim.model))
        for j in range(inp.size):
            if cols[j] is None:
                cols[j] = np.zeros(self.n_outputs) if zero[j] else self._column([(inp, _unit(inp.size, j))])
        return cols

    def _column(self, parts: list) -> np.ndarray:
        """d(outputs) along the direction ``parts`` [(Input, its change), ...], flat: one probe pair (none when
        every change is on analytic columns, ``_analytic``), one solve."""
        n3 = 3 * self.sim.model.n_nodes
        dr, dvfix, dvend = np.zeros(n3), np.zeros(n3), np.zeros((n3 // 3, 3))
        probed = []
        for inp, d in parts:
            analytic = self._analytic(inp)
            if analytic.any():
                dr = dr + self._dr_dv @ np.where(analytic, d, 0.0)
                d = np.where(analytic, 0.0, d)
            if np.any(d):
                probed.append((inp, d))
        if probed:
            dr_p, dvfix, dvend = self._residual_derivative(probed)
            dr = dr + dr_p
        dv = -self._solve(dr)
        dv = np.where(self._base.pieces["dof_fixed"], dvfix, dv)
        m = self.sim.model
        d0 = direct_state(parts[0][0], parts[0][1], m)
        for inp, d in parts[1:]:
            d0 = {k: a + b for (k, a), b in zip(d0.items(), direct_state(inp, d, m).values())}
        return self._outputs(dv, dvend, d0)

    def _outputs(self, dv: np.ndarray, dvend: np.ndarray, d0: dict) -> np.ndarray:
        """The end state's change for an end-velocity change ``dv`` (3n,), prescribed end velocities
        ``dvend`` (n, 3) and start-of-step changes ``d0`` (``direct_state``)."""
        m = self.sim.model
        s, ch, co = self.coef
        dvk = d0["v"].ravel()
        dvhat = ((dv - co * dvk) / ch).reshape(-1, 3)
        dv = dv.reshape(-1, 3)
        trans = translational(m)
        dx = d0["x"] + m.dt * dvhat[trans]
        rb = m.rigid.rot_block_np
        dC = np.einsum("kij,kj->ki", self._rot_P, m.dt * dvhat[rb]) if len(rb) else np.zeros((0, 3))
        dR = dC + np.einsum("kij,kj->ki", self._rot_C, d0["R"])
        v1 = dv.copy()
        if len(rb):
            free_rot = self._free[rb]
            turned = cross(dC, self._omega1) + np.einsum("kij,kj->ki", self._rot_C, dv[rb])
            v1[rb[free_rot]] = turned[free_rot]
        fixed = ~self._free
        v1[fixed] = dvend[fixed]
        return np.concatenate([dx.ravel(), dR.ravel(), v1.ravel(), dvhat.ravel()])

    def _outputs_adjoint(self, w: np.ndarray) -> tuple:
        """The transpose of ``_outputs`` at dvend = 0: for a row vector ``w`` over the outputs (flat), the
        gradients (g_dv (3n,), g_d0 {"x", "R", "v"} flat) with wᵀ _outputs(dv, 0, d0) = g_dvᵀ dv + Σ g_d0ᵀ d0."""
        m = self.sim.model
        s, ch, co = self.coef
        sizes = self.output_sizes
        k1 = sizes["x"]
        k2 = k1 + sizes["R"]
        k3 = k2 + sizes["v"]
        wx, wR = w[:k1].reshape(-1, 3), w[k1:k2].reshape(-1, 3)
        wv, wh = w[k2:k3].reshape(-1, 3).copy(), w[k3:].reshape(-1, 3)
        rb = m.rigid.rot_block_np
        wv[~self._free] = 0.0                   # prescribed end velocities come from dvend
        g_dv = wv.copy()
        g_dC = wR.copy()
        if len(rb):
            free_rot = self._free[rb]
            wr = np.where(free_rot[:, None], wv[rb], 0.0)
            g_dv[rb[free_rot]] = 0.0            # v₁ there is C (c_h ω̂ + c_o ω_k) turned, not dv itself
            g_dv[rb] += np.einsum("kji,kj->ki", self._rot_C, wr)
            g_dC += cross(self._omega1, wr)     # d(dC × ω₁) = −[ω₁]× dC, transposed: [ω₁]× w
        g_dvhat = wh.copy()
        g_dvhat[translational(m)] += m.dt * wx
        if len(rb):
            g_dvhat[rb] += m.dt * np.einsum("kji,kj->ki", self._rot_P, g_dC)
        g_dv += g_dvhat / ch
        g_d0 = {"x": wx.ravel(), "R": np.einsum("kji,kj->ki", self._rot_C, wR).ravel() if len(rb) else np.zeros(0),
                "v": (-co / ch * g_dvhat).ravel()}
        return g_dv.ravel(), g_d0

    # ---------------------------------------------------------------- public
    @property
    def n_outputs(self) -> int:
        return sum(self.output_sizes.values())

    @property
    def n_inputs(self) -> int:
        return sum(self.input_sizes.values())

    def jacobian(self, output: str | None = None, input: str | None = None) -> np.ndarray:
        """The dense Jacobian d(output)/d(input) (None: every output's rows / every input's columns); every
        column of every input is computed (two probes each) the first time."""
        if self._jac is None:
            self._setup()
            cols = []
            for inp in self.inputs:
                cols += self._unit_columns(inp)
            self._jac = np.stack(cols, axis=1) if cols else np.zeros((self.n_outputs, 0))
        rows = self._slice(self.output_sizes, output, OUTPUTS, "output")
        cols = self._slice(self.input_sizes, input, [i.name for i in self.inputs], "input")
        return self._jac[rows, cols]

    def jvp(self, vec: np.ndarray) -> np.ndarray:
        """J vec (outputs, flat) for vec over the inputs (flat, ``inputs`` order): the directional derivative
        along vec, every input moved at once: one probe pair and one solve, without the dense Jacobian."""
        vec = self._check(vec, self.n_inputs, "jvp")
        if self._jac is not None:
            return self._jac @ vec
        self._setup()
        parts, k = [], 0
        for inp in self.inputs:
            part = np.where(self._zero(inp), 0.0, vec[k:k + inp.size])
            k += inp.size
            if np.any(part):
                parts.append((inp, part))
        return self._column(parts) if parts else np.zeros(self.n_outputs)

    def vjp(self, vec: np.ndarray) -> np.ndarray:
        """vecᵀ J (inputs, flat) for vec over the outputs (flat): the analytic columns (``_analytic``) by one
        transposed solve and a sparse transpose product, the others column by column (``jvp`` of each unit
        input), so their cost grows with the number of inputs, not of outputs."""
        vec = self._check(vec, self.n_outputs, "vjp")
        if self._jac is not None:
            return vec @ self._jac
        self._setup()
        g_dv, g_d0 = self._outputs_adjoint(vec)
        g_dv[self._base.pieces["dof_fixed"]] = 0.0
        adj = None
        out = []
        for inp in self.inputs:
            zero, analytic = self._zero(inp), self._analytic(inp)
            part = np.zeros(inp.size)
            if analytic.any():
                if adj is None:                 # one transposed solve for every analytic column: λ = H⁻ᵀ g_dv
                    adj = self._solve(g_dv, transpose=True)
                part = np.where(analytic, -(self._dr_dv.T @ adj) + g_d0.get(inp.name, 0.0), 0.0)
            for j in np.flatnonzero(~analytic & ~zero):
                part[j] = float(vec @ self._column([(inp, _unit(inp.size, j))]))
            out.append(part)
        return np.concatenate(out) if out else np.zeros(0)

    @staticmethod
    def _check(vec, n: int, what: str) -> np.ndarray:
        vec = np.asarray(vec, float).ravel()
        if vec.shape != (n,):
            raise ParameterError(f"{what}: the vector has {vec.size} entries, expected {n}")
        return vec

    @staticmethod
    def _slice(sizes: dict, name, names, what: str) -> slice:
        if name is None:
            return slice(0, sum(sizes.values()))
        if name not in sizes:
            raise ParameterError(f"no {what} {name!r}; {what}s: {list(names)}")
        k = 0
        for key in names:
            if key == name:
                return slice(k, k + sizes[key])
            k += sizes[key]
        raise AssertionError(name)


def check_precision() -> None:
    """Refuse single precision: the residual's differences at h ~ 1e-6 of an input need float64."""
    if backend.np_real() != np.float64:
        raise ParameterError("step derivatives need the float64 runtime (precision='f64'): the residual is "
                             "differenced at steps of 1e-6 of each input, below float32's resolution")


def step_derivatives(sim, wrt=("x", "R", "v")) -> StepDerivatives:
    """The derivatives of the last step of ``sim`` (``Simulator.step_derivatives``)."""
    check_precision()
    name = sim.contact_solver.name
    if name not in NEWTON_SOLVERS:
        raise ParameterError(f"step_derivatives: solver {name!r} has no step derivatives; they need the Newton "
                             f"path's converged residual: use one of {', '.join(NEWTON_SOLVERS)}")
    start = getattr(sim, "step_start", None)
    if start is None or not sim.stats:
        raise ParameterError("step_derivatives: no step to differentiate; call sim.track_derivatives() before "
                             "sim.step() (it keeps each step's start-of-step State)")
    if start.n_stats != len(sim.stats) - 1:
        raise ParameterError("step_derivatives: the State changed since the last tracked step")
    if not sim.stats[-1].converged:
        raise SimulationError(f"step_derivatives: step {sim.stats[-1].step} ended unconverged; its residual is not "
                              "zero, so the implicit function theorem does not apply (tighten rel_tol or raise "
                              "max_iterations)")
    inputs = resolve(sim, wrt)
    return StepDerivatives(sim, inputs, start, snapshot(sim), last_step=True)

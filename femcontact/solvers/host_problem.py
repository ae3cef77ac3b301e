"""One step's contact problem read onto the host, shared by the solvers that work there in numpy: the
Newton path (``sap.py``: SAP, Lagged, Similar), the Delassus solvers (``delassus.py``: NCP-PGS, Todorov's
INCP) and the momentum error e_m of SAP eq. 32 that every solver reports (Drake's ``SapContactProblem``
in spirit: the problem is built once, the solvers only read it).

From the ``StepProblem`` of ``A v̂ = b + Jᵀλ`` (base.py) it holds, read once per step:

- A's 3×3 blocks (float64), from which A comes as scipy CSR (``a_scipy``) and its diagonal blocks
  (``diagonal_blocks``); b and v_k as float64 vectors (3n,);
- the free / prescribed split (``fixed`` per node, ``dof_fixed`` per DOF; ``PrescribedMask`` reads it
  once per mask array, which is fixed at build time) and the prescribed nodes' v̂ from their
  decoupled rows ``D_ii v̂_i = b_i`` (``prescribed_v_hat``; ``with_prescribed`` sets them exactly);
- the contact columns a solver asks for, J as per-contact block rows (``jacobian_rows``) or as scipy
  CSR (``jacobian_csr``), and J_f, J with the prescribed columns zeroed (``free_columns``: a drive
  absorbs the contact's reaction; the prescribed v̂ still enters J v);
- the world's and the stiction anchors' parts of the contact velocity ``v_c = J v + off``
  (``off_world``, ``off_anchor``, contact frame);
- the momentum error e_m of a solution (``momentum_error``, SAP eq. 32).

A host solver returns a ``SolveResult`` (v̂, impulses, statuses, statistics) and writes nothing;
``HostContactProblem.apply`` writes it into the ``StepProblem`` (the step contract of ``base.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .. import backend
from ..errors import SimulationError
from .base import SolveStats, StepProblem
from .newton_dense import ContactRows, RowLayout

#: the contact columns J and the offsets are built from
JACOBIAN_COLUMNS = ("node_a", "node_b", "frame", "v_world", "v_anchor")


@dataclass
class SolveResult:
    """What a host solver found for one step, nothing of it yet written into the ``StepProblem``
    (``HostContactProblem.apply`` does): v̂ (3n,) with the prescribed nodes at their v̂, the impulses
    (c, 3) (N s, contact frame), each contact's status (c,) (OPEN, STICK, SLIP), the statistics."""

    v_hat: np.ndarray
    impulse: np.ndarray
    status: np.ndarray
    stats: SolveStats


class PrescribedMask:
    """The prescribed mask ``(fixed (n,), dof_fixed (3n,))`` (bool), read once per mask array (the
    ``StepProblem.fixed`` array is filled at build time) and the same arrays while it repeats."""

    def __init__(self):
        self._source = None
        self._masks = None

    def __call__(self, fixed, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self._source is not fixed:
            mask = backend.read(fixed, n) != 0
            self._source, self._masks = fixed, (mask, np.repeat(mask, 3))
        return self._masks


class HostContactProblem:
    """One step's ``A v̂ = b + Jᵀλ`` and its contacts as numpy (module docstring).

    columns: the contact columns to read (``JACOBIAN_COLUMNS`` are always read); mask: a
    ``PrescribedMask`` the solver keeps across steps (a fresh one reads the mask again)."""

    def __init__(self, problem: StepProblem, columns: tuple[str, ...] = (), mask: PrescribedMask | None = None):
        model, contacts, coef = problem.model, problem.contacts, problem.coef
        n = model.n_nodes
        self.problem = problem
        self.n, self.c, self.dt = n, int(contacts.count), float(problem.dt)
        self.s, self.ch, self.co = float(coef.impulse_scale), float(coef.v_hat), float(coef.v_old)
        self.midpoint = problem.integrator == "midpoint"
        rd = backend.read                    # host views on the CPU: no copy kernels (backend.host_view)
        self.blocks = problem.A.blocks_numpy()    # A read once: the matrix and its diagonal blocks
        self.b = rd(problem.b, n).astype(np.float64, copy=False).ravel()
        self.vk = rd(problem.state.v, n).astype(np.float64, copy=False).ravel()
        self.fixed, self.dof_fixed = (mask or PrescribedMask())(problem.fixed, n)
        names = tuple(columns) + tuple(k for k in JACOBIAN_COLUMNS if k not in columns)
        self.data = contacts.read(*names)
        self._diagonal = None
        self._prescribed = None
        self._a_scipy = None
        self._jacobian_csr = None

    @cached_property
    def off_world(self) -> np.ndarray:
        """(c, 3) the moving world's part of v_c (``ContactSet.world_offset``; formed when first read)."""
        return self.problem.contacts.world_offset(self.data)

    @cached_property
    def off_anchor(self) -> np.ndarray:
        """(c, 3) the stiction anchors' part of v_c (``ContactSet.anchor_offset``; formed when first read)."""
        return self.problem.contacts.anchor_offset(self.data)

    # ------------------------------------------------------------------ A
    def a_scipy(self) -> sp.csr_matrix:
        """A (3n × 3n) as scipy CSR (formed once)."""
        if self._a_scipy is None:
            self._a_scipy = self.problem.A.to_scipy(self.blocks)
        return self._a_scipy

    def diagonal_blocks(self) -> np.ndarray:
        """A's (n, 3, 3) diagonal blocks."""
        if self._diagonal is None:
            self._diagonal = self.problem.A.diagonal_blocks(self.blocks)
        return self._diagonal

    # ------------------------------------------------------------------ prescribed velocities
    def prescribed_v_hat(self) -> np.ndarray:
        """(k, 3) v̂ of the k prescribed nodes: their rows of A are decoupled, ``D_ii v̂_i = b_i``."""
        if self._prescribed is None:
            D = self.diagonal_blocks()[self.fixed]
            self._prescribed = np.linalg.solve(D, self.b.reshape(self.n, 3)[self.fixed][:, :, None])[:, :, 0]
        return self._prescribed

    def with_prescribed(self, v_hat: np.ndarray) -> np.ndarray:
        """v̂ (3n,) with the prescribed nodes set to their v̂ exactly (in place)."""
        if self.fixed.any():
            v_hat.reshape(self.n, 3)[self.fixed] = self.prescribed_v_hat()
        return v_hat

    # ------------------------------------------------------------------ the result
    def apply(self, result: SolveResult) -> SolveStats:
        """Write a solve's v̂, impulses and statuses into the step problem; return its statistics."""
        backend.write(self.problem.v_hat, result.v_hat.reshape(self.n, 3))
        contacts = self.problem.contacts
        contacts.write("impulse", result.impulse)
        contacts.write("status", result.status)
        return result.stats

    def momentum_error(self, v_hat: np.ndarray, impulse: np.ndarray) -> float:
        """SAP eq. 32 momentum error ``‖D (Ã v − b̃ − Jᵀγ)‖ / max(‖D Ã v‖, ‖D Jᵀγ‖)`` of the solution v̂ (3n,)
        with the impulses γ (c, 3) (N s, contact frame), both taken at the runtime's precision (as the
        problem would store them); ``sap.momentum_error`` states the units."""
        real = backend.np_real()
        v_hat = np.asarray(v_hat).astype(real, copy=False).astype(np.float64, copy=False).ravel()
        s, ch, co = self.s, self.ch, self.co
        v = ch * v_hat + co * self.vk
        A = self.a_scipy()
        Av = (s / ch) * (A @ v)
        bt = s * self.b + ((s * co / ch) * (A @ self.vk) if co != 0.0 else 0.0)
        if self.c:
            gamma = np.asarray(impulse).astype(real, copy=False).astype(np.float64, copy=False).ravel()
            jc = self.jacobian_csr().T @ gamma
        else:
            jc = np.zeros(3 * self.n)
        D = momentum_scaling((s / ch) * self.diagonal_blocks(), self.dof_fixed)
        scale = max(float(np.linalg.norm(D * Av)), float(np.linalg.norm(D * jc)))
        err = float(np.linalg.norm(D * (Av - bt - jc)))
        return err / scale if scale > 0 else err

    # ------------------------------------------------------------------ J
    def jacobian_rows(self, layout: RowLayout | None = None) -> tuple[ContactRows, RowLayout]:
        """J (virtual nodes expanded) as per-contact block rows, and its ``RowLayout``: ``layout`` kept
        while the contacts' nodes repeat (products without scipy.sparse, ``newton_dense``)."""
        m_idx, nodes, jblocks = self.problem.contacts.jacobian_blocks(True, self.data)
        if layout is None or not layout.same(m_idx, nodes, self.c, self.n):
            layout = RowLayout(m_idx, nodes, self.c, self.n)
        return ContactRows.from_triplets(m_idx, nodes, jblocks, self.c, self.n, layout), layout

    def jacobian_csr(self) -> sp.csr_matrix:
        """J (3c × 3n, virtual nodes expanded) as scipy CSR (formed once)."""
        if self._jacobian_csr is None:
            J = self.problem.contacts.jacobian(expand_virtual=True, data=self.data).tocsr()
            if J.shape != (3 * self.c, 3 * self.n):
                raise SimulationError(f"contact Jacobian has shape {J.shape}, expected {(3 * self.c, 3 * self.n)}")
            self._jacobian_csr = J
        return self._jacobian_csr

    def free_columns(self, J: ContactRows | sp.csr_matrix) -> ContactRows | sp.csr_matrix:
        """J_f: ``J`` with the prescribed DOFs' columns zeroed (``J`` itself when nothing is prescribed)."""
        if not self.fixed.any():
            return J
        if isinstance(J, ContactRows):
            return J.without(self.fixed)
        return (J @ sp.diags((~self.dof_fixed).astype(np.float64))).tocsr()


def momentum_scaling(blocks: np.ndarray, dof_fixed: np.ndarray) -> np.ndarray:
    """SAP eq. 32 scaling ``D = diag(Ã)^{-1/2}`` per DOF (zero on prescribed DOFs)."""
    d = np.einsum("nii->ni", blocks).ravel()
    return np.where(dof_fixed | ~(d > 0), 0.0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)))

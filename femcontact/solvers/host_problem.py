"""One step's contact problem read onto the host, shared by the solvers that work there in numpy: the
Newton path (``sap.py``: SAP, Lagged, Similar), the Delassus solvers (``delassus.py``: NCP-PGS, Todorov's
INCP) and the momentum error e_m of SAP eq. 32 that every solver reports (Drake's ``SapContactProblem``
in spirit: the problem is built once, the solvers only read it).

From the ``StepProblem`` of ``A v̂ = b + Jᵀλ`` (base.py) it holds, read once per step:

- A's 3×3 blocks (float64), from which A comes as scipy CSR (``a_scipy``) and its diagonal blocks
  (``diagonal_blocks``); b and v_k as float64 vectors (3n,);
- the free / prescribed split (``fixed`` per node, ``dof_fixed`` per DOF; ``PrescribedMask`` reads it
  once per mask array, which is fixed at build time) and the prescribed nodes' v̂ from their
  decoupled rows ``D_ii v̂_i = b_i`` (``prescribed_v_hat``; ``write_v_hat`` keeps them exactly);
- the contact columns a solver asks for, J as per-contact block rows (``jacobian_rows``) or as scipy
  CSR (``jacobian_csr``), and J_f, J with the prescribed columns zeroed (``free_columns``: a drive
  absorbs the contact's reaction; the prescribed v̂ still enters J v);
- the world's and the stiction anchors' parts of the contact velocity ``v_c = J v + off``
  (``off_world``, ``off_anchor``, contact frame).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import backend
from ..errors import SimulationError
from .base import StepProblem
from .newton_dense import ContactRows, RowLayout

#: the contact columns J and the offsets are built from
JACOBIAN_COLUMNS = ("node_a", "node_b", "frame", "v_world", "v_anchor")


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
        self.off_world = contacts.world_offset(self.data)
        self.off_anchor = contacts.anchor_offset(self.data)
        self._diagonal = None
        self._prescribed = None

    # ------------------------------------------------------------------ A
    def a_scipy(self) -> sp.csr_matrix:
        """A (3n × 3n) as scipy CSR."""
        return self.problem.A.to_scipy(self.blocks)

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

    def write_v_hat(self, v_hat: np.ndarray) -> None:
        """Write the solution v̂ (3n,) into the problem, the prescribed nodes set to their v̂ exactly."""
        if self.fixed.any():
            v_hat.reshape(self.n, 3)[self.fixed] = self.prescribed_v_hat()
        backend.write(self.problem.v_hat, v_hat.reshape(self.n, 3))

    # ------------------------------------------------------------------ J
    def jacobian_rows(self, layout: RowLayout | None = None) -> tuple[ContactRows, RowLayout]:
        """J (virtual nodes expanded) as per-contact block rows, and its ``RowLayout``: ``layout`` kept
        while the contacts' nodes repeat (products without scipy.sparse, ``newton_dense``)."""
        m_idx, nodes, jblocks = self.problem.contacts.jacobian_blocks(True, self.data)
        if layout is None or not layout.same(m_idx, nodes, self.c, self.n):
            layout = RowLayout(m_idx, nodes, self.c, self.n)
        return ContactRows.from_triplets(m_idx, nodes, jblocks, self.c, self.n, layout), layout

    def jacobian_csr(self) -> sp.csr_matrix:
        """J (3c × 3n, virtual nodes expanded) as scipy CSR."""
        J = self.problem.contacts.jacobian(expand_virtual=True, data=self.data).tocsr()
        if J.shape != (3 * self.c, 3 * self.n):
            raise SimulationError(f"contact Jacobian has shape {J.shape}, expected {(3 * self.c, 3 * self.n)}")
        return J

    def free_columns(self, J: ContactRows | sp.csr_matrix) -> ContactRows | sp.csr_matrix:
        """J_f: ``J`` with the prescribed DOFs' columns zeroed (``J`` itself when nothing is prescribed)."""
        if not self.fixed.any():
            return J
        if isinstance(J, ContactRows):
            return J.without(self.fixed)
        return (J @ sp.diags((~self.dof_fixed).astype(np.float64))).tocsr()

"""Small Newton systems without scipy.sparse: per-contact block rows of J and a dense H (issue 31).

A rigid body is two 3x3 node blocks (linear and angular velocity), so the Newton matrix of a few
rigid bodies, a robot or a small FEM body is a handful of dense cliques: below ``DENSE_MAX_DOFS``
unknowns ``H = Ã + Jᵀ G J`` is held as one dense matrix and factored by LAPACK's Cholesky
(``dpotrf``/``dpotrs``, the dense end of Drake's block-sparse supernodal solver), and J as
``ContactRows``: per contact its K node blocks, so ``J v``, ``Jᵀ γ`` and ``J_mᵀ G_m J_m`` are batched
3x3 products over contacts with no sparse-matrix object, conversion or index check per call.
The index work (where each contact's ``J_mᵀ G_m J_m`` lands in H, where Ã's blocks land) is kept
while the node pattern of the contacts (and Ã's pattern) repeats.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from ..errors import SimulationError

DENSE_MAX_DOFS = 96         # "auto"/"direct": a dense H up to this many unknowns (LAPACK Cholesky; measured
                            # 53 µs at 96, 0.55 ms at 240, where the sparse path wins on a rigid pile)


class ContactRows:
    """J (3c x 3n) as per-contact block rows: ``nodes`` (c, K) and ``blocks`` (c, K, 3, 3), J's rows
    of contact m being Σ_k blocks[m, k] at the columns of node nodes[m, k], nodes increasing along k;
    ``valid`` (c, K) marks the slots in use (the others: node 0, a zero block)."""

    def __init__(self, nodes: np.ndarray, blocks: np.ndarray, n: int, valid: np.ndarray):
        self.nodes, self.blocks, self.n, self.valid = nodes, blocks, n, valid

    @classmethod
    def from_triplets(cls, contact: np.ndarray, node: np.ndarray, block: np.ndarray, c: int, n: int,
                      layout: "RowLayout | None" = None):
        """From ``ContactSet.jacobian_blocks``'s triplets (a repeated (contact, node) pair is summed);
        ``layout``: the triplets' ``RowLayout`` when the caller keeps one."""
        if layout is None:
            layout = RowLayout(contact, node, c, n)
        blocks = np.zeros(layout.valid.shape + (3, 3))
        if layout.unique:
            blocks[layout.slot_m, layout.slot_q] = block
        else:
            np.add.at(blocks, (layout.slot_m, layout.slot_q), block)
        return cls(layout.nodes, blocks, n, layout.valid)

    @cached_property
    def dofs(self) -> np.ndarray:
        """(c, 3K): the DOF behind each column of ``dense_rows``."""
        c, K = self.nodes.shape
        return (3 * self.nodes[:, :, None] + np.arange(3)).reshape(c, 3 * K)

    @cached_property
    def rows(self) -> np.ndarray:
        """(c, 3, 3K): each contact's rows restricted to its K node blocks."""
        c, K = self.nodes.shape
        return np.ascontiguousarray(self.blocks.transpose(0, 2, 1, 3)).reshape(c, 3, 3 * K)

    # (elementwise products and sums: numpy's matmul on stacks of 3x3 calls BLAS per matrix, slower)
    def matvec(self, x: np.ndarray) -> np.ndarray:
        """J x (3c,) for x (3n,)."""
        return (self.rows * x[self.dofs][:, None, :]).sum(axis=2).ravel()

    def rmatvec(self, g: np.ndarray) -> np.ndarray:
        """Jᵀ g (3n,) for g (3c,) or (c, 3)."""
        part = (self.rows * g.reshape(-1, 3)[:, :, None]).sum(axis=1)
        return np.bincount(self.dofs.ravel(), part.ravel(), minlength=3 * self.n)

    def scale_rows(self, S: np.ndarray) -> "ContactRows":
        """diag(S) J for S (c, 3)."""
        return ContactRows(self.nodes, self.blocks * S[:, None, :, None], self.n, self.valid)

    def without(self, fixed: np.ndarray) -> "ContactRows":
        """J with the columns of the nodes ``fixed`` (bool, n) zeroed."""
        return ContactRows(self.nodes, self.blocks * (~fixed[self.nodes])[:, :, None, None], self.n, self.valid)



class RowLayout:
    """Where each (contact, node) triplet of J goes in ``ContactRows`` (slot (m, q) per triplet, nodes
    increasing along q); ``same(contact, node)``: whether another step's triplets have this layout."""

    def __init__(self, contact: np.ndarray, node: np.ndarray, c: int, n: int):
        self.contact, self.node, self.c, self.n = contact.copy(), node.copy(), c, n
        key = contact * n + node
        uk, inv = np.unique(key, return_inverse=True)
        m, nd = uk // n, uk % n
        count = np.bincount(m, minlength=c)
        K = max(int(count.max(initial=0)), 1)
        q = np.arange(len(uk)) - (np.cumsum(count) - count)[m]
        self.nodes = np.zeros((c, K), np.int64)
        self.valid = np.zeros((c, K), bool)
        self.nodes[m, q] = nd
        self.valid[m, q] = True
        self.slot_m, self.slot_q = m[inv], q[inv]
        self.unique = len(uk) == len(key)

    def same(self, contact: np.ndarray, node: np.ndarray, c: int, n: int) -> bool:
        return (c == self.c and n == self.n and len(contact) == len(self.contact)
                and np.array_equal(contact, self.contact) and np.array_equal(node, self.node))


def dense_index(pattern) -> np.ndarray:
    """Flat positions (nnzb, 3, 3) in a dense (3n, 3n) matrix of the entries of a ``BlockPattern``'s blocks."""
    n3 = 3 * pattern.n
    r = 3 * pattern.row[:, None, None] + np.arange(3)[None, :, None]
    c = 3 * pattern.col[:, None, None] + np.arange(3)[None, None, :]
    return r * n3 + c


class DenseNewtonMatrix:
    """``H = Ã + Jᵀ G J`` dense, factored by LAPACK's Cholesky; the scatter of each contact's
    ``J_mᵀ G_m J_m`` into H is kept while the contacts' node pattern repeats."""

    name = "dense"

    def __init__(self):
        self._nodes = None
        self._scatter = None
        self.patterns = 0          # scatter maps built (one per change of the contacts' node pattern)

    def setup(self, At: np.ndarray, J: ContactRows) -> None:
        """Ã (3n, 3n) dense and the Jacobian (prescribed columns zeroed) of this step."""
        if (self._nodes is None or self._nodes.shape != J.nodes.shape or self._size != At.shape[0]
                or not np.array_equal(self._nodes, J.nodes)):
            dof = J.dofs
            self._scatter = (dof[:, :, None] * At.shape[0] + dof[:, None, :]).ravel()
            self._nodes, self._size = J.nodes.copy(), At.shape[0]
            self.patterns += 1
        self._At = At
        self._Jd = J.rows
        self._JdT = np.ascontiguousarray(self._Jd.transpose(0, 2, 1))

    def matrix(self, G: np.ndarray) -> np.ndarray:
        """H for the blocks G (c, 3, 3)."""
        Hm = self._JdT @ (G @ self._Jd)
        n2 = self._At.size
        return self._At + np.bincount(self._scatter, Hm.ravel(), minlength=n2).reshape(self._At.shape)

    def solve(self, G: np.ndarray, r: np.ndarray) -> np.ndarray:
        """H(G)⁻¹ r by Cholesky."""
        from scipy.linalg import lapack     # imported where used (scipy.linalg's start-up cost)

        L, info = lapack.dpotrf(self.matrix(G), lower=1, clean=0, overwrite_a=1)
        if info != 0:
            raise SimulationError(f"Newton matrix is not positive definite (LAPACK dpotrf info {info})")
        x, info = lapack.dpotrs(L, r, lower=1)
        return x

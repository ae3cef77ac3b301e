"""COND's view of the unknowns' block structure, derived from the Model's DOF groups alone.

:func:`block_tables` turns ``model.dofs`` (``femcontact.dofs``: spins, rigid pairs, chains) into
the tables COND's block steps use:

- ``step_kind[i]`` per real node: 0 scalar (Frobenius) step, 1 a 3x3 block step (a spin),
  2 / 3 the linear / angular half of a rigid pair (6x6 block step), 4 a rod row (block-tridiagonal);
- ``pair_slot[i]``: slot of A's block (i, i+1) for the linear half of a rigid pair (-1 none);
- rods: ``rod_start`` (first 6x6 block of each rod, and the total), ``rod_rows`` (per 6x6 block
  the rows of its node and segment halves, -1 none), ``rod_pos`` (2·block + half of each real
  row, -1 not a rod row) and ``rod_slots`` (A's slots of the diagonal blocks D_j and of
  the sub-diagonal blocks L_j = Ã(z_j, z_{j−1}); order xx, xθ, θx, θθ; -1 absent).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...dofs import SPIN

KIND_SCALAR, KIND_SPIN, KIND_RIGID_LIN, KIND_RIGID_ANG, KIND_ROD = 0, 1, 2, 3, 4


@dataclass
class BlockTables:
    step_kind: np.ndarray     # (n,) int32
    pair_slot: np.ndarray     # (n,) int64
    rod_start: np.ndarray     # (n_rods + 1,) int64
    rod_rows: np.ndarray      # (n_blocks, 2) int64
    rod_pos: np.ndarray       # (n,) int64
    rod_slots: np.ndarray     # (n_blocks, 8) int64

    @property
    def n_rods(self) -> int:
        return len(self.rod_start) - 1

    @property
    def n_rod_blocks(self) -> int:
        return int(self.rod_start[-1])

    @property
    def has_rigid(self) -> bool:
        """Any rigid pair (6x6 block step)."""
        return bool(np.any(self.step_kind == KIND_RIGID_LIN))

    @property
    def has_blocks(self) -> bool:
        """Any 3x3 or rigid 6x6 block step."""
        return bool(np.any((self.step_kind >= KIND_SPIN) & (self.step_kind <= KIND_RIGID_ANG)))


def block_tables(model) -> BlockTables:
    """Block structure of ``model``'s unknowns from its DOF groups (see the module docstring)."""
    dofs = model.dofs
    n = dofs.n
    kind = np.zeros(n, np.int32)
    kind[dofs.kind == SPIN] = KIND_SPIN
    pair_slot = np.full(n, -1, np.int64)
    for lin in dofs.rigid_linear:
        ang = int(dofs.partner[lin])
        kind[[lin, ang]] = (KIND_RIGID_LIN, KIND_RIGID_ANG)
        try:
            pair_slot[lin] = model.pattern.index([lin], [ang])[0]
        except ValueError:
            pass
    starts = dofs.chain_start
    rows = dofs.chain_rows
    in_chain = rows[rows >= 0]
    kind[in_chain] = KIND_ROD
    nb = int(starts[-1])
    pos = np.full(n, -1, np.int64)
    for h in range(2):
        ok = rows[:, h] >= 0
        pos[rows[ok, h]] = 2 * np.arange(nb)[ok] + h
    keys, npat = model.pattern.keys, model.pattern.n

    def slot(r, c):
        q = np.where((r >= 0) & (c >= 0), r * npat + c, -1)
        idx = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        return np.where((q >= 0) & (keys[idx] == q), idx, -1)

    prev = np.full((nb, 2), -1, np.int64)
    first = np.zeros(nb, bool)
    first[starts[:-1]] = True
    if nb:
        prev[1:] = rows[:-1]
        prev[first] = -1
    slots = np.full((nb, 8), -1, np.int64)
    for h in range(2):
        for h2 in range(2):
            slots[:, 2 * h + h2] = slot(rows[:, h], rows[:, h2])
            slots[:, 4 + 2 * h + h2] = slot(rows[:, h], prev[:, h2])
    return BlockTables(kind, pair_slot, starts.astype(np.int64), rows, pos, slots)

"""DOF groups: the block structure of the global velocity vector, the only body knowledge solvers get.

The global velocity is ``n`` blocks of 3. Every body type maps its blocks onto four kinds:

- ``POINT``: a translational block with a lumped mass (FEM node, rod node);
- ``SPIN``: a rotational block that stands alone (a rod segment's angular velocity);
- ``RIGID_LINEAR`` / ``RIGID_ANGULAR``: the two halves of a rigid pair (centre-of-mass velocity,
  world angular velocity), each naming the other as ``partner``.

Rods add **chains**: per chain the row table ``(point, spin)`` of its links in order (the last
point of an open rod has no spin, ``-1``), the block-tridiagonal structure a solver may factor
exactly. ``lumped`` marks points whose diagonal block of ``A`` holds stiffness that their spin
neighbours relieve (rod points), so a Delassus estimate should take their lumped mass instead.
Solvers read these tables and never ask which body a block came from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POINT, SPIN, RIGID_LINEAR, RIGID_ANGULAR = 0, 1, 2, 3


@dataclass(frozen=True)
class DofGroups:
    """Per block (length n): ``kind`` (POINT, SPIN, RIGID_LINEAR, RIGID_ANGULAR), ``partner`` (the
    other half of a rigid pair, else -1), ``body`` (owning body index), ``mass`` (lumped mass, kg;
    0 on rotational blocks), ``lumped`` (bool, see module docstring), ``prescribed`` (bool: the
    velocity is given, not solved for). Per body: ``body_mass`` (kg). Chains:
    ``chain_start`` (n_chains + 1,) offsets into ``chain_rows`` ((links, 2): point block, spin block
    or -1)."""

    kind: np.ndarray
    partner: np.ndarray
    body: np.ndarray
    mass: np.ndarray
    lumped: np.ndarray
    prescribed: np.ndarray
    body_mass: np.ndarray
    chain_start: np.ndarray
    chain_rows: np.ndarray

    @property
    def n(self) -> int:
        return len(self.kind)

    @property
    def n_chains(self) -> int:
        return len(self.chain_start) - 1

    @property
    def rotational(self) -> np.ndarray:
        """Indices of the blocks holding an angular velocity (spins and rigid angular halves)."""
        return np.flatnonzero((self.kind == SPIN) | (self.kind == RIGID_ANGULAR))

    @property
    def rigid_linear(self) -> np.ndarray:
        """Indices of the linear halves of rigid pairs (the angular half is ``partner``)."""
        return np.flatnonzero(self.kind == RIGID_LINEAR)

    def chain(self, k: int) -> np.ndarray:
        """(links, 2) rows (point block, spin block or -1) of chain k."""
        return self.chain_rows[self.chain_start[k]: self.chain_start[k + 1]]


class DofGroupsBuilder:
    """Collects the blocks of each body in global order; ``build`` freezes them into DofGroups."""

    def __init__(self) -> None:
        self._kind: list[np.ndarray] = []
        self._partner: list[np.ndarray] = []
        self._body: list[np.ndarray] = []
        self._mass: list[np.ndarray] = []
        self._lumped: list[np.ndarray] = []
        self._chains: list[np.ndarray] = []
        self._body_mass: list[float] = []
        self.n = 0

    def _add(self, kind, partner, mass, lumped, body_mass: float) -> int:
        start = self.n
        k = len(kind)
        self._kind.append(np.asarray(kind, np.int8))
        self._partner.append(np.asarray(partner, np.int64))
        self._body.append(np.full(k, len(self._body_mass), np.int64))
        self._mass.append(np.asarray(mass, float))
        self._lumped.append(np.asarray(lumped, bool))
        self._body_mass.append(float(body_mass))
        self.n += k
        return start

    def add_points(self, mass: np.ndarray) -> int:
        """A body of point blocks (an FEM mesh); returns its first block."""
        mass = np.asarray(mass, float)
        return self._add(np.full(len(mass), POINT), np.full(len(mass), -1), mass, np.zeros(len(mass), bool),
                         mass.sum())

    def add_rigid(self, mass: float) -> int:
        """A rigid pair (linear block, angular block); returns the linear block."""
        s = self.n
        return self._add([RIGID_LINEAR, RIGID_ANGULAR], [s + 1, s], [mass, 0.0], [False, False], mass)

    def add_chain(self, point_mass: np.ndarray, n_spins: int) -> int:
        """A rod: its points (lumped) then its ``n_spins`` segment spins, one chain linking point j
        with spin j; returns its first block."""
        point_mass = np.asarray(point_mass, float)
        npt = len(point_mass)
        s = self.n
        kind = np.concatenate([np.full(npt, POINT), np.full(n_spins, SPIN)])
        mass = np.concatenate([point_mass, np.zeros(n_spins)])
        lumped = np.concatenate([point_mass > 0, np.zeros(n_spins, bool)])
        spins = np.full(npt, -1, np.int64)
        spins[:n_spins] = s + npt + np.arange(n_spins)
        self._chains.append(np.stack([s + np.arange(npt), spins], axis=1))
        return self._add(kind, np.full(npt + n_spins, -1), mass, lumped, point_mass.sum())

    def build(self, prescribed: np.ndarray) -> DofGroups:
        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        prescribed = np.asarray(prescribed, bool)
        if prescribed.shape != (self.n,):
            raise ValueError(f"prescribed mask has shape {prescribed.shape}, expected ({self.n},)")
        lengths = [len(c) for c in self._chains]
        return DofGroups(cat(self._kind, np.int8), cat(self._partner, np.int64), cat(self._body, np.int64),
                         cat(self._mass, float), cat(self._lumped, bool), prescribed,
                         np.array(self._body_mass, float),
                         np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                         np.concatenate(self._chains).astype(np.int64) if self._chains
                         else np.zeros((0, 2), np.int64))

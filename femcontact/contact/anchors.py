"""Contact identity across steps, and stiction anchors (docs/THEORY.md §4, "Stiction anchors").

A contact of this step is "the same" as one of the last step when both join the same two sides (the
world, a real node, or a virtual node's first link) and, among those, its point is the nearest to
where the last step's contact point moved. NCP-PGS uses that to warm-start its impulses; the
stiction anchors use it to remember how far a sticking contact has slipped.

Regularized friction (SAP eqs. 28-30, ICF eq. 10, and COND's virtual-node damper) lets a contact
held below the friction cone slip at a small speed, by design: over thousands of steps a resting
stack creeps apart. An anchor keeps, per contact that sticks step after step (friction inside the cone,
sides moving slower than ``CREEP_SPEED``: creeping, not sliding), the tangential slip
``s`` of its two sides since it stuck (``Σ dt (v̂_b − v̂_a)_t``, the motion the positions made), and
the next step offsets that contact's velocity by ``s/dt`` (``ContactSet.v_anchor``; every solver reads
``v_c = R (v_b − v_a + v_anchor)``). A sticking contact then moves back by ``s`` within the step, so
its slip is only that step's own creep and never accumulates; a contact that slides or opens
forgets its anchor. The offset is tangential, at most ``CREEP_SPEED``, and in steady sticking one
step's creep per step: it changes nothing where contacts slide, and its work is counted as a source by
the energy monitor.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from .contacts import ContactSet

MATCH_RADIUS = 1e-3     # m: a contact farther than this from every predicted point of its pair is new
STICK_RATIO = 0.99      # |γ_t| below this fraction of μ γ_n ...
CREEP_SPEED = 1e-3      # m/s: ... and its sides' tangential speed below this: the contact sticks (creeps)
MIDPOINT_END_GAIN = 3.0 - 2.0 * np.sqrt(2.0)   # gain where midpoint friction holds v_{k+1,t} = 0 (class doc)


def contact_keys(contacts: ContactSet, data: dict) -> np.ndarray:
    """One integer per contact from its two sides (world −1, real node, or a virtual node's first
    link as n + node): the same contact of the next step gets the same key (several contacts of one
    rigid body or triangle share one; ``match_previous`` tells them apart by their points)."""
    n = contacts.n_nodes
    ids = []
    for side in ("node_a", "node_b"):
        node = data[side].astype(np.int64)
        virt = node >= n
        if virt.any():
            first = backend.read(contacts.vn_node, int(contacts.n_virtual))[:, 0].astype(np.int64)
            node = node.copy()
            node[virt] = n + first[node[virt] - n]
        ids.append(node)
    return (ids[0] + 1) * (2 * n + 2) + (ids[1] + 1)


def match_previous(prev_keys: np.ndarray, prev_points: np.ndarray, keys: np.ndarray, points: np.ndarray,
                   radius: float = np.inf) -> np.ndarray:
    """Per contact the index of the previous contact with the same key and the nearest point, if that
    point is within ``radius`` (-1: none). Contacts sharing a key are matched in small blocks."""
    out = np.full(len(keys), -1, np.int64)
    if not len(prev_keys) or not len(keys):
        return out
    order = np.argsort(prev_keys, kind="stable")
    sk = prev_keys[order]
    lo = np.searchsorted(sk, keys, "left")
    hi = np.searchsorted(sk, keys, "right")
    single = np.flatnonzero(hi - lo == 1)
    out[single] = order[lo[single]]
    multi = np.flatnonzero(hi - lo > 1)
    if multi.size:                          # all (contact, candidate) pairs at once, then a grouped argmin
        size = (hi - lo)[multi]
        m = np.repeat(multi, size)
        start = np.cumsum(size) - size
        cand = order[np.repeat(lo[multi], size) + np.arange(size.sum()) - np.repeat(start, size)]
        d = prev_points[cand] - points[m]
        d2 = np.einsum("ki,ki->k", d, d)
        best = np.lexsort((d2, m))          # by contact, nearest first
        first = best[np.concatenate(([True], m[best][1:] != m[best][:-1]))]
        out[m[first]] = cand[first]
    if np.isfinite(radius):
        hit = np.flatnonzero(out >= 0)
        d = prev_points[out[hit]] - points[hit]
        out[hit[np.einsum("ki,ki->k", d, d) > radius * radius]] = -1
    return out


def _tangential(v: np.ndarray, n: np.ndarray) -> np.ndarray:
    """v minus its component along the unit normals n (both (c, 3))."""
    return v - n * np.einsum("mi,mi->m", v, n)[:, None]


def _norm(v: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("mi,mi->m", v, v))


def _inside_cone(impulse: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Contacts pressed (γ_n > 0) whose friction is below ``STICK_RATIO`` of the (elliptic) cone: stuck,
    by their force, whatever the solver's law (a regularized law is strictly inside the cone at any speed,
    so its own STICK/SLIP split at the stiction speed is not the Coulomb one)."""
    gn = impulse[:, 2]
    r = np.hypot(impulse[:, 0] / np.maximum(mu[:, 0], 1e-300), impulse[:, 1] / np.maximum(mu[:, 1], 1e-300))
    return (gn > 0.0) & (r < STICK_RATIO * gn)


class StictionAnchors:
    """Per sticking contact its accumulated tangential slip (module doc); ``apply`` before the solve,
    ``update`` after the positions moved.

    ``gain`` β: the offset is ``β s/dt``. β = 1 takes the whole slip back in one step where a sticking
    contact's law holds the velocity that moves it (implicit Euler; the Newton path's midpoint rule,
    whose friction acts on v̂). Where the midpoint rule's friction holds the end velocity instead
    (COND, NCP-PGS, Todorov: stick is v_{k+1,t} = 0, so v̂_t = ½ v_{k,t} − β s/dt), the slip obeys
    s_{k+2} = (1 − β) s_{k+1} − β s_k: undamped at β = 1, fastest (both roots √2 − 1 ≈ 0.41 per step)
    at β = 3 − 2√2 (``MIDPOINT_END_GAIN``), where (1 − β)² = 4β.
    """

    def __init__(self, dt: float, gain: float = 1.0):
        self.dt = float(dt)
        self.gain = float(gain)
        self.keys = np.zeros(0, np.int64)
        self.points = np.zeros((0, 3))
        self.slip = np.zeros((0, 3))
        self._now: tuple | None = None

    def apply(self, contacts: ContactSet) -> None:
        """Write this step's ``v_anchor = s/dt``: each contact's remembered slip, in its tangent plane."""
        c = int(contacts.count)
        self._now = None
        if c == 0:
            return
        d = contacts.read("node_a", "node_b", "frame", "point", "mu", "v_world")     # what apply and update use
        d["normal"] = d["frame"][:, 2, :]
        keys = contact_keys(contacts, d)
        prev = match_previous(self.keys, self.points, keys, d["point"], MATCH_RADIUS)
        s = np.zeros((c, 3))
        hit = prev >= 0
        s[hit] = self.slip[prev[hit]]
        s = _tangential(s, d["normal"])
        v = (self.gain / self.dt) * s
        v *= np.minimum(1.0, CREEP_SPEED / np.maximum(_norm(v), 1e-300))[:, None]
        backend.write(contacts.v_anchor, v)
        self._now = (keys, s, d)

    def update(self, contacts: ContactSet, v_hat, converged: bool = True) -> None:
        """After the step: a contact that stuck (friction below ``STICK_RATIO`` of its cone, tangential
        speed below ``CREEP_SPEED``) adds its sides' tangential motion ``dt (v̂_b − v̂_a)_t``
        to its slip; one that slid or opened forgets it. ``v_hat``: (n, 3) node velocities that moved
        the positions (x += dt v̂; any array indexable by node, e.g. the host view of the solution: only
        the contacts' rows are read). The contacts' geometry is ``apply``'s read of this step (the solve
        changes only their impulses, which are read again). After a solve that did not converge every anchor is forgotten: its
        velocities are no measure of creep (NCP-PGS at its sweep cap left slips that the next step then
        "took back": a resting stack's interface force 1.8% off in 2 of 5 runs)."""
        if self._now is None or not converged:
            self.keys, self.points, self.slip = np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3))
            return
        keys, s, d = self._now
        d["impulse"] = contacts.read("impulse")["impulse"]
        va, vb = contacts.side_velocities(v_hat, d)
        rel = _tangential(vb - va, d["normal"])
        stuck = (_inside_cone(d["impulse"], d["mu"]) & (_norm(rel) < CREEP_SPEED))[:, None]
        self.slip = np.where(stuck, s + self.dt * rel, 0.0)
        self.points = d["point"] + 0.5 * self.dt * (va + vb)        # where the contact point moved
        self.keys = keys
        self._now = None

    def memory(self) -> dict[str, np.ndarray]:
        return {"anchor_keys": self.keys.copy(), "anchor_points": self.points.copy(),
                "anchor_slip": self.slip.copy()}

    def restore(self, memory: dict) -> None:
        self.keys = np.asarray(memory["anchor_keys"], np.int64).copy()
        self.points = np.asarray(memory["anchor_points"], np.float64).reshape(-1, 3).copy()
        self.slip = np.asarray(memory["anchor_slip"], np.float64).reshape(-1, 3).copy()
        self._now = None

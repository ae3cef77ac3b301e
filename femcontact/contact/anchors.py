"""Contact identity across steps, and stiction anchors (docs/THEORY.md §4, "Stiction anchors").

A contact of this step is "the same" as one of the last step when both join the same two sides (the
world, a real node, or a virtual node's first link) and, among those, its point is the nearest to
where the last step's contact point moved (ties: the earlier one). ``ContactMemory`` keeps the last
step's contacts on the device (their side keys, points and one vec3 value each) with a bucket index
by key, and matches in a kernel (``find_previous``): the stiction anchors remember slips with it,
NCP-PGS its impulses for the warm start.

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

Everything per step runs in two launches (``anchors_apply`` after detection, ``anchors_update`` after
the advance; in the simulator's step ``fused.advance_and_remember``, with the advance); nothing is read
back to the host (issue 28: the host version cost ~200 µs per step).

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from typing import Callable, Optional

import numpy as np

from .. import backend
from ..backend import ti
from ..layout import HostScalars, Table
from .emit import side_velocity
from .contacts import ContactSet
from .schema import CONTACT_SET_F as CF, CONTACT_SET_I as CI

MATCH_RADIUS = 1e-3     # m: a contact farther than this from every predicted point of its pair is new
STICK_RATIO = 0.99      # |γ_t| below this fraction of μ γ_n ...
CREEP_SPEED = 1e-3      # m/s: ... and its sides' tangential speed below this: the contact sticks (creeps)
MIDPOINT_END_GAIN = 3.0 - 2.0 * np.sqrt(2.0)   # gain where midpoint friction holds v_{k+1,t} = 0 (class doc)
MATCH_RADIUS2 = MATCH_RADIUS * MATCH_RADIUS
FAR = 1e30              # a squared distance beyond any match (no radius)
TINY = 1e-30            # guards the divisions by μ

# per remembered contact j: where its point moved, its value (slip, or NCP-PGS's world-frame λ); its
# two side keys and, at row e, the e-th remembered contact in bucket order (``build_index``)
MEMORY_F = Table("contact_memory_f", float, [("point", "v3"), ("value", "v3")])
MEMORY_I = Table("contact_memory_i", ti.i32, [("key", "s", 2), ("entry", "s")])
# this step's contact count, the remembered count, the real node count (HostScalars: no launch arguments)
MEMORY_N = Table("contact_memory_n", ti.i32, [("count", "s"), ("prev", "s"), ("n_nodes", "s")])
# the step and the gain β; out: the work the contacts' constant velocity parts did this step (``offset_power``)
ANCHOR_F = Table("anchor_f", float, [("dt", "s"), ("gain", "s"), ("work", "s")])


# ------------------------------------------------------------------------------------------ kernel parts
@ti.func
def side_key(node, n_nodes, vn_node: ti.template()):
    """A contact side's identity: -1 the world, a real node itself, a virtual node n + its first link."""
    k = node
    if node >= n_nodes:
        k = n_nodes + vn_node[node - n_nodes][0]
    return k


@ti.func
def bucket(ka, kb, n_buckets):
    """Bucket of side keys (ka, kb) among ``n_buckets`` (a power of two)."""
    return ((ka + 1) * 31 + (kb + 1)) & (n_buckets - 1)


@ti.func
def find_previous(ka, kb, p, mf: ti.template(), mi: ti.template(), head: ti.template(), n_prev, radius2):
    """The remembered contact with keys (ka, kb) whose point is the nearest to p (ties: the lowest index),
    if within ``radius2`` (squared); -1: none."""
    best, best_d2 = -1, FAR
    if n_prev > 0:
        b = bucket(ka, kb, head.shape[0] - 1)
        for e in range(head[b], head[b + 1]):
            j = MEMORY_I.entry.get(mi, e)
            if MEMORY_I.key.at(mi, j, 0) == ka and MEMORY_I.key.at(mi, j, 1) == kb:
                d = MEMORY_F.point.get(mf, j) - p
                d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
                if d2 < best_d2 or (d2 == best_d2 and j < best):
                    best, best_d2 = j, d2
        if best_d2 > radius2:
            best = -1
    return best


@ti.func
def keys_of(m, ci: ti.template(), vn_node: ti.template(), n_nodes):
    """The side keys of contact m."""
    return side_key(CI.node_a.get(ci, m), n_nodes, vn_node), side_key(CI.node_b.get(ci, m), n_nodes, vn_node)


@ti.func
def remember_keys(m, ci: ti.template(), vn_node: ti.template(), mi: ti.template(), n_nodes):
    ka, kb = keys_of(m, ci, vn_node, n_nodes)
    MEMORY_I.key.put_at(mi, m, 0, ka)
    MEMORY_I.key.put_at(mi, m, 1, kb)


@ti.func
def build_index(mi: ti.template(), head: ti.template(), n_prev):
    """Counting sort of the remembered contacts by bucket: bucket b's contacts are
    ``entry[head[b]:head[b + 1]]`` (``find_previous`` does not depend on their order). One serial task
    (O(contacts + buckets); each parallel loop would cost a thread-pool dispatch, more than the work in
    a small scene)."""
    nb = head.shape[0] - 1
    ti.loop_config(serialize=True)
    for _ in range(1):
        for b in range(nb + 1):
            head[b] = 0
        for j in range(n_prev):
            head[bucket(MEMORY_I.key.at(mi, j, 0), MEMORY_I.key.at(mi, j, 1), nb)] += 1
        for b in range(1, nb + 1):      # inclusive sums: head[b] = end of bucket b
            head[b] += head[b - 1]
        for j in range(n_prev):         # each entry takes the last free slot of its bucket: head[b] ends at its start
            b = bucket(MEMORY_I.key.at(mi, j, 0), MEMORY_I.key.at(mi, j, 1), nb)
            head[b] -= 1
            MEMORY_I.entry.put(mi, head[b], j)


@ti.func
def normal_of(cf: ti.template(), m):
    R = CF.frame.get(cf, m)
    return ti.Vector([R[2, 0], R[2, 1], R[2, 2]])


@ti.func
def offset_power(m, cf: ti.template(), ci: ti.template()):
    """``γ_mᵀ o_m``: contact m's impulse times the part of its velocity that does not depend on v̂,
    ``o_m = R_m (v_anchor ∓ v_world)`` (the world's velocity on side A or B, ``ContactSet.world_offset``
    and ``anchor_offset``); ``−Σ_m`` of it is the work the moving world and the anchors supplied
    (energy_monitor)."""
    o = CF.v_anchor.get(cf, m)
    vw = CF.v_world.get(cf, m)
    if CI.node_a.get(ci, m) < 0:
        o -= vw
    if CI.node_b.get(ci, m) < 0:
        o += vw
    return CF.impulse.get(cf, m).dot(CF.frame.get(cf, m) @ o)


@ti.kernel
def contact_offset_work(cf: ti.types.ndarray(), ci: ti.types.ndarray(), count: ti.i32) -> float:
    """``Σ_m γ_mᵀ o_m`` over the first ``count`` contacts (``offset_power``)."""
    w = 0.0
    for m in range(count):
        w += offset_power(m, cf, ci)
    return w


@ti.kernel
def anchors_apply(cf: ti.types.ndarray(), ci: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                  slip_now: ti.types.ndarray(), mf: ti.types.ndarray(), mi: ti.types.ndarray(),
                  head: ti.types.ndarray(), af: ti.types.ndarray(), mn: ti.types.ndarray()):
    """Per contact its remembered slip s (tangential now) into ``slip_now`` and ``v_anchor = β s/dt``,
    at most ``CREEP_SPEED``."""
    n_nodes, n_prev = MEMORY_N.n_nodes.get(mn, 0), MEMORY_N.prev.get(mn, 0)
    scale = ANCHOR_F.gain.get(af, 0) / ANCHOR_F.dt.get(af, 0)
    for m in range(MEMORY_N.count.get(mn, 0)):
        ka, kb = keys_of(m, ci, vn_node, n_nodes)
        j = find_previous(ka, kb, CF.point.get(cf, m), mf, mi, head, n_prev, MATCH_RADIUS2)
        s = ti.Vector([0.0, 0.0, 0.0])
        if j >= 0:
            s = MEMORY_F.value.get(mf, j)
        nrm = normal_of(cf, m)
        s = s - nrm * s.dot(nrm)
        v = scale * s
        speed = v.norm()
        if speed > CREEP_SPEED:
            v *= CREEP_SPEED / speed
        slip_now[m] = s
        CF.v_anchor.put(cf, m, v)


@ti.func
def remember_step(cf: ti.template(), ci: ti.template(), vn_node: ti.template(), vn_weight: ti.template(),
                  v_hat: ti.template(), slip_now: ti.template(), mf: ti.template(), mi: ti.template(),
                  head: ti.template(), af: ti.template(), mn: ti.template()):
    """Remember this step's contacts: keys, where their points moved (``point + ½ dt (v_a + v_b)``) and
    their slip (``s + dt (v̂_b − v̂_a)_t`` where the contact stuck, else 0); then index them. Also
    ``Σ_m γ_mᵀ o_m`` (``offset_power``) into ``af``'s work, for the energy monitor."""
    n_nodes, c = MEMORY_N.n_nodes.get(mn, 0), MEMORY_N.count.get(mn, 0)
    dt = ANCHOR_F.dt.get(af, 0)
    ANCHOR_F.work.put(af, 0, 0.0)
    for m in range(c):
        ti.atomic_add(af[0, ti.static(ANCHOR_F.work.off)], offset_power(m, cf, ci))
        vw = CF.v_world.get(cf, m)
        va = side_velocity(CI.node_a.get(ci, m), n_nodes, vn_node, vn_weight, v_hat, vw)
        vb = side_velocity(CI.node_b.get(ci, m), n_nodes, vn_node, vn_weight, v_hat, vw)
        nrm = normal_of(cf, m)
        rel = (vb - va) - nrm * (vb - va).dot(nrm)
        g = CF.impulse.get(cf, m)
        r = ti.sqrt((g[0] / ti.max(CF.mu.at(cf, m, 0), TINY)) ** 2 + (g[1] / ti.max(CF.mu.at(cf, m, 1), TINY)) ** 2)
        slip = ti.Vector([0.0, 0.0, 0.0])
        if g[2] > 0.0 and r < STICK_RATIO * g[2] and rel.norm() < CREEP_SPEED:       # inside the cone, creeping
            slip = slip_now[m] + dt * rel
        MEMORY_F.value.put(mf, m, slip)
        MEMORY_F.point.put(mf, m, CF.point.get(cf, m) + 0.5 * dt * (va + vb))
        remember_keys(m, ci, vn_node, mi, n_nodes)
    build_index(mi, head, c)


@ti.kernel
def anchors_update(cf: ti.types.ndarray(), ci: ti.types.ndarray(), vn_node: ti.types.ndarray(),
                   vn_weight: ti.types.ndarray(), v_hat: ti.types.ndarray(), slip_now: ti.types.ndarray(),
                   mf: ti.types.ndarray(), mi: ti.types.ndarray(), head: ti.types.ndarray(),
                   af: ti.types.ndarray(), mn: ti.types.ndarray()):
    """``remember_step`` in its own launch."""
    remember_step(cf, ci, vn_node, vn_weight, v_hat, slip_now, mf, mi, head, af, mn)


@ti.kernel
def match_contacts(cf: ti.types.ndarray(), ci: ti.types.ndarray(),
                   vn_node: ti.types.ndarray(), mf: ti.types.ndarray(), mi: ti.types.ndarray(),
                   head: ti.types.ndarray(), mn: ti.types.ndarray(), out: ti.types.ndarray(), radius2: float):
    """Per contact the remembered contact it continues (within ``sqrt(radius2)``; -1: none)."""
    n_nodes, n_prev = MEMORY_N.n_nodes.get(mn, 0), MEMORY_N.prev.get(mn, 0)
    for m in range(MEMORY_N.count.get(mn, 0)):
        ka, kb = keys_of(m, ci, vn_node, n_nodes)
        out[m] = find_previous(ka, kb, CF.point.get(cf, m), mf, mi, head, n_prev, radius2)


@ti.kernel
def remember_contacts(ci: ti.types.ndarray(), vn_node: ti.types.ndarray(), mi: ti.types.ndarray(),
                      head: ti.types.ndarray(), mn: ti.types.ndarray()):
    """Keys of this step's contacts into the memory (its points and values written by the host), indexed."""
    n_nodes, c = MEMORY_N.n_nodes.get(mn, 0), MEMORY_N.count.get(mn, 0)
    for m in range(c):
        remember_keys(m, ci, vn_node, mi, n_nodes)
    build_index(mi, head, c)


@ti.kernel
def index_memory(mi: ti.types.ndarray(), head: ti.types.ndarray(), mn: ti.types.ndarray()):
    build_index(mi, head, MEMORY_N.prev.get(mn, 0))


# ------------------------------------------------------------------------------------------ host side
class ContactMemory:
    """The last step's contacts on the device (module doc): keys, points, one vec3 value each, indexed by
    key (``remembered`` of them)."""

    def __init__(self, n_nodes: int, capacity: int = 64):
        backend.ensure_init()
        self.n_nodes = int(n_nodes)
        self.scalars = HostScalars(MEMORY_N)
        self.scalars.set(n_nodes=self.n_nodes)
        self.capacity = 0
        self._alloc(capacity)

    def _alloc(self, rows: int) -> None:
        """Room for ``rows`` remembered contacts (contents discarded) and 2-4 buckets per row."""
        self.capacity = max(int(rows), 1)
        self.mf, self.mi = MEMORY_F.alloc(self.capacity), MEMORY_I.alloc(self.capacity)
        self.head = ti.ndarray(ti.i32, shape=(1 << (2 * self.capacity).bit_length()) + 1)   # buckets + 1

    def fit(self, rows: int) -> None:
        """Make room to remember ``rows`` contacts (the remembered ones are then lost: call it before a store)."""
        if rows > self.capacity:
            self._alloc(max(rows, 2 * self.capacity))
            self.forget()

    @property
    def remembered(self) -> int:
        """How many contacts are remembered."""
        return int(self.scalars.host[0, MEMORY_N.prev.off])

    @remembered.setter
    def remembered(self, value: int) -> None:
        self.scalars.set(prev=int(value))

    def forget(self) -> None:
        self.remembered = 0

    def set_current(self, contacts: ContactSet) -> None:
        """This step's contact count, which the kernels loop over."""
        self.scalars.set(count=int(contacts.count))

    def match(self, contacts: ContactSet, radius: float = np.inf) -> np.ndarray:
        """Per contact of this step the index of the remembered contact it continues, if its point is within
        ``radius`` (-1: none), to the host."""
        c = int(contacts.count)
        out = backend.scalar_array(c, dtype=ti.i32)
        self.set_current(contacts)
        match_contacts(contacts.cf, contacts.ci, contacts.vn_node, self.mf, self.mi,
                       self.head, self.scalars.sync(), out, min(radius * radius, FAR))
        return backend.read(out, c)

    def store(self, contacts: ContactSet, points: np.ndarray, values: np.ndarray) -> None:
        """Remember this step's contacts with the given points and values (host arrays, one row per contact)."""
        c = int(contacts.count)
        self.fit(c)
        self.set_current(contacts)
        if c:
            backend.write(self.mf, _memory_rows(points, values))
            remember_contacts(contacts.ci, contacts.vn_node, self.mi, self.head, self.scalars.sync())
        self.remembered = c

    def values(self) -> np.ndarray:
        """The remembered values (count, 3)."""
        return MEMORY_F.unpack(backend.read(self.mf, self.remembered))["value"][:, 0].astype(np.float64)

    def memory(self) -> dict:
        """Host copy for a checkpoint: int64 keys ``(a + 1)(2n + 2) + (b + 1)``, points, values."""
        k = self.remembered
        f = MEMORY_F.unpack(backend.read(self.mf, k))
        key = MEMORY_I.unpack(backend.read(self.mi, k))["key"].astype(np.int64)
        span = 2 * self.n_nodes + 2
        return {"keys": (key[:, 0] + 1) * span + (key[:, 1] + 1), "points": f["point"][:, 0].astype(np.float64),
                "values": f["value"][:, 0].astype(np.float64)}

    def restore(self, keys: np.ndarray, points: np.ndarray, values: np.ndarray) -> None:
        keys = np.asarray(keys, np.int64).ravel()
        k = len(keys)
        self.fit(k)
        self.remembered = k
        if not k:
            return
        span = 2 * self.n_nodes + 2
        ki = np.zeros((k, MEMORY_I.width), np.int32)
        ki[:, MEMORY_I.key.off] = keys // span - 1
        ki[:, MEMORY_I.key.off + 1] = keys % span - 1
        backend.write(self.mi, ki)
        backend.write(self.mf, _memory_rows(np.asarray(points, np.float64).reshape(-1, 3),
                                             np.asarray(values, np.float64).reshape(-1, 3)))
        index_memory(self.mi, self.head, self.scalars.sync())


def _memory_rows(points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows of ``MEMORY_F`` from host points and values."""
    rows = np.zeros((len(points), MEMORY_F.width), backend.np_real())
    rows[:, MEMORY_F.point.off:MEMORY_F.point.off + 3] = points
    rows[:, MEMORY_F.value.off:MEMORY_F.value.off + 3] = values
    return rows


def offset_work(contacts: ContactSet) -> float:
    """``Σ_m γ_mᵀ o_m`` of this step's contacts (``offset_power``), one launch."""
    c = contacts
    return float(contact_offset_work(c.cf, c.ci, int(c.count)))


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

    def __init__(self, n_nodes: int, dt: float, gain: float = 1.0):
        self.dt = float(dt)
        self.gain = float(gain)
        self.slips = ContactMemory(n_nodes)          # value: the slip s (part of the State: State.anchors)
        self.constants = HostScalars(ANCHOR_F)
        self.constants.set(dt=self.dt, gain=self.gain)
        self.slip_now = backend.vec3_array(1)
        self._applied = False
        self._work_of = None        # the contacts whose offset work update's launch computed

    def apply(self, contacts: ContactSet) -> None:
        """Write this step's ``v_anchor = s/dt``: each contact's remembered slip, in its tangent plane."""
        c = int(contacts.count)
        self._applied = c > 0
        if not c:
            return
        if self.slip_now.shape[0] < c:
            self.slip_now = backend.vec3_array(max(c, 2 * self.slip_now.shape[0]))
        m = self.slips
        m.set_current(contacts)
        anchors_apply(contacts.cf, contacts.ci, contacts.vn_node, self.slip_now, m.mf, m.mi, m.head,
                      self.constants.sync(), m.scalars.sync())

    def update(self, contacts: ContactSet, v_hat, converged: bool = True,
               launch: Optional[Callable] = None) -> bool:
        """After the step: a contact that stuck (friction below ``STICK_RATIO`` of its cone, tangential
        speed below ``CREEP_SPEED``) adds its sides' tangential motion ``dt (v̂_b − v̂_a)_t``
        to its slip; one that slid or opened forgets it. ``v_hat``: the node velocities (vec3 ndarray) that
        move the positions (x += dt v̂). The contacts are ``apply``'s of this step (the solve changes only
        their impulses). After a solve that did not converge every anchor is forgotten: its
        velocities are no measure of creep (NCP-PGS at its sweep cap left slips that the next step then
        "took back": a resting stack's interface force 1.8% off in 2 of 5 runs).
        launch: runs the update kernel's arguments in place of ``anchors_update`` (the simulator's
        ``fused.advance_and_remember``: the advance in the same launch). Returns whether a kernel ran (not
        when no contact was applied)."""
        m = self.slips
        if not self._applied:
            m.forget()
            return False
        c = int(contacts.count)
        m.fit(c)
        (launch or anchors_update)(contacts.cf, contacts.ci, contacts.vn_node, contacts.vn_weight, v_hat,
                                   self.slip_now, m.mf, m.mi, m.head, self.constants.sync(), m.scalars.sync())
        m.remembered = c if converged else 0
        self._applied = False
        self._work_of = contacts
        return True

    def offset_work(self, contacts: ContactSet) -> float:
        """``Σ_m γ_mᵀ o_m`` of this step's contacts (``offset_power``): from ``update``'s launch when it ran
        for them, else its own."""
        if self._work_of is contacts:
            self._work_of = None
            view = self.constants.view
            return float(view[0, ANCHOR_F.work.off] if view is not None else
                         backend.read(self.constants.array)[0, ANCHOR_F.work.off])
        return offset_work(contacts)

"""ContactSet: the per-step contact data every solver reads (docs/THEORY.md §3, COND §III-A).

Indexing: nodes ``0..n-1`` are the model's real 3-vector DOF blocks; ``n..n+V-1``
are this step's virtual nodes. Every contact ``m`` acts between ``node_a[m]`` and
``node_b[m]`` (``node_a = -1``: the static or moving world, an S-contact), with frame
``frame[m]`` whose rows are (t1, t2, n), ``n`` pointing from side A into side B. Its
contact velocity is

    v_c = R_m (v_b - v_a + v_anchor[m])        (v_a = v_world[m] for an S-contact)

so ``v_c[2] > 0`` is separating; ``v_anchor`` (tangential, zero unless the scene anchors stiction)
is written by ``contact.anchors.StictionAnchors``. ``phi[m]`` is the signed gap in m (negative when
penetrating). The set is solver-neutral: several contacts may share a real node.

A virtual node ``v`` is a contact side's point Jacobian, the velocity
``J_v v̂ = Σ_k vn_weight[v, k] v̂[vn_node[v, k]]`` of a point of a body (up to 4 terms,
unused ones have node -1; an FEM triangle point uses barycentric weights times I, a rod
surface point ``[(1−t) I, t I, −[r]×]``, a rigid-body point ``[I, -[r]x]``). The Newton path
expands it through ``J_v`` (``jacobian(expand_virtual=True)``); COND gives it a velocity of its
own tied by a damper (COND eqs. 14-15) and nodalizes the real nodes itself
(``solvers/cond/virtual.py``).

``param[m]`` is a row of ``model.contact_params`` (numpy, one row per obstacle or body
pair), columns ``CONTACT_PARAM_COLUMNS``; NaN means "automatic" (the solver picks).

Solvers write ``impulse[m]`` (contact frame, N s, whatever the integrator's λ
scaling) and ``status[m]`` (OPEN, STICK, SLIP).

Capacities grow (``ensure_capacity``) outside the step's kernels; a detection pass that
overflows is rerun after growing, so contacts are never dropped.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..backend import ti
from .. import backend
from ..spec.names import CONTACT_PARAM_COLUMNS
from .schema import CONTACT_SET_F, CONTACT_SET_I

OPEN, STICK, SLIP = 0, 1, 2
_SHAPE = {"s": (), "v3": (3,), "m3": (3, 3)}


def restitution_per_contact(table, param_rows: np.ndarray, default: float) -> np.ndarray:
    """Per contact its pair's restitution from the contact-parameter ``table`` (row ``param_rows``,
    clipped to [0, 1]), ``default`` where the table has none (NaN, no row, no table)."""
    e = np.full(len(param_rows), float(default))
    if table is None:
        return e
    T = np.asarray(table, dtype=np.float64)
    k = CONTACT_PARAM_COLUMNS.index("restitution")
    if T.ndim != 2 or not len(T) or T.shape[1] <= k:
        return e
    ok = (param_rows >= 0) & (param_rows < len(T))
    col = np.full(len(param_rows), np.nan)
    col[ok] = T[param_rows[ok], k]
    return np.where(np.isnan(col), e, np.clip(col, 0.0, 1.0))


class ContactSet:
    """Preallocated contact and virtual-node arrays; ``count`` and ``n_virtual`` are this step's sizes."""

    def __init__(self, n_nodes: int, capacity: int = 256, virtual_capacity: int = 256):
        backend.ensure_init()
        self.n_nodes = int(n_nodes)
        self.count = 0
        self.n_virtual = 0
        self.capacity = 0
        self.virtual_capacity = 0
        self._alloc_contacts(max(int(capacity), 1))
        self._alloc_virtual(max(int(virtual_capacity), 1))

    # ---------------------------------------------------------------- storage
    def _alloc_contacts(self, cap: int) -> None:
        """The two tables (``schema.CONTACT_SET_F`` / ``CONTACT_SET_I``), zeroed (``v_anchor`` stays zero
        without anchors)."""
        self.capacity = cap
        self.cf = CONTACT_SET_F.alloc(cap)
        self.ci = CONTACT_SET_I.alloc(cap)

    def _alloc_virtual(self, cap: int) -> None:
        self.virtual_capacity = cap
        self.vn_node = ti.Vector.ndarray(4, ti.i32, shape=cap)
        self.vn_weight = ti.Matrix.ndarray(3, 3, float, shape=(cap, 4))

    def ensure_capacity(self, contacts: int, virtual: int) -> bool:
        """Grow (doubling) so that ``contacts`` and ``virtual`` fit; True if anything was reallocated.
        Reallocation discards the arrays' contents: call it before (re)running detection."""
        grown = False
        if contacts > self.capacity:
            self._alloc_contacts(max(contacts, 2 * self.capacity))
            grown = True
        if virtual > self.virtual_capacity:
            self._alloc_virtual(max(virtual, 2 * self.virtual_capacity))
            grown = True
        return grown

    @property
    def n_total(self) -> int:
        """Real plus virtual node count of this step (length of a solver's velocity vector)."""
        return self.n_nodes + self.n_virtual

    # ---------------------------------------------------------------- host views
    def _column(self, name: str):
        """(table array, column) of a named per-contact array."""
        if name in CONTACT_SET_I.columns:
            return self.ci, CONTACT_SET_I.columns[name]
        return self.cf, CONTACT_SET_F.columns[name]

    def read(self, *names: str) -> dict:
        """This step's contacts' named arrays (float64; node_a, node_b, param, status as int32), copies
        through ``backend.read`` (host views on the CPU: no copy kernels)."""
        c = self.count
        tables, out = {}, {}
        for name in names:
            arr, col = self._column(name)
            if id(arr) not in tables:
                tables[id(arr)] = backend.host_view(arr)
                if tables[id(arr)] is None:
                    tables[id(arr)] = arr.to_numpy()
            data = tables[id(arr)][:c, col.off:col.off + col.span]
            shape = (c,) + ((col.count,) if col.count > 1 else _SHAPE[col.kind])
            data = np.array(data).reshape(shape)
            out[name] = data if arr is self.ci else data.astype(np.float64, copy=False)
        return out

    def write(self, name: str, value: np.ndarray, start: int = 0) -> None:
        """Write rows ``start:start+len(value)`` of a named per-contact array (other rows kept)."""
        arr, col = self._column(name)
        value = np.asarray(value)
        rows = slice(start, start + len(value))
        view = backend.host_view(arr)
        data = view if view is not None else arr.to_numpy()
        data[rows, col.off:col.off + col.span] = value.reshape(len(value), col.span)
        if view is None:
            arr.from_numpy(data)

    def to_numpy(self) -> dict:
        """This step's contacts as numpy arrays (world-frame impulse included), for output and tests."""
        c = self.count
        d = self.read("node_a", "node_b", "frame", "phi", "mu", "v_world", "v_anchor", "point", "param",
                      "impulse", "status")
        d["normal"] = d["frame"][:, 2, :] if c else np.zeros((0, 3))
        d["impulse_world"] = np.einsum("mij,mi->mj", d["frame"], d["impulse"]) if c else np.zeros((0, 3))
        return d

    @staticmethod
    def world_offset(data: dict) -> np.ndarray:
        """(c, 3) contact-frame part of v_c that the moving world supplies: ``−R v_world`` for side A of an
        S-contact (``+R v_world`` on side B). ``data``: this step's ``to_numpy()``."""
        wv = np.einsum("mij,mj->mi", data["frame"], data["v_world"])
        return np.where((data["node_a"] < 0)[:, None], -wv, 0.0) + np.where((data["node_b"] < 0)[:, None], wv, 0.0)

    @staticmethod
    def anchor_offset(data: dict) -> np.ndarray:
        """(c, 3) contact-frame stiction-anchor offset ``R v_anchor`` of v_c (zero without anchors)."""
        return np.einsum("mij,mj->mi", data["frame"], data["v_anchor"])

    def virtual_to_numpy(self) -> dict:
        v = self.n_virtual
        rd = backend.read
        return {"node": rd(self.vn_node, v), "weight": rd(self.vn_weight, v).astype(np.float64, copy=False)}

    def side_velocities(self, v: np.ndarray, data: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World-frame velocities (c, 3) of each contact's two sides for node velocities ``v``
        (n, 3): a real node's own, a virtual node's ``J_v v``, the world's ``v_world`` for side A of
        an S-contact; ``data``: this step's ``to_numpy()`` when the caller already has it."""
        d = self.to_numpy() if data is None else data
        n, out, vd = self.n_nodes, [], None
        for side in ("node_a", "node_b"):
            node = d[side].astype(np.int64)
            vel = np.where((node < 0)[:, None], d["v_world"], 0.0)
            real = (node >= 0) & (node < n)
            vel[real] = v[node[real]]
            virt = np.flatnonzero(node >= n)
            if virt.size:                     # Σ_k W_k v[link_k] over the links in use, added in k order
                vd = self.virtual_to_numpy() if vd is None else vd
                q = node[virt] - n
                links = vd["node"][q]
                ok = links >= 0
                t = np.einsum("mkij,mkj->mki", vd["weight"][q], v[np.where(ok, links, 0)])
                t[~ok] = 0.0
                vel[virt] = vel[virt] + t[:, 0] + t[:, 1] + t[:, 2] + t[:, 3]
            out.append(vel)
        return out[0], out[1]

    def side_nodes(self, data: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per contact a real node of each side (c,) and (c,): the node itself, a virtual node's first
        link (a node of the body the point lies on), -1 for the world (an obstacle); ``data``: this
        step's ``to_numpy()`` when the caller already has it."""
        d = self.to_numpy() if data is None else data
        links = self.virtual_to_numpy()["node"][:, 0] if self.n_virtual else np.zeros(0, np.int64)
        out = []
        for side in ("node_a", "node_b"):
            node = d[side].astype(np.int64)
            real = np.where(node < 0, -1, node)
            virt = node >= self.n_nodes
            real[virt] = links[node[virt] - self.n_nodes]
            out.append(real)
        return out[0], out[1]

    def jacobian(self, expand_virtual: bool = True, data: dict | None = None) -> sp.csr_matrix:
        """Contact Jacobian J (3c x 3N) with rows (t1, t2, n) per contact, as scipy CSR.

        expand_virtual=True maps virtual nodes back onto real DOFs through J_v (N = n_nodes; what
        the Newton path and tests use); False keeps virtual nodes as columns (N = n_nodes + n_virtual).
        The 3x3 blocks are ``jacobian_blocks``'s (entries of one block position summed). ``data``:
        this step's ``to_numpy()`` when the caller already has it.
        """
        c = self.count
        ncols = self.n_nodes if expand_virtual else self.n_total
        m_idx, nodes, mats = self.jacobian_blocks(expand_virtual, data)
        if m_idx.size == 0:
            return sp.csr_matrix((3 * c, 3 * ncols))
        rows = (3 * m_idx[:, None, None] + np.arange(3)[None, :, None]) + np.zeros((1, 1, 3), np.int64)
        cols = (3 * nodes[:, None, None] + np.arange(3)[None, None, :]) + np.zeros((1, 3, 1), np.int64)
        J = sp.coo_matrix((mats.ravel(), (rows.ravel(), cols.ravel())), shape=(3 * c, 3 * ncols))
        return J.tocsr()

    def jacobian_blocks(self, expand_virtual: bool = True, data: dict | None = None):
        """J as 3x3 block triplets ``(contact (k,), node (k,), block (k, 3, 3))``, J's block (m, i) being
        the sum of the triplets with that contact and node (a pair may repeat: both sides on one node,
        or a virtual node's links). Vectorized over contacts: each contact side contributes ``±R_m``
        (real node) or ``±R_m W_vk`` for each link k of its virtual node (``jacobian``)."""
        d = self.to_numpy() if data is None else data      # data: a to_numpy() of this step
        n = self.n_nodes
        R = d["frame"]
        m_idx, nodes, mats = [], [], []
        vd = None
        for side, sign in (("node_b", 1.0), ("node_a", -1.0)):
            node = d[side].astype(np.int64)
            real = (node >= 0) & ((node < n) | (not expand_virtual))
            m_idx.append(np.flatnonzero(real))
            nodes.append(node[real])
            mats.append(sign * R[real])
            virt = np.flatnonzero((node >= n) & expand_virtual)
            if virt.size:
                vd = self.virtual_to_numpy() if vd is None else vd
                v = node[virt] - n
                i, k = np.nonzero(vd["node"][v] >= 0)     # every link in use, per virtual node in k order
                m_idx.append(virt[i])
                nodes.append(vd["node"][v[i], k].astype(np.int64))
                mats.append(sign * np.einsum("mij,mjk->mik", R[virt[i]], vd["weight"][v[i], k]))
        return np.concatenate(m_idx), np.concatenate(nodes), np.concatenate(mats).reshape(-1, 3, 3)

"""Packed detection tables: the contact kernels' per-entity inputs as named columns of one ndarray each
(issue 28, "Kernel arguments and launches"; the ``Table`` schema of ``femcontact/layout.py``).

A Taichi 1.7.4 launch costs ~18 µs per ndarray argument (quadrants ~1 µs); a ``@ti.data_oriented``
object holding ndarrays is refused as a ``ti.template()`` argument by Taichi 1.7.4 and an ``argpack``
of ndarrays costs more than the arrays themselves (``tools/bench_launch.py``). So arrays read together
are packed as columns of one table, declared here once; kernels read them through the columns'
generated ``ti.func`` accessors (and are filled by ``Table.upload``)::

    SDF.kind.get(sdf, o)          # shape kind of SDF entity o
    PROXY_F.point.get(pf, j)      # body-frame point of rigid proxy j

``SDF`` (i32, per SDF entity: obstacles then rigid bodies): shape kind, offset of its grid or part table
in ``grid``, entity (row/column of ``pair_row``), first velocity block of a rigid body (-1: obstacle).
``PROXY_F`` / ``PROXY_I`` (per rigid contact proxy, ``geometry.proxies.contact_proxies``): body-frame point
and axis, radius; rigid body index, proxy kind, which entities it is tested against. ``DETECT_F`` /
``DETECT_I``: one row of scalars (margin, dt, dedup, the FEM and rod grids' cells; node, surface vertex,
proxy, self-contact vertex, rigid body, body, rod node, rod segment, rigid sample and rod-facing triangle counts,
the grids' buckets).
"""
from __future__ import annotations

from ..backend import ti
from ..layout import Table

SDF = Table("sdf", ti.i32, [("kind", "s"), ("aux", "s"), ("entity", "s"), ("rigid", "s")])
PROXY_F = Table("proxy_f", float, [("point", "v3"), ("axis", "v3"), ("radius", "s")])
PROXY_I = Table("proxy_i", ti.i32, [("rigid", "s"), ("kind", "s"), ("against", "s")])
# per node (FEM, rod and rigid-body nodes): its body, whether it is prescribed (pinned/driven); read together
# by every pass and by the broadphase
NODES = Table("nodes", ti.i32, [("body", "s"), ("fixed", "s")])
# per contact-parameter row (``pair_row``'s entries; setup.ContactData): friction (μ1, μ2) and the first
# friction axis (zero: any), read together by every pass that emits a contact
PARAM_F = Table("param_f", float, [("mu", "s", 2), ("axis", "v3")])
# per rigid surface sample (``geometry.proxies.surface_samples``, ``detect_rigid_in_fem``): body-frame point,
# the inward normal cone's axis and cosine, its rigid body's centre of mass (shape frame); that body's index
# among the rigid bodies, first velocity block and body index
SAMPLE_F = Table("sample_f", float, [("point", "v3"), ("axis", "v3"), ("cos", "s"), ("com", "v3")])
SAMPLE_I = Table("sample_i", ti.i32, [("rigid", "s"), ("lin", "s"), ("body", "s")])
# per rod node: its node, the node of a segment at it (the segment's spin block, ``rod_detection``)
ROD_NODES = Table("rod_nodes", ti.i32, [("node", "s"), ("seg", "s")])
# scalars of the detection kernels (all but the all-pairs rod reference):
# a float or an int outside [-5, 256] among a kernel's arguments makes quadrants marshal every argument
# afresh on each launch (docs/PERFORMANCE.md, issue 28), so they are one-row tables (held by
# ``layout.HostScalars`` in ``tables.DetectionTables``):
# the detection margin, the step, the FEM-vs-rigid-sample dedup distance, the FEM and rod hashes' cell sizes
# (they change when ``collide`` coarsens a grid: set before each launch); the node, FEM surface vertex, rigid
# proxy, self-contact vertex, rigid body, body, rod node, rod segment, rigid surface sample and rod-facing FEM
# triangle counts, the FEM and rod hashes' bucket counts
# the ContactSet (contacts.py): per contact its frame (rows t1, t2, n), gap, friction (μ1, μ2), the world's
# velocity, the stiction anchors' offset, point, impulse; its sides (-1: world), contact-parameter row and
# status. Detection writes them (emit.py), every solver reads them: two kernel arguments, not eleven.
CONTACT_SET_F = Table("contact_set_f", float, [("frame", "m3"), ("phi", "s"), ("mu", "s", 2), ("v_world", "v3"),
                                               ("v_anchor", "v3"), ("point", "v3"), ("impulse", "v3")])
CONTACT_SET_I = Table("contact_set_i", ti.i32, [("node_a", "s"), ("node_b", "s"), ("param", "s"), ("status", "s")])
DETECT_F = Table("detect_f", float, [("margin", "s"), ("dt", "s"), ("dedup", "s"), ("fem_h", "s"), ("rod_h", "s")])
DETECT_I = Table("detect_i", ti.i32, [("n_nodes", "s"), ("n_surf", "s"), ("n_prox", "s"), ("n_self", "s"),
                                      ("fem_size", "s"), ("n_rigid", "s"),
                                      ("n_bodies", "s"), ("n_rn", "s"), ("n_rs", "s"), ("rod_size", "s"),
                                      ("n_samp", "s"), ("n_rod_tris", "s")])


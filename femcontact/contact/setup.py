"""Static contact data of a Model (numpy, built once): surfaces, obstacles, parameter table.

Entities are numbered bodies first (0..B-1, in ``model.bodies`` order) then obstacles
(B..B+O-1). ``pair_row[ea, eb]`` is the row of ``params`` (``model.contact_params``) used by a
contact between entities ea and eb, or -1 when they never collide (obstacle with obstacle, pairs
turned off with ``set_contact(..., enabled=False)``, a body with itself unless it is an FEM body
added with ``self_contact=True``: then row 0 or its ``set_contact(name, name)`` row).
``self_gap[b]``: the rest distance beyond which body b's surface collides with itself
(``SELF_CONTACT_REST_GAP`` of its longest surface edge; -1: no self-contact).

Rows of ``params``: 0 = the scene's default for body-body pairs, 1..O = obstacles (their own
parameters), then one row per ``set_contact`` call. ``axes[row]`` is the first friction axis
(zero: none): in the obstacle's frame for rows used with an obstacle, world frame otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..meshes.surface import boundary_faces

#: A self-contact body's vertex and surface triangle collide only when they are farther apart at rest
#: than this many of its longest surface edges: neighbours, and the two faces of a mat one or two
#: elements thick, never do.
SELF_CONTACT_REST_GAP = 1.5


@dataclass
class ContactData:
    params: np.ndarray          # (rows, len(CONTACT_PARAM_COLUMNS))
    axes: np.ndarray            # (rows, 3)
    pair_row: np.ndarray        # (E, E) int32
    surf_nodes: np.ndarray      # (S,) global node ids of surface vertices
    surf_tris: np.ndarray       # (T, 3) global node ids, outward orientation
    node_body: np.ndarray       # (n_nodes,) body index of every node
    fixed: np.ndarray           # (n_nodes,) 1 for prescribed (pinned/driven) nodes
    self_gap: np.ndarray        # (B,) rest distance beyond which a body collides with itself (-1: never), m
    margin: float               # detection margin, m
    mean_edge: float            # mean surface edge length, m
    obstacles: list             # ObstacleSpec (femcontact.spec.contact), in entity order
    row_names: list             # human-readable owner of each params row


def build_contact_data(model, scene) -> ContactData:
    """The contact data of ``model`` built from ``scene`` (its obstacles, contact defaults and pairs, FEM
    meshes, margin); module docstring."""
    fem_bodies = [(b, spec) for b, spec in zip(model.bodies, scene.fem_bodies)]
    obstacles = list(scene.obstacles)
    B, O = len(model.bodies), len(obstacles)
    names = [b.name for b in model.bodies] + [o.name for o in obstacles]
    E = B + O
    defaults = scene.contact_defaults
    rows = [defaults.row("scene contact defaults")]
    axes = [np.zeros(3)]
    row_names = ["bodies (default)"]
    base_params = [defaults] * B + [o.params for o in obstacles]
    pair_row = np.full((E, E), -1, np.int32)
    pair_row[:B, :B] = 0
    np.fill_diagonal(pair_row, -1)
    self_contact = {names.index(spec.name) for _, spec in fem_bodies if spec.self_contact}
    for b in self_contact:
        pair_row[b, b] = 0
    for k, o in enumerate(obstacles):
        rows.append(o.params.row(f"obstacle {o.name!r}"))
        axes.append(np.zeros(3) if o.friction_axes is None else o.friction_axes)
        row_names.append(o.name)
        pair_row[:B, B + k] = pair_row[B + k, :B] = 1 + k
    for pair in scene.contact_pairs:
        ids = []
        for nm in (pair.a, pair.b):
            if nm not in names:
                raise ParameterError(f"set_contact names {nm!r}, which is no body or obstacle of the scene "
                                     f"(bodies and obstacles: {names})")
            ids.append(names.index(nm))
        ia, ib = ids
        if ia == ib and ia not in self_contact:
            raise ParameterError(f"set_contact({pair.a!r}, {pair.b!r}) sets a body's contact with itself: only an FEM "
                                 "body added with self_contact=True has one")
        if ia >= B and ib >= B:
            raise ParameterError(f"set_contact({pair.a!r}, {pair.b!r}): obstacles never collide with "
                                 "each other; name at least one body")
        if not pair.enabled:
            pair_row[ia, ib] = pair_row[ib, ia] = -1
            continue
        base = base_params[ib] if ib >= B else base_params[ia]
        p = base.merged(**pair.overrides)
        rows.append(p.row(f"set_contact({pair.a!r}, {pair.b!r})"))
        ax = pair.friction_axes
        if ax is None:
            ob = ib if ib >= B else (ia if ia >= B else -1)
            ax = obstacles[ob - B].friction_axes if ob >= 0 and obstacles[ob - B].friction_axes is not None \
                else np.zeros(3)
        axes.append(ax)
        row_names.append(f"{pair.a}-{pair.b}")
        pair_row[ia, ib] = pair_row[ib, ia] = len(rows) - 1

    node_body = np.zeros(model.n_nodes, np.int32)
    for bi, b in enumerate(model.bodies):
        node_body[b.nodes] = bi
    tris, edges = [], []
    self_gap = np.full(B, -1.0)
    for b, spec in fem_bodies:
        f = boundary_faces(spec.mesh)
        tris.append(f + b.node_start)
        x = spec.positions
        edges.append(np.linalg.norm(x[f] - x[np.roll(f, 1, axis=1)], axis=2).ravel())
        if spec.self_contact:
            self_gap[names.index(spec.name)] = SELF_CONTACT_REST_GAP * float(edges[-1].max())
    surf_tris = np.concatenate(tris).astype(np.int32) if tris else np.zeros((0, 3), np.int32)
    surf_nodes = np.unique(surf_tris).astype(np.int32)
    mean_edge = float(np.concatenate(edges).mean()) if edges and sum(map(len, edges)) else 0.0
    fixed = model.prescribed_mask.astype(np.int32)             # pinned, driven, kinematic blocks
    margin = scene.contact_margin
    if margin is None:
        sizes = [0.5 * mean_edge] if mean_edge > 0 else []
        sizes += [0.25 * shape.bounding_radius() for shape in model.rigid.shapes]
        sizes += [r.radius for r in model.rod_ranges]
        margin = min(sizes) if sizes else 0.0
    margin = float(margin)
    return ContactData(np.array(rows, float), np.array(axes, float), pair_row, surf_nodes, surf_tris, node_body,
                       fixed, self_gap, margin, mean_edge, obstacles, row_names)

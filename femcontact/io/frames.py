"""The pieces of an output frame as meshio meshes, from a Model and a State (``Simulator.frame_pieces``).

One piece per body: an FEM body's tetrahedra (point data ``displacement``, ``velocity``; cell data
``von_mises``), a rigid body's surface in its pose (``velocity``), a rod's polyline (``radius``,
``velocity``; per segment ``stretch``, ``shear``, ``bend``, ``twist``), each robot link
``"<robot>/<link>"``. With contact, also one triangle piece per obstacle (its surface in the current
pose; a half-space as a square patch sized to the scene; point data ``obstacle`` = 1 marks it for
renderers) and a ``contacts`` point cloud (vertex cells at the contact points, point data
``normal``, ``impulse`` (world frame, N s), ``force`` (= impulse/dt, N), ``gap`` (m), ``state``
(0 open, 1 stick, 2 slip), ``body_a``/``body_b`` (index into the field data ``body_names``, -1 the
world or an obstacle; ``force`` acts on B, its opposite on A), field data ``body_robots`` (per body
its robot's name, or "")).
"""
from __future__ import annotations

import numpy as np

from ..math.quaternion import quat_to_matrix


def body_pieces(model, state, von_mises: np.ndarray) -> dict:
    """The FEM bodies (``von_mises``: per tet, Pa) and rigid bodies now."""
    import meshio

    x, v, q = state.positions(), state.velocities(), state.quaternions()
    pieces = {}
    for b in model.bodies:
        if b.kind != "fem":
            continue
        tets = model.tets_np[b.tets] - b.node_start
        pieces[b.name] = meshio.Mesh(
            x[b.nodes], [("tetra", tets)],
            point_data={"displacement": x[b.nodes] - model.rest_positions[b.nodes], "velocity": v[b.nodes]},
            cell_data={"von_mises": [von_mises[b.tets]]})
    rigid = model.rigid
    for k, name in enumerate(rigid.names):
        lin = int(rigid.lin[k])
        c, R = x[lin], quat_to_matrix(q[k])
        verts, f = rigid.surfaces[k]
        pts = (verts - rigid.com_local[k]) @ R.T + c
        pieces[name] = meshio.Mesh(pts, [("triangle", f)],
                                   point_data={"velocity": v[lin] + np.cross(v[lin + 1], pts - c)})
    return pieces


def rod_pieces(rods, state) -> dict:
    """Each rod of the ``RodSystem`` as a polyline (``RodSystem.strains``)."""
    import meshio

    v = state.velocities()
    pieces = {}
    for d, r in zip(rods.strains(state.positions(), state.quaternions()), rods.ranges):
        n = r.n_segments
        lines = np.stack([np.arange(n), np.arange(1, n + 1)], axis=1).astype(np.int64)
        pieces[r.name] = meshio.Mesh(
            d["points"], [("line", lines)],
            point_data={"radius": np.full(n + 1, r.radius), "velocity": v[r.nodes]},
            cell_data={k: [d[k]] for k in ("stretch", "shear", "bend", "twist")})
    return pieces


def robot_pieces(robots, sim) -> dict:
    """Every link of every robot with geometry (visual meshes, else collision meshes:
    ``Robot.link_meshes``) as a triangle piece ``"<robot>/<link>"`` in its pose now."""
    import meshio

    return {f"{robot.name}/{link}": meshio.Mesh(v, [("triangle", f)])
            for robot in robots for link, (v, f) in robot.link_surfaces(sim).items()}


def contact_pieces(model, state, contacts, dt: float, robots=()) -> dict:
    """The obstacles in their poses now and the ``contacts`` point cloud of the last step."""
    import meshio

    pieces = {}
    x = state.positions()
    lo, hi = (x.min(0), x.max(0)) if len(x) else (np.zeros(3), np.ones(3))
    extent = max(float(np.max(hi - lo)), 1e-3)
    for ob in model.obstacles:
        c, R = ob.pose(state.time)
        v, f = ob.shape.surface(extent)
        if ob.shape.kind == 0:  # half-space: centre the patch under the bodies
            n = R @ ob.shape.normal
            mid = 0.5 * (lo + hi)
            plane_pt = c + R @ (ob.shape.offset * ob.shape.normal)
            shift = (mid - plane_pt) - np.dot(mid - plane_pt, n) * n
            pts = v @ R.T + c + shift
        else:
            pts = v @ R.T + c
        pieces[ob.name] = meshio.Mesh(np.asarray(pts, float), [("triangle", np.asarray(f, np.int64))],
                                      point_data={"obstacle": np.ones(len(pts), np.int32)})
    d = contacts.to_numpy()
    k = len(d["phi"])
    imp = d["impulse_world"] if k else np.zeros((0, 3))
    starts = np.array([b.node_start for b in model.bodies], np.int64)
    body_a, body_b = (np.where(n < 0, -1, np.searchsorted(starts, n, side="right") - 1).astype(np.int32)
                      for n in contacts.side_nodes(d))
    robot_of = {b: r.name for r in robots for b in r.bodies}
    pieces["contacts"] = meshio.Mesh(
        contact_points_now(state, contacts, d, dt), [("vertex", np.arange(k, dtype=np.int64)[:, None])],
        point_data={"normal": d["normal"] if k else np.zeros((0, 3)), "impulse": imp,
                    "force": imp / dt, "gap": d["phi"] if k else np.zeros(0),
                    "state": (d["status"] if k else np.zeros(0)).astype(np.int32),
                    "body_a": body_a, "body_b": body_b},
        field_data={"body_names": np.array([b.name for b in model.bodies]),
                    "body_robots": np.array([robot_of.get(b.name, "") for b in model.bodies])})
    return pieces


def contact_points_now(state, contacts, d: dict, dt: float) -> np.ndarray:
    """The contact points carried over the step with the bodies: detection found them at the
    step's start, the frame shows the bodies at its end (a body sliding at v would otherwise
    be drawn v·dt ahead of its contacts). A point moves by dt times its bodies' mean velocity
    (the body side alone against an obstacle)."""
    if not len(d["phi"]):
        return np.zeros((0, 3))
    va, vb = contacts.side_velocities(state.velocities(), d)
    on_world = (d["node_a"] < 0)[:, None]
    return d["point"] + dt * np.where(on_world, vb, 0.5 * (va + vb))

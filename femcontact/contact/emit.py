"""What every contact pass writes: the shared steps of emitting one contact into the ContactSet
(``emit``), the point Jacobians of contact sides that are not a single node (virtual nodes:
``rigid_point_node``, ``triangle_point_node``) and the pose and world side of an SDF entity
(``pose_of``, ``world_side``). A side on one real node is that node; detection never routes a
contact through a virtual node because its node is taken (nodalization is COND's:
``solvers/cond/virtual.py``). Taichi functions only; the passes in
``detection.py`` and ``rod_detection.py`` inline them.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
from ..backend import ti
from ..math.smallmat import mv
from .schema import CONTACT_SET_F, CONTACT_SET_I, PARAM_F, SDF
from .contacts import OPEN


@ti.func
def pose_of(obs_pose: ti.template(), o):
    """Rotation and origin of SDF entity o this step."""
    R = ti.Matrix([[obs_pose[o, 0], obs_pose[o, 1], obs_pose[o, 2]],
                   [obs_pose[o, 3], obs_pose[o, 4], obs_pose[o, 5]],
                   [obs_pose[o, 6], obs_pose[o, 7], obs_pose[o, 8]]])
    c = ti.Vector([obs_pose[o, 9], obs_pose[o, 10], obs_pose[o, 11]])
    return R, c


@ti.func
def rigid_point_reach(v: ti.template(), lin, p, com, margin, dt):
    """Detection reach of world point p on the rigid body with velocity blocks (lin, lin+1) and
    centre of mass com: ``margin + dt |v_p|``, grown with the point's speed so a fast body's contact
    is found the step before it touches (a speculative contact with phi > 0) instead of after it
    has sunk in by up to ``dt |v_p|``."""
    return margin + dt * (v[lin] + v[lin + 1].cross(p - com)).norm()


@ti.func
def rigid_point_node(lin, p, com, counters: ti.template(), vn_node: ti.template(), vn_weight: ti.template(),
                      n_nodes):
    """A new virtual node at world point p of the rigid body whose blocks are (lin, lin+1) and whose
    centre of mass is com: J_v = [I, -[p - com]x] (docs/THEORY.md §2)."""
    v = ti.atomic_add(counters[1], 1)
    if v < vn_node.shape[0]:
        r = p - com
        vn_node[v] = ti.Vector([lin, lin + 1, -1, -1])
        vn_weight[v, 0] = ti.Matrix.identity(float, 3)
        vn_weight[v, 1] = -ti.Matrix([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
        vn_weight[v, 2] = ti.Matrix.zero(float, 3, 3)
        vn_weight[v, 3] = ti.Matrix.zero(float, 3, 3)
    return n_nodes + v


@ti.func
def triangle_point_node(tv, w, counters: ti.template(), vn_node: ti.template(), vn_weight: ti.template(),
                         n_nodes):
    """A new virtual node at the point of triangle tv (3 node ids) with barycentric weights w."""
    v = ti.atomic_add(counters[1], 1)
    if v < vn_node.shape[0]:
        vn_node[v] = ti.Vector([tv[0], tv[1], tv[2], -1])
        for k in ti.static(range(3)):
            vn_weight[v, k] = w[k] * ti.Matrix.identity(float, 3)
        vn_weight[v, 3] = ti.Matrix.zero(float, 3, 3)
    return n_nodes + v


@ti.func
def world_side(o, q, obs_pose: ti.template(), sdf: ti.template(), counters: ti.template(),
                vn_node: ti.template(), vn_weight: ti.template(), n_nodes):
    """Side A of a contact at point q on SDF entity o: the world (node -1, with the obstacle's
    velocity at q) for an obstacle, a new virtual node on the body for a rigid body."""
    node = -1
    vw = ti.Vector([0.0, 0.0, 0.0])
    lin = SDF.rigid.get(sdf, o)
    if lin < 0:
        vl = ti.Vector([obs_pose[o, 12], obs_pose[o, 13], obs_pose[o, 14]])
        w = ti.Vector([obs_pose[o, 15], obs_pose[o, 16], obs_pose[o, 17]])
        vw = vl + w.cross(q - ti.Vector([obs_pose[o, 9], obs_pose[o, 10], obs_pose[o, 11]]))
    else:
        com = ti.Vector([obs_pose[o, 18], obs_pose[o, 19], obs_pose[o, 20]])
        node = rigid_point_node(lin, q, com, counters, vn_node, vn_weight, n_nodes)
    return node, vw


@ti.func
def emit(node_a, node_b, R, phi_m, params: ti.template(), vw, pt, row, counters: ti.template(), c_f: ti.template(),
          c_i: ti.template()):
    """Append a contact to the ContactSet's tables (``schema.CONTACT_SET_F`` / ``CONTACT_SET_I``; the
    counter counts past the capacity so that the pipeline grows it and reruns)."""
    m = ti.atomic_add(counters[0], 1)
    if m < c_i.shape[0]:
        CONTACT_SET_I.node_a.put(c_i, m, node_a)
        CONTACT_SET_I.node_b.put(c_i, m, node_b)
        CONTACT_SET_F.frame.put(c_f, m, R)
        CONTACT_SET_F.phi.put(c_f, m, phi_m)
        CONTACT_SET_F.mu.put_at(c_f, m, 0, PARAM_F.mu.at(params, row, 0))
        CONTACT_SET_F.mu.put_at(c_f, m, 1, PARAM_F.mu.at(params, row, 1))
        CONTACT_SET_F.v_world.put(c_f, m, vw)
        CONTACT_SET_F.point.put(c_f, m, pt)
        CONTACT_SET_I.param.put(c_i, m, row)
        CONTACT_SET_F.impulse.put(c_f, m, ti.Vector([0.0, 0.0, 0.0]))
        CONTACT_SET_I.status.put(c_i, m, OPEN)


@ti.func
def side_velocity(node, n0, vn_node: ti.template(), vn_weight: ti.template(), v: ti.template(), world):
    """Velocity of one side of a contact: a real node's v, a virtual node's J_v v (links in use, added in k
    order), or ``world`` (node -1). COND's targets and the stiction anchors read sides with it."""
    out = world
    if node >= n0:
        out = ti.Vector.zero(float, 3)
        for k in range(4):
            j = vn_node[node - n0][k]
            if j >= 0:
                out += mv(vn_weight[node - n0, k], v[j])
    elif node >= 0:
        out = v[node]
    return out

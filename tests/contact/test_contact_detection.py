"""Contact detection: shapes, S- and D-contacts, nodalization, capacity growth, parameters."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.geometry import shapes
from femcontact.contact.contacts import CONTACT_PARAM_COLUMNS, ContactSet
from femcontact.contact.pipeline import CollisionPipeline
from femcontact.errors import ParameterError
from femcontact.model import Model
from femcontact.state import State

MAT = fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0)


def detect(scene, capacity=256, virtual=256):
    model = Model(scene)
    state = State(model)
    cs = ContactSet(model.n_nodes, capacity=capacity, virtual_capacity=virtual)
    det = CollisionPipeline(model)
    n = det.collide(state, cs, scene.dt)
    return model, state, cs, det, n


def cube(scene, size=0.1, res=4, pos=(0, 0, 0), name=None):
    return scene.add_fem_body(fc.meshes.box(size=(size,) * 3, resolution=res), MAT, position=pos, name=name)


# ------------------------------------------------------------------ shapes
def _check_shape(shape, pts, phi_ref, n_ref, tol=1e-12):
    phi, n = shape.sdf(pts)
    np.testing.assert_allclose(phi, phi_ref, atol=tol)
    np.testing.assert_allclose(n, n_ref, atol=1e-9)


def test_shape_sdfs_match_analytic_values():
    _check_shape(shapes.HalfSpace(normal=(0, 0, 2), offset=0.1), [[0, 0, 0.3], [1, 2, -0.1]], [0.2, -0.2],
                 [[0, 0, 1], [0, 0, 1]])
    box = shapes.Box(half_extents=(1, 2, 3))
    pts = [[2, 0, 0], [0, -2.5, 0], [0.5, 0, 0], [2, 3, 0], [2, 3, 4], [0, 0, -2.9]]
    s3 = np.sqrt(3.0)
    _check_shape(box, pts, [1, 0.5, -0.5, np.sqrt(2), s3, -0.1],
                 [[1, 0, 0], [0, -1, 0], [1, 0, 0], [1 / np.sqrt(2), 1 / np.sqrt(2), 0], [1 / s3] * 3, [0, 0, -1]])
    _check_shape(shapes.Sphere(radius=0.5), [[0, 0, 2], [0.3, 0, 0]], [1.5, -0.2], [[0, 0, 1], [1, 0, 0]])
    cap = shapes.Capsule(radius=0.1, half_length=0.5)
    _check_shape(cap, [[0.3, 0, 0.2], [0, 0, 0.8], [0, 0.05, -0.5]], [0.2, 0.2, -0.05],
                 [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    cyl = shapes.Cylinder(radius=0.2, half_length=0.5)
    _check_shape(cyl, [[0.5, 0, 0], [0, 0, 0.7], [0.1, 0, 0.45], [0.5, 0, 0.9], [0.15, 0, 0]],
                 [0.3, 0.2, -0.05, 0.5, -0.05], [[1, 0, 0], [0, 0, 1], [0, 0, 1], [0.6, 0, 0.8], [1, 0, 0]])


def test_kernel_sdf_matches_numpy_for_every_shape():
    scene = fc.Scene()
    cube(scene, pos=(10, 10, 10))
    rot = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])
    sph = shapes.TriangleMesh(*shapes.Sphere(0.3).surface(), resolution=16)
    shp = [shapes.HalfSpace((0, 1, 1), 0.1), shapes.Box((0.3, 0.2, 0.1)), shapes.Sphere(0.2),
           shapes.Capsule(0.1, 0.3), shapes.Cylinder(0.2, 0.3), sph]
    for k, s in enumerate(shp):
        scene.add_obstacle(s, position=(0.1, -0.2, 0.3), rotation=rot, name=f"o{k}")
    det = CollisionPipeline(Model(scene))
    rng = np.random.default_rng(0)
    pts = rng.uniform(-0.6, 0.6, (200, 3)) + (0.1, -0.2, 0.3)
    for k, s in enumerate(shp):
        phi, n = det.obstacle_sdf(f"o{k}", pts)
        local = (pts - (0.1, -0.2, 0.3)) @ rot
        phi_ref, n_ref = s.sdf(local)
        np.testing.assert_allclose(phi, phi_ref, atol=1e-10)
        np.testing.assert_allclose(n, n_ref @ rot.T, atol=1e-8)


def test_triangle_mesh_sdf_matches_a_sphere_within_grid_tolerance():
    r = 0.5
    v, f = shapes.Sphere(r).surface()
    mesh = shapes.TriangleMesh(v, f, resolution=24)
    rng = np.random.default_rng(1)
    d = rng.normal(size=(300, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    rad = rng.uniform(0.1, 0.75, 300)
    pts = d * rad[:, None]
    phi, n = mesh.sdf(pts)
    tol = 1.5 * mesh.spacing            # grid spacing + the faceting of the sphere surface
    np.testing.assert_allclose(phi, rad - r, atol=tol)
    near = np.abs(rad - r) > 2 * mesh.spacing
    assert np.all(np.sign(phi[near]) == np.sign(rad[near] - r))
    assert np.all(np.einsum("ij,ij->i", n[rad > 0.3], d[rad > 0.3]) > 0.9)


# ------------------------------------------------------------------ S-contacts
@pytest.mark.parametrize("h", [0.004, -0.003])
def test_box_above_half_space_gives_its_bottom_vertices(h):
    scene = fc.Scene(contact_margin=0.01)
    body = cube(scene, pos=(0, 0, 0.05 + h))
    scene.add_obstacle(shapes.HalfSpace(normal=(0, 0, 1)), friction=0.4, name="ground")
    model, state, cs, det, n = detect(scene)
    d = cs.to_numpy()
    bottom = np.flatnonzero(np.isclose(body.positions[:, 2], h))
    assert n == len(bottom) == 25
    assert sorted(d["node_b"]) == sorted(bottom) and np.all(d["node_a"] == -1)
    np.testing.assert_allclose(d["phi"], h, atol=1e-12)
    np.testing.assert_allclose(d["normal"], np.tile([0, 0, 1.0], (n, 1)), atol=1e-12)
    np.testing.assert_allclose(d["mu"], 0.4)
    np.testing.assert_allclose(d["point"][:, 2], 0.0, atol=1e-12)
    assert cs.n_virtual == 0
    fr = d["frame"]
    np.testing.assert_allclose(np.einsum("mij,mkj->mik", fr, fr), np.tile(np.eye(3), (n, 1, 1)), atol=1e-12)
    assert np.all(np.linalg.det(fr) > 0)


def test_margin_excludes_far_vertices():
    scene = fc.Scene(contact_margin=0.01)
    cube(scene, pos=(0, 0, 0.05 + 0.02))
    scene.add_obstacle(shapes.HalfSpace(), name="ground")
    assert detect(scene)[-1] == 0


def test_moving_plate_gives_its_point_velocity():
    scene = fc.Scene(dt=1e-3, contact_margin=0.01)
    cube(scene, pos=(0, 0, 0.05))
    v, w = np.array([0.1, -0.2, 0.05]), np.array([0.0, 0.0, 2.0])
    c0 = np.array([0.0, 0.0, -0.01])
    scene.add_obstacle(shapes.Box((0.2, 0.2, 0.01)), position=c0, velocity=v, angular_velocity=w, name="plate")
    model, state, cs, det, n = detect(scene)
    d = cs.to_numpy()
    assert n == 25
    ang = np.linalg.norm(w) * scene.dt      # the finite difference of the rotation is exact: axis z
    expect = v + np.cross(w, d["point"] - c0)
    np.testing.assert_allclose(d["v_world"], expect, atol=1e-9 + 1e-6 * ang)


def test_motion_function_and_anisotropic_frame():
    scene = fc.Scene(dt=1e-2, contact_margin=0.01)
    cube(scene, pos=(0, 0, 0.05))

    def motion(t):
        return (0.0, 0.3 * t, 0.0), np.eye(3)

    scene.add_obstacle(shapes.HalfSpace(), motion=motion, friction=(0.2, 0.6), friction_axes=(1, 0, 1),
                       name="belt")
    _, _, cs, _, n = detect(scene)
    d = cs.to_numpy()
    np.testing.assert_allclose(d["v_world"], np.tile([0, 0.3, 0], (n, 1)), atol=1e-12)
    np.testing.assert_allclose(d["frame"][:, 0], np.tile([1, 0, 0.0], (n, 1)), atol=1e-12)
    np.testing.assert_allclose(d["mu"], np.tile([0.2, 0.6], (n, 1)))


# ------------------------------------------------------------------ D-contacts
def two_cubes(depth=0.003, **kw):
    scene = fc.Scene(contact_margin=0.005, **kw)
    a = cube(scene, size=0.1, res=4, name="A")
    b = cube(scene, size=0.06, res=3, pos=(0.001, 0.0015, 0.05 + 0.03 - depth), name="B")
    return scene, a, b


def test_overlapping_cubes_give_virtual_node_contacts():
    depth = 0.003
    scene, a, b = two_cubes(depth)
    model, state, cs, det, n = detect(scene)
    d, vd = cs.to_numpy(), cs.virtual_to_numpy()
    x = state.positions()
    rA, rB = model.body("A").nodes, model.body("B").nodes
    assert n > 0 and cs.n_virtual >= n
    b_bottom = rB.start + np.flatnonzero(np.isclose(b.positions[:, 2], 0.05 - depth))
    for m in range(n):
        va = d["node_a"][m] - model.n_nodes
        assert va >= 0
        nodes, W = vd["node"][va], vd["weight"][va]
        used = nodes >= 0
        w = np.array([W[k][0, 0] for k in range(4)])[used]
        np.testing.assert_allclose([W[k] for k in range(4) if used[k]], [wk * np.eye(3) for wk in w], atol=1e-14)
        assert abs(w.sum() - 1) < 1e-12 and np.all(w >= -1e-12)
        q = (w[:, None] * x[nodes[used]]).sum(0)
        np.testing.assert_allclose(q, d["point"][m], atol=1e-12)
        vertex = d["node_b"][m]
        vertex = vertex if vertex < model.n_nodes else vd["node"][vertex - model.n_nodes][0]
        # the normal points from the triangle's body into the vertex's body
        tri_body_is_A = rA.start <= nodes[0] < rA.stop
        assert tri_body_is_A != (rA.start <= vertex < rA.stop)
        expected_n = np.array([0, 0, 1.0]) if tri_body_is_A else np.array([0, 0, -1.0])
        np.testing.assert_allclose(d["normal"][m], expected_n, atol=1e-9)
        np.testing.assert_allclose(d["phi"][m], -depth, atol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(x[vertex] - q), depth, atol=1e-12)
    bverts = [v for v in d["node_b"] if v < model.n_nodes]
    assert set(b_bottom) <= set(bverts) | {vd["node"][v - model.n_nodes][0] for v in d["node_b"]
                                           if v >= model.n_nodes}


@pytest.mark.parametrize("upper", ["fem", "rigid"])
def test_flush_stack_pushes_along_the_shared_face_only(upper):
    """Two equal cubes stacked flush (all four side faces coplanar), the upper 30 µm into the lower: an
    edge vertex (or rigid edge sample) of one is ~0 from the other's side plane but 30 µm from the face it
    presses, and its contact must push along ±z with gap −30 µm, not sideways (the nearest face is taken
    among those opposing the point's own outward normal; docs/THEORY.md §3)."""
    depth = 3e-5
    scene = fc.Scene(contact_margin=0.005)
    cube(scene, size=0.1, res=2, name="A")
    if upper == "fem":
        cube(scene, size=0.1, res=2, pos=(0, 0, 0.1 - depth), name="B")
    else:
        scene.add_rigid_body(shapes.Box((0.05, 0.05, 0.05)), density=1000.0, position=(0, 0, 0.1 - depth), name="B")
    model, state, cs, det, n = detect(scene)
    d = cs.to_numpy()
    inside = d["phi"] < 0
    assert inside.sum() >= 9
    np.testing.assert_allclose(np.abs(d["normal"][inside, 2]), 1.0, atol=1e-9)
    np.testing.assert_allclose(d["phi"][inside], -depth, atol=1e-9)


def test_speculative_contacts_before_touch_and_disabled_pairs():
    scene, a, b = two_cubes(depth=-0.002)              # 2 mm apart, margin 5 mm
    _, _, cs, _, n = detect(scene)
    d = cs.to_numpy()
    assert n > 0
    np.testing.assert_allclose(d["phi"], 0.002, atol=1e-12)
    scene.set_contact("A", "B", enabled=False)
    assert not Model(scene).needs_contact


@pytest.mark.parametrize("depth", [0.003, -0.002])
def test_rigid_box_face_between_fem_vertices_gives_rigid_point_contacts(depth):
    """A 2 cm rigid box pressed 3 mm into (or 2 mm above) the top face of a one-cell FEM cube whose
    vertices are all 5 cm away: the 9 samples of its bottom face (``surface_samples``) are in
    D-contact with the face, side A a virtual node on the top triangle (barycentric weights),
    side B a rigid-point virtual node ``[I, -[r]x]``, gap -depth, normal +z; nothing else."""
    scene = fc.Scene(contact_margin=0.004)
    cube(scene, size=0.1, res=1, name="A")
    scene.add_rigid_body(shapes.Box((0.01, 0.01, 0.01)), density=1000.0, position=(0.002, 0.001, 0.06 - depth),
                         name="box")
    model, state, cs, det, n = detect(scene)
    d, vd = cs.to_numpy(), cs.virtual_to_numpy()
    x, lin, N = state.positions(), model.rigid.lin[0], model.n_nodes
    assert n == 9 and cs.n_virtual == 18
    np.testing.assert_allclose(d["phi"], -depth, atol=1e-12)
    np.testing.assert_allclose(d["normal"], np.tile([0, 0, 1.0], (n, 1)), atol=1e-12)
    for m in range(n):
        na, nb = vd["node"][d["node_a"][m] - N], vd["node"][d["node_b"][m] - N]
        Wa, Wb = vd["weight"][d["node_a"][m] - N], vd["weight"][d["node_b"][m] - N]
        q = sum(Wa[k][0, 0] * x[na[k]] for k in range(3))
        np.testing.assert_allclose(q, d["point"][m], atol=1e-12)
        assert list(nb[:2]) == [lin, lin + 1] and nb[2] < 0
        r = q + [0, 0, -depth] - x[lin]          # the rigid point, relative to the centre of mass
        np.testing.assert_allclose(Wb[1] @ [0, 0, 1.0], -np.cross(r, [0, 0, 1.0]), atol=1e-12)
    assert abs(np.sort(d["point"][:, 0])[[0, -1]] - 0.002).max() == pytest.approx(0.01, abs=1e-12)


# ------------------------------------------------------------------ nodalization
def test_the_fem_fem_pass_runs_only_when_two_fem_bodies_may_touch():
    """Only passes that can find contacts are listed (their kernels alone compile and launch): one FEM
    cube under a rigid box has no FEM-FEM pass (``BodyPass``: vertices of one FEM body against another
    one's tets), and forced in it adds no contact; two FEM cubes have it."""
    from femcontact.contact.pipeline import BodyPass

    scene = fc.Scene(contact_margin=0.004)
    cube(scene, size=0.1, res=1, name="A")
    scene.add_rigid_body(shapes.Box((0.01, 0.01, 0.01)), density=1000.0, position=(0.002, 0.001, 0.057), name="box")
    model, state, cs, det, n = detect(scene)
    assert det.tables.has_bodies and n == 9
    assert not any(isinstance(p, BodyPass) for p in det.passes)
    det.passes.insert(2, BodyPass(det.tables, det.buffers))
    forced = ContactSet(model.n_nodes, capacity=256, virtual_capacity=256)
    assert det.collide(state, forced, scene.dt) == n
    for name, values in cs.to_numpy().items():
        np.testing.assert_array_equal(forced.to_numpy()[name], values)
    assert any(isinstance(p, BodyPass) for p in detect(two_cubes()[0])[3].passes)


def test_nodalization_keeps_the_surrogate_delassus_diagonal():
    """Detection emits solver-neutral contacts (a shared FEM vertex stays one node in both of its
    contacts); COND nodalizes them (``cond_nodalize``) so that no node is in two contacts and
    Γ = J W Jᵀ is exactly block diagonal for a diagonal W (COND Prop. 2)."""
    # cube B in a corner: ground below, a wall beside, and overlapping cube A below it
    scene = fc.Scene(contact_margin=0.004)
    cube(scene, size=0.1, res=4, pos=(0, 0, 0.05), name="A")
    cube(scene, size=0.06, res=3, pos=(0.015, 0.0, 0.128), name="B")
    scene.add_obstacle(shapes.HalfSpace(), name="ground")
    scene.add_obstacle(shapes.HalfSpace(normal=(-1, 0, 0), offset=-0.0505), name="wall")
    model, state, cs, det, n = detect(scene)
    d = cs.to_numpy()
    real = np.concatenate([d["node_a"][(d["node_a"] >= 0) & (d["node_a"] < model.n_nodes)],
                           d["node_b"][d["node_b"] < model.n_nodes]])
    _, shared = np.unique(real, return_counts=True)
    assert shared.max() == 2 and (shared == 2).sum() == 5   # A's bottom edge on the wall: in two contacts
    assert cs.n_virtual > 0                                # triangle points of the D-contacts
    from femcontact.solvers.cond import CondSolver
    J = CondSolver(model, {}).nodalized_jacobian(cs)
    extra = J.shape[1] // 3 - model.n_nodes - cs.n_virtual
    assert extra == 5                                      # one COND virtual node per shared vertex
    used = np.flatnonzero(np.asarray(abs(J).sum(axis=0)).ravel().reshape(-1, 3).sum(1) > 0)
    assert len(used) == len(set(real.tolist())) + cs.n_virtual + extra   # every node in one contact
    w = np.concatenate([np.repeat(1.0 / model.mass_np, 3), np.ones(J.shape[1] - 3 * model.n_nodes)])
    G = J @ (w[:, None] * J.T.toarray())
    blocks = np.kron(np.eye(n), np.ones((3, 3))) > 0
    assert np.all(G[~blocks] == 0.0)                     # no coupling between contacts: exactly zero
    for m in range(n):                                   # within a contact: w R Rᵀ = w I (R orthonormal)
        g = G[3 * m:3 * m + 3, 3 * m:3 * m + 3]
        np.testing.assert_allclose(g, g[2, 2] * np.eye(3), atol=1e-12 * g[2, 2])
    # ground, wall (A's x = 0.05 face), B's bottom in A (4 x 4), A's top vertices in B (2 x 3)
    assert n == 25 + 25 + 16 + 6


def test_prescribed_vertices_against_obstacles_are_skipped():
    scene = fc.Scene(contact_margin=0.01)
    body = cube(scene, pos=(0, 0, 0.05))
    body.pin(lambda x: x[:, 2] < 1e-9)
    scene.add_obstacle(shapes.HalfSpace(), name="ground")
    assert detect(scene)[-1] == 0


# ------------------------------------------------------------------ capacity
def test_capacity_grows_and_keeps_every_contact():
    scene = fc.Scene(contact_margin=0.01)
    cube(scene, size=0.1, res=9, pos=(0, 0, 0.05))       # 10 x 10 = 100 bottom vertices
    scene.add_obstacle(shapes.HalfSpace(), name="ground")
    scene.add_obstacle(shapes.Sphere(0.02), position=(0.05, 0.05, 0.0), name="ball")
    _, _, cs, det, n = detect(scene, capacity=8, virtual=1)
    assert n == cs.count and n >= 100 and cs.capacity >= n
    assert np.sum(cs.to_numpy()["node_a"] == -1) == n
    _, uses = np.unique(cs.to_numpy()["node_b"], return_counts=True)
    assert uses.max() == 2                                 # the corner at the ball touches both
    # virtual nodes (triangle points of D-contacts) grow the same way
    scene = fc.Scene(contact_margin=0.004)
    cube(scene, size=0.1, res=4, pos=(0, 0, 0.05), name="A")
    cube(scene, size=0.06, res=3, pos=(0.015, 0.0, 0.128), name="B")
    _, _, cs, det, n = detect(scene, capacity=4, virtual=1)
    assert n == 16 + 6 and cs.n_virtual == n and cs.virtual_capacity >= n


# ------------------------------------------------------------------ parameters
def test_contact_parameter_table():
    scene = fc.Scene(friction=0.3)
    cube(scene, name="A")
    cube(scene, pos=(0, 0, 0.2), name="B")
    scene.add_obstacle(shapes.HalfSpace(), friction=(0.5, 0.7), stiffness=1e5, name="ground")
    scene.set_contact("A", "B", friction=0.9, stiction_tolerance=1e-3)
    scene.set_contact("B", "ground", enabled=False)
    model = Model(scene)
    P = model.contact_params
    col = {c: i for i, c in enumerate(CONTACT_PARAM_COLUMNS)}
    assert P.shape == (3, len(CONTACT_PARAM_COLUMNS))
    assert P[0, col["mu1"]] == 0.3 and np.isnan(P[0, col["stiffness"]])
    assert P[1, col["mu2"]] == 0.7 and P[1, col["stiffness"]] == 1e5
    assert P[2, col["mu1"]] == 0.9 and P[2, col["stiction_tolerance"]] == 1e-3
    pr = model.contact.pair_row
    assert pr[0, 1] == 2 and pr[1, 2] == -1 and pr[0, 2] == 1 and pr[0, 0] == -1


@pytest.mark.parametrize("make", [
    lambda s: s.add_obstacle(shapes.HalfSpace(), friction=-0.1),
    lambda s: s.add_obstacle(shapes.HalfSpace(), friction=(0.1, -1)),
    lambda s: shapes.Box(half_extents=(0.1, 0.0, 0.1)),
    lambda s: shapes.Sphere(radius=-1),
    lambda s: shapes.HalfSpace(normal=(0, 0, 0)),
    lambda s: s.add_obstacle(shapes.HalfSpace(), stiffness=-5),
    lambda s: s.add_obstacle(shapes.HalfSpace(), hc_dissipation=-1),
    lambda s: s.add_obstacle(shapes.HalfSpace(), stiction_tolerance=0.0),
    lambda s: s.add_obstacle(shapes.HalfSpace(), restitution=2.0),
    lambda s: s.add_obstacle("ground"),
    lambda s: s.add_obstacle(shapes.Sphere(0.1), motion=lambda t: "garbage"),
    lambda s: s.add_obstacle(shapes.Sphere(0.1), motion=lambda t: ((0, 0, np.nan), np.eye(3))),
    lambda s: s.add_obstacle(shapes.Sphere(0.1), motion=lambda t: ((0, 0, 0), np.ones((3, 3)))),
    lambda s: s.set_contact("A", "A"),
    lambda s: Model(s.set_contact("A", "nobody") or s),
    lambda s: fc.Scene(friction=-1.0),
    lambda s: fc.Scene(contact_margin=-1.0),
])
def test_bad_contact_parameters_raise_clear_errors(make):
    scene = fc.Scene()
    cube(scene, name="A")
    with pytest.raises(ParameterError):
        make(scene)


def test_motion_failing_later_raises_at_that_step():
    scene = fc.Scene(dt=0.1)
    cube(scene, pos=(0, 0, 0.05))
    scene.add_obstacle(shapes.HalfSpace(), motion=lambda t: ((0, 0, 0 if t < 0.15 else np.inf), np.eye(3)))
    model, state, cs, det, n = detect(scene)
    state.time = 0.1
    with pytest.raises(ParameterError, match="non-finite|finite"):
        det.collide(state, cs, scene.dt)


def test_frame_pieces_include_contacts_and_obstacles():
    import meshio

    scene = fc.Scene(contact_margin=0.01)
    cube(scene, pos=(0, 0, 0.05))
    scene.add_obstacle(shapes.HalfSpace(), name="ground")
    scene.add_obstacle(shapes.Capsule(0.02, 0.05), position=(0, 0, 0.2), name="tool")
    from femcontact.io.frames import contact_pieces

    model = Model(scene)              # detection and output only: no Simulator, no contact solver needed
    state, contacts = State(model), ContactSet(model.n_nodes)
    CollisionPipeline(model).collide(state, contacts, scene.dt)
    pieces = contact_pieces(model, state, contacts, scene.dt)
    assert set(pieces) == {"ground", "tool", "contacts"}
    c = pieces["contacts"]
    assert isinstance(c, meshio.Mesh) and len(c.points) == 25
    assert set(c.point_data) == {"normal", "impulse", "force", "gap", "state", "body_a", "body_b"}
    assert set(c.point_data["body_a"]) == {-1} and set(c.point_data["body_b"]) == {0}    # ground -> the cube
    assert list(c.field_data["body_names"]) == [b.name for b in model.bodies]
    assert c.cells[0].type == "vertex"
    g = pieces["ground"].points
    np.testing.assert_allclose(g[:, 2], 0.0)
    assert np.abs(g[:, 0]).max() >= 0.05


@pytest.mark.parametrize("speed, expect", [(0.0, 0), (0.5, 0), (1.5, 9)])
def test_fast_rigid_box_samples_reach_the_fem_face_a_step_early(speed, expect):
    """The rigid box of the test above 1 cm above the one-cell FEM cube (margin 4 mm, dt 1e-2),
    falling at `speed`: its samples reach ``margin + dt |v_p|`` (1.9 cm at 1.5 m/s, 0.9 cm at
    0.5 m/s), so at 1.5 m/s, where it would sink 5 mm in this step, its 9 bottom-face samples are
    already in speculative contact, gap +1 cm, normal +z (those 1 cm higher, 2 cm away, are not);
    slower, nothing."""
    gap = 0.01
    scene = fc.Scene(contact_margin=0.004, dt=1e-2)
    cube(scene, size=0.1, res=1, name="A")
    scene.add_rigid_body(shapes.Box((0.01, 0.01, 0.01)), density=1000.0, position=(0.002, 0.001, 0.06 + gap),
                         velocity=(0.0, 0.0, -speed), name="box")
    model, state, cs, det, n = detect(scene)
    d = cs.to_numpy()
    assert n == expect
    np.testing.assert_allclose(d["phi"], gap, atol=1e-12)
    np.testing.assert_allclose(d["normal"], np.tile([0, 0, 1.0], (n, 1)), atol=1e-12)


@pytest.mark.parametrize("shift, n_vertex", [(0.0, 0), (0.005, 4)])
def test_fem_vertex_at_a_rigid_sample_is_left_to_the_sample(shift, n_vertex):
    """A 2 cm rigid box pressed 1 mm into a FEM cube with 1 cm top-face spacing. Centred on a
    vertex, its 9 bottom-face samples (corners, edge midpoints, centre) sit on the 9 FEM vertices
    under it: each place is one contact (the sample's, whose normal is the face's, kept in the
    corner's normal cone), not two (the FEM vertex against the box SDF as well: 18 contacts, a
    doubled stiffness, and at the box's edges an SDF normal that may point sideways). Shifted by
    half a spacing (5 mm > dedup = min(margin, mean edge / 4) = 2.5 mm) the 4 vertices under it
    are at other places and keep their own contacts."""
    scene = fc.Scene(contact_margin=0.004)
    cube(scene, size=0.1, res=10, name="A")
    scene.add_rigid_body(shapes.Box((0.01, 0.01, 0.01)), density=1000.0, position=(shift, shift, 0.059),
                         name="box")
    model, state, cs, det, n = detect(scene)
    d, vd = cs.to_numpy(), cs.virtual_to_numpy()
    N, lin = model.n_nodes, model.rigid.lin[0]
    rigid_b = np.array([nb >= N and vd["node"][nb - N][0] == lin for nb in d["node_b"]])
    assert rigid_b.sum() == 9 and n - rigid_b.sum() == n_vertex
    np.testing.assert_allclose(d["phi"][rigid_b], -0.001, atol=1e-12)
    # normals from side A into side B: +z from the FEM face into the box, -z from the box into a vertex
    np.testing.assert_allclose(d["normal"], np.where(rigid_b[:, None], 1.0, -1.0) * [0, 0, 1.0], atol=1e-12)

"""Compound rigid shapes (issue 17 item 4; femcontact/geometry/shapes.py ``Compound``): a box with
eight corner spheres — its mass properties against the analytic sums, its signed distance, its
contact points, and resting on its four lower spheres with the weight carried by them alone; a
thin part (issue 17: a 10 mm handle) — the detection kernels give its exact face normal and gap,
and a thin compound bar resting on three pegs stays where it is put."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import femcontact as fc
from femcontact.geometry.mass import mass_properties
from femcontact.geometry.proxies import contact_proxies, surface_samples
from femcontact.contact.contacts import ContactSet
from femcontact.contact.pipeline import CollisionPipeline
from femcontact.errors import ParameterError
from femcontact.model import Model
from femcontact.state import State

G = 9.81
H = np.array([0.1, 0.06, 0.04])     # the box's half extents, m
R = 0.015                           # corner sphere radius, m
MAT = fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0)
CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float) * H


def _box_with_spheres():
    return fc.shapes.Compound([(fc.shapes.Box(H), (0, 0, 0), None)]
                              + [(fc.shapes.Sphere(R), c, None) for c in CORNERS])


def test_mass_and_inertia_are_the_sums_of_the_parts():
    rho = 800.0
    m, com, inertia = mass_properties(_box_with_spheres(), rho)
    mb = rho * 8 * H.prod()
    ms = rho * 4 / 3 * np.pi * R**3
    assert m == pytest.approx(mb + 8 * ms, rel=1e-12)            # overlaps counted once per part
    np.testing.assert_allclose(com, 0.0, atol=1e-15)
    hx, hy, hz = H
    box = mb / 3 * np.diag([hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2])
    spheres = 8 * (0.4 * ms * R**2 * np.eye(3) + ms * np.diag([hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2]))
    np.testing.assert_allclose(inertia, box + spheres, rtol=1e-12, atol=1e-18)
    # off-centre and rotated parts: parallel-axis theorem about the common centre of mass
    rot = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    two = fc.shapes.Compound([(fc.shapes.Box((0.1, 0.02, 0.02)), (0.2, 0, 0), rot), (fc.shapes.Sphere(0.05),)])
    m2, c2, I2 = mass_properties(two, 1000.0)
    mbox, msph = 1000.0 * 8 * 0.1 * 0.02 * 0.02, 1000.0 * 4 / 3 * np.pi * 0.05**3
    assert m2 == pytest.approx(mbox + msph, rel=1e-12)
    np.testing.assert_allclose(c2, [0.2 * mbox / (mbox + msph), 0, 0], rtol=1e-12)
    Ibox = rot @ (mbox / 3 * np.diag([0.02**2 + 0.02**2, 0.1**2 + 0.02**2, 0.1**2 + 0.02**2])) @ rot.T
    d_box, d_sph = np.array([0.2, 0, 0]) - c2, -c2
    par = lambda mm, d: mm * (d @ d * np.eye(3) - np.outer(d, d))
    expected = Ibox + par(mbox, d_box) + 0.4 * msph * 0.05**2 * np.eye(3) + par(msph, d_sph)
    np.testing.assert_allclose(I2, expected, rtol=1e-12)


def test_signed_distance_is_the_nearest_part():
    shape = _box_with_spheres()
    p = np.array([[0, 0, -0.2], [0.1, 0.06, -0.08], [0, 0, 0], [0.1 + 0.03, 0.06, 0.04]])
    phi, n = shape.sdf(p)
    np.testing.assert_allclose(phi, [0.2 - H[2], 0.04 - R, -H[2], 0.03 - R], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(n[3], [1, 0, 0], atol=1e-12)


def test_detection_kernels_evaluate_the_parts_exactly():
    """The kernels' SDF of a compound (placed and rotated as an obstacle) is the host's to rounding:
    rotated and moved parts of every kind, a TriangleMesh part through its own grid."""
    sphere_mesh = fc.shapes.TriangleMesh(*fc.shapes.Sphere(0.05).surface(), resolution=16)
    shape = fc.shapes.Compound([
        (fc.shapes.Box((0.1, 0.1, 0.005)),),
        (fc.shapes.Capsule(0.01, 0.03), (0.05, 0, 0.02), Rotation.from_euler("xyz", [0.3, 0.5, 0.1])),
        (sphere_mesh, (-0.06, 0.02, 0.03), Rotation.from_euler("z", 0.7)),
        (fc.shapes.Cylinder(0.02, 0.01), (0, -0.08, -0.01), None),
        (fc.shapes.Sphere(0.015), (0.1, 0.1, 0.0))])
    scene = fc.Scene()
    scene.add_fem_body(fc.meshes.box(size=(0.1,) * 3, resolution=2), MAT, position=(10, 10, 10))
    c, rot = np.array([0.1, -0.2, 0.3]), Rotation.from_euler("xyz", [0.2, -0.4, 1.0]).as_matrix()
    scene.add_obstacle(shape, position=c, rotation=rot, name="compound")
    pts = np.random.default_rng(0).uniform(-0.15, 0.15, (2000, 3)) + c
    phi, n = CollisionPipeline(Model(scene)).obstacle_sdf("compound", pts)
    phi_ref, n_ref = shape.sdf((pts - c) @ rot)
    np.testing.assert_allclose(phi, phi_ref, atol=1e-12)
    np.testing.assert_allclose(n, n_ref @ rot.T, atol=1e-9)


# A spatula-like handle (issue 17): a bar 10 mm thick (local x) and 20 mm tall (z), with flush end blocks
# so that it is a real compound. Its size gave the old sampled grid (32 cells along 0.24 m: 7.6 mm)
# cells nearly as large as the bar is thin: normals on its flat faces tilted by up to 14° and gaps off
# by 0.2 mm (pads pressing it in slip_control: 8.7°).
T_BAR = 0.01


def _handle():
    end = fc.shapes.Box((0.005, T_BAR / 2, 0.01))
    return fc.shapes.Compound([(fc.shapes.Box((0.105, T_BAR / 2, 0.01)),), (end, (0.11, 0, 0)), (end, (-0.11, 0, 0))])


def test_pad_pressed_on_a_thin_part_gets_its_exact_face_normal_and_gap():
    """Points and a rigid pad at and just inside the flat face of the 10 mm bar (placed and rotated):
    the normal is the face's to 1e-9 rad (0.5° was the bound asked for; the evaluation is exact) and
    the gap the exact one to 1e-12 m, at the face's middle and one millimetre from its edges."""
    c, rot = np.array([0.2, -0.1, 0.4]), Rotation.from_euler("xyz", [0.3, -0.2, 0.9]).as_matrix()
    face_normal = rot[:, 1]                                   # the bar's +y face, world frame
    scene = fc.Scene(dt=0.01, solver="lagged", integrator="euler", contact_margin=0.005)
    scene.add_obstacle(_handle(), position=c, rotation=rot, name="handle")
    gap = 1e-3                                                # the pad's face 1 mm off the bar's face
    pad_half = np.array([0.02, 0.01, 0.03])                   # across the bar's 20 mm height: corners miss it
    pad_centre = c + rot @ [-0.05, T_BAR / 2 + gap + pad_half[1], 0.0]
    scene.add_rigid_body(fc.shapes.Box(pad_half), density=500.0, position=pad_centre, rotation=rot, name="pad")
    model = Model(scene)
    det = CollisionPipeline(model)
    # the SDF itself, over the face: middle, 1 mm from the long edges and from the ends, inside and out
    x, z, d = np.meshgrid(np.linspace(-0.114, 0.114, 23), [-0.009, -0.004, 0.0, 0.006, 0.009],
                          [-8e-4, -1e-4, 0.0, 1e-4, 1e-3, 3e-3], indexing="ij")
    local = np.c_[x.ravel(), T_BAR / 2 + d.ravel(), z.ravel()]
    phi, n = det.obstacle_sdf("handle", local @ rot.T + c)
    np.testing.assert_allclose(phi, d.ravel(), atol=1e-12)
    assert np.arccos(np.clip(n @ face_normal, -1, 1)).max() < 1e-9
    # the pad's contacts on the face (its proxies against the compound's SDF)
    cs = ContactSet(model.n_nodes, capacity=256, virtual_capacity=256)
    det.collide(State(model), cs, scene.dt)
    data = cs.to_numpy()
    assert len(data["phi"]) >= 3                              # the pad face's centre line, at least
    np.testing.assert_allclose(data["phi"], gap, atol=1e-12)
    assert np.arccos(np.clip(data["normal"] @ face_normal, -1, 1)).max() < 1e-9


def test_thin_compound_bar_on_pegs_carries_its_weight_and_stays_put():
    """The 10 mm bar lying flat on three fixed spheres, two of them 2 mm in from one long edge (friction
    0.05: a normal tilted by more than 2.9° there would push it off sideways): the pegs carry m g to
    0.1% and the bar moves less than 0.05 mm sideways in 1 s. (With the old grid the bar slid 1.8 mm in
    that second; the same bar with its thin axis along local z had its edge pegs' normals tilted 18°.)"""
    dt, r_peg, half_w = 0.01, 0.005, 0.01
    scene = fc.Scene(dt=dt, solver="lagged", integrator="euler", contact_margin=0.003, friction=0.05)
    rot = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])      # the bar's thin axis (local y) vertical
    for k, (x, y) in enumerate([(-0.06, half_w - 0.002), (0.06, half_w - 0.002), (0.0, -0.004)]):
        scene.add_rigid_body(fc.shapes.Sphere(r_peg), density=1000.0, position=(x, y, -r_peg),
                             motion=lambda t, x=x, y=y: ((x, y, -r_peg), None), name=f"peg{k}")
    bar = scene.add_rigid_body(_handle(), density=500.0, position=(0, 0, T_BAR / 2), rotation=rot, name="bar")
    sim = fc.Simulator(scene)
    c0 = sim.rigid_pose("bar")[0].copy()
    for _ in range(100):
        sim.step()
    c, R = sim.rigid_pose("bar")
    d = sim.contacts.to_numpy()
    on_bar = np.sign(d["normal"][:, 2])                       # +1 where the bar is side B (normal up into it)
    lifted = (on_bar * d["impulse_world"][:, 2]).sum() / dt
    assert lifted == pytest.approx(bar.mass * G, rel=1e-3)
    assert np.linalg.norm((c - c0)[:2]) < 5e-5
    assert np.abs(R - rot).max() < 5e-3                       # settles on the compliant pegs, does not roll
    loaded = np.linalg.norm(d["impulse"], axis=1) > 0
    assert loaded.sum() >= 3
    assert np.arccos(np.clip(np.abs(d["normal"][loaded] @ R[:, 1]), -1, 1)).max() < 1e-9   # the bar's face normal


def test_contact_points_are_the_parts_not_buried_in_another():
    px = contact_proxies(_box_with_spheres())
    spheres = px["radius"] > 0
    assert spheres.sum() == 8
    np.testing.assert_allclose(np.sort(px["point"][spheres], axis=0), np.sort(CORNERS, axis=0))
    assert len(px["point"]) == 26 - 8 + 8               # the box's corners lie inside the spheres
    p, g, c = surface_samples(_box_with_spheres())
    shape = _box_with_spheres()
    assert shape.sdf(p)[0].min() > -1e-9                  # on the union's surface, none buried
    assert 18 + 8 * 16 < len(p) < 18 + 8 * 32             # the spheres' samples inside the box are left out
    assert len(p) == len(g) == len(c) and np.allclose(np.linalg.norm(g, axis=1), 1.0)


@pytest.mark.parametrize("solver", ["cond", "lagged"])
def test_box_with_corner_spheres_rests_on_its_four_lower_spheres(solver):
    """On the ground, with a ball resting on its top face (rigid–rigid contact against the
    compound's SDF grid): the ground's loaded contacts are at the four lower spheres only and carry
    the weight of both bodies within 1%; the ball sits on the box's top face."""
    dt, r_ball = 0.01, 0.02
    scene = fc.Scene(dt=dt, solver=solver, integrator="midpoint" if solver == "cond" else "euler",
                     contact_margin=0.005)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    body = scene.add_rigid_body(_box_with_spheres(), density=500.0, position=(0, 0, H[2] + R), name="dice")
    ball = scene.add_rigid_body(fc.shapes.Sphere(r_ball), density=500.0, position=(0.03, 0, 2 * H[2] + R + r_ball),
                                name="ball")
    sim = fc.Simulator(scene)
    sim.run(steps=60)
    c, rot = sim.rigid_pose("dice")
    assert c[2] == pytest.approx(H[2] + R, abs=2e-4) and np.allclose(rot, np.eye(3), atol=1e-4)
    assert sim.rigid_pose("ball")[0][2] == pytest.approx(c[2] + H[2] + r_ball, abs=2e-4)
    d = sim.contacts.to_numpy()
    ground = (np.linalg.norm(d["impulse"], axis=1) > 0) & (np.abs(d["point"][:, 2]) < 2e-3)
    assert ground.sum() >= 4
    lower = CORNERS[CORNERS[:, 2] < 0] + c - np.array([0, 0, R])           # the lower spheres' lowest points
    dist = np.linalg.norm(d["point"][ground][:, None, :2] - lower[None, :, :2], axis=2)
    assert dist.min(1).max() < 1e-3                                        # every loaded contact at a sphere
    assert len(np.unique(np.argmin(dist, axis=1))) == 4
    lifted = abs(d["impulse_world"][ground, 2].sum()) / dt
    assert lifted == pytest.approx((body.mass + ball.mass) * G, rel=0.01)


def test_bad_compounds_are_refused():
    for parts, message in (([], "non-empty"), ([(fc.shapes.HalfSpace(), (0, 0, 0))], "a part must be"),
                           ([(fc.shapes.Sphere(0.1), (0, 0))], "position"),
                           ([(fc.shapes.Sphere(0.1), (0, 0, 0), np.ones((3, 3)))], "rotation"),
                           ([(fc.shapes.Sphere(0.1), (0, 0, 0), None, "extra")], "expected")):
        with pytest.raises(ParameterError, match=message):
            fc.shapes.Compound(parts)

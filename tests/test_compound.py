"""Compound rigid shapes (issue 17 item 4; femcontact/contact/shapes.py ``Compound``): a box with
eight corner spheres — its mass properties against the analytic sums, its signed distance, its
contact points, and resting on its four lower spheres with the weight carried by them alone."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.bodies.rigid import contact_proxies, mass_properties, surface_samples
from femcontact.errors import ParameterError

G = 9.81
H = np.array([0.1, 0.06, 0.04])     # the box's half extents, m
R = 0.015                           # corner sphere radius, m
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


def test_signed_distance_is_the_nearest_part_and_the_grid_agrees():
    shape = _box_with_spheres()
    p = np.array([[0, 0, -0.2], [0.1, 0.06, -0.08], [0, 0, 0], [0.1 + 0.03, 0.06, 0.04]])
    phi, n = shape.sdf(p)
    np.testing.assert_allclose(phi, [0.2 - H[2], 0.04 - R, -H[2], 0.03 - R], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(n[3], [1, 0, 0], atol=1e-12)
    phi_grid, _ = shape._trilinear(p)                   # what the detection kernels read
    assert np.abs(phi_grid - phi).max() < shape.spacing


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

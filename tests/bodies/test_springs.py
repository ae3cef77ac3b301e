"""Linear springs and dampers (issue 17 item 4; femcontact/bodies/springs.py): known answers of a
mass on a spring, a damped one, momentum of two bodies on a spring, the consistent tangent in A,
the SAP §VI-B spring–cylinder scene, and the errors of bad input."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import ParameterError
from tests.helpers.oscillation import measured_period
from tests.helpers.scenes_util import load_scene

G = 9.81


def _hanging(m=1.0, k=100.0, c=0.0, dt=0.01):
    """A sphere of mass m hung from the world point (0, 0, 1.5) by a spring k (damper c), released
    at rest at the spring's rest length (z = 1): it oscillates about z = 1 − m g / k."""
    scene = fc.Scene(dt=dt, integrator="midpoint")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), mass=m, position=(0, 0, 1.0), name="mass")
    spring = scene.add_spring("mass", None, anchor_b=(0, 0, 1.5), stiffness=k, damping=c)
    assert spring.rest_length == pytest.approx(0.5)           # default: the distance at build time
    return fc.Simulator(scene)


def _trace(sim, steps):
    t, z = [], []
    for _ in range(steps):
        sim.step()
        t.append(sim.state.time)
        z.append(sim.rigid_pose("mass")[0][2])
    return np.array(t), np.array(z)


def _crossings(t, y):
    """Times where y changes sign upward (linear interpolation)."""
    i = np.flatnonzero((y[:-1] < 0) & (y[1:] >= 0))
    return t[i] - y[i] * (t[i + 1] - t[i]) / (y[i + 1] - y[i])


def test_mass_on_a_vertical_spring_oscillates_at_sqrt_k_over_m_about_the_static_deflection():
    m, k, dt = 1.0, 100.0, 0.01
    sim = _hanging(m, k, dt=dt)
    assert [type(s).__name__ for s in sim.systems] == ["SpringSystem"]
    E0 = sim.energy()["total"]
    T = 2 * np.pi * np.sqrt(m / k)
    t, z = _trace(sim, int(10 * T / dt) + 2)
    z_static = 1.0 - m * G / k
    assert 0.5 * (z.max() + z.min()) == pytest.approx(z_static, abs=1e-3 * m * G / k)
    assert 0.5 * (z.max() - z.min()) == pytest.approx(m * G / k, rel=1e-3)     # amplitude mg/k
    up = _crossings(t, z - z_static)
    assert len(up) >= 9
    assert np.mean(np.diff(up)) == pytest.approx(T, rel=0.01)
    # implicit midpoint on a linear spring: T_h = 2 atan(ω dt / 2) / ω (0.08% long here)
    w = np.sqrt(k / m)
    assert np.mean(np.diff(up)) == pytest.approx(2 * np.pi / (2 * np.arctan(w * dt / 2) / dt), rel=1e-3)
    E = sim.energy()
    assert E["elastic"] == pytest.approx(0.5 * k * (1.0 - z[-1]) ** 2, rel=1e-9)
    assert abs(E["total"] - E0) < 0.01 * (0.5 * k * (m * G / k) ** 2 * 4)       # 1% of the swing's energy


def test_damped_spring_decays_at_the_analytic_rate():
    m, k, zeta, dt = 1.0, 100.0, 0.05, 0.01
    c = 2 * zeta * np.sqrt(k * m)
    sim = _hanging(m, k, c, dt=dt)
    t, z = _trace(sim, 400)
    y = z - (1.0 - m * G / k)
    peaks = [i for i in range(1, len(y) - 1) if y[i] > y[i - 1] and y[i] >= y[i + 1]]
    amp = np.array([y[i] for i in peaks])
    assert len(amp) >= 4
    delta = np.mean(np.log(amp[:-1] / amp[1:]))                   # logarithmic decrement
    zeta_measured = delta / np.sqrt(4 * np.pi**2 + delta**2)
    assert zeta_measured == pytest.approx(zeta, rel=0.02)


def test_two_free_bodies_on_a_spring_keep_their_total_momentum():
    scene = fc.Scene(solver="cond", dt=0.01, gravity=(0, 0, 0), integrator="midpoint")
    scene.add_rigid_body(fc.shapes.Box((0.1, 0.05, 0.05)), density=1000.0, position=(0, 0, 0), velocity=(0.3, 0.1, 0),
                         angular_velocity=(0, 0, 2.0), name="a")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=500.0, position=(0.5, 0.1, 0), velocity=(-0.2, 0, 0.4),
                         name="b")
    # off-centre anchors, pre-stretched (rest length 0.3 m) and damped: forces and torques on both
    scene.add_spring("a", "b", anchor_a=(0.05, 0.02, 0), anchor_b=(0.47, 0.1, 0.02), stiffness=200.0, damping=1.0,
                     rest_length=0.3)
    sim = fc.Simulator(scene)
    ma, mb = (spec.mass for spec in sim.scene.rigid_bodies)

    def momentum():
        return ma * sim.rigid_velocity("a")[0] + mb * sim.rigid_velocity("b")[0]

    p0 = momentum()
    moved = 0.0
    for _ in range(100):
        sim.step()
        moved = max(moved, float(np.linalg.norm(sim.rigid_velocity("a")[0] - 0.3 * np.array([1, 1 / 3, 0]))))
        assert np.linalg.norm(momentum() - p0) < 1e-12 * (ma + mb)
    assert moved > 0.1                                             # the spring did act


def test_assembled_stiffness_is_the_consistent_tangent():
    """A world spring on a body's centre of mass, stretched (ℓ > ℓ₀) and compressed (ℓ < ℓ₀): the
    body's linear block of A is (2/dt) m I + (dt/2) K_t (midpoint), K_t = k n nᵀ + k max(0, 1 − ℓ₀/ℓ)
    (I − n nᵀ); the transverse part is dropped under compression so A stays positive definite."""
    m, k, c, dt = 2.0, 300.0, 4.0, 0.01
    d = np.array([0.3, -0.2, 0.4])
    ell = np.linalg.norm(d)
    n = d / ell
    for l0 in (0.5 * ell, 1.5 * ell, 0.0):
        scene = fc.Scene(dt=dt, gravity=(0, 0, 0))
        scene.add_rigid_body(fc.shapes.Sphere(0.05), mass=m, position=d, name="p")
        scene.add_spring("p", None, anchor_b=(0, 0, 0), stiffness=k, damping=c, rest_length=l0)
        sim = fc.Simulator(scene)
        A = sim.system_matrix().toarray()
        lin = int(sim.model.rigid.lin[0])
        block = A[3 * lin: 3 * lin + 3, 3 * lin: 3 * lin + 3]
        Kt = k * np.outer(n, n) + k * max(0.0, 1 - l0 / ell) * (np.eye(3) - np.outer(n, n))
        expected = (2 / dt) * m * np.eye(3) + (dt / 2) * Kt + c * np.outer(n, n)
        np.testing.assert_allclose(block, expected, rtol=1e-12, atol=1e-9)
        assert np.linalg.eigvalsh(0.5 * (A + A.T)).min() > 0
        assert sim.systems[0].elastic_energy(sim.state) == pytest.approx(0.5 * k * (ell - l0) ** 2, rel=1e-12)


def test_coincident_anchors_with_zero_rest_length_are_a_linear_tether():
    scene = fc.Scene(dt=0.01, integrator="midpoint")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), mass=1.0, position=(0, 0, 1.0), name="mass")
    scene.add_spring("mass", None, anchor_b=(0, 0, 1.0), stiffness=100.0, damping=1.0, rest_length=0.0)
    sim = fc.Simulator(scene)
    sim.run(steps=300)
    z = sim.rigid_pose("mass")[0][2]
    assert np.isfinite(z) and z == pytest.approx(1.0 - G / 100.0, abs=2e-3)   # settles at mg/k below


def test_spring_cylinder_scene_oscillates_with_the_rolling_period():
    """SAP §VI-B (scenes/spring_cylinder.py): m 0.5 kg, R 5 cm, k 100 N/m, μ 1, dt 0.02, midpoint,
    lagged solver, released at rest 0.1 m out: T = 2π √(3m/(2k)) = 0.5441 s within 1%."""
    sim = fc.Simulator(load_scene("spring_cylinder").build(solver="lagged", integrator="midpoint", dt=0.02))
    spec = sim.scene.rigid_bodies[0]
    assert spec.mass == pytest.approx(0.5, rel=1e-9)
    T = 2 * np.pi * np.sqrt(1.5 * 0.5 / 100.0)
    assert T == pytest.approx(0.5441, abs=1e-4)
    assert measured_period(sim, "cylinder", 3.0) == pytest.approx(T, rel=0.01)
    x = sim.rigid_pose("cylinder")[0]
    assert abs(x[0]) <= 0.1 + 1e-6 and abs(x[1]) < 1e-6


def _scene_with_bodies():
    scene = fc.Scene()
    scene.add_rigid_body(fc.shapes.Sphere(0.05), mass=1.0, position=(0, 0, 1), name="r")
    scene.add_rigid_body(fc.shapes.Sphere(0.05), mass=1.0, position=(1, 0, 1), name="s")
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), resolution=1),
                       fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0), position=(3, 0, 0),
                       name="soft")
    return scene


@pytest.mark.parametrize("args, kwargs, message", [
    (("nope", None), dict(anchor_b=(0, 0, 0), stiffness=1.0), "not a body of the scene"),
    (("r", "nope"), dict(stiffness=1.0), "not a body of the scene"),
    (("r", None), dict(anchor_b=(0, 0, 0), stiffness=-1.0), "stiffness"),
    (("r", None), dict(anchor_b=(0, 0, 0), stiffness=1.0, damping=-0.1), "damping"),
    (("r", None), dict(anchor_b=(0, 0, 0), stiffness=float("nan")), "stiffness"),
    (("r", None), dict(anchor_b=(0, 0, 0), stiffness=1.0, rest_length=-0.2), "rest_length"),
    (("r", None), dict(stiffness=1.0), "anchor_b (a world point, m) is required"),
    (("r", "r"), dict(stiffness=1.0), "same body"),
    (("r", "soft"), dict(stiffness=1.0), "is a fem body"),
    ((None, "r"), dict(stiffness=1.0), "body_a must be a body"),
    (("r", "s"), dict(anchor_a=(0, 0), stiffness=1.0), "world point"),
])
def test_bad_springs_are_refused_with_a_clear_error(args, kwargs, message):
    scene = _scene_with_bodies()
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scene.add_spring(*args, **kwargs)


def test_spring_names_are_unique():
    scene = _scene_with_bodies()
    scene.add_spring("r", "s", stiffness=1.0, name="link")
    with pytest.raises(ParameterError, match="already exists"):
        scene.add_spring("r", "s", stiffness=1.0, name="link")


def _spinning_pair_energy_error(dt):
    """Two spinning balls on a pre-stretched spring with off-centre anchors (k 50 N/m, ℓ₀ 0.3 m: it
    stretches and compresses, the anchors swing round): the largest |E − E₀| over 1 s."""
    scene = fc.Scene(solver="cond", dt=dt, gravity=(0, 0, 0), integrator="midpoint")
    scene.add_rigid_body(fc.shapes.Sphere(0.08), density=1000.0, position=(0, 0, 0), velocity=(0.3, 0.1, 0),
                         angular_velocity=(0, 0, 2.0), name="a")
    scene.add_rigid_body(fc.shapes.Sphere(0.1), density=1000.0, position=(0.5, 0.1, 0), velocity=(-0.2, 0, 0.4),
                         name="b")
    scene.add_spring("a", "b", anchor_a=(0.05, 0.02, 0), anchor_b=(0.47, 0.1, 0.02), stiffness=50.0, rest_length=0.3)
    sim = fc.Simulator(scene)
    E0 = sim.energy()["total"]
    err = 0.0
    for _ in range(round(1.0 / dt)):
        sim.step()
        err = max(err, abs(sim.energy()["total"] - E0))
    return err / E0


def test_spring_on_turning_bodies_keeps_the_energy_to_second_order():
    """The spring is linearized about the configuration predicted half a step ahead (levers and
    direction turned with the bodies): the energy error is second order in dt (measured 0.025% at
    dt 0.01, a quarter of that at 0.005; about x_k it was 2% and first order)."""
    coarse, fine = _spinning_pair_energy_error(0.01), _spinning_pair_energy_error(0.005)
    assert coarse < 5e-4
    assert coarse / fine > 3.0

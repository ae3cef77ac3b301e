"""The geometry cache (start-up, issue 28): a hit returns the very arrays the computation made, any
changed input changes the key, an entry that is not intact is recomputed; and what it serves on a
warm start: a robot's meshes, SDF grids, URDF description and IK paths equal the computed ones.

Known answers: bit-for-bit equality with the recomputation; the IK chain's pose against
``Robot.forward_kinematics`` and its Jacobian against central differences of that pose."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import geometry_cache as gc
from tests.helpers.scenes_util import needs_panda


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEMCONTACT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "geometry"


def _counted(arrays):
    calls = []

    def compute():
        calls.append(1)
        return arrays
    return compute, calls


def test_a_hit_returns_the_computed_arrays_bit_for_bit(cache):
    rng = np.random.default_rng(1)
    made = {"grid": rng.normal(size=(5, 6, 7)), "faces": rng.integers(0, 99, (11, 3)), "flag": np.array(True),
            "text": np.array("{\"a\": 1}")}
    compute, calls = _counted(made)
    key = gc.content_key("test", 1, made["grid"])
    first = gc.cached("t", key, list(made), compute)
    again = gc.cached("t", key, list(made), compute)
    assert len(calls) == 1 and list(cache.glob("t-*.npz")) == [gc.entry_path("t", key)]
    for name, value in made.items():
        assert again[name].dtype == value.dtype and again[name].shape == value.shape
        np.testing.assert_array_equal(again[name], value)
        np.testing.assert_array_equal(first[name], value)
    assert not list(cache.glob(".*tmp*"))          # the atomic write left no temporary file


def test_any_changed_input_changes_the_key():
    a = np.arange(12.0).reshape(4, 3)
    base = gc.content_key(1, "mesh", a, b"file bytes", 24)
    assert base == gc.content_key(1, "mesh", a.copy(), b"file bytes", 24)
    b = a.copy()
    b[2, 1] = np.nextafter(b[2, 1], np.inf)             # one ulp in one value
    changed = [gc.content_key(2, "mesh", a, b"file bytes", 24),          # code version
               gc.content_key(1, "mesh", b, b"file bytes", 24),
               gc.content_key(1, "mesh", a.reshape(3, 4), b"file bytes", 24),     # shape
               gc.content_key(1, "mesh", a.astype(np.float32), b"file bytes", 24),  # dtype
               gc.content_key(1, "mesh", a, b"file bytez", 24),          # input bytes
               gc.content_key(1, "mesh", a, b"file bytes", 25),          # parameter
               gc.content_key(1, "mesh", a, b"file bytes", 24.0),        # its type
               gc.content_key(1, "mesh", a, "file bytes", 24),           # str is not bytes
               gc.content_key(1, "mesh", a, b"file bytes", (24,))]       # nesting
    assert len({base, *changed}) == len(changed) + 1


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "other key", "missing array"])
def test_an_entry_that_is_not_intact_is_recomputed(cache, damage):
    made = {"grid": np.linspace(0.0, 1.0, 1000).reshape(10, 100), "dims": np.array([10, 100])}
    compute, calls = _counted(made)
    key = gc.content_key("damaged", damage)
    gc.cached("t", key, list(made), compute)
    path = gc.entry_path("t", key)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":           # same length, bytes flipped inside the arrays' data (CRC fails)
        raw = bytearray(data)
        for i in range(200, len(raw) - 200, 97):
            raw[i] ^= 0x5A
        path.write_bytes(bytes(raw))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "other key":         # an intact entry of another key under this name
        other = gc.content_key("another")
        gc.store("t", other, {k: v + 1 for k, v in made.items()})
        gc.entry_path("t", other).replace(path)
    else:
        gc.store("t", key, {"grid": made["grid"]})
    assert gc.load("t", key, list(made)) is None
    again = gc.cached("t", key, list(made), compute)
    assert len(calls) == 2
    np.testing.assert_array_equal(again["grid"], made["grid"])
    np.testing.assert_array_equal(gc.load("t", key, list(made))["grid"], made["grid"])   # rewritten whole


def test_a_changed_mesh_misses_the_sdf_cache(cache):
    from femcontact.robots.urdf import triangle_mesh

    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float) * 0.1
    f = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    first = triangle_mesh(v, f, resolution=8)
    grid = first.grid.copy()                       # sampled (background) and stored
    hit = triangle_mesh(v, f, resolution=8)
    np.testing.assert_array_equal(hit.grid, grid)
    np.testing.assert_array_equal(grid, fc.shapes.TriangleMesh(v, f, resolution=8).grid)
    moved = v.copy()
    moved[3, 2] = 0.12
    other = triangle_mesh(moved, f, resolution=8)
    np.testing.assert_array_equal(other.grid, fc.shapes.TriangleMesh(moved, f, resolution=8).grid)
    assert len(list(cache.glob("sdf-*.npz"))) == 2


@needs_panda
def test_a_warm_panda_load_reads_what_a_cold_one_computed(cache, monkeypatch):
    """Cold, then warm from the cache: the same bodies (meshes, grids, masses, poses), link meshes and
    IK path, bit for bit, and the warm load parses no URDF and computes no mesh or path."""
    pytest.importorskip("yourdfpy")
    from femcontact.robots import description, ik

    def build():
        scene = fc.Scene()
        robot = scene.add_robot("panda")
        fk = robot.forward_kinematics()["panda_hand_tcp"]
        path = robot.cartesian_path("panda_hand_tcp", lambda t: (fk[:3, 3] + [0.05 * t, 0.0, -0.1 * t], fk[:3, :3]),
                                    duration=0.5)
        return scene, robot, path

    cold_scene, cold_robot, cold_path = build()
    assert cold_path.error < 1e-6
    for name in ("_parse", "_solve"):
        monkeypatch.setattr(description if name == "_parse" else ik, name,
                            lambda *a, name=name, **k: pytest.fail(f"{name} ran on a warm load"))
    warm_scene, warm_robot, warm_path = build()
    np.testing.assert_array_equal(warm_path.q, cold_path.q)
    assert warm_path.error == cold_path.error
    for a, b in zip(cold_scene.rigid_bodies, warm_scene.rigid_bodies):
        assert (a.name, a.mass) == (b.name, b.mass)
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.inertia, b.inertia)
        if isinstance(a.shape, fc.shapes.TriangleMesh):
            for attr in ("vertices", "faces", "origin", "dims", "grid"):
                np.testing.assert_array_equal(getattr(a.shape, attr), getattr(b.shape, attr))
    cold_meshes, warm_meshes = cold_robot.link_meshes(), warm_robot.link_meshes()
    assert sorted(cold_meshes) == sorted(warm_meshes) and len(warm_meshes) == 11
    for link, (v, f, source) in cold_meshes.items():
        np.testing.assert_array_equal(warm_meshes[link][0], v)
        np.testing.assert_array_equal(warm_meshes[link][1], f)


@needs_panda
def test_the_ik_chain_matches_forward_kinematics_and_its_jacobian_the_differences():
    from femcontact.robots.ik import KinematicChain

    robot = fc.Scene().add_robot("panda", base_pose=((0.1, -0.2, 0.3), (0.9, 0.1, 0.3, 0.2)))
    rng = np.random.default_rng(5)
    point = np.array([0.01, -0.02, 0.03])
    for link in ("panda_hand_tcp", "panda_rightfinger", "panda_link4"):
        chain = KinematicChain(robot, link)
        for _ in range(3):
            x = np.array([robot.q0[j] for j in robot.joints]) + rng.uniform(-0.4, 0.4, 8)
            x[7] = 0.02                                     # the finger (prismatic) inside its limits
            p, R, J = chain.pose_and_jacobian(x, point)
            T = robot.forward_kinematics(x)[link]
            np.testing.assert_allclose(R, T[:3, :3], rtol=0, atol=1e-13)
            np.testing.assert_allclose(p, T[:3, :3] @ point + T[:3, 3], rtol=0, atol=1e-13)
            h = 1e-6
            for c in range(len(x)):
                dx = np.zeros(len(x))
                dx[c] = h
                (pp, Rp, _), (pm, Rm, _) = chain.pose_and_jacobian(x + dx, point), chain.pose_and_jacobian(x - dx, point)
                np.testing.assert_allclose(J[:3, c], (pp - pm) / (2 * h), rtol=0, atol=1e-8)
                W = (Rp - Rm) / (2 * h) @ R.T                  # the angular velocity's skew matrix
                np.testing.assert_allclose(J[3:, c], [W[2, 1], W[0, 2], W[1, 0]], rtol=0, atol=1e-8)


def test_rotation_vector_agrees_with_scipy_at_every_angle():
    from scipy.spatial.transform import Rotation

    from femcontact.robots.ik import rotation_vector

    rng = np.random.default_rng(2)
    for angle in (0.0, 1e-9, 1e-4, 0.5, 2.0, 3.1, np.pi - 1e-7):
        for _ in range(20):
            axis = rng.normal(size=3)
            v = angle * axis / np.linalg.norm(axis)
            np.testing.assert_allclose(rotation_vector(Rotation.from_rotvec(v).as_matrix()), v, rtol=0, atol=2e-9)

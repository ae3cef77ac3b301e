"""Checkpoints: a run saved at step 12 and resumed in a fresh Simulator continues bit for bit.

Bit for bit needs a deterministic run (``FEMCONTACT_DETERMINISTIC=1``: one CPU thread; with
threads, two uninterrupted runs already differ in round-off), so the comparison runs in a child
process in that mode: ``python tests/io/test_checkpoint.py OUT.json SOLVER...``.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import femcontact as fc
from femcontact.errors import ParameterError


def _scene(solver: str) -> fc.Scene:
    """FEM, rigid and rod bodies, a velocity drive, a position drive and a kinematic obstacle, all in
    contact: every kind of per-step memory a resumed run needs."""
    scene = fc.Scene(dt=1e-2, solver=solver, integrator="euler")
    cube = scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=3), fc.Material(1e5, 0.4, 1000.0),
                              position=(0, 0, 0.051), name="cube")
    cube.drive("z > 0.0999", velocity=lambda t: (0.05, 0.0, 0.0))
    bar = scene.add_fem_body(fc.meshes.box((0.2, 0.02, 0.02), resolution=(6, 1, 1)),
                             fc.Material(1e6, 0.3, 1000.0), position=(0.3, 0, 0.2), name="bar")
    bar.drive("x < 0.201", position=lambda t, x0: x0 + np.array([0.0, 0.0, -0.02 * t]))
    scene.add_rigid_body(fc.shapes.Sphere(0.02), density=1000.0, position=(-0.15, 0, 0.02),
                         velocity=(0.3, 0, 0), name="ball")
    scene.add_rod(fc.meshes.rod_straight((-0.1, 0.1, 0.005), (0.1, 0.1, 0.005), 8), radius=0.004,
                  material=fc.Material(2.954e6, 0.49, 1200.0), name="cable")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.5, name="ground")
    scene.add_obstacle(fc.shapes.Box(half_extents=(0.01, 0.05, 0.05)), name="pusher",
                       motion=lambda t: ((-0.3 + 0.2 * t, 0.0, 0.05), None))
    return scene


def _snapshot(sim: fc.Simulator) -> list[np.ndarray]:
    s = sim.state
    return [s.x.to_numpy(), s.v.to_numpy(), s.q.to_numpy(), s.v_hat.to_numpy()]


def _compare_resumed(solver: str, folder: Path) -> dict:
    """Run 24 steps; run 12, save, resume in a fresh Simulator, run 12; compare."""
    whole = fc.Simulator(_scene(solver))
    whole.run(steps=24)
    first = fc.Simulator(_scene(solver))
    first.run(steps=12)
    path = first.save_checkpoint(folder / f"{solver}")
    resumed = fc.Simulator(_scene(solver))
    resumed.load_checkpoint(path)
    at = (resumed.state.step, resumed.state.time == first.state.time)
    resumed.run(steps=12)
    diff = [float(np.abs(a - b).max()) for a, b in zip(_snapshot(whole), _snapshot(resumed))]
    return {"identical": all(np.array_equal(a, b) for a, b in zip(_snapshot(whole), _snapshot(resumed))),
            "max_diff": diff, "resumed_at": at, "path": path.name, "temporaries": len(list(folder.glob(".*tmp*"))),
            "contacts": max(st.contacts for st in whole.stats), "time_equal": whole.state.time == resumed.state.time,
            "iterations_equal": [st.iterations for st in whole.stats[12:]] == [st.iterations for st in resumed.stats]}


@pytest.mark.parametrize("solvers", [("cond", "lagged"),        # one of each family in CI; the rest slow
                                     pytest.param(("sap", "pgs", "incp"), marks=pytest.mark.slow)])
def test_resume_is_bit_identical(tmp_path, solvers):
    env = {**os.environ, "FEMCONTACT_DETERMINISTIC": "1", "FEMCONTACT_ARCH": "cpu"}
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, __file__, str(out), *solvers], env=env, check=True, timeout=1200)
    result = json.loads(out.read_text())
    for solver in solvers:
        r = result[solver]
        assert r["contacts"] > 0 and r["resumed_at"] == [12, True]
        assert r["path"] == f"{solver}.npz" and r["temporaries"] == 0
        assert r["identical"], f"{solver}: resumed run differs by {r['max_diff']}"
        assert r["time_equal"] and r["iterations_equal"]


def test_checkpoint_of_another_scene_is_refused(tmp_path):
    sim = fc.Simulator(_scene("lagged"))
    path = sim.save_checkpoint(tmp_path / "ck.npz")
    other = fc.Scene(dt=1e-2)
    other.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0), name="cube")
    with pytest.raises(ParameterError, match="not the same scene"):
        fc.Simulator(other).load_checkpoint(path)
    with pytest.raises(ParameterError, match="does not exist"):
        sim.load_checkpoint(tmp_path / "missing.npz")


V1_CHECKPOINT = Path(__file__).with_name("checkpoint_v1.npz")   # written by femcontact before the typed State


def _v1_scene() -> fc.Scene:
    """Every host part a version-1 checkpoint has: node drives, a kinematic body's pose, a hinge's
    angle, stiction anchors, COND's memory (``tests/checkpoint_v1.npz``: 6 steps of it, saved by
    ``Simulator.save_checkpoint`` at commit 6d0a3f2)."""
    scene = fc.Scene(dt=1e-2, solver="cond", integrator="euler")
    cube = scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0),
                              position=(0, 0, 0.051), name="cube")
    cube.drive("z > 0.0999", velocity=lambda t: (0.05, 0.0, 0.0))
    scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, 0.02)), position=(0.3, 0, 0.3), name="slider",
                         motion=lambda t: ((0.3 + 0.1 * t, 0.0, 0.3), None))
    scene.add_rigid_body(fc.shapes.Box((0.01, 0.01, 0.1)), density=1000.0, position=(-0.3, 0, 0.9), name="bar")
    scene.add_joint("hinge", None, "bar", anchor=(-0.3, 0, 1.0), axis=(0, 1, 0), name="hinge")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0, 0, 1)), friction=0.5, name="ground")
    return scene


def test_a_version_1_checkpoint_is_read_into_the_typed_state(tmp_path):
    with np.load(V1_CHECKPOINT) as d:
        v1 = {k: d[k] for k in d.files}
    assert int(v1["version"]) == 1
    sim = fc.Simulator(_v1_scene())
    sim.load_checkpoint(V1_CHECKPOINT)
    s = sim.state
    assert s.step == 6 and s.time == float(v1["time"])
    assert np.array_equal(s.x.to_numpy(), v1["x"]) and np.array_equal(s.v_hat.to_numpy(), v1["v_hat"])
    assert np.array_equal(s.prescribed[0], v1["host/drive0"])
    assert np.array_equal(s.prescribed[1].origin, v1["host/drive1_c"])
    assert np.array_equal(s.prescribed[1].rotation, v1["host/drive1_R"])
    assert np.array_equal(s.joint_angles, v1["host/hinge_angles"])
    anchors = s.anchors.memory()
    assert len(anchors["keys"]) > 0
    for new, old in (("keys", "anchor_keys"), ("points", "anchor_points"), ("values", "anchor_slip")):
        assert np.array_equal(anchors[new], v1[f"host/{old}"])
    solver = sim.contact_solver.memory()
    for key in ("tr", "rs", "l1", "lambdas", "virtual_velocities"):
        assert np.array_equal(solver[key], v1[f"solver/{key}"])
    again = np.load(sim.save_checkpoint(tmp_path / "v2.npz"))      # written back as version 2, same values
    assert int(again["version"]) == 2 and np.array_equal(again["prescribed/1/rotation"], v1["host/drive1_R"])
    sim.run(steps=2)
    assert sim.state.step == 8


def test_a_checkpoint_of_an_unknown_version_is_refused(tmp_path):
    path = tmp_path / "future.npz"
    np.savez(path, version=np.int64(99), x=np.zeros((1, 3)))
    with pytest.raises(ParameterError, match="version 1 or 2 .*version 99"):
        fc.Simulator(_scene("lagged")).load_checkpoint(path)


if __name__ == "__main__":
    fc.backend.init()
    assert fc.backend.config()["deterministic"], "run with FEMCONTACT_DETERMINISTIC=1"
    target = Path(sys.argv[1])
    results = {solver: _compare_resumed(solver, target.parent) for solver in sys.argv[2:]}
    target.write_text(json.dumps(results))

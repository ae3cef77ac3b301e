"""femcontact.read / femcontact.plot (femcontact/io/results.py): every frame of a run read back, with
known answers: a rigid sphere resting on the ground carries m g and sticks, a box sliding on it feels
μ m g against its motion and slips, a soft cube's frames hold the positions the Simulator had."""
from __future__ import annotations

import csv
import shutil

import meshio
import numpy as np
import pytest

import femcontact as fc
from femcontact.cli import main
from femcontact.errors import FemcontactError, ParameterError
from femcontact.io.results import RunResults
from femcontact.io.vtk import SeriesWriter

DT, STEPS, EVERY = 1e-2, 40, 5
MU, V0 = 0.5, 1.0
STEPS_HEADER = "step,time,iterations,residual,e_m,contacts,ms_detection,ms_assembly,ms_solve,ms_total"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Three bodies on a half-space, apart: a resting rigid sphere, a rigid box sliding at V0 along -x,
    a soft cube; a frame every EVERY steps; the cube's node positions at each frame's step kept."""
    out = tmp_path_factory.mktemp("results") / "run"
    scene = fc.Scene(solver="cond", dt=DT, friction=MU)
    scene.add_obstacle(fc.shapes.HalfSpace(), name="ground")
    ball = scene.add_rigid_body(fc.shapes.Sphere(0.02), density=1000.0, position=(0, 0, 0.02), name="ball")
    box = scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, 0.01)), density=1000.0, position=(-0.2, 0, 0.01),
                               velocity=(-V0, 0, 0), name="box")
    scene.add_fem_body(fc.meshes.box((0.04, 0.04, 0.04), 2, center=(0.15, 0, 0.021)),
                       material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=500.0,
                                            rayleigh_alpha=5.0), name="cube")
    sim = fc.Simulator(scene)
    cube = {0: sim.body_positions("cube").copy()}

    def keep(s):
        if s.state.step % EVERY == 0:
            cube[s.state.step] = s.body_positions("cube").copy()

    sim.run(steps=STEPS, out=out, every=EVERY, callback=keep, progress=False)
    return {"out": out, "sim": sim, "cube": cube, "m_ball": ball.mass, "m_box": box.mass}


def test_every_frame_with_increasing_times(run):
    res = fc.read(run["out"])
    assert isinstance(res, RunResults) and fc.read is fc.io.results.read
    n = STEPS // EVERY + 1                      # the frame at t = 0 and one every EVERY steps
    assert len(res) == n == len(list(res))
    np.testing.assert_allclose(res.times, DT * EVERY * np.arange(n), rtol=0, atol=1e-12)
    assert np.all(np.diff(res.times) > 0)
    assert [f.time for f in res] == list(res.times)
    assert set(res.pieces) == {"cube", "ball", "box", "ground", "contacts"}
    assert [f.step for f in res] == list(range(0, STEPS + 1, EVERY))     # from the run's steps.csv
    assert res.steps["step"].tolist() == list(range(1, STEPS + 1))
    assert res.steps["iterations"].tolist() == [s.iterations for s in run["sim"].stats]
    assert set(res[-1].meshes) == set(res.pieces)
    assert res.bodies == ["cube", "ball", "box"]
    assert fc.read(run["out"] / "run.pvd").times.tolist() == res.times.tolist()


def test_positions_are_the_simulator_state_at_the_frames(run):
    res = fc.read(run["out"])
    P = res.positions("cube")
    assert P.shape == (len(res), 27, 3)
    for i, step in enumerate(range(0, STEPS + 1, EVERY)):
        np.testing.assert_allclose(P[i], run["cube"][step], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.positions("ball")[-1].mean(0)[:2], 0.0, atol=1e-9)   # rests where it was put


def test_resting_sphere_carries_its_weight_and_sticks(run):
    res = fc.read(run["out"])
    w = run["m_ball"] * 9.81
    F = res.contact_force("ball")
    assert F.shape == (len(res), 3)
    assert np.all(F[0] == 0)                                   # before the first step: no contact yet
    np.testing.assert_allclose(F[-3:], np.tile([0, 0, w], (3, 1)), rtol=1e-4, atol=1e-6 * w)
    counts = res.stick_slip("ball")
    assert counts.shape == (len(res), 2)
    assert np.all(counts[-3:, 0] >= 1) and np.all(counts[-3:, 1] == 0)


def test_sliding_box_feels_mu_m_g_against_its_motion(run):
    """v0 = 1 m/s, μ = 0.5: it slides for v0/(μ g) = 0.2 s; the frames at 0.05, 0.1, 0.15 s slip with
    F = (μ m g, 0, m g) (the friction points along +x, against the motion); from 0.25 s on it sticks
    and the friction is gone."""
    res = fc.read(run["out"])
    w = run["m_box"] * 9.81
    F, counts = res.contact_force("box"), res.stick_slip("box")
    sliding = (res.times > 0) & (res.times < 0.16)
    np.testing.assert_allclose(F[sliding], np.tile([MU * w, 0, w], (sliding.sum(), 1)), rtol=2e-3, atol=1e-6 * w)
    assert np.all(counts[sliding, 1] >= 1) and np.all(counts[sliding, 0] == 0)
    resting = res.times > 0.24
    np.testing.assert_allclose(F[resting], np.tile([0, 0, w], (resting.sum(), 1)), rtol=1e-3, atol=1e-3 * w)
    assert np.all(counts[resting, 1] == 0) and np.all(counts[resting, 0] >= 1)


def test_contact_bodies_in_the_frames_and_totals(run):
    res = fc.read(run["out"])
    c = res[-1].meshes["contacts"]
    assert set(np.asarray(c.point_data["body_a"])) == {-1}          # the ground: side A, the world
    assert set(np.asarray(c.point_data["body_b"])) == {0, 1, 2}       # cube, ball, box
    assert list(c.field_data["body_names"]) == ["cube", "ball", "box"]
    total = res.contact_force()
    np.testing.assert_allclose(total, res.contact_force("ball") + res.contact_force("box") + res.contact_force("cube"),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(res.stick_slip().sum(1), [len(f.meshes["contacts"].points) -
                                                           int((np.asarray(f.meshes["contacts"].point_data["state"]) == 0).sum())
                                                           for f in res])


def test_fields(run):
    res = fc.read(run["out"])
    vm = res.field("cube", "von_mises")
    assert vm.shape == (len(res), run["sim"].model.n_tets)
    np.testing.assert_allclose(vm[-1], run["sim"].von_mises(), rtol=1e-9)
    assert res.field("cube", "displacement").shape == (len(res), 27, 3)
    with pytest.raises(ParameterError, match="von_mises"):
        res.field("cube", "stress")
    with pytest.raises(ParameterError, match="pieces: .*cube"):
        res.positions("nobody")
    with pytest.raises(FemcontactError, match="frame by frame"):
        res.field("contacts", "force")            # 0 contacts at t = 0, more later
    with pytest.raises(ParameterError, match="bodies: .*ball"):
        res.contact_force("nobody")


def test_no_run_is_a_clear_error(tmp_path):
    with pytest.raises(FemcontactError, match="no run.pvd"):
        fc.read(tmp_path)


def test_steps_csv_and_joints_when_present(run, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(run["out"], out)
    (out / "steps.csv").unlink()                # a series without its statistics: later steps unknown
    res = fc.read(out)
    assert res.steps == {} and res[0].step == 0 and res[-1].step is None
    rows = [f"{k},{k * DT!r},3,1e-9,{'' if k == 2 else 1e-3 / k},4,0.1,0.2,0.3,0.7" for k in range(1, STEPS + 1)]
    (out / "steps.csv").write_text(STEPS_HEADER + "\n" + "\n".join(rows) + "\n4")     # a torn last row
    (out / "arm_joints.csv").write_text("time,j1.position,j1.velocity,j1.torque\n0.0,0.1,0.0,nan\n0.05,0.2,1.0,0.5\n")
    res = fc.read(out)
    assert list(res.steps) == STEPS_HEADER.split(",")
    assert len(res.steps["step"]) == STEPS and np.isnan(res.steps["e_m"][1]) and res.steps["e_m"][0] == 1e-3
    assert [f.step for f in res] == list(range(0, STEPS + 1, EVERY))
    j = res.joints("arm")
    np.testing.assert_array_equal(j["j1.position"], [0.1, 0.2])
    assert np.isnan(j["j1.torque"][0])
    with pytest.raises(ParameterError, match="robots with joint output: arm"):
        res.joints("panda")

    fig = fc.plot(out, contacts="box", path=tmp_path / "box.png")
    assert len(fig.axes) == 3                                   # force, stick/slip, e_m
    assert (tmp_path / "box.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fz = [line for line in fig.axes[0].lines if line.get_label() == "$F_z$"][0]
    np.testing.assert_allclose(fz.get_ydata(), res.contact_force("box")[:, 2])
    assert "e_m" in fig.axes[2].get_ylabel()


def test_plot_without_steps_and_the_cli(run, tmp_path, capsys):
    fig = fc.plot(run["out"], contacts="ball")
    assert len(fig.axes) == 3                                   # COND reports e_m on every step (issue 32): e_m panel
    assert "e_m" in fig.axes[2].get_ylabel()
    no_em = tmp_path / "no_em"                                  # a run whose solver reported no e_m: no e_m panel
    shutil.copytree(run["out"], no_em)
    with open(no_em / "steps.csv") as f:
        table = list(csv.reader(f))
    k = table[0].index("e_m")
    (no_em / "steps.csv").write_text("\n".join(",".join(r[:k] + [""] + r[k + 1:] if i else r)
                                               for i, r in enumerate(table)) + "\n")
    assert len(fc.plot(no_em, contacts="ball").axes) == 2
    assert "ball" in fig.axes[0].get_title()
    stick = [line for line in fig.axes[1].lines if line.get_label() == "stick"][0]
    np.testing.assert_array_equal(stick.get_ydata(), fc.read(run["out"]).stick_slip("ball")[:, 0])
    assert main(["plot", str(run["out"]), "--contacts", "box", "--save", str(tmp_path / "b.pdf")]) == 0
    assert (tmp_path / "b.pdf").read_bytes()[:4] == b"%PDF"
    assert str(tmp_path / "b.pdf") in capsys.readouterr().out
    assert main(["plot", str(run["out"]), "--contacts", "nobody", "--save", str(tmp_path / "c.png")]) == 1
    assert "nobody" in capsys.readouterr().err and not (tmp_path / "c.png").exists()
    assert main(["plot", str(tmp_path / "empty"), "--save", str(tmp_path / "d.png")]) == 1
    assert "no run.pvd" in capsys.readouterr().err


def test_series_without_contact_bodies(tmp_path):
    """A series written before contacts recorded their bodies: totals still read, a body's force refused."""
    with SeriesWriter(tmp_path) as w:
        for k in range(2):
            pts = np.zeros((k, 3))
            w.write(0.1 * k, {"contacts": meshio.Mesh(pts, [], point_data={"force": np.tile([0, 0, 2.0], (k, 1)),
                                                                              "state": np.full(k, 1, np.int32)})})
    res = fc.read(tmp_path)
    np.testing.assert_array_equal(res.contact_force(), [[0, 0, 0], [0, 0, 2.0]])
    np.testing.assert_array_equal(res.stick_slip(), [[0, 0], [1, 0]])
    with pytest.raises(FemcontactError, match="rerun"):
        res.contact_force("ball")

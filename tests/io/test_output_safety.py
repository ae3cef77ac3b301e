"""Output folders never lose data and output costs little (issue 29, items 2 and 3).

--resume checks that OUT/run.json, OUT/checkpoint.npz and the series belong together; a new run into
a folder holding an earlier one is refused by the Python API as by the CLI, and --overwrite removes
only what the earlier series owns; a run that fails before its first frame leaves no folder; frames
come at the scene's frame_dt (or 50 per simulated second) by default; a background thread writes
them, with every frame handed over written when the loop fails; OUT/steps.csv holds one row per step.
"""
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import pyvista as pv

import femcontact as fc
from femcontact.cli import main
from femcontact.errors import ParameterError, SimulationError
from femcontact.io import vtk
from femcontact.io.background import BackgroundWriter
from femcontact.io.csvlog import STEPS_COLUMNS
from femcontact.io.vtk import read_pvd_entries

ROOT = Path(__file__).resolve().parents[2]
FREE_FALL = str(ROOT / "scenes" / "free_fall.py")
CPU = ["--arch", "cpu", "--no-progress"]
STEPS_HEADER = "step,time,iterations,residual,e_m,contacts,ms_detection,ms_assembly,ms_solve,ms_total,converged"


def _times(out: Path) -> list[float]:
    return list(pv.get_reader(str(out / "run.pvd")).time_values)


def _snapshot(out: Path) -> dict:
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def _cube_scene(density: float = 1000.0, dt: float = 1e-2) -> fc.Scene:
    scene = fc.Scene(dt=dt, gravity=(0.0, 0.0, -9.81))
    scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, density), name="cube")
    return scene


# ---------------------------------------------------------------- --resume checks what it continues
def test_resume_refuses_a_series_that_a_later_run_replaced(tmp_path, capsys):
    """The issue's case: a checkpointed run, a shorter rerun into the same folder (now with --overwrite),
    then --resume: it used to report success over a series of the rerun's 0.03 s (frames every 2nd step)."""
    out = tmp_path / "ff"
    assert main(["run", FREE_FALL, "--steps", "30", "--checkpoint-every", "10", "--out", str(out), *CPU]) == 0
    assert main(["run", FREE_FALL, "--steps", "3", "--out", str(out), "--overwrite", *CPU]) == 0
    before = _snapshot(out)
    capsys.readouterr()
    assert main(["run", FREE_FALL, "--resume", str(out), *CPU]) == 1
    err = capsys.readouterr().err
    assert "does not hold the series the checkpoint continues" in err and "3 frames, t = 0 … 0.03 s" in err
    assert "start a fresh run" in err
    assert _snapshot(out) == before                      # nothing changed by the refused resume
    assert _times(out)[-1] == pytest.approx(0.03)


def test_resume_refuses_a_checkpoint_of_another_run_and_a_changed_scene(tmp_path, capsys):
    scene = tmp_path / "ff.py"
    scene.write_text(Path(FREE_FALL).read_text())
    out = tmp_path / "ff"
    assert main(["run", str(scene), "--steps", "6", "--checkpoint-every", "3", "--out", str(out), *CPU]) == 0
    assert main(["run", str(scene), "--steps", "4", "--checkpoint-every", "2", "--out", str(out), "--overwrite",
                 *CPU]) == 0
    run_json = (out / "run.json").read_bytes()
    # the scene script changed since the run: refused
    scene.write_text(Path(FREE_FALL).read_text().replace("density=1000.0", "density=1100.0"))
    capsys.readouterr()
    assert main(["run", str(scene), "--resume", str(out), "--steps", "8", *CPU]) == 1
    err = capsys.readouterr().err
    assert "the scene script" in err and "changed since the run was started" in err
    scene.write_text(Path(FREE_FALL).read_text())
    # run.json of the first run beside the second run's checkpoint: refused
    other = tmp_path / "other.py"
    other.write_text(Path(FREE_FALL).read_text() + "\n# another scene\n")
    assert main(["run", str(other), "--steps", "2", "--checkpoint-every", "1", "--out", str(tmp_path / "o"),
                 *CPU]) == 0
    shutil.copy(tmp_path / "o" / "run.json", out / "run.json")
    capsys.readouterr()
    assert main(["run", str(scene), "--resume", str(out), "--steps", "8", *CPU]) == 1
    assert "belong to different runs" in capsys.readouterr().err
    (out / "run.json").write_bytes(run_json)              # the second run's own: they belong together
    assert main(["run", str(scene), "--resume", str(out), "--steps", "8", *CPU]) == 0
    assert _times(out) == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])


def test_python_resume_refuses_a_series_with_other_frames(tmp_path):
    """Same frame count and times but other bytes (another scene run into the folder): refused."""
    out = tmp_path / "run"
    fc.Simulator(_cube_scene()).run(steps=4, out=out, checkpoint_every=4)
    fc.Simulator(_cube_scene(density=2000.0)).run(steps=4, out=out, overwrite=True)
    sim = fc.Simulator(_cube_scene())
    sim.load_checkpoint(out / "checkpoint.npz")
    before = _snapshot(out)
    with pytest.raises(ParameterError, match="differs from the one the checkpoint was saved after"):
        sim.run(steps=2, out=out, append=True)
    assert _snapshot(out) == before


# ---------------------------------------------------------------- new runs never replace data unasked
def test_python_api_refuses_an_earlier_run_unless_told(tmp_path):
    out = tmp_path / "run"
    fc.Simulator(_cube_scene()).run(steps=3, out=out, every=1)
    before = _snapshot(out)
    with pytest.raises(ParameterError, match=r"holds an earlier run \(run.pvd: 4 frames, t = 0 … 0.03 s\); "
                                             r"nothing was changed.*overwrite=True"):
        fc.Simulator(_cube_scene()).run(steps=1, out=out)
    assert _snapshot(out) == before
    fc.Simulator(_cube_scene()).run(steps=1, out=out, overwrite=True)
    assert _times(out) == pytest.approx([0.0, 0.01])


def test_overwrite_removes_only_what_the_earlier_series_owns(tmp_path):
    out = tmp_path / "run"
    fc.Simulator(_cube_scene()).run(steps=3, out=out, every=1)
    cube = out / "run" / "cube"
    stale = cube / "cube_000004.vtu"                     # a killed run's frame, not yet listed: its own
    shutil.copy(cube / "cube_000000.vtu", stale)
    mine = {out / "notes.txt": b"mine", cube / "notes.txt": b"mine too", out / "run" / "plot.png": b"png",
            out / "run" / "other" / "other_000000.vtu": b"not listed in run.pvd"}
    for path, data in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    fc.Simulator(_cube_scene()).run(steps=1, out=out, every=1, overwrite=True)
    assert {p: p.read_bytes() for p in mine} == mine
    assert sorted(f.name for f in cube.glob("cube_*.vtu")) == ["cube_000000.vtu", "cube_000001.vtu"]
    assert not stale.exists()
    # a file the series does not own where a frame would go: refused, not replaced
    foreign = tmp_path / "f"
    (foreign / "run" / "cube").mkdir(parents=True)
    (foreign / "run" / "cube" / "cube_000000.vtu").write_bytes(b"somebody's")
    with pytest.raises(ParameterError, match="not listed in run.pvd; this run does not replace a file"):
        fc.Simulator(_cube_scene()).run(steps=1, out=foreign)
    assert (foreign / "run" / "cube" / "cube_000000.vtu").read_bytes() == b"somebody's"


FAILING = '''
import femcontact as fc

def build():
    return 42      # not a Scene: the run fails before its first frame
'''


def test_a_run_that_fails_before_its_first_frame_leaves_no_folder(tmp_path, capsys):
    scene = tmp_path / "failing.py"
    scene.write_text(FAILING)
    out = tmp_path / "deep" / "er" / "out"
    assert main(["run", str(scene), "--steps", "2", "--out", str(out), *CPU]) == 1
    assert "not a femcontact.Scene" in capsys.readouterr().err
    assert not (tmp_path / "deep").exists()
    assert main(["run", FREE_FALL, "--steps", "1", "--out", str(out), *CPU]) == 0   # made by the run
    assert (out / "run.pvd").is_file()


# ---------------------------------------------------------------- output that costs little
def test_frames_default_to_the_scene_frame_dt_else_50_per_second(tmp_path):
    fc.Simulator(_cube_scene(dt=1e-3)).run(steps=45, out=tmp_path / "a")
    assert _times(tmp_path / "a") == pytest.approx([0.0, 0.02, 0.04, 0.045])      # and the last step
    fc.Simulator(_cube_scene(dt=1e-3)).run(steps=3, out=tmp_path / "b", every=1)
    assert len(_times(tmp_path / "b")) == 4
    scene = _cube_scene(dt=1e-3)
    scene.frame_dt = 5e-3
    fc.Simulator(scene).run(steps=10, out=tmp_path / "c")
    assert _times(tmp_path / "c") == pytest.approx([0.0, 0.005, 0.01])
    fc.Simulator(_cube_scene(dt=0.05)).run(steps=2, out=tmp_path / "d")           # never fewer than one per step
    assert len(_times(tmp_path / "d")) == 3
    fc.Simulator(_cube_scene(dt=0.01)).run(steps=5, out=tmp_path / "e")           # every 2nd step at dt 10 ms
    assert _times(tmp_path / "e") == pytest.approx([0.0, 0.02, 0.04, 0.05])


def test_cli_every_1_still_writes_every_step(tmp_path):
    out = tmp_path / "ff"
    assert main(["run", FREE_FALL, "--steps", "25", "--dt", "1e-3", "--out", str(out), *CPU]) == 0
    assert _times(out) == pytest.approx([0.0, 0.02, 0.025])
    assert main(["run", FREE_FALL, "--steps", "3", "--dt", "1e-3", "--every", "1", "--out", str(out),
                 "--overwrite", *CPU]) == 0
    assert len(_times(out)) == 4


def test_steps_csv_has_one_row_per_step_and_resume_drops_the_later_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("FEMCONTACT_TEST_BODY", "rigid")
    scene = str(ROOT / "tests/helpers/resume_scene.py")
    out = tmp_path / "r"
    assert main(["run", scene, "--solver", "sap", "--steps", "4", "--checkpoint-every", "4", "--every", "2",
                 "--out", str(out), *CPU]) == 0
    shutil.copy(out / "checkpoint.npz", tmp_path / "at4.npz")
    assert main(["run", scene, "--resume", str(out), "--steps", "7", *CPU]) == 0
    os.replace(tmp_path / "at4.npz", out / "checkpoint.npz")      # as if killed after step 7, before its checkpoint
    assert main(["run", scene, "--resume", str(out), "--steps", "8", *CPU]) == 0
    lines = (out / "steps.csv").read_text().splitlines()
    assert lines[0] == STEPS_HEADER == ",".join(STEPS_COLUMNS)
    rows = [line.split(",") for line in lines[1:]]
    assert [int(r[0]) for r in rows] == list(range(1, 9))         # each step once, resumed rows dropped
    assert [float(r[1]) for r in rows] == pytest.approx([0.01 * k for k in range(1, 9)])
    assert all(len(r) == 11 for r in rows) and all(r[10] in ("0", "1") for r in rows)
    contact = [r for r in rows if int(r[5]) > 0]
    assert contact and all(float(r[4]) >= 0.0 for r in contact)   # sap reports its momentum error e_m
    assert _times(out) == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])


def test_steps_csv_e_m_is_empty_where_the_solver_reports_none(tmp_path):
    sim = fc.Simulator(_cube_scene())
    sim.run(steps=2, out=tmp_path / "a")
    rows = [line.split(",") for line in (tmp_path / "a" / "steps.csv").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == ["1", "2"] and [r[4] for r in rows] == ["", ""]
    assert sim.stats[-1].e_m is None


def test_an_exception_in_the_loop_leaves_every_frame_handed_over_written(tmp_path, monkeypatch):
    real = vtk._write_dataset

    def slow(ds, path, compress):                  # a slow disk: the frames wait in the writer's queue
        time.sleep(0.05)
        real(ds, path, compress)

    monkeypatch.setattr(vtk, "_write_dataset", slow)

    def interrupt(sim):
        if sim.state.step == 6:
            raise KeyboardInterrupt

    sim = fc.Simulator(_cube_scene())
    with pytest.raises(KeyboardInterrupt):
        sim.run(steps=20, out=tmp_path / "k", every=1, callback=interrupt)
    out = tmp_path / "k"
    entries = read_pvd_entries(out / "run.pvd")
    assert [round(e["time"], 9) for e in entries] == [round(0.01 * k, 9) for k in range(6)]
    for e in entries:
        assert pv.read(str(e["file"])).n_points == 27
    rows = (out / "steps.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == list(range(1, 7))


def test_a_writer_error_stops_the_run_with_its_message(tmp_path, monkeypatch):
    def failing(ds, path, compress):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vtk, "_write_dataset", failing)
    with pytest.raises(SimulationError, match="frame of step 0 .*No space left on device"):
        fc.Simulator(_cube_scene()).run(steps=10, out=tmp_path / "x", every=1)


def test_background_writer_is_bounded_in_order_and_raises_in_the_caller():
    gate, done, waiting = threading.Event(), [], []
    w = BackgroundWriter(depth=2)
    w.submit(lambda: (gate.wait(10), done.append(0)))
    time.sleep(0.05)                                   # job 0 running, blocked on the gate
    w.submit(lambda: done.append(1))
    w.submit(lambda: done.append(2))                   # the queue is full now
    t = threading.Thread(target=lambda: (w.submit(lambda: done.append(3)), waiting.append("in")))
    t.start()
    time.sleep(0.2)
    assert waiting == []                               # back-pressure: the 4th submit waits
    gate.set()
    t.join(10)
    w.flush()
    assert done == [0, 1, 2, 3] and waiting == ["in"]

    def boom():
        raise OSError("disk gone")

    w.submit(boom)
    with pytest.raises(OSError, match="disk gone"):
        w.flush()
    w.submit(lambda: done.append(4))
    w.close()                                          # raised once, in the caller; later jobs skipped
    assert 4 not in done
    assert w.busy_s >= 0.0 and np.isfinite(w.busy_s)

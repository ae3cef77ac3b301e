"""Faults never lose data: SIGKILL at a random moment, an unusable output folder, a diverging run, a failing disk."""
import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import pyvista as pv

import femcontact as fc
from femcontact.errors import ParameterError, SimulationError
from femcontact.io import vtk
from femcontact.io.vtk import check_output_dir, read_pvd_entries

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "tests/helpers/resume_scene.py"
ENV = {**os.environ, "FEMCONTACT_ARCH": "cpu", "FEMCONTACT_DETERMINISTIC": "1", "FEMCONTACT_TEST_BODY": "fem",
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _readable_frames(out: Path) -> int:
    """Open the series the way a user would; every listed file must load with points. Returns the frame count."""
    entries = read_pvd_entries(out / "run.pvd")
    for e in entries:
        assert e["file"].is_file(), f"{e['file']} is listed but missing"
        assert pv.read(str(e["file"])).n_points > 0 or e["name"] == "contacts"
    times = pv.get_reader(str(out / "run.pvd")).time_values
    assert list(times) == sorted(set(times))
    return len(times)


def test_sigkill_at_a_random_moment_leaves_a_readable_series_that_resumes_bit_for_bit(tmp_path):
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    cmd = [sys.executable, "-m", "femcontact", "run", str(SCENE), "--steps", "40", "--every", "1",
           "--checkpoint-every", "5", "--no-progress"]
    out = tmp_path / "killed"
    proc = subprocess.Popen(cmd + ["--out", str(out)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not (out / "checkpoint.npz").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.4))              # somewhere in the stepping and frame writing
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    frames = _readable_frames(out)
    assert frames >= 6, f"seed {seed}: only {frames} frames after the first checkpoint"
    on_disk = {f.name for f in (out / "run" / "cube").glob("cube_*.vtu")}
    assert len(on_disk) - frames in (0, 1), f"seed {seed}: {len(on_disk)} frame files, {frames} listed"
    # resumed, the series is the uninterrupted one, file for file
    resumed = subprocess.run([sys.executable, "-m", "femcontact", "run", str(SCENE), "--resume", str(out),
                              "--no-progress"], env=ENV, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    whole = tmp_path / "whole"
    subprocess.run(cmd + ["--out", str(whole)], env=ENV, check=True, capture_output=True, timeout=300)
    assert _readable_frames(out) == 41
    for f in sorted(whole.rglob("*.vt?")) + [whole / "run.pvd"]:
        g = out / f.relative_to(whole)
        assert g.read_bytes() == f.read_bytes(), f"seed {seed}: {f.relative_to(whole)} differs after resume"
    assert not list(out.rglob(".*tmp*")), "temporary files left behind"


def test_unusable_output_folder_is_refused_before_the_run_starts(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "femcontact", "run", str(SCENE), "--steps", "3", "--out",
                           str(blocker / "out"), "--no-progress"], env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert "output folder" in proc.stderr and "cannot be created" in proc.stderr and "--out" in proc.stderr
    assert "compiling" not in proc.stdout and "Traceback" not in proc.stderr      # before the scene is built
    with pytest.raises(ParameterError, match="is a file, not a folder"):
        check_output_dir(blocker)
    with pytest.raises(ParameterError, match="MiB free"):
        check_output_dir(tmp_path / "ok", min_free=2**62)                         # a full disk
    assert check_output_dir(tmp_path / "ok") == tmp_path / "ok" and not list((tmp_path / "ok").iterdir())
    if os.geteuid() != 0:                                                         # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(ParameterError, match="not writable|cannot be created"):
            check_output_dir(ro)
    assert time.monotonic() - t0 < 120


DIVERGING = '''
import femcontact as fc

def build():
    scene = fc.Scene(dt=1e-2, gravity=(0, 0, -9.81), duration=0.2)
    cube = scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0), name="cube")
    cube.drive("z > 0.049", velocity=lambda t: (0.0, 0.0, 0.0 if t < 0.052 else 1e5))   # a jump: diverges
    return scene
'''


def test_diverging_run_stops_with_its_message_and_keeps_its_frames(tmp_path):
    scene = tmp_path / "diverging.py"
    scene.write_text(DIVERGING)
    out = tmp_path / "div"
    proc = subprocess.run([sys.executable, "-m", "femcontact", "run", str(scene), "--out", str(out),
                           "--checkpoint-every", "2", "--every", "1", "--no-progress"], env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and "diverged" in proc.stderr and "Frames written so far are intact" in proc.stderr
    assert _readable_frames(out) == 6                     # t = 0, 0.01, ..., 0.05: every step before the jump
    with np.load(out / "checkpoint.npz") as ck:
        assert int(ck["step"]) == 4


def test_a_failing_disk_mid_run_stops_with_a_clear_message(tmp_path, monkeypatch):
    real, calls = vtk._write_dataset, []

    def failing(ds, path, compress):
        calls.append(path)
        if len(calls) > 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(ds, path, compress)

    monkeypatch.setattr(vtk, "_write_dataset", failing)
    scene = fc.Scene(dt=1e-2)
    scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), fc.Material(1e5, 0.4, 1000.0), name="cube")
    with pytest.raises(SimulationError, match="No space left on device.*Frames written before are intact"):
        fc.Simulator(scene).run(steps=10, out=tmp_path / "full", every=1)
    assert _readable_frames(tmp_path / "full") == 4          # t = 0 and steps 1-3; the 5th file failed

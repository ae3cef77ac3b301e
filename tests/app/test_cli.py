"""The femcontact command as a user runs it."""
import subprocess
import sys
from pathlib import Path

import pytest
import pyvista as pv

from femcontact.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_help_explains_every_option(capsys):
    for argv in (["--help"], ["run", "--help"]):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0
    out = capsys.readouterr().out
    for option in ("--out", "--duration", "--steps", "--dt", "--arch", "--precision", "--every"):
        assert option in out


def test_run_free_fall_scene_from_the_shell(tmp_path):
    out = tmp_path / "ff"
    proc = subprocess.run([sys.executable, "-m", "femcontact", "run", str(ROOT / "scenes" / "free_fall.py"),
                           "--steps", "5", "--every", "1", "--out", str(out), "--arch", "cpu", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DOF" in proc.stdout and "run.pvd" in proc.stdout
    reader = pv.get_reader(str(out / "run.pvd"))
    assert len(reader.time_values) == 6


def test_a_folder_holding_an_earlier_run_is_refused_not_overwritten(capsys, tmp_path):
    """Running twice into one --out (the default out/<scene> does that) used to delete the first run's
    frames; now the second run is refused with nothing changed, and --overwrite replaces it."""
    scene, out = str(ROOT / "scenes" / "free_fall.py"), tmp_path / "ff"
    assert main(["run", scene, "--steps", "3", "--every", "1", "--out", str(out), "--arch", "cpu", "--no-progress"]) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["run", scene, "--steps", "1", "--out", str(out), "--arch", "cpu", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "holds an earlier run (run.pvd: 4 frames, t = 0 … 0.03 s); nothing was changed" in err
    assert "--overwrite" in err and f"--resume {out}" in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    assert main(["run", scene, "--steps", "1", "--every", "1", "--out", str(out), "--arch", "cpu", "--no-progress",
                 "--overwrite"]) == 0
    assert len(pv.get_reader(str(out / "run.pvd")).time_values) == 2


def test_missing_scene_is_a_clear_error(capsys, tmp_path):
    assert main(["run", str(tmp_path / "nope.py"), "--arch", "cpu"]) == 1
    assert "not found" in capsys.readouterr().err


HELD_BOX = '''
import femcontact as fc


def build():
    """A rigid box pushed at 0.7 mu m g: Coulomb friction holds it where it is."""
    scene = fc.Scene(dt=1e-2, solver="lagged", integrator="euler", duration=1.0, name="held_box")
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5, name="ground")
    box = scene.add_rigid_body(fc.shapes.Box((0.05, 0.05, 0.05)), mass=1.0, position=(0, 0, 0.05), name="box")
    box.add_force(lambda t: (0.7 * 0.5 * 9.81, 0.0, 0.0))
    return scene
'''


def test_stiction_option_chooses_between_anchored_and_regularized_friction(tmp_path, capsys):
    """--stiction overrides the scene's: the regularized law lets the held box creep (Lagged: about 1e-6 m
    per step), the anchored one takes the slip back; a resumed run keeps the stiction it started with."""
    scene = tmp_path / "held_box.py"
    scene.write_text(HELD_BOX)
    travel = {}
    for mode in ("regularized", "anchored"):
        out = tmp_path / mode
        assert main(["run", str(scene), "--steps", "100", "--every", "50", "--stiction", mode, "--out", str(out),
                     "--arch", "cpu", "--no-progress", "--checkpoint-every", "100"]) == 0
        assert f"stiction {mode}" in capsys.readouterr().out
        x = [pv.read(out / "run" / "box" / f"box_00000{i}.vtp").points[:, 0].mean() for i in (1, 2)]
        travel[mode] = x[1] - x[0]                # over the last 50 steps, after the box settled
    assert 2e-5 < travel["regularized"] < 1e-3
    assert abs(travel["anchored"]) < 1e-9
    assert main(["run", str(scene), "--resume", str(tmp_path / "anchored"), "--stiction", "regularized",
                 "--arch", "cpu"]) == 1
    assert "--stiction" in capsys.readouterr().err


PARAM_BOX = '''
import femcontact as fc


def build(height: float = 1.0, size: float = 0.05, name: str = "box"):
    """A rigid box at the given height, falling freely."""
    scene = fc.Scene(dt=1e-2, solver="lagged", integrator="euler", duration=1.0, name="param_box")
    scene.add_rigid_body(fc.shapes.Box((size, size, size)), mass=1.0, position=(0, 0, height), name=name)
    return scene
'''


def test_param_passes_keyword_arguments_to_build(tmp_path, capsys):
    """--param NAME=VALUE (repeatable) reaches build() as sweep's --param does: numbers and words."""
    scene = tmp_path / "param_box.py"
    scene.write_text(PARAM_BOX)
    out = tmp_path / "high"
    assert main(["run", str(scene), "--steps", "1", "--out", str(out), "--arch", "cpu", "--no-progress",
                 "--param", "height=2.5", "--param", "name=crate"]) == 0
    first = pv.read(out / "run" / "crate" / "crate_000000.vtp")
    assert first.points[:, 2].mean() == pytest.approx(2.5, abs=1e-9)


def test_param_errors_name_what_build_accepts(tmp_path, capsys):
    scene = tmp_path / "param_box.py"
    scene.write_text(PARAM_BOX)
    base = ["run", str(scene), "--steps", "1", "--arch", "cpu", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a"), "--param", "heigth=2"]) == 1
    err = capsys.readouterr().err
    assert "'heigth' is not a keyword of build()" in err and "height, size, name" in err
    assert main([*base, "--out", str(tmp_path / "b"), "--param", "height=1,2"]) == 1
    err = capsys.readouterr().err
    assert "a run takes one value" in err and "femcontact sweep" in err
    assert main([*base, "--out", str(tmp_path / "c"), "--param", "height"]) == 1
    assert "must be NAME=VALUES" in capsys.readouterr().err


def test_a_resumed_run_keeps_its_build_parameters(tmp_path, capsys):
    scene = tmp_path / "param_box.py"
    scene.write_text(PARAM_BOX)
    out = tmp_path / "ck"
    assert main(["run", str(scene), "--steps", "2", "--out", str(out), "--arch", "cpu", "--no-progress",
                 "--checkpoint-every", "1", "--param", "height=3"]) == 0
    assert main(["run", str(scene), "--resume", str(out), "--param", "height=4", "--arch", "cpu"]) == 1
    assert "--param" in capsys.readouterr().err
    assert main(["run", str(scene), "--resume", str(out), "--steps", "3", "--arch", "cpu", "--no-progress"]) == 0
    last = pv.read(sorted((out / "run" / "box").glob("box_*.vtp"))[-1])
    assert last.points[:, 2].mean() == pytest.approx(3.0 - 9.81 * 0.01**2 * (1 + 2 + 3), abs=1e-9)  # Euler, from 3 m


def test_negative_option_values_are_values_then_refused_clearly(capsys):
    """argparse read "-1e-3" as an option ("expected one argument"); it is a value, refused as such."""
    scene = str(ROOT / "scenes" / "free_fall.py")
    for dt in ("-1e-3", "-1E+2", "-0.5", "-2"):
        assert main(["run", scene, "--dt", dt, "--arch", "cpu"]) == 1
        assert f"--dt (step size in s) must be a positive number, got {float(dt)}" in capsys.readouterr().err
    assert main(["run", scene, "--duration", "-1e-2", "--arch", "cpu"]) == 1
    assert "--duration" in capsys.readouterr().err


def test_arch_cuda_without_a_gpu_says_why(tmp_path):
    """On a machine without an NVIDIA driver (this CI's): the message names the reason and the fix."""
    from femcontact import backend

    proc = subprocess.run([sys.executable, "-m", "femcontact", "run", str(ROOT / "scenes" / "free_fall.py"),
                           "--steps", "1", "--out", str(tmp_path / "ff"), "--arch", "cuda", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    if backend._cuda_driver() is None:
        assert proc.returncode == 1, proc.stderr
        assert "no NVIDIA driver found" in proc.stderr and "install the NVIDIA driver" in proc.stderr, proc.stderr
        assert "--arch cpu" in proc.stderr
    else:                                      # a GPU machine: it runs, or says which of the reasons holds
        assert proc.returncode == 0 or "NVIDIA" in proc.stderr, proc.stderr


class _FakeDriver:
    def __init__(self, init_rc: int, count: int = 0):
        self.init_rc, self.count = init_rc, count

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ref._obj.value = self.count
        return 0


def test_cuda_diagnosis_names_each_reason(monkeypatch):
    from types import SimpleNamespace

    from femcontact import backend

    monkeypatch.setattr(backend.sys, "platform", "linux")
    monkeypatch.setattr(backend, "_cuda_driver", lambda: None)
    assert "no NVIDIA driver found (libcuda.so.1 cannot be loaded)" in backend.cuda_diagnosis()
    for driver in (_FakeDriver(100), _FakeDriver(0, count=0)):
        monkeypatch.setattr(backend, "_cuda_driver", lambda d=driver: d)
        assert "driver is installed but sees no GPU" in backend.cuda_diagnosis()
    monkeypatch.setattr(backend, "_cuda_driver", lambda: _FakeDriver(35))
    assert "CUDA_ERROR_INSUFFICIENT_DRIVER" in backend.cuda_diagnosis() and "update the NVIDIA driver" in \
        backend.cuda_diagnosis()
    no_cuda = SimpleNamespace(_lib=SimpleNamespace(core=SimpleNamespace(with_cuda=lambda: False)))
    monkeypatch.setattr(backend, "_cuda_driver", lambda: _FakeDriver(0, count=2))
    monkeypatch.setattr(backend, "_runtime", lambda: ("quadrants", "1.3.3", no_cuda))
    msg = backend.cuda_diagnosis()
    assert "2 NVIDIA GPU(s) and a driver are present" in msg and "has no CUDA backend" in msg

"""The femcontact command as a user runs it."""
import subprocess
import sys
from pathlib import Path

import pyvista as pv

from femcontact.cli import main

ROOT = Path(__file__).resolve().parents[1]


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

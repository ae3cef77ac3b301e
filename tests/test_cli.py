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
                           "--steps", "5", "--out", str(out), "--arch", "cpu", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DOF" in proc.stdout and "run.pvd" in proc.stdout
    reader = pv.get_reader(str(out / "run.pvd"))
    assert len(reader.time_values) == 6


def test_missing_scene_is_a_clear_error(capsys, tmp_path):
    assert main(["run", str(tmp_path / "nope.py"), "--arch", "cpu"]) == 1
    assert "not found" in capsys.readouterr().err

"""A quiet, clear command line: no backend banner, no doubled defaults, bad options refused at once."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _femcontact(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_TAICHI_HEADER_PRINT"}   # the default
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "femcontact", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


@pytest.mark.parametrize("argv, code, expect", [
    (["--help"], 0, "usage: femcontact"),
    (["run", "--help"], 0, "usage: femcontact run"),
    (["mesh", "info", str(ROOT / "meshes" / "cube.vtu")], 0, "tetrahedra:"),
    (["mesh", "--help"], 0, "usage: femcontact mesh"),
    (["render", "--help"], 0, "usage: femcontact render"),
    (["render", "missing.pvd", "x.png"], 1, "femcontact render: error:"),
])
def test_no_backend_banner(argv, code, expect, tmp_path):
    proc = _femcontact(*argv, cwd=tmp_path)
    both = proc.stdout + proc.stderr
    assert proc.returncode == code, both
    assert expect in both
    assert "[Taichi]" not in both


def test_run_help_states_each_default_once():
    text = _femcontact("run", "--help").stdout
    options = re.split(r"\n  (?=-)", text.split("options:", 1)[1])
    assert len(options) >= 10
    for block in options:
        assert block.count("(default") <= 1, block
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: out/<scene name>)" in " ".join(text.split())


def test_steps_zero_is_refused_before_the_backend_starts(tmp_path):
    proc = _femcontact("run", str(ROOT / "scenes" / "free_fall.py"), "--steps", "0", "--out", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert "femcontact: error: --steps must be at least 1, got 0" in proc.stderr
    assert "compiling" not in proc.stdout and not (tmp_path / "o").exists()


def test_run_prints_no_taichi_lines(tmp_path):
    proc = _femcontact("run", str(ROOT / "scenes" / "free_fall.py"), "--steps", "1", "--out", str(tmp_path / "o"),
                       "--arch", "cpu", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("femcontact: ") and "on cpu (f64)" in proc.stdout
    assert "[Taichi]" not in proc.stdout + proc.stderr and "[Quadrants]" not in proc.stdout + proc.stderr
    assert "output: " in proc.stdout and "femcontact.read, or ParaView)" in proc.stdout

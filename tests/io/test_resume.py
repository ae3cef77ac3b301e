"""`femcontact run --checkpoint-every K` and `--resume OUT`: a resumed run repeats an uninterrupted one bit for bit.

For every solver (cond, lagged, sap) and body type (FEM, rigid, rod) a child process in deterministic
mode runs the command line three ways: 12 steps in one go; 8 steps, extended to 10 by a resume, then
put back to its step-8 checkpoint (the state a run killed between checkpoints leaves: frames on disk
after the checkpoint) and resumed to 12. Final state (the last checkpoint's arrays) and every written
file must match byte for byte. ``python tests/io/test_resume.py OUT.json WORKDIR [SOLVER:BODY ...]``.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pyvista as pv

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "tests/helpers/resume_scene.py"
CASES = [f"{s}:{b}" for s in ("cond", "lagged", "sap") for b in ("fem", "rigid", "rod")]
DIAGONAL = ["cond:fem", "lagged:rigid", "sap:rod"]     # every solver and every body type once


def _files(out: Path) -> dict:
    """Relative path -> bytes of the series (the .pvd and every frame file)."""
    files = {"run.pvd": (out / "run.pvd").read_bytes()}
    for f in sorted((out / "run").rglob("*")):
        if f.is_file():
            files[f.relative_to(out).as_posix()] = f.read_bytes()
    return files


def _arrays(path: Path) -> dict:
    with np.load(path) as d:
        return {k: d[k] for k in d.files}


def _case(case: str, work: Path) -> dict:
    from femcontact.cli import main

    solver, body = case.split(":")
    os.environ["FEMCONTACT_TEST_BODY"] = body
    base = ["run", str(SCENE), "--solver", solver, "--every", "2", "--checkpoint-every", "4", "--no-progress",
            "--deterministic", "--arch", "cpu"]
    whole, part = work / f"{solver}_{body}_whole", work / f"{solver}_{body}_part"
    codes = [main(base + ["--steps", "12", "--out", str(whole)]),
             main(base + ["--steps", "8", "--out", str(part)])]
    at8 = part / "checkpoint_at8.npz"
    shutil.copy(part / "checkpoint.npz", at8)
    resume = ["run", str(SCENE), "--no-progress", "--resume", str(part)]
    codes.append(main(resume + ["--steps", "10"]))         # extend a finished run to step 10
    frames_at10 = len(pv.get_reader(str(part / "run.pvd")).time_values)
    os.replace(at8, part / "checkpoint.npz")               # as if killed after frame 10, before its checkpoint
    codes.append(main(resume + ["--steps", "12"]))
    a, b = _arrays(whole / "checkpoint.npz"), _arrays(part / "checkpoint.npz")
    same = {k: k in b and a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
            for k in a}                                    # bit for bit (NaN memory included)
    fa, fb = _files(whole), _files(part)
    return {"codes": codes, "frames_at10": frames_at10, "step": int(b["step"]),
            "keys_equal": sorted(a) == sorted(b),
            "state_identical": sorted(a) == sorted(b) and all(same.values()),
            "differing_arrays": [k for k, ok in same.items() if not ok],
            "contacts": pv.read(str(part / "run" / "contacts" / "contacts_000006.vtp")).n_points,
            "same_file_names": sorted(fa) == sorted(fb),
            "differing_files": [k for k in fa if k in fb and fa[k] != fb[k]],
            "n_files": len(fa),
            "frames": len(pv.get_reader(str(part / "run.pvd")).time_values),
            "times": [float(t) for t in pv.get_reader(str(part / "run.pvd")).time_values]}


def _check(tmp_path, cases):
    env = {**os.environ, "FEMCONTACT_DETERMINISTIC": "1", "FEMCONTACT_ARCH": "cpu",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, __file__, str(out), str(tmp_path), *cases], env=env, check=True, timeout=1500,
                   stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    for case in cases:
        r = result[case]
        assert r["codes"] == [0, 0, 0, 0], (case, r["codes"])
        assert r["contacts"] > 0, case                                # the solvers' memory matters
        assert r["frames_at10"] == 6 and r["step"] == 12, (case, r)   # frames 0, 2, ..., 10
        assert r["state_identical"], f"{case}: resumed state differs in {r['differing_arrays']}"
        assert r["same_file_names"] and not r["differing_files"], f"{case}: files differ: {r['differing_files']}"
        assert r["frames"] == 7 and r["times"] == sorted(set(r["times"])), (case, r["times"])  # 0..12, once each


def test_resume_is_bit_identical_for_each_solver_and_body_type(tmp_path):
    _check(tmp_path, DIAGONAL)


@pytest.mark.slow
def test_resume_is_bit_identical_for_every_solver_body_pair(tmp_path):
    _check(tmp_path, [c for c in CASES if c not in DIAGONAL])


def test_resume_refuses_a_folder_without_checkpoint_and_changed_settings(tmp_path, capsys):
    from femcontact.cli import main

    assert main(["run", str(SCENE), "--resume", str(tmp_path / "nothing"), "--arch", "cpu"]) == 1
    assert "--checkpoint-every" in capsys.readouterr().err
    out = tmp_path / "r"
    assert main(["run", str(SCENE), "--steps", "2", "--checkpoint-every", "1", "--out", str(out), "--arch", "cpu",
                 "--no-progress"]) == 0
    assert json.loads((out / "run.json").read_text())["steps"] == 2 and (out / "checkpoint.npz").is_file()
    assert main(["run", str(SCENE), "--resume", str(out), "--dt", "0.005", "--arch", "cpu"]) == 1
    assert "--dt" in capsys.readouterr().err
    assert main(["run", str(SCENE), "--steps", "2", "--checkpoint-every", "0", "--out", str(out)]) == 1
    assert "--checkpoint-every" in capsys.readouterr().err


if __name__ == "__main__":
    import femcontact as fc

    fc.backend.init("cpu", deterministic=True)
    target, work = Path(sys.argv[1]), Path(sys.argv[2])
    results = {case: _case(case, work) for case in sys.argv[3:]}
    target.write_text(json.dumps(results))

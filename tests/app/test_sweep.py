"""`femcontact sweep` and `femcontact.sweep()`: parameter grids on Dask, tables, plots, failures and resume."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import femcontact as fc
from femcontact.errors import ParameterError
from femcontact.sweep import check_scene_parameters, expand_runs, parse_params, parse_values, read_params_file

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "tests/helpers/sweep_scene.py"
GRID = {"friction": [0.1, 0.5, 1.0], "youngs_modulus": [1e4, 1e5, 1e6]}
VOLATILE = ["wall_s", "run_s"]          # timings: the only columns two equal sweeps may differ in
ENV = {**os.environ, "FEMCONTACT_ARCH": "cpu",
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_values_lists_and_ranges():
    assert parse_values("friction", "0.1,0.5,1.0") == [0.1, 0.5, 1.0]
    assert parse_values("youngs_modulus", "1e4:1e6:log5") == [1e4, 31622.7766017, 1e5, 316227.766017, 1e6]
    assert parse_values("x", "0:1:3") == [0.0, 0.5, 1.0]
    assert parse_values("resolution", "2:4:3") == [2, 3, 4]
    assert parse_values("solver", "cond,sap") == ["cond", "sap"]
    assert parse_values("flag", "true,false") == [True, False]
    assert parse_params(["a=1,2", "b=3"]) == {"a": [1, 2], "b": [3]}
    runs = expand_runs({"a": [1, 2], "b": ["x", "y"]}, repeat=2)
    assert len(runs) == 8 and runs[0] == {"run": 0, "repeat": 0, "params": {"a": 1, "b": "x"}}
    assert runs[7] == {"run": 7, "repeat": 1, "params": {"a": 2, "b": "y"}}


@pytest.mark.parametrize("spec, match", [
    ("e=1:2:0", "empty"), ("e=1:2:log0", "empty"), ("e=", "no values"), ("e=1,,2", "empty value"),
    ("e=0:1:log3", "positive"), ("e=1:2", "a:b:N"), ("e=a:2:3", "not a number"), ("e=1:2:x", "whole number"),
    ("noequals", "NAME=VALUES")])
def test_bad_parameter_text_is_refused(spec, match):
    with pytest.raises(ParameterError, match=match):
        parse_params([spec])


def test_unknown_parameter_is_refused_before_any_run(tmp_path):
    with pytest.raises(ParameterError, match=r"'stiffness' is not a keyword of build\(\).*friction, youngs_modulus"):
        fc.sweep(SCENE, {"stiffness": [1, 2]}, out=tmp_path / "s")
    assert not (tmp_path / "s").exists()
    assert check_scene_parameters(SCENE, ["friction"]) == ["friction", "youngs_modulus"]
    with pytest.raises(ParameterError, match="empty list"):
        fc.sweep(SCENE, {"friction": []}, out=tmp_path / "s")


def test_command_line_refuses_unknown_parameters_and_empty_ranges(tmp_path, capsys):
    from femcontact.cli import main

    assert main(["sweep", str(SCENE), "--param", "stiffness=1,2", "--out", str(tmp_path / "a")]) == 1
    assert "'stiffness' is not a keyword of build()" in capsys.readouterr().err
    assert main(["sweep", str(SCENE), "--param", "friction=0.1:1:0", "--out", str(tmp_path / "b")]) == 1
    assert "is empty" in capsys.readouterr().err
    assert main(["sweep", str(SCENE), "--out", str(tmp_path / "c")]) == 1
    assert "--param" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "abc")


def test_params_file(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("friction,youngs_modulus\n0.1,1e5\n0.9,2e5\n")
    assert read_params_file(f) == [{"friction": 0.1, "youngs_modulus": 1e5}, {"friction": 0.9, "youngs_modulus": 2e5}]
    f.write_text("friction\n")
    with pytest.raises(ParameterError, match="at least one row"):
        read_params_file(f)


@pytest.fixture(scope="module")
def client():
    """A local cluster of 2 single-threaded worker processes, shared by the tests of this module (Taichi compiles
    only in the thread that initialised it, so workers are processes with one thread each)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"FEMCONTACT_CPU_THREADS": "1"}) as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory, client):
    """The 3 x 3 grid on the local cluster of 2 workers (deterministic, 8 steps per run)."""
    out = tmp_path_factory.mktemp("sweep") / "local"
    df = fc.sweep(SCENE, GRID, out=out, steps=8, every=1, client=client, deterministic=True, progress=False)
    return out, df


def test_sweep_3x3_on_a_local_cluster_writes_table_plot_and_series(local_sweep):
    out, df = local_sweep
    assert len(df) == 9 and (df["status"] == "ok").all(), df[["run", "status", "error"]]
    assert list(zip(df["friction"], df["youngs_modulus"])) == [(f, e) for f in GRID["friction"]
                                                               for e in GRID["youngs_modulus"]]
    assert (df["steps"] == 8).all() and (df["max_contacts"] > 0).all() and (df["mean_iterations"] > 0).all()
    # more friction, shorter slide (the scene's metrics() column)
    slide = df.groupby("friction")["slide"].mean()
    assert slide[0.1] > slide[0.5] > slide[1.0]
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 9 and {"slide", "kinetic_energy", "com_z", "wall_s", "status", "error"} <= set(table.columns)
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for k in range(9):
        import pyvista as pv

        assert len(pv.get_reader(str(out / f"run_{k:04d}" / "run.pvd")).time_values) == 9
    # a second call finds every run finished and reruns none
    again = fc.sweep(SCENE, GRID, out=out, steps=8, workers=2, deterministic=True, progress=False)  # all done: no cluster
    assert again.attrs["skipped"] == 9
    pd.testing.assert_frame_equal(again, df)


def test_failed_run_is_a_row_and_does_not_stop_the_others(tmp_path, client):
    runs = [{"friction": 0.5, "youngs_modulus": 1e5}, {"friction": 0.5, "youngs_modulus": -1.0}]
    df = fc.sweep(SCENE, runs, out=tmp_path / "f", steps=3, output=False, client=client, deterministic=True,
                  progress=False)
    assert list(df["status"]) == ["ok", "failed"]
    assert "youngs_modulus" in df["error"][1] and "ParameterError" in df["error"][1]
    assert not (tmp_path / "f" / "run_0000" / "run.pvd").exists()          # output=False


def _done(out: Path) -> dict:
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("run_*/result.json")}


def test_killed_sweep_resumes_without_rerunning_finished_runs(tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "femcontact", "sweep", str(SCENE), "--param", "friction=0.1,0.5,1.0",
           "--param", "youngs_modulus=1e4:1e6:log3", "--steps", "20", "--workers", "1", "--no-output",
           "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while len(_done(out)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)             # the sweep, its cluster and its worker
    proc.wait()
    before = _done(out)
    assert 2 <= len(before) < 9, f"kill came too late or too early: {len(before)} runs done"
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"({len(before)} finished before, skipped)" in done.stdout
    after = _done(out)
    assert len(after) == 9 and all(after[k] == v for k, v in before.items())     # not rerun
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 9 and (table["status"] == "ok").all()


def _scheduler_address(sched_file: Path, timeout: float) -> str:
    """The address in the scheduler file once the scheduler has finished writing it (the file
    appears before its contents do, so an empty or partial file means: wait)."""
    import json

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(sched_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.1)
    raise AssertionError(f"the Dask scheduler wrote no address to {sched_file} within {timeout} s")


@pytest.mark.slow
def test_same_sweep_on_a_separately_started_scheduler_gives_the_same_table(local_sweep, tmp_path):
    out_local, df_local = local_sweep
    sched_file = tmp_path / "scheduler.json"
    dask = str(Path(sys.executable).with_name("dask"))
    procs = [subprocess.Popen([dask, "scheduler", "--port", "0", "--no-dashboard", "--scheduler-file",
                               str(sched_file)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        address = _scheduler_address(sched_file, timeout=60)
        procs.append(subprocess.Popen([dask, "worker", address, "--nworkers", "2", "--nthreads", "1",
                                       "--no-dashboard"], env=ENV, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        df = fc.sweep(SCENE, GRID, out=tmp_path / "remote", steps=8, scheduler=address, deterministic=True,
                      progress=False)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert (df["status"] == "ok").all()
    pd.testing.assert_frame_equal(df.drop(columns=VOLATILE), df_local.drop(columns=VOLATILE))
    a = pd.read_csv(tmp_path / "remote" / "results.csv").drop(columns=VOLATILE)
    b = pd.read_csv(out_local / "results.csv").drop(columns=VOLATILE)
    pd.testing.assert_frame_equal(a, b)
    assert np.array_equal(a["slide"].to_numpy(), b["slide"].to_numpy())      # bit for bit (deterministic runs)


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    with pytest.raises(ParameterError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'.*dask scheduler"):
        fc.sweep(SCENE, {"friction": [0.1]}, out=tmp_path / "u", steps=1, scheduler="tcp://127.0.0.1:9",
                 progress=False)

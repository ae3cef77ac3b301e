"""Runs always stop (issue 29, item 1).

Contact detection walks the cells of boxes that grow with speed (``contact/broadphase.py``); a cable
driven hard enough to move at hundreds of m/s once made one step's walk take minutes or never end.
Known answers: the fast cable's contacts over the (coarsened) grid are exactly those of the all-pairs
reference, found in a bounded time; non-finite positions stop the step with a SimulationError
naming the step; Ctrl-C stops ``femcontact run`` inside a long step with the step and a readable
series (tests further down).
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import femcontact as fc
from femcontact import backend
from femcontact.errors import SimulationError

ROOT = Path(__file__).resolve().parents[2]
N_SEG = 40


def _cable(dt: float = 0.05, solver: str = "cond", self_contact: bool = True) -> fc.Scene:
    """The issue's case: a 40-segment cable clamped at one end, its other end driven at 5 m/s."""
    scene = fc.Scene(dt=dt, solver=solver, integrator="euler", duration=1.0, name="cable_driven")
    rod = scene.add_rod(fc.meshes.rod_straight((0, 0, 0), (1.0, 0, 0), N_SEG), radius=0.01,
                        material=fc.Material(2e9, 0.3, 1000.0, rayleigh_alpha=5.0), self_contact=self_contact,
                        name="cable")
    rod.clamp("start")
    rod.drive("end", velocity=lambda t: np.array([5.0, 0.0, 0.0]))
    return scene


def _coiled_fast(sim: fc.Simulator, speed: float) -> None:
    """Put the cable on a tight helix (its turns touching) and give every node ``speed`` m/s in a
    random direction: grown boxes of dt·speed, hundreds of its 4.5 cm cells wide."""
    rng = np.random.default_rng(0)
    s = np.linspace(0.0, 1.0, N_SEG + 1)
    a = 2 * np.pi * 6 * s
    x = np.c_[0.03 * np.cos(a), 0.03 * np.sin(a), 0.019 * 6 * s]
    v = rng.normal(size=x.shape)
    v *= speed / np.linalg.norm(v, axis=1, keepdims=True)
    backend.write(sim.state.x, x)
    backend.write(sim.state.v, v)


def _contacts(sim: fc.Simulator, mode: str) -> set:
    sim.collision.rod_broadphase = mode
    n = sim.collision.collide(sim.state, sim.contacts, sim.scene.dt)
    d = sim.contacts.to_numpy()
    return {(round(float(p), 9), tuple(np.round(pt, 9))) for p, pt in zip(d["phi"][:n], d["point"][:n])}


def test_fast_cable_contacts_are_found_in_bounded_time():
    """Segments at 500 m/s with dt = 0.05: boxes 25 m wide, 550 cells of 4.5 cm along each axis
    (10^8 cells each). The grid is coarsened for the step: the same contacts as all pairs, quickly."""
    code = textwrap.dedent("""
        import time
        from tests.simulator.test_stop import _cable, _coiled_fast, _contacts
        import femcontact as fc
        sim = fc.Simulator(_cable())
        _coiled_fast(sim, 500.0)
        _contacts(sim, "grid")                       # compile
        t0 = time.perf_counter()
        grid = _contacts(sim, "grid")
        took = time.perf_counter() - t0
        ref = _contacts(sim, "all")
        assert grid == ref, (len(grid), len(ref))
        assert len(ref) > 100, len(ref)
        print("OK", len(ref), took)
        """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("rod contact detection of a fast cable did not end within 240 s")
    assert r.returncode == 0, r.stderr[-3000:]
    took = float(r.stdout.split()[-1])
    assert took < 2.0, f"one collide took {took:.2f} s"


def test_non_finite_positions_stop_the_step_with_its_number():
    sim = fc.Simulator(_cable())
    sim.step()
    x = sim.state.positions()
    x[7] = np.nan
    backend.write(sim.state.x, x)
    with pytest.raises(SimulationError, match=r"step 2 .*body .cable. has non-finite positions"):
        sim.step()


@pytest.mark.slow
def test_driven_cable_run_ends():
    """The issue's run (cond, dt = 0.05, self-contact): it once hung in step 2 or 3; now every step ends
    in seconds (timed on a second run, once the kernels are compiled) and the run either finishes or
    stops with a SimulationError naming the step."""
    code = textwrap.dedent("""
        from tests.simulator.test_stop import _cable
        import femcontact as fc
        from femcontact.errors import SimulationError
        for run in range(2):                    # the first compiles the kernels as they are met, the second is timed
            sim = fc.Simulator(_cable())
            try:
                sim.run(steps=20)
                print("finished")
            except SimulationError as e:
                print("stopped:", e)
        print("slowest step", max(s.ms_total for s in sim.stats) / 1e3)
        """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("the driven cable run did not end within 300 s")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "finished" in r.stdout or "stopped: step " in r.stdout, r.stdout
    assert float(r.stdout.split()[-1]) < 10.0, r.stdout


def _run_and_interrupt(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float, Path]:
    """``femcontact run`` of the slow-step scene (steps 1 and 2 quick, step 3 a minute long): SIGINT once
    step 2 is done, in the middle of step 3; returns (result, seconds from SIGINT to exit, OUT)."""
    out = tmp_path / "slow"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "femcontact", "run", str(ROOT / "tests/helpers/slow_step_scene.py"), "--out", str(out),
           "--steps", "10", "--every", "1", "--no-progress", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 400
    try:
        while time.monotonic() < deadline and proc.poll() is None:     # frames of steps 0, 1, 2: step 3 has begun
            if len(list(out.glob("**/cube*.vt*"))) >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), took, out


def _frames(out: Path) -> list:
    from femcontact.io.vtk import read_pvd_entries

    return sorted({e["time"] for e in read_pvd_entries(out / "run.pvd")})


def test_ctrl_c_inside_a_long_step_stops_with_the_step_and_keeps_the_frames(tmp_path):
    r, took, out = _run_and_interrupt(tmp_path)
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert took < 5.0, f"{took:.1f} s from SIGINT to exit"
    assert "interrupted in step 3" in r.stderr and "steps up to 2 (t = 0.02 s) are complete" in r.stderr, r.stderr
    assert "--checkpoint-every" in r.stderr and "--resume" in r.stderr.split("--checkpoint-every", 1)[1], r.stderr
    assert "continue the run with" not in r.stderr                  # no checkpoint: no resume offered
    assert _frames(out)[:3] == pytest.approx([0.0, 0.01, 0.02])    # the series is closed and readable
    import pyvista

    mesh = pyvista.read(sorted(out.glob("**/cube*.vtu"))[2])
    assert mesh.n_points > 0 and np.isfinite(mesh.points).all()


def test_ctrl_c_with_a_checkpoint_says_how_to_resume(tmp_path):
    r, took, out = _run_and_interrupt(tmp_path, "--checkpoint-every", "1")
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert took < 5.0, f"{took:.1f} s from SIGINT to exit"
    assert "holds step 2 (t = 0.02 s)" in r.stderr, r.stderr
    assert f"--resume {out}" in r.stderr, r.stderr
    with np.load(out / "checkpoint.npz") as z:                      # complete, loadable
        assert int(z["step"]) == 2

"""Soak and determinism: a stack of three soft cubes rests for 10,000 steps under each solver without drifting
(< 1e-4 m) or gaining energy; two runs of one scene in deterministic mode write bit-identical files.

Known failure (issue 18 item 7, open): the stack creeps. Measured after 3 s of settling (cpu, this
scene): the top cube moves ~1.5e-4 m per 50 steps under COND and ~8e-5 m per 50 steps under Lagged
(sideways, along y, and sinking), ~1.6e-5 m per 100 steps with stiction_tolerance=1e-6 m/s. The full
soak under Lagged (``soak("lagged", 10_000)``, 286 s here) drifted 1.26e-2 m and lost 3.8e-4 J: no
energy gain, the stack standing, but a centimetre of creep; SAP drifted 2.2e-3 m (-3.5e-4 J, 282 s),
Similar 3.3e-3 m (-5.0e-4 J, 275 s), COND 9.3e-2 m (-5.0e-5 J, 1840 s: 184 ms per step at ~130-200
iterations; the top cube ends above its start, 0.3019 m, i.e. the stack has slid apart and tilted). The 10,000-step test is therefore an xfail until the creep is fixed;
the short sample checks what holds today: no energy gain, the stack standing, contacts kept.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import femcontact as fc

ROOT = Path(__file__).resolve().parents[1]
SOLVERS = ["cond", "lagged", "sap", "similar"]
SETTLE = 300            # steps (3 s) to come to rest before the drift and energy are measured
DRIFT = 1e-4            # m


def stack(solver: str) -> fc.Scene:
    """Three soft 0.1 m cubes stacked on frictional ground, each slightly off the one below."""
    scene = fc.Scene(dt=1e-2, gravity=(0.0, 0.0, -9.81), solver=solver, integrator="euler", name="stack3")
    material = fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0, rayleigh_alpha=1.0,
                           rayleigh_beta=2e-3)
    for k in range(3):
        scene.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=2), material,
                           position=(0.004 * k, 0.0, 0.05 + 0.1 * k + 1e-4 * k), name=f"cube{k}")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.6, name="ground")
    return scene


def soak(solver: str, steps: int) -> dict:
    sim = fc.Simulator(stack(solver))
    sim.run(steps=SETTLE)
    x0, e0 = sim.state.positions().copy(), sim.energy()["total"]
    peak = -np.inf
    for _ in range(steps - SETTLE):
        sim.step()
        if sim.state.step % 100 == 0:
            peak = max(peak, sim.energy()["total"])
    x1, e1 = sim.state.positions(), sim.energy()["total"]
    return {"drift": float(np.abs(x1 - x0).max()), "gain": max(e1, peak) - e0, "e0": e0,
            "top": float(sim.body_positions("cube2")[:, 2].max()), "contacts": sim.stats[-1].contacts}


def _check(r: dict, solver: str, drift: bool = True) -> None:
    assert r["contacts"] > 0, solver
    assert 0.28 < r["top"] < 0.301, (solver, r)                                  # still stacked, not fallen
    assert r["gain"] <= 1e-9 * abs(r["e0"]) + 1e-9, f"{solver}: gained {r['gain']:.3g} J at rest"
    if drift:
        assert r["drift"] < DRIFT, f"{solver}: drifted {r['drift']:.3g} m at rest"


@pytest.mark.sample
def test_stack_rests_short_without_gaining_energy():
    r = soak("lagged", SETTLE + 100)
    _check(r, "lagged", drift=False)
    assert r["drift"] < 1e-3, r                     # creeps (module doc), but by far less than a millimetre here


@pytest.mark.slow
@pytest.mark.xfail(reason="the stack creeps: ~1e-4 m per 50-100 steps after settling (module doc); issue 18 item 7",
                   strict=False)
@pytest.mark.parametrize("solver", SOLVERS)
def test_stack_rests_10000_steps(solver):
    _check(soak(solver, 10_000), solver)


def test_deterministic_flag_is_not_undone_by_the_simulator():
    """`femcontact run --deterministic` initialises the backend, then Simulator() calls init() again."""
    code = ("import femcontact as fc; fc.backend.init('cpu', deterministic=True); "
            "s = fc.Scene(); s.add_fem_body(fc.meshes.box((0.1,) * 3, resolution=1), fc.Material(1e5, 0.4, 1e3)); "
            "fc.Simulator(s); assert fc.backend.config()['deterministic']")
    env = {k: v for k, v in os.environ.items() if k != "FEMCONTACT_DETERMINISTIC"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=300)


def test_two_deterministic_runs_write_identical_files(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FEMCONTACT_DETERMINISTIC"}      # the flag alone
    env.update(FEMCONTACT_ARCH="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        subprocess.run([sys.executable, "-m", "femcontact", "run", str(ROOT / "scenes" / "cube_drop.py"),
                        "--steps", "24", "--every", "4", "--out", str(out), "--no-progress", "--deterministic"],
                       env=env, check=True, capture_output=True, timeout=300)
    files = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
    assert len(files) == 1 + 7 * 3                      # the .pvd; 7 frames of the cube, the ground, the contacts
    import pyvista as pv

    assert pv.read(str(outs[0] / "run" / "contacts" / "contacts_000006.vtp")).n_points > 0     # landed
    assert files == sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file())
    for f in files:
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f"{f} differs between two runs"

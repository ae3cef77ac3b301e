"""No silent unconverged steps (issue 32 item 5): every solver says per step whether its solve met its
stop rule; a run counts the steps that did not, reports the worst e_m and its step (summary, run.json,
steps.csv), warns once, and stops after ``unconverged_stop`` in a row; ``Scene()`` runs ``"auto"``:
Lagged where a dynamic rigid body can touch something, COND otherwise."""
from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path

import pytest

import femcontact as fc
from femcontact.cli import build_parser, main
from femcontact.convergence import DEFAULT_UNCONVERGED_STOP, ConvergenceWarning, choose_solver, stop_rule
from femcontact.errors import ParameterError, SimulationError
from femcontact.io.vtk import read_pvd_entries
from femcontact.scene_script import load_scene_module

ROOT = Path(__file__).resolve().parents[2]
CPU = ["--arch", "cpu", "--no-progress"]
STEPS = 12
FIRST_CONTACT = 3        # the cube, released 3 cm above the ground, touches it in step 3 (dt 10 ms)
CAPS = {"cond": {"max_iter": 2}, "sap": {"max_iterations": 1}, "lagged": {"max_iterations": 1},
        "similar": {"max_iterations": 1}, "pgs": {"max_iter": 2}, "incp": {"max_iter": 1}}


def _drop_scene(solver: str = "cond", options=None) -> fc.Scene:
    """A soft cube (2 cells, E 1e5) released 3 cm above the ground: two contact-free steps, then contact."""
    scene = fc.Scene(dt=1e-2, solver=solver, solver_options=options or {})
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=1e-3),
                       position=(0.0, 0.0, 0.08), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


def _run(sim: fc.Simulator, steps: int, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = sim.run(steps=steps, **kw)
    return summary, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_cond_at_its_cap_counts_every_contact_step_and_warns_once():
    sim = fc.Simulator(_drop_scene(options=CAPS["cond"]), unconverged_stop=None)
    summary, warned = _run(sim, STEPS)
    contact = [s.step for s in sim.stats if s.contacts]
    assert contact == list(range(FIRST_CONTACT, STEPS + 1))
    c = summary.convergence
    assert c.unconverged_steps == len(contact) == STEPS - FIRST_CONTACT + 1
    assert [s.step for s in sim.stats if not s.converged] == contact
    assert c.first_unconverged_step == FIRST_CONTACT and c.longest_unconverged_run == len(contact)
    assert (c.solver, c.measure, c.tolerance, c.max_iterations) == ("cond", "e_m", 1e-4, 2)
    worst = max(sim.stats, key=lambda s: -1.0 if s.e_m is None else s.e_m)
    assert c.worst_e_m == worst.e_m > 1e-4 and c.worst_e_m_step == worst.step
    assert len(warned) == 1
    text = str(warned[0].message)
    assert f"step {FIRST_CONTACT} " in text and "solver cond" in text and "cap of 2 iterations" in text
    assert "against its tolerance 0.0001" in text and "max_iter" in text and "solver='lagged'" in text
    assert f"{c.unconverged_steps} of {STEPS} steps unconverged" in str(summary)


def test_a_converged_run_reports_none():
    sim = fc.Simulator(_drop_scene())
    summary, warned = _run(sim, STEPS)
    c = summary.convergence
    assert c.unconverged_steps == 0 and c.first_unconverged_step is None and not warned
    assert c.steps == STEPS and c.worst_e_m is not None and 0.0 < c.worst_e_m <= 1e-4
    assert sim.stats[c.worst_e_m_step - 1].contacts > 0
    assert "every step converged" in str(summary)


def test_a_solver_swapped_in_by_the_user_runs_under_the_generic_rule():
    """``sim.contact_solver`` may be replaced by any object with ``name`` and ``solve`` (the Schur and
    host-solve agreement tests wrap two solvers this way): ``run`` counts its steps by their own
    ``converged`` flag instead of failing on options it does not have."""
    sim = fc.Simulator(_drop_scene(options=CAPS["cond"]), unconverged_stop=None)
    inner = sim.contact_solver

    class Wrapped:
        name = "cond"
        friction_on_end_velocity = inner.friction_on_end_velocity

        def solve(self, problem):
            return inner.solve(problem)

        def __getattr__(self, attr):           # memory(), restore(), ... but no options
            if attr == "options":
                raise AttributeError(attr)
            return getattr(inner, attr)

    sim.contact_solver = Wrapped()
    assert stop_rule("cond", sim.contact_solver).measure == "residual"
    summary, warned = _run(sim, STEPS)
    assert summary.convergence.unconverged_steps == STEPS - FIRST_CONTACT + 1 and len(warned) == 1


def test_a_run_unconverged_for_k_steps_in_a_row_stops_and_keeps_what_it_wrote(tmp_path):
    k = 4
    sim = fc.Simulator(_drop_scene(options=CAPS["cond"]), unconverged_stop=k)
    out = tmp_path / "o"
    with pytest.raises(SimulationError) as err:
        _run(sim, STEPS, out=out, every=1)
    last = FIRST_CONTACT + k - 1
    text = str(err.value)
    assert text.startswith(f"step {last} ") and f"steps {FIRST_CONTACT}–{last}" in text
    assert "the cond contact solve has ended unconverged for 4 consecutive steps" in text
    assert "max_iter" in text and "unconverged_stop=None" in text and "--unconverged-stop 0" in text
    assert sim.state.step == last and sim.convergence.summary.unconverged_steps == k
    with open(out / "steps.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(1, last + 1))      # every completed step's row
    assert [int(r["converged"]) for r in rows] == [1] * (FIRST_CONTACT - 1) + [0] * k
    entries = read_pvd_entries(out / "run.pvd")
    assert sorted({round(e["time"], 9) for e in entries}) == [round(0.01 * j, 9) for j in range(last)]
    assert all(Path(e["file"]).is_file() for e in entries)             # frames of steps 0 … last-1


@pytest.mark.parametrize("solver", list(CAPS))
def test_every_solver_reports_its_stop_rule_per_step(solver):
    """Each solver's ``converged`` is its rule: an unconverged step ended at the cap or above the
    tolerance; a converged one met the tolerance (SAP's family: e_m ≤ rel_tol, or 1e3·rel_tol where the
    line search finds no descent left, ``sap.py``)."""
    sim = fc.Simulator(_drop_scene(solver, CAPS[solver]), unconverged_stop=None)
    summary, warned = _run(sim, 8)
    rule = stop_rule(solver, sim.contact_solver)
    assert rule.cap == next(iter(CAPS[solver].values())) and rule.tolerance > 0.0
    assert rule.measure == ("residual" if solver in ("pgs", "incp") else "e_m")
    contact = [s for s in sim.stats if s.contacts]
    assert contact and all(s.e_m is not None and math.isfinite(s.e_m) for s in contact)
    assert all(s.converged and s.e_m is None for s in sim.stats if not s.contacts)    # linear solves
    slack = 1e3 if solver in ("sap", "lagged", "similar") else 1.0
    for s in contact:
        value = s.e_m if rule.measure == "e_m" else s.residual
        if s.converged:
            assert value <= slack * rule.tolerance, s
        else:
            assert s.iterations >= rule.cap or value > rule.tolerance, s
    unconverged = sum(not s.converged for s in sim.stats)
    assert summary.convergence.unconverged_steps == unconverged
    assert len(warned) == (1 if unconverged else 0)


def test_unconverged_stop_is_checked():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ParameterError, match="unconverged_stop"):
            fc.Simulator(_drop_scene(), unconverged_stop=bad)


def test_auto_picks_lagged_for_a_rigid_gripper_and_cond_for_deformable_bodies():
    assert fc.Scene().solver == "auto"
    gripper = load_scene_module(str(ROOT / "scenes" / "gripper_ball.py")).build(solver="auto")
    sim = fc.Simulator(gripper)
    assert sim.contact_solver.name == "lagged" and "rigid bodies in contact" in sim.solver_choice
    sim = fc.Simulator(_drop_scene("auto"))
    assert sim.contact_solver.name == "cond" and "deformable bodies and rods in contact" in sim.solver_choice
    # explicit choices are kept
    gripper.solver = "cond"
    assert fc.Simulator(gripper).contact_solver.name == "cond"


def test_auto_on_other_kinds_of_scene():
    def scene_with(rigid_kinematic=None, ground=True):
        scene = fc.Scene()
        scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1), fc.Material(1e5, 0.3, 1000.0), position=(0, 0, 0.3))
        if rigid_kinematic is not None:
            motion = (lambda t: ((0.0, 0.0, 0.05), None)) if rigid_kinematic else None
            scene.add_rigid_body(fc.shapes.Box((0.05, 0.05, 0.05)), density=500.0, position=(0.0, 0.0, 0.05),
                                 motion=motion)
        if ground:
            scene.add_obstacle(fc.shapes.HalfSpace())
        return scene

    model_of = lambda s: fc.Simulator(s).model            # noqa: E731
    s = scene_with(rigid_kinematic=False)
    assert choose_solver(s, model_of(s))[0] == "lagged"          # a free rigid body on the ground
    s = scene_with(rigid_kinematic=True)
    assert choose_solver(s, model_of(s))[0] == "cond"            # a prescribed one is a moving obstacle
    s = scene_with(ground=False)
    assert choose_solver(s, model_of(s)) == ("cond", "auto: nothing can touch, so every step is the linear solve")


def test_auto_names_itself_when_the_options_belong_to_another_solver():
    scene = load_scene_module(str(ROOT / "scenes" / "gripper_ball.py")).build(solver="auto")
    scene.solver_options = {"max_iter": 5}                 # COND's name; Lagged's is max_iterations
    with pytest.raises(ParameterError, match="the scene's solver is 'auto', which picked 'lagged'"):
        fc.Simulator(scene)


SCRIPT = """
import femcontact as fc


def build(max_iter: int = 2):
    scene = fc.Scene(dt=1e-2, solver="cond", solver_options={"max_iter": max_iter})
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=1e-3),
                       position=(0.0, 0.0, 0.08), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene
"""


def test_cli_warns_once_stops_and_records_the_count(tmp_path, capsys):
    script = tmp_path / "drop.py"
    script.write_text(SCRIPT)
    out = tmp_path / "o"
    assert main(["run", str(script), "--steps", str(STEPS), "--unconverged-stop", "4", "--out", str(out), *CPU]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("femcontact: warning: ") == 1 and "femcontact: warning: step 3 " in captured.err
    assert "femcontact: error: step 6 " in captured.err and "consecutive steps" in captured.err
    record = json.loads((out / "run.json").read_text())
    assert record["solver_run"] == "cond" and record["solver_choice"] is None
    conv = record["convergence"]
    assert conv["unconverged_steps"] == 4 and conv["first_unconverged_step"] == 3 and conv["steps"] == 6
    assert conv["worst_e_m"] > 1e-4 and 3 <= conv["worst_e_m_step"] <= 6
    rows = list(csv.DictReader((out / "steps.csv").open()))
    assert [r["converged"] for r in rows] == ["1", "1", "0", "0", "0", "0"]
    # converged (enough iterations), with a checkpoint: run.json keeps the options and adds the count
    out2 = tmp_path / "o2"
    assert main(["run", str(script), "--param", "max_iter=500", "--steps", "5", "--checkpoint-every", "5",
                 "--out", str(out2), *CPU]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "solver cond: every step converged" in captured.out
    record = json.loads((out2 / "run.json").read_text())
    assert record["steps"] == 5 and record["checkpoint_every"] == 5
    assert record["convergence"]["unconverged_steps"] == 0 and record["convergence"]["worst_e_m"] <= 1e-4


def test_cli_default_and_the_auto_choice_on_screen(tmp_path, capsys):
    assert build_parser().parse_args(["run", "x.py"]).unconverged_stop is None       # -> the Simulator's default
    assert "(default: 50)" in " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help()
                                       .split()) and DEFAULT_UNCONVERGED_STOP == 50
    assert main(["run", str(ROOT / "scenes" / "free_fall.py"), "--steps", "1", "--out", str(tmp_path / "f"), *CPU]) == 0
    assert "solver cond (auto: nothing can touch, so every step is the linear solve)" in capsys.readouterr().out
    assert main(["run", str(ROOT / "scenes" / "free_fall.py"), "--unconverged-stop", "-1", *CPU]) == 1
    assert "--unconverged-stop must be" in capsys.readouterr().err

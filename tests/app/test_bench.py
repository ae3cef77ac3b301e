"""The benchmark harness (``femcontact bench``, femcontact/bench/): its --quick run writes every
table, plot and the machine record with numbers that have known values (DOF from the mesh, the
paper's columns copied from its text), and its slope fit recovers a known exponent."""
import csv
import json
import math

import numpy as np
import pytest

from femcontact.bench import fit_slope
from femcontact.bench.cases import PAPER_TABLE1, PAPER_TABLE2
from femcontact.cli import main
from femcontact.errors import FemcontactError


def mat_dofs(nx: int) -> int:
    """DOF of scenes/mat_drag.py at ``resolution=nx``: a box of nx x round(nx·0.2/0.3) x 2 cells."""
    return 3 * (nx + 1) * (round(nx * 0.2 / 0.3) + 1) * 3


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_fit_slope_recovers_a_known_power_law():
    dof = np.array([1e3, 4.4e3, 1.5e4, 6e4, 1e5])
    slope, c = fit_slope(dof, 0.002 * dof ** 1.37)
    assert slope == pytest.approx(1.37, abs=1e-12) and c == pytest.approx(0.002, rel=1e-10)
    noisy = 0.5 * dof ** 2.0 * np.exp(np.array([0.01, -0.01, 0.01, -0.01, 0.0]))
    assert fit_slope(dof, noisy)[0] == pytest.approx(2.0, abs=0.02)
    with pytest.raises(FemcontactError, match="two sizes"):
        fit_slope([1e3, 1e3], [1.0, 2.0])


def test_bad_bench_options_are_clear_errors(capsys, tmp_path):
    assert main(["bench", "--solvers", "gauss", "--out", str(tmp_path)]) == 1
    assert "unknown solver 'gauss'" in capsys.readouterr().err
    assert main(["bench", "--steps", "0", "--out", str(tmp_path)]) == 1
    assert "--steps must be at least 1" in capsys.readouterr().err
    assert main(["bench", "--scenes", "pile", "--out", str(tmp_path)]) == 1
    assert "unknown scenario 'pile'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert main(["bench", "--quick", "--out", str(out), "--no-progress", "--arch", "cpu"]) == 0
    return out


def test_quick_bench_writes_every_output(quick, capsys):
    for name in ("table1", "table2", "fig11", "fig11_slopes", "pgs_convergence"):
        assert (quick / f"{name}.csv").is_file()
        assert "|---|" in (quick / f"{name}.md").read_text()
    measured = [json.loads(line) for line in (quick / "rows.jsonl").read_text().splitlines()]
    assert len(measured) == 9 and all("solver_ms" in r for r in measured)   # each measurement once
    for png in ("fig11.png", "pgs_convergence.png"):
        assert (quick / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    machine = json.loads((quick / "machine.json").read_text())
    for key in ("cpu_model", "cores", "arch", "precision", "python", "runtime", "numpy", "date_utc"):
        assert machine[key], key
    assert machine["arch"] == "cpu" and machine["precision"] == "f64"
    assert rows(quick / "table1.csv")[0]["machine_cpu_model"] == machine["cpu_model"]


def test_quick_table1_rows_make_sense(quick):
    t1 = rows(quick / "table1.csv")
    assert {r["solver"] for r in t1} == {"cond", "pgs"}
    for r in t1:
        assert int(r["dof"]) == mat_dofs(int(r["size"]))
        assert int(r["max_contacts"]) > 0 and int(r["constraints"]) == 3 * int(r["max_contacts"])
        assert float(r["iterations"]) >= 1 and float(r["solver_ms"]) > 0 and float(r["dynamics_ms"]) > 0
    cond = next(r for r in t1 if r["solver"] == "cond")
    pgs = next(r for r in t1 if r["solver"] == "pgs")
    assert float(cond["converged"]) == 1.0 and float(cond["e_m"]) < 1e-3     # at COND's default stop
    assert float(pgs["converged"]) == 1.0 and float(pgs["e_m"]) < 1e-8       # v* + A⁻¹Jᵀλ balances any λ
    assert int(cond["max_contacts"]) == int(pgs["max_contacts"])            # the same settled state


def test_quick_table2_and_fig11(quick):
    t2 = rows(quick / "table2.csv")
    assert sorted(r["acceleration"] for r in t2) == ["anderson", "chebyshev", "none"]
    assert all(float(r["iterations"]) >= 1 for r in t2)
    paper = {r["acceleration"]: r["paper_iterations"] for r in t2}
    assert float(paper["none"]) == PAPER_TABLE2["mat_drag"][1] == 71.48
    assert float(paper["chebyshev"]) == PAPER_TABLE2["mat_drag"][2] == 15.41
    f11 = rows(quick / "fig11.csv")
    assert sorted({int(r["dof"]) for r in f11}) == [mat_dofs(4), mat_dofs(6)]
    for r in f11:
        if r["solver"] == "pgs":
            assert float(r["speedup_over_pgs"]) == 1.0
    slopes = {r["solver"]: float(r["slope"]) for r in rows(quick / "fig11_slopes.csv")}
    assert set(slopes) >= {"cond", "pgs"}
    for s in ("cond", "pgs"):                  # the paper's slope through its two mat points of Table I
        (d0, d1), (m0, m1) = ((PAPER_TABLE1[("mat_drag", i)]["dof"] for i in (0, 1)),
                              (PAPER_TABLE1[("mat_drag", i)][s][1] for i in (0, 1)))
        assert slopes[f"{s} (paper, Table I mat points)"] == pytest.approx(math.log(m1 / m0) / math.log(d1 / d0))


def test_quick_pgs_convergence_history(quick):
    hist = json.loads((quick / "pgs_convergence_history.json").read_text())
    pgs, cond = hist["pgs"], hist["cond"]
    assert len(pgs) >= 10 and len(cond) >= 1
    assert pgs[9] < pgs[0] and pgs[4] < pgs[0]         # PGS residual falls over its first sweeps (cold start)
    t = {r["solver"]: r for r in rows(quick / "pgs_convergence.csv")}
    assert float(t["pgs"]["iterations"]) == len(pgs) and float(t["cond"]["iterations"]) == len(cond)
    assert float(t["pgs"]["residual_last"]) == pytest.approx(pgs[-1])


def test_bad_rows_option_is_a_clear_error(capsys, tmp_path):
    assert main(["bench", "--rows", "mat_drag/13", "--out", str(tmp_path)]) == 1
    assert "unknown Table I row 'mat_drag/13'" in capsys.readouterr().err


def test_quick_accuracy_table_holds_each_rule_to_its_e_m(tmp_path):
    """``--table accuracy``: COND on a Table I row under each stop rule; the e_m rules' steps end at
    or below their tolerance (unless at the cap, which ``converged`` shows), a tighter tolerance costs
    more iterations, and the paper's absolute-θ rule reports the e_m it reached."""
    from femcontact.bench.run import ACCURACY_RULES

    assert main(["bench", "--quick", "--table", "accuracy", "--out", str(tmp_path), "--no-progress",
                 "--no-plots"]) == 0
    t = {r["rule"]: r for r in rows(tmp_path / "accuracy.csv")}
    assert list(t) == [label for label, _ in ACCURACY_RULES]
    for label, options in ACCURACY_RULES:
        r = t[label]
        assert int(r["dof"]) == mat_dofs(6) and float(r["iterations"]) >= 1 and float(r["e_m"]) > 0
        tol = options.get("momentum_tol", 1e-4)
        if tol is not None and float(r["converged"]) == 1.0:
            assert float(r["e_m_max"]) <= tol, label
    for acc in ("anderson", "paper chebyshev"):
        assert float(t[f"{acc}, e_m ≤ 1e-6"]["iterations"]) > float(t[f"{acc}, e_m ≤ 1e-3"]["iterations"])

"""A resting FEM–FEM contact under COND: the virtual node's damper lag and penetration recovery form a
hidden penalty spring (docs/COND.md, "Resting stack: the hidden spring").

At rest, a contact through a (deformable) virtual node holds its law on the virtual node, which leads the body
by its damper's lag c λ_n (c = Σ 1/k_v over the contact's virtual sides); the body sinks until penetration
recovery, ``recovery |φ| / dt``, makes up that lag: |φ| = dt c λ_n / recovery (COND eq. 14/15 with the Euler
normal target of docs/COND.md, "Normal target"). The stored energy of that spring, ½ K φ² with
K = recovery k_v / dt², is not in ``Simulator.energy()``; it is what the soak stack trades with the visible
energy when a contact changes (tests/physics/test_soak.py, issue 15, issue 18 item 7).
"""
import numpy as np
import pytest

import femcontact as fc
from tests.helpers.scenes_util import soft_stack

DT = 1e-2


def two_cubes(options: dict | None = None) -> fc.Scene:
    """A soft 0.1 m cube resting on another on frictional ground (the soak stack's, dt = DT)."""
    return soft_stack("cond", 2, options, name="two")


def resting_depths(options: dict | None = None, steps: int = 150):
    """(φ, predicted φ = −dt c λ_n / recovery) of the loaded FEM–FEM contacts after ``steps`` steps."""
    sim = fc.Simulator(two_cubes(options))
    sim.run(steps=steps)
    solver, d = sim.contact_solver, sim.contacts.to_numpy()
    recovery = solver.options.recovery
    n0, kv = solver.n0, solver.virtual_gains()
    lam = solver.lambdas()[:, 2]
    phi, pred = [], []
    for m in range(len(lam)):
        virtual = [int(x) - n0 for x in (d["node_a"][m], d["node_b"][m]) if x >= n0]
        if not virtual or lam[m] <= 0.0 or d["normal"][m][2] * d["normal"][m][2] < 0.9:
            continue
        c = sum(1.0 / kv[q] for q in virtual)
        phi.append(d["phi"][m])
        pred.append(-DT * c * lam[m] / recovery)
    return np.array(phi), np.array(pred), sim


@pytest.mark.parametrize("recovery", [0.2, pytest.param(0.4, marks=pytest.mark.slow)])
def test_resting_depth_is_the_damper_lag_over_recovery(recovery):
    phi, pred, _ = resting_depths({"recovery": recovery})
    print("recovery", recovery, "phi", phi, "predicted", pred)
    assert len(phi) >= 4
    assert np.all(phi < 0.0)
    np.testing.assert_allclose(phi, pred, rtol=0.05)     # measured: within 4% (one contact), the rest 0.2%

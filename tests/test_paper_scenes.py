"""The contact papers' experiments as scenes (issue 17 item 5), each against its known answer or its
paper's qualitative result. Scenes live in scenes/; these tests import them."""
import math

import numpy as np
import pytest

import femcontact as fc
from scenes_util import load_scene

G = 9.81


def _belt_run(solver: str, steps: int = 150):
    """scenes/conveyor_belt.py: per step t, box x velocity, belt velocity over the step, box height,
    box vertical velocity, normal impulse."""
    mod = load_scene("conveyor_belt")
    scene = mod.build(solver=solver)
    belt = mod.belt_motion(0.1, 1.0)
    sim = fc.Simulator(scene)
    dt, rows = scene.dt, []
    for _ in range(steps):
        sim.step()
        t = sim.state.time
        vb = (belt(t)[0][0] - belt(t - dt)[0][0]) / dt         # the belt's velocity over the step
        (p, _), (v, _) = sim.rigid_pose("box"), sim.rigid_velocity("box")
        pn = sim.contacts.to_numpy()["impulse"][:, 2].sum()
        rows.append((t, v[0], vb, p[2], v[2], pn))
    return np.array(rows), scene


def _phases(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Steps sliding (|v_box − v_belt| > 1 mm/s) and steps inside a slide (its neighbours slide too)."""
    slip = np.abs(r[:, 1] - r[:, 2]) > 1e-3
    inner = slip.copy()
    inner[1:] &= slip[:-1]
    inner[:-1] &= slip[1:]
    inner[:5] = False                     # the first steps: the box settles onto the belt
    return slip, inner


def test_conveyor_belt_lagged_slides_at_coulomb_and_never_moves_vertically():
    """ICF §XI-A under Lagged: the box alternates between sticking (moving with the belt) and sliding
    at exactly ±μ g; its height and normal force do not change while it slides (no gliding)."""
    r, scene = _belt_run("lagged")
    mu, dt, m = 0.3, scene.dt, 1.0
    slip, inner = _phases(r)
    assert 0.3 < slip.mean() < 0.9, slip.mean()                 # both phases, repeatedly
    assert np.count_nonzero(np.diff(slip.astype(int)) == -1) >= 2           # sticks again at least twice
    a = np.diff(r[:, 1]) / dt
    np.testing.assert_allclose(np.abs(a[inner[1:]]), mu * G, rtol=1e-3)    # Coulomb: |a| = μ g
    np.testing.assert_allclose(r[~slip, 1], r[~slip, 2], atol=1e-3)        # stuck: moves with the belt
    settled = r[5:]
    assert np.ptp(settled[:, 3]) < 1e-7, np.ptp(settled[:, 3])             # no vertical motion
    assert np.abs(settled[:, 4]).max() < 1e-5
    np.testing.assert_allclose(settled[:, 5], m * G * dt, rtol=1e-3)       # normal force = weight


@pytest.mark.parametrize("solver", ["sap", pytest.param("similar", marks=pytest.mark.slow)])
def test_conveyor_belt_sap_glides_while_sliding_and_lands_when_stuck(solver):
    """ICF §XI-A under SAP and Similar: while the box slides it rides above the belt at the gap
    dt μ |v_t| of their convex approximations (the normal velocity μ |v_t| held for one step: the
    gliding artefact), and is back on the belt once it sticks."""
    r, scene = _belt_run(solver)
    mu, dt = 0.3, scene.dt
    slip, inner = _phases(r)
    vt = np.abs(r[:, 1] - r[:, 2])
    gap = r[:, 3] - r[~slip, 3].min()
    sliding = inner & (vt > 0.02)
    assert np.count_nonzero(sliding) > 40
    np.testing.assert_allclose(gap[sliding] / (dt * mu * vt[sliding]), 1.0, atol=0.1)
    stuck = (vt < 1e-4) & (np.arange(len(r)) >= 5)     # stuck (not about to slide), settled
    stuck[2:] &= ~slip[:-2]                             # and landed: two steps after a slide
    assert np.count_nonzero(stuck) > 20 and np.abs(gap[stuck]).max() < 1e-6      # back on the belt

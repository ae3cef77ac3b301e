"""The two uses of the rollout gradients (issue 33 item 3), from their scenes: system identification of μ
and E of a soft cube sliding and tipping (scenes/sysid_cube.py) and contact-implicit trajectory optimization
of a force-driven finger pushing a box (scenes/push_trajopt.py). CI runs short versions (10 steps) and the
30-step identification (slow, sample); the 50-step (0.5 s) push is slow."""
import numpy as np
import pytest

from tests.helpers.scenes_util import load_scene


@pytest.mark.parametrize("steps", [10, pytest.param(30, marks=[pytest.mark.slow, pytest.mark.sample])])
def test_sysid_recovers_mu_and_youngs_modulus_from_2x_off(steps):
    """Recorded at (μ, E) = (0.4, 2e4 Pa); from (0.8, 1e4) the fit recovers both within 1% (it reaches
    round-off: the data are noise-free and the model the same)."""
    m = load_scene("sysid_cube")
    recorded = m.record(steps)
    assert np.ptp(recorded[:, :, 0]) > 0.05                      # it slides,
    assert np.ptp(recorded[:, :, 2].min(axis=1)) > 1e-3          # lands on its edge and tips flat
    found = m.identify(recorded, 2 * m.MU, m.YOUNG / 2)
    print(f"sysid {steps} steps: mu {found['mu']:.8g} E {found['youngs_modulus']:.8g} {found['evaluations']} "
          f"rollouts {found['jacobians']} Jacobians {found['wall_s']:.1f} s wall {found['cpu_s']:.1f} s CPU")
    assert found["mu"] == pytest.approx(m.MU, rel=1e-2)
    assert found["youngs_modulus"] == pytest.approx(m.YOUNG, rel=1e-2)
    assert found["cost"][-1] < 1e-6 * found["cost"][0]


@pytest.mark.parametrize("steps, target, stop", [
    (10, (0.02, 0.01, 0.05), 5e-3),
    pytest.param(50, None, 1e-3, marks=pytest.mark.slow)])
def test_push_trajopt_brings_the_box_within_1cm_of_the_target(steps, target, stop, tmp_path):
    """From a constant push (the box ends 2-8.5 cm off), L-BFGS-B on the rollout gradient finds finger forces
    that leave the box within 1 cm of the target; the contact (when the finger touches the box) is not
    prescribed. The cost falls, and the plot of cost per iteration is written."""
    m = load_scene("push_trajopt")
    kwargs = {} if target is None else {"target": target, "push": 1.0}
    found = m.optimize(steps, stop_distance=stop, **kwargs)
    print(f"push {steps} steps: distance {found['distance'][0]:.4f} -> {found['distance'][-1]:.5f} m, "
          f"{found['iterations']} iterations {found['evaluations']} rollouts {found['retries']} retries "
          f"{found['wall_s']:.1f} s wall {found['cpu_s']:.1f} s CPU")
    assert found["distance"][0] > 0.015
    assert found["distance"][-1] < 0.01
    assert found["cost"][-1] < 0.2 * found["cost"][0]
    from femcontact.io.results import plot_history
    plot_history(found["cost"], tmp_path / "cost.png", "push_trajopt")
    assert (tmp_path / "cost.png").stat().st_size > 1000

"""Shared test helper: the period of an oscillation measured on a running simulation."""
import numpy as np


def measured_period(sim, body: str, duration: float) -> float:
    """Run ``sim`` for ``duration`` s and return twice the mean time between zero crossings of the
    rigid body's centre-of-mass x (linearly interpolated between steps), in s."""
    xs, ts = [], []
    for _ in range(int(duration / sim.scene.dt)):
        sim.step()
        xs.append(sim.rigid_pose(body)[0][0])
        ts.append(sim.state.time)
    xs, ts = np.array(xs), np.array(ts)
    z = np.flatnonzero(np.sign(xs[1:]) != np.sign(xs[:-1]))
    crossings = ts[z] - xs[z] * (ts[z + 1] - ts[z]) / (xs[z + 1] - xs[z])
    return 2.0 * float(np.mean(np.diff(crossings)))

"""Host cost of the joints' assembly per step (``JointSystem.assemble``: rows, coordinate terms, scatter).

    python tools/bench_joints.py [--calls 200] [--repeats 5]

Scene: the Panda holding its ready pose (scenes/panda_hold.py: 7 hinges and 2 prismatic fingers, one
a mimic, all driven and gravity compensated), stepped 5 times first (kernels compiled, drives and
angles set up). Prints the minimum and median over ``repeats`` of the mean time of ``calls``
assemblies (ms), each into the simulator's own A and b (their values do not matter here).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import femcontact as fc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenes"))
import panda_hold  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sim = fc.Simulator(panda_hold.build(duration=1.0))
    for _ in range(5):
        sim.step()
    joints, s = sim.model.joints, sim.state
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            joints.assemble(s, sim.control, sim.A, sim.b, sim.coef, s.time, sim.scene.dt)
        times.append((time.perf_counter() - t0) / args.calls * 1e3)
    print(f"joints.assemble, Panda ({joints.count} joints): min {min(times):.3f} ms, "
          f"median {statistics.median(times):.3f} ms over {args.repeats} x {args.calls} calls")


if __name__ == "__main__":
    main()

"""The cost of Dask per sweep run: the same runs as a plain loop in one process and as ``femcontact.sweep``.

    python tools/bench_sweep.py [--scene tests/helpers/sweep_scene.py] [--runs 12] [--steps 20] [--workers 1 2]

Plain loop: one process, Taichi initialised and the kernels compiled by a warm-up run first, then
``--runs`` runs (build the scene, make a Simulator, ``run(steps)``, no output), timed per run.
Sweep: a ``LocalCluster`` of ``--workers`` single-threaded processes is started (timed), warmed by a
sweep of one run per worker (each worker process initialises Taichi and loads the kernels: timed),
then a sweep of ``--runs`` runs over a friction grid (timed, no output). The overhead per run is
(sweep wall time x workers / runs) - (loop time per run): scheduling, pickling, the result.json,
the table and the plot, and for several workers the contention of the processes for the cores;
the part outside ``run_one`` (wall x workers / runs minus the mean time inside it) is Dask's own.
"""
import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def plain_loop(scene: Path, frictions, steps: int) -> list[float]:
    import femcontact as fc
    from femcontact.sweep import run_one

    fc.backend.init("cpu")
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, mu in enumerate([frictions[0], *frictions]):
            t0 = time.perf_counter()
            row = run_one({"scene": str(scene), "params": {"friction": mu}, "run": k, "repeat": 0,
                           "run_dir": os.path.join(tmp, f"r{k}"), "steps": steps, "output": False, "arch": "cpu"})
            assert row["status"] == "ok", row["error"]
            times.append(time.perf_counter() - t0)
    return times[1:]          # the first one compiled


def on_dask(scene: Path, frictions, steps: int, workers: int) -> dict:
    import femcontact as fc
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"FEMCONTACT_CPU_THREADS": "1"}) as cluster, Client(cluster) as client:
        t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            fc.sweep(scene, {"friction": [0.3 + 0.01 * k for k in range(workers)]}, out=Path(tmp) / "warm",
                     steps=steps, output=False, client=client, progress=False)
            t2 = time.perf_counter()
            df = fc.sweep(scene, {"friction": frictions}, out=Path(tmp) / "timed", steps=steps, output=False,
                          client=client, progress=False)
            t3 = time.perf_counter()
    assert (df["status"] == "ok").all()
    return {"cluster_s": t1 - t0, "warm_s": t2 - t1, "sweep_s": t3 - t2, "in_worker_s": float(df["wall_s"].mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", default=str(ROOT / "tests/helpers/sweep_scene.py"))
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    scene = Path(args.scene).resolve()
    frictions = list(np.round(np.linspace(0.1, 1.0, args.runs), 6))
    loop = plain_loop(scene, frictions, args.steps)
    per_loop = float(np.mean(loop))
    print(f"scene {scene.name}, {args.runs} runs of {args.steps} steps, {os.cpu_count()} cores")
    print(f"plain loop:        {per_loop * 1e3:8.1f} ms per run (median {np.median(loop) * 1e3:.1f})")
    for w in args.workers:
        r = on_dask(scene, frictions, args.steps, w)
        per = r["sweep_s"] / args.runs
        print(f"dask, {w} worker(s): {per * 1e3:8.1f} ms per run wall ({per * w * 1e3:.1f} ms per run per worker, "
              f"{r['in_worker_s'] * 1e3:.1f} ms inside run_one); overhead per run {(per * w - per_loop) * 1e3:+.1f} ms "
              f"vs the loop, {(per * w - r['in_worker_s']) * 1e3:+.1f} ms outside run_one (dispatch, gather); "
              f"cluster start {r['cluster_s']:.1f} s, first run per worker {r['warm_s']:.1f} s")


if __name__ == "__main__":
    main()

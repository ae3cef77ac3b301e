"""The benchmark harness from tools/: the same as ``femcontact bench`` (femcontact/bench/).

    python tools/bench_tables.py [--table table1 table2 fig11 clutter cube_drop pgs_convergence]
                                 [--solvers cond pgs lagged incp ...] [--quick] [--small]
                                 [--fig11-sizes 12 26 48] [--steps N] [--out DIR] [--arch cpu] [--precision f64]

docs/BENCHMARKS.md explains the tables and their columns.
"""
import sys

from femcontact.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))

#!/bin/bash
# Wall time of `femcontact run` with default output, two checkouts interleaved in one sitting
# (docs/PERFORMANCE.md, "Output (issue 29)"):
#   tools/bench_output.sh BEFORE_CHECKOUT AFTER_CHECKOUT [BASE_FOLDER]
# Each of cantilever (300 steps) and clutter (100 steps) runs before, after and after with --every 1,
# twice, each into a fresh folder under BASE_FOLDER; prints the process wall time, the frame count
# and the RunSummary's time split. Report the minima.
set -u
BEFORE=${1:?before checkout}; AFTER=${2:?after checkout}; BASE=${3:-/tmp/bench_output}
PY=${PYTHON:-python}
SCENES=$(cd "$(dirname "$0")/.." && pwd)/scenes
mkdir -p "$BASE"
for rep in 1 2; do
  for scene in cantilever:300 clutter:100; do
    S=${scene%%:*}; N=${scene##*:}
    for cfg in before after after_every1; do
      case $cfg in before) P=$BEFORE; X="";; after) P=$AFTER; X="";; after_every1) P=$AFTER; X="--every 1";; esac
      out=$BASE/runs/${S}_${cfg}_$rep
      log=$BASE/log_${S}_${cfg}_$rep.txt
      t0=$(date +%s.%N)
      PYTHONPATH=$P $PY -m femcontact run "$SCENES/$S.py" --steps "$N" --out "$out" --arch cpu --no-progress $X >"$log" 2>&1
      t1=$(date +%s.%N)
      frames=$(PYTHONPATH=$P $PY -c "import sys, pyvista as pv; print(len(pv.get_reader(sys.argv[1]).time_values))" "$out/run.pvd")
      echo "$S $cfg rep$rep process_wall $(echo "$t1 - $t0" | bc) s, $frames frames, $(du -sm "$out" | cut -f1) MB"
      grep -E "^DOF|^wall time" "$log"
    done
  done
done

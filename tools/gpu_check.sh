#!/usr/bin/env bash
# The GPU check (issue 28 item 4): one command for a machine with a CUDA GPU, under 9 minutes on an H100.
#
#   bash tools/gpu_check.sh [REPORT_DIR]        (default: out/gpu_check-<UTC date and time>)
#
# It installs nothing: run it where femcontact is installed as the README says. It runs
#   1. the CUDA test sample (FEMCONTACT_ARCH=cuda): the known-answer files of FEM, contact, COND, the
#      Newton path and rods, at most TEST_BUDGET seconds (default 180: the first run on a machine compiles every kernel for CUDA);
#   2. the scaling benchmark tools/bench_gpu.py: COND and Lagged on the soft-cube drop at 100k, 300k
#      and 1M DOF, f64 and f32, within BENCH_BUDGET seconds (default 240; a case that overruns its
#      share is killed and reported, not waited for); Lagged's "auto" is the Newton PCG in kernels there;
#   3. the Newton PCG side by side with the host factorizations (tools/bench_newton_pcg.py): Lagged on
#      the same cube at 2k and 15k DOF (the sizes measured on the CPU in docs/PERFORMANCE.md), CHOLMOD
#      against the PCG (warm, cold, rtol 1e-6), f64 and f32, within NEWTON_BUDGET seconds (default 90);
# and writes REPORT_DIR/report.md and REPORT_DIR/report.json (with env.txt, tests.log, bench.log,
# newton_pcg.log and scaling/). Copy report.md into docs/GPU.md. An existing non-empty REPORT_DIR is refused, never
# overwritten. Exit status: 0 when the tests passed and every case ran, 1 otherwise.
# A dry run on a machine without a GPU: GPU_CHECK_ARCH=cpu BENCH_ARGS="--dofs 3k 10k" NEWTON_DOFS=2k bash tools/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/gpu_check-$(date -u +%Y%m%dT%H%MZ)}
TEST_BUDGET=${TEST_BUDGET:-180}
BENCH_BUDGET=${BENCH_BUDGET:-240}
NEWTON_BUDGET=${NEWTON_BUDGET:-90}
NEWTON_DOFS=${NEWTON_DOFS:-2k 15k}
PY=${PYTHON:-python3}
ARCH=${GPU_CHECK_ARCH:-cuda}
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu_check: $OUT exists and is not empty; give another folder (nothing is overwritten)" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
export FEMCONTACT_ARCH=$ARCH PYTHONUNBUFFERED=1
start=$(date +%s)

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "cpu: $(nproc) cores"
  $PY --version 2>&1 | sed 's/^/python: /'
  $PY -c "import femcontact as fc; fc.backend.init(); print('femcontact:', fc.backend.describe())" 2>&1 | tail -1
} > "$OUT/env.txt"
cat "$OUT/env.txt"
if ! grep -q "on $ARCH" "$OUT/env.txt"; then
  echo "gpu_check: femcontact found no $ARCH backend here (see $OUT/env.txt)" >&2
  exit 1
fi

echo "gpu_check: 1/3 $ARCH test sample (at most ${TEST_BUDGET} s)"
timeout --kill-after=10 "$TEST_BUDGET" $PY -m pytest -q -p no:cacheprovider -m "not slow" \
  tests/bodies/test_fem.py tests/physics/test_contact_physics.py tests/solvers/cond/test_cond.py \
  tests/solvers/test_sap.py tests/solvers/test_newton_pcg.py tests/bodies/test_rods.py \
  > "$OUT/tests.log" 2>&1
test_rc=$?
tail -3 "$OUT/tests.log"

echo "gpu_check: 2/3 scaling benchmark (at most ${BENCH_BUDGET} s)"
# shellcheck disable=SC2086
$PY tools/bench_gpu.py --out "$OUT/scaling" --arch "$ARCH" --budget "$BENCH_BUDGET" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
bench_rc=$?
grep "^bench_gpu" "$OUT/bench.log" | tail -30

echo "gpu_check: 3/3 Newton PCG against CHOLMOD (at most ${NEWTON_BUDGET} s)"
# shellcheck disable=SC2086
$PY tools/bench_newton_pcg.py --arch "$ARCH" --dofs $NEWTON_DOFS --steps 2 --variants cholmod pcg pcg_cold pcg_1e-6 \
  --budget "$NEWTON_BUDGET" --json "$OUT/newton_pcg.json" --md "$OUT/newton_pcg.md" > "$OUT/newton_pcg.log" 2>&1
newton_rc=$?
tail -12 "$OUT/newton_pcg.log"

$PY - "$OUT" "$test_rc" "$bench_rc" "$(( $(date +%s) - start ))" "$newton_rc" <<'EOF'
import json, re, sys
from pathlib import Path
out, test_rc, bench_rc, wall = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
newton_rc = int(sys.argv[5])
env = (out / "env.txt").read_text()
runtime = env.split("femcontact: ")[-1].strip()
log = (out / "tests.log").read_text(errors="replace")
summary = next((l for l in reversed(log.splitlines()) if re.search(r"\d+ (passed|failed)", l)), "")
if test_rc == 124 or test_rc == 137:
    summary = f"stopped at the time limit ({summary or 'no summary'})"
failed = [l for l in log.splitlines() if l.startswith(("FAILED", "ERROR"))]
scaling = out / "scaling" / "report.json"
rows = json.loads(scaling.read_text())["rows"] if scaling.is_file() else []
scaling_md = (out / "scaling" / "report.md").read_text() if (out / "scaling" / "report.md").is_file() else \
    "(the scaling benchmark wrote no report: see bench.log)\n"
newton = json.loads((out / "newton_pcg.json").read_text()) if (out / "newton_pcg.json").is_file() else []
newton_md = (out / "newton_pcg.md").read_text() if (out / "newton_pcg.md").is_file() else \
    "(the Newton PCG benchmark wrote no table: see newton_pcg.log)\n"
ok = test_rc == 0 and bench_rc == 0 and newton_rc == 0 and rows and all(r.get("status") == "ok" for r in rows)
md = ["# GPU check", "", "```", env.strip(), f"wall: {wall} s", "```", "",
      f"## Test sample ({runtime})", "", f"`{summary}` (exit {test_rc})", ""]
md += [f"- {l}" for l in failed[:40]] + [""]
md += [scaling_md.replace("# GPU scaling", "## Scaling")]
md += ["## Newton PCG against CHOLMOD (Lagged, soft cube; tools/bench_newton_pcg.py)", "", newton_md,
       "newton: Newton iterations per step; cg_per_newton: CG iterations per Newton iteration; ms_per_cg: the "
       "linear solves' ms per CG iteration; a/h_matvec_us: one bare matvec of A / of H = Ã + JᵀGJ (µs); "
       "cg_iter_us: one bare CG iteration (its three launches, µs); cg_iter_per_matvec: that over h_matvec.", ""]
(out / "report.md").write_text("\n".join(md))
(out / "report.json").write_text(json.dumps({"env": env, "wall_s": wall, "tests": {"exit": test_rc, "summary": summary,
                                             "failed": failed}, "scaling": rows, "newton_pcg": newton, "ok": bool(ok)}, indent=1))
print(f"gpu_check: report in {out}/report.md ({'all passed' if ok else 'NOT all passed'}, {wall} s)")
sys.exit(0 if ok else 1)
EOF

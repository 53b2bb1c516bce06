#!/usr/bin/env bash
# The whole suite, run again and again: once on a quiet machine, then RUNS_UNDER_LOAD times with a
# CPU hog (one busy loop per core) beside it. A test that depends on the machine's speed fails
# here before it fails a landing. Logs and a summary go to test-artifacts/soak/.
#   scripts/soak_tests.sh [python]   (make test-soak passes the virtualenv's)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"
RUNS_UNDER_LOAD="${RUNS_UNDER_LOAD:-3}"
HOGS="${HOGS:-$(nproc)}"
OUT=test-artifacts/soak
mkdir -p "$OUT"
: >"$OUT/summary.txt"

hog_pids=()
start_hog() {
  for _ in $(seq 1 "$HOGS"); do
    # Plain busy loops at normal priority: they compete for every core the suite uses.
    python3 -c 'while True: pass' &
    hog_pids+=($!)
  done
}
stop_hog() {
  if [ ${#hog_pids[@]} -gt 0 ]; then
    kill "${hog_pids[@]}" 2>/dev/null
    wait "${hog_pids[@]}" 2>/dev/null
  fi
  hog_pids=()
}
trap stop_hog EXIT INT TERM

failed=0
run_suite() {  # $1: label
  local label=$1 log="$OUT/$1.log" started ended status closing
  started=$(date +%s)
  TUNEDECK_REQUIRE_POSTGRES=1 "$PY" -m pytest -q -p no:cacheprovider >"$log" 2>&1
  status=$?
  ended=$(date +%s)
  closing=$(grep -E '(passed|failed|error)' "$log" | tail -n 1)
  printf '%-14s exit %s in %5ss  %s\n' "$label" "$status" "$((ended - started))" "$closing" | tee -a "$OUT/summary.txt"
  if [ "$status" -ne 0 ]; then
    failed=1
    grep -E '^(FAILED|ERROR) ' "$log" | tee -a "$OUT/summary.txt"
  fi
}

run_suite quiet
for run in $(seq 1 "$RUNS_UNDER_LOAD"); do
  start_hog
  run_suite "loaded-$run"
  stop_hog
done
echo "summary: $OUT/summary.txt"
exit "$failed"

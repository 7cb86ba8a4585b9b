#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck, initcheck and synccheck over a workload script
# (default benchmarks/sanitize_gpu.py; benchmarks/sanitize_spgemm.py for the SpGEMM).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SCRIPT=${1:-benchmarks/sanitize_gpu.py}
status=0
for tool in memcheck racecheck initcheck synccheck; do
  out=$(compute-sanitizer --tool "$tool" --error-exitcode 9 --target-processes all $PY "$SCRIPT" 2>&1)
  rc=$?
  summary=$(echo "$out" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
  echo "$tool: rc=$rc ${summary:-}"
  if [ $rc -ne 0 ]; then status=1; echo "$out" | tail -30; fi
done
exit $status

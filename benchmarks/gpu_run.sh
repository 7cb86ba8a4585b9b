#!/usr/bin/env bash
# Everything the GPU machine does in one call: build, GPU tests, sanitizers, benchmark.
#   bash benchmarks/gpu_run.sh [DATA_DIR] [bench args...]
# Results and logs go to $OUT (or benchmarks/results/raw); the benchmark table prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-.data}; shift || true
OUT=${OUT:-benchmarks/results/raw}; mkdir -p "$OUT"
export ACCSPMM_DATA_DIR=$PWD/$DATA ACCSPMM_CUDA=1 ACCSPMM_CUDA_ARCHS=${ACCSPMM_CUDA_ARCHS:-90} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -m gpu -q tests -p no:cacheprovider -W ignore::DeprecationWarning 2>&1 | tee "$OUT/gpu_tests.log" | tail -3
  bash benchmarks/sanitize_gpu.sh 2>&1 | tee "$OUT/sanitize.log"
fi
python3 benchmarks/bench_gpu.py "$DATA" --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | grep -v "^|" 
cat "$OUT/results.md"

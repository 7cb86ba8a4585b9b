#!/usr/bin/env bash
# Everything the GPU machine does in one call: build, GPU tests, sanitizers, benchmark.
#   bash benchmarks/gpu_run.sh [DATA_DIR] [bench args...]
# Environment:
#   STAGES        stages to run, in this order (default "tests sanitize bench"):
#                 baseline: benchmark the checkout in $BASELINE_DIR (built in place, run first,
#                           before this checkout is installed) with $BASELINE_ARGS;
#                 tests: pytest -m gpu over $TEST_PATHS (default: tests; name files to split the
#                           suite over two calls), -k "$PYTEST_K" when set, stopped after $TESTS_TIMEOUT s
#                           (the 25 slowest tests go to run.log)
#                           (default 560: on an H100 on 2026-11-25 the whole GPU suite had run
#                           about 545 of its tests at 440 s; 560 s still fits one 600 s device
#                           call with a carried build);
#                 sanitize: compute-sanitizer;
#                 ncu: Nsight Compute counters of the TF32 kernel (benchmarks/ncu_gpu.py);
#                 bench: benchmarks/bench_gpu.py DATA_DIR with the remaining arguments;
#                 python: benchmarks/bench_python.py DATA_DIR $PYBENCH_ARGS (the call as users make it);
#                 preprocess: benchmarks/bench_preprocess_gpu.py DATA_DIR $PREP_ARGS (GPU build, break-even);
#                 scaling: benchmarks/affinity_scaling.py DATA_DIR $SCALING_ARGS (affinity vs threads);
#                 profile: benchmarks/profile_setup.py DATA_DIR $PROFILE_ARGS (where setup time goes);
#                 half: benchmarks/bench_half.py DATA_DIR $HALF_ARGS (FP16/BF16 against the vendor paths);
#                 sanitize_spgemm: compute-sanitizer over benchmarks/sanitize_spgemm.py;
#                 spgemm: benchmarks/bench_spgemm.py DATA_DIR $SPGEMM_ARGS (SpGEMM against cuSPARSE, CuPy, torch);
#                 profile_spgemm: every kernel of one product per $SPGEMM_KERNELS entry (NAME:ALGO) under
#                           ncu (ncu_spgemm.csv; $NCU_FLAGS added, e.g. "--clock-control none" for the
#                           boost clock), and the host side of $SPGEMM_PYTHON products (cProfile).
#   PREBUILT      1: use extensions built elsewhere for this machine's Python (accspmm/*.cpython-3*.so,
#                 or packed in .prebuilt/ext.tar.xz by benchmarks/prebuild.sh) when they import,
#                 instead of compiling here (pip install otherwise).
#   OUT           where logs and results go (default benchmarks/results/raw): run.log (every
#                 stage's output), results.json/md, baseline/results.json/md, ncu.txt, python.json/md.
# The benchmark table prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-.data}; shift || true
OUT=${OUT:-benchmarks/results/raw}; mkdir -p "$OUT"
STAGES=" ${STAGES:-tests sanitize bench} "
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
LOG="$OUT/run.log"
export ACCSPMM_DATA_DIR=$PWD/$DATA ACCSPMM_CUDA=1 ACCSPMM_CUDA_ARCHS=${ACCSPMM_CUDA_ARCHS:-90} PYTHONUNBUFFERED=1
stage() { echo "=== $1 ($(date +%T))" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
if [[ $STAGES == *" baseline "* ]]; then
  stage "baseline: $BASELINE_DIR"
  (cd "$BASELINE_DIR" && python3 setup.py -q build_ext --inplace >> "$LOG" 2>&1) || echo "baseline build failed" | tee -a "$LOG"
  PYTHONPATH=$PWD/$BASELINE_DIR timeout "${BASELINE_TIMEOUT:-300}" python3 "$BASELINE_DIR/benchmarks/bench_gpu.py" "$DATA" \
    --out "$OUT/baseline" ${BASELINE_ARGS:-} >> "$LOG" 2>&1 || echo "baseline bench failed or timed out" | tee -a "$LOG"
fi
stage build
if [[ -n "${PREBUILT:-}" && -f .prebuilt/ext.tar.xz ]]; then tar -xJf .prebuilt/ext.tar.xz -C accspmm; fi
if [[ -n "${PREBUILT:-}" ]] && PYTHONPATH=$PWD python3 -c "import accspmm._core, accspmm._cuda" >> "$LOG" 2>&1; then
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  echo "using the carried extensions" | tee -a "$LOG"
else
  rm -f accspmm/_core.cpython-3*.so accspmm/_cuda.cpython-3*.so
  python3 -m pip install --no-build-isolation --no-deps -e . >> "$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
fi
if [[ $STAGES == *" tests "* ]]; then
  stage tests
  # shellcheck disable=SC2086
  timeout "${TESTS_TIMEOUT:-560}" python3 -m pytest -m gpu -q ${TEST_PATHS:-tests} -p no:cacheprovider \
    -W ignore::DeprecationWarning --durations=25 -k "${PYTEST_K:-}" ${PYTEST_X--x} -rs 2>&1 | tee -a "$LOG" | tail -${PYTEST_TAIL:-6}
fi
if [[ $STAGES == *" sanitize "* ]]; then
  stage sanitize
  timeout "${SANITIZE_TIMEOUT:-300}" bash benchmarks/sanitize_gpu.sh 2>&1 | tee -a "$LOG"
fi
if [[ $STAGES == *" sanitize_spgemm "* ]]; then
  stage sanitize_spgemm
  timeout "${SANITIZE_TIMEOUT:-300}" bash benchmarks/sanitize_gpu.sh benchmarks/sanitize_spgemm.py 2>&1 | tee -a "$LOG"
fi
if [[ $STAGES == *" ncu "* ]]; then
  stage ncu
  timeout "${NCU_TIMEOUT:-240}" python3 benchmarks/ncu_gpu.py "$DATA" --out "$OUT/ncu.txt" ${NCU_ARGS:-} 2>&1 | tail -60 | tee -a "$LOG"
fi
if [[ $STAGES == *" bench "* ]]; then
  stage bench
  timeout "${BENCH_TIMEOUT:-540}" python3 benchmarks/bench_gpu.py "$DATA" --out "$OUT" "$@" 2>&1 | tee -a "$LOG" | grep -v "^|"
  [ -f "$OUT/results.md" ] && tail -25 "$OUT/results.md"
fi
if [[ $STAGES == *" python "* ]]; then
  stage python
  timeout "${PYBENCH_TIMEOUT:-540}" python3 benchmarks/bench_python.py "$DATA" --out "$OUT" ${PYBENCH_ARGS:-} 2>&1 \
    | tee -a "$LOG" | grep -v "^|" | tail -40
  [ -f "$OUT/python.md" ] && grep -A12 "^## Summary" "$OUT/python.md"
fi
if [[ $STAGES == *" preprocess "* ]]; then
  stage preprocess
  timeout "${PREP_TIMEOUT:-540}" python3 benchmarks/bench_preprocess_gpu.py "$DATA" --out "$OUT" ${PREP_ARGS:-} 2>&1 \
    | tee -a "$LOG" | grep -v "^|" | tail -40
  [ -f "$OUT/preprocess_gpu.md" ] && cat "$OUT/preprocess_gpu.md"
fi
if [[ $STAGES == *" scaling "* ]]; then
  stage scaling
  timeout "${SCALING_TIMEOUT:-400}" python3 benchmarks/affinity_scaling.py "$DATA" --out "$OUT" ${SCALING_ARGS:-} 2>&1 \
    | tee -a "$LOG" | grep -v "^|" | tail -5
  [ -f "$OUT/affinity_scaling.md" ] && cat "$OUT/affinity_scaling.md"
fi
if [[ $STAGES == *" profile "* ]]; then
  stage profile
  timeout "${PROFILE_TIMEOUT:-300}" python3 benchmarks/profile_setup.py "$DATA" ${PROFILE_ARGS:-} > "$OUT/profile_setup.txt" 2>&1
  grep "^==" "$OUT/profile_setup.txt" | tee -a "$LOG"
fi
if [[ $STAGES == *" spgemm "* ]]; then
  stage spgemm
  timeout "${SPGEMM_TIMEOUT:-540}" python3 benchmarks/bench_spgemm.py "$DATA" --out "$OUT" ${SPGEMM_ARGS:-} 2>&1 \
    | tee -a "$LOG" | grep -v "^|" | tail -60
  [ -f "$OUT/spgemm.md" ] && grep -A20 "^## Summary" "$OUT/spgemm.md"
fi
if [[ $STAGES == *" profile_spgemm "* ]]; then
  stage profile_spgemm
  if [[ -n "${SPGEMM_KERNELS:-}" ]]; then
    timeout "${NCU_TIMEOUT:-240}" ncu --profile-from-start off ${NCU_FLAGS:-} --metrics gpu__time_duration.sum --csv --page raw \
      --log-file "$OUT/ncu_spgemm.csv" python3 benchmarks/profile_spgemm.py "$DATA" --kernels $SPGEMM_KERNELS 2>&1 | tail -5
  fi
  if [[ -n "${SPGEMM_NCU_DETAIL:-}" ]]; then  # NAME:ALGO:KERNEL_REGEX: one kernel's full sections
    IFS=: read -r name algo kre <<< "$SPGEMM_NCU_DETAIL"
    timeout "${NCU_TIMEOUT:-240}" ncu --profile-from-start off --kernel-name-base demangled -k "regex:$kre" -c 1 --section SpeedOfLight \
      --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SourceCounters \
      python3 benchmarks/profile_spgemm.py "$DATA" --kernels "$name:$algo" > "$OUT/ncu_detail.txt" 2>&1
    grep -E "Duration|Throughput|Occupancy|Stall|Registers|Warp Cycles|Issued|Block Limit|Hit Rate" "$OUT/ncu_detail.txt" | head -40
  fi
  if [[ -n "${SPGEMM_PYTHON:-}" ]]; then
    timeout 120 python3 benchmarks/profile_spgemm.py "$DATA" --python $SPGEMM_PYTHON > "$OUT/profile_spgemm.txt" 2>&1
    grep -A30 "^==" "$OUT/profile_spgemm.txt" | cut -c1-150 | head -80
  fi
fi
if [[ $STAGES == *" half "* ]]; then
  stage half
  timeout "${HALF_TIMEOUT:-540}" python3 benchmarks/bench_half.py "$DATA" --out "$OUT" ${HALF_ARGS:-} 2>&1 \
    | tee -a "$LOG" | grep -v "^|" | tail -60
  [ -f "$OUT/half.md" ] && cat "$OUT/half.md"
fi

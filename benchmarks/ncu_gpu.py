"""Nsight Compute counters of the TF32 kernel and of cuSPARSE on the same product.

    python benchmarks/ncu_gpu.py DIR [--matrices NAME ...] [--n 128] [--out ncu.txt]
    python benchmarks/ncu_gpu.py DIR --matrices varlen_50k_200 --n 32 --tuning '{"wide": "csr"}'

A name of benchmarks/structures.py is made, not read from DIR; ``--tuning`` goes to our plan.

For each matrix, runs (in a child process under ``ncu --clock-control none``) one product with
``accspmm.plan(A)`` and one with the best cuSPARSE CSR algorithm, inside an NVTX range so that only
those kernels are profiled, and keeps the SpeedOfLight, MemoryWorkloadAnalysis, Occupancy and
WarpStateStats sections.  The full report goes to --out; the key lines print."""

import argparse
import os
import subprocess
import sys

STALLS = ("long_scoreboard", "short_scoreboard", "lg_throttle", "mio_throttle", "tex_throttle", "wait", "barrier",
          "membar", "math_pipe_throttle", "no_instruction", "not_selected", "selected", "dispatch_stall",
          "drain", "imc_miss", "branch_resolving", "sleeping")
METRICS = ["sm__cycles_active.avg", "sm__cycles_active.max", "gpc__cycles_elapsed.max",
           "launch__grid_size", "sm__warps_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "lts__throughput.avg.pct_of_peak_sustained_elapsed"] + \
          [f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS]
KEYS = ("tf32_spmm_kernel", "csr_wide_kernel", "inst_executed", "lts__t", "cycles_active", "cycles_elapsed", "grid_size", "warps_active", "issue_stalled", "Duration", "DRAM Throughput", "Memory Throughput", "L1/TEX Hit Rate",
        "L2 Hit Rate", "Achieved Occupancy", "Registers Per Thread", "Mem Busy", "Max Bandwidth",
        "Warp Cycles Per Issued Instruction", "Compute (SM) Throughput", "  void ", "  spmm", "  csr")


def child(path, n, alg, tuning):
    import json

    import cupy as cp
    import numpy as np

    import accspmm
    from accspmm import datasets

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from structures import STRUCTURES, structure

    A = structure(path) if path in STRUCTURES else datasets.load_matrix(path, np.float32)
    A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
    ours = accspmm.plan(A, device="gpu", tuning=json.loads(tuning) if tuning else None)
    base = accspmm.plan(A, device="gpu", precision="fp32", cusparse_alg=alg)
    B = cp.random.RandomState(1).standard_normal((A.shape[1], n), dtype=cp.float32)
    C = cp.empty((A.shape[0], n), cp.float32)
    for _ in range(2):  # warm: cuSPARSE plan creation, first launches
        ours(B, out=C, check_finite=False)
        base(B, out=C)
    cp.cuda.Device().synchronize()
    cp.cuda.nvtx.RangePush("prof")
    ours(B, out=C, check_finite=False)
    base(B, out=C)
    cp.cuda.Device().synchronize()
    cp.cuda.nvtx.RangePop()
    print("schedule:", ours.stats["schedule_by_n"][n]["reason"], ours.stats["schedule_by_n"][n]["variant"],
          "reorder:", ours.stats["reorder"]["chosen"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory")
    ap.add_argument("--matrices", nargs="*", default=["blogcatalog", "G3_circuit", "wiki-Vote"])
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--alg", default="alg3", help="cuSPARSE algorithm to profile beside ours")
    ap.add_argument("--tuning", default="", help="our plan's tuning, JSON")
    ap.add_argument("--out", default="ncu.txt")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n, args.alg, args.tuning)
        return
    from accspmm import datasets
    from structures import STRUCTURES

    report = []
    for name in args.matrices:
        path = name if name in STRUCTURES else datasets.matrix_path(args.directory, name)
        cmd = ["ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", "prof/", "--section", "SpeedOfLight",
               "--section", "MemoryWorkloadAnalysis", "--section", "Occupancy", "--section", "WarpStateStats",
               "--section", "LaunchStats", "--metrics", ",".join(METRICS), sys.executable, os.path.abspath(__file__), args.directory,
               "--child", path, "--n", str(args.n), "--alg", args.alg, "--tuning", args.tuning]
        res = subprocess.run(cmd, capture_output=True, text=True)
        text = f"##### {name} N={args.n}\n{res.stdout}\n{res.stderr[-3000:]}\n"
        report.append(text)
        print(f"##### {name} N={args.n} (rc {res.returncode})")
        for line in text.splitlines():
            if any(k in line for k in KEYS) or line.startswith("schedule:"):
                print(line[:160])
    with open(args.out, "w") as fh:
        fh.write("\n".join(report))


if __name__ == "__main__":
    main()

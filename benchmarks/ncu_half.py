"""Nsight Compute counters of the half-precision kernels (accspmm._half) beside our TF32 kernel.

    python benchmarks/ncu_half.py DIR [--matrices NAME ...] [--n 128] [--out ncu_half.txt]

Profiles (in a child process under ``ncu --clock-control none``) one FP16 product per case:
the uniform 32x32-block matrix of benchmarks/bench_half.py at 90% block sparsity, 8192^2, N = 512
(BSR16), and each named real matrix at --n (BitTCF), next to the TF32 plan's kernel on the same
matrix; keeps SpeedOfLight, MemoryWorkloadAnalysis, Occupancy, WarpStateStats and LaunchStats.
The full report goes to --out; the key lines print."""

import argparse
import os
import subprocess
import sys

KEYS = ("half_kernel", "tf32_spmm_kernel", "Duration", "DRAM Throughput", "Memory Throughput", "L1/TEX Hit Rate",
        "L2 Hit Rate", "Achieved Occupancy", "Registers Per Thread", "Compute (SM) Throughput",
        "Warp Cycles Per Issued Instruction", "Stall", "Theoretical Occupancy", "Block Limit")


def child(dirname, names, n):
    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import accspmm
    from accspmm import datasets
    from bench_half import block_matrix

    cases = [("uniform32-8192-0.9", block_matrix(8192, 0.9, "uniform"), 512)]
    for name in names:
        A = datasets.load_matrix(datasets.matrix_path(dirname, name), np.float32)
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
        cases.append((name, A, n))
    for name, A, width in cases:
        half, tf = accspmm.plan(A, precision="fp16"), accspmm.plan(A)
        B = torch.randn(A.shape[1], width, device="cuda")
        Bh = B.half()
        for _ in range(2):
            half(Bh), tf(B)
        torch.cuda.synchronize()
        print(f"CASE {name}: {half.format} then TF32", flush=True)
        torch.cuda.nvtx.range_push("prof")
        half(Bh)
        tf(B)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=".data")
    ap.add_argument("--matrices", nargs="*", default=["landmark", "cnr-2000", "G3_circuit"])
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--out", default="ncu_half.txt")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.dir, args.matrices, args.n)
        return
    cmd = ["ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", "prof/", "--section", "SpeedOfLight",
           "--section", "MemoryWorkloadAnalysis", "--section", "Occupancy", "--section", "WarpStateStats",
           "--section", "LaunchStats", sys.executable, os.path.abspath(__file__), args.dir, "--n", str(args.n),
           "--child", "--matrices", *args.matrices]
    out = subprocess.run(cmd, capture_output=True, text=True)
    with open(args.out, "w") as fh:
        fh.write(out.stdout + out.stderr)
    for line in (out.stdout + out.stderr).splitlines():
        if any(k in line for k in KEYS) or line.startswith("CASE"):
            print(line)


if __name__ == "__main__":
    main()

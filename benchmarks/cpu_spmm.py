"""CPU SpMM: accspmm's CSR path vs scipy's ``A @ B`` (same float32 data, same process).

    python benchmarks/cpu_spmm.py DIR [--matrices G3_circuit cnr-2000] [-n 128] [--repeat 5]

Median wall time of `repeat` runs each (after one warm-up), GFLOP/s = 2 nnz N / t."""

import argparse
import os
import time

import numpy as np

import accspmm
from accspmm import _core, datasets


def median_time(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory")
    ap.add_argument("--matrices", nargs="*", default=["G3_circuit", "cnr-2000"])
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"CPU: {_core.num_threads()} OpenMP threads; N={args.n}; float32; median of {args.repeat}")
    print("| matrix | nnz | scipy ms | accspmm ms | speedup | accspmm GFLOP/s | max abs diff |\n|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name in args.matrices:
        A = datasets.load_matrix(datasets.matrix_path(args.directory, name), np.float32)
        A.data = rng.standard_normal(A.nnz).astype(np.float32)
        B = rng.standard_normal((A.shape[1], args.n)).astype(np.float32)
        p = accspmm.plan(A, device="cpu")
        out = np.empty((A.shape[0], args.n), np.float32)
        t_ours = median_time(lambda: p(B, out=out), args.repeat)
        t_scipy = median_time(lambda: A @ B, args.repeat)
        diff = float(np.abs(out - A @ B).max())
        print(f"| {name} | {A.nnz} | {t_scipy * 1e3:.1f} | {t_ours * 1e3:.1f} | {t_scipy / t_ours:.2f}x | "
              f"{2 * A.nnz * args.n / t_ours / 1e9:.2f} | {diff:.2e} |")


if __name__ == "__main__":
    main()

"""The first call's schedule build with and without the task count that the pricing of the caps
already made (``accspmm._tf32.schedule(wo, cap)`` against ``schedule(wo, cap, ntasks)``), on the
default plan's window offsets and its chosen cap at N = 128; median of --reps calls, microseconds.
Run on the GPU machine (a default plan needs the GPU):

    python benchmarks/schedule_hint.py DIR [NAME ...] [--reps 200]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

import accspmm
from accspmm import _tf32, datasets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_spmm import median_time  # noqa: E402

DEFAULT = ("minnesota", "polblogs", "rajat01", "memplus", "deezer_europe", "usroads")


def median_us(f, reps):
    return median_time(f, reps) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()} host")
    print("| matrix | windows | cap | build, counting pass (us) | build with the priced count (us) |")
    print("|---|---|---|---|---|")
    for name in args.names:
        A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32)
        p = accspmm.plan(A)
        p(torch.ones(A.shape[1], 128, device="cuda"))
        wo = np.ascontiguousarray(p._tf32._window_offsets, np.int64)
        cap = p.stats["schedule_by_n"][128]["cap"]
        ntasks = _tf32.schedule(wo, cap)[0].shape[0]
        a = median_us(lambda: _tf32.schedule(wo, cap), args.reps)
        b = median_us(lambda: _tf32.schedule(wo, cap, ntasks), args.reps)
        print(f"| {name} | {len(wo) - 1} | {cap} | {a:.1f} | {b:.1f} |")
        p.close()


if __name__ == "__main__":
    main()

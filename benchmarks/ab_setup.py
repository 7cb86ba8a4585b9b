"""A default plan's setup (``accspmm.plan(A)`` plus its first call on a torch CUDA B, synchronised,
wall clock) per matrix, for an interleaved before/after of two builds on one boot of the GPU
machine (host times move by +-30% between boots):

    for r in 1 2 3; do
      PYTHONPATH=OLD_CHECKOUT python benchmarks/ab_setup.py old DIR NAME...
      PYTHONPATH=.            python benchmarks/ab_setup.py new DIR NAME...
    done > ab.txt

OLD_CHECKOUT: ``git archive <commit> accspmm`` unpacked, with that commit's extensions
(benchmarks/prebuild.sh) in its accspmm/.  One line per matrix: TAG NAME, the median, 25th and
75th percentile of ``--reps`` setups in ms, and the plan's own ``stats["seconds"]["total"]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import accspmm
from accspmm import datasets


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tag")
    ap.add_argument("dir")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    warm = datasets.load_matrix(datasets.bundled_path(), np.float32)
    accspmm.plan(warm)(torch.ones(warm.shape[1], args.n, device="cuda"))  # context, allocator, modules
    for name in args.names:
        A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32)
        B = torch.randn(A.shape[1], args.n, device="cuda")
        setup, total = [], []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            p = accspmm.plan(A)
            p(B)
            torch.cuda.synchronize()
            setup.append(time.perf_counter() - t0)
            total.append(p.stats["seconds"]["total"])
            p.close()
        q = np.percentile(setup, [25, 50, 75]) * 1e3
        print(f"{args.tag} {name} {q[1]:.3f} {q[0]:.3f} {q[2]:.3f} plan_total {np.median(total) * 1e3:.3f}",
              flush=True)


if __name__ == "__main__":
    main()

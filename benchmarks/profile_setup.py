"""Where a default plan's setup time goes, on the GPU machine:

    python benchmarks/profile_setup.py [DIR] [--only NAME ...] [--n 128] [--reps 7] [--top 25]

For each matrix: the median over ``--reps`` of ``accspmm.plan(A)`` and of its first call on a torch
CUDA B (synchronised, wall clock), the plan's ``stats["seconds"]``, then a cProfile of ``--prof-reps`` fresh
plans and first calls (per plan), sorted by cumulative time (the top ``--top`` functions, in microseconds).  Diagnostic; the
break-even against cuSPARSE is benchmarks/bench_preprocess_gpu.py.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import numpy as np
import torch

import accspmm
from accspmm import datasets


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--prof-reps", type=int, default=10, help="fresh plans + first calls under cProfile")
    args = ap.parse_args()
    files = datasets.matrix_files(args.dir) if args.dir else [datasets.bundled_path()]
    if args.only:
        files = [f for f in files if datasets.matrix_name(f) in args.only]
    print("GPU:", torch.cuda.get_device_name())
    warm = datasets.load_matrix(datasets.bundled_path(), np.float32)
    accspmm.plan(warm)(torch.ones(warm.shape[1], args.n, device="cuda"))
    for f in files:
        name = datasets.matrix_name(f)
        A = datasets.load_matrix(f, np.float32)
        B = torch.randn(A.shape[1], args.n, device="cuda")
        plan_s, first_s, steps = [], [], []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            p = accspmm.plan(A)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            p(B)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            plan_s.append(t1 - t0)
            first_s.append(t2 - t1)
            steps.append(p.stats["seconds"])
            p.close()
        med = {k: float(np.median([s.get(k, 0.0) for s in steps])) * 1e3 for k in steps[0]}
        print(f"\n== {name} nnz={A.nnz}: plan {np.median(plan_s) * 1e3:.2f} ms, first call "
              f"{np.median(first_s) * 1e3:.2f} ms (median of {args.reps}); steps ms "
              + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))
        prof = cProfile.Profile()
        torch.cuda.synchronize()
        for _ in range(args.prof_reps):
            prof.enable()
            p = accspmm.plan(A)
            p(B)
            torch.cuda.synchronize()
            prof.disable()
            p.close()
        st = pstats.Stats(prof).stats  # (file, line, name) -> (cc, ncalls, tottime, cumtime, callers)
        rows = sorted(st.items(), key=lambda kv: -kv[1][3])[: args.top]
        r = args.prof_reps
        print(f"cProfile of {r} fresh plans and first calls, per plan:")
        print(f"{'calls':>6} {'self us':>9} {'cum us':>9}  function")
        for (fname, line, func), (_, nc, tt, ct, _) in rows:
            print(f"{nc / r:6.1f} {tt * 1e6 / r:9.0f} {ct * 1e6 / r:9.0f}  {os.path.basename(fname)}:{line}({func})")


if __name__ == "__main__":
    main()

"""A/B of two builds of the TF32 kernel, kernel-only, on the same matrices (for a change that
must not cost speed, e.g. the non-finite tile check).

    PYTHONPATH=<build A> python benchmarks/ab_kernel.py DIR --out a.json [--ns 64 128 512] [--round 2]
    PYTHONPATH=<build B> python benchmarks/ab_kernel.py DIR --out b.json ...
    python benchmarks/ab_kernel.py --compare a.json b.json [more pairs ...]

Each plan uses no reordering and the cost model's schedule and variant without the first-call
timing (``tuning={"autotune": False}``), so both builds launch the same schedule and variant;
times are CUDA-event medians of --reps single launches after 5 warm-ups (timing.cu), finite B.
--compare prints the geometric mean of time_B / time_A over the runs found in every file,
taking the median over repeated files of one build (pass A1 B1 A2 B2 ...: odd files are A).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


def measure(args):
    import cupy as cp

    import accspmm
    from accspmm import _cuda, datasets

    out = {}
    for f in datasets.matrix_files(args.dir):
        name = datasets.matrix_name(f)
        A = datasets.load_matrix(f, np.float32).tocsr()
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
        with accspmm.plan(A, device="gpu", reorder="none", tuning={"autotune": False}) as p:
            for n in args.ns:
                B = cp.random.RandomState(n).standard_normal((A.shape[1], n), dtype=cp.float32)
                C = cp.empty((A.shape[0], n), cp.float32)
                p(B, out=C)
                a, v = p._tf32.args(B.data.ptr, C.data.ptr, n, None)
                _cuda.time_tf32(a, v, 5, None, 0, None)
                out[f"{name}@{n}"] = float(np.median(_cuda.time_tf32(a, v, args.reps, None, 0, None)))
        print(name, {k: round(v * 1e3, 1) for k, v in out.items() if k.startswith(name + "@")}, flush=True)
    with open(args.out, "w") as fh:
        json.dump({"gpu": accspmm.device_info()["name"], "ms": out}, fh, indent=1)


def compare(files):
    runs = [json.load(open(f))["ms"] for f in files]
    a, b = runs[0::2], runs[1::2]
    keys = sorted(set.intersection(*(set(r) for r in runs)))
    ratios = {k: float(np.median([r[k] for r in b]) / np.median([r[k] for r in a])) for k in keys}
    spread = {k: float(np.median([abs(x[k] - y[k]) / y[k] for x, y in zip(a[1:], a[:-1])])) for k in keys} if len(a) > 1 else {}
    g = math.exp(sum(math.log(x) for x in ratios.values()) / len(ratios))
    for k in keys:
        extra = f"  (A run-to-run {spread[k] * 100:.1f}%)" if spread else ""
        print(f"{k:24s} A {np.median([r[k] for r in a]) * 1e3:9.1f} us  B {np.median([r[k] for r in b]) * 1e3:9.1f} us  "
              f"B/A {ratios[k]:.3f}{extra}")
    print(f"geomean B/A over {len(keys)} runs: {g:.4f}; max {max(ratios.values()):.3f}, min {min(ratios.values()):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--ns", type=int, nargs="+", default=[64, 128, 512])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs="+")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare)
    elif args.dir and args.out:
        measure(args)
    else:
        sys.exit("give DIR and --out, or --compare")


if __name__ == "__main__":
    main()

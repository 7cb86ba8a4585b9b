"""Times the TF32 kernel at every schedule cap, for refitting the cost model (accspmm._tf32).

    python benchmarks/cap_sweep.py DIR [--ns 128 256 512] [--reps 10] [--only NAME ...] [--out DIR]

For every matrix and N: the plan as a user gets it (reorder "auto", first call tunes the variant),
then for every cap of --caps the tuned variant in both task orders and with the other slice width
S (the first call would time those too), each checked against the plan's own output (relative
error < 1e-3, every element written) and timed (CUDA events, median of --reps).  Writes
cap_sweep.json (times in ms per cap and variant) and windows.npz (the TC blocks per row window of
each matrix, which is all the cost model sees) into --out: with accspmm._tf32.build_tasks and
predict they are what a refit of the model's constants needs (no fitting script exists yet).
Run under another build (PYTHONPATH=<its checkout>) with --model-cap --staged for an A/B of two
kernels on the same schedules.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import accspmm  # noqa: E402
from accspmm import _cuda, datasets  # noqa: E402
from accspmm._tf32 import variant_tag  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402
from bench_gpu import check, median  # noqa: E402

CAPS = [0, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256]


def sweep_variants(v: dict, n: int, staged: bool = False) -> list:
    """The tuned variant in both task orders, and the same with the other slice width S (the
    16-byte path needs n to be a multiple of 32 S); with ``staged`` also the staged pipeline at
    depths 2 and 3 in both task orders."""
    out = [dict(v, order=o) for o in (0, 1)]
    if staged:
        out += [w for w in (dict(v, staged=1, depth=d, order=o) for d in (2, 3) for o in (0, 1)) if w not in out]
    other = 1 if v["slice_s"] != 1 else 2  # narrow steps (S = 0): S = 1
    if n % (32 * other) == 0:
        w = dict(v, slice_s=other, depth=3 if other == 2 and not v["staged"] else 2)
        out += [dict(w, order=o) for o in (0, 1)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory")
    ap.add_argument("--ns", type=int, nargs="*", default=[128, 256, 512])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--caps", type=int, nargs="*", default=CAPS)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--min-nnz", type=int, default=100_000)
    ap.add_argument("--model-cap", action="store_true", help="only the cost model's cap (not --caps)")
    ap.add_argument("--staged", action="store_true", help="also the staged pipeline (depths 2, 3)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "raw"))
    args = ap.parse_args()
    import cupy as cp

    os.makedirs(args.out, exist_ok=True)
    info = accspmm.device_info()
    runs, windows = [], {}
    rng = np.random.default_rng(0)
    for name, A in datasets.matrices(args.directory, args.only, np.float32):
        if A.nnz < args.min_nnz:
            continue
        t0 = time.perf_counter()
        A.data = rng.standard_normal(A.nnz).astype(np.float32)
        p = accspmm.plan(as_csr(A).canonicalized(), device="gpu", precision="tf32")
        runner = p._tf32
        windows[name] = np.diff(np.asarray(runner._window_offsets)).astype(np.int32)
        k = A.shape[1]
        for n in args.ns:
            B = cp.asarray(np.random.default_rng(1).standard_normal((k, n), dtype=np.float32))
            C = cp.empty((A.shape[0], n), cp.float32)
            p(B, out=C, check_finite=False)
            ref = C.copy()
            cap0, v0 = runner.decide(n)
            rec = {"matrix": name, "nnz": int(A.nnz), "n": n, "model_cap": cap0, "tuned": v0, "ms": {}}
            for cap in [cap0] if args.model_cap else args.caps:
                for v in sweep_variants(v0, n, args.staged):
                    call = runner.args(B.data.ptr, C.data.ptr, n, None, cap, v)
                    err, ok = check(cp, C, ref, call)
                    if not ok or not err < 1e-3:  # NaN fails too
                        raise SystemExit(f"{name} n={n} cap={cap} {variant_tag(v)}: wrong (err {err:.2e})")
                    _cuda.time_tf32(*call, 3, None, 0, None)
                    rec["ms"][f"{cap}/{variant_tag(v)}"] = median(_cuda.time_tf32(*call, args.reps, None, 0, None))
            runs.append(rec)
            best = min(rec["ms"].items(), key=lambda kv: kv[1])
            model = min(t for key, t in rec["ms"].items() if key.startswith(f"{cap0}/"))
            print(f"{name} n={n}: model cap {cap0} {model:.4f} ms, best {best[0]} {best[1]:.4f} ms "
                  f"({model / best[1]:.3f}x)", flush=True)
            del B, C, ref
        p.close()
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    meta = {"gpu": info["name"], "date": datetime.date.today().isoformat(), "command": " ".join(sys.argv)}
    with open(os.path.join(args.out, "cap_sweep.json"), "w") as fh:
        json.dump({"meta": meta, "runs": runs}, fh, indent=1)
    np.savez_compressed(os.path.join(args.out, "windows.npz"), **windows)


if __name__ == "__main__":
    main()

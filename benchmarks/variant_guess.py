"""How good is the TF32 plan's untimed guess?  Kernel time of the default plan's variant and cap
against every candidate the first-call timing would try, and against every cap.

    python benchmarks/variant_guess.py DIR [--ns 32 64 128 256 512] [--reps 15] [--rounds 2]
                                           [--only NAME ...] [--precision tf32|fp16] [--out DIR]

A default plan (``accspmm.plan(A)``: no reordering, ``calls`` unknown) does not time variants on its
first call (``AUTOTUNE_MIN_CALLS``); it launches the cost model's cap and ``choose_variant``'s guess.
For every matrix of DIR and width n this times, from C (CUDA events, median of --reps launches
after 3 warm-ups, the minimum over --rounds round-robin passes):

- every candidate variant of ``TF32Runner.candidates(n)`` at the model's cap, in both task orders;
- the guessed variant at every cap of ``accspmm._tf32.CAPS``.

``--precision fp16`` does the same for FP16 plans forced to BitTCF (``format="bittcf"``), which run
the TF32 kernel's runner with half operands.

None of these changes a result bit (same schedule for the variants; the caps only regroup whole
windows and split sums in a fixed order), so the result is checked only for being written.
Writes variant_guess.json (per case: the features the guess sees, the guess, every time) into --out
and prints, per case, the guess's time over the best variant's and over the best cap's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ns", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--precision", default="tf32", choices=("tf32", "fp16"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "raw"))
    args = ap.parse_args()

    import cupy as cp

    import accspmm
    from accspmm import _cuda, _tf32, datasets

    gpu = accspmm.device_info()["name"]
    cases = []
    for name, A in datasets.matrices(args.dir, args.only, np.float32):
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
        half = args.precision != "tf32"
        kw = {"precision": args.precision, "format": "bittcf"} if half else {}
        with accspmm.plan(A, device="gpu", **kw) as p:
            run = p._runner if half else p._tf32
            for n in args.ns:
                B = cp.random.RandomState(n).standard_normal((A.shape[1], n), dtype=cp.float32)
                if half:  # the plan's B format (BF16 runs the same code; CuPy has no bfloat16)
                    B = B.astype(cp.float16)
                C = cp.full((A.shape[0], n), cp.nan, B.dtype)
                p(B, out=C)
                if bool(cp.isnan(C).any()):
                    raise SystemExit(f"{name} n={n}: the plan's call left entries unwritten")
                cap, guess = run.decide(n)
                trials = {}  # tag -> (cap, variant)
                for v in run.candidates(n):
                    for order in (0, 1):
                        w = dict(v, order=order)
                        trials[f"{_tf32.variant_tag(w)}@{cap}"] = (cap, w)
                for c in _tf32.CAPS:
                    trials[f"{_tf32.variant_tag(guess)}@{c}"] = (c, guess)
                ms = {t: math.inf for t in trials}
                for _ in range(args.rounds):
                    for t, (c, w) in trials.items():
                        a, vt = run.args(B.data.ptr, C.data.ptr, n, None, c, w)
                        _cuda.time_tf32(a, vt, 3, None, 0, None)
                        ms[t] = min(ms[t], float(np.median(_cuda.time_tf32(a, vt, args.reps, None, 0, None))))
                gtag = f"{_tf32.variant_tag(guess)}@{cap}"
                at_cap = {t: x for t, x in ms.items() if t.endswith(f"@{cap}")}
                best_v = min(at_cap, key=at_cap.get)
                best_any = min(ms, key=ms.get)
                st = p.stats
                case = {"matrix": name, "n": n, "m": A.shape[0], "k": A.shape[1], "nnz": int(st["nnz"]),
                        "tc_blocks": int(st["tc_blocks"]), "windows": int(run.num_windows),
                        "b_bytes": int(A.shape[1] * n * B.dtype.itemsize), "l2_bytes": int(run._l2), "cap": cap,
                        "tasks": st["schedule_by_n"][n]["tasks"], "guess": gtag, "ms": ms,
                        "guess_ms": ms[gtag], "best_variant": best_v, "best_any": best_any}
                cases.append(case)
                print(f"{name:16s} n={n:4d} guess {gtag:22s} {ms[gtag] * 1e3:8.1f} us | best variant "
                      f"{best_v:22s} {ms[best_v] * 1e3:8.1f} ({ms[gtag] / ms[best_v]:.2f}x) | best "
                      f"{best_any:22s} {ms[best_any] * 1e3:8.1f} ({ms[gtag] / ms[best_any]:.2f}x)", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "variant_guess.json"), "w") as fh:
        json.dump({"gpu": gpu, "argv": sys.argv[1:], "precision": args.precision, "cases": cases}, fh, indent=1)
    r = [c["guess_ms"] / c["ms"][c["best_variant"]] for c in cases]
    ra = [c["guess_ms"] / c["ms"][c["best_any"]] for c in cases]
    print(f"{gpu}: guess / best variant at its cap: geomean {math.exp(np.mean(np.log(r))):.3f}, max {max(r):.2f}; "
          f"guess / best of everything: geomean {math.exp(np.mean(np.log(ra))):.3f}, max {max(ra):.2f} "
          f"over {len(cases)} cases")


if __name__ == "__main__":
    main()

"""accspmm TF32 vs cuSPARSE SpMM on one GPU, side by side in one process (GUIDE §4).

    python benchmarks/bench_gpu.py [DIR] [--synthetic] [--ns 32 64 128 256 512] [--reps 20] [--out DIR]
                                   [--sweep] [--only NAME ...]

For every matrix (all Matrix Market files of DIR, default the bundled one; plus seeded synthetic
ones with --synthetic) and every N:
- cuSPARSE ``cusparseSpMM`` on the same canonical CSR, FP32, row-major B and C: every CSR
  algorithm (default, ALG1, ALG2, ALG3) that accepts the layout, preprocessing outside the timing;
  the best median is the baseline.
- accspmm TF32 as a user gets it: ``accspmm.plan(A)`` (no reordering, schedule and variant by the
  cost model, no first-call timing).  Also timed: ``plan(A, calls=10**6)``, the plan of a long run
  (reordering where predicted to repay it, variants timed on the first call), and reorder
  "affinity", and with --sweep every kernel variant and several schedule caps.
- Timing: CUDA events around each single run (timing.cu), 3 warm-ups, median of --reps, warm
  (back to back) and cold (L2 flushed by writing 2x L2 before each run).
- GFLOP/s = 2 nnz N / t with the original nnz; speedup = t_cusparse / t_accspmm.
- Roofline fraction: compulsory bytes (format + B once + C once) / measured copy bandwidth / t.
- Preprocessing (canonicalise, reorder, BitTCF build, upload) timed separately; break-even
  calls = preprocessing / (t_cusparse - t_accspmm).
- Correctness: every timed configuration's output (NaN-poisoned first) against cuSPARSE's,
  norm-wise relative error (< 1e-3 and every element written, else the run counts as wrong).
Writes results.json and results.md into --out; prints the table last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import accspmm  # noqa: E402
from accspmm import _cuda, datasets  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402

ALGS = ["default", "alg1", "alg2", "alg3"]


def median(xs):
    return float(np.median(xs))


def copy_bandwidth(cp):
    """Device-to-device copy bandwidth in bytes/s (bytes read + written)."""
    n = 1 << 28  # 1 GiB of float32
    a = cp.empty(n, cp.float32)
    b = cp.empty_like(a)
    b[...] = a
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(5):
        s.record()
        b[...] = a
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
    return 2 * a.nbytes / min(ts)


def tf32_call(p, B, C, n, cap=None, variant=None):
    """Argument and variant tuples of _cuda.tf32_spmm for plan p, optionally another cap/variant."""
    return p._tf32.args(B.data.ptr, C.data.ptr, n, None, cap, variant)


def time_tf32(call, reps, flush=None):
    a, v = call
    _cuda.time_tf32(a, v, 3, None, 0, None)
    return median(_cuda.time_tf32(a, v, reps, flush.data.ptr if flush is not None else None,
                                  flush.nbytes if flush is not None else 0, None))


def check(cp, C, Cref, call):
    """Runs `call` into a NaN-poisoned C; (relative error vs Cref, every element written)."""
    C.fill(cp.nan)
    _cuda.tf32_spmm(call[0], call[1], None)
    ok = bool(cp.isfinite(C).all())
    return float(cp.linalg.norm(C - Cref)) / max(float(cp.linalg.norm(Cref)), 1e-30), ok


SWEEP_VARIANTS = [dict(slice_s=s, depth=d, cache_l1=1, slice_major=0, staged=g)
                  for g in (0, 1) for s in (1, 2) for d in ((2, 3, 4) if g else (2, 3))] + \
                 [dict(slice_s=2, depth=3, cache_l1=c, slice_major=o, staged=g)
                  for g in (0, 1) for c, o in ((1, 1), (0, 0))]
SWEEP_CAPS = [0, 2, 4, 8, 16, 32, 64, 128]


def variant_tag(v):
    return "{}s{slice_s}d{depth}c{cache_l1}o{slice_major}".format("stg" if v["staged"] else "reg", **v)


def bench_matrix(name, A, ns, reps, flush, cp, bw, sweep):
    t0 = time.perf_counter()
    csr = as_csr(A).canonicalized()
    ours = accspmm.plan(csr, device="gpu", precision="tf32")
    cp.cuda.Device().synchronize()
    t_pre = time.perf_counter() - t0
    st = ours.stats
    pre = {"total_s": t_pre, "reorder_s": st["reorder"]["seconds"], "upload_s": st["upload_seconds"],
           "reorder_chosen": st["reorder"]["chosen"]}
    others = {"long": accspmm.plan(csr, device="gpu", precision="tf32", calls=10**6),
              "affinity": accspmm.plan(csr, device="gpu", precision="tf32", reorder="affinity")}
    fmt_bytes = ours._bittcf.nbytes + ours._bittcf.perm.nbytes
    base_plans = {alg: accspmm.plan(csr, device="gpu", precision="fp32", cusparse_alg=alg) for alg in ALGS}
    m, k = csr.shape
    nnz = csr.nnz
    rows = []
    rng = cp.random.RandomState(7)
    for n in ns:
        B = rng.standard_normal((k, n), dtype=cp.float32)
        C = cp.empty((m, n), cp.float32)
        Cref = cp.empty((m, n), cp.float32)
        rec = {"matrix": name, "m": m, "k": k, "nnz": nnz, "n": n}
        best = (math.inf, None)
        for alg, p in base_plans.items():
            try:
                p._launch(B.data.ptr, Cref.data.ptr, n, None)
            except NotImplementedError:
                rec[f"cusparse_{alg}_ms"] = None
                continue
            _cuda.time_cusparse(p._cusparse[n], B.data.ptr, Cref.data.ptr, 3, None, 0, None)
            t = median(_cuda.time_cusparse(p._cusparse[n], B.data.ptr, Cref.data.ptr, reps, None, 0, None))
            rec[f"cusparse_{alg}_ms"] = t
            if t < best[0]:
                best = (t, alg)
        rec["cusparse_alg"] = best[1]
        bp = base_plans[best[1]]
        rec["cusparse_ms"] = best[0]
        rec["cusparse_cold_ms"] = median(_cuda.time_cusparse(bp._cusparse[n], B.data.ptr, Cref.data.ptr, reps,
                                                             flush.data.ptr, flush.nbytes, None))
        bp._launch(B.data.ptr, Cref.data.ptr, n, None)
        # ours as a user gets it: the first call for n decides (and, with calls >= 1000, times the
        # candidate variants: stats 'tuned_ms', counted as preprocessing), then correctness
        # (poisoned output), then timing
        ours(B, out=C, check_finite=False)
        call = tf32_call(ours, B, C, n)
        rec["rel_error_vs_cusparse"], rec["all_written"] = check(cp, C, Cref, call)
        rep = st["schedule_by_n"][n]
        rec["schedule"] = {"cap": rep["cap"], "tasks": rep["tasks"], "split_windows": rep["split_windows"],
                           "reason": rep["reason"], "variant": rep["variant"], "tuned_ms": rep.get("tuned_ms")}
        rec["tuning_s"] = rep.get("tuning_seconds", 0.0)
        rec["tf32_ms"] = time_tf32(call, reps)
        rec["tf32_cold_ms"] = time_tf32(call, reps, flush)
        for r, p in others.items():
            p(B, out=C, check_finite=False)  # its own first call
            c2 = tf32_call(p, B, C, n)
            err, ok = check(cp, C, Cref, c2)
            rec[f"tf32_reorder_{r}_ms"] = time_tf32(c2, reps) if ok and err < 1e-3 else None
        if sweep:
            sw = {}
            for v in SWEEP_VARIANTS:
                c2 = tf32_call(ours, B, C, n, variant=v)
                err, ok = check(cp, C, Cref, c2)
                sw[variant_tag(v)] = \
                    time_tf32(c2, reps) if ok and err < 1e-3 else None
            for cap in SWEEP_CAPS:
                c2 = tf32_call(ours, B, C, n, cap=cap)
                err, ok = check(cp, C, Cref, c2)
                sw[f"cap{cap}"] = time_tf32(c2, reps) if ok and err < 1e-3 else None
            rec["sweep_ms"] = sw
        rec["gflops"] = 2 * nnz * n / (rec["tf32_ms"] * 1e-3) / 1e9
        rec["cusparse_gflops"] = 2 * nnz * n / (rec["cusparse_ms"] * 1e-3) / 1e9
        rec["speedup"] = rec["cusparse_ms"] / rec["tf32_ms"]
        rec["speedup_cold"] = rec["cusparse_cold_ms"] / rec["tf32_cold_ms"]
        compulsory = fmt_bytes + 4 * (k * n + m * n)
        rec["roofline_fraction"] = compulsory / bw / (rec["tf32_ms"] * 1e-3)
        gain = (rec["cusparse_ms"] - rec["tf32_ms"]) * 1e-3
        rec["break_even_calls"] = (t_pre + rec["tuning_s"]) / gain if gain > 0 else None
        rows.append(rec)
        del B, C, Cref
    for p in [ours, *others.values(), *base_plans.values()]:
        p.close()
    return rows, {"matrix": name, "tc_blocks": st["tc_blocks"], "mean_nnz_tc": st["mean_nnz_tc"],
                  "ibd": st["imbalance_degree"], "preprocess": pre}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def summarize(rows, min_nnz):
    big = [r for r in rows if r["nnz"] >= min_nnz]
    sel = [r for r in big if r["all_written"] and r["rel_error_vs_cusparse"] < 1e-3]
    out = {}
    groups = [("all", None), ("128+256+512", {128, 256, 512})] + [(str(n), {n}) for n in sorted({r["n"] for r in sel})]
    for key, ns in groups:
        rs = [r for r in sel if ns is None or r["n"] in ns]
        if not rs:
            continue
        sp_ = [r["speedup"] for r in rs]
        out[key] = {"runs": len(rs), "wrong_runs": sum(1 for r in big if (ns is None or r["n"] in ns)) - len(rs),
                    "geomean": geomean(sp_), "min": min(sp_), "max": max(sp_),
                    "geomean_cold": geomean([r["speedup_cold"] for r in rs]),
                    "geomean_reorder_long": geomean([r["cusparse_ms"] / r["tf32_reorder_long_ms"]
                                                     for r in rs if r["tf32_reorder_long_ms"]]),
                    "geomean_reorder_affinity": geomean([r["cusparse_ms"] / r["tf32_reorder_affinity_ms"]
                                                         for r in rs if r["tf32_reorder_affinity_ms"]]),
                    "below_0.8": sorted({f"{r['matrix']}@{r['n']} {r['speedup']:.2f}x" for r in rs if r["speedup"] < 0.8}),
                    "total_time_ratio": sum(r["cusparse_ms"] for r in rs) / sum(r["tf32_ms"] for r in rs)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory", nargs="?", default=None)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--synthetic-scale", type=float, default=1.0)
    ap.add_argument("--ns", type=int, nargs="*", default=[32, 64, 128, 256, 512])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--min-nnz", type=int, default=100_000, help="summary covers matrices with at least this nnz")
    ap.add_argument("--sweep", action="store_true", help="also time every kernel variant and several caps")
    ap.add_argument("--only", nargs="*", default=None, help="only these matrix names (files or synthetic)")
    args = ap.parse_args()
    import cupy as cp

    os.makedirs(args.out, exist_ok=True)
    info = accspmm.device_info()
    bw = copy_bandwidth(cp)
    flush = cp.empty(2 * info["l2_bytes"] // 4, cp.float32)
    print(f"GPU: {info['name']}, {info['multiprocessors']} SMs, L2 {info['l2_bytes'] >> 20} MiB, "
          f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    sources = [(datasets.matrix_name(f), lambda f=f: datasets.load_matrix(f, np.float32))
               for f in (datasets.matrix_files(args.directory) if args.directory else [datasets.bundled_path()])]
    if args.synthetic:
        import synthetic

        sources += [(name, lambda g=g: g(args.synthetic_scale)) for name, g in synthetic.GENERATORS.items()]
    if args.only:
        sources = [s_ for s_ in sources if s_[0] in args.only]
    rows, mats = [], []
    rng = np.random.default_rng(0)
    for name, load in sources:
        t0 = time.perf_counter()
        A = load()
        A.data = rng.standard_normal(A.nnz).astype(np.float32)  # never all-ones
        r, mstat = bench_matrix(name, A, args.ns, args.reps, flush, cp, bw, args.sweep)
        rows += r
        mats.append(mstat)
        best = max(x["speedup"] for x in r)
        print(f"{name}: nnz {A.nnz}, {time.perf_counter() - t0:.1f} s, best speedup {best:.2f}x", flush=True)
    summary = summarize(rows, args.min_nnz)
    date = datetime.date.today().isoformat()
    meta = {"gpu": info["name"], "date": date, "copy_bandwidth_Bps": bw, "reps": args.reps,
            "command": " ".join(sys.argv), "min_nnz_summary": args.min_nnz}
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "summary": summary, "matrices": mats, "runs": rows}, fh, indent=1)
    lines = [f"# accspmm TF32 vs cuSPARSE ({info['name']}, {date})", "",
             f"Command: `{meta['command']}`; warm L2, median of {args.reps} CUDA-event-timed runs; "
             f"copy bandwidth {bw / 1e12:.2f} TB/s.", "",
             "TF32 = `accspmm.plan(A)` defaults (row order; schedule: cap, `sm` = slice-major "
             "grid, `lpt` = longest predicted task first; the cost model's variant, not timed). "
             "`calls=1e6` = `plan(A, calls=10**6)` (reordered where predicted to pay back, variants timed on "
             "the first call); `aff` = reorder \"affinity\".", "",
             "| matrix | nnz | N | cuSPARSE ms (alg) | TF32 ms (order, cap) | calls=1e6 ms | aff ms | GFLOP/s "
             "| speedup | cold speedup | roofline | rel err | break-even calls |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    chosen = {mt["matrix"]: mt["preprocess"]["reorder_chosen"] for mt in mats}
    for r in rows:
        be = f"{r['break_even_calls']:.0f}" if r["break_even_calls"] else "never"
        ok = "" if (r["all_written"] and r["rel_error_vs_cusparse"] < 1e-3) else " WRONG"
        sch = r["schedule"]
        tag = (f"{chosen[r['matrix']]}, {sch['cap']}{', sm' if sch['variant']['slice_major'] else ''}"
               f"{', lpt' if sch['variant'].get('order') else ''}")
        fmt = lambda x: f"{x:.4f}" if x else "-"  # noqa: E731
        lines.append(f"| {r['matrix']} | {r['nnz']} | {r['n']} | {r['cusparse_ms']:.4f} ({r['cusparse_alg']}) | "
                     f"{r['tf32_ms']:.4f} ({tag}) | {fmt(r['tf32_reorder_long_ms'])} | "
                     f"{fmt(r['tf32_reorder_affinity_ms'])} | {r['gflops']:.0f} | {r['speedup']:.2f}x | "
                     f"{r['speedup_cold']:.2f}x | {r['roofline_fraction']:.2f} | {r['rel_error_vs_cusparse']:.1e}{ok} | {be} |")
    lines += ["", f"Summary over matrices with nnz >= {args.min_nnz} (correct runs only):", "",
              "| N | runs (wrong) | geomean speedup | min | max | geomean cold | total-time ratio "
              "| geomean, calls=1e6 | geomean, reorder affinity |", "|---|---|---|---|---|---|---|---|---|"]
    for key, s in summary.items():
        lines.append(f"| {key} | {s['runs']} ({s['wrong_runs']}) | {s['geomean']:.2f}x | {s['min']:.2f}x | "
                     f"{s['max']:.2f}x | {s['geomean_cold']:.2f}x | {s['total_time_ratio']:.2f}x | "
                     f"{s['geomean_reorder_long']:.2f}x | {s['geomean_reorder_affinity']:.2f}x |")
    if "128+256+512" in summary:
        lines += ["", "Runs below 0.8x at N = 128/256/512: " + (", ".join(summary["128+256+512"]["below_0.8"]) or "none")]
    lines += ["", "Preprocessing (s): " + ", ".join(
        f"{mt['matrix']} {mt['preprocess']['total_s']:.3f} (reorder {mt['preprocess']['reorder_s']:.3f}, "
        f"{mt['preprocess']['reorder_chosen']})" for mt in mats)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()

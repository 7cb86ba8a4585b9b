"""accspmm TF32 vs cuSPARSE SpMM on one GPU, side by side in one process (GUIDE §4).

    python benchmarks/bench_gpu.py [DIR] [--synthetic] [--ns 32 64 128 256 512] [--reps 20] [--out DIR]

For every matrix (all Matrix Market files of DIR, default the bundled one; plus seeded synthetic
ones with --synthetic) and every N:
- cuSPARSE ``cusparseSpMM`` on the same canonical CSR, FP32, row-major B and C: every CSR
  algorithm (default, ALG1, ALG2, ALG3) that accepts the layout, preprocessing outside the timing;
  the best median is the baseline.
- accspmm TF32 (BitTCF, schedule chosen by the cost model; both schedules are timed too).
- Timing: CUDA events around each single run (timing.cu), 3 warm-ups, median of --reps, warm
  (back to back) and cold (L2 flushed by writing 2x L2 before each run).
- GFLOP/s = 2 nnz N / t with the original nnz; speedup = t_cusparse / t_accspmm.
- Roofline fraction: compulsory bytes (format + B once + C once) / measured copy bandwidth / t.
- Preprocessing (validate, canonicalise, BitTCF build, upload) timed separately; break-even
  calls = preprocessing / (t_cusparse - t_accspmm).
- Correctness: our output (NaN-poisoned first) against cuSPARSE's, norm-wise relative error.
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


def bench_matrix(name, A, ns, reps, flush, cp, bw):
    t0 = time.perf_counter()
    csr = as_csr(A).canonicalized()
    ours = accspmm.plan(csr, device="gpu", precision="tf32")
    cp.cuda.Device().synchronize()
    t_pre = time.perf_counter() - t0
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
        # ours: correctness first (poisoned output), then timing
        C.fill(cp.nan)
        ours(B, out=C)
        ref_norm = float(cp.linalg.norm(Cref))
        rec["rel_error_vs_cusparse"] = float(cp.linalg.norm(C - Cref)) / max(ref_norm, 1e-30)
        rec["all_written"] = bool(cp.isfinite(C).all())
        balanced, report = ours._tf32.decide(n)
        rec["schedule"] = "balanced" if balanced else "identity"
        rec["schedule_reason"] = report["reason"]
        for label, bal in (("identity", False), ("balanced", True)):
            args = ours._tf32.args(B.data.ptr, C.data.ptr, n, bal)
            _cuda.time_tf32(args, 3, None, 0, None)
            rec[f"tf32_{label}_ms"] = median(_cuda.time_tf32(args, reps, None, 0, None))
        args = ours._tf32.args(B.data.ptr, C.data.ptr, n)
        rec["tf32_ms"] = rec["tf32_balanced_ms" if balanced else "tf32_identity_ms"]
        rec["tf32_cold_ms"] = median(_cuda.time_tf32(args, reps, flush.data.ptr, flush.nbytes, None))
        rec["gflops"] = 2 * nnz * n / (rec["tf32_ms"] * 1e-3) / 1e9
        rec["cusparse_gflops"] = 2 * nnz * n / (rec["cusparse_ms"] * 1e-3) / 1e9
        rec["speedup"] = rec["cusparse_ms"] / rec["tf32_ms"]
        rec["speedup_cold"] = rec["cusparse_cold_ms"] / rec["tf32_cold_ms"]
        compulsory = fmt_bytes + 4 * (k * n + m * n)
        rec["roofline_fraction"] = compulsory / bw / (rec["tf32_ms"] * 1e-3)
        rec["preprocess_s"] = t_pre
        gain = (rec["cusparse_ms"] - rec["tf32_ms"]) * 1e-3
        rec["break_even_calls"] = t_pre / gain if gain > 0 else None
        rows.append(rec)
        del B, C, Cref
    ours.close()
    for p in base_plans.values():
        p.close()
    stats = ours.stats
    return rows, {"matrix": name, "tc_blocks": stats["tc_blocks"], "mean_nnz_tc": stats["mean_nnz_tc"],
                  "ibd": stats["imbalance_degree"], "preprocess_s": t_pre}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def summarize(rows, min_nnz):
    sel = [r for r in rows if r["nnz"] >= min_nnz and r["all_written"] and r["rel_error_vs_cusparse"] < 1e-3]
    out = {}
    for key in ("all",) + tuple(sorted({r["n"] for r in sel})):
        rs = sel if key == "all" else [r for r in sel if r["n"] == key]
        if not rs:
            continue
        sp_ = [r["speedup"] for r in rs]
        out[str(key)] = {"runs": len(rs), "geomean": geomean(sp_), "min": min(sp_), "max": max(sp_),
                         "geomean_cold": geomean([r["speedup_cold"] for r in rs]),
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
    rows, mats = [], []
    rng = np.random.default_rng(0)
    for name, load in sources:
        t0 = time.perf_counter()
        A = load()
        A.data = rng.standard_normal(A.nnz).astype(np.float32)  # never all-ones
        r, mstat = bench_matrix(name, A, args.ns, args.reps, flush, cp, bw)
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
             "| matrix | nnz | N | cuSPARSE ms (alg) | TF32 ms (schedule) | GFLOP/s | speedup | cold speedup | roofline | rel err | break-even calls |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        be = f"{r['break_even_calls']:.0f}" if r["break_even_calls"] else "never"
        ok = "" if (r["all_written"] and r["rel_error_vs_cusparse"] < 1e-3) else " WRONG"
        lines.append(f"| {r['matrix']} | {r['nnz']} | {r['n']} | {r['cusparse_ms']:.4f} ({r['cusparse_alg']}) | "
                     f"{r['tf32_ms']:.4f} ({r['schedule'][0]}) | {r['gflops']:.0f} | {r['speedup']:.2f}x | "
                     f"{r['speedup_cold']:.2f}x | {r['roofline_fraction']:.2f} | {r['rel_error_vs_cusparse']:.1e}{ok} | {be} |")
    lines += ["", f"Summary over matrices with nnz >= {args.min_nnz} (correct runs only):", "",
              "| N | runs | geomean speedup | min | max | geomean cold | total-time ratio |", "|---|---|---|---|---|---|---|"]
    for key, s in summary.items():
        lines.append(f"| {key} | {s['runs']} | {s['geomean']:.2f}x | {s['min']:.2f}x | {s['max']:.2f}x | "
                     f"{s['geomean_cold']:.2f}x | {s['total_time_ratio']:.2f}x |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()

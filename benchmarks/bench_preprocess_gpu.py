"""Preprocessing that pays for itself (issue 16), on the GPU machine, one process:

    python benchmarks/bench_preprocess_gpu.py [DIR] [--n 128] [--setup-reps 5]
                                              [--build-nnz 10000000 30000000] [--only NAME ...] [--out DIR]

1. **GPU BitTCF build**: ``accspmm._device_format.DeviceBitTCF`` (CSR upload, device build,
   packed metadata, TF32 values) against the C builder + ``pack_meta`` + ``round_tf32`` + upload,
   on every matrix of DIR and on synthetic power-law matrices of ``--build-nnz`` nonzeros; the
   build's device part alone (upload excluded) in ms per 10M nonzeros; bit-identity is the test
   suite's (tests/test_gpu_build.py), repeated here on the metadata.
2. **Break-even of the default plan against cuSPARSE** at width ``--n``, per matrix, medians over
   ``--setup-reps`` fresh plans of ``Plan.compare_cusparse`` (accspmm._payback.measure): ours = the
   plan's preprocessing + its first call (minus one kernel time); cuSPARSE = a fresh CSR plan's
   upload, descriptors, buffer and ``cusparseSpMM_preprocess`` for each of the default, ALG2 and
   ALG3 algorithms; both calls timed from C (CUDA events, median of 20), the fastest cuSPARSE
   algorithm compared; break-even calls = (ours - cuSPARSE's setup) / (cuSPARSE's call - ours),
   0 when ours is cheaper to set up, "never" when cuSPARSE's call is faster.  Beside it, the
   prediction every plan makes at plan time (``plan.stats["vs_cusparse"]``, a cost model).
3. **Plans that reorder** (``calls=10**6``, timed the same way: reordering when predicted to pay, variant timing on):
   preprocessing, steady call and the prediction beside the default plan's.

Writes preprocess_gpu.json/md into --out, tables last, with the GPU model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import accspmm  # noqa: E402
from accspmm import _cuda, _payback, _tf32, datasets  # noqa: E402
from accspmm._device import DeviceArray  # noqa: E402
from accspmm._device_format import DeviceBitTCF  # noqa: E402
from accspmm._format import BitTCF  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402

def sync():
    torch.cuda.synchronize()


def build_times(A, reps=3):
    """(gpu total s, gpu device-part s, cpu build+pack+round+upload s, nnz) for A, median of reps."""
    csr = as_csr(sp.csr_matrix(A, dtype=np.float32)).canonicalized()
    dev_id = _cuda.get_device()
    g_tot, g_dev, c_tot = [], [], []
    for _ in range(reps):
        dev = {}
        sync()
        t0 = time.perf_counter()
        DeviceBitTCF(csr, None, dev, dev_id)
        g_tot.append(time.perf_counter() - t0)
        for a in dev.values():
            a.free()
        # device part: the same build with the CSR already resident (upload excluded)
        ups = [DeviceArray.from_host(x, dev_id) for x in (csr.indptr, csr.indices, csr.data[: csr.nnz])]
        W = -(-csr.shape[0] // 8)
        wo, h = DeviceArray((W + 1,), np.int64, dev_id), np.empty(W + 1, np.int64)
        sync()
        t0 = time.perf_counter()
        out = _cuda.bittcf_gpu_build(csr.shape[0], csr.shape[1], csr.nnz, ups[0].ptr, ups[1].ptr, ups[2].ptr,
                                     None, wo.ptr, h, False, None)
        g_dev.append(time.perf_counter() - t0)
        for key in ("block_meta", "values_tf32"):
            _cuda.free(out[key])
        for a in ups + [wo]:
            a.free()
        t0 = time.perf_counter()
        f = BitTCF.from_csr(csr)
        parts = [f.perm, f.window_offsets, _tf32.pack_meta(f), _tf32.round_tf32(f.values)]
        ds = [DeviceArray.from_host(x, dev_id) for x in parts]
        sync()
        c_tot.append(time.perf_counter() - t0)
        for a in ds:
            a.free()
    return float(np.median(g_tot)), float(np.median(g_dev)), float(np.median(c_tot)), csr.nnz


def fmt_be(calls: float) -> str:
    """A break-even in calls for the tables: "never (slower)" where our call is the slower one."""
    return "never (slower)" if calls == float("inf") else f"{calls:.0f}"


def powerlaw(nnz, seed=0):
    """A square power-law matrix of about nnz nonzeros (avg row 10), for the build throughput."""
    rng = np.random.default_rng(seed)
    m = nnz // 10
    rows = rng.integers(0, m, nnz)
    cols = np.minimum((rng.pareto(1.2, nnz) * 50).astype(np.int64), m - 1)
    cols = (cols * 2654435761) % m  # spread the popular columns
    A = sp.csr_matrix((np.ones(nnz, np.float32), (rows, cols)), shape=(m, m))
    A.sum_duplicates()
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    return A


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--setup-reps", type=int, default=5)
    ap.add_argument("--build-nnz", type=int, nargs="*", default=[10_000_000, 30_000_000])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "raw"))
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    files = datasets.matrix_files(args.dir) if args.dir else [datasets.bundled_path()]
    if args.only:
        files = [f for f in files if datasets.matrix_name(f) in args.only]
    res = {"gpu": gpu, "date": datetime.date.today().isoformat(), "argv": sys.argv[1:], "build": [], "payback": []}
    warm = powerlaw(200_000)
    build_times(warm, 1)
    accspmm.plan(warm)(torch.ones(warm.shape[1], args.n, device="cuda"))  # CUDA context, allocator, cuSPARSE
    accspmm.plan(warm, precision="fp32")(torch.ones(warm.shape[1], args.n, device="cuda"))
    for nnz in args.build_nnz:
        A = powerlaw(nnz)
        g, gd, c, nz = build_times(A, 2)
        res["build"].append({"matrix": f"powerlaw {nz / 1e6:.1f}M", "nnz": nz, "gpu_s": g, "gpu_device_s": gd,
                             "cpu_s": c, "gpu_device_ms_per_10M": gd * 1e3 * 1e7 / nz})
        print(res["build"][-1], flush=True)
        del A
    for f in files:
        name = datasets.matrix_name(f)
        A = datasets.load_matrix(f, np.float32)
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
        g, gd, c, nz = build_times(A)
        res["build"].append({"matrix": name, "nnz": nz, "gpu_s": g, "gpu_device_s": gd, "cpu_s": c,
                             "gpu_device_ms_per_10M": gd * 1e3 * 1e7 / max(nz, 1)})
        B = torch.randn(A.shape[1], args.n, device="cuda")
        reps, preds, steps = [], [], []
        for _ in range(args.setup_reps):  # setups of a few ms are noisy: medians of fresh plans
            sync()
            p = accspmm.plan(A)
            preds.append(p.stats["vs_cusparse"])
            reps.append(p.compare_cusparse(args.n, reps=20))  # first call + both setups and calls, from C
            steps.append(p.stats["seconds"])
            if len(reps) < args.setup_reps:
                p.close()
        C = p(B)
        ref = torch.from_numpy(A @ B.cpu().numpy()).cuda()
        err = float((C - ref).norm() / ref.norm())
        p.close()

        def med(key, rows=reps):
            return float(np.median([r[key] for r in rows]))

        ours_s, ours_ms, cs, cms = (med("ours_setup_s"), med("ours_call_s") * 1e3, med("cusparse_setup_s"),
                                    med("cusparse_call_s") * 1e3)
        best = max(set(r["cusparse_alg"] for r in reps), key=[r["cusparse_alg"] for r in reps].count)
        be = _payback.break_even(ours_s, ours_ms / 1e3, cs, cms / 1e3)
        # a loop of calls (CHAIN back-to-back launches between two events, per launch; both from C)
        ours_loop, cs_loop, cloop = med("ours_loop_call_s"), med("cusparse_loop_setup_s"), med("cusparse_loop_call_s")
        be_loop = _payback.break_even(ours_s, ours_loop, cs_loop, cloop)
        pred_be = med("break_even_calls", preds)
        steps = {k: float(np.median([st.get(k, 0.0) for st in steps])) for k in steps[0]}
        r = accspmm.plan(A, calls=10**6)  # its first call (variant timing included) is timed here too
        rr = r.compare_cusparse(args.n, reps=20)
        r_s, r_ms = rr["ours_setup_s"], rr["ours_call_s"] * 1e3
        info = r.stats["reorder"]
        row = {"matrix": name, "m": A.shape[0], "nnz": A.nnz, "n": args.n, "default_prep_s": ours_s,
               "default_ms": ours_ms, "default_steps_s": steps, "rel_err": err, "cusparse_alg": best,
               "cusparse_setup_s": cs, "cusparse_ms": cms, "break_even_calls": be,
               "loop_us": ours_loop * 1e6, "cusparse_loop_us": cloop * 1e6, "cusparse_loop_setup_s": cs_loop,
               "break_even_calls_loop": be_loop,
               "predicted_break_even_calls": pred_be, "predicted": preds[0],
               "speedup_default": cms / ours_ms, "reorder_plan_prep_s": r_s, "reorder_plan_ms": r_ms,
               "reorder_plan_method": info.get("chosen"), "reorder_payback": info.get("payback"),
               "speedup_reorder_plan": cms / r_ms,
               # its decision at width n (cap, variant, the tuned times): what a slow reordered call ran
               "reorder_plan_schedule": r.stats.get("schedule_by_n", {}).get(args.n)}
        r.close()
        res["payback"].append(row)
        print({k: row[k] for k in ("matrix", "default_prep_s", "default_ms", "cusparse_setup_s", "cusparse_ms",
                                   "break_even_calls", "break_even_calls_loop", "reorder_plan_ms",
                                   "reorder_plan_method")}, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "preprocess_gpu.json"), "w") as fh:
        json.dump(res, fh, indent=1, default=str)
    lines = [f"# Preprocessing on the GPU ({gpu}, {res['date']})", "",
             "## BitTCF build: GPU (device part, upload excluded; total with CSR upload) vs C builder + pack + "
             "round + upload", "",
             "| matrix | nnz | GPU device ms | ms per 10M nnz | GPU total ms | CPU path ms | speedup |",
             "|---|---|---|---|---|---|---|"]
    for b in res["build"]:
        lines.append(f"| {b['matrix']} | {b['nnz']} | {b['gpu_device_s'] * 1e3:.2f} | "
                     f"{b['gpu_device_ms_per_10M']:.2f} | {b['gpu_s'] * 1e3:.2f} | {b['cpu_s'] * 1e3:.1f} | "
                     f"{b['cpu_s'] / b['gpu_s']:.1f}x |")
    lines += ["", f"## Break-even of the default plan vs cuSPARSE at N = {args.n} (setup includes the first call)", "",
              "| matrix | nnz | ours prep ms | ours call ms | cuSPARSE setup ms | cuSPARSE call ms (alg) | speedup | "
              "break-even calls | predicted (plan.stats) | calls=1e6 plan: method, prep ms, call ms, speedup |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["payback"]:
        be = fmt_be(r["break_even_calls"])
        pbe = "never" if r["predicted_break_even_calls"] == float("inf") else f"{r['predicted_break_even_calls']:.0f}"
        lines.append(f"| {r['matrix']} | {r['nnz']} | {r['default_prep_s'] * 1e3:.2f} | {r['default_ms']:.4f} | "
                     f"{r['cusparse_setup_s'] * 1e3:.2f} | {r['cusparse_ms']:.4f} ({r['cusparse_alg']}) | "
                     f"{r['speedup_default']:.2f}x | {be} | {pbe} | {r['reorder_plan_method']}, "
                     f"{r['reorder_plan_prep_s'] * 1e3:.1f}, {r['reorder_plan_ms']:.4f}, "
                     f"{r['speedup_reorder_plan']:.2f}x |")
    faster = [r for r in res["payback"] if r["speedup_default"] > 1]
    worst = sorted(faster, key=lambda r: -r["break_even_calls"])[:3]
    within = sum(r["break_even_calls"] <= 100 for r in faster)
    lines += ["", f"Default plan faster than cuSPARSE on {len(faster)} of {len(res['payback'])} matrices; "
              f"break-even within 100 calls on {within} of them; worst: "
              + ", ".join(f"{r['matrix']} {r['break_even_calls']:.0f}" for r in worst)]
    lines += ["", f"## The same break-even with the calls timed in a loop ({_payback.CHAIN} back-to-back launches "
              "between two CUDA events, per launch, both from C)", "",
              "| matrix | ours prep ms | ours µs per call | cuSPARSE setup ms | cuSPARSE µs per call | speedup | "
              "break-even calls |", "|---|---|---|---|---|---|---|"]
    for r in res["payback"]:
        lines.append(f"| {r['matrix']} | {r['default_prep_s'] * 1e3:.2f} | {r['loop_us']:.2f} | "
                     f"{r['cusparse_loop_setup_s'] * 1e3:.2f} | {r['cusparse_loop_us']:.2f} | "
                     f"{r['cusparse_loop_us'] / r['loop_us']:.2f}x | {fmt_be(r['break_even_calls_loop'])} |")
    faster = [r for r in res["payback"] if r["cusparse_loop_us"] > r["loop_us"]]
    worst = sorted(faster, key=lambda r: -r["break_even_calls_loop"])[:3]
    within = sum(r["break_even_calls_loop"] <= 100 for r in faster)
    lines += ["", f"In a loop: faster than cuSPARSE on {len(faster)} of {len(res['payback'])} matrices; break-even "
              f"within 100 calls on {within} of them; worst: "
              + ", ".join(f"{r['matrix']} {fmt_be(r['break_even_calls_loop'])}" for r in worst)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "preprocess_gpu.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()

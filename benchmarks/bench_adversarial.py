"""Products on adversarial shapes, timed as a new user makes them (needs a GPU and PyTorch).

The shapes of ``accspmm.datasets.adversarial`` (a hub row and column, tall K = 3 and 1, a star, one
dense row, one dense column, a bipartite rectangle) and an empty tail (a power-law graph in its first
tenth of rows, the rest empty), each with integer values, in TF32 (float32 B) and FP16 (half B):

- ``setup_ms``: ``accspmm.plan(A, device="gpu", ...)`` and its first call, synchronised (after one small
  plan and torch product that take the process's one-time start-up);
  ``torch_setup_ms``: the CSR tensor's upload and torch's first ``torch.sparse.mm``;
- ``accspmm_ms``: back-to-back calls with default arguments (``cuda_ms``: 20 calls between two CUDA
  events, median of the bursts); ``kernel_ms``: our kernel alone, launched from C;
- ``torch_ms``: ``torch.sparse.mm`` on the CSR tensor (cuSPARSE), same B and precision;
  ``cublas_ms``: dense ``torch.mm`` where A fits densely in 1 GiB;
- ``speedup`` = torch_ms / accspmm_ms; ``break_even`` = calls until our extra setup is paid back
  (0 where ours is also cheaper to set up, "never" where our call is slower);
- ``exact``: TF32 results equal scipy's float64 product bit for bit (the data is integer-valued and
  every sum is below 2^24); FP16 results equal scipy's product rounded to FP16.

    python benchmarks/bench_adversarial.py [--nnz 1000000] [--ns 32 128] [--out DIR]

Prints a table and writes adversarial.json and adversarial.md under --out."""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_half import cuda_ms  # noqa: E402

import accspmm  # noqa: E402
from accspmm import _cuda, datasets  # noqa: E402

KINDS = datasets.ADVERSARIAL + ("empty_tail",)


def matrix(kind, nnz, seed=0):
    """The adversarial matrix with values drawn from +-1..4."""
    if kind == "empty_tail":
        n = max(nnz // 2, 16)
        rng = np.random.default_rng(seed)
        live = max(n // 10, 1)
        rows = rng.integers(0, live, nnz)
        cols = (rng.zipf(1.8, nnz) - 1) % n
        A = sp.csr_matrix((np.ones(nnz, np.float32), (rows, cols)), shape=(n, n))
        A.sum_duplicates()
    else:
        A = datasets.adversarial(kind, nnz, seed)
    rng = np.random.default_rng(seed + 1)
    A.data = (rng.integers(1, 5, A.nnz) * rng.choice([-1, 1], A.nnz)).astype(np.float32)
    return A


#: the adversarial shapes of the kernel comparisons beside the real matrices (tall3 is tall1 three times over)
SHAPE_KINDS = ("hub", "star", "tall1", "dense_row", "dense_col", "bipartite", "empty_tail")


def shapes(directory, structures=False):
    """(name, kind, make) of the real matrices of ``directory`` ("real"), the SHAPE_KINDS at 1M nonzeros ("adv")
    and, with ``structures``, the matrices of benchmarks/structures.py ("struct"); ``make()`` gives the CSR."""
    out = [(datasets.matrix_name(f), "real", lambda f=f: datasets.load_matrix(f, np.float32).tocsr())
           for f in datasets.matrix_files(directory)]
    out += [(k, "adv", lambda k=k: matrix(k, 1_000_000)) for k in SHAPE_KINDS]
    if structures:
        from structures import STRUCTURES, structure

        out += [(k, "struct", lambda k=k: structure(k)) for k in STRUCTURES]
    return out


def kernel_ms(p, B, C, n, reps):
    """Our kernel alone (median of `reps` launches from C), or None where the plan has no such call."""
    if getattr(p, "_tf32", None) is not None:
        a, v = p._tf32.args(B.data_ptr(), C.data_ptr(), n)
    elif getattr(p, "_runner", None) is not None:
        a, v = p._runner.args(B.data_ptr(), C.data_ptr(), n)
    elif hasattr(p, "kernel_args"):
        floats = p.workspace_floats(n)
        ws = torch.empty(max(1, floats), dtype=torch.float32, device="cuda")
        args = p.kernel_args(B.data_ptr(), C.data_ptr(), n, False, ws.data_ptr() if floats else 0)
        return float(np.median(_cuda.time_half(args, reps, None, 0, None)))
    else:
        return None
    return float(np.median(_cuda.time_tf32(a, v, reps, None, 0, None)))


def setup_ms(make):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = make()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3, out


def run(kind, A, ns, reps):
    rows = []
    m, k = A.shape
    A64 = A.astype(np.float64)
    dense_ok = m * k * 4 <= 1 << 30
    for prec in ("tf32", "fp16"):
        dt = torch.float32 if prec == "tf32" else torch.float16
        kw = {} if prec == "tf32" else {"precision": "fp16"}
        for n in ns:
            rng = np.random.default_rng(n)
            Bn = rng.integers(-2, 3, (k, n)).astype(np.float32)
            B = torch.from_numpy(Bn).cuda().to(dt)
            ref = A64 @ Bn.astype(np.float64)
            r = {"matrix": kind, "m": m, "k": k, "nnz": int(A.nnz), "n": n, "precision": prec,
                 "max_row": int(np.diff(A.indptr).max()) if m else 0}

            def mine():
                p = accspmm.plan(A, device="gpu", **kw)
                return p, p(B)

            r["setup_ms"], (p, C) = setup_ms(mine)
            r["format"] = p.format
            got = C.float().cpu().numpy().astype(np.float64)
            want = ref if prec == "tf32" else ref.astype(np.float16).astype(np.float64)
            r["exact"] = bool(np.array_equal(got, want))
            r["accspmm_ms"] = cuda_ms(lambda: p(B), reps)
            r["kernel_ms"] = kernel_ms(p, B, torch.empty_like(C), n, reps)

            def theirs():
                At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                             torch.from_numpy(A.indices.astype(np.int64)),
                                             torch.from_numpy(A.data), size=A.shape).cuda().to(dt)
                return At, torch.sparse.mm(At, B)

            try:
                r["torch_setup_ms"], (At, Ct) = setup_ms(theirs)
                r["torch_ms"] = cuda_ms(lambda: torch.sparse.mm(At, B), reps)
                del At, Ct
            except RuntimeError as exc:  # a baseline that cannot run is reported, not fatal
                print(f"  {kind} {prec} n={n}: torch.sparse.mm failed: {exc}", file=sys.stderr)
            if dense_ok:
                Ad = torch.from_numpy(A.toarray()).cuda().to(dt)
                r["cublas_ms"] = cuda_ms(lambda: torch.mm(Ad, B), reps)
                del Ad
            if "torch_ms" in r:
                r["speedup"] = r["torch_ms"] / r["accspmm_ms"]
                saved, extra = r["torch_ms"] - r["accspmm_ms"], r["setup_ms"] - r["torch_setup_ms"]
                r["break_even"] = 0 if extra <= 0 else math.ceil(extra / saved) if saved > 0 else "never"
            r["gflops"] = 2.0 * A.nnz * n / (r["accspmm_ms"] * 1e6)
            rows.append(r)
            print(f"  {kind} {prec} n={n}: {p.format}, exact {r['exact']}, setup {r['setup_ms']:.1f} ms, "
                  f"call {r['accspmm_ms'] * 1e3:.1f} us (kernel {(r['kernel_ms'] or float('nan')) * 1e3:.1f}), "
                  f"torch {r.get('torch_ms', float('nan')) * 1e3:.1f} us", flush=True)
            p.close()
    return rows


COLS = ("matrix", "m", "k", "nnz", "max_row", "precision", "n", "format", "exact", "setup_ms", "torch_setup_ms",
        "accspmm_ms", "kernel_ms", "torch_ms", "cublas_ms", "speedup", "break_even", "gflops")


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnz", type=int, default=1_000_000)
    ap.add_argument("--ns", type=int, nargs="*", default=[32, 128])
    ap.add_argument("--kinds", nargs="*", default=list(KINDS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="benchmarks/results/raw")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    print("GPU:", gpu, flush=True)
    warm = matrix("hub", 10_000)  # the process's one-time CUDA, cuSPARSE and library start-up, not timed
    for prec, dt in (({}, torch.float32), ({"precision": "fp16"}, torch.float16)):
        Bw = torch.ones(warm.shape[1], 32, device="cuda", dtype=dt)
        accspmm.plan(warm, device="gpu", **prec)(Bw)
        torch.sparse.mm(torch.from_numpy(warm.toarray()).cuda().to(dt).to_sparse_csr(), Bw)
    torch.cuda.synchronize()
    rows = []
    for kind in args.kinds:
        rows += run(kind, matrix(kind, args.nnz), args.ns, args.reps)
    os.makedirs(args.out, exist_ok=True)
    meta = {"gpu": gpu, "date": datetime.date.today().isoformat(), "args": vars(args)}
    with open(os.path.join(args.out, "adversarial.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    md = [f"# Adversarial shapes from Python ({gpu}, {meta['date']})", "",
          "Times in ms; accspmm_ms and torch_ms: back-to-back calls with default arguments; speedup = torch / "
          "accspmm; break_even: calls until the extra setup is paid back.", "",
          "| " + " | ".join(COLS) + " |", "|" + "---|" * len(COLS)]
    md += ["| " + " | ".join(fmt(r.get(c)) for c in COLS) + " |" for r in rows]
    bad = [f"{r['matrix']} {r['precision']} n={r['n']}" for r in rows if not r["exact"]]
    md += ["", f"- inexact results: {', '.join(bad) if bad else 'none'}"]
    with open(os.path.join(args.out, "adversarial.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

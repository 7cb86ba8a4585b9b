"""accspmm.spgemm (the C core, CPU) against scipy's A @ B on the real matrices, one process:

    python benchmarks/cpu_spgemm.py [DIR] [--reps 3] [--max-products 3e8] [--out benchmarks/cpu_spgemm.md]

A @ A for square matrices, A @ A.T for rectangular ones, float64 random normal values and float32
integer values (the bit-exact check).  Median wall time of --reps runs each, both on the same CSR;
the result is checked against scipy's (pattern and values: equal for integer data; for float64 within
2 p u sum|products| per entry, p the row's products: scipy builds that contract to FMA sum
differently).  Products above --max-products are skipped (scipy's time grows past minutes).
Prints and writes a Markdown table with the thread count and CPU."""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import scipy.sparse as sp

import accspmm
from accspmm import _core, datasets


def median_time(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = fn()
        out.append(time.perf_counter() - t0)
    return float(np.median(out)), r


def within_rounding(A, B, C, R):
    """|C - R| <= 2 p u (|A| @ |B|) entrywise, p = the row's products, u = 2^-53: two float64 sums of
    the same products, each in some order (or with FMA: scipy builds differ), are that close."""
    absp = abs(A) @ abs(B)
    p = np.zeros(A.shape[0])
    np.add.at(p, np.repeat(np.arange(A.shape[0]), np.diff(A.indptr)), np.diff(B.indptr)[A.indices])
    tol = sp.diags(2.0 * p * 2.0**-53) @ absp
    D = abs(sp.csr_matrix(C) - R)
    # NaN anywhere fails: a comparison with NaN is False, so "no entry above tol" would pass it
    return (D > tol).nnz == 0 and bool(np.isfinite(D.data).all())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-products", type=float, default=3e8)
    ap.add_argument("--out", default="benchmarks/cpu_spgemm.md")
    args = ap.parse_args()
    files = datasets.matrix_files(args.dir) if args.dir else [datasets.bundled_path()]
    cpu = platform.processor() or platform.machine()
    rows = []
    for f in files:
        name = datasets.matrix_name(f)
        A = datasets.load_matrix(f, np.float64)
        A.sum_duplicates()
        A.sort_indices()
        B = A if A.shape[0] == A.shape[1] else sp.csr_matrix(A.T)
        rowlen = np.diff(B.indptr)
        products = int(rowlen[A.indices].sum())
        if products > args.max_products:
            print(f"{name}: {products:.3g} products, skipped", flush=True)
            continue
        A.data = np.random.default_rng(0).standard_normal(A.nnz)
        B = A if A.shape[0] == A.shape[1] else sp.csr_matrix(A.T)
        t_sc, R = median_time(lambda: A @ B, args.reps)
        t_us, C = median_time(lambda: accspmm.spgemm(A, B), args.reps)
        R = sp.csr_matrix(R)
        R.eliminate_zeros()
        R.sort_indices()
        ok = np.array_equal(C.indices, R.indices) and within_rounding(A, B, C, R)
        Ai = A.astype(np.float32)
        Ai.data = np.random.default_rng(1).integers(-8, 9, A.nnz).astype(np.float32)
        Bi = Ai if A.shape[0] == A.shape[1] else sp.csr_matrix(Ai.T)
        Ri = sp.csr_matrix(Ai @ Bi)
        Ri.eliminate_zeros()
        Ri.sort_indices()
        Ci = accspmm.spgemm(Ai, Bi)
        exact = np.array_equal(Ci.indices, Ri.indices) and np.array_equal(Ci.data, Ri.data)
        rows.append((name, "A·A" if B is A else "A·Aᵀ", A.nnz, products, C.nnz, t_sc, t_us, t_sc / t_us, ok, exact))
        print(f"{name}: scipy {t_sc * 1e3:.1f} ms, accspmm {t_us * 1e3:.1f} ms, {t_sc / t_us:.2f}x, "
              f"float64 ok {ok}, integer exact {exact}", flush=True)
    sp_ = [r[7] for r in rows]
    md = [f"# CPU SpGEMM: accspmm.spgemm vs scipy (`python benchmarks/cpu_spgemm.py DIR`)", "",
          f"{_core.num_threads()} OpenMP threads, {os.cpu_count()} CPUs ({cpu}); median of {args.reps} runs; "
          "float64 values (checked within 2 p u sum|products| of scipy, p the row's products), and float32 integer "
          "values (bit-exact check).", "",
          "| matrix | product | nnz(A) | products | nnz(C) | scipy ms | accspmm ms | speedup | float64 ok | integer exact |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    md += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5] * 1e3:.1f} | {r[6] * 1e3:.1f} | {r[7]:.2f}x | {r[8]} | {r[9]} |"
           for r in rows]
    if sp_:
        md += ["", f"Geometric-mean speedup {np.exp(np.mean(np.log(sp_))):.2f}x over {len(sp_)} products "
                   f"(lowest {min(sp_):.2f}x); all float64 within tolerance: {all(r[8] for r in rows)}; "
                   f"all integer products bit-exact: {all(r[9] for r in rows)}."]
    with open(args.out, "w") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

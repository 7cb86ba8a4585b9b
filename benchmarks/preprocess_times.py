"""Preprocessing time per step on the CPU: canonicalisation, every reordering method, the BitTCF
build, the default plan (no reordering) and a plan with reorder="auto", on the adversarial shapes of
``accspmm.datasets.adversarial`` and on the real matrices of a directory.

    python benchmarks/preprocess_times.py [DIR] [--sizes 1000000 4000000 10000000] [--out benchmarks/preprocess_times.md]

Seconds, median of --reps (1 by default: the point is the worst case, not the last percent),
with the machine's core count in the header.  The bound to check: no step takes more than 2 s
per 1M nonzeros on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import accspmm
from accspmm import _core, _reorder, datasets
from accspmm._validate import as_csr

METHODS = ("degree", "rcm", "jaccard", "affinity")
COLS = ("canonicalize", *METHODS, "bittcf_build", "plan_default", "plan_auto")


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def row(name, A, reps):
    rec = {"matrix": name, "shape": A.shape, "nnz": A.nnz, "max_row": int(np.diff(A.indptr).max(initial=0)),
           "max_col": int(np.bincount(A.indices, minlength=1).max()) if A.nnz else 0}
    rec["canonicalize"], csr = timed(lambda: as_csr(A).canonicalized(), reps)
    for m in METHODS:
        rec[m], perm = timed(lambda: _reorder.compute(csr, m)[0], reps)
    rec["bittcf_build"], _ = timed(lambda: accspmm.BitTCF.from_csr(csr, perm), reps)
    rec["plan_default"], _ = timed(lambda: accspmm.plan(A, device="cpu", format="bittcf"), reps)
    rec["plan_auto"], p = timed(lambda: accspmm.plan(A, device="cpu", format="bittcf", reorder="auto"), reps)
    rec["auto_chose"] = p.stats["reorder"]["chosen"]
    worst = max(rec[k] for k in COLS)
    rec["worst_s_per_1M_nnz"] = worst / max(A.nnz, 1) * 1e6
    print(name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()}, flush=True)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000, 10_000_000])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "preprocess_times.md"))
    args = ap.parse_args()
    rows = []
    for kind in datasets.ADVERSARIAL:
        for size in args.sizes:
            rows.append(row(f"{kind} ({size // 1000}k)", datasets.adversarial(kind, size), args.reps))
    for f in datasets.matrix_files(args.dir) if args.dir else []:
        rows.append(row(datasets.matrix_name(f), datasets.load_matrix(f, np.float32), args.reps))
    cols = list(COLS)
    lines = [f"# Preprocessing time per step (CPU, {os.cpu_count()} cores, {_core.num_threads()} OpenMP threads)", "",
             f"Command: `python benchmarks/preprocess_times.py {' '.join(sys.argv[1:])}`. Seconds (median of {args.reps}). "
             "`plan_default` is `accspmm.plan(A, device='cpu', format='bittcf')`: canonicalise, no reordering, BitTCF "
             "build. `plan_auto` adds `reorder='auto'` (none, affinity, rcm, degree: the fewest TC blocks wins); "
             "'auto chose' is its choice. The last column is the slowest step per 1M nonzeros.", "",
             "| matrix | shape | nnz | max row | max col | " + " | ".join(cols) + " | auto chose | worst s / 1M nnz |",
             "|" + "---|" * (len(cols) + 7)]
    for r in rows:
        lines.append(f"| {r['matrix']} | {r['shape'][0]}x{r['shape'][1]} | {r['nnz']} | {r['max_row']} | {r['max_col']} | "
                     + " | ".join(f"{r[c]:.3f}" for c in cols) + f" | {r['auto_chose']} | {r['worst_s_per_1M_nnz']:.2f} |")
    worst = max(rows, key=lambda r: r["worst_s_per_1M_nnz"])
    lines += ["", f"Slowest step per 1M nonzeros: {worst['worst_s_per_1M_nnz']:.2f} s ({worst['matrix']})."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-3:]))


if __name__ == "__main__":
    main()

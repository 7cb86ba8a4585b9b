"""The C BitTCF builder on the CPU (CPU plans, ``BitTCF.from_csr``) and its count pass alone
(``bittcf_count_stats``: half plans' format model, the reordering decision's block counts).

    OMP_NUM_THREADS=T python benchmarks/cpu_bittcf_build.py DATA_DIR [--matrices NAME ...]

Median wall time of --reps calls per matrix (identity row order), one line per matrix."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from accspmm import _core, _format, datasets
from accspmm._validate import as_csr

DEFAULT = ("minnesota", "polblogs", "rajat01", "memplus", "wiki-Vote", "usroads", "cnr-2000", "G3_circuit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--matrices", nargs="+", default=list(DEFAULT))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    print("| threads | matrix | nnz | build us | count us |")
    print("|---|---|---|---|---|")
    for name in args.matrices:
        A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32).tocsr()
        csr = as_csr(A).canonicalized()
        m, k = csr.shape
        perm = np.arange(m, dtype=np.int64)
        reps = args.reps if csr.nnz < 1_000_000 else max(3, args.reps // 4)
        tb, tc = [], []
        for _ in range(reps):
            t = time.perf_counter()
            _format.BitTCF.from_csr(csr)
            tb.append(time.perf_counter() - t)
            t = time.perf_counter()
            _core.bittcf_count_stats(m, k, csr.indptr, csr.indices, perm, False)
            tc.append(time.perf_counter() - t)
        print(f"| {threads} | {name} | {csr.nnz} | {np.median(tb) * 1e6:.1f} | {np.median(tc) * 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""BitTCF statistics and build time for every matrix of a directory (default: the bundled one).

    python benchmarks/bittcf_stats.py [DIR] [--out benchmarks/bittcf_stats.md]

Build time = canonical CSR -> BitTCF (both passes), median of 3, on this machine's CPU."""

import argparse
import platform
import time

import numpy as np

import accspmm
from accspmm import _core, datasets
from accspmm._validate import as_csr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory", nargs="?", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    files = datasets.matrix_files(args.directory) if args.directory else [datasets.bundled_path()]
    rows = []
    for f in files:
        A = datasets.load_matrix(f, np.float32)
        csr = as_csr(A).canonicalized()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            F = accspmm.BitTCF.from_csr(csr)
            times.append(time.perf_counter() - t0)
        s = F.stats
        rows.append((datasets.matrix_name(f), A.shape[0], A.shape[1], A.nnz, s["tc_blocks"], s["mean_nnz_tc"],
                     s["blocks_per_window_mean"], s["blocks_per_window_max"], s["imbalance_degree"],
                     s["bytes"] / 1e6, s["csr_bytes"] / 1e6, s["bytes_ratio_vs_csr"], np.median(times) * 1e3))
    head = ("| matrix | rows | cols | nnz | TC blocks | MeanNNZTC | blocks/window mean | max | IBD | "
            "BitTCF MB | CSR MB | BitTCF/CSR | build ms |\n|" + "---|" * 13)
    lines = [head] + ["| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} |"
                      .format(*r) for r in rows]
    cpu = f"{platform.processor() or platform.machine()}, {_core.num_threads()} OpenMP threads"
    text = (f"# BitTCF statistics (identity row order)\n\nMachine: {cpu}. Command: "
            f"`python benchmarks/bittcf_stats.py {args.directory or ''}`\n\n" + "\n".join(lines) + "\n")
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()

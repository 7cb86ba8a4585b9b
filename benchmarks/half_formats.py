"""Half plans forced to each format (BSR16, BitTCF) beside the default's choice, on 32x32 block
matrices and real ones, FP16, from Python (CUDA-event median of 20 calls on a torch float16 B).
Run from the repository root on the GPU machine:

    python benchmarks/half_formats.py DATA_DIR

It shows where the byte model (accspmm._half.LAYOUT_BYTES) picks the slower format
(results/h100_half_formats.txt).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_half import block_matrix, cuda_ms  # noqa: E402

REAL = ("bcsstk16", "ddi", "landmark", "blogcatalog")


def main():
    import torch

    import accspmm
    from accspmm import datasets

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="directory of the real matrices (Matrix Market, .mtx.gz)")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    mats = [(f"uniform32-8192-{s}", block_matrix(8192, s, "uniform")) for s in (0.7, 0.9, 0.95, 0.99)]
    mats += [(f"irregular32-8192-{s}", block_matrix(8192, s, "irregular")) for s in (0.9, 0.99)]
    for name in REAL:
        try:
            mats.append((name, datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32).tocsr()))
        except FileNotFoundError:  # a matrix the directory lacks
            pass
    print(f"# {accspmm.device_info()['name']}, FP16, integer-valued A, microseconds")
    for name, A in mats:
        A = A.astype(np.float32)
        A.data = np.random.default_rng(0).integers(-4, 5, A.nnz).astype(np.float32)
        A.eliminate_zeros()
        line = [name]
        for n in (128, 512):
            B = torch.randn(A.shape[1], n, device="cuda").half()
            t = {}
            for fmt in ("bsr16", "bittcf"):
                p = accspmm.plan(A, device="gpu", precision="fp16", format=fmt)
                p(B)
                t[fmt] = cuda_ms(lambda: p(B), args.reps)
            auto = accspmm.plan(A, device="gpu", precision="fp16").format
            line.append(f"n={n}: bsr16 {t['bsr16'] * 1e3:.1f} us, bittcf {t['bittcf'] * 1e3:.1f} us, auto={auto}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()

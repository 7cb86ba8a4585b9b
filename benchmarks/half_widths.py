"""FP16 against TF32 plans, from Python, at the widths GNN layers use (N = 1 to 96), on real matrices:
the half BitTCF kernel covers 64 columns per warp step, so widths that are not a multiple of 64 take
its predicated 16-byte path (N a multiple of 8), copies of B and C padded to 8 columns (N < 8) or
its element path (other N).

    python benchmarks/half_widths.py DATA_DIR [--names G3_circuit cnr-2000 ...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_half import cuda_ms  # noqa: E402

NAMES = ("G3_circuit", "cnr-2000", "blogcatalog", "ddi", "usroads", "wiki-Vote", "Andrews")


def main():
    import torch

    import accspmm
    from accspmm import datasets

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--names", nargs="*", default=NAMES)
    ap.add_argument("--ns", type=int, nargs="*", default=[1, 16, 32, 48, 64, 96])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--format", default="auto", help="the half plans' format: auto, bsr16 or bittcf")
    args = ap.parse_args()
    print(f"# {accspmm.device_info()['name']}: microseconds per call, default plans; (x) = TF32 time / FP16 time")
    for name in args.names:
        try:
            A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32).tocsr()
        except FileNotFoundError:  # a matrix the directory lacks
            continue
        A.data = np.random.default_rng(0).integers(-4, 5, A.nnz).astype(np.float32)
        A.eliminate_zeros()
        ph = accspmm.plan(A, device="gpu", precision="fp16", format=args.format)
        pt = accspmm.plan(A, device="gpu", precision="tf32")
        out = [name, ph.format]
        for n in args.ns:
            Bf = torch.randn(A.shape[1], n, device="cuda")
            Bh = Bf.half()
            th, tt = cuda_ms(lambda: ph(Bh), args.reps), cuda_ms(lambda: pt(Bf), args.reps)
            out.append(f"n={n} half {th * 1e3:.1f} tf32 {tt * 1e3:.1f} ({tt / th:.2f}x)")
        print(" | ".join(out), flush=True)


if __name__ == "__main__":
    main()

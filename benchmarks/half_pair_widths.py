"""BSR16 kernels by width: the row kernel and the pair kernel forced (and the default plan's choice), kernel
time alone launched from C (``half_pairs.kernel_us``: median of --reps CUDA-event-timed launches), FP16, on
synthetic 32 x 32 block matrices, SMaT's band matrices and real matrices.  Every result is compared bit for
bit with the first kernel's (integer data: the kernels agree exactly).  Run on the GPU machine:

    python benchmarks/half_pair_widths.py [--data DIR] [--mats u99 irr99 band128 bcsstk16 ...]
        [--ns 64 72 128 136 200 256 512] [--kernels rows pairs auto] [--out FILE.json]

Matrix names: u<sparsity> / irr<sparsity> (uniform / irregular 32 x 32 block rows of 8192^2, e.g. u99 for
99% block sparsity; a trailing L for 32768^2: u995L), band<width> (8192^2), or a matrix of --data.  Prints
one JSON line per matrix and width, then a table of us and the rows / pairs ratio."""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_half import band_matrix, block_matrix  # noqa: E402
from half_pairs import kernel_us  # noqa: E402


def matrix(name, data):
    """The named matrix (module docstring) with integer values in -3..3."""
    from accspmm import datasets

    for kind, prefix in (("uniform", "u"), ("irregular", "irr")):
        digits = name[len(prefix):].rstrip("L")
        if name.startswith(prefix) and digits.isdigit():
            A = block_matrix(32768 if name.endswith("L") else 8192, float("0." + digits), kind)
            break
    else:
        if name.startswith("band") and name[4:].isdigit():
            A = band_matrix(8192, int(name[4:]))
        else:
            A = datasets.load_matrix(datasets.matrix_path(data, name), np.float32)
    A = A.tocsr().astype(np.float32)
    A.data = np.random.default_rng(1).integers(-3, 4, A.nnz).astype(np.float32)
    return A


def main():
    import torch

    import accspmm

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("ACCSPMM_DATA_DIR", ".data"))
    ap.add_argument("--mats", nargs="*", default=["u99", "u995L", "irr99", "band128"])
    ap.add_argument("--ns", type=int, nargs="*", default=[64, 72, 96, 128, 136, 192, 200, 256, 320, 448, 512])
    ap.add_argument("--kernels", nargs="*", default=["rows", "pairs", "auto"])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default="half_pair_widths.json")
    args = ap.parse_args()
    print(f"# {accspmm.device_info()['name']}: kernel us, FP16")
    out = []
    for name in args.mats:
        A = matrix(name, args.data)
        plans = {k: accspmm.plan(A, device="gpu", precision="fp16", format="bsr16",
                                 **({} if k == "auto" else {"tuning": {"kernel": k}})) for k in args.kernels}
        sched = next(iter(plans.values())).stats["schedule"]
        auto = plans["auto"].stats["schedule"] if "auto" in plans else {}
        why, critical = auto.get("kernel_why", ""), auto.get("quad_critical", {}).get("ratio")
        for n in args.ns:
            B = torch.randint(-3, 4, (A.shape[1], n), device="cuda").half()
            row = {"matrix": name, "n": n, "share": sched["pair_entries_per_block"],
                   "splits": plans["pairs"].stats["schedule"]["pairs"]["split_rows"] if "pairs" in plans else None,
                   "why": why, "critical_ratio": critical}
            ref = None
            for k, p in plans.items():
                C = p(B)
                ref = C if ref is None else ref
                row[k] = kernel_us(p, B, n, args.reps)
                row[k + "_ok"] = bool(torch.equal(C, ref))
                if k == "auto":
                    row["auto_kernel"] = p.kernel_for(n)
            out.append(row)
            print(json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print("| matrix | n | " + " | ".join(args.kernels) + " | rows / pairs | auto kernel | exact |")
    print("|---" * (len(args.kernels) + 5) + "|")
    for r in out:
        ratio = f"{r['rows'] / r['pairs']:.2f}" if "rows" in r and "pairs" in r else ""
        exact = all(r[k + "_ok"] for k in args.kernels)
        print(f"| {r['matrix']} | {r['n']} | " + " | ".join(f"{r[k]:.1f}" for k in args.kernels)
              + f" | {ratio} | {r.get('auto_kernel', '')} | {exact} |")


if __name__ == "__main__":
    main()

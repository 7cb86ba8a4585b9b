"""The kernel of widths 5-16 (TF32 plans): the default plan, whose rule (accspmm._tf32.wide_csr) runs a width
on the CUDA-core CSR kernel or on the Tensor Cores, against the same plan with the Tensor Cores forced
(``tuning={"wide": "bittcf"}``, the kernel of every width above 4 before the CSR kernel existed), kernel
only, on the real matrices of DIR and the adversarial shapes at 1M nonzeros:

    python benchmarks/ab_wide_csr.py DIR [--ns 5 6 8 12 16 24 32] [--reps 20] [--out wide.json]
    python benchmarks/ab_wide_csr.py DIR --force [--ns 8 16 32 64 128]   # the CSR kernel forced at every n
    python benchmarks/ab_wide_csr.py DIR --prec fp16     # FP16 (or bf16) BitTCF plans (format="bittcf"), half B
    python benchmarks/ab_wide_csr.py DIR --structures    # also the 12 matrices of benchmarks/structures.py

Times: the minimum of two medians of ``--reps`` single launches between CUDA events (``_cuda.time_tf32``);
per matrix and width, Tensor Cores / chosen ("c" where the rule took the CSR kernel), then the geometric
mean per width and the worst case.  ``--force``: the CSR kernel forced (``tuning={"wide": "csr"}``) against
the default, at any width (what the rule was fitted on: benchmarks/NOTES.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


def main():
    import torch

    import accspmm

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench_adversarial import kernel_ms, shapes

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ns", type=int, nargs="+", default=[5, 6, 8, 12, 16, 24, 32])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--force", action="store_true", help="the CSR kernel forced against the default plan")
    ap.add_argument("--prec", default="tf32", choices=("tf32", "fp16", "bf16"))
    ap.add_argument("--structures", action="store_true", help="also benchmarks/structures.py's matrices")
    ap.add_argument("--out")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    print("GPU:", gpu)
    cases = [(name, make) for name, _, make in shapes(args.dir, args.structures)]
    rows = []
    side = {"wide": "csr"} if args.force else {"wide": "bittcf"}
    kw = {} if args.prec == "tf32" else {"precision": args.prec, "format": "bittcf"}
    dt = {"tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.prec]
    for name, make in cases:
        A = make()
        if args.prec != "tf32":  # values within every half format's range (the times do not depend on them)
            A.data = np.random.default_rng(0).integers(1, 5, A.nnz).astype(np.float32)
        p, q = accspmm.plan(A, device="gpu", **kw), accspmm.plan(A, device="gpu", tuning=side, **kw)
        line = f"{name:15s}"
        for n in args.ns:
            B = torch.randn(A.shape[1], n, device="cuda").to(dt)
            Cp, Cq = p(B), q(B)
            torch.cuda.synchronize()
            kernel = (q if args.force else p).stats["schedule_by_n"][n]["kernel"]
            tq = min(kernel_ms(q, B, Cq, n, args.reps) for _ in range(2))
            tp = min(kernel_ms(p, B, Cp, n, args.reps) for _ in range(2))
            old, new = (tp, tq) if args.force else (tq, tp)
            rows.append({"matrix": name, "n": n, "nnz": int(A.nnz), "tensor_cores_ms": old, "chosen_ms": new,
                         "kernel": kernel})
            line += f" {n}:{old * 1e3:6.1f}/{new * 1e3:6.1f}{'c' if 'wide' in kernel else ' '}"
        print(line, flush=True)
        p.close()
        q.close()
    what = "forced CSR" if args.force else "default"
    for n in args.ns:
        r = [x for x in rows if x["n"] == n]
        g = math.exp(np.mean([math.log(x["tensor_cores_ms"] / x["chosen_ms"]) for x in r]))
        w = min(r, key=lambda x: x["tensor_cores_ms"] / x["chosen_ms"])
        on = sum("wide" in x["kernel"] for x in r)
        print(f"n={n}: Tensor Cores / {what} geomean {g:.3f} over {len(r)}; CSR kernel on {on}; worst "
              f"{w['tensor_cores_ms'] / w['chosen_ms']:.3f} ({w['matrix']})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": gpu, "argv": sys.argv, "precision": args.prec, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

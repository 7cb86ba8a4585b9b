"""Back-to-back calls from Python, for A/B runs of launch settings (one process per side).

    ACCSPMM_PDL=0|1 python benchmarks/back_to_back.py DIR [--ns 32 128 512] [--calls 200]
                                                      [--repeat 5] [--only NAME ...] [--out FILE]

For every matrix of DIR and width n, with the default plan (``accspmm.plan(A)``) and B a torch CUDA
tensor, the time per call (CUDA events around ``--calls`` back-to-back calls, median of
``--repeat``) of:

- ``p(B, out=C)``: the steady-state call with its output given;
- ``p(B)``: the result allocated per call (the default a user writes);
- ``chain``: ``B.neg_()`` then ``p(B, out=C)``, a kernel that writes B right before each call
  (what a layer of a model does), time per pair (a call that read B before the negation finished
  would be off by 2x the product);

and the kernel alone from C (CUDA events around each launch, median of 20), which launch settings
do not change.  Each result is checked: ``p(B)`` against ``torch.sparse.mm`` (norm-wise relative
error) and, for the chain, the last C against the product with the last B.

Writes a JSON list to --out (default: stdout only) and prints one line per case; the side's
settings (``ACCSPMM_PDL``) and the GPU model go in the header.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ns", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch

    import accspmm
    from accspmm import _cuda, datasets

    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def per_call_us(fn):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(args.repeat):
            ev0.record()
            for _ in range(args.calls):
                fn()
            ev1.record()
            ev1.synchronize()
            ts.append(ev0.elapsed_time(ev1) * 1e3 / args.calls)
        return float(np.median(ts))

    side = os.environ.get("ACCSPMM_PDL", "")
    print(f"# {accspmm.device_info()['name']}, ACCSPMM_PDL={side!r}, calls {args.calls}, repeat {args.repeat}")
    rows = []
    for name, A in datasets.matrices(args.dir, args.only, np.float32):
        m, k = A.shape
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                     torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data),
                                     size=A.shape).cuda()
        p = accspmm.plan(A)
        for n in args.ns:
            g = torch.Generator("cuda").manual_seed(n)
            B = torch.randn(k, n, device="cuda", generator=g)
            C = torch.empty(m, n, device="cuda")
            ref = torch.sparse.mm(At, B)
            got = p(B)
            rel = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
            out_us = per_call_us(lambda: p(B, out=C))
            alloc_us = per_call_us(lambda: p(B))

            def chain():
                B.neg_()
                p(B, out=C)

            chain_us = per_call_us(chain)
            torch.cuda.synchronize()
            cref = torch.sparse.mm(At, B)
            chain_rel = float(torch.linalg.norm(C - cref) / torch.linalg.norm(cref).clamp_min(1e-30))
            a, v = p._tf32.args(B.data_ptr(), C.data_ptr(), n, None)
            _cuda.time_tf32(a, v, 3, None, 0, None)
            kernel_us = float(np.median(_cuda.time_tf32(a, v, 20, None, 0, None))) * 1e3
            row = {"matrix": name, "nnz": int(A.nnz), "n": n, "out_us": out_us, "alloc_us": alloc_us,
                   "chain_us": chain_us, "kernel_us": kernel_us, "rel_err": rel, "chain_rel_err": chain_rel,
                   "ok": rel < 1e-3 and chain_rel < 1e-3, "pdl": side}
            rows.append(row)
            print(f"{name:16s} {n:4d} out {out_us:8.2f} alloc {alloc_us:8.2f} chain {chain_us:8.2f} "
                  f"kernel {kernel_us:8.2f} rel {rel:.1e} chain {chain_rel:.1e} {'ok' if row['ok'] else 'WRONG'}",
                  flush=True)
        p.close()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    bad = [r for r in rows if not r["ok"]]
    if bad:
        print(f"{len(bad)} case(s) WRONG", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

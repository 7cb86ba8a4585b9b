"""The wide CSR rule's time models (accspmm._tf32.wide_csr): kernel times to fit them on, and the fit.

    python benchmarks/fit_wide_csr.py collect DIR --out times.json [--ns 8 12 16 20 24 32]   # on a GPU
    python benchmarks/fit_wide_csr.py fit times.json [--prec fp16]                           # anywhere

``collect``: for every real matrix of DIR, the adversarial shapes at 1M nonzeros and the matrices of
benchmarks/structures.py (values 1-4), in TF32 and FP16 BitTCF plans, the kernel alone (``_cuda.time_tf32``,
the minimum of two medians of 20 launches) with the Tensor Cores forced (``tuning={"wide": "bittcf"}``) and
with the wide CSR kernel forced (``{"wide": "csr"}``) at each width, and the shape's m, k, nnz, longest row,
BitTCF blocks.

``fit``: least squares in relative error of the two models of ``wide_csr`` (the CSR side on the widths that
are a multiple of 4, its B-beyond-L2 term held at 0; the Tensor-Core side on all widths, for half plans in
two fits by n % 8) on the real matrices and adversarial shapes, the structures held out.  Prints the
constants and, per width, the rule's gain over the Tensor Cores (geometric mean, worst case, an oracle's
gain) on the held-out structures and leave-one-matrix-out on the rest, beside the same scores of the
constants in accspmm._tf32 now."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from accspmm import _tf32 as T  # noqa: E402


def collect(args):
    import torch

    import accspmm
    from bench_adversarial import kernel_ms, shapes

    rows = []
    print("GPU:", torch.cuda.get_device_name())
    for name, kind, make in shapes(args.dir, structures=True):
        A = make().tocsr()
        A.sum_duplicates()
        A.data = np.random.default_rng(0).integers(1, 5, A.nnz).astype(np.float32)
        longest = int(np.diff(A.indptr).max()) if A.shape[0] else 0
        blocks = None
        for prec in ("tf32", "fp16"):
            kw = {} if prec == "tf32" else {"precision": prec, "format": "bittcf"}
            dt = torch.float32 if prec == "tf32" else torch.float16
            with accspmm.plan(A, device="gpu", tuning={"wide": "bittcf"}, **kw) as p, \
                    accspmm.plan(A, device="gpu", tuning={"wide": "csr"}, **kw) as q:
                if blocks is None:
                    blocks = int(p.stats["tc_blocks"])
                line = f"{name:18s} {prec}"
                for n in args.ns:
                    B = torch.randn(A.shape[1], n, device="cuda").to(dt)
                    Cp, Cq = p(B), q(B)
                    torch.cuda.synchronize()
                    tc = min(kernel_ms(p, B, Cp, n, 20) for _ in range(2))
                    csr = min(kernel_ms(q, B, Cq, n, 20) for _ in range(2))
                    rows.append({"matrix": name, "kind": kind, "prec": prec, "n": n, "m": A.shape[0], "k": A.shape[1],
                                 "nnz": int(A.nnz), "longest": longest, "blocks": blocks, "tc": tc, "csr": csr})
                    line += f" {n}:{tc * 1e3:6.1f}/{csr * 1e3:6.1f}"
                print(line, flush=True)
    with open(args.out, "w") as fh:
        json.dump({"gpu": torch.cuda.get_device_name(), "argv": sys.argv, "rows": rows}, fh)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def csr_features(x, elem):
    n = x["n"]
    g = T.csr_wide_lanes(n)
    w = 4 * g * -(-n // (4 * g))
    parts = -(-x["longest"] // T.CSR_WIDE_PART) if x["longest"] > T.CSR_WIDE_LONG else 1
    far = x["k"] * n * (2 if elem else 4) > T.L2_REF
    nw = x["nnz"] * w / 1e6
    return [1.0, x["m"] * w / 1e6, nw, nw if far else 0.0, parts / 100, math.log2(parts)]


def bittcf_features(x):
    return [1.0, x["blocks"] / 1e6, -(-x["m"] // 8) / 1e6]


def lstsq_rel(X, y, fixed=None):
    """Coefficients minimising the relative error of X c against y; ``fixed``: {column: value} held."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    fixed = fixed or {}
    free = [i for i in range(X.shape[1]) if i not in fixed]
    rest = y - sum(X[:, i] * v for i, v in fixed.items())
    w = 1 / y
    c, *_ = np.linalg.lstsq(X[:, free] * w[:, None], rest * w, rcond=None)
    out = np.zeros(X.shape[1])
    out[free] = c
    for i, v in fixed.items():
        out[i] = v
    return out


def fit_models(rows, elem):
    csr_rows = [x for x in rows if x["n"] % 4 == 0]
    cm = lstsq_rel([csr_features(x, elem) for x in csr_rows], [x["csr"] * 1e3 for x in csr_rows], {3: 0.0})

    def tc(rs):
        return lstsq_rel([bittcf_features(x) for x in rs], [x["tc"] * 1e3 for x in rs])
    if elem:
        return cm, (tc([x for x in rows if x["n"] % 8 == 0]), tc([x for x in rows if x["n"] % 8]))
    return cm, tc(rows)


def on_csr(x, elem, cm, bm):
    """wide_csr's decision with the given constants (margin and element factors as in accspmm._tf32)."""
    n = x["n"]
    if n > T.CSR_WIDE_MAX_N or (not elem and n % 4 and n > T.CSR_WIDE_ELEMENT_MAX_N):
        return False
    csr = float(np.dot(cm, csr_features(x, elem)))
    if n % 4:
        csr *= T.CSR_WIDE_ELEMENT_HALF if elem else T.CSR_WIDE_ELEMENT
    bit = float(np.dot(bm[n % 8 != 0] if elem else bm, bittcf_features(x)))
    return csr <= T.CSR_WIDE_MARGIN * bit


def scores(pairs):
    """{n: (gain, worst, oracle)} over (row, decision) pairs."""
    out = {}
    for n in sorted({x["n"] for x, _ in pairs}):
        sel = [(x, d) for x, d in pairs if x["n"] == n]
        gain = [x["tc"] / (x["csr"] if d else x["tc"]) for x, d in sel]
        out[n] = (geomean(gain), min(gain), geomean([x["tc"] / min(x["tc"], x["csr"]) for x, _ in sel]))
    return out


def show(label, s):
    print(f"{label:38s}" + "  ".join(f"n={n}: {g:.3f} (worst {w:.2f}, oracle {o:.3f})" for n, (g, w, o) in s.items()))


def fit(args):
    with open(args.times) as fh:
        data = json.load(fh)
    rows = [x for x in (data["rows"] if isinstance(data, dict) else data) if x["prec"] == args.prec]
    elem = int(args.prec != "tf32")
    train = [x for x in rows if x["kind"] != "struct"]
    held = [x for x in rows if x["kind"] == "struct"]
    cm, bm = fit_models(train, elem)
    now = (T.CSR_WIDE_MODEL_HALF, T.BITTCF_WIDE_MODEL_HALF) if elem else (T.CSR_WIDE_MODEL, T.BITTCF_WIDE_MODEL)
    print("CSR model:", tuple(round(float(v), 3) for v in cm))
    print("BitTCF model:", tuple(tuple(round(float(v), 2) for v in b) for b in bm) if elem
          else tuple(round(float(v), 2) for v in bm))
    show("held-out structures, this fit", scores([(x, on_csr(x, elem, cm, bm)) for x in held]))
    show("held-out structures, constants now", scores([(x, on_csr(x, elem, *now)) for x in held]))
    loo = []
    for name in sorted({x["matrix"] for x in train}):
        c, b = fit_models([x for x in train if x["matrix"] != name], elem)
        loo += [(x, on_csr(x, elem, c, b)) for x in train if x["matrix"] == name]
    show("leave-one-matrix-out, this fit", scores(loo))
    show("the same rows, constants now", scores([(x, on_csr(x, elem, *now)) for x in train]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("dir")
    c.add_argument("--ns", type=int, nargs="+", default=[8, 12, 16, 20, 24, 32])
    c.add_argument("--out", required=True)
    f = sub.add_parser("fit")
    f.add_argument("times")
    f.add_argument("--prec", default="fp16", choices=("tf32", "fp16"))
    args = ap.parse_args()
    collect(args) if args.cmd == "collect" else fit(args)


if __name__ == "__main__":
    main()

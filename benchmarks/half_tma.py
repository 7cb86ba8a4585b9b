"""BSR16 kernel: B tiles by TMA (sm_90, the default where it applies) against cp.async (``ACC_HALF_TMA=0``).

TMA runs in the row kernel with slice-major thread blocks (n >= 256, n a multiple of 8; cuda/half_spmm.cu);
elsewhere both sides run the same code, and their ratio shows the timing noise.

Same process, same plans: for each matrix, width and layout (rows, pairs) the kernel is timed from C
(``_cuda.time_half``, median of --reps CUDA-event-timed launches) alternately with TMA on and off,
--rounds times, and the minimum of each side's medians is reported.  Every output of the two paths
is compared bit for bit (FP16 out and FP32 out) and, on integer data, with the exact product.  Also
odd shapes (k and m not multiples of 16, widths that are not multiples of 64, BF16) for the bits.
Run from the repository root on the GPU machine:

    python benchmarks/half_tma.py [DATA_DIR] [--ns 128 512] [--reps 30] [--rounds 3] [--side both]

--side tma / cpasync times one side only, in a process of its own (no alternation: a kernel's shared
memory carve-out can outlast it and change the next kernel's L1, so interleaved launches of the two
may bias each other); run the two alternately and compare the printed tables.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_half import block_matrix  # noqa: E402
from half_pairs import integer_matrices, kernel_us, real_matrices  # noqa: E402

REAL = ("ddi", "G3_circuit", "cnr-2000", "landmark")


def with_tma(on: bool):
    os.environ["ACC_HALF_TMA"] = "1" if on else "0"


def outputs(p, Bh, m, n):
    """(half C, float32 C) of plan p, each poisoned first."""
    import torch

    Ch = torch.full((m, n), float("nan"), dtype=Bh.dtype, device="cuda")
    Cf = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    p(Bh, out=Ch)
    p(Bh, out=Cf)
    torch.cuda.synchronize()
    return Ch, Cf


def compare(p, A, Bi, Bh, n):
    """(bits equal TMA / cp.async, TMA exact against A @ B on integer data)."""
    import torch

    m = A.shape[0]
    with_tma(False)
    h0, f0 = outputs(p, Bh, m, n)
    with_tma(True)
    h1, f1 = outputs(p, Bh, m, n)
    same = bool(torch.equal(h0.view(torch.int16), h1.view(torch.int16)) and torch.equal(f0.view(torch.int32),
                                                                                          f1.view(torch.int32)))
    exact = bool(np.array_equal(f1.cpu().numpy(), A @ Bi))
    return same, exact


def main():
    import torch

    import accspmm

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--ns", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", choices=("both", "tma", "cpasync"), default="both")
    args = ap.parse_args()
    sides = {"both": (False, True), "tma": (True,), "cpasync": (False,)}[args.side]
    gpu = accspmm.device_info()["name"]
    print(f"# {gpu}")
    bad = 0
    # odd shapes: bits and exactness only
    rng = np.random.default_rng(7)
    import scipy.sparse as sp

    for (m, k, dens, prec) in () if args.side != "both" else ((1000, 1000, 0.01, "fp16"), (517, 333, 0.05, "bf16"), (2048, 4100, 0.002, "fp16"),
                               (64, 20000, 0.01, "bf16"), (3000, 77, 0.2, "fp16")):
        A = sp.random(m, k, dens, format="csr", random_state=rng, dtype=np.float32)
        A.data = rng.integers(-3, 4, A.nnz).astype(np.float32)
        A.eliminate_zeros()
        A = A.tocsr()
        A[0, :] = 1.0  # a dense row: a split block row
        A = A.tocsr()
        for kernel in ("rows", "pairs"):
            p = accspmm.plan(A, device="gpu", precision=prec, format="bsr16", tuning={"kernel": kernel})
            for n in (8, 16, 24, 72, 136, 200, 264):
                Bi = rng.integers(-2, 3, (k, n)).astype(np.float32)
                Bh = torch.from_numpy(Bi).cuda().to(torch.float16 if prec == "fp16" else torch.bfloat16)
                same, exact = compare(p, A, Bi, Bh, n)
                if not (same and exact):
                    bad += 1
                    print(f"  MISMATCH {m}x{k} {prec} {kernel} n={n}: same {same}, exact {exact}", flush=True)
            p.close()
    print(f"odd shapes: {bad} mismatches", flush=True)
    mats = [(f"uniform32-8192-{s}", lambda s=s: block_matrix(8192, s, "uniform")) for s in (0.7, 0.9, 0.95, 0.99)]
    mats += [(f"irregular32-8192-{s}", lambda s=s: block_matrix(8192, s, "irregular")) for s in (0.9, 0.99)]
    mats += real_matrices(args.dir, REAL)
    rows = []
    for name, A, m, k in integer_matrices(mats):
        plans = {kern: accspmm.plan(A, device="gpu", precision="fp16", format="bsr16", tuning={"kernel": kern})
                 for kern in ("rows", "pairs")}
        for n in args.ns:
            Bi = np.random.default_rng(n).integers(-2, 3, (k, n)).astype(np.float32)
            Bh = torch.from_numpy(Bi).cuda().half()
            for kern, p in plans.items():
                same, exact = compare(p, A, Bi, Bh, n)
                bad += not (same and exact)
                t = {True: [float("nan")], False: [float("nan")]}
                for _ in range(args.rounds):
                    for on in sides:
                        with_tma(on)
                        t[on].append(kernel_us(p, Bh, n, args.reps))
                r = (name, n, kern, np.nanmin(t[False]), np.nanmin(t[True]), same, exact)
                rows.append(r)
                print(f"  {name} n={n} {kern}: cp.async {r[3]:.1f} us, TMA {r[4]:.1f} us "
                      f"({r[3] / r[4]:.2f}x), bits equal {same}, exact {exact}", flush=True)
        for p in plans.values():
            p.close()
    with_tma(True)
    print(f"\n# {gpu}, FP16 BSR16 kernel us (min over {args.rounds} rounds of {args.reps}-launch medians); "
          f"mismatches: {bad}")
    print("| matrix | n | kernel | cp.async | TMA | speedup | bits equal | exact |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, kern, a, b, same, exact in rows:
        print(f"| {name} | {n} | {kern} | {a:.1f} | {b:.1f} | {a / b:.2f}x | {same} | {exact} |")
    sp_ = [r[3] / r[4] for r in rows]
    print(f"geomean TMA speedup {np.exp(np.mean(np.log(sp_))):.3f}x over {len(sp_)} cases")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

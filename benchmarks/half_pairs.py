"""BSR16 with a warp per pair of block rows and a warpgroup per quad of block rows (wgmma, sm_90)
against a warp per block row, cuSPARSE Blocked-ELL and dense cuBLAS (FP16 in and out, kernel times).

For each matrix and width n: the BSR16 kernel alone launched from C (``_cuda.time_half``, median of
--reps CUDA-event-timed launches, the host's launch hidden) for a plan forced to each kernel
(``tuning={"kernel": "rows"}``, ``"pairs"`` and ``"quads"``), and the default plan's choice.  For context only,
Blocked-ELL (32x32 blocks, padded; ``bench_half.BlockedEll``) and torch.mm on the dense matrix, as
CUDA-event medians around one call from Python: those include the host's launch latency (ctypes,
about 10 us), so they are not comparable with the kernel times at this size, and no ratio to them is
printed (benchmarks/bench_half.py compares all paths from Python).  Every pairs and quads result is
checked against the float64 product (integer data: exact), and the pairs result against the rows
kernel bit for bit where neither schedule splits a block row.  Pairs run in thread blocks of 128
columns at widths with 16-byte rows of B and C; "pairs (warps)" is their warp kernel
(ACC_HALF_PAIR_CTA=0), bits compared.  Run from the repository root on the GPU machine:

    python benchmarks/half_pairs.py [DATA_DIR] [--ns 128 512] [--reps 20] [--quick]

DATA_DIR adds real matrices (BSR16 forced).  One line per matrix and width; the table last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_half import BlockedEll, block_matrix, cuda_ms  # noqa: E402

REAL = ("bcsstk16", "G3_circuit", "cnr-2000", "ddi", "landmark")


def kernel_us(p, Bh, n, reps):
    import torch

    from accspmm import _cuda

    C = torch.empty(p.shape[0], n, dtype=Bh.dtype, device="cuda")
    ws = torch.empty(max(1, p.workspace_floats(n)), dtype=torch.float32, device="cuda")
    args = p.kernel_args(Bh.data_ptr(), C.data_ptr(), n, False, ws.data_ptr() if p.workspace_floats(n) else 0)
    return float(np.median(_cuda.time_half(args, reps, None, 0, None))) * 1e3


@contextlib.contextmanager
def pair_warps():
    """Pairs on the warp kernel (ACC_HALF_PAIR_CTA=0, cuda/half_spmm.cu) inside the block; the default is thread
    blocks of 128 columns at widths with 16-byte rows of B and C."""
    old = os.environ.get("ACC_HALF_PAIR_CTA")
    os.environ["ACC_HALF_PAIR_CTA"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["ACC_HALF_PAIR_CTA"]
        else:
            os.environ["ACC_HALF_PAIR_CTA"] = old


def real_matrices(directory, names=REAL) -> list:
    """(name, loader) of those of ``names`` that ``directory`` holds (none without a directory)."""
    from accspmm import datasets

    out = []
    for name in names if directory else ():
        try:
            path = datasets.matrix_path(directory, name)
        except FileNotFoundError:
            continue
        out.append((name, lambda path=path: datasets.load_matrix(path, np.float32).tocsr()))
    return out


def integer_matrices(mats):
    """(name, A, m, k) for each (name, loader) of ``mats``: A float32 with integer values in [-4, 4]
    (every product exact in FP32), explicit zeros dropped."""
    for name, make in mats:
        A = make().astype(np.float32)
        A.data = np.random.default_rng(0).integers(-4, 5, A.nnz).astype(np.float32)
        A.eliminate_zeros()
        yield name, A, A.shape[0], A.shape[1]


def main():
    import torch

    import accspmm

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", help="directory of real matrices (Matrix Market, .mtx.gz)")
    ap.add_argument("--ns", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--quick", action="store_true", help="uniform 90%% and 99%% and one irregular matrix only")
    args = ap.parse_args()
    sp_uniform = (0.9, 0.99) if args.quick else (0.5, 0.7, 0.9, 0.95, 0.99)
    mats = [(f"uniform32-8192-{s}", lambda s=s: block_matrix(8192, s, "uniform")) for s in sp_uniform]
    mats += [(f"irregular32-8192-{s}", lambda s=s: block_matrix(8192, s, "irregular"))
             for s in ((0.9,) if args.quick else (0.9, 0.99))]
    if not args.quick:
        mats += [("uniform32-32768-0.99", lambda: block_matrix(32768, 0.99, "uniform"))]
    mats += real_matrices(args.dir)
    gpu = accspmm.device_info()["name"]
    print(f"# {gpu}, FP16 in and out, kernel microseconds", flush=True)
    rows = []
    for name, A, m, k in integer_matrices(mats):
        by_row = accspmm.plan(A, device="gpu", precision="fp16", format="bsr16", tuning={"kernel": "rows"})
        by_pair = accspmm.plan(A, device="gpu", precision="fp16", format="bsr16", tuning={"kernel": "pairs"})
        by_quad = accspmm.plan(A, device="gpu", precision="fp16", format="bsr16", tuning={"kernel": "quads"})
        auto = accspmm.plan(A, device="gpu", precision="fp16")
        splits = by_row.stats["schedule"]["rows"]["split_rows"] + by_pair.stats["schedule"]["pairs"]["split_rows"]
        ell = None
        if m % 32 == 0 and k % 32 == 0:
            try:
                ell = BlockedEll(A, 32, "fp16")
            except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
                print(f"  {name}: Blocked-ELL unavailable: {exc}", file=sys.stderr)
        Ad = torch.from_numpy(A.toarray()).cuda().half() if m * k <= 8192 * 8192 else None
        for n in args.ns:
            Bi = np.random.default_rng(n).integers(-2, 3, (k, n)).astype(np.float32)
            Bh = torch.from_numpy(Bi).cuda().half()
            Cr = by_row(Bh, out=torch.empty(m, n, device="cuda"))
            Cp = by_pair(Bh, out=torch.empty(m, n, device="cuda"))
            Cq = by_quad(Bh, out=torch.empty(m, n, device="cuda"))
            ref = A @ Bi
            exact = bool(np.array_equal(Cp.cpu().numpy(), ref))
            exact_q = bool(np.array_equal(Cq.cpu().numpy(), ref))
            same = bool(torch.equal(Cr, Cp)) if splits == 0 else None
            with pair_warps():  # the pair kernel's warp version (where the default runs thread blocks)
                same_warp = bool(torch.equal(by_pair(Bh, out=torch.empty(m, n, device="cuda")), Cp))
                warp_kernel_us = kernel_us(by_pair, Bh, n, args.reps)
            r = {"gpu": gpu, "matrix": name, "m": m, "k": k, "nnz": int(A.nnz), "n": n,
                 "bsr16_blocks": by_row.stats["bsr16_blocks"],
                 "pair_entries_per_block": by_pair.stats["schedule"]["pair_entries_per_block"],
                 "quad_entries_per_block": by_quad.stats["schedule"].get("quad_entries_per_block", float("nan")),
                 "quads_kernel": by_quad.kernel_for(n),
                 "split_rows": [by_row.stats["schedule"]["rows"]["split_rows"],
                                by_pair.stats["schedule"]["pairs"]["split_rows"]],
                 "auto": f"{auto.format}/{auto.kernel_for(n) if auto.format == 'bsr16' else '-'}",
                 "rows_us": kernel_us(by_row, Bh, n, args.reps), "pairs_us": kernel_us(by_pair, Bh, n, args.reps),
                 "pairs_warp_us": warp_kernel_us, "bits_equal_pairs_warp": same_warp,
                 "quads_us": kernel_us(by_quad, Bh, n, args.reps), "exact": exact, "exact_quads": exact_q,
                 "bits_equal_rows": same}
            if ell is not None:
                Ce = torch.empty(m, n, dtype=torch.float16, device="cuda")
                run, keep = ell.prepare(Bh, Ce)
                r["ell_us"] = cuda_ms(run, args.reps) * 1e3
            if Ad is not None:
                r["cublas_us"] = cuda_ms(lambda: torch.mm(Ad, Bh), args.reps) * 1e3
            rows.append(r)
            print(f"  {name} n={n}: rows {r['rows_us']:.1f}, pairs {r['pairs_us']:.1f} (warps {warp_kernel_us:.1f}), "
                  f"quads {r['quads_us']:.1f} ({r['quads_kernel']}, exact {exact_q}), "
                  f"ell {r.get('ell_us', float('nan')):.1f}, cublas {r.get('cublas_us', float('nan')):.1f}; "
                  f"entries/block {r['pair_entries_per_block']:.2f}, exact {exact}, bits = rows {same}", flush=True)
        for p in (by_row, by_pair, by_quad, auto):
            p.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    nan = float("nan")
    print(f"\n# {gpu}, FP16, kernel us (median of {args.reps})")
    print("| matrix | n | entries/block (pairs, quads) | rows | pairs (warps) | pairs | quads | "
          "best of rows, pairs / quads | ELL (from Python) | cuBLAS (from Python) | default | exact (pairs, quads) | "
          "pairs' bits = rows, = pairs (warps) |")
    print("|" + "---|" * 13)
    for r in rows:
        e, c = r.get("ell_us", nan), r.get("cublas_us", nan)
        print(f"| {r['matrix']} | {r['n']} | {r['pair_entries_per_block']:.2f}, {r['quad_entries_per_block']:.2f} | "
              f"{r['rows_us']:.1f} | {r['pairs_warp_us']:.1f} | {r['pairs_us']:.1f} | {r['quads_us']:.1f} | "
              f"{min(r['rows_us'], r['pairs_us']) / r['quads_us']:.2f}x | {e:.1f} | {c:.1f} | {r['auto']} | "
              f"{r['exact']}, {r['exact_quads']} | {r['bits_equal_rows']}, {r['bits_equal_pairs_warp']} |")


if __name__ == "__main__":
    main()

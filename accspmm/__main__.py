"""``python -m accspmm demo``: BitTCF statistics and a checked SpMM on the bundled matrix."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def demo(args) -> int:
    import accspmm
    from accspmm import datasets

    path = args.matrix or datasets.bundled_path()
    A = datasets.load_matrix(path, np.float32)
    m, k = A.shape
    print(f"matrix  {datasets.matrix_name(path)}: {m} x {k}, nnz {A.nnz}")
    t0 = time.perf_counter()
    fmt = accspmm.BitTCF.from_csr(A)
    t_build = time.perf_counter() - t0
    s = fmt.stats
    print(f"BitTCF  {s['tc_blocks']} TC blocks in {s['windows']} windows ({s['empty_windows']} empty), "
          f"MeanNNZTC {s['mean_nnz_tc']:.2f}, blocks/window mean {s['blocks_per_window_mean']:.2f} "
          f"max {s['blocks_per_window_max']} std {s['blocks_per_window_std']:.2f}, IBD {s['imbalance_degree']:.2f}")
    print(f"        {s['bytes'] / 1e6:.2f} MB vs CSR {s['csr_bytes'] / 1e6:.2f} MB "
          f"({s['bytes_ratio_vs_csr']:.2f}x), built in {t_build * 1e3:.1f} ms")

    device = "gpu" if accspmm.cuda_available() else "cpu"
    if device == "gpu":
        info = accspmm.device_info()
        print(f"device  GPU: {info['name']} (sm_{info['compute_capability'][0]}{info['compute_capability'][1]})")
    else:
        print(f"device  CPU ({accspmm._core.num_threads()} threads); GPU unavailable: {accspmm.cuda_status()}")
    rng = np.random.default_rng(0)
    B = rng.standard_normal((k, args.n)).astype(np.float32)
    with accspmm.plan(A, device=device) as p:
        print(f"plan    {p!r}")
        p(B)  # warm-up
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            C = p(B)
            times.append(time.perf_counter() - t0)
    t = float(np.median(times))
    ref = (A.astype(np.float64) @ B.astype(np.float64))
    bound = abs(A).astype(np.float64) @ np.abs(B.astype(np.float64))
    err = np.abs(C - ref)
    rel = np.linalg.norm(C - ref) / max(np.linalg.norm(ref), 1e-300)
    print(f"spmm    N={args.n}: {t * 1e3:.3f} ms per call (median of {args.repeat}, host arrays, "
          f"transfers included on GPU), {2 * A.nnz * args.n / t / 1e9:.2f} GFLOP/s")
    print(f"check   vs scipy (float64): max |error| {err.max():.3e}, max error / (|A||B|) "
          f"{(err / np.maximum(bound, 1e-300)).max():.3e}, norm-wise relative error {rel:.3e}")
    scipy_c = A @ B
    exact = np.array_equal(C, scipy_c)
    print(f"        {'bit-identical to' if exact else 'differs in rounding from'} scipy's float32 A @ B")
    ok = np.all(np.isfinite(C)) and rel < (1e-3 if p.precision == "tf32" else 1e-5)
    print("result  OK" if ok else "result  FAILED")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accspmm")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="BitTCF statistics and a checked SpMM on the bundled matrix")
    d.add_argument("--matrix", help="a Matrix Market file (default: the bundled wiki-Vote)")
    d.add_argument("-n", type=int, default=128, help="columns of B (default 128)")
    d.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    return demo(args)


if __name__ == "__main__":
    sys.exit(main())

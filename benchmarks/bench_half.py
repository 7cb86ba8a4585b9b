"""FP16 / BF16 SpMM (accspmm._half, BSR16 on mma.m16n8k16) against the vendor paths, one process:

    python benchmarks/bench_half.py [DIR] [--ns 32 128 256 512] [--sizes 8192] [--sparsity 0.5 ... 0.995]
                                    [--bands 64 256 1024 4096] [--band-size 8192]
                                    [--prec fp16 bf16] [--reps 20] [--only NAME ...] [--out DIR]

Matrices: synthetic block matrices of 32 x 32 dense blocks (``uniform``: the same number of blocks
in every block row; ``irregular``: blocks per block row drawn from a power law with the same
total), size x size for each ``--sizes``, at each ``--sparsity`` (fraction of zero blocks); SMaT's
band matrices (``band_matrix``: --band-size square, each --bands bandwidth; ``--bands`` with no
value skips them); and
every Matrix Market file of DIR (real matrices, unstructured; their pattern with random normal values, which every format
represents) at N = 128 and 512.

Paths, all on the same device arrays, warm L2, 20 back-to-back calls between CUDA events (GUIDE
section 4: a user's loop of calls, whose host cost overlaps the GPU work), after --warm-ms (20) of warm-up
calls of each path, the paths of a matrix and width timed in turns (a burst of each per round) and each
path's median over max(20, --reps) rounds (``interleaved_ms``).  Until 2026-11-27 each path was timed alone,
a median of max(5, --reps / 4) bursts after one call: slow spells of the machine then fell on one path and
moved its 10 us calls 1.5-10x between runs (benchmarks/NOTES.md).  Until 2026-11-26 one call between
events, which added each path's host latency to every call (7.5-8.7 us for Blocked-ELL's ctypes call at 99%
sparsity, 6.5 us for ours):

- ``accspmm``: ``plan(A, precision=p)(B)`` with a half PyTorch B (the user-level call, C allocated
  per call) and the kernel alone launched from C (``_cuda.time_half``);
- ``cuBLAS``: dense ``torch.mm`` in the half format (A densified; skipped above 2^28 entries);
- ``Blocked-ELL``: ``cusparseSpMM`` with ``CUSPARSE_SPMM_BLOCKED_ELL_ALG1``, FP32 compute, block 32
  (16 for real matrices), called through ctypes on the libcusparse that accspmm loads; every block
  row padded with zero blocks to the longest one (Blocked-ELL's layout); preprocessing excluded;
- ``torch BSR``: ``torch.mm(A.to_sparse_bsr(32), B)`` (Triton kernels);
- ``cuSPARSE CSR``: ``torch.mm(A.to_sparse_csr(), B)`` in the half format;
- ``accspmm TF32``: the default plan with a float32 B (the precision half is meant to beat).

Reports ms, GFLOP/s (2 nnz N / time, stored entries only), speedups, the fraction of the roofline
(bytes of A's blocks, B and C at HBM bandwidth, against time) and the norm-wise error against
float64 of the accspmm half result (and of the TF32 one).  Writes half.json / half.md into --out
and prints the tables last, with the GPU model.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
import torch

import accspmm
from accspmm import _cuda, _device, datasets

TORCH_DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
CUDA_DT = {"fp16": 2, "bf16": 14}  # CUDA_R_16F, CUDA_R_16BF
CUDA_R_32F, IDX32, ORDER_ROW, BLOCKED_ELL_ALG1 = 0, 2, 2, 13
ELL_MAX_BYTES = 8 << 30  # a padded Blocked-ELL above this is reported as not runnable
#: Warm-up of every timed path (cuda_ms): calls for this long first (GUIDE section 4's warm-up runs).
WARM_MS = 20.0


def cuda_ms(fn, reps, burst=20):
    """ms per call of fn as GUIDE section 4 times a user's calls: `burst` back-to-back calls between two
    CUDA events (the host's cost of a call overlaps the previous call's GPU work, as in a loop of
    calls), median over max(20, reps) bursts (GUIDE section 4: at least 20), after WARM_MS of warm-up
    calls.  A path slower than 1 ms a call runs bursts of 4 (the host's cost is hidden there anyway).
    Paths compared with each other: interleaved_ms."""
    return interleaved_ms({"fn": fn}, reps, burst)["fn"]


def interleaved_ms(fns, reps, burst=20):
    """{key: ms per call} of each fn of the dict, each timed as cuda_ms says, in turns: after each fn's
    WARM_MS of warm-up, round r times a burst of every fn in order, and each fn's time is the median over
    max(20, reps) rounds.  A slow spell of the machine (on the H100 machine, minutes-long stretches where
    10 us calls took 1.5-3x, and single bursts 10x) then falls on every path of a comparison alike, as
    bench_python.user_ms does."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    bursts = {}
    for key, fn in fns.items():
        warm_until = time.perf_counter() + WARM_MS / 1e3
        while True:
            a.record()
            fn()
            b.record()
            b.synchronize()
            if time.perf_counter() >= warm_until:
                break
        bursts[key] = 4 if a.elapsed_time(b) > 1.0 else burst  # slow paths: bursts of 4
    out = {key: [] for key in fns}
    for _ in range(max(20, reps)):
        for key, fn in fns.items():
            a.record()
            for _ in range(bursts[key]):
                fn()
            b.record()
            b.synchronize()
            out[key].append(a.elapsed_time(b) / bursts[key])
    return {key: float(np.median(t)) for key, t in out.items()}


def block_matrix(size, sparsity, kind, bs=32, seed=0):
    rng = np.random.default_rng(seed)
    nb = size // bs
    total = max(1, int(round((1 - sparsity) * nb * nb)))
    if kind == "uniform":
        per = np.full(nb, total // nb)
        per[: total - per.sum()] += 1
    else:  # power law, capped at the row width, same total
        w = rng.pareto(1.2, nb) + 1
        per = np.minimum(nb, np.maximum(1, np.round(w / w.sum() * total))).astype(int)
    rows, cols = [], []
    for r in range(nb):
        c = np.sort(rng.choice(nb, size=int(per[r]), replace=False))
        rows.append(np.full(c.size, r))
        cols.append(c)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    data = rng.standard_normal((rows.size, bs, bs)).astype(np.float32)
    return sp.bsr_matrix((data, cols, np.concatenate(([0], np.cumsum(per)))), shape=(size, size)).tocsr()


def band_matrix(size, width, seed=0):
    """size x size band matrix of bandwidth ``width`` (SMaT's synthetic benchmark, section VI): entry (i, j)
    stored iff |i - j| <= width // 2, standard normal values; its 16 x 16 and 32 x 32 blocks are dense inside
    the band, so no reordering helps."""
    h = width // 2
    i = np.arange(size, dtype=np.int64)
    lo, hi = np.maximum(0, i - h), np.minimum(size - 1, i + h)
    counts = hi - lo + 1
    indptr = np.concatenate(([0], np.cumsum(counts)))
    idx = np.arange(indptr[-1], dtype=np.int64) - np.repeat(indptr[:-1] - lo, counts)
    data = np.random.default_rng(seed).standard_normal(idx.size).astype(np.float32)
    return sp.csr_matrix((data, idx.astype(np.int32), indptr), shape=(size, size))


class BlockedEll:
    """cuSPARSE Blocked-ELL SpMM through ctypes (benchmark baseline only)."""

    def __init__(self, A, bs, prec):
        _device.load_cusparse()
        self.lib = _cusparse_lib()
        m, k = A.shape
        Mp, Kp = -(-m // bs) * bs, -(-k // bs) * bs
        Ab = sp.csr_matrix(A, copy=True)
        Ab.resize((Mp, Kp))
        Ab = Ab.tobsr(blocksize=(bs, bs))
        per = np.diff(Ab.indptr)
        ell = int(per.max()) if per.size else 1
        R = Mp // bs
        if R * ell * bs * bs * 2 > ELL_MAX_BYTES:
            raise RuntimeError(f"padding every block row to the longest ({ell} blocks) needs "
                               f"{R * ell * bs * bs * 2 / 2**30:.1f} GiB")
        ncols = np.full((R, ell), -1, np.int32)
        row = np.repeat(np.arange(R), per)
        pos = np.arange(row.size) - Ab.indptr[row]
        ncols[row, pos] = Ab.indices
        vals = np.zeros((R, ell, bs, bs), np.float32)
        vals[row, pos] = Ab.data
        vals = vals.transpose(0, 2, 1, 3)
        self.padded_blocks = ncols.size
        self.cols = torch.from_numpy(ncols).cuda()
        self.vals = torch.from_numpy(vals.reshape(Mp, ell * bs)).cuda().to(TORCH_DT[prec])
        self.shape, self.bs, self.ell, self.prec = (Mp, Kp), bs, ell, prec
        self.h = ctypes.c_void_p()
        self._check(self.lib.cusparseCreate(ctypes.byref(self.h)), "create")
        self.A = ctypes.c_void_p()
        self._check(self.lib.cusparseCreateBlockedEll(
            ctypes.byref(self.A), ctypes.c_int64(Mp), ctypes.c_int64(Kp), ctypes.c_int64(bs),
            ctypes.c_int64(ell * bs), ctypes.c_void_p(self.cols.data_ptr()), ctypes.c_void_p(self.vals.data_ptr()),
            IDX32, 0, CUDA_DT[prec]), "CreateBlockedEll")
        self.plans = {}

    @staticmethod
    def _check(st, what):
        if st != 0:
            raise RuntimeError(f"cuSPARSE {what} failed: status {st}")

    def prepare(self, B, C):
        """B: Kp x n, C: Mp x n half tensors (row-major)."""
        n = B.shape[1]
        Bd, Cd = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cusparseCreateDnMat(ctypes.byref(Bd), ctypes.c_int64(B.shape[0]), ctypes.c_int64(n),
                                                 ctypes.c_int64(n), ctypes.c_void_p(B.data_ptr()), CUDA_DT[self.prec],
                                                 ORDER_ROW), "CreateDnMat B")
        self._check(self.lib.cusparseCreateDnMat(ctypes.byref(Cd), ctypes.c_int64(C.shape[0]), ctypes.c_int64(n),
                                                 ctypes.c_int64(n), ctypes.c_void_p(C.data_ptr()), CUDA_DT[self.prec],
                                                 ORDER_ROW), "CreateDnMat C")
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        size = ctypes.c_size_t()
        self._check(self.lib.cusparseSpMM_bufferSize(self.h, 0, 0, ctypes.byref(alpha), self.A, Bd, ctypes.byref(beta),
                                                     Cd, CUDA_R_32F, BLOCKED_ELL_ALG1, ctypes.byref(size)), "bufferSize")
        buf = torch.empty(max(1, size.value), dtype=torch.uint8, device="cuda")
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.lib.cusparseSetStream(self.h, stream), "SetStream")

        def run():
            self._check(self.lib.cusparseSpMM(self.h, 0, 0, ctypes.byref(alpha), self.A, Bd, ctypes.byref(beta), Cd,
                                              CUDA_R_32F, BLOCKED_ELL_ALG1, ctypes.c_void_p(buf.data_ptr())), "SpMM")

        return run, (Bd, Cd, buf)


def _cusparse_lib():
    for path in _device._cusparse_candidates():
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise RuntimeError("libcusparse not found")


def rel_err(C, ref):
    return float(np.linalg.norm(np.asarray(C, np.float64) - ref) / max(np.linalg.norm(ref), 1e-300))


def run_matrix(name, A, ns, precs, reps, bs_ell, hbm_gbs, dense_ok):
    rows = []
    m, k = A.shape
    A = sp.csr_matrix(A, dtype=np.float32)
    A.data = np.clip(A.data, -60000, 60000)
    for prec in precs:
        p = accspmm.plan(A, precision=prec)
        tf = accspmm.plan(A)
        ell = None
        try:
            ell = BlockedEll(A, bs_ell, prec)
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is reported, not fatal
            print(f"  {name}: Blocked-ELL unavailable: {exc}", file=sys.stderr)
        Ad = torch.from_numpy(A.toarray()).cuda().to(TORCH_DT[prec]) if dense_ok else None
        Acsr = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
                                       torch.from_numpy(A.data), size=A.shape).cuda().to(TORCH_DT[prec])
        Absr = None
        if m % 32 == 0 and k % 32 == 0:
            try:
                Absr = Acsr.to_sparse_bsr((32, 32))
            except Exception as exc:  # noqa: BLE001
                print(f"  {name}: torch BSR unavailable: {exc}", file=sys.stderr)
        for n in ns:
            rng = np.random.default_rng(n)
            Bf = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float32)).cuda()
            Bh = Bf.to(TORCH_DT[prec])
            r = {"matrix": name, "m": m, "k": k, "nnz": int(A.nnz), "n": n, "precision": prec,
                 "density": A.nnz / (m * k), "format": p.format, "block_fill": p.stats["block_fill"]}
            C = p(Bh)
            nref = min(n, 32)
            ref = np.asarray(A.astype(np.float64) @ Bf[:, :nref].double().cpu().numpy())
            r["err_half"] = rel_err(C[:, :nref].double().cpu().numpy(), ref)
            r["err_tf32"] = rel_err(tf(Bf)[:, :nref].double().cpu().numpy(), ref)
            # every path's user-level call, timed in turns (interleaved_ms)
            paths = {"accspmm_ms": lambda: p(Bh), "tf32_ms": lambda: tf(Bf)}
            if Ad is not None:
                paths["cublas_ms"] = lambda: torch.mm(Ad, Bh)
            paths["torch_csr_ms"] = lambda: torch.mm(Acsr, Bh)
            if Absr is not None:
                try:
                    torch.mm(Absr, Bh)
                    paths["torch_bsr_ms"] = lambda: torch.mm(Absr, Bh)
                except Exception as exc:  # noqa: BLE001
                    print(f"  {name}: torch BSR failed: {exc}", file=sys.stderr)
            if ell is not None:
                Mp, Kp = ell.shape
                Bp = torch.zeros(Kp, n, dtype=TORCH_DT[prec], device="cuda")
                Bp[:k] = Bh
                Cp = torch.empty(Mp, n, dtype=TORCH_DT[prec], device="cuda")
                try:
                    run, keep = ell.prepare(Bp, Cp)
                    paths["ell_ms"] = run
                except Exception as exc:  # noqa: BLE001
                    print(f"  {name}: Blocked-ELL failed: {exc}", file=sys.stderr)
            r.update(interleaved_ms(paths, reps))
            for key, q in (("kernel", p), ("tf32_kernel", tf)):  # which kernel each default plan ran at n
                sched = q.stats.get("schedule_by_n", {}).get(n)
                if sched and "kernel" in sched:
                    r[key] = sched["kernel"]
            if "ell_ms" in paths:
                Cp.fill_(float("nan"))  # the answer checked is the one of a launch after the timed ones
                paths["ell_ms"]()
                torch.cuda.synchronize()
                r["ell_padded_blocks"] = ell.padded_blocks
                r["err_ell"] = rel_err(Cp[:m, :nref].double().cpu().numpy(), ref)
                if not r["err_ell"] < 1e-2:  # a wrong answer (NaN: C never written) is no baseline
                    del r["ell_ms"]
                    print(f"  {name}: Blocked-ELL result wrong (error {r['err_ell']:.2g}); not timed", file=sys.stderr)
            Ck = torch.empty_like(C)
            if p._runner is not None:  # BitTCF: the TF32 kernel's runner on half operands
                a, vt = p._runner.args(Bh.data_ptr(), Ck.data_ptr(), n)
                r["accspmm_kernel_ms"] = float(np.median(_cuda.time_tf32(a, vt, reps, None, 0, None)))
                r["variant"] = p.stats["schedule_by_n"][n]["variant"]
            else:
                ws = torch.empty(max(1, p.workspace_floats(n)), dtype=torch.float32, device="cuda")
                args = p.kernel_args(Bh.data_ptr(), Ck.data_ptr(), n, False,
                                     ws.data_ptr() if p.workspace_floats(n) else 0)
                r["accspmm_kernel_ms"] = float(np.median(_cuda.time_half(args, reps, None, 0, None)))
            r["gflops"] = 2.0 * A.nnz * n / (r["accspmm_kernel_ms"] * 1e6)
            bytes_ = (p.stats.get("bsr16_blocks", 0) * 512 + p.stats.get("tc_blocks", 0) * (128 + 48)
                      + 2 * (k * n + m * n))
            r["roofline_ms"] = bytes_ / (hbm_gbs * 1e6)
            r["roofline_fraction"] = r["roofline_ms"] / r["accspmm_kernel_ms"]
            for key in ("cublas_ms", "ell_ms", "torch_bsr_ms", "torch_csr_ms", "tf32_ms"):
                if key in r:
                    r["vs_" + key[:-3]] = r[key] / r["accspmm_ms"]
            rows.append(r)
            print(f"  {name} {prec} n={n}: accspmm {r['accspmm_ms']:.4f} ms (kernel {r['accspmm_kernel_ms']:.4f}), "
                  + ", ".join(f"{key[:-3]} {r[key]:.4f}" for key in ("cublas_ms", "ell_ms", "torch_bsr_ms",
                                                                      "torch_csr_ms", "tf32_ms") if key in r),
                  flush=True)
        p.close()
        tf.close()
    return rows


def table(rows, title):
    cols = ["matrix", "precision", "format", "n", "nnz", "density", "block_fill", "accspmm_ms", "accspmm_kernel_ms", "gflops",
            "roofline_fraction", "cublas_ms", "ell_ms", "torch_bsr_ms", "torch_csr_ms", "tf32_ms", "vs_cublas",
            "vs_ell", "vs_torch_bsr", "vs_torch_csr", "vs_tf32", "err_half", "err_tf32"]
    out = [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def geomean(xs):
    xs = [x for x in xs if x and np.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def main():
    global WARM_MS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--ns", type=int, nargs="*", default=[32, 128, 256, 512])
    ap.add_argument("--real-ns", type=int, nargs="*", default=[128, 512])
    ap.add_argument("--sizes", type=int, nargs="*", default=[8192])
    ap.add_argument("--sparsity", type=float, nargs="*", default=[0.5, 0.7, 0.9, 0.95, 0.99, 0.995])
    ap.add_argument("--bands", type=int, nargs="*", default=[64, 256, 1024, 4096],
                    help="bandwidths of SMaT's band matrices (band_matrix), --band-size square")
    ap.add_argument("--band-size", type=int, default=8192)
    ap.add_argument("--kinds", nargs="*", default=["uniform", "irregular"])
    ap.add_argument("--prec", nargs="*", default=["fp16", "bf16"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--min-nnz", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/raw")
    ap.add_argument("--warm-ms", type=float, default=WARM_MS, help="warm-up calls of each timed path, ms")
    args = ap.parse_args()
    WARM_MS = args.warm_ms
    info = accspmm.device_info()
    gpu = torch.cuda.get_device_name()
    hbm = 3350.0 if "H100" in gpu else 4800.0 if "H200" in gpu else 2000.0  # GB/s, spec sheet
    print("GPU:", gpu, flush=True)
    syn = []
    for size in args.sizes:
        for kind in args.kinds:
            for s in args.sparsity:
                A = block_matrix(size, s, kind)
                syn += run_matrix(f"{kind}32-{size}-{s:g}", A, args.ns, args.prec, args.reps, 32, hbm, size * size <= 1 << 28)
    band = []
    for width in args.bands:
        band += run_matrix(f"band-{args.band_size}-{width}", band_matrix(args.band_size, width), args.ns, args.prec,
                           args.reps, 32, hbm, args.band_size ** 2 <= 1 << 28)
    real = []
    for name, A in datasets.matrices(args.dir, args.only, np.float32) if args.dir else ():
        if A.nnz < args.min_nnz:
            continue
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)  # in every format's range
        real += run_matrix(name, A, args.real_ns, args.prec, args.reps, 16, hbm, A.shape[0] * A.shape[1] <= 1 << 28)
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for label, rows in (("synthetic", syn), ("band", band), ("real", real)):
        for key in ("vs_cublas", "vs_ell", "vs_torch_bsr", "vs_torch_csr", "vs_tf32"):
            summary[f"{label} geomean {key}"] = geomean([r.get(key) for r in rows])
    meta = {"gpu": gpu, "sms": info.get("sm_count"), "date": datetime.date.today().isoformat(),
            "hbm_gbs_assumed": hbm, "args": vars(args)}
    with open(os.path.join(args.out, "half.json"), "w") as fh:
        json.dump({"meta": meta, "synthetic": syn, "band": band, "real": real, "summary": summary}, fh, indent=1)
    md = [f"# FP16/BF16 SpMM ({gpu}, {meta['date']})", "",
          "Times in ms per call (20 back-to-back calls between CUDA events, warm L2, median of the bursts; "
          "accspmm_kernel_ms: the kernel alone, launched from C); vs_X = X's time / accspmm's user-level time.", "",
          table(syn, "Synthetic 32 x 32 block matrices"), "",
          table(band, "Band matrices (SMaT's synthetic benchmark)"), "", table(real, "Real matrices"), "", "## Summary", ""]
    md += [f"- {k}: {v:.3f}" for k, v in summary.items()]
    with open(os.path.join(args.out, "half.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

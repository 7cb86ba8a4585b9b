"""What a user gets from Python (GUIDE §4): accspmm's default call against torch.sparse.mm and
cupyx.scipy.sparse, host cost per call, and a two-layer GCN training step.  One process, one GPU.

    python benchmarks/bench_python.py [DIR] [--ns 32 64 128 256 512] [--calls 20] [--repeat 5]
                                      [--gcn-steps 100] [--hidden 128 256] [--only NAME ...] [--out DIR]

For every Matrix Market file of DIR (default: the bundled matrix), with random normal values:

- **User-level time per call**: 20 back-to-back Python calls between two CUDA events, B already on
  the GPU, median of 5 such runs, for
  ``accspmm.plan(A)(B)`` (default arguments: TF32, reordering, result allocated per call),
  ``torch.sparse.mm(A_csr, B)`` on a CUDA CSR tensor and ``A_cupy @ B`` (cupyx.scipy.sparse), all on
  the same CSR and the same stream.  The first call of each (accspmm's decides and times its
  kernel) is made before timing.
- **Kernel-only**: accspmm's kernel launched from C (``timing.cu``, CUDA events per launch, median
  of 20), and cuSPARSE ``cusparseSpMM`` called directly (best of its CSR algorithms, preprocessing
  outside), so that the user-level speedup over cuSPARSE sits beside the kernel-only one.
- **Correctness**: accspmm's result against torch.sparse.mm's (norm-wise relative error).
- **Host µs per call**: 2,000 calls with no synchronisation (wall clock / 2,000) for the accspmm
  call with and without ``out=`` (torch and CuPy B), ``torch.sparse.mm``, ``cupy @`` and a dense
  ``torch.add`` (with and without ``out=``), on the smallest matrix at N = 32, where the GPU keeps
  up with the host; the breakdown times the plan's C call alone and the bare launch.
- **GCN step** (square matrices, A = D^-1/2 (S + I) D^-1/2 for the symmetrised pattern S, as GCN
  propagates): Z1 = A (X W1), H = relu(Z1), Z2 = A (H W2), logits = Z2 W3,
  cross-entropy, backward through both SpMMs, Adam; hidden width 128 and 256, 64 input
  features, 16 random classes, ``--gcn-steps`` steps after 3 warm-up steps, the same initial
  weights for accspmm (TF32) and torch.sparse.mm (CSR, FP32); time per step (CUDA events) and the
  losses side by side, with the same training run in FP64 (torch.sparse.mm) as the reference that
  both drift from.

Writes ``python.json`` and ``python.md`` into --out and prints the tables last, with the GPU model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cupy as cp  # noqa: E402
import cupyx.scipy.sparse as csp  # noqa: E402
import torch  # noqa: E402

import accspmm  # noqa: E402
from accspmm import _cuda, datasets  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402

ALGS = ["default", "alg1", "alg2", "alg3"]


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def user_ms(fns, calls, repeat):
    """For each fn: median over `repeat` of (time of `calls` back-to-back fn() between CUDA events)
    / calls.  The functions take turns within each repetition, so that a slow spell of the machine
    falls on all of them rather than on one."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    ts = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            s.record()
            for _ in range(calls):
                fn()
            e.record()
            e.synchronize()
            ts[i].append(s.elapsed_time(e) / calls)
    return [float(np.median(t)) for t in ts]


def host_us(fn, calls=2000):
    """Wall-clock µs per call over `calls` calls without synchronisation (after one warm-up)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def cusparse_kernel_ms(csr, B, C, n, reps):
    """Best median of cusparseSpMM's CSR algorithms called directly (preprocessing outside)."""
    best = (math.inf, None)
    for alg in ALGS:
        with accspmm.plan(csr, device="gpu", precision="fp32", cusparse_alg=alg) as p:
            try:
                p._launch(B.data_ptr(), C.data_ptr(), n, None)
            except NotImplementedError:
                continue
            _cuda.time_cusparse(p._cusparse[n], B.data_ptr(), C.data_ptr(), 3, None, 0, None)
            t = float(np.median(_cuda.time_cusparse(p._cusparse[n], B.data_ptr(), C.data_ptr(), reps, None, 0, None)))
            if t < best[0]:
                best = (t, alg)
    return best


def spmm_rows(name, A, ns, calls, repeat):
    csr = as_csr(A).canonicalized()
    m, k = csr.shape
    t0 = time.perf_counter()
    p = accspmm.plan(A, device="gpu")
    plan_s = time.perf_counter() - t0
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape).cuda()
    Ac = csp.csr_matrix(A)
    rows = []
    for n in ns:
        B = torch.randn(k, n, device="cuda", generator=torch.Generator("cuda").manual_seed(n))
        Bc = cp.from_dlpack(B)
        t1 = time.perf_counter()
        C = p(B)  # first call for n: decides and times the kernel
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t1
        ref = torch.sparse.mm(At, B)
        rel = float(torch.linalg.norm(C - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
        rec = {"matrix": name, "m": m, "k": k, "nnz": csr.nnz, "n": n, "plan_s": plan_s, "first_call_s": first_s,
               "rel_err_vs_torch": rel, "ok": bool(torch.isfinite(C).all()) and rel < 1e-3,
               "reorder": p.stats["reorder"]["chosen"]}
        rec["accspmm_ms"], rec["torch_ms"], rec["cupy_ms"] = user_ms(
            [lambda: p(B), lambda: torch.sparse.mm(At, B), lambda: Ac @ Bc], calls, repeat)
        a, v = p._tf32.args(B.data_ptr(), C.data_ptr(), n, None)
        _cuda.time_tf32(a, v, 3, None, 0, None)
        rec["kernel_ms"] = float(np.median(_cuda.time_tf32(a, v, 20, None, 0, None)))
        rec["cusparse_ms"], rec["cusparse_alg"] = cusparse_kernel_ms(csr, B, torch.empty_like(C), n, 20)
        flops = 2.0 * csr.nnz * n
        rec["accspmm_gflops"] = flops / rec["accspmm_ms"] / 1e6
        rec["vs_torch"] = rec["torch_ms"] / rec["accspmm_ms"]
        rec["vs_cupy"] = rec["cupy_ms"] / rec["accspmm_ms"]
        rec["vs_cusparse_user"] = rec["cusparse_ms"] / rec["accspmm_ms"]
        rec["vs_cusparse_kernel"] = rec["cusparse_ms"] / rec["kernel_ms"]
        rows.append(rec)
        print(f"{name:>16} n={n:4d} ours {rec['accspmm_ms'] * 1e3:8.1f} us  torch {rec['torch_ms'] * 1e3:8.1f}  "
              f"cupy {rec['cupy_ms'] * 1e3:8.1f}  kernel {rec['kernel_ms'] * 1e3:8.1f}  cuSPARSE "
              f"{rec['cusparse_ms'] * 1e3:8.1f}  x{rec['vs_torch']:.2f} vs torch  rel {rel:.1e}", flush=True)
        del B, Bc, C, ref
    p.close()
    return rows


def host_costs(A):
    """Host µs per call (module docstring) on matrix A at N = 32."""
    m, k = A.shape
    n = 32
    p = accspmm.plan(A, device="gpu")
    B = torch.randn(k, n, device="cuda")
    out = torch.empty(m, n, device="cuda")
    Bc, outc = cp.from_dlpack(B), cp.from_dlpack(out)
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape).cuda()
    Ac = csp.csr_matrix(A)
    x, y, z = torch.randn(m, n, device="cuda"), torch.randn(m, n, device="cuda"), torch.empty(m, n, device="cuda")
    p(B), p(B, out=out), p(Bc), p(Bc, out=outc)
    fast = p._fast
    a, v = p._tf32.args(B.data_ptr(), out.data_ptr(), n, None)
    op = torch.ops.accspmm.spmm.default
    Bg = B.clone().requires_grad_()

    @torch.library.custom_op("accspmm_bench::spmm", mutates_args=())
    def decorated(B: torch.Tensor, plan: int) -> torch.Tensor:  # the other registration route, timed beside ours
        return p._fast(B, None, True)
    res = {"matrix": f"{m}x{k}, nnz {A.nnz}, N = {n}",
           "accspmm p(B, out=C) torch": host_us(lambda: p(B, out=out)),
           "accspmm p(B) torch": host_us(lambda: p(B)),
           "accspmm p(B, out=C) cupy": host_us(lambda: p(Bc, out=outc)),
           "accspmm p(B) cupy": host_us(lambda: p(Bc)),
           "torch.add(x, y, out=z)": host_us(lambda: torch.add(x, y, out=z)),
           "torch.add(x, y)": host_us(lambda: torch.add(x, y)),
           "torch.sparse.mm(A, B)": host_us(lambda: torch.sparse.mm(At, B)),
           "cupy A @ B": host_us(lambda: Ac @ Bc),
           "breakdown: the C call alone (p._fast(B, out, False))": host_us(lambda: fast(B, out, False)),
           "torch.ops.accspmm.spmm(B, handle) (define/impl op, dispatcher)": host_us(lambda: op(B, p.handle, False)),
           "the same kernel as a @torch.library.custom_op": host_us(lambda: decorated(B, p.handle)),
           "p(B) with B.requires_grad (autograd op, forward only)": host_us(lambda: p(Bg)),
           "breakdown: bare launch (_cuda.tf32_spmm, cached tuples)": host_us(lambda: _cuda.tf32_spmm(a, v, None))}
    torch.cuda.synchronize()
    c, r = p(B), torch.sparse.mm(At, B)
    ref = A.astype(np.float64) @ B.double().cpu().numpy()  # both against float64 on the host
    res["rel_err_vs_fp64"] = {k: float(np.linalg.norm(v.double().cpu().numpy() - ref) / np.linalg.norm(ref))
                              for k, v in (("accspmm", c), ("torch.sparse.mm", r))}
    assert c.data_ptr() != r.data_ptr()
    p.close()
    return res


def gcn_adjacency(A):
    """GCN's propagation matrix D^-1/2 (S + I) D^-1/2, S the symmetrised pattern of A (float32)."""
    S = A.copy()
    S.data[:] = 1
    S = ((S + S.T) > 0).astype(np.float32) + sp.identity(A.shape[0], np.float32, format="csr")
    d = 1 / np.sqrt(np.asarray(S.sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(d.astype(np.float32)) @ S @ sp.diags(d.astype(np.float32)), dtype=np.float32)


def gcn_rows(name, A, hiddens, steps):
    A = gcn_adjacency(A)
    m = A.shape[0]
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape).cuda()
    p = accspmm.plan(A, device="gpu")
    rows = []
    for h in hiddens:
        g = torch.Generator("cuda").manual_seed(h)
        X = torch.randn(m, 64, device="cuda", generator=g)
        labels = torch.randint(0, 16, (m,), device="cuda", generator=g)
        init = [torch.randn(64, h, device="cuda", generator=g) / 8, torch.randn(h, h, device="cuda", generator=g) / h ** 0.5,
                torch.randn(h, 16, device="cuda", generator=g) / h ** 0.5]
        rec = {"matrix": name, "m": m, "nnz": A.nnz, "hidden": h, "steps": steps}
        At64 = At.double()
        for tag, spmm, dt in (("accspmm", lambda B: p(B), torch.float32),
                              ("torch", lambda B: torch.sparse.mm(At, B), torch.float32),
                              ("fp64", lambda B: torch.sparse.mm(At64, B), torch.float64)):
            W = [w.clone().to(dt).requires_grad_() for w in init]
            Xd = X.to(dt)
            opt = torch.optim.Adam(W, lr=1e-2)

            def step():
                opt.zero_grad(set_to_none=True)
                z1 = spmm(Xd @ W[0])
                z2 = spmm(torch.relu(z1) @ W[1])
                loss = torch.nn.functional.cross_entropy(z2 @ W[2], labels)
                loss.backward()
                opt.step()
                return loss

            losses = [step().detach() for _ in range(3)]  # warm-up (first calls, transposed plan)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            s.record()
            for _ in range(steps):
                losses.append(step().detach())
            e.record()
            e.synchronize()
            rec[f"{tag}_step_ms"] = s.elapsed_time(e) / steps
            ls = torch.stack(losses).cpu().numpy()
            rec[f"{tag}_loss"] = [float(ls[0]), float(ls[len(ls) // 2]), float(ls[-1])]
        rec["speedup"] = rec["torch_step_ms"] / rec["accspmm_step_ms"]
        rel = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(rec["accspmm_loss"], rec["torch_loss"])]
        rec["loss_rel_diff_first"], rec["loss_rel_diff"] = rel[0], max(rel)
        for tag in ("accspmm", "torch"):  # how far each FP32/TF32 run ends from the FP64 run
            rec[f"{tag}_vs_fp64_last"] = abs(rec[f"{tag}_loss"][-1] - rec["fp64_loss"][-1]) / abs(rec["fp64_loss"][-1])
        rows.append(rec)
        print(f"GCN {name:>16} h={h:3d} accspmm {rec['accspmm_step_ms']:.3f} ms/step  torch "
              f"{rec['torch_step_ms']:.3f}  x{rec['speedup']:.2f}  losses {rec['accspmm_loss']} vs {rec['torch_loss']}",
              flush=True)
    p.close()
    return rows


def markdown(gpu, spmm, host, gcn, args):
    out = [f"# accspmm from Python ({gpu}, {datetime.date.today()})", "",
           f"Command: `python benchmarks/bench_python.py {' '.join(sys.argv[1:])}`. torch {torch.__version__}, "
           f"cupy {cp.__version__}. Times per call: {args.calls} back-to-back calls between CUDA events, "
           f"median of {args.repeat}. Speedup = their time / ours.", "",
           "## SpMM per call (µs)", "",
           "| matrix | nnz | N | accspmm p(B) | torch.sparse.mm | cupy @ | kernel only | cuSPARSE kernel | vs torch | vs cupy "
           "| vs cuSPARSE (user) | vs cuSPARSE (kernel) | ok |", "|" + "---|" * 13]
    for r in spmm:
        out.append(f"| {r['matrix']} | {r['nnz']} | {r['n']} | {r['accspmm_ms'] * 1e3:.1f} | {r['torch_ms'] * 1e3:.1f} | "
                   f"{r['cupy_ms'] * 1e3:.1f} | {r['kernel_ms'] * 1e3:.1f} | {r['cusparse_ms'] * 1e3:.1f} | "
                   f"{r['vs_torch']:.2f} | {r['vs_cupy']:.2f} | {r['vs_cusparse_user']:.2f} | {r['vs_cusparse_kernel']:.2f} | "
                   f"{'yes' if r['ok'] else 'NO'} |")
    big = [r for r in spmm if r["nnz"] >= 100_000 and r["n"] >= 128]
    out += ["", "## Summary", "",
            f"- vs torch.sparse.mm: geomean {geomean([r['vs_torch'] for r in spmm]):.2f}x over {len(spmm)} runs, "
            f"min {min(r['vs_torch'] for r in spmm):.2f}x, runs below 1.0x: {sum(r['vs_torch'] < 1 for r in spmm)}",
            f"- vs cupy: geomean {geomean([r['vs_cupy'] for r in spmm]):.2f}x, min {min(r['vs_cupy'] for r in spmm):.2f}x",
            f"- vs cuSPARSE, matrices >= 100k nnz, N = 128-512 ({len(big)} runs): user-level geomean "
            f"{geomean([r['vs_cusparse_user'] for r in big]):.2f}x, kernel-only "
            f"{geomean([r['vs_cusparse_kernel'] for r in big]):.2f}x; worst ratio user/kernel "
            f"{min((r['vs_cusparse_user'] / r['vs_cusparse_kernel'] for r in big), default=float('nan')):.3f}",
            f"- wrong runs: {sum(not r['ok'] for r in spmm)} of {len(spmm)}"]
    if host:
        out += ["", f"## Host µs per call (2,000 calls, no synchronisation; {host['matrix']})", "", "| call | µs |", "|---|---|"]
        out += [f"| {k} | {v:.2f} |" for k, v in host.items() if k not in ("matrix", "rel_err_vs_fp64")]
    if gcn:
        out += ["", "## GCN training step (ms per step; losses at the first, middle and last step)", "",
                "| graph | nnz | hidden | accspmm | torch.sparse.mm | speedup | accspmm losses (TF32) | torch losses (FP32) "
                "| FP64 losses |", "|---|---|---|---|---|---|---|---|---|"]
        for r in gcn:
            out.append(f"| {r['matrix']} | {r['nnz']} | {r['hidden']} | {r['accspmm_step_ms']:.3f} | {r['torch_step_ms']:.3f} | "
                       f"{r['speedup']:.2f} | {', '.join(f'{x:.5f}' for x in r['accspmm_loss'])} | "
                       f"{', '.join(f'{x:.5f}' for x in r['torch_loss'])} | {', '.join(f'{x:.5f}' for x in r['fp64_loss'])} |")
        big = [r for r in gcn if r["nnz"] >= 100_000]
        out += ["", f"GCN speedup geomean: {geomean([r['speedup'] for r in gcn]):.2f}x over {len(gcn)} runs; "
                f"graphs >= 100k nnz: {geomean([r['speedup'] for r in big]):.2f}x over {len(big)}; "
                f"loss difference (relative): at the first step (same weights: the forward's TF32 rounding) "
                f"at most {max(r['loss_rel_diff_first'] for r in gcn):.1e}; over the first, middle and last "
                f"step at most {max(r['loss_rel_diff'] for r in gcn):.1e}. Last-step loss against the same "
                f"training in FP64 (median, max relative): accspmm "
                f"{np.median([r['accspmm_vs_fp64_last'] for r in gcn]):.1e}, {max(r['accspmm_vs_fp64_last'] for r in gcn):.1e}; "
                f"torch.sparse.mm FP32 {np.median([r['torch_vs_fp64_last'] for r in gcn]):.1e}, "
                f"{max(r['torch_vs_fp64_last'] for r in gcn):.1e}"]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--ns", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gcn-steps", type=int, default=100)
    ap.add_argument("--hidden", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--skip", nargs="+", default=[], help="parts to skip: spmm host gcn")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "raw"))
    args = ap.parse_args()
    files = datasets.matrix_files(args.dir) if args.dir else [None]
    mats = []
    for f in files:
        name = datasets.matrix_name(f) if f else "wiki-Vote (bundled)"
        if args.only and not any(o in name for o in args.only):
            continue
        A = datasets.load_matrix(f, np.float32) if f else datasets.load_bundled(np.float32)
        A = A.tocsr()
        A.sum_duplicates()
        A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)
        mats.append((name, A))
    gpu = torch.cuda.get_device_name()
    spmm, gcn, host = [], [], None
    if "host" not in args.skip:
        host = host_costs(min(mats, key=lambda t: t[1].nnz)[1])
        print(json.dumps(host, indent=1), flush=True)
    for name, A in mats:
        if "spmm" not in args.skip:
            spmm += spmm_rows(name, A, args.ns, args.calls, args.repeat)
        if "gcn" not in args.skip and A.shape[0] == A.shape[1]:
            gcn += gcn_rows(name, A, args.hidden, args.gcn_steps)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "python.json"), "w") as f:
        json.dump({"gpu": gpu, "torch": torch.__version__, "cupy": cp.__version__, "argv": sys.argv[1:],
                   "spmm": spmm, "host_us": host, "gcn": gcn}, f, indent=1)
    md = markdown(gpu, spmm, host, gcn, args) if spmm else ""
    with open(os.path.join(args.out, "python.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()

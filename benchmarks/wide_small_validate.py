"""The wide CSR kernel's one-wave regime above n = 32 (accspmm._tf32.CSR_WIDE_SMALL_*), checked on matrices the rule
was not set on: 15 seeded small matrices (uniform and power-law rows, a hub, kNN, band, grid, bipartite, tall) and
the real matrices of DIR, TF32 and FP16 BitTCF plans, at n = 40-256.  Per case the default plan's kernel, both
kernels forced (``tuning={"wide": ...}``), kernel only (``_cuda.time_tf32``, the minimum of two medians of 20
launches), and the three results compared bit for bit (integer data), the small ones against scipy too:

    python benchmarks/wide_small_validate.py DIR        # NS="40 64 128" to choose the widths; OUT=dir for the JSON
"""
import json, math, os, sys
import numpy as np, scipy.sparse as sp, torch
sys.path.insert(0, "benchmarks")
import accspmm
from accspmm import datasets
from bench_adversarial import kernel_ms

def er(m, k, d, seed):
    rng = np.random.default_rng(seed); rows = np.repeat(np.arange(m), d)
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, rng.integers(0, k, rows.size))), shape=(m, k))
def chunglu(m, avg, cap, seed):
    rng = np.random.default_rng(seed); w = rng.pareto(1.8, m) + 1; w = np.minimum(w / w.mean() * avg, cap)
    lens = rng.poisson(w).astype(np.int64); rows = np.repeat(np.arange(m), lens)
    p = w / w.sum(); cols = rng.choice(m, rows.size, p=p)
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(m, m))
def hub(m, d, h, seed):
    A = er(m, m, d, seed).tocoo(); rng = np.random.default_rng(seed + 1)
    rows = np.concatenate([A.row, np.full(h, 7)]); cols = np.concatenate([A.col, rng.integers(0, m, h)])
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(m, m))
def band(m, bw):
    return sp.diags([np.ones(m - abs(o), np.float32) for o in range(-bw, bw + 1)], list(range(-bw, bw + 1)), format="csr")
def grid(s):
    i = sp.eye(s, dtype=np.float32); t = sp.diags([np.ones(s - 1), np.ones(s), np.ones(s - 1)], [-1, 0, 1])
    return sp.csr_matrix(sp.kron(i, t) + sp.kron(t, i), dtype=np.float32)
def knn(m, kk, seed):
    rng = np.random.default_rng(seed); pts = rng.random((m, 2))
    from scipy.spatial import cKDTree
    _, idx = cKDTree(pts).query(pts, kk); rows = np.repeat(np.arange(m), kk)
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, idx.ravel())), shape=(m, m))
fresh = [("v_er5k_d8", lambda: er(5000, 5000, 8, 7001)), ("v_er12k_d30", lambda: er(12000, 12000, 30, 7002)),
         ("v_cl8k_20", lambda: chunglu(8000, 20, 3000, 7003)), ("v_cl6k_hub", lambda: chunglu(6000, 10, 6000, 7004)),
         ("v_knn8k_10", lambda: knn(8000, 10, 7005)), ("v_band8k_16", lambda: band(8000, 16)),
         ("v_ui4k_50k", lambda: er(4000, 50000, 30, 7006)), ("v_er2k_d200", lambda: er(2000, 2000, 200, 7007)),
         ("v_er500_d4", lambda: er(500, 500, 4, 7008)), ("v_er16k_d5", lambda: er(16000, 16000, 5, 7009)),
         ("v_grid90", lambda: grid(90)), ("v_cl3k_60", lambda: chunglu(3000, 60, 2000, 7010)),
         ("v_er8k_d3", lambda: er(8000, 8000, 3, 7011)), ("v_tall20k_3", lambda: er(20000, 3, 2, 7012)),
         ("v_hub6k", lambda: hub(6000, 6, 5000, 7013))]
real = [(datasets.matrix_name(f), lambda f=f: datasets.load_matrix(f, np.float32).tocsr()) for f in datasets.matrix_files(sys.argv[1])]
ns = [int(x) for x in os.environ.get("NS", "40 48 64 100 128 200 256").split()]
rows = []; bad = []
print("GPU:", torch.cuda.get_device_name(), flush=True)
for kind, lst in (("fresh", fresh), ("real", real)):
    for name, make in lst:
        A = make().tocsr(); A.sum_duplicates()
        A.data = np.random.default_rng(1).integers(1, 5, A.nnz).astype(np.float32)
        check = A.nnz <= 3_000_000 and kind == "fresh"
        for prec in ("tf32", "fp16"):
            kw = {} if prec == "tf32" else {"precision": prec, "format": "bittcf"}
            dt = torch.float32 if prec == "tf32" else torch.float16
            with accspmm.plan(A, device="gpu", **kw) as d, accspmm.plan(A, device="gpu", tuning={"wide": "bittcf"}, **kw) as t, \
                    accspmm.plan(A, device="gpu", tuning={"wide": "csr"}, **kw) as c:
                line = f"{name:14s} {prec}"
                for n in ns:
                    Bn = np.random.default_rng(n).integers(-3, 4, (A.shape[1], n)).astype(np.float32)
                    B = torch.from_numpy(Bn).cuda().to(dt)
                    Cd, Ct, Cc = d(B), t(B), c(B)
                    torch.cuda.synchronize()
                    same = torch.equal(Cd, Ct) and torch.equal(Cd, Cc)
                    if check:
                        same = same and np.array_equal(Cd.float().cpu().numpy(), (A @ Bn).astype(np.float32) if prec == "tf32" else (A.astype(np.float64) @ Bn.astype(np.float64)).astype(np.float16).astype(np.float32))
                    if not same: bad.append((name, prec, n))
                    kern = d.stats["schedule_by_n"][n]["kernel"]
                    td = min(kernel_ms(d, B, Cd, n, 20) for _ in range(2)); tt = min(kernel_ms(t, B, Ct, n, 20) for _ in range(2))
                    tc = min(kernel_ms(c, B, Cc, n, 20) for _ in range(2))
                    rows.append({"matrix": name, "kind": kind, "prec": prec, "n": n, "m": A.shape[0], "nnz": int(A.nnz),
                                 "kernel": kern, "default": td, "tc": tt, "csr": tc, "same": same})
                    line += f" {n}:{tt*1e3:.1f}/{td*1e3:.1f}{'c' if 'csr' in kern else ' '}/{tc*1e3:.1f}"
                print(line, flush=True)
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
for kind in ("fresh", "real"):
    for prec in ("tf32", "fp16"):
        r = [x for x in rows if x["kind"] == kind and x["prec"] == prec]
        on = [x for x in r if "csr" in x["kernel"]]
        print(f"{kind} {prec}: default/TC {g([x['tc']/x['default'] for x in r]):.3f} over {len(r)}; CSR taken {len(on)} "
              f"at {g([x['tc']/x['default'] for x in on]):.3f} (worst {min([x['tc']/x['default'] for x in on], default=0):.2f}); "
              f"oracle {g([x['tc']/min(x['tc'], x['csr']) for x in r]):.3f}; missed >1.1x: "
              f"{[(x['matrix'], x['n'], round(x['tc']/x['csr'], 2)) for x in r if 'csr' not in x['kernel'] and x['tc'] > 1.1 * x['csr']]}")
print("mismatches:", bad)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "val.json"), "w") as fh:
    json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows, "bad": bad}, fh)

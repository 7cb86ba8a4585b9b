"""The wide CSR kernel's one-wave regime above n = 32 (accspmm._tf32.CSR_WIDE_SMALL_*), checked on matrices the rule
was not set on: 15 seeded small matrices (uniform and power-law rows, a hub, kNN, band, grid, bipartite, tall) and
the real matrices of DIR, TF32 and FP16 BitTCF plans, at n = 40-256.  Per case the default plan's kernel, both
kernels forced (``tuning={"wide": ...}``), kernel only (``_cuda.time_tf32``, the minimum of two medians of 20
launches), and the three results compared bit for bit (integer data), the small ones against scipy too:

    python benchmarks/wide_small_validate.py DIR        # NS="40 64 128" to choose the widths; OUT=dir for the JSON

``SET=rows1`` or ``SET=rows2`` replaces the 15 fresh matrices with the two held-out sets of the regime beyond one
wave (``CSR_WIDE_ROWS_*``: 8 seeded matrices each of 14-60 entries a row on 10,000-60,000 rows, two of them
controls outside it; ``results/h100_wide_csr_rows_validation_set{1,2}.txt`` ran them with NS="48 64 128 256" and
DIR holding six real matrices, or an empty DIR).
"""

import json
import math
import os
import sys

import numpy as np
import scipy.sparse as sp
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import accspmm  # noqa: E402
from accspmm import datasets  # noqa: E402
from bench_adversarial import kernel_ms  # noqa: E402
from structures import _band, _grid, _uniform  # noqa: E402  (the same patterns as structures' matrices)


def _uniform_seeded(m, k, per_row, seed):
    return _uniform(m, k, per_row, np.random.default_rng(seed))


def _chung_lu_capped(m, mean, cap, seed):
    """Pareto row weights capped at ``cap`` entries, columns by the same weights (structures._chung_lu has no cap)."""
    rng = np.random.default_rng(seed)
    w = rng.pareto(1.8, m) + 1
    w = np.minimum(w / w.mean() * mean, cap)
    rows = np.repeat(np.arange(m), rng.poisson(w).astype(np.int64))
    cols = rng.choice(m, rows.size, p=w / w.sum())
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(m, m))


def _hub(m, per_row, hub, seed):
    """Uniform rows and row 7 with ``hub`` more random columns."""
    A = _uniform_seeded(m, m, per_row, seed).tocoo()
    rng = np.random.default_rng(seed + 1)
    rows = np.concatenate([A.row, np.full(hub, 7)])
    cols = np.concatenate([A.col, rng.integers(0, m, hub)])
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(m, m))


def _knn_exact(m, k, seed):
    """The exact k nearest neighbours of random points in the unit square (structures._knn draws near a sort)."""
    from scipy.spatial import cKDTree

    pts = np.random.default_rng(seed).random((m, 2))
    _, idx = cKDTree(pts).query(pts, k)
    rows = np.repeat(np.arange(m), k)
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, idx.ravel())), shape=(m, m))


FRESH = [("v_er5k_d8", lambda: _uniform_seeded(5000, 5000, 8, 7001)),
         ("v_er12k_d30", lambda: _uniform_seeded(12000, 12000, 30, 7002)),
         ("v_cl8k_20", lambda: _chung_lu_capped(8000, 20, 3000, 7003)),
         ("v_cl6k_hub", lambda: _chung_lu_capped(6000, 10, 6000, 7004)),
         ("v_knn8k_10", lambda: _knn_exact(8000, 10, 7005)),
         ("v_band8k_16", lambda: _band(8000, 16, np.random.default_rng(0))),
         ("v_ui4k_50k", lambda: _uniform_seeded(4000, 50000, 30, 7006)),
         ("v_er2k_d200", lambda: _uniform_seeded(2000, 2000, 200, 7007)),
         ("v_er500_d4", lambda: _uniform_seeded(500, 500, 4, 7008)),
         ("v_er16k_d5", lambda: _uniform_seeded(16000, 16000, 5, 7009)),
         ("v_grid90", lambda: _grid(90, np.random.default_rng(0))),
         ("v_cl3k_60", lambda: _chung_lu_capped(3000, 60, 2000, 7010)),
         ("v_er8k_d3", lambda: _uniform_seeded(8000, 8000, 3, 7011)),
         ("v_tall20k_3", lambda: _uniform_seeded(20000, 3, 2, 7012)),
         ("v_hub6k", lambda: _hub(6000, 6, 5000, 7013))]

ROWS1 = [("w_er10k_d20", lambda: _uniform_seeded(10000, 10000, 20, 8101)),
         ("w_er30k_d16", lambda: _uniform_seeded(30000, 30000, 16, 8102)),
         ("w_er45k_d20", lambda: _uniform_seeded(45000, 45000, 20, 8103)),
         ("w_cl20k_30", lambda: _chung_lu_capped(20000, 30, 3000, 8104)),
         ("w_cl40k_16", lambda: _chung_lu_capped(40000, 16, 2000, 8105)),
         ("w_knn30k_20", lambda: _knn_exact(30000, 20, 8106)),
         ("w_ui15k_100k", lambda: _uniform_seeded(15000, 100000, 40, 8107)),
         ("w_cl25k_40", lambda: _chung_lu_capped(25000, 40, 4000, 8108)),
         ("c_er60k_d12", lambda: _uniform_seeded(60000, 60000, 12, 8109)),  # controls: 12 a row, 1.5M nonzeros
         ("c_er25k_d60", lambda: _uniform_seeded(25000, 25000, 60, 8110))]

ROWS2 = [("x_er12k_d24", lambda: _uniform_seeded(12000, 12000, 24, 8201)),
         ("x_er35k_d14", lambda: _uniform_seeded(35000, 35000, 14, 8202)),
         ("x_cl30k_20", lambda: _chung_lu_capped(30000, 20, 3000, 8203)),
         ("x_knn20k_16", lambda: _knn_exact(20000, 16, 8204)),
         ("x_ui20k_60k", lambda: _uniform_seeded(20000, 60000, 30, 8205)),
         ("x_ui10k_200k", lambda: _uniform_seeded(10000, 200000, 50, 8206)),
         ("x_er50k_d18", lambda: _uniform_seeded(50000, 50000, 18, 8207)),
         ("x_cl15k_50", lambda: _chung_lu_capped(15000, 50, 4000, 8208))]


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def reference(A, Bn, prec):
    """scipy's product, rounded as the plan's output is (float32, or FP16 once from the exact sum)."""
    if prec == "tf32":
        return (A @ Bn).astype(np.float32)
    return (A.astype(np.float64) @ Bn.astype(np.float64)).astype(np.float16).astype(np.float32)


def run_case(name, kind, A, ns, rows, bad):
    check = A.nnz <= 3_000_000 and kind == "fresh"
    for prec in ("tf32", "fp16"):
        kw = {} if prec == "tf32" else {"precision": prec, "format": "bittcf"}
        dt = torch.float32 if prec == "tf32" else torch.float16
        with accspmm.plan(A, device="gpu", **kw) as d, \
                accspmm.plan(A, device="gpu", tuning={"wide": "bittcf"}, **kw) as t, \
                accspmm.plan(A, device="gpu", tuning={"wide": "csr"}, **kw) as c:
            line = f"{name:14s} {prec}"
            for n in ns:
                Bn = np.random.default_rng(n).integers(-3, 4, (A.shape[1], n)).astype(np.float32)
                B = torch.from_numpy(Bn).cuda().to(dt)
                Cd, Ct, Cc = d(B), t(B), c(B)
                torch.cuda.synchronize()
                same = torch.equal(Cd, Ct) and torch.equal(Cd, Cc)
                if check:
                    same = same and np.array_equal(Cd.float().cpu().numpy(), reference(A, Bn, prec))
                if not same:
                    bad.append((name, prec, n))
                kern = d.stats["schedule_by_n"][n]["kernel"]
                td, tt, tc = (min(kernel_ms(p, B, C, n, 20) for _ in range(2)) for p, C in ((d, Cd), (t, Ct), (c, Cc)))
                rows.append({"matrix": name, "kind": kind, "prec": prec, "n": n, "m": A.shape[0], "nnz": int(A.nnz),
                             "kernel": kern, "default": td, "tc": tt, "csr": tc, "same": same})
                line += f" {n}:{tt * 1e3:.1f}/{td * 1e3:.1f}{'c' if 'csr' in kern else ' '}/{tc * 1e3:.1f}"
            print(line, flush=True)


def main():
    ns = [int(x) for x in os.environ.get("NS", "40 48 64 100 128 200 256").split()]
    real = [(datasets.matrix_name(f), lambda f=f: datasets.load_matrix(f, np.float32).tocsr())
            for f in datasets.matrix_files(sys.argv[1])]
    rows, bad = [], []
    print("GPU:", torch.cuda.get_device_name(), flush=True)
    fresh = {"small": FRESH, "rows1": ROWS1, "rows2": ROWS2}[os.environ.get("SET", "small")]
    for kind, cases in (("fresh", fresh), ("real", real)):
        for name, make in cases:
            A = make().tocsr()
            A.sum_duplicates()
            A.data = np.random.default_rng(1).integers(1, 5, A.nnz).astype(np.float32)
            run_case(name, kind, A, ns, rows, bad)
    for kind in ("fresh", "real"):
        for prec in ("tf32", "fp16"):
            r = [x for x in rows if x["kind"] == kind and x["prec"] == prec]
            on = [x for x in r if "csr" in x["kernel"]]
            missed = [(x["matrix"], x["n"], round(x["tc"] / x["csr"], 2)) for x in r
                      if "csr" not in x["kernel"] and x["tc"] > 1.1 * x["csr"]]
            print(f"{kind} {prec}: default/TC {geomean([x['tc'] / x['default'] for x in r]):.3f} over {len(r)}; CSR "
                  f"taken {len(on)} at {geomean([x['tc'] / x['default'] for x in on]):.3f} (worst "
                  f"{min([x['tc'] / x['default'] for x in on], default=0):.2f}); oracle "
                  f"{geomean([x['tc'] / min(x['tc'], x['csr']) for x in r]):.3f}; missed >1.1x: {missed}")
    print("mismatches:", bad)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "val.json"), "w") as fh:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows, "bad": bad}, fh)


if __name__ == "__main__":
    main()

"""Small GPU workload for compute-sanitizer (run by benchmarks/sanitize_gpu.sh): the TF32 kernel
with identity, packed, grouped and split schedules (GROUP and SPLIT tasks reduce through shared
memory; window 5 is a GROUP of 2 warps at cap 32, a multi-part SPLIT at caps 2 and 4), every slice
width, register and cp.async-staged pipelines, several depths, both grid orders, N tails (4-byte copy path), empty windows, and the
cuSPARSE path; exits 1 on any wrong result."""

import numpy as np
import scipy.sparse as sp

import accspmm

rng = np.random.default_rng(0)
d = (rng.random((45, 300)) < 0.05) * rng.integers(-8, 9, size=(45, 300))
d[8:24] = 0  # empty windows
d[40] = rng.integers(1, 9, size=300)  # long row -> window 5 has 38 blocks: split at cap 2..32
A = sp.csr_matrix(d.astype(np.float32))
ok = True
configs = [{"cap": 0}, {"cap": 2}, {"cap": 32, "depth": 4}, {"cap": 2, "slice_s": 1},
           {"cap": 4, "slice_major": 1, "cache_l1": 0},
           {"cap": 0, "staged": 1}, {"cap": 2, "staged": 1, "depth": 3}, {"cap": 32, "staged": 1, "slice_s": 1}]
for n in (1, 5, 32, 37, 64, 130):
    B = rng.integers(-8, 9, size=(300, n)).astype(np.float32)
    ref = A @ B
    for tuning in configs:
        C = accspmm.plan(A, device="gpu", reorder="none", tuning=tuning)(B)
        ok &= bool(np.array_equal(C, ref))
    C = accspmm.plan(A, device="gpu")(B)  # defaults: reordering and the cost model
    ok &= bool(np.array_equal(C, ref))
    C = accspmm.spmm(A, B, device="gpu", precision="fp32")
    ok &= bool(np.array_equal(C, ref))
print("sanitize workload:", "OK" if ok else "WRONG")
raise SystemExit(0 if ok else 1)

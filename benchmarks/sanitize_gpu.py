"""Small GPU workload for compute-sanitizer (run by benchmarks/sanitize_gpu.sh): TF32 kernel with
both schedules, N tails, empty windows, a split long window, and the cuSPARSE path; exits 1 on
any wrong result."""

import numpy as np
import scipy.sparse as sp

import accspmm

rng = np.random.default_rng(0)
d = (rng.random((45, 300)) < 0.05) * rng.integers(-8, 9, size=(45, 300))
d[8:24] = 0  # empty windows
d[40] = rng.integers(1, 9, size=300)  # long row -> window 5 has 38 blocks, split at 32
A = sp.csr_matrix(d.astype(np.float32))
ok = True
for n in (1, 5, 32, 37, 64, 130):
    B = rng.integers(-8, 9, size=(300, n)).astype(np.float32)
    ref = A @ B
    for bal in (False, True):
        C = accspmm.plan(A, device="gpu", balance=bal)(B)
        ok &= bool(np.array_equal(C, ref))
    C = accspmm.spmm(A, B, device="gpu", precision="fp32")
    ok &= bool(np.array_equal(C, ref))
print("sanitize workload:", "OK" if ok else "WRONG")
raise SystemExit(0 if ok else 1)

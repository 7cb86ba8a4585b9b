"""GPU workload for compute-sanitizer (``bash benchmarks/sanitize_gpu.sh benchmarks/sanitize_staging.py``):
the GPU BitTCF build's upload through the pinned staging chunks (cuda/staging.cu; the 700k-nnz hub
matrix fills two 4 MiB chunks, arrays cut across them) and its deferred end (a plan closed before
any call, a first call on a non-blocking torch stream that must wait for the build), on a hub and a
tall matrix, integer values, exact against scipy.  Exits non-zero on a wrong result."""

import numpy as np
import torch

import accspmm
from accspmm import datasets

for kind, nnz in (("hub", 700_000), ("tall3", 50_000)):
    A = datasets.adversarial(kind, nnz)
    rng = np.random.default_rng(0)
    A.data = rng.integers(-4, 5, A.nnz).astype(np.float32)
    B = rng.integers(-4, 5, (A.shape[1], 24)).astype(np.float32)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    accspmm.plan(A, device="gpu").close()  # a deferred build never waited for
    p = accspmm.plan(A, device="gpu")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        C = p(torch.from_numpy(B).cuda())
    s.synchronize()
    assert np.array_equal(C.cpu().numpy(), ref), kind
    p.close()
print("staging workload: OK")

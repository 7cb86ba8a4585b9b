"""Small GPU SpGEMM workload for compute-sanitizer (`bash benchmarks/sanitize_gpu.sh
benchmarks/sanitize_spgemm.py`): the tile algorithm (both numeric paths and the model, one and
several chunks, kept and re-sorted pairs) and the row algorithm (hashed rows, row groups, large rows dense in
shared memory and sorted in batches, tiny rows a warp each with 32- and 64-bit keys, a canonicalised
operand, a one-shot product's hashed rows summed in the symbolic pass), CuPy and scipy operands,
duplicates, NaN/inf, exact cancellations (the compaction), dense 8x8 tiles, empty rows and
operands, a hub row.  Exits 1 on any wrong result."""

import os

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np
import scipy.sparse as sp

import accspmm

rng = np.random.default_rng(0)
ok = True


def check(C, R, what, nan=False):
    global ok
    R = sp.csr_matrix(R)
    R.sum_duplicates()
    R.eliminate_zeros()
    R.sort_indices()
    C = C.get() if hasattr(C, "get") else C
    good = (C.shape == R.shape and np.array_equal(C.indptr, R.indptr) and np.array_equal(C.indices, R.indices)
            and np.array_equal(C.data, R.data.astype(C.dtype), equal_nan=nan))
    if not good:
        print("WRONG:", what)
    ok &= good


def ints(m, k, d, seed, low=-8, high=9):
    M = sp.random(m, k, density=d, format="csr", random_state=seed)
    M.data = np.random.default_rng(seed).integers(low, high, M.nnz).astype(np.float64)
    return M


A, B = ints(90, 70, 0.1, 1), ints(70, 85, 0.1, 2)
A[5] = 0
A = sp.csr_matrix(A)
A[40, :] = np.arange(70) % 5 + 1  # a hub row
A = sp.csr_matrix(A)
for path in ("model", "tensor", "scalar"):
    for chunk, keep in ((0, True), (9, True), (0, False)):
        with accspmm.spgemm_plan(A, B, device="gpu", algorithm="tiles", path=path, chunk_pairs=chunk,
                                 keep_pairs=keep) as p:
            check(p(), A @ B, f"{path} chunk {chunk} keep {keep}")
            check(p(A.data * 2), (A * 2) @ B, f"{path} chunk {chunk} reuse")
# large rows: dense in shared memory (n up to about 24,000 on sm_90; at 20000 more pattern words than
# threads), sorted in batches past that; B's row 5 longer than a warp's reach (a warp's column range)
for n in (300, 20000, 30000):
    L = ints(40, 1500, 0.005, 8)
    L = L.tolil()
    L[7, :] = 1
    L[30, :] = 2
    L = sp.csr_matrix(L)
    R = ints(1500, n, min(1.0, 5 / n * 10), 9).tolil()
    R[5, np.random.default_rng(n).choice(n, min(n, 1200), replace=False)] = 3
    R = sp.csr_matrix(R)
    with accspmm.spgemm_plan(L, R, device="gpu", algorithm="rows") as p:
        check(p(), L @ R, f"rows large n={n}")
        check(p(L.data * 3), (L * 3) @ R, f"rows large n={n} reuse")
check(accspmm.spgemm(A, B, device="gpu"), A @ B, "auto")
T = sp.kron(sp.identity(6), np.ones((8, 8)), format="csr") + ints(48, 48, 0.05, 3)
T = sp.csr_matrix(T)
T.data = rng.integers(-3, 4, T.nnz).astype(np.float64)
Tg = csp.csr_matrix(T.astype(np.float32))
D = sp.csr_matrix((np.array([1.0, 2, 3, -4]), np.array([3, 1, 3, 0]), np.array([0, 3, 3, 4])), shape=(3, 4))
Bx = B.copy()
Bx.data[::5] = np.inf
Bx.data[2::7] = np.nan
M = ints(60, 60, 0.1, 5, 1, 3)
P, Q = sp.hstack([M, -M, sp.identity(60)]).tocsr(), sp.vstack([M, M, M]).tocsr()
for algorithm in ("tiles", "rows", "rows-sorted"):  # rows: small rows hashed; rows-sorted: in row groups
    def spgemm(X, Y, **kw):
        kw.update({"algorithm": "rows", "row_hash": False} if algorithm == "rows-sorted" else {"algorithm": algorithm})
        with accspmm.spgemm_plan(X, Y, device="gpu", **kw) as p:
            return p()

    check(spgemm(T, T), T @ T, f"{algorithm} dense tiles")
    check(spgemm(Tg, Tg), (T @ T).astype(np.float32), f"{algorithm} cupy")
    check(spgemm(D, ints(4, 9, 0.5, 4)), sp.csr_matrix(D) @ ints(4, 9, 0.5, 4), f"{algorithm} duplicates")
    check(spgemm(ints(9, 4, 0.5, 4), D.T.tocsr()), ints(9, 4, 0.5, 4) @ sp.csr_matrix(D).T, f"{algorithm} unsorted B")
    with np.errstate(invalid="ignore"):
        check(spgemm(A, Bx), A @ Bx, f"{algorithm} inf/NaN", nan=True)
    check(spgemm(P, Q), P @ Q, f"{algorithm} cancellations")
    check(spgemm(sp.csr_matrix((20, 70)), B), sp.csr_matrix((20, 85)), f"{algorithm} empty A")
    check(spgemm(ints(500, 2, 0.6, 6), ints(2, 300, 0.6, 7)), ints(500, 2, 0.6, 6) @ ints(2, 300, 0.6, 7),
          f"{algorithm} outer product")
S = ints(400, 400, 0.008, 11)  # tiny rows (about 10 products): a warp per row
W = sp.csr_matrix((S.data, (S.indices.astype(np.int64) * 400_000) % ((1 << 27) + 5), S.indptr),
                  shape=(400, (1 << 27) + 5))  # columns past 2^27: the tiny rows' 64-bit keys
for algorithm in ("rows", "auto"):
    with accspmm.spgemm_plan(S, S, device="gpu", algorithm=algorithm) as p:
        check(p(), S @ S, f"tiny rows {algorithm}")
        check(p(S.data * 3), (S * 3) @ (S * 3), f"tiny rows {algorithm} reuse")  # A.A: new values for both
uniq = np.unique(W.indices)
Wc = sp.csr_matrix((W.data, np.searchsorted(uniq, W.indices), W.indptr), shape=(400, uniq.size))
Rw = sp.csr_matrix(S @ Wc)
Rw.sum_duplicates()
Rw = sp.csr_matrix((Rw.data, uniq[Rw.indices], Rw.indptr), shape=W.shape)  # scipy's S @ W without an n-wide mask
with accspmm.spgemm_plan(S, W, device="gpu", algorithm="rows") as p:
    check(p(), Rw, "tiny rows, 64-bit keys")
# a one-shot product whose hashed rows are summed in the symbolic pass (over 2^19 candidates' products:
# kron(2-D Poisson, 2x2 ones), rows of ~100 products), all of them and then only those that fit in 5,000 entries
K1 = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(60, 60))
K = sp.csr_matrix(sp.kron(sp.kronsum(K1, K1), np.ones((2, 2))))
K.data = rng.integers(-3, 4, K.nnz).astype(np.float64)
Kg = csp.csr_matrix(K.astype(np.float32))
for cap in ("", "5000"):
    os.environ["ACCSPMM_SPGEMM_FUSED_CAP"] = cap
    check(accspmm.spgemm(Kg, Kg), (K @ K).astype(np.float32), f"one-shot hashed rows, fused cap {cap or 'default'}")
del os.environ["ACCSPMM_SPGEMM_FUSED_CAP"]
print("sanitize workload:", "OK" if ok else "WRONG")
raise SystemExit(0 if ok else 1)

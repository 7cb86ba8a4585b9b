"""GPU fuzz as a new user would call the library (needs a GPU, CuPy and PyTorch): random and
adversarial shapes (hub rows and columns, a dense row, empty tails, tall K = 1..3, very wide), A as
users pass it (unsorted, duplicates, int32/int64 indices, float32/float64), every plan kind (TF32,
FP64 through cuSPARSE, FP16/BF16 on BSR16 (its quads and pairs forced too), on BitTCF and by the format
model, with and without reordering), B from PyTorch, CuPy and NumPy in both layouts, ``out=``,
vectors, B and out= as views (storage offsets, column steps, CuPy negative strides), and SpGEMM
(A Aᵀ, both algorithms, scipy and CuPy operands, plan reuse).
Integer data: every result must equal scipy's bit for bit (half outputs: scipy's rounded to the
format), and A's arrays must be unchanged.  Expected refusals (reordering an FP64 plan) are skipped.

    python benchmarks/fuzz_gpu.py [SEED] [ITERATIONS] [WIDE]

WIDE (default 0): the share of products whose width is drawn from 256, 264 and 320 instead
(slice-major BSR16 thread blocks; on sm_90 at 256 and 320 the row kernel's TMA loads of B), from a
generator of its own, so that a seed run without it draws what it always drew.

Prints one line per failure and a summary; exits 1 on any failure.  It found the cuSPARSE plans'
duplicate-entry bug (c4a212e, 4271203) and the CPU path's ignored check_finite (806c0d2)."""
import sys, time
import numpy as np, scipy.sparse as sp
import cupy
import cupyx.scipy.sparse as csp
import torch
import accspmm

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 40
wide = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
wide_rng = np.random.default_rng([seed, 17])
rng = np.random.default_rng(seed)
fails = 0
checks = 0


def rand_csr(m, k, density, kind):
    nnz = int(round(m * k * density))
    r = rng.integers(0, max(m, 1), nnz) if m and k else np.zeros(0, np.int64)
    c = rng.integers(0, max(k, 1), nnz) if m and k else np.zeros(0, np.int64)
    if m and k and kind == "hub":  # a hub row and a hub column
        h, hc = rng.integers(m), rng.integers(k)
        r = np.concatenate([r, np.full(k, h), np.arange(m)])
        c = np.concatenate([c, np.arange(k), np.full(m, hc)])
    if m and k and kind == "emptytail":
        keep = r < m // 2
        r, c = r[keep], c[keep]
    if m and k and kind == "denserow":
        h = rng.integers(m)
        r, c = np.concatenate([r, np.full(k, h)]), np.concatenate([c, np.arange(k)])
    A = sp.coo_matrix((np.ones(r.size), (r, c)), shape=(m, k)).tocsr()
    A.sum_duplicates()
    A.data = rng.integers(-4, 5, A.nnz).astype(np.float64)
    A.eliminate_zeros()
    return A


def messy(A, idx):
    coo = A.tocoo()
    r, c, v = coo.row, coo.col, coo.data
    if v.size:
        extra = rng.integers(0, v.size, v.size // 3 + 1)
        r, c = np.concatenate([r, r[extra]]), np.concatenate([c, c[extra]])
        v = np.concatenate([v, np.ones(extra.size)])
    order = np.lexsort((rng.random(r.size), r))
    r, c, v = r[order], c[order], v[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=A.shape[0]))])
    return sp.csr_matrix((v, c.astype(idx), indptr.astype(idx)), shape=A.shape)


def scipy_product(X, Y):
    """scipy's X @ Y with duplicates summed and exact zeros dropped."""
    R = sp.csr_matrix(X @ Y)
    R.sum_duplicates()
    R.eliminate_zeros()
    return R


def to_np(X):
    if isinstance(X, torch.Tensor):
        X = X.detach()
        return (X.float() if X.dtype in (torch.float16, torch.bfloat16) else X).cpu().numpy()
    if isinstance(X, cupy.ndarray):
        return cupy.asnumpy(X)
    if sp.issparse(X) or csp.issparse(X):
        X = X.get() if csp.issparse(X) else X
        return X.toarray()
    return np.asarray(X)


def check(tag, got, ref):
    global fails, checks
    checks += 1
    g = to_np(got).astype(np.float64)
    if g.shape != ref.shape or not np.array_equal(g, ref):
        fails += 1
        d = np.nanmax(np.abs(g - ref)) if g.shape == ref.shape else "shape"
        print("MISMATCH", tag, g.shape, ref.shape, d, flush=True)


def half_round(ref, prec):
    t = torch.from_numpy(ref.astype(np.float32))
    return t.to(torch.float16 if prec == "fp16" else torch.bfloat16).double().numpy()


t0 = time.time()
for it in range(iters):
    big = it % 8 == 7
    if big:
        shape_kind = rng.choice(["tall", "hubbig", "denserowbig", "wide"])
        if shape_kind == "tall":
            m, k, dens, kind = int(rng.integers(50000, 200000)), int(rng.integers(1, 4)), 0.5, "plain"
        elif shape_kind == "hubbig":
            m, k, dens, kind = 20000, 20000, 0.0005, "hub"
        elif shape_kind == "denserowbig":
            m, k, dens, kind = 5000, 30000, 0.0003, "denserow"
        else:
            m, k, dens, kind = 40, 100000, 0.001, "plain"
    else:
        m = int(rng.choice([1, 2, 7, 8, 9, 15, 16, 17, 33, 100, 257, 1000, 3001]))
        k = int(rng.choice([1, 3, 8, 9, 16, 31, 64, 130, 1000]))
        kind = str(rng.choice(["plain", "hub", "emptytail", "denserow"]))
        dens = float(rng.choice([0.01, 0.05, 0.3, 1.0]))
    n = int(rng.choice([1, 2, 3, 7, 8, 9, 16, 17, 31, 33, 64, 130]))
    if wide and wide_rng.random() < wide:
        n = int(wide_rng.choice([256, 264, 320]))
    A = rand_csr(m, k, dens, kind)
    idx = rng.choice([np.int32, np.int64])
    Am = messy(A, idx)
    ref_A = Am.toarray()
    Bh = rng.integers(-3, 4, (k, n)).astype(np.float32)
    ref = ref_A @ Bh.astype(np.float64)
    base = f"it{it} m{m} k{k} n{n} {kind} d{dens} {idx.__name__}"
    for dtype in (np.float32, np.float64):
        Ad = Am.astype(dtype)
        before = (Ad.data.copy(), Ad.indices.copy(), Ad.indptr.copy())
        reorders = ("none", "affinity", "auto") if m * k < 4e6 else ("none", "affinity")
        # "wide": the CUDA-core CSR kernel forced at every n > 4 (tuning={"wide": "csr"})
        for reorder in reorders + ("wide",) if dtype == np.float32 else ("none",):  # FP64 (cuSPARSE): no reorder
            tag = f"{base} {dtype.__name__} {reorder}"
            try:
                kw = {"tuning": {"wide": "csr"}} if reorder == "wide" else {"reorder": reorder}
                p = accspmm.plan(Ad, device="gpu", **kw)
                Bt = torch.from_numpy(Bh.astype(dtype)).cuda()
                check(tag + " torch", p(Bt), ref)
                check(tag + " torch-again", p(Bt), ref)
                check(tag + " cupy", p(cupy.asarray(Bh.astype(dtype))), ref)
                check(tag + " numpy", p(Bh.astype(dtype)), ref)
                if n > 1:
                    Bnc = torch.from_numpy(np.asfortranarray(Bh.astype(dtype))).cuda().t().contiguous().t()
                    check(tag + " torch-F", p(Bnc), ref)
                out = torch.full((m, n), float("nan"), dtype=torch.float32 if dtype == np.float32 else torch.float64,
                                 device="cuda")
                p(Bt, out=out)
                check(tag + " out=", out, ref)
                if n == 1:
                    check(tag + " vec", p(torch.from_numpy(Bh[:, 0].astype(dtype)).cuda()), ref[:, 0])
            except Exception as e:
                fails += 1
                print("EXC", tag, type(e).__name__, str(e)[:300], flush=True)
        if not all(np.array_equal(a, b) for a, b in zip(before, (Ad.data, Ad.indices, Ad.indptr))):
            fails += 1
            print("INPUT MODIFIED", base, flush=True)
    # half precisions, both formats
    A32 = Am.astype(np.float32)
    for prec in ("fp16", "bf16"):
        # auto: the format model; quads (sm_90a) and pairs (thread blocks at widths a multiple of 8): forced
        for fmt in ("bsr16", "bittcf", "auto", "quads", "pairs"):
            tag = f"{base} {prec} {fmt}"
            try:
                extra = ({"format": "bsr16", "tuning": {"kernel": fmt}} if fmt in ("quads", "pairs")
                         else {"format": fmt})
                p = accspmm.plan(A32, device="gpu", precision=prec, reorder=str(rng.choice(["none", "jaccard"])),
                                 **extra)
                tdt = torch.float16 if prec == "fp16" else torch.bfloat16
                Bt = torch.from_numpy(Bh).to(tdt).cuda()
                check(tag, p(Bt), half_round(ref, prec))
                out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
                p(Bt, out=out)
                check(tag + " out=f32", out, ref)
                if prec == "fp16":
                    check(tag + " cupy", p(cupy.asarray(Bh.astype(np.float16))), half_round(ref, prec))
            except Exception as e:
                fails += 1
                print("EXC", tag, type(e).__name__, str(e)[:300], flush=True)
    # spgemm: A Aᵀ, scipy and CuPy, both algorithms
    if m * m < 4e8:
        R = scipy_product(Am, Am.T.tocsr())
        for alg in ("auto", "rows", "tiles"):
            tag = f"{base} spgemm {alg}"
            try:
                with accspmm.spgemm_plan(Am, sp.csr_matrix(Am.T), device="gpu", algorithm=alg) as sp_p:
                    C = sp_p()
                    check(tag, C, R.toarray())
                    if C.nnz != R.nnz:
                        fails += 1
                        print("PATTERN", tag, C.nnz, R.nnz, flush=True)
                    Am2 = Am.copy()
                    Am2.data = Am2.data * 2
                    C2 = sp_p(Am2, None)
                    R2 = scipy_product(Am2, Am.T.tocsr())
                    check(tag + " reuse", C2, R2.toarray())
                Cc = accspmm.spgemm(csp.csr_matrix(sp.csr_matrix(Am)), csp.csr_matrix(sp.csr_matrix(Am.T)))
                check(tag + " cupy", Cc, R.toarray())
            except Exception as e:
                fails += 1
                print("EXC", tag, type(e).__name__, str(e)[:300], flush=True)
    if it % 10 == 9:
        print(f"it {it}: checks {checks} fails {fails} {time.time() - t0:.0f}s", flush=True)


# ---- B and out= as views, every plan kind -------------------------------------------------------
A = sp.random(700, 300, density=0.03, format="csr", dtype=np.float32, random_state=seed)
A.data = rng.integers(-3, 4, A.nnz).astype(np.float32)
KINDS = [("tf32", {}, torch.float32, cupy.float32), ("fp32", {"precision": "fp32"}, torch.float32, cupy.float32),
         ("fp16-bsr16", {"precision": "fp16", "format": "bsr16"}, torch.float16, cupy.float16),
         ("fp16-bittcf", {"precision": "fp16", "format": "bittcf"}, torch.float16, cupy.float16),
         ("bf16-bittcf", {"precision": "bf16", "format": "bittcf"}, torch.bfloat16, None)]
for n in (1, 8, 24, 40):
    B = rng.integers(-2, 3, (300, n)).astype(np.float32)
    ref = A.toarray().astype(np.float64) @ B  # small integers: exact in every format
    for name, kw, tdt, cdt in KINDS:
        p = accspmm.plan(A, device="gpu", **kw)
        for rep in range(2):  # the second call takes the C call
            tag = f"views {name} n{n} rep{rep}"
            try:
                big = torch.zeros(302, 2 * n + 3, device="cuda", dtype=tdt)
                big[1:301, 3::2] = torch.from_numpy(B).to(tdt).cuda()
                check(tag + " torch offset+step", p(big[1:301, 3::2]), ref)
                cbig = torch.full((702, n + 2), float("nan"), device="cuda", dtype=tdt)
                try:  # out= must be C-contiguous: a strided view is refused (README), never half-written
                    p(torch.from_numpy(B).to(tdt).cuda(), out=cbig[2:702, 1:1 + n])
                    fails += n > 1  # a view with gaps (n + 2 columns a row) must not be taken
                except ValueError:
                    if not bool(torch.isnan(cbig.float()).all()):
                        fails += 1
                        print("OUT VIEW WRITTEN BEFORE THE REFUSAL", tag, flush=True)
                crow = torch.full((702, n), float("nan"), device="cuda", dtype=tdt)
                p(torch.from_numpy(B).to(tdt).cuda(), out=crow[2:702])  # offset, contiguous: taken
                check(tag + " torch out offset", crow[2:702], ref)
                if cdt is not None:
                    cb = cupy.zeros((302, n), cdt)
                    cb[1:301] = cupy.asarray(B).astype(cdt)
                    check(tag + " cupy offset", p(cb[1:301]), ref)
                    check(tag + " cupy negative stride", p(cupy.asarray(B[::-1].copy()).astype(cdt)[::-1]), ref)
            except Exception as e:
                fails += 1
                print("EXC", tag, type(e).__name__, str(e)[:300], flush=True)
        p.close()
print("FUZZ seed", seed, "checks", checks, "fails", fails, f"{time.time() - t0:.0f}s")
sys.exit(1 if fails else 0)

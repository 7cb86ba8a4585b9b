"""Small GPU workload for compute-sanitizer (run by benchmarks/sanitize_gpu.sh): the TF32 kernel
with identity, packed, grouped and split schedules (GROUP and SPLIT tasks reduce through shared
memory; window 5 is a GROUP of 2 warps at cap 32, a multi-part SPLIT at caps 2 and 4), every slice
width (narrow steps too), register and cp.async-staged pipelines, several depths, both grid orders, N tails
(4-byte copy path), empty windows, the CUDA-core CSR kernels at every width, and the cuSPARSE path; B
with inf/NaN (the kernels' exact recompute of non-finite tiles, PACK, GROUP and SPLIT writers) against
scipy's pattern; and the C steady-state call with CuPy arrays.  Half precision (also on the wide CSR
kernel): both layouts (BSR16 on block rows, pairs and quads of them, BitTCF) in fp16 and bf16 on a
matrix with a split hub row, packed rows and empty ones, N tails (element copies), inf/NaN, the C
call with CuPy float16, BSR16's slice-major thread blocks (N = 200, 300, 320; at 320 the row kernel
loads B by TMA on sm_90), and BSR16 at N = 3 on
4096 block rows (copies padded to 8 columns; from Python and from the C call).  The TF32 schedule
built on the device (pricing and rows, both sorts, one block and the cooperative grid).  Every GPU plan
here is built on the device by the ranks method (under 2^20 nonzeros).  The build's check of an
unchecked CSR: malformed offsets and columns (both methods), unsorted rows, duplicates.  Exits 1 on any wrong result."""

import cupy as cp
import numpy as np
import scipy.sparse as sp

import accspmm

rng = np.random.default_rng(0)
d = (rng.random((45, 300)) < 0.05) * rng.integers(-8, 9, size=(45, 300))
d[8:24] = 0  # empty windows
d[40] = rng.integers(1, 9, size=300)  # long row -> window 5 has 38 blocks: split at cap 2..32
A = sp.csr_matrix(d.astype(np.float32))
ok = True


def check(cond, what):
    global ok
    if not cond:
        print("WRONG:", what)
    ok &= bool(cond)


configs = [{"cap": 0}, {"cap": 2}, {"cap": 32, "depth": 4}, {"cap": 2, "slice_s": 1},
           {"cap": 4, "slice_major": 1, "cache_l1": 0},
           {"cap": 0, "staged": 1}, {"cap": 2, "staged": 1, "depth": 3}, {"cap": 32, "staged": 1, "slice_s": 1},
           # narrow steps (16 columns): PACK, multi-part SPLIT and GROUP writers, both depths, L2-only loads
           {"cap": 0, "slice_s": 0, "staged": 0, "depth": 2}, {"cap": 2, "slice_s": 0, "staged": 0, "depth": 3},
           {"cap": 32, "slice_s": 0, "staged": 0, "depth": 2, "cache_l1": 0},
           # the CUDA-core CSR kernels at every width (row 40 in parts of the wide kernel)
           {"wide": "csr"}, {"narrow": "csr", "csr_lanes": 8, "wide": "csr"},
           {"wide": "csr", "csr_lane_cols": 8}]  # lanes of 8 columns at n = 32 and 64
for n in (1, 5, 32, 36, 37, 64, 130):
    B = rng.integers(-8, 9, size=(300, n)).astype(np.float32)
    ref = A @ B
    Bx = B.copy()  # inf / NaN in rows of stored columns and at random
    Bx[rng.choice(300, 6, replace=False), :] = [[np.inf], [-np.inf], [np.nan], [np.inf], [np.nan], [-np.inf]]
    Bx[rng.random(Bx.shape) < 0.01] = np.nan
    refx = A @ Bx
    for tuning in configs:
        p = accspmm.plan(A, device="gpu", reorder="none", tuning=tuning)
        check(np.array_equal(p(B), ref), f"n={n} {tuning}")
        check(np.array_equal(p(Bx), refx, equal_nan=True), f"n={n} {tuning} inf/NaN")
    p = accspmm.plan(A, device="gpu")  # defaults: reordering and the cost model
    check(np.array_equal(p(B), ref), f"n={n} default plan")
    Bg, Cg = cp.asarray(Bx), cp.full((45, n), cp.nan, cp.float32)
    for _ in range(3):  # the first call registers the launch, the next two take the C call
        p(Bg, out=Cg)
        check(np.array_equal(cp.asnumpy(Cg), refx, equal_nan=True), f"n={n} C call inf/NaN")
    check(p._tf32.launcher.fast_calls >= 2, f"n={n}: the C call was not taken")
    check(np.array_equal(accspmm.spmm(A, B, device="gpu", precision="fp32"), ref), f"n={n} fp32")
d2 = (rng.random((45, 20000)) < 0.0005) * rng.integers(-8, 9, size=(45, 20000))
d2[17] = rng.integers(1, 9, size=20000)  # a hub: its block row / window is split
d2[32:40] = 0
A2 = sp.csr_matrix(d2.astype(np.float32))
for n in (1, 5, 37, 64, 96, 130, 200, 300, 320):  # from 200: slice-major blocks (300: idle warps; 320: TMA)
    B = rng.integers(-8, 9, size=(20000, n)).astype(np.float32)
    Bx = B.copy()
    Bx[[3, 17, 500], :] = [[np.inf], [np.nan], [-np.inf]]
    ref, refx = A2 @ B, A2 @ Bx
    for prec in ("fp16", "bf16"):
        for fmt in ("bsr16", "bsr16-pairs", "bsr16-quads", "bittcf"):
            kw = {"tuning": {"kernel": fmt.split("-")[1]}} if "-" in fmt else {}
            p = accspmm.plan(A2, device="gpu", precision=prec, format=fmt.split("-")[0], **kw)
            check(np.array_equal(p(B), ref), f"n={n} {prec} {fmt}")
            split = (p.stats["schedule"][p.kernel_for(n)]["split_rows"] if fmt != "bittcf"
                     else p.stats["schedule_by_n"][n]["split_windows"])
            # pairs split on A3; the quads cut the hub's quad in parts (quad_schedule) where n % 8 == 0
            check(split >= 1 or fmt == "bsr16-pairs", f"{prec} {fmt}: no split row")
            check(np.array_equal(p(Bx), refx, equal_nan=True), f"n={n} {prec} {fmt} inf/NaN")
            if prec == "fp16":
                Bg, Cg = cp.asarray(B.astype(np.float16)), cp.full((45, n), cp.nan, cp.float16)
                for _ in range(2):
                    p(Bg, out=Cg)
                    check(np.array_equal(cp.asnumpy(Cg).astype(np.float64), ref.astype(np.float16).astype(np.float64)),
                          f"n={n} {fmt} C call fp16")
# half BitTCF plans on the wide CSR kernel (the hub row in parts), lean and element loads, lanes of 8 columns at
# n = 24, 32, 64 and 136, B misaligned too
for n in (5, 24, 32, 37, 64, 130, 136):
    B = rng.integers(-8, 9, size=(20000, n)).astype(np.float32)
    Bx = B.copy()
    Bx[[3, 17, 500], :] = [[np.inf], [np.nan], [-np.inf]]
    ref, refx = A2 @ B, A2 @ Bx
    for prec in ("bf16", "fp16"):  # p stays the fp16 plan
        for cols in (4, 8):
            p = accspmm.plan(A2, device="gpu", precision=prec, format="bittcf",
                             tuning={"wide": "csr", "csr_lane_cols": cols})
            check(np.array_equal(p(B), ref) and np.array_equal(p(Bx), refx, equal_nan=True),
                  f"n={n} {prec} wide CSR, lanes of {cols}")
    Bg = cp.zeros(20000 * n + 1, cp.float16)[1:].reshape(20000, n)  # 2-byte aligned only: element loads
    Bg[...] = cp.asarray(B.astype(np.float16))
    check(np.array_equal(cp.asnumpy(p(Bg)).astype(np.float64), ref.astype(np.float16).astype(np.float64)),
          f"n={n} wide CSR, misaligned fp16 B")
# BSR16 at n < 8 on >= 4096 block rows: computed in copies of B and C padded to 8 columns
A3 = sp.random(16 * 4096 + 5, 700, density=0.0005, format="lil", random_state=1)
A3[60000, :] = rng.integers(1, 9, size=700)  # a split block row: the workspace at 8 columns
A3 = sp.csr_matrix(A3)
A3.data = rng.integers(-8, 9, size=A3.nnz).astype(np.float32)
B3 = rng.integers(-8, 9, size=(700, 3)).astype(np.float32)
for kernel in ("rows", "pairs"):
    p = accspmm.plan(A3, device="gpu", precision="fp16", format="bsr16", tuning={"kernel": kernel})
    check(p.stats["schedule"][kernel]["split_rows"] >= 1, f"padded bsr16 {kernel}: no split row")
    check(np.array_equal(p(B3), A3 @ B3), f"n=3 bsr16 {kernel} padded")
    for _ in range(2):  # the C call (CuPy float16): its split workspace holds the 8 padded columns
        check(np.array_equal(cp.asnumpy(p(cp.asarray(B3, cp.float16))), (A3 @ B3).astype(np.float16)),
              f"n=3 bsr16 {kernel} padded, C call")
    check(p._fast.__self__.fast_calls == 2, f"n=3 bsr16 {kernel} padded: the C call was not taken")
# the TF32 schedule built on the device (benchmarks/sanitize_schedule.py)
import sanitize_schedule  # noqa: E402

sanitize_schedule.run(check, rng)

# the GPU build's check of an unchecked CSR (cuda/bittcf_build.cu), by both methods: malformed
# offsets and columns refused before any step reads through them, unsorted rows and duplicates
from accspmm._device_format import DeviceBitTCF  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402

A4 = sp.random(3000, 900, density=0.004, format="csr", random_state=6, dtype=np.float32)
A4.data = rng.integers(1, 9, size=A4.nnz).astype(np.float32)  # exact in TF32
bad_col, bad_off = A4.copy(), A4.copy()
bad_col.indices = bad_col.indices.copy()
bad_col.indices[A4.nnz // 2] = 900
bad_off.indptr = bad_off.indptr.copy()
bad_off.indptr[1500] = bad_off.indptr[1501] + 3
for M, word in ((bad_col, "column index"), (bad_off, "row offsets")):
    for method in ("ranks", "sort"):
        dev = {}
        try:
            DeviceBitTCF(as_csr(M, check=False), None, dev, 0, method=method, validate=True)
            check(False, f"malformed CSR ({word}, {method}) built")
        except ValueError as exc:
            check(word in str(exc), f"malformed CSR ({word}, {method}): {exc}")
        for arr in dev.values():
            arr.free()
shuffled = A4.copy()
shuffled.indices, shuffled.data = shuffled.indices.copy(), shuffled.data.copy()
for i in range(0, A4.shape[0], 3):  # rows reversed: unsorted, then a duplicate in the longest row
    a, b = A4.indptr[i], A4.indptr[i + 1]
    shuffled.indices[a:b], shuffled.data[a:b] = shuffled.indices[a:b][::-1], shuffled.data[a:b][::-1]
B4 = rng.integers(-8, 9, size=(900, 40)).astype(np.float32)
check(np.array_equal(accspmm.plan(shuffled, device="gpu")(B4), A4 @ B4), "unsorted rows, device check")
row = int(np.argmax(np.diff(A4.indptr)))
shuffled.indices[A4.indptr[row] + 1] = shuffled.indices[A4.indptr[row]]
summed = sp.csr_matrix(shuffled.copy())
summed.sum_duplicates()
check(np.array_equal(accspmm.plan(shuffled, device="gpu")(B4), summed @ B4), "duplicates, device check")
print("sanitize workload:", "OK" if ok else "WRONG")
raise SystemExit(0 if ok else 1)

"""GPU tests (marked `gpu`; skipped with the reason where CUDA is unavailable).

Exactness: integer-valued A and B (|values| <= 8) make every product and partial sum an exact
integer in TF32/FP32, so results must equal the exact product bit for bit.  The reference is
scipy's product for small matrices, and the float64 product computed by CuPy for large N on the
real matrices (exact for integers, hence identical to scipy's).  GPU outputs are poisoned with
NaN before every run and checked to be finite (every element written)."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import _tf32
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import (assert_bit_exact, csr_raw, error_bound_check, half_ref, int_csr, int_dense, load_int_matrix,
                      long_window_matrix, real_matrix_params, scipy_ref)

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy") if accspmm.cuda_available() else None

NS_TF32 = [1, 7, 8, 16, 31, 32, 33, 64, 100, 128, 256, 512, 1000]
NS_FP32 = [1, 7, 32, 33, 128]


def _gpu_int_dense(k, n, seed):
    rs = cp.random.RandomState(seed)
    return rs.randint(-8, 9, size=(k, n)).astype(cp.float32)


def _exact_ref_gpu(A, Bg):
    import cupyx.scipy.sparse as csp

    A64 = csp.csr_matrix(sp.csr_matrix(A, dtype=np.float64))
    return (A64 @ Bg.astype(cp.float64)).astype(cp.float32)


def _run_poisoned(p, Bg):
    out = cp.full((p.shape[0], Bg.shape[1]), cp.nan, dtype=cp.float32)
    r = p(Bg, out=out)
    assert r is out
    return out


def _assert_exact_gpu(C, ref):
    assert bool(cp.isfinite(C).all()), "unwritten (NaN) output elements"
    diff = int((C != ref).sum())
    assert diff == 0, f"{diff} elements differ"


@pytest.mark.parametrize("path", real_matrix_params())
def test_cusparse_fp32_real_matrices(path):
    A = load_int_matrix(path)
    with accspmm.plan(A, device="gpu", precision="fp32") as p:
        for n in NS_FP32:
            B = int_dense(A.shape[1], n, seed=n)
            assert_bit_exact(p(B), scipy_ref(A, B))


@pytest.mark.parametrize("path", real_matrix_params())
def test_tf32_real_matrices(path):
    """Every width, with the identity schedule and original order, the cost model's schedule with
    the default reordering, a forced small cap (many multi-part SPLIT tasks) on the cp.async-staged
    pipeline with a random permutation, and the balanced schedule on the register pipeline with
    the affinity reordering."""
    A = load_int_matrix(path)
    m = A.shape[0]
    perm = np.random.default_rng(11).permutation(m)
    plans = [accspmm.plan(A, device="gpu", precision="tf32", balance=False, reorder="none"),
             accspmm.plan(A, device="gpu", precision="tf32"),
             accspmm.plan(A, device="gpu", precision="tf32", perm=perm, tuning={"cap": 2, "staged": 1}),
             accspmm.plan(A, device="gpu", precision="tf32", balance=True, reorder="affinity",
                          tuning={"staged": 0})]
    try:
        for n in NS_TF32:
            Bg = _gpu_int_dense(A.shape[1], n, seed=n)
            ref = _exact_ref_gpu(A, Bg)
            for p in plans:
                _assert_exact_gpu(_run_poisoned(p, Bg), ref)
            del Bg, ref
            cp.get_default_memory_pool().free_all_blocks()  # our plans allocate outside CuPy's pool
        # and scipy itself on the host path at one width
        B = int_dense(A.shape[1], 33, seed=5)
        assert_bit_exact(plans[1](B), scipy_ref(A, B))
    finally:
        for p in plans:
            p.close()


VARIANTS = [dict(slice_s=s, depth=d, cache_l1=c, slice_major=o, staged=g)
            for g in (0, 1) for s in (1, 2) for d in (2, 3, 4) for c in (0, 1) for o in (0, 1)]
VARIANTS += [dict(slice_s=0, depth=d, cache_l1=c, slice_major=o, staged=0)  # narrow steps: 16 columns
             for d in (2, 3) for c in (0, 1) for o in (0, 1)]


@pytest.mark.parametrize("variant", VARIANTS,
                         ids=lambda v: "g{staged}s{slice_s}d{depth}c{cache_l1}o{slice_major}".format(**v))
def test_tf32_variants(bundled_int, variant):
    """Every kernel variant, schedule kind and tail (n not a multiple of the slice width 32 S
    takes the 4-byte copy path with column tests, a multiple the 16-byte path; narrow steps, S = 0,
    16 columns: 8-byte runs at n a multiple of 4, S = 1's element path at other widths)."""
    A = bundled_int
    for cap in (0, 2, 32):
        with accspmm.plan(A, device="gpu", reorder="none", tuning={"cap": cap, **variant}) as p:
            for n in (1, 6, 32, 36, 64, 100, 129):
                Bg = _gpu_int_dense(A.shape[1], n, seed=n + cap)
                _assert_exact_gpu(_run_poisoned(p, Bg), _exact_ref_gpu(A, Bg))


@pytest.mark.parametrize("n", [40, 129, 256])
def test_tf32_autotune_same_bits(bundled_int, n):
    """The first call for n times the candidate variants and the fastest in the other task order
    (recorded in the stats) and keeps one; on random values its result bits equal those of an
    untuned plan and of every candidate forced, in either task order: only the schedule fixes
    the order of the sums."""
    A = bundled_int.copy()
    rng = np.random.default_rng(n)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    Bg = cp.asarray(rng.standard_normal((A.shape[1], n)).astype(np.float32))
    tc = {"cap": 4, "wide": "bittcf"}  # the Tensor Cores' variants (the wide CSR kernel has none)
    with accspmm.plan(A, device="gpu", tuning={**tc, "autotune": True}) as p, \
            accspmm.plan(A, device="gpu", tuning={**tc, "autotune": False}) as q:
        got = _run_poisoned(p, Bg)
        rep = p.stats["schedule_by_n"][n]
        cands = p._tf32.candidates(n)
        both = cands + [dict(c, order=1 - c["order"], slice_major=o) for c in cands for o in (0, 1)]
        extra = 2 if n > _tf32.slice_cols(0, rep["variant"]["slice_s"]) else 1  # the fastest in the other order
        assert len(rep["tuned_ms"]) == len(cands) + extra >= 4 and rep["variant"] in both
        assert all(t > 0 for t in rep["tuned_ms"].values()) and rep["tuning_seconds"] > 0
        assert bool((_run_poisoned(q, Bg) == got).all())
        assert "tuned_ms" not in q.stats["schedule_by_n"][n]
        for v in both:
            with accspmm.plan(A, device="gpu", tuning={**tc, **v}) as f:
                assert bool((_run_poisoned(f, Bg) == got).all()), v
        assert bool((_run_poisoned(p, Bg) == got).all())


def test_tf32_narrow_steps_rule(bundled_int):
    """A TF32 plan runs narrow steps (S = 0, 16 columns, the register pipeline) exactly where its one-wave
    rule replaced S = 2 and ``narrow_steps`` holds (every narrow thread block resident, a long enough task,
    B in L2), with the reason in the stats; timed plans also time S = 1 and S = 2; every choice gives the
    same bits.  The bundled matrix's first 1,500 rows (rectangular): small grids (on the Tensor Cores: by default
    these widths would run on the wide CSR kernel, CSR_WIDE_SMALL_*)."""
    A = sp.csr_matrix(bundled_int[:1500])
    rng = np.random.default_rng(7)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    fired = 0
    tc = {"wide": "bittcf"}
    with accspmm.plan(A, device="gpu", tuning=tc) as p, accspmm.plan(A, device="gpu", tuning={**tc, "autotune": True}) as q:
        for n in (8, 20, 36, 64, 128, 256, 130):
            Bg = cp.asarray(rng.standard_normal((A.shape[1], n)).astype(np.float32))
            got = _run_poisoned(p, Bg)
            rep = p.stats["schedule_by_n"][n]
            one_wave = p._tf32._wide.get(n, [{}])[0].get("slice_s") == 2
            steps = one_wave and _tf32.narrow_steps(n, 0, rep["tasks"] * -(-n // 32), p._tf32._longest(rep["cap"])) \
                and _tf32.b_resident(n, A.shape[1], p._tf32._l2)
            assert (rep["variant"]["slice_s"] == 0) == steps, (n, rep)
            if steps:
                fired += 1
                assert rep["variant"]["staged"] == 0 and "16-column steps" in rep["reason"]
                cands = q._tf32.candidates(n)
                assert {c["slice_s"] for c in cands} == {0, 1, 2}
                assert not any(c["slice_s"] == 0 and c["staged"] for c in cands)
            assert bool((_run_poisoned(q, Bg) == got).all())
            with accspmm.plan(A, device="gpu", tuning={**tc, "slice_s": 1, "cap": rep["cap"]}) as f:  # the same sums
                assert bool((_run_poisoned(f, Bg) == got).all())
    assert fired >= 2, "small grids must take narrow steps"


def test_tf32_forced_depth_keeps_narrow_steps_off():
    """tuning={"depth": 4} (which narrow steps do not have) on a grid under one wave: the plan keeps S = 1
    at depth 4 instead of asking for narrow steps the kernel refuses; exact on integers (the Tensor Cores forced:
    these widths would run on the wide CSR kernel)."""
    A = long_window_matrix()
    with accspmm.plan(A, device="gpu", reorder="none", tuning={"depth": 4, "wide": "bittcf"}) as p:
        for n in (64, 128):
            Bg = _gpu_int_dense(A.shape[1], n, seed=n)
            _assert_exact_gpu(_run_poisoned(p, Bg), _exact_ref_gpu(A, Bg))
            v = p.stats["schedule_by_n"][n]["variant"]
            assert v["slice_s"] == 1 and v["depth"] == 4, v


def test_tf32_misaligned_b(bundled_int):
    """A B whose rows are 16-byte aligned but whose base is not takes the 4-byte path."""
    A = bundled_int
    buf = _gpu_int_dense(A.shape[1] * 64 + 1, 1, seed=4).reshape(-1)
    Bg = buf[1:].reshape(A.shape[1], 64)  # base offset by 4 bytes
    assert Bg.data.ptr % 16 == 4
    with accspmm.plan(A, device="gpu") as p:
        _assert_exact_gpu(_run_poisoned(p, Bg), _exact_ref_gpu(A, Bg))


@pytest.mark.parametrize("cap", [1, 2, 8, 64])
@pytest.mark.parametrize("steps", [False, True], ids=["default", "narrow_steps"])
def test_tf32_multi_part_splits(cap, steps):
    """Long windows split over several thread blocks: exact on integers, every call (the counters
    are left at zero) and every width (one workspace per stream, grown to the largest), bitwise
    deterministic on random values, and safe on two streams at once; with the default variants and
    with narrow steps forced (16-column slices: their counters; S = 1's element path at n = 1, 5, 130)."""
    A = long_window_matrix()
    rng = np.random.default_rng(cap)
    narrow = {"slice_s": 0, "staged": 0, "depth": 2} if steps else {}
    with accspmm.plan(A, device="gpu", reorder="none", tuning={"cap": cap, **narrow}) as p:
        parts = p._tf32._schedule(cap)[0][:, 2]
        assert parts.max() > 1, "the schedule must have a multi-part split"
        for n in (1, 5, 64, 130):
            Bg = _gpu_int_dense(A.shape[1], n, seed=n)
            ref = _exact_ref_gpu(A, Bg)
            for _ in range(3):
                _assert_exact_gpu(_run_poisoned(p, Bg), ref)
        assert len(p._tf32._ws_keys) == 1, "one workspace per stream, grown and shared by every width"
        Bf = cp.asarray(rng.standard_normal((A.shape[1], 96)).astype(np.float32))
        first = _run_poisoned(p, Bf)
        for _ in range(5):
            assert bool((_run_poisoned(p, Bf) == first).all()), "not deterministic"
        s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
        outs = [cp.full((A.shape[0], 96), cp.nan, cp.float32) for _ in range(8)]
        for i, o in enumerate(outs):
            p(Bf, out=o, stream=s1 if i % 2 else s2)
        s1.synchronize()
        s2.synchronize()
        for o in outs:
            assert bool((o == first).all()), "concurrent streams corrupted a split"
        assert len(p._tf32._ws_keys) == 3  # the default stream's, s1's and s2's


def test_schedule_recorded(bundled_int):
    A = bundled_int
    p = accspmm.plan(A, device="gpu")
    p(_gpu_int_dense(A.shape[1], 128, seed=0))
    rep = p.stats["schedule_by_n"][128]
    assert rep["cap"] in (0, 2, 4, 8, 16, 32, 64, 128, 256) and "predicted" in rep
    assert rep["variant"]["slice_s"] == 2 or "S = 1" in rep["reason"]
    assert p.stats["reorder"]["chosen"] in ("none", "affinity", "rcm", "degree")


def _edge_matrices():
    from test_cpu_exact import EDGE

    return EDGE


@pytest.mark.parametrize("precision", ["tf32", "fp32"])
@pytest.mark.parametrize("name", sorted(_edge_matrices()))
def test_edge_cases_gpu(name, precision):
    A = _edge_matrices()[name]
    if A.dtype == np.float64:
        A = A.astype(np.float32)
    plans = [accspmm.plan(A, device="gpu", precision=precision)]
    try:
        if precision == "tf32":
            plans += [accspmm.plan(A, device="gpu", tuning={"cap": c}) for c in (0, 2)]
        for n in (1, 3, 8, 17, 33, 130):
            B = int_dense(A.shape[1], n, seed=n)
            ref = np.asarray(sp.csr_matrix(A) @ B)
            assert_bit_exact(accspmm.spmm(A, B, device="gpu", precision=precision), ref)
            for p in plans:
                assert_bit_exact(p(B), ref)
    finally:
        for p in plans:
            p.close()


def test_fp64_on_gpu(bundled_int):
    A = bundled_int.astype(np.float64)
    B = int_dense(A.shape[1], 9, seed=3, dtype=np.float64)
    C = accspmm.spmm(A, B, device="gpu")
    assert C.dtype == np.float64
    assert_bit_exact(C, scipy_ref(A, B))


@pytest.mark.parametrize("dtype,precision", [(np.float64, None), (np.float32, "fp32")])
def test_cusparse_plans_take_unsorted_duplicate_csr(dtype, precision):
    """The cuSPARSE path (float64, or precision='fp32') gets a canonical copy: cuSPARSE assumes sorted
    rows without duplicates and cusparseCreateCsr refuses more entries than m * k, which duplicates
    can make (found by a fuzz: a 1 x 9 row with 10 entries raised RuntimeError; the first fix still
    gave cuSPARSE the count before summing, which read past the arrays)."""
    rng = np.random.default_rng(11)
    cases = [(1, 9, np.array([0] * 10), np.array([3, 1, 1, 8, 0, 2, 5, 4, 6, 7]))]
    rows = rng.integers(0, 40, 900)
    cases.append((40, 17, rows, rng.integers(0, 17, 900)))  # 900 entries > 40 * 17
    for m, k, r, c in cases:
        A = csr_raw(m, k, r, c, rng.integers(-4, 5, r.size), dtype=dtype)
        assert not A.has_canonical_format and A.nnz > m * k
        before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
        B = int_dense(k, 5, seed=m, dtype=dtype)
        ref = A.toarray().astype(np.float64) @ B.astype(np.float64)
        canonical = A.copy()
        canonical.sum_duplicates()
        with accspmm.plan(A, device="gpu", precision=precision) as p:
            assert p.format == "csr"
            assert p.stats["nnz"] == canonical.nnz  # what cuSPARSE gets
            assert_bit_exact(p(B), ref.astype(dtype))
            assert_bit_exact(p(cp.asarray(B)).get(), ref.astype(dtype))
        assert all(np.array_equal(x, y) for x, y in zip(before, (A.data, A.indices, A.indptr)))


GPU_KINDS = [{}, {"precision": "fp32"},
             {"precision": "fp16", "format": "bsr16"}, {"precision": "fp16", "format": "bittcf"},
             {"precision": "bf16", "format": "bsr16"}, {"precision": "bf16", "format": "bittcf"}]


@settings(max_examples=60, deadline=None)
@given(case=int_csr(), n=st.sampled_from([1, 2, 7, 8, 9, 16, 31, 33]), kind=st.sampled_from(GPU_KINDS))
def test_gpu_hypothesis_exact(case, n, kind):
    """Every GPU plan kind on drawn CSR as users pass it (unsorted, duplicates, more entries than m * k,
    int32/int64 indices, empty shapes), against scipy bit for bit: the default precision (TF32, or
    FP64 through cuSPARSE), FP32 through cuSPARSE, and both half formats with their FP32 sums kept
    (``out=`` float32: the integer sums are exact).  The CPU twin is test_cpu_exact's."""
    A, seed = case
    if kind and A.dtype == np.float64:
        A = A.astype(np.float32)  # fp32 and half plans take float32 values
    B = int_dense(A.shape[1], n, seed=seed % 1000, dtype=A.dtype)
    ref = np.asarray(sp.csr_matrix(A) @ B)
    before = (A.data.copy(), A.indices.copy(), A.indptr.copy())
    with accspmm.plan(A, device="gpu", **kind) as p:
        if "format" in kind:  # half: B in the format, C as the FP32 sums
            Bh = cp.asarray(B.astype(np.float16)) if kind["precision"] == "fp16" else cp.asarray(B)
            out = cp.full((A.shape[0], n), cp.nan, cp.float32)
            p(Bh, out=out)
            assert_bit_exact(out.get(), ref.astype(np.float32))
        else:
            out = cp.full((A.shape[0], n), cp.nan, A.dtype)
            p(cp.asarray(B), out=out)
            assert_bit_exact(out.get(), ref)
            assert_bit_exact(p(B), ref)
    assert all(np.array_equal(x, y) for x, y in zip(before, (A.data, A.indices, A.indptr)))


@pytest.mark.parametrize("balance", [False, True])
@pytest.mark.parametrize("n", [1, 33, 128, 512])
def test_tf32_random_values_bound(balance, n):
    A = accspmm.datasets.load_bundled(np.float32)
    rng = np.random.default_rng(n)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B = rng.standard_normal((A.shape[1], n)).astype(np.float32)
    C = accspmm.plan(A, device="gpu", balance=balance)(B)  # default reordering: result in original order
    rel = error_bound_check(A, B, C, u=2.0**-11)
    print(f"TF32 norm-wise relative error n={n} balance={balance}: {rel:.3e}")
    assert rel < 1e-3


def test_default_precision_is_tf32(bundled_int):
    p = accspmm.plan(bundled_int)
    assert p.device == "gpu" and p.precision == "tf32"
    assert "precision=tf32" in repr(p)


def test_nonfinite_b_like_scipy_and_check_finite(bundled_int):
    """inf in B reaches exactly scipy's entries under TF32 by default (more in test_gpu_call.py);
    check_finite=True raises instead; fp32 (cuSPARSE) has IEEE semantics too."""
    B = int_dense(bundled_int.shape[1], 4)
    B[3, 1] = np.inf
    ref = bundled_int @ B
    with pytest.raises(ValueError, match="NaN or inf"):
        accspmm.spmm(bundled_int, B, device="gpu", precision="tf32", check_finite=True)
    C = accspmm.spmm(bundled_int, B, device="gpu", precision="tf32")
    assert np.array_equal(C, ref, equal_nan=True)
    C = accspmm.spmm(bundled_int, B, device="gpu", precision="fp32")  # IEEE semantics there
    assert np.array_equal(C, ref, equal_nan=True)


def test_cupy_in_cupy_out_no_copy(bundled_int):
    A = bundled_int
    Bg = _gpu_int_dense(A.shape[1], 40, seed=1)
    B_before = Bg.copy()
    p = accspmm.plan(A, device="gpu")
    C = p(Bg)
    assert isinstance(C, cp.ndarray) and C.shape == (A.shape[0], 40) and C.dtype == cp.float32
    _assert_exact_gpu(C, _exact_ref_gpu(A, Bg))
    assert bool((Bg == B_before).all())
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        out = cp.full((A.shape[0], 40), cp.nan, cp.float32)
        p(Bg, out=out, stream=s)
        s.synchronize()
    _assert_exact_gpu(out, _exact_ref_gpu(A, Bg))
    v = p(Bg[:, 0].copy())
    assert v.shape == (A.shape[0],)


def test_torch_in_torch_out(bundled_int):
    torch = pytest.importorskip("torch")
    A = bundled_int
    B = torch.randint(-8, 9, (A.shape[1], 24), device="cuda").float()
    C = accspmm.plan(A, device="gpu")(B)
    assert isinstance(C, torch.Tensor) and C.is_cuda and C.dtype == torch.float32
    ref = A @ B.cpu().numpy()
    assert_bit_exact(C.cpu().numpy(), ref)
    Bt = B.t().contiguous().t()  # non-contiguous view: a contiguous copy is made, B untouched
    assert_bit_exact(accspmm.plan(A, device="gpu")(Bt).cpu().numpy(), ref)


def test_no_memory_growth_and_close(bundled_int):
    A = bundled_int
    Bg = _gpu_int_dense(A.shape[1], 16, seed=2)
    out = cp.empty((A.shape[0], 16), cp.float32)
    p = accspmm.plan(A, device="gpu")
    p(Bg, out=out)
    cp.cuda.Device().synchronize()
    free0 = accspmm.device_info()["free_memory"]
    for _ in range(10_000):
        p(Bg, out=out)
    cp.cuda.Device().synchronize()
    free1 = accspmm.device_info()["free_memory"]
    assert free0 - free1 < 2**20, f"device memory fell by {free0 - free1} bytes over 10,000 calls"
    before_close = accspmm.device_info()["free_memory"]
    p.close()
    assert accspmm.device_info()["free_memory"] >= before_close
    with pytest.raises(RuntimeError):
        p(Bg)


def test_gpu_out_of_memory_is_memoryerror(bundled_int):
    from accspmm._device import DeviceArray

    with pytest.raises(MemoryError):
        DeviceArray((1 << 50,), np.float32, 0)


NARROW_NS = list(range(1, 10))  # 1-4 on CUDA cores (ACC_TF32_NARROW_MAX), 5-9 on Tensor Cores


def _ref32(A, B, prec):
    """scipy's product as float32 values; half formats: ``half_ref`` (the product of the format-rounded
    operands rounded to the format), read back as float32."""
    return scipy_ref(A, B) if prec == "tf32" else half_ref(A, B, prec, "half").astype(np.float32)


@pytest.mark.parametrize("prec", ["tf32", "fp16", "bf16"])
@pytest.mark.parametrize("cap", [0, 2, 8, 64])
def test_narrow_widths_exact_on_every_task_kind(prec, cap):
    """Widths n <= 4 run on CUDA cores (narrow_kernel) with the same tasks as the Tensor-Core kernel:
    PACK runs with empty windows, GROUPs and multi-part SPLITs (long_window_matrix at small caps),
    every n of 1..9 exact on integer data (half formats: scipy's product rounded to the format), twice
    (the split counters left at zero).  TF32 plans take the cap by tuning and say which kernel ran; a
    half plan's BitTCF runner is launched with the cap directly."""
    import torch

    A = long_window_matrix()
    dt = {"tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[prec]
    narrow = accspmm._cuda.tf32_narrow_max()
    if prec == "tf32":  # the BitTCF narrow kernel (the CSR one: test_narrow_csr_*)
        p = accspmm.plan(A, device="gpu", reorder="none", tuning={"cap": cap, "narrow": "bittcf"})
    else:
        p = accspmm.plan(A, device="gpu", precision=prec, format="bittcf")
    with p:
        for n in NARROW_NS:
            B = int_dense(A.shape[1], n, seed=n)
            Bt = torch.from_numpy(B).cuda().to(dt)
            ref = _ref32(A, B, prec)
            for _ in range(2):
                out = torch.full((A.shape[0], n), float("nan"), dtype=dt, device="cuda")
                if prec == "tf32":
                    p(Bt, out=out)
                else:
                    p(Bt)  # the first call: decision, workspace
                    a, v = p._runner.args(Bt.data_ptr(), out.data_ptr(), n, None, cap)
                    accspmm._cuda.tf32_spmm(a, v, None)
                assert np.array_equal(out.float().cpu().numpy(), ref), (n, cap)
            if prec == "tf32":
                kernel = p.stats["schedule_by_n"][n]["kernel"]
                assert kernel == ("cuda_cores" if n <= narrow else "tensor_cores")
        run = p._tf32 if prec == "tf32" else p._runner
        if cap in (2, 8):
            assert run._counts(cap)[1] > 0, "the schedule must have a multi-part split"


@pytest.mark.parametrize("kind", ["star", "dense_row", "tall1", "hub"])
def test_narrow_widths_adversarial_and_vector(kind):
    """The adversarial shapes at n = 1, 3 and 8 (a vector B too), TF32 and FP16: exact on integer data."""
    import torch

    A = accspmm.datasets.adversarial(kind, 60_000)
    A.data = np.random.default_rng(4).integers(-4, 5, A.nnz).astype(np.float32)
    A.eliminate_zeros()
    for prec in ("tf32", "fp16"):
        p = accspmm.plan(A, device="gpu", **({} if prec == "tf32" else {"precision": prec}))
        dt = torch.float32 if prec == "tf32" else torch.float16
        for n in (1, 3, 8):
            B = int_dense(A.shape[1], n, seed=n)
            got = p(torch.from_numpy(B).cuda().to(dt)).float().cpu().numpy()
            assert np.array_equal(got, _ref32(A, B, prec)), (prec, n)
        v = int_dense(A.shape[1], 1, seed=9)[:, 0]
        got = p(torch.from_numpy(v).cuda().to(dt)).float().cpu().numpy()
        assert got.shape == (A.shape[0],) and np.array_equal(got, _ref32(A, v[:, None], prec)[:, 0])
        p.close()


def _rows_of_lengths(lengths, k, rng):
    """A CSR of len(lengths) x k with ones at sorted random columns, row i holding lengths[i] entries."""
    cols = np.concatenate([np.sort(rng.choice(k, n, replace=False)) for n in lengths])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return sp.csr_matrix((np.ones(cols.size, np.float32), cols, indptr), shape=(len(lengths), k))


def _long_parts_matrix(rng):
    """Rows the CSR kernel cuts into thread-block parts (CSR_PART entries at most): 4 parts (uneven), exactly
    one part, two parts of one entry more than a part, one part of CSR_LONG + 1; short and empty rows between,
    and the last row long."""
    from accspmm._tf32 import CSR_LONG, CSR_PART

    k = 4 * CSR_PART
    lengths = np.zeros(301, np.int64)
    lengths[::3] = rng.integers(1, 40, 101)
    lengths[[10, 50, 51, 200, 300]] = [3 * CSR_PART + 7, CSR_PART, CSR_PART + 1, CSR_LONG + 1, 4 * CSR_PART]
    return _rows_of_lengths(lengths, k, rng)


def _narrow_csr_matrices():
    """Shapes for the narrow CSR kernel: windows of 0-375 blocks with a dense row, empty rows and a
    tail (m not a multiple of 8), a rectangular tall matrix, one column, a star's hub, 1 x 1."""
    rng = np.random.default_rng(11)
    tail = sp.random(1003, 517, density=0.01, format="csr", random_state=rng)
    tail = sp.vstack([tail, sp.csr_matrix((29, 517))]).tocsr()
    star = accspmm.datasets.adversarial("star", 20_000)
    out = {"long_window": long_window_matrix(), "empty_tail": tail,
           "tall": sp.random(4099, 3, density=0.6, format="csr", random_state=rng),
           "one_col": sp.csr_matrix(np.ones((77, 1), np.float32)), "star": star,
           "one": sp.csr_matrix(np.full((1, 1), 3.0, np.float32)), "parts": _long_parts_matrix(rng)}
    for name, A in out.items():
        A = sp.csr_matrix(A, dtype=np.float32)
        A.data = rng.integers(-8, 9, A.nnz).astype(np.float32)
        if name == "parts":  # the rows' lengths as drawn (at and just past a part's)
            A.data[A.data == 0] = 1
        A.eliminate_zeros()
        out[name] = A
    return out


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16, 32])
def test_narrow_csr_exact_every_lane_count(lanes):
    """The narrow CSR kernel (TF32 plans): every lane count on every shape, n = 1..4 and a vector, exact on
    integer data against scipy, in poisoned outputs, twice; n >= 5 stays on the Tensor Cores; the fast C
    call takes the later calls; the CSR arrays are A's original rows (a reordered plan gives the same)."""
    import torch

    for name, A in _narrow_csr_matrices().items():
        tuning = {"narrow": "csr", "csr_lanes": lanes}
        for reorder in ("none", "degree"):
            with accspmm.plan(A, device="gpu", reorder=reorder, tuning=tuning) as p:
                for n in (1, 2, 3, 4, 5):
                    B = int_dense(A.shape[1], n, seed=n)
                    Bt = torch.from_numpy(B).cuda()
                    for _ in range(2):
                        out = torch.full((A.shape[0], n), float("nan"), device="cuda")
                        p(Bt, out=out)
                        assert np.array_equal(out.cpu().numpy(), scipy_ref(A, B)), (name, reorder, n)
                    want = f"cuda_cores_csr{lanes}" if n <= 4 else "tensor_cores"
                    assert p.stats["schedule_by_n"][n]["kernel"] == want
                    if n in (2, 4):  # B off its rows' vector alignment: element loads, the same bits
                        Bm = torch.empty(A.shape[1] * n + 1, device="cuda")[1:].view(A.shape[1], n)
                        Bm.copy_(Bt)
                        assert torch.equal(p(Bm), out), (name, reorder, n, "misaligned")
                v = int_dense(A.shape[1], 1, seed=9)[:, 0]
                p(torch.from_numpy(v).cuda())  # registers n = 1 again where n = 5's split workspace regrew
                before = p._tf32.launcher.fast_calls
                got = p(torch.from_numpy(v).cuda()).cpu().numpy()
                assert got.shape == (A.shape[0],) and np.array_equal(got, scipy_ref(A, v[:, None])[:, 0])
                assert p._tf32.launcher.fast_calls == before + 1
                assert p.stats["narrow_csr_bytes"] >= 8 * (A.shape[0] + 1)
                # both launch orders ran above: parts first where a row has several (star, parts), else last
                assert p._tf32._csr_args(1)[6] == (name in ("star", "parts")), name
                lengths = np.diff(A.indptr)
                long_rows = int((lengths > accspmm._cuda.TF32_CSR_LONG).sum())
                assert p.stats["narrow_csr_long_rows"] == long_rows
                parts = -(-lengths[lengths > accspmm._cuda.TF32_CSR_LONG] // accspmm._tf32.CSR_PART)
                assert p.stats["narrow_csr_long_parts"] == parts.sum()
                if name in ("long_window", "star", "parts"):
                    assert long_rows > 0  # the thread-block rows are covered
                if name in ("star", "parts"):
                    assert parts.max() > 1  # rows of several parts, summed by the last to finish


def test_narrow_csr_duplicates_unsorted_int64_nonfinite_bound():
    """The CSR kernel's arrays come from the plan's CSR with duplicates summed (as the format's), rows in
    any column order and int64 indices; inf and NaN in B land where scipy puts them; random values meet the
    TF32 bound and repeat bit for bit; the rule's choice is recorded."""
    rng = np.random.default_rng(5)
    A = long_window_matrix()
    coo = A.tocoo()
    # every entry twice, the copies in descending column order: duplicates, rows unsorted, int64 indices
    rows = np.concatenate([coo.row, coo.row[::-1]])
    cols = np.concatenate([coo.col, coo.col[::-1]])
    vals = np.concatenate([coo.data, coo.data[::-1]])
    dup = csr_raw(A.shape[0], A.shape[1], rows, cols, vals, index_dtype=np.int64)
    want = (2 * A).astype(np.float32)
    with accspmm.plan(dup, device="gpu", tuning={"narrow": "csr"}) as p:
        for n in (1, 4):
            B = int_dense(A.shape[1], n, seed=n)
            assert np.array_equal(p(B), scipy_ref(want, B)), n
            B[5, 0] = np.inf
            B[2999, n - 1] = np.nan
            B[100, n // 2] = -np.inf
            assert np.array_equal(p(B), want @ B, equal_nan=True), n
        assert "CSR kernel (forced)" in p.stats["schedule_by_n"][1]["reason"]
    A = accspmm.datasets.load_bundled(np.float32)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    with accspmm.plan(A, device="gpu", tuning={"narrow": "csr"}) as p:
        for n in (1, 3):
            B = rng.standard_normal((A.shape[1], n)).astype(np.float32)
            C = p(B)
            assert error_bound_check(A, B, C, u=2.0**-11) < 1e-3
            assert np.array_equal(p(B), C)
    with pytest.raises(ValueError, match="narrow"):
        accspmm.plan(A, device="gpu", tuning={"narrow": "rows"})(np.ones((A.shape[1], 1), np.float32))
    with pytest.raises(ValueError, match="csr_lanes"):
        accspmm.plan(A, device="gpu", tuning={"narrow": "csr", "csr_lanes": 3})(np.ones((A.shape[1], 1), np.float32))


def test_narrow_csr_needs_calls_to_pay_its_upload():
    """A default plan takes the CSR kernel where the models predict it faster (a tall matrix of one column);
    with calls=1 (and in the one-shot accspmm.spmm) the saving does not pay for the CSR upload, so the
    narrow widths stay on BitTCF; both exact."""
    A = accspmm.datasets.adversarial("tall1", 200_000)
    A.data = np.random.default_rng(2).integers(-4, 5, A.nnz).astype(np.float32)
    A.eliminate_zeros()
    x = int_dense(A.shape[1], 1, seed=1)
    for calls, kernel in ((None, "cuda_cores_csr1"), (1, "cuda_cores")):
        with accspmm.plan(A, device="gpu", calls=calls) as p:
            assert np.array_equal(p(x), scipy_ref(A, x))
            assert p.stats["schedule_by_n"][1]["kernel"] == kernel
            assert ("narrow_csr_bytes" in p.stats) == (calls is None)
    assert np.array_equal(accspmm.spmm(A, x[:, 0], device="gpu"), scipy_ref(A, x)[:, 0])


def test_narrow_csr_nonfinite_values_of_a():
    """Stored inf, -inf and NaN in A (one NaN whose payload is in the 13 bits that TF32 rounding drops) give
    scipy's non-finite entries on the CSR kernel as on the BitTCF one: A is rounded to TF32 as the format
    build rounds it (non-finite values as they are)."""
    A = _narrow_csr_matrices()["empty_tail"]
    low_nan = np.array([0x7F800001], np.uint32).view(np.float32)[0]
    A.data[[0, 7, 19, 40]] = [np.inf, -np.inf, np.nan, low_nan]
    for narrow in ("csr", "bittcf"):
        with accspmm.plan(A, device="gpu", tuning={"narrow": narrow}) as p:
            for n in (1, 3):
                B = int_dense(A.shape[1], n, seed=n)
                assert np.array_equal(p(B), A @ B, equal_nan=True), (narrow, n)


def _bound_and_same_bits(A, n, tuning, rng):
    """A with random values times a random B (n columns) on plans with ``tuning``: within the TF32 bound, and
    the same bits on every call, in another plan and on two streams."""
    import torch

    A = A.copy()
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B = rng.standard_normal((A.shape[1], n)).astype(np.float32)
    with accspmm.plan(A, device="gpu", tuning=tuning) as p, accspmm.plan(A, device="gpu", tuning=tuning) as q:
        C = p(B)
        assert error_bound_check(A, B, C, u=2.0**-11) < 1e-3
        assert np.array_equal(p(B), C) and np.array_equal(q(B), C)
        Bt = torch.from_numpy(B).cuda()
        outs = []
        for _ in range(2):
            st = torch.cuda.Stream()
            with torch.cuda.stream(st):
                outs.append(p(Bt))
        torch.cuda.synchronize()
        assert all(np.array_equal(o.cpu().numpy(), C) for o in outs)


def test_narrow_csr_long_parts_nonfinite_bound_deterministic():
    """Rows cut into thread-block parts: inf in one part and -inf in another give scipy's NaN, inf alone its
    inf; random values meet the TF32 bound and give the same bits on every call, on two streams and in
    another plan (the parts are summed in part order, whichever finishes last)."""
    from accspmm._tf32 import CSR_PART

    rng = np.random.default_rng(21)
    A = _long_parts_matrix(rng)
    row10 = A.indices[A.indptr[10]:A.indptr[11]]  # 4 parts of about 3,073 entries
    with accspmm.plan(A, device="gpu", tuning={"narrow": "csr"}) as p:
        for n in (1, 4):
            B = int_dense(A.shape[1], n, seed=n)
            B[row10[5], 0] = np.inf  # part 0
            B[row10[-5], 0] = -np.inf  # part 3
            B[A.indices[A.indptr[300] + CSR_PART // 2], n - 1] = np.inf  # row 300's part 0 only (where n > 1)
            got, want = p(B), A @ B
            assert np.isnan(got[10, 0]) and np.array_equal(got, want, equal_nan=True), n
    _bound_and_same_bits(A, 3, {"narrow": "csr"}, rng)


def _half_outputs_exact(p, A, B, prec, tag, misaligned=True):
    """p(B) for an integer NumPy B in half and float32 outputs, poisoned first: exact against scipy's product of
    the format's operands rounded once to the output; ``misaligned``: a B one element off its alignment (element
    loads) gives the same bits."""
    import torch

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[prec]
    n = B.shape[1]
    Bt = torch.from_numpy(B).to(dt).cuda()
    for out_dtype, tdt in (("half", dt), ("float32", torch.float32)):
        out = torch.full((A.shape[0], n), float("nan"), dtype=tdt, device="cuda")
        p(Bt, out=out)
        assert np.array_equal(out.float().cpu().numpy(), half_ref(A, B, prec, out_dtype)), (*tag, out_dtype)
        if misaligned:
            Bm = torch.empty(A.shape[1] * n + 1, dtype=dt, device="cuda")[1:].view(A.shape[1], n)
            Bm.copy_(Bt)
            assert torch.equal(p(Bm, out=torch.empty_like(out)), out), (*tag, out_dtype, "misaligned")


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
def test_narrow_csr_half_plans(prec):
    """BitTCF FP16/BF16 plans run narrow widths on the CSR kernel too: lanes 1 and 8 on every shape (rows in
    parts included), n = 1..4, exact on integer data against scipy's product of the format's operands rounded
    once to the output (half C) and as float32 C, in poisoned outputs; inf and NaN in B as scipy; the default
    choice on a tall matrix takes the CSR kernel with the bits of the BitTCF narrow kernel."""
    import torch

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[prec]
    for name, A in _narrow_csr_matrices().items():
        for lanes in (1, 8):
            with accspmm.plan(A, device="gpu", precision=prec, format="bittcf",
                              tuning={"narrow": "csr", "csr_lanes": lanes}) as p:
                for n in (1, 2, 3, 4):  # n = 2, 4: B off its rows' vector alignment too (element loads)
                    _half_outputs_exact(p, A, int_dense(A.shape[1], n, seed=n), prec, (name, lanes, n), n in (2, 4))
                    assert p.stats["schedule_by_n"][n]["kernel"] == f"cuda_cores_csr{lanes}"
                if name == "parts":
                    B = int_dense(A.shape[1], 2, seed=5)
                    B[A.indices[A.indptr[10] + 5], 0] = np.inf  # row 10's first part
                    B[A.indices[A.indptr[11] - 5], 0] = -np.inf  # its last: NaN, as scipy's sum
                    got = p(torch.from_numpy(B).to(dt).cuda(), out=torch.empty(A.shape[0], 2, device="cuda"))
                    assert np.array_equal(got.cpu().numpy(), (A @ B).astype(np.float32), equal_nan=True)
    A = sp.random(200_000, 1, density=0.9, format="csr", random_state=np.random.default_rng(2), dtype=np.float32)
    A.data = np.random.default_rng(3).integers(-8, 9, A.nnz).astype(np.float32)
    B = torch.from_numpy(int_dense(1, 3, seed=4)).to(dt).cuda()
    with accspmm.plan(A, device="gpu", precision=prec, format="bittcf") as p, \
            accspmm.plan(A, device="gpu", precision=prec, format="bittcf", tuning={"narrow": "bittcf"}) as q:
        C = p(B)
        assert p.stats["schedule_by_n"][3]["kernel"].startswith("cuda_cores_csr")
        assert torch.equal(C, q(B))
        assert q.stats["schedule_by_n"][3]["kernel"] == "cuda_cores"


def _refuse_first_upload(monkeypatch) -> list:
    """Makes the next DeviceArray.upload of accspmm._tf32 raise MemoryError (the later ones run); returns the list
    that gets the refused array's shape."""
    real, refused = _tf32.DeviceArray.upload, []

    def upload(arr, device, stream):
        if not refused:
            refused.append(arr.shape)
            raise MemoryError("out of GPU memory allocating (test)")
        return real(arr, device, stream)

    monkeypatch.setattr(_tf32.DeviceArray, "upload", staticmethod(upload))
    return refused


@pytest.mark.parametrize("n, tuning, fallback, name", [
    (2, {"narrow": "csr"}, "cuda_cores", "parts"),  # the build's CSR kept: the narrow parts' upload fails
    (2, {"narrow": "csr", "build": "cpu"}, "cuda_cores", "empty_tail"),  # no GPU build: A's CSR's upload fails
    (8, {"wide": "csr"}, "tensor_cores", "wide_parts"),  # kept: the wide kernel's parts' upload fails
    (8, {"wide": "csr", "build": "cpu"}, "tensor_cores", "wide_parts")])
def test_narrow_csr_upload_out_of_memory_keeps_bittcf(monkeypatch, n, tuning, fallback, name):
    """Where A's CSR or its long rows' parts find no GPU memory at the first CSR call (MemoryError from the
    upload), the plan runs that width's BitTCF kernel instead (the narrow one, or the Tensor Cores), says so, and
    stays exact; a refused CSR is freed with all it held, refused parts leave A's CSR (kept by the build) for the
    widths that use it."""
    A = (_narrow_csr_matrices() if "narrow" in tuning else _wide_csr_matrices())[name]
    with accspmm.plan(A, device="gpu", tuning=tuning) as p:
        failed = _refuse_first_upload(monkeypatch)  # the first upload of the CSR kernels' arrays
        B = int_dense(A.shape[1], n, seed=4)
        assert np.array_equal(p(B), scipy_ref(A, B))
        monkeypatch.undo()
        # the hook refused A's offsets where no GPU build kept A's CSR, else the long rows' parts
        assert failed and (failed[0] == (A.shape[0] + 1,)) == ("build" in tuning), failed
        report = p.stats["schedule_by_n"][n]
        assert report["kernel"] == fallback and "no GPU memory" in report["reason"]
        held = [key for key in p._tf32.dev if isinstance(key, str) and key.startswith("csr_")]
        assert (held == []) if "build" in tuning else not any("parts" in key for key in held), held
        assert np.array_equal(p(B), scipy_ref(A, B)) and p.stats["schedule_by_n"][n]["kernel"] == fallback


def test_csr_parts_out_of_memory_leaves_the_running_widths(monkeypatch):
    """A wide width runs on the CSR kernel (A's CSR kept from the build); then the narrow kernel's parts find no
    GPU memory at n = 2's first call: n = 2 runs on BitTCF's narrow kernel, and n = 8's registered call still reads
    A's CSR, exact (the CSR is not freed under it)."""
    A = _narrow_csr_matrices()["parts"]
    with accspmm.plan(A, device="gpu", tuning={"narrow": "csr", "wide": "csr"}) as p:
        B8, B2 = int_dense(A.shape[1], 8, seed=1), int_dense(A.shape[1], 2, seed=2)
        assert np.array_equal(p(B8), scipy_ref(A, B8))
        assert p.stats["schedule_by_n"][8]["kernel"].startswith("cuda_cores_csr_wide") and "csr_offsets" in p._dev

        refused = _refuse_first_upload(monkeypatch)  # the first upload of n = 2's first call: the narrow parts
        assert np.array_equal(p(B2), scipy_ref(A, B2))
        monkeypatch.undo()
        assert refused == [(_tf32.csr_long_parts(A.indptr.astype(np.int64)).size,)]
        assert p.stats["schedule_by_n"][2]["kernel"] == "cuda_cores" and "csr_long_parts" not in p._dev
        assert "csr_offsets" in p._dev and "csr_block" in p._dev  # what n = 8's launch reads
        for _ in range(2):
            assert np.array_equal(p(B8), scipy_ref(A, B8)) and np.array_equal(p(B2), scipy_ref(A, B2))
        assert p.stats["schedule_by_n"][8]["kernel"].startswith("cuda_cores_csr_wide")


def _graph_replays_exact(A, n, tuning):
    """A CUDA graph captured after the warm-up call of a plan with ``tuning`` (width n) replays it exactly on new
    values of B, twice (a replay leaves its counters as it found them)."""
    import torch

    p = accspmm.plan(A, device="gpu", tuning=tuning)
    B = torch.from_numpy(int_dense(A.shape[1], n, seed=1)).cuda()
    out = torch.empty(A.shape[0], n, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        p(B, out=out)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        p(B, out=out)
    for seed in (2, 3):
        out.fill_(float("nan"))
        B.copy_(torch.from_numpy(int_dense(A.shape[1], n, seed=seed)))
        g.replay()
        torch.cuda.synchronize()
        assert np.array_equal(out.cpu().numpy(), scipy_ref(A, int_dense(A.shape[1], n, seed=seed))), tuning
    p.close()


def test_narrow_csr_cuda_graph():
    """A CUDA graph captured after the warm-up call replays the CSR kernel (no allocation in it)."""
    for name in ("empty_tail", "parts"):  # parts: the long rows' workspace is the graph's own
        _graph_replays_exact(_narrow_csr_matrices()[name], 2, {"narrow": "csr"})


def _wide_csr_matrices():
    """Shapes for the wide CSR kernel: the narrow kernel's (empty rows and tail, a tall matrix, one column, a
    star's hub, 1 x 1, rows of thousands of entries) and rows at and around CSR_WIDE_LONG and CSR_WIDE_PART
    (one entry more than a part, exactly two parts, seven and a bit), the last row long."""
    from accspmm._tf32 import CSR_WIDE_LONG, CSR_WIDE_PART

    out = _narrow_csr_matrices()
    rng = np.random.default_rng(12)
    k = 700
    lengths = rng.integers(0, 20, 203)
    lengths[::7] = 0
    lengths[[0, 5, 6, 7, 100, 202]] = [CSR_WIDE_LONG, CSR_WIDE_LONG + 1, 2 * CSR_WIDE_PART, 2 * CSR_WIDE_PART + 1,
                                       7 * CSR_WIDE_PART + 3, 500]
    A = _rows_of_lengths(lengths, k, rng)
    A.data = rng.integers(1, 9, A.nnz).astype(np.float32)
    out["wide_parts"] = A
    return out


@pytest.mark.parametrize("n", [5, 7, 8, 12, 16, 17, 20, 32, 33, 64, 100, 128, 130, 257])
def test_wide_csr_exact_every_lane_count(n):
    """The wide CSR kernel (forced: tuning={"wide": "csr"}) at every lane count (2 lanes at n = 5-8, 4 at 9-16,
    8 at 17-32 (the lean loads at 20 and 32, lanes past n clamped at 20), 16, then 32 in one or several column
    slices), n a multiple of 4 or not, on every shape: exact on integer
    data against scipy in poisoned outputs, twice; a B off its 16-byte alignment (element loads) gives the
    same bits; the fast C call takes the next call; the stats say which kernel ran."""
    import torch

    from accspmm._tf32 import csr_wide_lanes

    for name, A in _wide_csr_matrices().items():
        with accspmm.plan(A, device="gpu", tuning={"wide": "csr"}) as p:
            B = int_dense(A.shape[1], n, seed=n)
            Bt = torch.from_numpy(B).cuda()
            want = scipy_ref(A, B)
            for _ in range(2):
                out = torch.full((A.shape[0], n), float("nan"), device="cuda")
                p(Bt, out=out)
                assert np.array_equal(out.cpu().numpy(), want), (name, n)
            assert p.stats["schedule_by_n"][n]["kernel"] == f"cuda_cores_csr_wide{csr_wide_lanes(n)}"
            Bm = torch.empty(A.shape[1] * n + 1, device="cuda")[1:].view(A.shape[1], n)
            Bm.copy_(Bt)
            assert torch.equal(p(Bm), out), (name, n, "misaligned")
            before = p._tf32.launcher.fast_calls
            again = torch.full_like(out, float("nan"))
            p(Bt, out=again)
            assert p._tf32.launcher.fast_calls == before + 1 and torch.equal(again, out)


def _assert_nonfinite_in_parts(p, A, n, dt):
    """p(B) in float32 C for B of dtype ``dt`` with inf in part 0 and -inf in the last part of row 100 of
    ``_wide_csr_matrices()["wide_parts"]`` (7 parts and a bit): NaN there, and every entry as scipy's."""
    import torch

    B = int_dense(A.shape[1], n, seed=5)
    row100 = A.indices[A.indptr[100]:A.indptr[101]]
    B[row100[3], 0] = np.inf  # part 0
    B[row100[-3], 0] = -np.inf  # the last part: NaN, as scipy's sum
    got = p(torch.from_numpy(B).to(dt).cuda(), out=torch.empty(A.shape[0], n, device="cuda"))
    assert np.array_equal(got.cpu().numpy(), (A @ B).astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
def test_wide_csr_half_plans(prec):
    """BitTCF FP16/BF16 plans run the wide CSR kernel too (forced here): n = 5-130 on every shape (20 and 32: the
    lean loads of 8 lanes a row, lanes past n clamped at 20), exact on integer data against scipy's product of
    the format's operands rounded once to the output (half C) and as float32 C, in poisoned outputs; a B off its
    8-byte alignment gives the same bits; inf and NaN in B as scipy."""
    import torch

    from accspmm._tf32 import csr_wide_lanes

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[prec]
    for name, A in _wide_csr_matrices().items():
        with accspmm.plan(A, device="gpu", precision=prec, format="bittcf", tuning={"wide": "csr"}) as p:
            for n in (5, 8, 12, 20, 32, 33, 130):
                _half_outputs_exact(p, A, int_dense(A.shape[1], n, seed=n), prec, (name, n))
                assert p.stats["schedule_by_n"][n]["kernel"] == f"cuda_cores_csr_wide{csr_wide_lanes(n)}"
            if name == "wide_parts":
                _assert_nonfinite_in_parts(p, A, 8, dt)


def test_wide_csr_nonfinite_bound_deterministic_streams():
    """Rows in parts on the wide CSR kernel: inf in one part and -inf in another give scipy's NaN, inf alone
    its inf; random values meet the TF32 bound and give the same bits on every call, on two streams and in
    another plan (parts summed in part order, whichever finishes last)."""
    rng = np.random.default_rng(31)
    A = _wide_csr_matrices()["wide_parts"]
    row100 = A.indices[A.indptr[100]:A.indptr[101]]  # 7 parts and a bit
    with accspmm.plan(A, device="gpu", tuning={"wide": "csr"}) as p:
        for n in (8, 13, 128):
            B = int_dense(A.shape[1], n, seed=n)
            B[row100[3], 0] = np.inf  # part 0
            B[row100[-3], 0] = -np.inf  # the last part
            B[A.indices[A.indptr[6] + 40], n - 1] = np.nan  # row 6's part 1 only
            got, want = p(B), A @ B
            assert np.isnan(got[100, 0]) and np.array_equal(got, want, equal_nan=True), n
    _bound_and_same_bits(A, 12, {"wide": "csr"}, rng)


@pytest.mark.parametrize("prec", ["tf32", "fp16", "bf16"])
def test_wide_csr_eight_columns_a_lane(prec):
    """tuning={"csr_lane_cols": 8}: the wide CSR kernel's half lanes of 8 columns (n a multiple of 8 from 16: 2 lanes
    of 8 at n = 16, 16 at 128, several slices at 264) give the bits of the lanes of 4 on every shape (long rows in
    one and several parts, empty rows and tail, a hub), exact on integer data against scipy in poisoned half and
    float32 outputs, twice; n not a multiple of 8 (and n = 8: too few lanes) keeps the lanes of 4 (stats), as a B
    or C off its 16-byte alignment does (the same bits); inf and NaN in B as scipy in a row of parts."""
    import torch

    dt = {"tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[prec]
    kw = {} if prec == "tf32" else {"precision": prec, "format": "bittcf"}
    outs = (torch.float32,) if prec == "tf32" else (dt, torch.float32)
    for name, A in _wide_csr_matrices().items():
        m, k = A.shape
        with accspmm.plan(A, device="gpu", tuning={"wide": "csr", "csr_lane_cols": 8}, **kw) as p8, \
                accspmm.plan(A, device="gpu", tuning={"wide": "csr", "csr_lane_cols": 4}, **kw) as p4:
            for n in (8, 16, 24, 36, 64, 72, 100, 128, 264):
                B = int_dense(k, n, seed=n)
                Bt = torch.from_numpy(B).to(dt).cuda()
                for odt in outs:
                    kind = "half" if odt == dt else "float32"
                    want = scipy_ref(A, B) if prec == "tf32" else half_ref(A, B, prec, kind)
                    got = []
                    for p in (p8, p8, p4):
                        out = torch.full((m, n), float("nan"), dtype=odt, device="cuda")
                        p(Bt, out=out)
                        assert np.array_equal(out.float().cpu().numpy(), want), (name, n, odt)
                        got.append(out)
                    assert torch.equal(got[0], got[2]), (name, n, odt)
                    Bm = torch.empty(k * n + 8, dtype=dt, device="cuda")[8 // dt.itemsize:][:k * n].view(k, n)
                    Bm.copy_(Bt)  # 8 bytes off: the lanes of 4 (half B) or element loads (float32 B)
                    Cm = torch.full((m * n + 4,), float("nan"), dtype=odt, device="cuda")[2:][:m * n].view(m, n)
                    p8(Bm, out=Cm)
                    assert torch.equal(Cm, got[0]), (name, n, odt, "misaligned")
                assert p8.stats["schedule_by_n"][n]["csr_lane_cols"] == (8 if n > 8 and n % 8 == 0 else 4), (name, n)
                assert p4.stats["schedule_by_n"][n]["csr_lane_cols"] == 4, (name, n)
            if name == "wide_parts":
                _assert_nonfinite_in_parts(p8, A, 64, dt)


def test_wide_csr_lane_cols_bad_value():
    """tuning["csr_lane_cols"] other than 4 or 8 is a ValueError naming the key, for TF32 and half plans."""
    A = _uniform_rows(64, 3, 4)
    for kw in ({}, {"precision": "fp16", "format": "bittcf"}):
        for bad in (0, 6, 16, "8"):
            with pytest.raises(ValueError, match="csr_lane_cols"):
                accspmm.plan(A, device="gpu", tuning={"csr_lane_cols": bad}, **kw)


def test_wide_csr_eight_columns_default_adversarial():
    """Default FP16/BF16 plans on 6,000 rows of 40 random columns with a dense row (4,000 columns, under
    CSR_WIDE_SMALL_LONGEST: its parts reduced in order), a hub column and an empty tail of 500 rows: the rule gives the wide CSR kernel lanes of 8 at
    n = 64, 128 and 200, and of 4 at n = 100 (not a multiple of 8); exact against scipy in half and float32 C, and
    the same bits as the lanes of 4 forced."""
    import torch

    U = _uniform_rows(6000, 21).tolil()
    U[77, :4000] = 1  # a dense row
    U[:, 5] = 2  # a hub column
    U[5500:, :] = 0  # an empty tail
    U = sp.csr_matrix(U)
    U.eliminate_zeros()
    for prec in ("fp16", "bf16"):
        dt = torch.float16 if prec == "fp16" else torch.bfloat16
        with accspmm.plan(U, device="gpu", precision=prec, format="bittcf") as p, \
                accspmm.plan(U, device="gpu", precision=prec, format="bittcf", tuning={"csr_lane_cols": 4}) as q:
            for n in (64, 100, 128, 200):
                B = int_dense(U.shape[1], n, seed=n)
                Bt = torch.from_numpy(B).to(dt).cuda()
                sched = None
                for odt, kind in ((dt, "half"), (torch.float32, "float32")):
                    C = p(Bt, out=torch.full((U.shape[0], n), float("nan"), dtype=odt, device="cuda"))
                    assert np.array_equal(C.float().cpu().numpy(), half_ref(U, B, prec, kind)), (prec, n, kind)
                    assert torch.equal(C, q(Bt, out=torch.empty_like(C))), (prec, n, kind)
                    sched = p.stats["schedule_by_n"][n]
                if sched["kernel"].startswith("cuda_cores_csr_wide"):
                    assert sched["csr_lane_cols"] == (4 if n % 8 else 8), (prec, n)
                else:  # the one-wave and rows regimes decide the kernel; 6,000 rows of 41 stay in the rows one
                    raise AssertionError(f"{prec} n={n}: {sched['kernel']} ({sched['reason']})")


def _uniform_rows(m, seed, per_row=40):
    """m x m, ``per_row`` uniform random columns a row (duplicates summed), integer values in [-4, 4] (zeros
    dropped)."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(m), per_row)
    U = sp.csr_matrix((rng.integers(-4, 5, rows.size).astype(np.float32), (rows, rng.integers(0, m, rows.size))),
                      shape=(m, m))
    U.sum_duplicates()
    U.eliminate_zeros()
    return U


def test_wide_csr_default_rule_and_bittcf():
    """By default a tall matrix of one column (BitTCF's blocks one entry each) runs n = 8 and 16 on the wide
    CSR kernel and n = 32 on the Tensor Cores (by the models); tuning={"wide": "bittcf"} keeps n = 8 on the
    Tensor Cores; dense 8 x 8 blocks keep n = 16 there too; uniform random columns run n = 24-32 on the CSR
    kernel and n = 33 on the Tensor Cores (CSR_WIDE_MAX_N); every result exact; with calls=1 the CSR upload
    does not pay; FP16 BitTCF plans take the CSR kernel at n = 8 and 12 the same way, the same bits as the
    Tensor Cores' (integer data, float32 C)."""
    A = accspmm.datasets.adversarial("tall1", 200_000)
    A.data = np.random.default_rng(2).integers(-4, 5, A.nnz).astype(np.float32)
    A.eliminate_zeros()
    with accspmm.plan(A, device="gpu") as p, accspmm.plan(A, device="gpu", tuning={"wide": "bittcf"}) as q:
        for n, kernel in ((8, "cuda_cores_csr_wide2"), (16, "cuda_cores_csr_wide4"), (32, "tensor_cores")):
            B = int_dense(1, n, seed=n)
            assert np.array_equal(p(B), scipy_ref(A, B)) and np.array_equal(q(B), scipy_ref(A, B)), n
            assert p.stats["schedule_by_n"][n]["kernel"] == kernel, n
            assert q.stats["schedule_by_n"][n]["kernel"] == "tensor_cores", n
        assert "wide CSR kernel: CSR predicts" in p.stats["schedule_by_n"][8]["reason"]
    with accspmm.plan(A, device="gpu", calls=1) as p:
        B = int_dense(1, 8, seed=1)
        assert np.array_equal(p(B), scipy_ref(A, B)) and p.stats["schedule_by_n"][8]["kernel"] == "tensor_cores"
    dense = sp.csr_matrix(sp.kron(sp.eye(3000), np.ones((8, 8))), dtype=np.float32)
    with accspmm.plan(dense, device="gpu") as p:
        B = int_dense(dense.shape[1], 16, seed=3)
        assert np.array_equal(p(B), scipy_ref(dense, B))
        assert p.stats["schedule_by_n"][16]["kernel"] == "tensor_cores"
    with pytest.raises(ValueError, match="wide"):
        accspmm.plan(A, device="gpu", tuning={"wide": "rows"})(int_dense(1, 8, seed=1))
    U = _uniform_rows(8000, 3)  # the CSR kernel up to n = 32, not above
    with accspmm.plan(U, device="gpu") as p, accspmm.plan(U, device="gpu", tuning={"wide": "bittcf"}) as q:
        # n = 30 would read B element by element: the Tensor Cores (CSR_WIDE_ELEMENT_MAX_N)
        for n, kernel in ((24, "cuda_cores_csr_wide8"), (32, "cuda_cores_csr_wide8"), (30, "tensor_cores"),
                          (33, "tensor_cores")):
            B = int_dense(8000, n, seed=n)
            assert np.array_equal(p(B), scipy_ref(U, B)) and np.array_equal(q(B), scipy_ref(U, B)), n
            assert p.stats["schedule_by_n"][n]["kernel"] == kernel, n
    import torch  # FP16: n = 30 too (the half Tensor Cores pad it to 32 columns first)

    with accspmm.plan(U, device="gpu", precision="fp16", format="bittcf") as p:
        for n, kernel in ((30, "cuda_cores_csr_wide8"), (32, "cuda_cores_csr_wide8"), (33, "tensor_cores")):
            B = int_dense(8000, n, seed=n)
            C = p(torch.from_numpy(B).half().cuda(), out=torch.empty(8000, n, device="cuda"))
            assert np.array_equal(C.cpu().numpy(), half_ref(U, B, "fp16", "float32")), n
            assert p.stats["schedule_by_n"][n]["kernel"] == kernel, n
    # FP16 BitTCF plans: the same rule on their own constants; the bits of the forced Tensor Cores
    with accspmm.plan(A, device="gpu", precision="fp16", format="bittcf") as p, \
            accspmm.plan(A, device="gpu", precision="fp16", format="bittcf", tuning={"wide": "bittcf"}) as q:
        for n, kernel in ((8, "cuda_cores_csr_wide2"), (12, "cuda_cores_csr_wide4"), (32, "tensor_cores")):
            B = int_dense(1, n, seed=n)
            Bt = torch.from_numpy(B).half().cuda()
            C = p(Bt, out=torch.empty(A.shape[0], n, device="cuda"))
            assert np.array_equal(C.cpu().numpy(), half_ref(A, B, "fp16", "float32")), n
            assert torch.equal(C, q(Bt, out=torch.empty_like(C))), n
            assert p.stats["schedule_by_n"][n]["kernel"] == kernel and q.stats["schedule_by_n"][n]["kernel"] == \
                "tensor_cores", n


def test_wide_csr_small_regime():
    """Above n = 32 (accspmm._tf32.CSR_WIDE_SMALL_*): uniform random columns, 40 a row on 8,000 rows (every row
    group resident at once on a reference H100, BitTCF's blocks about 8 entries each) run n = 36, 64, 128 and 256
    on the wide CSR kernel; n = 192 (its last 128-column slice half used), 202 (not a multiple of 4) and 260 (above
    CSR_WIDE_SMALL_MAX_N) on the Tensor Cores; 9,000 such rows exceed one wave at n = 128 (32 lanes a row) but not
    at n = 64 (16), and stay on the CSR kernel there (CSR_WIDE_ROWS_MEAN: 40 entries a row), where 20,000 rows of 10
    go to the Tensor Cores; every result exact in TF32, FP16 and BF16 (integer data, float32 C for the half
    formats)."""
    import torch

    cases = ((_uniform_rows(8000, 4), ((36, "cuda_cores_csr_wide16"), (64, "cuda_cores_csr_wide16"),
                                 (128, "cuda_cores_csr_wide32"), (256, "cuda_cores_csr_wide32"), (192, "tensor_cores"),
                                 (202, "tensor_cores"), (260, "tensor_cores"))),
             (_uniform_rows(9000, 5), ((64, "cuda_cores_csr_wide16"), (128, "cuda_cores_csr_wide32"))),
             (_uniform_rows(20_000, 6, 10), ((64, "tensor_cores"), (128, "tensor_cores"))))
    for U, widths in cases:
        m = U.shape[0]
        with accspmm.plan(U, device="gpu") as p:
            for n, kernel in widths:
                B = int_dense(m, n, seed=n)
                assert np.array_equal(p(B), scipy_ref(U, B)), n
                assert p.stats["schedule_by_n"][n]["kernel"] == kernel, n
                if kernel != "tensor_cores":
                    assert p.stats["schedule_by_n"][n]["csr_lane_cols"] == 4, n  # TF32 keeps lanes of 4
            assert "entries a row" in p.stats["schedule_by_n"][widths[0][0]]["reason"]
        for prec in ("fp16", "bf16"):
            dt = torch.float16 if prec == "fp16" else torch.bfloat16
            with accspmm.plan(U, device="gpu", precision=prec, format="bittcf") as p:
                for n, kernel in widths:
                    if n % 4:
                        continue
                    B = int_dense(m, n, seed=n)
                    C = p(torch.from_numpy(B).to(dt).cuda(), out=torch.empty(m, n, device="cuda"))
                    assert np.array_equal(C.cpu().numpy(), half_ref(U, B, prec, "float32")), (prec, n)
                    assert p.stats["schedule_by_n"][n]["kernel"] == kernel, (prec, n)
                    if kernel != "tensor_cores":  # 40 entries a row: 8 columns a lane where n is a multiple of 8
                        assert p.stats["schedule_by_n"][n]["csr_lane_cols"] == (8 if n % 8 == 0 else 4), (prec, n)


def test_csr_kernels_take_the_builds_upload():
    """A GPU TF32 plan of at most CSR_KEEP_MAX_ROWS rows keeps the BitTCF build's upload of A's CSR, and its CSR
    kernels (n = 1 narrow, n = 64 in the one-wave regime) read that instead of uploading A again: the values
    TF32-rounded in place, the same bits as a plan built on the host (which uploads them) on random values,
    exact on integers; rows whose columns do not ascend (the device-checked path accepts them) or duplicates
    (summed by a second build) give the canonical CSR; a plan of more rows keeps nothing."""
    import torch

    rng = np.random.default_rng(11)
    m = 3000
    rows = np.repeat(np.arange(m), 12)
    cols = rng.integers(0, m, rows.size)
    base = sp.csr_matrix((rng.standard_normal(rows.size).astype(np.float32), (rows, cols)), shape=(m, m))
    base.sum_duplicates()
    coo = base.tocoo()
    flip = np.argsort(coo.row * m - coo.col, kind="stable")  # every row's columns descending
    unsorted = csr_raw(m, m, coo.row[flip], coo.col[flip], coo.data[flip])
    dups = csr_raw(m, m, np.concatenate([coo.row, coo.row[:50]]), np.concatenate([coo.col, coo.col[:50]]),
                   np.concatenate([coo.data, np.ones(50, np.float32)]))
    for A, kept in ((base, True), (unsorted, False), (dups, True)):
        with accspmm.plan(A, device="gpu") as p, accspmm.plan(A, device="gpu", tuning={"build": "cpu"}) as q:
            assert "csr_block" in p._dev and "csr_block" not in q._dev  # freed at the first CSR call if not canonical
            for n, kernel in ((1, "cuda_cores_csr"), (64, "cuda_cores_csr_wide16")):
                B = torch.from_numpy(rng.standard_normal((m, n)).astype(np.float32)).cuda()
                C = p(B)
                assert p.stats["schedule_by_n"][n]["kernel"].startswith(kernel), n
                assert torch.equal(C, q(B)), n
                Ai = sp.csr_matrix(A, copy=True)  # integer values, entries in A's order
                Ai.data = np.rint(Ai.data * 4).astype(np.float32)
                ref = sp.csr_matrix(Ai, copy=True)
                ref.sum_duplicates()
                Bi = int_dense(m, n, seed=n)
                with accspmm.plan(Ai, device="gpu") as r:
                    assert np.array_equal(r(Bi), scipy_ref(ref, Bi)) and ("csr_block" in r._dev) == kept, n
            assert p.stats["narrow_csr_from_build"] == kept and not q.stats["narrow_csr_from_build"]
            assert ("csr_block" in p._dev) == kept
    tall = sp.csr_matrix(sp.eye(_tf32.CSR_KEEP_MAX_ROWS + 1, dtype=np.float32))
    with accspmm.plan(tall, device="gpu") as p:
        assert "csr_block" not in p._dev


def test_wide_csr_part_lengths():
    """The wide CSR kernel's long rows in parts of any length (tuning={"csr_part": p}): exact on integer data in
    poisoned outputs, inf and NaN as scipy, in TF32 and FP16; by default parts of 64 where the groups at 32
    exceed a reference wave (many rows of 40-90 entries at n = 32), of 32 below it (n = 8, or few rows), as
    stats["schedule_by_n"][n]["csr_part"] says."""
    import torch

    rng = np.random.default_rng(12)
    lengths = rng.integers(0, 20, 300)
    lengths[[0, 7, 8, 150, 299]] = [33, 64, 65, 129, 1000]
    A = _rows_of_lengths(lengths, 3000, rng)
    A.data = rng.integers(-4, 5, A.nnz).astype(np.float32)
    for part in (1, 7, 32, 64, 128, 2000):
        with accspmm.plan(A, device="gpu", tuning={"wide": "csr", "csr_part": part}) as p:
            for n in (5, 24, 40):
                B = int_dense(3000, n, seed=n)
                out = torch.full((300, n), float("nan"), device="cuda")
                p(torch.from_numpy(B).cuda(), out=out)
                assert np.array_equal(out.cpu().numpy(), scipy_ref(A, B)), (part, n)
                assert p.stats["schedule_by_n"][n]["csr_part"] == part
            Bx = int_dense(3000, 24, seed=1).astype(np.float32)
            row = A.indices[A.indptr[299]:A.indptr[300]]
            Bx[row[3], 0], Bx[row[-3], 0], Bx[row[500], 1] = np.inf, -np.inf, np.nan  # a row of 1,000 in parts
            assert np.array_equal(p(Bx), (A @ Bx).astype(np.float32), equal_nan=True), part
        half = {"precision": "fp16", "format": "bittcf", "tuning": {"wide": "csr", "csr_part": part}}
        with accspmm.plan(A, device="gpu", **half) as p:
            _half_outputs_exact(p, A, int_dense(3000, 24, seed=2), "fp16", part)
    with pytest.raises(ValueError, match="csr_part"):
        accspmm.plan(A, device="gpu", tuning={"csr_part": 0})
    U = _rows_of_lengths(rng.integers(40, 90, 20_000), 20_000, rng)  # 20,000 rows in 40,000+ parts of 32
    U.data = rng.integers(-4, 5, U.nnz).astype(np.float32)
    with accspmm.plan(U, device="gpu", tuning={"wide": "csr"}) as p:
        for n, part in ((32, 64), (8, 32)):
            B = int_dense(20_000, n, seed=n)
            assert np.array_equal(p(B), scipy_ref(U, B)), n
            assert p.stats["schedule_by_n"][n]["csr_part"] == part, n


def test_wide_csr_cuda_graph():
    """A CUDA graph captured after the warm-up call replays the wide CSR kernel, rows in parts included (the
    graph's own workspace)."""
    _graph_replays_exact(_wide_csr_matrices()["wide_parts"], 12, {"wide": "csr"})


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_narrow_widths_nonfinite_bound_and_deterministic(n):
    """At narrow widths: inf and NaN in B land where scipy puts them (split windows too: cap 2), random
    values meet the TF32 bound, and repeated calls give the same bits."""
    A = long_window_matrix()
    with accspmm.plan(A, device="gpu", reorder="none", tuning={"cap": 2}) as p:
        B = int_dense(A.shape[1], n, seed=3)
        B[5, 0] = np.inf
        B[2999, n - 1] = np.nan
        B[100, n // 2] = -np.inf
        assert np.array_equal(p(B), A @ B, equal_nan=True)
    A = accspmm.datasets.load_bundled(np.float32)
    rng = np.random.default_rng(n)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B = rng.standard_normal((A.shape[1], n)).astype(np.float32)
    p = accspmm.plan(A, device="gpu")
    C = p(B)
    assert error_bound_check(A, B, C, u=2.0**-11) < 1e-3
    for _ in range(3):
        assert np.array_equal(p(B), C)

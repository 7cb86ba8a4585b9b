"""The BitTCF built on the GPU (cuda/bittcf_build.cu) against the C builder, array by array and bit
for bit: window offsets, block columns, masks, value offsets, values, and the TF32 kernel's packed
metadata and rounded values (accspmm._tf32.pack_meta / round_tf32 of the C builder's format).
Every real matrix (identity and reordered), the adversarial shapes, and odd shapes.  Marked `gpu`."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import _core, _half, _tf32, datasets
from accspmm._format import BitTCF
from accspmm._validate import as_csr
from conftest import (assert_bit_exact, assert_device_bittcf, int_dense, real_matrix_params, scipy_ref,
                      with_int_values)

pytestmark = pytest.mark.gpu


def _poisoned_arrays(monkeypatch):
    """Every array the build allocates through DeviceArray (perm, window offsets: ``ordered``, in the
    build's stream order) starts as 0xFF bytes, so that an array the build should write but does not
    (the identity permutation) cannot pass with what the pool's memory held before."""
    from accspmm import _cuda, _device_format

    class Poisoned(_device_format.DeviceArray):
        __slots__ = ()

        def __init__(self, shape, dtype, device, adopt=None):
            super().__init__(shape, dtype, device, adopt)
            if adopt is None:
                _cuda.memset(self.ptr, 0xFF, self.nbytes, None)

        @classmethod
        def ordered(cls, shape, dtype, device, stream):
            d = super().ordered(shape, dtype, device, stream)
            _cuda.memset(d.ptr, 0xFF, d.nbytes, stream)  # in the order of the build that follows
            return d

    monkeypatch.setattr(_device_format, "DeviceArray", Poisoned)


def _compare(A, perm=None, defer=False, methods=("sort", "ranks")):
    """Builds A (perm: None = identity) on the GPU by each method and with the C builder; asserts
    every array equal, the plan's perm included (poisoned first: the build writes the identity).
    defer: the build returns with its last steps queued (what plans do); to_host waits for them."""
    csr = as_csr(sp.csr_matrix(A, dtype=np.float32)).canonicalized()
    ref = BitTCF.from_csr(csr, perm)
    with pytest.MonkeyPatch.context() as mp:
        _poisoned_arrays(mp)
        _compare_each(csr, ref, perm, defer, methods)


def _compare_each(csr, ref, perm, defer, methods):
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF

    for method in methods:
        dev = {}
        try:
            g = DeviceBitTCF(csr, perm, dev, _cuda.get_device(), keep_blocks=True, defer=defer, method=method)
            assert g.method == (method if csr.nnz else "none")
            assert_device_bittcf(g, ref)
            np.testing.assert_array_equal(dev["perm"].to_host(), ref.perm)
            assert g.stats == {**ref.stats}
            assert g.num_blocks == ref.num_blocks
            # the half plans' format model: BSR16's blocks per block row counted from the device format
            m, k = csr.shape
            bo16 = _core.bsr16_count(m, k, csr.indptr, csr.indices, ref.perm)
            np.testing.assert_array_equal(_half._device_bsr16_count(_cuda, g, dev, _cuda.get_device()), bo16)
        finally:
            for arr in dev.values():
                arr.free()


@pytest.mark.parametrize("path", real_matrix_params())
def test_real_matrix_bit_identical(path):
    A = datasets.load_matrix(path, np.float32)
    A.data = np.random.default_rng(0).standard_normal(A.nnz).astype(np.float32)  # any float32 bits
    _compare(A)
    _compare(A, np.random.default_rng(1).permutation(A.shape[0]), defer=True)
    if A.nnz <= 2_000_000:
        _compare(A, accspmm.reorder(A, "affinity"))


@pytest.mark.parametrize("kind", datasets.ADVERSARIAL)
def test_adversarial_bit_identical(kind):
    A = datasets.adversarial(kind, 200_000)
    _compare(A, defer=True)
    _compare(A, accspmm.reorder(A, "degree"))


@pytest.mark.parametrize("shape,density", [((1, 1), 1.0), ((7, 3), 0.5), ((9, 1), 1.0), ((1, 1000), 0.3),
                                           ((100, 100), 0.0), ((0, 5), 0.0), ((5, 0), 0.0), ((37, 2000), 0.05),
                                           ((1000, 17), 0.2)])
def test_odd_shapes_bit_identical(shape, density):
    A = sp.random(*shape, density=density, format="csr", random_state=3, dtype=np.float32)
    _compare(A)
    _compare(A, defer=True)
    if shape[0] > 1:
        _compare(A, np.random.default_rng(2).permutation(shape[0]))


def test_empty_rows_and_windows_and_specials():
    rng = np.random.default_rng(4)
    A = sp.random(200, 300, density=0.05, format="lil", random_state=5, dtype=np.float32)
    A[16:40] = 0  # empty windows
    A[100] = 0
    A = A.tocsr()
    A.data[:5] = [np.inf, -np.inf, np.nan, 0.0, -0.0]  # stored non-finite values and signed zeros
    A.data[5:8] = [3.4e38, -3.4e38, 1e-45]  # rounding at the range ends
    _compare(A)
    _compare(A, rng.permutation(200))


@pytest.mark.parametrize("method", ["sort", "ranks"])
def test_duplicates_rejected(method):
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF
    from accspmm._validate import CSR

    csr = CSR((2, 4), np.array([0, 2, 3], np.int64), np.array([1, 1, 2], np.int32),
              np.ones(3, np.float32), True)  # claims canonical but has a duplicate
    dev = {}
    with pytest.raises(ValueError, match="duplicate"):
        DeviceBitTCF(csr, None, dev, _cuda.get_device(), method=method)
    for arr in dev.values():
        arr.free()


def test_ranks_hand_unsorted_rows_to_the_sort(monkeypatch):
    """The ranks need each row's columns ascending; a CSR whose rows are not (but hold no
    duplicate) goes to the sort, which orders every window itself: the arrays are the canonical
    CSR's, and the identity permutation is written although the ranks declined.  The same rows
    with a duplicate among them are rejected."""
    _poisoned_arrays(monkeypatch)
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF
    from accspmm._validate import CSR

    A = sp.random(300, 500, density=0.05, format="csr", random_state=8, dtype=np.float32)
    canon = as_csr(A).canonicalized()
    ref = BitTCF.from_csr(canon, None)
    rng = np.random.default_rng(9)
    idx, val = canon.indices.copy(), canon.data.copy()
    for i in range(canon.shape[0]):  # shuffle each row's entries (column with its value)
        a, b = canon.indptr[i], canon.indptr[i + 1]
        order = a + rng.permutation(b - a)
        idx[a:b], val[a:b] = idx[order], val[order]
    shuffled = CSR(canon.shape, np.asarray(canon.indptr, np.int64), idx, val, True)
    dev = {}
    try:
        g = DeviceBitTCF(shuffled, None, dev, _cuda.get_device(), keep_blocks=True, method="ranks")
        assert g.method == "sort"
        assert_device_bittcf(g, ref)
        np.testing.assert_array_equal(dev["perm"].to_host(), np.arange(canon.shape[0]))
    finally:
        for arr in dev.values():
            arr.free()
    idx[canon.indptr[5] + 1] = idx[canon.indptr[5]]  # a duplicate in a row of several entries
    assert canon.indptr[6] - canon.indptr[5] >= 2
    dev = {}
    with pytest.raises(ValueError, match="duplicate"):
        DeviceBitTCF(CSR(canon.shape, np.asarray(canon.indptr, np.int64), idx, val, True), None, dev,
                     _cuda.get_device(), method="ranks")
    for arr in dev.values():
        arr.free()


def test_auto_method_by_size():
    """Plans build small matrices by ranks and large ones by the sort (plan.stats says which)."""
    small = sp.random(2000, 2000, density=0.01, format="csr", random_state=1, dtype=np.float32)
    p = accspmm.plan(small, device="gpu")
    assert p.stats["build_gpu_method"] == "ranks"
    big = datasets.adversarial("hub", 3_000_000)
    assert big.nnz > 2**20
    assert accspmm.plan(big, device="gpu").stats["build_gpu_method"] == "sort"


def test_device_csr_input_same_as_host_input():
    """The build takes the CSR from the host (what plans do: one upload inside the build) or from
    device addresses; both give the same arrays.  A host array of the wrong type is a TypeError."""
    from accspmm import _cuda
    from accspmm._device import DeviceArray

    csr = as_csr(sp.random(300, 70, density=0.05, format="csr", dtype=np.float32, random_state=3)).canonicalized()
    m, k = csr.shape
    host = (np.asarray(csr.indptr, np.int64), csr.indices, csr.data)
    W = -(-m // 8)
    results = []
    for on_device in (False, True):
        ups = [DeviceArray.from_host(a, _cuda.get_device()) for a in host] if on_device else []
        wo = DeviceArray((W + 1,), np.int64, _cuda.get_device())
        hwo = np.empty(W + 1, np.int64)
        try:
            args = [u.ptr for u in ups] if on_device else list(host)
            out = _cuda.bittcf_gpu_build(m, k, csr.nnz, *args, None, wo.ptr, hwo, False, None)
            nb = out["num_blocks"]
            meta = DeviceArray((12 * nb,), np.int32, _cuda.get_device(), adopt=out["block_meta"])
            vals = DeviceArray((csr.nnz,), np.float32, _cuda.get_device(), adopt=out["values_tf32"])
            results.append((hwo.copy(), meta.to_host(), vals.to_host()))
            meta.free()
            vals.free()
        finally:
            for u in ups + [wo]:
                u.free()
    ref = BitTCF.from_csr(csr, None)
    for hwo, meta, vals in results:
        np.testing.assert_array_equal(hwo, ref.window_offsets)
        np.testing.assert_array_equal(meta, _tf32.pack_meta(ref))
        assert vals.view(np.uint32).tobytes() == _tf32.round_tf32(ref.values).view(np.uint32).tobytes()
    wo = DeviceArray((W + 1,), np.int64, _cuda.get_device())
    try:
        with pytest.raises(TypeError, match="indices must be a C-contiguous ndarray"):
            _cuda.bittcf_gpu_build(m, k, csr.nnz, host[0], host[1].astype(np.int64), host[2], None, wo.ptr,
                                   np.empty(W + 1, np.int64), False, None)
    finally:
        wo.free()


def test_pool_memory_reused_and_valid_across_streams(bundled_int):
    """Plans' device memory comes from the library's pool (cuda/device.cu): a closed plan's memory is
    reused by the next plan, which still computes exactly on a non-default stream."""
    torch = pytest.importorskip("torch")
    A = bundled_int
    B = int_dense(A.shape[1], 24)
    ref = scipy_ref(A, B)
    Bt = torch.from_numpy(B).cuda()
    s = torch.cuda.Stream()
    for _ in range(3):
        p = accspmm.plan(A, device="gpu")
        with torch.cuda.stream(s):
            C = p(Bt)
        s.synchronize()
        assert_bit_exact(C.cpu().numpy(), ref)
        p.close()


def test_deferred_build_first_call_on_other_streams():
    """A plan's GPU build returns with its last steps queued on the legacy stream and the first call
    waits for them before its launch.  A first call on a non-blocking stream (which the legacy
    stream does not order), right after plan(), of a matrix large enough that the build is still
    running, is exact; so is the C fast path afterwards, a second plan that is closed before any
    call (its event destroyed unwaited), and a deferred format that is waited on twice."""
    torch = pytest.importorskip("torch")
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF

    A = with_int_values(datasets.adversarial("hub", 2_000_000))
    B = int_dense(A.shape[1], 64)
    ref = scipy_ref(A, B)
    Bt = torch.from_numpy(B).cuda()
    s = torch.cuda.Stream()  # non-blocking
    for _ in range(2):
        accspmm.plan(A, device="gpu").close()  # never called: the event goes unwaited
        p = accspmm.plan(A, device="gpu")
        with torch.cuda.stream(s):
            C1 = p(Bt)
            C2 = p(Bt)  # the C fast path
        s.synchronize()
        assert_bit_exact(C1.cpu().numpy(), ref)
        assert_bit_exact(C2.cpu().numpy(), ref)
        # the first call's wait and host time are in the plan's statistics
        assert 0.0 <= p.stats["seconds"]["build_gpu_wait"] < 60.0
        assert 0.0 < p.stats["schedule_by_n"][64]["first_call_seconds"] < 60.0
        p.close()
    csr = as_csr(sp.csr_matrix(A, dtype=np.float32)).canonicalized()
    dev = {}
    try:
        g = DeviceBitTCF(csr, None, dev, _cuda.get_device(), defer=True)
        g.wait()
        g.wait()
        np.testing.assert_array_equal(dev["block_meta"].to_host(), _tf32.pack_meta(BitTCF.from_csr(csr, None)))
    finally:
        for arr in dev.values():
            arr.free()


def test_staged_upload_from_threads():
    """The build uploads the host CSR through the library's two pinned 4 MiB chunks
    (cuda/staging.cu). Plans of a 1.5M-nnz matrix (about 12 MB: chunks filled from several
    arrays, arrays cut across chunks) built from four host threads at once, each thread's CSR values
    different, are exact."""
    import threading

    A0 = datasets.adversarial("hub", 1_500_000)
    B = int_dense(A0.shape[1], 16)
    errors = []

    def work(seed):
        try:
            for _ in range(2):
                A = with_int_values(A0, seed=seed)
                ref = scipy_ref(A, B)
                p = accspmm.plan(A, device="gpu")
                assert_bit_exact(p(B), ref)
                p.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_window_offsets_back_over_several_staging_chunks():
    """The window offsets come back to the host through the 4 MiB pinned staging chunk
    (acc_d2h_staged): 4.6M rows make 575,000 windows, 4.6 MB of offsets, more than one chunk; both
    build methods, against the C builder."""
    rng = np.random.default_rng(9)
    m, k, nnz = 4_600_000, 300, 400_000
    rows = np.sort(rng.integers(0, m, nnz))
    A = sp.csr_matrix((rng.integers(1, 9, nnz).astype(np.float32), (rows, rng.integers(0, k, nnz))), shape=(m, k))
    A.sum_duplicates()
    _compare(A)


def test_ordered_and_uploaded_arrays():
    """DeviceArray.ordered / upload (pool memory in a stream's order, the copy staged, no wait): on
    the library's side stream and on a caller's stream, once that stream is synchronised the array
    holds the host data; the host array may go at once."""
    from accspmm import _cuda
    from accspmm._device import DeviceArray

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for stream in (_cuda.side_stream(), torch.cuda.Stream().cuda_stream, None):
        host = rng.integers(-9, 9, 300_001).astype(np.int32)
        want = host.copy()
        d = DeviceArray.upload(host, _cuda.get_device(), stream)
        host[:] = 7  # the copy was staged: the host array is free at return
        z = DeviceArray.ordered((12,), np.float32, _cuda.get_device(), stream)
        _cuda.memset(z.ptr, 0, z.nbytes, stream)
        _cuda.synchronize(stream)
        np.testing.assert_array_equal(d.to_host(), want)
        np.testing.assert_array_equal(z.to_host(), np.zeros(12, np.float32))
        d.free()
        z.free()


def test_first_call_does_not_wait_for_the_callers_stream():
    """A plan's first call uploads its task rows and zeroes its split workspace on the library's side
    stream and waits for those alone (TF32Runner._settle), not for the work the caller queued on
    its own stream: with a long kernel queued on the current (legacy) stream after plan(), the first
    call returns long before that kernel ends, and its product, queued behind it, is exact.  A first
    call for another width on a second stream right after (its own schedule, uploads and workspace)
    is exact too."""
    import time

    torch = pytest.importorskip("torch")
    A = with_int_values(datasets.adversarial("hub", 50_000))  # hub windows: multi-part splits, a workspace
    B = int_dense(A.shape[1], 64)
    ref = scipy_ref(A, B)
    Bt = torch.from_numpy(B).cuda()
    torch.cuda.synchronize()
    t = time.perf_counter()
    torch.cuda._sleep(200_000_000)
    torch.cuda.synchronize()
    sleep = time.perf_counter() - t
    warm = accspmm.plan(A, device="gpu")
    warm(Bt)  # the same kernel variant, loaded before the timed call (lazy module loading)
    p = accspmm.plan(A, device="gpu")
    torch.cuda.synchronize()  # the build done
    warm.close()
    torch.cuda._sleep(200_000_000)
    t = time.perf_counter()
    C = p(Bt)  # first call for n = 64
    host = time.perf_counter() - t
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        C40 = p(Bt[:, :40].contiguous())
    torch.cuda.synchronize()
    assert p.stats["schedule_by_n"][64]["split_windows"] > 0
    assert host < 0.5 * sleep, (host, sleep)
    assert_bit_exact(C.cpu().numpy(), ref)
    assert_bit_exact(C40.cpu().numpy(), ref[:, :40])
    p.close()


@pytest.mark.parametrize("build", ["gpu", "cpu"])
def test_plan_exact_either_build(build, bundled_int):
    A = bundled_int
    B = int_dense(A.shape[1], 40)
    for reorder in (None, "affinity"):
        p = accspmm.plan(A, device="gpu", reorder=reorder, tuning={"build": build})
        assert p.stats["format"] == "bittcf"
        assert ("build_gpu" in p.stats["seconds"]) == (build == "gpu")
        C = p(B)
        assert_bit_exact(C, scipy_ref(A, B))


def test_default_plan_is_cheap_and_calls_hint(bundled_int):
    A = with_int_values(datasets.adversarial("bipartite", 100_000))
    p = accspmm.plan(A, device="gpu")
    assert p.stats["reorder"]["chosen"] == "none" and "calls=" in p.stats["reorder"]["why"]
    q = accspmm.plan(A, device="gpu", calls=10**9)  # a huge call count: reordering pays
    pay = q.stats["reorder"]["payback"]
    assert pay["predicted_break_even_calls"] < 10**9 and q.stats["reorder"]["method"] == "auto"
    r = accspmm.plan(A, device="gpu", calls=0)  # no calls: never pays
    assert r.stats["reorder"]["chosen"] == "none"
    B = int_dense(A.shape[1], 33)
    for plan in (p, q, r):
        assert_bit_exact(plan(B), scipy_ref(A, B))

"""The GPU build's check of an unchecked CSR (cuda/bittcf_build.cu, ``validate``): a default GPU plan
leaves the O(m + nnz) check of A's offsets and columns to the device, which must raise the host
check's errors for every malformed input, take rows in any column order, hand duplicates back to
the host, and build the same arrays as the C builder."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm._format import BitTCF
from accspmm._validate import as_csr
from conftest import assert_bit_exact, assert_device_bittcf, int_dense, scipy_ref, with_int_values

pytestmark = pytest.mark.gpu

METHODS = ("ranks", "sort")


def _raw(indptr, indices, data, shape):
    """A csr_matrix holding the arrays as they are (scipy's own checks bypassed)."""
    M = sp.csr_matrix(shape, dtype=np.float32)
    M.indptr, M.indices, M.data = indptr, indices, data
    return M


def _host_error(M) -> str:
    """The host check's message for M (what every path must raise)."""
    with pytest.raises(ValueError) as err:
        as_csr(M)
    return str(err.value)


def _base(m=3000, k=2500, seed=0):
    A = sp.random(m, k, density=0.004, format="csr", random_state=seed, dtype=np.float32)
    A.data = with_int_values(A, seed).data
    return A


def _malformed_cases():
    """(name, csr_matrix) pairs whose offsets' ends are fine (so the check reaches the device)."""
    A = _base()
    ip, ix, dv = A.indptr.copy(), A.indices.copy(), A.data.copy()
    nnz, m, k = A.nnz, A.shape[0], A.shape[1]
    cases = []
    for name, pos, value in (("column k", nnz - 1, k), ("column -1", nnz // 2, -1),
                             ("column 2^31-1", 0, 2**31 - 1)):
        bad = ix.copy()
        bad[pos] = value
        cases.append((name, _raw(ip.copy(), bad, dv.copy(), A.shape)))
    for name, row in (("offsets decrease early", 1), ("offsets decrease in the middle", m // 2),
                      ("offsets decrease at the end", m - 1)):
        bad = ip.copy()
        bad[row] = bad[row + 1] + 1  # larger than the next one (and within [0, nnz])
        if bad[row] > nnz:
            bad[row] = nnz
            bad[row + 1] = nnz - 1
        cases.append((name, _raw(bad, ix.copy(), dv.copy(), A.shape)))
    bad = ip.copy()
    bad[m // 3] = nnz + 5  # beyond nnz, then back down
    cases.append(("offset beyond nnz", _raw(bad, ix.copy(), dv.copy(), A.shape)))
    both = ix.copy()
    both[3] = k + 7
    bad = ip.copy()
    bad[m // 2] = bad[m // 2 + 1] + 1
    cases.append(("offsets and a column (the offsets' error first)", _raw(bad, both, dv.copy(), A.shape)))
    cases.append(("no entries, offsets up and down",
                  _raw(np.array([0, 2, 0, 0], np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32), (3, 4))))
    cases.append(("one entry, column k", _raw(np.array([0, 0, 1], np.int32), np.array([4], np.int32),
                                              np.ones(1, np.float32), (2, 4))))
    cases.append(("k = 0 with an entry", _raw(np.array([0, 1], np.int32), np.array([0], np.int32),
                                              np.ones(1, np.float32), (1, 0))))
    return cases


@pytest.mark.parametrize("case", range(len(_malformed_cases())), ids=[c[0] for c in _malformed_cases()])
def test_plan_raises_the_host_checks_error(case):
    """plan(M) on the GPU (the device checks M) raises the host check's ValueError, word for word,
    and leaves M's arrays unchanged; so does the build called directly, by either method."""
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF

    name, M = _malformed_cases()[case]
    before = [a.copy() for a in (M.indptr, M.indices, M.data)]
    expected = _host_error(M)
    with pytest.raises(ValueError) as err:
        accspmm.plan(M, device="gpu")
    assert str(err.value) == expected, name
    for a, b in zip(before, (M.indptr, M.indices, M.data)):
        np.testing.assert_array_equal(a, b)
    csr = as_csr(M, check=False)
    assert csr.canonical is None  # the ends are fine: the host did not check the rest
    word = "row offsets" if "offset" in expected else "column index"
    for method in METHODS:
        dev = {}
        try:
            with pytest.raises(ValueError, match=word):
                DeviceBitTCF(csr, None, dev, _cuda.get_device(), method=method, validate=True)
        finally:
            for arr in dev.values():
                arr.free()
    # the device is still usable after the refused builds
    good = _base(400, 300, seed=1)
    B = int_dense(300, 9)
    assert_bit_exact(accspmm.plan(good, device="gpu")(B), scipy_ref(good, B))


def test_offsets_ends_checked_on_the_host():
    """Offsets that do not start at 0, or end past the stored entries, are refused before any
    upload (the build reads nnz = indptr[-1] entries)."""
    for ip in (np.array([1, 2, 3], np.int32), np.array([0, 2, 9], np.int32), np.array([0, 2, -1], np.int32)):
        M = _raw(ip, np.array([0, 1, 2], np.int32), np.ones(3, np.float32), (2, 3))
        expected = _host_error(M)
        with pytest.raises(ValueError) as err:
            accspmm.plan(M, device="gpu")
        assert str(err.value) == expected


def _shuffled(A, seed=9, duplicate_row=None):
    """A's rows with their entries in random order (column with value); duplicate_row: that row's
    second entry gets its first entry's column."""
    canon = as_csr(A).canonicalized()
    rng = np.random.default_rng(seed)
    idx, val = canon.indices.copy(), canon.data.copy()
    for i in range(canon.shape[0]):
        a, b = canon.indptr[i], canon.indptr[i + 1]
        order = a + rng.permutation(b - a)
        idx[a:b], val[a:b] = idx[order], val[order]
    if duplicate_row is not None:
        a = canon.indptr[duplicate_row]
        assert canon.indptr[duplicate_row + 1] - a >= 2
        idx[a + 1] = idx[a]
    return _raw(np.asarray(canon.indptr, np.int32), idx, val, canon.shape)


@pytest.mark.parametrize("size", [(700, 500), (20000, 3000)])
def test_unsorted_rows_checked_on_device(size):
    """Rows in any column order: checked on the device, built by the sort, exact; the plan's kept
    CSR knows it is not canonical (so the transposed plan and cuSPARSE get it canonicalised)."""
    A = _base(*size, seed=3)
    M = _shuffled(A)
    B = int_dense(size[1], 33)
    p = accspmm.plan(M, device="gpu")
    assert p.stats["csr_checked_on"] == "device"
    assert p.stats["build_gpu_method"] == "sort"
    assert p._source.canonical is False
    assert_bit_exact(p(B), scipy_ref(A, B))
    Bt = int_dense(size[0], 5)
    assert_bit_exact(p.transposed()(Bt), scipy_ref(A.T.tocsr(), Bt))
    q = accspmm.plan(A, device="gpu")
    assert q.stats["csr_checked_on"] == "device" and q._source.canonical is True
    assert q.stats["build_gpu_method"] == "ranks"
    assert_bit_exact(q(B), scipy_ref(A, B))


def test_duplicates_go_back_to_the_host():
    """A row holding a column twice: the device check hands the CSR back, the host sums the
    duplicates (as scipy does) and builds again."""
    A = _base(900, 700, seed=4)
    row = int(np.argmax(np.diff(A.indptr)))
    M = _shuffled(A, duplicate_row=row)
    ref = sp.csr_matrix(M.copy())
    ref.sum_duplicates()
    B = int_dense(700, 17)
    p = accspmm.plan(M, device="gpu")
    assert p._source.canonical is False
    host = accspmm.plan(M, device="gpu", tuning={"check": "host"})
    assert p.stats["nnz"] == host.stats["nnz"] == ref.nnz == M.nnz - 1  # the format's, duplicates summed
    assert p.stats["tc_blocks"] == host.stats["tc_blocks"]
    assert_bit_exact(p(B), scipy_ref(ref, B))
    assert_bit_exact(host(B), scipy_ref(ref, B))


@pytest.mark.parametrize("method", METHODS)
def test_checked_build_is_bit_identical(method, bundled_int):
    """The checked build of a well-formed CSR gives the C builder's arrays, by either method, and
    reports the CSR canonical; plans with and without the device check give the same bits."""
    from accspmm import _cuda
    from accspmm._device_format import DeviceBitTCF

    for A in (bundled_int, accspmm.datasets.adversarial("hub", 50_000)):
        checked = as_csr(sp.csr_matrix(A, dtype=np.float32))
        ref = BitTCF.from_csr(checked.canonicalized(), None)
        dev = {}
        try:
            g = DeviceBitTCF(as_csr(sp.csr_matrix(A, dtype=np.float32), check=False), None, dev,
                             _cuda.get_device(), keep_blocks=True, method=method, validate=True)
            assert g.canonical and g.method == method
            assert_device_bittcf(g, ref)
        finally:
            for arr in dev.values():
                arr.free()
    A = bundled_int
    B = int_dense(A.shape[1], 64)
    dev_checked = accspmm.plan(A, device="gpu")
    assert dev_checked.stats["csr_checked_on"] == "device"
    C = dev_checked(B)
    assert_bit_exact(C, scipy_ref(A, B))
    for kwargs in ({"reorder": "none"}, {"tuning": {"check": "host"}}, {"calls": 10}):
        host = accspmm.plan(A, device="gpu", **kwargs)  # reordering asked about, or the host asked for
        assert host.stats["csr_checked_on"] == "host", kwargs
        assert_bit_exact(host(B), C)
    with pytest.raises(ValueError, match="check"):
        accspmm.plan(A, device="gpu", tuning={"check": "gpu"})


def test_empty_matrix_checked():
    """No entries: the offsets (all zero) are checked without an upload."""
    Z = sp.csr_matrix((37, 11), dtype=np.float32)
    B = int_dense(11, 4)
    p = accspmm.plan(Z, device="gpu")
    assert p.stats["csr_checked_on"] == "device"
    assert_bit_exact(p(B), np.zeros((37, 4), np.float32))

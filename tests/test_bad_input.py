"""One test per bad-input class: the exact exception type, and inputs unchanged."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import _core


@pytest.fixture()
def A():
    return sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 3], [4, 5, 0], [0, 0, 0]], np.float32))


@pytest.fixture()
def B():
    return np.arange(6, dtype=np.float32).reshape(3, 2)


def _snapshot(*arrays):
    return [np.array(a, copy=True) for a in arrays]


def _unchanged(before, *arrays):
    for b, a in zip(before, arrays):
        np.testing.assert_array_equal(b, a)


def test_a_not_sparse(B):
    with pytest.raises(TypeError, match="scipy.sparse"):
        accspmm.spmm(np.eye(3, dtype=np.float32), B, device="cpu")
    with pytest.raises(TypeError):
        accspmm.spmm([[1, 2], [3, 4]], B, device="cpu")


def test_a_bad_dtype(B):
    Ai = sp.csr_matrix(np.eye(3, dtype=np.int64))
    with pytest.raises(TypeError, match="float32 or float64"):
        accspmm.spmm(Ai, B, device="cpu")
    Ac = sp.csr_matrix(np.eye(3, dtype=np.complex64))
    with pytest.raises(TypeError):
        accspmm.spmm(Ac, B, device="cpu")


def test_b_bad_dtype(A):
    for bad in (np.ones((3, 2), np.complex64), np.array([["a", "b"]] * 3), np.array([[object()]] * 3)):
        with pytest.raises(TypeError):
            accspmm.spmm(A, bad, device="cpu")


def test_b_sparse(A):
    with pytest.raises(TypeError, match="dense"):
        accspmm.spmm(A, sp.csr_matrix(np.ones((3, 2), np.float32)), device="cpu")


def test_shape_mismatch(A):
    with pytest.raises(ValueError, match="dimension mismatch"):
        accspmm.spmm(A, np.ones((4, 2), np.float32), device="cpu")
    with pytest.raises(ValueError, match="1- or 2-dimensional"):
        accspmm.spmm(A, np.ones((3, 2, 2), np.float32), device="cpu")


def _malformed(indptr, indices, data, shape):
    """A csr_matrix holding the given arrays as they are (scipy's own checks bypassed)."""
    M = sp.csr_matrix(shape, dtype=np.float32)
    M.indptr, M.indices, M.data = indptr, indices, data
    return M


@pytest.mark.parametrize("case", ["col_too_big", "col_negative", "indptr_decreasing", "indptr_end_too_big",
                                  "indptr_start_nonzero", "indptr_wrong_length", "col_too_big_int64"])
def test_malformed_csr(case, B):
    indptr = np.array([0, 2, 3, 5, 5], np.int32)
    indices = np.array([0, 2, 2, 0, 1], np.int32)
    data = np.arange(1, 6, dtype=np.float32)
    if case == "col_too_big":
        indices[3] = 3
    elif case == "col_negative":
        indices[1] = -1
    elif case == "indptr_decreasing":
        indptr[2] = 1
        indptr[1] = 3
    elif case == "indptr_end_too_big":
        indptr[4] = 9
    elif case == "indptr_start_nonzero":
        indptr[0] = 1
    elif case == "indptr_wrong_length":
        indptr = indptr[:-1]
    elif case == "col_too_big_int64":
        indices = indices.astype(np.int64)
        indptr = indptr.astype(np.int64)
        indices[0] = 2**40
    M = _malformed(indptr, indices, data, (4, 3))
    before = _snapshot(indptr, indices, data, B)
    for fmt in ("csr", "bittcf"):
        with pytest.raises(ValueError):
            accspmm.spmm(M, B, device="cpu", format=fmt)
    _unchanged(before, indptr, indices, data, B)


def test_unchecked_csr_is_checked_before_any_host_use():
    """as_csr(check=False) defers only the O(m + nnz) pass (a GPU plan's build does it on the device):
    the offsets' ends are checked at once, and checked() / canonicalized() run the host check, with
    its errors, before any host step reads through the arrays."""
    from accspmm._validate import as_csr

    good = sp.csr_matrix(np.array([[0, 2, 1], [3, 0, 0]], np.float32))
    good.indices = np.array([2, 1, 0], np.int32)  # row 0 unsorted
    c = as_csr(good, check=False)
    assert c.canonical is None
    assert c.checked().canonical is False
    canon = c.canonicalized()
    assert canon.canonical is True and canon.indices.tolist() == [1, 2, 0]
    for ip in ([1, 2, 3], [0, 2, 9], [0, 2, -1]):  # the ends: refused with the full check's error
        M = _malformed(np.array(ip, np.int32), np.array([0, 1, 2], np.int32), np.ones(3, np.float32), (2, 3))
        with pytest.raises(ValueError, match="row offsets|indptr"):
            as_csr(M, check=False)
    M = _malformed(np.array([0, 2, 3], np.int32), np.array([0, 5, 2], np.int32), np.ones(3, np.float32), (2, 3))
    lazy = as_csr(M, check=False)
    assert lazy.canonical is None
    for step in (lazy.checked, lazy.canonicalized):
        with pytest.raises(ValueError, match="column index"):
            step()
    # a CPU plan (no device check) and a GPU plan with a reordering check on the host
    with pytest.raises(ValueError, match="column index"):
        accspmm.plan(M, device="cpu")


def test_bad_options(A, B):
    with pytest.raises(ValueError, match="device"):
        accspmm.spmm(A, B, device="tpu")
    with pytest.raises(ValueError, match="precision"):
        accspmm.spmm(A, B, device="cpu", precision="fp8")
    with pytest.raises(ValueError, match="tf32"):
        accspmm.spmm(A, B, device="cpu", precision="tf32")
    with pytest.raises(ValueError, match="fp64"):
        accspmm.spmm(A, B, device="cpu", precision="fp64")  # float32 data
    with pytest.raises(ValueError, match="format"):
        accspmm.spmm(A, B, device="cpu", format="ell")


def test_gpu_requested_without_gpu(A, B):
    if accspmm.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA is unavailable"):
        accspmm.spmm(A, B, device="gpu")


def test_bad_perm(A):
    with pytest.raises(ValueError, match="permutation"):
        accspmm.BitTCF.from_csr(A, perm=[0, 0, 1, 2])
    with pytest.raises(ValueError):
        accspmm.BitTCF.from_csr(A, perm=[0, 1, 2])
    with pytest.raises(ValueError, match="permutation"):
        accspmm.BitTCF.from_csr(A, perm=[0, 1, 2, 4])
    with pytest.raises(TypeError):
        accspmm.BitTCF.from_csr(A, perm=[0.0, 1.0, 2.0, 3.0])


def test_bad_out(A, B):
    with pytest.raises(ValueError, match="shape"):
        accspmm.spmm(A, B, device="cpu", out=np.empty((3, 2), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        accspmm.spmm(A, B, device="cpu", out=np.empty((4, 2), np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        accspmm.spmm(A, B, device="cpu", out=np.empty((2, 4), np.float32).T)
    with pytest.raises(TypeError):
        accspmm.spmm(A, B, device="cpu", out=[[0, 0]] * 4)


def test_plan_dtype_mismatch(A):
    p = accspmm.plan(A, device="cpu")
    with pytest.raises(TypeError, match="float32"):
        p(np.ones((3, 2), np.float64))


def test_closed_plan(A, B):
    p = accspmm.plan(A, device="cpu")
    p.close()
    with pytest.raises(RuntimeError, match="closed"):
        p(B)


def test_glue_rejects_wrong_arrays():
    """The private glue refuses anything but exact dtypes, shapes and contiguity."""
    indptr = np.array([0, 1], np.int64)
    indices = np.array([0], np.int32)
    data = np.array([1.0], np.float32)
    with pytest.raises(TypeError):
        _core.csr_spmm(1, 1, indptr.astype(np.int32), indices, data, np.ones((1, 1), np.float32),
                       np.empty((1, 1), np.float32))
    with pytest.raises(TypeError):
        _core.csr_spmm(1, 1, indptr, indices, data, np.ones((1, 1), np.float64), np.empty((1, 1), np.float64))
    with pytest.raises(ValueError):
        _core.csr_spmm(1, 1, indptr, indices, data, np.ones((2, 1), np.float32), np.empty((1, 1), np.float32))
    with pytest.raises(ValueError):
        C = np.empty((1, 1), np.float32)
        C.flags.writeable = False
        _core.csr_spmm(1, 1, indptr, indices, data, np.ones((1, 1), np.float32), C)
    with pytest.raises(ValueError):
        _core.csr_check(1, 1, np.array([0, 5], np.int64), indices)  # indptr[-1] beyond indices
    with pytest.raises(ValueError):
        _core.csr_check(-1, 1, indptr, indices)
    fresh = np.empty((1 << 20) + 3, np.uint8)  # pages mapped by threads before a device-to-host copy
    _core.prefault(fresh)
    fresh[:] = 7
    assert (fresh == 7).all()
    ro = np.empty(8)
    ro.flags.writeable = False
    for bad in (ro, np.empty(8)[::2], [0.0]):
        with pytest.raises(TypeError):
            _core.prefault(bad)


def test_corrupted_format_rejected(A, B):
    F = accspmm.BitTCF.from_csr(A)
    bad_mask = F.block_mask.copy()
    bad_mask[0] |= np.uint64(1) << np.uint64(63)  # a bit without a value
    G = accspmm.BitTCF(F.shape, F.perm.copy(), F.window_offsets.copy(), F.block_cols.copy(), bad_mask,
                       F.block_value_offsets.copy(), F.values.copy())
    with pytest.raises(ValueError):
        G.matmul(B)
    bad_cols = F.block_cols.copy()
    bad_cols[0] = 99
    G = accspmm.BitTCF(F.shape, F.perm.copy(), F.window_offsets.copy(), bad_cols, F.block_mask.copy(),
                       F.block_value_offsets.copy(), F.values.copy())
    with pytest.raises(ValueError):
        G.matmul(B)


@pytest.mark.parametrize("seed", range(6))
def test_csr_check_across_blocks(seed):
    """csr_check runs its flat passes in blocks of 4096 rows and of 4096 entries (each block's loop
    also built for AVX2): a matrix of several blocks of each is canonical; a repeat at or next to a
    block's first entry is judged as the row-by-row oracle judges it; repeats across row starts
    alone leave it canonical; a decreasing offset or a column out of range in a later block raises."""
    rng = np.random.default_rng(100 + seed)
    m, k = 9001 + seed, 700
    lengths = rng.integers(0, 4, m) * (rng.random(m) < 0.8)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = np.concatenate([np.sort(rng.choice(k, int(n), replace=False)) for n in lengths]).astype(np.int32)
    nnz = int(indptr[-1])
    assert nnz > 2 * 4096
    assert _core.csr_check(m, k, indptr, indices) is True
    for p in (4096, 4097, 8191, 8192, nnz - 1):
        bad = indices.copy()
        bad[p] = bad[p - 1]  # a repeat (not canonical), unless p starts a row that stays sorted
        assert _core.csr_check(m, k, indptr, bad) is _canonical_oracle(indptr, bad)
    singles = indptr[:-1][(lengths == 1) & (indptr[:-1] > 4096)]  # rows of one entry, in a later block
    bad = indices.copy()
    bad[singles] = bad[singles - 1]  # each equal to its predecessor, across a row start: still canonical
    assert singles.size and _core.csr_check(m, k, indptr, bad) is True
    for row in (4095, 4096, 8200, m - 1):
        off = indptr.copy()
        off[row] = off[row + 1] + 1  # rp[row] > rp[row + 1]
        with pytest.raises(ValueError):
            _core.csr_check(m, k, off, indices)
    for at in (4095, 4096, 8193):
        oob = indices.copy()
        oob[at] = k
        with pytest.raises(ValueError):
            _core.csr_check(m, k, indptr, oob)


def _canonical_oracle(indptr, indices):
    """Rows strictly increasing (sorted, no duplicates), row by row."""
    return all(bool(np.all(np.diff(indices[indptr[i]:indptr[i + 1]]) > 0)) for i in range(len(indptr) - 1))


@pytest.mark.parametrize("seed", range(40))
def test_csr_check_canonical_flag_and_bounds(seed):
    """csr_check's flat passes (descents over all entries minus those at row starts) agree with a
    row-by-row oracle: empty rows (several row starts at one position), descents exactly at row
    boundaries (allowed), a single out-of-order or repeated entry inside a row (not canonical), and
    a column out of range anywhere, the first and last entries included."""
    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    lengths = rng.integers(0, min(k, 6) + 1, m) * (rng.random(m) < 0.7)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rows = [np.sort(rng.choice(k, int(n), replace=False)) for n in lengths]
    indices = np.concatenate(rows + [np.zeros(0, int)]).astype(np.int32)
    assert _core.csr_check(m, k, indptr, indices) is True
    nnz = int(indptr[-1])
    if nnz >= 2:
        bad = indices.copy()
        p = int(rng.integers(1, nnz))
        bad[p] = bad[p - 1] if rng.random() < 0.5 else bad[p - 1] - 1
        if bad[p] >= 0:
            assert _core.csr_check(m, k, indptr, bad) is _canonical_oracle(indptr, bad)
        for at in (0, nnz - 1, int(rng.integers(0, nnz))):
            for value in (-1, k):
                oob = indices.copy()
                oob[at] = value
                with pytest.raises(ValueError):
                    _core.csr_check(m, k, indptr, oob)

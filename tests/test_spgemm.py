"""accspmm.spgemm on the CPU (csrc/acc_spgemm.c): scipy's pattern and values (bit-exact on integer
data, cancellations dropped), every shape, both accumulators, the precision rules, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import accspmm
from conftest import outputs_at_threads


def scipy_product(A, B, dtype=None):
    """scipy's A @ B with its zeros dropped and rows sorted (the object of exact comparisons)."""
    C = sp.csr_matrix(A @ B)
    if dtype is not None:
        C = C.astype(dtype)
    C.eliminate_zeros()
    C.sort_indices()
    return C


def same(C, R):
    assert C.shape == R.shape
    assert np.array_equal(np.asarray(C.indptr, np.int64), np.asarray(R.indptr, np.int64))
    assert np.array_equal(C.indices, R.indices)
    assert C.dtype == R.dtype and np.array_equal(C.data, R.data)


def int_sparse(m, k, density, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    M = sp.random(m, k, density=density, format="csr", random_state=seed, dtype=dtype)
    M.data = rng.integers(-8, 9, M.nnz).astype(dtype)  # explicit zeros included
    return M


@settings(max_examples=60, deadline=None)
@given(m=st.integers(0, 40), k=st.integers(0, 40), n=st.integers(0, 40), d=st.floats(0, 0.5),
       seed=st.integers(0, 2**31), f32=st.booleans())
def test_integer_products_equal_scipy(m, k, n, d, seed, f32):
    dt = np.float32 if f32 else np.float64
    A, B = int_sparse(m, k, d, seed, dt), int_sparse(k, n, d, seed + 1, dt)
    same(accspmm.spgemm(A, B), scipy_product(A, B))


@pytest.mark.parametrize("shape", [((300, 200), (200, 500)), ((1, 1000), (1000, 1)), ((1000, 3), (3, 1000))])
def test_rectangular_and_aat(shape):
    A, B = int_sparse(*shape[0], 0.05, 1), int_sparse(*shape[1], 0.05, 2)
    same(accspmm.spgemm(A, B), scipy_product(A, B))
    same(accspmm.spgemm(A, A.T), scipy_product(A, A.T))


def test_cancellations_dropped_or_kept():
    A = sp.csr_matrix(np.array([[1.0, 1.0], [2.0, 0.0]]))
    B = sp.csr_matrix(np.array([[1.0, 3.0], [-1.0, 0.0]]))  # row 0 of C: 1 - 1 = 0 at column 0
    C = accspmm.spgemm(A, B)
    same(C, scipy_product(A, B))
    assert C.nnz == 3
    K = accspmm.spgemm(A, B, keep_zeros=True)
    assert K.nnz == 4 and K[0, 0] == 0 and K.indices.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("n", [40, 100_000, (1 << 22) + 8])  # dense (stamps), hash (few products), hash (wide)
def test_kept_zero_sums_are_positive_zero_in_every_accumulator(n):
    """keep_zeros: a sum of -0 products is +0, as a sum started at 0 (scipy's), in every accumulator
    and in the one-entry-row path, so the bits do not depend on which one ran (the dense/hash choice
    depends on the thread count)."""
    B = sp.csr_matrix((np.array([0.0, 2.0]), np.array([7, 7]), np.array([0, 1, 2])), shape=(2, n))
    # row 0: one entry, -1 x 0 = -0 (B's row scaled); row 1: -1 x 0 + (-0) x 2 = -0 + -0
    A = sp.csr_matrix((np.array([-1.0, -1.0, -0.0]), np.array([0, 0, 1]), np.array([0, 1, 3])), shape=(2, 2))
    for dt in (np.float64, np.float32):
        C = accspmm.spgemm(A.astype(dt), B.astype(dt), keep_zeros=True)
        assert C.indices.tolist() == [7, 7] and C.data.tolist() == [0.0, 0.0]
        assert not np.signbit(C.data).any(), C.data
        assert accspmm.spgemm(A.astype(dt), B.astype(dt)).nnz == 0  # dropped by default, as scipy


def test_bits_independent_of_threads():
    """The same bits at 1, 2 and 3 threads, kept zeros' signs included, for a product whose
    accumulator changes with the thread count (200k columns against about 50k units of work: dense
    on one thread, hash tables on three)."""
    code = ("import numpy as np, scipy.sparse as sp, accspmm, hashlib, sys\n"
            "rng = np.random.default_rng(7); out = []\n"
            "A = sp.random(2000, 2000, density=0.002, format='csr', random_state=rng)\n"
            "B = sp.random(2000, 200000, density=2.5e-5, format='csr', random_state=rng)\n"
            "A.data = rng.standard_normal(A.nnz); A.data[::6] = -0.0; B.data = rng.standard_normal(B.nnz)\n"
            "for keep in (False, True):\n"
            "    C = accspmm.spgemm(A, B, keep_zeros=keep)\n"
            "    out.append(hashlib.md5(C.indptr.tobytes() + C.indices.tobytes() + C.data.tobytes()).hexdigest())\n"
            "sys.stdout.write(' '.join(out))")
    outs = outputs_at_threads(code)
    assert len(outs) == 1, outs


def test_duplicates_unsorted_and_int64_indices():
    A = sp.csr_matrix((np.array([2.0, 3, -1, 4, 4]), np.array([5, 1, 5, 0, 0], np.int64),
                       np.array([0, 3, 3, 5], np.int64)), shape=(3, 6))
    B = int_sparse(6, 7, 0.5, 3)
    Ac = A.copy()
    Ac.sum_duplicates()
    same(accspmm.spgemm(A, B), scipy_product(Ac, B))
    assert A.indices.tolist() == [5, 1, 5, 0, 0]  # the input is not modified


def test_empty_matrices_and_rows():
    Z = sp.csr_matrix((5, 4))
    C = accspmm.spgemm(Z, int_sparse(4, 3, 0.5, 1))
    assert C.shape == (5, 3) and C.nnz == 0
    assert accspmm.spgemm(sp.csr_matrix((0, 4)), sp.csr_matrix((4, 0))).shape == (0, 0)
    keep = np.ones(50)
    keep[10:40] = 0
    A = sp.csr_matrix(sp.diags(keep) @ int_sparse(50, 30, 0.2, 2))
    A.eliminate_zeros()
    same(accspmm.spgemm(A, int_sparse(30, 20, 0.3, 4)), scipy_product(A, int_sparse(30, 20, 0.3, 4)))


def test_hash_accumulator_for_wide_results():
    # more than 2^22 columns: the per-row hash table instead of the dense accumulator
    n = (1 << 22) + 1000
    rng = np.random.default_rng(5)
    A = int_sparse(200, 50, 0.1, 6)
    B = sp.csr_matrix((rng.integers(1, 9, 2000).astype(np.float64), rng.integers(0, n, 2000),
                       np.linspace(0, 2000, 51).astype(np.int64)), shape=(50, n))
    same(accspmm.spgemm(A, B), scipy_product(A, B))


def test_few_products_against_a_wide_b():
    # 2^21 columns but a few hundred products: the hash tables instead of dense accumulators that
    # would clear 12 bytes a column (csrc/acc_spgemm.c, s->dense); the same result either way
    n, rng = 1 << 21, np.random.default_rng(31)
    A = int_sparse(50, 400, 0.01, 32)
    B = sp.csr_matrix((rng.integers(-4, 5, 1200).astype(np.float64), rng.integers(0, n, 1200),
                       np.arange(0, 1201, 3)), shape=(400, n))
    same(accspmm.spgemm(A, B), scipy_product(A, B))
    same(accspmm.spgemm(A.astype(np.float32), B.astype(np.float32)), scipy_product(A, B, np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stamp_and_bitmap_rows_in_one_product(dtype):
    """Over 2^16 columns each row picks its accumulator (csrc/acc_spgemm.c: stamp_row, stamp_fill):
    short rows by stamps, long ones by the bitmap, long ones with 5 products a column by stamps in the
    numeric pass only.  Rows of the three kinds alternate on the same few columns, so a sum left
    behind by one kind would show in the next row of another."""
    n, rng = 100_000, np.random.default_rng(21)
    pool = rng.choice(n, 2_000, replace=False)
    rows = [rng.choice(pool, 2, replace=False) for _ in range(100)]  # short rows of B
    rows += [rng.choice(pool, 300, replace=False) for _ in range(100)]  # long, spread rows
    same_cols = rng.choice(pool, 300, replace=False)
    rows += [same_cols] * 10  # B rows 200..209: one pattern
    indptr = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    B = sp.csr_matrix((rng.integers(-4, 5, indptr[-1]).astype(dtype), np.concatenate(rows), indptr),
                      shape=(len(rows), n))
    B.sort_indices()
    a_rows = []
    for i in range(300):
        kind = i % 3
        lo, hi = [(0, 100), (100, 200), (200, 210)][kind]
        a_rows.append(np.sort(rng.choice(np.arange(lo, hi), 5 if kind == 2 else 3, replace=False)))
    aptr = np.concatenate(([0], np.cumsum([len(r) for r in a_rows])))
    A = sp.csr_matrix((rng.integers(-4, 5, aptr[-1]).astype(dtype), np.concatenate(a_rows), aptr),
                      shape=(300, len(rows)))
    same(accspmm.spgemm(A, B), scipy_product(A, B))
    kept = accspmm.spgemm(A, B, keep_zeros=True)  # the structural pattern: stored entries' products
    ones = [M.copy() for M in (A, B)]
    for M in ones:
        M.data[:] = 1
    pattern = scipy_product(*ones)
    assert np.array_equal(kept.indptr, pattern.indptr) and np.array_equal(kept.indices, pattern.indices)
    assert np.array_equal(kept.toarray(), (A @ B).toarray())


def test_long_rows_and_one_entry_rows():
    # rows touching hundreds of 64-column words (their words radix-sorted), and rows of A with one
    # entry (B's row scaled when B is canonical, accumulated when B has duplicates)
    A = int_sparse(60, 300, 0.05, 12)
    B = int_sparse(300, 100_000, 0.002, 13)
    same(accspmm.spgemm(A, B), scipy_product(A, B))
    rng = np.random.default_rng(14)
    one = sp.csr_matrix((rng.integers(1, 9, 60).astype(np.float64), rng.integers(0, 300, 60), np.arange(61)),
                        shape=(60, 300))
    same(accspmm.spgemm(one, B), scipy_product(one, B))
    idx, val = [], []
    for r in range(B.shape[0]):  # every row's entries, then again reversed: unsorted, duplicated
        lo, hi = B.indptr[r], B.indptr[r + 1]
        idx += [B.indices[lo:hi], B.indices[lo:hi][::-1]]
        val += [B.data[lo:hi], B.data[lo:hi][::-1]]
    dup = sp.csr_matrix((np.concatenate(val), np.concatenate(idx), 2 * B.indptr), shape=B.shape)
    assert not dup.has_canonical_format
    ref = dup.copy()
    ref.sum_duplicates()
    same(accspmm.spgemm(one, dup), scipy_product(one, ref))


def test_float32_more_accurate_than_scipy_and_within_one_rounding():
    rng = np.random.default_rng(7)
    A = sp.random(400, 300, density=0.05, format="csr", random_state=7, dtype=np.float32)
    B = sp.random(300, 500, density=0.05, format="csr", random_state=8, dtype=np.float32)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B.data = rng.standard_normal(B.nnz).astype(np.float32)
    C = accspmm.spgemm(A, B)
    assert C.dtype == np.float32
    ref = (A.astype(np.float64) @ B.astype(np.float64)).toarray()
    absref = (abs(A).astype(np.float64) @ abs(B).astype(np.float64)).toarray()
    err = np.abs(C.toarray().astype(np.float64) - ref)
    assert (err <= 2.0**-24 * np.abs(ref) + 2.0**-50 * absref).all()  # one rounding of a float64 sum
    ours = np.linalg.norm(err)
    theirs = np.linalg.norm((A @ B).toarray().astype(np.float64) - ref)
    assert ours <= theirs


def test_float64_and_mixed_dtypes():
    rng = np.random.default_rng(9)
    A = sp.random(100, 80, density=0.1, format="csr", random_state=9)
    A.data = rng.standard_normal(A.nnz)
    B = sp.random(80, 90, density=0.1, format="csr", random_state=10, dtype=np.float32)
    C = accspmm.spgemm(A, B)
    assert C.dtype == np.float64
    R = scipy_product(A, B.astype(np.float64))
    assert np.array_equal(C.indices, R.indices)
    # within two float64 sums' rounding of scipy's, 2 p u sum|products| with p the row's products (a
    # scipy built with FMA contraction sums differently; benchmarks/cpu_spgemm.py checks the same)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    p = np.bincount(rows, weights=np.diff(B.indptr)[A.indices], minlength=A.shape[0])
    tol = sp.diags(2 * p * 2.0**-53) @ (abs(A) @ abs(B).astype(np.float64))
    assert (abs(C - R) > tol).nnz == 0
    assert accspmm.spgemm(A, B, precision="fp32").dtype == np.float32


def test_repeated_runs_identical():
    A = sp.random(2000, 2000, density=0.005, format="csr", random_state=11, dtype=np.float32)
    A.data = np.random.default_rng(11).standard_normal(A.nnz).astype(np.float32)
    C1, C2 = accspmm.spgemm(A, A), accspmm.spgemm(A, A)
    assert np.array_equal(C1.indices, C2.indices) and np.array_equal(C1.data.view(np.uint32), C2.data.view(np.uint32))


def test_sparse_array_in_array_out():
    A = sp.csr_array(int_sparse(20, 20, 0.2, 12))
    assert isinstance(accspmm.spgemm(A, A), sp.csr_array)
    assert isinstance(accspmm.spgemm(sp.csr_matrix(A), sp.csr_matrix(A)), sp.csr_matrix)


def test_bad_input():
    A = int_sparse(5, 4, 0.5, 1)
    with pytest.raises(ValueError, match="dimension mismatch"):
        accspmm.spgemm(A, int_sparse(5, 4, 0.5, 2))
    with pytest.raises(TypeError, match="B must be a scipy.sparse"):
        accspmm.spgemm(A, np.ones((4, 3)))
    with pytest.raises(TypeError, match="B has dtype int64"):
        accspmm.spgemm(A, sp.csr_matrix(np.ones((4, 3), np.int64)))
    if not accspmm.cuda_available():
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            accspmm.spgemm(A, A.T, device="gpu")
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            accspmm.spgemm_plan(A, A.T, device="gpu")
    with pytest.raises(ValueError, match="device must be"):
        accspmm.spgemm(A, A.T, device="tpu")
    with pytest.raises(ValueError, match="precision"):
        accspmm.spgemm(A, A.T, precision="tf32")
    bad = sp.csr_matrix((np.ones(2), np.array([0, 9]), np.array([0, 1, 2, 2, 2, 2])), shape=(5, 4))
    with pytest.raises(ValueError):
        accspmm.spgemm(bad, A.T)


def test_tile_reference_matches_brute_force():
    """tests/spgemm_reference.py (the GPU tests' oracle for C's tiles) against a dense boolean product."""
    from spgemm_reference import tile_structure

    for seed, (m, k, n) in enumerate([(1, 1, 1), (13, 9, 21), (40, 33, 17), (64, 64, 64)]):
        A, B = int_sparse(m, k, 0.2, seed), int_sparse(k, n, 0.2, seed + 50)
        ref = tile_structure(A, B)
        P = (A.toarray() != 0) | _stored(A)
        Q = (B.toarray() != 0) | _stored(B)
        D = (P.astype(int) @ Q.astype(int)) > 0
        assert np.array_equal(ref["row_offsets"], np.r_[0, np.cumsum(D.sum(1))])
        mt, nt = (m + 7) // 8, (n + 7) // 8
        cols, masks, offsets = [], [], [0]
        for I in range(mt):
            for J in range(nt):
                block = D[8 * I:8 * I + 8, 8 * J:8 * J + 8]
                if block.any():
                    rr, cc = np.nonzero(block)
                    cols.append(J)
                    masks.append(int(np.bitwise_or.reduce(np.left_shift(1, rr * 8 + cc).astype(np.uint64))))
            offsets.append(len(cols))
        assert ref["tile_cols"].tolist() == cols
        assert [int(x) for x in ref["tile_masks"]] == masks
        assert ref["tile_row_offsets"].tolist() == offsets


def _stored(M):
    S = np.zeros(M.shape, bool)
    coo = M.tocoo()
    S[coo.row, coo.col] = True
    return S


def test_plan_on_the_cpu_recomputes_with_new_values():
    A, B = int_sparse(60, 50, 0.1, 1), int_sparse(50, 40, 0.1, 2)
    with accspmm.spgemm_plan(A, B, device="cpu") as p:
        same(p(), scipy_product(A, B))
        A2 = A.copy()
        A2.data = A2.data * 3
        same(p(A2), scipy_product(A2, B))
        same(p(None, B.data * 2), scipy_product(A, B * 2))
        with pytest.raises(ValueError, match="planned sparsity pattern"):
            p(int_sparse(60, 50, 0.1, 9))
        with pytest.raises(ValueError, match="1-D array"):
            p(np.ones(2))
        assert "cpu" in repr(p)
    S = int_sparse(30, 30, 0.2, 3)
    with accspmm.spgemm_plan(S, S, device="cpu") as p:
        same(p(S.data * -1), scipy_product(-S, -S))
        with pytest.raises(ValueError, match="itself"):
            p(S, S)


def test_plan_pattern_changed_in_place_raises():
    # a CPU plan keeps views of the operands' index arrays; an index made invalid after planning is
    # caught by the C check at the next product (a one-shot spgemm checks once, in Python)
    A = int_sparse(50, 50, 0.1, 4)
    p = accspmm.spgemm_plan(A, A, device="cpu")
    same(p(), scipy_product(A, A))
    A.indices[0] = 500
    with pytest.raises(ValueError, match="column index out of range"):
        p()

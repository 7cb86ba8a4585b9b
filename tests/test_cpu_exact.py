"""Bit-exact tests of the CPU paths (CSR fast path and BitTCF reference) against scipy."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import accspmm
from conftest import assert_bit_exact, csr_raw, int_csr, int_dense, scipy_ref, with_int_values

FORMATS = ["csr", "bittcf"]
NS = [1, 7, 32, 33, 128]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n", NS)
def test_bundled_exact(bundled_int, fmt, n):
    A = bundled_int
    B = int_dense(A.shape[1], n)
    C = accspmm.spmm(A, B, device="cpu", format=fmt)
    assert_bit_exact(C, scipy_ref(A, B))


@pytest.mark.parametrize("fmt", FORMATS)
def test_plan_reuse_and_random_perm(bundled_int, fmt):
    A = bundled_int
    perm = np.random.default_rng(3).permutation(A.shape[0])
    p = accspmm.plan(A, device="cpu", format=fmt, perm=perm if fmt == "bittcf" else None)
    for n in (5, 64):
        B = int_dense(A.shape[1], n, seed=n)
        assert_bit_exact(p(B), scipy_ref(A, B))


def _edge_cases():
    rng = np.random.default_rng(7)
    cases = {}
    cases["empty_matrix_0x0"] = sp.csr_matrix((0, 0), dtype=np.float32)
    cases["no_rows"] = sp.csr_matrix((0, 5), dtype=np.float32)
    cases["no_cols"] = sp.csr_matrix((6, 0), dtype=np.float32)
    cases["all_zero_10x9"] = sp.csr_matrix((10, 9), dtype=np.float32)
    cases["one_by_one"] = sp.csr_matrix(np.array([[3.0]], np.float32))
    # empty rows and whole empty windows (rows 8..23 empty), M not a multiple of 8
    d = rng.integers(-8, 9, size=(37, 20)).astype(np.float32) * (rng.random((37, 20)) < 0.3)
    d[8:24] = 0
    cases["empty_windows_37x20"] = sp.csr_matrix(d)
    # all rows in one window
    cases["one_window_5x300"] = with_int_values(sp.random(5, 300, density=0.4, random_state=1, format="csr"))
    # one very long row
    d = np.zeros((50, 5000), np.float32)
    d[13] = rng.integers(1, 9, size=5000)
    d[40, :7] = 2
    cases["long_row_50x5000"] = sp.csr_matrix(d)
    # rectangular, both ways
    cases["tall_1000x17"] = with_int_values(sp.random(1000, 17, density=0.1, random_state=2, format="csr"))
    cases["wide_19x1500"] = with_int_values(sp.random(19, 1500, density=0.05, random_state=3, format="csr"))
    # unsorted indices and duplicates (scipy sums duplicates)
    rows = rng.integers(0, 30, size=400)
    cols = rng.integers(0, 25, size=400)
    vals = rng.integers(-8, 9, size=400)
    cases["unsorted_dups_30x25"] = csr_raw(30, 25, rows, cols, vals)
    cases["unsorted_dups_int64_30x25"] = csr_raw(30, 25, rows, cols, vals, index_dtype=np.int64)
    cases["int64_indices"] = sp.csr_matrix(cases["wide_19x1500"].copy())
    cases["int64_indices"].indices = cases["int64_indices"].indices.astype(np.int64)
    cases["int64_indices"].indptr = cases["int64_indices"].indptr.astype(np.int64)
    cases["float64_40x33"] = with_int_values(sp.random(40, 33, density=0.2, random_state=4, format="csr"),
                                             dtype=np.float64)
    cases["csr_array_coo_input"] = sp.coo_array(with_int_values(sp.random(21, 22, density=0.3, random_state=5)))
    return cases


EDGE = _edge_cases()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n", [1, 3, 8, 17, 32, 33])
@pytest.mark.parametrize("name", sorted(EDGE))
def test_edge_cases_exact(name, n, fmt):
    A = EDGE[name]
    A_before = sp.csr_matrix(A, copy=True)
    raw = (A.indptr.copy(), A.indices.copy(), A.data.copy()) if A.format == "csr" else None
    B = int_dense(A.shape[1], n, seed=n, dtype=A.dtype)
    B_before = B.copy()
    C = accspmm.spmm(A, B, device="cpu", format=fmt)
    ref = np.asarray(sp.csr_matrix(A) @ B)
    assert_bit_exact(C, ref)
    # inputs untouched (also the raw arrays of unsorted/duplicate CSR)
    np.testing.assert_array_equal(B, B_before)
    if raw is not None:
        for got, want in zip((A.indptr, A.indices, A.data), raw):
            np.testing.assert_array_equal(got, want)
    assert (abs(sp.csr_matrix(A) - A_before)).nnz == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_vector_and_layouts(bundled_int, fmt):
    A = bundled_int
    k = A.shape[1]
    x = int_dense(k, 1, seed=9)[:, 0]
    y = accspmm.spmm(A, x, device="cpu", format=fmt)
    assert y.shape == (A.shape[0],)
    assert_bit_exact(y, A @ x)
    Bf = np.asfortranarray(int_dense(k, 12, seed=10))
    assert_bit_exact(accspmm.spmm(A, Bf, device="cpu", format=fmt), scipy_ref(A, Bf))
    Bs = int_dense(k, 40, seed=11)[:, ::3]  # strided view
    assert_bit_exact(accspmm.spmm(A, Bs, device="cpu", format=fmt), scipy_ref(A, Bs))
    Bi = np.random.default_rng(12).integers(-8, 9, size=(k, 9))  # integer B takes A's dtype
    C = accspmm.spmm(A, Bi, device="cpu", format=fmt)
    assert C.dtype == np.float32
    assert_bit_exact(C, scipy_ref(A, Bi.astype(np.float32)))
    B64 = int_dense(k, 6, seed=13, dtype=np.float64)  # float64 B promotes
    C = accspmm.spmm(A, B64, device="cpu", format=fmt)
    assert C.dtype == np.float64
    assert_bit_exact(C, scipy_ref(A, B64))


def test_out_argument(bundled_int):
    A = bundled_int
    B = int_dense(A.shape[1], 16)
    out = np.full((A.shape[0], 16), np.nan, np.float32)
    r = accspmm.spmm(A, B, device="cpu", out=out)
    assert r is out
    assert_bit_exact(out, scipy_ref(A, B))


@settings(max_examples=150, deadline=None)
@given(case=int_csr(), n=st.sampled_from([1, 2, 7, 8, 9, 16, 31, 33]), fmt=st.sampled_from(FORMATS))
def test_hypothesis_exact(case, n, fmt):
    A, seed = case
    B = int_dense(A.shape[1], n, seed=seed % 1000, dtype=A.dtype)
    C = accspmm.spmm(A, B, device="cpu", format=fmt)
    assert_bit_exact(C, np.asarray(sp.csr_matrix(A) @ B))


def test_matrix_market_compressions(tmp_path):
    """datasets reads .mtx, .mtx.gz and .mtx.xz alike and finds a matrix by name in a directory."""
    import gzip
    import lzma

    import scipy.io

    from accspmm import datasets

    A = datasets.load_bundled()
    scipy.io.mmwrite(str(tmp_path / "plain.mtx"), A)
    text = (tmp_path / "plain.mtx").read_bytes()
    (tmp_path / "g.mtx.gz").write_bytes(gzip.compress(text))
    (tmp_path / "x.mtx.xz").write_bytes(lzma.compress(text))
    for name in ("plain", "g", "x"):
        path = datasets.matrix_path(tmp_path, name)
        assert datasets.matrix_name(path) == name
        B = datasets.load_matrix(path)
        assert (B != A).nnz == 0 and B.shape == A.shape
    assert [datasets.matrix_name(p) for p in datasets.matrix_files(tmp_path)] == ["g", "plain", "x"]
    got = list(datasets.matrices(tmp_path, only=["x", "plain"], dtype=np.float32))
    assert [n for n, _ in got] == ["plain", "x"]
    assert all(M.dtype == np.float32 and M.format == "csr" and (M != A).nnz == 0 for _, M in got)
    with pytest.raises(FileNotFoundError, match="missing"):
        datasets.matrix_path(tmp_path, "missing")

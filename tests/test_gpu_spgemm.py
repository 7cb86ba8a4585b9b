"""The GPU SpGEMM (cuda/spgemm*.cu, marked `gpu`): scipy's pattern and values, bit for bit on integer
data, for scipy and CuPy operands, fresh and reused plans, both algorithms (8x8 tiles on Tensor
Cores, rows on CUDA cores: each row class) and every chunking and numeric path of the tiles; the
error bound on random data; scipy's NaN/inf; determinism; C's tile structure against a NumPy
reference; bad input.  Results are poisoned (-1 / NaN) before the numeric phase writes them."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import accspmm
from accspmm import datasets
from conftest import real_matrix_params
from spgemm_reference import pattern, tile_structure

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy") if accspmm.cuda_available() else None


def scipy_product(A, B, dtype=None):
    """scipy's A @ B (sorted rows, zeros dropped) in `dtype`."""
    C = sp.csr_matrix(A @ B)
    if dtype is not None:
        C = C.astype(dtype)
    C.eliminate_zeros()
    C.sort_indices()
    return C


def same(C, R, nan=False):
    """Identical CSR matrices: shape, indptr, indices, dtype and values bit for bit."""
    if not sp.issparse(C):
        C = C.get()
    assert C.shape == R.shape
    assert np.array_equal(np.asarray(C.indptr, np.int64), np.asarray(R.indptr, np.int64)), "indptr differs"
    assert np.array_equal(np.asarray(C.indices, np.int64), np.asarray(R.indices, np.int64)), "indices differ"
    assert C.dtype == R.dtype
    assert np.array_equal(C.data, R.data, equal_nan=nan), f"values differ at {np.flatnonzero(C.data != R.data)[:5]}"


def int_sparse(m, k, density, seed, dtype=np.float64, low=-8, high=9):
    rng = np.random.default_rng(seed)
    M = sp.random(m, k, density=density, format="csr", random_state=seed, dtype=dtype)
    M.data = rng.integers(low, high, M.nnz).astype(dtype)  # explicit zeros included
    return M


def algo(algorithm):
    """spgemm_plan's arguments for an algorithm of ALGORITHMS: "rows-sorted" is the rows with every
    small row sorted in row groups (none in hash tables)."""
    if algorithm == "rows-sorted":
        return {"algorithm": "rows", "row_hash": False}
    return {"algorithm": algorithm}


def gpu_plan(A, B, algorithm="auto", **kw):
    return accspmm.spgemm_plan(A, B, device="gpu", **algo(algorithm), **kw)


def gpu_product(A, B, algorithm="auto", **kw):
    """spgemm through a plan with poisoned results."""
    with gpu_plan(A, B, algorithm, **kw) as p:
        p._poison = True
        return p()


ALGORITHMS = ["tiles", "rows", "rows-sorted"]


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), k=st.integers(1, 70), n=st.integers(1, 70), d=st.floats(0.0, 0.6),
       seed=st.integers(0, 2**31), f32=st.booleans())
def test_integer_products_equal_scipy(m, k, n, d, seed, f32):
    dt = np.float32 if f32 else np.float64
    A, B = int_sparse(m, k, d, seed, dt), int_sparse(k, n, d, seed + 1, dt)
    ref = scipy_product(A, B)
    for algorithm in ALGORITHMS + ["auto"]:
        same(gpu_product(A, B, algorithm=algorithm), ref)


@pytest.mark.parametrize("path", ["model", "tensor", "scalar"])
@pytest.mark.parametrize("chunk_pairs,keep_pairs", [(0, True), (0, False), (7, True), (1, False)])
def test_every_tile_path_and_chunking_is_exact(path, chunk_pairs, keep_pairs):
    A = int_sparse(203, 150, 0.08, 1)
    B = int_sparse(150, 177, 0.1, 2)
    ref = scipy_product(A, B)
    same(gpu_product(A, B, algorithm="tiles", path=path, chunk_pairs=chunk_pairs, keep_pairs=keep_pairs), ref)
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="tiles", path=path, chunk_pairs=chunk_pairs) as p:
        assert p.stats["algorithm"] == "tiles"
        assert (p.stats["chunks"] > 1) == (chunk_pairs > 0)


def row_classes_matrix(n, seed):
    """Rows of every class of the row algorithm, interleaved: empty, small (< 1024 products),
    medium (< 8192) and huge, for B of n columns (n up to about 24,000 on sm_90: large rows
    accumulate in shared memory; larger n: medium rows sorted by one block, huge rows in batches)."""
    rng = np.random.default_rng(seed)
    k = 600
    A = int_sparse(90, k, 0.01, seed)
    A = A.tolil()
    A[3, :] = rng.integers(1, 4, k)  # huge: 600 entries x about 40
    A[40, :] = rng.integers(1, 4, k)
    A[41, :100] = rng.integers(1, 4, 100)  # medium: about 4000 products
    A[88, :40] = rng.integers(1, 4, 40)  # medium: about 1600
    A[10] = 0
    A = sp.csr_matrix(A)
    B = int_sparse(k, n, min(1.0, 40 / n), seed + 1)
    return A, B


def with_duplicates(M, seed):
    """M with a duplicate of each row's first entry (the values split in two) and rows shuffled:
    the same matrix once duplicates are summed, not canonical."""
    rng = np.random.default_rng(seed)
    M = sp.csr_matrix(M)
    rows, cols, vals = [], [], []
    for i in range(M.shape[0]):
        c = M.indices[M.indptr[i]:M.indptr[i + 1]].copy()
        v = M.data[M.indptr[i]:M.indptr[i + 1]].copy()
        if len(c):
            c, v = np.r_[c, c[0]], np.r_[v, 1.0]
            v[0] -= 1.0
        order = rng.permutation(len(c))
        rows.append(np.full(len(c), i))
        cols.append(c[order])
        vals.append(v[order])
    indptr = np.r_[0, np.cumsum([len(r) for r in rows])]
    return sp.csr_matrix((np.concatenate(vals), np.concatenate(cols), indptr), shape=M.shape)


@pytest.mark.parametrize("algorithm", ["rows", "rows-sorted"])
@pytest.mark.parametrize("dups", [False, True])
@pytest.mark.parametrize("n", [500, 30000])
def test_row_algorithm_every_row_class(n, dups, algorithm):
    A, B = row_classes_matrix(n, 3)
    Bd = with_duplicates(B, 4) if dups else B
    with gpu_plan(A, Bd, algorithm) as p:
        p._poison = True
        assert p.stats["algorithm"] == "rows" and p.stats["large_rows"] == 4
        assert p.stats["row_groups"] >= (algorithm == "rows-sorted")
        same(p(), scipy_product(A, B))
        A2 = A.copy()
        A2.data = -A2.data
        same(p(A2), scipy_product(A2, B))


def long_b_rows_matrix(n, seed):
    """Large rows of A (600 entries: three stages of the dense accumulation) over a B with rows longer
    than a block of threads (column 7 of A meets a B row of 3000 entries)."""
    A, B = row_classes_matrix(n, seed)
    B = B.tolil()
    rng = np.random.default_rng(seed)
    B[7, rng.choice(n, 3000, replace=False)] = rng.integers(1, 4, 3000)
    return A, sp.csr_matrix(B)


@pytest.mark.parametrize("n", [6000, 20000])
def test_dense_rows_with_b_rows_longer_than_a_warp_range(n):
    """Dense accumulation (n up to about 24,000 on sm_90): each warp reads its columns' part of a
    3000-entry B row; at n = 20000 the pattern has more 32-bit words than the block has threads."""
    A, B = long_b_rows_matrix(n, 5)
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows") as p:
        p._poison = True
        assert p.stats["large_rows"] >= 4
        same(p(), scipy_product(A, B))


@pytest.mark.parametrize("keep_zeros", [False, True])
@pytest.mark.parametrize("n", [500, 6000])
def test_dense_rows_reuse_reads_kept_columns(n, keep_zeros):
    """A plan keeps its dense rows' structural columns at its second product, and from the third on
    those rows read them instead of setting and scanning pattern bits (cuda/spgemm.cu, known_cols):
    every product is scipy's bit for bit, with new values that cancel to exact zeros (dropped, or kept
    in the structural pattern), and with outputs poisoned before each product."""
    A, B = long_b_rows_matrix(n, 5) if n == 6000 else row_classes_matrix(n, 3)
    structure = sp.csr_matrix(pattern(A) @ pattern(B))
    structure.sort_indices()
    rng = np.random.default_rng(n)
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows", keep_zeros=keep_zeros) as p:
        p._poison = True
        assert p.stats["algorithm"] == "rows" and p.stats["large_rows"] >= 4
        for call in range(5):
            A2 = A.copy()
            A2.data = rng.integers(-2, 3, A.nnz).astype(A.dtype)  # small values: many exact cancellations
            C = p(A2) if call else p()
            A2 = A2 if call else A
            ref = scipy_product(A2, B)
            if keep_zeros:
                assert np.array_equal(C.indptr, structure.indptr) and np.array_equal(C.indices, structure.indices)
                C = C.copy()
                C.eliminate_zeros()
            same(C, ref)


def test_sorted_large_rows_when_dense_accumulation_is_off(tmp_path):
    """ACCSPMM_SPGEMM_DENSE_COLS=0 (read once per process: a child process) sorts every large row
    (medium and huge) even for small n, duplicates in B included: the same bits as scipy."""
    import subprocess
    import sys

    A, B = long_b_rows_matrix(6000, 6)
    sp.save_npz(tmp_path / "a.npz", A)
    sp.save_npz(tmp_path / "b.npz", with_duplicates(B, 7))
    code = f"""
import numpy as np, scipy.sparse as sp, accspmm
A, B = sp.load_npz({str(tmp_path / "a.npz")!r}), sp.load_npz({str(tmp_path / "b.npz")!r})
with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows") as p:
    C = p()
R = sp.csr_matrix(A @ B); R.eliminate_zeros(); R.sort_indices()
assert np.array_equal(C.indptr, R.indptr) and np.array_equal(C.indices, R.indices)
assert np.array_equal(C.data, R.data)
print("ok")
"""
    env = dict(os.environ, ACCSPMM_SPGEMM_DENSE_COLS="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("dups", [False, True])
def test_tiny_rows_at_their_limits(dups):
    """Rows around the tiny rows' limits (32 entries and 32 products: a warp sorts them in
    registers): rows of exactly 32 products, of 33, of 32 entries, of 33 entries whose B rows are
    mostly empty (few products: not tiny), rows of 64-140 products in few entries (hashed, or row
    groups),
    repeated columns that cancel to exact zeros, and B rows with duplicate columns; the result is
    scipy's, bit for bit."""
    rng = np.random.default_rng(7)
    k, n = 200, 90
    blen = rng.integers(0, 6, k)
    blen[:40] = 0  # empty rows of B: entries of A without products
    blen[40:60] = 1
    blen[100:140] = 8  # long rows: rows of many products in few entries
    Brows = [np.sort(rng.choice(n, size=b, replace=False)) for b in blen]
    B = sp.csr_matrix((rng.integers(-3, 4, blen.sum()).astype(np.float64), np.concatenate(Brows),
                       np.r_[0, np.cumsum(blen)]), shape=(k, n))
    rows = []
    for target in (list(range(0, 41)) + [64, 100, 127, 128, 129, 140]) * 3:
        cols, total = [], 0
        order = rng.permutation(k)
        if target > 40:  # the long B rows first: at most 32 entries
            order = order[np.argsort(-blen[order], kind="stable")]
        for c in order:
            if total + blen[c] <= target:
                cols.append(c)
                total += blen[c]
            if total == target:
                break
        rows.append(np.array(cols, np.int64))
    rows.append(np.arange(32))  # 32 entries, every B row empty: no products
    rows.append(np.r_[np.arange(33), [45]])  # 34 entries, few products: a row group's
    rows.append(np.r_[np.arange(31), [41]])  # 32 entries, 1 product: tiny
    lens = [len(r) for r in rows]
    A = sp.csr_matrix((rng.integers(-2, 3, sum(lens)).astype(np.float64), np.concatenate(rows),
                       np.r_[0, np.cumsum(lens)]), shape=(len(rows), k))
    Bd = with_duplicates(B, 4) if dups else B
    P, Pd, L = row_products(A, B), row_products(A, Bd), np.diff(A.indptr)
    with accspmm.spgemm_plan(A, Bd, device="gpu") as p:  # auto: the model's statistics (the operands as given)
        assert p.stats["tiny_products"] == Pd[(Pd > 0) & (Pd <= 32) & (L <= 32)].sum()
    assert ((P == 32) & (L <= 32)).any() and ((P > 32) & (P <= 40)).any() and ((P <= 32) & (L > 32)).any()
    for algorithm in ALGORITHMS:
        with gpu_plan(A, Bd, algorithm) as p:
            p._poison = True
            same(p(), scipy_product(A, B))
            A2 = A.copy()
            A2.data = A2.data * 3 - 1
            same(p(A2), scipy_product(A2, B))


def hashed_rows_case(seed, dups):
    """Rows around the hash candidates' limits (256 entries and 256 products: a warp's table of 512
    slots) and the hashed rows' (at most 64 entries of C from at least twice as many products; the
    other candidates go to the row groups): 33-300 products, exactly 256 and 257, 256 and 257 entries
    of one product each, entries into empty B rows, A's rows unsorted with repeated columns, and
    (dups) B's rows with duplicate columns; B's rows up to 40 long (a step of 32 products spans
    entries), those from 350 on within 48 columns (rows of A over them make few entries of C from
    many products).  Returns A, B (as given to the product), B canonical, and each row's products."""
    rng = np.random.default_rng(seed)
    k, n = 600, 700
    blen = rng.integers(0, 41, k)
    blen[:50] = 0
    blen[50:150] = 1
    Brows = [np.sort(rng.choice(n if r < 350 else 48, size=b, replace=False)) for r, b in enumerate(blen)]
    B = sp.csr_matrix((rng.integers(-3, 4, blen.sum()).astype(np.float64), np.concatenate(Brows),
                       np.r_[0, np.cumsum(blen)]), shape=(k, n))
    # B's rows from 150 on with a duplicate of their first column (dups): B as given
    Bd = sp.csr_matrix(sp.vstack([B[:150], with_duplicates(B[150:], seed + 1)])) if dups else B
    glen = np.diff(Bd.indptr)
    ones = np.arange(50, 150)
    rows = []
    for target, pool in zip([33, 40, 64, 100, 127, 128, 129, 200, 255, 256, 257, 300] * 4,
                            [np.arange(150, 350)] * 12 + [np.arange(350, k)] * 12 + [np.arange(150, k)] * 24):
        cols, total = [], 0
        for c in rng.permutation(pool):  # unsorted, then a repeated column
            if total + glen[c] <= target:
                cols.append(c)
                total += glen[c]
            if total == target:
                break
        cols += list(rng.choice(ones, target - total, replace=True)) if total < target else []
        rows.append(np.array(cols, np.int64))
    rows.append(np.r_[rng.choice(ones, 100), rng.choice(ones, 100), rng.choice(ones, 56)])  # 256 entries
    rows.append(np.r_[rng.choice(ones, 100), rng.choice(ones, 100), rng.choice(ones, 57)])  # 257: groups
    rows.append(np.r_[np.arange(50), np.arange(150, 160)])  # entries into empty B rows
    rows.append(np.zeros(0, np.int64))
    rows.append(np.r_[np.arange(20), rng.choice(np.arange(150, k), 6, replace=False)])
    lens = [len(r) for r in rows]
    A = sp.csr_matrix((rng.integers(-2, 3, sum(lens)).astype(np.float64), np.concatenate(rows),
                       np.r_[0, np.cumsum(lens)]), shape=(len(rows), k))
    A.has_sorted_indices = False
    return A, Bd, B, row_products(A, Bd)


@pytest.mark.parametrize("dups", [False, True])
def test_hashed_rows_at_their_limits(dups):
    """Rows of up to 256 entries and products that are not tiny sum in a warp's hash table: scipy's
    pattern and values bit for bit on integer data, and on random values the same bits as the sorted
    row groups (the sums in the same order, scipy's); the model counts their products."""
    A, Bd, B, P = hashed_rows_case(11, dups)
    L = np.diff(A.indptr)
    tiny = (P > 0) & (P <= 32) & (L <= 32)
    hashed = ~tiny & (P > 0) & (P <= 256) & (L <= 256)
    assert hashed.sum() > 40 and ((P == 256) & hashed).any() and (P == 257).any() and ((L == 257) & ~hashed).any()
    with gpu_plan(A, Bd) as p:  # auto: the model's statistics
        assert p.stats["hashed_products"] == P[hashed].sum()
    ref = scipy_product(A, B)
    # kept: at most 64 structural entries from twice as many products, all or none (the sample's
    # verdict), counted over B as given or its canonical copy (made for the dense large rows' path)
    ones = lambda M: sp.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)  # noqa: E731
    nnz = np.diff(sp.csr_matrix(ones(A) @ ones(Bd)).indptr)  # structural entries of C
    kept = {int((hashed & (nnz <= 64) & (2 * nnz <= Q)).sum()) for Q in (P, row_products(A, B))}
    assert all(5 < k < hashed.sum() for k in kept)
    for algorithm in ("rows", "rows-sorted"):
        with gpu_plan(A, Bd, algorithm) as p:
            p._poison = True
            assert p.stats["hashed_rows"] in (kept | {0} if algorithm == "rows" else {0})
            same(p(), ref)
            A2 = A.copy()
            A2.data = A2.data * 3 - 1
            same(p(A2), scipy_product(A2, B))
    rng = np.random.default_rng(3)
    for dt in (np.float32, np.float64):
        Af, Bf = A.astype(dt), Bd.astype(dt)
        Af.data = rng.standard_normal(Af.nnz).astype(dt)
        Bf.data = rng.standard_normal(Bf.nnz).astype(dt)
        Af.data[::7] = -0.0  # products of -0: a sum of only those keeps the sign in both
        Ch = gpu_product(Af, Bf, algorithm="rows", keep_zeros=True)
        Cs = gpu_product(Af, Bf, algorithm="rows-sorted", keep_zeros=True)
        same(Ch, Cs)
        assert np.array_equal(np.signbit(Ch.data), np.signbit(Cs.data))
        assert np.signbit(Ch.data).any()


@pytest.mark.parametrize("dups", [False, True])
def test_hashed_rows_of_a_blocky_product(dups):
    """kron(2-D Poisson, 2x2 ones) squared: every row of about 100 products makes at most 26 entries of
    C, so every row is hashed (the numeric pass sums in the warps' tables, collisions within a step of
    32 products included): scipy's product bit for bit on integers, and on random values the same
    bits as the sorted row groups, the sign of zero sums included."""
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(30, 30))
    A = sp.csr_matrix(sp.kron(sp.kronsum(T, T), np.ones((2, 2))))
    rng = np.random.default_rng(4)
    A.data = rng.integers(-3, 4, A.nnz).astype(np.float64)
    B = with_duplicates(A, 5) if dups else A
    with gpu_plan(A, B, "rows") as p:
        p._poison = True
        assert p.stats["hashed_rows"] == A.shape[0]
        same(p(), scipy_product(A, A))
    for dt in (np.float32, np.float64):
        Af, Bf = A.astype(dt), B.astype(dt)
        Af.data = rng.standard_normal(Af.nnz).astype(dt)
        Bf.data = rng.standard_normal(Bf.nnz).astype(dt)
        Af.data[::5] = -0.0
        Ch = gpu_product(Af, Bf, algorithm="rows", keep_zeros=True)
        Cs = gpu_product(Af, Bf, algorithm="rows-sorted", keep_zeros=True)
        same(Ch, Cs)
        assert np.array_equal(np.signbit(Ch.data), np.signbit(Cs.data))
        ref = scipy_product(Af.astype(np.float64), Bf.astype(np.float64))
        assert np.allclose(Ch.toarray(), ref.toarray(), rtol=1e-5, atol=1e-6)


def one_shot(A, B, **kw):
    """spgemm's own plan (values given to the symbolic phase), results poisoned: its first product (the
    symbolic phase's sums), second (which keeps the hashed products' places) and third (which adds at
    them); and its statistics after each."""
    with accspmm.SpGEMMPlan(A, B, device="gpu", keep_pairs=False, _one_shot=True, **kw) as p:
        p._poison = True
        Cs, stats = [], []
        for _ in range(3):
            Cs.append(p())
            stats.append(dict(p.stats))
    return Cs, stats


@pytest.mark.parametrize("kind", ["scipy", "cupy"])
def test_one_shot_sums_hashed_rows_in_the_symbolic_pass(kind, monkeypatch):
    """A one-shot product (spgemm) gives the symbolic phase its values: the kept hashed rows are summed
    there, into the plan, and the numeric call copies them.  The same bits as a plan's product, which
    hashes them in the numeric call (integers: scipy's; random values, signs of zero included: the
    plan's), for each input and output precision; where the plan's room holds only some rows
    (ACCSPMM_SPGEMM_FUSED_CAP), the others are summed by the numeric call, with the same bits.  A plan's
    second product keeps each hashed product's place in C, and its third adds there without a table:
    the same bits again, with new values too."""
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(60, 60))
    A = sp.csr_matrix(sp.kron(sp.kronsum(T, T), np.ones((2, 2))))  # 14,400 rows of ~100 products: hashed
    rng = np.random.default_rng(5)
    A.data = rng.integers(-3, 4, A.nnz).astype(np.float64)
    import cupyx.scipy.sparse as csp

    conv = (lambda M: csp.csr_matrix(M)) if kind == "cupy" else (lambda M: M)  # noqa: E731
    host = (lambda C: C.get()) if kind == "cupy" else (lambda C: C)  # noqa: E731
    cases = [(np.float64, None), (np.float32, None), (np.float64, "fp32")]
    for dt, precision in cases:
        for integer in (True, False):
            Af = A.astype(dt)
            if not integer:
                Af.data = rng.standard_normal(Af.nnz).astype(dt)
                Af.data[::5] = -0.0
            Ag = conv(Af)
            (C, D, E), (stats, _, last) = one_shot(Ag, Ag, precision=precision, keep_zeros=not integer)
            assert stats["algorithm"] == "rows" and stats["hashed_rows"] == A.shape[0]
            assert stats["hash_places"] == 0 < last["hash_places"]
            # room for a quarter of the products: most of these rows (about 3.9 products an entry)
            assert stats["fused_reserved"] > 0.9 * stats["fused_cap"] > 0
            ref = gpu_product(Ag, Ag, precision=precision, keep_zeros=not integer)  # summed by the numeric call
            same(host(C), host(ref))
            same(host(D), host(ref))
            same(host(E), host(ref))
            assert np.array_equal(np.signbit(host(C).data), np.signbit(host(ref).data))
            if integer:
                want = np.float32 if dt == np.float32 or precision == "fp32" else np.float64
                same(host(C), scipy_product(A, A, want))
            same(host(accspmm.spgemm(Ag, Ag, precision=precision, keep_zeros=not integer)), host(ref))
    # room for some rows only: the rest are summed by the numeric call
    monkeypatch.setenv("ACCSPMM_SPGEMM_FUSED_CAP", "5000")
    (C, _, _), (stats, _, _) = one_shot(conv(A), conv(A))
    assert stats["fused_cap"] == 5000 and stats["fused_reserved"] > 5000
    same(host(C), scipy_product(A, A))
    # a plan's products with new values: the second keeps the places, the third and later add there
    Af = A.astype(np.float32)
    Ag = conv(Af)
    with gpu_plan(Ag, Ag) as p:  # A @ A: new values for both
        p._poison = True
        for t in range(4):
            An = Af.copy()
            An.data = rng.standard_normal(Af.nnz).astype(np.float32)
            Ang = conv(An)
            got = p(Ang)
            assert (p.stats["hash_places"] > 0) == (t >= 1)  # kept by the second product
            same(host(got), host(gpu_product(Ang, Ang)))
    monkeypatch.delenv("ACCSPMM_SPGEMM_FUSED_CAP")
    # B with duplicates, its rows unsorted (used as it is: no dense large rows): summed like scipy's
    B = with_duplicates(A, 6)
    (C, _, E), (stats, _, _) = one_shot(conv(A), conv(B))
    assert stats["fused_reserved"] > 0
    same(host(C), scipy_product(A, B))
    same(host(E), scipy_product(A, B))
    # float32 data for a float64 result (the numeric call widens the values it gathers): not fused
    (C, _, _), (stats, _, _) = one_shot(conv(A.astype(np.float32)), conv(A.astype(np.float32)),
                                        precision="fp64")
    assert stats["fused_cap"] == 0
    same(host(C), scipy_product(A, A))


def test_plan_keeps_tiny_rows_sorted_order():
    """Rows of at most 32 entries and products sort their products in a warp; a plan whose tiny rows
    hold at least 16 products a row keeps, at its second product, each row's sorted order, and its later
    products read it instead of sorting: the same bits as a fresh product for new values (random, with
    -0.0), and scipy's on integers."""
    rng = np.random.default_rng(8)
    m = 20000
    rows, cols = np.repeat(np.arange(m), 5), rng.integers(0, m, 5 * m)
    A = sp.csr_matrix((rng.integers(-3, 4, 5 * m).astype(np.float64), (rows, cols)), shape=(m, m))
    with gpu_plan(A, A) as p:
        p._poison = True
        assert p.stats["algorithm"] == "rows" and p.stats["tiny_products"] >= 16 * m
        for t in range(4):
            An = A.copy()
            An.data = rng.standard_normal(A.nnz)
            An.data[::7] = -0.0
            got = p(An)
            assert (p.stats["tiny_places"] > 0) == (t >= 1)  # kept by the second product
            fresh = gpu_product(An, An)
            same(got, fresh)
            assert np.array_equal(np.signbit(got.data), np.signbit(fresh.data))
        same(p(A), scipy_product(A, A))


@pytest.mark.parametrize("bits", [32, 64])
def test_canonical_check_counts_descents(bits):
    """The device check (one pass: offsets, column range, and a descent ci[e] <= ci[e-1] allowed
    only where a row starts) against a host reference, on operands whose descents sit exactly at
    row starts (canonical), one entry off (not), with duplicates, empty rows and an empty operand;
    invalid offsets and columns raise."""
    import importlib

    cu = importlib.import_module("accspmm._cuda")
    itype = cp.int32 if bits == 32 else cp.int64

    def check(indptr, indices, k):
        rp, ci = cp.asarray(indptr, itype), cp.asarray(indices, itype)
        m, nnz = len(indptr) - 1, len(indices)
        csr = (m, k, nnz, rp.data.ptr, ci.data.ptr if nnz else rp.data.ptr, bits, -1)
        return cu.spgemm_check_csr((csr,), ("A",), 0)[0]

    def reference(indptr, indices):
        return all(np.all(np.diff(indices[indptr[i]:indptr[i + 1]]) > 0) for i in range(len(indptr) - 1))

    rng = np.random.default_rng(3)
    cases = [([0, 2, 4], [5, 9, 0, 3]), ([0, 2, 4], [5, 9, 9, 12]), ([0, 2, 4], [5, 9, 3, 3]),
             ([0, 0, 2, 2, 3, 3], [7, 8, 1]), ([0, 3], [1, 1, 2]), ([0, 1, 2], [4, 4]), ([0, 0, 0], [])]
    for _ in range(40):  # random rows, some sorted, some with one swap or a repeat
        lens = rng.integers(0, 6, 50)
        rows = [np.sort(rng.choice(40, size=n, replace=False)) for n in lens]
        if rng.random() < 0.5 and lens.max() > 1:
            r = int(np.flatnonzero(lens > 1)[rng.integers(0, (lens > 1).sum())])
            rows[r] = rows[r][::-1] if rng.random() < 0.5 else np.r_[rows[r][:1], rows[r][:-1]]
        cases.append((np.r_[0, np.cumsum(lens)], np.concatenate(rows) if lens.sum() else np.zeros(0, int)))
    for indptr, indices in cases:
        indptr, indices = np.asarray(indptr), np.asarray(indices)
        assert check(indptr, indices, 41) == reference(indptr, indices), (indptr, indices)
    with pytest.raises(ValueError, match="indptr"):
        check(np.array([0, 3, 2]), np.array([1, 2, 3]), 10)
    with pytest.raises(ValueError, match="indices"):
        check(np.array([0, 1, 3]), np.array([1, 2, 10]), 10)


def test_row_groups_of_many_entries_without_products():
    """Row groups whose rows hold more entries of A than the block has threads x items (entries into
    B's empty rows: few products, many entries), next to groups of ordinary rows and empty rows: the
    symbolic pass expands the former entry by entry (binary searches) and the latter cooperatively
    (the entries staged in shared memory); both give scipy's product, bit for bit."""
    rng = np.random.default_rng(17)
    k, n = 5000, 300
    blen = np.zeros(k, np.int64)
    blen[4900:] = 3
    B = sp.csr_matrix((rng.integers(-3, 4, blen.sum()).astype(np.float64),
                       np.concatenate([np.sort(rng.choice(n, 3, replace=False)) for _ in range(100)]),
                       np.r_[0, np.cumsum(blen)]), shape=(k, n))
    rows = []
    for i in range(2400):
        if i % 40 < 3:  # many entries, few products (a small row, not tiny)
            rows.append(np.sort(np.r_[rng.choice(4900, 2500, replace=False), rng.choice(100, 5, replace=False) + 4900]))
        elif i % 7 == 0:
            rows.append(np.zeros(0, np.int64))  # empty rows between
        else:  # 12-20 entries, 36-60 products
            rows.append(np.sort(rng.choice(100, rng.integers(12, 21), replace=False) + 4900))
    lens = [len(r) for r in rows]
    A = sp.csr_matrix((rng.integers(-2, 3, sum(lens)).astype(np.float64), np.concatenate(rows),
                       np.r_[0, np.cumsum(lens)]), shape=(len(rows), k))
    for row_hash in (False, True):  # the rows of 36-60 products in groups, or hashed
        with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows", row_hash=row_hash) as p:
            p._poison = True
            assert p.stats["row_groups"] > 1 and p.stats["large_rows"] == 0
            same(p(), scipy_product(A, B))


def test_row_group_spanning_more_than_2_16_rows():
    """A row group whose small rows lie more than 2^16 rows apart (empty rows between: a group is
    made of consecutive products, whatever the rows between): the staged expansion's 16-bit row
    indices do not hold it, so it takes the search path; the result is scipy's, bit for bit."""
    rng = np.random.default_rng(23)
    k, n = 300, 200
    B = int_sparse(k, n, 0.02, 29)  # about 4 entries a row
    m = 140_000
    rows = np.zeros(m + 1, np.int64)
    picked = {0: 12, 70_001: 12, 139_990: 11}  # small rows (about 48 products: not tiny), far apart
    cols, lens = [], np.zeros(m, np.int64)
    long_rows = np.flatnonzero(np.diff(B.indptr) >= 3)  # 11+ entries of 3+ products: not tiny
    for i, c in picked.items():
        cols.append(np.sort(rng.choice(long_rows, c, replace=False)))
        lens[i] = c
    rows[1:] = np.cumsum(lens)
    A = sp.csr_matrix((rng.integers(-2, 3, rows[-1]).astype(np.float64), np.concatenate(cols), rows), shape=(m, k))
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows", row_hash=False) as p:
        p._poison = True
        assert p.stats["row_groups"] == 1
        same(p(), scipy_product(A, B))
    same(gpu_product(A, B, algorithm="rows"), scipy_product(A, B))  # hashed: a warp per row, far apart


def test_tiny_rows_past_2_27_columns():
    """Tiny rows whose (column, product) keys need 64 bits (B has more than 2^27 columns); scipy's
    product is taken on B's used columns only (its n-wide mask would take gigabytes)."""
    S = int_sparse(400, 400, 0.008, 11)
    n = (1 << 27) + 5
    W = sp.csr_matrix((S.data, (S.indices.astype(np.int64) * 400_000) % n, S.indptr), shape=(400, n))
    uniq = np.unique(W.indices)
    Wc = sp.csr_matrix((W.data, np.searchsorted(uniq, W.indices), W.indptr), shape=(400, uniq.size))
    R = scipy_product(S, Wc)
    R = sp.csr_matrix((R.data, uniq[R.indices], R.indptr), shape=W.shape)
    assert (row_products(S, W) <= 32).mean() > 0.9  # mostly tiny rows
    same(gpu_product(S, W, algorithm="rows"), R)


def dense_tiles(nblocks, b, seed, dtype=np.float64):
    """kron(2-D Poisson, dense b x b): tiles full where b = 8, integer values."""
    n = int(np.sqrt(nblocks))
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), dtype=np.float64)
    P = sp.kronsum(T, T, format="csr")
    M = sp.kron(P, np.ones((b, b)), format="csr").astype(dtype)
    M.data = np.random.default_rng(seed).integers(-4, 5, M.nnz).astype(dtype)
    return M


@pytest.mark.parametrize("b", [1, 3, 8])
def test_dense_tiles_on_tensor_cores(b):
    A = dense_tiles(100, b, 1)
    ref = scipy_product(A, A)
    same(gpu_product(A, A), ref)
    same(gpu_product(A, A, algorithm="tiles", path="tensor"), ref)
    same(gpu_product(A, A, algorithm="rows"), ref)


def row_products(A, B):
    """Scalar products per row of A @ B (the model's row statistics)."""
    per_entry = np.diff(B.indptr)[A.indices].astype(np.int64)
    return np.add.reduceat(np.r_[per_entry, 0], A.indptr[:-1]) * (np.diff(A.indptr) > 0)


def test_the_model_takes_tiles_where_they_are_dense():
    # 80,000 rows of up to 1,600 products in full 8x8 tiles: the tiles win; a sparse product: the rows
    D, S = dense_tiles(10000, 8, 1), int_sparse(3000, 3000, 0.001, 2)
    for X, algorithm in ((D, "tiles"), (S, "rows")):
        P = row_products(X, X)
        large = P > 1024
        with accspmm.spgemm_plan(X, X, device="gpu") as p:
            st = p.stats
            assert st["algorithm"] == algorithm
            assert (st["model_ms_tiles"] < st["model_ms_rows"]) == (algorithm == "tiles")
            assert st["products"] == P.sum() and st["large_products"] == P[large].sum()
            assert st["large_entries"] == np.diff(X.indptr)[large].sum()
            tiny = (P > 0) & (P <= 32) & (np.diff(X.indptr) <= 32)
            assert st["tiny_products"] == P[tiny].sum()
    assert row_products(D, D).max() == 1600 and row_products(S, S).max() <= 1024
    with accspmm.spgemm_plan(D, D, device="gpu") as p:
        assert p.stats["density_a"] == 64.0
    with accspmm.spgemm_plan(S, S, device="gpu") as p:
        assert p.stats["density_a"] < 2


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("path", real_matrix_params())
def test_real_matrices_integer_exact(path, algorithm):
    """A @ A (square) or A @ A^T / A^T @ A (rectangular: the smaller result) on every real matrix."""
    A = datasets.load_matrix(path, np.float64)
    rng = np.random.default_rng(5)
    A.data = rng.integers(-3, 4, A.nnz).astype(np.float64)
    if A.shape[0] == A.shape[1]:
        X, Y = A, A
    elif A.shape[0] <= A.shape[1]:
        X, Y = A, sp.csr_matrix(A.T)
    else:
        X, Y = sp.csr_matrix(A.T), A
    same(gpu_product(X, Y, algorithm=algorithm), scipy_product(X, Y))


def test_cupy_operands_give_cupy_results():
    import cupyx.scipy.sparse as csp

    A, B = int_sparse(300, 200, 0.05, 3, np.float32), int_sparse(200, 90, 0.05, 4, np.float32)
    Cg = accspmm.spgemm(csp.csr_matrix(A), csp.csr_matrix(B))
    assert isinstance(Cg, csp.csr_matrix) and Cg.dtype == np.float32
    same(Cg, scipy_product(A, B))
    assert Cg.has_sorted_indices
    # A @ A with the same object, and a CuPy COO operand (converted)
    S = int_sparse(150, 150, 0.04, 5, np.float32)
    Sg = csp.csr_matrix(S)
    same(accspmm.spgemm(Sg, Sg), scipy_product(S, S))
    same(accspmm.spgemm(csp.coo_matrix(S), Sg), scipy_product(S, S))
    with pytest.raises(TypeError, match="both"):
        accspmm.spgemm(Sg, S)
    with pytest.raises(ValueError, match="CuPy"):
        accspmm.spgemm(Sg, Sg, device="cpu")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_reuse_with_new_values(algorithm):
    A, B = int_sparse(250, 260, 0.05, 6), int_sparse(260, 240, 0.05, 7)
    with gpu_plan(A, B, algorithm) as p:
        p._poison = True
        same(p(), scipy_product(A, B))
        assert p.stats["pairs_kept"] == (algorithm == "tiles")
        for seed in range(3):
            A2, B2 = A.copy(), B.copy()
            A2.data = np.random.default_rng(seed).integers(-8, 9, A.nnz).astype(np.float64)
            B2.data = np.random.default_rng(seed + 10).integers(-8, 9, B.nnz).astype(np.float64)
            same(p(A2, B2), scipy_product(A2, B2))
            same(p(A2.data, None), scipy_product(A2, B))  # a values array; None keeps the planned B
        with pytest.raises(ValueError, match="planned sparsity pattern"):
            p(int_sparse(250, 260, 0.05, 99))
        with pytest.raises(ValueError, match="1-D array"):
            p(np.ones(3))
    # A @ A: one operand's values
    S = int_sparse(200, 200, 0.05, 8)
    with gpu_plan(S, S, algorithm) as p:
        S2 = S.copy()
        S2.data = -S2.data
        same(p(S2), scipy_product(S2, S2))
        with pytest.raises(ValueError, match="itself"):
            p(S2, S2)


def test_reuse_cupy_and_chunked():
    import cupyx.scipy.sparse as csp

    A = int_sparse(300, 300, 0.03, 9, np.float32)
    Ag = csp.csr_matrix(A)
    with accspmm.spgemm_plan(Ag, Ag, algorithm="tiles", chunk_pairs=50) as p:
        assert p.stats["chunks"] > 1 and not p.stats["pairs_kept"]
        p._poison = True
        same(p(), scipy_product(A, A))
        A2 = A.copy()
        A2.data = A2.data * 2
        same(p(cp.asarray(A2.data)), scipy_product(A2, A2))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_cancellations_dropped_or_kept(algorithm):
    A = sp.csr_matrix(np.array([[1.0, 1.0, 0], [2.0, 0.0, 1]]))
    B = sp.csr_matrix(np.array([[1.0, 3.0], [-1.0, 0.0], [0, 5]]))  # C[0, 0] = 1 - 1 = 0
    same(gpu_product(A, B, algorithm=algorithm), scipy_product(A, B))
    K = gpu_product(A, B, keep_zeros=True, algorithm=algorithm)  # the structural pattern: C[0, 0] stays, as 0
    assert K.nnz == 4 and K.indices.tolist() == [0, 1, 0, 1] and K.data.tolist() == [0.0, 3.0, 2.0, 11.0]
    # many exact zeros spread over long rows: the compaction keeps order and offsets
    M = int_sparse(400, 400, 0.05, 10, low=1, high=3)
    P = sp.hstack([M, -M]).tocsr()
    Q = sp.vstack([M, M]).tocsr()  # P @ Q = M M - M M = 0 everywhere (structurally full)
    C = gpu_product(P, Q, algorithm=algorithm)
    assert C.nnz == 0 and C.shape == (400, 400)
    R = sp.hstack([M, -M, sp.identity(400, format="csr")]).tocsr()
    S = sp.vstack([M, M, M]).tocsr()
    same(gpu_product(R, S, algorithm=algorithm), scipy_product(R, S))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_duplicates_unsorted_int64_and_empty_rows(algorithm):
    A = sp.csr_matrix((np.array([2.0, 3, -1, 4, 4, 7]), np.array([5, 1, 5, 0, 0, 3], np.int64),
                       np.array([0, 3, 3, 5, 5, 5, 6], np.int64)), shape=(6, 9))
    B = int_sparse(9, 20, 0.3, 11)
    Ac = A.copy()
    Ac.sum_duplicates()
    same(gpu_product(A, B, algorithm=algorithm), scipy_product(Ac, B))
    same(gpu_product(B.T.tocsr(), A.T.tocsr(), algorithm=algorithm), scipy_product(B.T, Ac.T))  # B unsorted
    assert A.indices.tolist() == [5, 1, 5, 0, 0, 3]  # the input is not modified


def test_unsorted_operand_of_many_rows_and_columns():
    """The row path's canonical copy sorts keys row << bits(k) | column: B of 70,000 rows (17 bits)
    and 2^21 + 5 columns (22 bits), every row reversed and one entry doubled, the top columns used."""
    rng = np.random.default_rng(21)
    n, nnz = (1 << 21) + 5, 300_000
    cols = rng.integers(0, n, nnz)
    cols[:50] = n - 1 - rng.integers(0, 3, 50)
    B = sp.csr_matrix((rng.integers(-8, 9, nnz).astype(np.float64), (rng.integers(0, 70_000, nnz), cols)),
                      shape=(70_000, n))
    rows, idx, val = [], [], []
    for r in range(B.shape[0]):
        lo, hi = B.indptr[r], B.indptr[r + 1]
        rows.append(hi - lo + (hi > lo))
        idx += [B.indices[lo:hi][::-1], B.indices[lo:hi][:1]]
        val += [B.data[lo:hi][::-1], B.data[lo:hi][:1]]
    U = sp.csr_matrix((np.concatenate(val), np.concatenate(idx), np.concatenate([[0], np.cumsum(rows)])),
                      shape=B.shape)
    assert not U.has_canonical_format
    Uc = U.copy()
    Uc.sum_duplicates()
    A = int_sparse(300, 70_000, 2e-3, 23)
    same(gpu_product(A, U, algorithm="rows"), scipy_product(A, Uc))


@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((1, 500), (500, 1)), ((500, 1), (1, 500)),
                                    ((5000, 3), (3, 7)), ((3, 5000), (5000, 2)), ((17, 9), (9, 0)),
                                    ((0, 9), (9, 4))])
def test_odd_shapes(shapes):
    (m, k), (_, n) = shapes
    A, B = int_sparse(m, k, 0.5, 12), int_sparse(k, n, 0.5, 13)
    for algorithm in ALGORITHMS:
        same(gpu_product(A, B, algorithm=algorithm), scipy_product(A, B))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_empty_operands(algorithm):
    Z = sp.csr_matrix((40, 30))
    C = gpu_product(Z, int_sparse(30, 20, 0.2, 1), algorithm=algorithm)
    assert C.shape == (40, 20) and C.nnz == 0
    C = gpu_product(int_sparse(40, 30, 0.2, 1), sp.csr_matrix((30, 20)), algorithm=algorithm)
    assert C.nnz == 0


@pytest.mark.parametrize("kind,nnz,order", [("hub", 20000, "AA"), ("star", 2000, "AA"), ("dense_row", 20000, "AAt"),
                                           ("dense_col", 20000, "AtA"), ("tall3", 3000, "AAt"),
                                           ("tall3", 30000, "AtA"), ("bipartite", 20000, "AtA")])
def test_adversarial_shapes(kind, nnz, order):
    from accspmm.datasets import adversarial

    A = adversarial(kind, nnz, seed=1, dtype=np.float64)
    A.data = np.random.default_rng(2).integers(-2, 3, A.nnz).astype(np.float64)
    At = sp.csr_matrix(A.T)
    X, Y = {"AA": (A, A), "AAt": (A, At), "AtA": (At, A)}[order]
    ref = scipy_product(X, Y)
    for algorithm in ALGORITHMS:
        same(gpu_product(X, Y, algorithm=algorithm), ref)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_random_values_within_the_bound(algorithm):
    rng = np.random.default_rng(14)
    for dt, u in ((np.float32, 2.0**-24), (np.float64, 2.0**-53)):
        A = sp.random(300, 200, density=0.05, format="csr", random_state=1, dtype=dt)
        B = sp.random(200, 250, density=0.05, format="csr", random_state=2, dtype=dt)
        A.data = (rng.standard_normal(A.nnz)).astype(dt)
        B.data = (rng.standard_normal(B.nnz)).astype(dt)
        C = gpu_product(A, B, algorithm=algorithm)
        A64, B64 = A.astype(np.float64), B.astype(np.float64)
        ref = (A64 @ B64).toarray()
        bound = (abs(A64) @ abs(B64)).toarray()
        k = np.diff(A64.indptr).reshape(-1, 1)
        err = np.abs(C.toarray().astype(np.float64) - ref)
        # float64 sums of exact products, rounded once: one rounding of the output (u) plus the
        # float64 accumulation (k 2^-53)
        assert np.all(err <= (u + k * 2.0**-53) * bound + 1e-300)
        again = gpu_product(A, B, algorithm=algorithm)
        same(again, C)  # repeated runs give identical bits


def test_nan_and_inf_like_scipy():
    A = int_sparse(60, 50, 0.2, 15)
    A.data[:5] = 0.0  # explicit zeros meet inf as NaN, as in scipy
    B = int_sparse(50, 40, 0.2, 16)
    B.data[::7] = np.inf
    B.data[3::11] = -np.inf
    B.data[5::13] = np.nan
    with np.errstate(invalid="ignore"):
        ref = scipy_product(A, B)
    same(gpu_product(A, B, algorithm="rows"), ref, nan=True)
    same(gpu_product(A, B, algorithm="tiles"), ref, nan=True)
    same(gpu_product(A, B, algorithm="tiles", path="tensor"), ref, nan=True)  # non-finite tiles leave the Tensor Cores


def test_tile_structure_matches_reference():
    A, B = int_sparse(130, 90, 0.06, 17), int_sparse(90, 150, 0.06, 18)
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="tiles") as p:
        got = p._product.tiles()
    ref = tile_structure(A, B)
    for name in ("tile_row_offsets", "tile_cols", "tile_masks", "row_offsets"):
        assert np.array_equal(got[name], ref[name]), name


def test_bad_cupy_input_is_refused():
    import cupyx.scipy.sparse as csp

    A = csp.csr_matrix(int_sparse(20, 20, 0.2, 19))
    bad = csp.csr_matrix((A.data, A.indices.copy(), A.indptr.copy()), shape=A.shape)
    bad.indices[3] = 25  # a column outside the shape
    with pytest.raises(ValueError, match="column index"):
        accspmm.spgemm(bad, A)
    bad = csp.csr_matrix((A.data, A.indices.copy(), A.indptr.copy()), shape=A.shape)
    bad.indptr[5] = bad.indptr[6] + 1  # decreasing offsets
    with pytest.raises(ValueError, match="indptr"):
        accspmm.spgemm(A, bad)
    for target in ("A", "B"):  # offsets that end past the arrays: refused, no kernel reads past them
        bad = csp.csr_matrix((A.data, A.indices.copy(), A.indptr.copy()), shape=A.shape)
        bad.indptr[-1] = A.nnz + 4096
        with pytest.raises(ValueError, match="indptr"):
            accspmm.spgemm(bad, A) if target == "A" else accspmm.spgemm(A, bad)
    with pytest.raises(TypeError, match="dtype"):
        accspmm.spgemm(csp.csr_matrix(A, dtype=cp.complex64), A)


def test_plan_statistics():
    A = dense_tiles(64, 8, 2)
    with accspmm.spgemm_plan(A, A, device="gpu", algorithm="tiles") as p:
        s = p.stats
        assert s["nnz_per_tile_a"] == 64.0 and s["tiles_a"] * 64 == A.nnz
        assert s["pairs"] <= s["raw_pairs"] and s["products"] == int((np.diff(A.indptr)[A.indices]).sum())
        assert s["plan_bytes"] > 0 and s["peak_bytes"] >= s["plan_bytes"]
        assert "symbolic" in s["seconds"]


@pytest.mark.parametrize("unsorted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_values_read_in_place_or_gathered(dtype, unsorted):
    """The row kernels read the operands' own values (float32 widened as loaded) where the plan kept
    their order, and gather them in doubles where it made a canonical copy (B with unsorted rows and
    large rows of A): the same bits either way.  stats["peak_bytes"] covers the products too."""
    A, B = int_sparse(300, 2000, 0.02, 11, dtype), int_sparse(2000, 900, 0.01, 12, dtype)
    A[7, :] = 3  # a large row: the dense accumulation, which needs B's rows canonical
    A = sp.csr_matrix(A)
    if unsorted:
        rows = np.repeat(np.arange(B.shape[0]), np.diff(B.indptr))
        order = np.lexsort((-B.indices, rows))  # each row's columns descending
        B = sp.csr_matrix((B.data[order], B.indices[order], B.indptr), shape=B.shape)
        assert not B.has_sorted_indices
    with accspmm.spgemm_plan(A, B, device="gpu", algorithm="rows") as p:
        before = p.stats["peak_bytes"]
        p._poison = True
        C = p()
        assert p.stats["large_rows"] >= 1
        assert p.stats["peak_bytes"] >= before
        same(C, scipy_product(A, B))

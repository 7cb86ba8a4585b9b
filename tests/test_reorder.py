"""Row reorderings: valid permutations on real and generated matrices, determinism, products
bit-exact against scipy through plans that reorder, the quality report, and bad parameters."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accspmm
from accspmm import _reorder, datasets
from accspmm._validate import as_csr
from conftest import (assert_bit_exact, int_dense, load_int_matrix, outputs_at_threads, real_matrix_params, scipy_ref,
                      with_int_values)

METHODS = ["none", "rcm", "degree", "jaccard", "affinity", "auto"]
#: small chunks, parts and short scans so generated matrices run the parallel multi-chunk and
#: multi-part paths
SMALL = {"affinity": {"chunk_nnz": 64, "part_edges": 48, "max_scan": 32}, "jaccard": {"max_candidates": 16}}


def check_perm(perm, A):
    m = A.shape[0]
    assert isinstance(perm, np.ndarray) and perm.dtype == np.int64 and perm.shape == (m,)
    assert np.array_equal(np.sort(perm), np.arange(m))


def empty_rows_last(perm, A):
    lengths = np.diff(sp.csr_matrix(A).indptr)[perm]
    first_empty = np.flatnonzero(lengths == 0)
    return first_empty.size == 0 or np.all(lengths[first_empty[0]:] == 0)


@pytest.mark.parametrize("method", METHODS)
def test_bundled_plan_exact(bundled_int, method):
    A = bundled_int
    p = accspmm.plan(A, device="cpu", format="bittcf", reorder=method)
    assert p.stats["reorder"]["method"] == method
    check_perm(np.asarray(p._bittcf.perm), A)
    for n in (1, 33):
        B = int_dense(A.shape[1], n, seed=n)
        assert_bit_exact(p(B), np.asarray(A @ B))


@pytest.mark.parametrize("part_edges", [None, 8192])
def test_affinity_beats_identity_on_bundled(bundled_int, part_edges):
    """wiki-Vote: affinity must give fewer TC blocks than the original order (measured 7932 vs
    11437), also with step I cut into parts (8192 edges: about 25 parts)."""
    params = {} if part_edges is None else {"part_edges": part_edges}
    none = _reorder.block_stats(bundled_int, accspmm.reorder(bundled_int, "none"))["tc_blocks"]
    aff = _reorder.block_stats(bundled_int, accspmm.reorder(bundled_int, "affinity", **params))["tc_blocks"]
    assert aff < 0.8 * none


@pytest.mark.parametrize("method", METHODS[1:])
def test_deterministic(bundled_int, method):
    a = accspmm.reorder(bundled_int, method, seed=5)
    b = accspmm.reorder(bundled_int, method, seed=5)
    assert np.array_equal(a, b)
    check_perm(accspmm.reorder(bundled_int, method, seed=6), bundled_int)


def test_affinity_independent_of_threads(bundled_int):
    """Step I's parts and step II's chunks run in parallel; the result must not depend on the
    thread count."""
    code = ("import numpy as np, accspmm, sys; A = accspmm.datasets.load_bundled(np.float32); "
            "p = accspmm.reorder(A, 'affinity', chunk_nnz=4096, part_edges=8192); sys.stdout.write(str(int((p * np.arange(len(p))).sum())))")
    outs = outputs_at_threads(code)
    assert len(outs) == 1, outs


def test_large_reorderings_independent_of_threads():
    """At 300k nonzeros the transposed pattern is built by 2-3 threads (private histograms per
    thread); affinity and jaccard must give the same permutation at every thread count, on a
    square matrix and on a rectangular one with few columns (every thread fills every column)."""
    code = ("import numpy as np, scipy.sparse as sp, accspmm, hashlib, sys\n"
            "rng = np.random.default_rng(3); out = []\n"
            "for m, k in ((40000, 40000), (60000, 300)):\n"
            "    A = sp.random(m, k, density=300000 / (m * k), format='csr', random_state=rng, dtype=np.float32)\n"
            "    for meth in ('affinity', 'jaccard'):\n"
            "        out.append(hashlib.md5(accspmm.reorder(A, meth).tobytes()).hexdigest())\n"
            "sys.stdout.write(' '.join(out))")
    outs = outputs_at_threads(code)
    assert len(outs) == 1, outs


@st.composite
def pattern_matrices(draw):
    """Patterns with empty rows, isolated vertices, self loops, one dense row, rectangular shapes."""
    m = draw(st.integers(0, 90))
    k = draw(st.one_of(st.just(m), st.integers(0, 90)))
    if m == 0 or k == 0:
        return sp.csr_matrix((m, k), dtype=np.float32)
    density = draw(st.floats(0.0, 0.3))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    d = rng.random((m, k)) < density
    if draw(st.booleans()):
        d[rng.integers(m)] = True  # a single dense row
    if m == k and draw(st.booleans()):
        np.fill_diagonal(d, True)  # self loops
    d[rng.random(m) < 0.2] = False  # empty rows (isolated vertices when square)
    return with_int_values(sp.csr_matrix(d.astype(np.float32)), seed=seed % 1000)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=pattern_matrices(), method=st.sampled_from(METHODS), n=st.sampled_from([1, 5, 16]))
def test_generated_matrices(A, method, n):
    params = dict(SMALL.get(method, {}))
    perm = accspmm.reorder(A, method, **params)
    check_perm(perm, A)
    if method in ("degree", "jaccard", "affinity"):
        assert empty_rows_last(perm, A)
    p = accspmm.plan(A, device="cpu", format="bittcf", perm=perm)
    B = int_dense(A.shape[1], n, seed=3)
    assert_bit_exact(p(B), np.asarray(A @ B).reshape(A.shape[0], n))


def test_unsorted_duplicates_int64():
    """Reordering reads the canonical pattern: unsorted, duplicate, int64-indexed input is fine."""
    indptr = np.array([0, 3, 3, 5, 8, 8], np.int64)
    cols = np.array([4, 1, 4, 0, 0, 2, 1, 2], np.int64)  # row 0 unsorted + duplicate, rows 2-3 duplicates
    vals = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32)
    raw = sp.csr_matrix((vals, cols, indptr), shape=(5, 6))
    raw.indices, raw.indptr = cols.copy(), indptr.copy()  # scipy may narrow them on construction
    assert not raw.has_canonical_format
    for method in METHODS:
        perm = accspmm.reorder(raw, method)
        check_perm(perm, raw)
        p = accspmm.plan(raw, device="cpu", format="bittcf", perm=perm)
        B = int_dense(6, 3)
        assert_bit_exact(p(B), np.asarray(raw @ B))
    assert raw.indices.dtype == np.int64 and np.array_equal(raw.indices, cols)  # input untouched


@pytest.mark.slow
@pytest.mark.parametrize("path", real_matrix_params())
def test_real_matrices(path):
    """Every method on every real matrix: a valid permutation, and the reordered BitTCF product
    bit-exact against scipy (CPU reference kernel)."""
    A = load_int_matrix(path)
    B = int_dense(A.shape[1], 7, seed=7)
    ref = np.asarray(A @ B)
    blocks = {}
    for method in METHODS[:-1]:
        perm = accspmm.reorder(A, method)
        check_perm(perm, A)
        fmt = accspmm.BitTCF.from_csr(A, perm)
        blocks[method] = fmt.stats["tc_blocks"]
        assert_bit_exact(fmt.matmul(B), ref)
    auto_perm, info = _reorder.compute(A, "auto")
    assert info["chosen"] in _reorder.AUTO_CANDIDATES
    assert info["tc_blocks_by_method"][info["chosen"]] == min(info["tc_blocks_by_method"].values())
    assert blocks[info["chosen"]] == info["tc_blocks_by_method"][info["chosen"]]


def test_report(bundled_int):
    rows = accspmm.reordering_report(bundled_int, as_frame=False)
    assert [r["method"] for r in rows] == list(_reorder.REPORT_METHODS)
    nnz = bundled_int.nnz
    for r in rows:
        assert r["tc_blocks"] > 0 and r["mean_nnz_tc"] == pytest.approx(nnz / r["tc_blocks"])
        assert r["blocks_per_window_max"] >= r["blocks_per_window_mean"] > 0
        assert r["reorder_seconds"] >= 0 and r["bittcf_bytes"] > 0
        fmt = accspmm.BitTCF.from_csr(bundled_int, accspmm.reorder(bundled_int, r["method"]))
        assert fmt.stats["tc_blocks"] == r["tc_blocks"]
        assert fmt.stats["imbalance_degree"] == pytest.approx(r["imbalance_degree"])


def test_plan_reorder_defaults(bundled_int):
    cheap = accspmm.plan(bundled_int, device="cpu", format="bittcf")  # default: no reordering, cheap
    assert cheap.stats["reorder"]["chosen"] == "none" and "calls=" in cheap.stats["reorder"]["why"]
    np.testing.assert_array_equal(cheap._bittcf.perm, np.arange(bundled_int.shape[0]))
    asked = accspmm.plan(bundled_int, device="cpu", format="bittcf", reorder="auto")
    assert asked.stats["reorder"]["method"] == "auto"
    assert asked.stats["reorder"]["chosen"] in _reorder.AUTO_CANDIDATES
    assert "reorder" not in accspmm.plan(bundled_int, device="cpu").stats  # CSR: row order irrelevant
    for step in ("validate", "canonicalize", "reorder", "build", "total"):
        assert cheap.stats["seconds"][step] >= 0


def test_calls_hint_decides_by_predicted_payback(bundled_int):
    """calls=None: no reordering; calls=0: never pays; a huge count: pays whenever the sample saves
    blocks.  The bundled matrix is small enough that the sample is the whole matrix, so the
    prediction is exact and its permutation is the plan's."""
    B = int_dense(bundled_int.shape[1], 9)
    ref = scipy_ref(bundled_int, B)
    never = accspmm.plan(bundled_int, device="cpu", format="bittcf", calls=0)
    assert never.stats["reorder"]["chosen"] == "none"
    pay = never.stats["reorder"]["payback"]
    assert pay["sample_is_whole"] and pay["predicted_reorder_seconds"] == 0.0
    assert pay["tc_blocks_none"] == accspmm.plan(bundled_int, device="cpu", format="bittcf").stats["tc_blocks"]
    many = accspmm.plan(bundled_int, device="cpu", format="bittcf", calls=10**12)
    assert many.stats["reorder"]["method"] == "auto"
    assert many.stats["tc_blocks"] == pay["tc_blocks_predicted"] < pay["tc_blocks_none"]
    for p in (never, many):
        assert_bit_exact(p(B), ref)
    for bad in (-1, 1.5, "many", True):
        with pytest.raises(ValueError, match="calls"):
            accspmm.plan(bundled_int, device="cpu", format="bittcf", calls=bad)


def test_payback_sample_of_a_large_matrix():
    """A matrix larger than the sample: a sample of runs of whole windows, a cost
    predicted from the nonzeros, and the decision follows the break-even."""
    A = datasets.adversarial("bipartite", 400_000)
    csr = as_csr(A).canonicalized()
    perm, _, pay = _reorder.predict_payback(csr, 1000)
    assert perm is None and not pay["sample_is_whole"]
    assert pay["sample_rows"] <= _reorder.PAYBACK["sample_max_rows"]
    assert pay["predicted_reorder_seconds"] == pytest.approx(csr.nnz / _reorder.PAYBACK["auto_nnz_per_s"])
    assert 0 < pay["tc_blocks_predicted"] < pay["tc_blocks_none"]  # affinity finds shared columns here
    _, info = _reorder.choose(csr, None, {}, int(pay["predicted_break_even_calls"]) + 1)
    assert info["method"] == "auto"
    _, info = _reorder.choose(csr, None, {}, max(int(pay["predicted_break_even_calls"]) - 1, 0))
    assert info["method"] == "none"


@pytest.mark.parametrize("kwargs, exc", [
    ({"method": "metis"}, ValueError),
    ({"method": "affinity", "max_scan": 0}, ValueError),
    ({"method": "affinity", "community": "strict"}, ValueError),
    ({"method": "affinity", "max_community": 0.0}, ValueError),
    ({"method": "affinity", "chunk_nnz": 0}, ValueError),
    ({"method": "affinity", "part_edges": -1}, ValueError),
    ({"method": "affinity", "tau": 0.5}, TypeError),
    ({"method": "jaccard", "tau": 1.5}, ValueError),
    ({"method": "jaccard", "block_width": 0}, ValueError),
    ({"method": "rcm", "tau": 0.5}, TypeError),
    ({"method": "affinity", "seed": -1}, ValueError),
    ({"method": "auto", "bogus": {}}, TypeError),
])
def test_bad_parameters(bundled_int, kwargs, exc):
    before = bundled_int.indices.copy()
    with pytest.raises(exc):
        accspmm.reorder(bundled_int, **kwargs)
    assert np.array_equal(before, bundled_int.indices)


def test_bad_plan_arguments(bundled_int):
    with pytest.raises(ValueError, match="either perm or reorder"):
        accspmm.plan(bundled_int, device="cpu", format="bittcf", reorder="rcm",
                     perm=np.arange(bundled_int.shape[0]))
    with pytest.raises(ValueError, match="needs a BitTCF plan"):
        accspmm.plan(bundled_int, device="cpu", format="csr", reorder="affinity")
    with pytest.raises(TypeError):
        accspmm.reorder(bundled_int.toarray(), "affinity")


def _scipy_rcm(A):
    """scipy's reverse Cuthill-McKee on the graph our "rcm" uses (A + A^T, or bipartite)."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    m, k = A.shape
    pat = sp.csr_matrix((np.ones(A.nnz, np.int8), A.indices, A.indptr), shape=A.shape)
    g = (pat + pat.T).tocsr() if m == k else sp.bmat([[None, pat], [pat.T, None]], format="csr")
    order = reverse_cuthill_mckee(g, symmetric_mode=True).astype(np.int64)
    return order if m == k else order[order < m]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 60), st.integers(1, 60), st.floats(0.01, 0.5), st.booleans(), st.integers(0, 2**31))
def test_rcm_is_scipys_order(m, k, density, square, seed):
    """Our C RCM gives exactly scipy's order (diagonals, isolated nodes, rectangular A included)."""
    k = m if square else k
    A = sp.random(m, k, density=density, format="csr", random_state=seed % 2**32)
    if square and seed % 3 == 0:
        A = (A + sp.identity(m, format="csr")).tocsr()
    A.sum_duplicates()
    perm = _reorder.compute(A, "rcm")[0]
    check_perm(perm, A)
    if A.nnz:
        assert np.array_equal(perm, _scipy_rcm(A))


@pytest.mark.slow
@pytest.mark.parametrize("path", real_matrix_params())
def test_rcm_is_scipys_order_on_real_matrices(path):
    A = sp.csr_matrix(load_int_matrix(path))
    assert np.array_equal(_reorder.compute(A, "rcm")[0], _scipy_rcm(A))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", accspmm.datasets.ADVERSARIAL)
def test_adversarial_shapes_do_not_stall(kind):
    """Hub rows and columns, tall K = 1 and 3, a star, one dense row, one dense column, a
    rectangular power-law bipartite matrix (accspmm.datasets.adversarial): every reordering and
    the default BitTCF plan (reorder "auto": none, affinity, rcm, degree) finish, and the product
    is exact.  scipy's RCM insertion-sorted each node's neighbours (a 992k-neighbour hub did not
    finish in 5 minutes); a hub column made every Jaccard cluster scan thousands of index entries
    (25 s for 1.4M nnz).  The timeout fails the test instead of stalling CI; the times are in
    benchmarks/preprocess_times.md."""
    A = accspmm.datasets.adversarial(kind, 300_000)
    for method in ("rcm", "jaccard", "affinity", "degree"):
        check_perm(_reorder.compute(A, method)[0], A)
    p = accspmm.plan(A, device="cpu", format="bittcf")
    check_perm(np.asarray(p._bittcf.perm), A)
    B = int_dense(A.shape[1], 3, seed=1)
    assert_bit_exact(p(B), np.asarray(A @ B))


def test_affinity_default_chunk_by_size():
    """The default chunk of the affinity ordering depends on the matrix's nonzeros only: 512K below
    1M nonzeros, then nnz / 16 clamped to [64K, 512K]; the info reports the chunk used, and the
    default permutation is the one of that chunk passed explicitly (and, on a 1.2M-nonzero
    matrix, not the one of a single 512K chunk)."""
    rule = _reorder.affinity_chunk_nnz
    assert [rule(n) for n in (0, 999_999, 1_000_000, 1_200_000, 4_000_000, 8_388_608, 10**9)] == [
        1 << 19, 1 << 19, 1 << 16, 75_000, 250_000, 1 << 19, 1 << 19]
    rng = np.random.default_rng(21)
    m = 60_000
    A = sp.random(m, m, density=1_200_000 / m**2, format="csr", random_state=rng, dtype=np.float32)
    perm, info = _reorder.compute(A, "affinity")
    chunk = rule(as_csr(A).canonicalized().nnz)
    assert info["params"]["chunk_nnz"] == chunk < 1 << 19
    assert np.array_equal(perm, _reorder.compute(A, "affinity", chunk_nnz=chunk)[0])
    assert not np.array_equal(perm, _reorder.compute(A, "affinity", chunk_nnz=1 << 19)[0])
    check_perm(perm, A)

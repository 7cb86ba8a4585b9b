"""BitTCF arrays checked against an independent pure-Python builder of GUIDE §2's definition."""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import accspmm
from conftest import int_csr, with_int_values


def reference_bittcf(A, perm):
    """Straight from the definition: window w = rows perm[8w:8w+8]; distinct columns ascending,
    cut into groups of 8; mask bit r*8+c; values in ascending bit order."""
    A = sp.csr_matrix(A)
    A.sum_duplicates()
    m = A.shape[0]
    W = (m + 7) // 8
    wo, cols, masks, vo, vals = [0], [], [], [0], []
    for w in range(W):
        rows = [perm[i] for i in range(8 * w, min(8 * w + 8, m))]
        entries = {}
        for r, row in enumerate(rows):
            for p in range(A.indptr[row], A.indptr[row + 1]):
                entries[(r, int(A.indices[p]))] = A.data[p]
        distinct = sorted({c for (_, c) in entries})
        for g in range(0, len(distinct), 8):
            group = distinct[g:g + 8]
            cols.extend(group + [accspmm.PAD_COL] * (8 - len(group)))
            mask = 0
            bits = {}
            for (r, c), v in entries.items():
                if c in group:
                    bit = r * 8 + group.index(c)
                    mask |= 1 << bit
                    bits[bit] = v
            masks.append(mask)
            vals.extend(bits[b] for b in sorted(bits))
            vo.append(len(vals))
        wo.append(len(masks))
    return (np.array(wo), np.array(cols, dtype=np.int64), np.array(masks, dtype=np.uint64),
            np.array(vo), np.array(vals, dtype=A.dtype))


def _staggered(m, k):
    """Rows of different lengths with interleaved columns: row i holds every (i % 8 + 1)-th column
    below 40 + 30 (i % 5), so a window's rows run out at different steps of its merge."""
    rows, cols = zip(*[(i, j) for i in range(m) for j in range(0, min(k, 40 + 30 * (i % 5)), i % 8 + 1)])
    return with_int_values(sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(m, k)))


def _hub_and_empty(m, k):
    """A dense row, empty rows and one-entry rows in the same windows."""
    A = sp.lil_matrix((m, k), dtype=np.float32)
    for i in range(m):
        if i % 8 == 3:
            A[i, :] = 1.0
        elif i % 8 not in (5, 6, 7):
            A[i, (7 * i) % k] = 1.0
    return with_int_values(A.tocsr())


MATRICES = {
    "staggered_40x300": _staggered(40, 300),
    "hub_and_empty_24x500": _hub_and_empty(24, 500),
    "random_61x47": with_int_values(sp.random(61, 47, density=0.15, random_state=0, format="csr")),
    "dense_rows_16x100": with_int_values(sp.random(16, 100, density=0.9, random_state=1, format="csr")),
    "empty_9x9": sp.csr_matrix((9, 9), dtype=np.float32),
    "diag_33": sp.identity(33, dtype=np.float32, format="csr"),
}


@pytest.mark.parametrize("name", sorted(MATRICES))
@pytest.mark.parametrize("permute", [False, True])
def test_matches_definition(name, permute):
    check_against_definition(MATRICES[name], 5, permute)


def check_against_definition(A, seed, permute):
    """BitTCF.from_csr of A, in identity order or a random one drawn from ``seed``, equals
    reference_bittcf's arrays, read-only."""
    m = A.shape[0]
    perm = np.random.default_rng(seed).permutation(m) if permute else np.arange(m)
    F = accspmm.BitTCF.from_csr(A, perm=perm if permute else None)
    wo, cols, masks, vo, vals = reference_bittcf(A, perm)
    np.testing.assert_array_equal(F.window_offsets, wo)
    np.testing.assert_array_equal(F.block_cols, cols)
    np.testing.assert_array_equal(F.block_mask, masks)
    np.testing.assert_array_equal(F.block_value_offsets, vo)
    np.testing.assert_array_equal(F.values, vals.astype(F.values.dtype))
    np.testing.assert_array_equal(F.perm, perm)
    for arr in (F.window_offsets, F.block_cols, F.block_mask, F.block_value_offsets, F.values, F.perm):
        assert not arr.flags.writeable


@settings(max_examples=120, deadline=None)
@given(case=int_csr(), permute=st.booleans())
def test_matches_definition_drawn(case, permute):
    """Drawn CSRs as users pass them (unsorted, duplicates, empty windows, int64 indices), identity or
    a random row order: the C builder's merge against the definition."""
    A, seed = case
    check_against_definition(A, seed, permute)


def test_stats_consistent(bundled_int):
    F = accspmm.BitTCF.from_csr(bundled_int)
    s = F.stats
    per_window = np.diff(F.window_offsets)
    assert s["tc_blocks"] == F.num_blocks == per_window.sum()
    assert s["windows"] == (bundled_int.shape[0] + 7) // 8
    assert s["mean_nnz_tc"] == pytest.approx(bundled_int.nnz / F.num_blocks)
    assert s["blocks_per_window_max"] == per_window.max()
    assert s["blocks_per_window_mean"] == pytest.approx(per_window.mean())
    assert s["blocks_per_window_std"] == pytest.approx(per_window.std())
    assert s["imbalance_degree"] == pytest.approx(np.abs(per_window - per_window.mean()).mean())
    assert s["empty_windows"] == int((per_window == 0).sum())
    assert s["bytes"] == F.nbytes
    assert 1 <= s["mean_nnz_tc"] <= 64
    # every block holds at least one entry, every mask bit one value
    assert all(int(mk) != 0 for mk in F.block_mask)
    assert sum(bin(int(mk)).count("1") for mk in F.block_mask) == F.nnz


def test_duplicates_summed_before_build():
    indptr = np.array([0, 3, 3], dtype=np.int32)
    indices = np.array([4, 1, 4], dtype=np.int32)
    data = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    A = sp.csr_matrix((data, indices, indptr), shape=(2, 6))
    F = accspmm.BitTCF.from_csr(A)
    assert F.nnz == 2
    np.testing.assert_array_equal(F.block_cols, [1, 4, -1, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(F.values, [2.0, 6.0])
    np.testing.assert_array_equal(A.data, data)  # input untouched
    np.testing.assert_array_equal(A.indices, indices)


def _window_distinct(A, perm, rows, shift):
    """Distinct (column >> shift) of each window of `rows` consecutive rows of perm (numpy reference)."""
    A = sp.csr_matrix(A)
    iperm = np.empty_like(perm)
    iperm[perm] = np.arange(perm.size)
    r = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    keys = np.unique(np.stack([iperm[r] // rows, A.indices.astype(np.int64) >> shift], axis=1), axis=0)
    return np.bincount(keys[:, 0], minlength=-(-A.shape[0] // rows)) if keys.size else \
        np.zeros(-(-A.shape[0] // rows), np.int64)


@functools.lru_cache(maxsize=1)
def _count_cases():
    """Windows for each path of the count passes (csrc/acc_window_distinct.c): keys within 64 values (tall,
    banded), within a few hundred (the stack bitset), spread wide (the merge tree, on the stack and, past
    1,024 entries, in the scratch buffer: dense rows), one nonempty row, and a hub row."""
    rng = np.random.default_rng(5)
    wide = sp.random(300, 200_000, density=0.002, random_state=2, format="csr")  # 3,200 entries a window
    sparse_wide = sp.random(300, 200_000, density=0.0002, random_state=6, format="csr")  # 320
    dense = sp.random(40, 3000, density=0.5, random_state=3, format="csr")
    band = sp.diags([np.ones(2000)] * 5, [-40, -3, 0, 7, 300], shape=(2000, 2400), format="csr")
    hub = sp.random(200, 50_000, density=0.001, random_state=4, format="csr")
    hub = hub + sp.csr_matrix((np.ones(50_000), (np.full(50_000, 17), np.arange(50_000))), shape=hub.shape)
    tall = sp.csr_matrix(np.ones((1000, 3)))
    cases = {"wide": wide, "sparse_wide": sparse_wide, "dense": dense, "band": band, "hub": hub, "tall": tall,
             "one_row": sp.csr_matrix(([1.0] * 5, ([3] * 5, [0, 70, 900, 901, 99_999])), shape=(9, 100_000)),
             "empty": sp.csr_matrix((20, 30))}
    return {name: (sp.csr_matrix(A, dtype=np.float32), rng.permutation(A.shape[0]).astype(np.int64))
            for name, A in cases.items()}


@pytest.mark.parametrize("name", sorted(_count_cases()))
@pytest.mark.parametrize("permute", [False, True])
def test_count_passes_match_reference(name, permute):
    """The format model's count passes (BitTCF's TC blocks per 8-row window, BSR16's blocks per 16-row block
    row) against numpy's distinct (window, column) pairs, in any row order."""
    from accspmm import _core

    A, perm = _count_cases()[name]
    m, k = A.shape
    perm = perm if permute else np.arange(m, dtype=np.int64)
    ip, ix = A.indptr.astype(np.int64), A.indices.astype(np.int32)
    bo16 = _core.bsr16_count(m, k, ip, ix, perm)
    assert np.array_equal(np.diff(bo16), _window_distinct(A, perm, 16, 4))
    tc = int(_core.bittcf_count_stats(m, k, ip, ix, perm, False)["tc_blocks"])
    assert tc == int((-(-_window_distinct(A, perm, 8, 0) // 8)).sum())
    F = accspmm.BitTCF.from_csr(A, perm=perm)
    assert F.num_blocks == tc


@pytest.mark.parametrize("bad", ["duplicate", "descending"])
@pytest.mark.parametrize("cols", [[0, 5, 2], [10, 600, 300], [100, 70_000, 30_000]])
@pytest.mark.parametrize("longest", [False, True])
def test_count_pass_refuses_unsorted_rows(bad, cols, longest):
    """A row whose columns do not ascend (a CSR that is not canonical) is refused by the TC block count
    whichever path counts its window (keys within 64 values, within a few hundred, or spread wide), and
    whether or not it is the window's longest row (which the merge reads in place)."""
    from accspmm import _core

    c = list(cols) if bad == "descending" else [cols[0], cols[1], cols[1]]
    rows = [[3], c, [1]] + ([] if longest else [[cols[0] + 1 + 2 * j for j in range(8)]])
    ip = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    ix = np.array([x for r in rows for x in r], np.int32)
    with pytest.raises(ValueError, match="canonical|sorted|duplicate"):
        _core.bittcf_count_stats(len(rows), 100_000, ip, ix, np.arange(len(rows), dtype=np.int64), False)

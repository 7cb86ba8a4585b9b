"""BitTCF arrays checked against an independent pure-Python builder of GUIDE §2's definition."""

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

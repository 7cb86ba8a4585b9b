"""NumPy reference of the GPU SpGEMM's symbolic result (cuda/spgemm.cu): C's structural pattern
(every (i, j) where a stored entry of A's row i meets a stored entry of B's row k = A's column,
explicit zeros and cancellations included) cut into 8x8 tiles in (tile row, tile column) order,
with one uint64 mask per tile (bit r*8 + c for row 8I + r, column 8J + c)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def pattern(M) -> sp.csr_matrix:
    """M's stored positions (duplicates merged) as ones."""
    P = sp.csr_matrix(M, dtype=np.float64, copy=True)
    P.data[:] = 1.0
    P.sum_duplicates()
    P.data[:] = 1.0
    return P


def tile_structure(A, B) -> dict:
    C = pattern(A) @ pattern(B)  # every stored position has a positive count
    C = sp.csr_matrix(C)
    C.sort_indices()
    m = C.shape[0]
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(C.indptr))
    cols = C.indices.astype(np.int64)
    key = (rows // 8) * ((C.shape[1] + 7) // 8 + 1) + cols // 8
    order = np.argsort(key, kind="stable")
    key_sorted = key[order]
    tiles, first = np.unique(key_sorted, return_index=True)
    masks = np.zeros(tiles.shape[0], np.uint64)
    tile_of = np.searchsorted(tiles, key_sorted)
    bits = ((rows[order] % 8) * 8 + cols[order] % 8).astype(np.uint64)
    np.bitwise_or.at(masks, tile_of, np.left_shift(np.uint64(1), bits))
    width = (C.shape[1] + 7) // 8 + 1
    tile_rows = tiles // width
    mt = (m + 7) // 8
    return {"tile_row_offsets": np.searchsorted(tile_rows, np.arange(mt + 1)).astype(np.int64),
            "tile_cols": (tiles % width).astype(np.int32),
            "tile_masks": masks,
            "row_offsets": C.indptr.astype(np.int64)}

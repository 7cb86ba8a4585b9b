"""Seeded matrices of structures that ../shared/data lacks, for checking that a rule fitted on the real
matrices holds elsewhere (0.4M-5M nonzeros each, values standard normal, canonical float32 CSR):

- ``er_100k_d10`` / ``er_20k_d50``: uniform random (Erdős–Rényi) columns, 10 or 50 a row;
- ``chunglu_200k_d16`` / ``chunglu_30k_d30``: power-law degrees on both sides (Chung–Lu, exponents 2.2
  and 2.5), rows and columns scrambled: hubs with no locality;
- ``knn_100k_k16``: 16 neighbours a row drawn near the diagonal of a 2-D sort, then scrambled columns;
- ``band_200k_bw8``: a full band of 17 diagonals;
- ``blockdiag_64k_b32``: dense 32 x 32 blocks on the diagonal;
- ``grid_700``: the 5-point Laplacian of a 700 x 700 grid;
- ``useritem_100k_20k``: rectangular, Zipf-popular columns, ~7 a row;
- ``wide_2k_300k``: 2,000 x 300,000, 200 uniform columns a row;
- ``varlen_50k_200``: row lengths uniform in 0-199, uniform columns;
- ``diag_500k``: the identity.

    from structures import STRUCTURES, structure
    A = structure("knn_100k_k16")
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _csr(m, k, rows, cols, rng):
    A = sp.csr_matrix((np.ones(rows.shape[0], np.float32), (rows, cols)), shape=(m, k))
    A.sum_duplicates()
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    return A


def _uniform(m, k, per_row, rng):
    rows = np.repeat(np.arange(m), per_row)
    return _csr(m, k, rows, rng.integers(0, k, rows.shape[0]), rng)


def _chung_lu(m, per_row, exponent, rng):
    w = np.arange(1, m + 1) ** (-1.0 / (exponent - 1))
    w /= w.sum()
    nnz = m * per_row
    scramble = rng.permutation(m)
    return _csr(m, m, scramble[rng.choice(m, nnz, p=w)], scramble[rng.choice(m, nnz, p=w)], rng)


def _knn(m, per_row, rng):
    pts = rng.random((m, 2))
    order = np.lexsort((pts[:, 1], (pts[:, 0] * 300).astype(np.int64)))
    rows = np.repeat(np.arange(m), per_row)
    return _csr(m, m, rows, order[(rows + rng.integers(-400, 400, rows.shape[0])) % m], rng)


def _band(m, half_width, rng):
    offsets = np.arange(-half_width, half_width + 1)
    rows = np.repeat(np.arange(m), offsets.shape[0])
    cols = rows + np.tile(offsets, m)
    keep = (cols >= 0) & (cols < m)
    return _csr(m, m, rows[keep], cols[keep], rng)


def _blockdiag(m, b, rng):
    rows = np.repeat(np.arange(m), b)
    return _csr(m, m, rows, (rows // b) * b + np.tile(np.arange(b), m), rng)


def _grid(side, rng):
    i = np.arange(side * side)
    x = i % side
    rows = [i, i[x > 0], i[x < side - 1], i[i >= side], i[i < side * (side - 1)]]
    cols = [i, i[x > 0] - 1, i[x < side - 1] + 1, i[i >= side] - side, i[i < side * (side - 1)] + side]
    return _csr(side * side, side * side, np.concatenate(rows), np.concatenate(cols), rng)


def _varlen(m, longest, rng):
    rows = np.repeat(np.arange(m), rng.integers(0, longest, m))
    return _csr(m, m, rows, rng.integers(0, m, rows.shape[0]), rng)


def _user_item(m, k, per_row, rng):
    rows = np.repeat(np.arange(m), per_row)
    return _csr(m, k, rows, (rng.zipf(1.5, rows.shape[0]) - 1) % k, rng)


STRUCTURES = {
    "er_100k_d10": lambda rng: _uniform(100_000, 100_000, 10, rng),
    "er_20k_d50": lambda rng: _uniform(20_000, 20_000, 50, rng),
    "chunglu_200k_d16": lambda rng: _chung_lu(200_000, 16, 2.2, rng),
    "chunglu_30k_d30": lambda rng: _chung_lu(30_000, 30, 2.5, rng),
    "knn_100k_k16": lambda rng: _knn(100_000, 16, rng),
    "band_200k_bw8": lambda rng: _band(200_000, 8, rng),
    "blockdiag_64k_b32": lambda rng: _blockdiag(65_536, 32, rng),
    "grid_700": lambda rng: _grid(700, rng),
    "useritem_100k_20k": lambda rng: _user_item(100_000, 20_000, 7, rng),
    "wide_2k_300k": lambda rng: _uniform(2_000, 300_000, 200, rng),
    "varlen_50k_200": lambda rng: _varlen(50_000, 200, rng),
    "diag_500k": lambda rng: _csr(500_000, 500_000, np.arange(500_000), np.arange(500_000), rng),
}


def structure(name: str, seed: int = 7) -> sp.csr_matrix:
    """The seeded matrix ``name`` of STRUCTURES."""
    return STRUCTURES[name](np.random.default_rng(seed))

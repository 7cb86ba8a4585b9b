"""BitTCF: Acc-SpMM's Tensor-Core block format (definition in csrc/accspmm.h).

Built by the C core in two passes (count, fill) from a canonical CSR and a row
permutation.  Arrays are exposed read-only; ``stats`` gives the quality metrics.
"""

from __future__ import annotations

import numpy as np

from . import _core
from ._validate import CSR, as_csr

PAD_COL = -1  #: block_cols value of padding slots (the kernels load zeros there)


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def check_perm(perm, m: int) -> np.ndarray:
    """A row permutation (new -> old) as int64; ValueError unless it permutes range(m)."""
    if perm is None:
        return np.arange(m, dtype=np.int64)
    p = np.asarray(perm)
    if p.dtype.kind not in "iu" or p.ndim != 1:
        raise TypeError(f"perm must be a 1-D integer array, got dtype {p.dtype} with {p.ndim} dims")
    if p.shape[0] != m:
        raise ValueError(f"perm has {p.shape[0]} entries, expected {m}")
    p = np.ascontiguousarray(p, dtype=np.int64)
    _core.perm_check(p, m)
    return p


class BitTCF:
    """A sparse matrix in BitTCF form.

    Row window w holds original rows ``perm[8w:8w+8]``; its distinct columns, ascending,
    form TC blocks of 8 compacted columns.  Arrays (read-only NumPy):

    - ``window_offsets[W+1]`` (int64): blocks of window w are ``window_offsets[w]:window_offsets[w+1]``
    - ``block_cols[8*nblocks]`` (int32): original column per compacted column, ``PAD_COL`` (-1) = padding
    - ``block_mask[nblocks]`` (uint64): bit ``r*8+c`` set where (window row r, compacted column c) is stored
    - ``block_value_offsets[nblocks+1]`` (int64) and ``values[nnz]``: values per block in ascending bit order
    - ``perm[m]`` (int64): new -> old row permutation
    """

    __slots__ = ("shape", "perm", "window_offsets", "block_cols", "block_mask", "block_value_offsets",
                 "values", "_stats")

    def __init__(self, shape, perm, window_offsets, block_cols, block_mask, block_value_offsets, values):
        self.shape = (int(shape[0]), int(shape[1]))
        self.perm = _frozen(perm)
        self.window_offsets = _frozen(window_offsets)
        self.block_cols = _frozen(block_cols)
        self.block_mask = _frozen(block_mask)
        self.block_value_offsets = _frozen(block_value_offsets)
        self.values = _frozen(values)
        self._stats = None

    @classmethod
    def from_csr(cls, A, perm=None) -> "BitTCF":
        """Builds the BitTCF of ``A`` (any scipy.sparse matrix; duplicates are summed) with rows
        permuted by ``perm`` (new -> old; None = identity)."""
        csr = A if isinstance(A, CSR) else as_csr(A)
        csr = csr.canonicalized()
        m, k = csr.shape
        p = check_perm(perm, m)
        arrays = _core.bittcf_build(m, k, csr.indptr, csr.indices, csr.data, p)
        return cls(csr.shape, p, **arrays)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    @property
    def num_blocks(self) -> int:
        return int(self.block_mask.shape[0])

    @property
    def num_windows(self) -> int:
        return int(self.window_offsets.shape[0] - 1)

    @property
    def nbytes(self) -> int:
        """Bytes of the format arrays (perm excluded: it is the reordering's, not the format's)."""
        return int(sum(a.nbytes for a in (self.window_offsets, self.block_cols, self.block_mask,
                                         self.block_value_offsets, self.values)))

    @property
    def stats(self) -> dict:
        """TC blocks, MeanNNZTC, blocks per window (mean/max/std), imbalance degree (IBD),
        empty windows, bytes of BitTCF and of CSR (int32 indices, int64 offsets)."""
        if self._stats is None:
            s = _core.bittcf_stats(self)
            s["nnz"] = self.nnz
            s["bytes_ratio_vs_csr"] = s["bytes"] / s["csr_bytes"] if s["csr_bytes"] else float("nan")
            self._stats = s
        return dict(self._stats)

    def matmul(self, B) -> np.ndarray:
        """``A @ B`` on the CPU from this format (the reference path; see accspmm.spmm)."""
        from ._plan import spmm_bittcf_cpu

        return spmm_bittcf_cpu(self, B)

    def __repr__(self) -> str:
        s = self.stats
        return (f"<BitTCF {self.shape[0]}x{self.shape[1]} nnz={self.nnz} dtype={self.dtype} "
                f"blocks={s['tc_blocks']} MeanNNZTC={s['mean_nnz_tc']:.2f} windows={s['windows']}>")

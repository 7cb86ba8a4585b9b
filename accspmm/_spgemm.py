"""Sparse x sparse: ``accspmm.spgemm(A, B)``, C = A @ B, on the CPU (the C core, csrc/acc_spgemm.c).

Semantics (GUIDE section 3):

- The result equals scipy's ``A @ B``: the same pattern, with exact cancellations dropped as scipy
  drops them (``keep_zeros=True`` keeps the structural pattern, as cuSPARSE does), columns sorted
  in every row.
- Products and sums run in float64 and are rounded once to the result dtype (numpy's promotion of
  A's and B's float dtypes).  float64 data gives scipy's sums (the same order); float32 data is
  more accurate than scipy's float32 accumulation; integer-valued data is bit-exact.  Repeated runs
  give identical bits, whatever the thread count.
- Any valid CSR in: duplicates add up, unsorted rows are fine, int32 or int64 indices.  Results may
  hold more than 2^31 nonzeros (int64 ``indptr``).

The GPU Tensor-Core SpGEMM on 8x8 bitmap tiles is not built yet: ``device="gpu"`` raises.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import _core
from ._validate import as_csr

PRECISIONS = ("fp32", "fp64")


def _operand(M, name):
    if not sp.issparse(M):
        mod = type(M).__module__.split(".")[0]
        if mod == "cupyx":
            raise TypeError(f"{name} is a CuPy sparse matrix: the GPU SpGEMM is not available yet; pass a scipy.sparse "
                            f"matrix (e.g. {name}.get())")
        raise TypeError(f"{name} must be a scipy.sparse matrix or array, got {type(M).__name__}")
    try:
        return as_csr(M)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("A ", f"{name} ", 1).replace("A.", f"{name}.")) from None


def spgemm(A, B, *, device="auto", precision=None, keep_zeros=False):
    """``C = A @ B`` for sparse A (m x k) and B (k x n); a ``scipy.sparse`` CSR result (``csr_array``
    when A or B is a sparse array, else ``csr_matrix``), columns sorted.  See the module docstring.

    device : "auto" or "cpu" (the GPU path is not built yet: "gpu" raises ValueError).
    precision : None (the result dtype's: "fp64" for float64, else "fp32": float64 sums rounded once),
        "fp32" or "fp64" (which also sets the result dtype).
    keep_zeros : keep entries whose sum is exactly zero (the structural pattern of the product)."""
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    if device == "gpu":
        raise ValueError("the GPU SpGEMM is not available yet; use device='cpu' (or 'auto')")
    a, b = _operand(A, "A"), _operand(B, "B")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"dimension mismatch: A is {a.shape[0]} x {a.shape[1]} but B is {b.shape[0]} x {b.shape[1]}")
    dtype = np.dtype(np.result_type(a.dtype, b.dtype))
    if precision is not None:
        if precision not in PRECISIONS:
            raise ValueError(f"spgemm precision must be one of {PRECISIONS} or None, got {precision!r} "
                             "(Tensor-Core precisions need the GPU SpGEMM, not available yet)")
        dtype = np.dtype(np.float64 if precision == "fp64" else np.float32)
    (m, k), n = a.shape, b.shape[1]
    wide = np.dtype(np.result_type(a.dtype, b.dtype))  # both operands in one width (float32 -> float64 is exact)
    indptr, indices, data, _ = _core.spgemm(m, k, a.indptr, a.indices, a.data.astype(wide, copy=False), n, b.indptr,
                                            b.indices, b.data.astype(wide, copy=False), not keep_zeros,
                                            dtype == np.float64)
    array = isinstance(A, getattr(sp, "sparray", ())) or isinstance(B, getattr(sp, "sparray", ()))
    cls = sp.csr_array if array else sp.csr_matrix
    if indices.shape[0] and indptr[-1] <= np.iinfo(np.int32).max:
        indptr = indptr.astype(np.int32)  # scipy's own index width when it fits
    C = cls((data, indices, indptr), shape=(m, n))
    C.has_sorted_indices = True
    return C

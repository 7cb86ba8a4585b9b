"""Argument checking and conversion: Python objects -> exact arrays for the C core.

All policy on types lives here (the glue only accepts exact dtypes):
A: any scipy.sparse matrix/array; CSR is used as is, other formats are converted
   with ``.tocsr()`` (a copy).  Values float32 or float64; indices int32 or int64.
B: any 2-D array-like (1-D means a vector), real numbers; converted to the compute
   dtype and C order (a copy only when needed).
Inputs are never modified: conversions make new arrays, and the C core only reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import _core

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class CSR:
    """A validated CSR: int64 indptr, int32 indices, float32/float64 data (read-only use).
    ``canonical``: sorted rows without duplicates (bool), or None for a CSR whose offsets and
    columns have not been checked yet (``as_csr(A, check=False)``: a GPU plan's build checks them
    on the device); :meth:`checked` checks it on the host."""

    shape: tuple
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    canonical: bool | None

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def checked(self) -> "CSR":
        """This CSR with its offsets and columns checked on the host (ValueError if malformed)."""
        if self.canonical is not None:
            return self
        m, k = self.shape
        canonical = bool(_core.csr_check(m, k, self.indptr, self.indices))
        return CSR(self.shape, self.indptr, self.indices, self.data, canonical)

    def canonicalized(self) -> "CSR":
        """Sorted rows without duplicates (duplicates summed), as scipy.sum_duplicates."""
        if self.canonical is None:
            return self.checked().canonicalized()
        if self.canonical:
            return self
        m, k = self.shape
        indptr, indices, data, nnz = _core.csr_canonicalize(m, k, self.indptr, self.indices, self.data)
        return CSR(self.shape, indptr, indices[:nnz], data[:nnz], True)

    def astype(self, dtype) -> "CSR":
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self
        return CSR(self.shape, self.indptr, self.indices, self.data.astype(dtype), self.canonical)


def is_gpu_array(obj) -> bool:
    """True for CUDA arrays of CuPy, PyTorch, Numba...: anything with __cuda_array_interface__."""
    try:
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:  # torch raises for CPU tensors on attribute access in some versions
        return False


def as_csr(A, check: bool = True) -> CSR:
    """Validates A and returns it as a CSR view of exact dtypes (copies only where needed).
    ``check=False`` leaves the O(m + nnz) check of the offsets and columns to the caller (the CSR's
    ``canonical`` is None: see :meth:`CSR.checked`); the arrays' types and lengths are checked either
    way, and the offsets' first and last entries, so that nnz = indptr[-1] entries can be read."""
    if not sp.issparse(A):
        kind = type(A).__name__
        hint = " (wrap dense data with scipy.sparse.csr_array(A))" if isinstance(A, np.ndarray) or is_gpu_array(A) else ""
        raise TypeError(f"A must be a scipy.sparse matrix or array, got {kind}{hint}")
    if len(A.shape) != 2:
        raise ValueError(f"A must be 2-dimensional, got shape {A.shape}")
    if A.format != "csr":
        A = A.tocsr()
    m, k = (int(s) for s in A.shape)
    if k > INT32_MAX:
        raise ValueError(f"A has {k} columns; accspmm supports at most 2**31-1")
    data = A.data
    if data.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"A has dtype {data.dtype}; accspmm takes float32 or float64 values "
            f"(convert with A.astype(numpy.float32))"
        )
    indptr, indices = np.asarray(A.indptr), np.asarray(A.indices)
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.dtype not in (np.dtype(np.int32), np.dtype(np.int64)) or arr.ndim != 1:
            raise TypeError(f"A.{name} must be a 1-D int32 or int64 array, got {arr.dtype} with {arr.ndim} dims")
    if indptr.shape[0] != m + 1:
        raise ValueError(f"A.indptr has {indptr.shape[0]} entries, expected {m + 1} for {m} rows")
    if data.ndim != 1 or data.shape[0] != indices.shape[0]:
        raise ValueError(f"A.data has {data.shape[0]} entries but A.indices has {indices.shape[0]}")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    if indices.dtype == np.int64:
        indices = _core.narrow_indices(np.ascontiguousarray(indices), k)
    else:
        indices = np.ascontiguousarray(indices)
    data = np.ascontiguousarray(data)
    if not check and indptr[0] == 0 and 0 <= indptr[-1] <= indices.shape[0]:
        return CSR((m, k), indptr, indices, data, None)
    canonical = _core.csr_check(m, k, indptr, indices)
    return CSR((m, k), indptr, indices, data, bool(canonical))


def compute_dtype(a_dtype: np.dtype, b_dtype: np.dtype) -> np.dtype:
    """Result dtype of A @ B: numpy promotion among floats; integer/bool B takes A's dtype."""
    if b_dtype.kind == "f":
        return np.dtype(np.result_type(a_dtype, b_dtype))
    return np.dtype(a_dtype)


HALF_MESSAGE = ("B has dtype {}, but this plan computes in float32/float64 (precision 'tf32', 'fp32' or "
                "'fp64'); for half B plan with precision='fp16' or 'bf16' (FP32 accumulation, C in B's dtype), "
                "or convert B with B.float() (PyTorch) or B.astype(numpy.float32)")


def plain_real(dtype: np.dtype) -> bool:
    """An integer, bool or float dtype other than the half formats (which have their own plans)."""
    return dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize != 2)


def check_b_dtype(b_dtype: np.dtype) -> None:
    if plain_real(b_dtype):
        return  # before dtype.name, a Python-level property of NumPy (microseconds)
    if b_dtype.kind == "f" or b_dtype.name == "bfloat16":
        raise TypeError(HALF_MESSAGE.format(b_dtype.name))
    raise TypeError(f"B must hold real numbers, got dtype {b_dtype}")


def as_host_b(B, k: int):
    """B as an ndarray (not yet converted), and whether it was a vector."""
    if sp.issparse(B):
        raise TypeError("B must be dense (sparse @ sparse is not supported); use B.toarray()")
    try:
        arr = np.asarray(B)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"B cannot be converted to an array: {exc}") from None
    check_b_dtype(arr.dtype)
    if arr.ndim == 1:
        vector = True
        arr = arr.reshape(-1, 1)
    elif arr.ndim == 2:
        vector = False
    else:
        raise ValueError(f"B must be 1- or 2-dimensional, got shape {arr.shape}")
    if arr.shape[0] != k:
        raise ValueError(f"dimension mismatch: A has {k} columns but B has {arr.shape[0]} rows")
    return arr, vector


def check_out(out, shape, dtype, B=None):
    """Validates a user-given output array (host)."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray for host inputs, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}, expected {dtype}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writeable")
    if B is not None and np.shares_memory(out, B):
        raise ValueError("out must not overlap B")

"""Sparse x sparse: ``accspmm.spgemm(A, B)`` and ``accspmm.spgemm_plan(A, B)``, C = A @ B.

Semantics (GUIDE section 3), the same on the CPU (the C core, csrc/acc_spgemm.c) and the GPU
(8x8 bitmap tiles, cuda/spgemm.cu):

- The result equals scipy's ``A @ B``: the same pattern, with exact cancellations dropped as scipy
  drops them (``keep_zeros=True`` keeps the structural pattern, as cuSPARSE does), columns sorted
  in every row.
- Products and sums run in float64 and are rounded once to the result dtype (numpy's promotion of
  A's and B's float dtypes).  float32 data is more accurate than scipy's float32 accumulation;
  float64 data is within float64 rounding of scipy (the CPU sums in scipy's order, the GPU in
  tile order: FP64 Tensor Cores for dense tile pairs); integer-valued data is bit-exact.  Repeated
  runs give identical bits on a given device, whatever the thread count.
- Any valid CSR in: duplicates add up, unsorted rows are fine, int32 or int64 indices.  Results may
  hold more than 2^31 nonzeros (int64 ``indptr``; not for CuPy results, which index with int32).

Where it runs: scipy operands give a scipy result, computed on the GPU when ``device`` is "gpu", or
"auto" and a GPU is usable (then the operands are uploaded and the result copied back), else on the
CPU.  CuPy operands (``cupyx.scipy.sparse``) give a CuPy CSR matrix, computed on their GPU.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from . import _core
from ._device import cuda_available, require_cuda
from ._validate import INT32_MAX, as_csr

PRECISIONS = ("fp32", "fp64")
DEVICES = ("auto", "cpu", "gpu")
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _is_cupy_sparse(M) -> bool:
    return type(M).__module__.split(".")[0] == "cupyx" and hasattr(M, "tocsr") and hasattr(M, "nnz")


def _operand(M, name):
    """A validated host CSR (accspmm._validate.CSR) of a scipy operand."""
    if not sp.issparse(M):
        raise TypeError(f"{name} must be a scipy.sparse or cupyx.scipy.sparse matrix, got {type(M).__name__}")
    try:
        return as_csr(M)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("A ", f"{name} ", 1).replace("A.", f"{name}.")) from None


def _cupy_operand(M, name):
    """A CuPy CSR of float32/float64 values (other CuPy formats converted with tocsr())."""
    if len(M.shape) != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {M.shape}")
    if M.format != "csr":
        M = M.tocsr()
    dtype = np.dtype(M.dtype)
    if dtype not in _FLOATS:
        raise TypeError(f"{name} has dtype {dtype}; accspmm takes float32 or float64 values "
                        f"(convert with {name}.astype(cupy.float32))")
    m = int(M.shape[0])
    if M.indptr.shape[0] != m + 1 or M.indices.shape[0] != M.data.shape[0]:
        raise ValueError(f"{name} is not a consistent CSR: indptr has {M.indptr.shape[0]} entries for {m} rows, "
                         f"indices {M.indices.shape[0]} and data {M.data.shape[0]}")
    return M


def _kinds(A, B):
    ca, cb = _is_cupy_sparse(A), _is_cupy_sparse(B)
    if ca != cb:
        raise TypeError("A and B must both be scipy.sparse matrices or both cupyx.scipy.sparse matrices "
                        f"(got {type(A).__name__} and {type(B).__name__})")
    return "cupy" if ca else "scipy"


def _result_dtype(a_dtype, b_dtype, precision):
    dtype = np.dtype(np.result_type(a_dtype, b_dtype))
    if precision is not None:
        if precision not in PRECISIONS:
            raise ValueError(f"spgemm precision must be one of {PRECISIONS} or None, got {precision!r} "
                             "(products and sums always run in float64; the precision sets the result dtype)")
        dtype = np.dtype(np.float64 if precision == "fp64" else np.float32)
    return dtype


def _resolve_device(device, kind):
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if kind == "cupy":
        if device == "cpu":
            raise ValueError("A and B are CuPy matrices (on the GPU); use device='gpu' or 'auto', or pass "
                             "scipy matrices (A.get()) for the CPU")
        require_cuda()
        return "gpu"
    if device == "auto":
        return "gpu" if cuda_available() else "cpu"
    if device == "gpu":
        require_cuda()
    return device


def _check_shapes(ashape, bshape):
    if ashape[1] != bshape[0]:
        raise ValueError(f"dimension mismatch: A is {ashape[0]} x {ashape[1]} but B is {bshape[0]} x {bshape[1]}")


_CUPY_FAST = None  # whether CuPy's CSR can be assembled without its constructor's checks (decided once)


def _cupy_csr(data, indices, indptr, shape):
    """A CuPy CSR matrix of our result's arrays (sorted rows, no duplicates, int32 indices).

    CuPy's public constructor validates a (data, indices, indptr) tuple with a device-to-host
    synchronisation and index-dtype scans (about 0.15 ms on an H100, a third of a small product).
    Our arrays are valid by construction, so the matrix is assembled the way CuPy assembles its own
    results (``_compressed_sparse_matrix.__init__``'s branch for ready arrays), checked once against
    the public constructor, and the public constructor is used whenever that differs or fails."""
    global _CUPY_FAST
    import cupyx.scipy.sparse as csp

    if _CUPY_FAST is not False:
        try:
            from cupyx import cusparse
            from cupyx.scipy.sparse import _compressed

            C = csp.csr_matrix.__new__(csp.csr_matrix)
            _compressed.sparse_data._data_matrix.__init__(C, data)
            C.indices, C.indptr = indices, indptr
            C._descr = cusparse.MatDescriptor.create()
            C._shape = tuple(shape)
            C._has_canonical_format = True
            C._has_sorted_indices = True
            if _CUPY_FAST is None:  # the first time: the same object as the public constructor's?
                R = csp.csr_matrix((data, indices, indptr), shape=shape)
                _CUPY_FAST = bool(R.shape == C.shape and R.nnz == C.nnz and R.dtype == C.dtype
                                  and R.indptr.data.ptr == C.indptr.data.ptr
                                  and R.indices.data.ptr == C.indices.data.ptr)
            if _CUPY_FAST:
                return C
        except Exception:
            _CUPY_FAST = False
    C = csp.csr_matrix((data, indices, indptr), shape=shape)
    C.has_sorted_indices = True
    return C


class SpGEMMPlan:
    """``C = A @ B`` for fixed sparsity patterns of A and B: the symbolic work (tiling both patterns,
    C's tile structure and pattern, the tile pairs sorted by output tile) is done once, and each
    call computes the values of a product with new values in the same patterns, like cuSPARSE's
    SpGEMMreuse (AMG's Galerkin product R A P, k-hop GNN operators).

    ``plan()`` multiplies the values given at plan time; ``plan(A2, B2)`` multiplies new ones: each
    argument is a matrix with exactly the planned pattern (same shape, ``indptr`` and ``indices``;
    checked), or a 1-D array of values in the planned CSR order, or None (the previous values).
    For A @ A (``B is A`` at plan time) give A's new values only.  The result is a new matrix of the
    operands' kind each call (scipy or CuPy CSR), with spgemm's semantics.

    On the GPU the symbolic phase runs once (``stats["seconds"]["symbolic"]``); the CPU path has no
    reuse (each call is a full ``spgemm``).  ``stats`` holds the tile statistics (tiles, entries per
    tile, candidate and surviving tile pairs, chunks), the device bytes the plan holds
    (``plan_bytes``) and the peak of the plan's device bytes with its temporaries (``peak_bytes``:
    the analysis, and the products made so far).
    ``close()`` frees the device memory now (garbage collection does too).  A GPU plan on the row path
    whose large rows accumulate densely keeps, from its second product on, a copy of C's structural
    column indices (4 bytes an entry): its later products read those rows' columns there instead of
    rebuilding them from pattern bits (cuda/spgemm.cu, ``known_cols``; the same bits either way).
    Likewise a plan whose rows are summed in hash tables keeps, at its second product, each such
    row's products' places in C (2 bytes per product; ``stats["hash_places"]``), and its later
    products add there without a table.  ``spgemm`` itself gives the symbolic phase the values, so
    that those rows are summed there once (``stats["fused_cap"]``, ``"fused_reserved"``).

    Parameters (besides spgemm's device, precision and keep_zeros), for the GPU:
    algorithm : "auto" (default: cuda/spgemm.cu's model samples the operands' 8x8 tile densities
        and takes the tiles where a tile pair holds enough products to pay, else the rows), "tiles"
        (8x8 bitmap tiles, FP64 Tensor Cores for dense tile pairs, cuda/spgemm_tiles.cu) or
        "rows" (row by row on CUDA cores, cuda/spgemm_rows.cu).  The choice is in
        ``stats["algorithm"]``; both give scipy's pattern and the same bits on integer data.
    chunk_pairs : tiles: candidate tile pairs sorted at once (default: from the operands' sizes,
        see cuda/spgemm_tiles.cu); smaller bounds the peak memory, at the cost of re-sorting each
        chunk in every call.
    keep_pairs : tiles: keep the sorted tile pairs between calls when they fit in one chunk (the
        fast reuse; costs 8 bytes per pair of device memory).
    path : tiles: "model" (default: the model of cuda/spgemm_tiles.cu picks Tensor Cores or CUDA
        cores per tile pair), "tensor" or "scalar" (experiments; the same bits on integer data).
    row_hash : rows: True (default) sums each row of at most 256 products (and entries) that is not
        tiny in a warp's hash table in shared memory; False sorts them in row groups like the other
        small rows (experiments; the same bits, the sums in the same order).
    CuPy operands run on CuPy's current stream of their device.
    """

    _poison = False  # tests: fill GPU results with -1/NaN before the numeric phase writes them

    def __init__(self, A, B, *, device="auto", precision=None, keep_zeros=False, algorithm="auto", chunk_pairs=None,
                 keep_pairs=True, path="model", row_hash=True, _one_shot=False):
        t0 = time.perf_counter()
        self.kind = _kinds(A, B)
        self.device = _resolve_device(device, self.kind)
        self.same = B is A
        self.keep_zeros = bool(keep_zeros)
        if self.kind == "cupy":
            a = _cupy_operand(A, "A")
            b = a if self.same else _cupy_operand(B, "B")
        else:
            a = _operand(A, "A")
            b = a if self.same else _operand(B, "B")
        _check_shapes(a.shape, b.shape)
        self.shape = (int(a.shape[0]), int(b.shape[1]))
        self.dtype = _result_dtype(a.dtype if self.kind == "scipy" else a.data.dtype,
                                   b.dtype if self.kind == "scipy" else b.data.dtype, precision)
        self.precision = "fp64" if self.dtype == np.float64 else "fp32"
        self.array = isinstance(A, getattr(sp, "sparray", ())) or isinstance(B, getattr(sp, "sparray", ()))
        self._a, self._b = a, b
        self._product = None
        self.stats = {"device": self.device, "precision": self.precision, "shape": self.shape,
                      "seconds": {"validate": time.perf_counter() - t0}}
        if self.device == "gpu":
            from ._spgemm_gpu import DeviceOperand, DeviceProduct

            if self.kind == "cupy":
                import cupy

                da = DeviceOperand.from_cupy(a)
                db = da if self.same else DeviceOperand.from_cupy(b)
                self._stream = int(cupy.cuda.get_current_stream().ptr) or None
            else:
                bits = 32 if max(a.nnz, b.nnz) <= INT32_MAX else 64
                wide = np.dtype(np.result_type(a.dtype, b.dtype))
                cu = require_cuda()
                dev = cu.get_device()
                t = time.perf_counter()
                da = DeviceOperand.from_host(a, bits, dev, wide)
                db = da if self.same else DeviceOperand.from_host(b, bits, dev, wide)
                self.stats["seconds"]["upload"] = time.perf_counter() - t
                self._stream = None
            self._dev = (da, db)
            values = None
            if _one_shot:  # spgemm(): the planned values, as the first call passes them (__call__)
                av, bv = (a.data, b.data) if self.kind == "cupy" else (da.data, db.data)
                values = (av, bv, np.dtype(np.result_type(av.dtype, bv.dtype)), self.dtype)
            self._product = DeviceProduct(da, db, self.same, self._stream, chunk_pairs=chunk_pairs or 0,
                                          keep_pairs=keep_pairs, path=path, check=self.kind == "cupy",
                                          algorithm=algorithm, row_hash=row_hash, values=values)
            self.stats["seconds"].update(self._product.seconds)
            self.stats.update(self._product.stats())
        self.stats["seconds"]["plan"] = time.perf_counter() - t0

    # ---- values -------------------------------------------------------------------------------

    def _values(self, M, op, name):
        """The values array of a new operand M (or None: the planned ones) after checking its pattern."""
        if M is None:
            return op.data
        if sp.issparse(M) or _is_cupy_sparse(M):
            if _is_cupy_sparse(M) != (self.kind == "cupy"):
                raise TypeError(f"{name} must be a {'CuPy' if self.kind == 'cupy' else 'scipy.sparse'} matrix like "
                                "the planned one")
            if self.kind == "cupy":
                import cupy

                N = _cupy_operand(M, name)
                same_pattern = (N.shape == op.shape and N.indices.shape == op.indices.shape
                                and (N.indptr is op.indptr or bool(cupy.array_equal(N.indptr, op.indptr)))
                                and (N.indices is op.indices or bool(cupy.array_equal(N.indices, op.indices))))
                data = N.data
            else:
                N = _operand(M, name)
                same_pattern = (N.shape == op.shape and N.nnz == op.nnz and np.array_equal(N.indptr, op.indptr)
                                and np.array_equal(N.indices, op.indices))
                data = N.data
            if not same_pattern:
                raise ValueError(f"{name} does not have the planned sparsity pattern (shape, indptr and indices must "
                                 "be identical); make a new plan for a new pattern")
            return data
        data = M
        if self.kind == "scipy":
            data = np.asarray(M)
        if data.ndim != 1 or data.shape[0] != (op.nnz if self.kind == "scipy" else op.data.shape[0]):
            raise ValueError(f"{name} values must be a 1-D array of the planned {op.nnz} entries, got shape {data.shape}")
        if np.dtype(data.dtype) not in _FLOATS:
            raise TypeError(f"{name} values must be float32 or float64, got {data.dtype}")
        return data

    def __call__(self, A=None, B=None):
        if self.same and B is not None:
            raise ValueError("this plan multiplies A by itself: give A's new values only")
        av = self._values(A, self._a, "A")
        bv = av if self.same else self._values(B, self._b, "B")
        wide = np.dtype(np.result_type(av.dtype, bv.dtype))  # both in one width (float32 -> float64 is exact)
        m, n = self.shape
        if self.device == "cpu":
            a, b = self._a, self._b
            indptr, indices, data, _ = _core.spgemm(m, a.shape[1], a.indptr, a.indices,
                                                    np.asarray(av).astype(wide, copy=False), n, b.indptr, b.indices,
                                                    np.asarray(bv).astype(wide, copy=False), not self.keep_zeros,
                                                    self.dtype == np.float64, -1)  # the arrays may have changed: checked again
            return self._scipy_result(indptr, indices, data)
        da, db = self._dev
        if self.kind == "scipy":  # the planned values are on the device already
            av = da.data if av is self._a.data and da.dtype == wide else av
            bv = db.data if bv is self._b.data and db.dtype == wide else bv
        lib = "cupy" if self.kind == "cupy" else "numpy"
        indptr, indices, data = self._product.multiply(av, bv, wide, self.dtype, not self.keep_zeros, lib,
                                                       poison=self._poison)
        self.stats["seconds"]["numeric"] = self._product.seconds["numeric"]
        # the numeric phases' temporaries, and what the plan keeps for its later products
        for key in ("peak_bytes", "plan_bytes", "hash_places", "tiny_places"):
            self.stats[key] = int(self._product.info[key])
        if lib == "cupy":
            return _cupy_csr(data, indices, indptr, self.shape)
        return self._scipy_result(indptr, indices, data)

    def _scipy_result(self, indptr, indices, data):
        cls = sp.csr_array if self.array else sp.csr_matrix
        if indices.shape[0] and indptr[-1] <= INT32_MAX:
            indptr = indptr.astype(np.int32, copy=False)  # scipy's own index width when it fits
            indices = indices.astype(np.int32, copy=False)
        C = cls((data, indices, indptr), shape=self.shape)
        C.has_sorted_indices = True
        return C

    def close(self):
        """Frees the plan's device memory now."""
        if self._product is not None:
            self._product.close()
            self._product = None
            self._dev = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        m, n = self.shape
        return f"<accspmm.SpGEMMPlan {m}x{n} {self.kind} device={self.device} precision={self.precision}>"


def spgemm_plan(A, B, **kwargs) -> SpGEMMPlan:
    """Plans ``A @ B`` for repeated products with new values in the same patterns; see :class:`SpGEMMPlan`."""
    return SpGEMMPlan(A, B, **kwargs)


def spgemm(A, B, *, device="auto", precision=None, keep_zeros=False):
    """``C = A @ B`` for sparse A (m x k) and B (k x n); see the module docstring.

    A, B : both ``scipy.sparse`` (result: ``csr_array`` when A or B is a sparse array, else
        ``csr_matrix``) or both ``cupyx.scipy.sparse`` (result: a CuPy ``csr_matrix`` on their GPU).
    device : "auto" (the GPU when one is usable), "cpu" or "gpu" (scipy operands only choose).
    precision : None (the result dtype's: "fp64" for float64, else "fp32"), "fp32" or "fp64" (which
        also sets the result dtype); products and sums always run in float64, rounded once.
    keep_zeros : keep entries whose sum is exactly zero (the structural pattern of the product)."""
    kind = _kinds(A, B)
    dev = _resolve_device(device, kind)
    if dev == "gpu":
        with SpGEMMPlan(A, B, device=dev, precision=precision, keep_zeros=keep_zeros, keep_pairs=False,
                        _one_shot=True) as p:
            return p()
    a = _operand(A, "A")
    b = a if B is A else _operand(B, "B")  # A @ A: one check, as SpGEMMPlan does
    _check_shapes(a.shape, b.shape)
    dtype = _result_dtype(a.dtype, b.dtype, precision)
    (m, k), n = a.shape, b.shape[1]
    wide = np.dtype(np.result_type(a.dtype, b.dtype))  # both operands in one width (float32 -> float64 is exact)
    indptr, indices, data, _ = _core.spgemm(m, k, a.indptr, a.indices, a.data.astype(wide, copy=False), n, b.indptr,
                                            b.indices, b.data.astype(wide, copy=False), not keep_zeros,
                                            dtype == np.float64, int(b.canonical))  # both checked by _operand
    array = isinstance(A, getattr(sp, "sparray", ())) or isinstance(B, getattr(sp, "sparray", ()))
    cls = sp.csr_array if array else sp.csr_matrix
    if indices.shape[0] and indptr[-1] <= INT32_MAX:
        indptr = indptr.astype(np.int32)  # scipy's own index width when it fits
    C = cls((data, indices, indptr), shape=(m, n))
    C.has_sorted_indices = True
    return C

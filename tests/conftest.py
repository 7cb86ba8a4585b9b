"""Shared fixtures and helpers: integer-valued data (exact in TF32/FP16/FP32), the GUIDE error
bound, the real-matrix directory, and the `gpu` marker's automatic skip."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import datasets

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    if accspmm.cuda_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {accspmm.cuda_status()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def data_dir():
    """The real-matrix set: $ACCSPMM_DATA_DIR, else ../shared/data beside the repository."""
    d = os.environ.get("ACCSPMM_DATA_DIR") or os.path.join(os.path.dirname(REPO), "shared", "data")
    return d if os.path.isdir(d) else None


def real_matrix_files():
    d = data_dir()
    return datasets.matrix_files(d) if d else []


def real_matrix_params():
    files = real_matrix_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no real-matrix directory "
                                                                   "(set ACCSPMM_DATA_DIR or provide ../shared/data)"))]
    return [pytest.param(f, id=datasets.matrix_name(f)) for f in files]


@functools.lru_cache(maxsize=4)
def load_int_matrix(path, seed=0):
    """A real matrix's pattern with random integer values in [-8, 8] \\ {0}, float32."""
    A = datasets.load_matrix(path, np.float32)
    return with_int_values(A, seed)


def with_int_values(A, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    A = sp.csr_matrix(A, dtype=dtype, copy=True)
    vals = rng.integers(1, 9, size=A.nnz) * rng.choice([-1, 1], size=A.nnz)
    A.data = vals.astype(dtype)
    return A


def int_dense(k, n, seed=1, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.integers(-8, 9, size=(k, n)).astype(dtype)


def outputs_at_threads(code: str, threads=("1", "2", "3")) -> set:
    """What ``python -c code`` writes to stdout at each OpenMP thread count (the C core reads
    OMP_NUM_THREADS once, at import): a set of one element when the result does not depend on it."""
    import subprocess
    import sys

    return {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "OMP_NUM_THREADS": t}).stdout for t in threads}


def long_window_matrix():
    """37 x 3000 with windows of 0, 1, 40 and 375 TC blocks (a dense 3000-column row), integer
    values: PACK, GROUP and multi-part SPLIT tasks at small caps."""
    rng = np.random.default_rng(3)
    d = (rng.random((37, 3000)) < 0.004) * rng.integers(-8, 9, (37, 3000))
    d[8:16] = 0
    d[20] = rng.integers(1, 9, 3000)
    d[30, :320] = rng.integers(-8, 9, 320)
    return sp.csr_matrix(d.astype(np.float32))


def scipy_ref(A, B):
    """scipy's product in the result dtype (the object of bit-exact comparisons)."""
    return np.asarray(A @ B)


def to_format(x: np.ndarray, prec: str) -> np.ndarray:
    """float64 values of x rounded to the format (the test's own route: numpy / torch, RNE)."""
    if prec == "fp16":
        return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)
    import torch

    return torch.from_numpy(np.asarray(x, np.float32)).to(torch.bfloat16).double().numpy()


def half_ref(A, B, prec, out_dtype):
    """scipy's float64 product of the format-rounded operands, rounded once to the output."""
    Ar = sp.csr_matrix(A, dtype=np.float64, copy=True)
    Ar.data = to_format(Ar.data, prec)
    C = np.asarray(Ar @ to_format(np.asarray(B, np.float64), prec))
    return C.astype(np.float32) if out_dtype == "float32" else to_format(C, prec)


def assert_bit_exact(C, ref):
    C = np.asarray(C)
    assert C.shape == ref.shape, (C.shape, ref.shape)
    assert C.dtype == ref.dtype, (C.dtype, ref.dtype)
    assert np.all(np.isfinite(C)), "non-finite output (unwritten element?)"
    bad = np.argwhere(C != ref)
    assert bad.size == 0, f"{len(bad)} elements differ, first at {bad[0]}: {C[tuple(bad[0])]} vs {ref[tuple(bad[0])]}"


def assert_device_bittcf(g, ref):
    """A GPU-built BitTCF (accspmm._device_format.DeviceBitTCF, keep_blocks=True) equal, array for
    array and bit for bit, to the C builder's ``ref`` (accspmm.BitTCF), the TF32 kernel's packed
    metadata and rounded values included."""
    from accspmm import _tf32

    wo, cols, mask, vo, vals, meta, vt = g.to_host()
    np.testing.assert_array_equal(g.window_offsets, ref.window_offsets)
    np.testing.assert_array_equal(wo, ref.window_offsets)
    np.testing.assert_array_equal(cols, ref.block_cols)
    np.testing.assert_array_equal(mask, ref.block_mask)
    np.testing.assert_array_equal(vo, ref.block_value_offsets)
    assert vals.view(np.uint32).tobytes() == ref.values.view(np.uint32).tobytes()
    np.testing.assert_array_equal(meta, _tf32.pack_meta(ref))
    assert vt.view(np.uint32).tobytes() == _tf32.round_tf32(ref.values).view(np.uint32).tobytes()


def error_bound_check(A, B, C, u):
    """GUIDE §3: |C - C_ref| <= (3u + k_i 2^-24) (|A| @ |B|), C_ref in float64.
    Returns the norm-wise relative error."""
    A64 = sp.csr_matrix(A, dtype=np.float64)
    B64 = np.asarray(B, dtype=np.float64)
    ref = A64 @ B64
    absA = abs(A64)
    bound_base = absA @ np.abs(B64)
    k_i = np.diff(A64.indptr).astype(np.float64)
    k_i = k_i.reshape(-1, 1) if ref.ndim == 2 else k_i
    bound = (3 * u + k_i * 2.0**-24) * bound_base
    err = np.abs(np.asarray(C, dtype=np.float64) - ref)
    assert np.all(np.isfinite(C))
    viol = err > bound
    assert not viol.any(), f"{viol.sum()} elements exceed the bound; worst ratio {(err / np.maximum(bound, 1e-300)).max():.3g}"
    return float(np.linalg.norm(err) / max(np.linalg.norm(ref), 1e-300))


@pytest.fixture(scope="session")
def bundled_int():
    return with_int_values(datasets.load_bundled(np.float32), seed=42)


def csr_raw(m, k, rows, cols, vals, dtype=np.float32, index_dtype=np.int32):
    """CSR with entries in the given order per row (unsorted / duplicates kept as given)."""
    order = np.argsort(rows, kind="stable")
    rows, cols, vals = np.asarray(rows)[order], np.asarray(cols)[order], np.asarray(vals)[order]
    indptr = np.zeros(m + 1, dtype=index_dtype)
    np.add.at(indptr, rows + 1, 1)
    indptr = np.cumsum(indptr).astype(index_dtype)
    return sp.csr_matrix((vals.astype(dtype), cols.astype(index_dtype), indptr), shape=(m, k))


try:  # hypothesis is a test dependency; conftest must import without it
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None

if st is not None:

    @st.composite
    def int_csr(draw):
        """(integer-valued CSR as drawn: unsorted, duplicates, possibly more entries than m * k; int32/int64
        indices, float32/float64 values), seed) for hypothesis."""
        m = draw(st.integers(0, 45))
        k = draw(st.integers(0, 45))
        nnz = draw(st.integers(0, 300)) if m and k else 0
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, max(m, 1), size=nnz)
        if draw(st.booleans()) and m:  # concentrate rows to leave empty windows
            rows = rows % max(1, m // 3)
        cols = rng.integers(0, max(k, 1), size=nnz)
        vals = rng.integers(-8, 9, size=nnz)
        index_dtype = draw(st.sampled_from([np.int32, np.int64]))
        dtype = draw(st.sampled_from([np.float32, np.float64]))
        return csr_raw(m, k, rows, cols, vals, dtype=dtype, index_dtype=index_dtype), seed


def assert_capture_needs_warm_up(call):
    """``call()``, a plan's first call of a width, inside a CUDA-graph capture raises the warm-up RuntimeError
    (PyTorch may also report the abandoned capture when the capture ends)."""
    import torch

    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            with pytest.raises(RuntimeError, match="warm-up"):
                call()
    except RuntimeError as exc:
        assert "capture" in str(exc)

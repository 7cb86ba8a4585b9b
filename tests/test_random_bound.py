"""Random-valued inputs against the GUIDE §3 error bound (CPU paths: u = 0 for FP32 inputs)."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import datasets
from conftest import error_bound_check


@pytest.mark.parametrize("fmt", ["csr", "bittcf"])
@pytest.mark.parametrize("n", [1, 33, 128])
def test_random_values_within_bound(fmt, n):
    A = datasets.load_bundled(np.float32)
    rng = np.random.default_rng(n)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B = rng.standard_normal((A.shape[1], n)).astype(np.float32)
    C = accspmm.spmm(A, B, device="cpu", format=fmt)
    rel = error_bound_check(A, B, C, u=0.0)
    assert rel < 1e-6


def test_float64_within_bound():
    rng = np.random.default_rng(1)
    A = sp.random(300, 200, density=0.05, random_state=1, format="csr", dtype=np.float64)
    A.data = rng.standard_normal(A.nnz)
    B = rng.standard_normal((200, 20))
    C = accspmm.spmm(A, B, device="cpu")
    assert C.dtype == np.float64
    np.testing.assert_allclose(C, A @ B, rtol=1e-13, atol=1e-13)


def test_nonfinite_propagates_like_scipy():
    A = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, np.inf]], np.float32))
    B = np.array([[np.nan, 1.0], [2.0, 0.0]], np.float32)
    C = accspmm.spmm(A, B, device="cpu")
    np.testing.assert_array_equal(C, A @ B)
    np.testing.assert_array_equal(np.isnan(C), np.isnan(A @ B))


def test_check_finite_on_cpu_plans():
    """check_finite=True raises on every device (the CPU path ignored it; found by a fuzz), for NumPy
    and PyTorch B, plans and one-shot calls, and leaves finite B alone."""
    A = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]], np.float32))
    bad = np.array([[np.nan, 1.0], [2.0, 0.0]], np.float32)
    inf = np.array([[1.0, 1.0], [np.inf, 0.0]], np.float32)
    good = np.array([[1.0, 1.0], [2.0, 0.0]], np.float32)
    p = accspmm.plan(A, device="cpu")
    arrays = [bad, inf]
    try:
        import torch

        arrays += [torch.from_numpy(bad), torch.from_numpy(inf)]
    except ImportError:
        pass
    for B in arrays:
        with pytest.raises(ValueError, match="NaN or inf"):
            p(B, check_finite=True)
        with pytest.raises(ValueError, match="NaN or inf"):
            accspmm.spmm(A, B, device="cpu", check_finite=True)
    np.testing.assert_array_equal(p(good, check_finite=True), A @ good)
    np.testing.assert_array_equal(np.isnan(p(bad)), np.isnan(A @ bad))  # the default still propagates

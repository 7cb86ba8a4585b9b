"""Every path on every real matrix (../shared/data or $ACCSPMM_DATA_DIR), bit-exact against scipy
at N in {1, 7, 32, 33, 128}."""

import numpy as np
import pytest

import accspmm
from conftest import assert_bit_exact, int_dense, load_int_matrix, real_matrix_params

NS = [1, 7, 32, 33, 128]


@pytest.mark.slow
@pytest.mark.parametrize("path", real_matrix_params())
def test_cpu_paths_exact(path):
    A = load_int_matrix(path)
    plans = [accspmm.plan(A, device="cpu", format=f) for f in ("csr", "bittcf")]
    for n in NS:
        B = int_dense(A.shape[1], n, seed=n)
        ref = np.asarray(A @ B)
        for p in plans:
            assert_bit_exact(p(B), ref)

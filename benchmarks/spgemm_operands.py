"""The SpGEMM operands that the profiling and A/B scripts name (profile_spgemm.py, ab_spgemm_reuse.py):
a matrix of DATA_DIR, kron_poisson_bB, or amg_{poisson,elasticity}_{RA,RAP} (bench_spgemm's AMG Galerkin
products).  Importing this module does not touch sys.path, so the accspmm under test is whichever
PYTHONPATH gives (the A/B scripts run two builds)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def amg_operands(name):
    """amg_poisson_RA, amg_poisson_RAP, amg_elasticity_RA, amg_elasticity_RAP: bench_spgemm's
    Galerkin products (pyamg's smoothed aggregation, first level), float32."""
    import pyamg

    problem, product = name.rsplit("_", 1)
    np.random.seed(0)  # pyamg's spectral radius estimate starts from a random vector: the same P every run
    if problem == "amg_poisson":
        A = pyamg.gallery.poisson((800, 800), format="csr")
    else:
        A = sp.csr_matrix(pyamg.gallery.linear_elasticity((400, 400))[0])
    L = pyamg.smoothed_aggregation_solver(A, max_coarse=1000).levels[0]
    R, P = sp.csr_matrix(L.R, dtype=np.float32), sp.csr_matrix(L.P, dtype=np.float32)
    A = sp.csr_matrix(A, dtype=np.float32)
    return (R, A) if product == "RA" else (sp.csr_matrix(R @ A), P)


def operand(data_dir, name, random_values=True):
    """(A, B) of the product NAME, float32: B is A for square matrices (A·A), else (Aᵀ, A).  A matrix of
    DATA_DIR gets standard normal values unless random_values is False (its own values then)."""
    from accspmm import datasets

    if name.startswith("amg_"):
        return amg_operands(name)
    if name.startswith("kron_poisson_b"):
        b = int(name[len("kron_poisson_b"):])
        n = int(np.sqrt(3_000_000 / (5 * b * b)))
        T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), dtype=np.float64)
        A = sp.kron(sp.kronsum(T, T, format="csr"), np.ones((b, b)), format="csr")
        A.data = np.random.default_rng(0).standard_normal(A.nnz)
    else:
        A = datasets.load_matrix(datasets.matrix_path(data_dir, name), np.float64)
        if random_values:
            A.data = np.random.default_rng(0).standard_normal(A.nnz)
    A = sp.csr_matrix(A, dtype=np.float32)
    if A.shape[0] != A.shape[1]:
        return sp.csr_matrix(A.T), A
    return A, A

"""Matrix loading: the bundled matrix and Matrix Market files (plain or gzip)."""

from __future__ import annotations

import gzip
import os
from importlib import resources

import numpy as np
import scipy.io
import scipy.sparse as sp

BUNDLED = "wiki-Vote.mtx.gz"


def load_matrix(path, dtype=np.float64) -> sp.csr_matrix:
    """Reads a Matrix Market file (``.mtx`` or ``.mtx.gz``) as CSR; symmetric files are expanded,
    pattern files get values 1."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        A = scipy.io.mmread(f)
    A = sp.csr_matrix(A, dtype=dtype)
    A.sum_duplicates()
    return A


def bundled_path() -> str:
    """Path of the matrix bundled with the package (see accspmm/data/README.md)."""
    return str(resources.files("accspmm").joinpath("data", BUNDLED))


def load_bundled(dtype=np.float64) -> sp.csr_matrix:
    """The bundled real matrix: SNAP wiki-Vote, 8298 x 8298, 103,689 nonzeros, empty rows."""
    return load_matrix(bundled_path(), dtype)


def matrix_files(directory) -> list:
    """Matrix Market files of a directory, sorted by name."""
    names = sorted(n for n in os.listdir(directory) if n.endswith((".mtx", ".mtx.gz")))
    return [os.path.join(directory, n) for n in names]


def matrix_name(path) -> str:
    base = os.path.basename(os.fspath(path))
    for ext in (".mtx.gz", ".mtx"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base

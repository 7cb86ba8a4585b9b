"""Matrix loading: the bundled matrix and Matrix Market files (plain, gzip or xz)."""

from __future__ import annotations

import gzip
import lzma
import os
from importlib import resources

import numpy as np
import scipy.io
import scipy.sparse as sp

BUNDLED = "wiki-Vote.mtx.gz"
EXTENSIONS = (".mtx.gz", ".mtx.xz", ".mtx")  # the Matrix Market files this module reads


def load_matrix(path, dtype=np.float64) -> sp.csr_matrix:
    """Reads a Matrix Market file (``.mtx``, ``.mtx.gz`` or ``.mtx.xz``) as CSR; symmetric files are
    expanded, pattern files get values 1."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
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
    names = sorted(n for n in os.listdir(directory) if n.endswith(EXTENSIONS))
    return [os.path.join(directory, n) for n in names]


def matrices(directory, only=None, dtype=np.float64):
    """(name, CSR) of every Matrix Market file of a directory, sorted by name; ``only``: names to
    keep (None: all).  Each matrix is loaded when the iteration reaches it."""
    for path in matrix_files(directory):
        name = matrix_name(path)
        if not only or name in only:
            yield name, load_matrix(path, dtype)


def matrix_path(directory, name) -> str:
    """The Matrix Market file of matrix `name` in `directory`, whichever of EXTENSIONS it has."""
    for ext in EXTENSIONS:
        path = os.path.join(directory, name + ext)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {name}{{{','.join(EXTENSIONS)}}} in {directory}")


def matrix_name(path) -> str:
    base = os.path.basename(os.fspath(path))
    for ext in EXTENSIONS:
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


#: Shapes that have stalled preprocessing elsewhere (issue 16); ``adversarial(kind, nnz)`` makes them.
ADVERSARIAL = ("hub", "tall3", "tall1", "star", "dense_row", "dense_col", "bipartite")


def adversarial(kind: str, nnz: int = 1_000_000, seed: int = 0, dtype=np.float32) -> sp.csr_matrix:
    """A seeded adversarial matrix of about ``nnz`` nonzeros (values 1):

    - ``hub``: n x n, n = nnz / 5, power-law (Zipf) columns, one row holding 0.9 n nonzeros and one
      column holding n / 2;
    - ``tall3`` / ``tall1``: nnz / 3 x 3 and nnz x 1, every entry stored;
    - ``star``: a star graph (node 0 joined to every other, both directions);
    - ``dense_row``: nnz / 1000 x nnz with one full row (and nothing else);
    - ``dense_col``: nnz x 1000 with one full column;
    - ``bipartite``: n x n / 8 rectangular, power-law columns with a column of degree n / 2.
    """
    rng = np.random.default_rng(seed)
    if kind == "hub":
        n = max(nnz // 5, 8)
        rows = rng.integers(0, n, 3 * n)
        cols = (rng.zipf(1.8, 3 * n) - 1) % n
        rows = np.r_[rows, np.zeros(9 * n // 10, np.int64), rng.permutation(n)[: n // 2]]
        cols = np.r_[cols, rng.permutation(n)[: 9 * n // 10], np.full(n // 2, 7 % n)]
        shape = (n, n)
    elif kind in ("tall3", "tall1"):
        k = 3 if kind == "tall3" else 1
        n = max(nnz // k, 1)
        rows, cols, shape = np.repeat(np.arange(n), k), np.tile(np.arange(k), n), (n, k)
    elif kind == "star":
        n = max(nnz // 2, 2)
        rows = np.r_[np.zeros(n - 1, np.int64), np.arange(1, n)]
        cols = np.r_[np.arange(1, n), np.zeros(n - 1, np.int64)]
        shape = (n, n)
    elif kind == "dense_row":
        rows, cols, shape = np.zeros(nnz, np.int64), np.arange(nnz), (max(nnz // 1000, 1), nnz)
    elif kind == "dense_col":
        rows, cols, shape = np.arange(nnz), np.zeros(nnz, np.int64), (nnz, 1000)
    elif kind == "bipartite":
        n = max(nnz // 4, 8)
        k = max(n // 8, 1)
        rows = rng.integers(0, n, 3 * n)
        cols = (rng.zipf(1.6, 3 * n) - 1) % k
        rows = np.r_[rows, rng.permutation(n)[: n // 2]]
        cols = np.r_[cols, np.full(n // 2, k - 1)]
        shape = (n, k)
    else:
        raise ValueError(f"kind must be one of {ADVERSARIAL}, got {kind!r}")
    A = sp.csr_matrix((np.ones(rows.size, dtype), (rows, cols)), shape=shape)
    A.sum_duplicates()
    A.data[:] = 1
    return A

"""Seeded synthetic matrices for the sizes the real set lacks (GUIDE §4), as canonical float32 CSR.

Kinds: road (2-D grid with dropped edges, ~2.6 per row), powerlaw (web/social: Zipf row lengths,
preferential columns, ~10 per row), fem (banded node blocks, ~50 per row), gnn (communities,
~300 per row).  ``scale`` multiplies the row count (1.0 gives 10M-60M nonzeros)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _csr_from_lists(m, k, rows, cols, rng):
    vals = rng.standard_normal(rows.shape[0]).astype(np.float32)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(m, k))
    A.sum_duplicates()
    return A


def road(scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    side = int(2000 * np.sqrt(scale))
    n = side * side
    idx = np.arange(n, dtype=np.int64)
    right = idx[(idx % side) < side - 1]
    down = idx[idx < n - side]
    src = np.concatenate([right, down])
    dst = np.concatenate([right + 1, down + side])
    keep = rng.random(src.shape[0]) < 0.65
    src, dst = src[keep], dst[keep]
    return _csr_from_lists(n, n, np.concatenate([src, dst]), np.concatenate([dst, src]), rng)


def powerlaw(scale=1.0, seed=1):
    rng = np.random.default_rng(seed)
    n = int(2_000_000 * scale)
    deg = np.minimum(rng.zipf(2.1, size=n) * 4, 20000)
    deg = np.maximum(1, (deg * (10.0 / deg.mean())).astype(np.int64))
    rows = np.repeat(np.arange(n, dtype=np.int64), deg)
    # preferential targets: a power of a uniform concentrates on low ids, then a fixed scramble
    cols = (n * rng.random(rows.shape[0]) ** 2.5).astype(np.int64)
    scramble = rng.permutation(n)
    return _csr_from_lists(n, n, rows, scramble[cols], rng)


def fem(scale=1.0, seed=2):
    rng = np.random.default_rng(seed)
    dof = 5
    nodes = int(200_000 * scale)
    n = nodes * dof
    nbrs = 10  # neighbour nodes (incl. itself) within a band of 40 nodes
    node = np.arange(nodes, dtype=np.int64)
    offs = rng.integers(-20, 21, size=(nodes, nbrs - 1))
    nb = np.concatenate([node[:, None], np.clip(node[:, None] + offs, 0, nodes - 1)], axis=1)
    # every dof of a node couples with every dof of its neighbour nodes
    rows = np.repeat(np.arange(n, dtype=np.int64), nbrs * dof)
    cols = (np.repeat(nb, dof, axis=0)[:, :, None] * dof + np.arange(dof)).reshape(-1)
    return _csr_from_lists(n, n, rows, cols, rng)


def gnn(scale=1.0, seed=3):
    rng = np.random.default_rng(seed)
    n = int(200_000 * scale)
    avg = 300
    deg = np.maximum(1, rng.poisson(avg, size=n))
    rows = np.repeat(np.arange(n, dtype=np.int64), deg)
    community = 5000
    base = (rows // community) * community
    local = rng.random(rows.shape[0]) < 0.7
    cols = np.where(local, base + rng.integers(0, community, rows.shape[0]), rng.integers(0, n, rows.shape[0]))
    return _csr_from_lists(n, n, rows, np.minimum(cols, n - 1), rng)


GENERATORS = {"syn_road": road, "syn_powerlaw": powerlaw, "syn_fem": fem, "syn_gnn": gnn}

"""Row reorderings: which rows share an 8-row window, hence how many TC blocks BitTCF holds.

A reordering returns ``perm`` (new -> old, int64).  It never changes a product: plans write row
``i`` of the reordered product to ``C[perm[i]]``.

Methods (the heavy ones are C, in ``csrc/acc_reorder_*.c``, with the GIL released):

- ``"none"``: identity.
- ``"rcm"``: reverse Cuthill-McKee on the pattern of A + A^T (square A) or on the bipartite
  row/column graph (rectangular A, rows kept in their RCM order): scipy's order, computed in C in
  O(nnz log nnz) whatever the degrees (csrc/acc_reorder_rcm.c).
- ``"degree"``: rows by nnz, descending (stable).
- ``"jaccard"``: SMaT's greedy Jaccard row clustering (parameters ``tau``, ``block_width``,
  ``max_candidates``).
- ``"affinity"``: Acc-SpMM's data-affinity reordering: modularity dendrogram, then a greedy walk
  to the row sharing most columns with the current window (parameters ``max_scan``,
  ``community`` = "tie" | "ignore", ``max_community``, ``chunk_nnz`` (None: by size,
  ``affinity_chunk_nnz``), ``part_edges``;
  csrc/acc_reorder_affinity.c documents each).
- ``"auto"``: runs the candidates in ``AUTO_CANDIDATES`` and keeps the one with the fewest TC
  blocks (ties: the earlier candidate, "none" first).  Why it chose is in the returned info and
  in ``plan.stats["reorder"]``.

``jaccard``, ``affinity`` and ``degree`` place rows without nonzeros last.  Every method is
deterministic for a given ``seed`` (0: ties by index; other seeds: ties by a seeded shuffle).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import scipy.sparse as sp

from . import _core
from ._validate import CSR, as_csr

METHODS = ("none", "rcm", "degree", "jaccard", "affinity", "auto")
#: "auto" tries these (jaccard is left out: it never had the fewest blocks on the real matrices
#: and is the slowest method on some, benchmarks/reorder_quality.md).
AUTO_CANDIDATES = ("none", "affinity", "rcm", "degree")
REPORT_METHODS = ("none", "rcm", "degree", "jaccard", "affinity")

#: Defaults, chosen on the real matrices (benchmarks/reorder_quality.py).
DEFAULT_PARAMS = {
    "affinity": {"max_scan": 1024, "community": "tie", "max_community": 16.0, "chunk_nnz": None,
                 "part_edges": 1 << 20},
    "jaccard": {"tau": 0.8, "block_width": 1, "max_candidates": 1024},
}
#: How the affinity walk ranks candidates of the current row's community (csrc/accspmm.h).
_COMMUNITY = {"ignore": 0, "tie": 1}
_PROGRESS_MIN_NNZ = 1_000_000  # show a progress bar (when tqdm is installed) from this size


def _params(method: str, params: dict, nnz: int) -> dict:
    allowed = DEFAULT_PARAMS.get(method, {})
    unknown = set(params) - set(allowed)
    if unknown:
        raise TypeError(f"reorder method {method!r} takes no parameter(s) {sorted(unknown)}"
                        + (f"; it takes {sorted(allowed)}" if allowed else ""))
    merged = dict(allowed)
    merged.update(params)
    if method == "affinity":
        if int(merged["max_scan"]) <= 0:
            raise ValueError("max_scan must be positive")
        if merged["community"] not in _COMMUNITY:
            raise ValueError(f"community must be one of {tuple(_COMMUNITY)}, got {merged['community']!r}")
        if not float(merged["max_community"]) > 0:
            raise ValueError("max_community must be positive")
        if merged["chunk_nnz"] is None:
            merged["chunk_nnz"] = affinity_chunk_nnz(nnz)
        for name in ("chunk_nnz", "part_edges"):
            if int(merged[name]) <= 0:
                raise ValueError(f"{name} must be positive")
    if method == "jaccard":
        tau = float(merged["tau"])
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {tau}")
        if int(merged["block_width"]) < 1:
            raise ValueError("block_width must be >= 1")
        if int(merged["max_candidates"]) <= 0:
            raise ValueError("max_candidates must be positive")
    return merged


def _seed(seed) -> int:
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def _run_with_progress(fn, nnz: int, desc: str, progress):
    """Runs fn(progress_array) in a worker thread (the C call releases the GIL) and drives a tqdm
    bar from the counters it updates.  progress: True, False, or None (bar for large inputs when
    tqdm is installed)."""
    show = progress if progress is not None else nnz >= _PROGRESS_MIN_NNZ
    bar_cls = None
    if show:
        try:
            from tqdm.auto import tqdm as bar_cls
        except ImportError:
            bar_cls = None
    counters = np.zeros(2, dtype=np.int64)
    if bar_cls is None:
        return fn(counters)
    result, error = [], []

    def work():
        try:
            result.append(fn(counters))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=work, name=f"accspmm-{desc}")
    with bar_cls(total=1, desc=desc, leave=False) as bar:
        thread.start()
        while thread.is_alive():
            thread.join(0.1)
            done, total = int(counters[0]), int(counters[1])
            if total > 0:
                bar.total = total
                bar.n = done
                bar.refresh()
    if error:
        raise error[0]
    return result[0]


def _rcm(csr: CSR) -> np.ndarray:
    """Reverse Cuthill-McKee on the pattern of A + A^T (square A) or on the bipartite row/column
    graph (rectangular A), in C (csrc/acc_reorder_rcm.c): the order scipy's
    reverse_cuthill_mckee gives, in O(nnz log nnz) however large a hub (scipy's insertion sort of
    each node's neighbours is quadratic in its degree)."""
    m, k = csr.shape
    if csr.nnz == 0:  # no edge: every order is as good; keep the rows where they are
        return np.arange(m, dtype=np.int64)
    pattern = sp.csr_matrix((np.ones(csr.nnz, np.int8), csr.indices, csr.indptr), shape=(m, k))
    if m == k:
        graph = (pattern + pattern.T).tocsr()
    else:
        graph = sp.bmat([[None, pattern], [pattern.T, None]], format="csr")
    graph.sort_indices()
    n = graph.shape[0]
    indptr = graph.indptr.astype(np.int64)
    indices = graph.indices.astype(np.int32, copy=False)
    degree = np.diff(indptr) + (graph.diagonal() != 0)  # scipy counts a diagonal entry twice
    seeds = np.argsort(degree).astype(np.int64)  # scipy's roots: numpy's default argsort of the degrees
    order = _core.reorder_rcm(n, indptr, indices, seeds)
    return order if m == k else order[order < m]


def affinity_chunk_nnz(nnz: int) -> int:
    """The affinity ordering's default chunk (``chunk_nnz=None``): the nonzeros of a part of the
    depth-first order that is ordered on its own, in parallel with the others.

    From 1M nonzeros, nnz / 16 clamped to [64K, 512K]: about 16 chunks up to 8M nonzeros, so 16
    cores have work in the step that dominates (landmark, 1.15M nonzeros, had 3 chunks of 512K).
    Below 1M, 512K: a matrix that small orders in tens of milliseconds, and small chunks cost blocks
    there (64K chunks: musae_facebook +9.3% TC blocks, bayer10 +7.0%, Andrews +5.9%; from 1M
    nonzeros within -0.2..+1.1% on the real matrices, benchmarks/NOTES.md).  The chunk depends on
    the matrix only, never on the thread count, so the permutation is the same on every machine."""
    if nnz < 1_000_000:
        return 1 << 19
    return int(min(max(nnz // 16, 1 << 16), 1 << 19))


#: Phases of the affinity reordering timed in ``info["phase_seconds"]`` (csrc/accspmm.h).
AFFINITY_PHASES = ("graph", "dendrogram", "communities", "ordering")


def _run_method(csr: CSR, method: str, seed: int, params: dict, progress, phases=None) -> np.ndarray:
    """perm of one method; ``phases``: a dict that gets the affinity reordering's phase times."""
    m, k = csr.shape
    if method == "none":
        return np.arange(m, dtype=np.int64)
    if method == "rcm":
        return _rcm(csr)
    if method == "degree":
        return _core.reorder_degree(m, k, csr.indptr, csr.indices)
    if method == "affinity":
        seconds = np.zeros(len(AFFINITY_PHASES))
        perm = _run_with_progress(
            lambda c: _core.reorder_affinity(m, k, csr.indptr, csr.indices, seed, int(params["max_scan"]),
                                             _COMMUNITY[params["community"]],
                                             float(params["max_community"]), int(params["chunk_nnz"]),
                                             int(params["part_edges"]), c, seconds),
            csr.nnz, "affinity reordering", progress)
        if phases is not None:
            phases.update(zip(AFFINITY_PHASES, seconds.tolist()))
        return perm
    if method == "jaccard":
        return _run_with_progress(
            lambda c: _core.reorder_jaccard(m, k, csr.indptr, csr.indices, seed, float(params["tau"]),
                                            int(params["block_width"]), int(params["max_candidates"]), c),
            csr.nnz, "jaccard reordering", progress)
    raise ValueError(f"reorder method must be one of {METHODS}, got {method!r}")


def block_stats(A, perm, dtype=None) -> dict:
    """BitTCF quality metrics of ``A`` with rows ordered by ``perm`` (new -> old), without building
    the format: TC blocks, MeanNNZTC, blocks per window (mean/max/std), IBD, bytes."""
    csr = (A if isinstance(A, CSR) else as_csr(A)).canonicalized()
    from ._format import check_perm

    p = check_perm(perm, csr.shape[0])
    dtype = np.dtype(dtype) if dtype is not None else csr.dtype
    s = _core.bittcf_count_stats(csr.shape[0], csr.shape[1], csr.indptr, csr.indices, p,
                                 dtype == np.float64)
    s["nnz"] = csr.nnz
    return s


def compute(A, method: str = "affinity", *, seed=0, progress=None, **params):
    """The permutation of ``method`` and an info dict (method, chosen, params, seconds; for
    "auto" the TC blocks of every candidate)."""
    if method not in METHODS:
        raise ValueError(f"reorder method must be one of {METHODS}, got {method!r}")
    csr = (A if isinstance(A, CSR) else as_csr(A)).canonicalized()
    seed = _seed(seed)
    t0 = time.perf_counter()
    if method != "auto":
        p = _params(method, params, csr.nnz)
        phases = {}
        perm = _run_method(csr, method, seed, p, progress, phases)
        info = {"method": method, "chosen": method, "params": p, "seed": seed}
        if phases:
            info["phase_seconds"] = phases
    else:
        by_method = {c: params.pop(c, {}) for c in AUTO_CANDIDATES}
        if params:
            raise TypeError(f"reorder method 'auto' takes per-candidate dicts named {AUTO_CANDIDATES}, "
                            f"got {sorted(params)}")
        candidates, perm, chosen = {}, None, None
        for c in AUTO_CANDIDATES:
            p = _params(c, dict(by_method[c]), csr.nnz)
            cand = _run_method(csr, c, seed, p, progress)
            blocks = _core.bittcf_count_stats(csr.shape[0], csr.shape[1], csr.indptr, csr.indices,
                                              cand, False)["tc_blocks"]
            candidates[c] = blocks
            if chosen is None or blocks < candidates[chosen]:
                perm, chosen = cand, c
        info = {"method": "auto", "chosen": chosen, "seed": seed, "tc_blocks_by_method": candidates,
                "why": f"fewest TC blocks ({candidates[chosen]}) among {list(AUTO_CANDIDATES)}"}
    info["seconds"] = time.perf_counter() - t0
    return perm, info


# ---- whether a plan reorders: the pay-back prediction (Plan's reorder=None) ------------------

#: Cost model of the pay-back decision, one place.  Reordering is worth it when its cost comes back
#: within the calls the user says they will make:  cost / saving per call <= calls.
PAYBACK = {
    # "auto" (every candidate of AUTO_CANDIDATES) runs at about this many nonzeros per second on
    # 2 cores; its slowest inputs (hubs, bipartite graphs; benchmarks/preprocess_times.md) run at
    # ~2.5M/s, the real matrices at 5-20M/s: the slow end is assumed, so a prediction errs towards
    # not reordering.  The affinity walk does not scale with cores (issue 16), so cores are ignored.
    "auto_nnz_per_s": 2.5e6,
    # TF32 kernel time per TC block per call at N = 128 on an H100 (the kernel is bound by the B
    # rows each block loads, so time tracks the block count): the geometric mean over the 8 real
    # matrices of >= 300k nnz, default plans at 45bd8f6 (0.70-1.35 ns; G3_circuit 754,366 blocks
    # in 0.823 ms; benchmarks/results/h100_preprocess_gpu.json).  It was 1.3e-9 before that
    # commit's schedule changes made the kernel faster.
    "block_seconds_n128": 0.95e-9,
    # the sample: about this many nonzeros (at most 65,536 rows), in up to 32 runs of whole windows
    "sample_nnz": 1 << 18,
    "sample_max_rows": 1 << 16,
    "sample_chunks": 32,
}


def _sample_rows(m: int, nnz: int) -> np.ndarray:
    """Rows of the pay-back sample: runs of consecutive rows starting at multiples of 8 (so the
    sample's windows in the original order are the matrix's own), spread evenly, about
    ``PAYBACK["sample_nnz"]`` nonzeros in all; every row when the matrix is that small."""
    want = int(PAYBACK["sample_nnz"] * m / max(nnz, 1))
    rows = min(m, PAYBACK["sample_max_rows"], max(256, want))
    if rows >= m:
        return np.arange(m, dtype=np.int64)
    chunks = max(1, min(PAYBACK["sample_chunks"], rows // 256))
    chunk = max(8, rows // chunks // 8 * 8)
    starts = (np.arange(chunks, dtype=np.int64) * ((m - chunk) // chunks)) // 8 * 8
    return (starts[:, None] + np.arange(chunk, dtype=np.int64)[None, :]).ravel()


def predict_payback(csr: CSR, calls, seed=0, params=None) -> tuple:
    """(perm or None, info): whether reordering ``csr`` (canonical) pays back within ``calls`` products
    at N = 128, from "auto" run on a sample of row runs (``_sample_rows``): the sample's TC blocks in
    the original order and after reordering give the fraction of blocks the reordering saves, which
    scales the whole matrix's block count.  A sample that is the whole matrix gives the exact count
    and its permutation is returned for reuse.  A sample sees only partners within itself, so it
    under-predicts what reordering finds in matrices whose similar rows lie far apart (the decision
    errs towards not reordering).  Cost model: ``PAYBACK``."""
    m, k = csr.shape
    rows = _sample_rows(m, csr.nnz)
    whole = rows.shape[0] == m
    if whole:
        sub = csr
    else:
        pattern = sp.csr_matrix((np.ones(csr.nnz, np.int8), csr.indices, csr.indptr), shape=(m, k))[rows]
        sub = CSR((rows.shape[0], k), pattern.indptr.astype(np.int64), pattern.indices.astype(np.int32, copy=False),
                  np.ones(pattern.nnz, np.float32), True)
    t0 = time.perf_counter()
    sub_perm, sub_info = compute(sub, "auto", seed=seed, progress=False, **(params or {}))
    sample_s = time.perf_counter() - t0

    def blocks(p):
        return _core.bittcf_count_stats(sub.shape[0], k, sub.indptr, sub.indices, p, False)["tc_blocks"]

    before = blocks(np.arange(sub.shape[0], dtype=np.int64))
    after = blocks(sub_perm)
    full_before = before if whole else _core.bittcf_count_stats(
        m, k, csr.indptr, csr.indices, np.arange(m, dtype=np.int64), False)["tc_blocks"]
    frac = (before - after) / before if before else 0.0
    saved_blocks = frac * full_before
    saving = saved_blocks * PAYBACK["block_seconds_n128"]
    cost = 0.0 if whole else csr.nnz / PAYBACK["auto_nnz_per_s"]
    break_even = cost / saving if saving > 0 else float("inf")
    info = {"sample_rows": int(sub.shape[0]), "sample_is_whole": whole, "sample_seconds": sample_s,
            "sample_chosen": sub_info["chosen"], "tc_blocks_none": int(full_before),
            "tc_blocks_predicted": int(round(full_before - saved_blocks)),
            "predicted_saving_per_call_s_n128": saving, "predicted_reorder_seconds": cost,
            "predicted_break_even_calls": break_even, "calls": calls}
    return (sub_perm if whole else None), sub_info, info


def choose(csr: CSR, reorder, params: dict, calls, seed=0):
    """The permutation (None for the identity: a GPU plan never needs it on the host) and info of
    a plan's ``reorder`` argument.  ``reorder=None``: no reordering unless ``calls`` (the number of
    products the user expects) is given and the pay-back prediction (``predict_payback``) says
    "auto" pays back within those calls."""
    if reorder is not None:
        perm, info = compute(csr, reorder, seed=seed, **params)
        info["why"] = info.get("why", f"reorder={reorder!r} was asked for")
        return perm, info
    t0 = time.perf_counter()
    if calls is None:
        return None, {
            "method": "none", "chosen": "none", "seconds": time.perf_counter() - t0,
            "why": "default: no reordering, so the plan is cheap; pass calls=<expected number of products> "
                   "to reorder when a prediction says it pays back, or reorder='auto'"}
    calls = int(calls)
    if calls < 0:
        raise ValueError(f"calls must be a non-negative number of products, got {calls}")
    perm, sub_info, pred = predict_payback(csr, calls, seed, params)
    pays = calls > 0 and pred["predicted_break_even_calls"] <= calls
    if pays and perm is None:
        perm, info = compute(csr, "auto", seed=seed, **params)
    elif pays:
        info = dict(sub_info)
    else:
        perm, info = None, {"method": "none", "chosen": "none"}
    info["method"] = "auto" if pays else "none"
    info["payback"] = pred
    info["why"] = (f"calls={calls}: reordering predicted to pay back in {pred['predicted_break_even_calls']:.0f} "
                   f"calls at N = 128 ({'<=' if pays else '>'} {calls})")
    info["seconds"] = time.perf_counter() - t0
    return perm, info


def reorder(A, method: str = "affinity", *, seed=0, progress=None, **params) -> np.ndarray:
    """Row permutation (new -> old, int64 NumPy array) of ``A`` by ``method``.

    ``A``: any scipy.sparse matrix (duplicates summed, values unused).  ``method``: one of
    ``"none"``, ``"rcm"``, ``"degree"``, ``"jaccard"``, ``"affinity"``, ``"auto"`` (see the module
    docstring).  ``seed`` makes tie-breaking reproducible; ``progress`` shows a tqdm bar (None:
    for inputs of 1M nonzeros or more, when tqdm is installed).  ``params`` are the method's
    (``DEFAULT_PARAMS``); for "auto", pass per-candidate dicts, e.g. ``jaccard={"tau": 0.5}``.

    >>> perm = accspmm.reorder(A, "affinity")
    >>> accspmm.BitTCF.from_csr(A, perm).stats["mean_nnz_tc"]
    """
    return compute(A, method, seed=seed, progress=progress, **params)[0]


def reordering_report(A, methods=REPORT_METHODS, *, seed=0, progress=None, as_frame=None, params=None):
    """Quality of each reordering of ``A``: one row per method with TC blocks, MeanNNZTC, blocks
    per window (mean/max/std), imbalance degree, BitTCF and CSR bytes, and reordering seconds.

    Returns a pandas DataFrame when ``as_frame`` is True, or when it is None and pandas is
    installed; a list of dicts otherwise.  ``params`` maps a method to its parameters."""
    csr = (A if isinstance(A, CSR) else as_csr(A)).canonicalized()
    params = params or {}
    rows = []
    for method in methods:
        perm, info = compute(csr, method, seed=seed, progress=progress, **params.get(method, {}))
        s = block_stats(csr, perm)
        rows.append({
            "method": method, "chosen": info["chosen"], "m": csr.shape[0], "k": csr.shape[1],
            "nnz": csr.nnz, "tc_blocks": s["tc_blocks"], "mean_nnz_tc": s["mean_nnz_tc"],
            "blocks_per_window_mean": s["blocks_per_window_mean"],
            "blocks_per_window_max": s["blocks_per_window_max"],
            "blocks_per_window_std": s["blocks_per_window_std"],
            "imbalance_degree": s["imbalance_degree"], "empty_windows": s["empty_windows"],
            "bittcf_bytes": s["bytes"], "csr_bytes": s["csr_bytes"],
            "reorder_seconds": info["seconds"],
        })
    if as_frame is None:
        try:
            import pandas  # noqa: F401
            as_frame = True
        except ImportError:
            as_frame = False
    if as_frame:
        import pandas

        return pandas.DataFrame(rows)
    return rows

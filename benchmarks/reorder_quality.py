"""Reordering quality and time for every matrix of a directory (default: the bundled one).

    python benchmarks/reorder_quality.py [DIR] [--out benchmarks/reorder_quality.md] [--reps 3]

Per matrix and method: TC blocks, MeanNNZTC (nnz / TC blocks) and the reordering time (median of
--reps runs on this machine's CPU, canonical CSR in, permutation out).  The summary counts, over the
graph matrices (MANIFEST.tsv kinds road/web/social/gnn), how often "affinity" has the highest
MeanNNZTC, its geometric-mean gain over "none" and over the best other method, and the affinity
throughput in seconds per 10M nonzeros."""

import argparse
import csv
import os
import platform
import time

import numpy as np

from accspmm import _core, _reorder, datasets
from accspmm._validate import as_csr

METHODS = list(_reorder.REPORT_METHODS)
GRAPH_KINDS = {"road", "web", "social", "gnn"}


def kinds_of(directory):
    """name -> kind from the directory's MANIFEST.tsv, if any."""
    path = os.path.join(directory, "MANIFEST.tsv") if directory else ""
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return {row["name"]: row["kind"] for row in csv.DictReader(fh, delimiter="\t")}


def measure(csr, method, reps):
    times, perm = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        perm = _reorder.reorder(csr, method, progress=False)
        times.append(time.perf_counter() - t0)
    return _reorder.block_stats(csr, perm), float(np.median(times))


def geomean(x):
    return float(np.exp(np.mean(np.log(x)))) if len(x) else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("directory", nargs="?", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    files = datasets.matrix_files(args.directory) if args.directory else [datasets.bundled_path()]
    kinds = kinds_of(args.directory)
    rows = []
    for f in files:
        name = datasets.matrix_name(f)
        csr = as_csr(datasets.load_matrix(f, np.float32)).canonicalized()
        res = {m: measure(csr, m, args.reps) for m in METHODS}
        rows.append((name, kinds.get(name, "?"), csr.nnz, res))
        print(name, " ".join(f"{m}={res[m][0]['mean_nnz_tc']:.2f}/{res[m][1]:.3f}s" for m in METHODS), flush=True)

    head = ("| matrix | kind | nnz | " + " | ".join(f"{m} blocks / MeanNNZTC / s" for m in METHODS)
            + " | best |\n|" + "---|" * (4 + len(METHODS)))
    lines = [head]
    for name, kind, nnz, res in rows:
        best = max(METHODS, key=lambda m: res[m][0]["mean_nnz_tc"])
        cells = []
        for m in METHODS:
            s, t = res[m]
            cell = f"{s['tc_blocks']} / {s['mean_nnz_tc']:.2f} / {t:.3f}"
            cells.append(f"**{cell}**" if m == best else cell)
        lines.append(f"| {name} | {kind} | {nnz} | " + " | ".join(cells) + f" | {best} |")

    graph = [r for r in rows if r[1] in GRAPH_KINDS]
    wins = [r[0] for r in graph if max(METHODS, key=lambda m: r[3][m][0]["mean_nnz_tc"]) == "affinity"]
    gain_none = geomean([r[3]["affinity"][0]["mean_nnz_tc"] / r[3]["none"][0]["mean_nnz_tc"] for r in graph])
    gain_best = geomean([r[3]["affinity"][0]["mean_nnz_tc"]
                         / max(r[3][m][0]["mean_nnz_tc"] for m in METHODS if m != "affinity") for r in graph])
    aff_nnz = sum(r[2] for r in rows)
    aff_time = sum(r[3]["affinity"][1] for r in rows)
    big = [(r[0], r[3]["affinity"][1] / r[2] * 1e7) for r in rows if r[2] >= 1_000_000]
    summary = [
        f"- Graph matrices (kinds {', '.join(sorted(GRAPH_KINDS))}): {len(graph)}; affinity has the highest "
        f"MeanNNZTC on {len(wins)} ({100 * len(wins) / max(1, len(graph)):.0f}%)"
        + (f"; not on: {', '.join(sorted({r[0] for r in graph} - set(wins)))}" if len(wins) < len(graph) else "") + ".",
        f"- Geometric-mean MeanNNZTC gain of affinity on the graph matrices: {gain_none:.3f}x over none, "
        f"{gain_best:.3f}x over the best other method of each matrix.",
        f"- Affinity time over all {len(rows)} matrices: {aff_time:.2f} s for {aff_nnz / 1e6:.1f}M nonzeros = "
        f"{aff_time / aff_nnz * 1e7:.2f} s per 10M nonzeros; on the matrices of 1M nonzeros or more: "
        + ", ".join(f"{n} {v:.2f}" for n, v in big) + " s per 10M.",
    ]
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {_core.num_threads()} OpenMP threads"
    text = (f"# Reordering quality (TC blocks, MeanNNZTC) and time\n\nMachine: {cpu}. Command: "
            f"`python benchmarks/reorder_quality.py {args.directory or ''} --reps {args.reps}`. "
            f"Cells: TC blocks / MeanNNZTC / reordering seconds (median of {args.reps}); bold = highest "
            f"MeanNNZTC. Default parameters: `{_reorder.DEFAULT_PARAMS}`.\n\n"
            + "\n".join(summary) + "\n\n" + "\n".join(lines) + "\n")
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()

"""Throughput of the affinity reordering against the number of OpenMP threads (issue 16, item 4):

    python benchmarks/affinity_scaling.py [DIR] [--threads 1 2 4 8 16] [--min-nnz 1000000]
                                          [--synthetic 10000000] [--reps 3] [--out DIR]

For every matrix of DIR with at least ``--min-nnz`` nonzeros (and the ``--synthetic`` matrices of
benchmarks/synthetic.py), each thread count runs in its own process (``OMP_NUM_THREADS`` is read
when OpenMP starts): ``accspmm.reorder.compute(A, "affinity")``, best of ``--reps``, with the C
core's phase times (graph, dendrogram, communities, ordering).  The permutation must be the same
at every thread count (checked: a hash of it).  Writes affinity_scaling.json/md into --out.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load(spec: str):
    from accspmm import datasets

    if spec.startswith("synthetic:"):
        import synthetic

        _, kind, scale = spec.split(":")
        return getattr(synthetic, kind)(float(scale))
    return datasets.load_matrix(spec, np.float32)


def worker(spec: str, reps: int):
    """One process, one thread count: prints a JSON line."""
    sys.path.insert(0, HERE)
    from accspmm import _core, _reorder
    from accspmm._validate import as_csr

    csr = as_csr(load(spec)).canonicalized()
    best = None
    for _ in range(reps):
        perm, info = _reorder.compute(csr, "affinity", progress=False)
        if best is None or info["seconds"] < best["seconds"]:
            best = info
    print(json.dumps({"threads": _core.num_threads(), "nnz": csr.nnz, "seconds": best["seconds"],
                      "phases": best["phase_seconds"], "perm_md5": hashlib.md5(perm.tobytes()).hexdigest()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2, 4, 8, 16])
    ap.add_argument("--min-nnz", type=int, default=1_000_000)
    ap.add_argument("--synthetic", nargs="*", default=["powerlaw:0.5", "road:1", "gnn:0.5"],
                    help="KIND:SCALE of benchmarks/synthetic.py")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "raw"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.reps)
    sys.path.insert(0, HERE)
    from accspmm import datasets

    specs = []
    if args.dir:
        for f in datasets.matrix_files(args.dir):
            A = datasets.load_matrix(f, np.float32)
            if A.nnz >= args.min_nnz:
                specs.append((datasets.matrix_name(f), f))
    specs += [(f"{s.replace(':', ' x')}", f"synthetic:{s}") for s in args.synthetic]
    cores = os.cpu_count() or 1
    threads = [t for t in args.threads if t <= cores] or [1]
    rows = []
    for name, spec in specs:
        row = {"matrix": name, "runs": {}}
        for t in threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t))
            out = subprocess.run([sys.executable, __file__, "--worker", spec, "--reps", str(args.reps)], env=env,
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            row["nnz"] = r["nnz"]
            row["runs"][t] = r
            print(name, t, f"{r['seconds']:.3f}s", f"{r['nnz'] / r['seconds'] / 1e6:.1f}M nnz/s", r["phases"],
                  flush=True)
        row["same_perm"] = len({r["perm_md5"] for r in row["runs"].values()}) == 1
        rows.append(row)
    res = {"cpu": platform.processor() or platform.machine(), "cores": cores, "date": datetime.date.today().isoformat(),
           "argv": sys.argv[1:], "threads": threads, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "affinity_scaling.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = [f"# Affinity reordering throughput vs OpenMP threads ({cores} cores, {res['date']})", "",
             f"Command: `python benchmarks/affinity_scaling.py {' '.join(sys.argv[1:])}`. M nnz/s = nonzeros / "
             f"seconds of `accspmm.reorder.compute(A, 'affinity')`, best of {args.reps}; phases (s) at "
             f"{threads[-1]} threads; `same perm`: the permutation is identical at every thread count.", "",
             "| matrix | nnz | " + " | ".join(f"{t} thr M nnz/s" for t in threads)
             + f" | speedup {threads[-1]}/{threads[0]} | graph | dendrogram | communities | ordering | same perm |",
             "|---|---|" + "---|" * len(threads) + "---|---|---|---|---|---|"]
    for r in rows:
        runs = r["runs"]
        last, first = runs[threads[-1]], runs[threads[0]]
        ph = last["phases"]
        lines.append(f"| {r['matrix']} | {r['nnz']} | "
                     + " | ".join(f"{r['nnz'] / runs[t]['seconds'] / 1e6:.1f}" for t in threads)
                     + f" | {first['seconds'] / last['seconds']:.2f}x | {ph['graph']:.3f} | {ph['dendrogram']:.3f} | "
                     f"{ph['communities']:.3f} | {ph['ordering']:.3f} | {'yes' if r['same_perm'] else 'NO'} |")
    with open(os.path.join(args.out, "affinity_scaling.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

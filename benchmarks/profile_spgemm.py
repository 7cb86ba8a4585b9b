"""Where the GPU SpGEMM's time goes, two ways (GPU machine):

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python benchmarks/profile_spgemm.py DATA_DIR --kernels NAME:ALGO ...   # every kernel of one call
    python benchmarks/profile_spgemm.py DATA_DIR --python NAME ...             # the host side: cProfile

--kernels: for each NAME:ALGO (a matrix of DATA_DIR, kron_poisson_bB or amg_{poisson,elasticity}_{RA,RAP};
ALGO tiles, rows or rows-sorted: no hash tables; ALGO+reuse: a plan's product with new values), one warm-up
call, then one call inside cudaProfilerStart/Stop, so ncu sees exactly the kernels of one product
(run with --profile-from-start off).  --python: 200 one-shot products of each matrix under cProfile,
the functions by their own time, and the wall time per call.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import accspmm  # noqa: E402
from accspmm import datasets  # noqa: E402


def amg_operands(name):
    """amg_poisson_RA, amg_poisson_RAP, amg_elasticity_RA, amg_elasticity_RAP: bench_spgemm's
    Galerkin products (pyamg's smoothed aggregation, first level)."""
    import pyamg

    problem, product = name.rsplit("_", 1)
    if problem == "amg_poisson":
        A = pyamg.gallery.poisson((800, 800), format="csr")
    else:
        A = sp.csr_matrix(pyamg.gallery.linear_elasticity((400, 400))[0])
    L = pyamg.smoothed_aggregation_solver(A, max_coarse=1000).levels[0]
    R, P = sp.csr_matrix(L.R, dtype=np.float32), sp.csr_matrix(L.P, dtype=np.float32)
    A = sp.csr_matrix(A, dtype=np.float32)
    return (R, A) if product == "RA" else (sp.csr_matrix(R @ A), P)


def operand(data_dir, name):
    rng = np.random.default_rng(0)
    if name.startswith("amg_"):
        return amg_operands(name)
    if name.startswith("kron_poisson_b"):
        b = int(name[len("kron_poisson_b"):])
        n = int(np.sqrt(3_000_000 / (5 * b * b)))
        T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), dtype=np.float64)
        A = sp.kron(sp.kronsum(T, T, format="csr"), np.ones((b, b)), format="csr")
    else:
        A = datasets.load_matrix(datasets.matrix_path(data_dir, name), np.float64)
    A.data = rng.standard_normal(A.nnz)
    A = sp.csr_matrix(A, dtype=np.float32)
    if A.shape[0] != A.shape[1]:
        return sp.csr_matrix(A.T), A
    return A, A


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument("--kernels", nargs="*", default=[])
    ap.add_argument("--python", nargs="*", default=[])
    args = ap.parse_args()
    import cupy
    import cupyx.scipy.sparse as csp

    for spec in args.kernels:
        name, algo = spec.split(":")
        A, B = operand(args.data_dir, name)
        Ag = csp.csr_matrix(A)
        Bg = Ag if B is A else csp.csr_matrix(B)
        algo, _, reuse = algo.partition("+")
        kw = {"algorithm": "rows", "row_hash": False} if algo == "rows-sorted" else {"algorithm": algo}
        if reuse:  # the plan made and used once, then its product with new values profiled
            p = accspmm.spgemm_plan(Ag, Bg, **kw)
            p()
            new_a = Ag.data * 2
            new_b = None if B is A else Bg.data * 2
        for profiled in (False, True):
            cupy.cuda.runtime.deviceSynchronize()
            if profiled:
                cupy.cuda.profiler.start()
            if reuse:
                p(new_a, new_b)
            else:
                with accspmm.spgemm_plan(Ag, Bg, keep_pairs=False, **kw) as p:
                    p()
            cupy.cuda.runtime.deviceSynchronize()
            if profiled:
                cupy.cuda.profiler.stop()
        if reuse:
            p.close()
        print(f"profiled {name} {algo}", flush=True)
    for name in args.python:
        A, B = operand(args.data_dir, name)
        Ag = csp.csr_matrix(A)
        Bg = Ag if B is A else csp.csr_matrix(B)
        accspmm.spgemm(Ag, Bg)
        cupy.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        for _ in range(200):
            accspmm.spgemm(Ag, Bg)
        cupy.cuda.runtime.deviceSynchronize()
        wall = (time.perf_counter() - t) / 200 * 1e3
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            accspmm.spgemm(Ag, Bg)
        prof.disable()
        print(f"== {name}: {wall:.3f} ms per call (wall, 200 calls)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()

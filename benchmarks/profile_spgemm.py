"""Where the GPU SpGEMM's time goes, two ways (GPU machine):

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python benchmarks/profile_spgemm.py DATA_DIR --kernels NAME:ALGO ...   # every kernel of one call
    python benchmarks/profile_spgemm.py DATA_DIR --python NAME ...             # the host side: cProfile

--kernels: for each NAME:ALGO (a matrix of DATA_DIR, kron_poisson_bB or amg_{poisson,elasticity}_{RA,RAP};
ALGO auto: accspmm.spgemm, tiles, rows, rows-sorted: no hash tables (a plan's first product), or cupy: CuPy's
own `A @ B`, cuSPARSE's kernels; ALGO+reuse: a plan's product with new values), one warm-up
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import accspmm  # noqa: E402
from spgemm_operands import operand  # noqa: E402


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
        if reuse and algo != "cupy":  # the plan made and used once, then its product with new values profiled
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
            elif algo == "cupy":
                Ag @ Bg
            elif algo == "auto":  # the one-shot call (its symbolic phase may sum hashed rows)
                accspmm.spgemm(Ag, Bg)
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

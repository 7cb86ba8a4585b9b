"""A fresh ``spgemm`` against a plan's reuse, whole calls on CuPy operands (A·A), for one build: run it
once per build (``PYTHONPATH=<build>``), interleaved, on one boot of the GPU machine, and compare the
JSON lines.  Fresh: median of 5 calls after one warm-up; reuse: median of 9 plan calls after the
plan's first three products (a plan keeps its dense rows' columns at its second product).  ``same``:
the reuse result equals the fresh one bit for bit; ``digest``: SHA-1 of the fresh result's indptr,
indices and data, to compare the builds' bits.

    python benchmarks/ab_spgemm_reuse.py DATA_DIR NAME [NAME ...]

NAME: a matrix of DATA_DIR (A·A with its own values, or Aᵀ·A where it is not square), kron_poisson_bB or
amg_{poisson,elasticity}_{RA,RAP} (spgemm_operands.py).
"""

import hashlib
import json
import sys
import time

import cupy as cp
import cupyx.scipy.sparse as csp
import numpy as np

import accspmm
from spgemm_operands import operand


def timed(fn, reps):
    """(median ms, last result) of `reps` synchronised calls.  bench_spgemm.wall times the same way
    but importing bench_spgemm puts this checkout first on sys.path, which would shadow the build
    under test (PYTHONPATH)."""
    ts, r = [], None
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        r = fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3, r


def main():
    out = {}
    for name in sys.argv[2:]:
        A, B = operand(sys.argv[1], name, random_values=False)
        Ag = csp.csr_matrix(A)
        Bg = Ag if B is A else csp.csr_matrix(B)
        bv = None if B is A else Bg.data
        accspmm.spgemm(Ag, Bg)
        fresh, Cf = timed(lambda: accspmm.spgemm(Ag, Bg), 5)
        with accspmm.spgemm_plan(Ag, Bg) as p:
            p()
            p(Ag.data, bv)
            p(Ag.data, bv)
            reuse, Cr = timed(lambda: p(Ag.data, bv), 9)
            same = bool(cp.array_equal(Cf.indptr, Cr.indptr) and cp.array_equal(Cf.indices, Cr.indices)
                        and cp.array_equal(Cf.data, Cr.data))
            out[name] = {"fresh": round(fresh, 3), "reuse": round(reuse, 3), "ratio": round(fresh / reuse, 3),
                         "same": same, "algorithm": p.stats["algorithm"], "large_rows": p.stats["large_rows"],
                         "digest": hashlib.sha1(b"".join(x.get().tobytes() for x in (Cf.indptr, Cf.indices,
                                                                                      Cf.data))).hexdigest()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

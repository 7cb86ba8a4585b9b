"""Does a TF32 plan pay for itself against cuSPARSE?  Predicted at plan time, measured on request.

``break-even calls = (our setup - cuSPARSE's setup) / (cuSPARSE's call - our call)`` at width n:
0 when our setup is the cheaper one, ``inf`` ("never") when cuSPARSE's call is the faster.  Both
setups include everything before the first product: ours is the plan (validation, reordering,
format build, upload) and the first call's decisions; cuSPARSE's is the CSR upload, the SpMM
descriptors, ``cusparseSpMM_bufferSize``, the buffer and ``cusparseSpMM_preprocess``.

- :func:`predict` (in every GPU TF32 plan's ``stats["vs_cusparse"]``): a cost model, no GPU work.
  ``CUSPARSE_MODEL`` holds its constants, fitted on an H100 at n = 128 (24 real matrices,
  benchmarks/results/h100_preprocess_gpu.json); on other GPUs and widths it is a rough guide.  The
  cuSPARSE call model is within about 0.7-1.5x of the measured call on those matrices, so for
  matrices where the two calls are within ~30% the predicted sign of the saving is not reliable:
  measure.
- :func:`measure` (``Plan.compare_cusparse``): times both on the device, from C (CUDA events, no
  Python in the timed loop), and records the measured break-even.  Two call times are taken for
  each side: a launch alone (events around each launch, after an idle gap), and a loop of calls
  (``CHAIN`` back-to-back launches between two events, per launch), which is what a loop of calls
  costs; ``break_even_calls`` uses the first, ``break_even_calls_loop`` the second.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._reorder import PAYBACK

#: Model constants (seconds), H100 at n = 128, one place, fitted (relative least squares) on the 24
#: real matrices of benchmarks/results/h100_preprocess_gpu.json.  cuSPARSE's call: fixed + per
#: nonzero + per row, scaled by n / 128 (the best CSR algorithm; the fit is within 0.64-1.42x of
#: every measured call); its setup: fixed + per byte of CSR uploaded from pageable memory (the
#: slope includes cusparseSpMM_preprocess; within 0.5-1.56x).  Our call: the TF32 kernel's time per
#: TC block, the reordering decision's constant (accspmm._reorder.PAYBACK["block_seconds_n128"];
#: within 0.66-2.0x of the measured call at 45bd8f6, the widest misses on small matrices whose call
#: sits near the floor), with a floor for launch and one wave; our first call adds the schedule
#: decision, the task rows and the launch: 0.21-0.36 ms on the 24 matrices at 29ecb47 (the schedule
#: built on the device), whatever their size (relative least squares: 0.255 ms + 0.29 ns a window;
#: it was 0.5 ms + 30 ns a window while the host priced the caps and uploaded the rows).
CUSPARSE_MODEL = {
    "cusparse_call_fixed_s": 8.6e-6,
    "cusparse_call_s_per_nnz": 4.24e-11,
    "cusparse_call_s_per_row": 5.27e-10,
    "cusparse_setup_fixed_s": 0.265e-3,
    "cusparse_setup_s_per_byte": 0.345e-9,
    "ours_call_floor_s": 10e-6,
    "ours_first_call_s": 0.255e-3,
    "ours_first_call_s_per_window": 0.29e-9,
    "n": 128,
}


#: launches per timed run of the loop-of-calls time (``measure``)
CHAIN = 100


def break_even(ours_setup: float, ours_call: float, their_setup: float, their_call: float) -> float:
    """Calls after which our total time (setup + calls) drops below cuSPARSE's."""
    if ours_setup <= their_setup:
        return 0.0
    if their_call <= ours_call:
        return math.inf
    return (ours_setup - their_setup) / (their_call - ours_call)


def predict(shape, nnz: int, tc_blocks: int, setup_s: float, n: int = 128) -> dict:
    """The predicted break-even of a TF32 plan against cuSPARSE at width ``n`` (module docstring):
    ``setup_s`` is the plan's own preprocessing time (measured); the first call is modelled."""
    M = CUSPARSE_MODEL
    m, _ = shape
    scale = n / M["n"]
    their_call = M["cusparse_call_fixed_s"] + scale * (M["cusparse_call_s_per_nnz"] * nnz
                                                       + M["cusparse_call_s_per_row"] * m)
    their_setup = M["cusparse_setup_fixed_s"] + M["cusparse_setup_s_per_byte"] * (8 * nnz + 4 * (m + 1))
    ours_call = max(M["ours_call_floor_s"], scale * PAYBACK["block_seconds_n128"] * tc_blocks)
    ours_setup = setup_s + M["ours_first_call_s"] + M["ours_first_call_s_per_window"] * -(-m // 8)
    be = break_even(ours_setup, ours_call, their_setup, their_call)
    return {"n": n, "predicted": True, "ours_setup_s": ours_setup, "ours_call_s": ours_call,
            "cusparse_setup_s": their_setup, "cusparse_call_s": their_call,
            "saving_per_call_s": their_call - ours_call, "break_even_calls": be,
            "model": "accspmm._payback.CUSPARSE_MODEL (H100, n = 128 fit)"}


def measure(plan, n: int = 128, reps: int = 20, algs=("default", "alg2", "alg3"), seed: int = 0) -> dict:
    """Times ``plan`` (a GPU TF32 plan) and cuSPARSE on this device at width ``n`` and returns the
    measured break-even (module docstring).  Ours: the plan's recorded preprocessing, plus its
    first call for this width if it has not been made (timed here, synchronised), and the kernel's
    median over ``reps`` launches.  cuSPARSE: for each CSR algorithm of ``algs``, a fresh fp32 plan
    of the same matrix (upload, descriptors, buffer, preprocess: wall clock) and its call's median
    over ``reps`` launches, timed from C; the algorithm with the fastest call is the one compared.
    Synchronises; allocates B and C of k x n and m x n floats for the timing."""
    from . import _cuda
    from ._device import DeviceArray
    from ._plan import Plan

    m, k = plan.shape
    dev = plan._device_id
    rng = np.random.default_rng(seed)
    B = DeviceArray.from_host(rng.standard_normal((k, n), dtype=np.float32), dev)
    C = DeviceArray((m, n), np.float32, dev)
    try:
        first = 0.0
        if n not in plan._tf32._ready:
            _cuda.synchronize(None)
            t0 = time.perf_counter()
            plan._launch(B.ptr, C.ptr, n, None)
            _cuda.synchronize(None)
            first = time.perf_counter() - t0
        a, v = plan._tf32.args(B.ptr, C.ptr, n)
        _cuda.time_tf32(a, v, 2, None, 0, None)
        ours_call = float(np.median(_cuda.time_tf32(a, v, reps, None, 0, None))) / 1e3
        loops = max(3, reps // 4)
        ours_loop = float(np.median(_cuda.time_tf32(a, v, loops, None, 0, None, CHAIN))) / 1e3
        ours_setup = plan.stats["seconds"]["total"] + max(first - ours_call, 0.0)
        theirs = {}
        src = plan._source
        for alg in algs:
            _cuda.synchronize(None)
            t0 = time.perf_counter()
            q = Plan(src, device="gpu", precision="fp32", cusparse_alg=alg)
            q._launch(B.ptr, C.ptr, n, None)  # creates the cuSPARSE plan: buffer and preprocess
            _cuda.synchronize(None)
            setup = time.perf_counter() - t0
            try:
                call = float(np.median(_cuda.time_cusparse(q._cusparse[n], B.ptr, C.ptr, reps, None, 0, None))) / 1e3
                loop = float(np.median(_cuda.time_cusparse(q._cusparse[n], B.ptr, C.ptr, loops, None, 0, None,
                                                           CHAIN))) / 1e3
            finally:
                q.close()
            theirs[alg] = (max(setup - call, 0.0), call, loop)
        alg = min(theirs, key=lambda x: theirs[x][1])
        their_setup, their_call, _ = theirs[alg]
        alg_loop = min(theirs, key=lambda x: theirs[x][2])  # the fastest in a loop may be another algorithm
        their_setup_loop, _, their_loop = theirs[alg_loop]
    finally:
        B.free()
        C.free()
    be = break_even(ours_setup, ours_call, their_setup, their_call)
    return {"n": n, "predicted": False, "ours_setup_s": ours_setup, "ours_call_s": ours_call,
            "cusparse_setup_s": their_setup, "cusparse_call_s": their_call, "cusparse_alg": alg,
            "cusparse_by_alg": {a: {"setup_s": s, "call_s": c, "loop_call_s": lc} for a, (s, c, lc) in theirs.items()},
            "saving_per_call_s": their_call - ours_call, "break_even_calls": be,
            "ours_loop_call_s": ours_loop, "cusparse_loop_call_s": their_loop, "cusparse_loop_alg": alg_loop,
            "cusparse_loop_setup_s": their_setup_loop,
            "break_even_calls_loop": break_even(ours_setup, ours_loop, their_setup_loop, their_loop)}

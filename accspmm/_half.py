"""Half precision: ``precision="fp16"`` and ``"bf16"`` (FP32 accumulation).

Semantics (README "Half precision"; GUIDE section 3):

- A (float32 or float64 values) is rounded to the format once, at plan time, to nearest even, in
  one rounding (float64 is never rounded to float32 first).  A value outside the format's range
  raises ValueError naming it: a finite value that would round to inf (FP16: |x| >= 65520; BF16:
  |x| >= (2 - 2^-8) 2^127), or a nonzero one that would round to zero (FP16: |x| <= 2^-25; BF16:
  |x| <= 2^-134).  Subnormal results are kept, with their reduced precision.
- B: a half array of the plan's format (NumPy float16, ``ml_dtypes.bfloat16``, PyTorch
  float16/bfloat16 on the CPU or a GPU, CuPy float16), or float32 (or integers), which the call
  rounds to the format the same way (beyond the range: inf, as PyTorch's ``.to()``).  float64 B
  is refused: say which precision you want.
- Products are exact in FP32 (a half times a half fits in 24 bits) and are summed in FP32.
- C has B's dtype (PyTorch's convention): a half B gives a half C (the FP32 sums rounded to
  nearest even once), a float32 B a float32 C.  ``out=`` may be float32 for a half B, to keep the
  accumulator's precision.
- Error bound per element: ``|C - C_ref| <= (3 u + k_i 2^-24) (|A| @ |B|)`` plus the output's
  rounding (u: 2^-11 FP16, 2^-8 BF16); integer data with exact half representations (|x| <= 2048
  for FP16, <= 256 for BF16, sums below 2^24) is bit-exact against scipy.
- NaN and inf in B follow scipy: they reach exactly the entries where a stored entry of A meets them.

Kernels: on the GPU, two formats, picked per matrix by a byte model (``stats["format_model"]``):
BSR16 blocks (16 x 16, SMaT's block CSR: csrc/acc_bsr16_build.c) on ``mma.m16n8k16``
(cuda/half_spmm.cu; a warp per block row, or per pair of block rows where the pairs share their
column blocks and n >= PAIR_MIN_N, or PAIR_MIN_N_SLICED with enough pairs) or, on Hopper, on
``wgmma`` (cuda/half_wgmma.cu: a warpgroup per quad of block rows where the quads share their column
blocks and are dense enough, a hub quad split in parts: QUAD_MIN_N, quad_schedule; ``stats["schedule"]``,
``tuning={"kernel": "rows" | "pairs" | "quads"}`` forces one), or
BitTCF's 8 x 8 blocks on the TF32 kernel's pipeline with half operands
(cuda/tf32_spmm.cu, ``mma.m16n8k8``; accspmm._tf32.TF32Runner: the same schedule, cost model,
variant timing and C call as TF32 plans, and for n <= 4 the same choice of a CUDA-core kernel on
BitTCF or on A's CSR, ``accspmm._tf32.narrow_csr``); on the CPU, the reference: the C core's FP32 CSR product of
the rounded operands (exact products, FP32 sums in ascending column order), then the output
rounding.  The GPU sums in another order, so on non-integer data the two agree within the bound,
not bit for bit.
"""

from __future__ import annotations

import functools
import heapq
import time
import weakref

import numpy as np
import scipy.sparse as sp

from . import _core, _reorder
from ._device import DeviceArray, array_library, register_interop, require_cuda, stream_handle
from ._format import check_perm
from ._tf32 import AUTOTUNE_MIN_CALLS
from ._validate import CSR, as_csr, is_gpu_array

PRECISIONS = ("fp16", "bf16")
#: the tuning keys of BitTCF plans' CUDA-core kernels, handed to the TF32 runner as TF32 plans take them
_CSR_TUNING = ("narrow", "csr_lanes", "wide", "csr_part", "csr_lane_cols")
_FMT = {"fp16": 0, "bf16": 1}
#: (smallest subnormal, largest finite) magnitude of each format
RANGE = {"fp16": (2.0**-24, 65504.0), "bf16": (2.0**-133, (2 - 2.0**-7) * 2.0**127)}
#: unit roundoff of each format (GUIDE section 3)
UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8}
#: A block row of more than cap = max(CAP_MEDIAN x the median blocks of a nonempty block row,
#: min(CAP_MIN, max(CAP_FLOOR, 2 x the blocks per resident warp))) blocks is cut into parts of at
#: most cap (one warp each), summed by a second kernel in part order: a hub row then no longer sets
#: the kernel's tail, and rows of a uniform matrix are never cut.  (The median, not the mean: one
#: hub would raise the mean.)  The blocks per resident warp (all blocks over REF_SMS x
#: RESIDENT_WARPS warps) lower the cap below CAP_MIN on matrices smaller than a few waves, where the
#: longest row's chain of blocks is the kernel's time (irregular 32x32 block rows at 99%, 8192²:
#: rows of up to 128 blocks ran 2x longer than the BitTCF kernel's split schedule).
CAP_MIN = 128
CAP_FLOOR = 16
CAP_MEDIAN = 4
#: the BSR16 kernel's warps per SM that the schedule assumes: 12 (168 registers, 3 thread blocks of 4
#: warps) when it was measured; the kernel now holds 128 registers (16 warps per SM, 27a2a1c), and the
#: constant is kept so that schedules, hence the split rows' bits, stay as measured and tested.
RESIDENT_WARPS = 12
TASK_WORDS = 5
#: packs of small block rows (schedule): about PACK_WAVES waves of 8 warps per SM of REF_SMS SMs
REF_SMS = 132
PACK_WAVES = 2
PACK_MIN, PACK_MAX, PACK_WINDOWS = 1, 32, 256
#: Bytes a warp moves per block for 64 columns of B (B rows at 2 bytes, plus the block's values and,
#: for BitTCF, its 48-byte record): the format model of GPU half plans picks the layout that moves
#: fewer bytes over the whole matrix (both counts are O(nnz) passes, no format is built to decide).
LAYOUT_BYTES = {"bsr16": 16 * 128 + 512, "bittcf": 8 * 128 + 128 + 48}
#: BSR16's kernel walks pairs of block rows (acc_half_args.pairs, cuda/half_spmm.h) where the union
#: of each pair's column blocks has at most PAIR_SHARE_MAX entries per block: a warp then loads each
#: 16-row tile of B once for both rows (a structure of 32 x 32 blocks: 0.5 entries per block), at
#: the price of multiplying a zero block where only one row of the pair has one (bcsstk16, 0.62
#: entries per block: 0.85x).
PAIR_SHARE_MAX = 0.55
#: ... or at most PAIR_SHARE_MAX_BLOCKS at widths a multiple of 8, which run the pairs on thread blocks of
#: 128 columns (pair_cta_kernel): its 72 registers a lane hide the zero blocks' extra MMAs.  H100, FP16,
#: kernel us, rows -> pairs on thread blocks at n = 256 / 512 (benchmarks/NOTES.md, 2026-11-27 13:18):
#: band matrices 8192^2 of bandwidth 32 (0.67 entries per block) 9.9 -> 8.3 / 14.5 -> 12.0, bandwidth 64
#: (0.60) 10.4 -> 9.3 / 16.2 -> 14.0; bcsstk16 (0.62) 12.9 -> 12.8 / 20.2 -> 17.4; BSR16 forced on
#: PROTEINS_full (0.64) 1.09x / 1.16x, bcsstk13 (0.63) 1.07x / 1.04x, bayer10 (0.64) 0.96x / 1.04x,
#: minnesota (0.67) 1.06x / 0.99x, blogcatalog (0.67) 1.10x / 0.93x; and past it, cnr-2000 and rajat01
#: (0.73) 0.97x / 0.86x at n = 512.  The warp kernel, which other widths run, lost there (bcsstk16 0.80x at
#: n = 256).
PAIR_SHARE_MAX_BLOCKS = 0.68
#: ... and there only from this width up: the pair kernel holds 64 accumulators a lane (168 registers:
#: 12 warps per SM against the row kernel's 16), which narrow products pay for.  H100, FP16, kernel us,
#: rows -> pairs (results/h100_half_stackframe.txt, new build): uniform 32 x 32 blocks of 8192², 70%
#: sparse: 65.1 -> 69.4 at n = 128, 101.4 -> 86.8 at 256, 196.2 -> 184.3 at 512; 90%: 26.2 -> 27.8,
#: 39.3 -> 35.6, 71.4 -> 71.3; 95%: 16.8 -> 17.7, 23.3 -> 22.5, 41.6 -> 46.8; 99%: 9.3 -> 9.8, 12.3 ->
#: 12.4, 19.1 -> 21.3; irregular 32 x 32 block rows, 90%: 30.1 -> 35.1, 39.5 -> 38.8, 60.2 -> 57.9.
#: A fuller run of the same build (results/h100_half_pairs.txt, pairs/rows): n = 128, 0.83-0.95x on every
#: matrix; n = 256, 1.01-1.20x on every one; n = 512, mixed: 1.17x (50%), 1.06x (70%), 1.00x (90%),
#: 0.89x (95%) and 0.91x (99%) on uniform 8192², 1.07x and 0.97x on irregular rows (90%, 99%), 1.02x on
#: uniform 32768² at 99%; geometric mean 1.01x.  The losses at n = 512 are on 8192², where the pair
#: kernel's 2,048 warp-tasks fill 1.3 waves of its 12 warps per SM (a likely cause, not profiled); no
#: rule fitted to these eight cases was kept, so pairs run from n = 256 up.  (Either kernel is
#: deterministic; a width's kernel is fixed, as the TF32 schedule is per width.)
PAIR_MIN_N = 256
#: ... or from PAIR_MIN_N_SLICED where the pair schedule has at least PAIR_SLICED_MIN_TASKS tasks (thread blocks
#: of one 128-column slice: 1.5 an SM), at the widths below PAIR_MIN_N that fill the thread-block kernel's
#: last slice more than half (fills_slices: 72-128 and 200-248, not 136-192, where the row kernel's 64-column
#: slices waste less).  H100, FP16, kernel us, rows / pairs (benchmarks/NOTES.md, 2026-11-27 14:43:
#: `half_pair_widths.py`, with the thread-block kernel's warps beyond n idle and its split parts written
#: without the slow path): 256 tasks or more, n = 72-128: uniform 32 x 32 blocks of 8192^2 and 32768^2 at
#: 98-99.5% 1.09-1.38x, irregular 32 x 32 block rows (split pairs) at 90-99.5% 1.00-1.18x, bands 64-256 of
#: 8192^2 1.05-1.15x, landmark 1.22-1.42x, PROTEINS_full 1.04-1.21x; n = 200: 1.02-1.49x; fewer tasks:
#: bcsstk16 (153) 0.95-1.05x and 0.97-0.98x, ogbl-ddi (134) 0.99-1.04x, bcsstk13 (63) 0.86-0.89x.  Left to rows:
#: n = 64 (0.75-1.05x) and 136-192 (0.87-1.10x).
PAIR_MIN_N_SLICED = 72
PAIR_SLICED_MIN_TASKS = 3 * REF_SMS // 2
PAIR_CTA_COLS = 128  # columns of a thread block of the pair kernel (ACC_HALF_CTA_COLS, cuda/half_spmm.h)
#: BSR16 on quads of block rows (64 rows) with Hopper's warpgroup MMA (cuda/half_wgmma.cu; a GPU of
#: compute capability 9.0): a thread block per quad and column tile multiplies the union of the four rows'
#: column blocks, B's tiles by TMA, so each tile feeds 64 rows.  It runs where (1) the quads share their
#: column blocks (at most QUAD_SHARE_MAX union entries per block: 32 x 32 blocks give 0.38-0.5) and (2) a
#: nonempty quad has at least QUAD_MIN_ENTRIES entries on average (its pipeline needs a few stages to
#: fill), for n >= QUAD_MIN_N (a width not a multiple of 8, or of 64 where that pays, on copies padded to a
#: multiple of 64: cuda/half_spmm.cu, pad_pays); a hub quad is split (quad_schedule).  H100, kernel us,
#: best warp kernel -> quads
#: (benchmarks/results/h100_half_quads.txt): uniform 32 x 32 blocks, 8192^2, n = 512: 50% 281 -> 146,
#: 70% 182 -> 103, 90% 68 -> 47, 95% 36.5 -> 31; n = 128: 50% 99 -> 62, 70% 62 -> 45, 90% 25 -> 19, 95%
#: 15.6 -> 13.2; 99% (10 entries a quad) 8.1 -> 9.3 and 32768^2 at 99% (41 entries) 31.9 -> 41.5, so
#: QUAD_MIN_ENTRIES.  Narrow products gain too (split quads, results/h100_half_split_quads.txt):
#: irregular 32 x 32 block rows at 90% 32 -> 21 us at n = 8-64, ogbl-ddi (BSR16) 82 -> 35-39, uniform
#: 90% 20.7 -> 22.2 (n = 8), 20.0 -> 18.7 (n = 64); and on padded copies at the other widths, against
#: the row kernel's element path: uniform 90% 46 -> 25 us (n = 1-7), 59 -> 32 (n = 100), ogbl-ddi 211 -> 44
#: (n = 1), 266 -> 51 (n = 100), irregular 50% 267 -> 62 (n = 1); hence QUAD_MIN_N = 1.
QUAD_MIN_N = 1
QUAD_SHARE_MAX = 0.55
QUAD_MIN_ENTRIES = 48  # 41 entries (uniform 32768^2, 99%): 0.77x at n = 128; 50 (8192^2, 95%): 1.18x
#: ... or, for the kernel choice of a BSR16 plan (not the format model), quads with at most QUAD_PAIR_RATIO
#: times the pairs' entries (B's tiles read that much less often than on pairs) and at least
#: QUAD_MIN_ENTRIES_SHARED entries a nonempty quad: band matrices, whose neighbouring rows share their
#: column blocks.  H100, FP16, kernel us at n = 128 / 256 / 512, the best of rows and pairs -> quads
#: (benchmarks/NOTES.md, 2026-11-27 13:18): bandwidth 256 of 8192^2 (0.56 times the pairs' entries, 21
#: entries a quad) 11.7 -> 9.9 / 15.7 -> 13.2 / 27.0 -> 20.7; bandwidth 512 (0.53, 37) 17.3 -> 10.8 / 24.4 ->
#: 15.4 / 44.7 -> 25.2; bandwidth 128 (0.60, 13 entries) level (8.9 -> 9.0 / 11.3 -> 11.8 / 18.1 -> 18.0).
#: 32 x 32 blocks put about 1.0 times the pairs' entries in quads, so QUAD_MIN_ENTRIES stays their rule.
QUAD_PAIR_RATIO = 0.6
QUAD_MIN_ENTRIES_SHARED = 16
#: ... or, for the kernel choice only and at widths up to QUAD_CRITICAL_MAX_N, where the quads' predicted
#: makespan (quad_schedule: entries of one SM, its tasks' own costs included) is at most QUAD_CRITICAL_RATIO times
#: the row kernel's longest task (schedule: entries): the row and pair kernels' thread blocks then wait on a long
#: task (a small matrix, long or irregular block rows), which the quads' pipeline streams; above 256 columns a
#: quad's thread block takes 512 of them alone, and pairs of short quads run more columns at once.  H100, FP16,
#: kernel us, every kernel forced at n = 32 / 128 / 256 / 512, the faster of rows and pairs -> quads
#: (benchmarks/NOTES.md, 2026-11-27 16:41): irregular 32 x 32 block rows of 8192^2 at 95% (ratio 2.7) 1.22 /
#: 1.35 / 1.25 / 1.18x, bcsstk16 (2.1) 1.22 / 1.22 / 1.09 / 1.00x, rajat01 forced to BSR16 (2.1) 1.34 / 1.36 /
#: 1.44 / 1.18x, random 32 x 32 blocks of 8000 x 4000 at 2% (2.3) 1.13 / 1.13 / 0.94 / 0.81x, random 16 x 16
#: blocks of 4000^2 at 2% (2.7) 1.06 / 0.95 / 0.93 / 0.73x; above the ratio, uniform 99% (3.7) 1.04 / 0.84 / 0.77 /
#: 0.72x, band 64 (3.6), PROTEINS_full (5.7), landmark (14) and G3_circuit (197) 0.35-0.9x.  Over 48 matrices
#: (15 synthetic block and band matrices, the 24 real ones forced to BSR16, 9 random block matrices like the
#: tests') the rule against the one before: 1.121 / 1.130 / 1.097 / 1.00x in geometric mean, worst 0.91x
#: (pubmed, n = 32); the per-case best kernel would give 1.127x over all (`benchmarks/fit_quad_rule.py`,
#: results/h100_quad_critical.json).  The ratio is set between pubmed's 2.99 (gains 1.31-1.34x at n = 128-256)
#: and 3.15 (random 16 x 16 blocks at 5%: 0.83x at n = 32), the one gap of the data near the best.
QUAD_CRITICAL_RATIO = 3.1
QUAD_CRITICAL_MAX_N = 256
#: bytes an SM moves per quad entry and 64 columns: B's 16 rows, and the entry's packed blocks (2,048 bytes
#: per thread block of 128 columns at n <= 128), for the format model (_quad_model)
QUAD_ENTRY_BYTES = 16 * 128 + 1024
#: the quads' schedule (quad_schedule), in entries of one SM: a thread block's own cost (its start, pipeline
#: fill and write-back), a split part's FP32 write and the reduction's, the reduction's launch; parts of
#: at least QUAD_PART_MIN entries, at most QUAD_MAX_PARTS a quad
QUAD_TASK_COST = 10
QUAD_PART_COST = 10
QUAD_REDUCE_COST = 12
QUAD_PART_MIN = 32
QUAD_MAX_PARTS = 16
BSR16_KERNELS = ("auto", "pairs", "rows", "quads")
_LAYOUT_FLAG = {"rows": 0, "pairs": 1, "quads": 2}  # acc_half_args.pairs (ACC_HALF_QUADS = 2)
_WINDOW_ROWS = {"rows": 16, "pairs": 32, "quads": 64}  # ACC_HALF_WINDOW_ROWS: a split workspace slot's rows


def _bfloat16():
    """numpy's bfloat16 dtype (``ml_dtypes``, optional), or None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def host_dtype(precision: str):
    """NumPy dtype of the format (None for bf16 without ml_dtypes)."""
    return np.dtype(np.float16) if precision == "fp16" else _bfloat16()


def round_bits(values: np.ndarray, precision: str) -> tuple:
    """(uint16 bits of values rounded to the format, index of the first out-of-range value or -1)."""
    v = np.ascontiguousarray(values).reshape(-1)
    if v.dtype not in (np.float32, np.float64):
        v = v.astype(np.float32)
    return _core.half_round(v, _FMT[precision])


def widen(bits: np.ndarray, precision: str) -> np.ndarray:
    """float32 values of uint16 bits of the format (exact)."""
    b = np.ascontiguousarray(bits).reshape(-1)
    return _core.half_widen(b.view(np.uint16), _FMT[precision]).reshape(np.shape(bits))


def range_error(value, precision: str, where: str) -> ValueError:
    lo, hi = RANGE[precision]
    fate = "inf" if abs(float(value)) > 1 else "zero"
    return ValueError(
        f"{where} = {float(value)!r} is outside the {precision} range (nonzero magnitudes {lo:.4g} to {hi:.6g}): "
        f"it would round to {fate}.  Scale A, or use precision='tf32' (GPU) / 'fp32'")


def round_csr(csr: CSR, precision: str) -> np.ndarray:
    """A's values rounded to the format (uint16 bits), or ValueError naming the first out of range."""
    bits, bad = round_bits(csr.data[: csr.nnz], precision)
    if bad >= 0:
        row = int(np.searchsorted(csr.indptr, bad, side="right")) - 1
        raise range_error(csr.data[bad], precision, f"A[{row}, {int(csr.indices[bad])}]")
    return bits


def _b_kind(dtype_name: str, precision: str) -> str:
    """'half' (B is already in the plan's format) or 'float' (rounded by the call); TypeError otherwise."""
    if dtype_name == {"fp16": "float16", "bf16": "bfloat16"}[precision]:
        return "half"
    if dtype_name in ("float16", "bfloat16"):
        raise TypeError(f"B is {dtype_name} but this plan computes in {precision}; plan with "
                        f"precision={'fp16' if dtype_name == 'float16' else 'bf16'!r} or cast B")
    if dtype_name == "float64":
        raise TypeError(f"B is float64 but this plan computes in {precision} (half inputs, FP32 sums); "
                        "pass B as float32 or in the half format, or plan with precision='fp64'")
    if dtype_name in ("float32", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"):
        return "float"
    raise TypeError(f"B must hold real numbers, got dtype {dtype_name}")


def group_index(brow_offsets: np.ndarray, block_cols: np.ndarray, k: int, size: int = 2) -> tuple:
    """(offsets int64 [ceil(R / size) + 1], cols int32 [U], blocks int64 [U, size]): for each group of
    ``size`` consecutive block rows (size G, G + 1, ..), the ascending union of their column blocks and,
    per entry, the BSR16 block of each row there (-1: none).  A row's column blocks ascend, so the stable
    sort merges ``size`` runs per group: O(blocks log blocks) at worst, linear on sorted runs."""
    bo = np.asarray(brow_offsets, np.int64)
    R = bo.shape[0] - 1
    G = -(-R // size)
    ncb = max(-(-k // 16), 1)
    rows = np.repeat(np.arange(R, dtype=np.int64), np.diff(bo))
    key = (rows // size) * ncb + np.asarray(block_cols, np.int64)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    new = np.ones(skey.size, bool)
    new[1:] = skey[1:] != skey[:-1]
    entry = np.cumsum(new) - 1
    ukey = skey[new]
    blocks = np.full((ukey.size, size), -1, np.int64)
    blocks[entry, rows[order] % size] = order
    offsets = np.searchsorted(ukey, np.arange(G + 1, dtype=np.int64) * ncb).astype(np.int64)
    return offsets, (ukey % ncb).astype(np.int32), blocks


def pack_group_values(blocks: np.ndarray, block_values: np.ndarray) -> np.ndarray:
    """uint16 [U, size, 256]: entry u's blocks (``group_index``'s blocks[u]) side by side in fragment
    order, zeros where a row has none: the quad kernel's ``group_values``."""
    blocks = np.asarray(blocks, np.int64)
    out = np.zeros((*blocks.shape, 256), np.uint16)
    there = blocks >= 0
    out[there] = np.asarray(block_values, np.uint16).reshape(-1, 256)[blocks[there]]
    return out


def pair_index(brow_offsets: np.ndarray, block_cols: np.ndarray, k: int) -> tuple:
    """``group_index`` of pairs of block rows (2P, 2P + 1): the pair kernel's arrays."""
    return group_index(brow_offsets, block_cols, k, 2)


def makespan(costs: np.ndarray, machines: int) -> float:
    """The finish time of greedy list scheduling of ``costs`` (in launch order) on ``machines`` identical
    machines, as a GPU hands thread blocks of one size to its SMs in order: O(T log machines)."""
    costs = np.asarray(costs, np.float64)
    if costs.size <= machines:
        return float(costs.max()) if costs.size else 0.0
    heap = sorted(costs[:machines].tolist())
    for c in costs[machines:].tolist():
        heapq.heapreplace(heap, heap[0] + c)
    return max(heap)


def quad_schedule(offsets: np.ndarray) -> tuple:
    """(tasks int64 [T, 5], splits int64 [S, 3], slots, cap, predicted) of the quad kernel: its thread
    blocks, one an SM (cuda/half_wgmma.cu), in launch order.

    Quad Q's entries offsets[Q] .. offsets[Q + 1] - 1 run in one task, or where a quad has more than
    ``cap`` entries, in parts of at most cap entries (equal ranges; part q writes workspace slot first +
    q, and the reduction sums the parts in slot order, as the row kernel's split rows).  The cap is the
    one of ceil(top / p), p = 1 .. QUAD_MAX_PARTS (top: the largest quad), whose schedule has the
    smallest predicted time, in entries of one SM: the makespan of its tasks (entries + QUAD_TASK_COST,
    + QUAD_PART_COST for a part's FP32 write) over REF_SMS SMs, biggest first, plus the reduction
    (QUAD_REDUCE_COST, and QUAD_PART_COST an SM per REF_SMS parts).  A hub quad is then no longer the
    kernel's tail, and a matrix of fewer quads than SMs (ogbl-ddi: 67) spreads over the GPU.  Tasks run
    biggest first; each is (Q, Q + 1, u0, u1, slot)."""
    go = np.asarray(offsets, np.int64)
    c = np.diff(go)
    top = int(c.max()) if c.size else 0
    caps = sorted({-(-top // p) for p in range(1, QUAD_MAX_PARTS + 1)} - {0}, reverse=True) or [1]
    best = None
    for cap in [x for x in caps if x >= QUAD_PART_MIN] or caps[:1]:
        parts = np.maximum(1, -(-c // cap))
        quad = np.repeat(np.arange(c.size, dtype=np.int64), parts)
        first = np.repeat(np.cumsum(parts) - parts, parts)
        part = np.arange(quad.size, dtype=np.int64) - first
        P = parts[quad]
        lo, hi = go[quad] + c[quad] * part // P, go[quad] + c[quad] * (part + 1) // P
        cost = hi - lo + QUAD_TASK_COST + np.where(P > 1, QUAD_PART_COST, 0)
        order = np.argsort(-cost, kind="stable")
        nparts = int(parts[parts > 1].sum())
        pred = makespan(cost[order], REF_SMS)
        if nparts:
            pred += QUAD_REDUCE_COST + QUAD_PART_COST * nparts / REF_SMS
        if best is None or pred < best[0]:
            best = (pred, cap, quad[order], lo[order], hi[order], parts, part[order], P[order])
    pred, cap, quad, lo, hi, parts, part, P = best
    split = np.flatnonzero(parts > 1)
    base = np.zeros(parts.size, np.int64)
    base[split] = np.cumsum(parts[split]) - parts[split]  # consecutive slots per split quad
    slot = np.where(P > 1, base[quad] + part, -1)
    tasks = np.stack([quad, quad + 1, lo, hi, slot], axis=1).astype(np.int64)
    splits = np.stack([split, base[split], parts[split]], axis=1).astype(np.int64).reshape(-1, 3)
    return tasks, splits, int(parts[split].sum()), cap, pred


def _device_bsr16_count(cu, fmt, dev: dict, device: int) -> np.ndarray:
    """BSR16's block row offsets (as ``_core.bsr16_count``) from a BitTCF built on the device: each 16-row
    block row's column blocks are the union of its two windows' columns >> 4, counted on the device from the
    format's packed metadata (cuda/bittcf_build.cu); ceil(m / 16) counts come back, no CSR pass on the host."""
    R = (fmt.num_windows + 1) // 2
    counts = DeviceArray((max(R, 1),), np.int64, device)
    try:
        cu.bittcf_bsr16_count(dev["block_meta"].ptr, dev["window_offsets"].ptr, fmt.num_windows, fmt.num_blocks,
                              counts.ptr, None)
        out = np.zeros(R + 1, np.int64)
        if R:
            np.cumsum(counts.to_host()[:R], out=out[1:])
        return out
    finally:
        counts.free()


def _quads_may_win(bo16: np.ndarray, tc_blocks: int) -> bool:
    """Whether BSR16's quads can pass the quad rule and move fewer bytes than BitTCF's tc_blocks, from
    BSR16's block counts alone, so that the format model builds BSR16 and its quads only then.  A quad's
    entries are at most its blocks and at least its longest block row's; so ``_quad_model``'s bytes an SM
    are at least QUAD_ENTRY_BYTES times the larger of those entries over REF_SMS SMs and the largest
    quad's over QUAD_MAX_PARTS parts (quad_schedule cuts a quad in at most that many), which a single hub
    block row (a dense row of A) already puts above BitTCF's."""
    nb = np.diff(np.asarray(bo16, np.int64))
    if not nb.size:
        return False
    rows = np.pad(nb, (0, -nb.size % 4)).reshape(-1, 4)
    per, least = rows.sum(axis=1), rows.max(axis=1)
    nonempty = per > 0
    if not nonempty.any() or per[nonempty].mean() < QUAD_MIN_ENTRIES:
        return False
    if QUAD_ENTRY_BYTES * per.sum() / 4 >= LAYOUT_BYTES["bittcf"] * tc_blocks:
        return False
    per_sm = max(least.sum() / REF_SMS, least.max() / QUAD_MAX_PARTS)
    return bool(QUAD_ENTRY_BYTES * per_sm < LAYOUT_BYTES["bittcf"] * tc_blocks / REF_SMS)


def fills_slices(n: int) -> bool:
    """Whether width n runs the pairs' thread blocks (a multiple of 8) with its last PAIR_CTA_COLS-column slice
    more than half full (acc_half_fills_slices, cuda/half_spmm.h, which the C call applies)."""
    return n % 8 == 0 and (n % PAIR_CTA_COLS == 0 or n % PAIR_CTA_COLS > PAIR_CTA_COLS // 2)


def _quad_rule(quads: tuple, bsr16_blocks: int, pair_entries: int | None = None) -> tuple:
    """(union entries per block, mean entries of a nonempty quad, whether the quads run by default: at
    most QUAD_SHARE_MAX and at least QUAD_MIN_ENTRIES; or, given the pairs' entries, at most
    QUAD_PAIR_RATIO times those and at least QUAD_MIN_ENTRIES_SHARED) of ``group_index``'s quads."""
    per = np.diff(quads[0])
    per = per[per > 0]
    share, mean = quads[1].size / max(bsr16_blocks, 1), float(per.mean()) if per.size else 0.0
    shared = pair_entries is not None and quads[1].size <= QUAD_PAIR_RATIO * pair_entries
    return share, mean, (share <= QUAD_SHARE_MAX and mean >= QUAD_MIN_ENTRIES
                         or shared and mean >= QUAD_MIN_ENTRIES_SHARED)


def _quad_model(quads: tuple, schedule: tuple, bsr16_blocks: int, tc_blocks: int) -> dict:
    """The format model's comparison of BSR16 on quads (and their ``quad_schedule``) with BitTCF: bytes an
    SM per 64 columns, the quads' from their schedule's predicted makespan (a hub quad or too few quads
    leave SMs idle), BitTCF's from its blocks over REF_SMS SMs (its schedule balances them)."""
    share, mean, rule = _quad_rule(quads, bsr16_blocks)
    pred = schedule[4]
    q_bytes, t_bytes = QUAD_ENTRY_BYTES * pred, LAYOUT_BYTES["bittcf"] * tc_blocks / REF_SMS
    return {"entries_per_block": share, "mean_entries": mean, "predicted_entries_per_sm": pred,
            "bytes_per_sm": {"quads": q_bytes, "bittcf": t_bytes}, "wins": bool(rule and q_bytes < t_bytes)}


def schedule(brow_offsets: np.ndarray) -> tuple:
    """(tasks int64 [T, 5], splits int64 [S, 3], slots, cap, pack) of the half kernels (cuda/half_spmm.h).

    A block row (window) of more than ``cap`` blocks (CAP_MIN, CAP_MEDIAN) is split into parts of
    at most cap blocks, equal ranges, part q writing workspace slot ``first + q``.  The other block
    rows go in packs of consecutive rows, cut where the blocks before a row reach a multiple of
    ``pack`` (PACK_WAVES: about that many waves of warps over the reference GPU, between PACK_MIN
    and PACK_MAX blocks) or after PACK_WINDOWS rows: a warp then streams many small rows without
    draining its pipeline, and a small matrix still spreads over the GPU."""
    bo = np.asarray(brow_offsets, np.int64)
    nb = np.diff(bo)
    R = nb.shape[0]
    nonempty = nb[nb > 0]
    total = int(bo[-1]) if R else 0
    per_warp = -(-total // (REF_SMS * RESIDENT_WARPS))
    cap = max(CAP_MEDIAN * int(np.ceil(np.median(nonempty))) if nonempty.size else 0,
              min(CAP_MIN, max(CAP_FLOOR, 2 * per_warp)))
    parts = np.maximum(1, -(-nb // cap))
    split = parts > 1
    pack = int(min(PACK_MAX, max(PACK_MIN, total // (REF_SMS * 4 * PACK_WAVES * 8))))
    # packs: consecutive unsplit rows with the same (rows split so far, blocks before // pack, row // PACK_WINDOWS)
    idx = np.arange(R, dtype=np.int64)
    seg = np.cumsum(split)
    key = np.stack([seg, (bo[:-1] // pack), idx // PACK_WINDOWS], axis=1)
    start = np.ones(R, bool)
    if R:
        start[1:] = (key[1:] != key[:-1]).any(axis=1) | split[1:] | split[:-1]
    starts = np.flatnonzero(start & ~split)
    bounds = np.append(np.flatnonzero(start | split), R)  # a pack runs to the next pack start or split row
    ends = bounds[np.searchsorted(bounds, starts, side="right")]
    packs = np.stack([starts, ends, bo[starts], bo[ends], np.full(starts.size, -1)], axis=1)
    srows = np.flatnonzero(split)
    P = parts[srows]
    slot_base = (np.cumsum(P) - P).astype(np.int64)  # exclusive prefix sums (empty when nothing splits)
    row = np.repeat(srows, P)
    first = np.repeat(slot_base, P)
    q = np.arange(row.size, dtype=np.int64) - first
    Pr = parts[row]
    lo, hi = bo[row] + nb[row] * q // Pr, bo[row] + nb[row] * (q + 1) // Pr
    parts_rows = np.stack([row, row + 1, lo, hi, np.repeat(slot_base, P) + q], axis=1)
    tasks = np.concatenate([packs.reshape(-1, 5), parts_rows.reshape(-1, 5)]).astype(np.int64)
    tasks = tasks[np.lexsort((tasks[:, 2], tasks[:, 0]))]  # row order (neighbours share a thread block)
    splits = np.stack([srows, slot_base, P], axis=1).astype(np.int64).reshape(-1, 3)
    return tasks, splits, int(P.sum()), cap, pack


def longest_task(tasks: np.ndarray) -> int:
    """The most blocks (entries) of one task of ``schedule``'s tasks [T, 5] (0 for none)."""
    return int((tasks[:, 3] - tasks[:, 2]).max(initial=0))


class HalfPlan:
    """A plan with precision "fp16" or "bf16" (made by :func:`accspmm.plan` / :class:`accspmm.Plan`
    with that precision; see the module docstring for the semantics).  ``stats`` holds the format
    (BSR16 blocks, fill), the schedule and the time of every step."""

    def __init__(self, A, *, device="auto", precision="fp16", format="auto", reorder=None, reorder_params=None,
                 perm=None, dtype=None, balance="auto", cusparse_alg="default", tuning=None, calls=None):
        from ._plan import _HANDLES, _PLANS, _resolve_device

        t0 = time.perf_counter()
        if precision not in PRECISIONS:
            raise ValueError(f"HalfPlan precision must be one of {PRECISIONS}, got {precision!r}")
        csr = A if isinstance(A, CSR) else as_csr(A)
        if dtype is not None and np.dtype(dtype) not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {np.dtype(dtype)}")
        kernel = "auto"
        autotune = None  # BitTCF's first-call variant timing: tuning["autotune"], else by calls (below)
        narrow = {}  # BitTCF's CUDA-core widths: the tuning keys of _CSR_TUNING, as TF32 plans take them
        if tuning is not None:
            if not isinstance(tuning, dict) or set(tuning) - {"kernel", "autotune", *_CSR_TUNING}:
                raise ValueError("tuning of an FP16/BF16 plan takes only "
                                 "{'kernel': 'auto' | 'pairs' | 'rows' | 'quads'} (BSR16's kernel on the GPU), "
                                 "{'autotune': bool} (BitTCF's first-call variant timing), 'narrow' / "
                                 "'csr_lanes' (BitTCF's kernel for n <= 4), 'wide' (BitTCF's kernel of wider n), "
                                 "'csr_part' (its parts of long rows) and 'csr_lane_cols' (its columns a lane), as "
                                 f"TF32 plans take them, got {tuning!r}")
            narrow = {key: tuning[key] for key in _CSR_TUNING if key in tuning}
            if not isinstance(tuning.get("autotune", False), bool):
                raise ValueError(f"tuning['autotune'] must be True or False, got {tuning['autotune']!r}")
            autotune = tuning.get("autotune")
            kernel = tuning.get("kernel", "auto")
            if kernel not in BSR16_KERNELS:
                raise ValueError(f"tuning['kernel'] must be one of {BSR16_KERNELS}, got {kernel!r}")
        if balance not in ("auto", True, False):
            raise ValueError(f"balance must be 'auto', True or False, got {balance!r}")
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, (int, np.integer)) or calls < 0):
            raise ValueError(f"calls must be a non-negative int (the number of products you expect), got {calls!r}")
        if autotune is None:
            autotune = bool(calls is not None and calls >= AUTOTUNE_MIN_CALLS)
        self.device = _resolve_device(device)
        allowed = ("bsr16", "bittcf") if self.device == "gpu" else ("csr",)
        if format not in ("auto", *allowed):
            raise ValueError(f"precision={precision!r} on device={self.device!r} takes format 'auto' or one of "
                             f"{allowed}, not {format!r}")
        self.format = allowed[0] if format == "auto" else format
        if narrow and (self.device != "gpu" or kernel != "auto"):
            raise ValueError(f"tuning['narrow'], ['csr_lanes'] and ['wide'] choose the CUDA-core kernels of a GPU plan "
                             f"whose BSR16 kernel is not forced, got device={self.device!r}, tuning={tuning!r}")
        if kernel != "auto" and format != "bsr16":
            raise ValueError(f"tuning['kernel'] chooses BSR16's kernel: plan with device='gpu' and format='bsr16', "
                             f"got device={self.device!r}, format={format!r}")
        self.precision = precision
        self.shape = csr.shape
        self.dtype = np.dtype(np.float32)  # the accumulator
        self.balance = balance
        self.calls = calls
        self._closed = False
        self._fast = None  # the C call (csrc/cuda_launcher.c: HalfLauncher, or Launcher for BitTCF) of GPU plans
        self._runner = None  # BitTCF on the GPU: the TF32 kernel's runner with half operands (accspmm._tf32)
        # BSR16 on the GPU: widths n <= _narrow_max on the TF32 kernel's CUDA-core paths (_narrow_runner, built at
        # the first such call from _narrow_src into _narrow_dev)
        self._narrow_src = self._narrow_runner = self._half_launcher = None
        self._narrow_max = 0
        self._narrow_dev = {}
        self._T = None
        self._pair_min_n = None  # BSR16 on the GPU: pairs of block rows from this width up (PAIR_MIN_N)
        self._pair_step = 1  # ... at widths a multiple of this (8: only where pair_cta_kernel runs)
        self._pair_sliced_n = 0  # ... and below this width only at widths that fill_slices
        self._quad_min_n = None  # ... quads of block rows on warpgroup MMA (half_wgmma.cu) from this width up
        self._quad_max_n = None  # ... to this width (None: every width)
        self._quad_makespan = 0  # ... their schedule's predicted entries an SM (acc_half_args.quad_makespan)
        self._pair_sizes = (0, 0)  # the pairs' schedule: all its entries, the most in a task (acc_half_args)
        self._layouts = {}  # BSR16 on the GPU: "rows" (and "pairs") -> (tasks, split rows, slots)
        self._dev = {}
        self._device_id = None
        self.handle = next(_HANDLES)
        _PLANS[self.handle] = self
        self._source = csr
        self.stats = {"nnz": csr.nnz, "shape": csr.shape, "device": self.device, "precision": precision,
                      "format": self.format}
        steps = self.stats["seconds"] = {"validate": time.perf_counter() - t0}
        t = time.perf_counter()
        csr = csr.canonicalized()
        steps["canonicalize"] = time.perf_counter() - t
        t = time.perf_counter()
        self._bits = round_csr(csr, precision)
        steps["round"] = time.perf_counter() - t
        self.stats["nnz"] = csr.nnz
        if perm is not None and reorder not in (None, "none"):
            raise ValueError("pass either perm or reorder, not both")
        if self.device == "cpu":
            if reorder not in (None, "none") or perm is not None:
                if perm is not None:
                    check_perm(perm, csr.shape[0])
                raise ValueError(f"reorder needs a GPU half plan (format 'bsr16'); the CPU reference does not "
                                 f"depend on row order, got reorder={reorder!r}")
            self._csr = CSR(csr.shape, csr.indptr, csr.indices, widen(self._bits, precision), True)
        else:
            t = time.perf_counter()
            if perm is None and reorder not in (None, "none"):
                params = dict(reorder_params or {})
                if reorder == "jaccard":
                    params.setdefault("block_width", 16)  # the column blocks of BSR16
                perm, info = _reorder.compute(csr, reorder, seed=params.pop("seed", 0), **params)
                self.stats["reorder"] = info
            elif perm is not None:
                perm = check_perm(perm, csr.shape[0])
                self.stats["reorder"] = {"method": "perm", "chosen": "perm (given)"}
            else:
                self.stats["reorder"] = {"method": "none", "chosen": "none"}
            steps["reorder"] = time.perf_counter() - t
            t = time.perf_counter()
            identity = perm is None
            perm = np.arange(csr.shape[0], dtype=np.int64) if identity else np.asarray(perm, np.int64)
            m, k = csr.shape
            cu = require_cuda()
            self._device_id = cu.get_device()
            fmt = None  # BitTCF built on the device, where the format may be BitTCF: its count is the model's
            build = 0.0
            if format != "bsr16":
                from ._device_format import DeviceBitTCF

                tb = time.perf_counter()
                exact = _exact_csr(csr, self._bits, precision)
                fmt = DeviceBitTCF(exact, None if identity else perm, self._dev, self._device_id)
                ntc = fmt.num_blocks
                build = time.perf_counter() - tb
                bo16 = _device_bsr16_count(cu, fmt, self._dev, self._device_id)
            else:
                ntc = int(_core.bittcf_count_stats(m, k, csr.indptr, csr.indices, perm, False)["tc_blocks"])
                bo16 = _core.bsr16_count(m, k, csr.indptr, csr.indices, perm)
            model = {"bsr16_blocks": int(bo16[-1]), "tc_blocks": ntc,
                     "bytes_per_64_columns": {"bsr16": LAYOUT_BYTES["bsr16"] * int(bo16[-1]),
                                              "bittcf": LAYOUT_BYTES["bittcf"] * ntc}}
            f = quads = qsched = None  # BSR16, its quads and their schedule, where the format model built them
            if format == "auto":
                self.format = min(model["bytes_per_64_columns"], key=model["bytes_per_64_columns"].get)
                model["why"] = "fewer bytes of A and B per 64 columns (LAYOUT_BYTES)"
                if self.format == "bittcf" and cu.half_quads_usable() and _quads_may_win(bo16, ntc):
                    f = _core.bsr16_build(m, k, csr.indptr, csr.indices, self._bits, perm)
                    quads = group_index(f["brow_offsets"], f["block_cols"], k, 4)
                    qsched = quad_schedule(quads[0])
                    model["quads"] = _quad_model(quads, qsched, int(bo16[-1]), ntc)
                    if model["quads"]["wins"]:
                        self.format = "bsr16"
                        model["why"] = ("BSR16 on quads of block rows: fewer bytes an SM than BitTCF "
                                        "(QUAD_ENTRY_BYTES, quad_schedule)")
            else:
                model["why"] = f"format={format!r} was asked for"
            model["chosen"] = self.format
            self.stats["format"] = self.format
            self.stats["format_model"] = model
            steps["format_model"] = time.perf_counter() - t - build
            t = time.perf_counter() - build
            if self.format == "bsr16":
                if fmt is not None:  # the model chose BSR16 after the BitTCF build: its arrays go
                    fmt.free()
                    fmt = None
                if f is None:
                    f = _core.bsr16_build(m, k, csr.indptr, csr.indices, self._bits, perm)
                offsets = f["brow_offsets"]
                nblocks = int(offsets[-1])
                self.stats.update({"bsr16_blocks": nblocks,
                                   "block_fill": csr.nnz / (256.0 * nblocks) if nblocks else float("nan")})
                for name, arr in (("perm", perm), *f.items()):
                    self._dev[name] = DeviceArray.from_host(arr if arr.size else np.zeros(1, arr.dtype), self._device_id)
            else:
                nblocks = fmt.num_blocks
                _to_half_tiles(cu, self._dev, nblocks, precision, self._device_id)
                self.stats.update({"tc_blocks": nblocks,
                                   "block_fill": csr.nnz / (64.0 * nblocks) if nblocks else float("nan")})
            steps["build"] = time.perf_counter() - t
        if self.device == "gpu" and self.format == "bittcf":
            # the TF32 kernel's schedule, cost model, variant timing and C call, on half operands
            t = time.perf_counter()
            # the first call for each width times the variants only where many calls follow (as TF32 plans;
            # choose_variant's guess for the half formats: 2-4% above the fastest variant, variant_guess.py)
            self._runner = _half_runner(fmt, self._dev, self._device_id, self.stats, balance,
                                        {"autotune": autotune, **narrow}, precision, exact, calls)
            self._fast = self._runner.launcher.call
            steps["schedule_upload"] = time.perf_counter() - t
        elif self.device == "gpu":
            t = time.perf_counter()
            po, pc, pb = pair_index(offsets, f["block_cols"], k)
            share = pc.size / nblocks if nblocks else 1.0
            pair_sched = rows_sched = None
            critical = None  # the quads' critical rule's numbers (QUAD_CRITICAL_RATIO), where it was weighed
            if kernel == "auto":
                self._pair_min_n = PAIR_MIN_N if share <= PAIR_SHARE_MAX_BLOCKS else None
                self._pair_step = 1 if share <= PAIR_SHARE_MAX else 8
                if share <= PAIR_SHARE_MAX_BLOCKS:
                    pair_sched = schedule(po)  # made once: the rule and the pairs' layout below use it
                    if pair_sched[0].shape[0] >= PAIR_SLICED_MIN_TASKS:
                        self._pair_min_n, self._pair_sliced_n = PAIR_MIN_N_SLICED, PAIR_MIN_N
                why = (f"{share:.2f} union entries per block over pairs of block rows: pairs at <= {PAIR_SHARE_MAX} "
                       f"(<= {PAIR_SHARE_MAX_BLOCKS} at widths a multiple of 8) and n >= {PAIR_MIN_N} (from "
                       f"{PAIR_MIN_N_SLICED} with >= {PAIR_SLICED_MIN_TASKS} pair tasks, at widths filling their "
                       f"{PAIR_CTA_COLS}-column slices)")
                if nblocks and cu.half_quads_usable():
                    quads = quads or group_index(offsets, f["block_cols"], k, 4)
                    # made once: the rule and the layouts below use them
                    qsched = quad_schedule(quads[0]) if qsched is None else qsched
                    rows_sched = schedule(offsets)
                    longest = longest_task(rows_sched[0])
                    qshare, mean, rule = _quad_rule(quads, nblocks, pc.size)
                    critical = {"quad_makespan": float(qsched[4]), "rows_longest_task": longest,
                                "ratio": float(qsched[4]) / max(longest, 1)}
                    if rule:
                        self._quad_min_n = QUAD_MIN_N
                    elif critical["ratio"] <= QUAD_CRITICAL_RATIO:
                        self._quad_min_n, self._quad_max_n = QUAD_MIN_N, QUAD_CRITICAL_MAX_N
                    why += (f"; quads: {qshare:.2f} union entries per block, {mean:.1f} entries a nonempty quad, "
                            f"a predicted makespan of {qsched[4]:.0f} entries against the row kernel's longest task "
                            f"of {longest}: quads for n >= {QUAD_MIN_N} at <= {QUAD_SHARE_MAX} and >= "
                            f"{QUAD_MIN_ENTRIES}, or at <= {QUAD_PAIR_RATIO} times the pairs' entries and >= "
                            f"{QUAD_MIN_ENTRIES_SHARED}; else for {QUAD_MIN_N} <= n <= {QUAD_CRITICAL_MAX_N} at a "
                            f"makespan <= {QUAD_CRITICAL_RATIO} times that task")
            elif kernel == "quads":
                if cu.half_quads_usable():
                    self._quad_min_n = 0
                    why = "tuning['kernel'] = 'quads'"
                else:
                    why = "tuning['kernel'] = 'quads', but this GPU or build has no warpgroup MMA (sm_90a): rows"
            else:
                self._pair_min_n = 0 if kernel == "pairs" else None
                why = f"tuning['kernel'] = {kernel!r}"
            kernels = "rows"
            if self._quad_min_n is not None and self._quad_max_n is None:
                kernels = f"quads for n >= {self._quad_min_n}, else rows"
            elif self._pair_min_n is not None:
                kernels = (f"pairs for n >= {self._pair_min_n}"
                           + (" and a multiple of 8" if self._pair_step > 1 else "")
                           + (f" (below {self._pair_sliced_n}: widths filling their {PAIR_CTA_COLS}-column slices)"
                              if self._pair_sliced_n else "") + ", else rows")
            if self._quad_max_n is not None:
                kernels = f"quads for {self._quad_min_n} <= n <= {self._quad_max_n}; else {kernels}"
            sched = self.stats["schedule"] = {"kernel": kernels, "kernel_why": why, "pair_entries_per_block": share}
            if critical is not None:
                sched["quad_critical"] = critical
            self._layouts = {}
            for layout in ("rows", "pairs", "quads"):
                if layout == "pairs" and self._pair_min_n is None or layout == "quads" and self._quad_min_n is None:
                    continue
                if layout == "quads":  # a thread block per task (a quad or a part of one) and column tile
                    go, gc, gb = quads or group_index(offsets, f["block_cols"], k, 4)
                    gb = self._pack_groups(cu, gb, nblocks)  # one copy an entry's blocks, on the device
                    tasks, splits, slots, cap, pred = quad_schedule(go) if qsched is None else qsched
                    self._quad_makespan = int(pred)  # the C call's choice of padded copies (cuda/half_spmm.h)
                    pack = None
                    sched["quad_entries_per_block"] = gc.size / nblocks if nblocks else 1.0
                    sched["quad_predicted_entries"] = pred
                else:
                    go, gc, gb = po, pc, pb
                    if layout == "rows":
                        tasks, splits, slots, cap, pack = schedule(offsets) if rows_sched is None else rows_sched
                    else:
                        tasks, splits, slots, cap, pack = schedule(po) if pair_sched is None else pair_sched
                        # the C call's choice of wide thread blocks (cuda/half_spmm.cu: use_wide_cta); every entry
                        # is in one task
                        self._pair_sizes = (int(po[-1]), longest_task(tasks))
                sched[layout] = {"tasks": int(tasks.shape[0]), "split_rows": int(splits.shape[0]), "parts": slots,
                                 "cap": cap, "pack_blocks": pack}
                if layout == "pairs":
                    sched[layout].update(entries=self._pair_sizes[0], longest_task=self._pair_sizes[1])
                arrays = {"tasks": tasks.reshape(-1), "splits": splits.reshape(-1)}
                if layout != "rows":
                    arrays.update(pair_offsets=go, pair_cols=gc)
                    if layout == "pairs":
                        arrays.update(pair_blocks=gb.reshape(-1))
                    else:
                        self._dev[f"{layout}_pair_blocks"] = gb
                for name, arr in arrays.items():
                    self._dev[f"{layout}_{name}"] = DeviceArray.from_host(arr if arr.size else np.zeros(1, arr.dtype),
                                                                          self._device_id)
                self._layouts[layout] = (int(tasks.shape[0]), int(splits.shape[0]), slots)
            sched.update(sched["rows"])  # the row kernel's schedule at the top level, as before pairs
            # the C call: the widths kernel_for gives another layout go to it, by routes checked in order (quads,
            # then pairs: set_wide); quads fall back to rows in C where the width or B's and C's alignment do not
            # allow them
            quads_all = "quads" in self._layouts and self._quad_max_n is None  # no width left to pairs
            base = "pairs" if self._pair_min_n == 0 and "quads" not in self._layouts else "rows"
            routes = []
            if "quads" in self._layouts:
                routes.append(("quads", self._quad_min_n, 1, 0, -1 if quads_all else self._quad_max_n))
            if "pairs" in self._layouts and base != "pairs" and not quads_all:
                routes.append(("pairs", self._pair_min_n, self._pair_step, self._pair_sliced_n, -1))
            launchers = {}
            for layout in dict.fromkeys([base] + [r[0] for r in routes]):
                a = self._layout_args(layout, 0, 0, 0, False, 0)
                launchers[layout] = cu.HalfLauncher(m, k, *a[4:12], a[12], self._layouts[layout][2], _FMT[precision],
                                                    self._device_id, *a[18:])
            for i, (layout, min_n, step, sliced_n, max_n) in enumerate(routes):
                launchers[base].set_wide(launchers[layout], min_n, step, sliced_n, max_n, i)
            self._half_routes = [r[0] for r in routes] + [base]  # route_for(n)'s layouts (-1: the base's)
            self._fast = launchers[base].call
            self._half_launcher = launchers[base]
            if kernel == "auto" and cu.tf32_narrow_max() > 0:
                # BSR16's kernels compute 8 to 64 columns for each one at n <= 4 (ogbl-ddi n = 1: 39 us against 12 on
                # the CSR kernel): those widths go to the TF32 kernel's CUDA-core paths (A's CSR or BitTCF, by
                # accspmm._tf32.narrow_csr), built at the first such call (_make_narrow_runner); until then the C
                # call leaves them to Python
                self._narrow_max = cu.tf32_narrow_max()
                self._narrow_src = (csr, None if identity else perm, balance, narrow, calls)
                self._half_launcher.set_narrow(None, self._narrow_max)
            steps["schedule_upload"] = time.perf_counter() - t
        steps["total"] = time.perf_counter() - t0
        self._finalizer = weakref.finalize(self, _free, self._dev, self._narrow_dev)
        _plan.register_torch_op()  # before any torch.compile traces a call

    def _pack_groups(self, cu, blocks: np.ndarray, nblocks: int) -> DeviceArray:
        """The quad kernel's group values (``pack_group_values``' layout: each entry's four BSR16 blocks side
        by side, zeros where a row has none) gathered on the device from the plan's block values; only the
        block indices go up (8 bytes a slot against 512 of values)."""
        slots = int(np.asarray(blocks).size)
        out = DeviceArray((max(slots, 1) * 256,), np.uint16, self._device_id)
        if slots:
            idx = DeviceArray.from_host(np.ascontiguousarray(blocks, np.int64).reshape(-1), self._device_id)
            try:
                cu.half_pack_groups(idx.ptr, slots, self._dev["block_values"].ptr, nblocks, out.ptr, None)
                cu.synchronize(None)  # the index array goes, and every stream may read the values
            finally:
                idx.free()
        return out

    # ---- lifetime ---------------------------------------------------------------------

    def close(self):
        """Frees the plan's device memory now (also done on garbage collection)."""
        self._closed = True
        self._fast = None
        if self._narrow_runner is not None:
            self._narrow_runner.launcher.clear()
        if self._T is not None:
            self._T.close()
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        m, k = self.shape
        return (f"<accspmm.Plan {m}x{k} nnz={self.stats['nnz']} device={self.device} "
                f"precision={self.precision} format={self.format} (FP32 accumulation)>")

    def transposed(self) -> "HalfPlan":
        """The plan of ``A.T`` with this plan's device and precision (autograd's backward)."""
        if self._closed:
            raise RuntimeError("this plan was closed")
        if self._T is None:
            src = self._source
            At = sp.csr_matrix((src.data, src.indices, src.indptr), shape=src.shape).T.tocsr()
            self._T = HalfPlan(At, device=self.device, precision=self.precision)
        return self._T

    def compare_cusparse(self, n: int = 128, reps: int = 20):
        raise ValueError("compare_cusparse needs a GPU TF32 plan (device='gpu', precision='tf32')")

    # ---- calls ------------------------------------------------------------------------

    def __call__(self, B, *, out=None, stream=None, check_finite=False):
        """``A @ B`` (see the module docstring for dtypes).  ``check_finite=True`` raises
        ValueError when B holds NaN or inf (it reads B: synchronises)."""
        if _plan._compiling():  # torch.compile traces the torch op (accspmm._torch) instead of the C call
            return _plan._traced_call(self, B, out)
        fast = self._fast
        if fast is not None and stream is None and not check_finite:
            C = fast(B, out)
            if C is not None:
                return C
        if self._closed:
            raise RuntimeError("this plan was closed")
        lib = array_library(B)
        if lib in ("torch", "cupy"):
            register_interop(lib)  # the C call takes this library's arrays from the next call on
        if lib == "torch":
            return self._call_torch(B, out, stream, check_finite)
        if lib == "cupy" or is_gpu_array(B):
            return self._call_cupy(B, out, stream, check_finite)
        return self._call_host(B, out, stream, check_finite)

    def _check_b(self, shape, dtype_name):
        if len(shape) not in (1, 2):
            raise ValueError(f"B must be 1- or 2-dimensional, got shape {tuple(shape)}")
        if shape[0] != self.shape[1]:
            raise ValueError(f"dimension mismatch: A has {self.shape[1]} columns but B has {shape[0]} rows")
        return _b_kind(dtype_name, self.precision)

    def _call_host(self, B, out, stream, check_finite):
        if sp.issparse(B):
            raise TypeError("B must be dense (sparse @ sparse is not supported); use B.toarray()")
        try:
            Bh = np.asarray(B)
        except Exception as exc:
            raise TypeError(f"B cannot be converted to an array: {exc}") from None
        kind = self._check_b(Bh.shape, Bh.dtype.name)
        vector = Bh.ndim == 1
        m = self.shape[0]
        n = 1 if vector else Bh.shape[1]
        shape = (m,) if vector else (m, n)
        c_dtype = Bh.dtype if kind == "half" else np.dtype(np.float32)
        if out is not None:
            _check_host_out(out, shape, c_dtype, Bh)
        if kind == "half":
            bits = np.ascontiguousarray(Bh).view(np.uint16).reshape(-1, n)
        else:
            bits = round_bits(Bh.astype(np.float32, copy=False), self.precision)[0].reshape(-1, n)
        if check_finite and not np.isfinite(widen(bits, self.precision)).all():
            raise ValueError("B holds NaN or inf (check_finite=True)")
        out_f32 = out is None and c_dtype == np.float32 or (out is not None and out.dtype == np.float32)
        if self.device == "cpu":
            C32 = np.empty((m, n), np.float32)
            Bf = widen(bits, self.precision).reshape(-1, n)
            if m and n:
                csr = self._csr
                _core.csr_spmm(m, self.shape[1], csr.indptr, csr.indices, csr.data, Bf, C32)
            if out_f32:
                C = C32
            else:
                C = round_bits(C32, self.precision)[0].view(c_dtype if out is None else out.dtype)
        else:
            C = self._run_host_on_gpu(bits, m, n, out_f32, c_dtype if out is None else out.dtype, stream)
        C = C.reshape(shape)
        if out is not None:
            out[...] = C
            return out
        return C

    def _run_host_on_gpu(self, bits, m, n, out_f32, c_dtype, stream):
        s = stream_handle(stream)
        dB = DeviceArray.from_host(np.ascontiguousarray(bits), self._device_id, s)
        dC = DeviceArray((m, n), np.float32 if out_f32 else np.uint16, self._device_id)
        try:
            self._launch(dB.ptr, dC.ptr, n, out_f32, s, _DeviceWorkspace(self._device_id))
            C = dC.to_host(stream=s)
        finally:
            dB.free()
            dC.free()
        return C if out_f32 else C.view(c_dtype)

    def kernel_args(self, d_B: int, d_C: int, n: int, out_f32: bool, d_workspace: int = 0) -> tuple:
        """The argument tuple of ``_cuda.half_spmm`` / ``_cuda.time_half`` for device pointers
        (benchmarks time the kernel alone with it; the workspace needs ``workspace_floats(n)``).
        BSR16 only: a BitTCF plan runs the TF32 kernel's runner (``self._runner.args``)."""
        if self._runner is not None:
            raise ValueError("kernel_args is for BSR16 half plans; a BitTCF plan's launch is self._runner.args(...)")
        return self._layout_args(self.kernel_for(n), d_B, d_C, n, out_f32, d_workspace)

    def _layout_args(self, layout: str, d_B: int, d_C: int, n: int, out_f32: bool, d_workspace: int) -> tuple:
        """kernel_args for the kernel ``layout`` ("rows", "pairs" or "quads") whatever n."""
        m, k = self.shape
        d = self._dev
        ntasks, nsplits, _ = self._layouts[layout]
        groups = [d[f"{layout}_{name}"].ptr if layout != "rows" else 0 for name in ("pair_offsets", "pair_cols",
                                                                                   "pair_blocks")]
        return (m, k, n, -(-m // 16), d["perm"].ptr, d["brow_offsets"].ptr, d["block_cols"].ptr, d["block_values"].ptr,
                d["block_masks"].ptr, d[f"{layout}_tasks"].ptr, ntasks, d[f"{layout}_splits"].ptr, nsplits, d_workspace,
                d_B, d_C, _FMT[self.precision], int(out_f32), _LAYOUT_FLAG[layout], *groups,
                self._quad_makespan if layout == "quads" else 0, *(self._pair_sizes if layout == "pairs" else (0, 0)))

    def kernel_for(self, n: int) -> str:
        """BSR16 on the GPU: the BSR16 kernel of width n (a plan whose kernel is not forced runs n <= 4 on the
        TF32 kernel's CUDA-core paths instead: ``stats["narrow"]``): "quads" (warpgroups per quad of block
        rows; at widths that are not a multiple of 8, for a B or C off a 16-byte boundary, and at other widths
        that are not a multiple of 64 where the copies cost less than B's per-chunk requests, on copies padded
        to a multiple of 64), "pairs" (a pair of block rows a warp, or a thread block at widths a multiple of 8;
        where the pairs share fewer column blocks, PAIR_SHARE_MAX_BLOCKS, only at those widths) or "rows"."""
        if self._quad_min_n is not None and self._quad_min_n <= n <= (self._quad_max_n or n):
            return "quads"
        pairs = (self._pair_min_n is not None and n >= self._pair_min_n and n % self._pair_step == 0
                 and (n >= self._pair_sliced_n or fills_slices(n)))
        return "pairs" if pairs else "rows"

    def workspace_floats(self, n: int) -> int:
        """Floats of split-row workspace a call of width n needs (0 without split rows); widths
        run padded to a multiple of 8 columns, or of 64 for quads (cuda/half_spmm.h)."""
        return self._workspace_floats(self.kernel_for(n), n)

    def _workspace_floats(self, layout: str, n: int) -> int:
        _, nsplits, slots = self._layouts[layout]
        unit = 64 if layout == "quads" else 8  # ACC_HALF_WS_COLS
        return slots * _WINDOW_ROWS[layout] * (-(-n // unit) * unit) if nsplits else 0

    def _launch(self, d_B: int, d_C: int, n: int, out_f32: bool, stream, workspace):
        from . import _cuda

        m, k = self.shape
        if m == 0 or n == 0:
            return
        if self.stats["nnz"] == 0 or k == 0:
            _cuda.memset(d_C, 0, m * n * (4 if out_f32 else 2), stream)
            return
        if self._runner is not None:
            self._runner.run(d_B, d_C, n, stream, out_f32)
            return
        if self._narrow_src is not None and n <= self._narrow_max:
            runner = self._narrow_runner or self._make_narrow_runner(stream)
            if runner is not None:
                runner.run(d_B, d_C, n, stream, out_f32)
                return
        for layout in (self.kernel_for(n), "rows"):
            floats = self._workspace_floats(layout, n)
            ws = workspace.get(floats) if floats else 0
            try:
                _cuda.half_spmm(self._layout_args(layout, d_B, d_C, n, out_f32, ws), stream)
                return
            except NotImplementedError:  # quads the pool cannot pad (nothing launched): the row kernel
                if layout != "quads":
                    raise

    def _make_narrow_runner(self, stream):
        """A BSR16 plan's runner of widths n <= 4 (the TF32 kernel's CUDA-core paths on half operands: A's CSR
        or BitTCF, whichever ``accspmm._tf32.narrow_csr`` predicts faster), its BitTCF built on the device now;
        the C call then hands those widths to its Launcher.  None (BSR16's own kernels from then on) where the
        GPU has no memory for it.  ``stats["narrow"]`` reports it."""
        from . import _cuda
        from ._device_format import DeviceBitTCF

        if _cuda.stream_capturing(stream):
            raise RuntimeError(f"the first call of this plan for a width n <= {self._narrow_max} builds that kernel's "
                               "format and chooses its kernel (it synchronises), which a CUDA-graph capture does not "
                               "allow: call the plan once with such a width before capturing (warm-up)")
        csr, perm, balance, narrow, calls = self._narrow_src
        t = time.perf_counter()
        dev, stats = self._narrow_dev, self.stats.setdefault("narrow", {})
        exact = _exact_csr(csr, self._bits, self.precision)
        try:
            fmt = DeviceBitTCF(exact, perm, dev, self._device_id)
            nblocks = fmt.num_blocks
            _to_half_tiles(_cuda, dev, nblocks, self.precision, self._device_id)
            runner = _half_runner(fmt, dev, self._device_id, stats, balance, {"autotune": False, **narrow},
                                  self.precision, exact, calls)
        except MemoryError as exc:
            _free(dev)
            self._narrow_src = None
            self._half_launcher.set_narrow(None, 0)
            stats["why"] = f"BSR16's own kernels: no GPU memory for the narrow widths' BitTCF ({exc})"
            return None
        stats.update({"format": "bittcf", "tc_blocks": nblocks, "build_seconds": time.perf_counter() - t})
        self._narrow_runner = runner
        self._half_launcher.set_narrow(runner.launcher, self._narrow_max)
        return runner

    def _gpu_plan(self, dev_index):
        if self.device != "gpu":
            raise ValueError("B is a GPU array but this plan runs on the CPU; plan with device='gpu'")
        if dev_index != self._device_id:
            raise ValueError(f"B is on GPU {dev_index} but the plan lives on GPU {self._device_id}")

    def _call_torch(self, B, out, stream, check_finite):
        import torch

        if not B.is_cuda:  # CPU tensors: the host path on NumPy views
            return _torch_host(self, B, out, stream, check_finite)
        self._gpu_plan(B.device.index or 0)
        kind = self._check_b(tuple(B.shape), str(B.dtype).replace("torch.", ""))
        if B.requires_grad and torch.is_grad_enabled():
            if out is not None:
                raise RuntimeError("out= is not supported when B requires grad")
            return _HalfFunction.apply(B, self, stream, check_finite)
        m, n = self.shape[0], (1 if B.dim() == 1 else B.shape[1])
        shape = (m,) if B.dim() == 1 else (m, n)
        half_t = torch.float16 if self.precision == "fp16" else torch.bfloat16
        s = stream_handle(stream) if stream is not None else int(torch.cuda.current_stream(B.device).cuda_stream) or None
        if check_finite and not bool(torch.isfinite(B).all()):
            raise ValueError("B holds NaN or inf (check_finite=True)")
        from . import _cuda

        if kind == "half":
            Bh = B.contiguous()
            c_dtype = half_t
        else:
            Bf = B.to(torch.float32).contiguous()
            Bh = torch.empty(Bf.shape, dtype=half_t, device=B.device)
            _cuda.half_round(Bf.data_ptr(), Bh.data_ptr(), Bf.numel(), _FMT[self.precision], s)
            c_dtype = torch.float32
        if out is not None:
            if not isinstance(out, torch.Tensor) or not out.is_cuda:
                raise TypeError("out must be a CUDA tensor when B is one")
            if tuple(out.shape) != shape or out.dtype not in (c_dtype, torch.float32) or not out.is_contiguous():
                raise ValueError(f"out must be a contiguous {c_dtype} or float32 CUDA tensor of shape {shape}")
            if out.device != B.device:
                raise ValueError("out is on another GPU than B")
            if out.numel() and out.data_ptr() == Bh.data_ptr():
                raise ValueError("out must not overlap B")
            C = out
        else:
            C = torch.empty(shape, dtype=c_dtype, device=B.device)
        self._launch(Bh.data_ptr(), C.data_ptr(), n, C.dtype == torch.float32, s, _TorchWorkspace(B.device))
        return C

    def _call_cupy(self, B, out, stream, check_finite):
        import cupy

        if not isinstance(B, cupy.ndarray):
            raise TypeError("half-precision plans take CuPy or PyTorch GPU arrays (or host arrays)")
        self._gpu_plan(B.device.id)
        kind = self._check_b(B.shape, B.dtype.name)
        m, n = self.shape[0], (1 if B.ndim == 1 else B.shape[1])
        shape = (m,) if B.ndim == 1 else (m, n)
        from . import _cuda

        with cupy.cuda.Device(B.device.id):
            s = stream_handle(stream) if stream is not None else int(cupy.cuda.get_current_stream().ptr) or None
            if check_finite and not bool(cupy.isfinite(B).all()):
                raise ValueError("B holds NaN or inf (check_finite=True)")
            if kind == "half":
                Bh = cupy.ascontiguousarray(B)
                c_dtype = B.dtype
            else:
                Bf = cupy.ascontiguousarray(B, dtype=cupy.float32)
                Bh = cupy.empty(Bf.shape, dtype=cupy.uint16)
                _cuda.half_round(Bf.data.ptr, Bh.data.ptr, Bf.size, _FMT[self.precision], s)
                c_dtype = np.dtype(np.float32)
            if out is not None:
                if not isinstance(out, cupy.ndarray):
                    raise TypeError("out must be a CuPy array when B is one")
                if out.shape != shape or out.dtype not in (c_dtype, np.float32) or not out.flags.c_contiguous:
                    raise ValueError(f"out must be a C-contiguous {c_dtype} or float32 CuPy array of shape {shape}")
                C = out
            else:
                C = cupy.empty(shape, dtype=c_dtype)
            self._launch(Bh.data.ptr, C.data.ptr, n, C.dtype == np.float32, s, _CupyWorkspace())
        return C


def _exact_csr(csr: CSR, bits: np.ndarray, precision: str) -> CSR:
    """A's canonical CSR with its exact half values as float32 (the BitTCF build's TF32 rounding leaves them as
    they are): the input of the GPU BitTCF build and of the CSR kernel's narrow widths."""
    return CSR(csr.shape, csr.indptr, csr.indices, widen(bits, precision), True)


def _to_half_tiles(cu, dev: dict, nblocks: int, precision: str, device_id: int):
    """dev["values"], the GPU BitTCF build's float32 values, replaced by the dense half tiles the TF32 kernel
    reads with half operands (``cu.half_tiles``)."""
    tiles = DeviceArray((max(nblocks, 1) * 64,), np.uint16, device_id)
    cu.half_tiles(dev["block_meta"].ptr, dev["values"].ptr, nblocks, tiles.ptr, _FMT[precision], None)
    dev.pop("values").free()  # the float copy: the tiles hold the values now
    dev["values"] = tiles


def _half_runner(fmt, dev: dict, device_id: int, stats: dict, balance, tuning: dict, precision: str, exact: CSR,
                 calls):
    """The TF32 kernel's runner (schedule, cost model, variant timing, C call) on half operands over ``fmt``
    (tiles in ``dev``), its narrow widths (n <= 4) on A's CSR ``exact`` where that is predicted faster, and
    ``calls`` the products the plan expects."""
    from ._plan import _put
    from ._tf32 import ELEM, TF32Runner

    runner = TF32Runner(fmt, functools.partial(_put, dev, device_id), dev, device_id, stats, balance, tuning,
                        ELEM[precision], csr=exact)
    runner.calls = calls
    return runner


def _free(*devs: dict):
    for dev in devs:
        for arr in dev.values():
            arr.free()
        dev.clear()


def _check_host_out(out, shape, c_dtype, B):
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray for host inputs, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if out.dtype not in (c_dtype, np.dtype(np.float32)):
        raise TypeError(f"out has dtype {out.dtype}, expected {c_dtype} (B's) or float32")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writeable")
    if np.shares_memory(out, B):
        raise ValueError("out must not overlap B")


def _torch_host(plan, B, out, stream, check_finite):
    """A CPU tensor: computed through NumPy (bf16 travels as its bits), returned as a tensor."""
    import torch

    name = str(B.dtype).replace("torch.", "")
    plan._check_b(tuple(B.shape), name)
    if B.requires_grad and torch.is_grad_enabled():
        if out is not None:
            raise RuntimeError("out= is not supported when B requires grad")
        return _HalfFunction.apply(B, plan, stream, check_finite)
    Bd = B.detach().contiguous()
    half_t = torch.float16 if plan.precision == "fp16" else torch.bfloat16
    if B.dtype == half_t:
        bits = Bd.view(torch.int16).numpy().view(np.uint16)
        arr = bits.view(np.float16) if plan.precision == "fp16" else None
    else:
        arr = Bd.to(torch.float32).numpy()
    if arr is None:  # bf16 without a NumPy dtype: exact float32 values in, the result rounded back
        Cf = plan._call_host(widen(bits, "bf16"), None, stream, check_finite)
        C = torch.from_numpy(round_bits(Cf, "bf16")[0].view(np.int16)).view(torch.bfloat16).reshape(Cf.shape)
    else:
        C = torch.from_numpy(np.ascontiguousarray(plan._call_host(arr, None, stream, check_finite)))
    if out is not None:
        if not isinstance(out, torch.Tensor) or out.is_cuda or tuple(out.shape) != tuple(C.shape):
            raise ValueError(f"out must be a CPU tensor of shape {tuple(C.shape)}")
        if out.dtype not in (C.dtype, torch.float32):
            raise TypeError(f"out has dtype {out.dtype}, expected {C.dtype} or float32")
        if out.dtype == torch.float32 and C.dtype != torch.float32:
            raise TypeError("out=float32 with a half CPU tensor B: pass B as float32 to keep FP32 sums")
        out.copy_(C)
        return out
    return C


class _DeviceWorkspace:
    """Workspace of split block rows for host calls: a plan-free temporary."""

    def __init__(self, device):
        self.device, self.arr = device, None

    def get(self, floats):
        self.arr = DeviceArray((floats,), np.float32, self.device)
        return self.arr.ptr


class _TorchWorkspace:
    """From PyTorch's caching allocator on the caller's stream (safe under CUDA-graph capture)."""

    def __init__(self, device):
        self.device, self.t = device, None

    def get(self, floats):
        import torch

        self.t = torch.empty(floats, dtype=torch.float32, device=self.device)
        return self.t.data_ptr()


class _CupyWorkspace:
    def __init__(self):
        self.a = None

    def get(self, floats):
        import cupy

        self.a = cupy.empty(floats, dtype=cupy.float32)
        return self.a.data.ptr


def _half_function():
    import torch

    class HalfFunction(torch.autograd.Function):
        """C = A @ B with dL/dB = A^T @ dL/dC, both in the plan's precision (A's values are constants)."""

        @staticmethod
        def forward(ctx, B, plan, stream, check_finite):
            ctx.plan = plan
            with torch.no_grad():
                return plan(B.detach(), stream=stream, check_finite=check_finite)

        @staticmethod
        def backward(ctx, grad):
            with torch.no_grad():
                return ctx.plan.transposed()(grad.contiguous()), None, None, None

    return HalfFunction


class _LazyFunction:
    def __getattr__(self, name):
        fn = _half_function()
        globals()["_HalfFunction"] = fn
        return getattr(fn, name)


_HalfFunction = _LazyFunction()


from . import _plan  # noqa: E402  (the torch.compile hooks; _plan imports this module first)

"""TF32 Tensor-Core SpMM on BitTCF: host-side TF32 rounding, the schedule and its cost model, the
kernel variant, upload and launch.  Kernel: cuda/tf32_spmm.cu (its header describes the tasks).

Schedule (Acc-SpMM §3.5, our cost model).  A thread block of ``WARPS`` warps runs one *task* for
one column slice of 32*S columns:

- PACK: each warp runs a run of consecutive short windows (whole) as one pipelined stream;
- GROUP: a window with cap < blocks <= WARPS cap gets g = ceil(blocks / cap) consecutive warps
  (equal block ranges); several such windows share a thread block, packed greedily in window
  order; the group's first warp sums the g partials (shared memory) in warp order;
- SPLIT: a window with more than WARPS cap blocks is cut into Q = ceil(blocks / (WARPS cap))
  parts, one task each, so every warp gets about ``cap`` blocks.  A part's warps sum in warp
  order in shared memory; each part writes its 8 x 32S tile to a workspace slot and the part
  that arrives last (an atomic counter per window and slice) sums the Q tiles in part order.
  Deterministic, one launch, no float atomics.

Packing is greedy in window order: a warp takes windows while its cost stays within
``cap + WB``.  Cost units are one TC block's work for one column slice (its B rows loaded, 2S
MMAs).  The model prices:

    block            1
    window write-back WB = 2      (8 rows of C stored, the next window's offsets and rows)
    pipeline fill    FILL = 2     (per warp stream: the first loads are not hidden)
    SPLIT reduction  REDUCE = 2   (barriers, partials through shared memory)
    multi-part merge MERGE = 2    (x (1 + Q): a tile to the workspace, Q tiles read by the last part)
    task             TASK = 4     (thread-block start: schedule row, window offsets, metadata ring)

A thread block finishes with its slowest warp, so a task costs TASK + the max over its warps.
The predicted time of a schedule is the list-scheduling bound
``sum of task costs x slices / P + max task cost`` with ``P = REF_SMS x blocks per SM``
concurrent thread blocks: the first term is the work, the second the tail of the last wave.
``REF_SMS`` is a fixed reference width (132, an H100/H200), not the device's, so a matrix and N
always get the same schedule and the same result bits on every GPU.  Where the identity schedule
(cap 0) alone fills a wave (its tasks x slices >= P), the decision adds two costs the bound lacks
(``decision_predictions``): a cost per window cut over several warps and a factor on every packed
cap (``DECISION_TERMS``: the same for every operand format).
The cap with the lowest prediction among the ``CAPS`` that ``packing_caps`` keeps (at most
``PACK_WINDOWS`` windows of the mean length per warp, but caps large enough to cut the longest window
in at most ``SPLIT_PARTS_MAX`` parts) is used (ties: the larger cap); cap 0 is the
identity schedule (one window per warp, no split).  The constants were fitted on an H100 sweep (12 matrices >= 100k nnz,
N = 128 and 512, caps 0..128 each timed; benchmarks/NOTES.md) with 8-warp thread blocks; a refit
for 2-warp blocks (benchmarks/fit_caps.py, 24 matrices x N = 32-512) did not beat them under
cross-validation, and with the packing limit the chosen cap was 2.8-2.9% slower than the fastest
cap in geometric mean (three runs), 1.7% with the decision's two terms below
(benchmarks/results/h100_variant_guess_cut_terms.txt).  ``plan.stats['schedule_by_n'][n]`` records
every prediction, the choice and the reason, with the paper's imbalance degree (IBD) beside it.

Where it is built: on the device (cuda/tf32_schedule.cu) by default.  A plan prices every cap of
``CAPS`` on the library's side stream as soon as its window offsets are on the device, reads the
8 numbers per cap at its first call's decision, and builds the chosen cap's task rows there (in
LPT order with a stable radix sort): no host pass over the windows and no upload.  The C schedule
(csrc/acc_schedule_cost.c) gives the same sums, counts and rows; it stays the reference, serves a
forced cap outside ``CAPS`` and ``tuning={"schedule": "host"}``, and the tests compare the two.

Narrow widths: n <= ``_cuda.tf32_narrow_max()`` (4) run the same tasks on CUDA cores
(cuda/tf32_spmm.cu, ``narrow_kernel``), where an MMA would compute 8-32 columns for each useful one;
no variant applies there and none is timed, and ``stats['schedule_by_n'][n]['kernel']`` says which
kernel ran.  Widths 5-32 of BitTCF plans run on A's CSR instead (``wide_csr``: ``cuda_cores_csr_wide``)
where a time model predicts the CSR kernel at least 10% faster, and widths 33-256 where its row groups
fit one wave of the GPU and BitTCF's blocks are sparse (``CSR_WIDE_SMALL_*``); neither the schedule nor
a variant applies to it.

Variant (no effect on result bits, see cuda/tf32_spmm.h): 64 columns per warp (S = 2) for n > 32,
else 32, and 32 as well for odd multiples of 32 (so that n is a multiple of the slice width, which
the kernel's 16-byte path needs) and when the S = 2 grid would be under one wave of thread blocks
(``WAVE_BLOCKS_PER_SM``; the first call then times S = 2 too); at S = 2, B and values staged
through shared memory with cp.async (``staged``, depth 2); at S = 1 the same when B is larger than
half the L2, else loaded into registers (depth 3; depth 2 where the one-wave rule chose S = 1); B
cached in L1 and L2; column slices in the slow grid dimension (slice-major) when B does not fit in
L2 but one slice fits in half of it; the tasks launched longest predicted task first (``order`` 1,
``lpt_order``: skewed matrices lose less to the last wave) when B fits in half the L2, else in
window order (neighbouring windows' B rows stay together in L2, which DRAM-bound matrices need).
These rules are the model's guess, and a default plan launches it; measured against every
candidate on 24 real matrices at N = 32-512 it is 3% slower than the fastest candidate of its
schedule in geometric mean, 9% before these rules (``benchmarks/variant_guess.py``).  With ``calls`` of at least
``AUTOTUNE_MIN_CALLS`` the first call for each n times the candidate variants of the same schedule
(``TF32Runner.candidates``: the guess, the register and staged pipelines, both grid orders), then
the fastest in the other task order, on the caller's data, then the two fastest again with more
launches, and keeps the faster (``tuning={"autotune": False}`` keeps the guess).
Measurements in benchmarks/NOTES.md.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import _core
from ._device import DeviceArray, DeviceView, HostSlot, _cuda_for_arrays
from ._validate import INT32_MAX

WARPS = 2  # ACC_TF32_WARPS in cuda/tf32_spmm.h (checked against the built extension)
TASK_WORDS = 1 + 2 * WARPS  # ACC_TF32_TASK_WORDS: int32 per task row
#: The first call for each width times ~50 launches of candidate kernel variants (TF32Runner.tune): on
#: by default only when the plan is told it will make at least this many calls (then the timing costs a
#: few percent of them at most); TF32 plans and FP16/BF16 plans on BitTCF alike.
AUTOTUNE_MIN_CALLS = 1000
WB = 2.0
FILL = 2.0
REDUCE = 2.0
TASK = 4.0
MERGE = 2.0
REF_SMS = 132
_CONSTANTS = (WB, FILL, REDUCE, TASK, MERGE)  # the model's constants, in the C core's order
_INT_CONSTANTS = tuple(int(c) for c in _CONSTANTS)  # the device schedule's (whole numbers)


def _counter_bytes(counters: int) -> int:
    """Bytes of a split workspace allocation before its floats: the int32 counters, 256-byte aligned."""
    return -(-4 * counters // 256) * 256


def blocks_per_sm(variant: dict) -> int:
    """Concurrent thread blocks per SM of a variant: the kernel's __launch_bounds__ (registers)."""
    per8 = 8 // WARPS  # the register budget is per 8 warps
    s = variant["slice_s"] or 1  # narrow steps (S = 0) run the S = 1 launch bounds
    if variant["staged"]:
        return per8 * (4 if s == 1 else 3)
    return per8 * (3 if s == 1 and variant["depth"] == 2 else 2)


CAPS = (0, 2, 4, 8, 16, 32, 64, 128, 256)
_CAP_INDEX = {c: i for i, c in enumerate(CAPS)}  # a cap's place in the device schedule's prices
_CAP_KEY = {c: str(c) for c in CAPS}  # their stats keys (a str() of each at every decision is slow)
#: the one-wave rule's wave: S = 2 grids of fewer than REF_SMS x this many thread blocks run at S = 1.
#: 8 is the register pipeline's occupancy at S = 2, which the rule was set with; at the staged
#: pipeline's 12 (the S = 2 default since), 11 matrices and widths moved to S = 1 and all 11 ran
#: 5-25% slower there (benchmarks/variant_guess.py, benchmarks/NOTES.md)
WAVE_BLOCKS_PER_SM = 8
#: at most this many windows of the matrix's mean length per warp (``packing_caps``): measured on the
#: 24 real matrices x N = 32-512 (benchmarks/fit_caps.py data), 4 chose caps 3.0% slower than the
#: fastest cap in geometric mean, against 4.4% without the limit, and never more than 2% slower than
#: the unlimited choice
PACK_WINDOWS = 4
#: ... but never so few that the longest window is cut in more than this many parts, whose tiles the
#: last part sums one after another (``packing_caps``).  On the 24 real matrices the largest kept cap
#: cuts the longest window in at most 19 parts (cnr-2000), so the limit leaves their caps alone; a
#: star graph of 1M nonzeros (a window of 62,500 blocks, 2 blocks a window on average) was cut in 3,907
#: parts at cap 8, 583 us at N = 32 and 1,337 us at N = 128 against 106 and 246 us at caps 128 and 256
#: (H100, TF32; the hub shape of accspmm.datasets.adversarial: 2.1x; benchmarks/NOTES.md)
SPLIT_PARTS_MAX = 64
#: Narrow widths (CUDA cores, ``_cuda.tf32_narrow_max()``): a warp walks its range four blocks at a time,
#: one after another, and a part's merge is 8 x n floats, so caps stay at most NARROW_CAP_MAX and a long
#: window may take up to NARROW_SPLIT_PARTS_MAX parts.  H100, TF32, every cap timed at n = 1 and 4 on 7
#: real matrices and 3 adversarial shapes (benchmarks/NOTES.md): the fastest cap was 0-32 on all but the
#: dense row (64: 37 us, 32: 52, 256: 58); the star graph took 96 us at the cap 256 that SPLIT_PARTS_MAX
#: gives the Tensor Cores and 34 at 32.
NARROW_CAP_MAX = 32
NARROW_SPLIT_PARTS_MAX = 1024
TUNE_REPS = 3  # timed launches per candidate variant on the first call for each n
CONFIRM_REPS = 7  # then the two fastest again with this many, and the faster of those wins
MAX_WORKSPACES = 4  # per plan: split workspaces kept (one per stream, as large as the largest need)
KERNEL_KEYS = ("slice_s", "depth", "cache_l1", "slice_major", "staged")  # acc_tf32_variant
# plus the launch order of the tasks: 0 window order, 1 longest predicted task first
VARIANT_KEYS = KERNEL_KEYS + ("order",)


def pack_meta(fmt) -> np.ndarray:
    """The kernel's metadata of each TC block as one 48-byte record (12 int32, see
    ``block_meta`` in cuda/tf32_spmm.h): the 8 columns interleaved (c0, c4, c1, c5, ...), the
    64-bit mask, the 64-bit value offset, each low word first.

    Padding slots (column -1 in BitTCF) get a real column, so the kernel loads every B row
    without a predicate: slot t < 4 takes slot 0's column, slot t + 4 takes slot t's (the same
    lane's other row, an L1 hit).  Their mask bits are clear, so they multiply B by zero, which
    is exact for finite B; an output tile that a non-finite B value makes NaN this way is
    recomputed exactly by the kernel (``exact_tile`` in cuda/tf32_spmm.cu)."""
    nb = fmt.num_blocks
    meta = np.empty((nb, 12), np.int32)
    cols = np.asarray(fmt.block_cols, np.int32).reshape(nb, 8)
    lo = np.where(cols[:, 0:4] < 0, cols[:, :1], cols[:, 0:4])
    if nb and int(lo.min()) < 0:
        raise ValueError("BitTCF block without a column")
    meta[:, 0:8:2] = lo
    meta[:, 1:8:2] = np.where(cols[:, 4:8] < 0, lo, cols[:, 4:8])
    for at, words in ((8, fmt.block_mask), (10, fmt.block_value_offsets[:nb])):
        w = np.asarray(words).astype("<u8", copy=False)
        meta[:, at] = (w & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        meta[:, at + 1] = (w >> 32).astype(np.uint32).view(np.int32)
    return meta.reshape(-1)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest TF32 (10-bit mantissa), ties away from zero, as cvt.rna.tf32.f32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), r, x).astype(np.float32)


def schedule(window_offsets, cap: int, ntasks: int | None = None):
    """The schedule for ``cap`` (module docstring): ``tasks`` int32 [T, TASK_WORDS] in the kernel's
    encoding (cuda/tf32_spmm.h), ``task_cost`` float64 [T] in model units (one column slice), and
    (workspace slots, multi-part splits, windows of more than cap blocks) (the tasks of multi-part
    SPLIT windows, those windows, and the windows cut over several warps: GROUP members or multi-part
    SPLIT, none for the identity schedule, cap 0).
    One C pass over the windows (csrc/acc_schedule_cost.c; tests/schedule_reference.py is the
    NumPy form the tests compare it with), two without ``ntasks``: the task count of this cap
    (``price_terms`` counts it), which the build checks."""
    wo = np.ascontiguousarray(window_offsets, dtype=np.int64)
    if wo.shape[0] - 1 > INT32_MAX - 2:
        raise ValueError("too many row windows for the TF32 kernel (limit 2^31 - 2)")
    return _core.schedule_build(wo, int(cap), WARPS, _CONSTANTS,
                                -1 if ntasks is None else int(ntasks))  # -1: count them


def build_tasks(window_offsets, cap: int):
    """(tasks, task_cost) of ``schedule``."""
    return schedule(window_offsets, cap)[:2]


def variant_tag(v: dict) -> str:
    """Short name of a kernel variant, e.g. reg-s2d3-o0 (register pipeline, S = 2, depth 3;
    -lpt: longest predicted task first)."""
    return "{}-s{slice_s}d{depth}-o{slice_major}{}{}".format(
        "stg" if v["staged"] else "reg", "" if v["cache_l1"] else "-l2", "-lpt" if v.get("order") else "", **v)


def lpt_order(task_cost: np.ndarray) -> np.ndarray:
    """Launch order "longest predicted task first" (stable: ties keep window order), int64; what
    ``np.argsort(-task_cost, kind="stable")`` gives, in one C pass (csrc/acc_lpt_rows.c: a counting
    sort of the integer-valued costs).  The hardware hands thread blocks to SMs in index order, so
    long tasks started last would set the tail; the order of the tasks never changes a result bit."""
    return _core.lpt_order(np.ascontiguousarray(task_cost, dtype=np.float64))


#: Narrow widths (n <= 4) of BitTCF plans (TF32, FP16, BF16) run on A's CSR (cuda/tf32_spmm.cu
#: csr_narrow_kernel: L lanes a row, the rows longer than CSR_LONG entries cut into parts of at most CSR_PART
#: entries, a thread block of CSR_BLOCK threads each) or on BitTCF (narrow_kernel), whichever of two time
#: models (µs at n = 1) predicts faster:
#:   CSR:    c0 + c1 m L / 1e6 + c2 ceil(short / L) / 4 + c3 nnz / 1e6 + c4 ceil(part / CSR_BLOCK) / 4
#:           (the lanes' work; the longest short row's turns, four a latency, as a row's L lanes walk it
#:           alone; the entries; the longest part's turns, where there is a long row), at the L in 1..32
#:           that minimises it;
#:   BitTCF: b0 + b1 blocks / 1e6 + b2 windows / 1e6.
#: Least squares in relative error on H100 kernel times (24 real matrices, 8 adversarial shapes, every L;
#: benchmarks/NOTES.md, "narrow widths on A's CSR").  The constants are fixed (not the device's), so a
#: matrix always gets the same kernel and the same bits.
CSR_NARROW_MODEL = (4.70, 4.50, 0.454, 1.81, 0.391)
BITTCF_NARROW_MODEL = (6.52, 86.2, 133.7)
#: The BitTCF narrow kernel on FP16/BF16 tiles (the CSR kernel runs as fast on half operands as on TF32 ones,
#: within 3% on the same 30 matrices): the same least squares on its FP16 times at n = 1 (24 real matrices
#: and 6 adversarial shapes, H100; benchmarks/NOTES.md, "long rows in parts"), which also scores it.
BITTCF_NARROW_MODEL_HALF = (6.66, 60.6, 172.6)
CSR_LANES = (1, 2, 4, 8, 16, 32)
CSR_BLOCK = 256
CSR_LONG = 1024  # cuda/tf32_spmm.h ACC_TF32_CSR_LONG (checked against the extension's at a runner's start)
CSR_PART = 4096  # a long row's entries per part, at most (a thread block each)
#: Host-to-device bytes per µs assumed for the CSR upload where the plan knows its call count (``calls``):
#: the CSR kernel is then taken only if the predicted saving over those calls pays for its upload.
CSR_UPLOAD_BYTES_PER_US = 10_000


#: Wider widths of BitTCF plans, n = 5 .. CSR_WIDE_MAX_N (above it: CSR_WIDE_SMALL_*), may run on A's CSR too
#: (cuda/tf32_spmm.cu, csr_wide_kernel: ``csr_wide_lanes(n)`` lanes a row and 4 columns a lane; the rows of more than
#: CSR_WIDE_LONG entries cut into parts of at most CSR_WIDE_PART entries, a group of lanes each), where
#: its time model predicts at most CSR_WIDE_MARGIN x the BitTCF kernel's (µs):
#:   CSR:    c0 + c1 m w / 1e6 + c2 nnz w / 1e6 + c3 nnz w / 1e6 [k n 4 bytes > L2_REF] + c4 P / 100 + c5 log2 P
#:           (w = the columns the groups cover, 4 lanes x ceil(n / 4 lanes); P the longest row's parts, 1
#:           where it has at most CSR_WIDE_LONG entries), x CSR_WIDE_ELEMENT where n is not a multiple of 4
#:           (B's rows read element by element: the median of the kernel's times at n = 5 and 6 over n = 8
#:           on the 16 shapes the rule had taken at n = 5 without the factor);
#:   BitTCF: b0 + b1 blocks / 1e6 + b2 windows / 1e6 (one 32-column slice).
#: Least squares in relative error on H100 kernel times at n = 8 and 16 (24 real matrices, 7 adversarial
#: shapes; benchmarks/NOTES.md, "widths 5-16 on A's CSR"); fixed constants, so a matrix gets the same
#: kernel, and the same bits, on every GPU.  The same constants decide up to n = 32 (CSR_WIDE_MAX_N): the
#: Tensor Cores still compute one 32-column slice there (TF32; a half plan one 64-column slice), so the
#: BitTCF side is the one fitted, and the CSR side's w grows with n.  Checked out of sample at n = 24-32 on 12
#: structures the fit never saw (benchmarks/structures.py) and the real matrices (NOTES.md, "Session of
#: 2026-11-27, 21:47"); above 32 the Tensor Cores' time grows with n and no model separated the cases.
CSR_WIDE_LONG = 32  # cuda/tf32_spmm.h ACC_TF32_CSR_WIDE_LONG (checked against the extension's)
CSR_WIDE_PART = 32
#: Parts of up to CSR_WIDE_PART_LONG entries where the kernel's groups at CSR_WIDE_PART (a row of at most
#: CSR_WIDE_LONG entries one group, a longer row one per part) exceed the groups a reference H100 runs at once
#: (REF_SMS x 2,048 threads / lanes a row): there the parts' reductions cost more than the shorter critical path
#: buys; below it short parts spread few rows over more lanes.  H100, the kernel forced at n = 8, 16, 32 with
#: parts of 32 / 64 / 128 on 48 shapes (benchmarks/NOTES.md, "Session of 2026-11-27, 21:47"): set on one run,
#: then on a second with 8 new validation matrices this choice ran 1.049x over parts of 32 in geometric mean
#: (real matrices 0.999x, adversarial 1.19x, structures 1.02x, the new 8 1.10x; the 62 cases it changed 1.117x,
#: none slower beyond the unchanged cases' spread, 0.958-1.029x; an oracle of the three lengths 1.115x).  A row's
#: parts are its ceil(length / part) equal ranges either way; only the reduction order of a row in several
#: parts depends on the choice.  The rule's time model (csr_wide_time) prices parts of CSR_WIDE_PART, as fitted.
CSR_WIDE_PART_LONG = 64
CSR_WIDE_MAX_N = 32
#: TF32 widths above this that are not a multiple of 4 stay on the Tensor Cores: the CSR kernel reads B element
#: by element there, and on rows of ~100 entries that cost 1.6x its time at the next multiple of 4 (uniform
#: random rows of 0-199 entries at n = 17, 27, 30: 0.67-0.76x the Tensor Cores, beyond CSR_WIDE_ELEMENT; the
#: half plans' Tensor Cores pad such widths and stay slower than the CSR kernel there).
CSR_WIDE_ELEMENT_MAX_N = 16
CSR_WIDE_MODEL = (7.233, 2.535, 0.608, 0.431, 2.928, 1.144)
BITTCF_WIDE_MODEL = (8.04, 277.26, 227.17)
#: The same for BitTCF FP16/BF16 plans (half B and C), fitted on FP16 kernel times at n = 8-32 (8, 12, 16, 20, 24,
#: 32) of the real matrices and the adversarial shapes, with the 12 matrices of benchmarks/structures.py held out:
#: the CSR side on the widths that are a multiple of 4, with CSR_WIDE_ELEMENT_HALF (the median of n = 5-6 over n = 8,
#: 0.83-1.56x) and no term for B beyond L2; the Tensor-Core side in two fits, n a multiple of 8 (16-byte rows of
#: half B) and not (B and C copied to padded widths first).  Held out, the rule gains 1.95x / 2.13x / 1.58x /
#: 1.74x / 1.34x / 1.35x at n = 8 / 12 / 16 / 20 / 24 / 32 over the Tensor Cores (the constants fitted at n = 5-16
#: only: 1.95x / 2.08x / 1.58x / 1.69x / 1.26x / 1.27x); leave-one-matrix-out on the real and adversarial set
#: 1.23x / 1.50x / 1.12x / 1.39x / 1.06x / 1.06x (those: 1.23x / 1.51x / 1.12x / 1.25x / 1.02x / 1.02x), the worst
#: case the same (0.84x at n = 8).  `python benchmarks/fit_wide_csr.py fit
#: benchmarks/results/h100_wide_csr_fitdata.json` reproduces both; benchmarks/NOTES.md, "Session of 2026-11-27,
#: 21:47".  The same refit of the TF32 constants was not kept (held out: 0.66x at n = 8).
CSR_WIDE_MODEL_HALF = (7.1, 1.904, 0.419, 0.0, 3.283, 0.808)
CSR_WIDE_ELEMENT_HALF = 1.36
BITTCF_WIDE_MODEL_HALF = ((8.24, 333.9, 141.7), (10.46, 398.67, 591.14))  # n % 8 == 0, other n
#: Below n = 8 (not in that fit: B's rows read element by element, B and C padded to 8 columns for the Tensor
#: Cores) the constants fitted on n = 5-16 before it, which the n = 8-32 fit lost to at n = 5-6 (0.59x on dense
#: 32 x 32 diagonal blocks; 1.358x against their 1.377x over 40 shapes at n = 5).
CSR_WIDE_MODEL_HALF_LT8 = (6.988, 2.408, 0.579, 0.0, 2.877, 1.104)
BITTCF_WIDE_MODEL_HALF_LT8 = ((9.17, 306.69, 125.84), (12.27, 342.12, 351.75))
CSR_WIDE_MARGIN = 0.9
CSR_WIDE_ELEMENT = 1.3
#: Above CSR_WIDE_MAX_N, up to CSR_WIDE_SMALL_MAX_N, the Tensor Cores' time grows with n and the models above do not
#: separate the cases (fits of both kernels' times at n = 48-256, leave-one-matrix-out: 1.3-2.5% over the Tensor
#: Cores with losses to 0.75x, where an oracle gains 6%).  What does separate them is a regime: the CSR kernel takes
#: width n (a multiple of 4) where all its row groups run at once on a reference H100 (m x lanes <= REF_SMS x 2,048
#: threads), BitTCF's blocks hold at most CSR_WIDE_SMALL_FILL entries on average (of 64), no row is longer than
#: CSR_WIDE_SMALL_LONGEST (a few parts' chain), and its last column slice of 4 x lanes columns is more than half
#: used.  There both kernels are latency-bound, and the Tensor Cores pay a block's decode and MMAs for one or two
#: entries a column.  H100, both kernels forced at n = 48, 64, 96, 128, 192, 256 on the 22 real matrices, 7
#: adversarial shapes and 12 structures (benchmarks/NOTES.md, "Session of 2026-11-28"): the rule takes 47 TF32
#: cases (10 graphs) at 1.093x over the Tensor Cores in geometric mean, worst 0.94x, and 45 FP16 cases at 1.093x,
#: worst 0.99x; the half-used last slice is what n = 192 failed on (0.83-0.97x).
CSR_WIDE_SMALL_MAX_N = 256
CSR_WIDE_SMALL_FILL = 12
CSR_WIDE_SMALL_LONGEST = 4096
#: Beyond one wave, the same regime where rows hold at least CSR_WIDE_ROWS_MEAN entries on average, A at most
#: CSR_WIDE_ROWS_MAX_NNZ and B (k x n) fits the reference L2: a row group's start is then paid over many entries, and
#: B's rows, read once by each row that uses them, stay in L2.  H100, both kernels forced (the sweep above):
#: blogcatalog, musae_facebook and a 20,000-row graph of 50 a row 1.26x (TF32) and 1.29x (FP16) over the Tensor
#: Cores at n = 48-256, worst 1.07x and 1.03x, where Andrews (12.7 a row) lost 0.89x and 5M nonzeros of 100 a row
#: 0.86-0.93x.  Held out on two sets of 8 new seeded matrices (benchmarks/wide_small_validate.py SET=rows1, rows2;
#: benchmarks/NOTES.md, session of 2026-11-28 01:25): 32 and 25 TF32 cases at 1.29x and 1.27x, 32 and 27 FP16 cases
#: at 1.38x and 1.34x; the losses had B at or beyond the L2's size (0.90x before the L2 condition, then 0.87x).
CSR_WIDE_ROWS_MEAN = 14
CSR_WIDE_ROWS_MAX_NNZ = 1_000_000
#: the saving per call assumed where a known call count must repay the CSR upload: this fraction of the
#: Tensor Cores' modelled time (the rule's measured gain, 1.09x, rounded down)
CSR_WIDE_SMALL_SAVING = 0.08
#: GPU TF32 plans of at most this many rows (those the one-wave regime can take from n = 33: 16 lanes a row), and
#: those of long rows the regime takes beyond one wave (``csr_keep``), keep the BitTCF build's upload of A's CSR for
#: the CSR kernels, which would upload it again at their first call (the host's staging copy of 8 bytes a nonzero:
#: 0.2-0.6 ms of a first call on graphs of 0.1-0.2M nonzeros on the H100 machine)
CSR_KEEP_MAX_ROWS = REF_SMS * 2048 // 16


def csr_keep(m: int, nnz: int) -> bool:
    """Whether a GPU plan of A (m rows, nnz entries) keeps the build's upload of A's CSR (``CSR_KEEP_MAX_ROWS``):
    the rows the wide CSR regime can take (``_wide_csr_small``)."""
    return m <= CSR_KEEP_MAX_ROWS or _long_rows(m, nnz)


def _long_rows(m: int, nnz: int) -> bool:
    """Rows long enough on average, in a small enough A, for the wide CSR regime beyond one wave."""
    return nnz <= CSR_WIDE_ROWS_MAX_NNZ and nnz >= CSR_WIDE_ROWS_MEAN * m


#: Half operands at n >= CSR_WIDE8_MIN_N (a multiple of 8) run the wide CSR kernel with half its lanes, 8 columns each
#: (cuda/tf32_spmm.cu, csr_wide_g: half the shuffles, address and loop steps per entry, twice the products a lane) where
#: A has at least CSR_WIDE8_MIN_ROWS rows of at least CSR_WIDE8_MEAN entries on average.  H100, both forced on 15
#: seeded and 8 real matrices at n = 16-256 (benchmarks/NOTES.md, "Session of 2026-11-28, 02:48"): FP16 1.06x at
#: n = 64 and 256, 1.03x at 128, 0.93-0.94x at n = 16-32; by rows: 1.06-1.5x on rows of 30-200 entries
#: (blogcatalog n = 64-256 1.18-1.29x), 0.87-1.13x on rows of 3-20, 0.97-0.98x on email-Eu-core's 1,005 rows; TF32 (two
#: 16-byte loads an entry) 0.94x, so TF32 plans keep 4 columns.  Held out (the 18 matrices of wide_small_validate's
#: SET=rows1 and rows2, n = 64-256): the rule takes 21 cases at 1.094x, worst 0.91x (200,000 columns, n = 256).
CSR_WIDE8_MIN_N = 64
CSR_WIDE8_MEAN = 24
CSR_WIDE8_MIN_ROWS = 2048


def csr_wide_lane_cols(n: int, m: int, nnz: int, elem: int) -> int:
    """Columns a lane of the wide CSR kernel at width n (4, or 8 on half the lanes: CSR_WIDE8_*) for A of ``m`` rows and
    ``nnz`` entries, operands ``elem`` (0: TF32)."""
    eight = elem and n >= CSR_WIDE8_MIN_N and n % 8 == 0 and m >= CSR_WIDE8_MIN_ROWS and nnz >= CSR_WIDE8_MEAN * m
    return 8 if eight else 4


L2_REF = 50 * 2**20  # the H100's L2 (bytes): the model's, not the device's


def csr_wide_lanes(n: int) -> int:
    """Lanes a row of the wide CSR kernel at width n: the least power of two >= n / 4, from 2 to 32
    (cuda/tf32_spmm.cu, acc_tf32_csr_wide_lanes)."""
    g = 2
    while g < 32 and 4 * g < n:
        g *= 2
    return g


def csr_wide_time(n: int, m: int, k: int, nnz: int, longest: int, elem: int = 0) -> float:
    """The wide CSR kernel's modelled time (µs) at width n: ``m`` x ``k``, ``nnz`` entries, the longest row
    ``longest`` entries (``CSR_WIDE_MODEL``; ``CSR_WIDE_MODEL_HALF`` for half operands, ``elem`` > 0, and
    ``CSR_WIDE_MODEL_HALF_LT8`` below n = 8)."""
    c0, c1, c2, c3, c4, c5 = (CSR_WIDE_MODEL_HALF_LT8 if n < 8 else CSR_WIDE_MODEL_HALF) if elem else CSR_WIDE_MODEL
    g = csr_wide_lanes(n)
    w = 4 * g * -(-n // (4 * g))
    parts = -(-longest // CSR_WIDE_PART) if longest > CSR_WIDE_LONG else 1
    far = k * n * (2 if elem else 4) > L2_REF
    t = (c0 + c1 * m * w / 1e6 + c2 * nnz * w / 1e6 + (c3 * nnz * w / 1e6 if far else 0.0) + c4 * parts / 100
         + c5 * math.log2(parts))
    return t * (CSR_WIDE_ELEMENT_HALF if elem else CSR_WIDE_ELEMENT) if n % 4 else t


def wide_csr(n: int, m: int, k: int, nnz: int, longest: int, blocks: int, windows: int,
             calls: int | None = None, uploaded: bool = False, elem: int = 0) -> tuple:
    """(on, reason): whether a BitTCF plan runs width n (> the narrow widths) on the wide CSR kernel: n at
    most CSR_WIDE_MAX_N (TF32: a multiple of 4 above CSR_WIDE_ELEMENT_MAX_N) and ``csr_wide_time`` at most
    CSR_WIDE_MARGIN x ``BITTCF_WIDE_MODEL``'s time (BitTCF's ``blocks`` and ``windows``; ``elem`` > 0, half
    operands: the ``_HALF`` constants); above CSR_WIDE_MAX_N, up to CSR_WIDE_SMALL_MAX_N, the one-wave regime of
    sparse blocks instead (``CSR_WIDE_SMALL_*``).  ``calls``: the products
    the plan expects (None: many); unless A's CSR is already ``uploaded``, the predicted saving over them must
    also pay for its upload (``CSR_UPLOAD_BYTES_PER_US``)."""
    on, why, saving = (_wide_csr_small if n > CSR_WIDE_MAX_N else _wide_csr_model)(n, m, k, nnz, longest, blocks,
                                                                                  windows, elem)
    if not on:
        return False, f"Tensor Cores: {why}" if why else ""
    if calls is not None and not uploaded:
        upload = (8 * (m + 1) + 8 * nnz) / CSR_UPLOAD_BYTES_PER_US
        if calls * saving < upload:
            return False, f"Tensor Cores: {why}; {calls} calls save less than the CSR upload ({upload:.0f})"
    return True, f"wide CSR kernel: {why}"


def _bittcf_wide_time(n: int, blocks: int, windows: int, elem: int, slices: int = 1) -> float:
    """The Tensor Cores' modelled time (µs) at width n in ``slices`` column slices (``BITTCF_WIDE_MODEL*``)."""
    b0, b1, b2 = ((BITTCF_WIDE_MODEL_HALF_LT8 if n < 8 else BITTCF_WIDE_MODEL_HALF)[n % 8 != 0] if elem
                  else BITTCF_WIDE_MODEL)
    return b0 + slices * b1 * blocks / 1e6 + slices * b2 * windows / 1e6


def _wide_csr_model(n: int, m: int, k: int, nnz: int, longest: int, blocks: int, windows: int, elem: int) -> tuple:
    """``wide_csr`` up to CSR_WIDE_MAX_N, by the two time models: (on, reason, predicted saving a call in µs)."""
    if not elem and n % 4 and n > CSR_WIDE_ELEMENT_MAX_N:
        return False, "", 0.0
    csr = csr_wide_time(n, m, k, nnz, longest, elem)
    bit = _bittcf_wide_time(n, blocks, windows, elem)
    return csr <= CSR_WIDE_MARGIN * bit, f"CSR predicts {csr:.1f} µs, BitTCF {bit:.1f} (longest row {longest})", \
        bit - csr


def _wide_csr_small(n: int, m: int, k: int, nnz: int, longest: int, blocks: int, windows: int, elem: int) -> tuple:
    """``wide_csr`` above CSR_WIDE_MAX_N: the CSR kernel in its one-wave regime of sparse blocks (CSR_WIDE_SMALL_*),
    or beyond one wave where rows are long (CSR_WIDE_ROWS_*), (on, reason, the saving a call assumed:
    CSR_WIDE_SMALL_SAVING of the Tensor Cores' modelled time)."""
    g = csr_wide_lanes(n)
    last = n % (4 * g)
    if n > CSR_WIDE_SMALL_MAX_N or n % 4 or (last and last <= 2 * g):
        return False, "", 0.0
    why = (f"{m} rows x {g} lanes, {nnz / max(m, 1):.1f} entries a row, {nnz / max(blocks, 1):.1f} a block, "
           f"longest row {longest} (one wave: at most {REF_SMS * 2048} lanes, or {CSR_WIDE_ROWS_MEAN} a row, "
           f"{CSR_WIDE_ROWS_MAX_NNZ} in all and B in L2; at most {CSR_WIDE_SMALL_FILL} a block and "
           f"{CSR_WIDE_SMALL_LONGEST} a row)")
    in_l2 = k * n * (2 if elem else 4) <= L2_REF  # B, whose rows each row group reads once
    on = ((m * g <= REF_SMS * 2048 or (_long_rows(m, nnz) and in_l2)) and nnz <= CSR_WIDE_SMALL_FILL * blocks
          and longest <= CSR_WIDE_SMALL_LONGEST)
    return on, why, CSR_WIDE_SMALL_SAVING * _bittcf_wide_time(n, blocks, windows, elem, -(-n // UNIT[elem]))


def csr_narrow_time(m: int, nnz: int, short: int, lanes: int, longest: int = 0) -> float:
    """The CSR narrow kernel's modelled time (µs, n = 1) with ``lanes`` lanes a row, ``short`` entries
    in its longest row of at most CSR_LONG and ``longest`` in its longest row (cut into parts of at most
    CSR_PART entries, a thread block's each, where longer than CSR_LONG)."""
    c0, c1, c2, c3, c4 = CSR_NARROW_MODEL
    t = c0 + c1 * m * lanes / 1e6 + c2 * -(-short // lanes) / 4 + c3 * nnz / 1e6
    if longest <= CSR_LONG:
        return t
    part = -(-longest // -(-longest // CSR_PART))  # the longest part of the longest row
    return t + c4 * -(-part // CSR_BLOCK) / 4


def csr_wide_count(indptr: np.ndarray) -> tuple:
    """(long rows, their parts of CSR_WIDE_PART, the longest row) of A of offsets ``indptr``, for the wide CSR
    kernel (rows of more than CSR_WIDE_LONG entries): one C pass, no records."""
    return _core.csr_long_parts(np.ascontiguousarray(indptr, np.int64), CSR_WIDE_LONG, CSR_WIDE_PART, True)


def csr_wide_part(indptr: np.ndarray, n: int, count: tuple | None = None) -> int:
    """The wide CSR kernel's part length at width n (CSR_WIDE_PART_LONG or CSR_WIDE_PART) for A of offsets
    ``indptr``: the longer parts where the groups at CSR_WIDE_PART (the rows, a long row counted once per part)
    exceed REF_SMS x 2,048 / lanes; from ``csr_wide_count`` (``count``: its result for these offsets)."""
    rows, parts, _ = csr_wide_count(indptr) if count is None else count
    groups = len(indptr) - 1 - rows + parts
    return CSR_WIDE_PART_LONG if groups > REF_SMS * 2048 // csr_wide_lanes(n) else CSR_WIDE_PART


def csr_long_parts(indptr: np.ndarray, long: int = CSR_LONG, part: int = CSR_PART,
                   parts: int | None = None) -> np.ndarray:
    """The CSR kernel's parts of the rows of more than ``long`` entries (which its rows' lanes skip by the
    same test; CSR_LONG and CSR_PART for the narrow kernel's thread blocks, CSR_WIDE_LONG and
    CSR_WIDE_PART for the wide kernel's groups), from A's offsets: int64 [4 P], part q's row, its first
    entry, its end (CSR positions) and (its index j in the row) | (the row's parts << 32) at 4 q .. 4 q + 3;
    a row's ceil(length / part) parts cut it into equal ranges (j * length // parts ..), consecutive, rows
    ascending (cuda/tf32_spmm.h, acc_tf32_csr).  Two C passes (csrc/acc_csr_long_parts.c), one where
    ``parts`` gives their number (a count of the same offsets: ValueError where they make another)."""
    offsets = np.ascontiguousarray(indptr, np.int64)
    if parts is None:
        return _core.csr_long_parts(offsets, int(long), int(part))
    return _core.csr_long_parts(offsets, int(long), int(part), False, int(parts))


def narrow_csr(indptr: np.ndarray, num_blocks: int, num_windows: int, force: bool = False,
               calls: int | None = None, bittcf_model: tuple = BITTCF_NARROW_MODEL) -> tuple:
    """(lanes, long parts, reason): whether a BitTCF plan runs its narrow widths (n <= 4) on A's CSR
    (lanes > 0 lanes a row; the rows of more than CSR_LONG entries in thread-block parts:
    ``csr_long_parts``) or on BitTCF (lanes 0), by ``CSR_NARROW_MODEL`` and ``BITTCF_NARROW_MODEL`` (host
    passes over the offsets, at the first narrow call); ``force``: the CSR kernel at the model's lanes.
    ``calls``: the products the plan expects (None: many); the CSR kernel then also needs ``calls`` x the
    predicted saving to exceed its upload (``CSR_UPLOAD_BYTES_PER_US``).  ``bittcf_model``: the BitTCF side's
    constants (``BITTCF_NARROW_MODEL_HALF`` for half operands)."""
    m = indptr.shape[0] - 1
    nnz = int(indptr[-1] - indptr[0]) if m else 0
    lengths = np.diff(indptr)
    longest = int(lengths.max()) if m else 0
    parts = csr_long_parts(indptr) if longest > CSR_LONG else np.zeros(0, np.int64)
    nlong = int((lengths > CSR_LONG).sum()) if parts.size else 0
    short = int(lengths[lengths <= CSR_LONG].max()) if 0 < nlong < m else (0 if nlong else longest)
    lanes = min(CSR_LANES, key=lambda L: (csr_narrow_time(m, nnz, short, L, longest), L))
    csr = csr_narrow_time(m, nnz, short, lanes, longest)
    b0, b1, b2 = bittcf_model
    bit = b0 + b1 * num_blocks / 1e6 + b2 * num_windows / 1e6
    why = (f"CSR at {lanes} lanes a row and {nlong} long rows in {parts.size // 4} parts predicts {csr:.1f} "
           f"units, BitTCF {bit:.1f} (longest row {longest})")
    if force:
        return lanes, parts, f"CSR kernel (forced): {why}"
    if csr < bit and calls is not None:
        upload = (8 * (m + 1) + 8 * nnz + 8 * parts.size) / CSR_UPLOAD_BYTES_PER_US
        if calls * (bit - csr) < upload:
            return 0, parts, f"BitTCF narrow kernel: {why}; {calls} calls save less than the CSR upload ({upload:.0f})"
    return (lanes, parts, f"CSR kernel: {why}") if csr < bit else (0, parts, f"BitTCF narrow kernel: {why}")


def packing_caps(caps, mean_blocks: float, longest: int = 0, parts_max: int = SPLIT_PARTS_MAX) -> tuple:
    """The caps of ``caps`` that pack at most ``PACK_WINDOWS`` windows of the mean length per warp
    (cap <= PACK_WINDOWS x (mean blocks per window + WB)), and always the smallest: the cost model
    prices a window's blocks and write-back, not what longer warps lose, and G3_circuit (3.8 blocks
    per window) ran 16-29% slower at the caps 64 and 128 it chose than at 16 (benchmarks/NOTES.md).
    Where the largest of those would cut the longest window (``longest`` blocks) into more than
    ``parts_max`` parts (``SPLIT_PARTS_MAX``), the larger caps up to the first that cuts it into at most
    that many are kept as well (a star graph's hub: thousands of parts summed one after another by the
    last)."""
    limit = PACK_WINDOWS * (mean_blocks + WB)
    kept = tuple(c for c in caps if c <= limit) or (min(caps),)
    big = max(kept)
    if big > 0 and longest > WARPS * parts_max * big:
        larger = sorted(c for c in caps if c > big)
        reach = next((c for c in larger if WARPS * parts_max * c >= longest), larger[-1] if larger else big)
        kept = tuple(c for c in caps if c in kept or big < c <= reach)
    return kept


def predict(task_cost: np.ndarray, slices: int, variant: dict) -> float:
    """Predicted time of a schedule in model units (module docstring) for a kernel variant."""
    if task_cost.size == 0:
        return 0.0
    P = REF_SMS * blocks_per_sm(variant)
    return float(task_cost.sum() * slices / P + task_cost.max())


def price_terms(window_offsets, caps) -> tuple:
    """({cap: (cost sum, max, tasks, windows cut over warps)}, the identity schedule's task count)
    from the C schedule (the device prices hold the same numbers): what ``decision_predictions``
    takes.  A window is cut (a GROUP member or a multi-part SPLIT) where it has more than cap > 0
    blocks."""
    caps = [int(c) for c in caps]
    wo = np.ascontiguousarray(window_offsets, np.int64)
    priced = caps if 0 in caps else [*caps, 0]
    sums, maxes, ntasks = _core.schedule_costs(wo, np.array(priced, np.int64), WARPS, _CONSTANTS)
    blocks = np.sort(np.diff(wo))
    cut = {c: int(blocks.size - np.searchsorted(blocks, c, side="right")) if c > 0 else 0 for c in caps}
    terms = {c: (s, w, t, cut[c]) for c, s, w, t in zip(caps, sums.tolist(), maxes.tolist(), ntasks.tolist())}
    return terms, int(ntasks.tolist()[priced.index(0)])


#: Two costs the list-scheduling bound does not price, which the decision adds where the identity
#: schedule (cap 0) alone fills a wave of thread blocks (its tasks x slices >= P): there, cutting
#: windows over several warps buys no parallelism, and each cut window pays its reduction (the
#: GROUP's through shared memory, the SPLIT's through the workspace) beyond REDUCE and MERGE, and
#: warps that pack several windows lose against one window each.  By operand format (``ELEM``):
#: (units per window cut over warps, factor on every cap but the identity).  TF32: fitted on the
#: H100 timings of every cap (benchmarks/fit_caps.py --penalties on three runs of
#: benchmarks/variant_guess.py; the best setting was the same on each run): the decision's cap
#: regret 1.028-1.029 -> 1.017 in geometric mean over 24 matrices x N = 32-512, worst case 1.27-1.29
#: -> 1.16-1.18.  FP16 and BF16 plans take the same two terms, not refitted: an FP16 refit of them
#: did not agree between runs (one setting measured 1.009x with two cases 10-14% slower), while
#: TF32's, measured on FP16 default plans (22 real matrices x N = 32-512, three runs, kernel only),
#: changed the cap of 12 of 110 cases, 1.107-1.111x faster in geometric mean over those (deezer_europe
#: N = 128 1.33x, lastfm_asia N = 512 1.45x, musae_facebook N = 256 1.20x), one slower (usroads N = 64,
#: 0.88x), 1.009-1.010x over all 110 (benchmarks/NOTES.md, "Session of 2026-11-27, 21:47").
#: Below a wave (bcsstk13: 251 windows) cutting is what fills the GPU, and the bound alone decides.
DECISION_TERMS = {0: (16.0, 0.05), 1: (16.0, 0.05), 2: (16.0, 0.05)}


def decision_predictions(terms: dict, identity_tasks: int, slices: int, P: int, cut_cost: float = 16.0,
                         packed: float = 0.05) -> dict:
    """{cap: the decision's prediction} from ``price_terms``' terms: the list-scheduling bound
    (``predict``), plus ``cut_cost`` units per cut window and the factor ``1 + packed`` on packed
    caps where the identity fills a wave (``DECISION_TERMS`` holds each operand format's); with
    neither term, the bound alone."""
    full = (cut_cost or packed) and identity_tasks * slices >= P
    out = {}
    for c, (s, w, t, cut) in terms.items():
        if not t:
            out[c] = 0.0
        elif full:
            out[c] = ((s + cut_cost * cut) * slices / P + w) * (1.0 + packed * (c > 0))
        else:
            out[c] = s * slices / P + w
    return out


def predict_caps(window_offsets, caps, slices: int, variant: dict) -> dict:
    """{cap: ``predict(build_tasks(window_offsets, cap)[1], slices, variant)``} without building the
    tasks: the task costs' sum and max of every cap in one C call, the caps in parallel
    (csrc/acc_schedule_cost.c: the same integer-valued costs, so the same prediction): the
    list-scheduling bound, without the decision's terms."""
    terms, identity = price_terms(window_offsets, caps)
    return decision_predictions(terms, identity, slices, REF_SMS * blocks_per_sm(variant), 0.0, 0.0)


def predict_cap(window_offsets, cap: int, slices: int, variant: dict) -> float:
    """``predict_caps`` for one cap."""
    return predict_caps(window_offsets, (cap,), slices, variant)[int(cap)]


#: the kernel's operand formats (acc_tf32_args.elem): columns a warp covers per slice unit (32 S
#: for TF32, 64 S for the half formats, whose 16-byte pieces hold 8 values) and bytes per element of B
ELEM = {"tf32": 0, "fp16": 1, "bf16": 2}
UNIT = {0: 32, 1: 64, 2: 64}
ESIZE = {0: 4, 1: 2, 2: 2}
#: the narrowest column slice of any variant: TF32's narrow steps (S = 0)
MIN_SLICE = 16


def slice_cols(elem: int, slice_s: int) -> int:
    """Columns of B and C a warp covers in a variant's column slice: UNIT x S, or UNIT / 2 at S = 0 (narrow
    steps of half the MMAs, 8-byte pieces: TF32 16 columns, a half format 32, cuda/tf32_spmm.cu)."""
    return UNIT[elem] * slice_s if slice_s else UNIT[elem] // 2


#: narrow steps run where the longest task's predicted cost exceeds this many units: twice its fixed part
#: (the task row, a window's write-back and the pipeline's fill), which the steps repeat in twice the
#: thread blocks instead of shortening (``narrow_steps``)
NARROW_STEPS_MIN_LONGEST = 2 * (TASK + WB + FILL)


def narrow_steps(n: int, elem: int, blocks1: int, longest: float) -> bool:
    """Whether width n runs narrow steps (variant S = 0: the register pipeline at depth 2, half the MMAs
    and 8-byte pieces a step, twice the thread blocks) instead of S = 1's slices, for n a multiple of 8
    (half formats) or 4 (TF32; other widths run the element path at S = 1) and where the longest task's
    predicted cost ``longest`` exceeds NARROW_STEPS_MIN_LONGEST units.  Half formats: where ``blocks1``
    (tasks x S = 1 slices) thread blocks are under one wave, TF32's S = 2 rule; TF32, whose step the narrow
    one halves from two MMAs to one (half formats: four to two), only where every thread block of the
    narrow steps is resident at once (2 blocks1 <= REF_SMS x their blocks per SM).  H100, kernel alone,
    the 24 real matrices (benchmarks/NOTES.md, ``results/h100_narrow_steps.md``): FP16 at n = 64-512,
    1.14x in geometric mean over the 23 cases it takes (1.03-1.29x), where minnesota's tasks (11 units)
    ran 0.91-0.97x and bayer10's at n = 64 (16) 0.98x; TF32 at n = 64-512 (the plan asks only where its
    one-wave rule replaced S = 2, ``TF32Runner.decide``), 1.06x over the 8 cases it takes (1.02-1.12x),
    where a partial second wave cost bcsstk13 at n = 64 0.93x."""
    if n < 8 or n % (8 if elem else 4) or longest <= NARROW_STEPS_MIN_LONGEST:
        return False
    if elem:
        return blocks1 < REF_SMS * WAVE_BLOCKS_PER_SM
    return 2 * blocks1 <= REF_SMS * blocks_per_sm({"slice_s": 0, "staged": 0, "depth": 2})


def b_resident(n: int, k: int, l2_bytes: int, elem: int = 0) -> bool:
    """Whether a k x n B of operand format ``elem`` fits in half the L2 (the variant rules' test)."""
    return k * n * ESIZE[elem] <= l2_bytes // 2


def choose_variant(n: int, k: int, l2_bytes: int, override: dict | None = None, elem: int = 0) -> dict:
    """Kernel variant for width n (module docstring); ``override`` replaces chosen fields.  Half
    formats (``elem`` > 0): 64-column slices (S = 1, the same columns and accumulators per warp as
    TF32's S = 2; their S = 2 spills registers), and only the variants the kernel has for them."""
    u = UNIT[elem]
    # TF32: 64-column slices above 32 columns, except for odd multiples of 32, where 32-column
    # slices keep the 16-byte path (the kernel's vector path needs n to be a multiple of 32 S)
    s = 2 if elem == 0 and n > u and n % (2 * u) != u else 1
    slices = -(-n // (u * s))
    b_bytes = k * n * ESIZE[elem]
    resident = b_resident(n, k, l2_bytes, elem)
    # TF32 at S = 2: the staged pipeline (depth 2) whatever B's size, and where B stays in L2 the
    # longest predicted task first.  Measured against every candidate on 24 matrices x 5 widths
    # (benchmarks/variant_guess.py, benchmarks/NOTES.md): the register pipeline's 128 registers
    # left L2-resident graphs latency-bound (musae_facebook N = 128: 56 -> 42 us).  Half formats: the
    # staged pipeline at depth 3 whatever B's size, longest task first where B stays in L2: 2.0% and
    # 3.6% above the fastest variant at the cap (geometric mean, two FP16 variant_guess runs of 120
    # cases each), against 16% and 15% for the register pipeline they had
    staged = int(not resident or s == 2 or elem > 0)
    v = {"slice_s": s, "depth": 3 if elem or not staged else 2, "cache_l1": 1,
         "slice_major": int(slices > 1 and b_bytes > l2_bytes and b_bytes // slices <= l2_bytes // 2),
         "staged": staged, "order": int(resident)}
    if override:
        unknown = set(override) - set(VARIANT_KEYS)
        if unknown:
            raise ValueError(f"unknown TF32 variant field(s) {sorted(unknown)}; known: {VARIANT_KEYS}")
        v.update({key: int(val) for key, val in override.items()})
        if v["slice_s"] not in (0, 1, 2) or (v["slice_s"] == 0 and (v["staged"] or v["depth"] > 3)):
            raise ValueError(f"slice_s must be 0, 1 or 2, and narrow steps (slice_s = 0) run the register "
                             f"pipeline (staged = 0) at depth 2 or 3: got {override}")
    return v


_L2_BYTES = {}  # device -> L2 size: a device query also asks for free memory (tens of microseconds)


def l2_bytes(device: int) -> int:
    """The L2 cache size of ``device`` (cached: it never changes)."""
    if device not in _L2_BYTES:
        from . import _cuda

        _L2_BYTES[device] = int(_cuda.device_info(int(device))["l2_bytes"])
    return _L2_BYTES[device]


class TF32Runner:
    """Device-resident BitTCF, schedules by cap, and the per-n choice of schedule and variant."""

    def __init__(self, fmt, put, dev: dict, dev_id: int, stats, balance="auto", tuning=None, elem: int = 0,
                 csr=None):
        """put(name, host_array) uploads into dev (the plan's dict of DeviceArrays).
        tuning: optional {"cap": int, plus VARIANT_KEYS} for experiments and tests; "narrow": "auto",
        "csr" or "bittcf" and "csr_lanes" pick the narrow widths' kernel (``narrow_csr``).
        csr: A's host CSR (accspmm._validate.CSR, original row order) for narrow widths on the CSR
        kernel, uploaded at the first such call (a half format's: its exact half values as float32);
        None: never.  ``calls`` (attribute): the
        products expected (the plan's hint; None: many), which the CSR kernel's upload must pay for.
        elem: the operand format (``ELEM``); a half format needs dev["values"] to hold the dense
        tiles of ``_cuda.half_tiles`` (and block_meta their offsets), accspmm._half builds them."""
        _cuda = _cuda_for_arrays()  # not ``from . import``: importlib's fromlist handling costs microseconds

        built = (_cuda.TF32_WARPS, _cuda.TF32_TASK_WORDS, _cuda.TF32_CSR_LONG, getattr(_cuda, "TF32_CSR_WIDE_LONG", 0))
        if built != (WARPS, TASK_WORDS, CSR_LONG, CSR_WIDE_LONG):
            raise RuntimeError(f"accspmm._cuda was built with {built[0]} warps per TF32 task and long CSR rows "
                               f"of {built[2]} and {built[3]} entries, the package expects {WARPS}, {CSR_LONG} "
                               f"and {CSR_WIDE_LONG}: rebuild the extension")
        self._cuda = _cuda
        self._core = _core
        self.elem = int(elem)
        self.unit = UNIT[self.elem]
        self.shape = fmt.shape
        self.balance = balance
        self.tuning = dict(tuning or {})
        unknown = set(self.tuning) - {"cap", "autotune", "build", "check", "schedule", "narrow", "csr_lanes",
                                      "wide", "csr_part", "csr_lane_cols", *VARIANT_KEYS}
        if unknown:
            raise ValueError(f"unknown tuning key(s) {sorted(unknown)}")
        if "csr_part" in self.tuning and (not isinstance(self.tuning["csr_part"], (int, np.integer))
                                          or not 1 <= self.tuning["csr_part"] <= 2**20):
            raise ValueError(f"tuning['csr_part'] must be an int of 1 to 2**20, not {self.tuning['csr_part']!r}")
        if self.tuning.get("csr_lane_cols", 4) not in (4, 8):
            raise ValueError(f"tuning['csr_lane_cols'] must be 4 or 8, not {self.tuning['csr_lane_cols']!r}")
        if self.tuning.get("schedule", "device") not in ("device", "host"):
            raise ValueError(f"tuning['schedule'] must be 'device' or 'host', not {self.tuning['schedule']!r}")
        self.num_windows = fmt.num_windows
        self._window_offsets = np.asarray(fmt.window_offsets)
        self._l2 = l2_bytes(dev_id)
        self.dev = dev  # the plan's: freed with it
        self._device = dev_id
        self._ws_keys = []  # ("workspace", stream) keys of self.dev, oldest first
        self._ws_sizes = {}  # such a key -> (workspace floats, counters) it holds
        self._side = None  # the side stream (``_side_stream``), and whether uploads there are unwaited
        self._unsettled = False
        if "block_meta" not in dev:  # a host BitTCF (else built on the device: accspmm._device_format)
            for name in ("perm", "window_offsets"):
                put(name, np.asarray(getattr(fmt, name)))
            put("block_meta", pack_meta(fmt))
            put("values", round_tf32(fmt.values))
        # the steady-state call in C (csrc/cuda_launcher.c): run() registers each (n, stream) launch
        self.launcher = _cuda.Launcher(fmt.shape[0], fmt.shape[1], fmt.num_windows, dev["perm"].ptr,
                                       dev["window_offsets"].ptr, dev["block_meta"].ptr, dev["values"].ptr, dev_id,
                                       self.elem)
        self._ready = set()  # widths n that have run outside a CUDA-graph capture
        self._tasks = {}  # cap -> (host tasks, task cost): the host schedule's
        # the host schedule's counts, by cap (the device schedule's are in its prices)
        self._split_counts = {}  # (workspace slots, multi-part splits, windows cut over warps)
        self._ntasks = {}  # task count
        self._max_cost = {}  # the longest task's predicted cost
        # the schedule on the device (cuda/tf32_schedule.cu): every cap of CAPS priced now, on the side
        # stream, from the window offsets already there (read at the first decision); the chosen cap's
        # rows built there at the first call.  tuning={"schedule": "host"}: the C schedule and an upload
        self._device_schedule = self.tuning.get("schedule", "device") == "device"
        self._prices = None
        self._longest_blocks = None  # the longest window's blocks (``_longest_window``)
        if self._device_schedule:  # into mapped pinned memory (read without a copy), else a device array
            side = self._side_stream()
            out = HostSlot.try_new(side) or DeviceArray.ordered((8 * len(CAPS),), np.int64, dev_id, side)
            dev["schedule_prices"] = out
            _cuda.tf32_schedule_price(dev["window_offsets"].ptr, fmt.num_windows, CAPS, _INT_CONSTANTS, out.ptr,
                                      side)
        self._decisions = {}
        self._wide = {}  # n -> the wider variants (S = 2, S = 1) that the one-wave rules replaced
        # first call per n times the candidate variants, unless a variant field is forced
        self._autotune = bool(self.tuning.get("autotune", True)) and not (set(self.tuning) & set(VARIANT_KEYS))
        self._override = {k: v for k, v in self.tuning.items() if k in VARIANT_KEYS}  # forced variant fields
        self._tuned = set()
        # widths up to this run on CUDA cores (cuda/tf32_spmm.cu, narrow_kernel: the same tasks and
        # workspace, no kernel variant), the rest on Tensor Cores
        self._narrow = _cuda.tf32_narrow_max()
        if self.tuning.get("narrow", "auto") not in ("auto", "csr", "bittcf"):
            raise ValueError(f"tuning['narrow'] must be 'auto', 'csr' or 'bittcf', not {self.tuning['narrow']!r}")
        self._csr = csr  # A's CSR for the CSR kernels, narrow and wide widths (None: never)
        self._csr_choice = None  # (lanes, reason): lanes 0 = the BitTCF narrow kernel
        self._csr_parts = None  # the narrow CSR kernel's long rows' parts (csr_long_parts), at its first call
        self._csr_first = 0  # 1: their thread blocks launch first (a row in several parts), set with them
        if self.tuning.get("wide", "auto") not in ("auto", "csr", "bittcf"):
            raise ValueError(f"tuning['wide'] must be 'auto', 'csr' or 'bittcf', not {self.tuning['wide']!r}")
        self._csr_wide = {}  # n -> (on, reason): width n (> the narrow ones) on the wide CSR kernel
        self._csr_wide_parts = None  # part length -> its long rows' parts (csr_long_parts), from the upload
        self._csr_indptr = None  # the uploaded CSR's offsets (duplicates summed)
        self._csr_part_by_n = {}  # n -> the wide kernel's part length (_wide_parts)
        # csr_wide_count of A's CSR as given (before duplicates are summed): its longest row for wide_csr, and
        # the part length's count where that CSR is the one uploaded
        self._csr_count = None
        self._csr_given = False  # the uploaded CSR is A's as given (its rows were canonical)
        self.calls = None
        self._stats = stats
        # a format the GPU is still building (accspmm._device_format, defer=True): waited for
        # before the first launch on any stream (args), so the kernel never reads it early
        self._wait = getattr(fmt, "wait", None)
        # the build kept its upload of A's CSR (dev["csr_block"]), usable where its rows were canonical
        self._kept_csr = bool(getattr(fmt, "canonical", False))
        self._ibd = float(fmt.stats["imbalance_degree"])  # the format's statistics (one C pass, cached)
        wo = self._window_offsets
        self._mean_blocks = float(wo[-1]) / (wo.size - 1) if wo.size > 1 else 0.0
        stats["schedule_by_n"] = {}

    def _schedule(self, cap: int, ntasks: int | None = None):
        """(tasks, task_cost) of schedule ``cap`` on the host (of ``ntasks`` tasks, when the pricing
        counted them), built once; its counts go to ``_split_counts`` and ``_ntasks``."""
        if cap not in self._tasks:
            tasks, cost, counts = schedule(self._window_offsets, cap, ntasks)
            self._tasks[cap] = (tasks, cost)
            self._split_counts[cap] = counts
            self._ntasks[cap] = int(tasks.shape[0])
            self._max_cost[cap] = int(cost.max()) if cost.size else 0
        return self._tasks[cap]

    def _device_prices(self) -> list:
        """Every cap of CAPS as the device priced it at the plan's start: 8 int64 per cap in CAPS'
        order (sum, max, tasks, slots, splits, cut windows, status, 0), read once (this waits for the
        side stream).  Offsets that the C schedule would refuse raise its error here."""
        if self._prices is None:
            out, count = self.dev["schedule_prices"], 8 * len(CAPS)
            flat = out.read(count) if isinstance(out, HostSlot) else out.to_host(stream=self._side).tolist()
            bad = max(flat[6::8])
            if bad >= 0:
                what = "window offsets decrease" if bad % 4 == 1 else "too large for the TF32 schedule"
                raise ValueError(f"TF32 schedule: {what} (window {bad // 4})")
            self._prices = flat
        return self._prices

    def _on_device(self, cap: int) -> bool:
        """Whether schedule ``cap`` comes from the device (priced there: a cap of CAPS)."""
        return self._device_schedule and cap in _CAP_INDEX

    def _counts(self, cap: int):
        """(workspace slots, multi-part splits, windows cut over warps) of schedule ``cap``."""
        if self._on_device(cap):
            i = 8 * _CAP_INDEX[cap]
            return tuple(self._device_prices()[i + 3 : i + 6])
        self._schedule(cap)
        return self._split_counts[cap]

    def _count(self, cap: int) -> int:
        """Tasks of schedule ``cap``."""
        if self._on_device(cap):
            return self._device_prices()[8 * _CAP_INDEX[cap] + 2]
        self._schedule(cap)
        return self._ntasks[cap]

    def _longest_window(self) -> int:
        """Blocks of the longest window: from the identity schedule's longest task where the device
        priced it (longest + WB + FILL + TASK), else from the offsets (once)."""
        if self._longest_blocks is None:
            if self._device_schedule:
                identity_max = self._device_prices()[8 * _CAP_INDEX[0] + 1]
                self._longest_blocks = max(0, int(identity_max) - int(WB + FILL + TASK))
            else:
                wo = self._window_offsets
                self._longest_blocks = int(np.diff(wo).max()) if wo.size > 1 else 0
        return self._longest_blocks

    def _longest(self, cap: int) -> int:
        """The longest task's predicted cost in schedule ``cap`` (the LPT sort's key range)."""
        if self._on_device(cap):
            return self._device_prices()[8 * _CAP_INDEX[cap] + 1]
        self._schedule(cap)
        return self._max_cost[cap]

    def decide(self, n: int):
        """(cap, variant) for width n, recorded in stats['schedule_by_n'][n]."""
        if n in self._decisions:
            return self._decisions[n]
        variant = choose_variant(n, self.shape[1], self._l2, self._override, self.elem)
        if n > self._narrow and self._wide_choice(n)[0] and self._csr_upload() and self._wide_parts_up(n):
            # the wide CSR kernel reads no schedule: no cap is priced and no task row is built (where the upload
            # found no GPU memory, the width went back to the Tensor Cores, decided below)
            self._stats["schedule_by_n"][n] = {
                "cap": 0, "tasks": 0, "schedule_on": "none", "kernel": f"cuda_cores_csr_wide{csr_wide_lanes(n)}",
                "split_windows": 0, "predicted": {}, "reason": self._wide_choice(n)[1], "variant": variant,
                "ibd": self._ibd, "csr_part": self._wide_parts(n)[0], "csr_lane_cols": self._lane_cols(n)}
            self._decisions[n] = (0, variant)
            return self._decisions[n]
        slices = -(-n // slice_cols(self.elem, variant["slice_s"]))
        if "cap" in self.tuning:
            caps, why = (int(self.tuning["cap"]),), "forced by tuning['cap']"
        elif self.balance is False:
            caps, why = (0,), "forced by balance=False (identity: one window per warp)"
        elif self.balance is True:
            caps, why = tuple(c for c in CAPS if c > 0), "balance=True: best balanced cap by the cost model"
        else:
            caps, why = CAPS, "cost model"
        if len(caps) > 1:
            narrow = n <= self._narrow
            parts_max = NARROW_SPLIT_PARTS_MAX if narrow else SPLIT_PARTS_MAX
            kept = packing_caps(caps, self._mean_blocks)
            if len(kept) < len(caps):
                longest = self._longest_window()
                wider = packing_caps(caps, self._mean_blocks, longest, parts_max)
                if len(wider) > len(kept):
                    why += f"; caps up to {max(wider)} (the longest window, {longest} blocks, in at most " \
                           f"{parts_max} parts)"
                else:
                    why += f"; caps up to {max(kept)} (at most {PACK_WINDOWS} mean-length windows per warp)"
                kept = wider
            if narrow and max(kept) > NARROW_CAP_MAX:
                kept = tuple(c for c in kept if c <= NARROW_CAP_MAX) or (min(kept),)
                why += f"; CUDA cores (n <= {self._narrow}): caps up to {NARROW_CAP_MAX}"
            caps = kept
        P = REF_SMS * blocks_per_sm(variant)
        if self._device_schedule and all(c in _CAP_INDEX for c in caps):
            prices = self._device_prices()  # per cap: sum, max, tasks, slots, splits, cut windows
            terms = {c: (prices[i], prices[i + 1], prices[i + 2], prices[i + 5])
                     for c in caps for i in (8 * _CAP_INDEX[c],)}
            identity = prices[8 * _CAP_INDEX[0] + 2]  # the identity schedule's tasks
        else:
            terms, identity = price_terms(self._window_offsets, caps)
        pred = decision_predictions(terms, identity, slices, P, *DECISION_TERMS[self.elem])
        best = min(caps, key=lambda c: (pred[c], -c))
        if not self._on_device(best):  # the host schedule's rows, of the task count just priced
            self._schedule(best, terms[best][2])
        ntasks = self._count(best)
        wave = REF_SMS * WAVE_BLOCKS_PER_SM
        # the narrower slices of both rules: depth 2 unless forced, the register pipeline where B stays in L2
        depth = int(self.tuning.get("depth", 2))
        resident = b_resident(n, self.shape[1], self._l2, self.elem)
        if variant["slice_s"] == 2 and "slice_s" not in self.tuning and ntasks * slices < wave:
            # less than one wave of thread blocks: 32-column slices double the parallelism
            self._wide[n] = [variant]
            # the register pipeline at depth 2 (3 thread blocks per 8 warps) unless B leaves L2
            staged = variant["staged"] if "staged" in self.tuning else int(not resident)
            variant = dict(variant, slice_s=1, staged=staged, depth=depth)
            why += "; S = 1 (under one wave of thread blocks at S = 2)"
        # TF32: only where S = 1 replaced S = 2 (at n <= 32 S = 1 runs the register pipeline at depth 3,
        # against which the steps measured 0.93-1.09x); narrow steps have depths 2 and 3 and no staged copies
        if variant["slice_s"] == 1 and not set(self.tuning) & {"slice_s", "staged"} and (self.elem or n in self._wide) \
                and depth <= 3 and resident \
                and narrow_steps(n, self.elem, ntasks * -(-n // self.unit), self._longest(best)):
            self._wide.setdefault(n, []).append(variant)
            variant = dict(variant, slice_s=0, staged=0, depth=depth)
            why += f"; {self.unit // 2}-column steps (a small grid of thread blocks at S = 1: narrow_steps)"
        kernel = "tensor_cores"
        if n <= self._narrow:
            lanes, csr_why = self._narrow_choice()
            kernel = f"cuda_cores_csr{lanes}" if lanes else "cuda_cores"
            why += f"; {csr_why}"
        else:
            on, csr_why = self._wide_choice(n)
            if on:
                kernel = f"cuda_cores_csr_wide{csr_wide_lanes(n)}"
            if csr_why:
                why += f"; {csr_why}"
        report = {"cap": best, "tasks": ntasks, "schedule_on": "device" if self._on_device(best) else "host",
                  "kernel": kernel,
                  "split_windows": self._counts(best)[2] if best > 0 else 0,
                  # unrounded (round() costs ~1 us a cap)
                  "predicted": {_CAP_KEY[c] if c in _CAP_KEY else str(c): v for c, v in pred.items()},
                  "reason": f"{why}: cap {best} ({'identity' if best == 0 else 'packed/split'}) "
                            f"predicts {pred[best]:.1f} units",
                  "variant": variant, "ibd": self._ibd}
        self._stats["schedule_by_n"][n] = report
        self._decisions[n] = (best, variant)
        return self._decisions[n]

    def _narrow_choice(self) -> tuple:
        """(lanes, reason) of the narrow widths: lanes > 0 runs them on A's CSR (``narrow_csr``), 0 on
        BitTCF; decided once (the same for every narrow width)."""
        if self._csr_choice is None:
            src, mode = self._csr, self.tuning.get("narrow", "auto")
            if src is None or mode == "bittcf" or src.shape[1] > INT32_MAX:
                why = "BitTCF narrow kernel" + (" (forced)" if mode == "bittcf" else "")
                self._csr_choice = (0, why)
            else:
                lanes, _, why = narrow_csr(src.indptr[: src.shape[0] + 1], int(self._window_offsets[-1]),
                                           self.num_windows, mode == "csr", self.calls,
                                           BITTCF_NARROW_MODEL_HALF if self.elem else BITTCF_NARROW_MODEL)
                if "csr_lanes" in self.tuning:
                    lanes, why = int(self.tuning["csr_lanes"]), "CSR kernel, lanes forced by tuning['csr_lanes']"
                    if lanes not in CSR_LANES:
                        raise ValueError("tuning['csr_lanes'] must be 1, 2, 4, 8, 16 or 32")
                self._csr_choice = (lanes, why)
        return self._csr_choice

    def _wide_choice(self, n: int) -> tuple:
        """(on, reason): whether width n (> the narrow widths) runs on the wide CSR kernel (plans with A's CSR
        only; ``tuning["wide"]``: "csr" forces it, "bittcf" never, "auto" by ``wide_csr``)."""
        if n not in self._csr_wide:
            mode = self.tuning.get("wide", "auto")
            src = self._csr
            if src is None or mode == "bittcf" or src.shape[1] > INT32_MAX:
                self._csr_wide[n] = (False, "")
            elif mode == "csr":
                self._csr_wide[n] = (True, "wide CSR kernel (forced by tuning['wide'])")
            else:
                m = src.shape[0]
                if self._csr_count is None:  # one C pass (NumPy's diff and max: ~20 us on a small plan)
                    self._csr_count = csr_wide_count(src.indptr[: m + 1])
                self._csr_wide[n] = wide_csr(n, m, src.shape[1], int(src.indptr[m] - src.indptr[0]),
                                             self._csr_count[2], int(self._window_offsets[-1]), self.num_windows,
                                             self.calls, "csr_values" in self.dev or "csr_block" in self.dev,
                                             self.elem)
        return self._csr_wide[n]

    def _csr_on(self, n: int) -> bool:
        """Whether width n runs on a CSR kernel (narrow or wide)."""
        return bool(self._narrow_choice()[0]) if n <= self._narrow else self._wide_choice(n)[0]

    def _csr_args(self, n: int) -> tuple:
        """(offsets, columns, values, lanes, long parts, part count, parts first) device pointers and counts
        of the CSR kernel for width n, uploaded at the first use, the values then rounded to TF32 on the
        device ((0,) * 7: the BitTCF kernels).  Narrow widths: parts go first where a row has several (their
        last part's sum waits for all of them), else after the rows' blocks (H100, kernel: hub and star
        1.11-1.26x faster with their parts first, ogbl-ddi's single-part rows 0.88-0.95x); wide widths: the
        kernel's lanes, its own parts (always first).  Each kind of parts is made and uploaded at its first
        use, and not at all where no row is long (a null pointer and no parts)."""
        if not self._csr_on(n) or not self._csr_upload():
            return (0,) * 7
        d = self.dev
        if n > self._narrow:
            if not self._wide_parts_up(n):
                return (0,) * 7
            part, parts = self._wide_parts(n)
            nparts = parts.size // 4
            lanes = csr_wide_lanes(n) // (2 if self._lane_cols(n) == 8 else 1)
            return (d["csr_offsets"].ptr, d["csr_cols"].ptr, d["csr_values"].ptr, lanes,
                    d[f"csr_wide_parts{part}"].ptr if nparts else 0, nparts, int(nparts > 0))
        try:
            ptr = self._narrow_parts()
        except MemoryError as exc:  # the narrow widths go to BitTCF; the CSR stays for the wide widths using it
            self._csr_choice = (0, f"BitTCF narrow kernel: the CSR kernel's long-row parts found no GPU memory ({exc})")
            self._reports_off(lambda w: w <= self._narrow)
            return (0,) * 7
        return (d["csr_offsets"].ptr, d["csr_cols"].ptr, d["csr_values"].ptr, self._narrow_choice()[0],
                ptr, self._csr_parts.size // 4, self._csr_first)

    def _narrow_parts(self) -> int:
        """Device pointer of the narrow CSR kernel's long-row parts (``csr_long_parts`` with CSR_LONG and
        CSR_PART, of the uploaded CSR), made and uploaded at the first narrow CSR call (0: no row is long);
        their counts go to the stats."""
        if self._csr_parts is None:
            parts = csr_long_parts(self._csr_indptr)
            if parts.size:  # MemoryError: nothing of them kept
                self.dev["csr_long_parts"] = DeviceArray.upload(parts, self._device, self._side_stream())
                self._stats["narrow_csr_bytes"] += parts.nbytes
            self._csr_parts = parts
            self._stats["narrow_csr_long_rows"] = int(((parts[3::4] & 0xFFFFFFFF) == 0).sum())
            self._stats["narrow_csr_long_parts"] = parts.size // 4
            self._csr_first = int(bool(parts.size) and int((parts[3::4] >> 32).max()) > 1)
        return self.dev["csr_long_parts"].ptr if "csr_long_parts" in self.dev else 0

    def _wide_parts_up(self, n: int) -> bool:
        """Uploads the wide kernel's long-row parts at width n (once per part length; nothing where no row is
        long); False where they found no GPU memory: width n goes to the Tensor Cores (``decide`` calls this before
        deciding), while A's CSR stays for the widths already running on it."""
        part, parts = self._wide_parts(n)
        key = f"csr_wide_parts{part}"
        if parts.size and key not in self.dev:
            try:
                self.dev[key] = DeviceArray.upload(parts, self._device, self._side_stream())
            except MemoryError as exc:
                self._csr_wide[n] = (False, f"Tensor Cores: the wide CSR kernel's long-row parts found no GPU "
                                            f"memory ({exc})")
                self._reports_off(lambda w: w == n)
                return False
        return True

    def _lane_cols(self, n: int) -> int:
        """Columns a lane of the wide CSR kernel at width n: ``tuning["csr_lane_cols"]`` where given, else
        ``csr_wide_lane_cols``'s; 4 where n is not a multiple of 8 or the kernel has fewer than 4 lanes of 4 (n <= 8).
        A launch whose B or C is not 16-byte aligned runs the lanes of 4 (the same bits)."""
        if csr_wide_lanes(n) < 4 or n % 8:
            return 4
        forced = self.tuning.get("csr_lane_cols")
        if forced is not None:
            return int(forced)
        src = self._csr
        m = src.shape[0]
        return csr_wide_lane_cols(n, m, int(src.indptr[m] - src.indptr[0]), self.elem)

    def _wide_parts(self, n: int) -> tuple:
        """(part length, csr_long_parts) of the wide CSR kernel at width n, from the uploaded CSR: parts of
        ``tuning["csr_part"]`` entries where given, else ``csr_wide_part``'s; chosen once per width (every
        call's arguments and workspace ask; ``decide`` records it in the width's stats)."""
        part = self._csr_part_by_n.get(n)
        if part is None:
            part = self.tuning.get("csr_part")
            if part is None:
                part = csr_wide_part(self._csr_indptr, n, self._csr_count if self._csr_given else None)
            part = self._csr_part_by_n[n] = int(part)
        return part, self._wide_parts_of(part)

    def _wide_parts_of(self, part: int) -> np.ndarray:
        if part not in self._csr_wide_parts:  # the count's parts of CSR_WIDE_PART, where it was of these offsets
            known = self._csr_count[1] if self._csr_given and self._csr_count and part == CSR_WIDE_PART else None
            self._csr_wide_parts[part] = csr_long_parts(self._csr_indptr, CSR_WIDE_LONG, part, known)
        return self._csr_wide_parts[part]

    def _build_wait(self):
        """Waits for a format still being built on the device (once; the time goes to the stats)."""
        if self._wait is not None:
            t = time.perf_counter()
            self._wait()
            self._wait = None
            self._stats.setdefault("seconds", {})["build_gpu_wait"] = time.perf_counter() - t

    def _csr_upload(self) -> bool:
        """Uploads A's CSR for the CSR kernels (once), or takes the GPU build's upload of it; False where the
        GPU had no room for it (every width then runs on BitTCF).  The kernels' long-row parts come at
        their first use (``_narrow_parts``, ``_wide_parts``)."""
        if "csr_values" not in self.dev:
            t = time.perf_counter()
            src = self._csr
            if not src.canonical:  # duplicates summed, as the format's (their rows' lengths can only shrink)
                src = src.canonicalized()
            self._csr_given = src is self._csr
            m, nnz = src.shape[0], src.nnz
            self._csr_indptr = src.indptr[: m + 1]
            self._csr_wide_parts = {}
            side = self._side_stream()
            names = ("csr_offsets", "csr_cols", "csr_values")
            kept = self.dev.get("csr_block")  # the GPU build's upload of this CSR (accspmm._device_format)
            if kept is not None:
                self._build_wait()  # it reads the values the rounding below overwrites
                if self._kept_csr and kept.nbytes == 8 * (m + 1) + 8 * nnz:
                    at = 8 * (m + 1)
                    for name, off, size in zip(names, (0, at, at + 4 * nnz), (at, 4 * nnz, 4 * nnz)):
                        self.dev[name] = DeviceView(kept, off, size)
                else:  # rows not in ascending column order: the upload below, canonical
                    self.dev.pop("csr_block").free()
            from_build = "csr_values" in self.dev
            try:
                if not from_build:
                    for name, arr in zip(names, (
                            np.ascontiguousarray(src.indptr[: m + 1], np.int64),
                            np.ascontiguousarray(src.indices[:nnz] if nnz else np.zeros(1), np.int32),
                            np.ascontiguousarray(src.data[:nnz] if nnz else np.zeros(1), np.float32))):
                        self.dev[name] = DeviceArray.upload(arr, self._device, side)
                if self.elem == ELEM["tf32"]:  # as the BitTCF build rounds A (half values are exact already)
                    self._cuda.tf32_round_values(self.dev["csr_values"].ptr, nnz, side)
            except MemoryError as exc:  # no room for A's CSR beside its BitTCF: the BitTCF kernels
                self._csr_failed(exc)
                return False
            self._stats.setdefault("seconds", {})["narrow_csr_upload"] = time.perf_counter() - t
            self._stats["narrow_csr_bytes"] = 8 * (m + 1) + 8 * nnz  # and the narrow parts, once uploaded
            self._stats["narrow_csr_from_build"] = from_build
        return True

    def _csr_failed(self, exc: MemoryError):
        """The upload of A's CSR for the CSR kernels (their first call: no CSR launch has run) found no GPU memory:
        frees what it holds, and every width runs on BitTCF from now on (the narrow widths on its narrow kernel,
        the others on the Tensor Cores), which the widths' reports say."""
        for name in [key for key in self.dev if isinstance(key, str) and key.startswith("csr_")]:
            self.dev.pop(name).free()
        self._csr_choice = (0, f"BitTCF narrow kernel: the CSR upload found no GPU memory ({exc})")
        for w in self._csr_wide:
            self._csr_wide[w] = (False, f"Tensor Cores: the CSR upload found no GPU memory ({exc})")
        self._reports_off(lambda w: True)
        self._csr = None  # never again

    def _reports_off(self, widths):
        """The reports of the widths (``widths(w)`` true) decided for a CSR kernel that now run on BitTCF."""
        for w, report in self._stats["schedule_by_n"].items():
            if widths(w) and report["kernel"].startswith("cuda_cores_csr"):
                narrow = w <= self._narrow
                report["kernel"] = "cuda_cores" if narrow else "tensor_cores"
                report["reason"] += f"; {(self._csr_choice if narrow else self._csr_wide[w])[1]}"

    def _side_stream(self) -> int:
        """The library's side stream, where a call's uploads go (``_settle`` waits for them)."""
        if self._side is None:
            self._side = self._cuda.side_stream()
        self._unsettled = True
        return self._side

    def _settle(self):
        """Waits for the uploads and zeroing queued on the side stream: only for those, not for the
        work the caller queued on its own stream; after it every stream may use the arrays."""
        if self._unsettled:
            self._cuda.synchronize(self._side)
            self._unsettled = False

    def _device_tasks(self, cap: int, order: int = 0):
        """(device pointer, count) of schedule ``cap``'s task rows in launch ``order``: built on the
        device (side stream) for a cap it priced, else built on the host and uploaded."""
        name = f"tasks_cap{cap}" + ("_lpt" if order else "")
        if name not in self.dev:
            nt = self._count(cap)
            side = self._side_stream()
            if self._on_device(cap):
                d = DeviceArray.ordered((max(nt, 1) * TASK_WORDS,), np.int32, self._device, side)
                self.dev[name] = d
                if nt:
                    self._cuda.tf32_schedule_rows(self.dev["window_offsets"].ptr, self.num_windows, cap,
                                                  _INT_CONSTANTS, nt, self._longest(cap), bool(order), d.ptr,
                                                  None, side)
                else:  # a placeholder row that no launch reads
                    self._cuda.memset(d.ptr, 0, d.nbytes, side)
            else:
                tasks, cost = self._schedule(cap)
                if order:
                    tasks = self._core.lpt_rows(tasks, cost)  # lpt_order's rows, in one C call
                self.dev[name] = DeviceArray.upload(
                    tasks.reshape(-1) if tasks.size else np.zeros(TASK_WORDS, np.int32), self._device, side)
        return self.dev[name].ptr, self._count(cap)

    def _split_need(self, cap: int, n: int, slice_s: int) -> tuple:
        """(workspace floats, counters) the multi-part splits of schedule ``cap`` need at width n with
        the column slices of variant S = ``slice_s``; (0, 0) when it has none.  The counters are sized for
        MIN_SLICE-column slices, the most any variant uses (TF32's narrow steps); the workspace for the
        variant's slices and for S = 1's, which a launch runs where it cannot take its variant's
        (cuda/tf32_spmm.cu: narrow steps at widths without 8-byte runs, a half S = 2 slice that is not
        full, the half element path)."""
        if n <= self._narrow and self._csr_choice is not None and self._csr_choice[0]:
            parts = self._csr_parts.size // 4  # the CSR kernel's long parts (_csr_args made them): 4 floats and a counter each
            return 4 * parts, parts
        if n > self._narrow and self._csr_wide.get(n, (False,))[0] and self._csr_wide_parts is not None:
            parts, g = self._wide_parts(n)[1].size // 4, csr_wide_lanes(n)  # a slice's 4g floats and counter each
            slices = -(-n // (4 * g))
            return parts * slices * 4 * g, parts * slices
        slots, splits, _ = self._counts(cap)
        # a half launch that cannot take its variant's slices runs 64-column ones (the element path)
        w = max(slice_cols(self.elem, slice_s), self.unit)
        return slots * 8 * (-(-n // w) * w), splits * -(-n // MIN_SLICE)

    def _workspace(self, cap: int, n: int, slice_s: int, stream) -> tuple:
        """(workspace, counters) device pointers for the multi-part splits of schedule ``cap``
        (0, 0 when it has none).  One allocation per stream (the counters, then the workspace
        256-byte aligned), grown to the largest schedule and width seen and shared by all of them:
        launches on one stream run in order, so they may share it; launches on different streams
        must not (counters and slots are reused).  The counters start at zero and every launch
        leaves them at zero.  (A CUDA-graph capture uses none of these: see ``run``.)"""
        need, cneed = self._split_need(cap, n, slice_s)
        if need == 0:
            return 0, 0
        key = ("workspace", int(stream or 0))
        have = self._ws_sizes.get(key)
        if have is not None and (have[0] < need or have[1] < cneed):
            need, cneed = max(need, have[0]), max(cneed, have[1])
            self._ws_keys.remove(key)
            self.launcher.clear()  # registered launches may point at the allocation freed here
            self.dev.pop(key).free()  # cudaFree waits for the device
            have = None
        if have is None:
            while len(self._ws_keys) >= MAX_WORKSPACES:  # bounded: a new stream per call must not grow memory
                old = self._ws_keys.pop(0)
                self.launcher.clear()
                self.dev.pop(old).free()
                del self._ws_sizes[old]
            # on the side stream, the counters zeroed there (a memset, not an upload of zeros); ``_settle`` waits
            side = self._side_stream()
            self.dev[key] = DeviceArray.ordered((_counter_bytes(cneed) + 4 * need,), np.uint8, self._device, side)
            self._cuda.memset(self.dev[key].ptr, 0, 4 * cneed, side)
            self._ws_sizes[key] = have = (need, cneed)
            self._ws_keys.append(key)
        ptr = self.dev[key].ptr
        return ptr + _counter_bytes(have[1]), ptr

    def args(self, d_B: int, d_C: int, n: int, stream=None, cap=None, variant=None, workspace=None,
             out_f32: bool = False) -> tuple:
        """(argument tuple, variant tuple) of _cuda.tf32_spmm for width n on ``stream``; ``cap``
        and ``variant`` (a dict of VARIANT_KEYS) override the decision (benchmarks);
        ``workspace`` (a pointer pair) replaces the stream's split workspace; ``out_f32``: a half
        plan's C is float32 (else C holds B's half format)."""
        m, k = self.shape
        best, v = self.decide(n)
        self._build_wait()  # after the decision, which overlapped the build's last steps
        cap = best if cap is None else cap
        v = v if variant is None else variant
        csr = self._csr_args(n)  # first: a failed upload leaves the BitTCF kernel
        # the CSR kernel reads no task rows (and the split workspace holds its long rows' parts)
        d_tasks, ntasks = (0, 0) if csr[3] else self._device_tasks(cap, v.get("order", 0))
        ws, cnt = workspace or self._workspace(cap, n, v["slice_s"], stream)
        self._settle()
        d = self.dev
        a = (m, k, n, self.num_windows, d["perm"].ptr, d["window_offsets"].ptr, d["block_meta"].ptr,
             d["values"].ptr, d_tasks, ntasks, ws, cnt, d_B, d_C, self.elem, int(bool(out_f32)), *csr)
        return a, tuple(v[key] for key in KERNEL_KEYS)

    def candidates(self, n: int) -> list:
        """Variants timed on the first call for width n: the model's choice first, then the
        register pipeline (depth 3; 2 at S = 1) and the staged one (depths 2 and 3), each in both
        grid orders when there is more than one column slice, and S = 2 (register depth 3, staged
        depth 2) where the one-wave rule chose S = 1; narrow steps (S = 0) run the register pipeline
        only (depths 3 and 2), and where their rule chose them S = 1 is timed too (TF32: register and
        staged depth 2; half formats: staged depth 3, register depths 3 and 2).  ``tune`` then times
        the fastest with the other task order, in both grid orders.  Same schedule: every candidate
        gives the same result bits (S only changes how many columns a warp covers, not any sum)."""
        v = self.decide(n)[1]
        slices = -(-n // slice_cols(self.elem, v["slice_s"]))
        out = [v]
        # register depth 3 at S = 2, 2 at S = 1 (TF32: 80 registers, 3 thread blocks per 8 warps);
        # half formats and narrow steps: both register depths (and no staged copies of narrow steps)
        reg = ((0, 3), (0, 2)) if self.elem or not v["slice_s"] else ((0, 3 if v["slice_s"] == 2 else 2),)
        for staged, depth in reg + (((1, 2), (1, 3)) if v["slice_s"] else ()):
            for major in (0, 1) if slices > 1 else (0,):
                c = dict(v, staged=staged, depth=depth, slice_major=major)
                if c not in out:
                    out.append(c)
        for w in self._wide.get(n, ()):  # the wider slices a one-wave rule replaced (S never changes a bit)
            if w["slice_s"] == 2:
                pipes = ((0, 3), (1, 2))
            else:
                pipes = ((1, 3), (0, 3), (0, 2)) if self.elem else ((0, 2), (1, 2))
            out += [c for c in (dict(w, staged=staged, depth=depth) for staged, depth in pipes) if c not in out]
        return out

    def tune(self, d_B: int, d_C: int, n: int, stream, out_f32: bool = False):
        """Times every candidate variant for width n on the caller's B, C and stream (TUNE_REPS
        launches after one warm-up, median; synchronous), then the two fastest again with
        CONFIRM_REPS launches each, and keeps the faster of those two (a 3-launch median of a
        kernel of tens of microseconds can be off by 30%: blogcatalog N = 64 once picked a variant
        whose 20-launch median was 30% above its 3-launch one); earlier candidates win ties, the
        model's choice first.  C holds A @ B afterwards (every candidate computes the same bits).
        Recorded in stats['schedule_by_n'][n]['tuned_ms'] (the confirmed times for the two)."""
        cap, _ = self.decide(n)
        times = {}
        t0 = time.perf_counter()

        def timed(v, reps=TUNE_REPS):
            a, vt = self.args(d_B, d_C, n, stream, cap, v, out_f32=out_f32)
            self._cuda.time_tf32(a, vt, 1, None, 0, stream)
            ms = sorted(self._cuda.time_tf32(a, vt, reps, None, 0, stream))[reps // 2]
            times[variant_tag(v)] = (ms, v)

        for v in self.candidates(n):
            timed(v)
        if "order" not in self.tuning:  # the fastest with the other task order, in both grid orders
            best = min(times.values(), key=lambda t: t[0])[1]
            timed(dict(best, order=1 - best["order"]))
            if n > slice_cols(self.elem, best["slice_s"]) and "slice_major" not in self.tuning:
                timed(dict(best, order=1 - best["order"], slice_major=1 - best["slice_major"]))
        top = [v for _, v in sorted(times.values(), key=lambda t: t[0])[:2]]
        for v in top:
            timed(v, CONFIRM_REPS)
        best = min(top, key=lambda v: times[variant_tag(v)][0])
        tag = variant_tag(best)
        report = self._stats["schedule_by_n"][n]
        report["tuned_ms"] = {k: round(t, 4) for k, (t, _) in times.items()}
        report["tuning_seconds"] = time.perf_counter() - t0
        if best != report["variant"]:
            report["reason"] += f"; variant {tag} timed fastest of {len(times)}"
        report["variant"] = best
        self._decisions[n] = (cap, best)
        self._tuned.add(n)

    def run(self, d_B: int, d_C: int, n: int, stream, out_f32: bool = False):
        """Launches C = A @ B (width n) on ``stream`` and registers the launch with the C fast
        call, so that later calls for (n, stream) skip Python (``out_f32``: a half plan's float32 C,
        which the C call does not take).  The first call for each n decides
        and times (synchronous, so never inside a CUDA-graph capture); its uploads (task rows, the
        split workspace and its zeroed counters) go on the library's side stream, and it waits for
        those alone (``_settle``), not for the work the caller queued before it.  Inside a capture, a
        schedule with multi-part splits gets its workspace from stream-ordered allocations
        captured into the graph (allocated, zeroed and freed on every replay): each graph owns
        its workspace, and nothing of the plan's is allocated or freed under a capture."""
        if self._cuda.stream_capturing(stream):
            if n not in self._ready:
                raise RuntimeError(f"the first call of a plan for width n = {n} chooses and times its kernel "
                                   "(it synchronises), which a CUDA-graph capture does not allow: call the plan "
                                   "once with this width before capturing (warm-up)")
            cap, v = self.decide(n)
            a, vt = self.args(d_B, d_C, n, stream, workspace=(0, 0), out_f32=out_f32)  # the graph allocates its own
            need, cneed = self._split_need(cap, n, v["slice_s"])
            self._cuda.tf32_spmm(a, vt, stream, need, cneed)
            return
        t0 = time.perf_counter()
        first = n not in self._ready
        if self._autotune and n not in self._tuned and n > self._narrow and not self._csr_on(n):  # CSR: no variant
            self.tune(d_B, d_C, n, stream, out_f32)
        a, v = self.args(d_B, d_C, n, stream, out_f32=out_f32)
        self._cuda.tf32_spmm(a, v, stream)
        self._ready.add(n)
        if first:  # decision, uploads, variant timing (if on) and the launch, host time
            self._stats["schedule_by_n"][n]["first_call_seconds"] = time.perf_counter() - t0
        self.launcher.register(n, int(stream or 0), a[8], a[9], a[10], a[11], v, *a[16:23])

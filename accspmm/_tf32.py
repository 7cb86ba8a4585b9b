"""TF32 Tensor-Core SpMM on BitTCF: host-side TF32 rounding, the load-balancing schedule and its
cost model, upload and launch.  Kernel: cuda/tf32_spmm.cu.

Load balancing (Acc-SpMM §3.5, our cost model).  One warp runs one *work item* x one slice of
64 columns.  Without balancing an item is a whole row window, so a window with hundreds of
TC blocks makes its warp a straggler.  The balanced schedule cuts windows longer than
``MAX_BLOCKS_PER_SEGMENT`` blocks into equal segments (their partials go to a workspace and a
second kernel sums them in a fixed order: deterministic) and packs consecutive short
segments into one item up to the same cost.  Cost units, per column slice:

    block      = 1      (8 B rows loaded + 2 MMAs)
    write-back = WB = 1 (8 C rows stored; the paper's model also prices it as one B tile)
    split      = +2 per extra segment (partial stored, then re-read by the reduce kernel)

Predicted time of a schedule = max(total cost / P, largest item cost), where P is the number of
items the GPU runs at once (SMs x resident warps per SM / column slices).  The balanced schedule
is used when it predicts at least ``GAIN`` (10%) less time than the identity schedule.
``plan.stats['schedule_by_n'][n]`` records both predictions and the choice.  (The paper's rule is
IBD > 8; IBD is reported alongside for comparison.)
"""

from __future__ import annotations

import numpy as np

MAX_BLOCKS_PER_SEGMENT = 32  # the paper's cap on TC blocks per thread block
WB = 1.0
SPLIT_COST = 2.0
GAIN = 0.9
RESIDENT_WARPS_PER_SM = 20  # 94-110 registers/thread at 128 threads/CTA -> 5 CTAs = 20 warps


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest TF32 (10-bit mantissa), ties away from zero, as cvt.rna.tf32.f32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), r, x).astype(np.float32)


def build_schedule(window_offsets: np.ndarray, cap: int = MAX_BLOCKS_PER_SEGMENT):
    """Segments (window, first block, end block, slot), item offsets and split windows."""
    wo = np.asarray(window_offsets, dtype=np.int64)
    nb = np.diff(wo)
    W = nb.shape[0]
    nseg = np.maximum(1, -(-nb // cap))
    seg_window = np.repeat(np.arange(W, dtype=np.int64), nseg)
    seg_first = (np.cumsum(nseg) - nseg).astype(np.int64)
    j = np.arange(seg_window.shape[0], dtype=np.int64) - np.repeat(seg_first, nseg)
    per = -(-nb // nseg)  # equal parts
    begin = wo[:-1][seg_window] + j * per[seg_window]
    end = np.minimum(begin + per[seg_window], wo[1:][seg_window])
    end = np.maximum(end, begin)
    split = nseg[seg_window] > 1
    slot = np.full(seg_window.shape[0], -1, dtype=np.int64)
    slot[split] = np.arange(int(split.sum()), dtype=np.int64)
    segments = np.stack([seg_window, begin, end, slot], axis=1).astype(np.int64)
    cost = (end - begin) + WB + np.where(split, SPLIT_COST, 0.0)
    # pack consecutive segments into items of cost about cap + WB
    target = cap + WB
    start_cost = np.cumsum(cost) - cost
    item_of_seg = np.floor(start_cost / target).astype(np.int64)
    boundaries = np.flatnonzero(np.diff(item_of_seg)) + 1
    nsegs = seg_window.shape[0]
    item_offsets = np.concatenate([[0], boundaries, [nsegs] if nsegs else []]).astype(np.int64)
    split_w = np.flatnonzero(nseg > 1)
    slot_begin = (np.cumsum(nseg[split_w]) - nseg[split_w]).astype(np.int64)
    split_windows = np.stack([split_w, slot_begin, slot_begin + nseg[split_w]], axis=1).astype(np.int64)
    item_cost = np.add.reduceat(cost, item_offsets[:-1]) if seg_window.shape[0] else np.zeros(0)
    return segments, item_offsets, split_windows, int(split.sum()), item_cost


def choose_schedule(window_offsets, item_cost, nsplit: int, n: int, sms: int, balance="auto"):
    """Returns (use_balanced, report dict) from the cost model (module docstring); item_cost and
    nsplit describe the balanced schedule, as returned by build_schedule."""
    nb = np.diff(np.asarray(window_offsets, dtype=np.int64)).astype(np.float64)
    slices = max(1, -(-n // 64))
    P = max(1.0, sms * RESIDENT_WARPS_PER_SM / slices)
    ident_cost = nb + WB
    t_ident = max(ident_cost.sum() / P, ident_cost.max(initial=0.0))
    t_bal = max(item_cost.sum() / P, item_cost.max(initial=0.0)) + (nsplit * 2.0 / P if nsplit else 0.0)
    mean = nb.mean() if nb.size else 0.0
    report = {"predicted_identity": t_ident, "predicted_balanced": t_bal,
              "ibd": float(np.abs(nb - mean).mean()) if nb.size else 0.0,
              "model": f"max(total/P, max item); P={P:.0f} concurrent items (n={n})"}
    if balance in ("auto", None):
        use = t_bal < GAIN * t_ident
        report["reason"] = (f"cost model: balanced {t_bal:.1f} vs identity {t_ident:.1f} units -> "
                            + ("balanced" if use else "identity"))
    else:
        use = bool(balance)
        report["reason"] = f"forced by balance={balance!r}"
    report["balanced"] = use
    return use, report


class TF32Runner:
    """Device-resident BitTCF + schedules; run() launches the kernel."""

    def __init__(self, fmt, put, dev: dict, stats, balance="auto"):
        """put(name, host_array) uploads into dev (the plan's dict of DeviceArrays)."""
        from . import _cuda
        from ._device import DeviceArray

        self._cuda = _cuda
        self.shape = fmt.shape
        self.balance = balance
        self.num_windows = fmt.num_windows
        self._window_offsets = np.asarray(fmt.window_offsets)
        self._sms = _cuda.device_info(_cuda.get_device())["multiprocessors"]
        self._DeviceArray = DeviceArray
        self.dev = dev  # the plan's: freed with it
        for name in ("perm", "window_offsets", "block_cols", "block_mask", "block_value_offsets"):
            put(name, np.asarray(getattr(fmt, name)))
        put("values", round_tf32(fmt.values))
        segments, item_offsets, split_windows, nslots, self._item_cost = build_schedule(self._window_offsets)
        self.sched = {"segments": segments.shape[0], "items": item_offsets.shape[0] - 1,
                      "split_windows": split_windows.shape[0], "slots": nslots}
        put("segments", segments.reshape(-1))
        put("item_offsets", item_offsets)
        put("split_windows", split_windows.reshape(-1) if split_windows.size else np.zeros(1, np.int64))
        self._decisions = {}
        self._stats = stats
        stats["schedule"] = dict(self.sched)
        stats["schedule_by_n"] = {}

    def decide(self, n: int):
        if n not in self._decisions:
            self._decisions[n] = choose_schedule(self._window_offsets, self._item_cost, self.sched["slots"],
                                                 n, self._sms, self.balance)
            self._stats["schedule_by_n"][n] = self._decisions[n][1]
        return self._decisions[n]

    def _workspace_for(self, n: int):
        need = max(1, self.sched["slots"]) * 8 * n
        ws = self.dev.get("workspace")
        if ws is None or ws.shape[0] < need:
            if ws is not None:
                ws.free()
            ws = self.dev["workspace"] = self._DeviceArray((need,), np.float32, self.dev["perm"].device)
        return ws

    def args(self, d_B: int, d_C: int, n: int, balanced: bool | None = None) -> tuple:
        m, k = self.shape
        if balanced is None:
            balanced = self.decide(n)[0]
        d = self.dev
        if balanced:
            ws = self._workspace_for(n).ptr if self.sched["slots"] else 0
            sched = (d["segments"].ptr, d["item_offsets"].ptr, self.sched["items"],
                     d["split_windows"].ptr, self.sched["split_windows"], ws)
        else:
            sched = (0, 0, 0, 0, 0, 0)
        return (m, k, n, self.num_windows, d["perm"].ptr, d["window_offsets"].ptr, d["block_cols"].ptr,
                d["block_mask"].ptr, d["block_value_offsets"].ptr, d["values"].ptr, *sched, d_B, d_C)

    def run(self, d_B: int, d_C: int, n: int, stream, balanced: bool | None = None):
        self._cuda.tf32_spmm(self.args(d_B, d_C, n, balanced), stream)

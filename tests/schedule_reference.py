"""The TF32 kernel's schedule in NumPy, vectorised over windows: the oracle that the C builder
(csrc/acc_schedule_cost.c, ``accspmm._tf32.build_tasks``) must reproduce row for row.  It was the
package's builder until the schedule moved to C; it derives the same tasks from whole-array
operations (runs, slots, reduceat) instead of one pass, so the two agree only if both are right."""

import numpy as np

from accspmm._tf32 import FILL, MERGE, REDUCE, TASK, TASK_WORDS, WARPS, WB


def _group_tasks(gw: np.ndarray, nb: np.ndarray, cap: int):
    """GROUP tasks of build_tasks for the windows ``gw`` (ascending; cap < nb <= WARPS cap): each
    window takes g = ceil(nb / cap) warps, about cap blocks each, and the groups are packed greedily,
    in window order, into tasks of up to WARPS warps.  Returns (tasks [T, TASK_WORDS] int64, the
    window each task starts with, task costs)."""
    g_all = -(-nb[gw] // max(cap, 1))
    if gw.size and bool((g_all == WARPS).all()):  # every group fills a task (always so for WARPS = 2)
        rows = np.zeros((gw.size, TASK_WORDS), np.int64)
        rows[:, 0] = 1
        rows[:, 1::2] = gw[:, None]
        rows[:, 2::2] = (np.arange(WARPS, dtype=np.int64) << 4) | WARPS
        return rows, gw.astype(np.int64), (-(-nb[gw] // WARPS) + FILL + REDUCE + TASK).astype(np.float64)
    group_rows, group_cost, group_key = [], [], []
    row, used, worst = None, 0, 0.0
    for w, n_w in zip(gw.tolist(), nb[gw].tolist()):
        g = -(-n_w // cap)
        if row is None or used + g > WARPS:
            if row is not None:
                group_rows.append(row)
                group_cost.append(worst + TASK)
            row, used, worst = np.zeros(TASK_WORDS, np.int64), 0, 0.0
            row[0] = 1
            row[1::2] = -1
            group_key.append(w)
        for j in range(g):
            row[1 + 2 * (used + j)] = w
            row[2 + 2 * (used + j)] = (j << 4) | g
        used += g
        worst = max(worst, -(-n_w // g) + FILL + REDUCE)
    if row is not None:
        group_rows.append(row)
        group_cost.append(worst + TASK)
    return (np.array(group_rows, np.int64).reshape(-1, TASK_WORDS), np.array(group_key, np.int64),
            np.array(group_cost, np.float64))


def build_tasks_reference(window_offsets, cap: int):
    """``accspmm._tf32.build_tasks`` in NumPy: ``tasks`` int32 [T, TASK_WORDS] in the kernel's
    encoding (cuda/tf32_spmm.h) and ``task_cost`` float64 [T] in model units (one column slice)."""
    wo = np.asarray(window_offsets, dtype=np.int64)
    nb = np.diff(wo)
    nw = nb.shape[0]
    if nw == 0:
        return np.zeros((0, TASK_WORDS), np.int32), np.zeros(0)
    if nw > np.iinfo(np.int32).max - 1:
        raise ValueError("too many row windows for the TF32 kernel (limit 2^31 - 2)")
    idx = np.arange(nw, dtype=np.int64)
    split = nb > cap if cap > 0 else np.zeros(nw, bool)
    pack = ~split
    cost = np.where(pack, nb + WB, 0.0)
    # runs: maximal sequences of pack windows, cut at every split window
    run = np.cumsum(split)
    if cap > 0:
        pre = np.cumsum(cost) - cost
        first = np.r_[True, run[1:] != run[:-1]]
        run_pre = pre[first][np.cumsum(first) - 1]
        slot = np.floor((pre - run_pre) / (cap + WB)).astype(np.int64)
        new_warp = pack & np.r_[True, (run[1:] != run[:-1]) | (slot[1:] != slot[:-1]) | split[:-1]]
    else:
        new_warp = pack.copy()  # identity: one window per warp
    w_start = idx[new_warp]
    mark = np.zeros(nw + 1, bool)  # the sorted union of warp starts, split windows and their ends
    mark[w_start] = True
    mark[idx[split]] = True
    mark[idx[split] + 1] = True
    mark[nw] = True
    bounds = np.flatnonzero(mark)
    w_end = bounds[np.searchsorted(bounds, w_start, side="right")]
    w_run = run[w_start]
    w_cost = np.add.reduceat(cost, w_start) + FILL if w_start.size else np.zeros(0)
    # PACK tasks: consecutive warps of one run, WARPS at a time
    run_first = np.r_[True, w_run[1:] != w_run[:-1]] if w_start.size else np.zeros(0, bool)
    rank = np.arange(w_start.size) - np.flatnonzero(run_first)[np.cumsum(run_first) - 1]
    new_task = rank % WARPS == 0
    task_of = np.cumsum(new_task) - 1
    npack = int(new_task.sum())
    pack_rows = np.empty((npack, WARPS + 1), np.int64)
    last = np.r_[np.flatnonzero(new_task)[1:] - 1, w_start.size - 1] if npack else np.zeros(0, np.int64)
    pack_rows[:] = w_end[last][:, None]
    pack_rows[task_of, rank % WARPS] = w_start
    # warps of a task are consecutive: the task's cost is its slowest warp's (reduceat, not the slow ufunc.at)
    pack_cost = (np.maximum.reduceat(w_cost, np.flatnonzero(new_task)) if npack else np.zeros(0)) + TASK
    pack_tasks = np.zeros((npack, TASK_WORDS), np.int64)
    pack_tasks[:, 1::2] = pack_rows[:, :-1]
    pack_tasks[:, 2::2] = pack_rows[:, 1:]
    # split windows: Q = ceil(nb / (WARPS cap)) parts of about cap blocks per warp
    sw = idx[split]
    q = -(-nb[sw] // (WARPS * max(cap, 1))) if sw.size else np.zeros(0, np.int64)
    multi = q > 1
    # Q = 1 (cap < nb <= WARPS cap): a GROUP of g = ceil(nb / cap) warps, about cap blocks each
    group_tasks, group_key, group_cost = _group_tasks(sw[~multi], nb, cap)
    # Q > 1: one task per part, all WARPS warps; a split id (counter) and workspace slots, one per part
    sm, qm = sw[multi], q[multi]
    split_id = np.arange(sm.size)
    slot_base = np.cumsum(qm) - qm
    rep = np.repeat(np.arange(sm.size), qm)
    part = np.arange(rep.size) - np.repeat(np.cumsum(qm) - qm, qm)
    split_tasks = np.zeros((rep.size, TASK_WORDS), np.int64)
    split_tasks[:, 0] = -(sm[rep] + 1)
    split_tasks[:, 1] = part
    split_tasks[:, 2] = qm[rep]
    split_tasks[:, 3] = split_id[rep]
    split_tasks[:, 4] = slot_base[rep]
    split_cost = (np.ceil(nb[sm][rep] / qm[rep] / WARPS) + FILL + REDUCE + TASK + MERGE * (1 + qm[rep]))
    # all tasks in window order
    keys = np.r_[pack_rows[:, 0], group_key, sm[rep]]
    order = np.argsort(keys, kind="stable")
    tasks = np.concatenate([pack_tasks, group_tasks, split_tasks])[order].astype(np.int32)
    task_cost = np.concatenate([pack_cost, group_cost, split_cost])[order]
    return tasks, task_cost

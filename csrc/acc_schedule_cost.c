/* acc_schedule_cost.c -- the TF32 kernel's schedule for one cap: its task
 * rows and their predicted costs, or only the costs' sum and max.
 *
 * One pass over the windows (accspmm._tf32 keeps the prediction formula and
 * the model's constants; tests/schedule_reference.py holds the NumPy form of
 * the same schedule, the oracle of the tests).  Window kinds for cap > 0:
 *   PACK  (blocks <= cap): consecutive PACK windows form runs, cut by the other
 *         kinds; a warp takes windows of its run while floor(cost before the
 *         window in the run / (cap + WB)) stays the same; a warp costs its
 *         windows' (blocks + WB) + FILL; WARPS consecutive warps of a run
 *         form a task costing its slowest warp + TASK;
 *   GROUP (cap < blocks <= WARPS cap): g = ceil(blocks / cap) warps, groups
 *         packed greedily in window order into tasks of WARPS warps; a task
 *         costs the max over its groups of ceil(blocks / g) + FILL + REDUCE,
 *         + TASK;
 *   SPLIT (blocks > WARPS cap): q = ceil(blocks / (WARPS cap)) tasks, each
 *         ceil(blocks / q / WARPS) + FILL + REDUCE + TASK + MERGE (1 + q).
 * cap = 0: every window is its own warp (PACK without packing).
 *
 * Task rows (cuda/tf32_spmm.h), in the order of the window each task opens
 * with (a row is reserved when its task opens, so a GROUP task that collects
 * windows far apart keeps the place of its first one):
 *   PACK  0, then per warp (first window, end window); unused warps of a
 *         short task hold (end, end) of its last warp;
 *   GROUP 1, then per warp (window, j << 4 | g); unused warps (-1, 0);
 *   SPLIT -(window + 1), part, q, split id, first workspace slot, 0...
 * Costs are integers held exactly in doubles, so sums do not depend on the
 * order of addition. */
#include "acc_internal.h"

#include <math.h>

typedef struct sched {
    int64_t cap;
    int warps, words;
    double WB, FILL, REDUCE, TASK, MERGE;
    int32_t *tasks; /* NULL: costs only */
    double *cost;
    double sum, max;
    int64_t ntasks, closed;
    /* the PACK run under way: its cost so far, the open warp, the open task */
    double run_cost, warp_cost, task_max;
    int64_t slot, pack_row;
    int warp_open, task_warps;
    /* the GROUP task under way */
    int group_used;
    double group_worst;
    int64_t group_row;
    /* SPLIT counters */
    int64_t split_id, slot_base;
} sched;

static int32_t *row_of(sched *S, int64_t r) { return S->tasks ? S->tasks + r * S->words : NULL; }

/* Reserves the next task row (zeroed). */
static int64_t open_task(sched *S) {
    const int64_t r = S->ntasks++;
    int32_t *row = row_of(S, r);
    if (row) memset(row, 0, (size_t)S->words * sizeof(int32_t));
    return r;
}

static void close_task(sched *S, int64_t r, double cost) {
    S->sum += cost;
    if (S->closed++ == 0 || cost > S->max) S->max = cost;
    if (S->cost) S->cost[r] = cost;
}

static void close_warp(sched *S, int64_t end) {
    if (!S->warp_open) return;
    const double wc = S->warp_cost + S->FILL;
    if (S->task_warps == 0 || wc > S->task_max) S->task_max = wc;
    int32_t *row = row_of(S, S->pack_row);
    if (row) row[2 + 2 * S->task_warps] = (int32_t)end;
    S->warp_open = 0;
    if (++S->task_warps == S->warps) {
        close_task(S, S->pack_row, S->task_max + S->TASK);
        S->task_warps = 0;
    }
}

static void close_run(sched *S, int64_t end) {
    close_warp(S, end);
    if (S->task_warps > 0) {
        int32_t *row = row_of(S, S->pack_row);
        for (int j = S->task_warps; row && j < S->warps; j++)
            row[1 + 2 * j] = row[2 + 2 * j] = (int32_t)end;
        close_task(S, S->pack_row, S->task_max + S->TASK);
    }
    S->task_warps = 0;
    S->run_cost = 0.0;
    S->slot = -1;
}

static void pack_window(sched *S, int64_t w, int64_t nb) {
    const double cost = (double)nb + S->WB;
    const int64_t s = S->cap == 0 ? w : (int64_t)floor(S->run_cost / ((double)S->cap + S->WB));
    if (!S->warp_open || s != S->slot) {
        close_warp(S, w);
        if (S->task_warps == 0) S->pack_row = open_task(S);
        int32_t *row = row_of(S, S->pack_row);
        if (row) row[1 + 2 * S->task_warps] = (int32_t)w;
        S->warp_open = 1;
        S->warp_cost = 0.0;
        S->slot = s;
    }
    S->warp_cost += cost;
    S->run_cost += cost;
}

static void close_group(sched *S) {
    if (S->group_used > 0) close_task(S, S->group_row, S->group_worst + S->TASK);
    S->group_used = 0;
}

static void group_window(sched *S, int64_t w, int64_t nb) {
    const int64_t g = (nb + S->cap - 1) / S->cap;
    if (S->group_used > 0 && S->group_used + g > S->warps) close_group(S);
    if (S->group_used == 0) {
        S->group_row = open_task(S);
        int32_t *row = row_of(S, S->group_row);
        if (row) {
            row[0] = 1;
            for (int j = 0; j < S->warps; j++)
                row[1 + 2 * j] = -1;
        }
    }
    int32_t *row = row_of(S, S->group_row);
    for (int64_t j = 0; row && j < g; j++) {
        row[1 + 2 * (S->group_used + j)] = (int32_t)w;
        row[2 + 2 * (S->group_used + j)] = (int32_t)((j << 4) | g);
    }
    const double wc = (double)((nb + g - 1) / g) + S->FILL + S->REDUCE;
    if (S->group_used == 0 || wc > S->group_worst) S->group_worst = wc;
    S->group_used += (int)g;
}

static void split_window(sched *S, int64_t w, int64_t nb, int64_t q) {
    const double per = ceil((double)nb / (double)q / (double)S->warps) + S->FILL + S->REDUCE + S->TASK +
                       S->MERGE * (1.0 + (double)q);
    for (int64_t j = 0; j < q; j++) {
        const int64_t r = open_task(S);
        int32_t *row = row_of(S, r);
        if (row) {
            row[0] = (int32_t)(-(w + 1));
            row[1] = (int32_t)j;
            row[2] = (int32_t)q;
            row[3] = (int32_t)S->split_id;
            row[4] = (int32_t)S->slot_base;
        }
        close_task(S, r, per);
    }
    S->split_id++;
    S->slot_base += q;
}

acc_status acc_schedule_build(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                              const double c[5], int32_t *tasks, double *task_cost, double *sum, double *max,
                              int64_t *ntasks) {
    if (!window_offsets || num_windows < 0 || cap < 0 || warps < 2 || !c || !sum || !max || !ntasks ||
        (!tasks) != (!task_cost))
        return ACC_ERR_INVALID_ARGUMENT;
    if (num_windows >= INT32_MAX - 1) return ACC_ERR_TOO_LARGE; /* window ids and -(w + 1) in int32 */
    sched S;
    memset(&S, 0, sizeof(S));
    S.cap = cap;
    S.warps = warps;
    S.words = 1 + 2 * warps;
    S.WB = c[0];
    S.FILL = c[1];
    S.REDUCE = c[2];
    S.TASK = c[3];
    S.MERGE = c[4];
    S.tasks = tasks;
    S.cost = task_cost;
    S.slot = -1;
    for (int64_t w = 0; w < num_windows; w++) {
        const int64_t nb = window_offsets[w + 1] - window_offsets[w];
        if (cap == 0 || nb <= cap) {
            pack_window(&S, w, nb);
            continue;
        }
        close_run(&S, w); /* a GROUP or SPLIT window cuts the run */
        const int64_t q = (nb + (int64_t)warps * cap - 1) / ((int64_t)warps * cap);
        if (q > 1)
            split_window(&S, w, nb, q);
        else
            group_window(&S, w, nb);
    }
    close_run(&S, num_windows);
    close_group(&S);
    *sum = S.sum;
    *max = S.max;
    *ntasks = S.ntasks;
    return ACC_SUCCESS;
}

acc_status acc_schedule_cost(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                             const double c[5], double *sum, double *max, int64_t *ntasks) {
    return acc_schedule_build(window_offsets, num_windows, cap, warps, c, NULL, NULL, sum, max, ntasks);
}

acc_status acc_schedule_costs(const int64_t *window_offsets, int64_t num_windows, const int64_t *caps,
                              int64_t ncaps, int warps, const double c[5], double *sums, double *maxes,
                              int64_t *ntasks) {
    if (ncaps < 0 || (ncaps > 0 && (!caps || !sums || !maxes || !ntasks))) return ACC_ERR_INVALID_ARGUMENT;
    acc_status status = ACC_SUCCESS;
    /* one pass per cap, the caps in parallel: a first call prices every cap (about 5 ns per window and
     * cap, serial; a thread per 8192 of those, so a small matrix's first call does not wait for 9) */
    const int64_t work = num_windows * ncaps / 8192 + 1;
    int threads = acc_num_threads();
    if (threads > work) threads = (int)work;
    if (threads > ncaps) threads = (int)ncaps;
    if (threads < 1) threads = 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < ncaps; i++) {
        const acc_status st = acc_schedule_cost(window_offsets, num_windows, caps[i], warps, c, &sums[i],
                                                &maxes[i], &ntasks[i]);
        if (st != ACC_SUCCESS) {
#pragma omp critical(acc_schedule_status)
            status = st;
        }
    }
    return status;
}

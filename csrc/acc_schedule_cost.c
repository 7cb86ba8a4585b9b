/* acc_schedule_cost.c -- the predicted cost of the TF32 kernel's schedule for one
 * cap, without building it.
 *
 * Mirrors accspmm._tf32.build_tasks' cost model in one pass over the windows
 * (the Python side keeps the task builder and the prediction formula; this
 * gives the same task costs, so the same sums: every cost is an integer held
 * exactly in a double).  Window kinds for cap > 0:
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
 * cap = 0: every window is its own warp (PACK without packing). */
#include "acc_internal.h"

#include <math.h>

/* Accumulates one task's cost. */
static void add_task(double cost, double *sum, double *max, int64_t *ntasks) {
    *sum += cost;
    if (*ntasks == 0 || cost > *max) *max = cost;
    (*ntasks)++;
}

acc_status acc_schedule_cost(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                             const double c[5], double *sum, double *max, int64_t *ntasks) {
    if (!window_offsets || num_windows < 0 || cap < 0 || warps < 1 || !c || !sum || !max || !ntasks)
        return ACC_ERR_INVALID_ARGUMENT;
    const double WB = c[0], FILL = c[1], REDUCE = c[2], TASK = c[3], MERGE = c[4];
    *sum = 0.0;
    *max = 0.0;
    *ntasks = 0;
    /* the PACK run under way: its cost so far, the open warp (slot, cost), the open task */
    double run_cost = 0.0, warp_cost = 0.0, task_max = 0.0;
    int64_t slot = -1;
    int warp_open = 0, task_warps = 0;
    /* the GROUP task under way */
    int group_used = 0;
    double group_worst = 0.0;
#define CLOSE_WARP()                                                                                         \
    do {                                                                                                     \
        if (warp_open) {                                                                                     \
            const double wc = warp_cost + FILL;                                                              \
            if (task_warps == 0 || wc > task_max) task_max = wc;                                             \
            warp_open = 0;                                                                                   \
            if (++task_warps == warps) {                                                                     \
                add_task(task_max + TASK, sum, max, ntasks);                                                 \
                task_warps = 0;                                                                              \
            }                                                                                                \
        }                                                                                                    \
    } while (0)
#define CLOSE_RUN()                                                                                          \
    do {                                                                                                     \
        CLOSE_WARP();                                                                                        \
        if (task_warps > 0) add_task(task_max + TASK, sum, max, ntasks);                                     \
        task_warps = 0;                                                                                      \
        run_cost = 0.0;                                                                                      \
        slot = -1;                                                                                           \
    } while (0)
    for (int64_t w = 0; w < num_windows; w++) {
        const int64_t nb = window_offsets[w + 1] - window_offsets[w];
        if (cap == 0 || nb <= cap) { /* PACK */
            const double cost = (double)nb + WB;
            const int64_t s = cap == 0 ? w : (int64_t)floor(run_cost / ((double)cap + WB));
            if (!warp_open || s != slot) {
                CLOSE_WARP();
                warp_open = 1;
                warp_cost = 0.0;
                slot = s;
            }
            warp_cost += cost;
            run_cost += cost;
            continue;
        }
        CLOSE_RUN(); /* a GROUP or SPLIT window cuts the run */
        const int64_t q = (nb + (int64_t)warps * cap - 1) / ((int64_t)warps * cap);
        if (q > 1) {
            const double per = ceil((double)nb / (double)q / (double)warps) + FILL + REDUCE + TASK +
                               MERGE * (1.0 + (double)q);
            for (int64_t j = 0; j < q; j++)
                add_task(per, sum, max, ntasks);
        } else {
            const int64_t g = (nb + cap - 1) / cap;
            if (group_used > 0 && group_used + g > warps) {
                add_task(group_worst + TASK, sum, max, ntasks);
                group_used = 0;
            }
            const double wc = (double)((nb + g - 1) / g) + FILL + REDUCE;
            if (group_used == 0 || wc > group_worst) group_worst = wc;
            group_used += (int)g;
        }
    }
    CLOSE_RUN();
    if (group_used > 0) add_task(group_worst + TASK, sum, max, ntasks);
#undef CLOSE_RUN
#undef CLOSE_WARP
    return ACC_SUCCESS;
}

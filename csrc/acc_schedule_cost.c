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
 * The model's constants are small non-negative integers, so every task cost
 * is an integer (int64 here); the sums are doubles that hold them exactly
 * below 2^53, so they do not depend on the order of addition.  A PACK window
 * opens a warp when the run's cost reaches the next multiple of cap + WB
 * (the slot test floor(run / (cap + WB)) != slot, without a division per
 * window: a PACK window costs at most cap + WB). */
#include "acc_internal.h"

typedef struct sched {
    int64_t cap;
    int64_t warps, words;
    int64_t WB, FILL, REDUCE, TASK, MERGE;
    int32_t *tasks; /* NULL: costs only */
    double *cost;
    int64_t capacity; /* rows of tasks and cost */
    double sum;
    int64_t max, ntasks, closed;
    /* the PACK run under way: its cost so far, where its next warp starts, the open warp, the open task */
    int64_t run_cost, bound, warp_cost, task_max;
    int64_t pack_row, task_warps;
    int warp_open;
    /* the GROUP task under way */
    int64_t group_used, group_worst, group_row;
    /* SPLIT counters */
    int64_t split_id, slot_base;
} sched;

/* A task's row, or NULL (costs only, or beyond the caller's room: then the build fails). */
static int32_t *row_of(sched *S, int64_t r) {
    return S->tasks && r < S->capacity ? S->tasks + r * S->words : NULL;
}

/* Reserves the next task row (zeroed). */
static int64_t open_task(sched *S) {
    const int64_t r = S->ntasks++;
    int32_t *row = row_of(S, r);
    if (row) memset(row, 0, (size_t)S->words * sizeof(int32_t));
    return r;
}

static void close_task(sched *S, int64_t r, int64_t cost) {
    S->sum += (double)cost;
    if (S->closed++ == 0 || cost > S->max) S->max = cost;
    if (S->cost && r < S->capacity) S->cost[r] = (double)cost;
}

static void close_warp(sched *S, int64_t end) {
    if (!S->warp_open) return;
    const int64_t wc = S->warp_cost + S->FILL;
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
        for (int64_t j = S->task_warps; row && j < S->warps; j++)
            row[1 + 2 * j] = row[2 + 2 * j] = (int32_t)end;
        close_task(S, S->pack_row, S->task_max + S->TASK);
    }
    S->task_warps = 0;
    S->run_cost = 0;
}

static void pack_window(sched *S, int64_t w, int64_t nb) {
    if (S->cap == 0 || !S->warp_open || S->run_cost >= S->bound) {
        /* the run is below bound + (cap + WB): the next slot starts at the next multiple */
        S->bound = S->warp_open ? S->bound + S->cap + S->WB : S->cap + S->WB;
        close_warp(S, w);
        if (S->task_warps == 0) S->pack_row = open_task(S);
        int32_t *row = row_of(S, S->pack_row);
        if (row) row[1 + 2 * S->task_warps] = (int32_t)w;
        S->warp_open = 1;
        S->warp_cost = 0;
    }
    S->warp_cost += nb + S->WB;
    S->run_cost += nb + S->WB;
}

static void close_group(sched *S) {
    if (S->group_used > 0) close_task(S, S->group_row, S->group_worst + S->TASK);
    S->group_used = 0;
}

/* cap < nb <= warps cap < 2^26 (acc_schedule_build's limits): 32-bit divisions */
static void group_window(sched *S, int64_t w, int64_t nb) {
    const int64_t g = ((uint32_t)nb + (uint32_t)S->cap - 1) / (uint32_t)S->cap;
    if (S->group_used > 0 && S->group_used + g > S->warps) close_group(S);
    if (S->group_used == 0) {
        S->group_row = open_task(S);
        int32_t *row = row_of(S, S->group_row);
        if (row) {
            row[0] = 1;
            for (int64_t j = 0; j < S->warps; j++)
                row[1 + 2 * j] = -1;
        }
    }
    int32_t *row = row_of(S, S->group_row);
    for (int64_t j = 0; row && j < g; j++) {
        row[1 + 2 * (S->group_used + j)] = (int32_t)w;
        row[2 + 2 * (S->group_used + j)] = (int32_t)((j << 4) | g);
    }
    const int64_t wc = (int64_t)(((uint32_t)nb + (uint32_t)g - 1) / (uint32_t)g) + S->FILL + S->REDUCE;
    if (S->group_used == 0 || wc > S->group_worst) S->group_worst = wc;
    S->group_used += g;
}

static void split_window(sched *S, int64_t w, int64_t nb, int64_t q) {
    const int64_t per =
        (nb + q * S->warps - 1) / (q * S->warps) + S->FILL + S->REDUCE + S->TASK + S->MERGE * (1 + q);
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

/* The model's constants as integers: each a whole number in [0, 1024]. */
static int integer_constants(const double c[5], int64_t out[5]) {
    for (int j = 0; j < 5; j++) {
        if (!(c[j] >= 0.0 && c[j] <= 1024.0) || c[j] != (double)(int64_t)c[j]) return 0;
        out[j] = (int64_t)c[j];
    }
    return 1;
}

/* The arguments both passes share; k: the constants as integers. */
static acc_status schedule_args(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                                const double c[5], int64_t k[5]) {
    if (!window_offsets || num_windows < 0 || cap < 0 || cap > (1 << 20) || warps < 2 || warps > 64 || !c ||
        !integer_constants(c, k))
        return ACC_ERR_INVALID_ARGUMENT;
    if (num_windows >= INT32_MAX - 1) return ACC_ERR_TOO_LARGE; /* window ids and -(w + 1) in int32 */
    return cap > 0 && cap + k[0] == 0 ? ACC_ERR_INVALID_ARGUMENT : ACC_SUCCESS;
}

/* A window's block count, checked by both passes: offsets must not decrease; a window of 8 rows of
 * int32 columns has fewer than 2^40 blocks; the SPLIT slots so far plus this window's must fit int32. */
static inline acc_status window_check(int64_t nb, int64_t slot_base) {
    if (nb < 0) return ACC_ERR_INVALID_ARGUMENT;
    return nb > ((int64_t)1 << 40) || slot_base > INT32_MAX - nb ? ACC_ERR_TOO_LARGE : ACC_SUCCESS;
}

acc_status acc_schedule_build(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                              const double c[5], int32_t *tasks, double *task_cost, int64_t capacity,
                              double *sum, double *max, int64_t *ntasks, int64_t counts[3]) {
    int64_t k[5];
    if (!sum || !max || !ntasks || (!tasks) != (!task_cost) || capacity < 0) return ACC_ERR_INVALID_ARGUMENT;
    acc_status st = schedule_args(window_offsets, num_windows, cap, warps, c, k);
    if (st != ACC_SUCCESS) return st;
    sched S;
    int64_t cut = 0;
    memset(&S, 0, sizeof(S));
    S.cap = cap;
    S.warps = warps;
    S.words = 1 + 2 * (int64_t)warps;
    S.WB = k[0];
    S.FILL = k[1];
    S.REDUCE = k[2];
    S.TASK = k[3];
    S.MERGE = k[4];
    S.tasks = tasks;
    S.cost = task_cost;
    S.capacity = capacity;
    for (int64_t w = 0; w < num_windows; w++) {
        const int64_t nb = window_offsets[w + 1] - window_offsets[w];
        if ((st = window_check(nb, S.slot_base)) != ACC_SUCCESS) return st;
        if (cap == 0 || nb <= cap) {
            pack_window(&S, w, nb);
            continue;
        }
        close_run(&S, w); /* a GROUP or SPLIT window cuts the run */
        cut++;
        const int64_t wc = (int64_t)warps * cap;
        const int64_t q = nb <= wc ? 1 : (nb + wc - 1) / wc;
        if (q > 1)
            split_window(&S, w, nb, q);
        else
            group_window(&S, w, nb);
    }
    close_run(&S, num_windows);
    close_group(&S);
    *sum = S.sum;
    *max = (double)S.max;
    *ntasks = S.ntasks;
    if (counts) {
        counts[0] = S.slot_base; /* the tasks of multi-part SPLIT windows: workspace slots */
        counts[1] = S.split_id;  /* multi-part SPLIT windows */
        counts[2] = cut;         /* windows of more than cap blocks (GROUP or SPLIT) */
    }
    return tasks && S.ntasks > capacity ? ACC_ERR_INVALID_ARGUMENT : ACC_SUCCESS;
}

/* acc_schedule_build without task rows, its state in locals (the costs of
 * every cap are priced at a plan's first call): the same steps, so the same
 * sum, max and count (tests/test_schedule.py compares the two); cap 0, where
 * every window is a warp of its own, in closed form. */
static acc_status schedule_cost_only(const int64_t *wo, int64_t num_windows, int64_t cap, int64_t warps,
                                     const int64_t k[5], double *sum_out, double *max_out,
                                     int64_t *ntasks_out) {
    const int64_t WB = k[0], FILL = k[1], REDUCE = k[2], TASK = k[3], MERGE = k[4], D = cap + WB;
    double sum = 0.0;
    int64_t max = 0, closed = 0, ntasks = 0, slot_base = 0;
    int64_t run = 0, bound = 0, warp = 0, task_max = 0, task_warps = 0, group_used = 0, group_worst = 0;
    int warp_open = 0;
    if (cap == 0) { /* the identity: a task per `warps` windows, its longest + WB + FILL + TASK */
        for (int64_t t = 0; t < num_windows; t += warps) {
            int64_t longest = 0;
            for (int64_t w = t; w < num_windows && w < t + warps; w++) {
                const int64_t nb = wo[w + 1] - wo[w];
                const acc_status st = window_check(nb, 0);
                if (st != ACC_SUCCESS) return st;
                longest = nb > longest ? nb : longest;
            }
            const int64_t c = longest + WB + FILL + TASK;
            sum += (double)c;
            max = c > max ? c : max;
            ntasks++;
        }
        *sum_out = sum;
        *max_out = (double)max;
        *ntasks_out = ntasks;
        return ACC_SUCCESS;
    }
#define CLOSE_TASK(cost)                                                                                     \
    do {                                                                                                     \
        const int64_t c_ = (cost);                                                                           \
        sum += (double)c_;                                                                                   \
        if (closed++ == 0 || c_ > max) max = c_;                                                             \
    } while (0)
#define CLOSE_WARP()                                                                                         \
    do {                                                                                                     \
        if (warp_open) {                                                                                     \
            const int64_t wc_ = warp + FILL;                                                                 \
            if (task_warps == 0 || wc_ > task_max) task_max = wc_;                                           \
            warp_open = 0;                                                                                   \
            if (++task_warps == warps) {                                                                     \
                CLOSE_TASK(task_max + TASK);                                                                 \
                task_warps = 0;                                                                              \
            }                                                                                                \
        }                                                                                                    \
    } while (0)
    for (int64_t w = 0; w < num_windows; w++) {
        const int64_t nb = wo[w + 1] - wo[w];
        const acc_status st = window_check(nb, slot_base);
        if (st != ACC_SUCCESS) return st;
        if (cap == 0 || nb <= cap) { /* pack_window */
            if (cap == 0 || !warp_open || run >= bound) {
                bound = warp_open ? bound + D : D;
                CLOSE_WARP();
                if (task_warps == 0) ntasks++;
                warp_open = 1;
                warp = 0;
            }
            warp += nb + WB;
            run += nb + WB;
            continue;
        }
        CLOSE_WARP(); /* close_run */
        if (task_warps > 0) CLOSE_TASK(task_max + TASK);
        task_warps = 0;
        run = 0;
        const int64_t wc = warps * cap;
        const int64_t q = nb <= wc ? 1 : (nb + wc - 1) / wc;
        if (q > 1) { /* split_window */
            const int64_t per = (nb + q * warps - 1) / (q * warps) + FILL + REDUCE + TASK + MERGE * (1 + q);
            for (int64_t j = 0; j < q; j++)
                CLOSE_TASK(per);
            ntasks += q;
            slot_base += q;
            continue;
        }
        const int64_t g = ((uint32_t)nb + (uint32_t)cap - 1) / (uint32_t)cap; /* group_window */
        if (group_used > 0 && group_used + g > warps) {
            CLOSE_TASK(group_worst + TASK);
            group_used = 0;
        }
        if (group_used == 0) ntasks++;
        const int64_t gc = (int64_t)(((uint32_t)nb + (uint32_t)g - 1) / (uint32_t)g) + FILL + REDUCE;
        if (group_used == 0 || gc > group_worst) group_worst = gc;
        group_used += g;
    }
    CLOSE_WARP();
    if (task_warps > 0) CLOSE_TASK(task_max + TASK);
    if (group_used > 0) CLOSE_TASK(group_worst + TASK);
#undef CLOSE_WARP
#undef CLOSE_TASK
    *sum_out = sum;
    *max_out = (double)max;
    *ntasks_out = ntasks;
    return ACC_SUCCESS;
}

acc_status acc_schedule_cost(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                             const double c[5], double *sum, double *max, int64_t *ntasks) {
    int64_t k[5];
    if (!sum || !max || !ntasks) return ACC_ERR_INVALID_ARGUMENT;
    const acc_status st = schedule_args(window_offsets, num_windows, cap, warps, c, k);
    return st != ACC_SUCCESS
               ? st
               : schedule_cost_only(window_offsets, num_windows, cap, warps, k, sum, max, ntasks);
}

acc_status acc_schedule_costs(const int64_t *window_offsets, int64_t num_windows, const int64_t *caps,
                              int64_t ncaps, int warps, const double c[5], double *sums, double *maxes,
                              int64_t *ntasks) {
    if (ncaps < 0 || (ncaps > 0 && (!caps || !sums || !maxes || !ntasks))) return ACC_ERR_INVALID_ARGUMENT;
    acc_status status = ACC_SUCCESS;
    /* one pass per cap, the caps in parallel: a first call prices every cap (2-5 ns per window and
     * cap on the dev machine, 7-20 on the GPU machine's host).  A thread per 16384 of those: waking
     * a sleeping OpenMP thread costs more than a small matrix's whole pricing (wiki-Vote, 1,038
     * windows x 6 caps, on the 2-core dev machine after 10 ms idle: 1,390 us on 2 threads against 46
     * on one), while one thread for Andrews' 7,500 windows x 6 caps took 472 us on the GPU machine
     * against 212 on the 6 threads of the earlier rule of a thread per 8192 */
    const int64_t work = num_windows * ncaps / 16384 + 1;
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

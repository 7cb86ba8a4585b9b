/*
 * acc_internal.h -- helpers shared by the C core's files (not public).
 *
 * One allocation module (acc_memory.c): every allocation goes through
 * acc_mem_alloc/acc_mem_free so the test driver can make the n-th allocation fail
 * and run every out-of-memory path (CSparse's habit).
 */
#ifndef ACC_INTERNAL_H
#define ACC_INTERNAL_H

#include "accspmm.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Allocates n*size bytes (NULL on overflow or failure; never for n == 0). */
void *acc_mem_alloc(size_t n, size_t size);
/* Grows or shrinks p to n*size bytes (NULL on failure: p is still valid and still owned). */
void *acc_mem_realloc(void *p, size_t n, size_t size);
void acc_mem_free(void *p);
/* Test hook: the countdown-th allocation from now fails (0 disables). */
void acc_set_alloc_countdown(long countdown);

/* Distinct keys (column >> shift) of the window of rows perm[first .. first + rows - 1] (rows <= ACC_BSR,
 * rows past m ignored), by a merge tree of the rows' sorted lists (acc_window_distinct.c):
 * O(L log rows) for L entries.  A column not above its row's previous one sets *bad (the count is then
 * meaningless).  Windows beyond a stack buffer merge in s->buf, grown as needed (one scratch per
 * thread, freed with acc_window_scratch_free); -1 when that allocation fails. */
typedef struct acc_window_scratch {
    int32_t *buf;
    int64_t cap;
} acc_window_scratch;
int64_t acc_window_distinct(const acc_csr *A, const int64_t *perm, int64_t first, int rows, int shift,
                            acc_window_scratch *s, int *bad);
void acc_window_scratch_free(acc_window_scratch *s);

/* Runs `call`; on a negative status stores it in `status` and jumps to the
 * function's single cleanup label `done`. */
#define ACC_CHECK(call)                                                                                      \
    do {                                                                                                     \
        status = (call);                                                                                     \
        if (status != ACC_SUCCESS) goto done;                                                                \
    } while (0)

static inline int acc_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Threads for a parallel pass over `work` cheap items (about a nanosecond
 * each): one per ACC_ITEMS_PER_THREAD, at most all.  A 16-thread region
 * over a few hundred microseconds of work waits for its slowest thread,
 * and one descheduled thread (another runtime's spinning threads, e.g.
 * PyTorch's) costs milliseconds: measured on the GPU machine. */
#define ACC_ITEMS_PER_THREAD (1 << 17)
/* Items an entry counts for in acc_threads_for where a pass merges windows of rows (about 4 ns an
 * entry on the GPU machine's host, against a nanosecond an item). */
#define ACC_MERGE_WORK 4
static inline int acc_threads_for(int64_t work) {
    const int64_t t = work / ACC_ITEMS_PER_THREAD + 1, max = acc_num_threads();
    return (int)(t < max ? t : max);
}

/* Threads of the current team (1 outside a parallel region). */
static inline int acc_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static inline int acc_thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Sorts keys[0..n) ascending (uint64; introsort: O(n log n) whatever the order). */
void acc_sort_u64(uint64_t *keys, int64_t n);
/* The same with the quicksort's depth limit given (acc_sort_u64: 2 log2 n; 0: heapsort). */
void acc_sort_u64_depth(uint64_t *keys, int64_t n, int depth);

/* First row whose work prefix reaches target: the row split of a thread in
 * an nnz-balanced static schedule.  row_offsets[m+1] non-decreasing. */
int64_t acc_row_for_work(const int64_t *row_offsets, int64_t m, int64_t target);

static inline size_t acc_dtype_size(acc_dtype dtype) {
    return dtype == ACC_FLOAT64 ? sizeof(double) : sizeof(float);
}

static inline int acc_dtype_valid(acc_dtype dtype) { return dtype == ACC_FLOAT32 || dtype == ACC_FLOAT64; }

/* Transposed pattern of a CSR (rows of each column, ascending).
 *   col_offsets[k+1] int64, rows[nnz] int32 (needs m <= INT32_MAX). */
acc_status acc_pattern_transpose(const acc_csr *A, int64_t *col_offsets, int32_t *rows);

/* Progress reporting (see accspmm.h): relaxed stores, NULL-safe. */
static inline void acc_progress_set(int64_t *progress, int64_t done, int64_t total) {
    if (!progress) return;
    __atomic_store_n(&progress[1], total, __ATOMIC_RELAXED);
    __atomic_store_n(&progress[0], done, __ATOMIC_RELAXED);
}

/* splitmix64: seeded tie-breaking keys. */
static inline uint64_t acc_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Shuffles a[0..n) in place with a Fisher-Yates walk driven by seed. */
static inline void acc_shuffle_i64(int64_t *a, int64_t n, uint64_t seed) {
    uint64_t state = seed;
    for (int64_t i = n - 1; i > 0; i--) {
        state = acc_mix64(state);
        const int64_t j = (int64_t)(state % (uint64_t)(i + 1));
        const int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Order of the n lists of an offsets array by length (ascending when
 * ascending != 0, else descending), stable by index; with seed != 0 each run
 * of equal lengths is shuffled.  Counting sort: O(n + max length).
 *   offsets[n+1], order[n] out. */
acc_status acc_order_by_length(const int64_t *offsets, int64_t n, int ascending, uint64_t seed,
                               int64_t *order);

#endif /* ACC_INTERNAL_H */

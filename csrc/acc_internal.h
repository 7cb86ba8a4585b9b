/*
 * acc_internal.h -- helpers shared by the C core's files (not public).
 *
 * One allocation module (acc_memory.c): every allocation goes through
 * acc_malloc/acc_free so the test driver can make the n-th allocation fail
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
void *acc_malloc(size_t n, size_t size);
void acc_free(void *p);
/* Test hook: the countdown-th allocation from now fails (0 disables). */
void acc_set_alloc_countdown(long countdown);

/* Runs `call`; on a negative status stores it in `status` and jumps to the
 * function's single cleanup label `done`. */
#define ACC_CHECK(call)                                                                            \
    do {                                                                                           \
        status = (call);                                                                           \
        if (status != ACC_SUCCESS) goto done;                                                      \
    } while (0)

static inline int acc_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
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

/* Sorts keys[0..n) ascending (uint64, introsort-free quicksort + insertion). */
void acc_sort_u64(uint64_t *keys, int64_t n);

/* First row whose work prefix reaches target: the row split of a thread in
 * an nnz-balanced static schedule.  row_offsets[m+1] non-decreasing. */
int64_t acc_row_for_work(const int64_t *row_offsets, int64_t m, int64_t target);

static inline size_t acc_dtype_size(acc_dtype dtype) {
    return dtype == ACC_FLOAT64 ? sizeof(double) : sizeof(float);
}

static inline int acc_dtype_valid(acc_dtype dtype) {
    return dtype == ACC_FLOAT32 || dtype == ACC_FLOAT64;
}

#endif /* ACC_INTERNAL_H */

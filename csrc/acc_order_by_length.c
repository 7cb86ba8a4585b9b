/* acc_order_by_length.c -- stable counting sort of lists by length. */
#include "acc_internal.h"

acc_status acc_order_by_length(const int64_t *offsets, int64_t n, int ascending, uint64_t seed,
                               int64_t *order) {
    if (!offsets || !order || n < 0) return ACC_ERR_INVALID_ARGUMENT;
    int64_t maxlen = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = offsets[i + 1] - offsets[i];
        if (len > maxlen) maxlen = len;
    }
    int64_t *start = acc_mem_alloc((size_t)maxlen + 2, sizeof(int64_t));
    if (!start) return ACC_ERR_OUT_OF_MEMORY;
    memset(start, 0, ((size_t)maxlen + 2) * sizeof(int64_t));
    /* bucket b = rank of the length in the requested direction */
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = offsets[i + 1] - offsets[i];
        start[(ascending ? len : maxlen - len) + 1]++;
    }
    for (int64_t b = 0; b <= maxlen; b++)
        start[b + 1] += start[b];
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = offsets[i + 1] - offsets[i];
        order[start[ascending ? len : maxlen - len]++] = i;
    }
    if (seed != 0) {
        /* start[b] now marks the end of bucket b: shuffle each run */
        int64_t begin = 0;
        for (int64_t b = 0; b <= maxlen; b++) {
            acc_shuffle_i64(order + begin, start[b] - begin, seed + (uint64_t)b);
            begin = start[b];
        }
    }
    acc_mem_free(start);
    return ACC_SUCCESS;
}

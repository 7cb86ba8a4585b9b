/* acc_lpt_rows.c -- a schedule's task rows in the launch order "longest predicted task first".
 *
 * The order is the stable descending sort of the task costs (ties keep window order), which
 * accspmm._tf32.lpt_order computes with NumPy; here in one C call at a plan's first call, before
 * its first launch.  The costs are the schedule's model units, integers held in doubles: a
 * counting sort over their range where that range is at most 4n + 65536 (a schedule's costs are
 * at most a few times its cap), else a stable merge sort of the indices.  O(n + range) or
 * O(n log n). */
#include "acc_internal.h"

/* order[0, n): stable merge sort by cost descending (tmp: n slots of scratch). */
static void merge_desc(int64_t *order, int64_t *tmp, int64_t n, const double *cost) {
    int64_t *src = order, *dst = tmp;
    for (int64_t i = 0; i < n; i++)
        src[i] = i;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            const int64_t mid = lo + width < n ? lo + width : n;
            const int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) /* the right one only when strictly longer: stable */
                dst[o++] = cost[src[b]] > cost[src[a]] ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != order) memcpy(order, src, (size_t)n * sizeof(int64_t));
}

acc_status acc_lpt_order(const double *cost, int64_t n, int64_t *order) {
    if (n < 0 || (n > 0 && (!cost || !order))) return ACC_ERR_INVALID_ARGUMENT;
    double lo = 0.0, hi = 0.0;
    int integral = 1;
    for (int64_t i = 0; i < n; i++) {
        const double c = cost[i];
        if (!(c == c)) return ACC_ERR_INVALID_ARGUMENT; /* NaN */
        if (i == 0 || c < lo) lo = c;
        if (i == 0 || c > hi) hi = c;
        integral &= c > -9.0e15 && c < 9.0e15 && c == (double)(int64_t)c; /* no cast out of range */
    }
    const double range = hi - lo;
    if (integral && range <= 4.0 * (double)n + 65536.0) {
        const int64_t top = (int64_t)hi, buckets = (int64_t)range + 1;
        int64_t *start = acc_mem_alloc((size_t)buckets + 1, sizeof(int64_t));
        if (!start) return ACC_ERR_OUT_OF_MEMORY;
        memset(start, 0, ((size_t)buckets + 1) * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) /* bucket: rank of the cost from the longest */
            start[top - (int64_t)cost[i] + 1]++;
        for (int64_t b = 0; b < buckets; b++)
            start[b + 1] += start[b];
        for (int64_t i = 0; i < n; i++)
            order[start[top - (int64_t)cost[i]]++] = i;
        acc_mem_free(start);
        return ACC_SUCCESS;
    }
    int64_t *tmp = acc_mem_alloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (!tmp) return ACC_ERR_OUT_OF_MEMORY;
    merge_desc(order, tmp, n, cost);
    acc_mem_free(tmp);
    return ACC_SUCCESS;
}

acc_status acc_lpt_rows(const int32_t *rows, int64_t n, int64_t width, const double *cost, int32_t *out) {
    if (n < 0 || width <= 0 || (n > 0 && (!rows || !out))) return ACC_ERR_INVALID_ARGUMENT;
    if (n == 0) return ACC_SUCCESS;
    int64_t *order = acc_mem_alloc((size_t)n, sizeof(int64_t));
    if (!order) return ACC_ERR_OUT_OF_MEMORY;
    const acc_status st = acc_lpt_order(cost, n, order);
    if (st == ACC_SUCCESS)
        for (int64_t i = 0; i < n; i++)
            memcpy(out + i * width, rows + order[i] * width, (size_t)width * sizeof(int32_t));
    acc_mem_free(order);
    return st;
}

/* acc_csr_long_parts.c -- the CSR kernels' parts of A's long rows (accspmm._tf32.csr_long_parts).
 *
 * A row of more than `long_len` entries is cut into P = ceil(length / part) consecutive ranges of equal size
 * (j * length / P ..), a thread block or a group of lanes each (cuda/tf32_spmm.h, acc_tf32_csr.long_parts).
 * One pass over the offsets to count them, one to write them (a caller that has counted them passes the
 * count, which the writer checks): a small plan's first CSR call paid ~100 us of NumPy passes for this on the
 * GPU machine's host.  O(m + P). */
#include "acc_internal.h"

acc_status acc_csr_long_count(const int64_t *offsets, int64_t m, int64_t long_len, int64_t part,
                              int64_t *rows, int64_t *parts, int64_t *longest) {
    if (!offsets || m < 0 || long_len < 0 || part <= 0 || !rows || !parts) return ACC_ERR_INVALID_ARGUMENT;
    int64_t r = 0, p = 0, top = 0;
    for (int64_t i = 0; i < m; i++) {
        const int64_t len = offsets[i + 1] - offsets[i];
        if (len > top) top = len;
        if (len > long_len) {
            r++;
            p += (len + part - 1) / part;
        }
    }
    *rows = r;
    *parts = p;
    if (longest) *longest = top;
    return ACC_SUCCESS;
}

acc_status acc_csr_long_parts(const int64_t *offsets, int64_t m, int64_t long_len, int64_t part, int64_t *out,
                              int64_t capacity) {
    if (!offsets || m < 0 || long_len < 0 || part <= 0 || capacity < 0 || (capacity > 0 && !out))
        return ACC_ERR_INVALID_ARGUMENT;
    int64_t q = 0;
    for (int64_t i = 0; i < m; i++) {
        const int64_t start = offsets[i], len = offsets[i + 1] - start;
        if (len <= long_len) continue;
        const int64_t P = (len + part - 1) / part, step = len / P, rest = len % P;
        if (P > capacity - q) return ACC_ERR_INVALID_ARGUMENT; /* more parts than the caller counted */
        /* part j starts at start + j * len / P = start + j * step + (j * rest) / P: the quotient's fraction
         * carried from part to part (rest < P: at most one a part), no division per part */
        int64_t lo = start, frac = 0;
        for (int64_t j = 0; j < P; j++, q++) {
            int64_t hi = lo + step;
            frac += rest;
            if (frac >= P) {
                frac -= P;
                hi++;
            }
            out[4 * q] = i;
            out[4 * q + 1] = lo;
            out[4 * q + 2] = hi;
            out[4 * q + 3] = j | (P << 32);
            lo = hi;
        }
    }
    return q == capacity ? ACC_SUCCESS
                         : ACC_ERR_INVALID_ARGUMENT; /* fewer: the count was not of these offsets */
}

/* acc_row_for_work.c -- binary search used by nnz-balanced row schedules. */
#include "acc_internal.h"

/* Smallest row r in [0, m] with row_offsets[r] + r >= target, i.e. the split
 * point where work (nonzeros plus one per row, so empty rows count) reaches
 * target. */
int64_t acc_row_for_work(const int64_t *row_offsets, int64_t m, int64_t target) {
    int64_t lo = 0, hi = m;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (row_offsets[mid] + mid < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

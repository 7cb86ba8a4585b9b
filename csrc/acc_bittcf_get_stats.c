/* acc_bittcf_get_stats.c -- quality metrics of a BitTCF. */
#include "acc_internal.h"

#include <math.h>

acc_status acc_bittcf_get_stats(const acc_bittcf *F, acc_bittcf_stats *out) {
    if (!F || !out || !F->window_offsets || F->num_windows < 0 || !acc_dtype_valid(F->dtype))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t W = F->num_windows, *wo = F->window_offsets;
    const int64_t nblocks = wo[W];
    memset(out, 0, sizeof(*out));
    out->num_blocks = nblocks;
    out->num_windows = W;
    out->mean_nnz_per_block = nblocks > 0 ? (double)F->nnz / (double)nblocks : 0.0;
    const double mean = W > 0 ? (double)nblocks / (double)W : 0.0;
    double sq = 0.0, dev = 0.0;
    int64_t maxb = 0, empty = 0;
    for (int64_t w = 0; w < W; w++) {
        const int64_t nb = wo[w + 1] - wo[w];
        if (nb > maxb) maxb = nb;
        empty += nb == 0;
        sq += ((double)nb - mean) * ((double)nb - mean);
        dev += fabs((double)nb - mean);
    }
    out->empty_windows = empty;
    out->blocks_per_window_mean = mean;
    out->blocks_per_window_max = maxb;
    out->blocks_per_window_std = W > 0 ? sqrt(sq / (double)W) : 0.0;
    out->imbalance_degree = W > 0 ? dev / (double)W : 0.0;
    const int64_t vsize = (int64_t)acc_dtype_size(F->dtype);
    out->bytes = (W + 1) * 8 + nblocks * (ACC_TILE * 4 + 8 + 8) + 8 + F->nnz * vsize;
    out->csr_bytes = (F->m + 1) * 8 + F->nnz * (4 + vsize);
    return ACC_SUCCESS;
}

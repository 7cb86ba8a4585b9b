/*
 * half_spmm.h -- launcher of the FP16 / BF16 block-CSR SpMM (half_spmm.cu, the SMaT design):
 * BSR16 blocks (csrc/accspmm.h) on mma.m16n8k16, FP32 accumulation.
 * All pointers are device pointers; lengths in brackets.
 */
#ifndef ACC_HALF_SPMM_H
#define ACC_HALF_SPMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACC_HALF_WARPS 4  /* warps per thread block: consecutive tasks, one column slice */
#define ACC_HALF_SLICE 64 /* columns of B and C per warp */
#define ACC_HALF_TASK_WORDS 5
#define ACC_HALF_QUADS 2 /* acc_half_args.pairs: quads of block rows on warpgroup MMA */
#define ACC_HALF_CTA_COLS 128 /* columns of a thread block of the pair kernel at widths a multiple of 8 */

/* Whether width n runs the pairs' thread blocks (a multiple of 8) with its last column slice more than half
 * full: what a plan asks of a width below PAIR_MIN_N (accspmm/_half.py), where the row kernel's 64-column
 * slices otherwise waste less. */
static inline int acc_half_fills_slices(int64_t n) {
    return n % 8 == 0 && (n % ACC_HALF_CTA_COLS == 0 || n % ACC_HALF_CTA_COLS > ACC_HALF_CTA_COLS / 2);
}

/* Rows of a schedule window, and of a split workspace slot: a block row (16), a pair (32) or a quad (64). */
#define ACC_HALF_WINDOW_ROWS(pairs) ((pairs) == ACC_HALF_QUADS ? 64 : (pairs) ? 32 : 16)
/* ... and its columns: n rounded up to a multiple of 8 (widths under 8 run on copies padded to 8 columns), or
 * for quads of 64 (their widths that are not a multiple of 64 run on copies padded to one) */
#define ACC_HALF_WS_COLS(pairs, n) ((pairs) == ACC_HALF_QUADS ? ((n) + 63) / 64 * 64 : ((n) + 7) / 8 * 8)

/* A in BSR16: 16 x 16 blocks (csrc/accspmm.h), brow_offsets / block_cols / block_values (256 per
 * block, A-fragment order) / block_masks.  (Half-precision BitTCF runs tf32_spmm.h's kernel.) */
typedef struct acc_half_args {
    int64_t m, k, n;              /* A is m x k, B k x n, C m x n (row-major) */
    int64_t num_brows;            /* ceil(m / 16) */
    const int64_t *perm;          /* [m] new -> old row */
    const int64_t *brow_offsets;  /* [num_brows + 1] */
    const int32_t *block_cols;    /* [blocks] */
    const uint16_t *block_values; /* [256 blocks] */
    const uint64_t *block_masks;  /* [4 blocks] */
    /* Schedule (over block rows, or pairs of them: `pairs`): task t is tasks[5t .. 5t+4] =
     * (w0, w1, b0, b1, slot).  Slot -1: a pack of the whole
     * consecutive block rows (windows) w0 .. w1 - 1, whose blocks are b0 .. b1 - 1, each written to
     * C.  Slot >= 0: blocks b0 .. b1 - 1, a part of the split block row w0 (w1 = w0 + 1), whose
     * FP32 partial goes to workspace slot `slot`; the reduction (splits) sums the parts in slot
     * order.  Every block row is in one pack or all parts of one split. */
    const int64_t *tasks;
    int64_t num_tasks;
    const int64_t *splits; /* [3 num_splits]: block row, first slot, parts (consecutive slots) */
    int64_t num_splits;
    /* [slots * ACC_HALF_WINDOW_ROWS(pairs) * ACC_HALF_WS_COLS(pairs, n)], NULL when num_splits == 0 */
    float *workspace;
    /* pairs = 1: the windows of the schedule are pairs of block rows (2P, 2P + 1), and a window's
     * "blocks" are the entries u = pair_offsets[P] .. pair_offsets[P + 1] - 1 of the ascending
     * union of the two rows' column blocks: column block pair_cols[u], BSR16 blocks
     * pair_blocks[2u] (row 2P) and pair_blocks[2u + 1] (row 2P + 1), -1 where that row has none.
     * A warp loads each entry's 16 rows of B once for both block rows (a structure of 32 x 32
     * blocks reads half the B tiles).  A row still sums its own blocks in column order.
     * pairs = ACC_HALF_QUADS (2): quads of block rows (4Q .. 4Q + 3, 64 rows) on Hopper's warpgroup MMA
     * (half_wgmma.cu): pair_offsets and pair_cols over quads, and group_values instead of pair_blocks:
     * entry u's four blocks packed, group_values[1024 u + 256 j ..] the block of row 4Q + j in fragment
     * order (zeros where that row has none).  A thread block per task and column tile; the tasks' windows
     * are quads, their "blocks" the quads' entries (a hub quad split into parts, summed by the splits'
     * reduction).  sm_90 only (ACC_ERR_UNSUPPORTED otherwise, with nothing launched); other widths and a B or
     * C off a 16-byte boundary run on padded copies, and the split workspace holds ceil(n / 64) * 64 columns.
     */
    int pairs;
    const int64_t *pair_offsets; /* [ceil(num_brows / 2) + 1], quads: [ceil(num_brows / 4) + 1] */
    const int32_t *pair_cols;
    const int64_t *pair_blocks;
    const uint16_t *group_values; /* quads: [1024 U] */
    /* quads: the schedule's predicted entries an SM (accspmm._half.quad_schedule), by which a width that is a
     * multiple of 8 but not of 64 runs on copies padded to one where the chunked requests would cost more
     * than the copies (half_spmm.cu: pad_pays); 0: never */
    int64_t quad_makespan;
    /* pairs: all entries of the schedule's tasks, and the most entries of one task: the rule of the wide
     * thread blocks (half_spmm.cu: use_wide_cta); 0: unknown (the 128-column thread blocks only) */
    int64_t pair_entries, pair_longest;
    const uint16_t *B; /* [k * n] half bits of `fmt` */
    void *C;           /* [m * n] half bits of `fmt`, or float32 when out_f32 */
    int fmt;           /* ACC_HALF_FP16 or ACC_HALF_BF16 */
    int out_f32;
} acc_half_args;

/* Sets args' group arrays from addresses: offsets and column blocks, then the third, each entry's blocks
 * (pairs) or its packed values (quads), by args->pairs. */
static inline void acc_half_set_groups(acc_half_args *args, uintptr_t offsets, uintptr_t cols,
                                       uintptr_t third) {
    args->pair_offsets = (const int64_t *)offsets;
    args->pair_cols = (const int32_t *)cols;
    if (args->pairs == ACC_HALF_QUADS)
        args->group_values = (const uint16_t *)third;
    else
        args->pair_blocks = (const int64_t *)third;
}

/* Launches C = A @ B on `stream` (cudaStream_t, NULL = default); asynchronous.  Deterministic:
 * the schedule fixes every sum's order.  At n < 8 on a large A it computes into copies of B and C
 * padded to 8 columns, from the library's pool (the same bits; without room for them, on B and C
 * directly).  ACC_ERR_INVALID_ARGUMENT for inconsistent sizes. */
int acc_half_spmm(const acc_half_args *args, void *stream);

/* BITTCF tiles: tiles[64 b + bit] = the half bits of block b's value at `bit` (values[nnz], float32
 * holding exact half values, in block order as block_meta's offsets say), 0 where the mask is clear;
 * then each record's value offset becomes 64 b, the tile's offset in halves (the half formats of
 * cuda/tf32_spmm.h read the tiles through it). */
int acc_half_tiles(int32_t *block_meta, const float *values, int64_t num_blocks, uint16_t *tiles, int fmt,
                   void *stream);

/* The quad kernel's group values on the device: out[256 s ..] = BSR16 block blocks[s]'s 256 halves of
 * block_values (num_blocks blocks), zeros where blocks[s] < 0 (accspmm._half.pack_group_values' layout);
 * every index in [-1, num_blocks) (the caller's group_index), both arrays 16-byte aligned. */
int acc_half_pack_groups(const int64_t *blocks, int64_t slots, const uint16_t *block_values,
                         int64_t num_blocks, uint16_t *out, void *stream);

/* 1 where the current device runs the quad kernels (acc_half_args.pairs = ACC_HALF_QUADS: compute
 * capability 9.0 and their sm_90a code in this build), else 0. */
int acc_half_quads_usable(void);

/* The columns of a thread block of the pair kernel for these arguments (args->n, B's and C's alignment, the
 * schedule's sizes, ACC_HALF_PAIR_CTA and ACC_HALF_PAIR_WIDE): 256 (the wide thread blocks), 128, or 0 (the
 * warp kernel, or args->pairs is not 1).  What acc_half_spmm would launch, for tests and statistics. */
int acc_half_pair_cta_cols(const acc_half_args *args);

/* dst[i] = src[i] rounded to the half format (nearest even; beyond the range: inf), on `stream`. */
int acc_half_round_device(const float *src, uint16_t *dst, int64_t count, int fmt, void *stream);

#ifdef __cplusplus
}
#endif

#endif

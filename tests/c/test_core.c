/*
 * test_core.c -- C-level driver for the accspmm core, built with
 * AddressSanitizer/UBSan (and run under valgrind when present) by
 * tests/test_c_core.py.  Exercises every public function on random and
 * malformed inputs, checks results against a dense reference, and fails
 * each allocation in turn (acc_set_alloc_countdown) so every
 * out-of-memory path runs.  Exit code 0 = all checks passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/acc_internal.h"
#include "../../cuda/spgemm_tile.h"

static int failures = 0;
#define EXPECT(cond)                                                                                         \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                         \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

static unsigned long long rng_state = 88172645463325252ull;
static unsigned rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state >> 11);
}

/* Random m x k CSR with unsorted rows and duplicates; integer values. */
typedef struct {
    int64_t m, k, nnz;
    int64_t *rp;
    int32_t *ci;
    float *v;
} csr_t;

static csr_t random_csr(int64_t m, int64_t k, int per_row_max) {
    csr_t A = {m, k, 0, calloc((size_t)m + 1, 8), NULL, NULL};
    for (int64_t i = 0; i < m; i++)
        A.rp[i + 1] = A.rp[i] + (k ? (int64_t)(rnd() % (per_row_max + 1)) : 0);
    A.nnz = A.rp[m];
    A.ci = malloc((size_t)(A.nnz ? A.nnz : 1) * 4);
    A.v = malloc((size_t)(A.nnz ? A.nnz : 1) * 4);
    for (int64_t p = 0; p < A.nnz; p++) {
        A.ci[p] = (int32_t)(rnd() % (unsigned)k);
        A.v[p] = (float)((int)(rnd() % 17) - 8);
    }
    return A;
}

static void free_csr(csr_t *A) {
    free(A->rp);
    free(A->ci);
    free(A->v);
}

static acc_csr view(const csr_t *A) {
    acc_csr v = {A->m, A->k, A->rp, A->ci, A->v, ACC_FLOAT32};
    return v;
}

/* Dense reference C = A @ B in double. */
static void reference(const csr_t *A, const float *B, int64_t n, double *C) {
    memset(C, 0, (size_t)(A->m * n) * sizeof(double));
    for (int64_t i = 0; i < A->m; i++)
        for (int64_t p = A->rp[i]; p < A->rp[i + 1]; p++)
            for (int64_t j = 0; j < n; j++)
                C[i * n + j] += (double)A->v[p] * B[(int64_t)A->ci[p] * n + j];
}

/* Builds the BitTCF of canonical A under perm; returns status; fills *F (arrays malloc'ed). */
static int build_bittcf(const acc_csr *A, const int64_t *perm, acc_bittcf *F) {
    const int64_t W = (A->m + 7) / 8;
    int64_t *wo = malloc((size_t)(W + 1) * 8);
    int st = acc_bittcf_count(A, perm, wo);
    if (st) {
        free(wo);
        return st;
    }
    const int64_t nb = wo[W], nnz = A->row_offsets[A->m];
    int32_t *cols = malloc((size_t)(nb ? nb : 1) * 8 * 4);
    uint64_t *mask = malloc((size_t)(nb ? nb : 1) * 8);
    int64_t *vo = malloc((size_t)(nb + 1) * 8);
    float *vals = malloc((size_t)(nnz ? nnz : 1) * 4);
    st = acc_bittcf_fill(A, perm, wo, cols, mask, vo, vals);
    acc_bittcf f = {A->m, A->k, W, nb, nnz, perm, wo, cols, mask, vo, vals, ACC_FLOAT32};
    *F = f;
    return st;
}

static void free_bittcf(acc_bittcf *F) {
    free((void *)F->window_offsets);
    free((void *)F->block_cols);
    free((void *)F->block_mask);
    free((void *)F->block_value_offsets);
    free((void *)F->values);
}

static void test_round_trip(int64_t m, int64_t k, int per_row, int64_t n) {
    csr_t A = random_csr(m, k, per_row);
    acc_csr a = view(&A);
    int canonical = -1;
    EXPECT(acc_csr_check(&a, &canonical) == ACC_SUCCESS);
    float *B = malloc((size_t)(k * n ? k * n : 1) * 4);
    for (int64_t q = 0; q < k * n; q++)
        B[q] = (float)((int)(rnd() % 17) - 8);
    double *ref = malloc((size_t)(m * n ? m * n : 1) * 8);
    float *C = malloc((size_t)(m * n ? m * n : 1) * 4);
    reference(&A, B, n, ref);

    EXPECT(acc_csr_spmm(&a, B, n, C) == ACC_SUCCESS);
    for (int64_t q = 0; q < m * n; q++)
        EXPECT(C[q] == (float)ref[q]);

    /* canonicalize, then BitTCF with a random permutation */
    int64_t *rp2 = malloc((size_t)(m + 1) * 8), nnz2 = -1;
    int32_t *ci2 = malloc((size_t)(A.nnz ? A.nnz : 1) * 4);
    float *v2 = malloc((size_t)(A.nnz ? A.nnz : 1) * 4);
    EXPECT(acc_csr_canonicalize(&a, rp2, ci2, v2, &nnz2) == ACC_SUCCESS);
    acc_csr c = {m, k, rp2, ci2, v2, ACC_FLOAT32};
    EXPECT(acc_csr_check(&c, &canonical) == ACC_SUCCESS && canonical == 1);
    EXPECT(nnz2 == rp2[m] && nnz2 <= A.nnz);
    int64_t *perm = malloc((size_t)(m ? m : 1) * 8);
    for (int64_t i = 0; i < m; i++)
        perm[i] = i;
    for (int64_t i = m - 1; i > 0; i--) {
        int64_t j = rnd() % (unsigned)(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    EXPECT(acc_perm_check(perm, m) == ACC_SUCCESS);
    acc_bittcf F;
    EXPECT(build_bittcf(&c, perm, &F) == ACC_SUCCESS);
    EXPECT(acc_bittcf_check(&F) == ACC_SUCCESS);
    acc_bittcf_stats s;
    EXPECT(acc_bittcf_get_stats(&F, &s) == ACC_SUCCESS);
    EXPECT(s.num_blocks == F.num_blocks);
    for (int64_t q = 0; q < m * n; q++)
        C[q] = -12345.0f;
    EXPECT(acc_bittcf_spmm(&F, B, n, C) == ACC_SUCCESS);
    for (int64_t q = 0; q < m * n; q++)
        EXPECT(C[q] == (float)ref[q]);
    /* non-canonical input is refused by the builder */
    if (A.nnz > 1 && nnz2 < A.nnz) {
        int64_t *wo = malloc((size_t)((m + 7) / 8 + 1) * 8);
        EXPECT(acc_bittcf_count(&a, perm, wo) == ACC_ERR_NOT_CANONICAL);
        free(wo);
    }
    free_bittcf(&F);
    free(perm);
    free(rp2);
    free(ci2);
    free(v2);
    free(B);
    free(ref);
    free(C);
    free_csr(&A);
}

static void test_malformed(void) {
    int64_t rp[4] = {0, 2, 1, 3};
    int32_t ci[3] = {0, 1, 2};
    float v[3] = {1, 2, 3};
    acc_csr a = {3, 3, rp, ci, v, ACC_FLOAT32};
    EXPECT(acc_csr_check(&a, NULL) == ACC_ERR_ROW_OFFSETS);
    rp[2] = 2;
    ci[1] = 3;
    EXPECT(acc_csr_check(&a, NULL) == ACC_ERR_COLUMN_INDEX);
    ci[1] = -5;
    EXPECT(acc_csr_check(&a, NULL) == ACC_ERR_COLUMN_INDEX);
    ci[1] = 1;
    rp[0] = 1;
    EXPECT(acc_csr_check(&a, NULL) == ACC_ERR_ROW_OFFSETS);
    rp[0] = 0;
    a.k = -1;
    EXPECT(acc_csr_check(&a, NULL) == ACC_ERR_INVALID_ARGUMENT);
    EXPECT(acc_csr_check(NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    int64_t big[2] = {0, 1ll << 40};
    int32_t out[2];
    EXPECT(acc_indices_narrow(big, 2, 10, out) == ACC_ERR_COLUMN_INDEX);
    int64_t perm[3] = {0, 0, 2};
    EXPECT(acc_perm_check(perm, 3) == ACC_ERR_PERMUTATION);
    perm[1] = 3;
    EXPECT(acc_perm_check(perm, 3) == ACC_ERR_PERMUTATION);
    EXPECT(acc_status_string(-999) != NULL);
}

/* Every allocation of the canonicalize / check paths fails in turn. */
static void test_out_of_memory(void) {
    csr_t A = random_csr(50, 40, 12);
    acc_csr a = view(&A);
    int64_t *rp2 = malloc(51 * 8), nnz2;
    int32_t *ci2 = malloc((size_t)(A.nnz + 1) * 4);
    float *v2 = malloc((size_t)(A.nnz + 1) * 4);
    int saw_oom = 0, saw_success = 0;
    for (long countdown = 1; countdown < 10; countdown++) {
        acc_set_alloc_countdown(countdown);
        int st1 = acc_csr_canonicalize(&a, rp2, ci2, v2, &nnz2);
        int64_t perm[50];
        for (int i = 0; i < 50; i++)
            perm[i] = 49 - i;
        int st2 = acc_perm_check(perm, 50);
        acc_set_alloc_countdown(0);
        EXPECT(st1 == ACC_SUCCESS || st1 == ACC_ERR_OUT_OF_MEMORY);
        EXPECT(st2 == ACC_SUCCESS || st2 == ACC_ERR_OUT_OF_MEMORY);
        saw_oom |= st1 == ACC_ERR_OUT_OF_MEMORY || st2 == ACC_ERR_OUT_OF_MEMORY;
        saw_success |= st1 == ACC_SUCCESS && st2 == ACC_SUCCESS;
    }
    EXPECT(saw_oom && saw_success);
    /* the fill pass's workspace allocation fails cleanly too */
    int64_t perm[50];
    for (int i = 0; i < 50; i++)
        perm[i] = i;
    EXPECT(acc_csr_canonicalize(&a, rp2, ci2, v2, &nnz2) == ACC_SUCCESS);
    acc_csr c = {50, 40, rp2, ci2, v2, ACC_FLOAT32};
    int64_t wo[8];
    EXPECT(acc_bittcf_count(&c, perm, wo) == ACC_SUCCESS);
    acc_set_alloc_countdown(1);
    EXPECT(acc_bittcf_fill(&c, perm, wo, NULL, NULL, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    int32_t *cols = malloc((size_t)wo[7] * 32);
    uint64_t *mask = malloc((size_t)wo[7] * 8);
    int64_t *vo = malloc((size_t)(wo[7] + 1) * 8);
    float *vals = malloc((size_t)(nnz2 + 1) * 4);
    EXPECT(acc_bittcf_fill(&c, perm, wo, cols, mask, vo, vals) == ACC_ERR_OUT_OF_MEMORY);
    acc_set_alloc_countdown(0);
    EXPECT(acc_bittcf_fill(&c, perm, wo, cols, mask, vo, vals) == ACC_SUCCESS);
    free(cols);
    free(mask);
    free(vo);
    free(vals);
    free(rp2);
    free(ci2);
    free(v2);
    free_csr(&A);
}

/* Canonical copy of a random CSR (reorderings need canonical input). */
static csr_t canonical_csr(int64_t m, int64_t k, int per_row_max) {
    csr_t A = random_csr(m, k, per_row_max);
    csr_t C = {m,
               k,
               0,
               malloc((size_t)(m + 1) * 8),
               malloc((size_t)(A.nnz ? A.nnz : 1) * 4),
               malloc((size_t)(A.nnz ? A.nnz : 1) * 4)};
    acc_csr a = view(&A);
    EXPECT(acc_csr_canonicalize(&a, C.rp, C.ci, C.v, &C.nnz) == ACC_SUCCESS);
    free_csr(&A);
    return C;
}

/* The count passes' merge of a window past their stack buffer (about 2,400 entries over 8 rows spread
 * over 10^6 columns) takes a scratch allocation: its failure is ACC_ERR_OUT_OF_MEMORY, then the same call
 * succeeds, and both counts match a count of the window's distinct keys. */
static void test_count_scratch(void) {
    const int64_t m = 16, k = 1000000;
    csr_t A = canonical_csr(m, k, 600);
    acc_csr a = view(&A);
    int64_t perm[16], wo[3], bo[2];
    for (int i = 0; i < 16; i++)
        perm[i] = i;
    acc_set_alloc_countdown(1);
    EXPECT(acc_bittcf_count(&a, perm, wo) == ACC_ERR_OUT_OF_MEMORY);
    acc_set_alloc_countdown(1);
    EXPECT(acc_bsr16_count(&a, perm, bo) == ACC_ERR_OUT_OF_MEMORY);
    acc_set_alloc_countdown(0);
    EXPECT(acc_bittcf_count(&a, perm, wo) == ACC_SUCCESS);
    EXPECT(acc_bsr16_count(&a, perm, bo) == ACC_SUCCESS);
    /* the reference: a marker per column (k is small enough here) */
    unsigned char *seen = calloc((size_t)k, 1);
    int64_t expect_tc = 0, expect16 = 0;
    for (int w = 0; w < 2; w++) {
        int64_t d = 0;
        for (int64_t i = 8 * w; i < 8 * w + 8; i++)
            for (int64_t p = A.rp[i]; p < A.rp[i + 1]; p++)
                d += !seen[A.ci[p]], seen[A.ci[p]] = 1;
        expect_tc += (d + 7) / 8;
        memset(seen, 0, (size_t)k);
    }
    for (int64_t p = 0; p < A.nnz; p++)
        expect16 += !seen[A.ci[p] / 16], seen[A.ci[p] / 16] = 1;
    EXPECT(A.nnz > 1000 && wo[2] == expect_tc && bo[1] == expect16);
    free(seen);
    free_csr(&A);
}

/* Runs one reordering method (0 degree, 1 affinity, 2 affinity ignoring
 * communities, 3 jaccard) with small chunks and parts so the parallel
 * paths run. */
static int run_reorder(const acc_csr *a, int method, uint64_t seed, int64_t *perm, int64_t *progress) {
    const acc_affinity_params ap = {seed, 64, method == 1 ? ACC_COMMUNITY_TIE : ACC_COMMUNITY_IGNORE,
                                    4.0,  40, 300};
    const acc_jaccard_params jp = {seed, 0.7, 2, 16};
    switch (method) {
    case 0:
        return acc_reorder_degree(a, perm);
    case 1:
    case 2:
        return acc_reorder_affinity(a, &ap, perm, progress, NULL);
    default:
        return acc_reorder_jaccard(a, &jp, perm, progress);
    }
}

/* Every reordering: a permutation with the empty rows last, the same for
 * the same seed, progress reaching its total; bad parameters refused. */
static void test_reorders(int64_t m, int64_t k, int per_row_max) {
    csr_t C = canonical_csr(m, k, per_row_max);
    acc_csr a = view(&C);
    int64_t *p1 = malloc((size_t)(m ? m : 1) * 8), *p2 = malloc((size_t)(m ? m : 1) * 8);
    for (int method = 0; method < 4; method++) {
        for (uint64_t seed = 0; seed < 2; seed++) {
            int64_t progress[2] = {-1, -1};
            EXPECT(run_reorder(&a, method, seed, p1, progress) == ACC_SUCCESS);
            EXPECT(run_reorder(&a, method, seed, p2, NULL) == ACC_SUCCESS);
            EXPECT(acc_perm_check(p1, m) == ACC_SUCCESS);
            EXPECT(m == 0 || memcmp(p1, p2, (size_t)m * 8) == 0);
            EXPECT(method == 0 || progress[0] == progress[1]);
            int seen_empty = 0;
            for (int64_t i = 0; i < m; i++) {
                const int empty = C.rp[p1[i] + 1] == C.rp[p1[i]];
                EXPECT(!seen_empty || empty); /* no nonempty row after an empty one */
                seen_empty |= empty;
            }
        }
    }
    acc_affinity_params bad = {0, 0, ACC_COMMUNITY_TIE, 4.0, 40, 300};
    EXPECT(acc_reorder_affinity(&a, &bad, p1, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    bad.max_scan = 8;
    bad.community = 7;
    EXPECT(acc_reorder_affinity(&a, &bad, p1, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    bad.community = ACC_COMMUNITY_TIE;
    bad.chunk_nnz = 0;
    EXPECT(acc_reorder_affinity(&a, &bad, p1, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    bad.chunk_nnz = 40;
    bad.part_edges = 0;
    EXPECT(acc_reorder_affinity(&a, &bad, p1, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
    acc_jaccard_params jbad = {0, 1.5, 2, 16};
    EXPECT(acc_reorder_jaccard(&a, &jbad, p1, NULL) == ACC_ERR_INVALID_ARGUMENT);
    /* every allocation of each method fails in turn: OOM or success, no leak */
    for (int method = 0; method < 4; method++) {
        int succeeded = 0;
        for (long countdown = 1; countdown < 1000 && !succeeded; countdown++) {
            acc_set_alloc_countdown(countdown);
            const int st = run_reorder(&a, method, 1, p1, NULL);
            acc_set_alloc_countdown(0);
            EXPECT(st == ACC_SUCCESS || st == ACC_ERR_OUT_OF_MEMORY);
            succeeded = st == ACC_SUCCESS;
        }
        EXPECT(succeeded);
    }
    free(p1);
    free(p2);
    free_csr(&C);
}

/* Reverse Cuthill-McKee on a square pattern (any, not only symmetric): a permutation, the same
 * twice, seeds checked, every allocation failed in turn. */
static void test_rcm(int64_t n, int per_row_max) {
    csr_t C = canonical_csr(n, n, per_row_max);
    acc_csr a = view(&C);
    const size_t bytes = (size_t)(n ? n : 1) * 8;
    int64_t *seeds = malloc(bytes), *p1 = malloc(bytes), *p2 = malloc(bytes);
    for (int64_t i = 0; i < n; i++)
        seeds[i] = n - 1 - i;
    EXPECT(acc_reorder_rcm(&a, seeds, p1) == ACC_SUCCESS);
    EXPECT(acc_reorder_rcm(&a, seeds, p2) == ACC_SUCCESS);
    EXPECT(acc_perm_check(p1, n) == ACC_SUCCESS);
    EXPECT(n == 0 || memcmp(p1, p2, (size_t)n * 8) == 0);
    if (n > 1) {
        seeds[0] = n; /* out of range */
        EXPECT(acc_reorder_rcm(&a, seeds, p1) == ACC_ERR_INVALID_ARGUMENT);
        seeds[0] = seeds[1]; /* not a permutation: the node it lost is never a root */
        const int st = acc_reorder_rcm(&a, seeds, p1);
        EXPECT(st == ACC_SUCCESS || st == ACC_ERR_INVALID_ARGUMENT);
        seeds[0] = n - 1;
    }
    acc_csr rect = a;
    rect.k = n + 1;
    EXPECT(acc_reorder_rcm(&rect, seeds, p1) == ACC_ERR_INVALID_ARGUMENT);
    int succeeded = 0;
    for (long countdown = 1; countdown < 100 && !succeeded; countdown++) {
        acc_set_alloc_countdown(countdown);
        const int st = acc_reorder_rcm(&a, seeds, p1);
        acc_set_alloc_countdown(0);
        EXPECT(st == ACC_SUCCESS || st == ACC_ERR_OUT_OF_MEMORY);
        succeeded = st == ACC_SUCCESS;
    }
    EXPECT(succeeded);
    free(seeds);
    free(p1);
    free(p2);
    free_csr(&C);
}

/* The GPU SpGEMM's tile-mask operations (cuda/spgemm_tile.h) against brute force on 8x8 bit
 * matrices, on random masks of every density and on the empty and full tiles. */
static int bit_at(uint64_t m, int r, int c) { return (int)((m >> (r * 8 + c)) & 1u); }

static uint64_t random_mask(void) {
    uint64_t m = ((uint64_t)rnd() << 32) ^ (uint64_t)rnd() ^ ((uint64_t)rnd() << 11);
    switch (rnd() % 4) {
    case 0:
        return m & ((uint64_t)rnd() << 20 | rnd()) & ((uint64_t)rnd() << 7); /* sparse */
    case 1:
        return m;
    case 2:
        return (uint64_t)1 << (rnd() % 64);
    default:
        return rnd() % 2 ? ~(uint64_t)0 : 0;
    }
}

static void test_tile_masks(void) {
    for (int it = 0; it < 20000; it++) {
        const uint64_t a = random_mask(), b = random_mask();
        uint32_t cols = 0, rows = 0;
        uint64_t prod = 0;
        int products = 0;
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                if (bit_at(a, r, c)) cols |= 1u << c, rows |= 1u << r;
                int any = 0;
                for (int k = 0; k < 8; k++)
                    any |= bit_at(a, r, k) & bit_at(b, k, c);
                if (any) prod |= (uint64_t)1 << (r * 8 + c);
            }
        for (int k = 0; k < 8; k++) {
            int ca = 0, rb = 0;
            for (int r = 0; r < 8; r++)
                ca += bit_at(a, r, k), rb += bit_at(b, k, r);
            products += ca * rb;
        }
        EXPECT(acc_tile_cols(a) == cols);
        EXPECT(acc_tile_rows(a) == rows);
        EXPECT(acc_tile_product(a, b) == prod);
        EXPECT(acc_tile_pair_products(a, b) == products);
        /* the cull of the symbolic phase: empty product exactly when no column of A meets a row of B */
        EXPECT(((acc_tile_cols(a) & acc_tile_rows(b)) == 0) == (prod == 0));
        for (int c = 0; c < 8; c++) {
            uint32_t col = 0;
            for (int k = 0; k < 8; k++)
                col |= (uint32_t)bit_at(a, k, c) << k;
            EXPECT(acc_tile_column(a, c) == col);
        }
    }
}

/* One product through acc_spgemm_compute + fill: st, and C (malloc'ed) when it succeeds. */
static int spgemm(const acc_csr *a, const acc_csr *b, int drop, int64_t **rp, int32_t **ci, float **v,
                  int64_t *nnz) {
    acc_spgemm_state *s = NULL;
    int64_t room = 0, products = 0;
    *rp = NULL;
    *ci = NULL;
    *v = NULL;
    int st = acc_spgemm_compute(a, b, drop, -1, ACC_FLOAT32, &s, &room, &products);
    if (st) return st;
    *rp = malloc((size_t)(a->m + 1) * 8);
    *ci = malloc((size_t)(room + 1) * 4);
    *v = malloc((size_t)(room + 1) * 4);
    st = acc_spgemm_fill(s, *rp, *ci, *v, nnz);
    acc_spgemm_free(s);
    return st;
}

/* C = A @ B on the CPU against a dense reference (integer data: exact), pattern included: ascending
 * columns, the exact zeros dropped or kept; and every allocation failing in turn.  n > 2^22
 * takes the hash accumulator. */
static void test_spgemm(int64_t m, int64_t k, int64_t n, int per_row) {
    csr_t A = random_csr(m, k, per_row), B = random_csr(k, n, per_row);
    acc_csr a = view(&A), b = view(&B);
    /* B's columns moved onto multiples of step, so that the dense reference has at most 4096 */
    const int64_t cols = n < 4096 ? n : 4096, step = cols ? n / cols : 1;
    for (int64_t p = 0; p < B.nnz; p++)
        B.ci[p] = (int32_t)(B.ci[p] % cols * step);
    double *R = calloc((size_t)(m * cols) + 1, sizeof(double));
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = A.rp[i]; p < A.rp[i + 1]; p++)
            for (int64_t q = B.rp[A.ci[p]]; q < B.rp[A.ci[p] + 1]; q++)
                R[i * cols + B.ci[q] / step] += (double)A.v[p] * B.v[q];
    for (int drop = 0; drop < 2; drop++) {
        int64_t *rp, nnz = -1;
        int32_t *ci;
        float *v;
        EXPECT(spgemm(&a, &b, drop, &rp, &ci, &v, &nnz) == ACC_SUCCESS);
        int64_t seen = 0;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
                EXPECT(p == rp[i] || ci[p] > ci[p - 1]);
                EXPECT(ci[p] % step == 0 && (double)v[p] == R[i * cols + ci[p] / step]);
                EXPECT(!drop || v[p] != 0.0f);
            }
            for (int64_t j = 0; j < cols; j++)
                seen += R[i * cols + j] != 0.0;
        }
        EXPECT(rp[m] == nnz && (drop ? nnz == seen : nnz >= seen));
        free(rp);
        free(ci);
        free(v);
    }
    int saw_oom = 0, saw_success = 0;
    for (long countdown = 1; countdown < 48; countdown++) {
        int64_t *rp, nnz;
        int32_t *ci;
        float *v;
        acc_set_alloc_countdown(countdown);
        const int st = spgemm(&a, &b, 1, &rp, &ci, &v, &nnz);
        acc_set_alloc_countdown(0);
        EXPECT(st == ACC_SUCCESS || st == ACC_ERR_OUT_OF_MEMORY);
        saw_oom |= st == ACC_ERR_OUT_OF_MEMORY;
        saw_success |= st == ACC_SUCCESS;
        free(rp);
        free(ci);
        free(v);
    }
    EXPECT(saw_oom && saw_success);
    acc_csr bad = b;
    bad.m = k + 1;
    acc_spgemm_state *s = NULL;
    int64_t room;
    EXPECT(acc_spgemm_compute(&a, &bad, 1, -1, ACC_FLOAT32, &s, &room, NULL) == ACC_ERR_INVALID_ARGUMENT &&
           !s);
    free(R);
    free_csr(&A);
    free_csr(&B);
}

/* acc_sort_u64 on sorted, reversed, equal, organ-pipe, sawtooth and random keys, at the default
 * depth limit and with the quicksort cut off at once (heapsort) or midway: sorted, the same keys. */
static void test_sort(void) {
    for (int64_t n = 0; n < 3000; n = n * 2 + 7)
        for (int pattern = 0; pattern < 6; pattern++)
            for (int depth = -1; depth < 3; depth++) {
                uint64_t *a = malloc((size_t)(n + 1) * 8);
                for (int64_t i = 0; i < n; i++)
                    a[i] = pattern == 0   ? (uint64_t)i
                           : pattern == 1 ? (uint64_t)(n - i)
                           : pattern == 2 ? 5u
                           : pattern == 3 ? (uint64_t)(i < n / 2 ? i : n - i)
                           : pattern == 4 ? (uint64_t)(i % 17)
                                          : ((uint64_t)rnd() << 32 | rnd());
                uint64_t sum = 0, xr = 0;
                for (int64_t i = 0; i < n; i++) {
                    sum += a[i];
                    xr ^= a[i] * 0x9E3779B97F4A7C15ull;
                }
                if (depth < 0)
                    acc_sort_u64(a, n);
                else
                    acc_sort_u64_depth(a, n, depth);
                for (int64_t i = 0; i < n; i++) {
                    EXPECT(i == 0 || a[i - 1] <= a[i]);
                    sum -= a[i];
                    xr ^= a[i] * 0x9E3779B97F4A7C15ull;
                }
                EXPECT(sum == 0 && xr == 0);
                free(a);
            }
}

/* acc_lpt_order / acc_lpt_rows: a stable descending order (checked pairwise) on both paths (counting
 * sort, merge sort for a wide or fractional range), rows moved whole, NaN refused, every allocation
 * failing in turn. */
static void test_lpt(void) {
    for (int64_t n = 0; n < 5000; n = n * 3 + 1)
        for (int kind = 0; kind < 3; kind++) {
            double *cost = malloc((size_t)(n + 1) * sizeof(double));
            int64_t *order = malloc((size_t)(n + 1) * sizeof(int64_t));
            int32_t *rows = malloc((size_t)(n + 1) * 5 * sizeof(int32_t)),
                    *out = malloc((size_t)(n + 1) * 5 * 4);
            for (int64_t i = 0; i < n; i++) {
                const double c = (double)(rnd() % 40);
                cost[i] = kind == 0 ? c : kind == 1 ? c * 1e7 : c + 0.5 * (double)(rnd() % 2);
                for (int j = 0; j < 5; j++)
                    rows[i * 5 + j] = (int32_t)(i * 5 + j);
            }
            EXPECT(acc_lpt_order(cost, n, order) == ACC_SUCCESS);
            unsigned char *seen = calloc((size_t)n + 1, 1);
            for (int64_t i = 0; i < n; i++) {
                EXPECT(order[i] >= 0 && order[i] < n && !seen[order[i]]);
                if (order[i] >= 0 && order[i] < n) seen[order[i]] = 1;
                if (i > 0) /* descending; ties in index order */
                    EXPECT(cost[order[i - 1]] > cost[order[i]] ||
                           (cost[order[i - 1]] == cost[order[i]] && order[i - 1] < order[i]));
            }
            EXPECT(acc_lpt_rows(rows, n, 5, cost, out) == ACC_SUCCESS);
            for (int64_t i = 0; i < n; i++)
                for (int j = 0; j < 5; j++)
                    EXPECT(out[i * 5 + j] == (int32_t)(order[i] * 5 + j));
            if (n > 1) {
                const double keep = cost[1];
                cost[1] = 0.0 / 0.0;
                EXPECT(acc_lpt_order(cost, n, order) == ACC_ERR_INVALID_ARGUMENT);
                cost[1] = keep;
                int saw_oom = 0;
                for (long countdown = 1; countdown < 4; countdown++) {
                    acc_set_alloc_countdown(countdown);
                    const acc_status st = acc_lpt_rows(rows, n, 5, cost, out);
                    acc_set_alloc_countdown(0);
                    EXPECT(st == ACC_SUCCESS || st == ACC_ERR_OUT_OF_MEMORY);
                    saw_oom |= st == ACC_ERR_OUT_OF_MEMORY;
                }
                EXPECT(saw_oom);
            }
            free(seen);
            free(cost);
            free(order);
            free(rows);
            free(out);
        }
    EXPECT(acc_lpt_order(NULL, 0, NULL) == ACC_SUCCESS);
    EXPECT(acc_lpt_rows(NULL, 3, 5, NULL, NULL) == ACC_ERR_INVALID_ARGUMENT);
}

/* acc_csr_long_count / acc_csr_long_parts: every entry of each long row in one part, in order, parts of at
 * most `part` entries and equal to one entry, j * length / P as the division gives it; the bad arguments
 * refused. */
static void test_csr_long_parts(void) {
    static const int64_t lengths[] = {0, 33, 32, 1, 1000, 97, 64, 65, 0, 4097};
    const int64_t m = (int64_t)(sizeof lengths / sizeof lengths[0]);
    int64_t offsets[11];
    offsets[0] = 3;
    for (int64_t i = 0; i < m; i++)
        offsets[i + 1] = offsets[i] + lengths[i];
    static const int64_t setups[][2] = {{32, 32}, {32, 64}, {0, 1}, {1024, 4096}, {5000, 7}};
    for (size_t t = 0; t < sizeof setups / sizeof setups[0]; t++) {
        const int64_t lng = setups[t][0], part = setups[t][1];
        int64_t rows = -1, parts = -1, longest = -1;
        EXPECT(acc_csr_long_count(offsets, m, lng, part, &rows, &parts, t ? &longest : NULL) == ACC_SUCCESS);
        EXPECT(longest == (t ? 4097 : -1)); /* the longest row, where asked for */
        int64_t *out = malloc((size_t)(4 * parts + 1) * sizeof(int64_t));
        EXPECT(out != NULL);
        if (!out) return;
        EXPECT(acc_csr_long_parts(offsets, m, lng, part, out, parts) == ACC_SUCCESS);
        /* a wrong count: one part too few is refused without a write past it (ASan), one too many too */
        if (parts > 0) {
            int64_t *few = malloc((size_t)(4 * (parts - 1) + 1) * sizeof(int64_t));
            EXPECT(few != NULL);
            if (few)
                EXPECT(acc_csr_long_parts(offsets, m, lng, part, few, parts - 1) == ACC_ERR_INVALID_ARGUMENT);
            free(few);
        }
        int64_t *more = malloc((size_t)(4 * (parts + 1)) * sizeof(int64_t));
        EXPECT(more != NULL);
        if (more)
            EXPECT(acc_csr_long_parts(offsets, m, lng, part, more, parts + 1) == ACC_ERR_INVALID_ARGUMENT);
        free(more);
        int64_t q = 0, seen = 0;
        for (int64_t i = 0; i < m; i++) {
            if (lengths[i] <= lng) continue;
            seen++;
            const int64_t P = (lengths[i] + part - 1) / part;
            for (int64_t j = 0; j < P; j++, q++) {
                EXPECT(out[4 * q] == i && out[4 * q + 3] == (j | (P << 32)));
                EXPECT(out[4 * q + 1] == offsets[i] + j * lengths[i] / P);
                EXPECT(out[4 * q + 2] == offsets[i] + (j + 1) * lengths[i] / P);
                EXPECT(out[4 * q + 2] - out[4 * q + 1] <= part && out[4 * q + 2] > out[4 * q + 1]);
            }
        }
        EXPECT(q == parts && seen == rows);
        free(out);
    }
    int64_t r, p, top = -1;
    EXPECT(acc_csr_long_count(offsets, m, 32, 0, &r, &p, NULL) == ACC_ERR_INVALID_ARGUMENT);
    EXPECT(acc_csr_long_count(offsets, m, -1, 32, &r, &p, NULL) == ACC_ERR_INVALID_ARGUMENT);
    EXPECT(acc_csr_long_parts(NULL, m, 32, 32, &r, 1) == ACC_ERR_INVALID_ARGUMENT);
    EXPECT(acc_csr_long_parts(offsets, m, 32, 32, &r, -1) == ACC_ERR_INVALID_ARGUMENT);
    EXPECT(acc_csr_long_count(offsets, 0, 32, 32, &r, &p, &top) == ACC_SUCCESS && r == 0 && p == 0 &&
           top == 0);
}

int main(void) {
    static const int64_t shapes[][4] = {{0, 0, 0, 3},    {1, 1, 1, 1},     {7, 5, 3, 9},
                                        {8, 8, 8, 8},    {37, 19, 6, 33},  {64, 300, 40, 17},
                                        {129, 70, 2, 5}, {5, 1000, 200, 4}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        test_round_trip(shapes[t][0], shapes[t][1], (int)shapes[t][2], shapes[t][3]);
    static const int64_t rshapes[][3] = {{0, 0, 3},    {1, 1, 1},     {13, 13, 4}, {200, 200, 9},
                                         {300, 40, 6}, {40, 300, 20}, {64, 64, 0}};
    for (size_t t = 0; t < sizeof rshapes / sizeof rshapes[0]; t++)
        test_reorders(rshapes[t][0], rshapes[t][1], (int)rshapes[t][2]);
    static const int64_t rcm_shapes[][2] = {{0, 0}, {1, 1}, {9, 0}, {57, 5}, {300, 40}};
    for (size_t t = 0; t < sizeof rcm_shapes / sizeof rcm_shapes[0]; t++)
        test_rcm(rcm_shapes[t][0], (int)rcm_shapes[t][1]);
    test_malformed();
    test_out_of_memory();
    test_count_scratch();
    test_tile_masks();
    test_sort();
    test_lpt();
    test_csr_long_parts();
    static const int64_t gshapes[][4] = {
        {0, 0, 0, 2}, {1, 1, 1, 1}, {37, 19, 23, 6}, {64, 300, 70, 40}, {40, 30, 5000000, 9}};
    for (size_t t = 0; t < sizeof gshapes / sizeof gshapes[0]; t++)
        test_spgemm(gshapes[t][0], gshapes[t][1], gshapes[t][2], (int)gshapes[t][3]);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_core: all checks passed\n");
    return 0;
}

/* acc_spgemm.c -- C = A @ B for two sparse CSR matrices on the CPU (Gustavson, row by row).
 *
 * One accumulation pass.  Rows of C go to threads dynamically (a row's cost, its products plus
 * sorting and writing its entries, is not known before), and each thread appends its rows to its
 * own growing buffer (columns and values), noting where each row went, while acc_spgemm_compute
 * counts them; acc_spgemm_fill then copies every row to its place in the caller's arrays.  The
 * result is the same for any thread count: every row is computed the same way.
 *
 * Accumulator per thread: dense (a value and a stamp per column of C) when C has at most
 * ACC_SPGEMM_DENSE_COLS columns, else a hash table of linear probing sized to the row's products
 * (a power of two, at least twice them), so memory stays O(threads * min(n, max row products))
 * whatever n is.  Columns come out ascending (accum_finish: a bitmap or a sort).
 *
 * Arithmetic: products and sums in double, in the order of A's row entries and then B's (scipy's
 * order), rounded once to the output type: float64 data gives scipy's sums; float32 data is more
 * accurate than a float32 accumulation (one rounding); integer-valued data is exact either way.
 * No FMA contraction (this file is built for the baseline ISA), so that order is the arithmetic.
 * drop_zeros leaves out entries whose rounded sum is exactly zero (scipy's rule).
 *
 * Cost: O(products + sum over rows of min(r log r, span)) time for a row of r entries. */
#include "acc_internal.h"

#define ACC_SPGEMM_DENSE_COLS (1 << 22)
#define BITMAP_FACTOR 4 /* order a dense row through a bitmap when its span of 64-column words < 4 x its entries */

typedef struct accum {
    int64_t n;         /* columns of C */
    int dense;         /* dense arrays (n) or a hash table (cap) */
    double *val;       /* [n] or [cap] */
    int64_t *stamp;    /* dense: [n] row + 1 of the last row that touched the column; hash: key + 1 (0 empty) */
    uint64_t *touched; /* columns of the current row (room for the most products of a row, at most n) */
    uint64_t *bits;    /* dense: [n / 64 + 1] zero between rows; orders a row's columns */
    int64_t count, cap, row, cmin, cmax;
} accum;

typedef struct chunk { /* one thread's rows of C, in row order */
    int64_t used, room;
    int32_t *cols;
    void *vals;
} chunk;

struct acc_spgemm_state {
    int64_t m, nnz;
    int nchunks;
    acc_dtype out_dtype;
    int64_t *row_nnz; /* [m] */
    int64_t *row_at;  /* [m] where row i starts in its thread's chunk */
    int32_t *row_chunk; /* [m] which chunk holds row i */
    chunk *chunks;
};

static void accum_free(accum *a) {
    acc_mem_free(a->val);
    acc_mem_free(a->stamp);
    acc_mem_free(a->touched);
    acc_mem_free(a->bits);
    memset(a, 0, sizeof *a);
}

static acc_status accum_init(accum *a, int64_t n, int64_t max_products) {
    memset(a, 0, sizeof *a);
    a->n = n;
    a->dense = n <= ACC_SPGEMM_DENSE_COLS;
    const int64_t t = max_products < n ? max_products : n;
    a->touched = acc_mem_alloc((size_t)(t > 0 ? t : 1), sizeof(uint64_t));
    if (a->dense && n > 0) {
        a->val = acc_mem_alloc((size_t)n, sizeof(double));
        a->stamp = acc_mem_alloc((size_t)n, sizeof(int64_t));
        a->bits = acc_mem_alloc((size_t)(n / 64 + 1), sizeof(uint64_t));
        if (!a->val || !a->stamp || !a->bits) return ACC_ERR_OUT_OF_MEMORY;
        memset(a->stamp, 0, (size_t)n * sizeof(int64_t));
        memset(a->bits, 0, (size_t)(n / 64 + 1) * sizeof(uint64_t));
    }
    return a->touched ? ACC_SUCCESS : ACC_ERR_OUT_OF_MEMORY;
}

/* Room in the hash table for a row of `products` products. */
static acc_status accum_reserve(accum *a, int64_t products) {
    if (a->dense) return ACC_SUCCESS;
    const int64_t want = products < a->n ? products : a->n;
    if (2 * want <= a->cap) return ACC_SUCCESS;
    int64_t cap = 16;
    while (cap < 2 * want)
        cap <<= 1;
    acc_mem_free(a->val);
    acc_mem_free(a->stamp);
    a->val = acc_mem_alloc((size_t)cap, sizeof(double));
    a->stamp = acc_mem_alloc((size_t)cap, sizeof(int64_t));
    if (!a->val || !a->stamp) return ACC_ERR_OUT_OF_MEMORY;
    memset(a->stamp, 0, (size_t)cap * sizeof(int64_t));
    a->cap = cap;
    return ACC_SUCCESS;
}

static inline uint64_t slot_of(int64_t c, int64_t cap) {
    return ((uint64_t)c * 0x9E3779B97F4A7C15ull >> 20) & ((uint64_t)cap - 1);
}

static inline void accum_add(accum *a, int64_t c, double v) {
    if (a->dense) {
        if (a->stamp[c] != a->row + 1) {
            a->stamp[c] = a->row + 1;
            a->val[c] = v;
            a->touched[a->count++] = (uint64_t)c;
            if (c < a->cmin) a->cmin = c;
            if (c > a->cmax) a->cmax = c;
        } else {
            a->val[c] += v;
        }
        return;
    }
    for (uint64_t h = slot_of(c, a->cap);; h = (h + 1) & ((uint64_t)a->cap - 1)) {
        if (a->stamp[h] == c + 1) {
            a->val[h] += v;
            return;
        }
        if (a->stamp[h] == 0) {
            a->stamp[h] = c + 1;
            a->val[h] = v;
            a->touched[a->count++] = (uint64_t)c;
            return;
        }
    }
}

static inline double accum_get(const accum *a, int64_t c) {
    if (a->dense) return a->val[c];
    for (uint64_t h = slot_of(c, a->cap);; h = (h + 1) & ((uint64_t)a->cap - 1))
        if (a->stamp[h] == c + 1) return a->val[h];
}

/* The row's columns ascending in a->touched, and the hash table emptied for the next row (the dense
 * stamps expire with the row number).  A dense row whose span of 64-column words is at most
 * BITMAP_FACTOR x its entries is ordered through a bitmap (O(entries + span / 64): set a bit per
 * column, read the words back with count-trailing-zeros, clearing them); any other row is sorted. */
static void accum_finish(accum *a) {
    if (a->count < 2) return;
    if (a->dense && (a->cmax >> 6) - (a->cmin >> 6) < BITMAP_FACTOR * a->count) {
        for (int64_t e = 0; e < a->count; e++)
            a->bits[a->touched[e] >> 6] |= 1ull << (a->touched[e] & 63);
        int64_t e = 0;
        for (int64_t w = a->cmin >> 6; w <= a->cmax >> 6; w++) {
            uint64_t word = a->bits[w];
            a->bits[w] = 0;
            while (word) {
                a->touched[e++] = (uint64_t)(w * 64 + __builtin_ctzll(word));
                word &= word - 1;
            }
        }
        return;
    }
    acc_sort_u64(a->touched, a->count);
}

static void accum_clear(accum *a) {
    if (!a->dense)
        for (int64_t i = 0; i < a->count; i++) {
            const int64_t c = (int64_t)a->touched[i];
            for (uint64_t h = slot_of(c, a->cap);; h = (h + 1) & ((uint64_t)a->cap - 1))
                if (a->stamp[h] == c + 1) {
                    a->stamp[h] = 0; /* no tombstones needed: every key of the row goes */
                    break;
                }
        }
    a->count = 0;
}

static inline int64_t row_products(const acc_csr *A, const acc_csr *B, int64_t i) {
    int64_t f = 0;
    for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {
        const int64_t r = A->column_indices[p];
        f += B->row_offsets[r + 1] - B->row_offsets[r];
    }
    return f;
}

#define DEFINE_ACCUMULATE(T, NAME)                                                                           \
    static void NAME(accum *a, const acc_csr *A, const acc_csr *B, int64_t i) {                              \
        const T *av = A->values, *bv = B->values;                                                            \
        const int64_t *brp = B->row_offsets;                                                                 \
        const int32_t *bci = B->column_indices;                                                              \
        a->row = i;                                                                                          \
        a->cmin = INT64_MAX;                                                                                 \
        a->cmax = -1;                                                                                        \
        for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {                                \
            const int64_t r = A->column_indices[p];                                                          \
            const double x = (double)av[p];                                                                  \
            for (int64_t q = brp[r]; q < brp[r + 1]; q++)                                                    \
                accum_add(a, bci[q], x * (double)bv[q]);                                                     \
        }                                                                                                    \
    }

DEFINE_ACCUMULATE(float, accumulate_f32)
DEFINE_ACCUMULATE(double, accumulate_f64)

/* Appends row i's kept entries to the chunk (growing it); returns them or -1 when out of memory. */
static int64_t emit_row(accum *a, chunk *ch, int drop_zeros, acc_dtype out) {
    const size_t vsize = out == ACC_FLOAT64 ? sizeof(double) : sizeof(float);
    if (ch->used + a->count > ch->room) { /* realloc: large blocks move by remapping, not copying */
        const int64_t room = ch->room + ch->room / 2 + a->count + 4096;
        int32_t *cols = acc_mem_realloc(ch->cols, (size_t)room, sizeof(int32_t));
        if (!cols) return -1;
        ch->cols = cols;
        void *vals = acc_mem_realloc(ch->vals, (size_t)room, vsize);
        if (!vals) return -1;
        ch->vals = vals;
        ch->room = room;
    }
    int64_t at = ch->used;
    for (int64_t e = 0; e < a->count; e++) {
        const int64_t c = (int64_t)a->touched[e];
        const double s = accum_get(a, c);
        if (out == ACC_FLOAT64) {
            if (drop_zeros && s == 0.0) continue;
            ((double *)ch->vals)[at] = s;
        } else {
            const float f = (float)s;
            if (drop_zeros && f == 0.0f) continue;
            ((float *)ch->vals)[at] = f;
        }
        ch->cols[at++] = (int32_t)c;
    }
    const int64_t kept = at - ch->used;
    ch->used = at;
    return kept;
}

void acc_spgemm_free(acc_spgemm_state *s) {
    if (!s) return;
    for (int c = 0; c < s->nchunks; c++) {
        acc_mem_free(s->chunks[c].cols);
        acc_mem_free(s->chunks[c].vals);
    }
    acc_mem_free(s->chunks);
    acc_mem_free(s->row_nnz);
    acc_mem_free(s->row_at);
    acc_mem_free(s->row_chunk);
    acc_mem_free(s);
}

acc_status acc_spgemm_compute(const acc_csr *A, const acc_csr *B, int drop_zeros, acc_dtype out_dtype,
                              acc_spgemm_state **state, int64_t *nnz, int64_t *products) {
    if (!A || !B || !state || !nnz || A->m < 0 || A->k < 0 || B->m != A->k || B->k < 0 || !A->row_offsets ||
        !B->row_offsets || A->dtype != B->dtype || !acc_dtype_valid(A->dtype) || !acc_dtype_valid(out_dtype))
        return ACC_ERR_INVALID_ARGUMENT;
    if ((A->row_offsets[A->m] > 0 && (!A->column_indices || !A->values)) ||
        (B->row_offsets[B->m] > 0 && (!B->column_indices || !B->values)))
        return ACC_ERR_INVALID_ARGUMENT;
    *state = NULL;
    const int64_t m = A->m;
    acc_status status = ACC_SUCCESS;
    acc_spgemm_state *s = acc_mem_alloc(1, sizeof *s);
    int64_t *work = acc_mem_alloc((size_t)m + 1, sizeof(int64_t)); /* prefix sums of products */
    if (!s || !work) {
        acc_mem_free(s);
        acc_mem_free(work);
        return ACC_ERR_OUT_OF_MEMORY;
    }
    memset(s, 0, sizeof *s);
    s->m = m;
    s->out_dtype = out_dtype;
    s->row_nnz = acc_mem_alloc((size_t)(m > 0 ? m : 1), sizeof(int64_t));
    s->row_at = acc_mem_alloc((size_t)(m > 0 ? m : 1), sizeof(int64_t));
    s->row_chunk = acc_mem_alloc((size_t)(m > 0 ? m : 1), sizeof(int32_t));
    if (!s->row_nnz || !s->row_at || !s->row_chunk) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    work[0] = 0;
    int64_t maxp = 0;
    for (int64_t i = 0; i < m; i++) {
        const int64_t f = row_products(A, B, i);
        maxp = f > maxp ? f : maxp;
        work[i + 1] = work[i] + f;
    }
    if (products) *products = work[m];
    const int nth = acc_threads_for(work[m] + A->row_offsets[m] + m);
    s->chunks = acc_mem_alloc((size_t)nth, sizeof(chunk));
    if (!s->chunks) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    memset(s->chunks, 0, (size_t)nth * sizeof(chunk));
    s->nchunks = nth;
    int failed = 0;
#pragma omp parallel num_threads(nth)
    {
        chunk *ch = &s->chunks[acc_thread_id()];
        accum a;
        int ok = accum_init(&a, B->k, maxp) == ACC_SUCCESS;
        /* dynamic: a row's cost (its products, sorting and writing its entries) is not known before */
#pragma omp for schedule(dynamic, 64)
        for (int64_t i = 0; i < m; i++) {
            s->row_nnz[i] = 0;
            s->row_at[i] = ch->used;
            s->row_chunk[i] = (int32_t)(ch - s->chunks);
            const int64_t f = work[i + 1] - work[i];
            if (!ok || f == 0) continue;
            ok = accum_reserve(&a, f) == ACC_SUCCESS;
            if (!ok) continue;
            if (A->dtype == ACC_FLOAT64)
                accumulate_f64(&a, A, B, i);
            else
                accumulate_f32(&a, A, B, i);
            accum_finish(&a);
            const int64_t kept = emit_row(&a, ch, drop_zeros, out_dtype);
            ok = kept >= 0;
            s->row_nnz[i] = kept > 0 ? kept : 0;
            accum_clear(&a);
        }
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        accum_free(&a);
    }
    if (failed) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    for (int c = 0; c < s->nchunks; c++)
        s->nnz += s->chunks[c].used;
    *nnz = s->nnz;
    *state = s;
    s = NULL;
done:
    acc_mem_free(work);
    acc_spgemm_free(s);
    return status;
}

acc_status acc_spgemm_fill(const acc_spgemm_state *s, int64_t *row_offsets, int32_t *cols, void *vals) {
    if (!s || !row_offsets || (s->nnz > 0 && (!cols || !vals))) return ACC_ERR_INVALID_ARGUMENT;
    row_offsets[0] = 0;
    for (int64_t i = 0; i < s->m; i++)
        row_offsets[i + 1] = row_offsets[i] + s->row_nnz[i];
    const size_t vsize = s->out_dtype == ACC_FLOAT64 ? sizeof(double) : sizeof(float);
#pragma omp parallel for num_threads(acc_threads_for(s->nnz + s->m)) schedule(static)
    for (int64_t i = 0; i < s->m; i++) {
        const int64_t len = s->row_nnz[i];
        if (!len) continue;
        const chunk *ch = &s->chunks[s->row_chunk[i]];
        memcpy(cols + row_offsets[i], ch->cols + s->row_at[i], (size_t)len * sizeof(int32_t));
        memcpy((char *)vals + (size_t)row_offsets[i] * vsize, (const char *)ch->vals + (size_t)s->row_at[i] * vsize,
               (size_t)len * vsize);
    }
    return ACC_SUCCESS;
}

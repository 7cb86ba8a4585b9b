/* acc_spgemm.c -- C = A @ B for two sparse CSR matrices on the CPU (Gustavson, row by row, two passes).
 *
 * acc_spgemm_compute checks both operands (unless the caller has) and runs the symbolic pass: the structural
 * count of each row of C (its distinct columns).  The caller allocates C at that size, and acc_spgemm_fill
 * runs the numeric pass straight into the caller's arrays, each row at its offset, columns ascending. Entries
 * whose rounded sum is exactly zero are left out inside the row (drop_zeros); when any were, one sequential
 * pass moves the rows down, and fill reports the kept count.  There is no intermediate copy of C, and the
 * result is the same for any thread count: every row is computed the same way.
 *
 * Work split: rows cut into pieces of about equal cost (products + entries + 1 per row), handed
 * out dynamically, so a hub row or a run of empty rows does not stall a thread.
 *
 * Accumulator per thread, when C has at most ACC_SPGEMM_DENSE_COLS columns and at most
 * ACC_SPGEMM_DENSE_PER_WORK x a thread's work (products + entries + rows): a bitmap of the row's
 * columns (n / 8 bytes, cache-resident where a mark per column would not be), set a 64-column word
 * at a time, with the list of words the row touches; in the numeric pass also a value per column,
 * zero between rows.  The row comes out in order by sorting its words (fewer than its columns,
 * often far fewer) and reading each word's bits back.  Up to ACC_SPGEMM_STAMP_COLS columns also a
 * mark per column (stamp mode: the mark of the last row that touched it, a row number per thread), for
 * rows where it is cheaper (stamp_row, stamp_fill): one pass over the products counts the new
 * columns and starts their sums, and the row's column list is sorted.  Otherwise: a hash table of
 * linear probing sized to the row's products (a power of two, at least twice them), so memory stays O(threads
 * * min(n, max row products)) whatever n is, and the row's columns sorted.  Sorting is insertion sort for
 * short lists, else an LSD radix sort on the bytes of x - min (linear whatever the order).  A row of A with
 * one entry, when B is canonical, is B's row scaled: no accumulator.
 *
 * Arithmetic: products and sums in double, in the order of A's row entries and then B's (scipy's
 * order), rounded once to the output type: float64 data gives scipy's sums where scipy's build does
 * not contract them to FMA (the GPU machine's scipy 1.18.1 differs on 2,816 of cnr-2000's 34M
 * entries, all within 4.5 u x the sum of |products|); float32 data is more accurate than a float32
 * accumulation (one rounding); integer-valued data is exact either way.
 * No FMA contraction (this file is built for the baseline ISA), so that order is the arithmetic.
 *
 * Cost: O(products + w + r) per row of r entries in w touched words (bitmap), O(products + r) (stamp,
 * radix-sorted above 32 columns), or O(products + r) (hash), for each pass. */
#include "acc_internal.h"

#define ACC_SPGEMM_DENSE_COLS (1 << 22)
#define ACC_SPGEMM_DENSE_PER_WORK 8 /* dense only where n <= this x a thread's work (acc_spgemm_compute) */
#define ACC_SPGEMM_STAMP_COLS (1 << 21)     /* a mark per column (stamp) up to here, beside the bitmap */
#define ACC_SPGEMM_STAMP_ALL_COLS (1 << 16) /* every row by stamp up to here (the marks fit in L2) */
#define ACC_SPGEMM_STAMP_PRODUCTS 256       /* else rows of at most this many products */
#define INSERTION_MAX 32                    /* lists this short are sorted by insertion */
#define PIECES_PER_THREAD 16

struct acc_spgemm_state {
    acc_csr A, B;
    int64_t nnz, maxp; /* C is A.m x B.k */
    int b_canonical, drop_zeros, nth, dense;
    acc_dtype out_dtype;
    int64_t *work;   /* [m + 1] prefix sums of the row costs: products + A's entries + 1 */
    int64_t *count;  /* [m] structural entries of each row of C */
    int64_t *pieces; /* [npieces + 1] first row of each piece */
    int64_t npieces;
};

/* One thread's accumulator.  Dense: bits[n / 64 + 1] and val[n] (both zero between rows), list: the
 * words a row touches.  Hash: keys[cap] (-1 empty) and val[cap], list: a row's columns in order of
 * appearance.  scratch: the radix sort's second buffer. */
typedef struct accum {
    int dense;
    int32_t tick;   /* stamp mode: the current row's mark */
    int32_t *stamp; /* stamp mode: [n], the mark of the last row that touched each column */
    int64_t n, cap;
    uint64_t *bits;
    int32_t *keys;
    double *val;
    int32_t *list, *scratch;
    int64_t scratch_room;
} accum;

static void accum_free(accum *a) {
    acc_mem_free(a->bits);
    acc_mem_free(a->stamp);
    acc_mem_free(a->keys);
    acc_mem_free(a->val);
    acc_mem_free(a->list);
    acc_mem_free(a->scratch);
    memset(a, 0, sizeof *a);
}

/* values: the numeric pass's sums.  The list has room for a row's columns (at most min(maxp, n),
 * which also bounds its words) and one more (mark_columns writes before it counts). */
static acc_status accum_init(accum *a, int64_t n, int64_t maxp, int values, int dense) {
    memset(a, 0, sizeof *a);
    a->n = n;
    a->dense = dense;
    const int64_t t = maxp < n ? maxp : n;
    if (!(a->list = acc_mem_alloc((size_t)t + 1, sizeof(int32_t)))) return ACC_ERR_OUT_OF_MEMORY;
    if (!a->dense) return ACC_SUCCESS;
    if (n <= ACC_SPGEMM_STAMP_COLS) {
        if (!(a->stamp = acc_mem_alloc((size_t)(n > 0 ? n : 1), sizeof(int32_t))))
            return ACC_ERR_OUT_OF_MEMORY;
        memset(a->stamp, 0, (size_t)n * sizeof(int32_t));
    }
    const size_t words = (size_t)(n / 64 + 1);
    if (!(a->bits = acc_mem_alloc(words, sizeof(uint64_t)))) return ACC_ERR_OUT_OF_MEMORY;
    memset(a->bits, 0, words * sizeof(uint64_t));
    if (values) {
        if (!(a->val = acc_mem_alloc((size_t)(n > 0 ? n : 1), sizeof(double)))) return ACC_ERR_OUT_OF_MEMORY;
        memset(a->val, 0, (size_t)n * sizeof(double));
    }
    return ACC_SUCCESS;
}

/* Hash mode: an empty table with room for a row of `products` products. */
static acc_status accum_reserve(accum *a, int64_t products, int values) {
    const int64_t want = products < a->n ? products : a->n;
    if (2 * want > a->cap) {
        int64_t cap = 16;
        while (cap < 2 * want)
            cap <<= 1;
        acc_mem_free(a->keys);
        acc_mem_free(a->val);
        a->val = NULL;
        a->cap = 0;
        if (!(a->keys = acc_mem_alloc((size_t)cap, sizeof(int32_t)))) return ACC_ERR_OUT_OF_MEMORY;
        if (values && !(a->val = acc_mem_alloc((size_t)cap, sizeof(double)))) return ACC_ERR_OUT_OF_MEMORY;
        memset(a->keys, 0xff, (size_t)cap * sizeof(int32_t));
        a->cap = cap;
    }
    return ACC_SUCCESS;
}

static inline uint64_t slot_of(int32_t c, int64_t cap) {
    return ((uint64_t)(uint32_t)c * 0x9E3779B97F4A7C15ull >> 20) & ((uint64_t)cap - 1);
}

/* The slot of column c (inserting it when absent: *fresh = 1). */
static inline uint64_t hash_slot(const accum *a, int32_t c, int *fresh) {
    const uint64_t mask = (uint64_t)a->cap - 1;
    for (uint64_t h = slot_of(c, a->cap);; h = (h + 1) & mask) {
        if (a->keys[h] == c) {
            *fresh = 0;
            return h;
        }
        if (a->keys[h] < 0) {
            a->keys[h] = c;
            *fresh = 1;
            return h;
        }
    }
}

static inline uint64_t hash_find(const accum *a, int32_t c) {
    const uint64_t mask = (uint64_t)a->cap - 1;
    uint64_t h = slot_of(c, a->cap);
    while (a->keys[h] != c)
        h = (h + 1) & mask;
    return h;
}

/* Empties the hash table of the row's r columns (no tombstones needed: every key of the row goes). */
static void hash_clear(accum *a, const int32_t *cols, int64_t r) {
    if (4 * r >= a->cap) {
        memset(a->keys, 0xff, (size_t)a->cap * sizeof(int32_t));
        return;
    }
    for (int64_t e = 0; e < r; e++)
        a->keys[hash_find(a, cols[e])] = -1;
}

/* Stamp mode: the mark of a new row (columns marked with an older one are not in it). */
static inline int32_t next_tick(accum *a) {
    if (a->tick == INT32_MAX) { /* wrapped: forget every mark */
        memset(a->stamp, 0, (size_t)a->n * sizeof(int32_t));
        a->tick = 0;
    }
    return ++a->tick;
}

/* Whether the symbolic pass counts a row of f products by stamps (else the bitmap, or the hash
 * table): where the marks are cache-resident, or the row touches few of them. */
static inline int stamp_row(const accum *a, int64_t f) {
    return a->stamp && (a->n <= ACC_SPGEMM_STAMP_ALL_COLS || f <= ACC_SPGEMM_STAMP_PRODUCTS);
}

/* Whether the numeric pass sums a row of f products into r columns by stamps: when its r columns
 * sort by insertion in a few compares (r <= 8), or when it has 4 or more products a column, so that
 * its time goes into the product loop, which the stamps run in one pass where the bitmap takes two.
 * Otherwise the bitmap, whose words read back in column order without sorting the columns (one
 * thread, 10 real matrices: a row rule of r <= 32 or f >= 2..4 r, or stamps everywhere, each lost
 * 10-30% on some matrix against the old bitmap, this one on none). */
static inline int stamp_fill(const accum *a, int64_t f, int64_t r) {
    return a->stamp && (r <= 8 || f >= 4 * r);
}

static inline int64_t row_products(const acc_csr *A, const acc_csr *B, int64_t i) {
    int64_t f = 0;
    for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {
        const int64_t r = A->column_indices[p];
        f += B->row_offsets[r + 1] - B->row_offsets[r];
    }
    return f;
}

/* ---- ordering ------------------------------------------------------------ */

static void insertion_sort_i32(int32_t *c, int64_t r) {
    for (int64_t i = 1; i < r; i++) {
        const int32_t x = c[i];
        int64_t j = i - 1;
        while (j >= 0 && c[j] > x) {
            c[j + 1] = c[j];
            j--;
        }
        c[j + 1] = x;
    }
}

/* Sorts x[0..r) (non-negative) ascending: insertion sort when short, else an LSD radix sort on the
 * bytes of x - min through the accumulator's scratch buffer (linear whatever the order).  Returns
 * nonzero when out of memory. */
static int sort_i32(accum *a, int32_t *x, int64_t r) {
    if (r <= INSERTION_MAX) {
        insertion_sort_i32(x, r);
        return 0;
    }
    int32_t lo = x[0], hi = x[0];
    for (int64_t e = 1; e < r; e++) {
        lo = x[e] < lo ? x[e] : lo;
        hi = x[e] > hi ? x[e] : hi;
    }
    if (a->scratch_room < r) {
        acc_mem_free(a->scratch);
        a->scratch_room = 0;
        if (!(a->scratch = acc_mem_alloc((size_t)r, sizeof(int32_t)))) return 1;
        a->scratch_room = r;
    }
    int32_t *src = x, *dst = a->scratch;
    const uint32_t span = (uint32_t)(hi - lo);
    for (int shift = 0; shift < 32 && (span >> shift) != 0; shift += 8) {
        int64_t hist[257] = {0};
        for (int64_t e = 0; e < r; e++)
            hist[(((uint32_t)(src[e] - lo) >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++)
            hist[d + 1] += hist[d];
        for (int64_t e = 0; e < r; e++)
            dst[hist[((uint32_t)(src[e] - lo) >> shift) & 255]++] = src[e];
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != x) memcpy(x, src, (size_t)r * sizeof(int32_t));
    return 0;
}

/* ---- the bitmap of a row's columns (dense mode) --------------------------- */

/* Sets the bits of columns bci[q0..q1) a 64-column word at a time (B's rows are usually sorted, so
 * a run of columns in one word is one read and one write of it: no chain of stores and loads on
 * one word), and appends each word this row had not touched before to words[*nw]. */
static inline void mark_columns(uint64_t *bits, int32_t *words, int64_t *nw, const int32_t *bci, int64_t q0,
                                int64_t q1) {
    if (q0 == q1) return;
    int32_t w = bci[q0] >> 6;
    uint64_t run = 0;
    int64_t n = *nw;
    for (int64_t q = q0; q < q1; q++) {
        const int32_t c = bci[q];
        if ((c >> 6) != w) {
            const uint64_t old = bits[w];
            bits[w] = old | run;
            words[n] = w;
            n += old == 0;
            w = c >> 6;
            run = 0;
        }
        run |= 1ull << (c & 63);
    }
    const uint64_t old = bits[w];
    bits[w] = old | run;
    words[n] = w;
    n += old == 0;
    *nw = n;
}

/* ---- the symbolic pass -------------------------------------------------- */

/* Row i's products: its cost in s->work less its entries and the 1 per row. */
static inline int64_t products_of(const acc_spgemm_state *s, int64_t i) {
    return s->work[i + 1] - s->work[i] - (s->A.row_offsets[i + 1] - s->A.row_offsets[i]) - 1;
}

static int64_t row_count(accum *a, const acc_spgemm_state *s, int64_t i) {
    const acc_csr *A = &s->A, *B = &s->B;
    const int64_t a0 = A->row_offsets[i], a1 = A->row_offsets[i + 1];
    const int64_t f = products_of(s, i);
    if (f <= 1 || (a1 - a0 == 1 && s->b_canonical)) return f;
    const int64_t *brp = B->row_offsets;
    const int32_t *bci = B->column_indices;
    int64_t r = 0;
    if (stamp_row(a, f)) {
        const int32_t t = next_tick(a);
        int32_t *st = a->stamp;
        for (int64_t p = a0; p < a1; p++) {
            const int64_t k = A->column_indices[p];
            for (int64_t q = brp[k]; q < brp[k + 1]; q++) {
                const int32_t c = bci[q];
                r += st[c] != t;
                st[c] = t;
            }
        }
        return r;
    }
    if (a->dense) {
        int64_t nw = 0;
        for (int64_t p = a0; p < a1; p++) {
            const int64_t k = A->column_indices[p];
            mark_columns(a->bits, a->list, &nw, bci, brp[k], brp[k + 1]);
        }
        for (int64_t e = 0; e < nw; e++) {
            r += __builtin_popcountll(a->bits[a->list[e]]);
            a->bits[a->list[e]] = 0;
        }
        return r;
    }
    if (accum_reserve(a, f, 0) != ACC_SUCCESS) return -1;
    for (int64_t p = a0; p < a1; p++) {
        const int64_t k = A->column_indices[p];
        for (int64_t q = brp[k]; q < brp[k + 1]; q++) {
            int fresh;
            hash_slot(a, bci[q], &fresh);
            if (fresh) a->list[r++] = bci[q];
        }
    }
    hash_clear(a, a->list, r);
    return r;
}

void acc_spgemm_free(acc_spgemm_state *s) {
    if (!s) return;
    acc_mem_free(s->work);
    acc_mem_free(s->count);
    acc_mem_free(s->pieces);
    acc_mem_free(s);
}

acc_status acc_spgemm_compute(const acc_csr *A, const acc_csr *B, int drop_zeros, int b_canonical,
                              acc_dtype out_dtype, acc_spgemm_state **state, int64_t *nnz,
                              int64_t *products) {
    if (!A || !B || !state || !nnz || B->m != A->k || A->dtype != B->dtype || !acc_dtype_valid(A->dtype) ||
        !acc_dtype_valid(out_dtype) || b_canonical < -1 || b_canonical > 1)
        return ACC_ERR_INVALID_ARGUMENT;
    *state = NULL;
    acc_status status = ACC_SUCCESS;
    if (b_canonical < 0) { /* else the caller has just checked both */
        status = acc_csr_check(A, NULL);
        if (status == ACC_SUCCESS) status = acc_csr_check(B, &b_canonical);
        if (status != ACC_SUCCESS) return status;
    }
    if ((A->row_offsets[A->m] > 0 && !A->values) || (B->row_offsets[B->m] > 0 && !B->values))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m;
    acc_spgemm_state *s = acc_mem_alloc(1, sizeof *s);
    if (!s) return ACC_ERR_OUT_OF_MEMORY;
    memset(s, 0, sizeof *s);
    s->A = *A;
    s->B = *B;
    s->b_canonical = b_canonical;
    s->drop_zeros = drop_zeros;
    s->out_dtype = out_dtype;
    s->work = acc_mem_alloc((size_t)m + 1, sizeof(int64_t));
    s->count = acc_mem_alloc((size_t)(m > 0 ? m : 1), sizeof(int64_t));
    if (!s->work || !s->count) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    s->work[0] = 0;
    int64_t maxp = 0;
#pragma omp parallel for num_threads(acc_threads_for(A->row_offsets[m] + m)) schedule(static)                \
    reduction(max                                                                                            \
              : maxp)
    for (int64_t i = 0; i < m; i++) {
        const int64_t f = row_products(A, B, i);
        maxp = f > maxp ? f : maxp;
        s->work[i + 1] = f + (A->row_offsets[i + 1] - A->row_offsets[i]) + 1;
    }
    for (int64_t i = 0; i < m; i++)
        s->work[i + 1] += s->work[i];
    s->maxp = maxp;
    const int64_t total = s->work[m];
    if (products) *products = total - A->row_offsets[m] - m;
    s->nth = acc_threads_for(8 * total); /* a product costs several of acc_threads_for's items */
    /* Dense accumulators cost 12 n bytes a thread to clear (8 n for the sums, 4 n for the marks): a
     * product whose work per thread is far below n (a few rows of A against a wide B) takes the
     * hash tables, sized to its rows, instead. */
    s->dense = B->k <= ACC_SPGEMM_DENSE_COLS &&
               (B->k + ACC_SPGEMM_DENSE_PER_WORK - 1) / ACC_SPGEMM_DENSE_PER_WORK <= total / s->nth + 1;
    /* pieces of about total / npieces cost: piece j starts at the first row whose cost prefix
     * reaches j * total / npieces (a binary search per piece) */
    s->npieces =
        s->nth == 1 ? (m > 0) : (m < (int64_t)s->nth * PIECES_PER_THREAD ? m : s->nth * PIECES_PER_THREAD);
    s->pieces = acc_mem_alloc((size_t)s->npieces + 1, sizeof(int64_t));
    if (!s->pieces) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    for (int64_t j = 0; j <= s->npieces; j++) {
        const int64_t target =
            j == s->npieces ? total : (int64_t)((double)total * (double)j / (double)s->npieces);
        int64_t lo = 0, hi = m; /* first row i with work[i] >= target */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (s->work[mid] < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        s->pieces[j] = j == s->npieces ? m : lo;
    }
    int failed = 0;
#pragma omp parallel num_threads(s->nth)
    {
        accum a;
        int ok = accum_init(&a, s->B.k, maxp, 0, s->dense) == ACC_SUCCESS;
#pragma omp for schedule(dynamic, 1)
        for (int64_t j = 0; j < s->npieces; j++)
            for (int64_t i = s->pieces[j]; i < s->pieces[j + 1]; i++) {
                const int64_t r = ok ? row_count(&a, s, i) : 0;
                ok = ok && r >= 0;
                s->count[i] = r > 0 ? r : 0;
            }
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        accum_free(&a);
    }
    if (failed) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    for (int64_t i = 0; i < m; i++)
        s->nnz += s->count[i];
    *nnz = s->nnz;
    *state = s;
    s = NULL;
done:
    acc_spgemm_free(s);
    return status;
}

/* ---- the numeric pass --------------------------------------------------- */

static inline double value_at(const acc_csr *M, int64_t p) {
    return M->dtype == ACC_FLOAT64 ? ((const double *)M->values)[p] : (double)((const float *)M->values)[p];
}

/* Writes `sum`, rounded to `out`, at vals[at] unless drop is set and it rounds to zero; returns 1
 * if kept. */
static inline int put(acc_dtype out, int drop, void *vals, int64_t at, double sum) {
    if (out == ACC_FLOAT64) {
        if (drop && sum == 0.0) return 0;
        ((double *)vals)[at] = sum;
        return 1;
    }
    const float f = (float)sum;
    if (drop && f == 0.0f) return 0;
    ((float *)vals)[at] = f;
    return 1;
}

/* Adds row i's products into the accumulator.  Dense: val[] (zero between rows) and the bitmap, the
 * words the row touches in a->list; returns their count.  Hash: the table, the row's columns in
 * a->list in order of appearance; returns their count. */
#define DEFINE_ACCUMULATE(T, NAME)                                                                           \
    static int64_t NAME(accum *a, const acc_spgemm_state *s, int64_t i, int stamped) {                       \
        const acc_csr *A = &s->A, *B = &s->B;                                                                \
        const T *av = A->values, *bv = B->values;                                                            \
        const int64_t *brp = B->row_offsets;                                                                 \
        const int32_t *bci = B->column_indices;                                                              \
        double *val = a->val;                                                                                \
        int32_t *st = a->stamp;                                                                              \
        const int32_t t = stamped ? next_tick(a) : 0;                                                        \
        int64_t r = 0;                                                                                       \
        for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {                                \
            const int64_t k = A->column_indices[p], q0 = brp[k], q1 = brp[k + 1];                            \
            const double x = (double)av[p];                                                                  \
            if (stamped) { /* a column's first product starts its sum at +0, as the dense path */            \
                for (int64_t q = q0; q < q1; q++) {                                                          \
                    const int32_t c = bci[q];                                                                \
                    const double v = x * (double)bv[q];                                                      \
                    if (st[c] != t) {                                                                        \
                        st[c] = t;                                                                           \
                        val[c] = 0.0 + v;                                                                    \
                        a->list[r++] = c;                                                                    \
                    } else {                                                                                 \
                        val[c] += v;                                                                         \
                    }                                                                                        \
                }                                                                                            \
                continue;                                                                                    \
            }                                                                                                \
            if (a->dense) {                                                                                  \
                for (int64_t q = q0; q < q1; q++)                                                            \
                    val[bci[q]] += x * (double)bv[q];                                                        \
                mark_columns(a->bits, a->list, &r, bci, q0, q1);                                             \
                continue;                                                                                    \
            }                                                                                                \
            for (int64_t q = q0; q < q1; q++) {                                                              \
                int fresh;                                                                                   \
                const uint64_t h = hash_slot(a, bci[q], &fresh);                                             \
                const double v = x * (double)bv[q];                                                          \
                if (fresh) {                                                                                 \
                    val[h] = 0.0 + v; /* +0 for a -0 product, as the dense paths */                          \
                    a->list[r++] = bci[q];                                                                   \
                } else {                                                                                     \
                    val[h] += v;                                                                             \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        return r;                                                                                            \
    }

DEFINE_ACCUMULATE(float, accumulate_f32)
DEFINE_ACCUMULATE(double, accumulate_f64)

/* Row i of C at cols/vals from offset `at` (room s->count[i]); returns its kept entries, or -1 when
 * out of memory.  Dense: the touched words sorted, then read back in order (clearing them), each
 * column's sum written and reset.  Hash: the columns sorted, each looked up. */
static int64_t row_fill(accum *a, const acc_spgemm_state *s, int64_t i, int64_t at, int32_t *cols,
                        void *vals) {
    const acc_csr *A = &s->A, *B = &s->B;
    const int64_t a0 = A->row_offsets[i], a1 = A->row_offsets[i + 1];
    const int64_t f = products_of(s, i);
    const acc_dtype out = s->out_dtype;
    const int drop = s->drop_zeros;
    int32_t *c = cols + at;
    int64_t kept = 0;
    if (f == 0) return 0;
    if (a1 - a0 == 1 && s->b_canonical) { /* B's row scaled: already in order, no accumulator */
        const int64_t k = A->column_indices[a0];
        const double x = value_at(A, a0);
        for (int64_t q = B->row_offsets[k]; q < B->row_offsets[k + 1]; q++) {
            c[kept] = B->column_indices[q];
            kept += put(out, drop, vals, at + kept, 0.0 + x * value_at(B, q)); /* +0 for -0, as sums */
        }
        return kept;
    }
    if (!a->dense && accum_reserve(a, f, 1) != ACC_SUCCESS) return -1;
    const int stamped = stamp_fill(a, f, s->count[i]);
    const int64_t r =
        A->dtype == ACC_FLOAT64 ? accumulate_f64(a, s, i, stamped) : accumulate_f32(a, s, i, stamped);
    if (sort_i32(a, a->list, r)) return -1; /* the row's columns (stamp, hash) or words (bitmap) */
    if (stamped) {
        for (int64_t e = 0; e < r; e++) {
            const int32_t col = a->list[e];
            c[kept] = col;
            kept += put(out, drop, vals, at + kept, a->val[col]);
            a->val[col] = 0.0; /* zero between rows, for the bitmap rows */
        }
        return kept;
    }
    if (a->dense) {
        for (int64_t e = 0; e < r; e++) {
            const int32_t w = a->list[e];
            uint64_t word = a->bits[w];
            a->bits[w] = 0;
            while (word) {
                const int32_t col = w * 64 + __builtin_ctzll(word);
                word &= word - 1;
                c[kept] = col;
                kept += put(out, drop, vals, at + kept, a->val[col]);
                a->val[col] = 0.0;
            }
        }
        return kept;
    }
    for (int64_t e = 0; e < r; e++) {
        c[kept] = a->list[e];
        kept += put(out, drop, vals, at + kept, a->val[hash_find(a, a->list[e])]);
    }
    hash_clear(a, a->list, r);
    return kept;
}

acc_status acc_spgemm_fill(const acc_spgemm_state *s, int64_t *row_offsets, int32_t *cols, void *vals,
                           int64_t *nnz) {
    if (!s || !row_offsets || !nnz || (s->nnz > 0 && (!cols || !vals))) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = s->A.m;
    row_offsets[0] = 0;
    for (int64_t i = 0; i < m; i++)
        row_offsets[i + 1] = row_offsets[i] + s->count[i];
    int64_t *kept = acc_mem_alloc((size_t)(m > 0 ? m : 1), sizeof(int64_t));
    if (!kept) return ACC_ERR_OUT_OF_MEMORY;
    int failed = 0;
#pragma omp parallel num_threads(s->nth)
    {
        accum a;
        int ok = accum_init(&a, s->B.k, s->maxp, 1, s->dense) == ACC_SUCCESS;
#pragma omp for schedule(dynamic, 1)
        for (int64_t j = 0; j < s->npieces; j++)
            for (int64_t i = s->pieces[j]; i < s->pieces[j + 1]; i++) {
                const int64_t r = ok ? row_fill(&a, s, i, row_offsets[i], cols, vals) : 0;
                ok = ok && r >= 0;
                kept[i] = r > 0 ? r : 0;
            }
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        accum_free(&a);
    }
    acc_status status = failed ? ACC_ERR_OUT_OF_MEMORY : ACC_SUCCESS;
    if (status == ACC_SUCCESS) { /* rows with dropped zeros: the rows after them move down */
        const size_t vsize = s->out_dtype == ACC_FLOAT64 ? sizeof(double) : sizeof(float);
        int64_t to = 0;
        for (int64_t i = 0; i < m; i++) {
            const int64_t from = row_offsets[i];
            if (to != from && kept[i] > 0) {
                memmove(cols + to, cols + from, (size_t)kept[i] * sizeof(int32_t));
                memmove((char *)vals + (size_t)to * vsize, (char *)vals + (size_t)from * vsize,
                        (size_t)kept[i] * vsize);
            }
            row_offsets[i] = to;
            to += kept[i];
        }
        row_offsets[m] = to;
        *nnz = to;
    }
    acc_mem_free(kept);
    return status;
}

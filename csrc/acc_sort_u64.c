/* acc_sort_u64.c -- in-place ascending sort of uint64 keys.
 * Introsort: quicksort (median of three, recursion on the smaller side so the
 * stack stays O(log n)) with insertion sort below 24 elements, and heapsort
 * for a part whose partitions go 2 log2(n) deep (inputs built to defeat the
 * median of three), so the worst case is O(n log n).  The sorted case is
 * linear: a check first. */
#include "acc_internal.h"

static void insertion_sort(uint64_t *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        int64_t j = i - 1;
        while (j >= 0 && a[j] > x) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = x;
    }
}

static inline void swap_u64(uint64_t *a, uint64_t *b) {
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

static void sift_down(uint64_t *a, int64_t i, int64_t n) {
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && a[c + 1] > a[c]) c++;
        if (a[i] >= a[c]) return;
        swap_u64(&a[i], &a[c]);
        i = c;
    }
}

static void heap_sort(uint64_t *a, int64_t n) {
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift_down(a, i, n);
    for (int64_t e = n - 1; e > 0; e--) {
        swap_u64(&a[0], &a[e]);
        sift_down(a, 0, e);
    }
}

static void intro_sort(uint64_t *a, int64_t n, int depth) {
    while (n > 24) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        int64_t mid = n / 2;
        if (a[mid] < a[0]) swap_u64(&a[mid], &a[0]);
        if (a[n - 1] < a[0]) swap_u64(&a[n - 1], &a[0]);
        if (a[n - 1] < a[mid]) swap_u64(&a[n - 1], &a[mid]);
        uint64_t pivot = a[mid];
        int64_t i = 0, j = n - 1;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                swap_u64(&a[i], &a[j]);
                i++;
                j--;
            }
        }
        /* [0, j] <= pivot <= [i, n) */
        if (j + 1 < n - i) {
            intro_sort(a, j + 1, depth);
            a += i;
            n -= i;
        } else {
            intro_sort(a + i, n - i, depth);
            n = j + 1;
        }
    }
    insertion_sort(a, n);
}

void acc_sort_u64_depth(uint64_t *a, int64_t n, int depth) {
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++)
        sorted = a[i - 1] <= a[i];
    if (!sorted) intro_sort(a, n, depth);
}

void acc_sort_u64(uint64_t *a, int64_t n) {
    int depth = 0;
    for (int64_t k = n; k > 1; k >>= 1)
        depth += 2;
    acc_sort_u64_depth(a, n, depth);
}

/* acc_sort_u64.c -- in-place ascending sort of uint64 keys.
 * Quicksort (median of three, recursion on the smaller side so the stack
 * stays O(log n)) with insertion sort below 24 elements.  Worst case is
 * quadratic only on adversarial inputs; rows of real matrices are short or
 * already sorted (the sorted case is linear: insertion sort after a check). */
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

void acc_sort_u64(uint64_t *a, int64_t n) {
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++)
        sorted = a[i - 1] <= a[i];
    if (sorted) return;
    while (n > 24) {
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
            acc_sort_u64(a, j + 1);
            a += i;
            n -= i;
        } else {
            acc_sort_u64(a + i, n - i);
            n = j + 1;
        }
    }
    insertion_sort(a, n);
}

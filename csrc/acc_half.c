/* acc_half.c -- FP16 / BF16 storage: rounding to the format, widening back.
 *
 * Rounding is IEEE round-to-nearest-even, directly from the source width
 * (a float64 source is never rounded to float32 first: that double rounding
 * can differ from one rounding by one unit).  NaN stays NaN (quiet), inf
 * stays inf, signed zeros keep their sign.  "Out of range" for
 * acc_half_round means a finite source that rounds to inf (|x| at or above
 * the format's overflow threshold: 65520 for FP16, (2 - 2^-8) 2^127 for
 * BF16) or a nonzero source that rounds to zero (|x| at or below half the
 * smallest subnormal: 2^-25 for FP16, 2^-134 for BF16); the first such
 * index is reported so the caller can name the value.  Subnormal results
 * are kept (with their reduced precision). */
#include "acc_internal.h"

#include <math.h>

/* float32 -> FP16 bits (the fast path of float32 sources; bit-exact with
 * half_from_double on every float32). */
static inline uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return (uint16_t)(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520: rounds to inf */
    if (a < 0x38800000u) {                                   /* < 2^-14: subnormal (or zero) */
        float af;
        memcpy(&af, &a, 4);
        return (uint16_t)(sign | (uint32_t)nearbyintf(af * 16777216.0f)); /* units of 2^-24, exact scaling */
    }
    uint32_t r = a - (112u << 23); /* rebias 127 -> 15 */
    r += 0xFFFu + ((r >> 13) & 1u); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | (r >> 13));
}

/* float32 -> BF16 bits. */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* float64 -> FP16 (p = 10, bias 15) or BF16 (p = 7, bias 127) bits, one rounding. */
static uint16_t f64_to_half(double x, acc_half_format fmt) {
    const int p = fmt == ACC_HALF_BF16 ? 7 : 10, bias = fmt == ACC_HALF_BF16 ? 127 : 15;
    const uint32_t sign = signbit(x) ? 0x8000u : 0u, inf = (uint32_t)(2 * bias + 1) << p;
    if (isnan(x)) return (uint16_t)(sign | inf | (1u << (p - 1)));
    const double a = fabs(x);
    if (isinf(a)) return (uint16_t)(sign | inf);
    if (a == 0.0) return (uint16_t)sign;
    int E;
    (void)frexp(a, &E);
    int e = E - 1; /* a in [2^e, 2^(e+1)) */
    if (e < 1 - bias) /* subnormal: units of 2^(1 - bias - p); the result may be the smallest normal */
        return (uint16_t)(sign | (uint32_t)nearbyint(ldexp(a, p + bias - 1)));
    double q = nearbyint(ldexp(a, p - e)); /* in [2^p, 2^(p+1)] */
    if (q == ldexp(1.0, p + 1)) {
        e++;
        q = ldexp(1.0, p);
    }
    if (e > bias) return (uint16_t)(sign | inf);
    return (uint16_t)(sign | ((uint32_t)(e + bias) << p) | ((uint32_t)q - (1u << p)));
}

static inline float half_to_f32(uint16_t h, acc_half_format fmt) {
    uint32_t u;
    if (fmt == ACC_HALF_BF16) {
        u = (uint32_t)h << 16;
    } else {
        const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
        if (e == 0x1F) {
            u = sign | 0x7F800000u | (mant << 13);
        } else if (e == 0) { /* zero or subnormal: mant * 2^-24, exact in float32 */
            float f = (float)mant * 5.9604644775390625e-8f;
            memcpy(&u, &f, 4);
            u |= sign;
        } else {
            u = sign | ((e + 112u) << 23) | (mant << 13);
        }
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Out of range: a finite x that rounded to inf, or a nonzero x that rounded to zero. */
static inline int out_of_range(double x, uint16_t h, acc_half_format fmt) {
    const uint16_t mag = h & 0x7FFFu, inf = fmt == ACC_HALF_BF16 ? 0x7F80u : 0x7C00u;
    return (isfinite(x) && mag == inf) || (x != 0.0 && mag == 0);
}

acc_status acc_half_round(const void *src, acc_dtype src_dtype, int64_t count, acc_half_format fmt,
                          uint16_t *dst, int64_t *first_bad) {
    if (count < 0 || (count > 0 && (!src || !dst)) || !acc_dtype_valid(src_dtype) ||
        (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16))
        return ACC_ERR_INVALID_ARGUMENT;
    int64_t bad = INT64_MAX;
#pragma omp parallel for num_threads(acc_threads_for(count)) reduction(min : bad) schedule(static)
    for (int64_t i = 0; i < count; i++) {
        double x;
        uint16_t h;
        if (src_dtype == ACC_FLOAT64) {
            x = ((const double *)src)[i];
            h = f64_to_half(x, fmt);
        } else {
            const float f = ((const float *)src)[i];
            x = f;
            h = fmt == ACC_HALF_BF16 ? f32_to_bf16(f) : f32_to_f16(f);
        }
        dst[i] = h;
        if (first_bad && out_of_range(x, h, fmt) && i < bad) bad = i;
    }
    if (first_bad) *first_bad = bad == INT64_MAX ? -1 : bad;
    return ACC_SUCCESS;
}

acc_status acc_half_widen(const uint16_t *src, int64_t count, acc_half_format fmt, float *dst) {
    if (count < 0 || (count > 0 && (!src || !dst)) || (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16))
        return ACC_ERR_INVALID_ARGUMENT;
#pragma omp parallel for num_threads(acc_threads_for(count)) schedule(static)
    for (int64_t i = 0; i < count; i++)
        dst[i] = half_to_f32(src[i], fmt);
    return ACC_SUCCESS;
}

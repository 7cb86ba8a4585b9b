/*
 * spgemm_tile.h -- bit operations on 8x8 tile masks, shared by the GPU SpGEMM (spgemm.cu) and
 * its host code.  A mask is a uint64 whose bit r*8 + c is set where (row r, column c) of the
 * tile holds a stored entry: byte r is row r, and bit c of every byte is column c.
 * (tests/spgemm_reference.py mirrors these in NumPy and checks them against brute force.)
 */
#ifndef ACC_SPGEMM_TILE_H
#define ACC_SPGEMM_TILE_H

#include <stdint.h>

#ifdef __CUDACC__
#define ACC_TILE_FN __host__ __device__ __forceinline__
#else
#define ACC_TILE_FN static inline
#endif

#define ACC_TILE_LOW_BITS 0x0101010101010101ull /* bit 0 of every byte */

/* Bit c set where column c holds an entry in some row (the OR of the 8 row bytes). */
ACC_TILE_FN uint32_t acc_tile_cols(uint64_t m) {
    m |= m >> 32;
    m |= m >> 16;
    m |= m >> 8;
    return (uint32_t)(m & 0xFF);
}

/* Bit r set where row r holds an entry.  The OR-folds bring every bit of byte r down to bit
 * 8r; the multiply then gathers bits 8r into bits 56 + r without carries (the partial products
 * land on distinct positions). */
ACC_TILE_FN uint32_t acc_tile_rows(uint64_t m) {
    m |= m >> 4;
    m |= m >> 2;
    m |= m >> 1;
    m &= ACC_TILE_LOW_BITS;
    return (uint32_t)((m * 0x0102040810204080ull) >> 56);
}

/* Column c of the tile as a byte: bit k set where (row k, column c) holds an entry. */
ACC_TILE_FN uint32_t acc_tile_column(uint64_t m, int c) {
    return (uint32_t)((((m >> c) & ACC_TILE_LOW_BITS) * 0x0102040810204080ull) >> 56);
}

/* The boolean product of two tiles' patterns: bit (r, c) set where some k has A(r, k) and
 * B(k, c).  For each k: the rows of A holding column k, spread to whole bytes, AND row k of B
 * copied into every byte. */
ACC_TILE_FN uint64_t acc_tile_product(uint64_t a, uint64_t b) {
    uint64_t c = 0;
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int k = 0; k < 8; k++) {
        const uint64_t rows = ((a >> k) & ACC_TILE_LOW_BITS) * 0xFFull;
        const uint64_t brow = (b >> (8 * k)) & 0xFFull;
        c |= rows & (brow * ACC_TILE_LOW_BITS);
    }
    return c;
}

/* Scalar products of a tile pair: sum over k of (entries of A's column k) x (entries of B's
 * row k). */
ACC_TILE_FN int acc_tile_pair_products(uint64_t a, uint64_t b) {
    int p = 0;
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int k = 0; k < 8; k++) {
#ifdef __CUDA_ARCH__
        p += __popcll((a >> k) & ACC_TILE_LOW_BITS) * __popc((uint32_t)(b >> (8 * k)) & 0xFFu);
#else
        p += __builtin_popcountll((a >> k) & ACC_TILE_LOW_BITS) *
             __builtin_popcount((uint32_t)(b >> (8 * k)) & 0xFFu);
#endif
    }
    return p;
}

#endif /* ACC_SPGEMM_TILE_H */

/* dequant.h - weight rows to fp32 (internal).
 *
 * Block layouts (little-endian, as ggml stores them):
 *   Q4_0: 32 values, fp16 d, 16 bytes of nibbles: x = d * (q - 8)
 *   Q4_1: 32 values, fp16 d, fp16 m, 16 bytes of nibbles: x = d * q + m
 *   Q8_0: 32 values, fp16 d, 32 int8: x = d * q
 * Nibble j of byte i (i in 0..15): low nibble -> value i, high -> value i+16.
 *   Q5_0, Q5_1 (32 values) and the k-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 *   (super-blocks of 256 values): see dequant_k.h. */
#ifndef HSQ_DEQUANT_H
#define HSQ_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Dequantizes n values from src; n must be a multiple of the type's block
 * size (ggml_traits(type)->block_elems: 32 for Q4_0..Q8_0, 256 for the
 * k-quants, which have no partial blocks). Returns 0, or -1 for a type hsq
 * cannot dequantize; for Q5_0, Q5_1 and the k-quants also -1, with nothing
 * written, when n is negative or not a multiple of the block size. */
int dequant_row(uint32_t type, const void *src, float *dst, int64_t n);
/* 1 if dequant_row supports the type. */
int dequant_supported(uint32_t type);

#endif

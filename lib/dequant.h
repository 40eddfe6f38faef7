/* dequant.h - weight rows to fp32 (internal).
 *
 * Block layouts (little-endian, as ggml stores them):
 *   Q4_0: 32 values, fp16 d, 16 bytes of nibbles: x = d * (q - 8)
 *   Q4_1: 32 values, fp16 d, fp16 m, 16 bytes of nibbles: x = d * q + m
 *   Q8_0: 32 values, fp16 d, 32 int8: x = d * q
 * Nibble j of byte i (i in 0..15): low nibble -> value i, high -> value i+16. */
#ifndef HSQ_DEQUANT_H
#define HSQ_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Dequantizes n values (a multiple of the type's block size) from src.
 * Returns 0, or -1 for a type hsq cannot dequantize. */
int dequant_row(uint32_t type, const void *src, float *dst, int64_t n);
/* 1 if dequant_row supports the type. */
int dequant_supported(uint32_t type);

#endif

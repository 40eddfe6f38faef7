/* dequant_k.h - dequantizers for ggml's k-quants (Q2_K..Q6_K, super-blocks
 * of QK_K = 256 values) and for Q5_0/Q5_1 (internal; called by dequant_row).
 *
 * Block layouts (little-endian, as ggml's block_* structs store them):
 *   Q2_K  84 B: scales[16] (lo nibble: scale, hi: min), qs[64] (2-bit),
 *               fp16 d, fp16 dmin.   x = d*sc*q - dmin*m
 *   Q3_K 110 B: hmask[32] (high bits), qs[64] (low 2 bits), scales[12]
 *               (16 6-bit scales, biased by 32), fp16 d.
 *               x = d*(sc-32)*(q - (high bit ? 0 : 4))
 *   Q4_K 144 B: fp16 d, fp16 dmin, scales[12] (8 6-bit scales and 8 6-bit
 *               mins), qs[128] (4-bit).   x = d*sc*q - dmin*m
 *   Q5_K 176 B: fp16 d, fp16 dmin, scales[12], qh[32], qs[128].  as Q4_K,
 *               q = nibble | high bit << 4
 *   Q6_K 210 B: ql[128], qh[64] (2 high bits), int8 scales[16], fp16 d.
 *               x = d*sc*(q - 32)
 *   Q5_0  22 B: fp16 d, u32 qh, qs[16]: x = d*(q - 16)
 *   Q5_1  24 B: fp16 d, fp16 m, u32 qh, qs[16]: x = d*q + m
 * The value order within a block is ggml's (dequantize_row_* in
 * ggml-quants.c).
 *
 * Each function dequantizes n values from src into dst and returns 0, or -1
 * (writing nothing) when n is negative or not a multiple of the block's
 * value count (256 for the k-quants, 32 for Q5_0/Q5_1). */
#ifndef HSQ_DEQUANT_K_H
#define HSQ_DEQUANT_K_H

#include <stdint.h>

int dequant_q2_k(const uint8_t *src, float *dst, int64_t n);
int dequant_q3_k(const uint8_t *src, float *dst, int64_t n);
int dequant_q4_k(const uint8_t *src, float *dst, int64_t n);
int dequant_q5_k(const uint8_t *src, float *dst, int64_t n);
int dequant_q6_k(const uint8_t *src, float *dst, int64_t n);
int dequant_q5_0(const uint8_t *src, float *dst, int64_t n);
int dequant_q5_1(const uint8_t *src, float *dst, int64_t n);

#endif

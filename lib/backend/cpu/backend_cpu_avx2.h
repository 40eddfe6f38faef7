/* backend_cpu_avx2.h - the fused weight kernels, the 2 x 2 dot-product
 * tiles (the f32 matmul, and attention scores over the fp16 cache) and the
 * attention value sums
 * for AVX2 machines without AVX-512 (internal; included by backend_cpu.c
 * only when __AVX2__ && !__AVX512F__).
 *
 * The portable kernels hold a 16-lane accumulator per output; with sixteen
 * 8-lane registers a 4 x 4 tile of them is 32 registers and gcc spilled it,
 * and passed decoded blocks through memory a lane at a time: prefill ran
 * 12-18x slower than on an AVX-512 machine. Here every 16-lane accumulator
 * is an explicit pair of 8-lane registers (lanes 0-7, 8-15) and tiles are
 * sized to fit. Each output is still summed in the dot_f32 order: lane l
 * accumulates the products k = l, l + 16, l + 32, ... in that order, then
 * hsum16's tree; so decode and prefill, and every tile shape, agree bit for
 * bit. Products and sums are written as operators, not FMA intrinsics, so
 * that gcc contracts them (or not, at -O1) exactly as it does the portable
 * kernels they must equal. */
#ifndef HSQ_BACKEND_CPU_AVX2_H
#define HSQ_BACKEND_CPU_AVX2_H

#include <immintrin.h>

#include "common/vec_f16.h"
#include "common/vec_f32.h"
#include "common/vec_f32_avx2.h"
#include "model/quant_blocks.h"

typedef void (*block_decoder8)(const uint8_t *b, __m256 v[4]);

/* y[t][r] for R rows of blocks and T tokens (compile-time constants after
 * inlining). One row's block is decoded into 4 registers and used at once
 * by every token, so R x T pairs of accumulators plus 4 stay in registers
 * for R * T <= 5. */
static inline __attribute__((always_inline)) void
fused_tile8(block_decoder8 decode, size_t block_bytes, const uint8_t *w, size_t row_bytes, int R, const float *x,
	    int ldx, int T, int n, float *y, int ldy)
{
	__m256 acc[4][4][2];
	for (int t = 0; t < T; t++)
		for (int r = 0; r < R; r++)
			acc[t][r][0] = acc[t][r][1] = _mm256_setzero_ps();
	for (int b = 0; b < n / 32; b++) {
#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			__m256 v[4];
			decode(w + (size_t)r * row_bytes + (size_t)b * block_bytes, v);
#pragma GCC unroll 4
			for (int t = 0; t < T; t++) {
				const float *xb = x + (size_t)t * ldx + 32 * b;
				/* values 0-15 against x[0..15] (chunk 32b), then
				 * 16-31 against x[16..31] (chunk 32b + 16) */
				acc[t][r][0] += v[0] * _mm256_loadu_ps(xb);
				acc[t][r][1] += v[1] * _mm256_loadu_ps(xb + 8);
				acc[t][r][0] += v[2] * _mm256_loadu_ps(xb + 16);
				acc[t][r][1] += v[3] * _mm256_loadu_ps(xb + 24);
			}
		}
	}
	for (int t = 0; t < T; t++)
		for (int r = 0; r < R; r++)
			y[(size_t)t * ldy + r] = hsum16_pair(acc[t][r][0], acc[t][r][1]) + 0.0f;
}

/* Rows r0, r0 + 1 of k (ldk apart; f32, or fp16 when half, a constant
 * after inlining) against vectors q[i0], q[i0 + 1]: s[i][r] = k_r . q_i in
 * the dot_f32 order of the (widened) row. */
static inline __attribute__((always_inline)) void tile_2x2q8_rows(const void *k, const int half, int ldk,
								  const float *const *q, int n, float *const *s,
								  int r0, int i0)
{
	const float *kf = k;
	const uint16_t *kh = k;
	__m256 acc[2][2][2];
	for (int i = 0; i < 2; i++)
		for (int r = 0; r < 2; r++)
			acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
	int d = 0;
	for (; d + 16 <= n; d += 16)
#pragma GCC unroll 2
		for (int r = 0; r < 2; r++) {
			size_t at = (size_t)(r0 + r) * ldk + d;
			__m256 k0 = half ? load8_h(kh + at) : _mm256_loadu_ps(kf + at);
			__m256 k1 = half ? load8_h(kh + at + 8) : _mm256_loadu_ps(kf + at + 8);
#pragma GCC unroll 2
			for (int i = 0; i < 2; i++) {
				acc[i][r][0] += k0 * _mm256_loadu_ps(q[i0 + i] + d);
				acc[i][r][1] += k1 * _mm256_loadu_ps(q[i0 + i] + d + 8);
			}
		}
	for (int i = 0; i < 2; i++)
		for (int r = 0; r < 2; r++)
			s[i0 + i][r0 + r] = hsum16_pair(acc[i][r][0], acc[i][r][1]) +
					    (half ? tail_dot_h(q[i0 + i], kh + (size_t)(r0 + r) * ldk, d, n)
						  : tail_dot(kf + (size_t)(r0 + r) * ldk, q[i0 + i], d, n));
}

/* f32 rows: a quarter of tile_4x4 (weight rows x tokens). */
static inline void tile_2x2q8(const float *k, int ldk, const float *const *q, int n, float *const *s, int r0,
			      int i0)
{
	tile_2x2q8_rows(k, 0, ldk, q, n, s, r0, i0);
}

/* fp16 keys (the KV cache): a quarter of tile_4x4q (keys x queries),
 * s[i][r] = dot_h(q_i, k_r). */
static inline void tile_2x2q8h(const uint16_t *k, int ldk, const float *const *q, int n, float *const *s, int r0,
			       int i0)
{
	tile_2x2q8_rows(k, 1, ldk, q, n, s, r0, i0);
}

/* attn_values' 16-lane blocks (d0 = 0, 16, ... below hd) for Q queries:
 * out[i][d0..d0+15] += sum over p0 <= p < min(p1, n[i]) of w[i][p] * v_p
 * (= instead of += when first), in position order, each block a pair of
 * 8-lane accumulators per query. */
static inline __attribute__((always_inline)) int attn_values8(const uint16_t *vb, size_t kvw, int hd,
							      float *const *w, const int *n, float *const *out,
							      const int Q, int n_min, int n_max, int p0, int p1,
							      int first)
{
	int lo = n_min < p1 ? n_min : p1, hi = n_max < p1 ? n_max : p1;
	int d0 = 0;
	for (; d0 + 16 <= hd; d0 += 16) {
		__m256 acc[4][2];
		for (int i = 0; i < Q; i++) {
			acc[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out[i] + d0);
			acc[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out[i] + d0 + 8);
		}
		int p = p0;
		for (; p < lo; p++) {
			const uint16_t *row = vb + (size_t)p * kvw + d0;
			__m256 v0 = load8_h(row), v1 = load8_h(row + 8);
#pragma GCC unroll 4
			for (int i = 0; i < Q; i++) {
				__m256 wi = _mm256_set1_ps(w[i][p]);
				acc[i][0] += wi * v0;
				acc[i][1] += wi * v1;
			}
		}
		for (; p < hi; p++) {
			const uint16_t *row = vb + (size_t)p * kvw + d0;
			__m256 v0 = load8_h(row), v1 = load8_h(row + 8);
#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				if (p < n[i]) {
					__m256 wi = _mm256_set1_ps(w[i][p]);
					acc[i][0] += wi * v0;
					acc[i][1] += wi * v1;
				}
		}
		for (int i = 0; i < Q; i++) {
			_mm256_storeu_ps(out[i] + d0, acc[i][0]);
			_mm256_storeu_ps(out[i] + d0 + 8, acc[i][1]);
		}
	}
	return d0;
}

#endif

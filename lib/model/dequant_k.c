/* dequant_k.c - CPU dequantization of ggml's k-quants (Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K) and of Q5_0/Q5_1. Layouts and value order: dequant_k.h.
 *
 * Like dequant.c, the unpacking is written with GCC vector types, 16 values
 * at a time (every run of 16 consecutive values shares one scale in all
 * these formats), so the compiler emits SIMD code for the target.
 *
 * Exactness: every product d*sc*q below is exact in float (fp16 d has 11
 * significant bits; the widest case, Q6_K, adds 7 for |sc| <= 127 and 5 for
 * |q - 32| <= 31: 23 < 24), so each value is the correctly rounded result
 * of one subtraction (or none): the same bits as ggml and gguf-py, in any
 * association order and whether or not the compiler fuses the multiply-add. */
#include <string.h>

#include "common/fp16.h"
#include "model/dequant_k.h"

#if defined(__AVX2__) && !defined(__AVX512F__)
#include <immintrin.h>
#endif

#define QK_K 256

typedef uint8_t vu8 __attribute__((vector_size(16)));
typedef int8_t vi8 __attribute__((vector_size(16)));
typedef int32_t vi32 __attribute__((vector_size(64)));
typedef float vf __attribute__((vector_size(64)));

static float f16(const uint8_t *p)
{
	return hsq_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static vu8 ld(const uint8_t *p)
{
	vu8 v;
	memcpy(&v, p, 16);
	return v;
}

/* y[0..15] = d * q - m. Widened through int32 (a direct 8-bit -> float
 * conversion is scalarised); no 64-byte vector crosses a call, so builds
 * without AVX-512 raise no -Wpsabi notes. */
#if defined(__AVX2__) && !defined(__AVX512F__)
/* AVX2 without AVX-512: gcc widens 16 bytes to 16 ints a lane at a time
 * there (extract, insert), which made these the largest part of a gemma
 * decode; two 8-lane widenings are one instruction each. Same values. */
static void put_dm(float *y, vu8 q, float d, float m)
{
	__m128i x = (__m128i)q;
	__m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
	_mm256_storeu_ps(y, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x)) * vd - vm);
	_mm256_storeu_ps(y + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8))) * vd - vm);
}

static void put_d(float *y, vi8 q, float d)
{
	__m128i x = (__m128i)q;
	__m256 vd = _mm256_set1_ps(d);
	_mm256_storeu_ps(y, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)) * vd);
	_mm256_storeu_ps(y + 8, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))) * vd);
}
#else
#ifdef __AVX512F__
/* gcc 12 widens a signed byte vector a byte at a time through general
 * registers here too; the intrinsic is one vpmovsxbd. Same values. It
 * made no measurable difference to this dequantize-to-scratch path
 * (bench/matmul, Q5_0 one token: 8.1-8.5 against 8.5 GFLOP/s): the
 * fused kernels, not this, are what sped up Q5_0 and Q8_0. */
#include <immintrin.h>
static void put_d(float *y, vi8 q, float d)
{
	__m128i x;
	memcpy(&x, &q, sizeof x);
	_mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)), _mm512_set1_ps(d)));
}
#else
/* y[0..15] = d * q */
static void put_d(float *y, vi8 q, float d)
{
	vf v = __builtin_convertvector(__builtin_convertvector(q, vi32), vf) * d;
	memcpy(y, &v, sizeof v);
}
#endif

static void put_dm(float *y, vu8 q, float d, float m)
{
	vf v = __builtin_convertvector(__builtin_convertvector(q, vi32), vf) * d - m;
	memcpy(y, &v, sizeof v);
}
#endif

static int check_n(int64_t n, int64_t block)
{
	return n >= 0 && n % block == 0;
}

int dequant_q2_k(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, QK_K))
		return -1;
	for (int64_t i = 0; i < n; i += QK_K, b += 84) {
		const uint8_t *sc = b, *qs = b + 16;
		float d = f16(b + 80), dmin = f16(b + 82);
		for (int h = 0; h < 2; h++) {          /* 128-value halves */
			vu8 q0 = ld(qs + 32 * h), q1 = ld(qs + 32 * h + 16);
			for (int j = 0; j < 4; j++) {  /* 2-bit planes */
				const uint8_t s0 = sc[8 * h + 2 * j], s1 = sc[8 * h + 2 * j + 1];
				put_dm(y, (q0 >> (2 * j)) & 3, d * (s0 & 15), dmin * (s0 >> 4));
				put_dm(y + 16, (q1 >> (2 * j)) & 3, d * (s1 & 15), dmin * (s1 >> 4));
				y += 32;
			}
		}
	}
	return 0;
}

int dequant_q3_k(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, QK_K))
		return -1;
	for (int64_t i = 0; i < n; i += QK_K, b += 110) {
		const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
		float d = f16(b + 108);
		float dl[16];
		for (int j = 0; j < 16; j++) {
			int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
			int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
			dl[j] = d * (float)((lo | hi << 4) - 32);
		}
		vu8 h0 = ld(hm), h1 = ld(hm + 16);
		for (int h = 0; h < 2; h++) {
			vu8 q0 = ld(qs + 32 * h), q1 = ld(qs + 32 * h + 16);
			for (int j = 0; j < 4; j++) {
				int bit = 4 * h + j;
				/* q - 4 where the high bit is clear */
				vi8 a = (vi8)((q0 >> (2 * j)) & 3) - (vi8)((~(h0 >> bit) & 1) << 2);
				vi8 c = (vi8)((q1 >> (2 * j)) & 3) - (vi8)((~(h1 >> bit) & 1) << 2);
				put_d(y, a, dl[8 * h + 2 * j]);
				put_d(y + 16, c, dl[8 * h + 2 * j + 1]);
				y += 32;
			}
		}
	}
	return 0;
}

/* The 8 6-bit scales and mins of Q4_K/Q5_K (ggml's get_scale_min_k4). */
static void scale_min_k4(const uint8_t *s, uint8_t sc[8], uint8_t mn[8])
{
	for (int j = 0; j < 4; j++) {
		sc[j] = s[j] & 63;
		mn[j] = s[j + 4] & 63;
		sc[j + 4] = (uint8_t)((s[j + 8] & 15) | (s[j] >> 6) << 4);
		mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | (s[j + 4] >> 6) << 4);
	}
}

int dequant_q4_k(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, QK_K))
		return -1;
	for (int64_t i = 0; i < n; i += QK_K, b += 144) {
		float d = f16(b), dmin = f16(b + 2);
		uint8_t sc[8], mn[8];
		scale_min_k4(b + 4, sc, mn);
		const uint8_t *qs = b + 16;
		for (int c = 0; c < 4; c++, qs += 32, y += 64) {
			float d0 = d * sc[2 * c], m0 = dmin * mn[2 * c];
			float d1 = d * sc[2 * c + 1], m1 = dmin * mn[2 * c + 1];
			vu8 q0 = ld(qs), q1 = ld(qs + 16);
			put_dm(y, q0 & 15, d0, m0);
			put_dm(y + 16, q1 & 15, d0, m0);
			put_dm(y + 32, q0 >> 4, d1, m1);
			put_dm(y + 48, q1 >> 4, d1, m1);
		}
	}
	return 0;
}

int dequant_q5_k(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, QK_K))
		return -1;
	for (int64_t i = 0; i < n; i += QK_K, b += 176) {
		float d = f16(b), dmin = f16(b + 2);
		uint8_t sc[8], mn[8];
		scale_min_k4(b + 4, sc, mn);
		vu8 h0 = ld(b + 16), h1 = ld(b + 32);
		const uint8_t *qs = b + 48;
		/* chunk c takes bits 2c (low nibbles) and 2c+1 (high) of qh */
		for (int c = 0; c < 4; c++, qs += 32, y += 64, h0 >>= 2, h1 >>= 2) {
			float d0 = d * sc[2 * c], m0 = dmin * mn[2 * c];
			float d1 = d * sc[2 * c + 1], m1 = dmin * mn[2 * c + 1];
			vu8 q0 = ld(qs), q1 = ld(qs + 16);
			put_dm(y, (q0 & 15) | (h0 & 1) << 4, d0, m0);
			put_dm(y + 16, (q1 & 15) | (h1 & 1) << 4, d0, m0);
			put_dm(y + 32, (q0 >> 4) | (h0 & 2) << 3, d1, m1);
			put_dm(y + 48, (q1 >> 4) | (h1 & 2) << 3, d1, m1);
		}
	}
	return 0;
}

int dequant_q6_k(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, QK_K))
		return -1;
	for (int64_t i = 0; i < n; i += QK_K, b += 210) {
		const uint8_t *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = f16(b + 208);
		for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128) {
			for (int l = 0; l < 32; l += 16) {
				int is = l / 16;
				vu8 a = ld(ql + l), c = ld(ql + l + 32), hh = ld(qh + l);
				put_d(y + l, (vi8)((a & 15) | (hh & 3) << 4) - 32, d * sc[is]);
				put_d(y + l + 32, (vi8)((c & 15) | ((hh >> 2) & 3) << 4) - 32, d * sc[is + 2]);
				put_d(y + l + 64, (vi8)((a >> 4) | ((hh >> 4) & 3) << 4) - 32, d * sc[is + 4]);
				put_d(y + l + 96, (vi8)((c >> 4) | (hh >> 6) << 4) - 32, d * sc[is + 6]);
			}
		}
	}
	return 0;
}

/* The fifth bits of Q5_0/Q5_1 as 0 or 16 per value: bit i of the u32 qh
 * (little-endian) belongs to value i. */
static void q5_high(const uint8_t *qh, vu8 *lo, vu8 *hi)
{
	const vu8 bit = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
	vu8 a = { qh[0], qh[0], qh[0], qh[0], qh[0], qh[0], qh[0], qh[0],
		  qh[1], qh[1], qh[1], qh[1], qh[1], qh[1], qh[1], qh[1] };
	vu8 c = { qh[2], qh[2], qh[2], qh[2], qh[2], qh[2], qh[2], qh[2],
		  qh[3], qh[3], qh[3], qh[3], qh[3], qh[3], qh[3], qh[3] };
	*lo = (vu8)((a & bit) != 0) & 16;
	*hi = (vu8)((c & bit) != 0) & 16;
}

int dequant_q5_0(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, 32))
		return -1;
	for (int64_t i = 0; i < n; i += 32, b += 22, y += 32) {
		float d = f16(b);
		vu8 hl, hh, q = ld(b + 6);
		q5_high(b + 2, &hl, &hh);
		put_d(y, (vi8)((q & 15) | hl) - 16, d);
		put_d(y + 16, (vi8)((q >> 4) | hh) - 16, d);
	}
	return 0;
}

int dequant_q5_1(const uint8_t *b, float *y, int64_t n)
{
	if (!check_n(n, 32))
		return -1;
	for (int64_t i = 0; i < n; i += 32, b += 24, y += 32) {
		float d = f16(b), m = f16(b + 2);
		vu8 hl, hh, q = ld(b + 8);
		q5_high(b + 4, &hl, &hh);
		/* d*q + m, as put_dm's d*q - m */
		put_dm(y, (q & 15) | hl, d, -m);
		put_dm(y + 16, (q >> 4) | hh, d, -m);
	}
	return 0;
}

/* quant_blocks.h - decoding one 32-value block of Q4_0 / Q4_1 / Q5_0 / Q8_0
 * into two 16-lane float vectors (internal).
 *
 * dequant.c (rows to memory) and the fused matmul kernels in backend_cpu.c
 * (blocks straight into registers) both decode through these functions, so
 * a weight has the same float value on every path; on AVX2 without AVX-512
 * through the 8-lane qb8_* forms, which qb_* are built from there. Layouts
 * in dequant.h. */
#ifndef HSQ_QUANT_BLOCKS_H
#define HSQ_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "common/fp16.h"
#include "common/vec_f32.h"

typedef uint8_t hsq_vu8x16 __attribute__((vector_size(16)));
typedef int8_t hsq_vi8x16 __attribute__((vector_size(16)));
typedef int32_t hsq_vi32x16 __attribute__((vector_size(64)));

static inline float qb_f16(const uint8_t *p)
{
	return hsq_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q5_0_BYTES 22
#define Q8_0_BYTES 34

/* Q5_0's u32 of fifth bits, little-endian: bit i belongs to value i. */
static inline uint32_t qb_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Each function decodes values 0..15 of the block into *lo and 16..31 into
 * *hi. Integers are widened to int32 before the conversion to float: a
 * direct u8 -> float conversion compiles to per-lane scalar code. */
#if defined(__AVX512F__) || !defined(__AVX2__)
static inline hsq_vf16 qb_u8_to_f(hsq_vu8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}

#ifdef __AVX512F__
#include <immintrin.h>
/* gcc 12 widens a signed 16-byte vector a byte at a time through general
 * registers (Q8_0 matmul at 5 GFLOP/s, measured with bench/matmul); the
 * intrinsic is one vpmovsxbd. Same values. */
static inline hsq_vf16 qb_i8_to_f(hsq_vi8x16 q)
{
	__m128i v;
	memcpy(&v, &q, sizeof v);
	__m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
	hsq_vf16 r;
	memcpy(&r, &f, sizeof r);
	return r;
}
#else
static inline hsq_vf16 qb_i8_to_f(hsq_vi8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}
#endif

static inline void qb_q4_0(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b);
	hsq_vu8x16 q;
	memcpy(&q, b + 2, 16);
	*lo = qb_i8_to_f((hsq_vi8x16)(q & 0x0f) - 8) * d;
	*hi = qb_i8_to_f((hsq_vi8x16)(q >> 4) - 8) * d;
}

static inline void qb_q4_1(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b), m = qb_f16(b + 2);
	hsq_vu8x16 q;
	memcpy(&q, b + 4, 16);
	*lo = qb_u8_to_f(q & 0x0f) * d + m;
	*hi = qb_u8_to_f(q >> 4) * d + m;
}

/* Q5_0: x = d * (q - 16), q = low nibble | fifth bit << 4 (values 0-15
 * the low nibbles of qs, 16-31 the high ones). The products are exact
 * (11-bit d times |q - 16| <= 16), so this equals dequant_k.c's Q5_0 bit
 * for bit. */
static inline void qb_q5_0(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b);
	uint32_t qh = qb_u32(b + 2);
#ifdef __AVX512F__ /* the fifth bits are lane masks: one masked add each */
	__m128i q, mask = _mm_set1_epi8(0x0f);
	memcpy(&q, b + 6, 16);
	const __m512i sixteen = _mm512_set1_epi32(16);
	__m512i il = _mm512_cvtepu8_epi32(_mm_and_si128(q, mask));
	__m512i ih = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
	il = _mm512_sub_epi32(_mm512_mask_add_epi32(il, (__mmask16)(qh & 0xffff), il, sixteen), sixteen);
	ih = _mm512_sub_epi32(_mm512_mask_add_epi32(ih, (__mmask16)(qh >> 16), ih, sixteen), sixteen);
	__m512 fl = _mm512_mul_ps(_mm512_cvtepi32_ps(il), _mm512_set1_ps(d));
	__m512 fh = _mm512_mul_ps(_mm512_cvtepi32_ps(ih), _mm512_set1_ps(d));
	memcpy(lo, &fl, sizeof *lo);
	memcpy(hi, &fh, sizeof *hi);
#else
	const hsq_vi32x16 lane = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
	hsq_vi32x16 hl = (((hsq_vi32x16){ 0 } + (int32_t)(qh & 0xffff)) >> lane & 1) << 4;
	hsq_vi32x16 hh = (((hsq_vi32x16){ 0 } + (int32_t)(qh >> 16)) >> lane & 1) << 4;
	hsq_vu8x16 q;
	memcpy(&q, b + 6, 16);
	*lo = __builtin_convertvector((__builtin_convertvector(q & 0x0f, hsq_vi32x16) | hl) - 16, hsq_vf16) * d;
	*hi = __builtin_convertvector((__builtin_convertvector(q >> 4, hsq_vi32x16) | hh) - 16, hsq_vf16) * d;
#endif
}

static inline void qb_q8_0(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b);
	hsq_vi8x16 q0, q1;
	memcpy(&q0, b + 2, 16);
	memcpy(&q1, b + 18, 16);
	*lo = qb_i8_to_f(q0) * d;
	*hi = qb_i8_to_f(q1) * d;
}
#else
/* AVX2 without AVX-512: a 16-lane vector is two 8-lane registers, and gcc
 * lowers 16-lane widening, and vectors passed by pointer, through memory a
 * lane at a time (prefill ran 12-18x slower than on an AVX-512 machine,
 * measured on an AVX2 EPYC). So a block is decoded into four 8-lane
 * registers with intrinsics (qb8_*: values 0-7, 8-15, 16-23, 24-31), which
 * the fused kernels use as they are (backend_cpu_avx2.h) and qb_* joins
 * into two 16-lane vectors for dequant.c: one arithmetic for both. */
#include <immintrin.h>

static inline __m256 qb8_u8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)); }
static inline __m256 qb8_i8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }

static inline void qb8_nibbles(const uint8_t *p, __m128i *low, __m128i *high)
{
	__m128i q = _mm_loadu_si128((const __m128i *)p), mask = _mm_set1_epi8(0x0f);
	*low = _mm_and_si128(q, mask);
	*high = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
}

static inline void qb8_q4_0(const uint8_t *b, __m256 v[4])
{
	__m256 d = _mm256_set1_ps(qb_f16(b));
	__m128i l, h, eight = _mm_set1_epi8(8);
	qb8_nibbles(b + 2, &l, &h);
	l = _mm_sub_epi8(l, eight);
	h = _mm_sub_epi8(h, eight);
	v[0] = qb8_i8(l) * d;
	v[1] = qb8_i8(_mm_srli_si128(l, 8)) * d;
	v[2] = qb8_i8(h) * d;
	v[3] = qb8_i8(_mm_srli_si128(h, 8)) * d;
}

static inline void qb8_q4_1(const uint8_t *b, __m256 v[4])
{
	__m256 d = _mm256_set1_ps(qb_f16(b)), m = _mm256_set1_ps(qb_f16(b + 2));
	__m128i l, h;
	qb8_nibbles(b + 4, &l, &h);
	v[0] = qb8_u8(l) * d + m;
	v[1] = qb8_u8(_mm_srli_si128(l, 8)) * d + m;
	v[2] = qb8_u8(h) * d + m;
	v[3] = qb8_u8(_mm_srli_si128(h, 8)) * d + m;
}

/* Q5_0 (see qb_q5_0): the fifth bits of values 8i..8i+7 are bits
 * 8i..8i+7 of qh, moved to bit 4 of each 32-bit lane by a variable shift. */
static inline void qb8_q5_0(const uint8_t *b, __m256 v[4])
{
	__m256 d = _mm256_set1_ps(qb_f16(b));
	uint32_t qh = qb_u32(b + 2);
	__m128i l, h;
	qb8_nibbles(b + 6, &l, &h);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1),
		      sixteen = _mm256_set1_epi32(16);
	__m128i nib[4] = { l, _mm_srli_si128(l, 8), h, _mm_srli_si128(h, 8) };
	for (int i = 0; i < 4; i++) {
		__m256i bit = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(qh >> 8 * i)), lane), one);
		__m256i q = _mm256_or_si256(_mm256_cvtepu8_epi32(nib[i]), _mm256_slli_epi32(bit, 4));
		v[i] = _mm256_cvtepi32_ps(_mm256_sub_epi32(q, sixteen)) * d;
	}
}

static inline void qb8_q8_0(const uint8_t *b, __m256 v[4])
{
	__m256 d = _mm256_set1_ps(qb_f16(b));
	for (int i = 0; i < 4; i++)
		v[i] = qb8_i8(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * i))) * d;
}

static inline void qb8_store(const __m256 v[4], hsq_vf16 *lo, hsq_vf16 *hi)
{
	float f[32];
	for (int i = 0; i < 4; i++)
		_mm256_storeu_ps(f + 8 * i, v[i]);
	memcpy(lo, f, sizeof *lo);
	memcpy(hi, f + 16, sizeof *hi);
}

#define QB_FROM_QB8(name)                                                      \
	static inline void qb_##name(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi) \
	{                                                                      \
		__m256 v[4];                                                   \
		qb8_##name(b, v);                                              \
		qb8_store(v, lo, hi);                                          \
	}
QB_FROM_QB8(q4_0)
QB_FROM_QB8(q4_1)
QB_FROM_QB8(q5_0)
QB_FROM_QB8(q8_0)
#undef QB_FROM_QB8
#endif

#endif

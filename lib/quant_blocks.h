/* quant_blocks.h - decoding one 32-value block of Q4_0 / Q4_1 / Q8_0 into
 * two 16-lane float vectors (internal).
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

#include "fp16.h"

typedef uint8_t hsq_vu8x16 __attribute__((vector_size(16)));
typedef int8_t hsq_vi8x16 __attribute__((vector_size(16)));
typedef int32_t hsq_vi32x16 __attribute__((vector_size(64)));
typedef float hsq_vf16 __attribute__((vector_size(64), aligned(4)));

static inline float qb_f16(const uint8_t *p)
{
	return hsq_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q8_0_BYTES 34

/* Each function decodes values 0..15 of the block into *lo and 16..31 into
 * *hi. Integers are widened to int32 before the conversion to float: a
 * direct u8 -> float conversion compiles to per-lane scalar code. */
#if defined(__AVX512F__) || !defined(__AVX2__)
static inline hsq_vf16 qb_u8_to_f(hsq_vu8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}

static inline hsq_vf16 qb_i8_to_f(hsq_vi8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}

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
QB_FROM_QB8(q8_0)
#undef QB_FROM_QB8
#endif

#endif

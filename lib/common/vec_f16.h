/* vec_f16.h - rows of IEEE half floats: 16 lanes widened to fp32 at a
 * time, and rows converted from fp32 (internal).
 *
 * The tiers keep their decoded working rows (L1, summaries, fetched
 * groups, the tail) as fp16 for the attention to read: a decode step of
 * quant or hsq reads these rows and little else, and at fp32 they were
 * twice the bytes (docs/perf.md). Widening is exact, so a kernel that
 * widens each row and sums in dot_f32's order gives dot_f32 of the
 * widened row, bit for bit; what fp16 changes is the row itself, rounded
 * once to nearest even (a relative error of at most 2^-11, against the
 * 4-bit codes' 2^-4 or so). */
#ifndef HSQ_VEC_F16_H
#define HSQ_VEC_F16_H

#include <stdint.h>
#include <string.h>

#include "common/fp16.h"
#include "common/vec_f32.h"
#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Sixteen halves at p, widened. */
static inline vf16 load16_h(const uint16_t *p)
{
#if defined(__AVX512F__)
	return (vf16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
#elif defined(__F16C__)
	__m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	__m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
	vf16 v;
	memcpy(&v, &lo, sizeof lo);
	memcpy((char *)&v + sizeof lo, &hi, sizeof hi);
	return v;
#else
	vf16 v;
	for (int i = 0; i < 16; i++)
		v[i] = hsq_f16_to_f32(p[i]);
	return v;
#endif
}

/* dst[i] = src[i] rounded to fp16 (nearest even; beyond 65504 infinity)
 * for i < n. The same bits on every path (the instructions round as
 * hsq_f32_to_f16 does). */
static inline void f16_row_from_f32(uint16_t *dst, const float *src, size_t n)
{
	size_t i = 0;
#if defined(__F16C__)
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
	for (; i < n; i++)
		dst[i] = hsq_f32_to_f16(src[i]);
}

/* dst[i] = src[i] widened, i < n. */
static inline void f16_row_to_f32(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = hsq_f16_to_f32(src[i]);
}

/* tail_dot over a row of halves: the scalar end of a dot product. */
static inline float tail_dot_h(const float *a, const uint16_t *b, int from, int n)
{
	float s = 0.0f;
	for (int k = from; k < n; k++)
		s += a[k] * hsq_f16_to_f32(b[k]);
	return s;
}

/* dot_f32(a, b widened, n), bit for bit. */
static inline float dot_h(const float *a, const uint16_t *b, int n)
{
	vf16 acc = { 0 };
	int k = 0;
	for (; k + 16 <= n; k += 16)
		acc += load16(a + k) * load16_h(b + k);
	return hsum16(acc) + tail_dot_h(a, b, k, n);
}

#if defined(__AVX2__)
/* Eight halves widened (AVX2 kernels). */
static inline __m256 load8_h(const uint16_t *p)
{
#if defined(__F16C__)
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#else
	return _mm256_setr_ps(hsq_f16_to_f32(p[0]), hsq_f16_to_f32(p[1]), hsq_f16_to_f32(p[2]), hsq_f16_to_f32(p[3]),
			      hsq_f16_to_f32(p[4]), hsq_f16_to_f32(p[5]), hsq_f16_to_f32(p[6]), hsq_f16_to_f32(p[7]));
#endif
}
#endif

/* y[i] += w * x[i] over halves: axpy_f32 of the widened row. */
static inline void axpy_h(float *y, float w, const uint16_t *x, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		vf16 a = load16(y + i) + w * load16_h(x + i);
		memcpy(y + i, &a, sizeof a);
	}
	for (; i < n; i++)
		y[i] += w * hsq_f16_to_f32(x[i]);
}

#endif

/* vec_f32_avx2.h - dot_f32's reduction for AVX2 kernels that hold a
 * 16-lane accumulator as two 8-lane registers (internal; backend_cpu_avx2.h
 * and tiers_kernels.h, only when __AVX2__ && !__AVX512F__). */
#ifndef HSQ_VEC_F32_AVX2_H
#define HSQ_VEC_F32_AVX2_H

#include <immintrin.h>

/* hsum16 of the 16-lane vector (lo = lanes 0-7, hi = lanes 8-15). */
static inline float hsum16_pair(__m256 lo, __m256 hi)
{
	__m256 a = _mm256_add_ps(lo, hi);
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	float f[4];
	_mm_storeu_ps(f, b);
	return (f[0] + f[2]) + (f[1] + f[3]);
}

#endif

/* vec_f32.h - the reference fp32 dot product and its pieces (internal).
 *
 * Every CPU kernel that sums products sums them in dot_f32's order: 16
 * lanes over k, a fixed reduction tree, then a scalar tail. Kernels that
 * follow it give the same value for a row whatever batch it came in. */
#ifndef HSQ_VEC_F32_H
#define HSQ_VEC_F32_H

#include <string.h>

#include "quant_blocks.h"

typedef hsq_vf16 vf16;

static inline vf16 load16(const float *p)
{
	vf16 v;
	memcpy(&v, p, sizeof v);
	return v;
}

typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));

/* Fixed reduction tree: halves are added pairwise (16 -> 8 -> 4 -> 1). */
static inline float hsum16(vf16 v)
{
	vf8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
		__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
	vf4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
	return (b[0] + b[2]) + (b[1] + b[3]);
}

static inline float tail_dot(const float *a, const float *b, int from, int n)
{
	float s = 0.0f;
	for (int k = from; k < n; k++)
		s += a[k] * b[k];
	return s;
}

/* The reference order: the value every other kernel reproduces. */
static inline float dot_f32(const float *a, const float *b, int n)
{
	vf16 acc = { 0 };
	int k = 0;
	for (; k + 16 <= n; k += 16)
		acc += load16(a + k) * load16(b + k);
	return hsum16(acc) + tail_dot(a, b, k, n);
}

/* y[i] += w * x[i] for n floats, 16 lanes at a time. */
static inline void axpy_f32(float *y, float w, const float *x, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		vf16 a = load16(y + i) + w * load16(x + i);
		memcpy(y + i, &a, sizeof a);
	}
	for (; i < n; i++)
		y[i] += w * x[i];
}

#endif

/* vec_f32.h - the reference fp32 dot product and its pieces, and the
 * 16-lane e^x of the attention softmax (internal).
 *
 * Every CPU kernel that sums products sums them in dot_f32's order: 16
 * lanes over k, a fixed reduction tree, then a scalar tail. Kernels that
 * follow it give the same value for a row whatever batch it came in. */
#ifndef HSQ_VEC_F32_H
#define HSQ_VEC_F32_H

#include <string.h>

/* Sixteen floats: one AVX-512 register, or two AVX2 ones. aligned(4): the
 * vectors are loaded from float arrays with no stronger alignment. */
typedef float hsq_vf16 __attribute__((vector_size(64), aligned(4)));
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

/* Sixteen hsum16 at once: lane j of the result is hsum16(v[j]), bit for
 * bit, because every lane goes through the same pairs of additions in the
 * same tree (16 -> 8 -> 4 -> 2 -> 1), only four vectors' worth of lanes
 * per instruction; two-source shuffles line the pairs up. Where tiles of
 * 4 x 4 dot products each ended in their own hsum16, these reductions
 * were half the time of the tile (perf annotate of tile_4x4q). */
static inline __attribute__((always_inline)) vf16 hsum16x16(const vf16 v[16])
{
	vf16 a[8], b[4], c[2];
#pragma GCC unroll 8
	for (int m = 0; m < 8; m++) /* a_j[i] = v_j[i] + v_j[i + 8]: j = 2m in lanes 0-7, 2m+1 in 8-15 */
		a[m] = __builtin_shufflevector(v[2 * m], v[2 * m + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21,
					       22, 23) +
		       __builtin_shufflevector(v[2 * m], v[2 * m + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28,
					       29, 30, 31);
#pragma GCC unroll 4
	for (int u = 0; u < 4; u++) /* b_j[i] = a_j[i] + a_j[i + 4]: lanes 4k..4k+3 hold j = 4u + k */
		b[u] = __builtin_shufflevector(a[2 * u], a[2 * u + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25,
					       26, 27) +
		       __builtin_shufflevector(a[2 * u], a[2 * u + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29,
					       30, 31);
#pragma GCC unroll 2
	for (int w = 0; w < 2; w++) /* b_j[0] + b_j[2] in lane 2k, b_j[1] + b_j[3] in 2k + 1, j = 8w + k */
		c[w] = __builtin_shufflevector(b[2 * w], b[2 * w + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25,
					       28, 29) +
		       __builtin_shufflevector(b[2 * w], b[2 * w + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27,
					       30, 31);
	return __builtin_shufflevector(c[0], c[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
	       __builtin_shufflevector(c[0], c[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
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

typedef int vi16 __attribute__((vector_size(64)));

/* e^x, 16 lanes, for the arguments of a softmax (x <= 0, finite): Cephes'
 * expf polynomial after splitting x = n ln 2 + r, |r| <= ln 2 / 2; within
 * 2 ulp of expf over [-87.33, 0] (1 measured; test_vexp). Below -87.33
 * (e^x < 2^-126, a weight no sum notices) the result is 2^-126 times a
 * value in [0.7, 1.5] instead of a denormal. A scalar expf per score was
 * most of the softmax of a long prefill. */
static inline vf16 vexp16(vf16 x)
{
	const vf16 zero = { 0 }, lo = zero - 87.33654f, magic = zero + 12582912.0f; /* 1.5 * 2^23 */
	vi16 under = x < lo;
	x = (vf16)((under & (vi16)lo) | (~under & (vi16)x));
	vf16 n = (x * 1.44269504088896341f + magic) - magic; /* round to nearest */
	vf16 r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	vf16 p = 1.9875691500e-4f * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	vf16 y = p * (r * r) + r + 1.0f;
	vi16 e = (__builtin_convertvector(n, vi16) + 127) << 23;
	return y * (vf16)e;
}

static inline float expf_softmax(float x) /* vexp16 on one value (tails) */
{
	vf16 v = { x };
	return vexp16(v)[0];
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

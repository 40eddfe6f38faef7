/* codec_kernels.h - the few vector loops the codecs spend their time in
 * (internal). Written so that gcc -O2 vectorizes them: eight independent
 * partial sums for reductions (floating-point addition is not reassociated
 * without -ffast-math) and restrict-qualified axpy. */
#ifndef HSQ_CODEC_KERNELS_H
#define HSQ_CODEC_KERNELS_H
#include <stdint.h>

static inline float codec_dotf(const float *restrict a, const float *restrict b, int n)
{
	float s[8] = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int t = 0; t < 8; t++)
			s[t] += a[j + t] * b[j + t];
	float r = 0.0f;
	for (; j < n; j++)
		r += a[j] * b[j];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + r;
}

/* Same in double precision, for reference scores. */
static inline double codec_dotd(const float *restrict a, const float *restrict b, int n)
{
	double s[8] = {0};
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int t = 0; t < 8; t++)
			s[t] += (double)a[j + t] * b[j + t];
	double r = 0.0;
	for (; j < n; j++)
		r += (double)a[j] * b[j];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + r;
}

/* y += a x, in blocks of eight: gcc's -O2 cost model vectorizes a loop
 * only when no scalar remainder is needed, which a fixed block gives. */
static inline void codec_axpyf(float *restrict y, float a, const float *restrict x, int n)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int t = 0; t < 8; t++)
			y[j + t] += a * x[j + t];
	for (; j < n; j++)
		y[j] += a * x[j];
}

/* y += a x with a double accumulator row. */
static inline void codec_axpyd(double *restrict y, double a, const float *restrict x, int n)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int t = 0; t < 8; t++)
			y[j + t] += a * x[j + t];
	for (; j < n; j++)
		y[j] += a * x[j];
}

/* idx[j] = number of thresholds below u[j], i.e. the index of the nearest
 * level when thresholds are the midpoints of ascending levels (the same
 * answer as hsq_codebook_index, ties included). Counting over every
 * threshold vectorizes across coordinates; worth it up to 15 thresholds
 * (4 bits), beyond that a binary search per value is cheaper. */
static inline void codec_count_below(const float *restrict u, int n, const float *restrict thr,
				     int n_thr, uint8_t *restrict idx)
{
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		int32_t k[8] = {0};
		for (int t = 0; t < n_thr; t++)
			for (int l = 0; l < 8; l++)
				k[l] += u[j + l] > thr[t];
		for (int l = 0; l < 8; l++)
			idx[j + l] = (uint8_t)k[l];
	}
	for (; j < n; j++) {
		int k = 0;
		for (int t = 0; t < n_thr; t++)
			k += u[j] > thr[t];
		idx[j] = (uint8_t)k;
	}
}

#endif

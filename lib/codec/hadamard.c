/* hadamard.c - seeded randomized Walsh-Hadamard rotation (see hadamard.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/hadamard.h"
#include "common/error.h"
#include "common/rng.h"

#define MAX_BLOCKS 16

struct hsq_rotation {
	int dim;
	int n_blocks;
	int block_start[MAX_BLOCKS]; /* first coordinate of each power-of-two block */
	int block_len[MAX_BLOCKS];   /* its length, descending */
	float *sign1;                /* dim: D1, +-1 */
	float *sign2;                /* dim: D2, +-1 */
	int *perm;                   /* dim: (P t)[i] = t[perm[i]] */
};

/* First three butterfly levels on 8 consecutive values. */
static inline void fwht8(float *x)
{
	float a0 = x[0] + x[1], a1 = x[0] - x[1], a2 = x[2] + x[3], a3 = x[2] - x[3];
	float a4 = x[4] + x[5], a5 = x[4] - x[5], a6 = x[6] + x[7], a7 = x[6] - x[7];
	float b0 = a0 + a2, b1 = a1 + a3, b2 = a0 - a2, b3 = a1 - a3;
	float b4 = a4 + a6, b5 = a5 + a7, b6 = a4 - a6, b7 = a5 - a7;
	x[0] = b0 + b4;
	x[1] = b1 + b5;
	x[2] = b2 + b6;
	x[3] = b3 + b7;
	x[4] = b0 - b4;
	x[5] = b1 - b5;
	x[6] = b2 - b6;
	x[7] = b3 - b7;
}

/* lo, hi <- lo + hi, lo - hi on 8 values (disjoint ranges). */
static inline void butterfly8(float *restrict lo, float *restrict hi)
{
	for (int t = 0; t < 8; t++) {
		float a = lo[t], b = hi[t];
		lo[t] = a + b;
		hi[t] = a - b;
	}
}

void hsq_fwht(float *x, int n)
{
	int h = 1;
	if (n >= 8) {
		/* The first levels have butterflies too short to vectorize:
		 * do them 8 values at a time, then the rest in blocks of 8
		 * (which gcc -O2 vectorizes). */
		for (int i = 0; i < n; i += 8)
			fwht8(x + i);
		h = 8;
		for (; h < n; h <<= 1) {
			for (int i = 0; i < n; i += h << 1) {
				for (int j = i; j < i + h; j += 8)
					butterfly8(x + j, x + j + h);
			}
		}
	} else {
		for (; h < n; h <<= 1)
			for (int i = 0; i < n; i += h << 1)
				for (int j = i; j < i + h; j++) {
					float a = x[j], b = x[j + h];
					x[j] = a + b;
					x[j + h] = a - b;
				}
	}
	float s = 1.0f / sqrtf((float)n);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int t = 0; t < 8; t++)
			x[i + t] *= s;
	for (; i < n; i++)
		x[i] *= s;
}

static void blocked_fwht(const hsq_rotation *rot, float *x)
{
	for (int b = 0; b < rot->n_blocks; b++)
		hsq_fwht(x + rot->block_start[b], rot->block_len[b]);
}

hsq_status hsq_rotation_new(int dim, uint64_t seed, hsq_rotation **out)
{
	hsq_status st = HSQ_OK;
	hsq_rotation *rot = NULL;
	*out = NULL;
	if (dim < 1 || dim > 4096) {
		st = hsq_fail(HSQ_ERR_INVALID_ARG, "rotation: dimension %d out of range 1..4096", dim);
		goto cleanup;
	}
	rot = calloc(1, sizeof *rot);
	if (!rot) {
		st = hsq_fail(HSQ_ERR_NOMEM, "rotation: out of memory for dimension %d", dim);
		goto cleanup;
	}
	rot->dim = dim;
	rot->sign1 = malloc(sizeof(float) * (size_t)dim);
	rot->sign2 = malloc(sizeof(float) * (size_t)dim);
	rot->perm = malloc(sizeof(int) * (size_t)dim);
	if (!rot->sign1 || !rot->sign2 || !rot->perm) {
		st = hsq_fail(HSQ_ERR_NOMEM, "rotation: out of memory for dimension %d", dim);
		goto cleanup;
	}
	for (int left = dim, start = 0; left > 0; rot->n_blocks++) {
		int len = 1;
		while (len * 2 <= left)
			len *= 2;
		rot->block_start[rot->n_blocks] = start;
		rot->block_len[rot->n_blocks] = len;
		start += len;
		left -= len;
	}
	/* Signs and permutation come from PCG64 whatever stream the caller
	 * studies: the rotation is part of the codec, fixed by its seed. */
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, seed, 0x5eed0f0ad0a1ULL);
	for (int i = 0; i < dim; i++) {
		uint64_t r = hsq_rng_u64(&rng);
		rot->sign1[i] = (r & 1) ? -1.0f : 1.0f;
		rot->sign2[i] = (r & 2) ? -1.0f : 1.0f;
		rot->perm[i] = i;
	}
	for (int i = dim - 1; i > 0; i--) { /* Fisher-Yates */
		int j = (int)hsq_rng_below(&rng, (uint64_t)i + 1);
		int t = rot->perm[i];
		rot->perm[i] = rot->perm[j];
		rot->perm[j] = t;
	}
	*out = rot;
	rot = NULL;
cleanup:
	hsq_rotation_free(rot);
	return st;
}

void hsq_rotation_free(hsq_rotation *rot)
{
	if (!rot)
		return;
	free(rot->sign1);
	free(rot->sign2);
	free(rot->perm);
	free(rot);
}

int hsq_rotation_dim(const hsq_rotation *rot)
{
	return rot->dim;
}

void hsq_rotation_apply(const hsq_rotation *rot, const float *x, float *y)
{
	int d = rot->dim;
	float t[d];
	for (int i = 0; i < d; i++)
		t[i] = x[i] * rot->sign1[i];
	blocked_fwht(rot, t);
	for (int i = 0; i < d; i++)
		y[i] = t[rot->perm[i]] * rot->sign2[i];
	blocked_fwht(rot, y);
}

void hsq_rotation_apply_t(const hsq_rotation *rot, const float *y, float *x)
{
	int d = rot->dim;
	float t[d], u[d];
	memcpy(t, y, sizeof(float) * (size_t)d);
	blocked_fwht(rot, t);
	for (int i = 0; i < d; i++)
		u[rot->perm[i]] = t[i] * rot->sign2[i];
	blocked_fwht(rot, u);
	for (int i = 0; i < d; i++)
		x[i] = u[i] * rot->sign1[i];
}

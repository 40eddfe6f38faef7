/* lloyd_max.h - Lloyd-Max scalar codebooks, computed from the density
 * (internal). Levels are in units of the coordinate's standard deviation:
 * for the Beta law of a rotated unit vector in dim dimensions that unit is
 * 1/sqrt(dim), so one table serves every vector norm. */
#ifndef HSQ_LLOYD_MAX_H
#define HSQ_LLOYD_MAX_H
#include "hsq_codec.h"

typedef enum hsq_density {
	HSQ_DENSITY_GAUSSIAN = 1, /* N(0, 1): the large-dim limit */
	HSQ_DENSITY_BETA = 2,     /* density of one coordinate of a uniformly random
				   * unit vector, scaled by sqrt(dim):
				   * f(t) ~ (1 - t^2/dim)^((dim-3)/2), |t| < sqrt(dim) */
} hsq_density;

#define HSQ_LLOYD_MAX_BITS 8

typedef struct hsq_codebook {
	int bits;              /* 1..HSQ_LLOYD_MAX_BITS */
	int n;                 /* 2^bits levels */
	float level[256];      /* ascending, symmetric about 0 */
	float threshold[255];  /* decision boundaries, midpoints of the levels */
	double mse;            /* expected squared error per unit-variance value */
} hsq_codebook;

/* Lloyd iterations on the density until the levels move by < 1e-12.
 * levels: 2^bits doubles, ascending; mse may be NULL. Beta needs
 * 3 <= dim <= 4096 and bits <= 4 (quadrature cost); Gaussian ignores dim. */
hsq_status hsq_lloyd_max(hsq_density density, int dim, int bits, double *levels, double *mse);

/* The same, computed once per (density, dim, bits) and kept for the life
 * of the process (thread-safe). Gaussian: dim is ignored. Beta: dim in
 * HSQ_CODEC_MIN_DIM..HSQ_CODEC_MAX_DIM. */
hsq_status hsq_codebook_get(hsq_density density, int dim, int bits, const hsq_codebook **out);

/* Index of the level nearest to u (branch-light binary search). */
static inline int hsq_codebook_index(const hsq_codebook *cb, float u)
{
	int lo = 0;
	for (int step = cb->n >> 1; step > 0; step >>= 1)
		if (u > cb->threshold[lo + step - 1])
			lo += step;
	return lo;
}

#endif

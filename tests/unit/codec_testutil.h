/* codec_testutil.h - helpers shared by the codec tests. */
#ifndef HSQ_CODEC_TESTUTIL_H
#define HSQ_CODEC_TESTUTIL_H
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "hsq_eval.h"

/* n rows of d values drawn uniformly on the unit sphere. */
static inline float *tu_unit_vectors(hsq_rng *rng, size_t n, int d)
{
	float *x = malloc(sizeof(float) * n * (size_t)d);
	cr_assert(x);
	for (size_t i = 0; i < n; i++) {
		double s = 0.0;
		for (int j = 0; j < d; j++) {
			double g = hsq_rng_normal(rng);
			x[i * d + j] = (float)g;
			s += g * g;
		}
		for (int j = 0; j < d; j++)
			x[i * d + j] = (float)(x[i * d + j] / sqrt(s));
	}
	return x;
}

static inline float *tu_gaussian(hsq_rng *rng, size_t n, int d, double sigma)
{
	float *x = malloc(sizeof(float) * n * (size_t)d);
	cr_assert(x);
	for (size_t i = 0; i < n * (size_t)d; i++)
		x[i] = (float)(sigma * hsq_rng_normal(rng));
	return x;
}

static inline hsq_codec *tu_codec(hsq_codec_kind kind, int dim, int bits, hsq_kv_path path,
				  uint64_t seed, const hsq_sq_calib *calib)
{
	hsq_codec_params p = {.kind = kind, .dim = dim, .bits = bits, .path = path, .seed = seed,
			      .calib = calib};
	hsq_codec *c = NULL;
	hsq_status st = hsq_codec_new(&p, &c);
	cr_assert_eq(st, HSQ_OK, "codec %s d=%d b=%d: %s", hsq_codec_kind_name(kind), dim, bits,
		     hsq_last_error());
	return c;
}

static inline double tu_mean(const double *x, int n)
{
	double s = 0.0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s / n;
}

#endif

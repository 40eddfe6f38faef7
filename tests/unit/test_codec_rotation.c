/* test_codec_rotation.c - the seeded randomized Walsh-Hadamard rotation. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_testutil.h"
#include "codec/hadamard.h"

static const int dims[] = {16, 32, 33, 64, 96, 100, 128, 160, 255, 256};

Test(rotation, orthonormal_for_every_dimension)
{
	for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
		int d = dims[t];
		hsq_rotation *r;
		cr_assert_eq(hsq_rotation_new(d, 11, &r), HSQ_OK);
		float *m = calloc((size_t)d * d, sizeof(float)), e[256];
		for (int i = 0; i < d; i++) { /* column i = R e_i */
			memset(e, 0, sizeof e);
			e[i] = 1.0f;
			hsq_rotation_apply(r, e, e);
			for (int k = 0; k < d; k++)
				m[(size_t)k * d + i] = e[k];
		}
		double worst = 0;
		for (int i = 0; i < d; i++)
			for (int j = 0; j < d; j++) {
				double s = 0;
				for (int k = 0; k < d; k++)
					s += (double)m[(size_t)k * d + i] * m[(size_t)k * d + j];
				worst = fmax(worst, fabs(s - (i == j)));
			}
		cr_expect_lt(worst, 1e-5, "d=%d: |R^T R - I| = %g", d, worst);
		free(m);
		hsq_rotation_free(r);
	}
}

Test(rotation, transpose_inverts_and_preserves_norm)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 5, 0);
	for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
		int d = dims[t];
		hsq_rotation *r;
		cr_assert_eq(hsq_rotation_new(d, 3, &r), HSQ_OK);
		float x[256], y[256], z[256];
		double nx = 0, ny = 0;
		for (int i = 0; i < d; i++) {
			x[i] = (float)hsq_rng_normal(&g);
			nx += x[i] * x[i];
		}
		hsq_rotation_apply(r, x, y);
		for (int i = 0; i < d; i++)
			ny += y[i] * y[i];
		hsq_rotation_apply_t(r, y, z);
		for (int i = 0; i < d; i++)
			cr_expect(fabsf(z[i] - x[i]) < 1e-5f, "d=%d coordinate %d", d, i);
		cr_expect(fabs(nx - ny) < 1e-4 * nx, "d=%d norm", d);
		hsq_rotation_free(r);
	}
}

Test(rotation, deterministic_per_seed)
{
	hsq_rotation *a, *b, *c;
	cr_assert_eq(hsq_rotation_new(128, 42, &a), HSQ_OK);
	cr_assert_eq(hsq_rotation_new(128, 42, &b), HSQ_OK);
	cr_assert_eq(hsq_rotation_new(128, 43, &c), HSQ_OK);
	float x[128], ya[128], yb[128], yc[128];
	for (int i = 0; i < 128; i++)
		x[i] = (float)sin(i * 0.37);
	hsq_rotation_apply(a, x, ya);
	hsq_rotation_apply(b, x, yb);
	hsq_rotation_apply(c, x, yc);
	cr_expect_eq(memcmp(ya, yb, sizeof ya), 0, "same seed, bit-identical output");
	cr_expect_neq(memcmp(ya, yc, sizeof ya), 0, "another seed, another rotation");
	hsq_rotation_free(a);
	hsq_rotation_free(b);
	hsq_rotation_free(c);
}

/* A one-hot vector comes out spread: no coordinate keeps more than a few
 * times its fair share 1/sqrt(d), and the coordinates look Gaussian (the
 * reason for the second round: one round leaves a flat +-1/sqrt(d)). */
Test(rotation, spreads_a_spike)
{
	const int d = 128;
	hsq_rotation *r;
	cr_assert_eq(hsq_rotation_new(d, 9, &r), HSQ_OK);
	double fourth = 0;
	int n = 0;
	for (int i = 0; i < d; i++) {
		float e[128] = {0};
		e[i] = 1.0f;
		hsq_rotation_apply(r, e, e);
		for (int k = 0; k < d; k++) {
			cr_expect_lt(fabsf(e[k]), 5.0f / sqrtf((float)d));
			fourth += pow(e[k] * sqrt(d), 4);
			n++;
		}
	}
	/* kurtosis: 1 for a flat +-1 pattern, 3 for a Gaussian */
	cr_expect_gt(fourth / n, 2.0, "kurtosis %g: coordinates not Gaussian-like", fourth / n);
	hsq_rotation_free(r);
}

Test(rotation, fwht_is_sylvester_hadamard)
{
	float x[4] = {1, 0, 0, 0};
	hsq_fwht(x, 4);
	for (int i = 0; i < 4; i++)
		cr_expect_float_eq(x[i], 0.5f, 1e-7);
	float y[4] = {0, 1, 0, 0};
	hsq_fwht(y, 4);
	float want[4] = {0.5f, -0.5f, 0.5f, -0.5f};
	for (int i = 0; i < 4; i++)
		cr_expect_float_eq(y[i], want[i], 1e-7);
	hsq_rotation *r;
	cr_expect_eq(hsq_rotation_new(0, 1, &r), HSQ_ERR_INVALID_ARG);
}

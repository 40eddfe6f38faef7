/* test_codec_codebook.c - Lloyd-Max codebooks computed from the density,
 * checked against the values in the design notes (section 2).
 *
 * The design notes' Beta 4-bit tables (d = 64 and 128) sit 4e-4 to 8e-4
 * below the converged Lloyd-Max fixed point (an independent numpy
 * iteration on a 2M-point grid agrees with this code to 1e-4, not with the
 * notes), so "matches to 3 decimals" is checked as |difference| < 1e-3. */
#include <criterion/criterion.h>
#include <math.h>

#include "hsq.h"
#include "codec/codec_kernels.h"
#include "codec/lloyd_max.h"

static void expect_positive_half(hsq_density dens, int dim, int bits, const double *want, double tol)
{
	double lv[256];
	cr_assert_eq(hsq_lloyd_max(dens, dim, bits, lv, NULL), HSQ_OK, "%s", hsq_last_error());
	int n = 1 << bits;
	for (int k = 0; k < n / 2; k++)
		cr_expect(fabs(lv[n / 2 + k] - want[k]) < tol,
			  "density %d dim %d bits %d level %d: %.5f, design notes %.4f", dens, dim, bits, k,
			  lv[n / 2 + k], want[k]);
}

Test(codebook, gaussian_matches_design_notes)
{
	static const double b2[] = {0.4528, 1.5104};
	static const double b3[] = {0.2451, 0.7560, 1.3439, 2.1520};
	static const double b4[] = {0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6181, 2.0690, 2.7326};
	expect_positive_half(HSQ_DENSITY_GAUSSIAN, 0, 2, b2, 1e-3);
	expect_positive_half(HSQ_DENSITY_GAUSSIAN, 0, 3, b3, 1e-3);
	expect_positive_half(HSQ_DENSITY_GAUSSIAN, 0, 4, b4, 1e-3);
	/* Max's classical Gaussian tables agree to 1e-4 as well. */
	expect_positive_half(HSQ_DENSITY_GAUSSIAN, 0, 4, b4, 2e-4);
}

Test(codebook, beta_matches_design_notes)
{
	static const double d128_3[] = {0.2444, 0.7532, 1.3365, 2.1314};
	static const double d128_4[] = {0.1278, 0.3860, 0.6530, 0.9364, 1.2470, 1.6036, 2.0452, 2.6882};
	static const double d64_4[] = {0.1273, 0.3845, 0.6501, 0.9315, 1.2389, 1.5904, 2.0229, 2.6460};
	expect_positive_half(HSQ_DENSITY_BETA, 128, 3, d128_3, 1e-3);
	expect_positive_half(HSQ_DENSITY_BETA, 128, 4, d128_4, 1e-3);
	expect_positive_half(HSQ_DENSITY_BETA, 64, 4, d64_4, 1e-3);
}

/* Expected squared error per unit-variance value: the Gaussian limits
 * 0.1175, 0.0346, 0.0095 and, for unit vectors at d = 64..128, about
 * 0.115, 0.034, 0.0092 (design notes). */
Test(codebook, distortion_matches_theory)
{
	double lv[256], mse;
	static const double gauss[] = {0, 0.3634, 0.1175, 0.03455, 0.009501};
	for (int b = 1; b <= 4; b++) {
		cr_assert_eq(hsq_lloyd_max(HSQ_DENSITY_GAUSSIAN, 0, b, lv, &mse), HSQ_OK);
		cr_expect(fabs(mse - gauss[b]) < 2e-4 * (b == 1 ? 5 : 1), "gaussian %d bits: %g", b, mse);
	}
	static const double beta[] = {0, 0, 0.115, 0.034, 0.0092};
	for (int d = 64; d <= 128; d += 64)
		for (int b = 2; b <= 4; b++) {
			cr_assert_eq(hsq_lloyd_max(HSQ_DENSITY_BETA, d, b, lv, &mse), HSQ_OK);
			cr_expect(fabs(mse / beta[b] - 1) < 0.02, "beta d=%d %d bits: %g", d, b, mse);
			/* a finite dimension is lighter-tailed: slightly less error */
			double g;
			hsq_lloyd_max(HSQ_DENSITY_GAUSSIAN, 0, b, lv, &g);
			cr_expect_lt(mse, g);
		}
}

Test(codebook, shape_and_limit)
{
	double lv[256], g[256];
	cr_assert_eq(hsq_lloyd_max(HSQ_DENSITY_BETA, 4096, 3, lv, NULL), HSQ_OK);
	cr_assert_eq(hsq_lloyd_max(HSQ_DENSITY_GAUSSIAN, 0, 3, g, NULL), HSQ_OK);
	for (int k = 0; k < 8; k++) {
		cr_expect(fabs(lv[k] - g[k]) < 2e-3, "beta(4096) -> gaussian, level %d", k);
		cr_expect_float_eq(lv[k], -lv[7 - k], 1e-12, "symmetric");
		if (k)
			cr_expect_gt(lv[k], lv[k - 1], "ascending");
	}
	/* 1 bit: +-E|x| = +-sqrt(2/pi) for the Gaussian */
	cr_assert_eq(hsq_lloyd_max(HSQ_DENSITY_GAUSSIAN, 0, 1, g, NULL), HSQ_OK);
	cr_expect_float_eq(g[1], sqrt(2 / M_PI), 1e-9);
	cr_expect_float_eq(g[0], -sqrt(2 / M_PI), 1e-9);
}

Test(codebook, cached_codebooks_and_index)
{
	const hsq_codebook *a, *b;
	cr_assert_eq(hsq_codebook_get(HSQ_DENSITY_BETA, 96, 3, &a), HSQ_OK);
	cr_assert_eq(hsq_codebook_get(HSQ_DENSITY_BETA, 96, 3, &b), HSQ_OK);
	cr_expect_eq(a, b, "the cache returns the same table");
	for (int k = 0; k + 1 < a->n; k++)
		cr_expect_float_eq(a->threshold[k], 0.5f * (a->level[k] + a->level[k + 1]), 1e-6);
	/* nearest-level search agrees with a linear scan */
	for (float u = -4.0f; u <= 4.0f; u += 0.01f) {
		int best = 0;
		for (int k = 1; k < a->n; k++)
			if (fabsf(u - a->level[k]) < fabsf(u - a->level[best]))
				best = k;
		cr_expect_eq(hsq_codebook_index(a, u), best, "u = %g", u);
	}
}

/* The vectorized threshold count the TQ encoder uses gives the same index
 * as the binary search, boundaries included. */
Test(codebook, threshold_count_equals_search)
{
	for (int b = 1; b <= 4; b++) {
		const hsq_codebook *cb;
		cr_assert_eq(hsq_codebook_get(HSQ_DENSITY_BETA, 128, b, &cb), HSQ_OK);
		float u[203];
		uint8_t idx[203];
		for (int j = 0; j < 203; j++)
			u[j] = -3.5f + 0.035f * j;
		u[0] = cb->threshold[0]; /* exactly on a boundary */
		cr_assert_eq(u[0], cb->threshold[0]);
		codec_count_below(u, 203, cb->threshold, cb->n - 1, idx);
		for (int j = 0; j < 203; j++)
			cr_expect_eq(idx[j], hsq_codebook_index(cb, u[j]), "b=%d u=%g", b, u[j]);
	}
}

Test(codebook, refuses_bad_arguments)
{
	double lv[256];
	const hsq_codebook *cb;
	cr_expect_eq(hsq_lloyd_max(HSQ_DENSITY_GAUSSIAN, 0, 9, lv, NULL), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_lloyd_max(HSQ_DENSITY_BETA, 2, 2, lv, NULL), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_lloyd_max(HSQ_DENSITY_BETA, 64, 5, lv, NULL), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_codebook_get(HSQ_DENSITY_BETA, 300, 2, &cb), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_codebook_get((hsq_density)7, 64, 2, &cb), HSQ_ERR_INVALID_ARG);
}

/* test_ks.c - the two-sample Kolmogorov-Smirnov test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "hsq_eval.h"
#include "eval/ks_test.h"

Test(ks, identical_samples)
{
	double a[5] = {1, 2, 3, 4, 5};
	hsq_ks_result r;
	cr_assert_eq(hsq_ks_2samp(a, 5, a, 5, &r), HSQ_OK);
	cr_expect_eq(r.d, 0.0);
	cr_expect_eq(r.p_value, 1.0);
	cr_expect_eq(r.exact, 0, "ties across the samples force the asymptotic p-value");
}

/* Completely separated samples of 10: D = 1 and the exact p-value is the
 * share of the two extreme orderings, 2 / C(20, 10). */
Test(ks, separated_samples_exact)
{
	double a[10], b[10];
	for (int i = 0; i < 10; i++) {
		a[i] = i;
		b[i] = 100 + i;
	}
	hsq_ks_result r;
	cr_assert_eq(hsq_ks_2samp(a, 10, b, 10, &r), HSQ_OK);
	cr_expect_eq(r.d, 1.0);
	cr_expect_eq(r.exact, 1);
	cr_expect_float_eq(r.p_value, 2.0 / 184756.0, 1e-12);
}

/* Exact p-values against brute force: every interleaving of sizes 4 and 5
 * is equally likely under H0. */
static double brute_d(unsigned mask, int m, int n)
{
	int i = 0, j = 0;
	double d = 0;
	for (int k = 0; k < m + n; k++) {
		if (mask >> k & 1)
			i++;
		else
			j++;
		d = fmax(d, fabs((double)i / m - (double)j / n));
	}
	return d;
}

Test(ks, exact_matches_enumeration)
{
	const int m = 4, n = 5;
	int total = 0;
	for (unsigned mask = 0; mask < (1u << (m + n)); mask++)
		total += __builtin_popcount(mask) == m;
	for (unsigned obs = 0; obs < (1u << (m + n)); obs++) {
		if (__builtin_popcount(obs) != m)
			continue;
		double d_obs = brute_d(obs, m, n);
		int as_extreme = 0;
		for (unsigned mask = 0; mask < (1u << (m + n)); mask++)
			if (__builtin_popcount(mask) == m && brute_d(mask, m, n) >= d_obs - 1e-12)
				as_extreme++;
		/* Build samples in the observed order. */
		double a[4], b[5];
		int ia = 0, ib = 0;
		for (int k = 0; k < m + n; k++) {
			if (obs >> k & 1)
				a[ia++] = k;
			else
				b[ib++] = k;
		}
		hsq_ks_result r;
		cr_assert_eq(hsq_ks_2samp(a, 4, b, 5, &r), HSQ_OK);
		cr_expect_float_eq(r.d, d_obs, 1e-12);
		cr_expect_float_eq(r.p_value, (double)as_extreme / total, 1e-12, "ordering %x", obs);
	}
}

/* Kolmogorov's limit: the 5% and 1% critical values are 1.3581 and 1.6276. */
Test(ks, limit_distribution)
{
	cr_expect_float_eq(hsq_ks_limit_q(1.3581), 0.05, 2e-4);
	cr_expect_float_eq(hsq_ks_limit_q(1.6276), 0.01, 1e-4);
	cr_expect_eq(hsq_ks_limit_q(0.1), 1.0);
}

/* Size and power: under H0 about 5% of tests reject at 0.05; a shift of
 * 0.6 standard deviations with 100 + 100 points is found in about 95% of runs. */
Test(ks, size_and_power)
{
	hsq_rng r;
	hsq_rng_init(&r, HSQ_RNG_PCG64, 2024, 0);
	const int reps = 300, n = 100;
	double a[100], b[100];
	int reject_null = 0, reject_shift = 0;
	for (int t = 0; t < reps; t++) {
		for (int i = 0; i < n; i++) {
			a[i] = hsq_rng_normal(&r);
			b[i] = hsq_rng_normal(&r);
		}
		hsq_ks_result res;
		cr_assert_eq(hsq_ks_2samp(a, n, b, n, &res), HSQ_OK);
		cr_assert(res.exact);
		reject_null += res.p_value < 0.05;
		for (int i = 0; i < n; i++)
			b[i] += 0.6;
		cr_assert_eq(hsq_ks_2samp(a, n, b, n, &res), HSQ_OK);
		reject_shift += res.p_value < 0.05;
	}
	/* Binomial(300, 0.05): mean 15, sd 3.8; the exact test is slightly
	 * conservative. */
	cr_expect_lt(reject_null, 28, "%d of %d null tests rejected", reject_null, reps);
	cr_expect_gt(reject_null, 3, "%d of %d null tests rejected: p-values too large", reject_null, reps);
	cr_expect_gt(reject_shift, 0.85 * reps, "power %d of %d", reject_shift, reps);
}

Test(ks, refuses_bad_input)
{
	double a[3] = {1, NAN, 2}, b[2] = {1, 2};
	hsq_ks_result r;
	cr_expect_eq(hsq_ks_2samp(a, 3, b, 2, &r), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_ks_2samp(b, 0, b, 2, &r), HSQ_ERR_EMPTY_INPUT);
}

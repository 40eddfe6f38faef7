/* test_rng.c - the PCG64 and mt19937 streams: reference outputs and basic
 * distribution checks. */
#include <criterion/criterion.h>
#include <math.h>

#include "hsq_eval.h"
#include "common/rng.h"

/* pcg64_srandom_r(42, 54) then pcg64_random_r: the pcg-c reference demo's
 * output (also numpy.random.PCG64 with that state). */
Test(rng, pcg64_matches_reference_stream)
{
	static const uint64_t want[6] = {
		0x86b1da1d72062b68ULL, 0x1304aa46c9853d39ULL, 0xa3670e9e0dd50358ULL,
		0xf9090e529a7dae00ULL, 0xc85b9fd837996f2cULL, 0x606121f8e3919196ULL,
	};
	hsq_rng r;
	cr_assert_eq(hsq_rng_init(&r, HSQ_RNG_PCG64, 42, 54), HSQ_OK);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(hsq_rng_u64(&r), want[i], "output %d", i);
}

/* std::mt19937 seeded 5489: first output 3499211612, 10000th 4123659995
 * (the value the C++ standard requires, [rand.predef]). */
Test(rng, mt19937_matches_reference_stream)
{
	hsq_rng r;
	cr_assert_eq(hsq_rng_init(&r, HSQ_RNG_MT19937, 5489, 0), HSQ_OK);
	cr_expect_eq(hsq_rng_u32(&r), 3499211612u);
	uint32_t v = 0;
	for (int i = 2; i <= 10000; i++)
		v = hsq_rng_u32(&r);
	cr_expect_eq(v, 4123659995u);
}

Test(rng, streams_are_deterministic_and_distinct)
{
	hsq_rng_kind kinds[2] = {HSQ_RNG_PCG64, HSQ_RNG_MT19937};
	for (int k = 0; k < 2; k++) {
		hsq_rng a, b, c, d;
		hsq_rng_init(&a, kinds[k], 7, 1);
		hsq_rng_init(&b, kinds[k], 7, 1);
		hsq_rng_init(&c, kinds[k], 8, 1);
		hsq_rng_init(&d, kinds[k], 7, 2);
		int same_c = 0, same_d = 0;
		for (int i = 0; i < 100; i++) {
			uint64_t x = hsq_rng_u64(&a);
			cr_assert_eq(x, hsq_rng_u64(&b));
			same_c += x == hsq_rng_u64(&c);
			same_d += x == hsq_rng_u64(&d);
		}
		cr_expect_eq(same_c, 0, "%s: seeds 7 and 8 collide", hsq_rng_name(kinds[k]));
		cr_expect_eq(same_d, 0, "%s: streams 1 and 2 collide", hsq_rng_name(kinds[k]));
	}
}

Test(rng, rejects_unknown_kind)
{
	hsq_rng r;
	cr_expect_eq(hsq_rng_init(&r, (hsq_rng_kind)9, 1, 0), HSQ_ERR_INVALID_ARG);
	cr_expect_str_eq(hsq_rng_name(HSQ_RNG_MT19937), "mt19937");
}

/* Moments of the uniform and normal draws, at 5 standard errors: a wrong
 * scaling or a broken polar method moves them by far more. */
Test(rng, uniform_and_normal_moments)
{
	hsq_rng_kind kinds[2] = {HSQ_RNG_PCG64, HSQ_RNG_MT19937};
	const int n = 200000;
	for (int k = 0; k < 2; k++) {
		hsq_rng r;
		hsq_rng_init(&r, kinds[k], 123, 0);
		double su = 0, suu = 0, sn = 0, snn = 0, s4 = 0;
		for (int i = 0; i < n; i++) {
			double u = hsq_rng_uniform(&r);
			cr_assert(u >= 0.0 && u < 1.0);
			su += u;
			suu += u * u;
			double g = hsq_rng_normal(&r);
			sn += g;
			snn += g * g;
			s4 += g * g * g * g;
		}
		cr_expect_lt(fabs(su / n - 0.5), 5 * sqrt(1.0 / 12 / n));
		cr_expect_lt(fabs(suu / n - 1.0 / 3), 5 * sqrt(4.0 / 45 / n));
		cr_expect_lt(fabs(sn / n), 5 / sqrt(n));
		cr_expect_lt(fabs(snn / n - 1.0), 5 * sqrt(2.0 / n));
		cr_expect_lt(fabs(s4 / n - 3.0), 5 * sqrt(96.0 / n), "normal kurtosis %g", s4 / n);
	}
}

/* Student t with 3 degrees of freedom: P(|t| < 1) = 0.6090 (from the t
 * CDF, 2 F(1) - 1 with F(1) = 0.80450), and its tails are heavy:
 * P(|t| > 5) = 0.01539. */
Test(rng, student_t_three_dof)
{
	hsq_rng r;
	hsq_rng_init(&r, HSQ_RNG_PCG64, 99, 3);
	const int n = 100000;
	int inside = 0, far = 0;
	for (int i = 0; i < n; i++) {
		double t = hsq_rng_student_t(&r, 3);
		inside += fabs(t) < 1.0;
		far += fabs(t) > 5.0;
	}
	double p1 = 0.6090, p5 = 0.01539;
	cr_expect_lt(fabs((double)inside / n - p1), 5 * sqrt(p1 * (1 - p1) / n), "P(|t|<1) = %g",
		     (double)inside / n);
	cr_expect_lt(fabs((double)far / n - p5), 5 * sqrt(p5 * (1 - p5) / n), "P(|t|>5) = %g",
		     (double)far / n);
}

Test(rng, below_is_uniform)
{
	hsq_rng r;
	hsq_rng_init(&r, HSQ_RNG_MT19937, 5, 0);
	int count[7] = {0};
	const int n = 70000;
	for (int i = 0; i < n; i++) {
		uint64_t v = hsq_rng_below(&r, 7);
		cr_assert_lt(v, 7u);
		count[v]++;
	}
	double chi2 = 0;
	for (int i = 0; i < 7; i++)
		chi2 += (count[i] - n / 7.0) * (count[i] - n / 7.0) / (n / 7.0);
	cr_expect_lt(chi2, 22.46, "chi-square %.2f over 6 dof beyond the 0.1%% critical value", chi2);
	cr_expect_eq(hsq_rng_below(&r, 1), 0u);
}

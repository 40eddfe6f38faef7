/* test_sampler.c - greedy and sampled token selection. */
#include <criterion/criterion.h>
#include <math.h>

#include "hsq.h"

static hsq_sampler *make(float temp, int k, float p, uint64_t seed)
{
	hsq_sampler_params sp = { temp, k, p, seed };
	hsq_sampler *s;
	cr_assert_eq(hsq_sampler_new(&sp, &s), HSQ_OK);
	return s;
}

Test(sampler, greedy_is_argmax_lowest_id_on_ties)
{
	float lg[6] = { 1, 5, 3, 5, -2, 0 };
	hsq_sampler *s = make(0, 40, 0.95f, 1);
	cr_expect_eq(hsq_sampler_sample(s, lg, 6), 1);
	hsq_sampler_free(s);
	s = make(1.0f, 1, 1.0f, 1); /* top-k 1 is greedy at any temperature */
	cr_expect_eq(hsq_sampler_sample(s, lg, 6), 1);
	hsq_sampler_free(s);
}

/* The first index of the largest, a NaN never larger: one scalar pass. */
static int argmax_ref(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

Test(sampler, argmax_equals_one_scalar_pass)
{
	enum { N = 1000 };
	static float x[N];
	uint32_t r = 12345;
	for (int n = 1; n <= N; n += n < 70 ? 1 : 37)
		for (int round = 0; round < 8; round++) {
			for (int i = 0; i < n; i++) { /* few distinct values: many ties across lanes */
				r = r * 1664525u + 1013904223u;
				x[i] = (float)((r >> 16) % 7) - 3.0f;
			}
			if (round == 1)
				x[0] = NAN; /* nothing beats it */
			if (round == 2 && n > 5)
				x[n / 2] = NAN; /* never picked */
			if (round == 3)
				x[n - 1] = INFINITY;
			if (round == 4)
				for (int i = 0; i < n; i++)
					x[i] = -INFINITY;
			if (round == 5 && n > 20)
				x[17] = x[3] = 9.0f; /* the same maximum in two lanes: the lower index */
			if (round == 6)
				x[0] = -0.0f, x[n - 1] = 0.0f; /* -0 == +0: the lower index */
			cr_expect_eq(hsq_argmax(x, n), argmax_ref(x, n), "n %d round %d", n, round);
		}
	static float big[262144];
	for (int i = 0; i < 262144; i++)
		big[i] = sinf((float)i * 0.001f) * (float)(i % 1000);
	cr_expect_eq(hsq_argmax(big, 262144), argmax_ref(big, 262144));
}

Test(sampler, frequencies_follow_softmax)
{
	float lg[4] = { 0, logf(2), logf(3), logf(4) }; /* p = 0.1 0.2 0.3 0.4 */
	hsq_sampler *s = make(1.0f, 0, 1.0f, 42);
	int count[4] = { 0 };
	const int N = 40000;
	for (int i = 0; i < N; i++)
		count[hsq_sampler_sample(s, lg, 4)]++;
	double chi2 = 0;
	for (int i = 0; i < 4; i++) {
		double e = N * (i + 1) / 10.0;
		chi2 += (count[i] - e) * (count[i] - e) / e;
	}
	cr_expect_lt(chi2, 16.27, "chi-square %.2f over 3 dof exceeds the 0.1%% critical value", chi2);
	hsq_sampler_free(s);
}

Test(sampler, temperature_sharpens)
{
	float lg[2] = { 0, 1 };
	hsq_sampler *s = make(0.1f, 0, 1.0f, 3);
	int hi = 0;
	for (int i = 0; i < 2000; i++)
		hi += hsq_sampler_sample(s, lg, 2);
	cr_expect_gt(hi, 1990, "at T=0.1 the gap of 1 becomes 10 nats: ~1 in 22000 low");
	hsq_sampler_free(s);
}

Test(sampler, top_k_and_top_p_truncate)
{
	float lg[5] = { 4, 3, 2, 1, 0 };
	hsq_sampler *s = make(5.0f, 2, 1.0f, 9);
	for (int i = 0; i < 2000; i++)
		cr_assert_lt(hsq_sampler_sample(s, lg, 5), 2, "top-k 2 keeps ids 0 and 1");
	hsq_sampler_free(s);
	/* p(0) at T=1 is 0.636: top-p 0.5 keeps only id 0 */
	s = make(1.0f, 0, 0.5f, 9);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(hsq_sampler_sample(s, lg, 5), 0);
	hsq_sampler_free(s);
	s = make(1.0f, 0, 0.8f, 9); /* 0.636 + 0.234 >= 0.8: ids 0 and 1 */
	int seen1 = 0;
	for (int i = 0; i < 1000; i++) {
		hsq_token t = hsq_sampler_sample(s, lg, 5);
		cr_assert_lt(t, 2);
		seen1 += t == 1;
	}
	cr_expect_gt(seen1, 150);
	hsq_sampler_free(s);
}

Test(sampler, seeds_repeat_and_differ)
{
	float lg[50];
	for (int i = 0; i < 50; i++)
		lg[i] = sinf((float)i);
	hsq_sampler *a = make(1.0f, 0, 1.0f, 5), *b = make(1.0f, 0, 1.0f, 5), *c = make(1.0f, 0, 1.0f, 6);
	int same_ab = 1, same_ac = 1;
	for (int i = 0; i < 100; i++) {
		hsq_token x = hsq_sampler_sample(a, lg, 50), y = hsq_sampler_sample(b, lg, 50), z = hsq_sampler_sample(c, lg, 50);
		same_ab &= x == y;
		same_ac &= x == z;
	}
	cr_expect(same_ab, "same seed, same draws");
	cr_expect(!same_ac, "different seed, different draws");
	hsq_sampler_free(a); hsq_sampler_free(b); hsq_sampler_free(c);
}

Test(sampler, invalid_parameters_refused)
{
	hsq_sampler *s = NULL;
	hsq_sampler_params bad[] = { { -1, 0, 1, 0 }, { 1, -3, 1, 0 }, { 1, 0, 0, 0 }, { 1, 0, 1.5f, 0 }, { NAN, 0, 1, 0 } };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cr_expect_eq(hsq_sampler_new(&bad[i], &s), HSQ_ERR_INVALID_ARG, "case %zu", i);
		cr_expect_null(s);
	}
}

/* test_stats.c - the paired-evaluation statistics (lib/eval/stats.c,
 * lib/eval/stats_beta.c) against scipy's values in tests/golden/stats/ (written
 * by tests/ref/make_stats_golden.py), plus argument checks and properties.
 *
 * Golden values must agree to |got - want| <= 1e-9 max(1, |want|); p-values
 * and tail probabilities also to 1e-9 relative (while above 1e-290), so a
 * tiny p that is wrong by orders of magnitude fails. Integers and flags must
 * match exactly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "hsq_eval.h"

#define TOL 1e-9
#define REL_TOL 1e-9

/* ------------------------------------------------------------ parsing */

static double num(const gu_row *r, int i)
{
	const char *s = gu_field(r, i);
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	cr_assert(end != s && *end == '\0' && errno != EINVAL, "bad number '%s' in field %d", s, i);
	return v;
}

static uint64_t u64(const gu_row *r, int i)
{
	const char *s = gu_field(r, i);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	cr_assert(end != s && *end == '\0' && errno == 0, "bad integer '%s' in field %d", s, i);
	return (uint64_t)v;
}

/* Space-separated doubles, every one of them; *out is malloc'ed. */
static size_t nums(const gu_row *r, int i, double **out)
{
	const char *s = gu_field(r, i);
	size_t n = gu_parse_doubles(s, out), words = 0;
	for (const char *p = s; *p; p++)
		words += *p != ' ' && (p == s || p[-1] == ' ');
	cr_assert_eq(n, words, "bad array element in field %d ('%.20s')", i, s);
	return n;
}

/* ----------------------------------------------------------- comparing */

static int near(double got, double want)
{
	if (isnan(want))
		return isnan(got);
	if (isinf(want))
		return got == want;
	return fabs(got - want) <= TOL * fmax(1.0, fabs(want));
}

/* near() and, for a value above 1e-290, also relatively close. */
static int near_rel(double got, double want)
{
	if (!near(got, want))
		return 0;
	if (isfinite(want) && fabs(want) > 1e-290)
		return fabs(got - want) <= REL_TOL * fabs(want);
	return 1;
}

#define EXPECT_NEAR(got, want, fmt, ...)                                                       \
	do {                                                                                   \
		double g_ = (got), w_ = (want);                                                \
		cr_expect(near(g_, w_), "got %.17g want %.17g: " fmt, g_, w_, __VA_ARGS__);    \
	} while (0)
#define EXPECT_NEAR_REL(got, want, fmt, ...)                                                   \
	do {                                                                                   \
		double g_ = (got), w_ = (want);                                                \
		cr_expect(near_rel(g_, w_), "got %.17g want %.17g (rel %.3g): " fmt, g_, w_,   \
			  fabs(g_ - w_) / fabs(w_), __VA_ARGS__);                              \
	} while (0)

/* ------------------------------------------------------ golden: scipy */

Test(stats_golden, special_functions)
{
	gu_table t = gu_table_load("stats/special.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *fn = gu_field(r, 0);
		double a = num(r, 1), b = num(r, 2), x = num(r, 3), want = num(r, 4), got;
		if (!strcmp(fn, "ibeta"))
			got = hsq_ibeta(a, b, x);
		else if (!strcmp(fn, "ibeta_inv"))
			got = hsq_ibeta_inv(a, b, x);
		else if (!strcmp(fn, "binom_pmf"))
			got = hsq_binom_pmf(a, b, x);
		else if (!strcmp(fn, "binom_cdf"))
			got = hsq_binom_cdf(a, b, x);
		else if (!strcmp(fn, "norm_cdf"))
			got = hsq_norm_cdf(a);
		else if (!strcmp(fn, "norm_quantile"))
			got = hsq_norm_quantile(a);
		else if (!strcmp(fn, "t_cdf"))
			got = hsq_t_cdf(a, b);
		else if (!strcmp(fn, "t_quantile"))
			got = hsq_t_quantile(a, b);
		else
			cr_assert_fail("unknown function '%s' in special.tsv", fn);
		EXPECT_NEAR_REL(got, want, "%s(%.17g, %.17g, %.17g)", fn, a, b, x);
	}
	gu_table_free(&t);
}

Test(stats_golden, mcnemar)
{
	gu_table t = gu_table_load("stats/mcnemar.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		uint64_t b = u64(r, 0), c = u64(r, 1);
		double p, pm;
		cr_assert_eq(hsq_mcnemar_exact(b, c, 0, &p), HSQ_OK, "%s", hsq_last_error());
		cr_assert_eq(hsq_mcnemar_exact(b, c, 1, &pm), HSQ_OK, "%s", hsq_last_error());
		EXPECT_NEAR_REL(p, num(r, 2), "exact mcnemar b=%llu c=%llu", (unsigned long long)b,
				(unsigned long long)c);
		EXPECT_NEAR_REL(pm, num(r, 3), "mid-p mcnemar b=%llu c=%llu", (unsigned long long)b,
				(unsigned long long)c);
	}
	gu_table_free(&t);
}

Test(stats_golden, tost)
{
	gu_table t = gu_table_load("stats/tost.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		uint64_t n = u64(r, 0), b = u64(r, 1), c = u64(r, 2);
		double margin = num(r, 3), alpha = num(r, 4);
		hsq_tost_result res;
		cr_assert_eq(hsq_tost_paired_binary(n, b, c, margin, alpha, &res), HSQ_OK, "%s",
			     hsq_last_error());
#define FMT "n=%llu b=%llu c=%llu margin=%g alpha=%g"
#define CASE (unsigned long long)n, (unsigned long long)b, (unsigned long long)c, margin, alpha
		EXPECT_NEAR(res.diff, num(r, 5), "diff " FMT, CASE);
		EXPECT_NEAR(res.se, num(r, 6), "se " FMT, CASE);
		EXPECT_NEAR_REL(res.p_lower, num(r, 7), "p_lower " FMT, CASE);
		EXPECT_NEAR_REL(res.p_upper, num(r, 8), "p_upper " FMT, CASE);
		EXPECT_NEAR_REL(res.p, num(r, 9), "p " FMT, CASE);
		EXPECT_NEAR(res.ci_low, num(r, 10), "ci_low " FMT, CASE);
		EXPECT_NEAR(res.ci_high, num(r, 11), "ci_high " FMT, CASE);
		cr_expect_eq(res.equivalent, (int)u64(r, 12), "equivalent " FMT, CASE);
#undef CASE
#undef FMT
	}
	gu_table_free(&t);
}

static void check_intervals(const char *file,
			    hsq_status (*fn)(uint64_t, uint64_t, double, hsq_interval *))
{
	gu_table t = gu_table_load(file);
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		uint64_t k = u64(r, 0), n = u64(r, 1);
		double alpha = num(r, 2);
		hsq_interval ci;
		cr_assert_eq(fn(k, n, alpha, &ci), HSQ_OK, "%s", hsq_last_error());
		EXPECT_NEAR_REL(ci.low, num(r, 3), "%s low k=%llu n=%llu alpha=%g", file,
				(unsigned long long)k, (unsigned long long)n, alpha);
		EXPECT_NEAR_REL(ci.high, num(r, 4), "%s high k=%llu n=%llu alpha=%g", file,
				(unsigned long long)k, (unsigned long long)n, alpha);
	}
	gu_table_free(&t);
}

Test(stats_golden, wilson)
{
	check_intervals("stats/wilson.tsv", hsq_wilson_interval);
}

Test(stats_golden, clopper_pearson)
{
	check_intervals("stats/clopper_pearson.tsv", hsq_clopper_pearson_interval);
}

Test(stats_golden, bootstrap)
{
	gu_table t = gu_table_load("stats/bootstrap.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		int stat = (int)u64(r, 0);
		uint64_t seed = u64(r, 1), B = u64(r, 2), n = u64(r, 4);
		double alpha = num(r, 3), *x, *y;
		cr_assert_eq(nums(r, 5, &x), n);
		cr_assert_eq(nums(r, 6, &y), n);
		hsq_boot_result res;
		hsq_status st = hsq_paired_bootstrap(x, y, n, (hsq_boot_stat)stat, B, alpha, seed,
						     &res);
		cr_assert_eq(st, HSQ_OK, "%s", hsq_last_error());
		EXPECT_NEAR(res.estimate, num(r, 7), "estimate row %zu", i);
		EXPECT_NEAR(res.low, num(r, 8), "low row %zu (stat %d seed %llu B %llu n %llu)",
			    i, stat, (unsigned long long)seed, (unsigned long long)B,
			    (unsigned long long)n);
		EXPECT_NEAR(res.high, num(r, 9), "high row %zu (stat %d seed %llu B %llu n %llu)",
			    i, stat, (unsigned long long)seed, (unsigned long long)B,
			    (unsigned long long)n);
		free(x);
		free(y);
	}
	gu_table_free(&t);
}

Test(stats_golden, noninferiority)
{
	gu_table t = gu_table_load("stats/noninferiority.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		double margin = num(r, 0), alpha = num(r, 1), *x, *y;
		uint64_t n = u64(r, 2);
		cr_assert_eq(nums(r, 3, &x), n);
		cr_assert_eq(nums(r, 4, &y), n);
		hsq_noninf_result res;
		cr_assert_eq(hsq_noninferiority_ratio(x, y, n, margin, alpha, &res), HSQ_OK, "%s",
			     hsq_last_error());
		EXPECT_NEAR(res.ratio, num(r, 5), "ratio row %zu", i);
		EXPECT_NEAR(res.upper, num(r, 6), "upper row %zu (n %llu alpha %g)", i,
			    (unsigned long long)n, alpha);
		EXPECT_NEAR(res.t, num(r, 7), "t row %zu", i);
		EXPECT_NEAR_REL(res.p, num(r, 8), "p row %zu (n %llu, t %g)", i,
				(unsigned long long)n, res.t);
		cr_expect_eq(res.df, (double)(n - 1));
		cr_expect_eq(res.non_inferior, (int)u64(r, 9), "non_inferior row %zu", i);
		free(x);
		free(y);
	}
	gu_table_free(&t);
}

Test(stats_golden, ks_exact)
{
	gu_table t = gu_table_load("stats/ks.tsv");
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		double *a, *b;
		size_t na = nums(r, 2, &a), nb = nums(r, 3, &b);
		cr_assert_eq(na, u64(r, 0));
		cr_assert_eq(nb, u64(r, 1));
		hsq_ks_result res;
		cr_assert_eq(hsq_ks_2samp(a, na, b, nb, &res), HSQ_OK, "%s", hsq_last_error());
		cr_expect_eq(res.exact, 1, "row %zu: exact branch", i);
		EXPECT_NEAR(res.d, num(r, 4), "ks d row %zu (%zu, %zu)", i, na, nb);
		EXPECT_NEAR_REL(res.p_value, num(r, 5), "ks p row %zu (%zu, %zu)", i, na, nb);
		free(a);
		free(b);
	}
	gu_table_free(&t);
}

/* -------------------------------------------------- argument checking */

#define EXPECT_INVALID(call, word)                                                             \
	do {                                                                                   \
		cr_expect_eq((call), HSQ_ERR_INVALID_ARG, "%s", #call);                        \
		cr_expect(strstr(hsq_last_error(), (word)) != NULL, "%s: message '%s' lacks '%s'", \
			  #call, hsq_last_error(), (word));                                    \
	} while (0)

Test(stats_args, mcnemar)
{
	double p;
	EXPECT_INVALID(hsq_mcnemar_exact(1, 2, 0, NULL), "p is null");
	EXPECT_INVALID(hsq_mcnemar_exact(UINT64_MAX, 2, 0, &p), "b + c");
	EXPECT_INVALID(hsq_mcnemar_exact((1ull << 53), 1, 0, &p), "b + c");
	cr_expect(isnan(p));
	cr_expect_eq(hsq_mcnemar_exact((1ull << 52), 0, 0, &p), HSQ_OK);
	cr_expect_eq(p, 0.0, "2^-(2^52) underflows to 0");
}

Test(stats_args, tost)
{
	hsq_tost_result r;
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, 0.05, 0.05, NULL), "out is null");
	EXPECT_INVALID(hsq_tost_paired_binary(0, 0, 0, 0.05, 0.05, &r), "n = 0");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 6, 5, 0.05, 0.05, &r), "b + c = 6 + 5");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 11, 0, 0.05, 0.05, &r), "exceed n = 10");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 3, UINT64_MAX, 0.05, 0.05, &r), "exceed n");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, -0.05, 0.05, &r), "margin -0.05");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, NAN, 0.05, &r), "margin nan");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, 1.5, 0.05, &r), "margin 1.5");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, 0.05, 0.0, &r), "alpha 0");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, 0.05, 0.5, &r), "alpha 0.5");
	EXPECT_INVALID(hsq_tost_paired_binary(10, 1, 1, 0.05, NAN, &r), "alpha nan");
}

Test(stats_args, proportions)
{
	hsq_interval ci;
	hsq_status (*fns[2])(uint64_t, uint64_t, double, hsq_interval *) = {
		hsq_wilson_interval, hsq_clopper_pearson_interval};
	for (int f = 0; f < 2; f++) {
		EXPECT_INVALID(fns[f](1, 2, 0.05, NULL), "out is null");
		EXPECT_INVALID(fns[f](0, 0, 0.05, &ci), "n = 0");
		cr_expect(isnan(ci.low) && isnan(ci.high));
		EXPECT_INVALID(fns[f](5, 4, 0.05, &ci), "k = 5 successes exceed n = 4");
		EXPECT_INVALID(fns[f](1, 4, 0.0, &ci), "alpha 0");
		EXPECT_INVALID(fns[f](1, 4, 1.0, &ci), "alpha 1");
		EXPECT_INVALID(fns[f](1, 4, -0.1, &ci), "alpha -0.1");
	}
	EXPECT_INVALID(hsq_clopper_pearson_interval(1, UINT64_MAX, 0.05, &ci), "above 2^53");
}

Test(stats_args, bootstrap)
{
	double x[3] = {1, 2, 3}, y[3] = {1, 0, 2}, bad[3] = {1, NAN, 2};
	hsq_boot_result r;
	EXPECT_INVALID(hsq_paired_bootstrap(x, x, 3, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, NULL),
		       "out is null");
	EXPECT_INVALID(hsq_paired_bootstrap(NULL, x, 3, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, &r),
		       "pointer x is null");
	EXPECT_INVALID(hsq_paired_bootstrap(x, NULL, 3, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, &r),
		       "pointer y is null");
	EXPECT_INVALID(hsq_paired_bootstrap(x, x, 0, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, &r),
		       "n = 0");
	EXPECT_INVALID(hsq_paired_bootstrap(x, x, 3, HSQ_BOOT_MEAN_DIFF, 0, 0.05, 1, &r),
		       "n_resamples = 0");
	EXPECT_INVALID(hsq_paired_bootstrap(x, x, 3, HSQ_BOOT_MEAN_DIFF, 10, 1.0, 1, &r),
		       "alpha 1");
	EXPECT_INVALID(hsq_paired_bootstrap(x, x, 3, (hsq_boot_stat)7, 10, 0.05, 1, &r),
		       "unknown statistic 7");
	EXPECT_INVALID(hsq_paired_bootstrap(x, y, 3, HSQ_BOOT_RATIO_OF_MEANS, 10, 0.05, 1, &r),
		       "y[1] = 0");
	EXPECT_INVALID(hsq_paired_bootstrap(bad, x, 3, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, &r),
		       "pair 1");
	cr_expect(isnan(r.estimate));
	/* The difference allows y <= 0. */
	cr_expect_eq(hsq_paired_bootstrap(x, y, 3, HSQ_BOOT_MEAN_DIFF, 10, 0.05, 1, &r), HSQ_OK);
}

Test(stats_args, noninferiority)
{
	double x[3] = {1, 2, 3}, z[3] = {1, 0, 2}, inf[3] = {1, INFINITY, 2};
	hsq_noninf_result r;
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 3, 0.05, 0.05, NULL), "out is null");
	EXPECT_INVALID(hsq_noninferiority_ratio(NULL, x, 3, 0.05, 0.05, &r), "pointer x is null");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, NULL, 3, 0.05, 0.05, &r), "pointer y is null");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 1, 0.05, 0.05, &r), "n = 1 pairs");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 0, 0.05, 0.05, &r), "n = 0 pairs");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 3, -0.01, 0.05, &r), "margin -0.01");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 3, INFINITY, 0.05, &r), "margin inf");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, x, 3, 0.05, 0.0, &r), "alpha 0");
	EXPECT_INVALID(hsq_noninferiority_ratio(x, z, 3, 0.05, 0.05, &r), "pair 1 (2, 0)");
	EXPECT_INVALID(hsq_noninferiority_ratio(inf, x, 3, 0.05, 0.05, &r), "pair 1 (inf, 2)");
}

Test(stats_args, special_domains)
{
	cr_expect(isnan(hsq_ibeta(0, 1, 0.5)));
	cr_expect(isnan(hsq_ibeta(1, -1, 0.5)));
	cr_expect(isnan(hsq_ibeta(1, 1, 1.5)));
	cr_expect(isnan(hsq_ibeta_inv(1, 1, -0.1)));
	cr_expect(isnan(hsq_binom_cdf(1.5, 3, 0.5)));
	cr_expect(isnan(hsq_binom_pmf(1, 3, 2)));
	cr_expect(isnan(hsq_t_cdf(1, 0)));
	cr_expect(isnan(hsq_t_quantile(0.5, -1)));
	cr_expect(isnan(hsq_norm_quantile(1.5)));
	cr_expect_eq(hsq_norm_quantile(0), -INFINITY);
	cr_expect_eq(hsq_t_quantile(1, 5), INFINITY);
	cr_expect_eq(hsq_ibeta(2, 3, 0), 0.0);
	cr_expect_eq(hsq_ibeta(2, 3, 1), 1.0);
}

/* ------------------------------------------------------------ properties */

Test(stats_props, mcnemar_symmetry_and_mid_p)
{
	for (uint64_t b = 0; b < 40; b += 3)
		for (uint64_t c = 0; c < 60; c += 7) {
			double p1, p2, m;
			cr_assert_eq(hsq_mcnemar_exact(b, c, 0, &p1), HSQ_OK);
			cr_assert_eq(hsq_mcnemar_exact(c, b, 0, &p2), HSQ_OK);
			cr_assert_eq(hsq_mcnemar_exact(b, c, 1, &m), HSQ_OK);
			cr_expect_eq(p1, p2, "b=%llu c=%llu", (unsigned long long)b,
				     (unsigned long long)c);
			cr_expect(m <= p1 && m > 0.0 && p1 <= 1.0, "b=%llu c=%llu: mid %g exact %g",
				  (unsigned long long)b, (unsigned long long)c, m, p1);
		}
	/* Small cases by hand: b=0, c=n: p = 2 / 2^n, mid-p = 1 / 2^n. */
	for (int n = 1; n < 30; n++) {
		double p, m;
		cr_assert_eq(hsq_mcnemar_exact(0, (uint64_t)n, 0, &p), HSQ_OK);
		cr_assert_eq(hsq_mcnemar_exact(0, (uint64_t)n, 1, &m), HSQ_OK);
		cr_expect_float_eq(p, fmin(1.0, ldexp(2.0, -n)), 1e-13 * p, "n=%d: %.17g", n, p);
		cr_expect_float_eq(m, fmin(1.0, ldexp(1.0, -n)), 1e-13 * m, "n=%d: %.17g", n, m);
	}
}

Test(stats_props, tost_flag_matches_interval)
{
	const uint64_t n = 400;
	for (uint64_t b = 0; b <= 60; b += 4)
		for (uint64_t c = 0; c <= 60; c += 5) {
			hsq_tost_result r;
			cr_assert_eq(hsq_tost_paired_binary(n, b, c, 0.05, 0.05, &r), HSQ_OK);
			int inside = r.ci_low > -0.05 && r.ci_high < 0.05;
			cr_expect_eq(r.equivalent, inside, "b=%llu c=%llu: ci [%g, %g], p %g",
				     (unsigned long long)b, (unsigned long long)c, r.ci_low,
				     r.ci_high, r.p);
			cr_expect(r.ci_low <= r.diff && r.diff <= r.ci_high);
		}
	/* The degenerate cases of the header. */
	hsq_tost_result r;
	cr_assert_eq(hsq_tost_paired_binary(50, 0, 0, 0.05, 0.05, &r), HSQ_OK);
	cr_expect(r.diff == 0.0 && r.se == 0.0 && r.p == 0.0 && r.equivalent);
	cr_assert_eq(hsq_tost_paired_binary(50, 0, 0, 0.0, 0.05, &r), HSQ_OK);
	cr_expect(r.p == 1.0 && !r.equivalent, "margin 0: never equivalent");
	cr_assert_eq(hsq_tost_paired_binary(50, 50, 0, 0.05, 0.05, &r), HSQ_OK);
	cr_expect(r.diff == -1.0 && r.se == 0.0 && r.p == 1.0 && !r.equivalent);
}

Test(stats_props, intervals_contain_estimate_and_nest)
{
	const uint64_t ns[] = {1, 3, 17, 100, 2500};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		uint64_t n = ns[i];
		double prev_lo = -1, prev_hi = -1;
		for (uint64_t k = 0; k <= n; k += n > 50 ? n / 25 : 1) {
			hsq_interval w, cp, cp90;
			double ph = (double)k / (double)n;
			cr_assert_eq(hsq_wilson_interval(k, n, 0.05, &w), HSQ_OK);
			cr_assert_eq(hsq_clopper_pearson_interval(k, n, 0.05, &cp), HSQ_OK);
			cr_assert_eq(hsq_clopper_pearson_interval(k, n, 0.10, &cp90), HSQ_OK);
			cr_expect(w.low <= ph && ph <= w.high && w.low >= 0 && w.high <= 1,
				  "wilson k=%llu n=%llu", (unsigned long long)k,
				  (unsigned long long)n);
			cr_expect(cp.low <= ph && ph <= cp.high, "cp k=%llu n=%llu",
				  (unsigned long long)k, (unsigned long long)n);
			cr_expect(cp.low <= cp90.low && cp90.high <= cp.high,
				  "the 90%% interval lies in the 95%% one: k=%llu n=%llu",
				  (unsigned long long)k, (unsigned long long)n);
			cr_expect(cp.low > prev_lo || k == 0, "cp low grows with k");
			cr_expect(cp.high > prev_hi, "cp high grows with k");
			prev_lo = cp.low;
			prev_hi = cp.high;
		}
		/* k = 0: the upper bound solves (1 - p)^n = alpha / 2. */
		hsq_interval cp;
		cr_assert_eq(hsq_clopper_pearson_interval(0, n, 0.05, &cp), HSQ_OK);
		double want = -expm1(log(0.025) / (double)n);
		cr_expect_float_eq(cp.high, want, 1e-13 * want, "n=%llu", (unsigned long long)n);
		cr_expect_eq(cp.low, 0.0);
		/* k = n: the lower bound solves p^n = alpha / 2. */
		cr_assert_eq(hsq_clopper_pearson_interval(n, n, 0.05, &cp), HSQ_OK);
		want = exp(log(0.025) / (double)n);
		cr_expect_float_eq(cp.low, want, 1e-13 * want, "n=%llu", (unsigned long long)n);
		cr_expect_eq(cp.high, 1.0);
	}
}

Test(stats_props, inverses_round_trip)
{
	const double ps[] = {1e-12, 1e-5, 0.01, 0.05, 0.3, 0.5, 0.77, 0.95, 0.999};
	const double ab[][2] = {{0.5, 0.5}, {1, 3}, {4, 2}, {30, 70}, {0.5, 400}, {2000, 0.5}};
	for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
		for (size_t j = 0; j < sizeof ab / sizeof ab[0]; j++) {
			double x = hsq_ibeta_inv(ab[j][0], ab[j][1], ps[i]);
			double back = hsq_ibeta(ab[j][0], ab[j][1], x);
			/* Within 2 ulps of the root (near x = 1 an ulp of x can move
			 * I_x by more than 1e-11 relative). */
			double below = hsq_ibeta(ab[j][0], ab[j][1], nextafter(nextafter(x, 0), 0));
			double above = hsq_ibeta(ab[j][0], ab[j][1], nextafter(nextafter(x, 2), 2));
			cr_expect(fabs(back - ps[i]) <= 1e-12 * ps[i] ||
					  (below <= ps[i] && ps[i] <= above),
				  "ibeta(%g, %g): p %g -> x %.17g -> %.17g", ab[j][0], ab[j][1],
				  ps[i], x, back);
		}
		const double nus[] = {1, 2.5, 9, 100, 20000};
		for (size_t j = 0; j < sizeof nus / sizeof nus[0]; j++) {
			double t = hsq_t_quantile(ps[i], nus[j]);
			double back = hsq_t_cdf(t, nus[j]);
			cr_expect(fabs(back - ps[i]) <= 1e-11 * ps[i],
				  "t(%g): p %g -> %.17g -> %.17g", nus[j], ps[i], t, back);
			if (ps[i] >= 0.01) /* 1 - p is exact enough */
				cr_expect(fabs(hsq_t_quantile(1.0 - ps[i], nus[j]) + t) <=
						  1e-12 * fabs(t),
					  "t(%g) symmetry at p %g", nus[j], ps[i]);
		}
		double z = hsq_norm_quantile(ps[i]);
		cr_expect(fabs(hsq_norm_cdf(z) - ps[i]) <= 1e-13 * ps[i], "norm: p %g", ps[i]);
	}
	/* Closed forms: I_x(a, 1) = x^a and I_x(1, b) = 1 - (1 - x)^b. */
	double x = hsq_ibeta_inv(3, 1, 1e-300);
	cr_expect(fabs(x - 1e-100) <= 1e-13 * 1e-100, "x^3 = 1e-300: %.17g", x);
	x = hsq_ibeta_inv(1, 50, 1e-9);
	double want = -expm1(log1p(-1e-9) / 50);
	cr_expect(fabs(x - want) <= 1e-13 * want, "1 - (1 - x)^50 = 1e-9: %.17g", x);
}

Test(stats_props, bootstrap_determinism)
{
	double x[40], y[40];
	for (int i = 0; i < 40; i++) {
		y[i] = 2.0 + 0.05 * (i % 7);
		x[i] = y[i] * (1.0 + 0.01 * ((i * 13) % 5));
	}
	hsq_boot_result a, b, c;
	cr_assert_eq(hsq_paired_bootstrap(x, y, 40, HSQ_BOOT_RATIO_OF_MEANS, 999, 0.05, 42, &a),
		     HSQ_OK);
	cr_assert_eq(hsq_paired_bootstrap(x, y, 40, HSQ_BOOT_RATIO_OF_MEANS, 999, 0.05, 42, &b),
		     HSQ_OK);
	cr_assert_eq(hsq_paired_bootstrap(x, y, 40, HSQ_BOOT_RATIO_OF_MEANS, 999, 0.05, 43, &c),
		     HSQ_OK);
	cr_expect(a.estimate == b.estimate && a.low == b.low && a.high == b.high, "same seed");
	cr_expect(a.low != c.low || a.high != c.high, "another seed");
	cr_expect(a.low < a.estimate && a.estimate < a.high, "[%g, %g] around %g", a.low, a.high,
		  a.estimate);
	cr_expect(a.low > 1.0, "x is above y everywhere: %g", a.low);
	/* Identical pairs: the difference is exactly 0 in every resample. */
	cr_assert_eq(hsq_paired_bootstrap(x, x, 40, HSQ_BOOT_MEAN_DIFF, 100, 0.1, 7, &a), HSQ_OK);
	cr_expect(a.estimate == 0.0 && a.low == 0.0 && a.high == 0.0);
}

Test(stats_props, noninferiority_constant_ratio_and_flag)
{
	/* s == 0 exactly: identical pairs, and two equal pairs. */
	double x[5], y[5] = {10, 11, 12, 13, 14};
	memcpy(x, y, sizeof x);
	hsq_noninf_result r;
	cr_assert_eq(hsq_noninferiority_ratio(x, y, 5, 0.05, 0.05, &r), HSQ_OK);
	cr_expect(r.t == -INFINITY && r.p == 0.0 && r.non_inferior && r.ratio == 1.0 &&
		  r.upper == 1.0, "t %g p %g", r.t, r.p);
	cr_assert_eq(hsq_noninferiority_ratio(x, y, 5, 0.0, 0.05, &r), HSQ_OK);
	cr_expect(isnan(r.t) && r.p == 1.0 && !r.non_inferior, "at the bound: t %g p %g", r.t, r.p);
	double x2[2] = {12, 12}, y2[2] = {10, 10};
	cr_assert_eq(hsq_noninferiority_ratio(x2, y2, 2, 0.05, 0.05, &r), HSQ_OK);
	cr_expect(r.t == INFINITY && r.p == 1.0 && !r.non_inferior, "t %g p %g", r.t, r.p);
	cr_expect_float_eq(r.ratio, 1.2, 1e-15);
	cr_assert_eq(hsq_noninferiority_ratio(x2, y2, 2, 0.25, 0.05, &r), HSQ_OK);
	cr_expect(r.t == -INFINITY && r.p == 0.0 && r.non_inferior, "t %g p %g", r.t, r.p);
	/* The flag agrees with the upper bound. */
	double u[30], v[30];
	for (int i = 0; i < 30; i++) {
		v[i] = 12.0 + (i * 7) % 11;
		u[i] = v[i] * (1.0 + 0.03 * (((i * 5) % 9) - 4) / 4.0 + 0.01);
	}
	const double margins[] = {0.0, 0.01, 0.02, 0.03, 0.05, 0.1};
	for (size_t j = 0; j < sizeof margins / sizeof margins[0]; j++) {
		cr_assert_eq(hsq_noninferiority_ratio(u, v, 30, margins[j], 0.05, &r), HSQ_OK);
		cr_expect_eq(r.non_inferior, r.upper < 1.0 + margins[j], "margin %g: p %g upper %g",
			     margins[j], r.p, r.upper);
	}
}

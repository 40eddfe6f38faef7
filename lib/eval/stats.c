/* stats.c - statistics for paired evaluation (see hsq_eval.h): exact
 * McNemar, TOST for paired proportions, Wilson and Clopper-Pearson
 * intervals, the paired percentile bootstrap and the non-inferiority test
 * of a ratio. The special functions are in stats_beta.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "hsq_eval.h"

#define MAX_EXACT_COUNT 9007199254740992ull /* 2^53: counts held exactly in a double */

static int alpha_ok(double alpha)
{
	return alpha > 0.0 && alpha < 1.0;
}

/* ---------------------------------------------------------- McNemar */

hsq_status hsq_mcnemar_exact(uint64_t b, uint64_t c, int mid_p, double *p)
{
	if (!p)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "mcnemar: the output pointer p is null");
	*p = NAN;
	if (b > MAX_EXACT_COUNT || c > MAX_EXACT_COUNT - b)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"mcnemar: b + c = %llu + %llu is above 2^53",
				(unsigned long long)b, (unsigned long long)c);
	if (b == c) {
		*p = 1.0; /* includes b + c == 0 */
		return HSQ_OK;
	}
	double n = (double)(b + c), k = (double)(b < c ? b : c);
	double cdf = hsq_binom_cdf(k, n, 0.5);
	double v = 2.0 * cdf;
	if (mid_p)
		v -= hsq_binom_pmf(k, n, 0.5);
	if (isnan(v))
		return hsq_fail(HSQ_ERR_INTERNAL, "mcnemar: the binomial tail did not converge for "
				"b = %llu, c = %llu", (unsigned long long)b, (unsigned long long)c);
	*p = v > 1.0 ? 1.0 : v < 0.0 ? 0.0 : v;
	return HSQ_OK;
}

/* -------------------------------------------------------------- TOST */

hsq_status hsq_tost_paired_binary(uint64_t n, uint64_t b, uint64_t c, double margin, double alpha,
				  hsq_tost_result *out)
{
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tost: the output pointer out is null");
	memset(out, 0, sizeof *out);
	if (n == 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tost: n = 0 pairs");
	if (n > MAX_EXACT_COUNT)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tost: n = %llu pairs is above 2^53",
				(unsigned long long)n);
	if (b > n || c > n - b)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"tost: discordant pairs b + c = %llu + %llu exceed n = %llu",
				(unsigned long long)b, (unsigned long long)c,
				(unsigned long long)n);
	if (!(margin >= 0.0 && margin <= 1.0))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tost: margin %g is not in [0, 1]", margin);
	if (!(alpha > 0.0 && alpha < 0.5))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tost: alpha %g is not in (0, 0.5)", alpha);

	double dn = (double)n, db = (double)b, dc = (double)c;
	double diff = (dc - db) / dn;
	double var = (db + dc) - (db - dc) * (db - dc) / dn;
	double se = var > 0.0 ? sqrt(var) / dn : 0.0;
	out->diff = diff;
	out->se = se;
	if (se == 0.0) {
		/* b = c = 0, or every pair discordant one way: d is exact. */
		out->p_lower = diff > -margin ? 0.0 : 1.0;
		out->p_upper = diff < margin ? 0.0 : 1.0;
		out->ci_low = out->ci_high = diff;
	} else {
		out->p_lower = hsq_norm_cdf(-(diff + margin) / se);
		out->p_upper = hsq_norm_cdf((diff - margin) / se);
		double z = -hsq_norm_quantile(alpha);
		out->ci_low = diff - z * se;
		out->ci_high = diff + z * se;
	}
	out->p = fmax(out->p_lower, out->p_upper);
	out->equivalent = out->p < alpha;
	return HSQ_OK;
}

/* ------------------------------------------------ binomial intervals */

static hsq_status check_proportion(const char *who, uint64_t k, uint64_t n, double alpha,
				   const hsq_interval *out)
{
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: the output pointer out is null", who);
	if (n == 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: n = 0 trials", who);
	if (n > MAX_EXACT_COUNT)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: n = %llu trials is above 2^53", who,
				(unsigned long long)n);
	if (k > n)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"%s: k = %llu successes exceed n = %llu trials", who,
				(unsigned long long)k, (unsigned long long)n);
	if (!alpha_ok(alpha))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: alpha %g is not in (0, 1)", who, alpha);
	return HSQ_OK;
}

hsq_status hsq_wilson_interval(uint64_t k, uint64_t n, double alpha, hsq_interval *out)
{
	hsq_status st = check_proportion("wilson interval", k, n, alpha, out);
	if (st != HSQ_OK) {
		if (out)
			out->low = out->high = NAN;
		return st;
	}
	double dn = (double)n, dk = (double)k;
	double z = -hsq_norm_quantile(0.5 * alpha);
	double z2 = z * z;
	double denom = 2.0 * (dn + z2);
	double center = (2.0 * dk + z2) / denom;
	double half = z / denom * sqrt(4.0 * dk * (dn - dk) / dn + z2);
	out->low = k == 0 ? 0.0 : center - half;
	out->high = k == n ? 1.0 : center + half;
	return HSQ_OK;
}

hsq_status hsq_clopper_pearson_interval(uint64_t k, uint64_t n, double alpha, hsq_interval *out)
{
	hsq_status st = check_proportion("clopper-pearson interval", k, n, alpha, out);
	if (st != HSQ_OK) {
		if (out)
			out->low = out->high = NAN;
		return st;
	}
	double dn = (double)n, dk = (double)k;
	/* low: I_low(k, n - k + 1) = alpha / 2; high: I_high(k + 1, n - k) =
	 * 1 - alpha / 2 (solved directly, not as 1 minus a root near 1, which
	 * would keep only the absolute precision of doubles near 1). */
	out->low = k == 0 ? 0.0 : hsq_ibeta_inv(dk, dn - dk + 1.0, 0.5 * alpha);
	out->high = k == n ? 1.0 : hsq_ibeta_inv(dk + 1.0, dn - dk, 1.0 - 0.5 * alpha);
	if (isnan(out->low) || isnan(out->high))
		return hsq_fail(HSQ_ERR_INTERNAL,
				"clopper-pearson interval: no convergence for k = %llu, n = %llu",
				(unsigned long long)k, (unsigned long long)n);
	return HSQ_OK;
}

/* --------------------------------------------------------- bootstrap */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform on 0..n-1 by rejection: r >= 2^64 mod n leaves a multiple of n. */
static uint64_t splitmix64_below(uint64_t *state, uint64_t n)
{
	uint64_t threshold = (0 - n) % n;
	for (;;) {
		uint64_t r = splitmix64(state);
		if (r >= threshold)
			return r % n;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* numpy.percentile(s, 100 q), method 'linear', on sorted s[0..m-1]. */
static double percentile_linear(const double *s, size_t m, double q)
{
	double h = (double)(m - 1) * q;
	double fl = floor(h);
	size_t i = (size_t)fl;
	if (i + 1 >= m)
		return s[m - 1];
	double t = h - fl, a = s[i], b = s[i + 1], diff = b - a;
	/* numpy's _lerp: a + diff t, or b - diff (1 - t) when t >= 0.5 */
	return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

static double boot_stat(hsq_boot_stat stat, double sx, double sy, double n)
{
	return stat == HSQ_BOOT_RATIO_OF_MEANS ? (sx / n) / (sy / n) : sx / n - sy / n;
}

hsq_status hsq_paired_bootstrap(const double *x, const double *y, size_t n, hsq_boot_stat stat,
				size_t n_resamples, double alpha, uint64_t seed,
				hsq_boot_result *out)
{
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: the output pointer out is null");
	out->estimate = out->low = out->high = NAN;
	if (!x || !y)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: the data pointer %s is null",
				!x ? "x" : "y");
	if (n == 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: n = 0 pairs");
	if (n_resamples == 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: n_resamples = 0");
	if (!alpha_ok(alpha))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: alpha %g is not in (0, 1)", alpha);
	if (stat != HSQ_BOOT_RATIO_OF_MEANS && stat != HSQ_BOOT_MEAN_DIFF)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "bootstrap: unknown statistic %d", (int)stat);
	double sx = 0.0, sy = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(x[i]) || !isfinite(y[i]))
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"bootstrap: pair %zu (%g, %g) is not finite", i, x[i],
					y[i]);
		if (stat == HSQ_BOOT_RATIO_OF_MEANS && !(y[i] > 0.0))
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"bootstrap: y[%zu] = %g is not > 0 (ratio of means)", i,
					y[i]);
		sx += x[i];
		sy += y[i];
	}
	double *s = malloc(sizeof(double) * n_resamples);
	if (!s)
		return hsq_fail(HSQ_ERR_NOMEM, "bootstrap: out of memory for %zu resamples",
				n_resamples);
	double dn = (double)n;
	uint64_t state = seed;
	for (size_t r = 0; r < n_resamples; r++) {
		double rx = 0.0, ry = 0.0;
		for (size_t i = 0; i < n; i++) {
			uint64_t j = splitmix64_below(&state, (uint64_t)n);
			rx += x[j];
			ry += y[j];
		}
		s[r] = boot_stat(stat, rx, ry, dn);
	}
	qsort(s, n_resamples, sizeof(double), cmp_double);
	out->estimate = boot_stat(stat, sx, sy, dn);
	out->low = percentile_linear(s, n_resamples, 0.5 * alpha);
	out->high = percentile_linear(s, n_resamples, 1.0 - 0.5 * alpha);
	free(s);
	return HSQ_OK;
}

/* --------------------------------------------------- non-inferiority */

hsq_status hsq_noninferiority_ratio(const double *x, const double *y, size_t n, double margin,
				    double alpha, hsq_noninf_result *out)
{
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"non-inferiority: the output pointer out is null");
	memset(out, 0, sizeof *out);
	out->p = NAN;
	if (!x || !y)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "non-inferiority: the data pointer %s is null",
				!x ? "x" : "y");
	if (n < 2)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"non-inferiority: n = %zu pairs, need at least 2", n);
	if (!(margin >= 0.0) || isinf(margin))
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"non-inferiority: margin %g is not finite and >= 0", margin);
	if (!alpha_ok(alpha))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "non-inferiority: alpha %g is not in (0, 1)",
				alpha);
	double sum = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (!(x[i] > 0.0) || !(y[i] > 0.0) || isinf(x[i]) || isinf(y[i]))
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"non-inferiority: pair %zu (%g, %g) is not finite and > 0",
					i, x[i], y[i]);
		sum += log(x[i]) - log(y[i]);
	}
	double dn = (double)n;
	double dbar = sum / dn, ss = 0.0;
	for (size_t i = 0; i < n; i++) {
		double e = (log(x[i]) - log(y[i])) - dbar;
		ss += e * e;
	}
	double sd = sqrt(ss / (dn - 1.0));
	double bound = log1p(margin);
	out->df = dn - 1.0;
	out->ratio = exp(dbar);
	if (sd == 0.0) {
		out->t = dbar < bound ? -INFINITY : dbar > bound ? INFINITY : NAN;
		out->p = dbar < bound ? 0.0 : 1.0;
		out->upper = out->ratio;
	} else {
		double sem = sd / sqrt(dn);
		out->t = (dbar - bound) / sem;
		out->p = hsq_t_cdf(out->t, out->df);
		double tq = -hsq_t_quantile(alpha, out->df); /* t_{1-alpha} */
		out->upper = exp(dbar + tq * sem);
		if (isnan(out->p) || isnan(tq))
			return hsq_fail(HSQ_ERR_INTERNAL,
					"non-inferiority: the t distribution did not converge "
					"(df %g)", out->df);
	}
	out->non_inferior = out->p < alpha;
	return HSQ_OK;
}

/* ks_test.c - two-sample Kolmogorov-Smirnov test.
 *
 * The study uses it per cell to compare the PCG64 and mt19937 runs: if the
 * two streams give samples of one distribution, a codec difference that
 * shows up in both is not implementation noise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "eval/ks_test.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double hsq_ks_limit_q(double lambda)
{
	if (lambda < 0.2)
		return 1.0; /* the series needs many terms here and sums to 1 - tiny */
	double sum = 0.0;
	for (int j = 1; j <= 100; j++) {
		double term = exp(-2.0 * j * j * lambda * lambda);
		sum += (j & 1) ? term : -term;
		if (term < 1e-17)
			break;
	}
	double q = 2.0 * sum;
	return q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
}

double hsq_ks_exact_p(size_t m, size_t n, uint64_t k)
{
	/* u[j] after row i: probability that a uniformly random monotone path
	 * from (0,0) to (i,j) stays strictly inside |i n - j m| < k. Each
	 * path to (i,j) is weighted 1/C(i+j, i), so the recursion is
	 * u(i,j) = (i u(i-1,j) + j u(i,j-1)) / (i + j). */
	double *u = calloc(n + 1, sizeof(double));
	if (!u)
		return NAN;
	u[0] = 1.0;
	for (size_t j = 1; j <= n; j++) {
		uint64_t dev = (uint64_t)j * m;
		u[j] = dev < k ? u[j - 1] : 0.0;
	}
	for (size_t i = 1; i <= m; i++) {
		uint64_t in = (uint64_t)i * n;
		u[0] = in < k ? u[0] : 0.0;
		for (size_t j = 1; j <= n; j++) {
			uint64_t jm = (uint64_t)j * m;
			uint64_t dev = in > jm ? in - jm : jm - in;
			if (dev >= k)
				u[j] = 0.0;
			else
				u[j] = ((double)i * u[j] + (double)j * u[j - 1]) / (double)(i + j);
		}
	}
	double p = 1.0 - u[n];
	free(u);
	return p < 0.0 ? 0.0 : p;
}

hsq_status hsq_ks_2samp(const double *a, size_t na, const double *b, size_t nb,
			hsq_ks_result *out)
{
	hsq_status st = HSQ_OK;
	double *sa = NULL, *sb = NULL;
	memset(out, 0, sizeof *out);
	if (na == 0 || nb == 0)
		return hsq_fail(HSQ_ERR_EMPTY_INPUT, "ks test: an empty sample (sizes %zu and %zu)", na,
				nb);
	sa = malloc(sizeof(double) * na);
	sb = malloc(sizeof(double) * nb);
	if (!sa || !sb) {
		st = hsq_fail(HSQ_ERR_NOMEM, "ks test: out of memory for samples of %zu and %zu", na,
			      nb);
		goto cleanup;
	}
	for (size_t i = 0; i < na; i++) {
		if (isnan(a[i])) {
			st = hsq_fail(HSQ_ERR_INVALID_ARG, "ks test: value %zu of the first sample is nan", i);
			goto cleanup;
		}
		sa[i] = a[i];
	}
	for (size_t i = 0; i < nb; i++) {
		if (isnan(b[i])) {
			st = hsq_fail(HSQ_ERR_INVALID_ARG, "ks test: value %zu of the second sample is nan", i);
			goto cleanup;
		}
		sb[i] = b[i];
	}
	qsort(sa, na, sizeof(double), cmp_double);
	qsort(sb, nb, sizeof(double), cmp_double);
	/* Walk the merged order; tied values advance together so that D is
	 * the supremum of the two step functions. In integer units:
	 * |F_a - F_b| = |i nb - j na| / (na nb). */
	size_t i = 0, j = 0;
	uint64_t kmax = 0;
	int ties = 0;
	while (i < na || j < nb) {
		double v;
		if (j >= nb || (i < na && sa[i] <= sb[j]))
			v = sa[i];
		else
			v = sb[j];
		int in_a = 0, in_b = 0;
		while (i < na && sa[i] == v) {
			i++;
			in_a = 1;
		}
		while (j < nb && sb[j] == v) {
			j++;
			in_b = 1;
		}
		if (in_a && in_b)
			ties = 1;
		uint64_t x = (uint64_t)i * nb, y = (uint64_t)j * na;
		uint64_t dev = x > y ? x - y : y - x;
		if (dev > kmax)
			kmax = dev;
	}
	out->d = (double)kmax / ((double)na * (double)nb);
	if (!ties && (double)na * (double)nb <= 1e6) {
		out->p_value = hsq_ks_exact_p(na, nb, kmax);
		if (isnan(out->p_value)) {
			st = hsq_fail(HSQ_ERR_NOMEM, "ks test: out of memory for the exact distribution");
			goto cleanup;
		}
		out->exact = 1;
	} else {
		double en = sqrt((double)na * (double)nb / ((double)na + (double)nb));
		out->p_value = hsq_ks_limit_q((en + 0.12 + 0.11 / en) * out->d);
		out->exact = 0;
	}
cleanup:
	free(sa);
	free(sb);
	return st;
}

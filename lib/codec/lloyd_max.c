/* lloyd_max.c - Lloyd-Max codebooks for the Gaussian and Beta coordinate
 * densities (see lloyd_max.h). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/lloyd_max.h"
#include "common/error.h"

#define GL_NODES 16
#define MAX_ITER 200000
#define TOL 1e-12
/* Over-relaxed Lloyd step: plain Lloyd (OMEGA 1) contracts the error by a
 * factor close to 1 - O(1/n^2) per sweep, so 256 levels took ~10^5 sweeps;
 * over-relaxation reaches the same fixed point in a fraction of that. */
#define OMEGA 1.8

typedef struct density_ctx {
	hsq_density kind;
	double dim;
	double expo;    /* Beta: (dim - 3) / 2 */
	double support; /* Beta: sqrt(dim); Gaussian: +inf */
	double norm;    /* Beta: 1 / integral of the unnormalised density */
	double gl_x[GL_NODES], gl_w[GL_NODES]; /* Gauss-Legendre on [-1, 1] */
} density_ctx;

/* Gauss-Legendre nodes by Newton's method on P_n. */
static void gauss_legendre(double *x, double *w, int n)
{
	for (int i = 0; i < n; i++) {
		double z = cos(M_PI * (i + 0.75) / (n + 0.5)), dp = 0.0;
		for (int it = 0; it < 100; it++) {
			double p0 = 1.0, p1 = z;
			for (int k = 2; k <= n; k++) {
				double p2 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / k;
				p0 = p1;
				p1 = p2;
			}
			dp = n * (z * p1 - p0) / (z * z - 1.0);
			double dz = p1 / dp;
			z -= dz;
			if (fabs(dz) < 1e-15)
				break;
		}
		x[i] = z;
		w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
	}
}

static double beta_pdf_unnorm(const density_ctx *c, double t)
{
	double u = 1.0 - t * t / c->dim;
	return u > 0.0 ? pow(u, c->expo) : 0.0;
}

/* Integral of the unnormalised Beta density over [a, b]: composite
 * Gauss-Legendre on pieces no wider than 0.25 standard deviations, which
 * is exact to ~1e-15 for this smooth integrand. */
static double beta_mass_unnorm(const density_ctx *c, double a, double b)
{
	if (b <= a)
		return 0.0;
	int pieces = (int)ceil((b - a) / 0.25);
	double h = (b - a) / pieces, sum = 0.0;
	for (int p = 0; p < pieces; p++) {
		double mid = a + (p + 0.5) * h, s = 0.0;
		for (int i = 0; i < GL_NODES; i++)
			s += c->gl_w[i] * beta_pdf_unnorm(c, mid + 0.5 * h * c->gl_x[i]);
		sum += 0.5 * h * s;
	}
	return sum;
}

/* Probability mass and first moment of [a, b] (either may be infinite). */
static void interval_moments(const density_ctx *c, double a, double b, double *m0, double *m1)
{
	if (c->kind == HSQ_DENSITY_GAUSSIAN) {
		const double r2 = M_SQRT1_2;
		double pa = isinf(a) ? 0.0 : exp(-0.5 * a * a) / sqrt(2.0 * M_PI);
		double pb = isinf(b) ? 0.0 : exp(-0.5 * b * b) / sqrt(2.0 * M_PI);
		/* erfc on the side away from the mean keeps tail masses accurate. */
		if (a >= 0.0)
			*m0 = 0.5 * (erfc(a * r2) - erfc(b * r2));
		else if (b <= 0.0)
			*m0 = 0.5 * (erfc(-b * r2) - erfc(-a * r2));
		else
			*m0 = 0.5 * (erf(b * r2) - erf(a * r2));
		*m1 = pa - pb;
		return;
	}
	a = fmax(a, -c->support);
	b = fmin(b, c->support);
	if (b <= a) {
		*m0 = *m1 = 0.0;
		return;
	}
	/* First moment in closed form: d/dt (1 - t^2/d)^(k+1) = -2(k+1)t/d (...)^k. */
	double k1 = c->expo + 1.0;
	double ua = fmax(0.0, 1.0 - a * a / c->dim), ub = fmax(0.0, 1.0 - b * b / c->dim);
	*m1 = c->norm * c->dim / (2.0 * k1) * (pow(ua, k1) - pow(ub, k1));
	*m0 = c->norm * beta_mass_unnorm(c, a, b);
}

/* Inverse normal CDF by bisection: only used to seed the iteration. */
static double normal_quantile(double p)
{
	double lo = -40.0, hi = 40.0;
	for (int i = 0; i < 200; i++) {
		double mid = 0.5 * (lo + hi);
		if (0.5 * erfc(-mid * M_SQRT1_2) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

hsq_status hsq_lloyd_max(hsq_density density, int dim, int bits, double *levels, double *mse)
{
	density_ctx c;
	memset(&c, 0, sizeof c);
	c.kind = density;
	if (density == HSQ_DENSITY_GAUSSIAN) {
		if (bits < 1 || bits > HSQ_LLOYD_MAX_BITS)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"lloyd-max: %d bits out of range 1..%d for the gaussian codebook",
					bits, HSQ_LLOYD_MAX_BITS);
		c.support = INFINITY;
	} else if (density == HSQ_DENSITY_BETA) {
		if (dim < 3 || dim > 4096)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"lloyd-max: dimension %d out of range 3..4096 for the beta codebook",
					dim);
		if (bits < 1 || bits > 4)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"lloyd-max: %d bits out of range 1..4 for the beta codebook", bits);
		c.dim = dim;
		c.expo = 0.5 * (dim - 3);
		c.support = sqrt((double)dim);
		gauss_legendre(c.gl_x, c.gl_w, GL_NODES);
		/* Z = sqrt(d) B(1/2, (d-1)/2); lgamma_r keeps this thread-safe. */
		int sg;
		double lz = 0.5 * log((double)dim) + lgamma_r(0.5, &sg) +
			    lgamma_r(0.5 * (dim - 1), &sg) - lgamma_r(0.5 * dim, &sg);
		c.norm = exp(-lz);
	} else {
		return hsq_fail(HSQ_ERR_INVALID_ARG, "lloyd-max: unknown density %d", (int)density);
	}

	int n = 1 << bits;
	double c_lv[256], thr[257];
	/* Start from the companding (high-resolution) solution: levels at the
	 * quantiles of f^(1/3), which for the Gaussian is N(0, 3). Lloyd's
	 * iteration then converges in few steps instead of thousands. */
	for (int k = 0; k < n; k++) {
		c_lv[k] = sqrt(3.0) * normal_quantile((k + 0.5) / n);
		if (fabs(c_lv[k]) > 0.95 * c.support)
			c_lv[k] = copysign(0.95 * c.support, c_lv[k]);
	}
	double m0[256], m1[256];
	int converged = 0;
	for (int it = 0; it < MAX_ITER && !converged; it++) {
		thr[0] = -c.support;
		thr[n] = c.support;
		for (int k = 1; k < n; k++)
			thr[k] = 0.5 * (c_lv[k - 1] + c_lv[k]);
		double moved = 0.0;
		for (int k = 0; k < n; k++) {
			interval_moments(&c, thr[k], thr[k + 1], &m0[k], &m1[k]);
			if (m0[k] <= 0.0)
				continue; /* empty cell: keep the level */
			double step = m1[k] / m0[k] - c_lv[k];
			moved = fmax(moved, fabs(step));
			c_lv[k] += OMEGA * step;
		}
		converged = moved < TOL;
	}
	if (!converged)
		return hsq_fail(HSQ_ERR_INTERNAL,
				"lloyd-max: no convergence for %d bits (dimension %d); please report",
				bits, dim);
	/* Symmetrise away the last rounding. */
	for (int k = 0; k < n / 2; k++) {
		double v = 0.5 * (c_lv[n - 1 - k] - c_lv[k]);
		c_lv[k] = -v;
		c_lv[n - 1 - k] = v;
	}
	if (mse) {
		/* E[(t - c(t))^2] = E[t^2] - sum_k P_k c_k^2 at the centroid
		 * condition; E[t^2] is 1 for both densities by construction. */
		double second = 1.0, captured = 0.0;
		for (int k = 1; k < n; k++)
			thr[k] = 0.5 * (c_lv[k - 1] + c_lv[k]);
		for (int k = 0; k < n; k++) {
			interval_moments(&c, thr[k], thr[k + 1], &m0[k], &m1[k]);
			captured += m0[k] * c_lv[k] * c_lv[k];
		}
		*mse = second - captured;
	}
	memcpy(levels, c_lv, sizeof(double) * (size_t)n);
	return HSQ_OK;
}

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* [density - 1][dim][bits]; Gaussian uses dim 0. Entries are never freed:
 * a codebook is a pure function of its key and small. */
static hsq_codebook *cache[2][HSQ_CODEC_MAX_DIM + 1][HSQ_LLOYD_MAX_BITS + 1];

hsq_status hsq_codebook_get(hsq_density density, int dim, int bits, const hsq_codebook **out)
{
	hsq_status st = HSQ_OK;
	hsq_codebook *cb = NULL;
	*out = NULL;
	if (density == HSQ_DENSITY_GAUSSIAN)
		dim = 0;
	else if (density != HSQ_DENSITY_BETA || dim < HSQ_CODEC_MIN_DIM || dim > HSQ_CODEC_MAX_DIM)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"codebook: density %d with dimension %d is not supported (dimension %d..%d)",
				(int)density, dim, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (bits < 1 || bits > HSQ_LLOYD_MAX_BITS)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "codebook: %d bits out of range 1..%d", bits,
				HSQ_LLOYD_MAX_BITS);
	pthread_mutex_lock(&cache_lock);
	hsq_codebook **slot = &cache[density - 1][dim][bits];
	if (*slot) {
		*out = *slot;
		goto cleanup;
	}
	cb = calloc(1, sizeof *cb);
	if (!cb) {
		st = hsq_fail(HSQ_ERR_NOMEM, "codebook: out of memory");
		goto cleanup;
	}
	double lv[256];
	st = hsq_lloyd_max(density, dim, bits, lv, &cb->mse);
	if (st != HSQ_OK)
		goto cleanup;
	cb->bits = bits;
	cb->n = 1 << bits;
	for (int k = 0; k < cb->n; k++)
		cb->level[k] = (float)lv[k];
	for (int k = 0; k + 1 < cb->n; k++)
		cb->threshold[k] = (float)(0.5 * (lv[k] + lv[k + 1]));
	*slot = cb;
	*out = cb;
	cb = NULL;
cleanup:
	pthread_mutex_unlock(&cache_lock);
	free(cb);
	return st;
}

/* stats_beta.c - special functions for the paired-evaluation statistics:
 * the binomial density in Loader's saddle-point form, the regularized
 * incomplete beta function and its inverse, the normal and Student t
 * distributions. No state, no allocation, no failure other than NaN.
 *
 * References: C. Loader, "Fast and accurate computation of binomial
 * probabilities" (2000), for the density; Numerical Recipes, section 6.4,
 * for the continued fraction of I_x(a, b). */
#include <float.h>
#include <math.h>

#include "hsq_eval.h"
#include "hsq_eval.h"

#define LN_SQRT_2PI 0.918938533204672741780329736406 /* log(sqrt(2 pi)) */
#define LN_2PI 1.837877066409345483560659472811      /* log(2 pi) */

/* stirlerr(n) = log(n!) - log(sqrt(2 pi n) (n / e)^n), n > 0. */
static double stirlerr(double n)
{
	if (n <= 15.0)
		return lgamma(n + 1.0) - (n + 0.5) * log(n) + n - LN_SQRT_2PI;
	/* Stirling's series: 1/12, 1/360, 1/1260, 1/1680, 1/1188 */
	const double s0 = 1.0 / 12.0, s1 = 1.0 / 360.0, s2 = 1.0 / 1260.0, s3 = 1.0 / 1680.0,
		     s4 = 1.0 / 1188.0;
	double nn = n * n;
	if (n > 500.0)
		return (s0 - s1 / nn) / n;
	if (n > 80.0)
		return (s0 - (s1 - s2 / nn) / nn) / n;
	if (n > 35.0)
		return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n;
	return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n;
}

/* bd0(x, m) = x log(x / m) + m - x >= 0, without cancellation when x ~ m. */
static double bd0(double x, double m)
{
	if (fabs(x - m) < 0.1 * (x + m)) {
		double v = (x - m) / (x + m);
		double s = (x - m) * v;
		double ej = 2.0 * x * v;
		double v2 = v * v;
		for (int j = 1; j < 1000; j++) {
			ej *= v2;
			double s1 = s + ej / (2 * j + 1);
			if (s1 == s)
				return s1;
			s = s1;
		}
	}
	return x * log(x / m) + m - x;
}

/* Gamma(a + b + 1) / (Gamma(a + 1) Gamma(b + 1)) x^a y^b for a, b > 0,
 * x + y = 1 (both passed, so that a tiny one keeps its precision). */
static double binom_term(double a, double b, double x, double y)
{
	if (x <= 0.0 || y <= 0.0)
		return 0.0;
	double n = a + b;
	double lc = stirlerr(n) - stirlerr(a) - stirlerr(b) - bd0(a, n * x) - bd0(b, n * y);
	double lf = LN_2PI + log(a) + log(b) - log(n);
	return exp(lc - 0.5 * lf);
}

/* Continued fraction for I_x(a, b) (modified Lentz), to be multiplied by
 * x^a y^b / (a B(a, b)); converges fast for x < (a + 1) / (a + b + 2).
 * NaN if it does not converge. */
static double beta_cf(double a, double b, double x)
{
	const double tiny = 1e-300, eps = 1e-16;
	double qab = a + b, qap = a + 1.0, qam = a - 1.0;
	double c = 1.0, d = 1.0 - qab * x / qap;
	if (fabs(d) < tiny)
		d = tiny;
	d = 1.0 / d;
	double h = d;
	/* The worst case needs O(sqrt(max(a, b))) terms. */
	double cap = 1000.0 + 20.0 * sqrt(fmax(a, b));
	long max_it = cap > 2e9 ? 2000000000L : (long)cap;
	for (long m = 1; m <= max_it; m++) {
		double dm = (double)m, m2 = 2.0 * dm;
		double aa = dm * (b - dm) * x / ((qam + m2) * (a + m2));
		d = 1.0 + aa * d;
		if (fabs(d) < tiny)
			d = tiny;
		c = 1.0 + aa / c;
		if (fabs(c) < tiny)
			c = tiny;
		d = 1.0 / d;
		h *= d * c;
		aa = -(a + dm) * (qab + dm) * x / ((a + m2) * (qap + m2));
		d = 1.0 + aa * d;
		if (fabs(d) < tiny)
			d = tiny;
		c = 1.0 + aa / c;
		if (fabs(c) < tiny)
			c = tiny;
		d = 1.0 / d;
		double del = d * c;
		h *= del;
		if (fabs(del - 1.0) < eps)
			return h;
	}
	return NAN;
}

/* I_x(a, b) with y = 1 - x given separately. */
static double ibeta_xy(double a, double b, double x, double y)
{
	if (x <= 0.0)
		return 0.0;
	if (y <= 0.0)
		return 1.0;
	/* x^a y^b / B(a, b) = binom_term * a b / (a + b) */
	double t = binom_term(a, b, x, y);
	if (x < (a + 1.0) / (a + b + 2.0))
		return t * (b / (a + b)) * beta_cf(a, b, x);
	return 1.0 - t * (a / (a + b)) * beta_cf(b, a, y);
}

/* The Beta(a, b) density at x (y = 1 - x). */
static double beta_pdf_xy(double a, double b, double x, double y)
{
	return binom_term(a, b, x, y) * (a * b / (a + b)) / (x * y);
}

double hsq_ibeta(double a, double b, double x)
{
	if (!(a > 0.0) || !(b > 0.0) || !(x >= 0.0 && x <= 1.0) || isinf(a) || isinf(b))
		return NAN;
	return ibeta_xy(a, b, x, 1.0 - x);
}

/* The root x of I_x(a, b) = p for 0 < p < 1, by Newton's method kept inside
 * a bracket (bisection, geometric when the bracket spans decades, when a
 * step leaves it). A root near 1 is resolved to the spacing of doubles
 * there (1.1e-16 absolute): callers that need 1 - x precisely solve the
 * complementary problem I_y(b, a) = 1 - p instead. */
static double ibeta_solve(double a, double b, double p)
{
	double lo = 0.0, hi = 1.0;
	double mean = a / (a + b);
	double x = mean;
	/* Starting point: the small-x (or small-y) form of I_x. */
	double lbeta = lgamma(a) + lgamma(b) - lgamma(a + b);
	if (p < 0.5) {
		double g = exp((log(p) + log(a) + lbeta) / a);
		if (g > 0.0 && g < mean)
			x = g;
	} else {
		double g = exp((log1p(-p) + log(b) + lbeta) / b);
		if (g > 0.0 && g < 1.0 - mean)
			x = 1.0 - g;
	}
	/* Above 1/2 the target is the upper tail 1 - p (exact there), matched
	 * by I_y(b, a), not by 1 - I_x(a, b) rounded near 1. */
	int upper = p > 0.5;
	double q = 1.0 - p;
	int fine = 0;
	for (int it = 0; it < 1000; it++) {
		double y = 1.0 - x;
		double f = upper ? q - ibeta_xy(b, a, y, x) : ibeta_xy(a, b, x, y) - p;
		if (isnan(f))
			return NAN;
		if (f == 0.0)
			return x;
		if (f < 0.0)
			lo = x;
		else
			hi = x;
		double dens = beta_pdf_xy(a, b, x, y);
		double dx = dens > 0.0 && isfinite(dens) ? f / dens : NAN;
		if (isfinite(dx)) {
			/* A Newton step of at most two ulps: converged (the error
			 * left is of the order of its square). */
			if (fabs(dx) <= 4e-16 * x)
				return x - dx;
			double xn = x - dx;
			if (xn > lo && xn < hi) {
				/* Steps below 1e-13 relative are at the noise of
				 * I_x: a few of them end the search too. */
				if (fabs(dx) <= 1e-13 * x && ++fine >= 3)
					return xn;
				x = xn;
				continue;
			}
		}
		/* The step left the bracket: bisect it, geometrically when it
		 * spans decades. */
		if (hi - lo <= 4e-16 * hi)
			return 0.5 * (lo + hi);
		if (lo > 0.0 && hi > 8.0 * lo)
			x = sqrt(lo * hi);
		else if (lo == 0.0)
			x = hi / 16.0;
		else
			x = 0.5 * (lo + hi);
	}
	return x;
}

double hsq_ibeta_inv(double a, double b, double p)
{
	if (!(a > 0.0) || !(b > 0.0) || !(p >= 0.0 && p <= 1.0) || isinf(a) || isinf(b))
		return NAN;
	if (p == 0.0)
		return 0.0;
	if (p == 1.0)
		return 1.0;
	return ibeta_solve(a, b, p);
}

static int is_count(double v)
{
	return v >= 0.0 && v <= 9007199254740992.0 && v == floor(v);
}

double hsq_binom_pmf(double k, double n, double p)
{
	if (!is_count(k) || !is_count(n) || !(p >= 0.0 && p <= 1.0))
		return NAN;
	if (k > n)
		return 0.0;
	double q = 1.0 - p;
	if (p == 0.0)
		return k == 0.0 ? 1.0 : 0.0;
	if (q == 0.0)
		return k == n ? 1.0 : 0.0;
	if (k == 0.0) {
		if (n == 0.0)
			return 1.0;
		return exp(p < 0.1 ? -bd0(n, n * q) - n * p : n * log(q));
	}
	if (k == n)
		return exp(q < 0.1 ? -bd0(n, n * p) - n * q : n * log(p));
	return binom_term(k, n - k, p, q);
}

double hsq_binom_cdf(double k, double n, double p)
{
	if (!is_count(k) || !is_count(n) || !(p >= 0.0 && p <= 1.0))
		return NAN;
	if (k >= n)
		return 1.0;
	/* P(X <= k) = I_{1-p}(n - k, k + 1) */
	return ibeta_xy(n - k, k + 1.0, 1.0 - p, p);
}

double hsq_norm_cdf(double x)
{
	return 0.5 * erfc(-x / M_SQRT2);
}

double hsq_norm_quantile(double p)
{
	if (!(p >= 0.0 && p <= 1.0))
		return NAN;
	if (p == 0.0)
		return -INFINITY;
	if (p == 1.0)
		return INFINITY;
	if (p > 0.5)
		return -hsq_norm_quantile(1.0 - p); /* 1 - p is exact here */
	if (p == 0.5)
		return 0.0;
	/* Abramowitz-Stegun 26.2.23 (error < 4.5e-4), then Halley steps on
	 * the lower tail 0.5 erfc(-x / sqrt 2), accurate in relative terms. */
	double t = sqrt(-2.0 * log(p));
	double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
				 (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
	for (int it = 0; it < 8; it++) {
		double e = hsq_norm_cdf(x) - p;
		double u = e * sqrt(2.0 * M_PI) * exp(0.5 * x * x);
		double dx = u / (1.0 + 0.5 * x * u);
		x -= dx;
		if (fabs(dx) <= 1e-16 * fabs(x))
			break;
	}
	return x;
}

double hsq_t_cdf(double t, double nu)
{
	if (isnan(t) || !(nu > 0.0))
		return NAN;
	if (isinf(t))
		return t < 0.0 ? 0.0 : 1.0;
	double tt = t * t;
	double x, y; /* x = nu / (nu + t^2), y = t^2 / (nu + t^2) */
	if (isinf(tt) || isinf(nu + tt)) {
		x = 0.0;
		y = 1.0;
	} else {
		x = nu / (nu + tt);
		y = tt / (nu + tt);
	}
	double tail = isinf(nu) ? hsq_norm_cdf(-fabs(t)) : 0.5 * ibeta_xy(0.5 * nu, 0.5, x, y);
	return t < 0.0 ? tail : 1.0 - tail;
}

double hsq_t_quantile(double p, double nu)
{
	if (!(p >= 0.0 && p <= 1.0) || !(nu > 0.0))
		return NAN;
	if (p == 0.0)
		return -INFINITY;
	if (p == 1.0)
		return INFINITY;
	if (p == 0.5)
		return 0.0;
	if (isinf(nu))
		return hsq_norm_quantile(p);
	double tail = p < 0.5 ? p : 1.0 - p; /* 1 - p is exact for p >= 0.5 */
	double t;
	/* |t| = sqrt(nu y / (1 - y)) with I_y(1/2, nu/2) = 1 - 2 tail; when y
	 * comes out above 1/2, solve for x = 1 - y instead, where
	 * I_x(nu/2, 1/2) = 2 tail keeps the precision of a small tail. */
	double y = hsq_ibeta_inv(0.5, 0.5 * nu, 1.0 - 2.0 * tail);
	if (y <= 0.5) {
		t = sqrt(nu * y / (1.0 - y));
	} else {
		double x = hsq_ibeta_inv(0.5 * nu, 0.5, 2.0 * tail);
		t = sqrt(nu * (1.0 - x) / x);
	}
	if (isnan(t))
		return NAN;
	/* Polish with Newton steps on the lower tail, where hsq_t_cdf is
	 * accurate in relative terms: the forms above lose the precision of
	 * 1 - 2 tail or of 1 - x in some corners. */
	t = -t;
	for (int it = 0; it < 4 && t < 0.0; it++) {
		double tt = t * t, xs = nu / (nu + tt), ys = tt / (nu + tt);
		/* density of T from that of Y = T^2 / (nu + T^2) ~ Beta(1/2, nu/2) */
		double pdf = beta_pdf_xy(0.5, 0.5 * nu, ys, xs) * -t * xs / (nu + tt);
		if (!(pdf > 0.0) || !isfinite(pdf))
			break;
		double dt = (hsq_t_cdf(t, nu) - tail) / pdf;
		t -= dt;
		if (fabs(dt) <= 1e-16 * fabs(t))
			break;
	}
	return p < 0.5 ? t : -t;
}

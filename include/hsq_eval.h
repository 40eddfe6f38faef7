/*
 * hsq_eval.h - the evaluation wing: paired statistics, the codec study on
 * synthetic regimes, codec metrics, the two-sample KS test and the
 * findings of the codec seed.
 *
 * Built as libhsq-eval.a, linked into hsq-eval, the benchmarks and the
 * tests, and not installed: the runtime never calls it. Like the rest of
 * libhsq it never prints and never exits.
 */
#ifndef HSQ_EVAL_H
#define HSQ_EVAL_H

#include "hsq.h"
#include "hsq_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================ paired statistics
 *
 * Is method A (say, a compressed KV cache) as good as method B (the full
 * cache) on the same documents and questions? Those that can fail return an
 * hsq_status (HSQ_ERR_INVALID_ARG for a value out of range, with a
 * lowercase detail naming it in hsq_last_error(); HSQ_ERR_NOMEM; or
 * HSQ_ERR_INTERNAL if a numerical routine fails to converge, which is a
 * bug). The special functions at the end return NaN for arguments outside
 * their domain instead.
 *
 * The set:
 *   hsq_mcnemar_exact            paired binary outcomes: any difference?
 *   hsq_tost_paired_binary       paired binary outcomes: equivalent within a margin?
 *   hsq_wilson_interval          interval for one proportion (score)
 *   hsq_clopper_pearson_interval interval for one proportion (exact)
 *   hsq_paired_bootstrap         interval for a ratio or difference of paired means
 *   hsq_noninferiority_ratio     paired positive data: ratio below 1 + margin?
 *   hsq_ks_2samp (below)         two-sample Kolmogorov-Smirnov test: exact
 *                                lattice-path p-value when the samples have no
 *                                ties across them and na*nb <= 10^6, else
 *                                Kolmogorov's limit with Stephens' correction
 *                                (which differs from scipy's asymptotic form).
 *
 * Every result is checked against scipy in tests/unit/test_stats.c (golden
 * files in tests/golden/stats/, written by tests/ref/make_stats_golden.py).
 */

/* ----------------------------------------------- paired binary outcomes */

/* Exact two-sided McNemar test from the discordant counts: b pairs where
 * A succeeds and B fails, c pairs where A fails and B succeeds. With
 * k = min(b, c) and X ~ Binomial(b + c, 1/2):
 *   mid_p == 0: p = min(1, 2 P(X <= k))                 (the exact test)
 *   mid_p != 0: p = min(1, 2 (P(X <= k) - P(X = k) / 2)) (mid-p variant)
 * b + c == 0 gives p = 1 (either way); b == c gives 1. Concordant pairs do
 * not enter. Relative accuracy about 1e-12 (p down to the smallest normal
 * double; below that it underflows to 0). The continued fraction behind it
 * needs at most O(sqrt(b + c)) terms (microseconds even near 2^53).
 * b + c must be at most 2^53 (HSQ_ERR_INVALID_ARG otherwise). */
hsq_status hsq_mcnemar_exact(uint64_t b, uint64_t c, int mid_p, double *p);

typedef struct hsq_tost_result {
	double diff;    /* d = (c - b) / n: success rate of B minus that of A */
	double se;      /* sqrt((b + c) - (b - c)^2 / n) / n */
	double p_lower; /* H0: d <= -margin, one-sided z test */
	double p_upper; /* H0: d >= +margin, one-sided z test */
	double p;       /* max(p_lower, p_upper): the TOST p-value */
	double ci_low;  /* the (1 - 2 alpha) confidence interval of d: */
	double ci_high; /*   d -+ z_{1-alpha} se */
	int equivalent; /* p < alpha (the CI then lies inside (-margin, margin)) */
} hsq_tost_result;

/* Two one-sided tests (TOST) of equivalence for paired binary outcomes:
 * n pairs, of which b have A success / B failure and c have A failure /
 * B success. The difference d = (c - b) / n is in proportion units and has
 * the matched-pairs Wald standard error se above; the tests are
 *   p_lower = P(Z >= (d + margin) / se),  p_upper = P(Z <= (d - margin) / se)
 * with Z standard normal. margin is in proportion units (0.05 = five
 * percentage points), in [0, 1]; alpha in (0, 0.5).
 * Degenerate case: se == 0 happens only when b = c = 0 (d = 0) or when all
 * n pairs are discordant one way (d = -1 or +1). d is then taken as exact:
 * p_lower = (d > -margin ? 0 : 1), p_upper = (d < margin ? 0 : 1) and the
 * interval is [d, d]; so with no discordant pairs, equivalent iff
 * margin > 0 (p = 0). Refused: out NULL, n == 0, b + c > n, n > 2^53. */
hsq_status hsq_tost_paired_binary(uint64_t n, uint64_t b, uint64_t c, double margin, double alpha,
				  hsq_tost_result *out);

/* --------------------------------------------- one binomial proportion */

typedef struct hsq_interval {
	double low, high;
} hsq_interval;

/* Wilson score interval for k successes in n trials, two-sided, confidence
 * 1 - alpha (no continuity correction; scipy's proportion_ci 'wilson'):
 *   z = z_{1-alpha/2}, center = (2k + z^2) / (2 (n + z^2)),
 *   half = z / (2 (n + z^2)) sqrt(4 k (n - k) / n + z^2).
 * k == 0 gives low = 0 exactly, k == n gives high = 1 exactly.
 * Refused: out NULL, n == 0, k > n, alpha not in (0, 1). */
hsq_status hsq_wilson_interval(uint64_t k, uint64_t n, double alpha, hsq_interval *out);

/* Clopper-Pearson (exact) interval for k successes in n trials, two-sided,
 * confidence 1 - alpha: low = the alpha/2 quantile of Beta(k, n - k + 1),
 * high = the 1 - alpha/2 quantile of Beta(k + 1, n - k). k == 0 gives
 * low = 0, k == n gives high = 1. Accurate to about 1e-13 relative. Same
 * refusals as hsq_wilson_interval; also n > 2^53. */
hsq_status hsq_clopper_pearson_interval(uint64_t k, uint64_t n, double alpha, hsq_interval *out);

/* ---------------------------------------------------- paired bootstrap */

typedef enum hsq_boot_stat {
	HSQ_BOOT_RATIO_OF_MEANS = 0, /* mean(x) / mean(y); every y[i] must be > 0 */
	HSQ_BOOT_MEAN_DIFF = 1,      /* mean(x) - mean(y) */
} hsq_boot_stat;

typedef struct hsq_boot_result {
	double estimate; /* the statistic on the data as given */
	double low;      /* percentile interval at confidence 1 - alpha: the */
	double high;     /*   alpha/2 and 1 - alpha/2 percentiles of the resamples */
} hsq_boot_result;

/* Paired percentile bootstrap: pairs (x[i], y[i]), i < n (e.g. per-document
 * NLL of a method and of the baseline) are resampled together. Exactly:
 *   state = seed;
 *   splitmix64: state += 0x9e3779b97f4a7c15;
 *               z = state; z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
 *               z = (z ^ (z >> 27)) * 0x94d049bb133111eb; r = z ^ (z >> 31)
 *   an index below n: draw r until r >= (2^64 - n) mod n, take r mod n;
 *   for each of the n_resamples resamples, draw n indices j in turn and
 *   sum sx += x[j], sy += y[j] in that order; the statistic is
 *   (sx / n) / (sy / n) or sx / n - sy / n.
 * The interval is taken on the sorted statistics s[0..B-1] like
 * numpy.percentile's default ('linear'): h = (B - 1) q, i = floor(h),
 * value = s[i] + (h - i) (s[i+1] - s[i]). Deterministic for a given seed.
 * Refused: NULL pointers, n == 0, n_resamples == 0, alpha not in (0, 1),
 * a non-finite value, y[i] <= 0 for the ratio, an unknown stat. */
hsq_status hsq_paired_bootstrap(const double *x, const double *y, size_t n, hsq_boot_stat stat,
				size_t n_resamples, double alpha, uint64_t seed,
				hsq_boot_result *out);

/* ------------------------------------------------ non-inferiority ratio */

typedef struct hsq_noninf_result {
	double ratio;     /* exp(dbar): the geometric mean of x[i] / y[i] */
	double upper;     /* one-sided (1 - alpha) upper bound of the ratio: */
			  /*   exp(dbar + t_{1-alpha,n-1} s / sqrt n) */
	double t;         /* (dbar - log(1 + margin)) / (s / sqrt n) */
	double p;         /* P(T_{n-1} <= t), the one-sided p-value */
	double df;        /* n - 1 */
	int non_inferior; /* p < alpha (then upper < 1 + margin) */
} hsq_noninf_result;

/* One-sided paired non-inferiority test for a ratio of positive values
 * (e.g. per-document perplexity x of the method and y of the baseline):
 * H0: ratio >= 1 + margin against H1: ratio < 1 + margin, on logs:
 * d_i = log x_i - log y_i, dbar their mean, s their standard deviation
 * (divisor n - 1), t as above, Student t with n - 1 degrees of freedom.
 * margin is relative (0.05 = 5 %), >= 0; alpha in (0, 1). If s == 0 (all
 * ratios equal): t = -inf, p = 0 when dbar < log(1 + margin); t = +inf,
 * p = 1 when above; t = NaN, p = 1 when equal; upper = ratio.
 * Refused: NULL pointers, n < 2, x[i] or y[i] not finite and > 0, margin
 * not finite or < 0, alpha not in (0, 1). */
hsq_status hsq_noninferiority_ratio(const double *x, const double *y, size_t n, double margin,
				    double alpha, hsq_noninf_result *out);

/* ---------------------------------------------------- special functions */

/* These never fail loudly: an argument outside the domain, or (a bug) a
 * continued fraction that does not converge, gives NaN. */

/* The regularized incomplete beta function I_x(a, b), a > 0, b > 0,
 * 0 <= x <= 1, by the continued fraction (modified Lentz); the prefactor
 * x^a (1-x)^b / B(a, b) by Loader's saddle-point form, so that it stays
 * accurate for large a and b. Relative accuracy about 1e-13. */
double hsq_ibeta(double a, double b, double x);
/* The x in [0, 1] with I_x(a, b) = p, by safeguarded Newton, to about 1e-13
 * relative (a root near 1: to the spacing of doubles there, 1.1e-16; for a
 * precise 1 - x, solve I_y(b, a) = 1 - p); p = 0 gives 0, p = 1 gives 1. */
double hsq_ibeta_inv(double a, double b, double p);
/* Binomial(n, p): P(X = k) and P(X <= k), for integers 0 <= k, n <= 2^53
 * (k > n: pmf 0, cdf 1) and 0 <= p <= 1. */
double hsq_binom_pmf(double k, double n, double p);
double hsq_binom_cdf(double k, double n, double p);
/* Standard normal CDF and quantile (p in (0, 1); 0 and 1 give -inf, +inf).
 * The lower tail is accurate in relative terms. */
double hsq_norm_cdf(double x);
double hsq_norm_quantile(double p);
/* Student t with nu > 0 degrees of freedom: CDF P(T <= t), and its inverse
 * (p in (0, 1); 0 and 1 give -inf, +inf). */
double hsq_t_cdf(double t, double nu);
double hsq_t_quantile(double p, double nu);

/* --------------------------------------------- two-sample KS statistics */

typedef struct hsq_ks_result {
	double d;       /* sup_x |F_a(x) - F_b(x)|, in [0, 1] */
	double p_value; /* two-sided, H0: both samples from one distribution */
	int exact;      /* 1: exact lattice-path p-value; 0: asymptotic */
} hsq_ks_result;

/* Two-sample Kolmogorov-Smirnov test. Exact when na*nb <= 10^6 and the
 * samples have no ties across them, else Kolmogorov's limit law with
 * Stephens' small-sample correction. NaNs are refused. */
hsq_status hsq_ks_2samp(const double *a, size_t na, const double *b, size_t nb,
			hsq_ks_result *out);

/* ---------------------------------------------------- synthetic regimes */

typedef enum hsq_regime {
	HSQ_REGIME_ISOTROPIC = 0,     /* N(0, I) */
	HSQ_REGIME_HEAVY_TAIL = 1,    /* iid Student t (nu = 3), unit variance */
	HSQ_REGIME_LOW_RANK = 2,      /* rank 8 + noise, K and V in independent subspaces */
	HSQ_REGIME_KV_ALIGNED = 3,    /* rank 8 + noise, K and V share a subspace */
	HSQ_REGIME_KV_MISALIGNED = 4, /* rank 8 + noise, K and V orthogonal subspaces */
	HSQ_REGIME_DECAY_FAST = 5,    /* eigenvalues 0.9^i in a random basis */
	HSQ_REGIME_DECAY_SLOW = 6,    /* eigenvalues 0.99^i in a random basis */
	HSQ_REGIME_SHIFT = 7,         /* calibration and test subspaces differ */
} hsq_regime;
#define HSQ_N_REGIMES 8

const char *hsq_regime_name(hsq_regime regime); /* "isotropic", "heavy-tail", ... */
const char *hsq_regime_description(hsq_regime regime);
hsq_status hsq_regime_parse(const char *name, hsq_regime *out);

typedef struct hsq_regime_shape {
	int dim;          /* values per vector */
	int n_calib;      /* calibration rows per path (K and V separately) */
	int n_test;       /* test tokens */
	int n_query;      /* queries */
	double score_std; /* queries are scaled so q.k/sqrt(dim) has this std */
} hsq_regime_shape;

typedef struct hsq_regime_data {
	hsq_regime_shape shape;
	float *k_calib, *v_calib; /* n_calib x dim each */
	float *k, *v;             /* n_test x dim each */
	float *q;                 /* n_query x dim */
} hsq_regime_data;

hsq_regime_shape hsq_regime_default_shape(void); /* 128, 512, 256, 16, 2.5 */
/* Draws one instance of the regime from rng (the generators are fixed and
 * documented in hsq-eval(1)). Free with hsq_regime_data_free. */
hsq_status hsq_regime_generate(hsq_regime regime, const hsq_regime_shape *shape, hsq_rng *rng,
			       hsq_regime_data *out);
void hsq_regime_data_free(hsq_regime_data *data);

/* -------------------------------------------------------------- metrics */

typedef enum hsq_metric {
	HSQ_METRIC_RELMSE = 0,     /* sum |x - x^|^2 / sum |x|^2 over K and V rows */
	HSQ_METRIC_DIR_ERR = 1,    /* 1 - mean cos(x, x^) over K and V rows */
	HSQ_METRIC_D2 = 2,         /* relmse^2 + (2 dir_err)^2: the 2D error */
	HSQ_METRIC_RELMSE_K = 3,   /* relmse of the keys alone */
	HSQ_METRIC_RELMSE_V = 4,   /* relmse of the values alone */
	HSQ_METRIC_ATTN_ERR = 5,   /* relative squared error of softmax(qK^T/sqrt d)V,
				    * K scored by the codec, V decoded */
	HSQ_METRIC_ATTN_ERR_K = 6, /* same with only K quantized */
	HSQ_METRIC_ATTN_ERR_V = 7, /* same with only V quantized */
	HSQ_METRIC_SCORE_BIAS = 8, /* slope of codec score on exact score, minus 1 */
	HSQ_METRIC_SCORE_VAR = 9,  /* variance of the score error about that slope,
				    * over the variance of the exact scores */
} hsq_metric;
#define HSQ_N_METRICS 10
const char *hsq_metric_name(hsq_metric metric); /* "relmse", "dir_err", "d2", ... */
hsq_status hsq_metric_parse(const char *name, hsq_metric *out);

/* Runs codec_k on the keys (scores through hsq_codec_dot) and codec_v on the
 * values (decoded) of one regime instance and fills values[HSQ_N_METRICS]. */
hsq_status hsq_codec_measure(const hsq_codec *codec_k, const hsq_codec *codec_v,
			     const hsq_regime_data *data, double *values);

/* ----------------------------------------------------------- the study */

typedef struct hsq_study_params {
	int n_seeds;              /* seeds per cell and stream (default 200) */
	uint64_t base_seed;       /* seed s of regime r draws from (base, r, s) */
	hsq_regime_shape shape;
	int n_regimes;
	hsq_regime regimes[HSQ_N_REGIMES];
	int n_codecs;
	hsq_codec_kind codecs[HSQ_N_CODEC_KINDS];
	int n_bits;
	int bits[8];              /* nominal bits per value, e.g. 2, 3, 4 */
	int n_streams;            /* 1 or 2 */
	hsq_rng_kind streams[2];  /* default pcg64, mt19937 */
	hsq_sq_calib_params calib;
	int joint_calib;          /* 1: one SQ basis from K and V pooled */
	int n_threads;            /* 0: all online cores */
} hsq_study_params;

hsq_study_params hsq_study_default_params(void);

typedef struct hsq_study hsq_study;
/* Checks the parameters without running anything (hsq_study_run checks
 * them too). Data-dependent limits, such as an SQ tail floor that exceeds
 * the budget once d_eff is known, can still fail the run. */
hsq_status hsq_study_check_params(const hsq_study_params *params);
/* Runs regimes x codecs x bits x streams x seeds. The result does not depend
 * on n_threads. */
hsq_status hsq_study_run(const hsq_study_params *params, hsq_study **out);
void hsq_study_free(hsq_study *study);
const hsq_study_params *hsq_study_get_params(const hsq_study *study);
/* n_seeds samples of one metric for one cell (indices into the params'
 * arrays), or NULL if an index is out of range. */
const double *hsq_study_samples(const hsq_study *study, int stream, int regime, int codec,
				int bits, hsq_metric metric);
/* Exact bits per value of the cell (mean over seeds: SpectralQuant may
 * leave bits unused when every head coordinate reached max_bits). */
double hsq_study_bits_per_value(const hsq_study *study, int stream, int regime, int codec,
				int bits);
/* d_eff of the K-path calibration of a regime: per seed (n_seeds values,
 * or NULL for a bad index) and its mean; 0 when SQ was not run. */
const double *hsq_study_deff(const hsq_study *study, int stream, int regime);
double hsq_study_mean_deff(const hsq_study *study, int stream, int regime);

typedef struct hsq_summary {
	size_t n;
	double mean, sd;
	double ci_lo, ci_hi; /* 95% Student t interval for the mean */
} hsq_summary;
void hsq_summarize(const double *x, size_t n, hsq_summary *out);

/* The seed's findings, checked on a finished study. */
typedef struct hsq_finding {
	const char *id;      /* short name, e.g. "heavy-tail-sq-fails" */
	const char *claim;   /* the seed's claim, one line */
	int verdict;         /* 1 held, 0 did not hold, -1 not evaluable here */
	char evidence[768];  /* the numbers behind the verdict, one line */
} hsq_finding;
#define HSQ_N_FINDINGS 7
/* Fills findings[HSQ_N_FINDINGS] from one stream of the study. Needs the
 * regimes, codecs and bits each finding mentions; others give verdict -1. */
hsq_status hsq_study_findings(const hsq_study *study, int stream, hsq_finding *findings);

#ifdef __cplusplus
}
#endif
#endif

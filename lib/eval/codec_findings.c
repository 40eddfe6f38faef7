/* codec_findings.c - the third seed's findings, checked on a finished
 * study. Every verdict is a statistical statement over seeds: codecs are
 * compared on the same data and rotations (paired samples), so "A beats
 * B" means A is lower in significantly more seeds (sign test, p < 0.01)
 * and lower by more than 5% in the median seed; anything else is a tie.
 * The primary error is d2 (hsq-eval(1), Metrics). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "eval/codec_study.h"

#define TIE_FRACTION 0.05

typedef struct ctx {
	const hsq_study *s;
	int stream;
	int n;
	double *diff;  /* n_seeds scratch for per-seed ratios */
} ctx;

static const double *cell(const ctx *c, hsq_regime rg, hsq_codec_kind cd, int bits, hsq_metric m)
{
	int r = hsq_study_regime_index(c->s, rg), k = hsq_study_codec_index(c->s, cd);
	int b = hsq_study_bits_index(c->s, bits);
	if (r < 0 || k < 0 || b < 0)
		return NULL;
	return hsq_study_samples(c->s, c->stream, r, k, b, m);
}

static double mean_of(const ctx *c, const double *x)
{
	hsq_summary s;
	hsq_summarize(x, (size_t)c->n, &s);
	return s.mean;
}

/* Two-sided sign test: probability of a split at least as uneven as
 * wins:losses under a fair coin (ties dropped). */
static double sign_test_p(int wins, int losses)
{
	int n = wins + losses, k = wins < losses ? wins : losses;
	if (n == 0)
		return 1.0;
	double tail = 0.0;
	for (int i = 0; i <= k; i++) {
		int sg;
		tail += exp(lgamma_r(n + 1.0, &sg) - lgamma_r(i + 1.0, &sg) - lgamma_r(n - i + 1.0, &sg) -
			    n * M_LN2);
	}
	return fmin(1.0, 2.0 * tail);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of the per-seed ratio a/b (uses the diff scratch). */
static double median_ratio(const ctx *c, const double *a, const double *b)
{
	for (int i = 0; i < c->n; i++)
		c->diff[i] = b[i] != 0.0 ? a[i] / b[i] : (a[i] == 0.0 ? 1.0 : INFINITY);
	qsort(c->diff, (size_t)c->n, sizeof(double), cmp_double);
	return c->n % 2 ? c->diff[c->n / 2] : 0.5 * (c->diff[c->n / 2 - 1] + c->diff[c->n / 2]);
}

/* a is lower than b beyond noise and beyond a tie: lower in significantly
 * more seeds than not (sign test, p < 0.01: robust to the rare
 * catastrophic seed that would swamp a t interval) and lower by more than
 * TIE_FRACTION in the median seed. */
static int clearly_lower(const ctx *c, const double *a, const double *b)
{
	int wins = 0, losses = 0;
	for (int i = 0; i < c->n; i++) {
		wins += a[i] < b[i];
		losses += a[i] > b[i];
	}
	return wins > losses && sign_test_p(wins, losses) < 0.01 &&
	       median_ratio(c, a, b) < 1.0 - TIE_FRACTION;
}

static double ks_p(const ctx *c, const double *a, const double *b)
{
	hsq_ks_result r;
	if (hsq_ks_2samp(a, (size_t)c->n, b, (size_t)c->n, &r) != HSQ_OK)
		return NAN;
	return r.p_value;
}

static void appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t cap, const char *fmt, ...)
{
	size_t len = strlen(buf);
	if (len + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + len, cap - len, fmt, ap);
	va_end(ap);
}

static void not_evaluable(hsq_finding *f, const char *needs)
{
	f->verdict = -1;
	snprintf(f->evidence, sizeof f->evidence, "not evaluable: the study lacks %s", needs);
}

static int max_bits(const hsq_study *s)
{
	int m = 0;
	for (int i = 0; i < s->p.n_bits; i++)
		m = s->p.bits[i] > m ? s->p.bits[i] : m;
	return m;
}

static int min_bits(const hsq_study *s)
{
	int m = 99;
	for (int i = 0; i < s->p.n_bits; i++)
		m = s->p.bits[i] < m ? s->p.bits[i] : m;
	return m;
}

/* 1. SQ fails on heavy tails, and more bits do not rescue it. */
static void f_heavy_sq(const ctx *c, hsq_finding *f)
{
	int lo = min_bits(c->s), hi = max_bits(c->s);
	const double *sq_hi = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_SQ, hi, HSQ_METRIC_D2);
	const double *tq_lo = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_TQ, lo, HSQ_METRIC_D2);
	if (!sq_hi || !tq_lo || lo == hi) {
		not_evaluable(f, "the heavy-tail regime with sq and tq at two or more widths");
		return;
	}
	int worse_all = 1;
	double r_lo = 0, r_hi = 0;
	snprintf(f->evidence, sizeof f->evidence, "heavy-tail d2 mean sq/tq:");
	for (int i = 0; i < c->s->p.n_bits; i++) {
		int b = c->s->p.bits[i];
		const double *sq = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_SQ, b, HSQ_METRIC_D2);
		const double *tq = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_TQ, b, HSQ_METRIC_D2);
		worse_all &= clearly_lower(c, tq, sq);
		double med = median_ratio(c, sq, tq);
		if (b == lo)
			r_lo = med;
		if (b == hi)
			r_hi = med;
		appendf(f->evidence, sizeof f->evidence, " b=%d %.3g/%.3g (median seed x%.2f)", b,
			mean_of(c, sq), mean_of(c, tq), med);
	}
	/* Seeds in which SQ at the most bits is still worse than TQ at the
	 * fewest: there, bits do not rescue it at all. */
	int rescued_never = 0;
	for (int i = 0; i < c->n; i++)
		rescued_never += sq_hi[i] > tq_lo[i];
	const double *deff = hsq_study_deff(c->s, c->stream,
					    hsq_study_regime_index(c->s, HSQ_REGIME_HEAVY_TAIL));
	int pruned = 0;
	for (int i = 0; deff && i < c->n; i++)
		pruned += deff[i] < c->s->p.shape.dim;
	appendf(f->evidence, sizeof f->evidence,
		"; sq worse at every width: %s; median gap %s with bits (x%.2f -> x%.2f); sq at %d "
		"bits worse than tq at %d bits in %d of %d seeds; spurious spectral gap (d_eff < %d) in "
		"%d of %d calibrations",
		worse_all ? "yes" : "no", r_hi >= r_lo ? "does not close" : "closes", r_lo, r_hi, hi, lo,
		rescued_never, c->n, c->s->p.shape.dim, pruned, c->n);
	f->verdict = worse_all && r_hi >= r_lo;
}

/* 2. TQ-KV beats SQ (and SQU) on heavy tails. */
static void f_heavy_tq(const ctx *c, hsq_finding *f)
{
	int any = 0, all = 1;
	snprintf(f->evidence, sizeof f->evidence, "heavy-tail d2 mean, tq vs the better of sq/squ:");
	for (int i = 0; i < c->s->p.n_bits; i++) {
		int b = c->s->p.bits[i];
		const double *tq = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_TQ, b, HSQ_METRIC_D2);
		const double *sq = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_SQ, b, HSQ_METRIC_D2);
		const double *squ = cell(c, HSQ_REGIME_HEAVY_TAIL, HSQ_CODEC_SQU, b, HSQ_METRIC_D2);
		if (!tq || (!sq && !squ))
			continue;
		const double *best = !sq ? squ : !squ ? sq : mean_of(c, sq) < mean_of(c, squ) ? sq : squ;
		any = 1;
		int win = clearly_lower(c, tq, best);
		all &= win;
		appendf(f->evidence, sizeof f->evidence, " b=%d %.3g vs %.3g (%s, ks p=%.2g)", b,
			mean_of(c, tq), mean_of(c, best), win ? "tq wins" : "no clear win",
			ks_p(c, tq, best));
	}
	if (!any)
		{
		not_evaluable(f, "the heavy-tail regime with tq and sq or squ");
		return;
	}
	f->verdict = all;
}

/* 3. SQ or SQU beats TQ-KV on low-rank structured data at b = 2. */
static void f_lowrank(const ctx *c, hsq_finding *f)
{
	const double *tq = cell(c, HSQ_REGIME_LOW_RANK, HSQ_CODEC_TQ, 2, HSQ_METRIC_D2);
	const double *sq = cell(c, HSQ_REGIME_LOW_RANK, HSQ_CODEC_SQ, 2, HSQ_METRIC_D2);
	const double *squ = cell(c, HSQ_REGIME_LOW_RANK, HSQ_CODEC_SQU, 2, HSQ_METRIC_D2);
	if (!tq || (!sq && !squ))
		{
		not_evaluable(f, "the low-rank regime with tq and sq or squ at 2 bits");
		return;
	}
	const double *best = !sq ? squ : !squ ? sq : mean_of(c, sq) < mean_of(c, squ) ? sq : squ;
	int win = clearly_lower(c, best, tq);
	int r = hsq_study_regime_index(c->s, HSQ_REGIME_LOW_RANK);
	int k = hsq_study_codec_index(c->s, best == sq ? HSQ_CODEC_SQ : HSQ_CODEC_SQU);
	snprintf(f->evidence, sizeof f->evidence,
		 "low-rank b=2 d2: %s %.3g (%.2f bits/value) vs tq %.3g (x%.1f lower, ks p=%.2g)",
		 best == sq ? "sq" : "squ", mean_of(c, best),
		 hsq_study_bits_per_value(c->s, c->stream, r, k, hsq_study_bits_index(c->s, 2)),
		 mean_of(c, tq), mean_of(c, tq) / mean_of(c, best), ks_p(c, best, tq));
	f->verdict = win;
}

/* 4. TQ-KV is best or tied at b >= 4 on most regimes. */
static void f_tq_high_bits(const ctx *c, hsq_finding *f)
{
	int n_cells = 0, n_ok = 0;
	char lost[400] = "";
	if (hsq_study_codec_index(c->s, HSQ_CODEC_TQ) < 0 || max_bits(c->s) < 4 || c->s->p.n_codecs < 2)
		{
		not_evaluable(f, "tq, another codec and a width of 4 bits or more");
		return;
	}
	for (int i = 0; i < c->s->p.n_bits; i++) {
		int b = c->s->p.bits[i];
		if (b < 4)
			continue;
		for (int r = 0; r < c->s->p.n_regimes; r++) {
			hsq_regime rg = c->s->p.regimes[r];
			const double *tq = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_D2);
			int ok = 1;
			for (int k = 0; k < c->s->p.n_codecs; k++) {
				hsq_codec_kind kind = c->s->p.codecs[k];
				const double *x = cell(c, rg, kind, b, HSQ_METRIC_D2);
				if (kind == HSQ_CODEC_TQ || !x)
					continue;
				if (clearly_lower(c, x, tq)) {
					ok = 0;
					appendf(lost, sizeof lost, " %s@b=%d:%s(mean x%.3g)", hsq_regime_name(rg), b,
						hsq_codec_kind_name(kind), mean_of(c, tq) / mean_of(c, x));
				}
			}
			n_cells++;
			n_ok += ok;
		}
	}
	snprintf(f->evidence, sizeof f->evidence,
		 "tq best or tied (no codec lower by more than %.0f%% in the median seed, sign test p < "
		 "0.01) in %d of %d regime-width cells at b>=4; beaten in:%s",
		 100 * TIE_FRACTION, n_ok, n_cells, n_ok == n_cells ? " none" : lost);
	f->verdict = 2 * n_ok > n_cells;
}

/* 5. Water-filling is not better than uniform allocation. */
static void f_water_filling(const ctx *c, hsq_finding *f)
{
	int n_cells = 0, wf_better = 0, uni_better = 0;
	char where[400] = "";
	for (int r = 0; r < c->s->p.n_regimes; r++) {
		hsq_regime rg = c->s->p.regimes[r];
		for (int i = 0; i < c->s->p.n_bits; i++) {
			int b = c->s->p.bits[i];
			const double *sq = cell(c, rg, HSQ_CODEC_SQ, b, HSQ_METRIC_D2);
			const double *squ = cell(c, rg, HSQ_CODEC_SQU, b, HSQ_METRIC_D2);
			if (!sq || !squ)
				continue;
			n_cells++;
			if (clearly_lower(c, sq, squ)) {
				wf_better++;
				appendf(where, sizeof where, " %s@b=%d(mean x%.3g)", hsq_regime_name(rg), b,
					mean_of(c, squ) / mean_of(c, sq));
			} else if (clearly_lower(c, squ, sq)) {
				uni_better++;
			}
		}
	}
	if (!n_cells)
		{
		not_evaluable(f, "both sq and squ");
		return;
	}
	snprintf(f->evidence, sizeof f->evidence,
		 "of %d regime-width cells: water-filling better in %d, uniform better in %d, tied in %d; "
		 "water-filling wins:%s",
		 n_cells, wf_better, uni_better, n_cells - wf_better - uni_better,
		 wf_better ? where : " none");
	f->verdict = wf_better == 0;
}

/* 6. K-path QJL: removes the score bias but adds more variance, and the
 * softmax error grows. */
static void f_qjl(const ctx *c, hsq_finding *f)
{
	int n_cells = 0, unbiased = 0, more_var = 0, worse_attn = 0;
	double sum_bias_tq = 0, sum_bias_qjl = 0, sum_var_tq = 0, sum_var_qjl = 0, sum_at_tq = 0,
	       sum_at_qjl = 0;
	for (int r = 0; r < c->s->p.n_regimes; r++) {
		hsq_regime rg = c->s->p.regimes[r];
		for (int i = 0; i < c->s->p.n_bits; i++) {
			int b = c->s->p.bits[i];
			const double *bt = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_SCORE_BIAS);
			const double *bq = cell(c, rg, HSQ_CODEC_TQ_QJL, b, HSQ_METRIC_SCORE_BIAS);
			if (!bt || !bq)
				continue;
			const double *vt = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_SCORE_VAR);
			const double *vq = cell(c, rg, HSQ_CODEC_TQ_QJL, b, HSQ_METRIC_SCORE_VAR);
			const double *at = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_ATTN_ERR_K);
			const double *aq = cell(c, rg, HSQ_CODEC_TQ_QJL, b, HSQ_METRIC_ATTN_ERR_K);
			n_cells++;
			/* Bias is systematic: compare the mean slope over seeds. TQ's
			 * shrinkage must be outside its own noise, and QJL's mean slope
			 * within its noise of 1 or under a quarter of TQ's. */
			hsq_summary st, sq;
			hsq_summarize(bt, (size_t)c->n, &st);
			hsq_summarize(bq, (size_t)c->n, &sq);
			int tq_biased = st.ci_hi < 0.0 || st.ci_lo > 0.0;
			int qjl_unbiased = (sq.ci_lo <= 0.0 && sq.ci_hi >= 0.0) ||
					   fabs(sq.mean) < 0.25 * fabs(st.mean);
			unbiased += tq_biased && qjl_unbiased;
			more_var += clearly_lower(c, vt, vq);
			worse_attn += clearly_lower(c, at, aq);
			sum_bias_tq += mean_of(c, bt);
			sum_bias_qjl += mean_of(c, bq);
			sum_var_tq += mean_of(c, vt);
			sum_var_qjl += mean_of(c, vq);
			sum_at_tq += mean_of(c, at);
			sum_at_qjl += mean_of(c, aq);
		}
	}
	if (!n_cells)
		{
		not_evaluable(f, "both tq and tq-qjl");
		return;
	}
	snprintf(f->evidence, sizeof f->evidence,
		 "over %d regime-width cells (means): score slope-1 tq %+.4f, tq-qjl %+.4f; score "
		 "error variance tq %.4f, tq-qjl %.4f; K-only attention error tq %.4f, tq-qjl %.4f. "
		 "tq biased and qjl not in %d, qjl more variance in %d, larger softmax error in %d cells",
		 n_cells, sum_bias_tq / n_cells, sum_bias_qjl / n_cells, sum_var_tq / n_cells,
		 sum_var_qjl / n_cells, sum_at_tq / n_cells, sum_at_qjl / n_cells, unbiased, more_var,
		 worse_attn);
	f->verdict = unbiased == n_cells && more_var == n_cells && worse_attn == n_cells;
}

/* 7. V-path error stays linear: the attention output error caused by the
 * values is proportional to their relMSE, at every width. */
static void f_v_linear(const ctx *c, hsq_finding *f)
{
	int n_regimes = 0, linear = 0;
	double worst = 1.0;
	const char *worst_regime = "";
	if (c->s->p.n_bits < 2)
		{
		not_evaluable(f, "two or more widths");
		return;
	}
	for (int r = 0; r < c->s->p.n_regimes; r++) {
		hsq_regime rg = c->s->p.regimes[r];
		double lo = INFINITY, hi = 0.0;
		int have = 0;
		for (int i = 0; i < c->s->p.n_bits; i++) {
			int b = c->s->p.bits[i];
			const double *av = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_ATTN_ERR_V);
			const double *rv = cell(c, rg, HSQ_CODEC_TQ, b, HSQ_METRIC_RELMSE_V);
			if (!av || !rv)
				continue;
			double ratio = mean_of(c, av) / mean_of(c, rv);
			lo = fmin(lo, ratio);
			hi = fmax(hi, ratio);
			have++;
		}
		if (have < 2)
			continue;
		n_regimes++;
		linear += hi / lo <= 1.2;
		if (hi / lo > worst) {
			worst = hi / lo;
			worst_regime = hsq_regime_name(rg);
		}
	}
	if (!n_regimes)
		{
		not_evaluable(f, "tq at two or more widths");
		return;
	}
	snprintf(f->evidence, sizeof f->evidence,
		 "tq: V-only attention error / relMSE_V constant across widths (spread <= 1.2x) in %d "
		 "of %d regimes; largest spread x%.3f (%s)",
		 linear, n_regimes, worst, worst_regime);
	f->verdict = linear == n_regimes;
}

hsq_status hsq_study_findings(const hsq_study *s, int stream, hsq_finding *findings)
{
	static const struct {
		const char *id, *claim;
		void (*fn)(const ctx *, hsq_finding *);
	} table[HSQ_N_FINDINGS] = {
		{"heavy-tail-sq-fails", "SQ fails on heavy-tailed data and more bits do not rescue it",
		 f_heavy_sq},
		{"heavy-tail-tq-wins", "TQ-KV beats SQ and SQU on heavy-tailed data", f_heavy_tq},
		{"low-rank-sq-wins-b2", "SQ or SQU beats TQ-KV on low-rank structured data at b = 2",
		 f_lowrank},
		{"tq-best-b4", "TQ-KV is best or tied at b >= 4 on most regimes", f_tq_high_bits},
		{"water-filling-flat", "water-filling is not better than uniform allocation (SQ vs SQU)",
		 f_water_filling},
		{"qjl-k-variance",
		 "K-path QJL removes score bias but adds more score variance and softmax error",
		 f_qjl},
		{"v-path-linear", "V-path error reaches the attention output linearly", f_v_linear},
	};
	if (stream < 0 || stream >= s->p.n_streams)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "findings: stream %d out of range 0..%d", stream,
				s->p.n_streams - 1);
	ctx c = {.s = s, .stream = stream, .n = s->p.n_seeds};
	c.diff = malloc(sizeof(double) * (size_t)s->p.n_seeds);
	if (!c.diff)
		return hsq_fail(HSQ_ERR_NOMEM, "findings: out of memory");
	for (int i = 0; i < HSQ_N_FINDINGS; i++) {
		memset(&findings[i], 0, sizeof findings[i]);
		findings[i].id = table[i].id;
		findings[i].claim = table[i].claim;
		table[i].fn(&c, &findings[i]);
	}
	free(c.diff);
	return HSQ_OK;
}

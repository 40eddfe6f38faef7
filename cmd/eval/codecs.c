/* codecs.c - hsq-eval codecs: the controlled KV codec study. Every
 * regime x codec x bit width over S seeds, once with a PCG64 and once with
 * an mt19937 random stream; per cell the mean and 95% interval of each
 * metric and a two-sample KS test between the streams; the codec-study
 * findings checked; PREFIX.csv, PREFIX.json and PREFIX.svg written. No
 * model and no trial log: the driver runs the study as one item. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"

static const char USAGE[] = "hsq-eval codecs [options]";
static const char DESCRIPTION[] =
	"Run every regime x codec x bit width over S seeds, once with a PCG64 and once with an\n"
	"mt19937 random stream; print mean and 95% interval per cell and a two-sample KS test\n"
	"between the streams, check the codec-study findings, and write PREFIX.csv, PREFIX.json\n"
	"and PREFIX.svg (error versus bits per regime). See hsq-eval(1).";

enum {
	OPT_SEEDS = 's',
	OPT_OUTPUT = 'o',
	OPT_THREADS = 't',
	OPT_QUIET = 'q',
	OPT_REGIMES = 256,
	OPT_CODECS,
	OPT_BITS,
	OPT_DIM,
	OPT_TOKENS,
	OPT_QUERIES,
	OPT_CALIB,
	OPT_SCORE_STD,
	OPT_BASE_SEED,
	OPT_STREAMS,
	OPT_GAP_RATIO,
	OPT_TAIL_BITS,
	OPT_MAX_BITS,
	OPT_JOINT_CALIB,
	OPT_METRIC,
};

static const cli_option options[] = {
	{ "seeds", 's', "N", "seeds per cell and stream (default 200)", OPT_SEEDS },
	{ "regimes", 0, "LIST",
	  "comma-separated regimes: isotropic,heavy-tail,low-rank,kv-aligned,kv-misaligned,decay-fast,"
	  "decay-slow,shift (default: all)", OPT_REGIMES },
	{ "codecs", 0, "LIST", "comma-separated codecs: plain,tq,tq-qjl,sq,squ (default: all)", OPT_CODECS },
	{ "bits", 0, "LIST", "comma-separated bits per value (default 2,3,4)", OPT_BITS },
	{ "dim", 0, "D", "values per vector, 16..256 (default 128)", OPT_DIM },
	{ "tokens", 0, "N", "test tokens per regime instance (default 256)", OPT_TOKENS },
	{ "queries", 0, "N", "queries per regime instance (default 16)", OPT_QUERIES },
	{ "calib", 0, "N", "calibration vectors per path for sq/squ (default 512)", OPT_CALIB },
	{ "score-std", 0, "X", "std of q.k/sqrt(d) the queries are scaled to (default 2.5)", OPT_SCORE_STD },
	{ "base-seed", 0, "S", "base of every random stream (default 1)", OPT_BASE_SEED },
	{ "streams", 0, "LIST", "random streams: pcg64,mt19937 (default both)", OPT_STREAMS },
	{ "gap-ratio", 0, "X", "sq spectral gap that prunes d_eff (default 4)", OPT_GAP_RATIO },
	{ "tail-bits", 0, "N", "sq fixed bits per tail coordinate, 0..4 (default 1)", OPT_TAIL_BITS },
	{ "max-bits", 0, "N", "sq cap on one coordinate's bits, 1..8 (default 8)", OPT_MAX_BITS },
	{ "joint-calib", 0, NULL, "calibrate sq/squ on K and V pooled (default: separately)", OPT_JOINT_CALIB },
	{ "metric", 0, "NAME",
	  "metric of the table and plot, one of relmse, dir_err, d2, relmse_k, relmse_v, attn_err, "
	  "attn_err_k, attn_err_v, score_bias, score_var (default d2)", OPT_METRIC },
	{ "threads", 't', "N", "worker threads, 0 = all cores (default 0)", OPT_THREADS },
	{ "output", 'o', "PREFIX", "write PREFIX.csv, PREFIX.json, PREFIX.svg (default hsq-codecs)", OPT_OUTPUT },
	{ "quiet", 'q', NULL, "print nothing on success (files are still written)", OPT_QUIET },
	{ 0 },
};

/* Splits a comma-separated list; fn parses one item into slot i. */
static int parse_list(const char *opt, const char *value, int cap, void *out,
		      int (*fn)(const char *item, void *out, int i))
{
	char buf[512];
	int n = 0;
	if (strlen(value) >= sizeof buf)
		cli_usage_error(EVAL_PROG, "%s: list too long", opt);
	strcpy(buf, value);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n >= cap)
			cli_usage_error(EVAL_PROG, "%s: at most %d items", opt, cap);
		if (!fn(tok, out, n))
			cli_usage_error(EVAL_PROG, "%s: %s", opt, hsq_last_error());
		n++;
	}
	if (n == 0)
		cli_usage_error(EVAL_PROG, "%s needs at least one item", opt);
	return n;
}

static int item_regime(const char *s, void *out, int i)
{
	return hsq_regime_parse(s, &((hsq_regime *)out)[i]) == HSQ_OK;
}

static int item_codec(const char *s, void *out, int i)
{
	return hsq_codec_kind_parse(s, &((hsq_codec_kind *)out)[i]) == HSQ_OK;
}

static int item_bits(const char *s, void *out, int i)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > 8)
		cli_usage_error(EVAL_PROG, "--bits expects integers from 1 to 8, not '%s'", s);
	((int *)out)[i] = (int)v;
	return 1;
}

static int item_stream(const char *s, void *out, int i)
{
	hsq_rng_kind *k = out;
	if (!strcmp(s, "pcg64"))
		k[i] = HSQ_RNG_PCG64;
	else if (!strcmp(s, "mt19937"))
		k[i] = HSQ_RNG_MT19937;
	else
		cli_usage_error(EVAL_PROG, "--streams expects pcg64 and/or mt19937, not '%s'", s);
	return 1;
}

typedef struct codecs_opts {
	hsq_study_params params;
	const char *prefix;
	hsq_metric metric;
	int quiet;
} codecs_opts;

static codecs_opts o;

static eval_common *init(void)
{
	o.params = hsq_study_default_params();
	o.prefix = "hsq-codecs";
	o.metric = HSQ_METRIC_D2;
	o.quiet = 0;
	return NULL; /* no model, no log: its own options only */
}

static int option(int id, const char *value)
{
	hsq_study_params *sp = &o.params;
	switch (id) {
	case OPT_SEEDS: sp->n_seeds = (int)cli_long(EVAL_PROG, "--seeds", value, 2, 100000); return 1;
	case OPT_REGIMES:
		sp->n_regimes = parse_list("--regimes", value, HSQ_N_REGIMES, sp->regimes, item_regime);
		return 1;
	case OPT_CODECS:
		sp->n_codecs = parse_list("--codecs", value, HSQ_N_CODEC_KINDS, sp->codecs, item_codec);
		return 1;
	case OPT_BITS: sp->n_bits = parse_list("--bits", value, 8, sp->bits, item_bits); return 1;
	case OPT_DIM:
		sp->shape.dim = (int)cli_long(EVAL_PROG, "--dim", value, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
		return 1;
	case OPT_TOKENS: sp->shape.n_test = (int)cli_long(EVAL_PROG, "--tokens", value, 1, 1000000); return 1;
	case OPT_QUERIES: sp->shape.n_query = (int)cli_long(EVAL_PROG, "--queries", value, 1, 100000); return 1;
	case OPT_CALIB: sp->shape.n_calib = (int)cli_long(EVAL_PROG, "--calib", value, 2, 1000000); return 1;
	case OPT_SCORE_STD: sp->shape.score_std = cli_double(EVAL_PROG, "--score-std", value, 1e-3, 100.0); return 1;
	case OPT_BASE_SEED:
		sp->base_seed = (uint64_t)cli_long(EVAL_PROG, "--base-seed", value, 0, 0x7fffffffffffffffL);
		return 1;
	case OPT_STREAMS: sp->n_streams = parse_list("--streams", value, 2, sp->streams, item_stream); return 1;
	case OPT_GAP_RATIO: sp->calib.gap_ratio = cli_double(EVAL_PROG, "--gap-ratio", value, 1.000001, 1e12); return 1;
	case OPT_TAIL_BITS: sp->calib.tail_bits = (int)cli_long(EVAL_PROG, "--tail-bits", value, 0, 4); return 1;
	case OPT_MAX_BITS: sp->calib.max_bits = (int)cli_long(EVAL_PROG, "--max-bits", value, 1, 8); return 1;
	case OPT_JOINT_CALIB: sp->joint_calib = 1; return 1;
	case OPT_METRIC:
		if (hsq_metric_parse(value, &o.metric) != HSQ_OK)
			cli_usage_error(EVAL_PROG, "--metric: %s", hsq_last_error());
		return 1;
	case OPT_THREADS: sp->n_threads = (int)cli_long(EVAL_PROG, "--threads", value, 0, 256); return 1;
	case OPT_OUTPUT:
		if (!*value)
			cli_usage_error(EVAL_PROG, "--output needs a non-empty prefix");
		o.prefix = value;
		return 1;
	case OPT_QUIET: o.quiet = 1; return 1;
	default: return 0;
	}
}

static void args(int argc, char **argv)
{
	if (argc > 0)
		cli_usage_error(EVAL_PROG, "codecs takes no arguments ('%s' is extra)", argv[0]);
	if (o.params.calib.tail_bits > o.params.calib.max_bits)
		cli_usage_error(EVAL_PROG, "--tail-bits %d exceeds --max-bits %d", o.params.calib.tail_bits,
				o.params.calib.max_bits);
}

/* Everything the writers need about one cell, computed once. */
typedef struct cell_stats {
	hsq_summary sum[2][HSQ_N_METRICS]; /* per stream */
	hsq_ks_result ks[HSQ_N_METRICS];   /* between the streams (if two) */
	double bpv;                        /* bits per value, first stream */
} cell_stats;

typedef struct report {
	const hsq_study *study;
	const hsq_study_params *p;
	cell_stats *cells; /* [regime][codec][bits] */
	hsq_finding findings[2][HSQ_N_FINDINGS];
	double seconds;
} report;

static cell_stats *cell_at(const report *r, int rg, int cd, int bt)
{
	return &r->cells[((size_t)rg * r->p->n_codecs + cd) * r->p->n_bits + bt];
}

static void compute_report(report *r)
{
	const hsq_study_params *p = r->p;
	for (int rg = 0; rg < p->n_regimes; rg++)
		for (int cd = 0; cd < p->n_codecs; cd++)
			for (int bt = 0; bt < p->n_bits; bt++) {
				cell_stats *c = cell_at(r, rg, cd, bt);
				c->bpv = hsq_study_bits_per_value(r->study, 0, rg, cd, bt);
				for (int m = 0; m < HSQ_N_METRICS; m++) {
					const double *x[2] = { NULL, NULL };
					for (int s = 0; s < p->n_streams; s++) {
						x[s] = hsq_study_samples(r->study, s, rg, cd, bt, (hsq_metric)m);
						hsq_summarize(x[s], (size_t)p->n_seeds, &c->sum[s][m]);
					}
					c->ks[m].p_value = NAN;
					c->ks[m].d = NAN;
					if (p->n_streams == 2 &&
					    hsq_ks_2samp(x[0], (size_t)p->n_seeds, x[1], (size_t)p->n_seeds,
							 &c->ks[m]) != HSQ_OK)
						cli_die_status(EVAL_PROG, EXIT_FAILURE_RUNTIME, HSQ_ERR_INTERNAL);
				}
			}
}

static const char *verdict_word(int v)
{
	return v == 1 ? "held" : v == 0 ? "did not hold" : "not evaluable";
}

static void print_table(const report *r, hsq_metric metric)
{
	const hsq_study_params *p = r->p;
	const char *mn = hsq_metric_name(metric);
	printf("hsq-eval codecs: %d regimes x %d codecs x %d widths, %d seeds x %d stream%s, dim %d, "
	       "%d tokens, %d queries, %d calibration rows, %.1f s\n",
	       p->n_regimes, p->n_codecs, p->n_bits, p->n_seeds, p->n_streams, p->n_streams > 1 ? "s" : "",
	       p->shape.dim, p->shape.n_test, p->shape.n_query, p->shape.n_calib, r->seconds);
	printf("cells: mean [95%% interval] of %s over seeds per stream; ks p: two-sample KS between the "
	       "streams\n\n", mn);
	printf("%-13s %-6s %2s %6s  %-30s", "regime", "codec", "b", "bits/v", hsq_rng_name(p->streams[0]));
	if (p->n_streams == 2)
		printf(" %-30s %6s", hsq_rng_name(p->streams[1]), "ks p");
	printf("  %9s %9s %9s\n", "relmse", "dir_err", "attn_err");
	for (int rg = 0; rg < p->n_regimes; rg++) {
		for (int cd = 0; cd < p->n_codecs; cd++) {
			for (int bt = 0; bt < p->n_bits; bt++) {
				const cell_stats *c = cell_at(r, rg, cd, bt);
				const hsq_summary *s0 = &c->sum[0][metric];
				printf("%-13s %-6s %2d %6.3f  %9.3e [%8.2e,%8.2e]", hsq_regime_name(p->regimes[rg]),
				       hsq_codec_kind_name(p->codecs[cd]), p->bits[bt], c->bpv, s0->mean, s0->ci_lo,
				       s0->ci_hi);
				if (p->n_streams == 2) {
					const hsq_summary *s1 = &c->sum[1][metric];
					printf(" %9.3e [%8.2e,%8.2e] %6.3f", s1->mean, s1->ci_lo, s1->ci_hi,
					       c->ks[metric].p_value);
				}
				printf("  %9.3e %9.3e %9.3e\n", c->sum[0][HSQ_METRIC_RELMSE].mean,
				       c->sum[0][HSQ_METRIC_DIR_ERR].mean, c->sum[0][HSQ_METRIC_ATTN_ERR].mean);
			}
		}
		double deff = hsq_study_mean_deff(r->study, 0, rg);
		if (deff > 0)
			printf("%-13s mean d_eff of the K calibration: %.1f of %d\n", "", deff, p->shape.dim);
	}
	int ks_low = 0, ks_n = 0;
	for (size_t i = 0; p->n_streams == 2 && i < (size_t)p->n_regimes * p->n_codecs * p->n_bits; i++) {
		ks_n++;
		ks_low += r->cells[i].ks[metric].p_value < 0.01;
	}
	if (ks_n)
		printf("\nstreams: %d of %d cells differ at KS p < 0.01 on %s (about %.1f expected by chance)\n",
		       ks_low, ks_n, mn, 0.01 * ks_n);
	/* One verdict per finding: the word when the streams agree, "streams
	 * differ" and then each stream's word on a line of its own when not. */
	if (p->n_streams == 2)
		printf("\nfindings (verdict on both streams, %s and %s; evidence from %s):\n",
		       hsq_rng_name(p->streams[0]), hsq_rng_name(p->streams[1]), hsq_rng_name(p->streams[0]));
	else
		printf("\nfindings (%s stream):\n", hsq_rng_name(p->streams[0]));
	for (int f = 0; f < HSQ_N_FINDINGS; f++) {
		const hsq_finding *a = &r->findings[0][f];
		int split = p->n_streams == 2 && r->findings[1][f].verdict != a->verdict;
		printf("  %-14s %s: %s\n", split ? "streams differ" : verdict_word(a->verdict), a->id, a->claim);
		if (split)
			printf("  %-14s %s: %s; %s: %s\n", "", hsq_rng_name(p->streams[0]), verdict_word(a->verdict),
			       hsq_rng_name(p->streams[1]), verdict_word(r->findings[1][f].verdict));
		printf("  %-14s %s\n", "", a->evidence);
	}
}

static void write_csv(const report *r, FILE *f)
{
	const hsq_study_params *p = r->p;
	fprintf(f, "regime,codec,bits,bits_per_value,metric");
	for (int s = 0; s < p->n_streams; s++) {
		const char *n = hsq_rng_name(p->streams[s]);
		fprintf(f, ",%s_mean,%s_sd,%s_ci_lo,%s_ci_hi", n, n, n, n);
	}
	fprintf(f, ",ks_d,ks_p\n");
	for (int rg = 0; rg < p->n_regimes; rg++)
		for (int cd = 0; cd < p->n_codecs; cd++)
			for (int bt = 0; bt < p->n_bits; bt++) {
				const cell_stats *c = cell_at(r, rg, cd, bt);
				for (int m = 0; m < HSQ_N_METRICS; m++) {
					fprintf(f, "%s,%s,%d,%.6g,%s", hsq_regime_name(p->regimes[rg]),
						hsq_codec_kind_name(p->codecs[cd]), p->bits[bt], c->bpv,
						hsq_metric_name((hsq_metric)m));
					for (int s = 0; s < p->n_streams; s++) {
						const hsq_summary *su = &c->sum[s][m];
						double v[4] = { su->mean, su->sd, su->ci_lo, su->ci_hi };
						for (int k = 0; k < 4; k++)
							eval_csv_num(f, v[k]);
					}
					eval_csv_num(f, c->ks[m].d);
					eval_csv_num(f, c->ks[m].p_value);
					fputc('\n', f);
				}
			}
}

static void write_json(const report *r, FILE *f)
{
	const hsq_study_params *p = r->p;
	fprintf(f, "{\"tool\":\"hsq-eval\",\"subcommand\":\"codecs\",\"version\":");
	json_fstr(f, hsq_version(), JSON_ESC_UNICODE);
	fprintf(f, ",\"seconds\":%.3f,\n\"params\":{\"seeds\":%d,\"base_seed\":%llu,\"dim\":%d,\"tokens\":%d,"
		   "\"queries\":%d,\"calib\":%d,\"score_std\":%g,\"gap_ratio\":%g,\"tail_bits\":%d,"
		   "\"max_bits\":%d,\"joint_calib\":%s,\"streams\":[",
		r->seconds, p->n_seeds, (unsigned long long)p->base_seed, p->shape.dim, p->shape.n_test,
		p->shape.n_query, p->shape.n_calib, p->shape.score_std, p->calib.gap_ratio, p->calib.tail_bits,
		p->calib.max_bits, p->joint_calib ? "true" : "false");
	for (int s = 0; s < p->n_streams; s++)
		fprintf(f, "%s\"%s\"", s ? "," : "", hsq_rng_name(p->streams[s]));
	fprintf(f, "]},\n\"regimes\":[");
	for (int rg = 0; rg < p->n_regimes; rg++) {
		fprintf(f, "%s{\"name\":\"%s\",\"description\":", rg ? "," : "", hsq_regime_name(p->regimes[rg]));
		json_fstr(f, hsq_regime_description(p->regimes[rg]), JSON_ESC_UNICODE);
		fprintf(f, ",\"mean_deff\":");
		json_fnum6(f, hsq_study_mean_deff(r->study, 0, rg));
		fputc('}', f);
	}
	fprintf(f, "],\n\"cells\":[\n");
	int first = 1;
	for (int rg = 0; rg < p->n_regimes; rg++)
		for (int cd = 0; cd < p->n_codecs; cd++)
			for (int bt = 0; bt < p->n_bits; bt++) {
				const cell_stats *c = cell_at(r, rg, cd, bt);
				fprintf(f, "%s{\"regime\":\"%s\",\"codec\":\"%s\",\"bits\":%d,\"bits_per_value\":",
					first ? "" : ",\n", hsq_regime_name(p->regimes[rg]),
					hsq_codec_kind_name(p->codecs[cd]), p->bits[bt]);
				first = 0;
				json_fnum6(f, c->bpv);
				fprintf(f, ",\"metrics\":{");
				for (int m = 0; m < HSQ_N_METRICS; m++) {
					fprintf(f, "%s\"%s\":{", m ? "," : "", hsq_metric_name((hsq_metric)m));
					for (int s = 0; s < p->n_streams; s++) {
						const hsq_summary *su = &c->sum[s][m];
						fprintf(f, "%s\"%s\":{\"mean\":", s ? "," : "", hsq_rng_name(p->streams[s]));
						json_fnum6(f, su->mean);
						fprintf(f, ",\"sd\":");
						json_fnum6(f, su->sd);
						fprintf(f, ",\"ci\":[");
						json_fnum6(f, su->ci_lo);
						fputc(',', f);
						json_fnum6(f, su->ci_hi);
						fprintf(f, "]}");
					}
					if (p->n_streams == 2) {
						fprintf(f, ",\"ks\":{\"d\":");
						json_fnum6(f, c->ks[m].d);
						fprintf(f, ",\"p\":");
						json_fnum6(f, c->ks[m].p_value);
						fputc('}', f);
					}
					fputc('}', f);
				}
				fprintf(f, "}}");
			}
	fprintf(f, "\n],\n\"findings\":[\n");
	for (int i = 0; i < HSQ_N_FINDINGS; i++) {
		const hsq_finding *a = &r->findings[0][i];
		fprintf(f, "%s{\"id\":\"%s\",\"claim\":", i ? ",\n" : "", a->id);
		json_fstr(f, a->claim, JSON_ESC_UNICODE);
		fprintf(f, ",\"verdicts\":{");
		for (int s = 0; s < p->n_streams; s++) {
			fprintf(f, "%s\"%s\":", s ? "," : "", hsq_rng_name(p->streams[s]));
			json_fstr(f, verdict_word(r->findings[s][i].verdict), JSON_ESC_UNICODE);
		}
		fprintf(f, "},\"evidence\":");
		json_fstr(f, a->evidence, JSON_ESC_UNICODE);
		fputc('}', f);
	}
	fprintf(f, "\n]}\n");
}

/* One panel per regime: log10 of the mean metric (first stream) against
 * bits, one line per codec, the 95% interval as whiskers. */
static void write_svg(const report *r, FILE *f, hsq_metric metric)
{
	const hsq_study_params *p = r->p;
	const size_t n = (size_t)p->n_regimes * p->n_codecs * p->n_bits;
	const char *regimes[HSQ_N_REGIMES], *codecs[HSQ_N_CODEC_KINDS];
	int colors[HSQ_N_CODEC_KINDS];
	double *mean = malloc(3 * n * sizeof *mean), *lo = mean + n, *hi = mean + 2 * n;
	char legend[128];
	if (!mean)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int rg = 0; rg < p->n_regimes; rg++)
		regimes[rg] = hsq_regime_name(p->regimes[rg]);
	for (int cd = 0; cd < p->n_codecs; cd++) {
		codecs[cd] = hsq_codec_kind_name(p->codecs[cd]);
		colors[cd] = (p->codecs[cd] - 1) % 5; /* a codec keeps its color whichever run it is in */
	}
	for (size_t i = 0; i < n; i++) { /* cells and panels share one order: regime, codec, bits */
		const hsq_summary *s = &r->cells[i].sum[0][metric];
		mean[i] = s->mean;
		lo[i] = s->ci_lo;
		hi[i] = s->ci_hi;
	}
	snprintf(legend, sizeof legend, "%s (mean, 95%% interval, %s stream):", hsq_metric_name(metric),
		 hsq_rng_name(p->streams[0]));
	svg_log_panels(f, p->n_regimes, regimes, p->n_bits, p->bits, "bits per value", p->n_codecs, codecs, colors, mean,
		       lo, hi, legend);
	free(mean);
}

/* ---------------------------------------------------------------- run */

static report r;
static hsq_study *study;
static char paths[3][4200]; /* PREFIX.csv, PREFIX.json, PREFIX.svg */

static char *setup(eval_runner *R)
{
	hsq_status st = hsq_study_check_params(&o.params);
	if (st != HSQ_OK)
		cli_usage_error(EVAL_PROG, "%s", hsq_last_error());
	return NULL;
}

static void csv_out(FILE *f)
{
	write_csv(&r, f);
}

static void json_out(FILE *f)
{
	write_json(&r, f);
}

static void svg_out(FILE *f)
{
	write_svg(&r, f, o.metric);
}

/* Opened before the study runs, renamed into place when complete, so a
 * failed run leaves earlier results untouched. */
static int outputs(eval_output *out)
{
	static const char *ext[3] = { "csv", "json", "svg" };
	static void (*const write[3])(FILE *f) = { csv_out, json_out, svg_out };
	for (int i = 0; i < 3; i++) {
		snprintf(paths[i], sizeof paths[i], "%s.%s", o.prefix, ext[i]);
		out[i] = (eval_output){ paths[i], write[i], "-o" };
	}
	return 3;
}

static void run(eval_log *L, size_t item)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	hsq_status st = hsq_study_run(&o.params, &study);
	if (st != HSQ_OK) /* a parameter combination the library refuses is a usage error */
		cli_die_status(EVAL_PROG, st == HSQ_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAILURE_RUNTIME, st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

static void summarize(const eval_log *L)
{
	hsq_status st;
	r.study = study;
	r.p = hsq_study_get_params(study);
	r.cells = calloc((size_t)r.p->n_regimes * r.p->n_codecs * r.p->n_bits, sizeof *r.cells);
	if (!r.cells)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	compute_report(&r);
	for (int s = 0; s < r.p->n_streams; s++)
		if ((st = hsq_study_findings(study, s, r.findings[s])) != HSQ_OK)
			cli_die_status(EVAL_PROG, EXIT_FAILURE_RUNTIME, st);
}

/* After the files are in place: the last line names them. */
static void print(void)
{
	if (o.quiet)
		return;
	print_table(&r, o.metric);
	printf("\nwrote %s.csv, %s.json, %s.svg\n", o.prefix, o.prefix, o.prefix);
}

static void done(void)
{
	free(r.cells);
	hsq_study_free(study);
}

const eval_sub eval_codecs = {
	.name = "codecs",
	.summary = "compare KV codecs on synthetic regimes, with statistics over seeds",
	.usage = USAGE,
	.description = DESCRIPTION,
	.options = options,
	.table_last = 1,
	.init = init,
	.option = option,
	.args = args,
	.setup = setup,
	.outputs = outputs,
	.run = run,
	.summarize = summarize,
	.print = print,
	.done = done,
};

/* ppl.c - hsq-eval ppl: perplexity of a continuation after a compressed
 * context, paired over the methods on the same documents.
 *
 * Per document: N context tokens (compressed by every method but full),
 * then the next M tokens scored as new tokens, in chunks of EVAL_CHUNK (a
 * compressed context keeps compressing its tail online between chunks, as
 * it would while decoding). The hsq methods also measure their router's
 * recall on the scored tokens: per layer, the share of the attention over
 * the full cache (which the compressed context still holds) that L1, the
 * fetched groups and the tail capture. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "docs.h"
#include "driver.h"

static const char USAGE[] = "hsq-eval ppl [options] FILE...";
static const char DESCRIPTION[] =
	"Perplexity of the continuation after a compressed context: each FILE is a document; its\n"
	"first N tokens are the context (compressed by every method but full), the next M are\n"
	"scored. Prints perplexity per document and method, and per method the pooled perplexity,\n"
	"its ratio to full with a paired bootstrap interval, and a non-inferiority verdict.\n"
	"See hsq-eval(1).";

enum { OPT_CONTEXT = EOPT_SPECIFIC, OPT_CONTINUATION, OPT_JOIN, OPT_MARGIN, OPT_RESAMPLES, OPT_SEED };

static const cli_option options[] = {
	{ "context", 0, "N", "context tokens per document (default 2048)", OPT_CONTEXT },
	{ "continuation", 0, "M", "scored tokens after the context (default 512)", OPT_CONTINUATION },
	{ "join", 0, NULL, "concatenate the files and cut them into samples of N+M tokens", OPT_JOIN },
	{ "margin", 0, "X", "non-inferiority margin on the perplexity ratio, 0.01 = 1% (default 0.01)", OPT_MARGIN },
	{ "resamples", 0, "N", "bootstrap resamples (default 10000)", OPT_RESAMPLES },
	{ "seed", 0, "S", "bootstrap seed (default 1)", OPT_SEED },
	{ 0 },
};

typedef struct ppl_opts {
	eval_common c;
	int context, continuation, join;
	double margin;
	long resamples;
	uint64_t seed;
	int n_files;
	char **files;
} ppl_opts;

typedef struct ppl_run {
	const ppl_opts *o;
	eval_runner *R;
	eval_docs D;
	float *last; /* the logits that predict the next scored token */
} ppl_run;

static ppl_opts opts;
static ppl_run state = { .o = &opts };

static eval_common *init(void)
{
	eval_common_init(&opts.c, "ppl");
	opts.context = 2048;
	opts.continuation = 512;
	opts.margin = 0.01;
	opts.resamples = 10000;
	opts.seed = 1;
	return &opts.c;
}

static int option(int id, const char *value)
{
	switch (id) {
	case OPT_CONTEXT: opts.context = (int)cli_long(EVAL_PROG, "--context", value, 64, 1 << 20); return 1;
	case OPT_CONTINUATION:
		opts.continuation = (int)cli_long(EVAL_PROG, "--continuation", value, 1, 1 << 20);
		return 1;
	case OPT_JOIN: opts.join = 1; return 1;
	case OPT_MARGIN: opts.margin = cli_double(EVAL_PROG, "--margin", value, 0, 10); return 1;
	case OPT_RESAMPLES: opts.resamples = cli_long(EVAL_PROG, "--resamples", value, 100, 10000000); return 1;
	case OPT_SEED: opts.seed = (uint64_t)cli_long(EVAL_PROG, "--seed", value, 0, 0x7fffffffffffffffL); return 1;
	default: return 0;
	}
}

static void args(int argc, char **argv)
{
	if (argc == 0)
		cli_usage_error(EVAL_PROG, "ppl needs at least one document FILE");
	opts.n_files = argc;
	opts.files = argv;
}

/* ------------------------------------------------------------ scoring */

/* Summed NLL of doc[0..m) given a context whose last logits are in
 * R->logits, evaluated in chunks with every row's logits. */
static double score(ppl_run *P, hsq_context *ctx, const hsq_token *doc, int m)
{
	eval_runner *R = P->R;
	const size_t V = (size_t)R->mi.n_vocab;
	double nll = 0;
	memcpy(P->last, R->logits, V * sizeof *P->last);
	for (int i = 0; i < m; i += EVAL_CHUNK) {
		int c = m - i < EVAL_CHUNK ? m - i : EVAL_CHUNK;
		nll += eval_nll(P->last, (int)V, doc[i]);
		eval_eval(R, ctx, doc + i, (size_t)c, R->logits, 1);
		for (int k = 0; k + 1 < c; k++)
			nll += eval_nll(R->logits + (size_t)k * V, (int)V, doc[i + k + 1]);
		memcpy(P->last, R->logits + (size_t)(c - 1) * V, V * sizeof *P->last);
	}
	return nll;
}

static void run_doc(ppl_run *P, eval_log *L, int d)
{
	const ppl_opts *o = P->o;
	const eval_doc *doc = &P->D.docs[d];
	const int N = o->context, M = o->continuation, n_obs = P->R->n_obs;
	double t0 = cli_now();
	eval_prefill(P->R, doc->toks, (size_t)(N - n_obs), N + M);
	sbuf r = { 0 }, line = { 0 };
	sb_printf(&r, "{\"record\":\"document\",\"index\":%d,\"name\":", d);
	sb_jstr(&r, doc->name);
	sb_printf(&r, ",\"methods\":{");
	for (int m = 0; m < o->c.n_methods; m++) {
		hsq_snapshot_mode mode = o->c.methods[m];
		hsq_context *ctx = eval_open(P->R, mode, doc->toks + N - n_obs, N + M, NULL);
		uint64_t fast = eval_fast_bytes(ctx);
		int routed = eval_method_mode(mode) == HSQ_MODE_HSQ;
		hsq_status st;
		if (routed && (st = hsq_context_set_recall_probe(ctx, 1)))
			eval_die_status(st, "the recall probe");
		double nll = score(P, ctx, doc->toks + N, M);
		sb_printf(&r, "%s\"%s\":{\"nll\":", m ? "," : "", eval_method_name(mode));
		sb_jnum(&r, nll);
		sb_printf(&r, ",\"tokens\":%d,\"fast_bytes\":%llu", M, (unsigned long long)fast);
		if (routed) {
			const int n_layer = P->R->mi.n_layer;
			double *rec = malloc((size_t)n_layer * sizeof *rec);
			if (!rec)
				cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
			if ((st = hsq_context_recall(ctx, rec)))
				eval_die_status(st, "the router's recall");
			sb_printf(&r, ",\"recall\":[");
			for (int l = 0; l < n_layer; l++) { /* null: a layer without groups */
				sb_printf(&r, "%s", l ? "," : "");
				sb_jnum(&r, rec[l]);
			}
			sb_printf(&r, "]");
			free(rec);
		}
		sb_printf(&r, "}");
		hsq_context_free(ctx);
		sb_printf(&line, " %s %.3f", eval_method_name(mode), exp(nll / M));
	}
	sb_printf(&r, "}}");
	eval_log_append(L, &r);
	eval_progress(&o->c, "document %d/%d %s: ppl%s (%.1f s)", d + 1, P->D.n, doc->name, line.s, cli_now() - t0);
	sb_free(&r);
	sb_free(&line);
}

static int check_record(const json_value *rec, void *user, char *err, size_t cap)
{
	const ppl_run *P = user;
	long index, tokens, fast;
	double nll;
	if (!eval_doc_record(rec, &P->D, &index, err, cap))
		return 0;
	for (int m = 0; m < P->o->c.n_methods; m++) {
		const json_value *r = eval_method_result(rec, P->o->c.methods[m], err, cap);
		if (!r || !json_num_member(r, "nll", &nll, err, cap) ||
		    !json_int_member(r, "tokens", P->o->continuation, P->o->continuation, &tokens, err, cap) ||
		    !json_int_member(r, "fast_bytes", 0, 1L << 52, &fast, err, cap))
			return 0;
		if (!(nll >= 0)) {
			snprintf(err, cap, "'nll' of %s is %g, not a non-negative number",
				 eval_method_name(P->o->c.methods[m]), nll);
			return 0;
		}
		/* "recall" of an hsq method: one share a layer (sums of float
		 * probabilities: up to 1.001), null for a layer
		 * without groups; logs written before it have none */
		const json_value *rc = json_get(r, "recall");
		if (rc && (rc->type != JSON_ARRAY || rc->n != (size_t)P->R->mi.n_layer)) {
			snprintf(err, cap, "'recall' of %s is not an array of %d shares (one a layer)",
				 eval_method_name(P->o->c.methods[m]), P->R->mi.n_layer);
			return 0;
		}
		for (size_t l = 0; rc && l < rc->n; l++)
			if (rc->items[l].type != JSON_NULL &&
			    (rc->items[l].type != JSON_NUMBER || !(rc->items[l].number >= 0 && rc->items[l].number <= 1.001))) {
				snprintf(err, cap, "'recall' of %s at layer %zu is not a share (0..1) or null",
					 eval_method_name(P->o->c.methods[m]), l);
				return 0;
			}
	}
	return 1;
}

/* ------------------------------------------------------------ summary */

typedef struct method_sum {
	int docs;
	long tokens;
	double nll, ppl, ratio, fast;
	hsq_boot_result boot;   /* ratio of pooled perplexities, exp of the NLL difference */
	int have_noninf;
	hsq_noninf_result noninf;
	/* router recall (hsq methods whose every record has it) */
	int have_recall;
	double recall_mean;     /* over layers with groups, of the per-layer means over documents */
	int worst_layer;        /* the layer with the lowest mean */
	double recall_worst;
	int have_recall_diff;   /* against the method named "hsq", paired over documents */
	hsq_boot_result recall_diff; /* mean over layers, this method's minus hsq's */
} method_sum;

typedef struct summary {
	const ppl_opts *o;
	const eval_docs *D;
	const char *config, *model;
	int n;              /* documents in the log */
	int *index;         /* [n] their indices */
	double *doc_nll;    /* [n][method] mean NLL per token */
	double *doc_recall; /* [n][method][n_layer] router recall, NaN where none */
	int n_layer;
	method_sum *m;      /* [method] */
} summary;

static void summarize_method(summary *S, int m)
{
	const ppl_opts *o = S->o;
	const int M = o->c.n_methods;
	method_sum *s = &S->m[m];
	double *x = malloc((size_t)S->n * sizeof *x), *y = malloc((size_t)S->n * sizeof *y);
	double *px = malloc((size_t)S->n * sizeof *px), *py = malloc((size_t)S->n * sizeof *py);
	if (!x || !y || !px || !py)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int i = 0; i < S->n; i++) {
		x[i] = S->doc_nll[i * M + m];
		y[i] = S->doc_nll[i * M];
		px[i] = exp(x[i]);
		py[i] = exp(y[i]);
	}
	s->ppl = exp(s->nll / (double)s->tokens);
	s->ratio = s->ppl / S->m[0].ppl;
	/* every document scores the same M tokens, so the mean of the
	 * per-document mean NLLs is the pooled mean NLL: the bootstrap of
	 * their difference, exponentiated, is the ratio of pooled perplexities */
	if (hsq_paired_bootstrap(x, y, (size_t)S->n, HSQ_BOOT_MEAN_DIFF, (size_t)o->resamples, EVAL_ALPHA, o->seed,
				 &s->boot) != HSQ_OK)
		eval_die_status(HSQ_ERR_INVALID_ARG, "bootstrap");
	s->boot.estimate = exp(s->boot.estimate);
	s->boot.low = exp(s->boot.low);
	s->boot.high = exp(s->boot.high);
	s->have_noninf = S->n >= 2 && m > 0;
	if (s->have_noninf &&
	    hsq_noninferiority_ratio(px, py, (size_t)S->n, o->margin, EVAL_ALPHA, &s->noninf) != HSQ_OK)
		eval_die_status(HSQ_ERR_INVALID_ARG, "non-inferiority test");
	free(x);
	free(y);
	free(px);
	free(py);
}

/* Mean over the layers that have a recall of a document's recall. */
static double doc_mean_recall(const summary *S, int i, int m)
{
	const double *dr = S->doc_recall + ((size_t)i * S->o->c.n_methods + m) * S->n_layer;
	double s = 0;
	int k = 0;
	for (int l = 0; l < S->n_layer; l++)
		if (!isnan(dr[l])) {
			s += dr[l];
			k++;
		}
	return k ? s / k : NAN;
}

static void summarize_recall(const ppl_run *P, summary *S)
{
	const int M = P->o->c.n_methods;
	int hsq = -1;
	for (int m = 0; m < M; m++)
		if (P->o->c.methods[m] == HSQ_MODE_HSQ && S->m[m].have_recall == 1)
			hsq = m;
	for (int m = 0; m < M; m++) {
		method_sum *s = &S->m[m];
		if (s->have_recall != 1 || S->n == 0) {
			s->have_recall = 0;
			continue;
		}
		double sum = 0;
		int k = 0;
		s->recall_worst = INFINITY;
		for (int l = 0; l < S->n_layer; l++) {
			double t = 0;
			int c = 0;
			for (int i = 0; i < S->n; i++) {
				double v = S->doc_recall[((size_t)i * M + m) * S->n_layer + l];
				if (!isnan(v)) {
					t += v;
					c++;
				}
			}
			if (!c)
				continue;
			t /= c;
			sum += t;
			k++;
			if (t < s->recall_worst) {
				s->recall_worst = t;
				s->worst_layer = l;
			}
		}
		s->recall_mean = k ? sum / k : NAN;
		if (!k)
			s->have_recall = 0;
		if (hsq < 0 || m == hsq || !s->have_recall || S->n < 2)
			continue;
		double *x = malloc((size_t)S->n * sizeof *x), *y = malloc((size_t)S->n * sizeof *y);
		if (!x || !y)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		for (int i = 0; i < S->n; i++) {
			x[i] = doc_mean_recall(S, i, m);
			y[i] = doc_mean_recall(S, i, hsq);
		}
		if (hsq_paired_bootstrap(x, y, (size_t)S->n, HSQ_BOOT_MEAN_DIFF, (size_t)P->o->resamples, EVAL_ALPHA,
					 P->o->seed, &s->recall_diff) != HSQ_OK)
			eval_die_status(HSQ_ERR_INVALID_ARG, "bootstrap of the recall");
		s->have_recall_diff = 1;
		free(x);
		free(y);
	}
}

static void summarize(const ppl_run *P, const eval_log *L, summary *S)
{
	const int M = P->o->c.n_methods;
	const json_value **by_doc = malloc((size_t)P->D.n * sizeof *by_doc);
	S->index = malloc((size_t)P->D.n * sizeof *S->index);
	S->doc_nll = malloc((size_t)P->D.n * (size_t)M * sizeof *S->doc_nll);
	S->n_layer = P->R->mi.n_layer;
	S->doc_recall = malloc((size_t)P->D.n * (size_t)M * (size_t)S->n_layer * sizeof *S->doc_recall);
	S->m = calloc((size_t)M, sizeof *S->m);
	if (!by_doc || !S->index || !S->doc_nll || !S->doc_recall || !S->m)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	eval_doc_records(L, &P->D, by_doc);
	S->n = 0;
	for (int d = 0; d < P->D.n; d++) { /* document order, whatever the log's order */
		if (!by_doc[d])
			continue;
		const json_value *ms = json_get(by_doc[d], "methods");
		for (int m = 0; m < M; m++) {
			const json_value *r = json_get(ms, eval_method_name(P->o->c.methods[m]));
			double nll = json_get(r, "nll")->number, tok = json_get(r, "tokens")->number;
			S->m[m].docs++;
			S->m[m].tokens += (long)tok;
			S->m[m].nll += nll;
			S->m[m].fast += json_get(r, "fast_bytes")->number;
			S->doc_nll[S->n * M + m] = nll / tok;
			const json_value *rc = json_get(r, "recall");
			double *dr = S->doc_recall + ((size_t)S->n * M + m) * S->n_layer;
			for (int l = 0; l < S->n_layer; l++)
				dr[l] = rc && rc->items[l].type == JSON_NUMBER ? rc->items[l].number : NAN;
			if (!rc)
				S->m[m].have_recall = -1; /* some record lacks it */
			else if (S->m[m].have_recall == 0)
				S->m[m].have_recall = 1;
		}
		S->index[S->n++] = d;
	}
	free(by_doc);
	for (int m = 0; m < M; m++)
		S->m[m].fast /= S->n;
	S->m[0].ppl = exp(S->m[0].nll / (double)S->m[0].tokens);
	for (int m = 0; m < M; m++)
		summarize_method(S, m);
	summarize_recall(P, S);
}

static const char *verdict(const method_sum *s)
{
	return !s->have_noninf ? "n/a" : s->noninf.non_inferior ? "yes" : "no";
}

static void print_table(const summary *S)
{
	const ppl_opts *o = S->o;
	const int M = o->c.n_methods;
	char b[32];
	printf("hsq-eval ppl: %s; %d document%s, context %d, continuation %d tokens%s, budget %s\n\n", S->model, S->n,
	       S->n == 1 ? "" : "s", o->context, o->continuation, o->join ? " (joined samples)" : "",
	       tier_budget_name(o->c.tier.budget, b, sizeof b));
	printf("%-24s", "document");
	for (int m = 0; m < M; m++)
		printf(" %20s", eval_method_name(o->c.methods[m]));
	printf("\n");
	for (int i = 0; i < S->n; i++) {
		printf("%-24.24s", S->D->docs[S->index[i]].name);
		for (int m = 0; m < M; m++) {
			double p = exp(S->doc_nll[i * M + m]), r = p / exp(S->doc_nll[i * M]);
			if (m)
				printf(" %10.3f (%6.4fx)", p, r);
			else
				printf(" %20.3f", p);
		}
		printf("\n");
	}
	const int w = eval_method_width(&o->c);
	printf("\n%-*s %5s %7s %9s %7s %-18s %8s %9s %5s %12s\n", w, "method", "docs", "tokens", "ppl", "ratio",
	       "[95% bootstrap]", "upper95", "p(noninf)", "noninf", "fast MiB");
	for (int m = 0; m < M; m++) {
		const method_sum *s = &S->m[m];
		printf("%-*s %5d %7ld %9.4f %7.4f", w, eval_method_name(o->c.methods[m]), s->docs, s->tokens, s->ppl,
		       s->ratio);
		if (m && s->have_noninf)
			printf(" [%.4f, %.4f] %8.4f %9.4f %5s", s->boot.low, s->boot.high, s->noninf.upper, s->noninf.p,
			       verdict(s));
		else if (m)
			printf(" [%.4f, %.4f] %8s %9s %5s", s->boot.low, s->boot.high, "-", "-", verdict(s));
		else
			printf(" %-18s %8s %9s %5s", "(reference)", "", "", "");
		printf(" %8.2f", s->fast / 1048576.0);
		if (m)
			printf(" (%.3fx)", S->m[0].fast > 0 ? s->fast / S->m[0].fast : NAN);
		printf("\n");
	}
	printf("\nratio: pooled perplexity over full's; bootstrap: paired, over documents, %ld resamples, seed %llu; "
	       "noninf: one-sided paired t test\non log per-document perplexity ratios, ratio < 1 + %.3g at alpha %.2f "
	       "(upper95: its one-sided bound; needs 2 documents).\n",
	       o->resamples, (unsigned long long)o->seed, o->margin, EVAL_ALPHA);
	int any = 0;
	for (int m = 0; m < M; m++)
		any |= S->m[m].have_recall;
	if (!any)
		return;
	printf("\nrouter recall on the scored tokens: the share of the attention over the full cache that L1, the fetched\n"
	       "groups and the tail hold; mean over the layers with groups of the per-layer means over documents, and the\n"
	       "layer with the lowest; diff: the method's mean minus hsq's, paired over documents, 95%% bootstrap.\n");
	printf("%-*s %8s %12s %9s  %s\n", w, "method", "mean", "worst layer", "its mean", "diff vs hsq [95% bootstrap]");
	for (int m = 0; m < M; m++) {
		const method_sum *s = &S->m[m];
		if (!s->have_recall)
			continue;
		printf("%-*s %8.4f %12d %9.4f", w, eval_method_name(o->c.methods[m]), s->recall_mean, s->worst_layer,
		       s->recall_worst);
		if (s->have_recall_diff)
			printf("  %+.4f [%+.4f, %+.4f]", s->recall_diff.estimate, s->recall_diff.low, s->recall_diff.high);
		printf("\n");
	}
}

static void json_method(sbuf *b, const summary *S, int m)
{
	const method_sum *s = &S->m[m];
	sb_printf(b, "{\"method\":\"%s\",\"documents\":%d,\"tokens\":%ld,\"ppl\":", eval_method_name(S->o->c.methods[m]),
		  s->docs, s->tokens);
	sb_jnum6(b, s->ppl);
	sb_printf(b, ",\"ratio\":");
	sb_jnum6(b, s->ratio);
	sb_printf(b, ",\"fast_bytes\":");
	sb_jnum6(b, s->fast);
	if (s->have_recall) {
		sb_printf(b, ",\"recall\":{\"mean\":");
		sb_jnum6(b, s->recall_mean);
		sb_printf(b, ",\"worst_layer\":%d,\"worst\":", s->worst_layer);
		sb_jnum6(b, s->recall_worst);
		if (s->have_recall_diff) {
			sb_printf(b, ",\"diff_vs_hsq\":");
			sb_jnum6(b, s->recall_diff.estimate);
			sb_printf(b, ",\"diff_vs_hsq_bootstrap95\":[");
			sb_jnum6(b, s->recall_diff.low);
			sb_putc(b, ',');
			sb_jnum6(b, s->recall_diff.high);
			sb_printf(b, "]");
		}
		sb_printf(b, "}");
	}
	if (m == 0) {
		sb_printf(b, ",\"bootstrap95\":null,\"noninferiority\":null}");
		return;
	}
	sb_printf(b, ",\"bootstrap95\":[");
	sb_jnum6(b, s->boot.low);
	sb_putc(b, ',');
	sb_jnum6(b, s->boot.high);
	sb_printf(b, "],\"noninferiority\":");
	if (!s->have_noninf) {
		sb_printf(b, "null}");
		return;
	}
	sb_printf(b, "{\"ratio\":");
	sb_jnum6(b, s->noninf.ratio);
	sb_printf(b, ",\"upper95\":");
	sb_jnum6(b, s->noninf.upper);
	sb_printf(b, ",\"p\":");
	sb_jnum6(b, s->noninf.p);
	sb_printf(b, ",\"non_inferior\":%s}}", s->noninf.non_inferior ? "true" : "false");
}

static void write_json(FILE *f, const summary *S)
{
	const ppl_opts *o = S->o;
	const int M = o->c.n_methods;
	sbuf b = { 0 };
	sb_printf(&b, "{\"tool\":\"hsq-eval\",\"subcommand\":\"ppl\",\"version\":\"%s\",\"margin\":%g,\"alpha\":%g,"
		      "\"resamples\":%ld,\"bootstrap_seed\":%llu,\n\"config\":%s,\n\"documents\":[\n",
		  hsq_version(), o->margin, EVAL_ALPHA, o->resamples, (unsigned long long)o->seed, S->config);
	for (int i = 0; i < S->n; i++) {
		sb_printf(&b, "%s{\"index\":%d,\"name\":", i ? ",\n" : "", S->index[i]);
		sb_jstr(&b, S->D->docs[S->index[i]].name);
		sb_printf(&b, ",\"ppl\":{");
		for (int m = 0; m < M; m++) {
			sb_printf(&b, "%s\"%s\":", m ? "," : "", eval_method_name(o->c.methods[m]));
			sb_jnum6(&b, exp(S->doc_nll[i * M + m]));
		}
		sb_printf(&b, "}}");
	}
	sb_printf(&b, "\n],\n\"methods\":[\n");
	for (int m = 0; m < M; m++) {
		sb_printf(&b, "%s", m ? ",\n" : "");
		json_method(&b, S, m);
	}
	sb_printf(&b, "\n]}\n");
	fputs(b.s, f);
	sb_free(&b);
}

static void write_csv(FILE *f, const summary *S)
{
	fprintf(f, "method,documents,tokens,ppl,ratio,boot_low,boot_high,noninf_upper,noninf_p,non_inferior,fast_bytes\n");
	for (int m = 0; m < S->o->c.n_methods; m++) {
		const method_sum *s = &S->m[m];
		fprintf(f, "%s,%d,%ld", eval_method_name(S->o->c.methods[m]), s->docs, s->tokens);
		eval_csv_num(f, s->ppl);
		eval_csv_num(f, s->ratio);
		eval_csv_num(f, m ? s->boot.low : NAN);
		eval_csv_num(f, m ? s->boot.high : NAN);
		eval_csv_num(f, s->have_noninf ? s->noninf.upper : NAN);
		eval_csv_num(f, s->have_noninf ? s->noninf.p : NAN);
		fprintf(f, ",%s", m ? verdict(s) : "");
		eval_csv_num(f, s->fast);
		fputc('\n', f);
	}
}

static void write_svg(FILE *f, const void *user)
{
	const summary *S = user;
	const int M = S->o->c.n_methods;
	const char *labels[EVAL_MAX_METHODS];
	double est[EVAL_MAX_METHODS], lo[EVAL_MAX_METHODS], hi[EVAL_MAX_METHODS];
	for (int m = 1; m < M; m++) {
		labels[m - 1] = eval_method_name(S->o->c.methods[m]);
		est[m - 1] = S->m[m].ratio;
		lo[m - 1] = S->m[m].boot.low;
		hi[m - 1] = S->m[m].boot.high;
	}
	svg_intervals(f, "perplexity ratio to full (95% paired bootstrap)", "pooled perplexity / full's", M - 1, labels,
		      est, lo, hi, 1.0);
}

static void write_markdown(FILE *f, const void *user)
{
	const summary *S = user;
	const ppl_opts *o = S->o;
	const int M = o->c.n_methods;
	fprintf(f, "# hsq-eval ppl\n\nModel %s; %d document%s; %d context tokens, %d scored.\n\n", S->model, S->n,
		S->n == 1 ? "" : "s", o->context, o->continuation);
	fprintf(f, "| method | ppl | ratio to full | 95%% bootstrap | non-inferior at %.3g%% | fast tier MiB |\n"
		   "|---|---|---|---|---|---|\n", 100 * o->margin);
	for (int m = 0; m < M; m++) {
		const method_sum *s = &S->m[m];
		fprintf(f, "| %s | %.4f | %.4f |", eval_method_name(o->c.methods[m]), s->ppl, s->ratio);
		if (m)
			fprintf(f, " [%.4f, %.4f] | %s", s->boot.low, s->boot.high, verdict(s));
		else
			fprintf(f, " (reference) | ");
		if (m && s->have_noninf)
			fprintf(f, " (upper %.4f, p %.4f)", s->noninf.upper, s->noninf.p);
		fprintf(f, " | %.2f |\n", s->fast / 1048576.0);
	}
	fprintf(f, "\n![perplexity ratio](ppl-ratio.svg)\n\n## Per document\n\n| document |");
	for (int m = 0; m < M; m++)
		fprintf(f, " %s |", eval_method_name(o->c.methods[m]));
	fprintf(f, "\n|---|");
	for (int m = 0; m < M; m++)
		fprintf(f, "---|");
	fprintf(f, "\n");
	for (int i = 0; i < S->n; i++) {
		fprintf(f, "| %s |", S->D->docs[S->index[i]].name);
		for (int m = 0; m < M; m++)
			fprintf(f, " %.3f |", exp(S->doc_nll[i * M + m]));
		fprintf(f, "\n");
	}
}

/* --------------------------------------------------------------- main */

static char *make_config(const ppl_run *P)
{
	sbuf b = { 0 };
	sb_printf(&b, "{");
	eval_runner_config(P->R, &b);
	sb_printf(&b, ",\"context\":%d,\"continuation\":%d,\"join\":%s,\"chunk\":%d,", P->o->context,
		  P->o->continuation, P->o->join ? "true" : "false", EVAL_CHUNK);
	eval_docs_config(&P->D, &b);
	sb_printf(&b, "}");
	return b.s;
}

static const json_value **done_docs; /* [document]: its record in the log, or NULL */
static summary sums = { .o = &opts, .D = &state.D };

static char *setup(eval_runner *R)
{
	state.R = R;
	if (opts.context + opts.continuation > R->mi.n_ctx_train)
		cli_usage_error(EVAL_PROG, "--context %d plus --continuation %d exceed the model's context of %d tokens",
				opts.context, opts.continuation, R->mi.n_ctx_train);
	eval_docs_load(&state.D, R, opts.n_files, opts.files, opts.context + opts.continuation, opts.join);
	char *config = make_config(&state);
	state.last = malloc((size_t)R->mi.n_vocab * sizeof *state.last);
	done_docs = malloc((size_t)state.D.n * sizeof *done_docs);
	if (!state.last || !done_docs)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	sums.config = config;
	sums.model = R->mi.name;
	return config;
}

static void resumed(const eval_log *L)
{
	int n_done = eval_doc_records(L, &state.D, done_docs);
	if (n_done)
		eval_progress(&opts.c, "%d document%s in %s already", n_done, n_done == 1 ? " is" : "s are", L->path);
}

static size_t count(void)
{
	return (size_t)state.D.n;
}

static int pending(size_t d)
{
	return state.D.docs[d].toks && !done_docs[d];
}

static void run(eval_log *L, size_t d)
{
	run_doc(&state, L, (int)d);
}

static void summarize_log(const eval_log *L)
{
	summarize(&state, L, &sums);
}

static void print(void)
{
	print_table(&sums);
}

static void json_out(FILE *f)
{
	write_json(f, &sums);
}

static void csv_out(FILE *f)
{
	write_csv(f, &sums);
}

static void report(const char *dir)
{
	eval_report_write(dir, "report.md", write_markdown, &sums);
	eval_report_write(dir, "ppl-ratio.svg", write_svg, &sums);
}

static void done(void)
{
	free(sums.index);
	free(sums.doc_nll);
	free(sums.doc_recall);
	free(sums.m);
	free(done_docs);
	free(state.last);
	eval_docs_free(&state.D);
}

const eval_sub eval_ppl = {
	.name = "ppl",
	.summary = "perplexity after a compressed context, ratio to full with intervals",
	.usage = USAGE,
	.description = DESCRIPTION,
	.options = options,
	.jobs = 1,
	.init = init,
	.option = option,
	.args = args,
	.setup = setup,
	.write_json = json_out,
	.write_csv = csv_out,
	.check = check_record,
	.check_user = &state,
	.resumed = resumed,
	.count = count,
	.pending = pending,
	.run = run,
	.summarize = summarize_log,
	.print = print,
	.report = report,
	.done = done,
};

/* ppl.c - hsq-eval ppl: perplexity of a continuation after a compressed
 * context, paired over the methods on the same documents.
 *
 * Per document: N context tokens (compressed by every method but full),
 * then the next M tokens scored as new tokens, in chunks of EVAL_CHUNK (a
 * compressed context keeps compressing its tail online between chunks, as
 * it would while decoding). */
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
		double nll = score(P, ctx, doc->toks + N, M);
		hsq_context_free(ctx);
		sb_printf(&r, "%s\"%s\":{\"nll\":", m ? "," : "", hsq_mode_name(mode));
		sb_jnum(&r, nll);
		sb_printf(&r, ",\"tokens\":%d,\"fast_bytes\":%llu}", M, (unsigned long long)fast);
		sb_printf(&line, " %s %.3f", hsq_mode_name(mode), exp(nll / M));
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
			snprintf(err, cap, "'nll' of %s is %g, not a non-negative number", hsq_mode_name(P->o->c.methods[m]),
				 nll);
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
} method_sum;

typedef struct summary {
	const ppl_opts *o;
	const eval_docs *D;
	const char *config, *model;
	int n;              /* documents in the log */
	int *index;         /* [n] their indices */
	double *doc_nll;    /* [n][method] mean NLL per token */
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

static void summarize(const ppl_run *P, const eval_log *L, summary *S)
{
	const int M = P->o->c.n_methods;
	const json_value **by_doc = malloc((size_t)P->D.n * sizeof *by_doc);
	S->index = malloc((size_t)P->D.n * sizeof *S->index);
	S->doc_nll = malloc((size_t)P->D.n * (size_t)M * sizeof *S->doc_nll);
	S->m = calloc((size_t)M, sizeof *S->m);
	if (!by_doc || !S->index || !S->doc_nll || !S->m)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	eval_doc_records(L, &P->D, by_doc);
	S->n = 0;
	for (int d = 0; d < P->D.n; d++) { /* document order, whatever the log's order */
		if (!by_doc[d])
			continue;
		const json_value *ms = json_get(by_doc[d], "methods");
		for (int m = 0; m < M; m++) {
			const json_value *r = json_get(ms, hsq_mode_name(P->o->c.methods[m]));
			double nll = json_get(r, "nll")->number, tok = json_get(r, "tokens")->number;
			S->m[m].docs++;
			S->m[m].tokens += (long)tok;
			S->m[m].nll += nll;
			S->m[m].fast += json_get(r, "fast_bytes")->number;
			S->doc_nll[S->n * M + m] = nll / tok;
		}
		S->index[S->n++] = d;
	}
	free(by_doc);
	for (int m = 0; m < M; m++)
		S->m[m].fast /= S->n;
	S->m[0].ppl = exp(S->m[0].nll / (double)S->m[0].tokens);
	for (int m = 0; m < M; m++)
		summarize_method(S, m);
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
		printf(" %20s", hsq_mode_name(o->c.methods[m]));
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
	printf("\n%-9s %5s %7s %9s %7s %-18s %8s %9s %5s %12s\n", "method", "docs", "tokens", "ppl", "ratio",
	       "[95% bootstrap]", "upper95", "p(noninf)", "noninf", "fast MiB");
	for (int m = 0; m < M; m++) {
		const method_sum *s = &S->m[m];
		printf("%-9s %5d %7ld %9.4f %7.4f", hsq_mode_name(o->c.methods[m]), s->docs, s->tokens, s->ppl, s->ratio);
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
}

static void json_method(sbuf *b, const summary *S, int m)
{
	const method_sum *s = &S->m[m];
	sb_printf(b, "{\"method\":\"%s\",\"documents\":%d,\"tokens\":%ld,\"ppl\":", hsq_mode_name(S->o->c.methods[m]),
		  s->docs, s->tokens);
	sb_jnum6(b, s->ppl);
	sb_printf(b, ",\"ratio\":");
	sb_jnum6(b, s->ratio);
	sb_printf(b, ",\"fast_bytes\":");
	sb_jnum6(b, s->fast);
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
			sb_printf(&b, "%s\"%s\":", m ? "," : "", hsq_mode_name(o->c.methods[m]));
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
		fprintf(f, "%s,%d,%ld", hsq_mode_name(S->o->c.methods[m]), s->docs, s->tokens);
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
		labels[m - 1] = hsq_mode_name(S->o->c.methods[m]);
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
		fprintf(f, "| %s | %.4f | %.4f |", hsq_mode_name(o->c.methods[m]), s->ppl, s->ratio);
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
		fprintf(f, " %s |", hsq_mode_name(o->c.methods[m]));
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

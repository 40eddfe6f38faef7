/* agree.c - hsq-eval agree: does a compressed context make the model pick
 * the tokens the full context makes it pick?
 *
 * Per document: N context tokens; full then generates M tokens greedily;
 * every other method is fed full's tokens one at a time (teacher forcing)
 * and its argmax compared with full's at each position. Up to the first
 * mismatch the method has seen exactly the tokens a free-running greedy
 * generation of its own would have produced, so the first mismatch is also
 * where free-running generation first diverges from full's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "docs.h"
#include "driver.h"

static const char USAGE[] = "hsq-eval agree [options] FILE...";
static const char DESCRIPTION[] =
	"Greedy agreement with full: each FILE is a document; after its first N tokens, full\n"
	"generates M tokens greedily and every other method, fed the same tokens, is compared\n"
	"with it position by position. Prints the agreement per document and method, and per\n"
	"method the mean and worst agreement, a Wilson interval over tokens and the median\n"
	"position of the first divergence. See hsq-eval(1).";

enum { OPT_CONTEXT = EOPT_SPECIFIC, OPT_GENERATE, OPT_JOIN };

static const cli_option options[] = {
	{ "context", 0, "N", "context tokens per document (default 2048)", OPT_CONTEXT },
	{ "generate", 0, "M", "tokens full generates and the others are compared on (default 256)", OPT_GENERATE },
	{ "join", 0, NULL, "concatenate the files and cut them into samples of N tokens", OPT_JOIN },
	{ 0 },
};

typedef struct agree_opts {
	eval_common c;
	int context, generate, join;
	int n_files;
	char **files;
} agree_opts;

typedef struct agree_run {
	const agree_opts *o;
	eval_runner *R;
	eval_docs D;
	hsq_token *gen; /* full's greedy tokens */
} agree_run;

static agree_opts opts;
static agree_run state = { .o = &opts };

static eval_common *init(void)
{
	eval_common_init(&opts.c, "agree");
	opts.context = 2048;
	opts.generate = 256;
	return &opts.c;
}

static int option(int id, const char *value)
{
	switch (id) {
	case OPT_CONTEXT: opts.context = (int)cli_long(EVAL_PROG, "--context", value, 64, 1 << 20); return 1;
	case OPT_GENERATE: opts.generate = (int)cli_long(EVAL_PROG, "--generate", value, 1, 1 << 20); return 1;
	case OPT_JOIN: opts.join = 1; return 1;
	default: return 0;
	}
}

static void args(int argc, char **argv)
{
	if (argc == 0)
		cli_usage_error(EVAL_PROG, "agree needs at least one document FILE");
	opts.n_files = argc;
	opts.files = argv;
}

/* ---------------------------------------------------------------- run */

/* full: generate; others: compare with full's tokens. Returns the agreeing
 * positions; *first_div the first mismatch, or -1. */
static int follow(agree_run *A, hsq_context *ctx, int is_full, int *first_div)
{
	const int M = A->o->generate, V = A->R->mi.n_vocab;
	int agree = 0;
	*first_div = -1;
	for (int i = 0; i < M; i++) {
		hsq_token best = hsq_argmax(A->R->logits, V);
		if (is_full)
			A->gen[i] = best;
		if (best == A->gen[i])
			agree++;
		else if (*first_div < 0)
			*first_div = i;
		if (i + 1 < M) /* the last token's successor is never compared */
			eval_eval(A->R, ctx, &A->gen[i], 1, A->R->logits, 0);
	}
	return agree;
}

static void run_doc(agree_run *A, eval_log *L, int d)
{
	const agree_opts *o = A->o;
	const eval_doc *doc = &A->D.docs[d];
	const int N = o->context, n_obs = A->R->n_obs;
	double t0 = cli_now();
	eval_prefill(A->R, doc->toks, (size_t)(N - n_obs), N + o->generate);
	sbuf r = { 0 }, line = { 0 };
	sb_printf(&r, "{\"record\":\"document\",\"index\":%d,\"name\":", d);
	sb_jstr(&r, doc->name);
	sb_printf(&r, ",\"methods\":{");
	for (int m = 0; m < o->c.n_methods; m++) { /* full is methods[0]: its tokens come first */
		hsq_snapshot_mode mode = o->c.methods[m];
		hsq_context *ctx = eval_open(A->R, mode, doc->toks + N - n_obs, N + o->generate, NULL);
		uint64_t fast = eval_fast_bytes(ctx);
		int first;
		int agree = follow(A, ctx, m == 0, &first);
		hsq_context_free(ctx);
		sb_printf(&r, "%s\"%s\":{\"agree\":%d,\"tokens\":%d,\"first_divergence\":", m ? "," : "",
			  eval_method_name(mode), agree, o->generate);
		if (first < 0)
			sb_printf(&r, "null");
		else
			sb_printf(&r, "%d", first);
		sb_printf(&r, ",\"fast_bytes\":%llu}", (unsigned long long)fast);
		if (m)
			sb_printf(&line, " %s %.3f", eval_method_name(mode), (double)agree / o->generate);
	}
	sb_printf(&r, "}}");
	eval_log_append(L, &r);
	eval_progress(&o->c, "document %d/%d %s: agreement%s (%.1f s)", d + 1, A->D.n, doc->name,
		      line.s ? line.s : " -", cli_now() - t0);
	sb_free(&r);
	sb_free(&line);
}

static int check_record(const json_value *rec, void *user, char *err, size_t cap)
{
	const agree_run *A = user;
	const int M = A->o->generate;
	long index, agree, tokens, fast, first;
	if (!eval_doc_record(rec, &A->D, &index, err, cap))
		return 0;
	for (int m = 0; m < A->o->c.n_methods; m++) {
		const json_value *r = eval_method_result(rec, A->o->c.methods[m], err, cap);
		if (!r || !json_int_member(r, "agree", 0, M, &agree, err, cap) ||
		    !json_int_member(r, "tokens", M, M, &tokens, err, cap) ||
		    !json_int_member(r, "fast_bytes", 0, 1L << 52, &fast, err, cap))
			return 0;
		const json_value *fd = json_get(r, "first_divergence");
		if (!fd || (fd->type != JSON_NULL && !json_int_member(r, "first_divergence", 0, M - 1, &first, err, cap))) {
			if (!fd)
				snprintf(err, cap, "'first_divergence' is missing");
			return 0;
		}
		if ((fd->type == JSON_NULL) != (agree == M)) {
			snprintf(err, cap, "'first_divergence' of %s does not fit 'agree' %ld of %d",
				 eval_method_name(A->o->c.methods[m]), agree, M);
			return 0;
		}
	}
	return 1;
}

/* ------------------------------------------------------------ summary */

typedef struct method_sum {
	int docs;
	long agree, tokens;
	double mean, worst, fast;
	hsq_interval wilson;
	int median_div;     /* lower median of the first divergence; M when none */
} method_sum;

typedef struct summary {
	const agree_opts *o;
	const eval_docs *D;
	const char *config, *model;
	int n;
	int *index;         /* [n] */
	int *agree, *first; /* [n][method]; first: M when no divergence */
	method_sum *m;
} summary;

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static void summarize_method(summary *S, int m)
{
	const int M = S->o->c.n_methods, G = S->o->generate;
	method_sum *s = &S->m[m];
	int *div = malloc((size_t)S->n * sizeof *div);
	if (!div)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	s->worst = 1;
	for (int i = 0; i < S->n; i++) {
		double a = (double)S->agree[i * M + m] / G;
		s->mean += a / S->n;
		s->worst = fmin(s->worst, a);
		div[i] = S->first[i * M + m];
	}
	qsort(div, (size_t)S->n, sizeof *div, cmp_int);
	/* the lower median is an observed position even when most documents
	 * never diverged (their value, G, is censored) */
	s->median_div = div[(S->n - 1) / 2];
	free(div);
	if (hsq_wilson_interval((uint64_t)s->agree, (uint64_t)s->tokens, EVAL_ALPHA, &s->wilson) != HSQ_OK)
		eval_die_status(HSQ_ERR_INTERNAL, "wilson interval");
}

static void summarize(const agree_run *A, const eval_log *L, summary *S)
{
	const int M = A->o->c.n_methods;
	const json_value **by_doc = malloc((size_t)A->D.n * sizeof *by_doc);
	S->index = malloc((size_t)A->D.n * sizeof *S->index);
	S->agree = malloc((size_t)A->D.n * (size_t)M * sizeof *S->agree);
	S->first = malloc((size_t)A->D.n * (size_t)M * sizeof *S->first);
	S->m = calloc((size_t)M, sizeof *S->m);
	if (!by_doc || !S->index || !S->agree || !S->first || !S->m)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	eval_doc_records(L, &A->D, by_doc);
	S->n = 0;
	for (int d = 0; d < A->D.n; d++) {
		if (!by_doc[d])
			continue;
		const json_value *ms = json_get(by_doc[d], "methods");
		for (int m = 0; m < M; m++) {
			const json_value *r = json_get(ms, eval_method_name(A->o->c.methods[m]));
			const json_value *fd = json_get(r, "first_divergence");
			int agree = (int)json_get(r, "agree")->number;
			S->agree[S->n * M + m] = agree;
			S->first[S->n * M + m] = fd->type == JSON_NULL ? A->o->generate : (int)fd->number;
			S->m[m].docs++;
			S->m[m].agree += agree;
			S->m[m].tokens += A->o->generate;
			S->m[m].fast += json_get(r, "fast_bytes")->number;
		}
		S->index[S->n++] = d;
	}
	free(by_doc);
	for (int m = 0; m < M; m++) {
		S->m[m].fast /= S->n;
		summarize_method(S, m);
	}
}

static void median_text(const summary *S, const method_sum *s, char *buf, size_t cap)
{
	if (s->median_div >= S->o->generate)
		snprintf(buf, cap, "none");
	else
		snprintf(buf, cap, "%d", s->median_div);
}

static void print_table(const summary *S)
{
	const agree_opts *o = S->o;
	const int M = o->c.n_methods;
	char b[32];
	printf("hsq-eval agree: %s; %d document%s, context %d, %d generated tokens%s, budget %s\n\n", S->model, S->n,
	       S->n == 1 ? "" : "s", o->context, o->generate, o->join ? " (joined samples)" : "",
	       tier_budget_name(o->c.tier.budget, b, sizeof b));
	printf("%-24s", "document");
	for (int m = 1; m < M; m++)
		printf(" %18s", eval_method_name(o->c.methods[m]));
	printf("\n%-24s", "");
	for (int m = 1; m < M; m++)
		printf(" %18s", "agree (1st div)");
	printf("\n");
	for (int i = 0; i < S->n; i++) {
		printf("%-24.24s", S->D->docs[S->index[i]].name);
		for (int m = 1; m < M; m++) {
			char d[16] = "-";
			int f = S->first[i * M + m];
			if (f < o->generate)
				snprintf(d, sizeof d, "%d", f);
			printf("      %6.4f (%4s)", (double)S->agree[i * M + m] / o->generate, d);
		}
		printf("\n");
	}
	const int w = eval_method_width(&o->c);
	printf("\n%-*s %5s %7s %7s %7s %-17s %10s %12s\n", w, "method", "docs", "tokens", "mean", "worst",
	       "[95% Wilson]", "median 1st", "fast MiB");
	for (int m = 1; m < M; m++) {
		const method_sum *s = &S->m[m];
		char med[16];
		median_text(S, s, med, sizeof med);
		printf("%-*s %5d %7ld %7.4f %7.4f [%.4f, %.4f] %10s %8.2f (%.3fx)\n", w,
		       eval_method_name(o->c.methods[m]), s->docs, s->tokens, s->mean, s->worst, s->wilson.low,
		       s->wilson.high, med, s->fast / 1048576.0, S->m[0].fast > 0 ? s->fast / S->m[0].fast : NAN);
	}
	printf("\nagreement: share of positions where the method's argmax equals full's greedy token, both fed full's "
	       "tokens;\n1st div: first such mismatch (where free-running greedy generation would diverge), '-'/none: "
	       "none within %d;\nmedian: lower median over documents; Wilson: over all tokens, as if independent.\n",
	       o->generate);
	if (M == 1)
		printf("(only full ran: nothing to compare)\n");
}

static void json_method(sbuf *b, const summary *S, int m)
{
	const method_sum *s = &S->m[m];
	sb_printf(b, "{\"method\":\"%s\",\"documents\":%d,\"tokens\":%ld,\"agree\":%ld,\"mean\":",
		  eval_method_name(S->o->c.methods[m]), s->docs, s->tokens, s->agree);
	sb_jnum6(b, s->mean);
	sb_printf(b, ",\"worst\":");
	sb_jnum6(b, s->worst);
	sb_printf(b, ",\"wilson95\":[");
	sb_jnum6(b, s->wilson.low);
	sb_putc(b, ',');
	sb_jnum6(b, s->wilson.high);
	sb_printf(b, "],\"median_first_divergence\":");
	if (s->median_div >= S->o->generate)
		sb_printf(b, "null");
	else
		sb_printf(b, "%d", s->median_div);
	sb_printf(b, ",\"fast_bytes\":");
	sb_jnum6(b, s->fast);
	sb_putc(b, '}');
}

static void write_json(FILE *f, const summary *S)
{
	const agree_opts *o = S->o;
	const int M = o->c.n_methods;
	sbuf b = { 0 };
	sb_printf(&b, "{\"tool\":\"hsq-eval\",\"subcommand\":\"agree\",\"version\":\"%s\",\"alpha\":%g,\n\"config\":%s,\n"
		      "\"documents\":[\n", hsq_version(), EVAL_ALPHA, S->config);
	for (int i = 0; i < S->n; i++) {
		sb_printf(&b, "%s{\"index\":%d,\"name\":", i ? ",\n" : "", S->index[i]);
		sb_jstr(&b, S->D->docs[S->index[i]].name);
		sb_printf(&b, ",\"agreement\":{");
		for (int m = 0; m < M; m++) {
			int fd = S->first[i * M + m];
			sb_printf(&b, "%s\"%s\":{\"agree\":", m ? "," : "", eval_method_name(o->c.methods[m]));
			sb_jnum6(&b, (double)S->agree[i * M + m] / o->generate);
			if (fd >= o->generate)
				sb_printf(&b, ",\"first_divergence\":null}");
			else
				sb_printf(&b, ",\"first_divergence\":%d}", fd);
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
	fprintf(f, "method,documents,tokens,agree,mean,worst,wilson_low,wilson_high,median_first_divergence,fast_bytes\n");
	for (int m = 0; m < S->o->c.n_methods; m++) {
		const method_sum *s = &S->m[m];
		char med[16];
		median_text(S, s, med, sizeof med);
		fprintf(f, "%s,%d,%ld,%ld,%.6g,%.6g,%.6g,%.6g,%s,%.6g\n", eval_method_name(S->o->c.methods[m]), s->docs,
			s->tokens, s->agree, s->mean, s->worst, s->wilson.low, s->wilson.high,
			s->median_div >= S->o->generate ? "" : med, s->fast);
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
		est[m - 1] = (double)S->m[m].agree / (double)S->m[m].tokens;
		lo[m - 1] = S->m[m].wilson.low;
		hi[m - 1] = S->m[m].wilson.high;
	}
	svg_intervals(f, "greedy agreement with full (95% Wilson over tokens)", "share of positions", M - 1, labels, est,
		      lo, hi, 1.0);
}

static void write_markdown(FILE *f, const void *user)
{
	const summary *S = user;
	const agree_opts *o = S->o;
	fprintf(f, "# hsq-eval agree\n\nModel %s; %d document%s; %d context tokens, %d generated by full and "
		   "teacher-forced into the others.\n\n", S->model, S->n, S->n == 1 ? "" : "s", o->context, o->generate);
	fprintf(f, "| method | mean agreement | worst | 95%% Wilson (tokens) | median first divergence | fast tier MiB |\n"
		   "|---|---|---|---|---|---|\n");
	for (int m = 1; m < o->c.n_methods; m++) {
		const method_sum *s = &S->m[m];
		char med[16];
		median_text(S, s, med, sizeof med);
		fprintf(f, "| %s | %.4f | %.4f | [%.4f, %.4f] | %s | %.2f |\n", eval_method_name(o->c.methods[m]), s->mean,
			s->worst, s->wilson.low, s->wilson.high, med, s->fast / 1048576.0);
	}
	fprintf(f, "\n![agreement](agree.svg)\n");
}

/* --------------------------------------------------------------- main */

static char *make_config(const agree_run *A)
{
	sbuf b = { 0 };
	sb_printf(&b, "{");
	eval_runner_config(A->R, &b);
	sb_printf(&b, ",\"context\":%d,\"generate\":%d,\"join\":%s,", A->o->context, A->o->generate,
		  A->o->join ? "true" : "false");
	eval_docs_config(&A->D, &b);
	sb_printf(&b, "}");
	return b.s;
}

static const json_value **done_docs; /* [document]: its record in the log, or NULL */
static summary sums = { .o = &opts, .D = &state.D };

static char *setup(eval_runner *R)
{
	state.R = R;
	if (opts.context + opts.generate > R->mi.n_ctx_train)
		cli_usage_error(EVAL_PROG, "--context %d plus --generate %d exceed the model's context of %d tokens",
				opts.context, opts.generate, R->mi.n_ctx_train);
	eval_docs_load(&state.D, R, opts.n_files, opts.files, opts.context, opts.join);
	char *config = make_config(&state);
	state.gen = malloc((size_t)opts.generate * sizeof *state.gen);
	done_docs = malloc((size_t)state.D.n * sizeof *done_docs);
	if (!state.gen || !done_docs)
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
	eval_report_write(dir, "agree.svg", write_svg, &sums);
}

static void done(void)
{
	free(sums.index);
	free(sums.agree);
	free(sums.first);
	free(sums.m);
	free(done_docs);
	free(state.gen);
	eval_docs_free(&state.D);
}

const eval_sub eval_agree = {
	.name = "agree",
	.summary = "greedy agreement with full, teacher-forced on full's tokens",
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

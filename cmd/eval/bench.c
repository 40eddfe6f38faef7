/* bench.c - hsq-eval bench: speed and memory of each method at a few
 * context lengths, each number also as a ratio to full from the same run.
 *
 * Per length L: one full prefill of the text's first L tokens (all but the
 * observation window timed); then per method: load, observation window,
 * compression (timed), tier sizes, a snapshot in the method's mode (size),
 * that snapshot loaded back (timed) and decoded from: one first step
 * (timed apart: hsq decodes there the archived groups its router takes,
 * every group of a retrieval head) and D one-token steps after it over
 * the text's next tokens (timed; the same tokens for every method, with
 * the logits and argmax a greedy decoder would compute), and the resident
 * set. With --repeat R the loads and decodes run R rounds, the
 * methods taking turns within each round, and a method's decode rate is
 * its best round: on a machine shared with other work, rates move 10-20%
 * from one minute to the next, and methods measured in turn see the same
 * minutes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"

static const char USAGE[] = "hsq-eval bench [options] --text FILE";
static const char DESCRIPTION[] =
	"Speed and memory per method and context length: prefill once (full), then per method the\n"
	"compression time, decode tokens/s, fast-tier and archive bytes, snapshot size and load\n"
	"time, and the resident set, each also as a ratio to full. The context is cut from FILE\n"
	"(repeated when it is shorter). See hsq-eval(1).";

enum { OPT_TEXT = EOPT_SPECIFIC, OPT_LENGTHS, OPT_DECODE, OPT_REPEAT };

static const cli_option options[] = {
	{ "text", 0, "FILE", "the text the contexts are cut from (required)", OPT_TEXT },
	{ "lengths", 0, "LIST", "comma-separated context lengths in tokens, capped at the model's (default 2048,4096,8192)",
	  OPT_LENGTHS },
	{ "decode", 0, "N", "decode steps timed per method (default 64)", OPT_DECODE },
	{ "repeat", 0, "R", "rounds of load and decode, the methods in turn; a method's decode rate is its best round "
			    "(default 1)",
	  OPT_REPEAT },
	{ 0 },
};

/* What one method measured at one length. */
enum { B_COMPRESS, B_DECODE, B_FAST, B_ARCHIVE, B_SNAPSHOT, B_LOAD, B_PEAK_RSS, B_RSS, B_FIRST, N_B };
static const char *const b_key[N_B] = { "compress_s",	  "decode_tok_s", "fast_bytes", "archive_bytes",
					"snapshot_bytes", "load_s",	  "peak_rss_bytes", "rss_bytes",
					"first_step_s" };

typedef struct bench_opts {
	eval_common c;
	const char *text;
	int n_len, lengths[EVAL_MAX_LIST];
	int decode;
	int repeat;            /* rounds of load and decode (--repeat) */
} bench_opts;

typedef struct bench_run {
	bench_opts *o;
	eval_runner *R;
	hsq_token *text;
	size_t n_text;
	char text_hash[17];
} bench_run;

static bench_opts opts;
static bench_run state = { .o = &opts };

static eval_common *init(void)
{
	eval_common_init(&opts.c, "bench");
	opts.n_len = 3;
	opts.lengths[0] = 2048;
	opts.lengths[1] = 4096;
	opts.lengths[2] = 8192;
	opts.decode = 64;
	opts.repeat = 1;
	return &opts.c;
}

static int option(int id, const char *value)
{
	switch (id) {
	case OPT_TEXT: opts.text = value; return 1;
	case OPT_LENGTHS:
		opts.n_len = eval_parse_ints("--lengths", value, 64, 1 << 20, opts.lengths, EVAL_MAX_LIST);
		return 1;
	case OPT_DECODE: opts.decode = (int)cli_long(EVAL_PROG, "--decode", value, 1, 1 << 16); return 1;
	case OPT_REPEAT: opts.repeat = (int)cli_long(EVAL_PROG, "--repeat", value, 1, 100); return 1;
	default: return 0;
	}
}

static void args(int argc, char **argv)
{
	if (argc > 0)
		cli_usage_error(EVAL_PROG, "bench takes no arguments ('%s' is extra); the text goes to --text", argv[0]);
	if (!opts.text)
		cli_usage_error(EVAL_PROG, "bench needs --text FILE, the text the contexts are cut from");
	if (!*opts.text)
		cli_usage_error(EVAL_PROG, "--text needs a non-empty path");
}

/* Lengths above what the model holds (with the decode steps) are capped,
 * and a length capped onto another is dropped. */
static void cap_lengths(bench_run *B)
{
	bench_opts *o = B->o;
	int limit = B->R->mi.n_ctx_train - 1 - o->decode, n = 0; /* the first step and D */
	if (limit < 64)
		cli_usage_error(EVAL_PROG, "--decode %d leaves no room in the model's context of %d tokens", o->decode,
				B->R->mi.n_ctx_train);
	for (int i = 0; i < o->n_len; i++) {
		int L = o->lengths[i] > limit ? limit : o->lengths[i], dup = 0;
		if (L != o->lengths[i])
			fprintf(stderr, "%s: --lengths %d capped at %d: the model's context is %d tokens, %d of them for "
					"decoding\n", EVAL_PROG, o->lengths[i], L, B->R->mi.n_ctx_train, 1 + o->decode);
		for (int j = 0; j < n; j++)
			dup |= o->lengths[j] == L;
		if (!dup)
			o->lengths[n++] = L;
	}
	o->n_len = n;
}

/* Token i of the endless text (the text repeated, after the BOS if the
 * model wants one). */
static hsq_token text_at(const bench_run *B, size_t i)
{
	if (B->R->mi.add_bos && B->R->mi.bos >= 0) {
		if (i == 0)
			return B->R->mi.bos;
		i--;
	}
	return B->text[i % B->n_text];
}

static uint64_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* One method's snapshot at one length, compressed and saved to path:
 * v[B_COMPRESS], v[B_FAST], v[B_ARCHIVE] and v[B_SNAPSHOT]. */
static void compress(bench_run *B, hsq_snapshot_mode mode, const hsq_token *toks, int L, const char *path, double *v)
{
	eval_runner *R = B->R;
	hsq_context *ctx = eval_open(R, mode, toks + L - R->n_obs, L + 1 + B->o->decode, &v[B_COMPRESS]);
	hsq_tier_stats ts = eval_tier_stats(ctx);
	v[B_FAST] = (double)(mode == HSQ_MODE_FULL ? ts.fp16_kv_bytes : ts.l1_bytes + ts.l2_bytes);
	v[B_ARCHIVE] = (double)ts.l3_bytes;
	hsq_status st = hsq_snapshot_save(ctx, path, eval_method_mode(mode), 3);
	if (st)
		eval_die_status(st, "saving the method's snapshot");
	hsq_context_free(ctx);
	v[B_SNAPSHOT] = (double)file_size(path);
}

/* One decode step over token tok: the logits and the argmax a greedy
 * decoder would take. */
static void greedy_step(eval_runner *R, hsq_context *ctx, hsq_token tok)
{
	eval_eval(R, ctx, &tok, 1, R->logits, 0);
	(void)hsq_argmax(R->logits, R->mi.n_vocab);
}

/* One round of a method: its snapshot loaded (v[B_LOAD], the first
 * round's) and decoded from as hsq-decode would (a context compressed in
 * this process also keeps the full cache, a loaded one does not): the
 * first step (v[B_FIRST], the first round's), then D steps; v[B_DECODE]
 * keeps the best rate of the D, the resident sets are read after. */
static void load_and_decode(bench_run *B, hsq_snapshot_mode mode, const hsq_token *toks, int L, const char *path,
			    int round, double *v)
{
	eval_runner *R = B->R;
	const int D = B->o->decode;
	double t0 = cli_now();
	hsq_context *ctx = eval_load(R, path, L + 1 + D, mode);
	if (round == 0)
		v[B_LOAD] = cli_now() - t0;
	t0 = cli_now();
	greedy_step(R, ctx, toks[L]);
	if (round == 0)
		v[B_FIRST] = cli_now() - t0;
	t0 = cli_now();
	for (int i = 1; i <= D; i++)
		greedy_step(R, ctx, toks[L + i]);
	double rate = D / (cli_now() - t0);
	v[B_DECODE] = round == 0 || rate > v[B_DECODE] ? rate : v[B_DECODE];
	v[B_RSS] = (double)eval_rss_now();
	v[B_PEAK_RSS] = (double)eval_rss_peak();
	hsq_context_free(ctx);
}

static void run_length(bench_run *B, eval_log *L, int li)
{
	const bench_opts *o = B->o;
	const int len = o->lengths[li], M = o->c.n_methods;
	hsq_token *toks = malloc((size_t)(len + 1 + o->decode) * sizeof *toks);
	char(*path)[sizeof B->R->dir + 32] = malloc((size_t)M * sizeof *path);
	double(*v)[N_B] = calloc((size_t)M, sizeof *v);
	if (!toks || !path || !v)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int i = 0; i < len + 1 + o->decode; i++)
		toks[i] = text_at(B, (size_t)i);
	double t_prefill = eval_prefill(B->R, toks, (size_t)(len - B->R->n_obs), len + 1 + o->decode);
	/* one snapshot per method in the private directory, which the
	 * cleanup empties should the run be stopped */
	for (int m = 0; m < M; m++) {
		snprintf(path[m], sizeof path[m], "%s/bench-%s.hsq", B->R->dir, eval_method_name(o->c.methods[m]));
		compress(B, o->c.methods[m], toks, len, path[m], v[m]);
	}
	for (int round = 0; round < o->repeat; round++)
		for (int m = 0; m < M; m++) {
			load_and_decode(B, o->c.methods[m], toks, len, path[m], round, v[m]);
			if (round == o->repeat - 1)
				unlink(path[m]);
		}
	sbuf r = { 0 };
	sb_printf(&r, "{\"record\":\"length\",\"length\":%d,\"prefill_tokens\":%d,\"prefill_s\":", len,
		  len - B->R->n_obs);
	sb_jnum(&r, t_prefill);
	sb_printf(&r, ",\"methods\":{");
	for (int m = 0; m < M; m++) {
		sb_printf(&r, "%s\"%s\":{", m ? "," : "", eval_method_name(o->c.methods[m]));
		for (int k = 0; k < N_B; k++) {
			sb_printf(&r, "%s\"%s\":", k ? "," : "", b_key[k]);
			sb_jnum(&r, v[m][k]);
		}
		sb_putc(&r, '}');
		eval_progress(&o->c, "length %d %s: decode %.1f tok/s, fast tier %.2f MiB, snapshot %.2f MiB, load %.3f s",
			      len, eval_method_name(o->c.methods[m]), v[m][B_DECODE], v[m][B_FAST] / 1048576.0,
			      v[m][B_SNAPSHOT] / 1048576.0, v[m][B_LOAD]);
	}
	sb_printf(&r, "}}");
	eval_log_append(L, &r);
	sb_free(&r);
	free(v);
	free(path);
	free(toks);
}

static int find_length(const bench_opts *o, long len)
{
	for (int i = 0; i < o->n_len; i++)
		if (o->lengths[i] == len)
			return i;
	return -1;
}

static int check_record(const json_value *rec, void *user, char *err, size_t cap)
{
	const bench_opts *o = user;
	const json_value *kind = json_get(rec, "record");
	long len, pt;
	double v;
	if (!kind || kind->type != JSON_STRING || strcmp(kind->string, "length")) {
		snprintf(err, cap, "'record' is not \"length\"");
		return 0;
	}
	if (!json_int_member(rec, "length", 1, 1 << 30, &len, err, cap) ||
	    !json_int_member(rec, "prefill_tokens", 1, 1 << 30, &pt, err, cap) ||
	    !json_num_member(rec, "prefill_s", &v, err, cap))
		return 0;
	if (find_length(o, len) < 0) {
		snprintf(err, cap, "length %ld is not one of this run's --lengths", len);
		return 0;
	}
	for (int m = 0; m < o->c.n_methods; m++) {
		const json_value *r = eval_method_result(rec, o->c.methods[m], err, cap);
		if (!r)
			return 0;
		for (int k = 0; k < N_B; k++) {
			if (!json_num_member(r, b_key[k], &v, err, cap))
				return 0;
			if (!(v >= 0)) {
				snprintf(err, cap, "'%s' of %s is negative", b_key[k], eval_method_name(o->c.methods[m]));
				return 0;
			}
		}
	}
	return 1;
}

/* ------------------------------------------------------------ summary */

typedef struct summary {
	const bench_opts *o;
	const char *config, *model;
	int n_obs;
	int *done;        /* [length] logged */
	double *prefill;  /* [length] tokens/s */
	double *v;        /* [length][method][N_B] */
} summary;

static void summary_free(summary *S)
{
	free(S->done);
	free(S->prefill);
	free(S->v);
	S->done = NULL;
	S->prefill = S->v = NULL;
}

static double at(const summary *S, int li, int m, int k)
{
	return S->v[((size_t)li * (size_t)S->o->c.n_methods + (size_t)m) * N_B + (size_t)k];
}

static void summarize(const bench_run *B, const eval_log *L, summary *S)
{
	const bench_opts *o = B->o;
	const int M = o->c.n_methods;
	S->done = calloc((size_t)o->n_len, sizeof *S->done);
	S->prefill = malloc((size_t)o->n_len * sizeof *S->prefill);
	S->v = malloc((size_t)o->n_len * (size_t)M * N_B * sizeof *S->v);
	if (!S->done || !S->prefill || !S->v)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (size_t i = 0; i < (size_t)o->n_len * (size_t)M * N_B; i++)
		S->v[i] = NAN;
	for (int li = 0; li < o->n_len; li++)
		S->prefill[li] = NAN;
	for (size_t i = 0; i < L->n; i++) {
		const json_value *rec = &L->records[i];
		int li = find_length(o, (long)json_get(rec, "length")->number);
		if (S->done[li])
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: length %d is in the log twice; remove one", L->path,
				L->lines[i], o->lengths[li]);
		S->done[li] = 1;
		double s = json_get(rec, "prefill_s")->number;
		S->prefill[li] = s > 0 ? json_get(rec, "prefill_tokens")->number / s : NAN;
		const json_value *ms = json_get(rec, "methods");
		for (int m = 0; m < M; m++) {
			const json_value *r = json_get(ms, eval_method_name(o->c.methods[m]));
			for (int k = 0; k < N_B; k++) /* check_record saw every key */
				S->v[((size_t)li * M + m) * N_B + k] = json_get(r, b_key[k])->number;
		}
	}
}

static double ratio(const summary *S, int li, int m, int k)
{
	double full = at(S, li, 0, k);
	return full > 0 ? at(S, li, m, k) / full : NAN;
}

static void print_table(const summary *S)
{
	const bench_opts *o = S->o;
	const int M = o->c.n_methods;
	char b[32];
	printf("hsq-eval bench: %s; %d decode steps (best of %d round%s), %d thread%s%s, budget %s\n", S->model,
	       o->decode, o->repeat, o->repeat == 1 ? "" : "s", o->c.threads, o->c.threads == 1 ? "" : "s",
	       o->c.threads ? "" : " (0: all cores)", tier_budget_name(o->c.tier.budget, b, sizeof b));
	printf("ratios (x) are to full at the same length; peak RSS is the process's peak so far (it only grows "
	       "within a run).\n\n");
	const int w = eval_method_width(&o->c);
	printf("%6s %-*s %9s %9s %16s %18s %10s %17s %15s %15s %17s %16s\n", "length", w, "method", "prefill/s",
	       "compress", "decode tok/s", "fast tier MiB", "archive", "snapshot MiB", "load s", "first step s",
	       "peak RSS MiB", "RSS MiB");
	for (int li = 0; li < o->n_len; li++) {
		for (int m = 0; m < M; m++) {
			printf("%6d %-*s %9.1f %8.3fs %8.2f (%5.2fx) %9.2f (%6.4fx) %9.2f %8.2f (%5.3fx) %7.3f (%5.3fx) "
			       "%7.3f (%5.2fx) %8.1f (%5.3fx) %7.1f (%5.3fx)\n",
			       o->lengths[li], w, eval_method_name(o->c.methods[m]), S->prefill[li],
			       at(S, li, m, B_COMPRESS), at(S, li, m, B_DECODE), ratio(S, li, m, B_DECODE),
			       at(S, li, m, B_FAST) / 1048576.0, ratio(S, li, m, B_FAST),
			       at(S, li, m, B_ARCHIVE) / 1048576.0, at(S, li, m, B_SNAPSHOT) / 1048576.0,
			       ratio(S, li, m, B_SNAPSHOT), at(S, li, m, B_LOAD), ratio(S, li, m, B_LOAD),
			       at(S, li, m, B_FIRST), ratio(S, li, m, B_FIRST),
			       at(S, li, m, B_PEAK_RSS) / 1048576.0, ratio(S, li, m, B_PEAK_RSS),
			       at(S, li, m, B_RSS) / 1048576.0, ratio(S, li, m, B_RSS));
		}
	}
	printf("\nprefill/s: the full prefill of all but the last %d tokens, once per length; fast tier: L1+L2 "
	       "(full: the cache at fp16);\narchive: L3 before zstd; snapshot: a file in the method's mode (zstd 3); "
	       "decode: from that snapshot, loaded, the steps after the first (first step: its time).\n", S->n_obs);
}

static void write_json(FILE *f, const summary *S)
{
	const bench_opts *o = S->o;
	const int M = o->c.n_methods;
	sbuf b = { 0 };
	sb_printf(&b, "{\"tool\":\"hsq-eval\",\"subcommand\":\"bench\",\"version\":\"%s\",\n\"config\":%s,\n\"rows\":[\n",
		  hsq_version(), S->config);
	for (int li = 0; li < o->n_len; li++)
		for (int m = 0; m < M; m++) {
			sb_printf(&b, "%s{\"length\":%d,\"method\":\"%s\",\"prefill_tok_s\":", li || m ? ",\n" : "",
				  o->lengths[li], eval_method_name(o->c.methods[m]));
			sb_jnum6(&b, S->prefill[li]);
			for (int k = 0; k < N_B; k++) {
				sb_printf(&b, ",\"%s\":", b_key[k]);
				sb_jnum6(&b, at(S, li, m, k));
			}
			sb_printf(&b, ",\"ratio_to_full\":{");
			for (int k = 1; k < N_B; k++) { /* full's compression time is 0: no ratio */
				sb_printf(&b, "%s\"%s\":", k > 1 ? "," : "", b_key[k]);
				sb_jnum6(&b, ratio(S, li, m, k));
			}
			sb_printf(&b, "}}");
		}
	sb_printf(&b, "\n]}\n");
	fputs(b.s, f);
	sb_free(&b);
}

static void write_csv(FILE *f, const summary *S)
{
	const bench_opts *o = S->o;
	fprintf(f, "length,method,prefill_tok_s");
	for (int k = 0; k < N_B; k++)
		fprintf(f, ",%s", b_key[k]);
	for (int k = 1; k < N_B; k++)
		fprintf(f, ",%s_ratio", b_key[k]);
	fputc('\n', f);
	for (int li = 0; li < o->n_len; li++)
		for (int m = 0; m < o->c.n_methods; m++) {
			fprintf(f, "%d,%s", o->lengths[li], eval_method_name(o->c.methods[m]));
			eval_csv_num(f, S->prefill[li]);
			for (int k = 0; k < N_B; k++)
				eval_csv_num(f, at(S, li, m, k));
			for (int k = 1; k < N_B; k++)
				eval_csv_num(f, ratio(S, li, m, k));
			fputc('\n', f);
		}
}

static void write_svg(FILE *f, const void *user)
{
	const summary *S = user;
	const bench_opts *o = S->o;
	const int M = o->c.n_methods;
	double x[EVAL_MAX_LIST], *y = malloc((size_t)M * (size_t)o->n_len * sizeof *y);
	const char *names[EVAL_MAX_METHODS];
	if (!y)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int li = 0; li < o->n_len; li++)
		x[li] = o->lengths[li];
	for (int m = 0; m < M; m++) {
		names[m] = eval_method_name(o->c.methods[m]);
		for (int li = 0; li < o->n_len; li++)
			y[m * o->n_len + li] = at(S, li, m, B_DECODE);
	}
	svg_lines(f, "decode speed against context length", "context length (tokens)", "decode tokens/s", o->n_len, x, M,
		  names, y);
	free(y);
}

static void write_markdown(FILE *f, const void *user)
{
	const summary *S = user;
	const bench_opts *o = S->o;
	fprintf(f, "# hsq-eval bench\n\nModel %s; %d decode steps; %d threads (0: all cores). Ratios are to full at "
		   "the same length.\n\n", S->model, o->decode, o->c.threads);
	fprintf(f, "| length | method | prefill tok/s | compress s | decode tok/s (x) | fast tier MiB (x) | archive MiB | "
		   "snapshot MiB (x) | load s (x) | first step s (x) | peak RSS MiB (x) |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int li = 0; li < o->n_len; li++)
		for (int m = 0; m < o->c.n_methods; m++)
			fprintf(f, "| %d | %s | %.1f | %.3f | %.2f (%.2f) | %.2f (%.4f) | %.2f | %.2f (%.3f) | %.3f (%.3f) | "
				   "%.3f (%.2f) | %.1f (%.3f) |\n",
				o->lengths[li], eval_method_name(o->c.methods[m]), S->prefill[li], at(S, li, m, B_COMPRESS),
				at(S, li, m, B_DECODE), ratio(S, li, m, B_DECODE), at(S, li, m, B_FAST) / 1048576.0,
				ratio(S, li, m, B_FAST), at(S, li, m, B_ARCHIVE) / 1048576.0,
				at(S, li, m, B_SNAPSHOT) / 1048576.0, ratio(S, li, m, B_SNAPSHOT), at(S, li, m, B_LOAD),
				ratio(S, li, m, B_LOAD), at(S, li, m, B_FIRST), ratio(S, li, m, B_FIRST),
				at(S, li, m, B_PEAK_RSS) / 1048576.0, ratio(S, li, m, B_PEAK_RSS));
	fprintf(f, "\n![decode speed](bench-decode.svg)\n");
}

/* --------------------------------------------------------------- main */

static void load_text(bench_run *B)
{
	size_t len;
	char *text = cli_read_all(EVAL_PROG, B->o->text, &len);
	if (len == 0 || strlen(text) != len)
		cli_die(EVAL_PROG, EXIT_INPUT, "--text %s is %s; give a text file", B->o->text,
			len ? "not text (it holds a NUL byte)" : "empty");
	eval_fnv1a_hex(text, len, B->text_hash);
	B->text = eval_tokenize(B->R->model, text, len, 0, 0, &B->n_text, B->o->text);
	free(text);
	if (B->n_text == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "--text %s holds no tokens; give a text file", B->o->text);
}

static char *make_config(const bench_run *B)
{
	const bench_opts *o = B->o;
	const char *base = strrchr(o->text, '/') ? strrchr(o->text, '/') + 1 : o->text;
	sbuf b = { 0 };
	sb_printf(&b, "{");
	eval_runner_config(B->R, &b);
	sb_printf(&b, ",\"threads\":%d,\"lengths\":[", o->c.threads);
	for (int i = 0; i < o->n_len; i++)
		sb_printf(&b, "%s%d", i ? "," : "", o->lengths[i]);
	/* logs from before first_step_s timed the first step with the others */
	sb_printf(&b, "],\"decode\":%d,\"first_step\":\"apart\",\"repeat\":%d,\"text\":{\"name\":", o->decode,
		  o->repeat);
	sb_jstr(&b, base);
	sb_printf(&b, ",\"fnv1a\":\"%s\"}}", B->text_hash);
	return b.s;
}

static summary sums = { .o = &opts };

static char *setup(eval_runner *R)
{
	state.R = R;
	cap_lengths(&state);
	load_text(&state);
	char *config = make_config(&state);
	sums.config = config;
	sums.model = R->mi.name;
	sums.n_obs = R->n_obs;
	return config;
}

/* --summarize cannot leave a length out of the table: it is refused (not
 * printed as NaN) when the log does not hold it. */
static void resumed(const eval_log *L)
{
	summarize(&state, L, &sums);
	if (L->n)
		eval_progress(&opts.c, "%zu of %d lengths are in %s already", L->n, opts.n_len, L->path);
	for (int li = 0; opts.c.summarize && li < opts.n_len; li++)
		if (!sums.done[li])
			cli_die(EVAL_PROG, EXIT_INPUT, "--summarize: length %d is not in %s; run it first (without "
						       "--summarize), or leave it out of --lengths",
				opts.lengths[li], L->path);
}

static size_t count(void)
{
	return (size_t)opts.n_len;
}

static int pending(size_t li)
{
	return !sums.done[li];
}

static void run(eval_log *L, size_t li)
{
	run_length(&state, L, (int)li);
}

static void summarize_log(const eval_log *L)
{
	summary_free(&sums);
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
	eval_report_write(dir, "bench-decode.svg", write_svg, &sums);
}

static void done(void)
{
	summary_free(&sums);
	hsq_free(state.text);
}

const eval_sub eval_bench = {
	.name = "bench",
	.summary = "speed, tier sizes, snapshot size and memory per method and length",
	.usage = USAGE,
	.description = DESCRIPTION,
	.options = options,
	.init = init,
	.option = option,
	.args = args,
	.setup = setup,
	.write_json = json_out,
	.write_csv = csv_out,
	.check = check_record,
	.check_user = &opts,
	.resumed = resumed,
	.count = count,
	.pending = pending,
	.run = run,
	.summarize = summarize_log,
	.print = print,
	.report = report,
	.done = done,
};

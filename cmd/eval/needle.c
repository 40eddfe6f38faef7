/* needle.c - hsq-eval needle: needle in a haystack over a grid of context
 * lengths and depths, every trial paired over the methods.
 *
 * A trial (length, depth, index): a haystack cut from the --haystack text
 * at an offset drawn from the seed, with K needles "The special magic
 * number for CITY is NNNNNNN." (the asked one at the cell's depth, the
 * others spread over the remaining depths), inside a chat user turn that
 * ends with the question, as hsq-prefill --chat and hsq-decode --chat
 * would build it. Every method answers greedily from the same tokens; a
 * trial succeeds when the answer contains the number. Each method also
 * scores the number teacher-forced (answer_logp): a continuous, paired
 * measure that moves before a greedy answer flips. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

#define N_ANSWER 24   /* greedy answer tokens */
#define LOGP_RESAMPLES 10000 /* bootstrap of the paired log-probability difference */
#define MIN_HAYSTACK 64
#define MAX_KEYS 16

static const char USAGE[] = "hsq-eval needle [options] --haystack FILES";
static const char DESCRIPTION[] =
	"Needle in a haystack: for every context length, depth and trial, hide K needles \"The\n"
	"special magic number for CITY is NNNNNNN.\" in a haystack cut from FILES, ask for one in\n"
	"a chat turn, and let every method answer greedily from the same tokens. Prints success\n"
	"rates with Wilson intervals and, against full, discordant pairs, an exact McNemar test and\n"
	"a TOST equivalence verdict, per cell and pooled. See hsq-eval(1).";

enum { OPT_HAYSTACK = EOPT_SPECIFIC, OPT_LENGTHS, OPT_DEPTHS, OPT_TRIALS, OPT_ONLY_TRIALS, OPT_KEYS, OPT_SEED,
       OPT_MARGIN };

static const cli_option options[] = {
	{ "haystack", 0, "FILES", "comma-separated text files the haystacks are cut from (required)", OPT_HAYSTACK },
	{ "lengths", 0, "LIST", "comma-separated context lengths in tokens, prompt and answer (default 2048,4096)",
	  OPT_LENGTHS },
	{ "depths", 0, "LIST", "comma-separated depths of the asked needle, percent (default 10,30,50,70,90)",
	  OPT_DEPTHS },
	{ "trials", 0, "N", "trials per length and depth (default 10)", OPT_TRIALS },
	{ "only-trials", 0, "LIST", "run only these trial indices of each cell, 0-based, e.g. 4-9 or 0,7 (default: all)",
	  OPT_ONLY_TRIALS },
	{ "keys", 0, "K", "needles per haystack, 1..16; one is asked (default 1)", OPT_KEYS },
	{ "seed", 0, "S", "seed of the needles and haystack offsets (default 1)", OPT_SEED },
	{ "margin", 0, "PP", "TOST equivalence margin, percentage points (default 5)", OPT_MARGIN },
	{ 0 },
};

static const char *const cities[] = { "Lisbon",  "Nairobi", "Osaka",   "Quito",  "Tallinn", "Perth",   "Dakar",
				      "Hanoi",   "Bergen",  "Cusco",   "Tbilisi", "Accra",   "Leipzig", "Manaus",
				      "Porto",   "Kyoto",   "Lima",    "Oslo",   "Zagreb",  "Valencia", "Bogota",
				      "Malmo",   "Riga",    "Seville", "Tunis",  "Vilnius", "Cordoba", "Krakow" };
#define N_CITIES (int)(sizeof cities / sizeof *cities)

typedef struct needle_opts {
	eval_common c;
	int n_len, lengths[EVAL_MAX_LIST];
	int n_depth, depths[EVAL_MAX_LIST];
	int trials, keys;
	/* --only-trials: inclusive index ranges [first, last] this run may
	 * run; n_only 0 = all. Not part of the log's configuration, so logs
	 * of disjoint selections concatenate into one. */
	int n_only, only_first[EVAL_MAX_LIST], only_last[EVAL_MAX_LIST];
	uint64_t seed;
	double margin; /* proportion units */
	int n_hay;
	const char *hay[EVAL_MAX_FILES];
} needle_opts;

/* One trial's needles and prompt. */
typedef struct trial {
	int li, di, t;
	int city[MAX_KEYS];
	unsigned number[MAX_KEYS];
	int depth[MAX_KEYS]; /* key 0 is asked, at the cell's depth */
	size_t offset;       /* where the haystack starts */
	hsq_token *prompt;
	size_t n_context;    /* tokens before the question */
	size_t n_prompt;
} trial;

typedef struct needle_run {
	needle_opts *o;
	eval_runner *R;
	hsq_token *hay;
	size_t n_hay;
	char hay_hash[EVAL_MAX_FILES][17];
	hsq_token *open;
	size_t n_open;
	char *close;
	int8_t *ok;      /* [cell index][method], -1 until known */
	double *fast;    /* [cell index][method] */
	double *logp;    /* [cell index][method], nats; NaN when the log has none */
	size_t n_trials; /* lengths x depths x trials */
} needle_run;

/* --only-trials: comma-separated indices or ranges "A-B", A <= B. */
static void parse_only_trials(needle_opts *o, const char *value)
{
	o->n_only = 0;
	for (const char *p = value;;) {
		char *end;
		long a, b;
		errno = 0;
		a = strtol(p, &end, 10);
		b = a;
		if (!errno && end != p && *end == '-') {
			const char *q = end + 1;
			b = strtol(q, &end, 10);
			if (end == q)
				b = -1;
		}
		if (errno || end == p || (*end && *end != ',') || *p == '+' || *p == '-' || *p == ' ' || a < 0 ||
		    b < a || b > 99999)
			cli_usage_error(EVAL_PROG, "--only-trials expects comma-separated trial indices or ranges "
						   "like 4-9 (0-based, first <= last), not '%s'",
					value);
		if (o->n_only == EVAL_MAX_LIST)
			cli_usage_error(EVAL_PROG, "--only-trials: at most %d items", EVAL_MAX_LIST);
		o->only_first[o->n_only] = (int)a;
		o->only_last[o->n_only++] = (int)b;
		if (!*end)
			return;
		p = end + 1;
	}
}

static int trial_selected(const needle_opts *o, int t)
{
	if (!o->n_only)
		return 1;
	for (int i = 0; i < o->n_only; i++)
		if (t >= o->only_first[i] && t <= o->only_last[i])
			return 1;
	return 0;
}

static needle_opts opts;
static needle_run state = { .o = &opts };

static eval_common *init(void)
{
	eval_common_init(&opts.c, "needle");
	opts.n_len = 2;
	opts.lengths[0] = 2048;
	opts.lengths[1] = 4096;
	opts.n_depth = 5;
	for (int i = 0; i < 5; i++)
		opts.depths[i] = 10 + 20 * i;
	opts.trials = 10;
	opts.keys = 1;
	opts.seed = 1;
	opts.margin = 0.05;
	return &opts.c;
}

static int option(int id, const char *value)
{
	switch (id) {
	case OPT_HAYSTACK: opts.n_hay = eval_parse_files("--haystack", value, opts.hay, EVAL_MAX_FILES); return 1;
	case OPT_LENGTHS:
		opts.n_len = eval_parse_ints("--lengths", value, 128, 1 << 20, opts.lengths, EVAL_MAX_LIST);
		return 1;
	case OPT_DEPTHS: opts.n_depth = eval_parse_ints("--depths", value, 0, 100, opts.depths, EVAL_MAX_LIST); return 1;
	case OPT_TRIALS: opts.trials = (int)cli_long(EVAL_PROG, "--trials", value, 1, 100000); return 1;
	case OPT_ONLY_TRIALS: parse_only_trials(&opts, value); return 1;
	case OPT_KEYS: opts.keys = (int)cli_long(EVAL_PROG, "--keys", value, 1, MAX_KEYS); return 1;
	case OPT_SEED: opts.seed = (uint64_t)cli_long(EVAL_PROG, "--seed", value, 0, 0x7fffffffffffffffL); return 1;
	case OPT_MARGIN: opts.margin = cli_double(EVAL_PROG, "--margin", value, 0, 100) / 100; return 1;
	default: return 0;
	}
}

static void args(int argc, char **argv)
{
	if (argc > 0)
		cli_usage_error(EVAL_PROG, "needle takes no arguments ('%s' is extra); the haystack goes to --haystack",
				argv[0]);
	if (!opts.n_hay)
		cli_usage_error(EVAL_PROG, "needle needs --haystack FILES, the text the haystacks are cut from");
	for (int i = 0; i < opts.n_only; i++)
		if (opts.only_last[i] >= opts.trials)
			cli_usage_error(EVAL_PROG, "--only-trials names trial %d, but --trials %d has indices 0 to %d; "
						   "raise --trials or name lower indices",
					opts.only_last[i], opts.trials, opts.trials - 1);
}

/* ------------------------------------------------------------- trials */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t next(uint64_t *s)
{
	return mix64(*s += 0x9e3779b97f4a7c15ull);
}

/* The random stream of one trial: a function of the seed and the trial's
 * place in the grid only, so a resumed run draws what the first would. */
static uint64_t trial_stream(uint64_t seed, int length, int depth, int t)
{
	uint64_t s = mix64(seed + 0x9e3779b97f4a7c15ull);
	s = mix64(s ^ (uint64_t)length);
	s = mix64(s ^ ((uint64_t)depth << 32));
	return mix64(s ^ ((uint64_t)t << 16) ^ 0x4e45454454ull);
}

static void draw_needles(const needle_opts *o, trial *T, uint64_t *s)
{
	int K = o->keys;
	for (int j = 0; j < K; j++) {
		int again;
		do { /* distinct cities and numbers: the asked one must be unambiguous */
			T->city[j] = (int)(next(s) % N_CITIES);
			T->number[j] = 1000000u + (unsigned)(next(s) % 9000000u);
			again = 0;
			for (int i = 0; i < j; i++)
				again |= T->city[i] == T->city[j] || T->number[i] == T->number[j];
		} while (again);
		/* the others spread evenly over the remaining depths */
		T->depth[j] = j ? (o->depths[T->di] + j * 100 / K) % 100 : o->depths[T->di];
	}
}

static hsq_token *tokens_of(const needle_run *N, const char *text, int special, size_t *n)
{
	return eval_tokenize(N->R->model, text, strlen(text), 0, special, n, "needle text");
}

static void needle_text(char *buf, size_t cap, const trial *T, int j)
{
	snprintf(buf, cap, " The special magic number for %s is %u. ", cities[T->city[j]], T->number[j]);
}

static hsq_token *question_tokens(const needle_run *N, const trial *T, size_t *n)
{
	char q[1024];
	snprintf(q, sizeof q, "\n\nWhat is the special magic number for %s mentioned in the text above? "
			      "Answer with the number.%s", cities[T->city[0]], N->close);
	return tokens_of(N, q, 1, n);
}

static void append(hsq_token *dst, size_t *n, const hsq_token *src, size_t k)
{
	memcpy(dst + *n, src, k * sizeof *src);
	*n += k;
}

/* open | haystack with the needles at their depths | question. */
static void build_prompt(const needle_run *N, trial *T, int length)
{
	const int K = N->o->keys;
	hsq_token *nt[MAX_KEYS];
	size_t nn[MAX_KEYS], n_needles = 0, n_q;
	for (int j = 0; j < K; j++) {
		char text[160];
		needle_text(text, sizeof text, T, j);
		nt[j] = tokens_of(N, text, 0, &nn[j]);
		n_needles += nn[j];
	}
	hsq_token *q = question_tokens(N, T, &n_q);
	long n_doc = (long)length - N_ANSWER - (long)N->n_open - (long)n_needles - (long)n_q;
	if (n_doc < MIN_HAYSTACK)
		cli_usage_error(EVAL_PROG, "--lengths %d leaves %ld haystack tokens (the template, %d needle%s and the "
					   "question take the rest); give lengths of at least %ld",
				length, n_doc, K, K > 1 ? "s" : "", length + MIN_HAYSTACK - n_doc);
	T->prompt = malloc((size_t)length * sizeof *T->prompt);
	if (!T->prompt)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	size_t n = 0, at[MAX_KEYS];
	append(T->prompt, &n, N->open, N->n_open);
	for (int j = 0; j < K; j++)
		at[j] = (size_t)n_doc * (size_t)T->depth[j] / 100;
	int placed[MAX_KEYS] = { 0 };
	for (size_t h = 0; h <= (size_t)n_doc; h++) {
		for (int j = 0; j < K; j++) /* needles at this haystack position, in key order */
			if (!placed[j] && at[j] == h) {
				append(T->prompt, &n, nt[j], nn[j]);
				placed[j] = 1;
			}
		if (h < (size_t)n_doc) /* the haystack repeats when the text is shorter */
			T->prompt[n++] = N->hay[(T->offset + h) % N->n_hay];
	}
	T->n_context = n;
	append(T->prompt, &n, q, n_q);
	T->n_prompt = n;
	for (int j = 0; j < K; j++)
		hsq_free(nt[j]);
	hsq_free(q);
}

/* A context for mode holding the trial's context, compressed. The
 * compressed one is also saved as R->msnap, for reopen_method. */
static hsq_context *open_method(needle_run *N, const trial *T, hsq_snapshot_mode mode, int length)
{
	eval_runner *R = N->R;
	hsq_context *ctx = eval_open(R, mode, T->prompt + T->n_context - R->n_obs, length, NULL);
	hsq_status st;
	if (mode != HSQ_MODE_FULL && (st = hsq_snapshot_save(ctx, R->msnap, eval_method_mode(mode), 1)))
		eval_die_status(st, "saving the method's snapshot");
	return ctx;
}

/* The same context again, for a second question. Loading the compressed
 * snapshot gives the logits of the context open_method compressed, bit
 * for bit (test_resume_tiers.c), and costs a fraction of compressing
 * again; full reopens the document's snapshot (saving its fp32 cache
 * would cost more than loading it does). */
static hsq_context *reopen_method(needle_run *N, const trial *T, hsq_snapshot_mode mode, int length)
{
	eval_runner *R = N->R;
	if (mode == HSQ_MODE_FULL)
		return eval_open(R, mode, T->prompt + T->n_context - R->n_obs, length, NULL);
	hsq_context *ctx = eval_load(R, R->msnap, length, mode);
	unlink(R->msnap);
	return ctx;
}

/* The greedy answer of one method and its success; frees ctx. */
static int answer(needle_run *N, const trial *T, hsq_context *ctx, char *out, size_t cap)
{
	eval_runner *R = N->R;
	eval_eval(R, ctx, T->prompt + T->n_context, T->n_prompt - T->n_context, R->logits, 0);
	hsq_detok dt = { { 0 }, 0 };
	size_t len = 0;
	for (int k = 0; k < N_ANSWER; k++) {
		hsq_token best = hsq_argmax(R->logits, R->mi.n_vocab);
		if (hsq_token_is_eog(R->model, best))
			break;
		char buf[64];
		size_t bl;
		if (hsq_detok_push(R->model, &dt, best, buf, sizeof buf, &bl) == HSQ_OK && len + bl < cap) {
			memcpy(out + len, buf, bl);
			len += bl;
		}
		if (k + 1 < N_ANSWER)
			eval_eval(R, ctx, &best, 1, R->logits, 0);
	}
	out[len] = '\0';
	hsq_context_free(ctx);
	char num[16];
	snprintf(num, sizeof num, "%u", T->number[0]);
	return strstr(out, num) != NULL;
}

/* The answer "The special magic number for CITY is NNNNNNN" as tokens,
 * and *from, the first token of the number (where the tokens of the text
 * before it stop matching). */
static hsq_token *reference_answer(const needle_run *N, const trial *T, size_t *n, size_t *from)
{
	char pre[128], ref[160];
	snprintf(pre, sizeof pre, "The special magic number for %s is", cities[T->city[0]]);
	snprintf(ref, sizeof ref, "%s %u", pre, T->number[0]);
	size_t np;
	hsq_token *p = tokens_of(N, pre, 0, &np), *a = tokens_of(N, ref, 0, n);
	for (*from = 0; *from < np && *from < *n && p[*from] == a[*from];)
		++*from;
	hsq_free(p);
	return a;
}

/* log P(the asked number | question, "The special magic number for CITY
 * is") in ctx, in nats: the sum over the number's tokens; frees ctx. */
static double answer_logp(needle_run *N, const trial *T, hsq_context *ctx)
{
	eval_runner *R = N->R;
	size_t n, from;
	hsq_token *a = reference_answer(N, T, &n, &from);
	if (from >= n || n > N_ANSWER) /* the prompt reserves N_ANSWER tokens */
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "the reference answer for %s takes %zu tokens (%zu before the "
							 "number); this tokenizer needs a longer N_ANSWER",
			cities[T->city[0]], n, from);
	eval_eval(R, ctx, T->prompt + T->n_context, T->n_prompt - T->n_context, R->logits, 0);
	if (from)
		eval_eval(R, ctx, a, from, R->logits, 0);
	double lp = 0;
	for (size_t i = from; i < n; i++) {
		lp -= eval_nll(R->logits, R->mi.n_vocab, a[i]);
		if (i + 1 < n)
			eval_eval(R, ctx, &a[i], 1, R->logits, 0);
	}
	hsq_context_free(ctx);
	hsq_free(a);
	return lp;
}

static void run_trial(needle_run *N, eval_log *L, int li, int di, int t)
{
	const needle_opts *o = N->o;
	int length = o->lengths[li];
	trial T = { .li = li, .di = di, .t = t };
	uint64_t s = trial_stream(o->seed, length, o->depths[di], t);
	draw_needles(o, &T, &s);
	T.offset = (size_t)(next(&s) % N->n_hay);
	build_prompt(N, &T, length);
	double t0 = cli_now();
	eval_prefill(N->R, T.prompt, T.n_context - (size_t)N->R->n_obs, length);

	sbuf r = { 0 }, line = { 0 };
	sb_printf(&r, "{\"record\":\"trial\",\"length\":%d,\"depth\":%d,\"trial\":%d,\"keys\":[", length, o->depths[di],
		  t);
	for (int j = 0; j < o->keys; j++)
		sb_printf(&r, "%s{\"city\":\"%s\",\"number\":%u,\"depth\":%d}", j ? "," : "", cities[T.city[j]],
			  T.number[j], T.depth[j]);
	sb_printf(&r, "],\"haystack_offset\":%zu,\"prompt_tokens\":%zu,\"methods\":{", T.offset, T.n_prompt);
	for (int m = 0; m < o->c.n_methods; m++) {
		char ans[256];
		uint64_t fast;
		hsq_context *ctx = open_method(N, &T, o->c.methods[m], length);
		fast = eval_fast_bytes(ctx);
		int ok = answer(N, &T, ctx, ans, sizeof ans);
		double lp = answer_logp(N, &T, reopen_method(N, &T, o->c.methods[m], length));
		sb_printf(&r, "%s\"%s\":{\"ok\":%s,\"fast_bytes\":%llu,\"logp\":", m ? "," : "",
			  eval_method_name(o->c.methods[m]), ok ? "true" : "false", (unsigned long long)fast);
		sb_jnum6(&r, lp);
		sb_printf(&r, ",\"answer\":");
		sb_jstr(&r, ans);
		sb_putc(&r, '}');
		sb_printf(&line, " %s %s", eval_method_name(o->c.methods[m]), ok ? "ok" : "miss");
	}
	sb_printf(&r, "}}");
	eval_log_append(L, &r);
	eval_progress(&o->c, "length %d depth %d%% trial %d/%d:%s (%.1f s)", length, o->depths[di], t + 1, o->trials,
		      line.s, cli_now() - t0);
	sb_free(&r);
	sb_free(&line);
	free(T.prompt);
}

/* -------------------------------------------------------------- log */

static int find_int(const int *v, int n, long x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return i;
	return -1;
}

/* "logp", a log-probability (at most 0), or absent: logs written before
 * hsq-eval scored the answer hold none. */
static int logp_member(const json_value *r, char *err, size_t cap)
{
	const json_value *v = json_get(r, "logp");
	if (!v)
		return 1;
	if (v->type != JSON_NUMBER || !isfinite(v->number) || v->number > 1e-6) {
		snprintf(err, cap, "'logp' is not a log-probability (a number at most 0)");
		return 0;
	}
	return 1;
}

/* A trial record: in the grid, with a result for every method. */
static int check_record(const json_value *rec, void *user, char *err, size_t cap)
{
	const needle_opts *o = user;
	const json_value *kind = json_get(rec, "record");
	long length, depth, t, fast;
	int ok;
	if (!kind || kind->type != JSON_STRING || strcmp(kind->string, "trial")) {
		snprintf(err, cap, "'record' is not \"trial\"");
		return 0;
	}
	if (!json_int_member(rec, "length", 1, 1 << 30, &length, err, cap) ||
	    !json_int_member(rec, "depth", 0, 100, &depth, err, cap) ||
	    !json_int_member(rec, "trial", 0, o->trials - 1, &t, err, cap))
		return 0;
	if (find_int(o->lengths, o->n_len, length) < 0 || find_int(o->depths, o->n_depth, depth) < 0) {
		snprintf(err, cap, "length %ld, depth %ld is not a cell of this grid", length, depth);
		return 0;
	}
	const json_value *ms = json_obj_member(rec, "methods", err, cap);
	if (!ms)
		return 0;
	for (int m = 0; m < o->c.n_methods; m++) {
		const char *name = eval_method_name(o->c.methods[m]);
		const json_value *r = json_obj_member(ms, name, err, cap);
		if (!r || !json_bool_member(r, "ok", &ok, err, cap) ||
		    !json_int_member(r, "fast_bytes", 0, 1L << 52, &fast, err, cap) || !logp_member(r, err, cap)) {
			size_t l = strlen(err);
			snprintf(err + l, cap - l, " (method %s)", name);
			return 0;
		}
	}
	return 1;
}

static size_t trial_index(const needle_opts *o, int li, int di, int t)
{
	return ((size_t)li * (size_t)o->n_depth + (size_t)di) * (size_t)o->trials + (size_t)t;
}

/* Results from the log's records (read back or appended): the summary
 * sees only what the log holds. */
static void collect(needle_run *N, const eval_log *L)
{
	const needle_opts *o = N->o;
	const int M = o->c.n_methods;
	memset(N->ok, -1, N->n_trials * (size_t)M);
	for (size_t i = 0; i < L->n; i++) {
		const json_value *rec = &L->records[i];
		int li = find_int(o->lengths, o->n_len, (long)json_get(rec, "length")->number);
		int di = find_int(o->depths, o->n_depth, (long)json_get(rec, "depth")->number);
		size_t k = trial_index(o, li, di, (int)json_get(rec, "trial")->number);
		if (N->ok[k * M] >= 0)
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: trial %d of length %d, depth %d is in the log twice; remove one",
				L->path, L->lines[i], (int)json_get(rec, "trial")->number, o->lengths[li], o->depths[di]);
		const json_value *ms = json_get(rec, "methods");
		for (int m = 0; m < M; m++) {
			const json_value *r = json_get(ms, eval_method_name(o->c.methods[m]));
			N->ok[k * M + m] = (int8_t)json_get(r, "ok")->boolean;
			N->fast[k * M + m] = json_get(r, "fast_bytes")->number;
			const json_value *lp = json_get(r, "logp");
			N->logp[k * M + m] = lp ? lp->number : NAN;
		}
	}
}

/* ------------------------------------------------------------ summary */

typedef struct cell_sum {
	int n, k;           /* trials, successes */
	hsq_interval wilson;
	int b, c;           /* vs full: full ok / method miss, and the reverse */
	double mcnemar_p;
	hsq_tost_result tost;
	double fast;        /* mean fast-tier bytes */
	int n_lp;           /* trials whose log holds the answer's log-probability */
	double lp_mean;     /* mean log-probability of the asked number, nats */
	hsq_boot_result lp_diff; /* vs full: mean paired difference, 95% bootstrap
				  * interval (NaN with fewer than 2 pairs) */
} cell_sum;

typedef struct summary {
	const needle_opts *o;
	const char *config;
	const char *model;
	int n_cells;        /* lengths x depths */
	int n_len_rows;     /* rows pooled per length: one a length when there
			     * are several, else none (the pooled row is it) */
	int rows;           /* cells, the rows per length, one pooled row */
	cell_sum *cells;    /* [row][method] */
} summary;

static void stats_of(const needle_opts *o, cell_sum *s, int m)
{
	if (s->n == 0)
		return;
	if (hsq_wilson_interval((uint64_t)s->k, (uint64_t)s->n, EVAL_ALPHA, &s->wilson) != HSQ_OK)
		eval_die_status(HSQ_ERR_INTERNAL, "wilson interval");
	s->fast /= s->n;
	if (m == 0)
		return;
	if (hsq_mcnemar_exact((uint64_t)s->b, (uint64_t)s->c, 0, &s->mcnemar_p) != HSQ_OK ||
	    hsq_tost_paired_binary((uint64_t)s->n, (uint64_t)s->b, (uint64_t)s->c, o->margin, EVAL_ALPHA, &s->tost) !=
		    HSQ_OK)
		eval_die_status(HSQ_ERR_INTERNAL, "paired statistics");
}

static void add_trial(cell_sum *s, int full, int ok, double fast)
{
	s->n++;
	s->k += ok;
	s->b += full && !ok;
	s->c += !full && ok;
	s->fast += fast;
}

/* The answer log-probabilities of one row (a cell, or every cell for the
 * pooled rows): the mean per method, and against full the paired mean
 * difference with its bootstrap interval, over the trials that have both. */
static void logp_row(const needle_run *N, summary *S, int row, double *x, double *y)
{
	const needle_opts *o = N->o;
	const int M = o->c.n_methods;
	/* the trials of a row: its cell's, its length's cells', or all */
	size_t first = 0, end = N->n_trials;
	if (row < S->n_cells) {
		first = (size_t)row * (size_t)o->trials;
		end = first + (size_t)o->trials;
	} else if (row < S->n_cells + S->n_len_rows) {
		first = (size_t)(row - S->n_cells) * (size_t)o->n_depth * (size_t)o->trials;
		end = first + (size_t)o->n_depth * (size_t)o->trials;
	}
	for (int m = 0; m < M; m++) {
		cell_sum *s = &S->cells[row * M + m];
		size_t n = 0;
		double sum = 0;
		for (size_t k = first; k < end; k++) {
			double v = N->logp[k * M + m], full = N->logp[k * M];
			if (N->ok[k * M] < 0 || !isfinite(v))
				continue;
			sum += v;
			s->n_lp++;
			if (isfinite(full)) {
				x[n] = v;
				y[n++] = full;
			}
		}
		s->lp_mean = s->n_lp ? sum / s->n_lp : NAN;
		s->lp_diff = (hsq_boot_result){ NAN, NAN, NAN };
		if (m && n >= 2 &&
		    hsq_paired_bootstrap(x, y, n, HSQ_BOOT_MEAN_DIFF, LOGP_RESAMPLES, EVAL_ALPHA, o->seed, &s->lp_diff))
			eval_die_status(HSQ_ERR_INTERNAL, "bootstrap of the answer log-probability");
	}
}

static void logp_stats(const needle_run *N, summary *S)
{
	double *x = malloc(N->n_trials * sizeof *x), *y = malloc(N->n_trials * sizeof *y);
	if (!x || !y)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int row = 0; row < S->rows; row++)
		logp_row(N, S, row, x, y);
	free(x);
	free(y);
}

static void summarize(const needle_run *N, summary *S)
{
	const needle_opts *o = N->o;
	const int M = o->c.n_methods, n_cells = o->n_len * o->n_depth;
	S->o = o;
	S->n_cells = n_cells;
	S->n_len_rows = o->n_len > 1 ? o->n_len : 0;
	S->rows = n_cells + S->n_len_rows + 1;
	S->cells = calloc((size_t)S->rows * (size_t)M, sizeof *S->cells);
	if (!S->cells)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int cell = 0; cell < n_cells; cell++)
		for (int t = 0; t < o->trials; t++) {
			size_t k = (size_t)cell * (size_t)o->trials + (size_t)t;
			if (N->ok[k * M] < 0)
				continue;
			for (int m = 0; m < M; m++) {
				int full = N->ok[k * M], ok = N->ok[k * M + m];
				double fast = N->fast[k * M + m];
				add_trial(&S->cells[cell * M + m], full, ok, fast);
				if (S->n_len_rows) /* the cell's length, pooled over depths */
					add_trial(&S->cells[(n_cells + cell / o->n_depth) * M + m], full, ok, fast);
				add_trial(&S->cells[(S->rows - 1) * M + m], full, ok, fast); /* pooled */
			}
		}
	for (int i = 0; i < S->rows * M; i++)
		stats_of(o, &S->cells[i], i % M);
	logp_stats(N, S);
}

static void cell_labels(const summary *S, int row, char *len, char *dep)
{
	const needle_opts *o = S->o;
	if (row == S->rows - 1) {
		strcpy(len, "all");
		strcpy(dep, "all");
		return;
	}
	if (row >= S->n_cells) {
		sprintf(len, "%d", o->lengths[row - S->n_cells]);
		strcpy(dep, "all");
		return;
	}
	sprintf(len, "%d", o->lengths[row / o->n_depth]);
	sprintf(dep, "%d", o->depths[row % o->n_depth]);
}

/* A method row called equivalent only because b = c = 0 (zero spread). */
static int no_discordant(const summary *S)
{
	const int M = S->o->c.n_methods;
	for (int i = 0; i < S->rows * M; i++) {
		const cell_sum *s = &S->cells[i];
		if (i % M && s->n && s->b + s->c == 0 && s->tost.equivalent)
			return 1;
	}
	return 0;
}

/* Calls line() for every cell and method in table order, with a blank
 * line before the rows per length and before the pooled rows. */
static void print_rows(const summary *S,
		       void (*line)(const summary *S, const char *len, const char *dep, int m, const cell_sum *s))
{
	const int M = S->o->c.n_methods;
	for (int row = 0; row < S->rows; row++) {
		char len[16], dep[16];
		cell_labels(S, row, len, dep);
		if (row == S->rows - 1 || (S->n_len_rows && row == S->n_cells))
			printf("\n");
		for (int m = 0; m < M; m++)
			line(S, len, dep, m, &S->cells[row * M + m]);
	}
}

static void success_row_line(const summary *S, const char *len, const char *dep, int m, const cell_sum *s)
{
	if (s->n == 0)
		return;
	char kn[32];
	snprintf(kn, sizeof kn, "%d/%d", s->k, s->n);
	printf("%6s %5s %-*s %9s %6.3f [%.3f, %.3f]", len, dep, eval_method_width(&S->o->c),
	       eval_method_name(S->o->c.methods[m]), kn,
	       (double)s->k / s->n, s->wilson.low, s->wilson.high);
	if (m)
		printf(" %4d %4d %9.4f %+7.3f [%+.3f, %+.3f] %s", s->b, s->c, s->mcnemar_p, s->tost.diff, s->tost.ci_low,
		       s->tost.ci_high, s->tost.equivalent ? "yes" : "no");
	printf("\n");
}

static int have_logp(const summary *S)
{
	for (int i = 0; i < S->rows * S->o->c.n_methods; i++)
		if (S->cells[i].n_lp)
			return 1;
	return 0;
}

static void logp_row_line(const summary *S, const char *len, const char *dep, int m, const cell_sum *s)
{
	if (!s->n_lp)
		return;
	printf("%6s %5s %-*s %5d %9.3f", len, dep, eval_method_width(&S->o->c), eval_method_name(S->o->c.methods[m]),
	       s->n_lp, s->lp_mean);
	if (m && isfinite(s->lp_diff.estimate))
		printf(" %+9.3f [%+.3f, %+.3f]", s->lp_diff.estimate, s->lp_diff.low, s->lp_diff.high);
	printf("\n");
}

static void print_logp_table(const summary *S)
{
	if (!have_logp(S))
		return;
	printf("\nlog-probability of the asked number, teacher-forced after \"The special magic number for CITY is\" "
	       "(nats,\nsummed over its tokens; 0 is certainty); diff: the method's minus full's, paired, with a 95%% "
	       "bootstrap interval:\n");
	printf("%6s %5s %-*s %5s %9s %9s %s\n", "length", "depth", eval_method_width(&S->o->c), "method", "n", "mean",
	       "diff", "[95% bootstrap]");
	print_rows(S, logp_row_line);
}

static void print_table(const summary *S)
{
	const needle_opts *o = S->o;
	const int M = o->c.n_methods;
	char b[32];
	printf("hsq-eval needle: %s; %d length%s x %d depth%s x %d trial%s, %d key%s, seed %llu, budget %s, "
	       "margin %.3g pp\n", S->model, o->n_len, o->n_len > 1 ? "s" : "", o->n_depth, o->n_depth > 1 ? "s" : "",
	       o->trials, o->trials > 1 ? "s" : "", o->keys, o->keys > 1 ? "s" : "", (unsigned long long)o->seed,
	       tier_budget_name(o->c.tier.budget, b, sizeof b), 100 * o->margin);
	int held = 0;
	for (int cell = 0; cell < o->n_len * o->n_depth; cell++)
		held += S->cells[cell * M].n;
	if (held < o->n_len * o->n_depth * o->trials)
		printf("the log holds %d of the grid's %d trials (an interrupted run, --only-trials or --summarize); "
		       "every figure is over those\n", held, o->n_len * o->n_depth * o->trials);
	printf("fast tier (L1+L2; full: the whole cache at fp16), mean over the trials of each length:\n");
	for (int li = 0; li < o->n_len; li++) {
		printf("  %6d:", o->lengths[li]);
		for (int m = 0; m < M; m++) {
			double sum = 0;
			int n = 0;
			for (int di = 0; di < o->n_depth; di++) {
				const cell_sum *s = &S->cells[(li * o->n_depth + di) * M + m];
				sum += s->fast * s->n;
				n += s->n;
			}
			double full = 0;
			for (int di = 0; di < o->n_depth; di++)
				full += S->cells[(li * o->n_depth + di) * M].fast * S->cells[(li * o->n_depth + di) * M].n;
			printf("  %s %.2f MiB", eval_method_name(o->c.methods[m]), n ? sum / n / 1048576.0 : NAN);
			if (m)
				printf(" (%.3fx)", full > 0 ? sum / full : NAN);
		}
		printf("\n");
	}
	printf("\n%6s %5s %-*s %9s %6s %-17s %4s %4s %9s %7s %-17s %s\n", "length", "depth", eval_method_width(&o->c),
	       "method", "ok/n", "rate", "[95% Wilson]", "b", "c", "McNemar p", "diff", "[90% CI]", "equivalent");
	print_rows(S, success_row_line);
	printf("\nb: full ok, method missed; c: the reverse. McNemar: exact, two-sided, on b and c. diff: the "
	       "method's success rate minus full's;\nequivalent: TOST at +-%.3g percentage points, alpha %.2f "
	       "(the 90%% CI inside the margin).\n", 100 * o->margin, EVAL_ALPHA);
	if (no_discordant(S))
		printf("note: a row without discordant pairs has a Wald error of 0, and TOST then calls it equivalent "
		       "whatever n; read it with n and the Wilson intervals.\n");
	print_logp_table(S);
}

static void json_cell(FILE *f, const summary *S, const cell_sum *s, int m)
{
	sbuf b = { 0 };
	sb_printf(&b, "\"method\":\"%s\",\"trials\":%d,\"successes\":%d,\"rate\":", eval_method_name(S->o->c.methods[m]),
		  s->n, s->k);
	sb_jnum6(&b, s->n ? (double)s->k / s->n : NAN);
	sb_printf(&b, ",\"wilson\":[");
	sb_jnum6(&b, s->wilson.low);
	sb_putc(&b, ',');
	sb_jnum6(&b, s->wilson.high);
	sb_printf(&b, "],\"fast_bytes\":");
	sb_jnum6(&b, s->fast);
	sb_printf(&b, ",\"logp_trials\":%d,\"logp_mean\":", s->n_lp);
	sb_jnum6(&b, s->lp_mean);
	if (m == 0) {
		sb_printf(&b, ",\"vs_full\":null");
	} else {
		sb_printf(&b, ",\"vs_full\":{\"b\":%d,\"c\":%d,\"mcnemar_p\":", s->b, s->c);
		sb_jnum6(&b, s->mcnemar_p);
		sb_printf(&b, ",\"diff\":");
		sb_jnum6(&b, s->tost.diff);
		sb_printf(&b, ",\"diff_ci90\":[");
		sb_jnum6(&b, s->tost.ci_low);
		sb_putc(&b, ',');
		sb_jnum6(&b, s->tost.ci_high);
		sb_printf(&b, "],\"tost_p\":");
		sb_jnum6(&b, s->tost.p);
		sb_printf(&b, ",\"equivalent\":%s,\"logp_diff\":", s->tost.equivalent ? "true" : "false");
		sb_jnum6(&b, s->lp_diff.estimate);
		sb_printf(&b, ",\"logp_diff_ci95\":[");
		sb_jnum6(&b, s->lp_diff.low);
		sb_putc(&b, ',');
		sb_jnum6(&b, s->lp_diff.high);
		sb_printf(&b, "]}");
	}
	fputs(b.s, f);
	sb_free(&b);
}

static void write_json(FILE *f, const summary *S)
{
	const needle_opts *o = S->o;
	const int M = o->c.n_methods;
	fprintf(f, "{\"tool\":\"hsq-eval\",\"subcommand\":\"needle\",\"version\":\"%s\",\"margin\":%g,\"alpha\":%g,\n"
		   "\"config\":%s,\n\"cells\":[\n", hsq_version(), o->margin, EVAL_ALPHA, S->config);
	int first = 1;
	for (int row = 0; row < S->n_cells; row++)
		for (int m = 0; m < M; m++) {
			const cell_sum *s = &S->cells[row * M + m];
			if (!s->n)
				continue;
			fprintf(f, "%s{\"length\":%d,\"depth\":%d,", first ? "" : ",\n", o->lengths[row / o->n_depth],
				o->depths[row % o->n_depth]);
			json_cell(f, S, s, m);
			fputc('}', f);
			first = 0;
		}
	if (S->n_len_rows) { /* only with several lengths: else "pooled" is it */
		fprintf(f, "\n],\n\"per_length\":[\n");
		first = 1;
		for (int li = 0; li < o->n_len; li++)
			for (int m = 0; m < M; m++) {
				const cell_sum *s = &S->cells[(S->n_cells + li) * M + m];
				if (!s->n)
					continue;
				fprintf(f, "%s{\"length\":%d,", first ? "" : ",\n", o->lengths[li]);
				json_cell(f, S, s, m);
				fputc('}', f);
				first = 0;
			}
	}
	fprintf(f, "\n],\n\"pooled\":[\n");
	for (int m = 0; m < M; m++) {
		fprintf(f, "%s{", m ? ",\n" : "");
		json_cell(f, S, &S->cells[(S->rows - 1) * M + m], m);
		fputc('}', f);
	}
	fprintf(f, "\n]}\n");
}

static void write_csv(FILE *f, const summary *S)
{
	const needle_opts *o = S->o;
	const int M = o->c.n_methods;
	fprintf(f, "length,depth,method,trials,successes,rate,wilson_low,wilson_high,fast_bytes,b,c,mcnemar_p,diff,"
		   "diff_ci90_low,diff_ci90_high,tost_p,equivalent,logp_trials,logp_mean,logp_diff,logp_diff_ci95_low,"
		   "logp_diff_ci95_high\n");
	for (int row = 0; row < S->rows; row++) {
		char len[16], dep[16];
		cell_labels(S, row, len, dep);
		for (int m = 0; m < M; m++) {
			const cell_sum *s = &S->cells[row * M + m];
			if (!s->n)
				continue;
			fprintf(f, "%s,%s,%s,%d,%d", len, dep, eval_method_name(o->c.methods[m]), s->n, s->k);
			eval_csv_num(f, (double)s->k / s->n);
			eval_csv_num(f, s->wilson.low);
			eval_csv_num(f, s->wilson.high);
			eval_csv_num(f, s->fast);
			if (m) {
				fprintf(f, ",%d,%d", s->b, s->c);
				double v[5] = { s->mcnemar_p, s->tost.diff, s->tost.ci_low, s->tost.ci_high, s->tost.p };
				for (int i = 0; i < 5; i++)
					eval_csv_num(f, v[i]);
				fprintf(f, ",%s", s->tost.equivalent ? "yes" : "no");
			} else {
				fprintf(f, ",,,,,,,,");
			}
			fprintf(f, ",%d", s->n_lp);
			eval_csv_num(f, s->lp_mean);
			eval_csv_num(f, s->lp_diff.estimate);
			eval_csv_num(f, s->lp_diff.low);
			eval_csv_num(f, s->lp_diff.high);
			fputc('\n', f);
		}
	}
}

/* ------------------------------------------------------------- report */

typedef struct heat_arg {
	const summary *S;
	int m;
} heat_arg;

static void write_heatmap(FILE *f, const void *user)
{
	const heat_arg *h = user;
	const summary *S = h->S;
	const needle_opts *o = S->o;
	const int M = o->c.n_methods, n = o->n_len * o->n_depth;
	double *v = malloc((size_t)n * sizeof *v);
	char (*text)[32] = malloc((size_t)n * sizeof *text), (*rl)[16] = malloc((size_t)o->n_len * sizeof *rl),
	(*cl)[16] = malloc((size_t)o->n_depth * sizeof *cl);
	const char **tp = malloc((size_t)n * sizeof *tp), **rp = malloc((size_t)o->n_len * sizeof *rp),
		   **cp = malloc((size_t)o->n_depth * sizeof *cp);
	if (!v || !text || !rl || !cl || !tp || !rp || !cp)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	for (int i = 0; i < n; i++) {
		const cell_sum *s = &S->cells[i * M + h->m];
		v[i] = s->n ? (double)s->k / s->n : NAN;
		snprintf(text[i], sizeof text[i], "%d/%d", s->k, s->n);
		tp[i] = text[i];
	}
	for (int i = 0; i < o->n_len; i++) {
		snprintf(rl[i], sizeof rl[i], "%d", o->lengths[i]);
		rp[i] = rl[i];
	}
	for (int i = 0; i < o->n_depth; i++) {
		snprintf(cl[i], sizeof cl[i], "%d%%", o->depths[i]);
		cp[i] = cl[i];
	}
	char title[96];
	snprintf(title, sizeof title, "needle: %s, success rate", eval_method_name(o->c.methods[h->m]));
	svg_heatmap(f, title, o->n_len, rp, "context length (tokens)", o->n_depth, cp, "depth of the asked needle", v, tp);
	free(v);
	free(text);
	free(rl);
	free(cl);
	free(tp);
	free(rp);
	free(cp);
}

/* The Markdown rows of one pooled row, a line per method. with_length: 0
 * for the overall table (its header first, no length column), 1 for the
 * first length of the per-length table (its header first, with a length
 * column), -1 for a later length (the rows alone). */
static void markdown_pooled(FILE *f, const summary *S, int row, int with_length)
{
	const needle_opts *o = S->o;
	const int M = o->c.n_methods;
	char len[16], dep[16];
	cell_labels(S, row, len, dep);
	if (with_length == 1)
		fprintf(f, "| length ");
	if (with_length != -1)
		fprintf(f, "| method | ok/n | rate | 95%% Wilson | fast tier MiB | b | c | McNemar p | diff [90%% CI] | "
			   "equivalent |\n%s|---|---|---|---|---|---|---|---|---|---|\n", with_length == 1 ? "|---" : "");
	for (int m = 0; m < M; m++) {
		const cell_sum *s = &S->cells[row * M + m];
		if (with_length && !s->n) /* a length the log holds no trial of */
			continue;
		if (with_length)
			fprintf(f, "| %s ", len);
		fprintf(f, "| %s | %d/%d | %.3f | [%.3f, %.3f] | %.2f |", eval_method_name(o->c.methods[m]), s->k, s->n,
			s->n ? (double)s->k / s->n : NAN, s->wilson.low, s->wilson.high, s->fast / 1048576.0);
		if (m)
			fprintf(f, " %d | %d | %.4f | %+.3f [%+.3f, %+.3f] | %s |\n", s->b, s->c, s->mcnemar_p, s->tost.diff,
				s->tost.ci_low, s->tost.ci_high, s->tost.equivalent ? "yes" : "no");
		else
			fprintf(f, " | | | (reference) | |\n");
	}
}

static void write_markdown(FILE *f, const void *user)
{
	const summary *S = user;
	const needle_opts *o = S->o;
	const int M = o->c.n_methods;
	char b[32];
	fprintf(f, "# hsq-eval needle\n\nModel %s; context lengths", S->model);
	for (int i = 0; i < o->n_len; i++)
		fprintf(f, "%s %d", i ? "," : "", o->lengths[i]);
	fprintf(f, " tokens; depths");
	for (int i = 0; i < o->n_depth; i++)
		fprintf(f, "%s %d%%", i ? "," : "", o->depths[i]);
	fprintf(f, "; %d trials per cell; %d key%s; seed %llu; hsq budget %s.\n\n", o->trials, o->keys,
		o->keys > 1 ? "s" : "", (unsigned long long)o->seed, tier_budget_name(o->c.tier.budget, b, sizeof b));
	fprintf(f, "Pooled over all cells (b: full ok and the method missed; c: the reverse; McNemar exact on b and c; "
		   "TOST equivalence at ±%.3g percentage points, α = %.2f):\n\n", 100 * o->margin, EVAL_ALPHA);
	markdown_pooled(f, S, S->rows - 1, 0);
	if (S->n_len_rows) {
		fprintf(f, "\nPooled per length, over its depths:\n\n");
		for (int li = 0; li < o->n_len; li++)
			markdown_pooled(f, S, S->n_cells + li, li == 0 ? 1 : -1);
	}
	if (no_discordant(S))
		fprintf(f, "\nA row without discordant pairs has a Wald standard error of 0, and TOST then calls it "
			   "equivalent whatever the number of trials: read it with the trials and the Wilson intervals.\n");
	if (have_logp(S)) {
		fprintf(f, "\nLog-probability of the asked number, teacher-forced after \"The special magic number for "
			   "CITY is\" (nats, summed over its tokens), pooled; the difference to full is paired, with a "
			   "95%% bootstrap interval:\n\n| method | trials | mean | diff [95%% CI] |\n|---|---|---|---|\n");
		for (int m = 0; m < M; m++) {
			const cell_sum *s = &S->cells[(S->rows - 1) * M + m];
			fprintf(f, "| %s | %d | %.3f |", eval_method_name(o->c.methods[m]), s->n_lp, s->lp_mean);
			if (m && isfinite(s->lp_diff.estimate))
				fprintf(f, " %+.3f [%+.3f, %+.3f] |\n", s->lp_diff.estimate, s->lp_diff.low, s->lp_diff.high);
			else
				fprintf(f, " %s |\n", m ? "" : "(reference)");
		}
	}
	fprintf(f, "\n## Success rate per cell\n\n");
	for (int m = 0; m < M; m++)
		fprintf(f, "![%s](needle-%s.svg)\n", eval_method_name(o->c.methods[m]),
			eval_method_name(o->c.methods[m]));
	fprintf(f, "\n| length | depth | method | ok/n | 95%% Wilson | b | c | McNemar p |\n|---|---|---|---|---|---|---|---|\n");
	for (int row = 0; row < S->n_cells; row++)
		for (int m = 0; m < M; m++) {
			const cell_sum *s = &S->cells[row * M + m];
			if (!s->n)
				continue;
			fprintf(f, "| %d | %d%% | %s | %d/%d | [%.3f, %.3f] |", o->lengths[row / o->n_depth],
				o->depths[row % o->n_depth], eval_method_name(o->c.methods[m]), s->k, s->n, s->wilson.low,
				s->wilson.high);
			if (m)
				fprintf(f, " %d | %d | %.4f |\n", s->b, s->c, s->mcnemar_p);
			else
				fprintf(f, " | | |\n");
		}
}

static void write_report(const summary *S, const char *dir)
{
	eval_report_write(dir, "report.md", write_markdown, S);
	for (int m = 0; m < S->o->c.n_methods; m++) {
		char name[64];
		heat_arg h = { S, m };
		snprintf(name, sizeof name, "needle-%s.svg", eval_method_name(S->o->c.methods[m]));
		eval_report_write(dir, name, write_heatmap, &h);
	}
}

/* --------------------------------------------------------------- main */

static void load_haystack(needle_run *N)
{
	const needle_opts *o = N->o;
	sbuf all = { 0 };
	for (int i = 0; i < o->n_hay; i++) {
		size_t len;
		char *text = cli_read_all(EVAL_PROG, o->hay[i], &len);
		if (len == 0 || strlen(text) != len)
			cli_die(EVAL_PROG, EXIT_INPUT, "--haystack %s is %s; give text files", o->hay[i],
				len ? "not text (it holds a NUL byte)" : "empty");
		eval_fnv1a_hex(text, len, N->hay_hash[i]);
		sb_printf(&all, "%s%s", i ? "\n\n" : "", text);
		free(text);
	}
	N->hay = eval_tokenize(N->R->model, all.s, all.len, 0, 0, &N->n_hay, "--haystack");
	sb_free(&all);
	if (N->n_hay == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "--haystack holds no tokens; give text files");
}

/* Tokens of everything but the haystack, at most: the template, K of the
 * longest needle and the longest question, and the answer. */
static long overhead(const needle_run *N)
{
	size_t needle = 0, question = 0, n;
	trial T = { 0 };
	T.number[0] = 9999999;
	for (int c = 0; c < N_CITIES; c++) {
		char text[160];
		T.city[0] = c;
		needle_text(text, sizeof text, &T, 0);
		hsq_free(tokens_of(N, text, 0, &n));
		needle = n > needle ? n : needle;
		hsq_free(question_tokens(N, &T, &n));
		question = n > question ? n : question;
	}
	return (long)N->n_open + N->o->keys * (long)needle + (long)question + N_ANSWER;
}

/* Before the log is opened: a refused run leaves nothing behind. */
static void check_lengths(const needle_run *N)
{
	const needle_opts *o = N->o;
	long need = overhead(N) + MIN_HAYSTACK;
	for (int i = 0; i < o->n_len; i++) {
		if (o->lengths[i] > N->R->mi.n_ctx_train)
			cli_usage_error(EVAL_PROG, "--lengths %d exceeds the model's context of %d tokens", o->lengths[i],
					N->R->mi.n_ctx_train);
		if (o->lengths[i] < need)
			cli_usage_error(EVAL_PROG, "--lengths %d is too short: the template, %d needle%s, the question "
						   "and the answer take up to %ld tokens; give lengths of at least %ld",
					o->lengths[i], o->keys, o->keys > 1 ? "s" : "", need - MIN_HAYSTACK, need);
	}
}

static char *make_config(const needle_run *N)
{
	const needle_opts *o = N->o;
	sbuf b = { 0 };
	sb_printf(&b, "{");
	eval_runner_config(N->R, &b);
	sb_printf(&b, ",\"lengths\":[");
	for (int i = 0; i < o->n_len; i++)
		sb_printf(&b, "%s%d", i ? "," : "", o->lengths[i]);
	sb_printf(&b, "],\"depths\":[");
	for (int i = 0; i < o->n_depth; i++)
		sb_printf(&b, "%s%d", i ? "," : "", o->depths[i]);
	sb_printf(&b, "],\"trials\":%d,\"keys\":%d,\"seed\":%llu,\"answer_tokens\":%d,\"haystack\":[", o->trials,
		  o->keys, (unsigned long long)o->seed, N_ANSWER);
	for (int i = 0; i < o->n_hay; i++) {
		const char *base = strrchr(o->hay[i], '/') ? strrchr(o->hay[i], '/') + 1 : o->hay[i];
		sb_printf(&b, "%s{\"name\":", i ? "," : "");
		sb_jstr(&b, base);
		sb_printf(&b, ",\"fnv1a\":\"%s\"}", N->hay_hash[i]);
	}
	sb_printf(&b, "]}");
	return b.s;
}

static void chat_parts(needle_run *N)
{
	char *open;
	cli_chat_parts(EVAL_PROG, N->R->model, NULL, &open, &N->close);
	N->open = eval_tokenize(N->R->model, open, strlen(open), -1, 1, &N->n_open, "chat template");
	free(open);
}

static summary sums;

static char *setup(eval_runner *R)
{
	state.R = R;
	chat_parts(&state);
	check_lengths(&state);
	load_haystack(&state);
	char *config = make_config(&state);
	sums.config = config;
	sums.model = R->mi.name;
	return config;
}

static void resumed(const eval_log *L)
{
	const int M = opts.c.n_methods;
	state.n_trials = (size_t)opts.n_len * (size_t)opts.n_depth * (size_t)opts.trials;
	state.ok = malloc(state.n_trials * (size_t)M);
	state.fast = malloc(state.n_trials * (size_t)M * sizeof *state.fast);
	state.logp = malloc(state.n_trials * (size_t)M * sizeof *state.logp);
	if (!state.ok || !state.fast || !state.logp)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	collect(&state, L);
	if (L->n)
		eval_progress(&opts.c, "%zu of %zu trials are in %s already", L->n, state.n_trials, L->path);
}

/* The trials in grid order: length, depth, trial (trial_index). */
static size_t count(void)
{
	return state.n_trials;
}

static int pending(size_t k)
{
	return state.ok[k * (size_t)opts.c.n_methods] < 0 && trial_selected(&opts, (int)(k % (size_t)opts.trials));
}

static void run(eval_log *L, size_t k)
{
	const size_t per_length = (size_t)opts.n_depth * (size_t)opts.trials;
	run_trial(&state, L, (int)(k / per_length), (int)(k % per_length / (size_t)opts.trials),
		  (int)(k % (size_t)opts.trials));
}

static void summarize_log(const eval_log *L)
{
	collect(&state, L);
	summarize(&state, &sums);
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
	write_report(&sums, dir);
}

static void done(void)
{
	free(sums.cells);
	free(state.ok);
	free(state.fast);
	free(state.logp);
	free(state.close);
	hsq_free(state.open);
	hsq_free(state.hay);
}

const eval_sub eval_needle = {
	.name = "needle",
	.summary = "needle in a haystack over lengths and depths, paired over the KV methods",
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

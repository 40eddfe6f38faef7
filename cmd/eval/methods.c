/* methods.c - running one method on a context that holds a document, and
 * reading documents.
 *
 * The paired design: the document is run through the model once, into a
 * full context saved as a snapshot (all but its last n_obs tokens); each
 * method then loads that snapshot, evaluates the last n_obs tokens (the
 * obs-attention reader needs their queries, and a loaded context has
 * none), and is compressed. So every method sees exactly the same tokens,
 * and the prefill is paid once per document, not once per method. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eval.h"

void eval_die_status(hsq_status st, const char *what)
{
	const char *detail = hsq_last_error();
	cli_die(EVAL_PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), "%s: %s", what, *detail ? detail : hsq_strerror(st));
}

void eval_runner_init(eval_runner *R, const eval_common *c)
{
	char path_buf[4096];
	memset(R, 0, sizeof *R);
	R->c = c;
	R->model = cli_load_model(EVAL_PROG, cli_model_path(EVAL_PROG, c->model_arg, path_buf, sizeof path_buf));
	hsq_model_get_info(R->model, &R->mi);
	for (int i = 0; i < 32; i++)
		snprintf(R->model_id + 2 * i, 3, "%02x", R->mi.identity[i]);
	R->tp = c->tier.params; /* the library's defaults but --residual-heads and --key-rounding */
	R->n_obs = R->tp.obs_window;
	eval_runner_tmpdir(R);
	R->logits = malloc((size_t)R->mi.n_vocab * EVAL_CHUNK * sizeof *R->logits);
	if (!R->logits)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
}

void eval_runner_tmpdir(eval_runner *R)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(R->dir, sizeof R->dir, "%s/hsq-eval.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(R->dir))
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot make a temporary directory in %s: %s; set TMPDIR",
			tmp && *tmp ? tmp : "/tmp", strerror(errno));
	cleanup_add_dir(R->dir);
	snprintf(R->snap, sizeof R->snap, "%s/doc.hsq", R->dir);
	cleanup_add(R->snap);
	snprintf(R->msnap, sizeof R->msnap, "%s/method.hsq", R->dir);
	cleanup_add(R->msnap);
}

void eval_runner_free(eval_runner *R)
{
	unlink(R->snap);
	unlink(R->msnap);
	rmdir(R->dir);
	free(R->logits);
	hsq_model_free(R->model);
	R->model = NULL;
}

void eval_runner_config(const eval_runner *R, sbuf *b)
{
	const hsq_tier_params *p = &R->tp;
	char buf[32];
	sb_printf(b, "\"version\":");
	sb_jstr(b, hsq_version());
	/* the codes every method compresses to: a log from another format
	 * holds other results */
	sb_printf(b, ",\"snapshot_format\":\"%u.%u\"", hsq_snapshot_format() >> 16, hsq_snapshot_format() & 0xffff);
	sb_printf(b, ",\"model\":");
	sb_jstr(b, R->mi.name);
	sb_printf(b, ",\"model_sha256\":\"%s\",\"methods\":[", R->model_id);
	for (int i = 0; i < R->c->n_methods; i++)
		sb_printf(b, "%s\"%s\"", i ? "," : "", hsq_mode_name(R->c->methods[i]));
	sb_printf(b, "],\"budget\":\"%s\"", tier_budget_name(R->c->tier.budget, buf, sizeof buf));
	if (R->c->tier.retrieval_heads == HSQ_RETRIEVAL_DEFAULT)
		sb_printf(b, ",\"retrieval_heads\":\"default\"");
	else
		sb_printf(b, ",\"retrieval_heads\":\"%d\"", R->c->tier.retrieval_heads);
	/* written only when not the default, so that logs from before the
	 * option (which had the default) still resume */
	if (R->c->tier.params.residual_heads == HSQ_RESIDUAL_ALL)
		sb_printf(b, ",\"residual_heads\":\"all\"");
	else if (R->c->tier.params.residual_heads != HSQ_RESIDUAL_DEFAULT)
		sb_printf(b, ",\"residual_heads\":\"%d\"", R->c->tier.params.residual_heads);
	sb_printf(b, ",\"tiers\":{\"sinks\":%d,\"window\":%d,\"l1_fraction\":", p->sinks, p->window);
	sb_jnum(b, p->l1_fraction);
	sb_printf(b, ",\"group_size\":%d,\"medium_fraction\":", p->group_size);
	sb_jnum(b, p->medium_fraction);
	sb_printf(b, ",\"obs_window\":%d,\"reader\":\"%s\",\"compressor\":\"%s\",\"seed\":%llu,\"keep\":%d,"
		  "\"key_rounding\":\"%s\",\"router\":\"%s\"}",
		  p->obs_window, hsq_reader_name(p->reader), hsq_compressor_name(p->compressor),
		  (unsigned long long)p->seed, p->keep, hsq_key_rounding_name(p->key_rounding), hsq_router_name());
}

static hsq_context_params ctx_params(const eval_runner *R, int n_ctx)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = n_ctx;
	cp.n_threads = R->c->threads;
	return cp;
}

void eval_eval(const eval_runner *R, hsq_context *ctx, const hsq_token *toks, size_t n, float *logits, int all)
{
	hsq_status st = hsq_context_eval(ctx, toks, n, logits, all);
	if (st)
		eval_die_status(st, "evaluating tokens");
}

double eval_prefill(eval_runner *R, const hsq_token *toks, size_t n, int n_ctx)
{
	hsq_context_params cp = ctx_params(R, n_ctx);
	hsq_context *ctx;
	hsq_status st = hsq_context_new(R->model, &cp, &ctx);
	if (st)
		eval_die_status(st, "making a context");
	double t0 = cli_now();
	eval_eval(R, ctx, toks, n, NULL, 0);
	double t = cli_now() - t0;
	/* level 1: this snapshot only carries the document between methods */
	if ((st = hsq_snapshot_save(ctx, R->snap, HSQ_MODE_FULL, 1)))
		eval_die_status(st, "saving the document's snapshot");
	hsq_context_free(ctx);
	return t;
}

static void set_budget(const eval_runner *R, hsq_context *ctx)
{
	hsq_status st;
	if (hsq_context_mode(ctx) != HSQ_MODE_HSQ)
		return;
	if ((st = hsq_context_set_budget(ctx, R->c->tier.budget)))
		cli_die(EVAL_PROG, EXIT_USAGE, "--budget: %s", hsq_last_error());
	if ((st = hsq_context_set_retrieval_heads(ctx, R->c->tier.retrieval_heads)))
		cli_die(EVAL_PROG, EXIT_USAGE, "--retrieval-heads: %s", hsq_last_error());
}

hsq_context *eval_open(eval_runner *R, hsq_snapshot_mode mode, const hsq_token *obs, int n_ctx, double *compress_s)
{
	hsq_context_params cp = ctx_params(R, n_ctx);
	hsq_context *ctx;
	hsq_status st = hsq_snapshot_load(R->model, R->snap, &cp, &ctx);
	if (st)
		eval_die_status(st, "loading the document's snapshot");
	eval_eval(R, ctx, obs, (size_t)R->n_obs, R->logits, 0);
	double t0 = cli_now();
	if (mode != HSQ_MODE_FULL && (st = hsq_context_compress(ctx, mode, &R->tp)))
		eval_die_status(st, hsq_mode_name(mode));
	if (compress_s)
		*compress_s = mode == HSQ_MODE_FULL ? 0 : cli_now() - t0;
	set_budget(R, ctx);
	return ctx;
}

hsq_context *eval_load(eval_runner *R, const char *path, int n_ctx, hsq_snapshot_mode mode)
{
	hsq_context_params cp = ctx_params(R, n_ctx);
	hsq_context *ctx;
	hsq_status st = hsq_snapshot_load(R->model, path, &cp, &ctx);
	if (st)
		eval_die_status(st, hsq_mode_name(mode));
	set_budget(R, ctx);
	return ctx;
}

int eval_argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

double eval_nll(const float *logits, int n, int target)
{
	float mx = logits[0];
	for (int i = 1; i < n; i++)
		mx = logits[i] > mx ? logits[i] : mx;
	double s = 0;
	for (int i = 0; i < n; i++)
		s += exp((double)logits[i] - mx);
	return log(s) + mx - logits[target];
}

hsq_tier_stats eval_tier_stats(const hsq_context *ctx)
{
	hsq_tier_stats s;
	hsq_status st = hsq_context_tier_stats(ctx, &s);
	if (st)
		eval_die_status(st, "tier sizes");
	return s;
}

uint64_t eval_fast_bytes(const hsq_context *ctx)
{
	hsq_tier_stats s = eval_tier_stats(ctx);
	return hsq_context_mode(ctx) == HSQ_MODE_FULL ? s.fp16_kv_bytes : s.l1_bytes + s.l2_bytes;
}

hsq_token *eval_tokenize(const hsq_model *m, const char *text, size_t len, int add_bos, int special, size_t *n,
			 const char *what)
{
	hsq_token *t;
	hsq_status st = hsq_tokenize(m, text, len, add_bos, special, &t, n);
	if (st)
		cli_die(EVAL_PROG, cli_exit_for(st, EXIT_INPUT), "%s: %s", what, *hsq_last_error() ? hsq_last_error()
												     : hsq_strerror(st));
	return t;
}

/* ----------------------------------------------------------- documents */

static char *read_text(const char *path, size_t *len, char hash[17])
{
	char *text = cli_read_all(EVAL_PROG, path, len);
	if (*len == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "%s is empty; give a text document", path);
	if (strlen(text) != *len)
		cli_die(EVAL_PROG, EXIT_INPUT, "%s contains a NUL byte at offset %zu; is it text?", path, strlen(text));
	eval_fnv1a_hex(text, *len, hash);
	return text;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

static void add_doc(eval_docs *D, const char *name, hsq_token *toks, size_t n)
{
	eval_doc *d = realloc(D->docs, (size_t)(D->n + 1) * sizeof *d);
	if (!d)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	D->docs = d;
	d = &D->docs[D->n++];
	snprintf(d->name, sizeof d->name, "%s", name);
	d->toks = toks;
	d->n = n;
}

/* --join: the files' texts, in order, separated by a blank line, then cut
 * into consecutive samples of need tokens (the rest is dropped). */
static void load_joined(eval_docs *D, const eval_runner *R, int need)
{
	sbuf all = { 0 };
	for (int i = 0; i < D->n_files; i++) {
		size_t len;
		char *text = read_text(D->files[i], &len, D->hash[i]);
		sb_printf(&all, "%s%s", i ? "\n\n" : "", text);
		free(text);
	}
	size_t n;
	hsq_token *toks = eval_tokenize(R->model, all.s, all.len, -1, 0, &n, "joined documents");
	sb_free(&all);
	for (size_t at = 0; at + (size_t)need <= n; at += (size_t)need) {
		hsq_token *t = malloc((size_t)need * sizeof *t);
		char name[32];
		if (!t)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		memcpy(t, toks + at, (size_t)need * sizeof *t);
		snprintf(name, sizeof name, "joined-%03d", D->n);
		add_doc(D, name, t, (size_t)need);
	}
	if (D->n == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "the joined documents are %zu tokens, fewer than the %d one sample needs; "
					       "give more text or lower --context",
			n, need);
	hsq_free(toks);
}

void eval_docs_load(eval_docs *D, const eval_runner *R, int n_files, char **files, int need, int join)
{
	memset(D, 0, sizeof *D);
	if (n_files > EVAL_MAX_FILES)
		cli_usage_error(EVAL_PROG, "at most %d documents", EVAL_MAX_FILES);
	D->n_files = n_files;
	for (int i = 0; i < n_files; i++)
		D->files[i] = files[i];
	if (join) {
		load_joined(D, R, need);
		return;
	}
	int kept = 0;
	for (int i = 0; i < n_files; i++) {
		size_t len, n;
		char *text = read_text(files[i], &len, D->hash[i]);
		hsq_token *toks = eval_tokenize(R->model, text, len, -1, 0, &n, files[i]);
		free(text);
		hsq_token *doc = NULL;
		if (n < (size_t)need) {
			/* not silently: a skipped document changes what the summary covers */
			fprintf(stderr, "%s: skipping %s: %zu tokens, fewer than the %d needed (or use --join)\n",
				EVAL_PROG, files[i], n, need);
		} else if (!(doc = malloc((size_t)need * sizeof *doc))) {
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		} else {
			memcpy(doc, toks, (size_t)need * sizeof *doc); /* the document's first need tokens */
			kept++;
		}
		hsq_free(toks);
		add_doc(D, base_name(files[i]), doc, doc ? (size_t)need : 0);
	}
	if (kept == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "no document has the %d tokens needed; give longer documents, lower "
					       "--context, or concatenate them with --join",
			need);
}

void eval_docs_config(const eval_docs *D, sbuf *b)
{
	sb_printf(b, "\"documents\":[");
	for (int i = 0; i < D->n_files; i++) {
		sb_printf(b, "%s{\"name\":", i ? "," : "");
		sb_jstr(b, base_name(D->files[i]));
		sb_printf(b, ",\"fnv1a\":\"%s\"}", D->hash[i]);
	}
	sb_printf(b, "]");
}

void eval_docs_free(eval_docs *D)
{
	for (int i = 0; i < D->n; i++)
		free(D->docs[i].toks);
	free(D->docs);
	D->docs = NULL;
	D->n = 0;
}

/* ------------------------------------------------- document records */

int eval_doc_record(const json_value *rec, const eval_docs *D, long *index, char *err, size_t cap)
{
	const json_value *kind = json_get(rec, "record"), *name = json_get(rec, "name");
	if (!kind || kind->type != JSON_STRING || strcmp(kind->string, "document")) {
		snprintf(err, cap, "'record' is not \"document\"");
		return 0;
	}
	if (!json_int_member(rec, "index", 0, D->n - 1, index, err, cap))
		return 0;
	if (!name || name->type != JSON_STRING || strcmp(name->string, D->docs[*index].name)) {
		snprintf(err, cap, "'name' is not \"%s\", the name of document %ld", D->docs[*index].name, *index);
		return 0;
	}
	if (!D->docs[*index].toks) {
		snprintf(err, cap, "document %ld (%s) is too short for this run", *index, D->docs[*index].name);
		return 0;
	}
	return 1;
}

const json_value *eval_method_result(const json_value *rec, hsq_snapshot_mode mode, char *err, size_t cap)
{
	const json_value *ms = json_obj_member(rec, "methods", err, cap);
	const json_value *r = ms ? json_obj_member(ms, hsq_mode_name(mode), err, cap) : NULL;
	if (!r) {
		size_t l = strlen(err);
		snprintf(err + l, cap - l, " (method %s)", hsq_mode_name(mode));
	}
	return r;
}

int eval_doc_records(const eval_log *L, const eval_docs *D, const json_value **by_doc)
{
	int n = 0;
	for (int i = 0; i < D->n; i++)
		by_doc[i] = NULL;
	for (size_t i = 0; i < L->n; i++) {
		int k = (int)json_get(&L->records[i], "index")->number;
		if (by_doc[k])
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: document %d (%s) is in the log twice; remove one", L->path,
				L->lines[i], k, D->docs[k].name);
		by_doc[k] = &L->records[i];
		n++;
	}
	return n;
}

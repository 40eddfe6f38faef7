/* runner.c - running one method on a context that holds a document.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "runner.h"

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
	if (c->calibration) {
		/* the library's message names the file and the fix; a file of
		 * another model is a model error, as hsq-prefill's is */
		hsq_status st = hsq_calibration_load(c->calibration, R->model, &R->cal);
		if (st) {
			const char *detail = hsq_last_error();
			cli_die(EVAL_PROG, cli_exit_for(st, EXIT_MODEL), "--calibration: %s",
				*detail ? detail : hsq_strerror(st));
		}
		hsq_calibration_info ci;
		hsq_calibration_get_info(R->cal, &ci);
		for (int i = 0; i < 32; i++)
			snprintf(R->cal_id + 2 * i, 3, "%02x", ci.sha256[i]);
	}
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
	free(R->hidden);
	R->hidden = NULL;
	R->n_hidden = 0;
	hsq_calibration_free(R->cal);
	R->cal = NULL;
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
		sb_printf(b, "%s\"%s\"", i ? "," : "", eval_method_name(R->c->methods[i]));
	sb_printf(b, "]");
	/* only with one, so that logs from before hsq-learned still resume;
	 * the file's hash, so that a log made with another calibration does not */
	if (R->cal)
		sb_printf(b, ",\"calibration_sha256\":\"%s\"", R->cal_id);
	sb_printf(b, ",\"budget\":\"%s\"", tier_budget_name(R->c->tier.budget, buf, sizeof buf));
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
	if (R->cal && (st = hsq_context_set_calibration(ctx, R->cal)))
		eval_die_status(st, "setting the calibration");
	double t0 = cli_now();
	eval_eval(R, ctx, toks, n, NULL, 0);
	double t = cli_now() - t0;
	/* The learned reader reads every position's hidden row, and the
	 * snapshot does not carry them: hsq-learned's contexts, loaded from
	 * it, get them from here (eval_open). */
	if (R->cal) {
		size_t E = (size_t)R->mi.n_embd;
		float *h = realloc(R->hidden, (n ? n : 1) * E * sizeof *h);
		if (!h)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory keeping the hidden states of %zu tokens "
								 "(%.1f MiB)", n, (double)n * E * sizeof *h / 1048576.0);
		R->hidden = h;
		R->n_hidden = 0;
		if (n && (st = hsq_context_hidden(ctx, 0, (int)n, h)))
			eval_die_status(st, "keeping the hidden states");
		R->n_hidden = (int)n;
	}
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
	hsq_tier_params tp = R->tp;
	if (mode == EVAL_HSQ_LEARNED) {
		/* the document's rows before the observation tokens are
		 * evaluated: the rows must end where the kept ones begin */
		if ((st = hsq_context_set_calibration(ctx, R->cal)) ||
		    (R->n_hidden && (st = hsq_context_put_hidden(ctx, 0, R->n_hidden, R->hidden))))
			eval_die_status(st, eval_method_name(mode));
		tp.reader = HSQ_READER_LEARNED;
	}
	eval_eval(R, ctx, obs, (size_t)R->n_obs, R->logits, 0);
	double t0 = cli_now();
	if (mode != HSQ_MODE_FULL && (st = hsq_context_compress(ctx, eval_method_mode(mode), &tp)))
		eval_die_status(st, eval_method_name(mode));
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
		eval_die_status(st, eval_method_name(mode));
	set_budget(R, ctx);
	return ctx;
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

/* --------------------------------------------------------------- misc */

void eval_fnv1a_hex(const void *p, size_t n, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= ((const unsigned char *)p)[i];
		h *= 0x100000001b3ull;
	}
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

uint64_t eval_rss_peak(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

uint64_t eval_rss_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, resident;
	int ok = f && fscanf(f, "%lu %lu", &size, &resident) == 2;
	if (f)
		fclose(f);
	long page = sysconf(_SC_PAGESIZE);
	return ok && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

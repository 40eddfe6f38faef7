/* hsq-prefill - run a document through the model once and store the
 * context in a snapshot that hsq-decode resumes many times. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/cli.h"
#include "common/progress.h"
#include "common/tier_options.h"

static const char PROG[] = "hsq-prefill";
static const char USAGE[] = "hsq-prefill [-m MODEL] [--mode hsq|quant|full|streaming|snapkv] -o OUT.hsq [-f FILE] [options] < DOCUMENT";
static const char DESCRIPTION[] =
	"Tokenize a document (standard input, or -f FILE), run it through the model and write\n"
	"the context (tokens and KV cache) to a snapshot, atomically. The default mode, hsq,\n"
	"stores the three-tier compressed cache (hsq(7)).";

enum { OPT_MODE = 256, OPT_CHAT, OPT_SYSTEM, OPT_ZSTD, OPT_CALIBRATION };

static const cli_option options[] = {
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", 'm' },
	{ "output", 'o', "FILE", "snapshot to write (required)", 'o' },
	{ "file", 'f', "FILE", "read the document from FILE instead of standard input", 'f' },
	{ "mode", 0, "MODE", "hsq (default: L1 + L2 summaries + L3 archive), quant (4-bit), full (fp32), streaming, snapkv", OPT_MODE },
	TIER_COMPRESSION_OPTIONS,
	{ "calibration", 0, "FILE", "hsq, snapkv: the learned reader of FILE (hsq-calibrate); --reader learned by default", OPT_CALIBRATION },
	{ "threads", 't', "N", "CPU threads (default: all cores)", 't' },
	{ "ctx-size", 'c', "N", "context size in tokens (default: the model's)", 'c' },
	{ "batch-size", 'b', "N", "tokens per forward chunk (default 512)", 'b' },
	{ "chat", 0, NULL, "open a chat user turn with the document; hsq-decode --chat closes it", OPT_CHAT },
	{ "system", 0, "TEXT", "system message for --chat (default: the template's)", OPT_SYSTEM },
	{ "zstd-level", 0, "N", "zstd compression level 1..19 (default 3)", OPT_ZSTD },
	{ "verbose", 'v', NULL, "print timings to standard error", 'v' },
	{ "quiet", 'q', NULL, "no progress line (shown only when standard error is a terminal)", 'q' },
	{ 0 },
};

int main(int argc, char **argv)
{
	const char *model_arg = NULL, *out_path = NULL, *in_path = "-", *system = NULL, *calib_path = NULL;
	int chat = 0, verbose = 0, quiet = 0, zstd_level = 3;
	hsq_snapshot_mode mode = HSQ_MODE_HSQ;
	tier_options tier;
	hsq_context_params cp = hsq_context_default_params();
	cli_parser p;
	struct timespec started;
	clock_gettime(CLOCK_REALTIME, &started);
	tier_options_init(&tier);
	cli_status_hint(HSQ_ERR_CONTEXT_FULL, "-c sets the context size");
	cli_init(&p, PROG, options);
	for (int c; (c = cli_next(&p, argc, argv, USAGE, DESCRIPTION)) != -1;) {
		switch (c) {
		case 'm': model_arg = optarg; break;
		case 'o': out_path = optarg; break;
		case 'f': in_path = optarg; break;
		case OPT_MODE:
			if (hsq_mode_parse(optarg, &mode))
				cli_usage_error(PROG, "--mode '%s' is unknown; use hsq, quant, full, streaming or snapkv", optarg);
			break;
		case 't': cp.n_threads = (int)cli_long(PROG, "-t", optarg, 1, 256); break;
		case 'c': cp.n_ctx = (int)cli_long(PROG, "-c", optarg, 1, 1 << 24); break;
		case 'b': cp.n_batch = (int)cli_long(PROG, "-b", optarg, 1, 1 << 16); break;
		case OPT_CHAT: chat = 1; break;
		case OPT_SYSTEM: system = optarg; break;
		case OPT_ZSTD: zstd_level = (int)cli_long(PROG, "--zstd-level", optarg, 1, 19); break;
		case OPT_CALIBRATION: calib_path = optarg; break;
		case 'v': verbose = 1; break;
		case 'q': quiet = 1; break;
		default: tier_option(&tier, PROG, c, optarg); break;
		}
	}
	cli_free(&p);
	if (optind < argc)
		cli_usage_error(PROG, "unexpected argument '%s' (the document is read from standard input or -f)",
				argv[optind]);
	if (!out_path)
		cli_usage_error(PROG, "no output file: pass -o OUT.hsq");
	if (system && !chat)
		cli_usage_error(PROG, "--system only applies with --chat");
	/* before the model is loaded and the document run: a bad -o fails at once */
	cli_check_output(PROG, "-o", out_path, EXIT_SNAPSHOT);
	if (tier.n_params && mode == HSQ_MODE_FULL)
		cli_usage_error(PROG, "tier options (--sinks, --window, ...) do not apply to --mode full");
	if (calib_path && mode != HSQ_MODE_HSQ && mode != HSQ_MODE_SNAPKV)
		cli_usage_error(PROG, "--calibration applies to --mode hsq and snapkv (the modes with a reader), not %s",
				hsq_mode_name(mode));
	if (calib_path && !tier.reader_given)
		tier.params.reader = HSQ_READER_LEARNED;
	if (tier.params.reader == HSQ_READER_LEARNED && !calib_path)
		cli_usage_error(PROG, "--reader learned needs a calibration: pass --calibration FILE (made by hsq-calibrate)");

	FILE *in = cli_open_input(PROG, in_path);
	char path_buf[4096];
	hsq_model *model = cli_load_model(PROG, cli_model_path(PROG, model_arg, path_buf, sizeof path_buf));
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	hsq_calibration *cal = NULL;
	hsq_status st;
	if (calib_path && (st = hsq_calibration_load(calib_path, model, &cal)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_MODEL), st);
	int limit = cp.n_ctx ? cp.n_ctx : mi.n_ctx_train;

	/* Read once the context size is known, and no more than it could hold. */
	size_t doc_len;
	char too_long[200];
	snprintf(too_long, sizeof too_long, "more than the %s context of %d tokens could hold; shorten it%s",
		 cp.n_ctx ? "requested" : "model's", limit, cp.n_ctx ? " or raise -c" : "");
	char *doc = cli_read_input(PROG, in, in_path, (size_t)limit * CLI_MAX_BYTES_PER_TOKEN, too_long, &doc_len);
	if (doc_len == 0)
		cli_die(PROG, EXIT_INPUT, "the document is empty (%s); give some text to prefill",
			strcmp(in_path, "-") ? in_path : "standard input");
	if (strlen(doc) != doc_len)
		cli_die(PROG, EXIT_INPUT, "the document contains a NUL byte at offset %zu; is it text?", strlen(doc));

	/* With --chat the template header is tokenized on its own (special
	 * tokens parsed) and the document on its own (special-token text in it
	 * stays text), so the header's tokens are exactly what hsq-decode --chat
	 * looks for, whatever the document starts with. */
	hsq_token *toks = NULL, *doc_toks;
	size_t n_tok = 0, n_doc;
	if (chat) {
		char *open, *close;
		cli_chat_parts(PROG, model, system, &open, &close);
		if ((st = hsq_tokenize(model, open, strlen(open), -1, 1, &toks, &n_tok)))
			cli_die_status(PROG, cli_exit_for(st, EXIT_INPUT), st);
		free(open);
		free(close);
	}
	if ((st = hsq_tokenize(model, doc, doc_len, chat ? 0 : -1, 0, &doc_toks, &n_doc)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_INPUT), st);
	hsq_token *all = realloc(toks, (n_tok + n_doc) * sizeof *all + 1);
	if (!all)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	memcpy(all + n_tok, doc_toks, n_doc * sizeof *all);
	toks = all;
	n_tok += n_doc;
	hsq_free(doc_toks);
	if (n_tok > (size_t)limit)
		cli_die(PROG, EXIT_INPUT, "the document is %zu tokens, longer than the %s context of %d tokens; shorten it%s",
			n_tok, cp.n_ctx ? "requested" : "model's", limit, cp.n_ctx ? " or raise -c" : "");
	if (cp.n_ctx == 0)
		cp.n_ctx = mi.n_ctx_train;

	hsq_context *ctx;
	if ((st = hsq_context_new(model, &cp, &ctx)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	if (cal && (st = hsq_context_set_calibration(ctx, cal)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_MODEL), st);
	double t0 = cli_now();
	int chunk = cp.n_batch ? cp.n_batch : 512;
	progress bar;
	progress_start(&bar, PROG, "tokens", n_tok, quiet);
	for (size_t done = 0; done < n_tok; done += (size_t)chunk) {
		size_t n = n_tok - done < (size_t)chunk ? n_tok - done : (size_t)chunk;
		if ((st = hsq_context_eval(ctx, toks + done, n, NULL, 0))) {
			progress_end(&bar);
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		}
		progress_update(&bar, done + n);
	}
	progress_end(&bar);
	double t_prefill = cli_now() - t0;
	double t1 = cli_now();
	if ((st = hsq_context_compress(ctx, mode, &tier.params)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	double t_compress = cli_now() - t1;
	t1 = cli_now();
	/* Temporary files of out_path that killed runs left (a live writer's
	 * are locked, and kept); then ours, removed if a signal stops the write. */
	int stale = cleanup_stale_snapshots(out_path, started);
	if (verbose && stale)
		fprintf(stderr, "%s: removed %d temporary file%s that an interrupted run left beside %s\n", PROG, stale,
			stale == 1 ? "" : "s", out_path);
	cleanup_add_snapshot(out_path);
	if ((st = hsq_snapshot_save(ctx, out_path, mode, zstd_level)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_SNAPSHOT), st);
	if (verbose)
		fprintf(stderr, "%s: %zu tokens in %.2f s (%.1f tok/s); %s tiers built in %.2f s; snapshot written in %.2f s\n",
			PROG, n_tok, t_prefill, n_tok / (t_prefill > 0 ? t_prefill : 1), hsq_mode_name(mode), t_compress,
			cli_now() - t1);
	free(toks);
	free(doc);
	hsq_context_free(ctx);
	hsq_calibration_free(cal);
	hsq_model_free(model);
	return EXIT_OK;
}

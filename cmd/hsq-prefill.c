/* hsq-prefill - run a document through the model once and store the
 * context in a snapshot that hsq-decode resumes many times. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"

static const char PROG[] = "hsq-prefill";
static const char USAGE[] = "hsq-prefill [-m MODEL] [--mode hsq|quant|full|streaming|snapkv] -o OUT.hsq [-f FILE] [options] < DOCUMENT";
static const char DESCRIPTION[] =
	"Tokenize a document (standard input, or -f FILE), run it through the model and write\n"
	"the context (tokens and KV cache) to a snapshot, atomically. The default mode, hsq,\n"
	"stores the three-tier compressed cache (hsq(7)).";

enum { OPT_MODE = 256, OPT_CHAT, OPT_SYSTEM, OPT_ZSTD, OPT_SINKS, OPT_WINDOW, OPT_L1, OPT_GROUP, OPT_MEDIUM,
       OPT_OBS, OPT_READER, OPT_COMPRESSOR, OPT_KEEP, OPT_SEED, OPT_RESIDUAL,
       OPT_ROUNDING };

static const cli_option options[] = {
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", 'm' },
	{ "output", 'o', "FILE", "snapshot to write (required)", 'o' },
	{ "file", 'f', "FILE", "read the document from FILE instead of standard input", 'f' },
	{ "mode", 0, "MODE", "hsq (default: L1 + L2 summaries + L3 archive), quant (4-bit), full (fp32), streaming, snapkv", OPT_MODE },
	{ "sinks", 0, "N", "hsq: first tokens kept in L1 (default 4)", OPT_SINKS },
	{ "window", 0, "N", "hsq: most recent tokens kept in L1 (default 64)", OPT_WINDOW },
	{ "l1-fraction", 0, "F", "hsq: share of other tokens the reader flags into L1, 0..1 (default 0.03)", OPT_L1 },
	{ "group-size", 0, "N", "hsq: tokens per L2 group, 8 or 16 (default 16)", OPT_GROUP },
	{ "medium-fraction", 0, "F", "hsq: share of 16-token blocks split into medium groups of 8 (default 0.25)", OPT_MEDIUM },
	{ "obs-window", 0, "N", "reader: last tokens whose queries it observes, 1..64 (default 32)", OPT_OBS },
	{ "reader", 0, "NAME", "obs-attention (default) or key-norm", OPT_READER },
	{ "compressor", 0, "NAME", "obs-weighted (default) or mean", OPT_COMPRESSOR },
	{ "keep", 0, "N", "streaming/snapkv: tokens kept per head (default: the bytes of hsq's fast tier)", OPT_KEEP },
	{ "residual-heads", 0, "N", "hsq: heads whose keys get a residual code (about 8 bits); 'default' (the retrieval heads), 'all', 0 = none", OPT_RESIDUAL },
	{ "key-rounding", 0, "HOW", "4-bit key codes: query (default: the levels whose error the observation queries see least) or nearest", OPT_ROUNDING },
	{ "seed", 0, "N", "TurboQuant rotation seed (default 310635462657)", OPT_SEED },
	{ "threads", 't', "N", "CPU threads (default: all cores)", 't' },
	{ "ctx-size", 'c', "N", "context size in tokens (default: the model's)", 'c' },
	{ "batch-size", 'b', "N", "tokens per forward chunk (default 512)", 'b' },
	{ "chat", 0, NULL, "open a chat user turn with the document; hsq-decode --chat closes it", OPT_CHAT },
	{ "system", 0, "TEXT", "system message for --chat (default: the template's)", OPT_SYSTEM },
	{ "zstd-level", 0, "N", "zstd compression level 1..19 (default 3)", OPT_ZSTD },
	{ "verbose", 'v', NULL, "print progress and timings to standard error", 'v' },
	{ 0 },
};

int main(int argc, char **argv)
{
	const char *model_arg = NULL, *out_path = NULL, *in_path = "-", *system = NULL;
	int chat = 0, verbose = 0, zstd_level = 3;
	hsq_snapshot_mode mode = HSQ_MODE_HSQ;
	hsq_tier_params tp = hsq_tier_default_params();
	int tier_opts = 0;
	hsq_context_params cp = hsq_context_default_params();
	cli_parser p;
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
		case OPT_SINKS: tp.sinks = (int)cli_long(PROG, "--sinks", optarg, 0, 1 << 20); tier_opts++; break;
		case OPT_WINDOW: tp.window = (int)cli_long(PROG, "--window", optarg, 1, 1 << 20); tier_opts++; break;
		case OPT_L1: tp.l1_fraction = (float)cli_double(PROG, "--l1-fraction", optarg, 0, 1); tier_opts++; break;
		case OPT_GROUP:
			tp.group_size = (int)cli_long(PROG, "--group-size", optarg, 8, 16);
			if (tp.group_size != 8 && tp.group_size != 16)
				cli_usage_error(PROG, "--group-size %s is not supported; use 8 or 16", optarg);
			tier_opts++;
			break;
		case OPT_MEDIUM:
			tp.medium_fraction = (float)cli_double(PROG, "--medium-fraction", optarg, 0, 1);
			tier_opts++;
			break;
		case OPT_OBS: tp.obs_window = (int)cli_long(PROG, "--obs-window", optarg, 1, HSQ_OBS_MAX); tier_opts++; break;
		case OPT_READER:
			if (!strcmp(optarg, "obs-attention"))
				tp.reader = HSQ_READER_OBS_ATTENTION;
			else if (!strcmp(optarg, "key-norm"))
				tp.reader = HSQ_READER_KEY_NORM;
			else
				cli_usage_error(PROG, "--reader '%s' is unknown; use obs-attention or key-norm", optarg);
			tier_opts++;
			break;
		case OPT_COMPRESSOR:
			if (!strcmp(optarg, "mean"))
				tp.compressor = HSQ_COMPRESSOR_MEAN;
			else if (!strcmp(optarg, "obs-weighted"))
				tp.compressor = HSQ_COMPRESSOR_OBS_WEIGHTED;
			else
				cli_usage_error(PROG, "--compressor '%s' is unknown; use obs-weighted or mean", optarg);
			tier_opts++;
			break;
		case OPT_KEEP: tp.keep = (int)cli_long(PROG, "--keep", optarg, 1, 1 << 24); tier_opts++; break;
		case OPT_RESIDUAL:
			tp.residual_heads = cli_residual_heads(PROG, optarg);
			tier_opts++;
			break;
		case OPT_ROUNDING:
			tp.key_rounding = cli_key_rounding(PROG, optarg);
			tier_opts++;
			break;
		case OPT_SEED: tp.seed = (uint64_t)cli_long(PROG, "--seed", optarg, 0, 0x7fffffffffffffffL); tier_opts++; break;
		case 't': cp.n_threads = (int)cli_long(PROG, "-t", optarg, 1, 256); break;
		case 'c': cp.n_ctx = (int)cli_long(PROG, "-c", optarg, 1, 1 << 24); break;
		case 'b': cp.n_batch = (int)cli_long(PROG, "-b", optarg, 1, 1 << 16); break;
		case OPT_CHAT: chat = 1; break;
		case OPT_SYSTEM: system = optarg; break;
		case OPT_ZSTD: zstd_level = (int)cli_long(PROG, "--zstd-level", optarg, 1, 19); break;
		case 'v': verbose = 1; break;
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
	if (tier_opts && mode == HSQ_MODE_FULL)
		cli_usage_error(PROG, "tier options (--sinks, --window, ...) do not apply to --mode full");

	size_t doc_len;
	char *doc = cli_read_all(PROG, in_path, &doc_len);
	if (doc_len == 0)
		cli_die(PROG, EXIT_INPUT, "the document is empty (%s); give some text to prefill",
			strcmp(in_path, "-") ? in_path : "standard input");
	if (strlen(doc) != doc_len)
		cli_die(PROG, EXIT_INPUT, "the document contains a NUL byte at offset %zu; is it text?", strlen(doc));

	char path_buf[4096];
	hsq_model *model = cli_load_model(PROG, cli_model_path(PROG, model_arg, path_buf, sizeof path_buf));
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);

	/* With --chat the template header is tokenized on its own (special
	 * tokens parsed) and the document on its own (special-token text in it
	 * stays text), so the header's tokens are exactly what hsq-decode --chat
	 * looks for, whatever the document starts with. */
	hsq_token *toks = NULL, *doc_toks;
	size_t n_tok = 0, n_doc;
	hsq_status st;
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
	int limit = cp.n_ctx ? cp.n_ctx : mi.n_ctx_train;
	if (n_tok > (size_t)limit)
		cli_die(PROG, EXIT_INPUT, "the document is %zu tokens, longer than the %s context of %d tokens; shorten it%s",
			n_tok, cp.n_ctx ? "requested" : "model's", limit, cp.n_ctx ? " or raise -c" : "");
	if (cp.n_ctx == 0)
		cp.n_ctx = mi.n_ctx_train;

	hsq_context *ctx;
	if ((st = hsq_context_new(model, &cp, &ctx)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	double t0 = cli_now();
	int chunk = cp.n_batch ? cp.n_batch : 512;
	int progress = isatty(STDERR_FILENO); /* a \r progress line only on a terminal */
	for (size_t done = 0; done < n_tok; done += (size_t)chunk) {
		size_t n = n_tok - done < (size_t)chunk ? n_tok - done : (size_t)chunk;
		if ((st = hsq_context_eval(ctx, toks + done, n, NULL, 0)))
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		if (verbose && progress)
			fprintf(stderr, "\r%s: %zu/%zu tokens", PROG, done + n, n_tok);
	}
	double t_prefill = cli_now() - t0;
	if (verbose && progress)
		fprintf(stderr, "\n");
	double t1 = cli_now();
	if ((st = hsq_context_compress(ctx, mode, &tp)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	double t_compress = cli_now() - t1;
	t1 = cli_now();
	if ((st = hsq_snapshot_save(ctx, out_path, mode, zstd_level)))
		cli_die_status(PROG, cli_exit_for(st, EXIT_SNAPSHOT), st);
	if (verbose)
		fprintf(stderr, "%s: %zu tokens in %.2f s (%.1f tok/s); %s tiers built in %.2f s; snapshot written in %.2f s\n",
			PROG, n_tok, t_prefill, n_tok / (t_prefill > 0 ? t_prefill : 1), hsq_mode_name(mode), t_compress,
			cli_now() - t1);
	free(toks);
	free(doc);
	hsq_context_free(ctx);
	hsq_model_free(model);
	return EXIT_OK;
}

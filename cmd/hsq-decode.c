/* hsq-decode - generate text from a prompt, or resume from a snapshot. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "common/tier_options.h"

static const char PROG[] = "hsq-decode";
static const char USAGE[] = "hsq-decode [-m MODEL] [-s SNAPSHOT] (-p TEXT | -f FILE) [-n N] [options]";
static const char DESCRIPTION[] =
	"Generate text from a prompt and stream it to standard output. With -s, resume from a\n"
	"snapshot written by hsq-prefill: the prompt continues the document stored in it.";

enum { OPT_TEMP = 256, OPT_TOP_K, OPT_TOP_P, OPT_SEED, OPT_CHAT, OPT_SYSTEM, OPT_IGNORE_EOS, OPT_NO_RESIDUAL, OPT_TRACE };

static const cli_option options[] = {
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", 'm' },
	{ "snapshot", 's', "FILE", "resume from this snapshot (hsq-prefill output)", 's' },
	{ "prompt", 'p', "TEXT", "prompt text", 'p' },
	{ "file", 'f', "FILE", "read the prompt from FILE ('-' for standard input)", 'f' },
	{ "n-predict", 'n', "N", "generate at most N tokens (default 128)", 'n' },
	{ "threads", 't', "N", "CPU threads (default: all cores)", 't' },
	{ "ctx-size", 'c', "N", "context size in tokens (default: the model's)", 'c' },
	{ "batch-size", 'b', "N", "prompt tokens per forward chunk (default 512)", 'b' },
	{ "temp", 0, "T", "sampling temperature; 0 = greedy (default 0)", OPT_TEMP },
	{ "top-k", 0, "K", "sample from the K most likely tokens; 0 = all (default 40)", OPT_TOP_K },
	{ "top-p", 0, "P", "nucleus sampling mass in (0,1] (default 0.95)", OPT_TOP_P },
	{ "seed", 0, "N", "random seed for sampling (default: from the clock)", OPT_SEED },
	{ "chat", 0, NULL, "wrap the prompt in the model's chat template", OPT_CHAT },
	{ "system", 0, "TEXT", "system message for --chat (default: the template's)", OPT_SYSTEM },
	{ "ignore-eos", 0, NULL, "keep generating past end-of-sequence tokens", OPT_IGNORE_EOS },
	TIER_ROUTING_OPTIONS,
	{ "no-residual-keys", 0, NULL, "hsq snapshots: decode keys from their 4-bit codes alone, ignoring residual codes", OPT_NO_RESIDUAL },
	{ "trace", 0, "FILE", "hsq snapshots: record router hits (position, layer, head, groups) to FILE", OPT_TRACE },
	{ "verbose", 'v', NULL, "print timings to standard error", 'v' },
	{ 0 },
};

/* Router trace: one line per position, layer and KV head (hsq-inspect(1)
 * reads it): "POS LAYER HEAD G1,G2,..." ("-" when nothing was fetched). */
static void trace_line(void *user, int pos, int layer, int head, const int *groups, int n)
{
	FILE *f = user;
	fprintf(f, "%d\t%d\t%d\t", pos, layer, head);
	for (int i = 0; i < n; i++)
		fprintf(f, i ? ",%d" : "%d", groups[i]);
	fputs(n ? "\n" : "-\n", f);
}

static hsq_token *tokenize_or_die(const hsq_model *m, const char *text, int add_bos, size_t *n)
{
	hsq_token *toks;
	hsq_status st = hsq_tokenize(m, text, strlen(text), add_bos, 1, &toks, n);
	if (st)
		cli_die_status(PROG, cli_exit_for(st, EXIT_INPUT), st);
	return toks;
}

int main(int argc, char **argv)
{
	const char *model_arg = NULL, *snap = NULL, *prompt = NULL, *prompt_file = NULL, *system = NULL;
	const char *trace_path = NULL;
	int no_residual = 0;
	tier_options tier;
	long n_predict = 128;
	int chat = 0, ignore_eos = 0, verbose = 0, seed_given = 0;
	hsq_context_params cp = hsq_context_default_params();
	hsq_sampler_params sp = hsq_sampler_default_params();
	cli_parser p;
	cli_stdout_checked();
	tier_options_init(&tier);
	cli_status_hint(HSQ_ERR_CONTEXT_FULL, "-c sets the context size");
	cli_init(&p, PROG, options);
	for (int c; (c = cli_next(&p, argc, argv, USAGE, DESCRIPTION)) != -1;) {
		switch (c) {
		case 'm': model_arg = optarg; break;
		case 's': snap = optarg; break;
		case 'p': prompt = optarg; break;
		case 'f': prompt_file = optarg; break;
		case 'n': n_predict = cli_long(PROG, "-n", optarg, 0, 1 << 30); break;
		case 't': cp.n_threads = (int)cli_long(PROG, "-t", optarg, 1, 256); break;
		case 'c': cp.n_ctx = (int)cli_long(PROG, "-c", optarg, 1, 1 << 24); break;
		case 'b': cp.n_batch = (int)cli_long(PROG, "-b", optarg, 1, 1 << 16); break;
		case OPT_TEMP: sp.temperature = (float)cli_double(PROG, "--temp", optarg, 0, 100); break;
		case OPT_TOP_K: sp.top_k = (int)cli_long(PROG, "--top-k", optarg, 0, 1 << 30); break;
		case OPT_TOP_P: sp.top_p = (float)cli_double(PROG, "--top-p", optarg, 1e-6, 1); break;
		case OPT_SEED: sp.seed = (uint64_t)cli_long(PROG, "--seed", optarg, 0, 0x7fffffffffffffffL); seed_given = 1; break;
		case OPT_CHAT: chat = 1; break;
		case OPT_SYSTEM: system = optarg; break;
		case OPT_IGNORE_EOS: ignore_eos = 1; break;
		case OPT_NO_RESIDUAL: no_residual = 1; break;
		case OPT_TRACE: trace_path = optarg; break;
		case 'v': verbose = 1; break;
		default: tier_option(&tier, PROG, c, optarg); break;
		}
	}
	cli_free(&p);
	if (optind < argc)
		cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
	if (prompt && prompt_file)
		cli_usage_error(PROG, "give the prompt with -p or -f, not both");
	if (!prompt && !prompt_file && !snap)
		cli_usage_error(PROG, "no prompt: pass -p TEXT, -f FILE or -s SNAPSHOT");
	if (system && !chat)
		cli_usage_error(PROG, "--system only applies with --chat");
	if (!seed_given)
		sp.seed = (uint64_t)time(NULL);

	FILE *prompt_in = prompt_file ? cli_open_input(PROG, prompt_file) : NULL;
	char path_buf[4096];
	const char *model_path = cli_model_path(PROG, model_arg, path_buf, sizeof path_buf);
	hsq_model *model = cli_load_model(PROG, model_path);
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);

	hsq_context *ctx;
	hsq_status st;
	double t0 = cli_now();
	if (snap) {
		st = hsq_snapshot_load(model, snap, &cp, &ctx);
		if (st)
			cli_die_status(PROG, cli_exit_for(st, EXIT_SNAPSHOT), st);
	} else {
		st = hsq_context_new(model, &cp, &ctx);
		if (st)
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	}
	double t_load = cli_now() - t0;
	/* Read once the context size is known, and no more than it could hold. */
	char *prompt_buf = NULL;
	if (prompt_in) {
		size_t len;
		char too_long[200];
		int n_ctx = hsq_context_n_ctx(ctx);
		snprintf(too_long, sizeof too_long, "more than the context of %d tokens could hold; shorten it%s", n_ctx,
			 cp.n_ctx ? " or raise -c" : "");
		prompt_buf = cli_read_input(PROG, prompt_in, prompt_file, (size_t)n_ctx * CLI_MAX_BYTES_PER_TOKEN,
					    too_long, &len);
		if (strlen(prompt_buf) != len)
			cli_die(PROG, EXIT_INPUT, "the prompt file %s contains a NUL byte at offset %zu; is it text?",
				prompt_file, strlen(prompt_buf));
		prompt = prompt_buf;
	}
	FILE *trace = NULL;
	if ((tier.budget_given || tier.retrieval_given || no_residual || trace_path) && hsq_context_mode(ctx) != HSQ_MODE_HSQ)
		cli_usage_error(PROG, "--budget, --retrieval-heads, --no-residual-keys and --trace need an hsq snapshot; %s is %s",
				snap ? snap : "(no snapshot)", snap ? hsq_mode_name(hsq_context_mode(ctx)) : "not given");
	if (tier.budget_given && (st = hsq_context_set_budget(ctx, tier.budget)))
		cli_die_status(PROG, EXIT_USAGE, st);
	if (tier.retrieval_given && (st = hsq_context_set_retrieval_heads(ctx, tier.retrieval_heads)))
		cli_die_status(PROG, EXIT_USAGE, st);
	if (no_residual && (st = hsq_context_use_residual_keys(ctx, 0)))
		cli_die_status(PROG, EXIT_FAILURE_RUNTIME, st);
	if (trace_path) {
		if (!(trace = fopen(trace_path, "w")))
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write the trace %s: %s", trace_path, strerror(errno));
		fprintf(trace, "# hsq trace 1: position layer head fetched-groups; snapshot %s\n", snap);
		hsq_context_set_trace(ctx, trace_line, trace);
	}

	/* The text to feed: with --chat a whole turn, or (resuming a document
	 * opened with hsq-prefill --chat) the question and the turn's end. */
	char *text = NULL;
	const char *feed = prompt ? prompt : "";
	int resumed = hsq_context_n_past(ctx) > 0;
	if (chat) {
		char *open, *close;
		cli_chat_parts(PROG, model, system, &open, &close);
		const hsq_token *past = hsq_context_tokens(ctx);
		hsq_token *open_toks;
		size_t n_open;
		open_toks = tokenize_or_die(model, open, 0, &n_open);
		int doc_is_open_turn = resumed && (size_t)hsq_context_n_past(ctx) >= n_open &&
				       memcmp(past, open_toks, n_open * sizeof *past) == 0;
		hsq_free(open_toks);
		size_t need = strlen(open) + strlen(feed) + strlen(close) + 3;
		text = malloc(need);
		if (!text)
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		if (doc_is_open_turn)
			snprintf(text, need, "%s%s%s", *feed ? "\n\n" : "", feed, close);
		else
			snprintf(text, need, "%s%s%s", open, feed, close);
		free(open);
		free(close);
		feed = text;
	}
	size_t n_prompt = 0;
	hsq_token *ptoks = NULL;
	if (*feed)
		ptoks = tokenize_or_die(model, feed, resumed ? 0 : -1, &n_prompt);

	float *logits = malloc((size_t)mi.n_vocab * sizeof *logits);
	hsq_sampler *sampler;
	if (!logits)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	if ((st = hsq_sampler_new(&sp, &sampler)))
		cli_die_status(PROG, EXIT_USAGE, st);

	if (n_prompt == 0)
		cli_die(PROG, EXIT_INPUT, resumed ? "nothing to continue from: give a prompt with -p or -f after -s"
						  : "the prompt is empty; pass some text with -p or -f");
	double t1 = cli_now();
	st = hsq_context_eval(ctx, ptoks, n_prompt, logits, 0);
	if (st)
		cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
	double t_prompt = cli_now() - t1;

	hsq_detok dt = { { 0 }, 0 };
	char out[1024]; /* a token's bytes, or U+FFFD for each invalid byte: 3 x (len + 3) */
	size_t out_len;
	long n_gen = 0;
	double t2 = cli_now();
	while (n_gen < n_predict) {
		hsq_token tok = hsq_sampler_sample(sampler, logits, mi.n_vocab);
		if (!ignore_eos && hsq_token_is_eog(model, tok))
			break;
		if ((st = hsq_detok_push(model, &dt, tok, out, sizeof out, &out_len)))
			cli_die_status(PROG, EXIT_FAILURE_RUNTIME, st);
		fwrite(out, 1, out_len, stdout);
		cli_stdout_flush(); /* a full disk or closed pipe ends the run at once */
		if (++n_gen == n_predict)
			break;
		st = hsq_context_eval(ctx, &tok, 1, logits, 0);
		if (st) {
			fputc('\n', stdout);
			cli_die_status(PROG, cli_exit_for(st, EXIT_FAILURE_RUNTIME), st);
		}
	}
	out_len = hsq_detok_flush(&dt, out, sizeof out);
	fwrite(out, 1, out_len, stdout);
	fputc('\n', stdout);
	double t_gen = cli_now() - t2;
	if (verbose)
		fprintf(stderr,
			"%s: %s %.2f s; prompt %zu tokens in %.2f s (%.1f tok/s); generated %ld tokens in %.2f s (%.1f tok/s)\n",
			PROG, snap ? "snapshot load" : "setup", t_load, n_prompt, t_prompt,
			t_prompt > 0 ? n_prompt / t_prompt : 0.0, n_gen, t_gen, t_gen > 0 ? n_gen / t_gen : 0.0);
	if (verbose && hsq_context_mode(ctx) == HSQ_MODE_HSQ)
		fprintf(stderr, "%s: budget %d tokens per head; %d retrieval head%s fetch every group; %d head%s decode keys with residual codes\n",
			PROG, hsq_context_budget(ctx), hsq_context_retrieval_heads(ctx),
			hsq_context_retrieval_heads(ctx) == 1 ? "" : "s", hsq_context_residual_keys(ctx),
			hsq_context_residual_keys(ctx) == 1 ? "" : "s");
	if (trace && fclose(trace) != 0)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write the trace %s: %s", trace_path, strerror(errno));
	hsq_sampler_free(sampler);
	free(logits);
	hsq_free(ptoks);
	free(text);
	free(prompt_buf);
	hsq_context_free(ctx);
	hsq_model_free(model);
	return EXIT_OK;
}

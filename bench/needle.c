/* needle.c - needle in a haystack, paired over full, quant and hsq.
 *
 * usage: needle MODEL THREADS CTX N_TRIALS HAYSTACK.txt [SEED]
 *
 * Trial i: a haystack of about CTX tokens from HAYSTACK.txt (starting at a
 * different place each trial), with the needle "The special magic number
 * for CITY is NNNNNNN." inserted at depth 10, 30, 50, 70 or 90% (cycling),
 * in a chat user turn; the question "What is the special magic number for
 * CITY?" and the turn's end come after it, as hsq-decode --chat adds them
 * to a snapshot written by hsq-prefill --chat. City and number come from
 * SEED and i. One prefill per trial (everything before the question but
 * the last 32 tokens, saved as a full snapshot); every method loads it,
 * evaluates those 32 tokens (the reader's observation window), is
 * compressed, then reads the question and answers greedily (24 tokens).
 * A trial succeeds when the answer contains the number; each method also
 * logs the log-probability of the number, teacher-forced (lp_*, nats). The same haystack,
 * needle, position and question serve every method (paired trials). Tier
 * parameters and budget can be changed through the environment
 * (bench_util.h: HSQ_Q_GROUP, HSQ_Q_BUDGET, HSQ_Q_RETRIEVAL, ...). To look
 * at one trial or one method: HSQ_NEEDLE_METHODS (e.g. "hsq"), HSQ_NEEDLE_FIRST (the first
 * trial to run), HSQ_NEEDLE_RECALL (print hsq's router recall per layer),
 * HSQ_NEEDLE_CACHE (a directory keeping each trial's prefill snapshot).
 *
 * Prints one line per trial and success counts per method and depth, with
 * the discordant pairs of each method against full. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "hsq.h"

#define N_OBS 32
#define N_ANSWER 24
#define N_DEPTHS 5
#define N_METHODS 3

static const hsq_snapshot_mode methods[N_METHODS] = { HSQ_MODE_FULL, HSQ_MODE_QUANT, HSQ_MODE_HSQ };
static const int depths[N_DEPTHS] = { 10, 30, 50, 70, 90 };
static const char *const cities[] = { "Lisbon", "Nairobi", "Osaka", "Quito", "Tallinn", "Perth", "Dakar",
				      "Hanoi", "Bergen", "Cusco", "Tbilisi", "Accra", "Leipzig", "Manaus" };

static void die(const char *what)
{
	fprintf(stderr, "needle: %s: %s\n", what, hsq_last_error());
	exit(1);
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static hsq_token *tokenize(const hsq_model *m, const char *text, int special, size_t *n)
{
	hsq_token *t;
	if (hsq_tokenize(m, text, strlen(text), special ? -1 : 0, special, &t, n))
		die("tokenize");
	return t;
}

/* HSQ_NEEDLE_METHODS (a comma-separated list, e.g. "hsq") runs only
 * those methods, to try alternatives quickly; the others count as misses
 * and print "-". */
static int method_wanted(hsq_snapshot_mode m)
{
	const char *e = getenv("HSQ_NEEDLE_METHODS");
	if (!e)
		return 1;
	const char *name = hsq_mode_name(m);
	size_t n = strlen(name);
	for (const char *p = e; (p = strstr(p, name)); p += n)
		if ((p == e || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
	return 0;
}

/* The last 40 bytes of an answer: where the number is. */
static const char *answer_tail(const char *a)
{
	size_t n = strlen(a);
	return n > 40 ? a + n - 40 : a;
}

/* Appends n tokens to a growing array. */
static void append(hsq_token **dst, size_t *n, const hsq_token *src, size_t k)
{
	*dst = realloc(*dst, (*n + k) * sizeof **dst);
	memcpy(*dst + *n, src, k * sizeof *src);
	*n += k;
}

/* A method's context after the question: the trial's prefill loaded from
 * snap, the observation window evaluated, compressed, the question read;
 * logits holds the next token's. */
static hsq_context *open_method(const hsq_model *model, const char *snap, const hsq_context_params *cp,
				hsq_snapshot_mode mode, const hsq_tier_params *tp, const hsq_token *prompt,
				size_t n_ctx_tokens, size_t n_question, float *logits)
{
	hsq_context *ctx;
	if (hsq_snapshot_load(model, snap, cp, &ctx) ||
	    hsq_context_eval(ctx, prompt + n_ctx_tokens - N_OBS, N_OBS, NULL, 0) ||
	    hsq_context_compress(ctx, mode, tp) || bench_set_budget(ctx) ||
	    hsq_context_eval(ctx, prompt + n_ctx_tokens, n_question, logits, 0))
		die("method");
	return ctx;
}

/* log P(number | question, "The special magic number for CITY is"), nats,
 * teacher-forced as hsq-eval needle scores it: a continuous, paired
 * measure with more power than the success counts. */
static double number_logp(const hsq_model *model, hsq_context *ctx, float *logits, size_t V, const char *city,
			  unsigned number)
{
	char pre[128], ref[160];
	snprintf(pre, sizeof pre, "The special magic number for %s is", city);
	snprintf(ref, sizeof ref, "%s %u", pre, number);
	size_t np, n, from = 0;
	hsq_token *p = tokenize(model, pre, 0, &np), *a = tokenize(model, ref, 0, &n);
	while (from < np && from < n && p[from] == a[from])
		from++;
	if (from && hsq_context_eval(ctx, a, from, logits, 0))
		die("answer prefix");
	double lp = 0.0;
	for (size_t i = from; i < n; i++) {
		float mx = logits[0];
		for (size_t v = 1; v < V; v++)
			mx = logits[v] > mx ? logits[v] : mx;
		double z = 0.0;
		for (size_t v = 0; v < V; v++)
			z += exp((double)logits[v] - mx);
		lp += (double)logits[a[i]] - mx - log(z);
		if (i + 1 < n && hsq_context_eval(ctx, &a[i], 1, logits, 0))
			die("answer");
	}
	hsq_free(p);
	hsq_free(a);
	return lp;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: needle MODEL THREADS CTX N_TRIALS HAYSTACK.txt [SEED]\n");
		return 2;
	}
	hsq_model *model;
	if (hsq_model_load(argv[1], &model))
		die(argv[1]);
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	int threads = atoi(argv[2]), ctx_len = atoi(argv[3]), n_trials = atoi(argv[4]);
	uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 1;
	size_t hay_len;
	char *hay_text = bench_read_file(argv[5], &hay_len);
	if (!hay_text)
		die(argv[5]);
	size_t n_hay;
	hsq_token *hay = tokenize(model, hay_text, 0, &n_hay);
	free(hay_text);

	/* the chat turn around the document: open | document | question + close */
	char *all;
	if (hsq_chat_format(model, NULL, "\x01", &all))
		die("chat template");
	char *cut = strchr(all, '\x01');
	*cut = '\0';
	size_t n_open;
	hsq_token *open = tokenize(model, all, 1, &n_open);
	const char *close_text = cut + 1;

	const char *hay_name = strrchr(argv[5], '/') ? strrchr(argv[5], '/') + 1 : argv[5];
	hsq_tier_params tp = bench_tier_params();
	char snap[512];
	snprintf(snap, sizeof snap, "/tmp/needle-%d.hsq", (int)getpid());
	size_t V = (size_t)mi.n_vocab;
	float *logits = malloc(V * sizeof *logits);
	hsq_context_params cp = { ctx_len + 64, threads, 512 };
	int success[N_METHODS][N_DEPTHS] = { { 0 } }, trials[N_DEPTHS] = { 0 };
	int disc_b[N_METHODS] = { 0 }, disc_c[N_METHODS] = { 0 }; /* b: full ok, method fails; c: the reverse */

	printf("# needle: %s, context %d tokens, %d trials, haystack %s (%zu tokens), seed %llu, threads %d\n", mi.name,
	       ctx_len, n_trials, argv[5], n_hay, (unsigned long long)seed, threads);
	printf("%-5s %-6s %-8s %-8s %-6s %-6s %-6s %8s %8s %8s\n", "trial", "depth", "city", "number", "full", "quant",
	       "hsq", "lp_full", "lp_quant", "lp_hsq");
	int first_trial = getenv("HSQ_NEEDLE_FIRST") ? atoi(getenv("HSQ_NEEDLE_FIRST")) : 0;
	for (int trial = first_trial; trial < n_trials; trial++) {
		uint64_t s = seed * 1000003ull + (uint64_t)trial;
		const char *city = cities[splitmix(&s) % (sizeof cities / sizeof *cities)];
		unsigned number = 1000000u + (unsigned)(splitmix(&s) % 9000000u);
		int d = trial % N_DEPTHS;
		char needle_text[160], question_text[512];
		snprintf(needle_text, sizeof needle_text, " The special magic number for %s is %u. ", city, number);
		snprintf(question_text, sizeof question_text,
			 "\n\nWhat is the special magic number for %s mentioned in the text above? Answer with the number.%s",
			 city, close_text);
		size_t n_needle, n_question;
		hsq_token *needle = tokenize(model, needle_text, 0, &n_needle);
		hsq_token *question = tokenize(model, question_text, 1, &n_question);
		if (question[0] == open[0] && n_open && n_question > 1) { /* a BOS the template does not want here */
			memmove(question, question + 1, (n_question - 1) * sizeof *question);
			n_question--;
		}
		long n_doc = (long)ctx_len - (long)n_open - (long)n_needle - (long)n_question - N_ANSWER;
		if (n_doc < 64 || (size_t)n_doc > n_hay) {
			fprintf(stderr, "needle: context %d is too small or the haystack too short\n", ctx_len);
			return 2;
		}
		size_t start = (size_t)((splitmix(&s) % (n_hay - (size_t)n_doc + 1)));
		size_t at = (size_t)n_doc * depths[d] / 100;
		hsq_token *prompt = NULL;
		size_t n = 0;
		append(&prompt, &n, open, n_open);
		append(&prompt, &n, hay + start, at);
		append(&prompt, &n, needle, n_needle);
		append(&prompt, &n, hay + start + at, (size_t)n_doc - at);
		size_t n_ctx_tokens = n; /* the document: what hsq-prefill would store */
		append(&prompt, &n, question, n_question);

		/* HSQ_NEEDLE_CACHE=DIR keeps each trial's prefill as a full
		 * snapshot, so trying router variants costs only their decode. */
		const char *cache = getenv("HSQ_NEEDLE_CACHE");
		if (cache)
			snprintf(snap, sizeof snap, "%s/%s-%d-%llu-%d.hsq", cache, hay_name, ctx_len,
				 (unsigned long long)seed, trial);
		if (!cache || access(snap, R_OK) != 0) {
			hsq_context *pre;
			if (hsq_context_new(model, &cp, &pre))
				die("context");
			if (hsq_context_eval(pre, prompt, n_ctx_tokens - N_OBS, NULL, 0))
				die("prefill");
			if (hsq_snapshot_save(pre, snap, HSQ_MODE_FULL, 1))
				die("save");
			hsq_context_free(pre);
		}

		int ok[N_METHODS];
		double lp[N_METHODS]; /* log-probability of the number, nats */
		char answers[N_METHODS][256];
		for (int m = 0; m < N_METHODS; m++) {
			if (!method_wanted(methods[m])) {
				ok[m] = 0;
				lp[m] = NAN;
				strcpy(answers[m], "-");
				continue;
			}
			hsq_context *ctx = open_method(model, snap, &cp, methods[m], &tp, prompt, n_ctx_tokens,
						       n_question, logits);
			if (getenv("HSQ_NEEDLE_RECALL") && methods[m] == HSQ_MODE_HSQ)
				hsq_context_set_recall_probe(ctx, 1);
			hsq_detok dt = { { 0 }, 0 };
			size_t len = 0;
			char *ans = answers[m];
			for (int k = 0; k < N_ANSWER; k++) {
				hsq_token best = 0;
				for (size_t v = 1; v < V; v++)
					if (logits[v] > logits[best])
						best = (hsq_token)v;
				if (hsq_token_is_eog(model, best))
					break;
				char buf[64];
				size_t bl;
				if (hsq_detok_push(model, &dt, best, buf, sizeof buf, &bl) == HSQ_OK && len + bl < 200) {
					memcpy(ans + len, buf, bl);
					len += bl;
				}
				if (k + 1 < N_ANSWER && hsq_context_eval(ctx, &best, 1, logits, 0))
					die("decode");
			}
			ans[len] = '\0';
			if (getenv("HSQ_NEEDLE_RECALL") && methods[m] == HSQ_MODE_HSQ) {
				double rl[256];
				if (hsq_context_recall(ctx, rl) == HSQ_OK) {
					printf("recall:");
					for (int l = 0; l < mi.n_layer; l++)
						printf(" %d:%.3f", l, rl[l]);
					printf("\n");
				}
			}
			char num[16];
			snprintf(num, sizeof num, "%u", number);
			ok[m] = strstr(ans, num) != NULL;
			success[m][d] += ok[m];
			hsq_context_free(ctx);
			ctx = open_method(model, snap, &cp, methods[m], &tp, prompt, n_ctx_tokens, n_question, logits);
			lp[m] = number_logp(model, ctx, logits, V, city, number);
			hsq_context_free(ctx);
		}
		trials[d]++;
		for (int m = 1; m < N_METHODS; m++) {
			disc_b[m] += ok[0] && !ok[m];
			disc_c[m] += !ok[0] && ok[m];
		}
		for (int m = 0; m < N_METHODS; m++)
			for (char *c = answers[m]; *c; c++)
				if (*c == '\n' || *c == '\t')
					*c = ' ';
		printf("%-5d %-6d %-8s %-8u %-6s %-6s %-6s %8.3f %8.3f %8.3f | %s | %s | %s\n", trial, depths[d], city,
		       number, ok[0] ? "ok" : "miss", ok[1] ? "ok" : "miss", ok[2] ? "ok" : "miss", lp[0], lp[1], lp[2],
		       answer_tail(answers[0]), answer_tail(answers[1]), answer_tail(answers[2]));
		fflush(stdout);
		free(prompt);
		hsq_free(needle);
		hsq_free(question);
	}
	if (!getenv("HSQ_NEEDLE_CACHE"))
		unlink(snap);
	printf("\n# successes per depth (trials)\n%-8s", "method");
	for (int d = 0; d < N_DEPTHS; d++)
		printf(" %3d%%(%d)", depths[d], trials[d]);
	printf("   total   discordant vs full (full ok/method miss, full miss/method ok), exact McNemar p\n");
	for (int m = 0; m < N_METHODS; m++) {
		int tot = 0;
		printf("%-8s", hsq_mode_name(methods[m]));
		for (int d = 0; d < N_DEPTHS; d++) {
			printf(" %8d", success[m][d]);
			tot += success[m][d];
		}
		printf("   %3d/%d", tot, n_trials);
		if (m) {
			double p;
			hsq_mcnemar_exact((uint64_t)disc_b[m], (uint64_t)disc_c[m], 0, &p);
			printf("   %d, %d   p = %.4f", disc_b[m], disc_c[m], p);
		}
		printf("\n");
	}
	free(logits);
	hsq_free(open);
	hsq_free(all);
	hsq_free(hay);
	hsq_model_free(model);
	return 0;
}

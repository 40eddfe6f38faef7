/* bench_runtime.c - prefill and decode throughput of the CPU runtime.
 *
 * usage: bench_runtime MODEL THREADS TEXTFILE LEN... 
 * For each context length LEN: tokenizes TEXTFILE (repeated as needed),
 * prefills the first LEN-32 tokens, then decodes 32 tokens greedily.
 * Prints one line per length: len, prefill tok/s, decode tok/s, the size of
 * a full snapshot of the prefilled context and the time to load it (vs the
 * prefill it replaces), and writes the prompt's token ids to
 * bench/out/tokens-LEN.txt so another engine can be timed on exactly the
 * same input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "bench_util.h"
#include "hsq.h"

#define N_DECODE 32

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: bench_runtime MODEL THREADS TEXTFILE LEN...\n");
		return 2;
	}
	hsq_model *model;
	if (hsq_model_load(argv[1], &model)) {
		fprintf(stderr, "bench_runtime: %s\n", hsq_last_error());
		return 1;
	}
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	int threads = atoi(argv[2]);
	size_t len;
	char *text = bench_read_file(argv[3], &len);
	if (!text) {
		fprintf(stderr, "bench_runtime: cannot read %s\n", argv[3]);
		return 1;
	}
	hsq_token *toks;
	size_t n_text;
	if (hsq_tokenize(model, text, len, 0, 0, &toks, &n_text) || n_text == 0) {
		fprintf(stderr, "bench_runtime: %s\n", hsq_last_error());
		return 1;
	}
	mkdir("bench/out", 0755);
	float *logits = malloc((size_t)mi.n_vocab * sizeof *logits);
	printf("%-8s %14s %14s %14s %10s %12s\n", "context", "prefill tok/s", "decode tok/s", "snapshot MiB", "load s",
	       "load speedup");
	for (int a = 4; a < argc; a++) {
		int L = atoi(argv[a]), n_prompt = L - N_DECODE;
		if (n_prompt < 1 || L > mi.n_ctx_train) {
			fprintf(stderr, "bench_runtime: length %d out of range\n", L);
			return 2;
		}
		hsq_token *prompt = malloc((size_t)n_prompt * sizeof *prompt);
		for (int i = 0; i < n_prompt; i++)
			prompt[i] = toks[(size_t)i % n_text];
		char path[64];
		snprintf(path, sizeof path, "bench/out/tokens-%d.txt", L);
		FILE *f = fopen(path, "w");
		for (int i = 0; f && i < n_prompt; i++)
			fprintf(f, "%d%c", prompt[i], i + 1 < n_prompt ? ' ' : '\n');
		if (f)
			fclose(f);
		hsq_context_params cp = { L, threads, 512 };
		hsq_context *ctx;
		if (hsq_context_new(model, &cp, &ctx)) {
			fprintf(stderr, "bench_runtime: %s\n", hsq_last_error());
			return 1;
		}
		double t0 = bench_now();
		hsq_context_eval(ctx, prompt, (size_t)n_prompt, logits, 0);
		double t_prefill = bench_now() - t0;
		/* snapshot of the prefilled context: size, and load time against
		 * the prefill it saves */
		char snap[64];
		snprintf(snap, sizeof snap, "bench/out/snap-%d.hsq", L);
		struct stat sb = { 0 };
		double t_load = -1;
		if (hsq_snapshot_save(ctx, snap, HSQ_MODE_FULL, 3) == HSQ_OK && stat(snap, &sb) == 0) {
			hsq_context *loaded;
			double t1 = bench_now();
			if (hsq_snapshot_load(model, snap, &cp, &loaded) == HSQ_OK) {
				t_load = bench_now() - t1;
				hsq_context_free(loaded);
			}
			unlink(snap);
		}
		t0 = bench_now();
		for (int i = 0; i < N_DECODE; i++) {
			int best = 0;
			for (int v = 1; v < mi.n_vocab; v++)
				if (logits[v] > logits[best])
					best = v;
			hsq_token t = best;
			hsq_context_eval(ctx, &t, 1, logits, 0);
		}
		double t_decode = bench_now() - t0;
		printf("%-8d %14.1f %14.1f %14.1f %10.2f %11.0fx\n", L, n_prompt / t_prefill, N_DECODE / t_decode,
		       sb.st_size / 1048576.0, t_load, t_load > 0 ? t_prefill / t_load : 0.0);
		fflush(stdout);
		hsq_context_free(ctx);
		free(prompt);
	}
	free(logits);
	hsq_free(toks);
	free(text);
	hsq_model_free(model);
	return 0;
}

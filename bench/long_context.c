/* long_context.c - one long greedy run: prefill a token file, generate N
 * tokens greedily, compare with a reference continuation, report speed.
 *
 * usage: long_context MODEL TOKENS_FILE N_GEN [REF_IDS] [THREADS]
 * TOKENS_FILE: whitespace-separated token ids (the full prompt, BOS
 * included). REF_IDS: the reference's greedy ids as one space-separated
 * argument (e.g. from tests/golden/gemma3/long.tsv). Prints prefill and
 * decode tokens/s, then per step: our id, reference id, our top-2 gap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "hsq.h"

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: long_context MODEL TOKENS_FILE N_GEN [REF_IDS] [THREADS]\n");
		return 2;
	}
	int n_gen = atoi(argv[3]), threads = argc > 5 ? atoi(argv[5]) : 0;
	FILE *f = fopen(argv[2], "r");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	size_t n = 0, cap = 1 << 16;
	hsq_token *toks = malloc(cap * sizeof *toks);
	int v;
	while (fscanf(f, "%d", &v) == 1) {
		if (n == cap)
			toks = realloc(toks, (cap *= 2) * sizeof *toks);
		toks[n++] = v;
	}
	fclose(f);
	int ref[4096], n_ref = 0;
	if (argc > 4)
		for (char *p = argv[4], *e; n_ref < 4096; p = e) {
			long x = strtol(p, &e, 10);
			if (e == p)
				break;
			ref[n_ref++] = (int)x;
		}
	hsq_model *m;
	if (hsq_model_load(argv[1], &m)) {
		fprintf(stderr, "%s\n", hsq_last_error());
		return 1;
	}
	hsq_model_info mi;
	hsq_model_get_info(m, &mi);
	hsq_context_params p = { (int)n + n_gen, threads, 512 };
	hsq_context *ctx;
	if (hsq_context_new(m, &p, &ctx)) {
		fprintf(stderr, "%s\n", hsq_last_error());
		return 1;
	}
	float *lg = malloc((size_t)mi.n_vocab * sizeof *lg);
	double t0 = bench_now();
	if (hsq_context_eval(ctx, toks, n, lg, 0)) {
		fprintf(stderr, "%s\n", hsq_last_error());
		return 1;
	}
	double t_prefill = bench_now() - t0;
	int first_diff = -1;
	t0 = bench_now();
	for (int i = 0; i < n_gen; i++) {
		int a = 0, b = -1;
		for (int k = 1; k < mi.n_vocab; k++)
			if (lg[k] > lg[a])
				a = k;
		for (int k = 0; k < mi.n_vocab; k++)
			if (k != a && (b < 0 || lg[k] > lg[b]))
				b = k;
		printf("step %2d: hsq %6d ref %6d gap %.4f%s\n", i, a, i < n_ref ? ref[i] : -1, lg[a] - lg[b],
		       i < n_ref && a != ref[i] ? "  <- differs" : "");
		if (i < n_ref && a != ref[i] && first_diff < 0)
			first_diff = i;
		hsq_token t = a;
		if (i + 1 < n_gen && hsq_context_eval(ctx, &t, 1, lg, 0)) {
			fprintf(stderr, "%s\n", hsq_last_error());
			return 1;
		}
	}
	double t_decode = bench_now() - t0;
	printf("prompt %zu tokens: prefill %.1f s (%.1f tok/s); %d greedy tokens %.1f s (%.2f tok/s); %s\n", n, t_prefill,
	       n / t_prefill, n_gen, t_decode, n_gen / t_decode,
	       n_ref == 0 ? "no reference" : first_diff < 0 ? "equal to the reference" : "differs from the reference");
	if (first_diff >= 0)
		printf("first difference at step %d\n", first_diff);
	free(lg);
	free(toks);
	hsq_context_free(ctx);
	hsq_model_free(m);
	return 0;
}

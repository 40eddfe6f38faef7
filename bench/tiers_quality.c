/* tiers_quality.c - HSQ against full and quant on real documents, same run.
 *
 * usage: tiers_quality MODEL THREADS N_CTX N_CONT N_GEN FILE...
 *
 * For each document (skipped if shorter than N_CTX + N_CONT tokens): one
 * prefill of the first N_CTX - 32 tokens, saved as a full snapshot; every
 * method then loads it, evaluates the last 32 context tokens (the reader's
 * observation window) and is compressed (quant, hsq). Then, per method:
 *   ppl     perplexity of the next N_CONT document tokens, evaluated in
 *           chunks of 16 (the tail compresses online between chunks);
 *   agree   full generates N_GEN tokens greedily; quant and hsq are fed the
 *           same tokens one at a time (teacher forcing) and their argmax
 *           compared with full's, with the first divergence;
 *   decode  tokens/s of those one-token steps (full: its own generation);
 *   recall  hsq only: share of the true attention mass (full cache, same
 *           query) that L1 + fetched groups + tail hold, per layer, during
 *           the perplexity pass at the default budget;
 *   bytes   fast tier (L1 + L2) and archive (L3) against fp16 KV; sizes of
 *           the hsq and full snapshots and their load times against the
 *           prefill they replace.
 * Options through the environment: HSQ_Q_MODES (default "full quant hsq"),
 * HSQ_Q_BUDGET (tokens; unset: the library's default), HSQ_Q_RETRIEVAL (retrieval
 * heads; unset: the default), HSQ_Q_READER / _COMPRESSOR
 * / _GROUP / _L1 / _WINDOW to try alternatives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "hsq.h"

#define N_OBS 32
#define PPL_CHUNK 16
#define MAX_LAYERS 256

static void die(const char *what)
{
	fprintf(stderr, "tiers_quality: %s: %s\n", what, hsq_last_error());
	exit(1);
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static double nll(const float *logits, int n, int target)
{
	float mx = logits[0];
	for (int i = 1; i < n; i++)
		mx = logits[i] > mx ? logits[i] : mx;
	double s = 0;
	for (int i = 0; i < n; i++)
		s += exp((double)logits[i] - mx);
	return log(s) + mx - logits[target];
}

typedef struct method_total {
	double nll;
	long n_nll;
	long agree, n_agree;
	double decode_s;
	long decode_n;
	double recall[MAX_LAYERS];
	int n_recall;
	double fast_ratio, archive_ratio;
	int n_docs;
} method_total;

/* A context at the document's context end: load the snapshot of the first
 * n_ctx - 32 tokens, evaluate the last 32, compress to mode. */
static hsq_context *open_method(hsq_model *model, const char *snap, const hsq_context_params *cp,
				const hsq_token *doc, int n_ctx, hsq_snapshot_mode mode, float *logits, double *t_load)
{
	hsq_context *ctx;
	double t0 = bench_now();
	if (hsq_snapshot_load(model, snap, cp, &ctx))
		die("load");
	if (t_load)
		*t_load = bench_now() - t0;
	if (hsq_context_eval(ctx, doc + n_ctx - N_OBS, N_OBS, logits, 0))
		die("eval");
	hsq_tier_params p = bench_tier_params();
	if (hsq_context_compress(ctx, mode, &p))
		die("compress");
	if (bench_set_budget(ctx))
		die("budget");
	return ctx;
}

int main(int argc, char **argv)
{
	if (argc < 7) {
		fprintf(stderr, "usage: tiers_quality MODEL THREADS N_CTX N_CONT N_GEN FILE...\n");
		return 2;
	}
	hsq_model *model;
	if (hsq_model_load(argv[1], &model))
		die(argv[1]);
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	int threads = atoi(argv[2]), n_ctx = atoi(argv[3]), n_cont = atoi(argv[4]), n_gen = atoi(argv[5]);
	if (n_ctx <= N_OBS || n_cont < 0 || n_gen < 1 || mi.n_layer > MAX_LAYERS) {
		fprintf(stderr, "tiers_quality: bad sizes\n");
		return 2;
	}
	hsq_snapshot_mode modes[3];
	int n_modes = 0;
	const char *ms = getenv("HSQ_Q_MODES") ? getenv("HSQ_Q_MODES") : "full quant hsq";
	if (strstr(ms, "full"))
		modes[n_modes++] = HSQ_MODE_FULL;
	if (strstr(ms, "quant"))
		modes[n_modes++] = HSQ_MODE_QUANT;
	if (strstr(ms, "hsq"))
		modes[n_modes++] = HSQ_MODE_HSQ;
	if (modes[0] != HSQ_MODE_FULL) {
		fprintf(stderr, "tiers_quality: full must be among the modes (it is the reference)\n");
		return 2;
	}
	int total = n_ctx + (n_cont > n_gen ? n_cont : n_gen);
	if (total > mi.n_ctx_train) {
		fprintf(stderr, "tiers_quality: %d context + %d continuation tokens exceed the model's %d\n", n_ctx,
			total - n_ctx, mi.n_ctx_train);
		return 2;
	}
	hsq_context_params cp = { total, threads, 512 };
	size_t V = (size_t)mi.n_vocab;
	float *logits = malloc(V * PPL_CHUNK * sizeof *logits);
	hsq_token *gen = malloc((size_t)n_gen * sizeof *gen);
	method_total tot[3];
	memset(tot, 0, sizeof tot);
	char snap[64], snap_hsq[64];
	snprintf(snap, sizeof snap, "/tmp/tiers_quality-%d.hsq", (int)getpid());
	snprintf(snap_hsq, sizeof snap_hsq, "/tmp/tiers_quality-%d-hsq.hsq", (int)getpid());

	printf("# model %s, context %d, continuation %d, generated %d, threads %d, default budget %d\n", mi.name, n_ctx,
	       n_cont, n_gen, threads, hsq_default_budget(n_ctx));
	printf("%-28s %-6s %9s %8s %8s %9s %8s %9s %9s\n", "document", "mode", "ppl", "agree", "1st-div", "decode/s",
	       "recall", "fast-x", "arch+fast");
	for (int a = 6; a < argc; a++) {
		size_t len;
		char *text = bench_read_file(argv[a], &len);
		hsq_token *doc;
		size_t n_doc;
		if (!text || hsq_tokenize(model, text, len, 0, 0, &doc, &n_doc))
			die(argv[a]);
		free(text);
		const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
		if (n_doc < (size_t)(n_ctx + n_cont) || n_doc < (size_t)n_ctx + 1) {
			printf("%-28s skipped: %zu tokens < %d\n", base, n_doc, n_ctx + n_cont);
			hsq_free(doc);
			continue;
		}
		hsq_context *pre;
		if (hsq_context_new(model, &cp, &pre))
			die("context");
		double t0 = bench_now();
		if (hsq_context_eval(pre, doc, (size_t)(n_ctx - N_OBS), logits, 0))
			die("prefill");
		double t_prefill = bench_now() - t0;
		if (hsq_snapshot_save(pre, snap, HSQ_MODE_FULL, 3))
			die("save");
		hsq_context_free(pre);

		for (int m = 0; m < n_modes; m++) {
			hsq_snapshot_mode mode = modes[m];
			method_total *T = &tot[m];
			/* perplexity (and recall for hsq) */
			hsq_context *ctx = open_method(model, snap, &cp, doc, n_ctx, mode, logits, NULL);
			if (mode == HSQ_MODE_HSQ && hsq_context_set_recall_probe(ctx, 1))
				die("probe");
			hsq_tier_stats ts;
			hsq_context_tier_stats(ctx, &ts);
			double fast = (double)ts.fp16_kv_bytes / (double)(ts.l1_bytes + ts.l2_bytes);
			double arch = (double)ts.fp16_kv_bytes / (double)(ts.l1_bytes + ts.l2_bytes + ts.l3_bytes);
			/* the logits of the last context token predict cont[0] */
			double doc_nll = 0;
			int counted = 0;
			float *last = malloc(V * sizeof *last);
			memcpy(last, logits, V * sizeof *last);
			for (int i = 0; i < n_cont; i += PPL_CHUNK) {
				int c = n_cont - i < PPL_CHUNK ? n_cont - i : PPL_CHUNK;
				doc_nll += nll(last, (int)V, doc[n_ctx + i]);
				counted++;
				if (hsq_context_eval(ctx, doc + n_ctx + i, (size_t)c, logits, 1))
					die("ppl eval");
				for (int k = 0; k + 1 < c; k++, counted++)
					doc_nll += nll(logits + (size_t)k * V, (int)V, doc[n_ctx + i + k + 1]);
				memcpy(last, logits + (size_t)(c - 1) * V, V * sizeof *last);
			}
			free(last);
			double rec_mean = NAN;
			if (mode == HSQ_MODE_HSQ) {
				double rec[MAX_LAYERS], s = 0;
				int k = 0;
				hsq_context_recall(ctx, rec);
				for (int l = 0; l < mi.n_layer; l++)
					if (!isnan(rec[l])) {
						T->recall[l] += rec[l];
						s += rec[l];
						k++;
					}
				T->n_recall++;
				rec_mean = k ? s / k : NAN;
			}
			hsq_context_free(ctx);
			T->nll += doc_nll;
			T->n_nll += counted;

			/* generation / teacher forcing, one token per step */
			ctx = open_method(model, snap, &cp, doc, n_ctx, mode, logits, NULL);
			int agree = 0, first_div = -1;
			t0 = bench_now();
			for (int i = 0; i < n_gen; i++) {
				int best = argmax(logits, (int)V);
				if (mode == HSQ_MODE_FULL)
					gen[i] = best;
				else if (best == gen[i])
					agree++;
				else if (first_div < 0)
					first_div = i;
				if (hsq_context_eval(ctx, &gen[i], 1, logits, 0))
					die("decode");
			}
			double t_dec = bench_now() - t0;
			hsq_context_free(ctx);
			T->decode_s += t_dec;
			T->decode_n += n_gen;
			if (mode != HSQ_MODE_FULL) {
				T->agree += agree;
				T->n_agree += n_gen;
			}
			T->fast_ratio += mode == HSQ_MODE_FULL ? 1 : fast;
			T->archive_ratio += mode == HSQ_MODE_FULL ? 1 : arch;
			T->n_docs++;
			printf("%-28s %-6s %9.3f %8.3f %8d %9.2f %8.4f %9.1f %9.2f\n", base, hsq_mode_name(mode),
			       exp(doc_nll / counted), mode == HSQ_MODE_FULL ? 1.0 : (double)agree / n_gen, first_div,
			       n_gen / t_dec, rec_mean, mode == HSQ_MODE_FULL ? 1.0 : fast,
			       mode == HSQ_MODE_FULL ? 1.0 : arch);
			fflush(stdout);
		}
		/* snapshot of the hsq tiers: size and load time vs prefill */
		{
			hsq_context *ctx = open_method(model, snap, &cp, doc, n_ctx, HSQ_MODE_HSQ, logits, NULL);
			struct stat s_full = { 0 }, s_hsq = { 0 };
			double t_load_hsq = -1, t_load_full = -1;
			if (hsq_snapshot_save(ctx, snap_hsq, HSQ_MODE_HSQ, 3) == HSQ_OK && stat(snap_hsq, &s_hsq) == 0) {
				hsq_context *l2;
				t0 = bench_now();
				if (hsq_snapshot_load(model, snap_hsq, &cp, &l2) == HSQ_OK) {
					t_load_hsq = bench_now() - t0;
					hsq_context_free(l2);
				}
				unlink(snap_hsq);
			}
			hsq_tier_stats ts;
			hsq_context_tier_stats(ctx, &ts);
			hsq_context_free(ctx);
			stat(snap, &s_full);
			t0 = bench_now();
			hsq_context *l3;
			if (hsq_snapshot_load(model, snap, &cp, &l3) == HSQ_OK) {
				t_load_full = bench_now() - t0;
				hsq_context_free(l3);
			}
			printf("%-28s snapshot: fp16 KV %.1f MiB, hsq file %.1f MiB (%.3fx of fp16), full file %.1f MiB; prefill %.1f s, load hsq %.3f s (%.0fx), load full %.3f s\n",
			       base, ts.fp16_kv_bytes / 1048576.0, s_hsq.st_size / 1048576.0,
			       (double)s_hsq.st_size / (double)ts.fp16_kv_bytes, s_full.st_size / 1048576.0, t_prefill,
			       t_load_hsq, t_load_hsq > 0 ? t_prefill / t_load_hsq : 0.0, t_load_full);
			fflush(stdout);
		}
		unlink(snap);
		hsq_free(doc);
	}
	printf("\n# summary over documents\n");
	double ppl_full = tot[0].n_nll ? exp(tot[0].nll / tot[0].n_nll) : NAN;
	for (int m = 0; m < n_modes; m++) {
		method_total *T = &tot[m];
		if (!T->n_docs)
			continue;
		double ppl = exp(T->nll / T->n_nll);
		printf("%-6s docs %d  ppl %.4f  ratio-to-full %.4f  agreement %s%.4f  decode %.2f tok/s (%.2fx full)  fast-tier %.1fx  fast+archive %.2fx\n",
		       hsq_mode_name(modes[m]), T->n_docs, ppl, ppl / ppl_full, m ? "" : "(ref) ",
		       m ? (double)T->agree / T->n_agree : 1.0, T->decode_n / T->decode_s,
		       (T->decode_n / T->decode_s) / (tot[0].decode_n / tot[0].decode_s), T->fast_ratio / T->n_docs,
		       T->archive_ratio / T->n_docs);
		if (T->n_recall) {
			printf("recall per layer:");
			double s = 0, mn = 1;
			for (int l = 0; l < mi.n_layer; l++) {
				double r = T->recall[l] / T->n_recall;
				printf(" %.3f", r);
				s += r;
				mn = r < mn ? r : mn;
			}
			printf("\nrecall mean %.4f, min layer %.4f\n", s / mi.n_layer, mn);
		}
	}
	free(logits);
	free(gen);
	hsq_model_free(model);
	return 0;
}

/*
 * golden_arch.h - per-row checks shared by the qwen3 and gemma3 golden
 * tests: final-position logits against an fp64 numpy forward (tight) and
 * llama.cpp (bounded by llama.cpp's own distance to numpy), and greedy
 * continuations against numpy token for token up to a near tie (llama.cpp
 * informational: its 8-bit activations and f16 KV resolve near-ties
 * differently).
 *
 * Manifest rows (tests/ref/make_qwen3_golden.py, make_gemma_golden.py),
 * after `off` leading columns (qwen3 has a model column):
 *   logits: name prompt n_tokens tokens n_sel sel_ids logits stats top10 np_logits np_stats np_top10
 *   greedy: name prompt n_tokens tokens n_gen ids gaps np_ids np_gaps
 */
#ifndef HSQ_GOLDEN_ARCH_H
#define HSQ_GOLDEN_ARCH_H

#include "golden_util.h"

/* Of the logit range: fp32 arithmetic over an fp16 KV cache against fp64
 * (the cache's rounding measured up to 3.5e-4 on these prompts, fp32 alone
 * under 1e-6; test_golden.c allows the same); a kernel that quantized
 * activations would be about a logit away. */
#define GA_NP_REL_TOL 1e-3
/* A greedy step whose exact top-2 logits are closer than this may go
 * either way: the fp16 cache moves logits by up to about 1e-2 (above). */
#define GA_TIE_GAP 0.02
#define GA_LLAMA_SLACK 1.5
#define GA_LLAMA_PAD 0.05

static GU_UNUSED void *ga_read(const char *dir, const char *rel, size_t *n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/%s", gu_golden_dir(), dir, rel);
	void *buf = gu_read_range(path, 0, (size_t)-1, n);
	cr_assert_not_null(buf, "cannot read %s: %s", path, strerror(errno));
	return buf;
}

/* Returns the number of failed checks (0 or more) for one logits row. */
static GU_UNUSED int ga_check_logits(hsq_model *m, const char *dir, const gu_row *r, int off, const char *label)
{
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	const char *name = gu_field(r, off + 0);
	hsq_token *ids = NULL;
	size_t n = gu_parse_ids(gu_field(r, off + 3), &ids);
	size_t nb_ids, nb_ref, nb_np;
	int32_t *sel = ga_read(dir, gu_field(r, off + 5), &nb_ids);
	float *ref = ga_read(dir, gu_field(r, off + 6), &nb_ref);
	float *np = ga_read(dir, gu_field(r, off + 9), &nb_np);
	size_t n_sel = nb_ids / 4;
	cr_assert(nb_ref == nb_ids && nb_np == nb_ids, "%s/%s: selection files disagree in size", label, name);
	float *lg = malloc((size_t)info.n_vocab * sizeof *lg), *mine = malloc(n_sel * sizeof *mine);
	hsq_context *ctx = gu_context(m, 4096);
	double t0 = gu_now();
	hsq_status st = hsq_context_eval(ctx, ids, n, lg, 0);
	cr_assert_eq(st, HSQ_OK, "%s/%s: %s", label, name, hsq_last_error());
	for (size_t k = 0; k < n_sel; k++) {
		cr_assert(sel[k] >= 0 && sel[k] < info.n_vocab);
		mine[k] = lg[sel[k]];
	}
	gu_cmp cn = gu_compare(mine, np, n_sel), cl = gu_compare(mine, ref, n_sel), rn = gu_compare(np, ref, n_sel);
	double np_tol = GA_NP_REL_TOL * cn.range, ll_tol = GA_LLAMA_SLACK * rn.max_abs + GA_LLAMA_PAD;
	fprintf(stderr, "  %s/%s (%zu tokens, %.2fs, %zu logits compared): vs numpy max abs %.2e; vs llama.cpp %.4f "
		"(numpy vs llama.cpp %.4f)\n", label, name, n, gu_now() - t0, n_sel, cn.max_abs, cl.max_abs, rn.max_abs);
	int full_argmax = gu_argmax(lg, (size_t)info.n_vocab), fails = 0;
	hsq_token *np_top = NULL;
	gu_parse_ids(gu_field(r, off + 11), &np_top);
	if (!(cn.max_abs <= np_tol) || full_argmax != np_top[0]) {
		fprintf(stderr, "FAIL: %s/%s: vs numpy max abs %.3g > %.3g or argmax %d != %d\n", label, name, cn.max_abs,
			np_tol, full_argmax, np_top[0]);
		fails++;
	}
	if (!(cl.max_abs <= ll_tol)) {
		fprintf(stderr, "FAIL: %s/%s: vs llama.cpp max abs %.4f > %.4f\n", label, name, cl.max_abs, ll_tol);
		fails++;
	}
	free(np_top);
	free(lg);
	free(mine);
	free(sel);
	free(ref);
	free(np);
	free(ids);
	hsq_context_free(ctx);
	return fails;
}

/* Returns 1 if the greedy continuation differs from numpy, else 0. */
static GU_UNUSED int ga_check_greedy(hsq_model *m, const gu_row *r, int off, const char *label)
{
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	const char *name = gu_field(r, off + 0);
	hsq_token *ids = NULL, *ll = NULL, *np = NULL;
	float *ll_gaps = NULL, *np_gaps = NULL;
	size_t n = gu_parse_ids(gu_field(r, off + 3), &ids);
	size_t n_gen = strtoul(gu_field(r, off + 4), NULL, 10);
	size_t n_ll = gu_parse_ids(gu_field(r, off + 5), &ll), n_llg = gu_parse_floats(gu_field(r, off + 6), &ll_gaps);
	size_t n_np = gu_parse_ids(gu_field(r, off + 7), &np), n_npg = gu_parse_floats(gu_field(r, off + 8), &np_gaps);
	cr_assert(n_ll == n_gen && n_np == n_gen, "%s/%s: greedy manifest row malformed", label, name);
	float *lg = malloc((size_t)info.n_vocab * sizeof *lg);
	hsq_token *got = malloc(n_gen * sizeof *got);
	hsq_context *ctx = gu_context(m, 4096);
	hsq_sampler *smp = gu_greedy_sampler();
	cr_assert_eq(hsq_context_eval(ctx, ids, n, lg, 0), HSQ_OK, "%s", hsq_last_error());
	gu_greedy(ctx, smp, lg, info.n_vocab, (int)n_gen, got, NULL);
	long d_np = gu_first_diff(got, n_gen, np, n_gen), d_ll = gu_first_diff(got, n_gen, ll, n_gen);
	int fail = 0;
	if (d_np >= 0) {
		gu_report_divergence(m, "numpy (fp64)", name, got, np, np_gaps, n_npg, d_np);
		if ((size_t)d_np < n_npg && np_gaps[d_np] < GA_TIE_GAP) {
			fprintf(stderr, "  %s/%s: a near tie (reference gap %.4f < %.2f), which the fp16 cache may "
				"resolve either way\n", label, name, np_gaps[d_np], GA_TIE_GAP);
		} else {
			fprintf(stderr, "FAIL: %s/%s: greedy differs from the exact reference\n", label, name);
			fail = 1;
		}
	}
	if (d_ll >= 0)
		gu_report_divergence(m, "llama.cpp (8-bit activations, f16 KV; informational)", name, got, ll, ll_gaps,
				     n_llg, d_ll);
	else
		fprintf(stderr, "  %s/%s: %zu greedy tokens equal to numpy and to llama.cpp\n", label, name, n_gen);
	hsq_sampler_free(smp);
	hsq_context_free(ctx);
	free(lg);
	free(got);
	free(ids);
	free(ll);
	free(np);
	free(ll_gaps);
	free(np_gaps);
	return fail;
}

#endif

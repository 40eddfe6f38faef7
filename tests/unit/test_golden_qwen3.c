/*
 * test_golden_qwen3.c - the qwen3 architecture (per-head QK RMSNorm, NeoX
 * RoPE, tied and untied output, k-quant weights) on the small synthetic
 * models of tests/ref/make_qwen3_gguf.py, against the golden data of
 * tests/ref/make_qwen3_golden.py: numpy_qwen3.py (an independent fp64
 * forward pass) and llama.cpp.
 *
 * Tolerances. hsq computes in fp32 exactly as the model is written, so it
 * must agree with the fp64 numpy reference to float rounding: max |diff|
 * <= 2e-4 of the logit range, and greedy continuations token for token.
 * llama.cpp quantizes activations to 8 bits for quantized weights and keeps
 * an f16 KV cache; its own distance to numpy (recorded per case, 0.14-1.0)
 * bounds how far hsq may be from it: max |diff| <= 1.5 x that + 0.05, and
 * the same argmax. Tokenization (the real Qwen3 vocabulary, which the
 * synthetic models carry) must equal Hugging Face tokenizers exactly:
 * NFC, the Qwen2 split regex, added tokens. The models are generated, not committed: the tests print
 * a SKIP line when build/test-models (or $HSQ_TEST_MODELS_DIR) lacks them.
 */
#include "golden_util.h"

#define NP_REL_TOL 2e-4
#define LLAMA_SLACK 1.5
#define LLAMA_PAD 0.05

static const char *models_dir(void)
{
	const char *d = getenv("HSQ_TEST_MODELS_DIR");
	return d && *d ? d : "build/test-models";
}

/* Loads the synthetic model NAME, or returns NULL after a SKIP line. */
static hsq_model *load_synthetic(const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.gguf", models_dir(), name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "SKIP: %s absent (make test-models writes it with tests/ref/make_qwen3_gguf.py)\n", path);
		return NULL;
	}
	fclose(f);
	hsq_model *m = NULL;
	hsq_status st = hsq_model_load(path, &m);
	cr_assert_eq(st, HSQ_OK, "hsq_model_load(%s): %s: %s", path, hsq_strerror(st), hsq_last_error());
	return m;
}

static void *read_all(const char *rel, size_t *n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/qwen3/%s", gu_golden_dir(), rel);
	void *buf = gu_read_range(path, 0, (size_t)-1, n);
	cr_assert_not_null(buf, "cannot read %s: %s", path, strerror(errno));
	return buf;
}

Test(golden_qwen3, logits)
{
	gu_table t = gu_table_load("qwen3/logits.tsv");
	int n_fail = 0, n_run = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *mname = gu_field(r, 0), *name = gu_field(r, 1);
		hsq_model *m = load_synthetic(mname);
		if (!m)
			continue;
		hsq_model_info info;
		hsq_model_get_info(m, &info);
		hsq_token *ids = NULL;
		size_t n = gu_parse_ids(gu_field(r, 4), &ids);
		/* fields: model name prompt n_tokens tokens n_sel sel_ids logits stats
		 * top10 np_logits np_stats np_top10 */
		size_t nb_ids, nb_ref, nb_np;
		int32_t *sel = read_all(gu_field(r, 6), &nb_ids);
		float *ref = read_all(gu_field(r, 7), &nb_ref);
		float *np = read_all(gu_field(r, 10), &nb_np);
		size_t n_sel = nb_ids / 4;
		cr_assert(nb_ref == nb_ids && nb_np == nb_ids, "%s/%s: selection files disagree in size", mname, name);
		float *lg = malloc((size_t)info.n_vocab * sizeof *lg), *mine = malloc(n_sel * sizeof *mine);
		hsq_context *ctx = gu_context(m, 4096);
		hsq_status st = hsq_context_eval(ctx, ids, n, lg, 0);
		cr_assert_eq(st, HSQ_OK, "%s/%s: %s", mname, name, hsq_last_error());
		for (size_t k = 0; k < n_sel; k++) {
			cr_assert(sel[k] >= 0 && sel[k] < info.n_vocab);
			mine[k] = lg[sel[k]];
		}
		gu_cmp cn = gu_compare(mine, np, n_sel), cl = gu_compare(mine, ref, n_sel);
		gu_cmp rn = gu_compare(np, ref, n_sel);
		double np_tol = NP_REL_TOL * cn.range, ll_tol = LLAMA_SLACK * rn.max_abs + LLAMA_PAD;
		fprintf(stderr, "  %s/%s (%zu tokens, %zu logits compared): vs numpy max abs %.2e; vs llama.cpp %.4f "
			"(numpy vs llama.cpp %.4f)\n", mname, name, n, n_sel, cn.max_abs, cl.max_abs, rn.max_abs);
		int full_argmax = gu_argmax(lg, (size_t)info.n_vocab);
		hsq_token *np_top = NULL;
		gu_parse_ids(gu_field(r, 12), &np_top);
		if (!(cn.max_abs <= np_tol) || full_argmax != np_top[0]) {
			fprintf(stderr, "FAIL: %s/%s: vs numpy max abs %.3g > %.3g or argmax %d != %d\n", mname, name,
				cn.max_abs, np_tol, full_argmax, np_top[0]);
			n_fail++;
		}
		if (!(cl.max_abs <= ll_tol)) {
			fprintf(stderr, "FAIL: %s/%s: vs llama.cpp max abs %.4f > %.4f\n", mname, name, cl.max_abs, ll_tol);
			n_fail++;
		}
		n_run++;
		free(np_top);
		free(lg);
		free(mine);
		free(sel);
		free(ref);
		free(np);
		free(ids);
		hsq_context_free(ctx);
		hsq_model_free(m);
	}
	gu_table_free(&t);
	if (n_run == 0)
		cr_skip_test("no synthetic qwen3 model present");
	cr_assert_eq(n_fail, 0, "%d qwen3 logits checks failed (see FAIL lines)", n_fail);
}

Test(golden_qwen3, greedy)
{
	gu_table t = gu_table_load("qwen3/greedy.tsv");
	int n_fail = 0, n_run = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *mname = gu_field(r, 0), *name = gu_field(r, 1);
		hsq_model *m = load_synthetic(mname);
		if (!m)
			continue;
		hsq_model_info info;
		hsq_model_get_info(m, &info);
		hsq_token *ids = NULL, *ll = NULL, *np = NULL;
		float *ll_gaps = NULL, *np_gaps = NULL;
		size_t n = gu_parse_ids(gu_field(r, 4), &ids);
		size_t n_gen = strtoul(gu_field(r, 5), NULL, 10);
		size_t n_ll = gu_parse_ids(gu_field(r, 6), &ll), n_llg = gu_parse_floats(gu_field(r, 7), &ll_gaps);
		size_t n_np = gu_parse_ids(gu_field(r, 8), &np), n_npg = gu_parse_floats(gu_field(r, 9), &np_gaps);
		cr_assert(n_ll == n_gen && n_np == n_gen, "%s/%s: greedy.tsv rows malformed", mname, name);
		float *lg = malloc((size_t)info.n_vocab * sizeof *lg);
		hsq_token *got = malloc(n_gen * sizeof *got);
		hsq_context *ctx = gu_context(m, 4096);
		hsq_sampler *smp = gu_greedy_sampler();
		cr_assert_eq(hsq_context_eval(ctx, ids, n, lg, 0), HSQ_OK, "%s", hsq_last_error());
		gu_greedy(ctx, smp, lg, info.n_vocab, (int)n_gen, got, NULL);
		long d_np = gu_first_diff(got, n_gen, np, n_gen), d_ll = gu_first_diff(got, n_gen, ll, n_gen);
		if (d_np >= 0) {
			gu_report_divergence(m, "numpy (fp64)", name, got, np, np_gaps, n_npg, d_np);
			fprintf(stderr, "FAIL: %s/%s: greedy differs from the exact reference\n", mname, name);
			n_fail++;
		}
		if (d_ll >= 0)
			gu_report_divergence(m, "llama.cpp (8-bit activations, f16 KV; informational)", name, got, ll,
					     ll_gaps, n_llg, d_ll);
		else
			fprintf(stderr, "  %s/%s: %zu greedy tokens equal to numpy and to llama.cpp\n", mname, name, n_gen);
		n_run++;
		hsq_sampler_free(smp);
		hsq_context_free(ctx);
		free(lg);
		free(got);
		free(ids);
		free(ll);
		free(np);
		free(ll_gaps);
		free(np_gaps);
		hsq_model_free(m);
	}
	gu_table_free(&t);
	if (n_run == 0)
		cr_skip_test("no synthetic qwen3 model present");
	cr_assert_eq(n_fail, 0, "%d qwen3 greedy continuations differ from numpy (see FAIL lines)", n_fail);
}

/* qwen3/tokens.tsv: name source offset length fnv1a64 n_ids ids (Hugging
 * Face tokenizers on the Qwen3 tokenizer.json; no BOS; added tokens on). */
Test(golden_qwen3, tokens)
{
	hsq_model *m = load_synthetic("qwen3-a");
	if (!m)
		cr_skip_test("no synthetic qwen3 model present");
	gu_table t = gu_table_load("qwen3/tokens.tsv");
	int n_fail = 0, n_skip = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *name = gu_field(r, 0), *src = gu_field(r, 1);
		int skipped = 0;
		size_t len = strtoul(gu_field(r, 3), NULL, 10);
		char rel[4096];
		/* sources are relative to the qwen3 folder, or corpora: */
		if (strncmp(src, "corpora:", 8) == 0)
			snprintf(rel, sizeof rel, "%s", src);
		else
			snprintf(rel, sizeof rel, "qwen3/%s", src);
		char *text = gu_load_source(rel, strtol(gu_field(r, 2), NULL, 10), len ? len : (size_t)-1, gu_field(r, 4),
					    &skipped);
		if (skipped) {
			n_skip++;
			continue;
		}
		hsq_token *want = NULL, *got = NULL;
		size_t n_want = gu_parse_ids(gu_field(r, 6), &want), n_got = 0;
		size_t text_len = strlen(text);
		hsq_status st = hsq_tokenize(m, text, text_len, 0, 1, &got, &n_got);
		cr_assert_eq(st, HSQ_OK, "%s: %s", name, hsq_last_error());
		long d = gu_first_diff(got, n_got, want, n_want);
		if (d >= 0) {
			fprintf(stderr, "FAIL: qwen3 tokens %s: first difference at id %ld (%zu vs %zu ids)\n", name, d, n_got,
				n_want);
			n_fail++;
		}
		hsq_free(got);
		free(want);
		free(text);
	}
	if (n_skip)
		fprintf(stderr, "SKIP: %d qwen3 corpus tokenization cases (no ../shared/corpora)\n", n_skip);
	fprintf(stderr, "  qwen3 tokens: %zu cases, %d failed, %d skipped\n", t.n_rows, n_fail, n_skip);
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "%d qwen3 tokenization cases differ from Hugging Face tokenizers", n_fail);
}

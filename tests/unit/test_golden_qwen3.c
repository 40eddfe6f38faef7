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
#include "golden_arch.h"


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

Test(golden_qwen3, logits)
{
	gu_table t = gu_table_load("qwen3/logits.tsv");
	int n_fail = 0, n_run = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		hsq_model *m = load_synthetic(gu_field(&t.rows[i], 0));
		if (!m)
			continue;
		n_fail += ga_check_logits(m, "qwen3", &t.rows[i], 1, gu_field(&t.rows[i], 0));
		n_run++;
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
		hsq_model *m = load_synthetic(gu_field(&t.rows[i], 0));
		if (!m)
			continue;
		n_fail += ga_check_greedy(m, &t.rows[i], 1, gu_field(&t.rows[i], 0));
		n_run++;
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

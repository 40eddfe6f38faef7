/*
 * test_golden.c - libhsq against an independent implementation.
 *
 * The golden data (tests/golden/, made by tests/ref/make_golden.py; formats
 * in tests/ref/README.md) comes from llama.cpp (llama-cpp-python 0.3.36) and
 * from tests/ref/numpy_llama.py, an fp64 numpy forward pass that shares no
 * code with either. Needs $HSQ_TEST_MODEL = SmolLM2-135M-Instruct.Q4_1.gguf
 * (skips visibly without it); corpus tokenization cases need the shared
 * corpora ($HSQ_SHARED/corpora or ../shared/corpora) and skip without them.
 *
 *  tokens   every tokens.tsv case: hsq_tokenize(add_bos 0, parse_special 1)
 *           equals llama.cpp's ids exactly.
 *  logits   final-position logits of each logits.tsv prompt, evaluated from
 *           the reference token ids, against numpy (tight) and llama.cpp.
 *  greedy   32 greedy tokens per greedy.tsv prompt equal llama.cpp's, token
 *           for token (the prompts were chosen so that llama.cpp and the
 *           exact numpy reference agree on all 32 steps).
 *
 * Tolerances (figures from tests/golden/agreement.txt):
 *  - llama.cpp's CPU path quantizes every activation vector to 8 bits before
 *    each matmul with a quantized weight (and keeps K/V in f16). Against an
 *    exact evaluation of the same Q4_1 weights that moves final logits by up
 *    to 1.5 (cosine down to 0.98 over ~40 candidate prompts; 0.60..0.93 and
 *    >= 0.99990 on the four golden prompts). On an all-F32 copy of the model llama.cpp and
 *    numpy agree to 5e-5, so the gap is llama.cpp's approximation, not a
 *    modelling difference. An fp32 implementation therefore cannot be held
 *    closer to llama.cpp than the exact reference itself is: per prompt we
 *    allow max|hsq - llama.cpp| <= LLAMA_ABS_SLACK * max|numpy - llama.cpp|
 *    + LLAMA_ABS_PAD and (1 - cos) <= LLAMA_COS_SLACK * (1 - cos_numpy) +
 *    LLAMA_COS_PAD, i.e. "no further from llama.cpp than exact arithmetic
 *    is, up to 25% / 50%".
 *  - Against numpy (fp64 accumulation, weights dequantized exactly) an fp32
 *    forward pass differs only by rounding: numpy in fp32 vs fp64 differs by
 *    4e-5 on these prompts, llama.cpp on F32 weights by 5e-5, and an f16 KV
 *    cache adds ~1e-2. We require max abs <= NP_REL_TOL * (logit range),
 *    ~0.035 for a range of ~35, and cosine >= NP_MIN_COS. An implementation
 *    that quantizes activations like llama.cpp would fail this bound by
 *    design (it would be ~1 logit away).
 */
#include "golden_util.h"

#define NP_REL_TOL 1e-3
#define NP_MIN_COS 0.99999
#define LLAMA_ABS_SLACK 1.25
#define LLAMA_ABS_PAD 0.05
#define LLAMA_COS_SLACK 1.5
#define LLAMA_COS_PAD 1e-5
/* When a logits case has no numpy file: the worst llama.cpp-vs-exact
 * figures seen over 40 prompts, with margin. */
#define LLAMA_ABS_FALLBACK 2.0
#define LLAMA_MIN_COS_FALLBACK 0.97

/* tokens.tsv: name source offset length fnv1a64 n_ids ids */
static void run_tokens(int corpus)
{
	hsq_model *m = NULL;
	GU_LOAD_MODEL_OR_SKIP(m, corpus ? "golden tokens (corpus)" : "golden tokens (edge cases)");
	gu_table t = gu_table_load("tokens.tsv");
	int n_run = 0, n_fail = 0, n_skip = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *name = gu_field(r, 0), *src = gu_field(r, 1);
		int is_corpus = strncmp(src, "corpora:", 8) == 0;
		if (is_corpus != corpus)
			continue;
		long off = strtol(gu_field(r, 2), NULL, 10);
		size_t len = (size_t)strtoull(gu_field(r, 3), NULL, 10);
		int skipped = 0;
		char *text = gu_load_source(src, off, len, gu_field(r, 4), &skipped);
		if (skipped) {
			fprintf(stderr, "SKIP: tokens %s: shared corpora not found "
				"(set HSQ_SHARED or provide ../shared/corpora)\n", name);
			n_skip++;
			continue;
		}
		hsq_token *want = NULL;
		size_t n_want = gu_parse_ids(gu_field(r, 6), &want);
		cr_assert_eq(n_want, (size_t)strtoul(gu_field(r, 5), NULL, 10), "tokens.tsv %s: id count", name);
		hsq_token *got = NULL;
		size_t n_got = 0;
		double t0 = gu_now();
		hsq_status st = hsq_tokenize(m, text, len, 0, 1, &got, &n_got);
		double dt = gu_now() - t0;
		if (st == HSQ_ERR_EMPTY_INPUT && len == 0) {
			/* an empty text may be refused as empty input; llama.cpp gives [] */
			st = HSQ_OK;
			got = NULL;
			n_got = 0;
		}
		n_run++;
		if (st != HSQ_OK) {
			fprintf(stderr, "FAIL: tokens %s: hsq_tokenize: %s: %s\n", name, hsq_strerror(st),
				hsq_last_error());
			n_fail++;
		} else {
			long d = gu_first_diff(got, n_got, want, n_want);
			if (d >= 0) {
				char a[96] = "(end)", b[96] = "(end)";
				if ((size_t)d < n_got)
					gu_fmt_token(m, got[d], a, sizeof a);
				if ((size_t)d < n_want)
					gu_fmt_token(m, want[d], b, sizeof b);
				fprintf(stderr, "FAIL: tokens %s: %zu ids, llama.cpp %zu; first difference at "
					"id %ld: hsq %s, llama.cpp %s\n", name, n_got, n_want, d, a, b);
				n_fail++;
			} else if (corpus) {
				fprintf(stderr, "  tokens %s: %zu bytes -> %zu ids, equal (%.2fs)\n", name,
					len, n_got, dt);
			}
		}
		hsq_free(got);
		free(want);
		free(text);
	}
	fprintf(stderr, "  tokens (%s): %d cases, %d failed, %d skipped\n",
		corpus ? "corpus" : "edge cases", n_run, n_fail, n_skip);
	gu_table_free(&t);
	hsq_model_free(m);
	if (n_run == 0 && n_skip > 0)
		cr_skip_test("shared corpora not found");
	cr_assert_eq(n_fail, 0, "%d of %d tokenization cases differ from llama.cpp", n_fail, n_run);
}

Test(golden, tokens_edge_cases)
{
	run_tokens(0);
}

Test(golden, tokens_corpus)
{
	run_tokens(1);
}

/* logits.tsv: name prompt n_tokens tokens top10 logits np_logits np_top10 */
Test(golden, logits)
{
	hsq_model *m = NULL;
	GU_LOAD_MODEL_OR_SKIP(m, "golden logits");
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	gu_table t = gu_table_load("logits.tsv");
	float *lg = malloc((size_t)info.n_vocab * sizeof *lg);
	cr_assert_not_null(lg);
	int n_fail = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *name = gu_field(r, 0);
		hsq_token *ids = NULL;
		size_t n = gu_parse_ids(gu_field(r, 3), &ids);
		cr_assert_eq(n, (size_t)strtoul(gu_field(r, 2), NULL, 10), "logits.tsv %s: token count", name);
		float *ref = gu_load_f32(gu_field(r, 5), (size_t)info.n_vocab);
		float *np = gu_load_f32(gu_field(r, 6), (size_t)info.n_vocab);
		hsq_context *ctx = gu_context(m, 2048);
		double t0 = gu_now();
		hsq_status st = hsq_context_eval(ctx, ids, n, lg, 0);
		cr_assert_eq(st, HSQ_OK, "logits %s: hsq_context_eval(%zu tokens): %s: %s", name, n,
			     hsq_strerror(st), hsq_last_error());
		double dt = gu_now() - t0;
		gu_cmp cl = gu_compare(lg, ref, (size_t)info.n_vocab);
		double abs_tol = LLAMA_ABS_FALLBACK, cos_min = LLAMA_MIN_COS_FALLBACK;
		fprintf(stderr, "  logits %s (%zu tokens, %.2fs): vs llama.cpp max abs %.4f cosine %.7f",
			name, n, dt, cl.max_abs, cl.cosine);
		int fail = 0;
		if (np) {
			gu_cmp cn = gu_compare(lg, np, (size_t)info.n_vocab);
			gu_cmp rn = gu_compare(np, ref, (size_t)info.n_vocab); /* the exact reference's own distance */
			abs_tol = LLAMA_ABS_SLACK * rn.max_abs + LLAMA_ABS_PAD;
			cos_min = 1.0 - (LLAMA_COS_SLACK * (1.0 - rn.cosine) + LLAMA_COS_PAD);
			double np_tol = NP_REL_TOL * cn.range;
			fprintf(stderr, "; vs numpy max abs %.2e cosine %.9f (numpy vs llama.cpp: %.4f, %.7f)\n",
				cn.max_abs, cn.cosine, rn.max_abs, rn.cosine);
			if (!(cn.max_abs <= np_tol) || !(cn.cosine >= NP_MIN_COS)) {
				fprintf(stderr, "FAIL: logits %s: vs numpy max abs %.4g > %.4g (%.0e x range %.2f) "
					"or cosine %.9f < %.5f\n", name, cn.max_abs, np_tol, NP_REL_TOL, cn.range,
					cn.cosine, NP_MIN_COS);
				fail = 1;
			}
			if (cn.argmax_a != cn.argmax_b) {
				fprintf(stderr, "FAIL: logits %s: argmax %d, numpy %d\n", name, cn.argmax_a,
					cn.argmax_b);
				fail = 1;
			}
		} else {
			fprintf(stderr, " (no numpy logits)\n");
		}
		if (!(cl.max_abs <= abs_tol) || !(cl.cosine >= cos_min)) {
			fprintf(stderr, "FAIL: logits %s: vs llama.cpp max abs %.4f (limit %.4f), cosine %.7f "
				"(limit %.7f)\n", name, cl.max_abs, abs_tol, cl.cosine, cos_min);
			fail = 1;
		}
		if (cl.argmax_a != cl.argmax_b) {
			fprintf(stderr, "FAIL: logits %s: argmax %d, llama.cpp %d\n", name, cl.argmax_a,
				cl.argmax_b);
			fail = 1;
		}
		hsq_token *top10 = NULL;
		size_t n10 = gu_parse_ids(gu_field(r, 4), &top10);
		cr_assert_gt(n10, 0);
		cr_assert_eq(top10[0], cl.argmax_b, "logits.tsv %s: top10 does not match the logits file", name);
		n_fail += fail;
		free(top10);
		hsq_context_free(ctx);
		free(ref);
		free(np);
		free(ids);
	}
	free(lg);
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "%d logits cases out of tolerance (see the FAIL lines above)", n_fail);
}

/* greedy.tsv: name prompt n_tokens tokens n_gen ids gaps np_ids np_gaps */
Test(golden, greedy)
{
	hsq_model *m = NULL;
	GU_LOAD_MODEL_OR_SKIP(m, "golden greedy");
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	gu_table t = gu_table_load("greedy.tsv");
	float *lg = malloc((size_t)info.n_vocab * sizeof *lg);
	cr_assert_not_null(lg);
	hsq_sampler *smp = gu_greedy_sampler();
	int n_fail = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		const gu_row *r = &t.rows[i];
		const char *name = gu_field(r, 0);
		hsq_token *ids = NULL, *want = NULL, *npw = NULL;
		size_t n = gu_parse_ids(gu_field(r, 3), &ids);
		size_t n_gen = gu_parse_ids(gu_field(r, 5), &want);
		cr_assert_eq(n_gen, (size_t)strtoul(gu_field(r, 4), NULL, 10), "greedy.tsv %s: n_gen", name);
		float *gaps = NULL, *npgaps = NULL;
		size_t n_gaps = gu_parse_floats(gu_field(r, 6), &gaps);
		size_t n_np = strcmp(gu_field(r, 7), "-") ? gu_parse_ids(gu_field(r, 7), &npw) : 0;
		size_t n_npgaps = gu_parse_floats(gu_field(r, 8), &npgaps);

		hsq_context *ctx = gu_context(m, 2048);
		double t0 = gu_now();
		hsq_status st = hsq_context_eval(ctx, ids, n, lg, 0);
		cr_assert_eq(st, HSQ_OK, "greedy %s: hsq_context_eval(%zu tokens): %s: %s", name, n,
			     hsq_strerror(st), hsq_last_error());
		hsq_token *got = malloc(n_gen * sizeof *got);
		cr_assert_not_null(got);
		gu_greedy(ctx, smp, lg, info.n_vocab, (int)n_gen, got, NULL);
		double dt = gu_now() - t0;
		long d = gu_first_diff(got, n_gen, want, n_gen);
		if (d >= 0) {
			gu_report_divergence(m, "llama.cpp", name, got, want, gaps, n_gaps, d);
			if (npw) {
				long dn = gu_first_diff(got, n_gen, npw, n_np);
				if (dn >= 0)
					gu_report_divergence(m, "numpy", name, got, npw, npgaps, n_npgaps, dn);
				else
					fprintf(stderr, "  %s: hsq equals the exact numpy reference on all %zu steps\n",
						name, n_gen);
			}
			fprintf(stderr, "FAIL: greedy %s: %zu prompt tokens, differs from llama.cpp at step %ld\n",
				name, n, d);
			n_fail++;
		} else {
			double mg = INFINITY;
			for (size_t k = 0; k < n_gaps; k++)
				mg = gaps[k] < mg ? gaps[k] : mg;
			fprintf(stderr, "  greedy %s: %zu prompt tokens, %zu generated, equal to llama.cpp "
				"(smallest reference gap %.3f) (%.2fs)\n", name, n, n_gen, mg, dt);
		}
		hsq_context_free(ctx);
		free(got);
		free(ids);
		free(want);
		free(npw);
		free(gaps);
		free(npgaps);
	}
	hsq_sampler_free(smp);
	free(lg);
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "%d greedy continuations differ from llama.cpp (see above)", n_fail);
}

/* The API promises batch-invariant arithmetic: the logits of a token do not
 * depend on how the tokens were split into hsq_context_eval calls. Checked
 * bitwise on the longest logits prompt (one call vs. pieces of 1, 7 and the
 * rest), with all_logits rows compared too. */
Test(golden, batch_invariance)
{
	hsq_model *m = NULL;
	GU_LOAD_MODEL_OR_SKIP(m, "golden batch invariance");
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	gu_table t = gu_table_load("logits.tsv");
	hsq_token *ids = NULL;
	size_t n = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		hsq_token *v = NULL;
		size_t k = gu_parse_ids(gu_field(&t.rows[i], 3), &v);
		if (k > n) {
			free(ids);
			ids = v;
			n = k;
		} else {
			free(v);
		}
	}
	cr_assert_gt(n, 9);
	size_t V = (size_t)info.n_vocab;
	float *all = malloc(n * V * sizeof *all), *part = malloc(n * V * sizeof *part);
	cr_assert(all && part);
	hsq_context *a = gu_context(m, 2048), *b = gu_context(m, 2048);
	hsq_status st = hsq_context_eval(a, ids, n, all, 1);
	cr_assert_eq(st, HSQ_OK, "eval %zu tokens, all logits: %s: %s", n, hsq_strerror(st), hsq_last_error());
	size_t cuts[] = {0, 1, 8, n};
	for (int c = 0; c < 3; c++) {
		st = hsq_context_eval(b, ids + cuts[c], cuts[c + 1] - cuts[c], part + cuts[c] * V, 1);
		cr_assert_eq(st, HSQ_OK, "eval piece %d: %s: %s", c, hsq_strerror(st), hsq_last_error());
	}
	cr_assert_eq(hsq_context_n_past(b), (int)n);
	size_t bad = 0;
	for (size_t r = 0; r < n; r++)
		if (memcmp(all + r * V, part + r * V, V * sizeof *all) != 0) {
			if (!bad)
				fprintf(stderr, "FAIL: batch invariance: logits row %zu differs (max abs %.3g)\n",
					r, gu_compare(all + r * V, part + r * V, V).max_abs);
			bad++;
		}
	fprintf(stderr, "  batch invariance: %zu tokens as 1 call vs 3 calls: %zu of %zu logits rows differ\n",
		n, bad, n);
	cr_assert_eq(bad, 0, "logits depend on how the tokens were split into calls");
	hsq_context_free(a);
	hsq_context_free(b);
	free(all);
	free(part);
	free(ids);
	gu_table_free(&t);
	hsq_model_free(m);
}

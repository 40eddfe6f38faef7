/*
 * test_golden_gemma3.c - the gemma3 architecture on the real gemma-3-270m
 * (Q4_K_M: Q4_K, Q5_0, Q6_K, Q8_0 weights; QK norm, post norms, GeGLU,
 * embedding scale, sliding window 512 on 5 of 6 layers with local RoPE
 * base 10K) against tests/ref/make_gemma_golden.py: numpy_gemma3.py (fp64)
 * and llama.cpp, with the tolerances of golden_arch.h. The "sliding"
 * prompt (1427 tokens) crosses the 512-token window. Needs $HSQ_TEST_GEMMA
 * (make gemma); prints a SKIP line without it.
 */
#include "golden_arch.h"

static hsq_model *load_gemma(void)
{
	const char *p = getenv("HSQ_TEST_GEMMA");
	FILE *f = p && *p ? fopen(p, "rb") : NULL;
	if (!f) {
		fprintf(stderr, "SKIP: gemma3 golden tests (HSQ_TEST_GEMMA not set or missing; run 'make gemma')\n");
		return NULL;
	}
	fclose(f);
	hsq_model *m = NULL;
	hsq_status st = hsq_model_load(p, &m);
	cr_assert_eq(st, HSQ_OK, "hsq_model_load(%s): %s", p, hsq_last_error());
	return m;
}

Test(golden_gemma3, logits)
{
	hsq_model *m = load_gemma();
	if (!m)
		cr_skip_test("no gemma model");
	gu_table t = gu_table_load("gemma3/logits.tsv");
	int n_fail = 0;
	for (size_t i = 0; i < t.n_rows; i++)
		n_fail += ga_check_logits(m, "gemma3", &t.rows[i], 0, "gemma3");
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "%d gemma3 logits checks failed (see FAIL lines)", n_fail);
}

Test(golden_gemma3, greedy)
{
	hsq_model *m = load_gemma();
	if (!m)
		cr_skip_test("no gemma model");
	gu_table t = gu_table_load("gemma3/greedy.tsv");
	int n_fail = 0;
	for (size_t i = 0; i < t.n_rows; i++)
		n_fail += ga_check_greedy(m, &t.rows[i], 0, "gemma3");
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "%d gemma3 greedy continuations differ from numpy (see FAIL lines)", n_fail);
}

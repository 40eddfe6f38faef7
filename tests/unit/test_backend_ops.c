/*
 * test_backend_ops.c - the tier operations go through the backend table
 * (ASan/UBSan build).
 *
 * A second backend implements the tiered attention or the router's group
 * scores by changing those entries of its hsq_backend_ops, nothing in the
 * context code. Here a backend that wraps the CPU entries (counting the
 * calls) must decode bit for bit as the CPU backend does, with every layer
 * of every step attended through attend_tiered; and one whose
 * score_groups ranks the groups the other way round must fetch other
 * groups, which shows the router reads its scores from the table.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "backend/backend.h"
#include "context/context.h"
#include "hsq.h"

#define N_TOK 300
#define N_STEPS 6
#define BUDGET 32

static hsq_model *model;

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
}

static void teardown(void)
{
	hsq_model_free(model);
	model = NULL;
}

TestSuite(backend_ops, .init = setup, .fini = teardown);

static const hsq_backend_ops *cpu_ops;
static int n_attend, n_score;

static void counting_attend(hsq_backend *be, struct hsq_tiers *t, int layer, const float *q, const float *k,
			    const float *v, const int *pos, int n, const uint16_t *full_k, const uint16_t *full_v, int full_cap,
			    float *out)
{
	n_attend++;
	cpu_ops->attend_tiered(be, t, layer, q, k, v, pos, n, full_k, full_v, full_cap, out);
}

static void counting_score(hsq_backend *be, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
			   float *table, float *key_score, float *score)
{
	n_score++;
	cpu_ops->score_groups(be, t, h, q, G, table, key_score, score);
}

static void reversed_score(hsq_backend *be, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
			   float *table, float *key_score, float *score)
{
	cpu_ops->score_groups(be, t, h, q, G, table, key_score, score);
	for (int g = 0; g < h->n_group; g++)
		score[g] = -score[g];
}

/* Groups fetched over the run, summed into a fingerprint per layer. */
static unsigned long fetched_sum;
static void trace(void *user, int pos, int layer, int head, const int *groups, int n_groups)
{
	for (int i = 0; i < n_groups; i++)
		fetched_sum = fetched_sum * 31 + (unsigned long)(groups[i] + 1) * (unsigned long)(layer + 1);
}

/* Prefills N_TOK tokens, compresses to hsq with budget BUDGET, installs
 * ops (NULL: the CPU backend as it is), then decodes N_STEPS greedy steps;
 * logits [N_STEPS][n_vocab]. */
static void run(const hsq_backend_ops *ops, float *logits)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 2;
	hsq_context *ctx;
	cr_assert_eq(hsq_context_new(model, &cp, &ctx), HSQ_OK, "%s", hsq_last_error());
	hsq_token toks[N_TOK];
	for (int i = 0; i < N_TOK; i++)
		toks[i] = (hsq_token)(100 + (i * 7919) % 20000);
	cr_assert_eq(hsq_context_eval(ctx, toks, N_TOK, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(ctx, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_set_budget(ctx, BUDGET), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_context_set_trace(ctx, trace, NULL);
	cpu_ops = ctx->backend->ops;
	if (ops)
		ctx->backend->ops = ops;
	int V = model->info.n_vocab;
	hsq_token next = toks[N_TOK - 1];
	for (int s = 0; s < N_STEPS; s++) {
		cr_assert_eq(hsq_context_eval(ctx, &next, 1, logits + (size_t)s * V, 0), HSQ_OK, "%s", hsq_last_error());
		int best = 0;
		for (int i = 1; i < V; i++)
			best = logits[(size_t)s * V + i] > logits[(size_t)s * V + best] ? i : best;
		next = best;
	}
	ctx->backend->ops = cpu_ops;
	hsq_context_free(ctx);
}

Test(backend_ops, a_wrapping_backend_decodes_bit_for_bit_through_the_table)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	int V = model->info.n_vocab;
	float *want = malloc((size_t)N_STEPS * V * sizeof *want), *got = malloc((size_t)N_STEPS * V * sizeof *got);
	cr_assert(want && got);
	fetched_sum = 0;
	run(NULL, want);
	unsigned long want_fetched = fetched_sum;

	static hsq_backend_ops wrapped;
	hsq_context_params cp = hsq_context_default_params();
	hsq_context *probe;
	cp.n_ctx = 16;
	cr_assert_eq(hsq_context_new(model, &cp, &probe), HSQ_OK);
	wrapped = *probe->backend->ops;
	hsq_context_free(probe);
	wrapped.attend_tiered = counting_attend;
	wrapped.score_groups = counting_score;
	n_attend = n_score = 0;
	fetched_sum = 0;
	run(&wrapped, got);
	cr_expect_eq(memcmp(want, got, (size_t)N_STEPS * V * sizeof *got), 0,
		     "logits through the wrapped table differ from the CPU backend's");
	cr_expect_eq(fetched_sum, want_fetched, "the wrapped table fetched other groups");
	cr_expect_eq(n_attend, N_STEPS * model->info.n_layer, "attend_tiered ran %d times, not once per layer and step",
		     n_attend);
	cr_expect_gt(n_score, 0, "the router never scored through score_groups");

	wrapped.attend_tiered = cpu_ops->attend_tiered;
	wrapped.score_groups = reversed_score;
	fetched_sum = 0;
	run(&wrapped, got);
	cr_expect_neq(fetched_sum, want_fetched, "scores ranked the other way round fetched the same groups");
	free(want);
	free(got);
}

/*
 * test_tier_bounds.c - the router bounds of L2 groups (ASan/UBSan build).
 *
 * An hsq context of 300 tokens of the default model: every key of every
 * group, decoded from its L3 code and rotated to its position as a fetch
 * does, must lie inside the group's stored per-channel interval (so the
 * router's score is an upper bound of q.k over the group), and the bounds
 * must be tight enough to rank (an interval no wider than the group's keys
 * plus two grid steps). Snapshots do not store the bounds; a loaded
 * snapshot derives from L3 exactly the records the prefill built.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "context.h"
#include "hsq.h"
#include "le.h"
#include "tiers.h"

#define N_TOK 300

static hsq_model *model;
static hsq_context *ctx;

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 1;
	cr_assert_eq(hsq_context_new(model, &cp, &ctx), HSQ_OK);
	hsq_token toks[N_TOK];
	for (int i = 0; i < N_TOK; i++)
		toks[i] = (hsq_token)(100 + (i * 7919) % 20000);
	cr_assert_eq(hsq_context_eval(ctx, toks, N_TOK, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(ctx, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
}

static void teardown(void)
{
	hsq_context_free(ctx);
	hsq_model_free(model);
	ctx = NULL;
	model = NULL;
}

TestSuite(tier_bounds, .init = setup, .fini = teardown);

Test(tier_bounds, contain_every_key_and_stay_tight)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	struct hsq_tiers *t = ctx->tiers;
	int hd = t->head_dim, checked = 0;
	float k[HSQ_CODEC_MAX_DIM], v[HSQ_CODEC_MAX_DIM], mn[HSQ_CODEC_MAX_DIM], mx[HSQ_CODEC_MAX_DIM];
	for (int l = 0; l < t->n_layer; l++) {
		const rope_table *r = &t->rope[t->layers[l].rope_table];
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			for (int c = 0; c < h->n_group; c++) {
				const float *lo = h->bnd_lo + (size_t)c * hd, *hi = h->bnd_hi + (size_t)c * hd;
				float step = get_f32(h->bnd_code + (size_t)c * tier_bound_bytes(hd) + 4);
				for (int d = 0; d < hd; d++) {
					mn[d] = INFINITY;
					mx[d] = -INFINITY;
				}
				for (int i = h->g_start[c]; i < h->g_start[c + 1]; i++) {
					tiers_decode_token(t, h, h->l3_code + (size_t)i * tier_code4_pair(t), k, v);
					tiers_rope_rows(t, r, k, &h->l3_pos[i], 1, +1);
					for (int d = 0; d < hd; d++) {
						cr_assert(k[d] >= lo[d] && k[d] <= hi[d],
							  "layer %d head %d group %d channel %d: key %g outside [%g, %g]", l, g,
							  c, d, k[d], lo[d], hi[d]);
						mn[d] = k[d] < mn[d] ? k[d] : mn[d];
						mx[d] = k[d] > mx[d] ? k[d] : mx[d];
					}
				}
				for (int d = 0; d < hd; d++)
					cr_assert(mn[d] - lo[d] <= 2.0f * step && hi[d] - mx[d] <= 2.0f * step,
						  "layer %d head %d group %d channel %d: [%g, %g] is loose around [%g, %g] (step %g)",
						  l, g, c, d, lo[d], hi[d], mn[d], mx[d], step);
				checked++;
			}
		}
	}
	cr_assert_gt(checked, 100, "only %d groups", checked);
	fprintf(stderr, "tier bounds: %d groups checked\n", checked);
}

/* The bound records of every group of two tier sets are equal. */
static void assert_same_bounds(const struct hsq_tiers *a, const struct hsq_tiers *b)
{
	size_t cb = tier_bound_bytes(a->head_dim);
	for (int l = 0; l < a->n_layer; l++)
		for (int g = 0; g < a->n_head_kv; g++) {
			const tier_head *x = &a->layers[l].heads[g], *y = &b->layers[l].heads[g];
			cr_assert_eq(x->n_group, y->n_group);
			cr_assert(!memcmp(x->bnd_code, y->bnd_code, (size_t)x->n_group * cb),
				  "layer %d head %d: bound records differ", l, g);
		}
}

Test(tier_bounds, are_the_same_after_a_snapshot)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	/* snapshots do not store the bounds: a reader derives them from L3,
	 * and must get the records the prefill built */
	char path[64];
	snprintf(path, sizeof path, "/tmp/hsq-bounds-%d.hsq", (int)getpid());
	cr_assert_eq(hsq_snapshot_save(ctx, path, HSQ_MODE_HSQ, 1), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 1;
	hsq_context *back;
	cr_assert_eq(hsq_snapshot_load(model, path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	unlink(path);
	assert_same_bounds(ctx->tiers, back->tiers);
	hsq_context_free(back);
}

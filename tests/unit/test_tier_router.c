/*
 * test_tier_router.c - the router's key codes (ASan/UBSan build).
 *
 * An hsq context of 300 tokens of the default model. Every archived key,
 * decoded from L3 and rotated to its position as a fetch does, must carry
 * the code of its nearest centroid in each subspace and a radius no
 * smaller than its distance to what the codes reconstruct; a group's score
 * must be the best q . k~ + |q| r over its keys (checked in double
 * precision) and never below the true q . k of any of its keys; the scores
 * must rank groups by their best key better than the key summaries do;
 * snapshots do not store the codes, so a loaded snapshot must derive the
 * same centroids, codes and radii bit for bit; the groups that online
 * compression adds are coded with the fitted centroids; and a head that
 * had no groups at compression is fitted on its first online ones.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "context/context.h"
#include "hsq.h"
#include "common/vec_f32.h"
#include "common/vec_f16.h"
#include "kv/tiers.h"

#define N_TOK 300

static hsq_model *model;
static hsq_context *ctx;

static hsq_context_params params(void)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 1;
	return cp;
}

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = params();
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

TestSuite(tier_router, .init = setup, .fini = teardown);

/* Key of L3 token i of head h after RoPE, as a fetch decodes it (without
 * residuals). */
static void l3_key(const struct hsq_tiers *t, int l, const tier_head *h, int i, float *k)
{
	float v[HSQ_CODEC_MAX_DIM];
	tiers_decode_token(t, h, h->l3_code + (size_t)i * tier_code4_pair(t), k, v);
	tiers_rope_rows(t, &t->rope[t->layers[l].rope_table], k, &h->l3_pos[i], 1, +1);
}

static int code_of(const struct hsq_tiers *t, const tier_head *h, int i, int s)
{
	uint8_t b = h->pq_code[tier_pq_nibble(t->head_dim, i, s)];
	return i % 2 ? b >> 4 : b & 15;
}

static double sub_dist(const float *cent, const float *x)
{
	double d = 0.0;
	for (int j = 0; j < TIER_PQ_SUB; j++)
		d += ((double)x[j] - cent[j]) * ((double)x[j] - cent[j]);
	return d;
}

/* The squared distance as every build of nearest() computes it in float
 * (tiers_pq.c): each square rounded, added left to right from 0. */
static float sub_dist_f(const float *cent, const float *x)
{
	float d = 0.0f;
	for (int j = 0; j < TIER_PQ_SUB; j++) {
		float e = x[j] - cent[j];
		volatile float sq = e * e; /* rounded: not contracted into an FMA */
		d += sq;
	}
	return d;
}

/* L3 key i of head h (layer l) carries the index of its nearest centroid
 * in every subspace (exactly the first smallest float distance, and within
 * 1e-5 of the smallest in double), and a radius no smaller than its distance to what
 * the indices reconstruct, and at most one radius unit larger. */
static void assert_key_coded(const struct hsq_tiers *t, int l, const tier_head *h, int i)
{
	int m = tier_pq_subspaces(t->head_dim);
	float k[HSQ_CODEC_MAX_DIM];
	double e2 = 0.0;
	l3_key(t, l, h, i, k);
	for (int s = 0; s < m; s++) {
		const float *cb = h->pq_centroid + (size_t)s * TIER_PQ_K * TIER_PQ_SUB;
		double mine = sub_dist(cb + code_of(t, h, i, s) * TIER_PQ_SUB, k + s * TIER_PQ_SUB);
		e2 += mine;
		int first = 0;
		float best = INFINITY;
		for (int c = 0; c < TIER_PQ_K; c++) {
			cr_assert(mine <= sub_dist(cb + c * TIER_PQ_SUB, k + s * TIER_PQ_SUB) * (1 + 1e-5) + 1e-9,
				  "layer %d token %d subspace %d: code %d is not the nearest (%d is)", l, i, s,
				  code_of(t, h, i, s), c);
			float d = sub_dist_f(cb + c * TIER_PQ_SUB, k + s * TIER_PQ_SUB);
			if (d < best) {
				best = d;
				first = c;
			}
		}
		cr_assert_eq(code_of(t, h, i, s), first,
			     "layer %d token %d subspace %d: code %d, but the first smallest float distance is %d's",
			     l, i, s, code_of(t, h, i, s), first);
	}
	double r = (double)h->pq_step * h->pq_radius[i];
	cr_assert(r >= sqrt(e2) * (1 - 1e-6), "layer %d token %d: radius %g below the error %g", l, i, r, sqrt(e2));
	cr_assert(r <= sqrt(e2) + h->pq_step * 1.001, "layer %d token %d: radius %g loose around %g", l, i, r, sqrt(e2));
}

Test(tier_router, every_key_carries_its_nearest_centroids)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	struct hsq_tiers *t = ctx->tiers;
	int heads = 0;
	long keys = 0;
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			if (h->n_group == 0)
				continue;
			cr_assert_not_null(h->pq_centroid, "layer %d head %d has groups but no centroids", l, g);
			heads++;
			for (int i = 0; i < h->n_l3; i++, keys++)
				assert_key_coded(t, l, h, i);
		}
	cr_assert_eq(heads, t->n_layer * t->n_head_kv, "only %d heads have groups", heads);
	fprintf(stderr, "tier router: %ld keys of %d heads coded\n", keys, heads);
}

/* A query for head h of layer l: G query heads, each an archived key of
 * the head (decoded) plus a little of another, so that they are real key
 * directions of this head. */
static void make_query(const struct hsq_tiers *t, int l, const tier_head *h, int seed, int G, float *q)
{
	int hd = t->head_dim;
	float a[HSQ_CODEC_MAX_DIM], b[HSQ_CODEC_MAX_DIM];
	for (int hq = 0; hq < G; hq++) {
		int i = (seed * 37 + hq * 101) % h->n_l3, j = (seed * 53 + hq * 17 + 5) % h->n_l3;
		l3_key(t, l, h, i, a);
		l3_key(t, l, h, j, b);
		for (int d = 0; d < hd; d++)
			q[hq * hd + d] = a[d] + 0.25f * b[d];
	}
}

Test(tier_router, group_scores_bound_every_key_and_are_the_best_reconstructed_key)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	struct hsq_tiers *t = ctx->tiers;
	int hd = t->head_dim, m = tier_pq_subspaces(hd), G = t->n_head / t->n_head_kv, checked = 0;
	float key[HSQ_CODEC_MAX_DIM];
	float *q = malloc((size_t)G * hd * sizeof *q), *table = malloc((size_t)G * hd * TIER_PQ_K * sizeof *table);
	float *keys = malloc((N_TOK + TIER_PQ_BLOCK) * sizeof *keys); /* n_l3 rounded to whole blocks */
	for (int l = 0; l < t->n_layer; l += 7)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			if (h->n_group == 0)
				continue;
			float *score = malloc((size_t)h->n_group * sizeof *score);
			make_query(t, l, h, l + g, G, q);
			tiers_pq_group_scores(t, h, q, G, table, keys, score);
			for (int k = 0; k < h->n_group; k++, checked++) {
				double best = -INFINITY, truth = -INFINITY;
				for (int i = h->g_start[k]; i < h->g_start[k + 1]; i++)
					for (int hq = 0; hq < G; hq++) {
						double s = 0.0, qn = 0.0, exact = 0.0;
						l3_key(t, l, h, i, key);
						for (int d = 0; d < hd; d++) {
							qn += (double)q[hq * hd + d] * q[hq * hd + d];
							exact += (double)q[hq * hd + d] * key[d];
						}
						truth = exact > truth ? exact : truth;
						for (int sub = 0; sub < m; sub++) {
							const float *c = h->pq_centroid +
									 ((size_t)sub * TIER_PQ_K + code_of(t, h, i, sub)) * TIER_PQ_SUB;
							for (int j = 0; j < TIER_PQ_SUB; j++)
								s += (double)q[hq * hd + sub * TIER_PQ_SUB + j] * c[j];
						}
						s += sqrt(qn) * h->pq_step * h->pq_radius[i];
						best = s > best ? s : best;
					}
				cr_assert(fabs(score[k] - best) <= 1e-4 * (1.0 + fabs(best)),
					  "layer %d head %d group %d: score %.7g, best reconstructed key + slack %.7g", l,
					  g, k, score[k], best);
				cr_assert(score[k] >= truth - 1e-4 * (1.0 + fabs(truth)),
					  "layer %d head %d group %d: score %.7g below the group's best q.k %.7g", l, g, k,
					  score[k], truth);
			}
			free(score);
		}
	free(q);
	free(table);
	free(keys);
	cr_assert_gt(checked, 100, "only %d groups", checked);
}

/* Over many queries: how often the router's top group by key codes, and
 * by key summary, is the group holding the key with the largest exact
 * q . k. The codes exist to find that group; the summaries, means of 8 or
 * 16 keys, often do not. */
Test(tier_router, codes_find_the_group_of_the_best_key)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	struct hsq_tiers *t = ctx->tiers;
	int hd = t->head_dim, G = t->n_head / t->n_head_kv, tries = 0, by_code = 0, by_summary = 0;
	float *q = malloc((size_t)G * hd * sizeof *q), *table = malloc((size_t)G * hd * TIER_PQ_K * sizeof *table);
	float *keys = malloc((N_TOK + TIER_PQ_BLOCK) * sizeof *keys); /* n_l3 rounded to whole blocks */
	float k[HSQ_CODEC_MAX_DIM];
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			if (h->n_group == 0)
				continue;
			float *score = malloc((size_t)h->n_group * sizeof *score);
			for (int seed = 0; seed < 4; seed++, tries++) {
				make_query(t, l, h, 10 * seed + l, G, q);
				tiers_pq_group_scores(t, h, q, G, table, keys, score);
				int truth = 0, code_top = 0, sum_top = 0;
				double best = -INFINITY, best_sum = -INFINITY;
				for (int c = 0; c < h->n_group; c++) {
					for (int i = h->g_start[c]; i < h->g_start[c + 1]; i++) {
						l3_key(t, l, h, i, k);
						for (int hq = 0; hq < G; hq++) {
							double s = dot_f32(q + hq * hd, k, hd);
							if (s > best) {
								best = s;
								truth = c;
							}
						}
					}
					for (int hq = 0; hq < G; hq++) {
						float sk[HSQ_CODEC_MAX_DIM];
						f16_row_to_f32(sk, h->sum_k + (size_t)c * hd, hd);
						double s = dot_f32(q + hq * hd, sk, hd);
						if (s > best_sum) {
							best_sum = s;
							sum_top = c;
						}
					}
					code_top = score[c] > score[code_top] ? c : code_top;
				}
				by_code += code_top == truth;
				by_summary += sum_top == truth;
			}
			free(score);
		}
	free(q);
	free(table);
	free(keys);
	fprintf(stderr, "tier router: the best key's group ranked first by its codes in %d of %d queries, by the summaries in %d\n",
		by_code, tries, by_summary);
	cr_assert_geq(by_code * 5, tries * 3, "codes found the best key's group in only %d of %d queries", by_code,
		      tries);
	cr_assert_gt(by_code, by_summary, "codes (%d) no better than summaries (%d) of %d", by_code, by_summary, tries);
}

Test(tier_router, a_loaded_snapshot_derives_the_same_codes)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	char path[64];
	snprintf(path, sizeof path, "/tmp/hsq-router-%d.hsq", (int)getpid());
	cr_assert_eq(hsq_snapshot_save(ctx, path, HSQ_MODE_HSQ, 1), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = params();
	hsq_context *back;
	cr_assert_eq(hsq_snapshot_load(model, path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	unlink(path);
	const struct hsq_tiers *a = ctx->tiers, *b = back->tiers;
	int hd = a->head_dim;
	for (int l = 0; l < a->n_layer; l++)
		for (int g = 0; g < a->n_head_kv; g++) {
			const tier_head *x = &a->layers[l].heads[g], *y = &b->layers[l].heads[g];
			cr_assert_eq(x->n_l3, y->n_l3);
			cr_assert(!memcmp(x->pq_centroid, y->pq_centroid, tier_pq_centroid_bytes(hd)),
				  "layer %d head %d: centroids differ after a snapshot", l, g);
			cr_assert(!memcmp(x->pq_code, y->pq_code, tier_pq_bytes(hd, x->n_l3)),
				  "layer %d head %d: codes differ after a snapshot", l, g);
			cr_assert(!memcmp(x->pq_radius, y->pq_radius, (size_t)x->n_l3) && x->pq_step == y->pq_step,
				  "layer %d head %d: radii differ after a snapshot", l, g);
		}
	hsq_context_free(back);
}

Test(tier_router, online_groups_are_coded_with_the_fitted_centroids)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	struct hsq_tiers *t = ctx->tiers;
	int hd = t->head_dim;
	const tier_head *h0 = &t->layers[3].heads[1];
	int before = h0->n_l3;
	float *cent = malloc(tier_pq_centroid_bytes(hd));
	memcpy(cent, h0->pq_centroid, tier_pq_centroid_bytes(hd));
	hsq_token toks[48];
	for (int i = 0; i < 48; i++)
		toks[i] = (hsq_token)(300 + i * 13);
	cr_assert_eq(hsq_context_eval(ctx, toks, 48, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	const tier_head *h = &t->layers[3].heads[1];
	cr_assert_gt(h->n_l3, before, "the tail was not compressed into new groups");
	cr_assert(!memcmp(cent, h->pq_centroid, tier_pq_centroid_bytes(hd)), "the centroids moved");
	for (int i = before; i < h->n_l3; i++)
		assert_key_coded(t, 3, h, i);
	free(cent);
}

Test(tier_router, a_head_grouped_only_online_is_fitted_then)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set");
	/* 20 tokens fit in the sinks and the window: no groups at
	 * compression, so no centroids; the first online groups fit them */
	hsq_context_params cp = params();
	hsq_context *c;
	cr_assert_eq(hsq_context_new(model, &cp, &c), HSQ_OK, "%s", hsq_last_error());
	hsq_token toks[80];
	for (int i = 0; i < 80; i++)
		toks[i] = (hsq_token)(500 + i * 31);
	cr_assert_eq(hsq_context_eval(c, toks, 20, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	tp.obs_window = 8;
	cr_assert_eq(hsq_context_compress(c, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	const struct hsq_tiers *t = c->tiers;
	cr_assert_eq(t->layers[0].heads[0].n_group, 0, "the short context has groups already");
	cr_assert_null(t->layers[0].heads[0].pq_centroid);
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	size_t V = (size_t)mi.n_vocab;
	float *logits = malloc(V * sizeof *logits);
	for (int i = 20; i < 80; i++) /* one token at a time: routed steps after the groups appear */
		cr_assert_eq(hsq_context_eval(c, toks + i, 1, logits, 0), HSQ_OK, "%s", hsq_last_error());
	for (size_t v = 0; v < V; v++)
		cr_assert(isfinite(logits[v]), "logit %zu is %g", v, logits[v]);
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			cr_assert_gt(h->n_group, 0, "layer %d head %d: no online groups", l, g);
			cr_assert_not_null(h->pq_centroid, "layer %d head %d: online groups but no centroids", l, g);
			for (int i = 0; i < h->n_l3; i++)
				assert_key_coded(t, l, h, i);
		}
	free(logits);
	hsq_context_free(c);
}

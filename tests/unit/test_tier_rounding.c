/*
 * test_tier_rounding.c - query-weighted rounding of the 4-bit key codes
 * (hsq_tier_params.key_rounding; ASan/UBSan build).
 *
 * The default model reads 300 tokens of ordinary text, which is compressed
 * in quant mode (every token in L1) twice: with the default rounding
 * (query) and with nearest rounding. Checked against the cache the context
 * held before compression and the observation queries it kept:
 *   - the value codes are the same bytes either way (only keys are rounded
 *     by the queries);
 *   - over the model, the error the observation queries see in their
 *     attention logits, sum over queries and keys of (q . R_p e)^2, is
 *     clearly smaller with query rounding, while the keys' plain squared
 *     error grows only a little;
 *   - each context reports the rounding it was built with, a snapshot keeps
 *     it (format 1.5, tiers field key_rounding), and a context that has no
 *     observation queries (loaded from a full snapshot) falls back to the
 *     nearest levels, byte for byte, and says so.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "context/context.h"
#include "hsq.h"
#include "tier_probe.h"
#include "kv/tiers.h"

#define N_TOK 300

static const char text[] =
	"The lighthouse keeper wrote the same three lines in his log every evening: the time he lit the lamp, the "
	"state of the sea, and the ships he had seen pass. Over forty years the log filled eleven volumes, and when "
	"the keeper retired the harbour board found in them a record of the coast that no one else had kept. The "
	"storms were there, with the hour the wind turned and the hour it dropped; the winters when the bay froze "
	"and the supply boat could not come; the summer the herring did not arrive and the summer they came in such "
	"numbers that the boats could not hold them. There were ships that passed every week for twenty years and "
	"then never again, and there were strangers that passed once, at night, with no lights, and were written "
	"down with a question mark. His successor, a young woman from the town, read all eleven volumes in her "
	"first winter on the rock. She kept the three lines, and added a fourth: what the keeper before her had "
	"written on the same evening, forty years earlier, so that each page held two evenings of the same sea.";

static hsq_model *model;
static hsq_context *by_query, *by_nearest;
static float *full_k;  /* [n_layer][N_TOK][n_head_kv * head_dim], K after RoPE, before compression */
static float *obs_q;   /* [n_layer][obs][n_head * head_dim]: the observation queries */
static int n_tok, n_obs;
static char full_path[64], tier_path[64];

static hsq_context_params params(void)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 1;
	return cp;
}

static hsq_context *prefill(void)
{
	return tier_probe_prefill(model, text, params().n_ctx, 200, N_TOK, &n_tok);
}

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	hsq_tier_params tp = hsq_tier_default_params();
	cr_assert_eq(tp.key_rounding, HSQ_KEY_ROUNDING_QUERY, "query rounding is the default");

	by_query = prefill();
	size_t plane = (size_t)n_tok * mi.n_head_kv * mi.head_dim, qw = (size_t)mi.n_head * mi.head_dim;
	n_obs = tp.obs_window;
	full_k = malloc((size_t)mi.n_layer * plane * sizeof *full_k);
	obs_q = malloc((size_t)mi.n_layer * n_obs * qw * sizeof *obs_q);
	cr_assert(full_k && obs_q);
	for (int l = 0; l < mi.n_layer; l++) {
		context_kv_read(by_query, l, 0, 0, n_tok, full_k + (size_t)l * plane);
		for (int o = 0; o < n_obs; o++) {
			int pos = n_tok - n_obs + o;
			memcpy(obs_q + ((size_t)l * n_obs + o) * qw,
			       by_query->obs_q + ((size_t)l * HSQ_OBS_MAX + (size_t)(pos % HSQ_OBS_MAX)) * qw,
			       qw * sizeof *obs_q);
		}
	}
	snprintf(full_path, sizeof full_path, "/tmp/hsq-rounding-full-%d.hsq", (int)getpid());
	snprintf(tier_path, sizeof tier_path, "/tmp/hsq-rounding-quant-%d.hsq", (int)getpid());
	cr_assert_eq(hsq_snapshot_save(by_query, full_path, HSQ_MODE_FULL, 1), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_compress(by_query, HSQ_MODE_QUANT, &tp), HSQ_OK, "%s", hsq_last_error());

	by_nearest = prefill();
	tp.key_rounding = HSQ_KEY_ROUNDING_NEAREST;
	cr_assert_eq(hsq_context_compress(by_nearest, HSQ_MODE_QUANT, &tp), HSQ_OK, "%s", hsq_last_error());
}

static void teardown(void)
{
	hsq_context_free(by_query);
	hsq_context_free(by_nearest);
	hsq_model_free(model);
	free(full_k);
	free(obs_q);
	unlink(full_path);
	unlink(tier_path);
	by_query = by_nearest = NULL;
	model = NULL;
	full_k = obs_q = NULL;
}

TestSuite(tier_rounding, .init = setup, .fini = teardown);

Test(tier_rounding, values_alone_are_untouched)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *a = by_query->tiers, *b = by_nearest->tiers;
	size_t pair = tier_code4_pair(a);
	int keys_differ = 0;
	for (int l = 0; l < a->n_layer; l++)
		for (int g = 0; g < a->n_head_kv; g++) {
			const tier_head *x = &a->layers[l].heads[g], *y = &b->layers[l].heads[g];
			cr_assert_eq(x->n_l1, y->n_l1);
			for (int i = 0; i < x->n_l1; i++) {
				const uint8_t *cx = x->l1_code + (size_t)i * pair, *cy = y->l1_code + (size_t)i * pair;
				cr_assert_eq(memcmp(cx + a->code4, cy + a->code4, a->code4), 0,
					     "layer %d head %d token %d: the value codes differ", l, g, i);
				keys_differ += memcmp(cx, cy, a->code4) != 0;
			}
		}
	cr_assert_gt(keys_differ, 0, "query rounding changed no key code");
}

/* Sum over the observation queries of the head's query heads and the keys
 * up to each query of (q . R_p (k^ - k))^2, and sum of |k^ - k|^2. */
static void key_errors(const struct hsq_tiers *t, double *seen, double *plain)
{
	int hd = t->head_dim, H = t->n_head_kv, G = t->n_head / H;
	size_t qw = (size_t)t->n_head * hd;
	float k[HSQ_CODEC_MAX_DIM], dk[HSQ_CODEC_MAX_DIM], dv[HSQ_CODEC_MAX_DIM], e[HSQ_CODEC_MAX_DIM];
	*seen = *plain = 0.0;
	for (int l = 0; l < t->n_layer; l++) {
		const rope_table *R = &t->rope[t->layers[l].rope_table];
		for (int g = 0; g < H; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			for (int i = 0; i < h->n_l1; i++) {
				int32_t p = h->l1_pos[i];
				tier_probe_row(t, full_k, n_tok, l, g, p, 1, k);
				tiers_decode_token(t, h, h->l1_code + (size_t)i * tier_code4_pair(t), dk, dv);
				for (int d = 0; d < hd; d++)
					e[d] = dk[d] - k[d];
				*plain += tier_probe_sq_dist(dk, k, hd);
				tiers_rope_rows(t, R, e, &p, 1, 1);
				for (int o = 0; o < n_obs; o++) {
					if (p > n_tok - n_obs + o)
						continue;
					for (int hq = g * G; hq < (g + 1) * G; hq++) {
						const float *q = obs_q + ((size_t)l * n_obs + o) * qw + (size_t)hq * hd;
						double s = 0.0;
						for (int d = 0; d < hd; d++)
							s += (double)q[d] * e[d];
						*seen += s * s;
					}
				}
			}
		}
	}
}

Test(tier_rounding, the_queries_see_less_error)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	double seen_q, plain_q, seen_n, plain_n;
	key_errors(by_query->tiers, &seen_q, &plain_q);
	key_errors(by_nearest->tiers, &seen_n, &plain_n);
	double seen_ratio = sqrt(seen_q / seen_n), plain_ratio = sqrt(plain_q / plain_n);
	printf("tier rounding: logit error the observation queries see %.3fx of nearest's, key error %.3fx\n",
	       seen_ratio, plain_ratio);
	cr_expect_lt(seen_ratio, 0.8, "query rounding: the queries see %.3fx the nearest levels' error", seen_ratio);
	cr_expect_lt(plain_ratio, 1.3, "query rounding: the keys' own error grows %.3fx", plain_ratio);
	cr_expect_gt(plain_ratio, 1.0, "nearest rounding has the least squared error");
}

Test(tier_rounding, reported_kept_and_refused_without_queries)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	cr_assert_eq(hsq_context_tier_params(by_query)->key_rounding, HSQ_KEY_ROUNDING_QUERY);
	cr_assert_eq(hsq_context_tier_params(by_nearest)->key_rounding, HSQ_KEY_ROUNDING_NEAREST);
	cr_assert_str_eq(hsq_key_rounding_name(HSQ_KEY_ROUNDING_QUERY), "query");
	cr_assert_str_eq(hsq_key_rounding_name(HSQ_KEY_ROUNDING_NEAREST), "nearest");

	hsq_context_params cp = params();
	hsq_context *back = NULL;
	cr_assert_eq(hsq_snapshot_save(by_query, tier_path, HSQ_MODE_QUANT, 1), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_load(model, tier_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_tier_params(back)->key_rounding, HSQ_KEY_ROUNDING_QUERY, "the snapshot keeps it");
	hsq_context_free(back);

	/* loaded from a full snapshot: no observation queries, so the nearest
	 * levels, the same bytes as asked for */
	back = NULL;
	cr_assert_eq(hsq_snapshot_load(model, full_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	cr_assert_eq(hsq_context_compress(back, HSQ_MODE_QUANT, &tp), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_tier_params(back)->key_rounding, HSQ_KEY_ROUNDING_NEAREST,
		     "without queries the keys are rounded to the nearest levels, and the context says so");
	const struct hsq_tiers *a = back->tiers, *b = by_nearest->tiers;
	for (int l = 0; l < a->n_layer; l++)
		for (int g = 0; g < a->n_head_kv; g++) {
			const tier_head *x = &a->layers[l].heads[g], *y = &b->layers[l].heads[g];
			cr_assert_eq(x->n_l1, y->n_l1);
			cr_assert_eq(memcmp(x->l1_code, y->l1_code, (size_t)x->n_l1 * tier_code4_pair(a)), 0,
				     "layer %d head %d", l, g);
		}
	hsq_context_free(back);

	tp.key_rounding = (hsq_key_rounding)7;
	hsq_context *fresh = prefill();
	cr_assert_eq(hsq_context_compress(fresh, HSQ_MODE_QUANT, &tp), HSQ_ERR_INVALID_ARG);
	cr_assert(strstr(hsq_last_error(), "key rounding 7"), "%s", hsq_last_error());
	hsq_context_free(fresh);
}

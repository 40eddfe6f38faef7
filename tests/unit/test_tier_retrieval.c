/*
 * test_tier_retrieval.c - retrieval heads (ASan/UBSan build).
 *
 * The default model reads 150 random tokens twice (300 tokens), so its
 * induction heads, which attend from a repeated token to the token that
 * followed its first occurrence, show up in the observation window: the
 * compression must score them high. Then: the default picks the top one
 * in six heads; a retrieval head fetches every group while the others keep to
 * the budget, and nothing is fetched at budget 0; a snapshot stores the
 * scores (section router.heads) and a loaded one picks the same heads; a
 * file without the section (format 1.1) has no retrieval heads; and
 * impossible scores are refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "context/context.h"
#include "hsq.h"
#include "snapshot_image.h"
#include "kv/tiers.h"

#define N_HALF 150
#define N_TOK (2 * N_HALF)

static hsq_model *model;
static hsq_context *ctx;
static char snap_path[64];

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
	uint64_t s = 7;
	for (int i = 0; i < N_HALF; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		toks[i] = toks[N_HALF + i] = (hsq_token)(1000 + (s >> 33) % 20000);
	}
	cr_assert_eq(hsq_context_eval(ctx, toks, N_TOK, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(ctx, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	snprintf(snap_path, sizeof snap_path, "/tmp/hsq-retrieval-%d.hsq", (int)getpid());
}

static void teardown(void)
{
	hsq_context_free(ctx);
	hsq_model_free(model);
	unlink(snap_path);
	ctx = NULL;
	model = NULL;
}

TestSuite(tier_retrieval, .init = setup, .fini = teardown);

static const tier_head *head_of(const hsq_context *c, int i)
{
	const struct hsq_tiers *t = c->tiers;
	return &t->layers[i / t->n_head_kv].heads[i % t->n_head_kv];
}

/* Index of the head with the k-th highest score (ties: the earlier). */
static int kth_best(const hsq_context *c, int k)
{
	int n = c->tiers->n_layer * c->tiers->n_head_kv, best = -1;
	for (int r = 0; r <= k; r++) {
		int prev = best;
		best = -1;
		for (int i = 0; i < n; i++) {
			float v = head_of(c, i)->induction;
			if (prev >= 0) {
				float pv = head_of(c, prev)->induction;
				if (v > pv || (v == pv && i <= prev))
					continue;
			}
			if (best < 0 || v > head_of(c, best)->induction)
				best = i;
		}
	}
	return best;
}

Test(tier_retrieval, induction_heads_score_high_and_are_picked)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = ctx->tiers;
	int n = t->n_layer * t->n_head_kv, n_high = 0;
	float top = 0.0f;
	for (int i = 0; i < n; i++) {
		float v = head_of(ctx, i)->induction;
		cr_assert(v >= 0.0f && v <= 1.0f, "head %d: induction %g outside 0..1", i, (double)v);
		n_high += v > 0.3f;
		top = v > top ? v : top;
	}
	fprintf(stderr, "retrieval: top induction %.3f, %d of %d heads above 0.3\n", (double)top, n_high, n);
	/* a repeated random sequence is what induction heads exist for: some
	 * head must put most of its attention on the copy targets */
	cr_assert_gt(top, 0.5f, "no head attends to the repeated sequence's copy targets (top %g)", (double)top);
	cr_assert_lt(n_high, n / 2, "induction should be a property of a few heads, not %d of %d", n_high, n);

	int want = hsq_default_retrieval_heads(n);
	cr_assert_eq(want, (n + 5) / 6);
	cr_assert_eq(hsq_context_retrieval_heads(ctx), want);
	for (int k = 0; k < want; k++)
		cr_assert(head_of(ctx, kth_best(ctx, k))->retrieval, "the %d-th best head is not a retrieval head", k);
	cr_assert(!head_of(ctx, kth_best(ctx, want))->retrieval);

	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, 2), HSQ_OK);
	cr_assert_eq(hsq_context_retrieval_heads(ctx), 2);
	cr_assert(head_of(ctx, kth_best(ctx, 0))->retrieval && head_of(ctx, kth_best(ctx, 1))->retrieval);
	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, 0), HSQ_OK);
	cr_assert_eq(hsq_context_retrieval_heads(ctx), 0);
	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, 100000), HSQ_OK);
	int positive = 0;
	for (int i = 0; i < n; i++)
		positive += head_of(ctx, i)->induction > 0.0f;
	cr_assert_eq(hsq_context_retrieval_heads(ctx), positive, "only heads with a score above 0 are picked");
	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, -2), HSQ_ERR_INVALID_ARG);
	cr_assert_not_null(strstr(hsq_last_error(), "retrieval heads -2"), "%s", hsq_last_error());
}

typedef struct fetch_count {
	int n_head_kv;
	int groups[64 * 16]; /* [layer * n_head_kv + head] groups fetched, summed */
	int calls;
} fetch_count;

static void count_fetches(void *user, int pos, int layer, int head, const int *groups, int n_groups)
{
	(void)pos;
	(void)groups;
	fetch_count *fc = user;
	fc->groups[layer * fc->n_head_kv + head] += n_groups;
	fc->calls++;
}

Test(tier_retrieval, retrieval_heads_fetch_every_group_unless_budget_zero)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = ctx->tiers;
	int n = t->n_layer * t->n_head_kv;
	cr_assert_leq(n, 64 * 16);
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	float *logits = malloc(sizeof(float) * (size_t)mi.n_vocab);
	static fetch_count fc;
	memset(&fc, 0, sizeof fc);
	fc.n_head_kv = t->n_head_kv;
	hsq_context_set_trace(ctx, count_fetches, &fc);
	cr_assert_eq(hsq_context_set_budget(ctx, 16), HSQ_OK);
	cr_assert_eq(hsq_context_set_retrieval_heads(ctx, 3), HSQ_OK);
	hsq_token tok = 1234;
	cr_assert_eq(hsq_context_eval(ctx, &tok, 1, logits, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(fc.calls, n, "one trace call per layer and head");
	for (int i = 0; i < n; i++) {
		const tier_head *h = head_of(ctx, i);
		if (h->retrieval)
			cr_assert_eq(fc.groups[i], h->n_group, "retrieval head %d fetched %d of %d groups", i, fc.groups[i],
				     h->n_group);
		else
			cr_assert_leq(fc.groups[i], 2, "head %d fetched %d groups under a budget of 16 tokens", i,
				      fc.groups[i]);
	}
	for (int k = 0; k < 3; k++)
		cr_assert(head_of(ctx, kth_best(ctx, k))->retrieval);

	memset(fc.groups, 0, sizeof fc.groups);
	cr_assert_eq(hsq_context_set_budget(ctx, 0), HSQ_OK);
	tok = 4321;
	cr_assert_eq(hsq_context_eval(ctx, &tok, 1, logits, 0), HSQ_OK, "%s", hsq_last_error());
	for (int i = 0; i < n; i++)
		cr_assert_eq(fc.groups[i], 0, "head %d fetched at budget 0", i);
	free(logits);
}

static hsq_status load_bytes(const uint8_t *b, size_t size, hsq_context **out)
{
	char path[80];
	snprintf(path, sizeof path, "%s.mod", snap_path);
	hsq_context_params cp = params();
	return snap_image_load(model, b, size, path, &cp, out);
}

Test(tier_retrieval, snapshots_keep_the_scores)
{
	if (!ctx)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = ctx->tiers;
	int n = t->n_layer * t->n_head_kv;
	cr_assert_eq(hsq_snapshot_save(ctx, snap_path, HSQ_MODE_HSQ, 3), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = params();
	hsq_context *back = NULL;
	cr_assert_eq(hsq_snapshot_load(model, snap_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	for (int i = 0; i < n; i++) {
		cr_assert_eq(memcmp(&head_of(back, i)->induction, &head_of(ctx, i)->induction, sizeof(float)), 0,
			     "head %d: score %g loaded as %g", i, (double)head_of(ctx, i)->induction,
			     (double)head_of(back, i)->induction);
		cr_assert_eq(head_of(back, i)->retrieval, head_of(ctx, i)->retrieval, "head %d", i);
	}
	cr_assert_eq(hsq_context_retrieval_heads(back), hsq_default_retrieval_heads(n));
	hsq_context_free(back);

	hsq_tier_map *map;
	cr_assert_eq(hsq_snapshot_read_tiers(snap_path, &map), HSQ_OK, "%s", hsq_last_error());
	for (int i = 0; i < n; i++) {
		cr_assert_eq(map->heads[i].induction, head_of(ctx, i)->induction, "map head %d", i);
		/* ctx has the default count: the map marks the heads it picked */
		cr_assert_eq(map->heads[i].retrieval, head_of(ctx, i)->retrieval, "map head %d", i);
	}
	hsq_tier_map_free(map);

	size_t size;
	uint8_t *file = snap_image_read(snap_path, &size), *bad = file ? malloc(size) : NULL;
	cr_assert_not_null(bad, "%s: cannot read", snap_path);
	cr_assert_eq(get_u16(file + SNAP_H_VERSION_MINOR), SNAP_VERSION_MINOR);
	uint8_t *e = snap_image_entry(file, "router.heads");
	cr_assert_not_null(e, "an hsq snapshot has a router.heads section");
	cr_assert_eq(get_u32(e + SNAP_E_FLAGS) & SNAP_SECTION_REQUIRED, 0, "router.heads is optional");

	/* a 1.1 file: the section absent (renamed to a private one, which
	 * readers skip); it loads, with no retrieval heads */
	memcpy(bad, file, size);
	uint8_t *be = snap_image_entry(bad, "router.heads");
	memset(be, 0, 16);
	memcpy(be, "x.unused", 8);
	put_u16(bad + SNAP_H_VERSION_MINOR, 1);
	snap_image_reseal_header(bad);
	cr_assert_eq(load_bytes(bad, size, &back), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_retrieval_heads(back), 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(head_of(back, i)->induction, 0.0f);
	hsq_context_free(back);

	/* impossible values: refused, naming the section */
	struct {
		const char *what;
		size_t off;
		uint32_t value;
	} cases[] = {
		{ "layers unlike the snapshot's", 0, 31 },
		{ "heads unlike the snapshot's", 4, 9 },
		{ "a NaN score", 8, 0x7fc00000u },
		{ "a score above 1", 12, 0x40000000u },
		{ "a negative score", 16, 0xbf800000u },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		memcpy(bad, file, size);
		cr_assert(snap_image_put_u32(bad, "router.heads", cases[c].off, cases[c].value), "%s", cases[c].what);
		hsq_status st = load_bytes(bad, size, &back);
		cr_assert_eq(st, HSQ_ERR_FORMAT, "%s: got %s (%s)", cases[c].what, hsq_strerror(st), hsq_last_error());
		cr_assert_null(back);
		cr_assert_not_null(strstr(hsq_last_error(), "router.heads"), "%s: %s", cases[c].what, hsq_last_error());
	}
	free(bad);
	free(file);
}

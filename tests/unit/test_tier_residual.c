/*
 * test_tier_residual.c - residual key codes of the retrieval heads and
 * section keys.residual (ASan/UBSan build).
 *
 * The default model reads the sample document (about 550 tokens), which is
 * compressed in hsq mode with a short window so that most tokens are
 * grouped. Checked against the full cache the context held before:
 *   - the heads with residual codes are exactly the retrieval heads marked
 *     at compression, and there are some;
 *   - with its residual a key decodes many times closer to the original
 *     than from its 4-bit code alone (L1 and L3); values do not change;
 *   - moving the marks (hsq_context_set_retrieval_heads) leaves the
 *     precision where it is; hsq_context_use_residual_keys turns the
 *     residuals off (keys from the 4-bit codes alone) and on again;
 *   - hsq_tier_params.residual_heads picks the heads: none, every global
 *     head, or the n with the highest induction scores;
 *   - a snapshot stores them (format 1.4, section keys.residual without
 *     the required bit) and a loaded one decodes every L1 row and residual
 *     identically; counts that disagree with a head's tokens, unknown flag
 *     bits and misaligned blocks are refused, naming the section.
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
#include "tier_probe.h"
#include "common/vec_f16.h"
#include "kv/tiers.h"
#include "snapshot/tiers_io.h"

static hsq_model *model;
static hsq_context *hsq;
static hsq_token *toks; /* the document's first n_tok tokens */
static float *full_k; /* [n_layer][n_tok][n_head_kv * head_dim] K after RoPE, before compression */
static int n_tok;
static char snap_path[64];

static hsq_context_params params(void)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 1024;
	cp.n_threads = 1;
	return cp;
}

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
	size_t len = 0, n = 0;
	char *text = NULL;
	FILE *f = fopen("share/sample-document.txt", "rb");
	cr_assert_not_null(f, "share/sample-document.txt: run the tests from the repository root");
	text = malloc(1 << 16);
	cr_assert_not_null(text);
	len = fread(text, 1, (1 << 16) - 1, f);
	fclose(f);
	cr_assert_eq(hsq_tokenize(model, text, len, -1, 0, &toks, &n), HSQ_OK, "%s", hsq_last_error());
	free(text);
	n_tok = (int)(n < 900 ? n : 900);
	cr_assert_geq(n_tok, 400, "the sample document is %zu tokens", n);
	hsq_context_params cp = params();
	cr_assert_eq(hsq_context_new(model, &cp, &hsq), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_eval(hsq, toks, (size_t)n_tok, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	size_t plane = (size_t)n_tok * mi.n_head_kv * mi.head_dim;
	full_k = malloc((size_t)mi.n_layer * plane * sizeof *full_k);
	cr_assert_not_null(full_k);
	for (int l = 0; l < mi.n_layer; l++)
		context_kv_read(hsq, l, 0, 0, n_tok, full_k + (size_t)l * plane);
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(hsq, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	snprintf(snap_path, sizeof snap_path, "/tmp/hsq-residual-%d.hsq", (int)getpid());
}

static void teardown(void)
{
	hsq_context_free(hsq);
	hsq_model_free(model);
	hsq_free(toks);
	free(full_k);
	unlink(snap_path);
	hsq = NULL;
	model = NULL;
	toks = NULL;
	full_k = NULL;
}

TestSuite(tier_residual, .init = setup, .fini = teardown);

Test(tier_residual, the_retrieval_heads_have_residuals)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int n_res = 0;
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			cr_assert_eq(h->has_res, h->retrieval, "layer %d head %d: residuals %d, retrieval %d", l, g, h->has_res,
				     h->retrieval);
			n_res += h->has_res;
		}
	cr_assert_gt(n_res, 0, "the default marks retrieval heads on this document");
	cr_assert_eq(n_res, hsq_context_retrieval_heads(hsq));
}

/* Squared key errors of one head's tokens (L1 or L3) with and without
 * residuals, added to *with and *without; values must decode alike. */
static void head_errors(const struct hsq_tiers *t, int l, int g, int n, const int32_t *pos, const uint8_t *codes,
			const uint8_t *res, double *with, double *without)
{
	const tier_head *h = &t->layers[l].heads[g];
	int hd = t->head_dim;
	float k[HSQ_CODEC_MAX_DIM], a[HSQ_CODEC_MAX_DIM], b[HSQ_CODEC_MAX_DIM], va[HSQ_CODEC_MAX_DIM],
		vb[HSQ_CODEC_MAX_DIM];
	for (int i = 0; i < n; i++) {
		tier_probe_row(t, full_k, n_tok, l, g, pos[i], 1, k);
		const uint8_t *code = codes + (size_t)i * tier_code4_pair(t);
		tiers_decode_token_res(t, h, code, res + (size_t)i * t->code4, a, va);
		tiers_decode_token(t, h, code, b, vb);
		cr_assert_eq(memcmp(va, vb, (size_t)hd * sizeof *va), 0, "layer %d head %d token %d: values differ", l, g,
			     pos[i]);
		cr_assert_eq(res[(size_t)i * t->code4 + 1] & TIER_CODE_CENTRED, 0, "a residual code is never centred");
		*with += tier_probe_sq_dist(a, k, hd);
		*without += tier_probe_sq_dist(b, k, hd);
	}
}

Test(tier_residual, residual_keys_are_many_times_closer)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	double w1 = 0, wo1 = 0, w3 = 0, wo3 = 0;
	int n3 = 0;
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			if (!h->has_res)
				continue;
			head_errors(t, l, g, h->n_l1, h->l1_pos, h->l1_code, h->l1_res, &w1, &wo1);
			head_errors(t, l, g, h->n_l3, h->l3_pos, h->l3_code, h->l3_res, &w3, &wo3);
			n3 += h->n_l3;
		}
	printf("tier residual: key coding error %.1fx smaller in L1, %.1fx in L3 (%d archived tokens)\n", wo1 / w1,
	       wo3 / w3, n3);
	cr_assert_gt(n3, 0, "the residual heads have archived tokens");
	/* a 4-bit code leaves ~0.9% of a key's energy; a second one on the
	 * error leaves ~0.9% of that */
	cr_assert_lt(w1, wo1 / 20, "L1: %g with residuals against %g without", w1, wo1);
	cr_assert_lt(w3, wo3 / 20, "L3: %g with residuals against %g without", w3, wo3);
}

/* Every L1 key of head h as the working copy holds it equals its decoding
 * with (res 1) or without (res 0) the residual, rotated to its position. */
static void l1_keys_are(const struct hsq_tiers *t, int l, const tier_head *h, int res)
{
	int hd = t->head_dim;
	float k[HSQ_CODEC_MAX_DIM], v[HSQ_CODEC_MAX_DIM];
	for (int i = 0; i < h->n_l1; i++) {
		const uint8_t *code = h->l1_code + (size_t)i * tier_code4_pair(t);
		if (res) {
			tiers_decode_token_res(t, h, code, h->l1_res + (size_t)i * t->code4, k, v);
		} else {
			tiers_decode_token(t, h, code, k, v);
		}
		tiers_rope_rows(t, &t->rope[t->layers[l].rope_table], k, &h->l1_pos[i], 1, +1);
		uint16_t kh[HSQ_CODEC_MAX_DIM];
		f16_row_from_f32(kh, k, hd);
		cr_assert_eq(memcmp(kh, h->l1_k + (size_t)i * hd, (size_t)hd * sizeof *kh), 0,
			     "layer %d token %d: the L1 working key is not the %s decoding", l, h->l1_pos[i],
			     res ? "residual" : "plain");
	}
}

Test(tier_residual, the_marks_leave_the_precision)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int n_res = hsq_context_residual_keys(hsq);
	cr_assert_eq(hsq_context_set_retrieval_heads(hsq, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_retrieval_heads(hsq), 0);
	cr_assert_eq(hsq_context_residual_keys(hsq), n_res, "unmarking the heads keeps their residuals in use");
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			cr_assert_eq(tiers_head_uses_res(t, h), h->has_res, "layer %d head %d", l, g);
			if (h->has_res)
				l1_keys_are(t, l, h, 1);
		}
}

Test(tier_residual, residual_keys_turn_off_and_on)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int n_res = hsq_context_residual_keys(hsq);
	cr_assert_gt(n_res, 0);
	cr_assert_eq(hsq_context_use_residual_keys(hsq, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_residual_keys(hsq), 0);
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			cr_assert(!tiers_head_uses_res(t, h));
			if (h->has_res)
				l1_keys_are(t, l, h, 0);
		}
	cr_assert_eq(hsq_context_use_residual_keys(hsq, 1), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_residual_keys(hsq), n_res);
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			if (h->has_res) {
				cr_assert(tiers_head_uses_res(t, h), "layer %d head %d uses its residuals again", l, g);
				l1_keys_are(t, l, h, 1);
			}
		}
	cr_assert_eq(hsq_context_use_residual_keys(hsq, 2), HSQ_ERR_INVALID_ARG);
	cr_assert_not_null(strstr(hsq_last_error(), "2 is neither"), "%s", hsq_last_error());
}

/* The heads that have residual codes after compressing the document again
 * with residual_heads = want, in picked[] (layer-major); returns how many. */
static int residual_heads_with(int want, uint8_t *picked, float *induction, uint8_t *global)
{
	hsq_context_params cp = params();
	hsq_context *c = NULL;
	cr_assert_eq(hsq_context_new(model, &cp, &c), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_eval(c, toks, (size_t)n_tok, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.window = 16;
	tp.residual_heads = want;
	cr_assert_eq(hsq_context_compress(c, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	const struct hsq_tiers *t = c->tiers;
	int n = 0;
	for (int i = 0; i < t->n_layer * t->n_head_kv; i++) {
		const tier_head *h = &t->layers[i / t->n_head_kv].heads[i % t->n_head_kv];
		picked[i] = h->has_res;
		induction[i] = h->induction;
		global[i] = !t->layers[i / t->n_head_kv].window;
		n += h->has_res;
	}
	cr_assert_eq(hsq_context_residual_keys(c), n);
	cr_assert_eq(hsq_context_tier_params(c)->residual_heads, n, "the parameters as built give the count");
	hsq_context_free(c);
	return n;
}

Test(tier_residual, residual_heads_choose_the_heads)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int n = t->n_layer * t->n_head_kv, n_global = 0;
	uint8_t picked[1024], global[1024], top[1024];
	float induction[1024];
	cr_assert_leq(n, 1024);
	cr_assert_eq(residual_heads_with(0, picked, induction, global), 0, "residual_heads 0: none");
	for (int i = 0; i < n; i++)
		n_global += global[i];
	cr_assert_eq(residual_heads_with(HSQ_RESIDUAL_ALL, picked, induction, global), n_global,
		     "HSQ_RESIDUAL_ALL: every global head");
	cr_assert_eq(residual_heads_with(5, picked, induction, global), 5);
	tiers_pick_top(induction, global, n, 5, top);
	cr_assert_eq(memcmp(top, picked, (size_t)n), 0, "the 5 heads with the highest induction scores");
	hsq_tier_params tp = hsq_tier_default_params();
	tp.residual_heads = -3;
	hsq_context_params cp = params();
	hsq_context *c = NULL;
	cr_assert_eq(hsq_context_new(model, &cp, &c), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_eval(c, toks, 40, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_compress(c, HSQ_MODE_HSQ, &tp), HSQ_ERR_INVALID_ARG);
	cr_assert_not_null(strstr(hsq_last_error(), "residual heads -3"), "%s", hsq_last_error());
	hsq_context_free(c);
}

static hsq_status load_bytes(const uint8_t *b, size_t size, hsq_context **out)
{
	char path[80];
	snprintf(path, sizeof path, "%s.mod", snap_path);
	hsq_context_params cp = params();
	return snap_image_load(model, b, size, path, &cp, out);
}

Test(tier_residual, snapshots_keep_the_residuals)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int hd = t->head_dim, H = t->n_head_kv, first = -1;
	hsq_context_params cp = params();
	hsq_context *back = NULL;
	cr_assert_eq(hsq_snapshot_save(hsq, snap_path, HSQ_MODE_HSQ, 3), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_load(model, snap_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < H; g++) {
			const tier_head *x = &t->layers[l].heads[g], *y = &back->tiers->layers[l].heads[g];
			cr_assert_eq(x->has_res, y->has_res, "layer %d head %d", l, g);
			cr_assert_eq(x->retrieval, y->retrieval, "layer %d head %d", l, g);
			if (x->n_l1)
				cr_assert_eq(memcmp(x->l1_k, y->l1_k, (size_t)x->n_l1 * hd * sizeof *x->l1_k), 0,
					     "layer %d head %d: L1 keys", l, g);
			if (!x->has_res)
				continue;
			first = first < 0 ? l * H + g : first;
			cr_assert_eq(memcmp(x->l1_res, y->l1_res, (size_t)x->n_l1 * t->code4), 0);
			cr_assert_eq(memcmp(x->l3_res, y->l3_res, (size_t)x->n_l3 * t->code4), 0);
		}
	cr_assert_eq(hsq_context_tier_params(back)->residual_heads, hsq_context_tier_params(hsq)->residual_heads,
		     "a loaded context reports the heads with residual codes");
	cr_assert_eq(hsq_context_residual_keys(back), hsq_context_residual_keys(hsq));
	hsq_context_free(back);
	cr_assert_geq(first, 0);

	size_t size;
	uint8_t *file = snap_image_read(snap_path, &size), *bad = file ? malloc(size) : NULL;
	cr_assert_not_null(bad, "%s: cannot read", snap_path);
	cr_assert_eq(get_u16(file + SNAP_H_VERSION_MINOR), SNAP_VERSION_MINOR);
	cr_assert_geq(SNAP_VERSION_MINOR, 4, "keys.residual came with format 1.4");
	uint8_t *e = snap_image_entry(file, "keys.residual");
	cr_assert_not_null(e, "an hsq snapshot with retrieval heads has a keys.residual section");
	cr_assert_eq(get_u32(e + SNAP_E_FLAGS) & SNAP_SECTION_REQUIRED, 0,
		     "keys.residual is optional: a reader without it decodes the 4-bit keys");

	/* damaged: refused, naming the section */
	size_t ent = TIER_RES_HEADER + TIER_RES_ENTRY * (size_t)first;
	const tier_head *h = &t->layers[first / H].heads[first % H];
	struct {
		const char *what;
		size_t off;
		uint32_t value;
	} cases[] = {
		{ "layers unlike the snapshot's", 0, 31 },
		{ "a code size unlike the codec's", 8, 26 },
		{ "an unknown flag bit", ent, 3 },
		{ "more L1 residuals than L1 tokens", ent + 4, (uint32_t)h->n_l1 + 1 },
		{ "fewer L3 residuals than L3 tokens", ent + 8, (uint32_t)h->n_l3 - 1 },
		{ "a misaligned block", ent + 16, (uint32_t)get_u64(file + get_u64(e + SNAP_E_OFFSET) + ent + 16) + 4 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		memcpy(bad, file, size);
		cr_assert(snap_image_put_u32(bad, "keys.residual", cases[c].off, cases[c].value), "%s", cases[c].what);
		hsq_status st = load_bytes(bad, size, &back);
		cr_assert_eq(st, HSQ_ERR_FORMAT, "%s: got %s (%s)", cases[c].what, hsq_strerror(st), hsq_last_error());
		cr_assert_null(back);
		cr_assert_not_null(strstr(hsq_last_error(), "keys.residual"), "%s: %s", cases[c].what, hsq_last_error());
	}

	/* a 1.3 file: no keys.residual (renamed to a private section); it loads,
	 * and every key decodes from its 4-bit code */
	memcpy(bad, file, size);
	uint8_t *be = snap_image_entry(bad, "keys.residual");
	memset(be, 0, 16);
	memcpy(be, "x.unused", 8);
	put_u16(bad + SNAP_H_VERSION_MINOR, 3);
	snap_image_reseal_header(bad);
	cr_assert_eq(load_bytes(bad, size, &back), HSQ_OK, "%s", hsq_last_error());
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < H; g++) {
			const tier_head *y = &back->tiers->layers[l].heads[g];
			cr_assert(!y->has_res);
			l1_keys_are(back->tiers, l, y, 0);
		}
	hsq_context_free(back);
	free(bad);
	free(file);
}

/* tiers.c - building the HSQ tiers from a full KV cache, and their storage.
 *
 * tiers_build turns the full (fp16) cache of a prefilled context into the layout
 * of tiers.h. The reader and the compressor are the non-learned defaults
 * of hsq(7): the reader scores each token by the attention mass the last
 * obs_window queries give it (or by key norm), the compressor averages a
 * group's keys (after RoPE) and values, optionally weighted by that mass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/error.h"
#include "common/le.h"
#include "common/vec_f16.h"
#include "common/vec_f32.h"
#include "kv/kv_view.h"
#include "kv/tiers.h"
#include "model/model.h"

hsq_tier_params hsq_tier_default_params(void)
{
	hsq_tier_params p = {
		.sinks = 4,
		.window = 64,
		.l1_fraction = 0.03f,
		.group_size = 16,
		.medium_fraction = 0.25f,
		.obs_window = 32,
		.reader = HSQ_READER_OBS_ATTENTION,
		.compressor = HSQ_COMPRESSOR_OBS_WEIGHTED,
		.seed = 0x4853510001ull,
		.keep = 0,
		.residual_heads = HSQ_RESIDUAL_DEFAULT,
		.key_rounding = HSQ_KEY_ROUNDING_QUERY,
	};
	return p;
}

static const char *const mode_names[] = { NULL, "full", "quant", "hsq", "streaming", "snapkv" };

const char *hsq_mode_name(hsq_snapshot_mode mode)
{
	return mode >= HSQ_MODE_FULL && mode <= HSQ_MODE_SNAPKV ? mode_names[mode] : "unknown";
}

hsq_status hsq_mode_parse(const char *name, hsq_snapshot_mode *out)
{
	for (int m = HSQ_MODE_FULL; m <= HSQ_MODE_SNAPKV; m++)
		if (name && !strcmp(name, mode_names[m])) {
			*out = (hsq_snapshot_mode)m;
			return HSQ_OK;
		}
	return hsq_fail(HSQ_ERR_INVALID_ARG, "unknown mode '%s'; use full, quant, hsq, streaming or snapkv",
			name ? name : "");
}

const char *hsq_reader_name(hsq_reader_kind kind)
{
	return kind == HSQ_READER_OBS_ATTENTION ? "obs-attention"
	       : kind == HSQ_READER_KEY_NORM  ? "key-norm"
	       : kind == HSQ_READER_LEARNED   ? "learned"
					      : "unknown";
}

const char *hsq_compressor_name(hsq_compressor_kind kind)
{
	return kind == HSQ_COMPRESSOR_MEAN ? "mean" : kind == HSQ_COMPRESSOR_OBS_WEIGHTED ? "obs-weighted" : "unknown";
}

const char *hsq_key_rounding_name(hsq_key_rounding kind)
{
	return kind == HSQ_KEY_ROUNDING_NEAREST ? "nearest" : kind == HSQ_KEY_ROUNDING_QUERY ? "query" : "unknown";
}

const char *hsq_router_name(void)
{
	return "pq16-radius";
}

int hsq_default_budget(int n_tokens)
{
	int b = (n_tokens / 4 + 15) / 16 * 16;
	return b < 256 ? 256 : b;
}

int hsq_default_retrieval_heads(int n_global_heads)
{
	return n_global_heads > 0 ? (n_global_heads + 5) / 6 : 0;
}

void tiers_pick_top(const float *score, const uint8_t *eligible, int n, int want, uint8_t *picked)
{
	memset(picked, 0, (size_t)n);
	/* selection of the largest, want times (a few hundred heads at most);
	 * scanning in order with a strict > breaks ties to the earlier */
	for (int k = 0; k < want; k++) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (eligible[i] && !picked[i] && score[i] > 0.0f && (best < 0 || score[i] > score[best]))
				best = i;
		if (best < 0)
			return;
		picked[best] = 1;
	}
}

/* Every head's induction score and whether its layer is global, layer-major
 * (what both head pickers rank); returns the number of global heads. */
static int head_scores(const struct hsq_tiers *t, float *score, uint8_t *global)
{
	int n = t->n_layer * t->n_head_kv, n_global = 0;
	for (int i = 0; i < n; i++) {
		score[i] = t->layers[i / t->n_head_kv].heads[i % t->n_head_kv].induction;
		global[i] = !t->layers[i / t->n_head_kv].window;
		n_global += global[i];
	}
	return n_global;
}

/* The heads that get residual key codes when the tiers are built, in
 * picked[n] (layer-major), from params.residual_heads: the retrieval marks,
 * every global head, none, or the top heads by induction score. */
static void pick_residual(const struct hsq_tiers *t, const float *score, const uint8_t *global, int n,
			  uint8_t *picked)
{
	int want = t->mode == HSQ_MODE_HSQ ? t->params.residual_heads : 0;
	if (want == HSQ_RESIDUAL_DEFAULT) {
		for (int i = 0; i < n; i++)
			picked[i] = t->layers[i / t->n_head_kv].heads[i % t->n_head_kv].retrieval;
	} else if (want == HSQ_RESIDUAL_ALL) {
		memcpy(picked, global, (size_t)n);
	} else {
		tiers_pick_top(score, global, n, want, picked);
	}
}

hsq_status tiers_pick_retrieval(struct hsq_tiers *t)
{
	int n = t->n_layer * t->n_head_kv;
	float *score = malloc((size_t)n * sizeof *score);
	uint8_t *global = malloc((size_t)n), *picked = malloc((size_t)n);
	if (!score || !global || !picked) {
		free(score);
		free(global);
		free(picked);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory picking the retrieval heads");
	}
	int n_global = head_scores(t, score, global);
	int want = t->retrieval_heads == HSQ_RETRIEVAL_DEFAULT ? hsq_default_retrieval_heads(n_global) : t->retrieval_heads;
	tiers_pick_top(score, global, n, t->mode == HSQ_MODE_HSQ ? want : 0, picked);
	for (int i = 0; i < n; i++)
		t->layers[i / t->n_head_kv].heads[i % t->n_head_kv].retrieval = picked[i];
	free(score);
	free(global);
	free(picked);
	return HSQ_OK;
}

static hsq_status check_params(const hsq_tier_params *p)
{
	if (p->sinks < 0 || p->sinks > 1 << 20)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "sinks %d is out of range; use 0 or more", p->sinks);
	if (p->window < 1 || p->window > 1 << 20)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "window %d is out of range; use 1 or more", p->window);
	if (!(p->l1_fraction >= 0.0f && p->l1_fraction <= 1.0f))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "l1 fraction %g is out of range; use 0..1", p->l1_fraction);
	if (p->group_size != 8 && p->group_size != 16)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "group size %d is not supported; use 8 or 16", p->group_size);
	if (!(p->medium_fraction >= 0.0f && p->medium_fraction <= 1.0f))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "medium fraction %g is out of range; use 0..1", p->medium_fraction);
	if (p->obs_window < 1 || p->obs_window > HSQ_OBS_MAX)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "observation window %d is out of range; use 1..%d", p->obs_window,
				HSQ_OBS_MAX);
	if (p->reader != HSQ_READER_OBS_ATTENTION && p->reader != HSQ_READER_KEY_NORM && p->reader != HSQ_READER_LEARNED)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "unknown reader %d; use obs-attention, key-norm or learned",
				(int)p->reader);
	if (p->compressor != HSQ_COMPRESSOR_MEAN && p->compressor != HSQ_COMPRESSOR_OBS_WEIGHTED)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "unknown compressor %d; use mean or obs-weighted",
				(int)p->compressor);
	if (p->residual_heads < HSQ_RESIDUAL_ALL)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"residual heads %d is out of range; use a head count, HSQ_RESIDUAL_ALL or HSQ_RESIDUAL_DEFAULT",
				p->residual_heads);
	if (p->keep < 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "keep %d is negative; use 0 (automatic) or a token count", p->keep);
	if (p->key_rounding != HSQ_KEY_ROUNDING_NEAREST && p->key_rounding != HSQ_KEY_ROUNDING_QUERY)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "unknown key rounding %d; use nearest or query", (int)p->key_rounding);
	return HSQ_OK;
}

/* ------------------------------------------------------------ storage */

static void head_free(tier_head *h)
{
	free(h->l1_pos);
	free(h->l1_code);
	free(h->l1_k);
	free(h->l1_v);
	free(h->g_start);
	free(h->g_class);
	free(h->sum_code);
	free(h->sum_k);
	free(h->sum_v);
	free(h->pq_centroid);
	free(h->pq_code);
	free(h->pq_radius);
	free(h->pq_err);
	free(h->g_hits);
	free(h->l3_pos);
	free(h->l3_code);
	free(h->l1_res);
	free(h->l3_res);
	free(h->g_decoded);
	free(h->dec_k);
	free(h->dec_v);
	free(h->centre);
}

void tiers_free(struct hsq_tiers *t)
{
	if (!t)
		return;
	if (t->layers) {
		for (int l = 0; l < t->n_layer; l++) {
			tier_layer *L = &t->layers[l];
			if (L->heads)
				for (int h = 0; h < t->n_head_kv; h++)
					head_free(&L->heads[h]);
			free(L->heads);
			free(L->tail_pos);
			free(L->tail_k);
			free(L->tail_v);
			free(L->tail_kh);
			free(L->tail_vh);
		}
		free(t->layers);
	}
	for (int i = 0; i < t->n_rope; i++)
		free(t->rope[i].cs);
	free(t->fill);
	free(t->runs);
	free(t->n_runs);
	free(t->n_rows);
	free(t->sum_rows);
	free(t->split_fetched);
	free(t->split_s);
	free(t->trace_buf);
	free(t->trace_count);
	free(t->recall_buf);
	if (t->scratch)
		for (int i = 0; i < t->n_threads; i++) {
			tier_scratch *x = &t->scratch[i];
			free(x->rank);
			free(x->gscore);
			free(x->kscore);
			free(x->pq_table);
			free(x->fetched);
			free(x->fpos);
			free(x->fk);
			free(x->fv);
			free(x->gk);
			free(x->gv);
			free(x->gsize);
			free(x->sum_bias);
			free(x->sum_score);
			free(x->s);
			free(x->ps);
			free(x->covered);
		}
	free(t->scratch);
	hsq_codec_free(t->c4);
	hsq_codec_free(t->c3);
	free(t);
}

/* Grows *p (elements of size sz) to hold at least need; *cap tracks. */
static int grow(void **p, int *cap, int need, size_t sz)
{
	if (need <= *cap)
		return 0;
	int nc = *cap ? *cap : 16;
	while (nc < need)
		nc = nc > (1 << 29) ? need : nc * 2;
	void *q = realloc(*p, (size_t)nc * sz);
	if (!q)
		return -1;
	*p = q;
	*cap = nc;
	return 0;
}

#define GROW(ptr, cap_copy, need) grow((void **)&(ptr), &(cap_copy), (need), sizeof *(ptr))

hsq_status tiers_new(const hsq_model *model, hsq_snapshot_mode mode, const hsq_tier_params *params, int n_ctx,
		     int n_threads, struct hsq_tiers **out)
{
	hsq_status st;
	const hsq_model_info *mi = &model->info;
	*out = NULL;
	if (mode < HSQ_MODE_QUANT || mode > HSQ_MODE_SNAPKV)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "mode %d has no tiers; use quant, hsq, streaming or snapkv", (int)mode);
	hsq_tier_params p = params ? *params : hsq_tier_default_params();
	if ((st = check_params(&p)))
		return st;
	if (mi->head_dim < HSQ_CODEC_MIN_DIM || mi->head_dim > HSQ_CODEC_MAX_DIM || (mi->head_dim & (mi->head_dim - 1)))
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "head dimension %d is not supported by the TQ codec (a power of two, %d..%d)",
				mi->head_dim, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (mi->n_head / mi->n_head_kv > TIER_PQ_MAX_G)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%d query heads per KV head are more than the router's %d",
				mi->n_head / mi->n_head_kv, TIER_PQ_MAX_G);
	struct hsq_tiers *t = calloc(1, sizeof *t);
	if (!t)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the tiers");
	t->mode = mode;
	t->params = p;
	t->n_layer = mi->n_layer;
	t->n_head = mi->n_head;
	t->n_head_kv = mi->n_head_kv;
	t->head_dim = mi->head_dim;
	t->n_ctx = n_ctx;
	t->rope_neox = model->rope_neox;
	t->attn_scale = 1.0f / sqrtf((float)mi->head_dim);
	t->n_threads = n_threads > 0 ? n_threads : 1;
	t->budget = HSQ_BUDGET_DEFAULT;
	t->retrieval_heads = HSQ_RETRIEVAL_DEFAULT;

	hsq_codec_params cp = { .kind = HSQ_CODEC_TQ, .dim = mi->head_dim, .bits = 4, .path = HSQ_KV_K, .seed = p.seed };
	if ((st = hsq_codec_new(&cp, &t->c4)))
		goto fail;
	cp.bits = 3;
	cp.seed = p.seed + 1;
	if ((st = hsq_codec_new(&cp, &t->c3)))
		goto fail;
	t->code4 = hsq_codec_code_bytes(t->c4);
	t->code3 = hsq_codec_code_bytes(t->c3);

	t->layers = calloc((size_t)t->n_layer, sizeof *t->layers);
	t->scratch = calloc((size_t)t->n_threads, sizeof *t->scratch);
	if (!t->layers || !t->scratch)
		goto nomem;
	for (int l = 0; l < t->n_layer; l++) {
		tier_layer *L = &t->layers[l];
		L->window = model->layers[l].window;
		float base = model->layers[l].rope_base;
		int r = 0;
		while (r < t->n_rope && t->rope[r].base != base)
			r++;
		if (r == t->n_rope) {
			if (t->n_rope == (int)(sizeof t->rope / sizeof *t->rope)) {
				st = hsq_fail(HSQ_ERR_UNSUPPORTED, "more than %d distinct RoPE bases in one model",
					      (int)(sizeof t->rope / sizeof *t->rope));
				goto fail;
			}
			t->rope[t->n_rope++].base = base;
		}
		L->rope_table = r;
		if (!(L->heads = calloc((size_t)t->n_head_kv, sizeof *L->heads)))
			goto nomem;
		for (int h = 0; h < t->n_head_kv; h++)
			if (!(L->heads[h].centre = calloc(2 * (size_t)t->head_dim, sizeof(float))))
				goto nomem;
	}
	*out = t;
	return HSQ_OK;
nomem:
	st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the tiers");
fail:
	tiers_free(t);
	return st;
}

hsq_status tiers_rope_reserve(struct hsq_tiers *t, int n_pos)
{
	int half = t->head_dim / 2;
	for (int r = 0; r < t->n_rope; r++) {
		rope_table *R = &t->rope[r];
		if (R->n_pos >= n_pos)
			continue;
		/* a quarter more than asked: decoding asks for one position more
		 * every step, and a realloc each time copied the whole table */
		int grow = n_pos > R->n_pos + R->n_pos / 4 ? n_pos : R->n_pos + R->n_pos / 4;
		float *cs = realloc(R->cs, (size_t)grow * half * 2 * sizeof *cs);
		if (!cs)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for RoPE tables of %d positions", grow);
		for (int p = R->n_pos; p < grow; p++)
			for (int i = 0; i < half; i++) {
				/* as cpu_rope: the angle in double, then rounded */
				double theta = (double)p * pow((double)R->base, -2.0 * i / t->head_dim);
				cs[((size_t)p * half + i) * 2] = (float)cos(theta);
				cs[((size_t)p * half + i) * 2 + 1] = (float)sin(theta);
			}
		R->cs = cs;
		R->n_pos = grow;
	}
	return HSQ_OK;
}

void tiers_rope_rows(const struct hsq_tiers *t, const rope_table *r, float *x, const int32_t *pos, int n, int sign)
{
	int hd = t->head_dim, half = hd / 2, neox = t->rope_neox;
	for (int k = 0; k < n; k++) {
		float *v = x + (size_t)k * hd;
		const float *cs = r->cs + (size_t)pos[k] * half * 2;
		for (int i = 0; i < half; i++) {
			float c = cs[2 * i], s = sign > 0 ? cs[2 * i + 1] : -cs[2 * i + 1];
			int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
			float a = v[i0], b = v[i1];
			v[i0] = a * c - b * s;
			v[i1] = a * s + b * c;
		}
	}
}

/* Codes x, or x minus centre flagged TIER_CODE_CENTRED when that is
 * shorter (the codec's error grows with the norm it codes). */
static hsq_status encode_centred(const hsq_codec *c, const float *x, const float *centre, int hd,
				 const float *rounding, uint8_t *code)
{
	float r[HSQ_CODEC_MAX_DIM];
	double nx = 0.0, nr = 0.0;
	for (int d = 0; d < hd; d++) {
		r[d] = x[d] - centre[d];
		nx += (double)x[d] * x[d];
		nr += (double)r[d] * r[d];
	}
	const float *what = nr < nx ? r : x;
	hsq_status st = rounding ? codec_tq_encode_weighted(c, what, rounding, code) : hsq_codec_encode(c, what, 1, code);
	if (!st && nr < nx)
		code[1] |= TIER_CODE_CENTRED;
	return st;
}

static void decode_centred(const hsq_codec *c, size_t code_bytes, const uint8_t *code, const float *centre, int hd,
			   float *x)
{
	if (!(code[1] & TIER_CODE_CENTRED)) {
		hsq_codec_decode(c, code, 1, x);
		return;
	}
	uint8_t plain[2 + HSQ_CODEC_MAX_DIM]; /* a 4-bit code: 2 + head_dim / 2 bytes */
	memcpy(plain, code, code_bytes);
	plain[1] &= (uint8_t)~TIER_CODE_CENTRED;
	hsq_codec_decode(c, plain, 1, x);
	for (int d = 0; d < hd; d++)
		x[d] += centre[d];
}

hsq_status tiers_encode_token(const struct hsq_tiers *t, const tier_head *h, const float *k_pre, const float *v,
			      const float *key_rounding, uint8_t *code)
{
	hsq_status st;
	int hd = t->head_dim;
	if ((st = encode_centred(t->c4, k_pre, h->centre, hd, key_rounding, code)) ||
	    (st = encode_centred(t->c4, v, h->centre + hd, hd, NULL, code + t->code4)))
		return st;
	return HSQ_OK;
}

void tiers_decode_token(const struct hsq_tiers *t, const tier_head *h, const uint8_t *code, float *k_pre, float *v)
{
	decode_centred(t->c4, t->code4, code, h->centre, t->head_dim, k_pre);
	decode_centred(t->c4, t->code4, code + t->code4, h->centre + t->head_dim, t->head_dim, v);
}

hsq_status tiers_encode_residual(const struct hsq_tiers *t, const tier_head *h, const float *k_pre,
				 const uint8_t *code, uint8_t *res)
{
	float k[HSQ_CODEC_MAX_DIM], v[HSQ_CODEC_MAX_DIM];
	tiers_decode_token(t, h, code, k, v);
	for (int d = 0; d < t->head_dim; d++)
		k[d] = k_pre[d] - k[d];
	return hsq_codec_encode(t->c4, k, 1, res);
}

void tiers_decode_token_res(const struct hsq_tiers *t, const tier_head *h, const uint8_t *code, const uint8_t *res,
			    float *k_pre, float *v)
{
	tiers_decode_token(t, h, code, k_pre, v);
	if (!tiers_head_uses_res(t, h))
		return;
	float r[HSQ_CODEC_MAX_DIM];
	hsq_codec_decode(t->c4, res, 1, r);
	for (int d = 0; d < t->head_dim; d++)
		k_pre[d] += r[d];
}

hsq_status tiers_head_enable_res(const struct hsq_tiers *t, tier_head *h)
{
	size_t c4 = t->code4;
	uint8_t *a = calloc((size_t)(h->cap_l1 > 0 ? h->cap_l1 : 1), c4);
	uint8_t *b = calloc((size_t)(h->cap_l3 > 0 ? h->cap_l3 : 1), c4);
	if (!a || !b) {
		free(a);
		free(b);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for residual key codes");
	}
	free(h->l1_res);
	free(h->l3_res);
	h->l1_res = a;
	h->l3_res = b;
	h->has_res = 1;
	return HSQ_OK;
}

/* The centre of a group's key summary: the head's key centre rotated to
 * each of the n positions, averaged. */
static void summary_centre(const struct hsq_tiers *t, const tier_head *h, const rope_table *r, const int32_t *pos,
			   int n, float *c)
{
	int hd = t->head_dim;
	float row[HSQ_CODEC_MAX_DIM];
	memset(c, 0, (size_t)hd * sizeof *c);
	for (int i = 0; i < n; i++) {
		memcpy(row, h->centre, (size_t)hd * sizeof *row);
		tiers_rope_rows(t, r, row, &pos[i], 1, +1);
		for (int d = 0; d < hd; d++)
			c[d] += row[d];
	}
	for (int d = 0; d < hd && n > 0; d++)
		c[d] /= (float)n;
}

hsq_status tiers_encode_summary(const struct hsq_tiers *t, const tier_head *h, const rope_table *r,
				const int32_t *pos, int n, const float *k_sum, const float *v_sum, uint8_t *code)
{
	hsq_status st;
	float ck[HSQ_CODEC_MAX_DIM];
	summary_centre(t, h, r, pos, n, ck);
	if ((st = encode_centred(t->c3, k_sum, ck, t->head_dim, NULL, code)) ||
	    (st = encode_centred(t->c3, v_sum, h->centre + t->head_dim, t->head_dim, NULL, code + t->code3)))
		return st;
	return HSQ_OK;
}

void tiers_decode_summary(const struct hsq_tiers *t, const tier_head *h, const rope_table *r, const int32_t *pos,
			  int n, const uint8_t *code, float *k_sum, float *v_sum)
{
	float ck[HSQ_CODEC_MAX_DIM];
	if (code[1] & TIER_CODE_CENTRED)
		summary_centre(t, h, r, pos, n, ck);
	decode_centred(t->c3, t->code3, code, ck, t->head_dim, k_sum);
	decode_centred(t->c3, t->code3, code + t->code3, h->centre + t->head_dim, t->head_dim, v_sum);
}

void tiers_set_centres(struct hsq_tiers *t, int layer, const float *k_pre, const float *v, size_t stride, int first,
		       int n, int sinks)
{
	int hd = t->head_dim;
	if (n - first > sinks)
		first += sinks;
	for (int g = 0; g < t->n_head_kv; g++) {
		float *c = t->layers[layer].heads[g].centre;
		double sum[2 * HSQ_CODEC_MAX_DIM] = { 0 };
		for (int i = first; i < n; i++)
			for (int d = 0; d < hd; d++) {
				sum[d] += k_pre[(size_t)i * stride + (size_t)g * hd + d];
				sum[hd + d] += v[(size_t)i * stride + (size_t)g * hd + d];
			}
		int ok = 1;
		for (int d = 0; d < 2 * hd; d++) {
			c[d] = n > first ? (float)(sum[d] / (n - first)) : 0.0f;
			ok &= fabsf(c[d]) <= 65504.0f;
		}
		if (!ok)
			memset(c, 0, 2 * (size_t)hd * sizeof *c);
	}
}

/* Decodes one token's K (rotated to pos) and V from its codes, and its
 * residual key code res when the head uses one (else res is ignored). */
/* The working rows of one token (fp16), K rotated to pos. */
static void decode_token(const struct hsq_tiers *t, const tier_head *h, const rope_table *r, const uint8_t *code,
			 const uint8_t *res, int32_t pos, uint16_t *k, uint16_t *v)
{
	float kf[HSQ_CODEC_MAX_DIM], vf[HSQ_CODEC_MAX_DIM];
	tiers_decode_token_res(t, h, code, res, kf, vf);
	tiers_rope_rows(t, r, kf, &pos, 1, +1);
	f16_row_from_f32(k, kf, t->head_dim);
	f16_row_from_f32(v, vf, t->head_dim);
}

/* Grows a head's residual storage to cap tokens (L1: l3 0; L3: l3 1). */
static hsq_status grow_res(const struct hsq_tiers *t, tier_head *h, int l3, int have, int need)
{
	if (!h->has_res || need <= have)
		return HSQ_OK;
	uint8_t **p = l3 ? &h->l3_res : &h->l1_res;
	uint8_t *q = realloc(*p, (size_t)need * t->code4);
	if (!q)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d residual key codes", need);
	*p = q;
	return HSQ_OK;
}

hsq_status tiers_head_add_l1(struct hsq_tiers *t, int layer, tier_head *h, int n, const int32_t *pos,
			     const uint8_t *codes, const uint8_t *res)
{
	int need = h->n_l1 + n, hd = t->head_dim;
	if (h->has_res && n > 0 && !res)
		return hsq_fail(HSQ_ERR_INTERNAL, "L1 tokens without residual codes for a head that keeps them");
	/* Nothing to add: a head may have no L1 tokens (a snapshot's head with
	 * n_l1 0), and then its arrays are still NULL, which memcpy and
	 * pointer arithmetic must not see (UBSan). */
	if (n == 0)
		return HSQ_OK;
	if (need > h->cap_l1) {
		int cap = h->cap_l1, c2 = h->cap_l1, c3 = h->cap_l1, c4 = h->cap_l1;
		if (GROW(h->l1_pos, cap, need) || grow((void **)&h->l1_code, &c2, need, tier_code4_pair(t)) ||
		    grow((void **)&h->l1_k, &c3, need, hd * sizeof *h->l1_k) ||
		    grow((void **)&h->l1_v, &c4, need, hd * sizeof *h->l1_v) || grow_res(t, h, 0, h->cap_l1, cap))
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d L1 tokens", need);
		h->cap_l1 = cap;
	}
	const rope_table *r = &t->rope[t->layers[layer].rope_table];
	memcpy(h->l1_pos + h->n_l1, pos, (size_t)n * sizeof *pos);
	memcpy(h->l1_code + (size_t)h->n_l1 * tier_code4_pair(t), codes, (size_t)n * tier_code4_pair(t));
	if (h->has_res)
		memcpy(h->l1_res + (size_t)h->n_l1 * t->code4, res, (size_t)n * t->code4);
	for (int i = 0; i < n; i++) {
		int j = h->n_l1 + i;
		decode_token(t, h, r, h->l1_code + (size_t)j * tier_code4_pair(t),
			     h->has_res ? h->l1_res + (size_t)j * t->code4 : NULL, pos[i], h->l1_k + (size_t)j * hd,
			     h->l1_v + (size_t)j * hd);
	}
	h->n_l1 = need;
	return HSQ_OK;
}

hsq_status tiers_head_add_group(struct hsq_tiers *t, const rope_table *r, tier_head *h, int n, const int32_t *pos,
				const uint8_t *codes, const uint8_t *res, const uint8_t *sum_code, int cls)
{
	int hd = t->head_dim, ng = h->n_group + 1;
	if (h->has_res && n > 0 && !res)
		return hsq_fail(HSQ_ERR_INTERNAL, "L3 tokens without residual codes for a head that keeps them");
	if (ng + 1 > h->cap_group) {
		int c[7];
		for (int i = 0; i < 7; i++)
			c[i] = h->cap_group;
		if (GROW(h->g_start, c[0], ng + 1) || GROW(h->g_class, c[1], ng + 1) ||
		    grow((void **)&h->sum_code, &c[2], ng + 1, tier_code3_pair(t)) ||
		    grow((void **)&h->sum_k, &c[3], ng + 1, hd * sizeof *h->sum_k) ||
		    grow((void **)&h->sum_v, &c[4], ng + 1, hd * sizeof *h->sum_v) || GROW(h->g_hits, c[5], ng + 1) ||
		    GROW(h->g_decoded, c[6], ng + 1))
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d L2 groups", ng);
		h->cap_group = c[0];
	}
	int need = h->n_l3 + n;
	if (need > h->cap_l3) {
		int c0 = h->cap_l3, c1 = h->cap_l3;
		if (GROW(h->l3_pos, c0, need) || grow((void **)&h->l3_code, &c1, need, tier_code4_pair(t)) ||
		    grow_res(t, h, 1, h->cap_l3, c0) || tiers_pq_grow(t, h, c0))
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d L3 tokens", need);
		h->cap_l3 = c0;
	}
	int g = h->n_group;
	if (g == 0)
		h->g_start[0] = 0;
	memcpy(h->l3_pos + h->n_l3, pos, (size_t)n * sizeof *pos);
	memcpy(h->l3_code + (size_t)h->n_l3 * tier_code4_pair(t), codes, (size_t)n * tier_code4_pair(t));
	if (h->has_res)
		memcpy(h->l3_res + (size_t)h->n_l3 * t->code4, res, (size_t)n * t->code4);
	h->n_l3 = need;
	h->g_start[g + 1] = need;
	h->g_class[g] = (uint8_t)cls;
	h->g_hits[g] = 0;
	h->g_decoded[g] = 0;
	memcpy(h->sum_code + (size_t)g * tier_code3_pair(t), sum_code, tier_code3_pair(t));
	float sk[HSQ_CODEC_MAX_DIM], sv[HSQ_CODEC_MAX_DIM];
	tiers_decode_summary(t, h, r, pos, n, sum_code, sk, sv);
	f16_row_from_f32(h->sum_k + (size_t)g * hd, sk, hd);
	f16_row_from_f32(h->sum_v + (size_t)g * hd, sv, hd);
	h->n_group = ng;
	return tiers_pq_add(t, h, r, need - n, n); /* the router codes, once the tiers are fitted */
}

void tiers_refresh_residual_heads(struct hsq_tiers *t)
{
	int hd = t->head_dim;
	for (int l = 0; l < t->n_layer; l++) {
		const rope_table *r = &t->rope[t->layers[l].rope_table];
		for (int hh = 0; hh < t->n_head_kv; hh++) {
			tier_head *h = &t->layers[l].heads[hh];
			if (!h->has_res)
				continue;
			for (int j = 0; j < h->n_l1; j++)
				decode_token(t, h, r, h->l1_code + (size_t)j * tier_code4_pair(t),
					     h->l1_res + (size_t)j * t->code4, h->l1_pos[j], h->l1_k + (size_t)j * hd,
					     h->l1_v + (size_t)j * hd);
			if (h->n_group > 0) /* groups decoded before */
				memset(h->g_decoded, 0, (size_t)h->n_group);
		}
	}
}

/* -------------------------------------------------------------- build */

/* The query-weighted rounding of one head's keys (docs/tiers.md): the
 * weight of a key's coding error e at position p is
 * E[(q . R_p e)^2] = e^T R_p^T S R_p e, with S the second moment of the
 * observation window's queries (after RoPE) of the head's query heads and
 * R_p the RoPE rotation to p. One factor per block of KEY_ROUND_BLOCK
 * positions, from R_p^T S R_p averaged over KEY_ROUND_SAMPLES positions of
 * the block: fast RoPE pairs average out to isotropic, slow ones keep the
 * queries' direction. */
#define KEY_ROUND_BLOCK 64
#define KEY_ROUND_SAMPLES 8
#define KEY_ROUND_DAMP 0.1

/* acc += R_p^T s R_p for s (hd x hd) in the rotated pairs of position p. */
static void add_rotated_weight(const struct hsq_tiers *t, const rope_table *r, const double *s, int p, double *tmp,
			       double *acc)
{
	int hd = t->head_dim, half = hd / 2;
	const float *cs = r->cs + (size_t)p * half * 2;
	/* tmp = s R_p: column pairs */
	memcpy(tmp, s, (size_t)hd * hd * sizeof *tmp);
	for (int i = 0; i < half; i++) {
		double c = cs[2 * i], sn = cs[2 * i + 1];
		int i0 = t->rope_neox ? i : 2 * i, i1 = t->rope_neox ? i + half : 2 * i + 1;
		for (int a = 0; a < hd; a++) {
			double x0 = s[(size_t)a * hd + i0], x1 = s[(size_t)a * hd + i1];
			tmp[(size_t)a * hd + i0] = c * x0 + sn * x1;
			tmp[(size_t)a * hd + i1] = -sn * x0 + c * x1;
		}
	}
	/* acc += R_p^T tmp: row pairs */
	for (int i = 0; i < half; i++) {
		double c = cs[2 * i], sn = cs[2 * i + 1];
		int i0 = t->rope_neox ? i : 2 * i, i1 = t->rope_neox ? i + half : 2 * i + 1;
		for (int b = 0; b < hd; b++) {
			double x0 = tmp[(size_t)i0 * hd + b], x1 = tmp[(size_t)i1 * hd + b];
			acc[(size_t)i0 * hd + b] += c * x0 + sn * x1;
			acc[(size_t)i1 * hd + b] += -sn * x0 + c * x1;
		}
	}
}

/* One task per needed block of key_rounding: its factor from the
 * queries' second moment s (hd x hd), into out + b * hd * hd. */
typedef struct {
	const struct hsq_tiers *t;
	const rope_table *r;
	const double *s;
	const int32_t *blocks; /* [n_blocks] block indices */
	int n;		       /* positions */
	double *work;	       /* [threads][2 * hd * hd] */
	float *out;
	hsq_status *status; /* [n_blocks] */
} rounding_job;

static void rounding_task(void *arg, int task, int thread)
{
	const rounding_job *j = arg;
	const struct hsq_tiers *t = j->t;
	size_t dd = (size_t)t->head_dim * t->head_dim;
	double *m = j->work + (size_t)thread * 2 * dd, *tmp = m + dd;
	int b = j->blocks[task];
	int p0 = b * KEY_ROUND_BLOCK, len = p0 + KEY_ROUND_BLOCK <= j->n ? KEY_ROUND_BLOCK : j->n - p0;
	memset(m, 0, dd * sizeof *m);
	for (int k = 0; k < KEY_ROUND_SAMPLES; k++)
		add_rotated_weight(t, j->r, j->s, p0 + (int)(((double)k + 0.5) * len / KEY_ROUND_SAMPLES), tmp, m);
	j->status[task] = codec_tq_rounding(t->c4, m, KEY_ROUND_DAMP, j->out + (size_t)b * dd);
}

/* Rounding factors of head g of layer l for the blocks of positions
 * [0, n) that hold a token to encode (idx[0..m), or every position when
 * idx is NULL): one per block, hd x hd floats each, into *out (grown as
 * needed; *cap floats); the other blocks' factors are left unset, since
 * an O(hd^3) factor per block is most of a compression (a sliding-window
 * layer or an eviction method encodes a few blocks of thousands). The
 * blocks run in parallel; each factor depends only on its block, so the
 * codes do not depend on the thread count. *have = 0 when the context
 * holds no observation queries for the last obs_window positions: the
 * keys then round to the nearest levels. */
static hsq_status key_rounding(const kv_view *kv, const struct hsq_tiers *t, int l, int g, const rope_table *r,
			       int n, const int32_t *idx, int m, float **out, size_t *cap, int *have)
{
	int hd = t->head_dim, G = t->n_head / t->n_head_kv;
	int n_obs = t->params.obs_window < n ? t->params.obs_window : n;
	size_t dd = (size_t)hd * hd, qw = (size_t)t->n_head * hd;
	*have = 0;
	if (n_obs <= 0 || kv->obs_from > n - n_obs)
		return HSQ_OK;
	int nb = (n + KEY_ROUND_BLOCK - 1) / KEY_ROUND_BLOCK;
	if ((size_t)nb * dd > *cap) {
		float *u = realloc(*out, (size_t)nb * dd * sizeof *u);
		if (!u)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the key rounding of %d tokens", n);
		*out = u;
		*cap = (size_t)nb * dd;
	}
	int threads = pool_threads(kv->pool);
	double *s = calloc(dd, sizeof *s);
	double *work = malloc((size_t)threads * 2 * dd * sizeof *work);
	uint8_t *need = calloc((size_t)nb, 1);
	int32_t *blocks = malloc((size_t)nb * sizeof *blocks);
	hsq_status *status = calloc((size_t)nb, sizeof *status);
	hsq_status st = HSQ_OK;
	if (!s || !work || !need || !blocks || !status) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the key rounding of %d tokens", n);
		goto done;
	}
	for (int o = n - n_obs; o < n; o++) {
		const float *qrow = kv->obs_q + ((size_t)l * HSQ_OBS_MAX + (size_t)(o % HSQ_OBS_MAX)) * qw;
		for (int hq = g * G; hq < (g + 1) * G; hq++) {
			const float *q = qrow + (size_t)hq * hd;
			for (int a = 0; a < hd; a++)
				for (int b = 0; b < hd; b++)
					s[(size_t)a * hd + b] += (double)q[a] * q[b];
		}
	}
	int n_need = 0;
	if (idx)
		for (int i = 0; i < m; i++)
			need[idx[i] / KEY_ROUND_BLOCK] = 1;
	for (int b = 0; b < nb; b++)
		if (!idx || need[b])
			blocks[n_need++] = b;
	rounding_job j = { t, r, s, blocks, n, work, *out, status };
	pool_run(kv->pool, n_need, rounding_task, &j);
	for (int b = 0; b < n_need && !st; b++)
		st = status[b];
	if (st) /* the workers' messages stay on their threads */
		st = hsq_fail(st, "the key rounding factors of layer %d head %d could not be computed (a weight is not positive definite)", l, g);
done:
	free(s);
	free(work);
	free(need);
	free(blocks);
	free(status);
	*have = !st;
	return st;
}

/* Encodes token rows idx[] (K before RoPE, V; row stride `stride`) into
 * pair codes; the keys with the block factors of key_rounding, or to the
 * nearest levels when rounding is NULL. */
static hsq_status encode_pairs(const struct hsq_tiers *t, const tier_head *h, const float *k, const float *v,
			       size_t stride, int n, const int32_t *idx, const float *rounding, uint8_t *codes)
{
	hsq_status st;
	size_t dd = (size_t)t->head_dim * t->head_dim;
	for (int i = 0; i < n; i++)
		if ((st = tiers_encode_token(t, h, k + (size_t)idx[i] * stride, v + (size_t)idx[i] * stride,
					     rounding ? rounding + (size_t)(idx[i] / KEY_ROUND_BLOCK) * dd : NULL,
					     codes + (size_t)i * tier_code4_pair(t))))
			return st;
	return HSQ_OK;
}

/* Summary codes of a group: weighted means of its keys (after RoPE) and
 * values (weights NULL = equal); idx[] are the tokens' positions. */
static hsq_status encode_summary(const struct hsq_tiers *t, const tier_head *h, const rope_table *r,
				 const float *k_rope, const float *v, size_t stride, int n, const int32_t *idx,
				 const float *weights, float *tmp, uint8_t *out)
{
	int hd = t->head_dim;
	float *mk = tmp, *mv = tmp + hd;
	double wsum = 0.0;
	memset(tmp, 0, 2 * (size_t)hd * sizeof *tmp);
	for (int i = 0; i < n; i++) {
		float w = weights ? weights[idx[i]] : 1.0f;
		wsum += w;
		for (int d = 0; d < hd; d++) {
			mk[d] += w * k_rope[(size_t)idx[i] * stride + d];
			mv[d] += w * v[(size_t)idx[i] * stride + d];
		}
	}
	float inv = wsum > 0.0 ? (float)(1.0 / wsum) : 0.0f;
	for (int d = 0; d < hd; d++) {
		mk[d] *= inv;
		mv[d] *= inv;
	}
	return tiers_encode_summary(t, h, r, idx, n, mk, mv, out);
}

/* Reader score of every position 0..n-1 for KV head g of a layer, and
 * with the obs-attention and learned readers the head's induction score
 * (tier_head.induction): for each observation query at position o (each
 * of the G query heads sharing g) whose token occurred before, at some
 * p - 1 with p older than the recent window, the attention share on all
 * such p; the mean over the queries that have one (0 when none has).
 * With the learned reader (learned: the network's scores [n][n_out]) a
 * position's score is its softmax share of the network's score, added to
 * the obs-attention prior when the reader was trained on one. */
static void reader_scores(const kv_view *kv, const struct hsq_tiers *t, int layer, int g, const float *k_rope,
			  const float *k_pre, int n, const float *learned, float *mass, float *tmp, float *induction)
{
	int hd = t->head_dim, H = t->n_head_kv, G = t->n_head / H;
	size_t kvw = (size_t)H * hd;
	memset(mass, 0, (size_t)n * sizeof *mass);
	*induction = 0.0f;
	if (t->params.reader == HSQ_READER_KEY_NORM) {
		for (int p = 0; p < n; p++) {
			const float *k = k_pre + (size_t)p * kvw + (size_t)g * hd;
			double s = 0;
			for (int d = 0; d < hd; d++)
				s += (double)k[d] * k[d];
			mass[p] = (float)sqrt(s);
		}
		return;
	}
	int n_obs = t->params.obs_window < n ? t->params.obs_window : n;
	size_t qw = (size_t)t->n_head * hd;
	double copied = 0.0;
	int n_copy = 0;
	for (int o = n - n_obs; o < n; o++) {
		const float *qrow = kv->obs_q + ((size_t)layer * HSQ_OBS_MAX + (size_t)(o % HSQ_OBS_MAX)) * qw;
		int far = o - t->params.window, repeats = 0; /* copy targets p < far */
		for (int p = 1; p < far && !repeats; p++)
			repeats = kv->tokens[p - 1] == kv->tokens[o];
		for (int hq = g * G; hq < (g + 1) * G; hq++) {
			const float *q = qrow + (size_t)hq * hd;
			float mx = -INFINITY;
			for (int p = 0; p <= o; p++) {
				tmp[p] = dot_f32(q, k_rope + (size_t)p * kvw + (size_t)g * hd, hd) * t->attn_scale;
				mx = tmp[p] > mx ? tmp[p] : mx;
			}
			double sum = 0.0, hit = 0.0;
			for (int p = 0; p <= o; p++) {
				tmp[p] = expf(tmp[p] - mx);
				sum += tmp[p];
				if (repeats && p >= 1 && p < far && kv->tokens[p - 1] == kv->tokens[o])
					hit += tmp[p];
			}
			float inv = (float)(1.0 / sum);
			for (int p = 0; p <= o; p++)
				mass[p] += tmp[p] * inv;
			if (repeats) {
				copied += hit / sum;
				n_copy++;
			}
		}
	}
	*induction = n_copy ? (float)(copied / n_copy) : 0.0f;
	if (learned) { /* the induction score stays the observation queries' */
		int n_out = kv->reader->n_out, j = layer * t->n_head_kv + g;
		if (kv->reader->prior_obs) /* the network corrects obs-attention's guess */
			reader_obs_prior(mass, n, t->params.sinks, n - t->params.window, tmp);
		else
			memset(tmp, 0, (size_t)n * sizeof *tmp);
		double mx = -INFINITY, sum = 0.0;
		for (int p = 0; p < n; p++) {
			tmp[p] += learned[(size_t)p * n_out + j];
			mx = tmp[p] > mx ? tmp[p] : mx;
		}
		for (int p = 0; p < n; p++)
			sum += tmp[p] = (float)exp(tmp[p] - mx);
		for (int p = 0; p < n; p++)
			mass[p] = (float)(tmp[p] / sum);
	}
}

/* The learned reader's scores of positions 0..n-1: out[p * n_out + j],
 * j = layer * n_head_kv + g, in blocks of rows on the build's threads. */
#define LEARNED_BLOCK 256
typedef struct learned_job {
	const kv_view *kv;
	int n;
	float *rows;    /* [threads][LEARNED_BLOCK][n_in] */
	float *scratch; /* [threads][n_hidden] */
	float *out;
} learned_job;

static void learned_block(void *arg, int b, int thread)
{
	const learned_job *J = arg;
	const reader_net *r = J->kv->reader;
	int p0 = b * LEARNED_BLOCK, m = J->n - p0 < LEARNED_BLOCK ? J->n - p0 : LEARNED_BLOCK;
	float *rows = J->rows + (size_t)thread * LEARNED_BLOCK * r->n_in;
	for (int i = 0; i < m; i++)
		reader_features(J->kv->hidden + (size_t)(p0 + i) * r->n_embd, r->n_embd, p0 + i, J->n,
				rows + (size_t)i * r->n_in);
	reader_forward(r, rows, m, J->scratch + (size_t)thread * r->n_hidden, J->out + (size_t)p0 * r->n_out);
}

static hsq_status learned_scores(const kv_view *kv, int n, float **out)
{
	hsq_status st = HSQ_OK;
	const reader_net *r = kv->reader;
	int T = pool_threads(kv->pool);
	learned_job J = { kv, n, malloc((size_t)T * LEARNED_BLOCK * r->n_in * sizeof(float)),
			  malloc((size_t)T * r->n_hidden * sizeof(float)), malloc((size_t)n * r->n_out * sizeof(float)) };
	if (!J.rows || !J.scratch || !J.out) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the learned reader's scores of %d tokens", n);
		free(J.out);
		J.out = NULL;
	} else {
		pool_run(kv->pool, (n + LEARNED_BLOCK - 1) / LEARNED_BLOCK, learned_block, &J);
	}
	free(J.rows);
	free(J.scratch);
	*out = J.out;
	return st;
}

typedef struct ranked {
	float key;
	int32_t idx;
} ranked;

static int by_key_desc(const void *a, const void *b)
{
	const ranked *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return (x->idx > y->idx) - (x->idx < y->idx); /* ties: earlier first */
}

/* The k indices with the largest key[idx] among idx[0..m-1] get mark[] = 1. */
static void mark_top(const float *key, const int32_t *idx, int m, int k, ranked *tmp, uint8_t *mark)
{
	if (k > m)
		k = m;
	if (k <= 0)
		return;
	for (int i = 0; i < m; i++)
		tmp[i] = (ranked){ key[idx[i]], idx[i] };
	qsort(tmp, (size_t)m, sizeof *tmp, by_key_desc);
	for (int i = 0; i < k; i++)
		mark[tmp[i].idx] = 1;
}

/* Tokens per head that streaming/snapkv keep by default: the hsq fast tier
 * of the same context in bytes, divided by the bytes of one 4-bit token. */
static int eviction_keep(const struct hsq_tiers *t, int n)
{
	const hsq_tier_params *p = &t->params;
	int fixed = p->sinks + p->window < n ? p->sinks + p->window : n;
	int rest = n - fixed, flagged = (int)(p->l1_fraction * rest);
	int grouped = rest - flagged, blocks = (grouped + p->group_size - 1) / p->group_size;
	int groups = blocks + (p->group_size == 16 ? (int)lroundf(p->medium_fraction * blocks) : 0);
	double bytes = (double)(fixed + flagged) * tier_code4_pair(t) + (double)groups * tier_code3_pair(t) +
		       (double)tier_pq_head_bytes((uint64_t)(grouped > 0 ? grouped : 0), t->head_dim);
	int keep = (int)(bytes / tier_code4_pair(t));
	return keep < n ? keep : n;
}

/* Positions of L1 for one head: sinks, the recent window and the top
 * `flagged` others by mass; sel[] gets 1 for L1 positions. */
static void choose_l1(int n, int sinks, int window, int flagged, const float *mass, int32_t *order, ranked *tmp,
		      uint8_t *sel)
{
	memset(sel, 0, (size_t)n);
	for (int p = 0; p < n && p < sinks; p++)
		sel[p] = 1;
	for (int p = n - window > 0 ? n - window : 0; p < n; p++)
		sel[p] = 1;
	int m = 0;
	for (int p = 0; p < n; p++)
		if (!sel[p])
			order[m++] = p;
	if (mass)
		mark_top(mass, order, m, flagged, tmp, sel);
}

hsq_status tiers_build(const kv_view *kv, struct hsq_tiers *t)
{
	hsq_status st = HSQ_OK;
	const hsq_tier_params *p = &t->params;
	int n = kv->n_tokens, hd = t->head_dim, H = t->n_head_kv;
	size_t kvw = (size_t)H * hd;
	float *k_rope = NULL, *k_pre = NULL, *v = NULL, *mass = NULL, *tmp = NULL, *bmass = NULL, *learned = NULL;
	int32_t *order = NULL, *idx = NULL, *pos = NULL, *rest = NULL, *border = NULL;
	uint8_t *sel = NULL, *codes = NULL, *split = NULL;
	ranked *rk = NULL;
	float *kr_buf = NULL;
	size_t kr_cap = 0;
	int rounded_by_query = 0;
	uint8_t sum[2 * 4 * HSQ_CODEC_MAX_DIM];

	if ((st = tiers_rope_reserve(t, kv->n_ctx)))
		return st;
	int reads = t->mode == HSQ_MODE_HSQ || t->mode == HSQ_MODE_SNAPKV;
	int needs_obs = reads && p->reader != HSQ_READER_KEY_NORM;
	int n_obs = p->obs_window < n ? p->obs_window : n;
	if (needs_obs && n > 0 && kv->obs_from > n - n_obs)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"the %s reader needs the queries of the last %d positions, but only positions from %d on were evaluated in this context (one loaded from a snapshot has none); evaluate the last %d tokens here before compressing, or use the key-norm reader",
				hsq_reader_name(p->reader), n_obs, kv->obs_from, n_obs);
	if (reads && p->reader == HSQ_READER_LEARNED) {
		if (!kv->reader)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"the learned reader needs a calibration; give the context one before evaluating the document");
		if (n > 0 && (!kv->hidden || kv->hidden_from > 0))
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"the learned reader needs the hidden states of every position, but only positions from %d on were evaluated with the calibration set; set it before evaluating the document",
					kv->hidden ? kv->hidden_from : n);
		if (n > 0 && (st = learned_scores(kv, n, &learned)))
			return st;
		memcpy(t->calibration_sha256, kv->calibration_sha256, sizeof t->calibration_sha256);
		t->has_calibration = 1;
	}

	size_t rows = (size_t)(n > 0 ? n : 1);
	k_rope = malloc(rows * kvw * sizeof *k_rope);
	k_pre = malloc(rows * kvw * sizeof *k_pre);
	v = malloc(rows * kvw * sizeof *v);
	mass = malloc(rows * sizeof *mass);
	tmp = malloc((rows + 2 * (size_t)hd) * sizeof *tmp);
	bmass = malloc(rows * sizeof *bmass);
	order = malloc(rows * sizeof *order);
	idx = malloc(rows * sizeof *idx);
	pos = malloc(rows * sizeof *pos);
	rest = malloc(rows * sizeof *rest);
	border = malloc(rows * sizeof *border);
	sel = malloc(rows);
	split = malloc(rows);
	codes = malloc(rows * tier_code4_pair(t));
	rk = malloc(rows * sizeof *rk);
	if (!k_rope || !k_pre || !v || !mass || !tmp || !bmass || !order || !idx || !pos || !rest || !border || !sel ||
	    !split || !codes || !rk) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory compressing %d tokens", n);
		goto done;
	}
	int32_t *all_pos = pos;
	for (int i = 0; i < n; i++)
		all_pos[i] = i;

	for (int l = 0; l < t->n_layer && n > 0; l++) {
		tier_layer *L = &t->layers[l];
		const rope_table *R = &t->rope[L->rope_table];
		kv->read(kv->owner, l, 0, 0, n, k_rope);
		kv->read(kv->owner, l, 1, 0, n, v);
		memcpy(k_pre, k_rope, (size_t)n * kvw * sizeof *k_pre);
		for (int i = 0; i < n; i++)
			for (int g = 0; g < H; g++)
				tiers_rope_rows(t, R, k_pre + (size_t)i * kvw + (size_t)g * hd, &all_pos[i], 1, -1);
		tiers_set_centres(t, l, k_pre, v, kvw, L->window && n > L->window ? n - L->window : 0, n, p->sinks);

		for (int g = 0; g < H; g++) {
			tier_head *h = &L->heads[g];
			const float *kg = k_pre + (size_t)g * hd, *vg = v + (size_t)g * hd;
			int have_kr = 0;
			const float *kr = NULL;
			if (L->window) { /* sliding-window layer: only its window, in L1 */
				int first = n > L->window ? n - L->window : 0, m = n - first;
				for (int i = 0; i < m; i++)
					idx[i] = first + i;
				if (p->key_rounding == HSQ_KEY_ROUNDING_QUERY &&
				    (st = key_rounding(kv, t, l, g, R, n, idx, m, &kr_buf, &kr_cap, &have_kr)))
					goto done;
				kr = have_kr ? kr_buf : NULL;
				rounded_by_query |= have_kr;
				if ((st = encode_pairs(t, h, kg, vg, kvw, m, idx, kr, codes)) ||
				    (st = tiers_head_add_l1(t, l, h, m, idx, codes, NULL)))
					goto done;
				continue;
			}
			int sinks = p->sinks, window = p->window, flagged = 0;
			const float *score = NULL;
			switch (t->mode) {
			case HSQ_MODE_QUANT:
				sinks = n;
				window = 0;
				break;
			case HSQ_MODE_STREAMING: {
				int keep = p->keep ? p->keep : eviction_keep(t, n);
				sinks = sinks < keep ? sinks : keep;
				window = keep - sinks;
				break;
			}
			case HSQ_MODE_SNAPKV: {
				int keep = p->keep ? p->keep : eviction_keep(t, n);
				sinks = sinks < keep ? sinks : keep;
				window = window < keep - sinks ? window : keep - sinks;
				flagged = keep - sinks - window;
				float unused;
				reader_scores(kv, t, l, g, k_rope, k_pre, n, learned, mass, tmp, &unused);
				score = mass;
				break;
			}
			default: { /* hsq */
				int fixed = sinks + window < n ? sinks + window : n;
				flagged = (int)(p->l1_fraction * (n - fixed));
				reader_scores(kv, t, l, g, k_rope, k_pre, n, learned, mass, tmp, &h->induction);
				score = mass;
			}
			}
			choose_l1(n, sinks, window, flagged, score, order, rk, sel);
			int n1 = 0, m = 0;
			for (int i = 0; i < n; i++) {
				if (sel[i])
					idx[n1++] = i;
				else
					rest[m++] = i;
			}
			/* quant and hsq encode every token (L1 or L3); the eviction
			 * modes only L1's */
			int evicts = t->mode == HSQ_MODE_STREAMING || t->mode == HSQ_MODE_SNAPKV;
			if (p->key_rounding == HSQ_KEY_ROUNDING_QUERY &&
			    (st = key_rounding(kv, t, l, g, R, n, evicts ? idx : NULL, n1, &kr_buf, &kr_cap, &have_kr)))
				goto done;
			kr = have_kr ? kr_buf : NULL;
			rounded_by_query |= have_kr;
			if ((st = encode_pairs(t, h, kg, vg, kvw, n1, idx, kr, codes)) ||
			    (st = tiers_head_add_l1(t, l, h, n1, idx, codes, NULL)))
				goto done;
			if (t->mode != HSQ_MODE_HSQ || m == 0)
				continue; /* quant keeps all; eviction modes drop the rest */

			/* L2/L3: blocks of group_size over the remaining tokens in
			 * position order; the reader splits the blocks with the most
			 * mass into two medium groups. */
			int gs = p->group_size, nb = (m + gs - 1) / gs;
			memset(split, 0, (size_t)nb);
			int n_medium = gs == 16 ? (int)lroundf(p->medium_fraction * nb) : 0;
			if (n_medium > 0) {
				for (int b = 0; b < nb; b++) {
					double s = 0;
					for (int i = b * gs; i < (b + 1) * gs && i < m; i++)
						s += mass[rest[i]];
					bmass[b] = (float)s;
					border[b] = b;
				}
				mark_top(bmass, border, nb, n_medium, rk, split);
			}
			const float *weights = p->compressor == HSQ_COMPRESSOR_OBS_WEIGHTED ? mass : NULL;
			for (int b = 0; b < nb; b++) {
				int b0 = b * gs, bn = b0 + gs <= m ? gs : m - b0;
				int parts = split[b] && bn > gs / 2 ? 2 : 1;
				for (int part = 0; part < parts; part++) {
					int s0 = parts == 2 ? b0 + part * (gs / 2) : b0;
					int sn = parts == 2 ? (part ? bn - gs / 2 : gs / 2) : bn;
					const int32_t *gi = rest + s0;
					if ((st = encode_pairs(t, h, kg, vg, kvw, sn, gi, kr, codes)) ||
					    (st = encode_summary(t, h, R, k_rope + (size_t)g * hd, vg, kvw, sn, gi, weights, tmp,
								 sum)) ||
					    (st = tiers_head_add_group(t, R, h, sn, gi, codes, NULL, sum,
								       parts == 2 ? HSQ_GROUP_MEDIUM : HSQ_GROUP_LOW)))
						goto done;
				}
			}
		}
	}
	t->n_tokens = n;
	t->params.key_rounding = rounded_by_query ? HSQ_KEY_ROUNDING_QUERY : HSQ_KEY_ROUNDING_NEAREST; /* as built */
	if (!(st = tiers_pq_fit_all(t, kv->pool)) && !(st = tiers_pick_retrieval(t)))
		st = tiers_build_residuals(kv, t);
done:
	free(learned);
	free(kr_buf);
	free(k_rope);
	free(k_pre);
	free(v);
	free(mass);
	free(tmp);
	free(bmass);
	free(order);
	free(idx);
	free(pos);
	free(rest);
	free(border);
	free(sel);
	free(split);
	free(codes);
	free(rk);
	return st;
}

/* Residual codes of one head's tokens (L1 or L3: n codes at pos[]), from
 * the layer's keys before RoPE k_pre (rows of stride floats). */
static hsq_status residuals_of(const struct hsq_tiers *t, const tier_head *h, const float *k_pre, size_t stride,
			       int n, const int32_t *pos, const uint8_t *codes, uint8_t *res)
{
	hsq_status st;
	for (int i = 0; i < n; i++)
		if ((st = tiers_encode_residual(t, h, k_pre + (size_t)pos[i] * stride, codes + (size_t)i * tier_code4_pair(t),
						res + (size_t)i * t->code4)))
			return st;
	return HSQ_OK;
}

hsq_status tiers_build_residuals(const kv_view *kv, struct hsq_tiers *t)
{
	hsq_status st = HSQ_OK;
	int n = kv->n_tokens, hd = t->head_dim, H = t->n_head_kv, n_heads = t->n_layer * H;
	size_t kvw = (size_t)H * hd;
	float *k = NULL, *score = malloc((size_t)n_heads * sizeof *score);
	uint8_t *global = malloc((size_t)n_heads), *picked = malloc((size_t)n_heads);
	if (!score || !global || !picked) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory picking the residual heads");
		goto done;
	}
	head_scores(t, score, global);
	pick_residual(t, score, global, n_heads, picked);
	for (int l = 0; l < t->n_layer && n > 0; l++) {
		tier_layer *L = &t->layers[l];
		int any = 0;
		for (int g = 0; g < H; g++)
			any |= picked[l * H + g];
		if (!any)
			continue;
		if (!k && !(k = malloc((size_t)n * kvw * sizeof *k))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the residual key codes of %d tokens", n);
			goto done;
		}
		kv->read(kv->owner, l, 0, 0, n, k);
		const rope_table *R = &t->rope[L->rope_table];
		for (int g = 0; g < H; g++) {
			tier_head *h = &L->heads[g];
			if (!picked[l * H + g])
				continue;
			for (int i = 0; i < n; i++) /* back before RoPE */
				tiers_rope_rows(t, R, k + (size_t)i * kvw + (size_t)g * hd, &i, 1, -1);
			if ((st = tiers_head_enable_res(t, h)) ||
			    (st = residuals_of(t, h, k + (size_t)g * hd, kvw, h->n_l1, h->l1_pos, h->l1_code, h->l1_res)) ||
			    (st = residuals_of(t, h, k + (size_t)g * hd, kvw, h->n_l3, h->l3_pos, h->l3_code, h->l3_res)))
				goto done;
		}
	}
	tiers_refresh_residual_heads(t);
	t->params.residual_heads = tiers_residual_head_count(t); /* as built */
done:
	free(k);
	free(score);
	free(global);
	free(picked);
	return st;
}

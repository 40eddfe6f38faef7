/* context.c - inference contexts and the llama forward pass.
 *
 * Tokens go through the model in chunks of at most n_batch; each chunk's
 * K and V land in the cache at their positions, then every token of the
 * chunk attends causally to the cache. All math goes through the backend
 * table (backend.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/error.h"
#include "context/context.h"
#include "kv/tiers.h"
#include "learn/calibration.h"

hsq_context_params hsq_context_default_params(void)
{
	hsq_context_params p = { 0, 0, 0 };
	return p;
}

void hsq_context_free(hsq_context *ctx)
{
	if (!ctx)
		return;
	hsq_backend *be = ctx->backend;
	if (be) {
		const hsq_backend_ops *o = be->ops;
		int n_layer = ctx->model->info.n_layer;
		for (int l = 0; l < n_layer; l++) {
			if (ctx->k_cache)
				o->release_kv(be, ctx->k_cache[l]);
			if (ctx->v_cache)
				o->release_kv(be, ctx->v_cache[l]);
		}
		float *bufs[] = { ctx->x, ctx->xb, ctx->q, ctx->k, ctx->v, ctx->att,
				  ctx->proj, ctx->gate, ctx->up, ctx->logits };
		for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
			o->release(be, bufs[i]);
		o->destroy(be);
	}
	free(ctx->k_cache);
	free(ctx->v_cache);
	free(ctx->kv_cap);
	free(ctx->obs_q);
	free(ctx->hidden);
	tiers_free(ctx->tiers);
	free(ctx->tokens);
	free(ctx->pos);
	free(ctx);
}

hsq_status hsq_context_new(const hsq_model *model, const hsq_context_params *params, hsq_context **out)
{
	return context_new(model, params, 1, out);
}

hsq_status context_new(const hsq_model *model, const hsq_context_params *params, int with_kv, hsq_context **out)
{
	hsq_status st;
	const hsq_model_info *mi = &model->info;
	hsq_context_params p = params ? *params : hsq_context_default_params();
	*out = NULL;
	if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "context size, batch and threads must not be negative");
	if (p.n_ctx == 0)
		p.n_ctx = mi->n_ctx_train;
	if (p.n_ctx > mi->n_ctx_train)
		return hsq_fail(HSQ_ERR_CONTEXT_FULL,
				"context of %d tokens is longer than the model's %d; ask for %d or less", p.n_ctx,
				mi->n_ctx_train, mi->n_ctx_train);
	if (p.n_batch == 0)
		p.n_batch = 512;
	if (p.n_batch > p.n_ctx)
		p.n_batch = p.n_ctx;

	hsq_context *ctx = calloc(1, sizeof *ctx);
	if (!ctx)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory creating a context");
	ctx->model = model;
	ctx->n_ctx = p.n_ctx;
	ctx->n_batch = p.n_batch;
	if ((st = backend_cpu_new(p.n_threads, &ctx->backend)))
		goto fail;
	if ((st = ctx->backend->ops->prepare(ctx->backend, model, p.n_ctx)))
		goto fail;

	hsq_backend *be = ctx->backend;
	size_t B = (size_t)p.n_batch, kvw = context_kv_width(ctx);
	size_t qw = (size_t)mi->n_head * mi->head_dim;
	ctx->tokens = calloc((size_t)p.n_ctx, sizeof *ctx->tokens);
	ctx->pos = calloc(B, sizeof *ctx->pos);
	ctx->k_cache = calloc((size_t)mi->n_layer, sizeof *ctx->k_cache);
	ctx->v_cache = calloc((size_t)mi->n_layer, sizeof *ctx->v_cache);
	ctx->kv_cap = calloc((size_t)mi->n_layer, sizeof *ctx->kv_cap);
	if (!ctx->tokens || !ctx->pos || !ctx->k_cache || !ctx->v_cache || !ctx->kv_cap)
		goto nomem;
	ctx->has_full_kv = with_kv;
	ctx->obs_q = malloc((size_t)mi->n_layer * HSQ_OBS_MAX * qw * sizeof *ctx->obs_q);
	if (!ctx->obs_q)
		goto nomem;
	for (int l = 0; l < mi->n_layer && with_kv; l++) {
		int w = model->layers[l].window;
		ctx->kv_cap[l] = w && w + p.n_batch < p.n_ctx ? w + p.n_batch : p.n_ctx;
		ctx->k_cache[l] = be->ops->alloc_kv(be, (size_t)ctx->kv_cap[l] * kvw);
		ctx->v_cache[l] = be->ops->alloc_kv(be, (size_t)ctx->kv_cap[l] * kvw);
		if (!ctx->k_cache[l] || !ctx->v_cache[l])
			goto nomem;
	}
	ctx->x = be->ops->alloc(be, B * mi->n_embd);
	ctx->xb = be->ops->alloc(be, B * mi->n_embd);
	ctx->proj = be->ops->alloc(be, B * mi->n_embd);
	ctx->q = be->ops->alloc(be, B * qw);
	ctx->att = be->ops->alloc(be, B * qw);
	ctx->k = be->ops->alloc(be, B * kvw);
	ctx->v = be->ops->alloc(be, B * kvw);
	ctx->gate = be->ops->alloc(be, B * mi->n_ff);
	ctx->up = be->ops->alloc(be, B * mi->n_ff);
	ctx->logits = be->ops->alloc(be, B * mi->n_vocab);
	if (!ctx->x || !ctx->xb || !ctx->proj || !ctx->q || !ctx->att || !ctx->k || !ctx->v || !ctx->gate ||
	    !ctx->up || !ctx->logits)
		goto nomem;
	*out = ctx;
	return HSQ_OK;
nomem:
	st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for a %d-token context (%.1f MiB of KV cache); ask for a smaller context",
		      p.n_ctx, 2.0 * mi->n_layer * p.n_ctx * (double)context_kv_width(ctx) * 2 / 1048576.0);
fail:
	hsq_context_free(ctx);
	return st;
}

/* Writes n rows for positions p0.. into a layer cache of cap rows (ring). */
static void store_rows(hsq_backend *be, uint16_t *cache, int cap, size_t width, int p0, int n, const float *rows)
{
	int r0 = p0 % cap, first = cap - r0 < n ? cap - r0 : n;
	be->ops->store_kv(be, cache + (size_t)r0 * width, rows, (size_t)first * width);
	if (first < n)
		be->ops->store_kv(be, cache, rows + (size_t)first * width, (size_t)(n - first) * width);
}

/* Keeps the chunk's queries of the last HSQ_OBS_MAX positions (the
 * reader's observation window). */
static void keep_obs_queries(hsq_context *ctx, int l, int n)
{
	size_t qw = (size_t)ctx->model->info.n_head * ctx->model->info.head_dim;
	for (int t = n > HSQ_OBS_MAX ? n - HSQ_OBS_MAX : 0; t < n; t++)
		ctx->backend->ops->download(ctx->backend,
					    ctx->obs_q + ((size_t)l * HSQ_OBS_MAX + (size_t)(ctx->pos[t] % HSQ_OBS_MAX)) * qw,
					    ctx->q + (size_t)t * qw, qw);
}

/* One chunk of n tokens at positions n_past.. through every layer. Leaves
 * the final hidden states (normalised) in ctx->xb. */
static void forward_chunk(hsq_context *ctx, const hsq_token *tokens, int n)
{
	const hsq_model *m = ctx->model;
	const hsq_model_info *mi = &m->info;
	hsq_backend *be = ctx->backend;
	const hsq_backend_ops *o = be->ops;
	size_t E = (size_t)mi->n_embd, kvw = context_kv_width(ctx);
	int hd = mi->head_dim;
	float attn_scale = 1.0f / sqrtf((float)hd);

	for (int t = 0; t < n; t++)
		ctx->pos[t] = ctx->n_past + t;
	o->embed(be, &m->tok_embd, tokens, n, ctx->x);
	if (m->embd_scale != 1.0f)
		o->scale(be, ctx->x, m->embd_scale, (size_t)n * E);
	for (int l = 0; l < mi->n_layer; l++) {
		const hsq_layer *L = &m->layers[l];
		o->rmsnorm(be, ctx->x, L->attn_norm, n, (int)E, mi->rms_eps, ctx->xb);
		o->matmul(be, &L->wq, ctx->xb, n, ctx->q);
		o->matmul(be, &L->wk, ctx->xb, n, ctx->k);
		o->matmul(be, &L->wv, ctx->xb, n, ctx->v);
		if (L->q_norm) { /* per-head RMSNorm before RoPE (qwen3, gemma3) */
			o->rmsnorm(be, ctx->q, L->q_norm, n * mi->n_head, hd, mi->rms_eps, ctx->q);
			o->rmsnorm(be, ctx->k, L->k_norm, n * mi->n_head_kv, hd, mi->rms_eps, ctx->k);
		}
		o->rope(be, ctx->q, ctx->pos, n, mi->n_head, hd, L->rope_base, m->rope_neox);
		o->rope(be, ctx->k, ctx->pos, n, mi->n_head_kv, hd, L->rope_base, m->rope_neox);
		keep_obs_queries(ctx, l, n);
		if (ctx->has_full_kv) {
			store_rows(be, ctx->k_cache[l], ctx->kv_cap[l], kvw, ctx->n_past, n, ctx->k);
			store_rows(be, ctx->v_cache[l], ctx->kv_cap[l], kvw, ctx->n_past, n, ctx->v);
		}
		if (ctx->tiers) {
			int probe = ctx->tiers->probe && ctx->has_full_kv;
			o->attend_tiered(be, ctx->tiers, l, ctx->q, ctx->k, ctx->v, ctx->pos, n,
					 probe ? ctx->k_cache[l] : NULL, probe ? ctx->v_cache[l] : NULL,
					 probe ? ctx->kv_cap[l] : 0, ctx->att);
		} else {
			o->attention(be, ctx->q, ctx->k_cache[l], ctx->v_cache[l], ctx->kv_cap[l], ctx->pos, n,
				     mi->n_head, mi->n_head_kv, hd, L->window, attn_scale, ctx->att);
		}
		o->matmul(be, &L->wo, ctx->att, n, ctx->proj);
		if (L->post_attn_norm)
			o->rmsnorm(be, ctx->proj, L->post_attn_norm, n, (int)E, mi->rms_eps, ctx->proj);
		o->add(be, ctx->x, ctx->proj, (size_t)n * E);
		o->rmsnorm(be, ctx->x, L->ffn_norm, n, (int)E, mi->rms_eps, ctx->xb);
		o->matmul(be, &L->w_gate, ctx->xb, n, ctx->gate);
		o->matmul(be, &L->w_up, ctx->xb, n, ctx->up);
		if (m->ffn_act == FFN_GELU_TANH)
			o->geglu(be, ctx->gate, ctx->up, (size_t)n * mi->n_ff);
		else
			o->swiglu(be, ctx->gate, ctx->up, (size_t)n * mi->n_ff);
		o->matmul(be, &L->w_down, ctx->gate, n, ctx->proj);
		if (L->post_ffn_norm)
			o->rmsnorm(be, ctx->proj, L->post_ffn_norm, n, (int)E, mi->rms_eps, ctx->proj);
		o->add(be, ctx->x, ctx->proj, (size_t)n * E);
		if (ctx->hidden && l == ctx->hidden_layer)
			o->download(be, ctx->hidden + (size_t)ctx->n_past * E, ctx->x, (size_t)n * E);
	}
	o->rmsnorm(be, ctx->x, m->out_norm, n, (int)E, mi->rms_eps, ctx->xb);
}

void context_kv_read(const hsq_context *ctx, int l, int which, int p0, int n, float *host)
{
	size_t width = context_kv_width(ctx);
	int cap = ctx->kv_cap[l], oldest = ctx->n_past - cap;
	const uint16_t *cache = which ? ctx->v_cache[l] : ctx->k_cache[l];
	for (int i = 0; i < n; i++) {
		int p = p0 + i;
		float *dst = host + (size_t)i * width;
		if (p < oldest || p >= ctx->n_past)
			memset(dst, 0, width * sizeof *dst);
		else
			ctx->backend->ops->download_kv(ctx->backend, dst, cache + (size_t)(p % cap) * width, width);
	}
}

static void kv_view_read(const void *owner, int l, int which, int p0, int n, float *host)
{
	context_kv_read(owner, l, which, p0, n, host);
}

kv_view context_kv_view(const hsq_context *ctx)
{
	return (kv_view){ .n_tokens = ctx->n_past,
			  .n_ctx = ctx->n_ctx,
			  .tokens = ctx->tokens,
			  .obs_q = ctx->obs_q,
			  .obs_from = ctx->obs_from,
			  .reader = ctx->calibration ? &ctx->calibration->reader : NULL,
			  .hidden = ctx->calibration ? ctx->hidden : NULL,
			  .hidden_from = ctx->hidden_from,
			  .calibration_sha256 = ctx->calibration ? ctx->calibration->info.sha256 : NULL,
			  .pool = ctx->backend->ops->host_pool(ctx->backend),
			  .read = kv_view_read,
			  .owner = ctx };
}

void context_kv_write(hsq_context *ctx, int l, int which, int n_tokens, uint64_t off, const float *src, size_t n)
{
	size_t width = context_kv_width(ctx);
	int cap = ctx->kv_cap[l], oldest = n_tokens - cap;
	uint16_t *cache = which ? ctx->v_cache[l] : ctx->k_cache[l];
	while (n) {
		int p = (int)(off / width);
		size_t col = off % width, take = width - col < n ? width - col : n;
		if (p >= oldest && p < n_tokens)
			ctx->backend->ops->upload_kv(ctx->backend, cache + (size_t)(p % cap) * width + col, src, take);
		off += take;
		src += take;
		n -= take;
	}
}

hsq_status hsq_context_eval(hsq_context *ctx, const hsq_token *tokens, size_t n, float *logits, int all_logits)
{
	const hsq_model_info *mi = &ctx->model->info;
	hsq_backend *be = ctx->backend;
	if (n == 0)
		return hsq_fail(HSQ_ERR_EMPTY_INPUT, "no tokens to evaluate");
	if (n > (size_t)(ctx->n_ctx - ctx->n_past))
		return hsq_fail(HSQ_ERR_CONTEXT_FULL,
				"%zu more tokens do not fit: %d of %d context positions are used; a larger context holds them (model maximum %d)",
				n, ctx->n_past, ctx->n_ctx, mi->n_ctx_train);
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= mi->n_vocab)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "token id %d at index %zu is outside the vocabulary (0..%d)",
					tokens[i], i, mi->n_vocab - 1);
	size_t V = (size_t)mi->n_vocab, E = (size_t)mi->n_embd;
	for (size_t done = 0; done < n;) {
		int chunk = (int)(n - done < (size_t)ctx->n_batch ? n - done : (size_t)ctx->n_batch);
		hsq_status st;
		if (ctx->tiers && (st = tiers_reserve_chunk(ctx->tiers, chunk)))
			return st;
		forward_chunk(ctx, tokens + done, chunk);
		if (ctx->tiers) {
			ctx->tiers->n_tokens += chunk;
			if ((st = tiers_compact(ctx->tiers)))
				return st;
		}
		int last_chunk = done + (size_t)chunk == n;
		if (logits && all_logits) {
			be->ops->matmul(be, &ctx->model->output, ctx->xb, chunk, ctx->logits);
			be->ops->download(be, logits + done * V, ctx->logits, (size_t)chunk * V);
		} else if (logits && last_chunk) {
			be->ops->matmul(be, &ctx->model->output, ctx->xb + (size_t)(chunk - 1) * E, 1, ctx->logits);
			be->ops->download(be, logits, ctx->logits, V);
		}
		memcpy(ctx->tokens + ctx->n_past, tokens + done, (size_t)chunk * sizeof *tokens);
		ctx->n_past += chunk;
		done += (size_t)chunk;
	}
	return HSQ_OK;
}

int hsq_context_n_past(const hsq_context *ctx) { return ctx->n_past; }
int hsq_context_n_ctx(const hsq_context *ctx) { return ctx->n_ctx; }
const hsq_token *hsq_context_tokens(const hsq_context *ctx) { return ctx->tokens; }
const hsq_model *hsq_context_model(const hsq_context *ctx) { return ctx->model; }

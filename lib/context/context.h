/* context.h - an inference context: KV cache, activations, tokens (internal). */
#ifndef HSQ_CONTEXT_H
#define HSQ_CONTEXT_H

#include "backend/backend.h"
#include "hsq.h"
#include "kv/kv_view.h"
#include "model/model.h"

struct hsq_context {
	const hsq_model *model;
	hsq_backend *backend;
	int n_ctx;        /* positions the KV cache holds */
	int n_batch;      /* max tokens per forward chunk */
	int n_past;       /* positions filled */
	hsq_token *tokens; /* [n_ctx] tokens at positions 0..n_past-1 (host) */
	/* KV cache, backend memory, one buffer per layer:
	 * k_cache[l], v_cache[l]: [kv_cap[l]][n_head_kv * head_dim] fp16, K
	 * after RoPE; position p lives in row p % kv_cap[l]. Full-attention
	 * layers hold n_ctx rows; sliding-window layers a ring of window +
	 * n_batch rows (a chunk writes its rows before attending, so the ring
	 * must hold the window behind the chunk's first token plus the chunk). */
	uint16_t **k_cache;
	uint16_t **v_cache;
	int *kv_cap;
	/* Activations for one chunk of n_batch tokens (backend memory). */
	float *x;      /* [n_batch][n_embd] residual stream */
	float *xb;     /* [n_batch][n_embd] normalised input */
	float *q;      /* [n_batch][n_head * head_dim] */
	float *k;      /* [n_batch][n_head_kv * head_dim] */
	float *v;      /* [n_batch][n_head_kv * head_dim] */
	float *att;    /* [n_batch][n_head * head_dim] */
	float *proj;   /* [n_batch][n_embd] */
	float *gate;   /* [n_batch][n_ff] */
	float *up;     /* [n_batch][n_ff] */
	float *logits; /* [n_batch][n_vocab] */
	int *pos;      /* [n_batch] positions of the chunk's tokens (host) */
	/* Queries (after RoPE) of the last HSQ_OBS_MAX positions evaluated,
	 * per layer: obs_q[(l * HSQ_OBS_MAX + p % HSQ_OBS_MAX) * n_head * head_dim];
	 * positions from obs_from on were evaluated here (the reader's input). */
	float *obs_q;
	int obs_from;
	/* The residual stream after layer hidden_layer of every position from
	 * hidden_from on: hidden[p * n_embd], n_ctx rows (host), NULL when
	 * none is kept (hsq_context_keep_hidden; the learned reader's input). */
	float *hidden;
	int hidden_layer;
	int hidden_from;
	const hsq_calibration *calibration; /* the learned parts, or NULL (not owned) */
	/* Compressed KV (NULL: full mode). has_full_kv = 0 when the context was
	 * loaded from a tiered snapshot and holds no full cache. */
	struct hsq_tiers *tiers;
	int has_full_kv;
};

/* hsq_context_new without the full KV cache when with_kv = 0 (contexts
 * that attend through tiers loaded from a snapshot). */
hsq_status context_new(const hsq_model *model, const hsq_context_params *params, int with_kv, hsq_context **out);

/* Size in floats of one layer's K (or V) cache row: n_head_kv * head_dim. */
static inline size_t context_kv_width(const hsq_context *ctx)
{
	return (size_t)ctx->model->info.n_head_kv * (size_t)ctx->model->info.head_dim;
}

/* Copies K (which = 0) or V (1) of layer l for positions p0..p0+n-1 to
 * host rows [n][kv_width]; positions the layer's ring no longer holds
 * (older than n_past - kv_cap[l]) come back as zeros. */
void context_kv_read(const hsq_context *ctx, int l, int which, int p0, int n, float *host);
/* Stores floats [off, off + n) of a [n_tokens][kv_width] plane (K or V of
 * layer l) into the cache, dropping the rows of positions a ring layer
 * would no longer hold once n_tokens positions are filled. */
/* The read-only view of ctx's full cache that the tier builder takes. */
kv_view context_kv_view(const hsq_context *ctx);
void context_kv_write(hsq_context *ctx, int l, int which, int n_tokens, uint64_t off, const float *src, size_t n);

#endif

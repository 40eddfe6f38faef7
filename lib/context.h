/* context.h - an inference context: KV cache, activations, tokens (internal). */
#ifndef HSQ_CONTEXT_H
#define HSQ_CONTEXT_H

#include "backend.h"
#include "hsq.h"
#include "model.h"

struct hsq_context {
	const hsq_model *model;
	hsq_backend *backend;
	int n_ctx;        /* positions the KV cache holds */
	int n_batch;      /* max tokens per forward chunk */
	int n_past;       /* positions filled */
	hsq_token *tokens; /* [n_ctx] tokens at positions 0..n_past-1 (host) */
	/* KV cache, backend memory, one buffer per layer:
	 * k_cache[l], v_cache[l]: [n_ctx][n_head_kv * head_dim] fp32, K after RoPE. */
	float **k_cache;
	float **v_cache;
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
};

/* Size in floats of one layer's K (or V) cache row: n_head_kv * head_dim. */
static inline size_t context_kv_width(const hsq_context *ctx)
{
	return (size_t)ctx->model->info.n_head_kv * (size_t)ctx->model->info.head_dim;
}

#endif

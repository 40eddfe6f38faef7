/* backend.h - where the transformer's math runs (internal).
 *
 * The forward pass (context/context.c) only calls these operations on
 * buffers the backend allocated, so a device backend (CUDA) can sit behind
 * the same table: it would keep weights, activations, the KV cache and the
 * tiers in device memory and copy only tokens in and logits out. The CPU backend always
 * works and is the reference ("CPU twin") for every device kernel.
 *
 * Shapes: activations are row-major [n_tok][width] fp32. */
#ifndef HSQ_BACKEND_H
#define HSQ_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/threadpool.h"
#include "hsq.h"
#include "kv/tiers.h"
#include "model/model.h"

typedef struct hsq_backend hsq_backend;

typedef struct hsq_backend_ops {
	const char *name;
	void (*destroy)(hsq_backend *be);
	/* Called once per context before any math: size scratch, upload weights. */
	hsq_status (*prepare)(hsq_backend *be, const hsq_model *model, int n_ctx);
	/* Buffers: zeroed, 16-byte aligned; NULL when out of memory. */
	float *(*alloc)(hsq_backend *be, size_t n_floats);
	void (*release)(hsq_backend *be, float *buf);
	void (*upload)(hsq_backend *be, float *dst, const float *src, size_t n_floats);
	void (*download)(hsq_backend *be, float *dst, const float *src, size_t n_floats);
	/* Backend buffer to backend buffer. */
	void (*copy)(hsq_backend *be, float *dst, const float *src, size_t n_floats);
	/* KV cache buffers: fp16 (IEEE half), zeroed; NULL when out of memory.
	 * Rows go in rounded to nearest even (store: from a backend buffer;
	 * upload: from the host) and come out widened exactly (download). */
	uint16_t *(*alloc_kv)(hsq_backend *be, size_t n_halves);
	void (*release_kv)(hsq_backend *be, uint16_t *buf);
	void (*store_kv)(hsq_backend *be, uint16_t *dst, const float *src, size_t n);
	void (*upload_kv)(hsq_backend *be, uint16_t *dst, const float *src, size_t n);
	void (*download_kv)(hsq_backend *be, float *dst, const uint16_t *src, size_t n);

	/* x[n_tok][n_embd] = rows `tokens` of the embedding table. */
	void (*embed)(hsq_backend *be, const hsq_weight *table, const hsq_token *tokens, int n_tok, float *x);
	/* y[n_tok][w->rows] = x[n_tok][w->cols] W^T. Batch-invariant: each
	 * output is summed in the same order whatever n_tok is. */
	void (*matmul)(hsq_backend *be, const hsq_weight *w, const float *x, int n_tok, float *y);
	/* y = x / rms(x) * weight, per row of n floats. */
	void (*rmsnorm)(hsq_backend *be, const float *x, const float *weight, int n_tok, int n, float eps, float *y);
	/* Rotates n_heads heads of head_dim in place; token t at pos[t], angle
	 * pos * base^(-2i/head_dim) for pair i. neox = 0: pairs (2i, 2i+1), the
	 * GGUF llama layout; neox = 1: pairs (i, i + head_dim/2) (qwen3, gemma3). */
	void (*rope)(hsq_backend *be, float *x, const int *pos, int n_tok, int n_heads, int head_dim, float freq_base,
		     int neox);
	/* Causal GQA attention. q[n_tok][n_head*hd]; caches hold `cap` rows of
	 * [n_head_kv*hd], position p in row p % cap. Token t attends to
	 * positions max(0, pos[t] - window + 1)..pos[t] (window 0: from 0).
	 * Scores are q.k * scale. out[n_tok][n_head*hd]. The caches are fp16
	 * (alloc_kv). */
	void (*attention)(hsq_backend *be, const float *q, const uint16_t *k_cache, const uint16_t *v_cache, int cap,
			  const int *pos, int n_tok, int n_head, int n_head_kv, int head_dim, int window, float scale,
			  float *out);
	/* gate[i] = silu(gate[i]) * up[i] for n floats. */
	void (*swiglu)(hsq_backend *be, float *gate, const float *up, size_t n);
	/* gate[i] = gelu_tanh(gate[i]) * up[i] for n floats. */
	void (*geglu)(hsq_backend *be, float *gate, const float *up, size_t n);
	/* x[i] *= s for n floats. */
	void (*scale)(hsq_backend *be, float *x, float s, size_t n);
	/* x[i] += y[i] for n floats. */
	void (*add)(hsq_backend *be, float *x, const float *y, size_t n);

	/* The HSQ tiered attention of one layer for a chunk of n tokens, the
	 * project's main kernel: k, v ([n][n_head_kv * hd], K after RoPE) join
	 * the layer's tail, then every token routes (score_groups below),
	 * fetches and attends over L1, the unfetched groups' summaries, the
	 * fetched groups and the tail up to its position. q and out are
	 * [n][n_head * hd]. full_k/full_v: the layer's full cache (a ring of
	 * full_cap rows) when the recall probe is on, else NULL. The CPU twin
	 * is tiers_attend (kv/tiers_attend.c). */
	void (*attend_tiered)(hsq_backend *be, struct hsq_tiers *t, int layer, const float *q, const float *k,
			      const float *v, const int *pos, int n, const uint16_t *full_k, const uint16_t *full_v,
			      int full_cap, float *out);
	/* The router's score of every group of one KV head for the G query
	 * heads q[G][hd] that share it (an upper bound of q.k over the group's
	 * keys from the router codes): score[n_group]; table and key_score are
	 * scratch (kv/tiers.h). The CPU twin is tiers_pq_group_scores
	 * (kv/tiers_pq.c). */
	void (*score_groups)(hsq_backend *be, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
			     float *table, float *key_score, float *score);
	/* The host threads: the tiers are built on them, and the CPU twins of
	 * the tier operations run on them. */
	hsq_pool *(*host_pool)(hsq_backend *be);
} hsq_backend_ops;

struct hsq_backend {
	const hsq_backend_ops *ops;
};

/* The CPU backend with n_threads workers (0 = online cores). */
hsq_status backend_cpu_new(int n_threads, hsq_backend **out);

#endif

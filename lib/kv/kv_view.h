/* kv_view.h - what the tier builder reads of a context, read-only
 * (internal). The context (lib/context/) fills one in; the tiers never see
 * hsq_context, so they can be built from any owner of a full cache. */
#ifndef HSQ_KV_VIEW_H
#define HSQ_KV_VIEW_H

#include "common/threadpool.h"
#include "hsq.h"
#include "learn/reader_net.h"

typedef struct kv_view {
	int n_tokens;            /* positions 0..n_tokens-1 are filled */
	int n_ctx;               /* positions the owner can hold (RoPE tables are sized for it) */
	const hsq_token *tokens; /* [n_tokens] the token at each position */
	/* Queries after RoPE of the last HSQ_OBS_MAX positions evaluated:
	 * obs_q[(l * HSQ_OBS_MAX + p % HSQ_OBS_MAX) * n_head * head_dim];
	 * positions from obs_from on have theirs (the reader's input). */
	const float *obs_q;
	int obs_from;
	/* The learned reader and its input: the residual stream after layer
	 * reader->tap_layer, hidden[p * n_embd] for positions from hidden_from
	 * on (NULL, NULL when the owner has no calibration). */
	const reader_net *reader;
	const float *hidden;
	int hidden_from;
	const uint8_t *calibration_sha256; /* [32] the calibration holding the reader */
	hsq_pool *pool;          /* host threads the build runs on */
	/* Copies K (which = 0) or V (1) of layer l for positions p0..p0+n-1 to
	 * host rows [n][n_head_kv * head_dim] (K after RoPE); positions a
	 * sliding layer no longer holds come back as zeros. */
	void (*read)(const void *owner, int l, int which, int p0, int n, float *host);
	const void *owner;
} kv_view;

#endif

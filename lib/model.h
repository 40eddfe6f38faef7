/* model.h - a loaded model: the GGUF mapping, hyper-parameters, weight
 * views and tokenizer (internal). */
#ifndef HSQ_MODEL_H
#define HSQ_MODEL_H

#include "gguf.h"
#include "hsq.h"
#include "tokenizer.h"

/* A weight matrix as stored: rows of `cols` elements in ggml `type`,
 * `row_bytes` apart. out = W x computes `rows` dot products of length cols. */
typedef struct hsq_weight {
	const uint8_t *data; /* into the GGUF mapping */
	uint32_t type;       /* enum ggml_type */
	int64_t rows;        /* output features (ne[1]) */
	int64_t cols;        /* input features (ne[0]) */
	size_t row_bytes;    /* stored bytes per row */
} hsq_weight;

typedef struct hsq_layer {
	const float *attn_norm; /* [n_embd] */
	hsq_weight wq;          /* [n_head*head_dim, n_embd] */
	hsq_weight wk;          /* [n_head_kv*head_dim, n_embd] */
	hsq_weight wv;          /* [n_head_kv*head_dim, n_embd] */
	hsq_weight wo;          /* [n_embd, n_head*head_dim] */
	const float *ffn_norm;  /* [n_embd] */
	hsq_weight w_gate;      /* [n_ff, n_embd] */
	hsq_weight w_up;        /* [n_ff, n_embd] */
	hsq_weight w_down;      /* [n_embd, n_ff] */
} hsq_layer;

struct hsq_model {
	gguf_file *gguf;
	hsq_tokenizer *tok;
	hsq_model_info info;
	char arch[32];
	char name[128];
	hsq_weight tok_embd;    /* [n_vocab, n_embd] */
	const float *out_norm;  /* [n_embd] */
	hsq_weight output;      /* [n_vocab, n_embd]; tok_embd when tied */
	hsq_layer *layers;      /* [n_layer] */
	float *f32_copies;      /* norm vectors converted from F16/BF16, if any */
};

#endif

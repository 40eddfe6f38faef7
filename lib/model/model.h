/* model.h - a loaded model: the GGUF mapping, hyper-parameters, weight
 * views and tokenizer (internal). */
#ifndef HSQ_MODEL_H
#define HSQ_MODEL_H

#include "model/gguf.h"
#include "hsq.h"
#include "model/tokenizer.h"

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
	const float *q_norm;    /* [head_dim] per-head RMSNorm of Q (qwen3, gemma3), or NULL */
	const float *k_norm;    /* [head_dim] per-head RMSNorm of K, or NULL */
	const float *post_attn_norm; /* [n_embd] norm of the attention output (gemma3), or NULL */
	const float *post_ffn_norm;  /* [n_embd] norm of the FFN output (gemma3), or NULL */
	int window;             /* sliding attention window in tokens; 0 = attends to everything */
	float rope_base;        /* RoPE theta of this layer (gemma3: local 10K, global 1M) */
	hsq_weight wq;          /* [n_head*head_dim, n_embd] */
	hsq_weight wk;          /* [n_head_kv*head_dim, n_embd] */
	hsq_weight wv;          /* [n_head_kv*head_dim, n_embd] */
	hsq_weight wo;          /* [n_embd, n_head*head_dim] */
	const float *ffn_norm;  /* [n_embd] */
	hsq_weight w_gate;      /* [n_ff, n_embd] */
	hsq_weight w_up;        /* [n_ff, n_embd] */
	hsq_weight w_down;      /* [n_embd, n_ff] */
} hsq_layer;

/* What differs between the supported architectures. */
typedef enum hsq_arch { ARCH_LLAMA, ARCH_QWEN3, ARCH_GEMMA3 } hsq_arch;
typedef enum hsq_ffn_act { FFN_SILU, FFN_GELU_TANH } hsq_ffn_act;

struct hsq_model {
	gguf_file *gguf;
	hsq_arch arch_id;
	int rope_neox;          /* 1: rotate pairs (i, i + d/2) (NeoX); 0: pairs (2i, 2i+1) */
	float embd_scale;       /* multiplies the embedding rows (gemma3: sqrt(n_embd)) */
	hsq_ffn_act ffn_act;    /* gate activation: SwiGLU or GeGLU (tanh GELU) */
	int max_window;         /* largest sliding window of any layer; 0 if none */
	hsq_tokenizer *tok;
	hsq_model_info info;
	char arch[32];
	char name[128];
	hsq_weight tok_embd;    /* [n_vocab, n_embd] */
	const float *out_norm;  /* [n_embd] */
	hsq_weight output;      /* [n_vocab, n_embd]; tok_embd when tied */
	hsq_layer *layers;      /* [n_layer] */
	float *f32_copies;      /* norm vectors converted from F16/BF16, if any: 6 slots per layer + 1 */
};

#endif

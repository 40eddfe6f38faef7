/* model.c - loading a GGUF model: hyper-parameters, weight views, tokenizer.
 *
 * Weights stay in the read-only mapping; a hsq_weight is a view (pointer,
 * type, shape) checked here once, so the math never re-validates. */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "model/dequant.h"
#include "model/ggml_types.h"
#include "model/model.h"

/* Reads "<arch>.<suffix>" as u32 into *out; missing -> dflt (or error if dflt < 0). */
static hsq_status arch_u32(const hsq_model *m, const char *suffix, int64_t dflt, int *out)
{
	char key[96];
	snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
	uint32_t v;
	if (!gguf_find(m->gguf, key)) {
		if (dflt < 0)
			return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is missing; the model file is incomplete",
					m->gguf->path, key);
		*out = (int)dflt;
		return HSQ_OK;
	}
	hsq_status st = gguf_get_u32(m->gguf, key, &v);
	if (st)
		return st;
	if (v == 0 || v > (1u << 30))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' = %u is out of range", m->gguf->path, key, v);
	*out = (int)v;
	return HSQ_OK;
}

/* Reads "<arch>.<suffix>" (or the full key when suffix starts with '=') as
 * a float: missing -> dflt; present but not a number, not finite, or
 * outside [lo, hi] -> an error naming the key and value. */
static hsq_status arch_f32(const hsq_model *m, const char *suffix, float dflt, double lo, double hi, float *out)
{
	char key[96];
	if (suffix[0] == '=')
		snprintf(key, sizeof key, "%s", suffix + 1);
	else
		snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
	const gguf_kv *kv = gguf_find(m->gguf, key);
	int64_t i;
	if (kv && (kv->type == GGUF_TYPE_ARRAY ||
		   (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64 && gguf_kv_as_i64(kv, &i))))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is a %s, not a number; the model file is corrupt",
				m->gguf->path, key, gguf_type_name(kv->type));
	float v = gguf_get_f32_or(m->gguf, key, dflt);
	if (!isfinite(v) || v < lo || v > hi)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' = %g is out of range (%g to %g); the model file is corrupt",
				m->gguf->path, key, (double)v, lo, hi);
	*out = v;
	return HSQ_OK;
}

/* The layers the tensor table holds: one more than the largest N of the
 * "blk.N." tensors (0 if none). */
static int64_t tensor_layers(const gguf_file *f)
{
	int64_t n = 0;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const gguf_str *s = &f->tensors[i].name;
		if (s->len < 6 || memcmp(s->ptr, "blk.", 4))
			continue;
		int64_t l = 0;
		uint64_t j = 4;
		for (; j < s->len && j < 14 && s->ptr[j] >= '0' && s->ptr[j] <= '9'; j++)
			l = l * 10 + (s->ptr[j] - '0');
		if (j > 4 && j < s->len && s->ptr[j] == '.' && l + 1 > n)
			n = l + 1;
	}
	return n;
}

static hsq_status find_tensor(const hsq_model *m, const char *name, const gguf_tensor **out)
{
	*out = gguf_find_tensor(m->gguf, name);
	if (!*out)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%s' is missing; the model file is incomplete", m->gguf->path,
				name);
	return HSQ_OK;
}

/* A matrix of `rows` x `cols` (GGUF ne[0] = cols) in a type we can dequantize. */
static hsq_status get_weight(const hsq_model *m, const char *name, int64_t rows, int64_t cols, hsq_weight *w)
{
	const gguf_tensor *t;
	hsq_status st = find_tensor(m, name, &t);
	if (st)
		return st;
	if (t->n_dims != 2 || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%s' has shape [%llu, %llu], expected [%lld, %lld]",
				m->gguf->path, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				(long long)cols, (long long)rows);
	if (!dequant_supported(t->type))
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: tensor '%s' has type %s, which hsq cannot read yet (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K)",
				m->gguf->path, name, ggml_traits(t->type)->name);
	w->data = t->data;
	w->type = t->type;
	w->rows = rows;
	w->cols = cols;
	w->row_bytes = (size_t)ggml_row_bytes(t->type, (uint64_t)cols);
	return HSQ_OK;
}

/* A vector of n floats; F16/BF16 vectors are converted into `slot`. */
static hsq_status get_vector(const hsq_model *m, const char *name, int64_t n, float *slot, const float **out)
{
	const gguf_tensor *t;
	hsq_status st = find_tensor(m, name, &t);
	if (st)
		return st;
	if (t->n_dims != 1 || (int64_t)t->ne[0] != n)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%s' should be a vector of %lld values", m->gguf->path, name,
				(long long)n);
	if (t->type == GGML_TYPE_F32) {
		*out = (const float *)t->data;
		return HSQ_OK;
	}
	if (t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: norm tensor '%s' has type %s (F32, F16 or BF16 expected)",
				m->gguf->path, name, ggml_traits(t->type)->name);
	dequant_row(t->type, t->data, slot, n);
	*out = slot;
	return HSQ_OK;
}

/* An optional vector: absent -> *out = NULL, present -> checked like get_vector. */
static hsq_status get_vector_opt(const hsq_model *m, const char *name, int64_t n, float *slot, const float **out)
{
	*out = NULL;
	if (!gguf_find_tensor(m->gguf, name))
		return HSQ_OK;
	return get_vector(m, name, n, slot, out);
}

/* llama, qwen3 and gemma3 share one loader: the same tensors, plus the
 * per-head Q/K norms (qwen3, gemma3) and post norms (gemma3). */
static hsq_status load_transformer(hsq_model *m)
{
	hsq_model_info *mi = &m->info;
	hsq_status st;
	if ((st = arch_u32(m, "block_count", -1, &mi->n_layer)) ||
	    (st = arch_u32(m, "embedding_length", -1, &mi->n_embd)) ||
	    (st = arch_u32(m, "feed_forward_length", -1, &mi->n_ff)) ||
	    (st = arch_u32(m, "attention.head_count", -1, &mi->n_head)) ||
	    (st = arch_u32(m, "attention.head_count_kv", mi->n_head, &mi->n_head_kv)) ||
	    (st = arch_u32(m, "context_length", 2048, &mi->n_ctx_train)))
		return st;
	/* Every layer has its own tensors, so a file cannot have more layers
	 * than tensors; the bound keeps the per-layer allocations below from
	 * overflowing (block_count alone may be up to 2^30). */
	if ((uint64_t)mi->n_layer > m->gguf->n_tensors)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: %d layers (block_count) but only %llu tensors", m->gguf->path,
				mi->n_layer, (unsigned long long)m->gguf->n_tensors);
	if (mi->n_head % mi->n_head_kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: %d query heads cannot be shared among %d kv heads", m->gguf->path,
				mi->n_head, mi->n_head_kv);
	if ((st = arch_u32(m, "attention.key_length", mi->n_embd / mi->n_head, &mi->head_dim)))
		return st;
	int v_len;
	if ((st = arch_u32(m, "attention.value_length", mi->head_dim, &v_len)))
		return st;
	if (v_len != mi->head_dim)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: key length %d differs from value length %d", m->gguf->path,
				mi->head_dim, v_len);
	int rope_dims;
	if ((st = arch_u32(m, "rope.dimension_count", mi->head_dim, &rope_dims)))
		return st;
	if (rope_dims != mi->head_dim || mi->head_dim % 2)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: partial rotary embeddings (%d of %d dims) are not supported",
				m->gguf->path, rope_dims, mi->head_dim);
	char key[96];
	/* RoPE bases in use run from 1e4 to about 1e8; epsilons from 1e-12 to
	 * 1e-5. The ranges are wide: they only refuse what cannot be meant
	 * (NaN, infinities, a base of 1 or less, an epsilon of 0 or >= 1). */
	float local_base;
	if ((st = arch_f32(m, "rope.freq_base", m->arch_id == ARCH_QWEN3 ? 1000000.0f : 10000.0f, 1.0001, 1e12,
			   &mi->rope_freq_base)) ||
	    (st = arch_f32(m, "=gemma3.rope.freq_base_swa", 10000.0f, 1.0001, 1e12, &local_base)) ||
	    (st = arch_f32(m, "attention.layer_norm_rms_epsilon", 1e-5f, 1e-30, 0.5, &mi->rms_eps)))
		return st;
	/* gemma3: 5 of every 6 layers attend to a sliding window with a local
	 * RoPE base of 10K (llama.cpp's swa pattern 6); the 6th is global. */
	int window = 0;
	snprintf(key, sizeof key, "%s.attention.sliding_window", m->arch);
	if (m->arch_id == ARCH_GEMMA3)
		window = (int)gguf_get_u32_or(m->gguf, key, 0);
	/* block_count must match the layers the tensors hold, before anything
	 * is allocated per layer: an absurd count is a corrupt file, not a
	 * request for gigabytes. */
	int64_t have_layers = tensor_layers(m->gguf);
	if (have_layers != mi->n_layer)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: metadata key '%s.block_count' = %d but the file holds tensors for %lld layers; the model file is corrupt",
				m->gguf->path, m->arch, mi->n_layer, (long long)have_layers);

	const gguf_tensor *emb;
	if ((st = find_tensor(m, "token_embd.weight", &emb)))
		return st;
	if (emb->n_dims != 2 || (int64_t)emb->ne[0] != mi->n_embd)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: token_embd.weight does not match hidden size %d", m->gguf->path,
				mi->n_embd);
	if (emb->ne[1] == 0 || emb->ne[1] > INT_MAX)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: token_embd.weight has %llu rows", m->gguf->path,
				(unsigned long long)emb->ne[1]);
	mi->n_vocab = (int)emb->ne[1];
	int hd = mi->head_dim, E = mi->n_embd, nv = mi->n_vocab;
	if ((st = get_weight(m, "token_embd.weight", nv, E, &m->tok_embd)))
		return st;
	if (gguf_find_tensor(m->gguf, "output.weight")) {
		if ((st = get_weight(m, "output.weight", nv, E, &m->output)))
			return st;
	} else {
		m->output = m->tok_embd; /* tied embeddings */
	}

	/* head_dim (attention.key_length) sizes the slots below: the first
	 * query projection must hold n_head of them before anything is
	 * allocated by it (a corrupt key_length asked for gigabytes: fuzz) */
	hsq_weight q0;
	if (mi->n_layer > 0 && (st = get_weight(m, "blk.0.attn_q.weight", (int64_t)mi->n_head * hd, E, &q0)))
		return st;
	/* Norm vectors that are not F32 get converted copies: 6 slots per layer + 1. */
	size_t slot_n = (size_t)(E > hd ? E : hd);
	m->f32_copies = calloc((6 * (size_t)mi->n_layer + 1) * slot_n, sizeof(float));
	m->layers = calloc((size_t)mi->n_layer, sizeof *m->layers);
	if (!m->f32_copies || !m->layers)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory loading %s", m->gguf->path);
	if ((st = get_vector(m, "output_norm.weight", E, m->f32_copies, &m->out_norm)))
		return st;
	for (int l = 0; l < mi->n_layer; l++) {
		hsq_layer *L = &m->layers[l];
		char name[64];
		float *slot = m->f32_copies + (size_t)(1 + 6 * l) * slot_n;
#define W(field, suffix, rows, cols)                                              \
	snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);               \
	if ((st = get_weight(m, name, rows, cols, &L->field)))                    \
		return st;
		snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
		if ((st = get_vector(m, name, E, slot, &L->attn_norm)))
			return st;
		snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
		if ((st = get_vector(m, name, E, slot + slot_n, &L->ffn_norm)))
			return st;
		snprintf(name, sizeof name, "blk.%d.attn_q_norm.weight", l);
		if ((st = get_vector_opt(m, name, hd, slot + 2 * slot_n, &L->q_norm)))
			return st;
		snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
		if ((st = get_vector_opt(m, name, hd, slot + 3 * slot_n, &L->k_norm)))
			return st;
		snprintf(name, sizeof name, "blk.%d.post_attention_norm.weight", l);
		if ((st = get_vector_opt(m, name, E, slot + 4 * slot_n, &L->post_attn_norm)))
			return st;
		snprintf(name, sizeof name, "blk.%d.post_ffw_norm.weight", l);
		if ((st = get_vector_opt(m, name, E, slot + 5 * slot_n, &L->post_ffn_norm)))
			return st;
		if (m->arch_id != ARCH_LLAMA && (!L->q_norm || !L->k_norm))
			return hsq_fail(HSQ_ERR_FORMAT, "%s: layer %d lacks the attn_q_norm/attn_k_norm tensors %s needs",
					m->gguf->path, l, m->arch);
		if (m->arch_id == ARCH_GEMMA3 && (!L->post_attn_norm || !L->post_ffn_norm))
			return hsq_fail(HSQ_ERR_FORMAT, "%s: layer %d lacks gemma3's post-attention/post-ffw norms",
					m->gguf->path, l);
		L->window = window && l % 6 < 5 ? window : 0;
		L->rope_base = L->window ? local_base : mi->rope_freq_base;
		if (L->window > m->max_window)
			m->max_window = L->window;
		/* n_head and head_dim are each up to 2^30: their product in 64 bits. */
		W(wq, "attn_q", (int64_t)mi->n_head * hd, E)
		W(wk, "attn_k", (int64_t)mi->n_head_kv * hd, E)
		W(wv, "attn_v", (int64_t)mi->n_head_kv * hd, E)
		W(wo, "attn_output", E, (int64_t)mi->n_head * hd)
		W(w_gate, "ffn_gate", mi->n_ff, E)
		W(w_up, "ffn_up", mi->n_ff, E)
		W(w_down, "ffn_down", E, mi->n_ff)
#undef W
	}
	return HSQ_OK;
}

static void copy_gguf_str(const gguf_file *f, const char *key, char *dst, size_t cap)
{
	gguf_str s;
	dst[0] = '\0';
	if (gguf_get_str(f, key, &s) == 0) {
		size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
		memcpy(dst, s.ptr, n);
		dst[n] = '\0';
	}
}

hsq_status hsq_model_load(const char *path, hsq_model **out)
{
	hsq_status st;
	hsq_model *m = NULL;
	*out = NULL;
	if (!path || !*path)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "no model path given; name a GGUF file or set HSQ_MODEL");
	m = calloc(1, sizeof *m);
	if (!m)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory loading %s", path);
	if ((st = gguf_open(path, &m->gguf)))
		goto fail;
	copy_gguf_str(m->gguf, "general.architecture", m->arch, sizeof m->arch);
	copy_gguf_str(m->gguf, "general.name", m->name, sizeof m->name);
	if (!m->arch[0]) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: general.architecture is missing", path);
		goto fail;
	}
	if (strcmp(m->arch, "llama") == 0) {
		m->arch_id = ARCH_LLAMA;
	} else if (strcmp(m->arch, "qwen3") == 0) {
		m->arch_id = ARCH_QWEN3;
		m->rope_neox = 1;
	} else if (strcmp(m->arch, "gemma3") == 0) {
		m->arch_id = ARCH_GEMMA3;
		m->rope_neox = 1;
		m->ffn_act = FFN_GELU_TANH;
	} else {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: llama, qwen3, gemma3)",
			      path, m->arch);
		goto fail;
	}
	m->info.architecture = m->arch;
	m->info.name = m->name;
	m->info.file_size = m->gguf->size;
	memcpy(m->info.identity, m->gguf->identity, sizeof m->info.identity);
	if ((st = load_transformer(m)))
		goto fail;
	m->embd_scale = m->arch_id == ARCH_GEMMA3 ? sqrtf((float)m->info.n_embd) : 1.0f;
	if ((st = tokenizer_load(m->gguf, &m->tok)))
		goto fail;
	if (tokenizer_n_vocab(m->tok) != m->info.n_vocab) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer has %d tokens but the embedding has %d rows", path,
			      tokenizer_n_vocab(m->tok), m->info.n_vocab);
		goto fail;
	}
	m->info.bos = tokenizer_bos(m->tok);
	m->info.eos = tokenizer_eos(m->tok);
	m->info.add_bos = tokenizer_add_bos(m->tok);
	*out = m;
	return HSQ_OK;
fail:
	hsq_model_free(m);
	return st;
}

void hsq_model_free(hsq_model *m)
{
	if (!m)
		return;
	tokenizer_free(m->tok);
	gguf_close(m->gguf);
	free(m->layers);
	free(m->f32_copies);
	free(m);
}

void hsq_model_get_info(const hsq_model *m, hsq_model_info *info)
{
	*info = m->info;
}

int hsq_token_is_eog(const hsq_model *m, hsq_token t)
{
	return tokenizer_is_eog(m->tok, t);
}

/* O_NONBLOCK: a FIFO at a default location must not hang the search. */
static int readable(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

#ifndef HSQ_PREFIX
#define HSQ_PREFIX "/usr/local"
#endif
#define DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

hsq_status hsq_default_model_path(char *buf, size_t cap)
{
	const char *env = getenv("HSQ_MODEL");
	if (env && *env) {
		if ((size_t)snprintf(buf, cap, "%s", env) >= cap)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "HSQ_MODEL is too long");
		return HSQ_OK;
	}
	const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
	char cand[3][4096];
	int n = 0;
	if (xdg && *xdg)
		snprintf(cand[n++], sizeof cand[0], "%s/hsq/models/%s", xdg, DEFAULT_MODEL_FILE);
	if (home && *home)
		snprintf(cand[n++], sizeof cand[0], "%s/.local/share/hsq/models/%s", home, DEFAULT_MODEL_FILE);
	snprintf(cand[n++], sizeof cand[0], "%s/share/hsq/models/%s", HSQ_PREFIX, DEFAULT_MODEL_FILE);
	for (int i = 0; i < n; i++) {
		if (readable(cand[i]) && strlen(cand[i]) < cap) {
			strcpy(buf, cand[i]);
			return HSQ_OK;
		}
	}
	return hsq_fail(HSQ_ERR_INVALID_ARG,
			"no model given and the default model is not installed (looked in %s); run 'make model' "
			"or set HSQ_MODEL", cand[n > 1 ? 1 : 0]);
}

int hsq_model_layer_window(const hsq_model *m, int layer)
{
	return layer >= 0 && layer < m->info.n_layer ? m->layers[layer].window : -1;
}

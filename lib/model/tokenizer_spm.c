/* tokenizer_spm.c - SentencePiece-style BPE from GGUF metadata
 * (tokenizer.ggml.model = "llama"), token for token the same as llama.cpp's
 * llm_tokenizer_spm (llama-vocab.cpp, as shipped in llama-cpp-python
 * 0.3.36), and llama.cpp's detokenizer.
 *
 * A raw fragment (special tokens are already cut out by tokenizer.c) is
 * encoded in the same steps as llama.cpp:
 *  1. a space goes in front if the vocabulary asks for it
 *     (tokenizer.ggml.add_space_prefix, default true; gemma3 says false)
 *     and the fragment starts the text or follows a special token; then
 *     every ASCII space becomes U+2581 "▁";
 *  2. the text is cut into symbols, one per UTF-8 character as its lead
 *     byte announces (no validation: a stray continuation byte is a symbol
 *     of its own, a sequence cut short by the end of the text is shorter);
 *  3. every pair of neighbouring symbols whose concatenation is a token goes
 *     into a priority queue keyed on that token's score; the best pair
 *     (highest score, leftmost on ties) is merged and its new neighbours are
 *     queued, until nothing merges. This runs over the whole fragment at
 *     once, as in llama.cpp: O(n log n) with one hash probe per candidate;
 *  4. every remaining symbol is its token, or else its bytes as <0xXX>
 *     byte tokens.
 *
 * llama.cpp's resegment() also keeps a map from merged text back to the
 * pair that formed it, for symbols that are no token. A merged symbol is
 * always a token (a pair is queued only if it is one, and a stale entry is
 * recognised by its size), and an unmerged symbol - one character - can
 * never equal the text of two neighbours, so that path is never taken and
 * is left out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/tokenizer_spm.h"

#define SPACE_ESC "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, "▁" */
#define MAX_SYMBOLS ((size_t)INT32_MAX)

struct spm_vocab {
	int n_vocab;
	float *scores;         /* [n_vocab] */
	int32_t byte_tok[256]; /* <0xXX>, else the one-byte token; -1 if neither */
	size_t max_len;        /* longest token text: longer pairs cannot be tokens */
	int add_space_prefix;
};

hsq_status spm_load(const gguf_file *f, const hsq_tokenizer *tok, spm_vocab **out)
{
	const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.scores");
	const void *data;
	uint64_t n;
	hsq_status st;
	spm_vocab *v;

	*out = NULL;
	if (!kv || kv->type != GGUF_TYPE_ARRAY)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.scores is missing or not an array", f->path);
	if ((st = gguf_num_array(f, "tokenizer.ggml.scores", kv->arr_type, &data, &n)))
		return st;
	v = calloc(1, sizeof *v);
	if (!v)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
	v->n_vocab = tokenizer_n_vocab(tok);
	if (n != (uint64_t)v->n_vocab || (kv->arr_type != GGUF_TYPE_FLOAT32 && kv->arr_type != GGUF_TYPE_INT32)) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.scores must be %d float32 or int32 values", f->path,
			      v->n_vocab);
		goto fail;
	}
	v->scores = malloc(sizeof *v->scores * (size_t)v->n_vocab);
	if (!v->scores) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
		goto fail;
	}
	for (int i = 0; i < v->n_vocab; i++) {
		const uint8_t *p = (const uint8_t *)data + 4 * (size_t)i; /* metadata is packed: memcpy */
		if (kv->arr_type == GGUF_TYPE_FLOAT32) {
			memcpy(&v->scores[i], p, 4);
		} else {
			int32_t x;
			memcpy(&x, p, 4);
			v->scores[i] = (float)x;
		}
	}

	/* llama.cpp renames an empty token "[EMPTY_<id>]": at most 19 bytes. */
	gguf_str_iter it;
	gguf_str s;
	v->max_len = 19;
	if ((st = gguf_str_array(f, "tokenizer.ggml.tokens", &it, &n)))
		goto fail;
	while (gguf_str_next(&it, &s))
		if (s.len > v->max_len)
			v->max_len = (size_t)s.len;

	/* llama_vocab::byte_to_token: "<0xAB>" (upper-case hex), else the
	 * byte itself as a token. */
	for (int b = 0; b < 256; b++) {
		char hex[8], c = (char)b;
		snprintf(hex, sizeof hex, "<0x%02X>", b);
		v->byte_tok[b] = tokenizer_lookup(tok, hex, 6);
		if (v->byte_tok[b] < 0)
			v->byte_tok[b] = tokenizer_lookup(tok, &c, 1);
	}

	v->add_space_prefix = 1;
	kv = gguf_find(f, "tokenizer.ggml.add_space_prefix");
	if (kv) {
		if (kv->type != GGUF_TYPE_BOOL) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key 'tokenizer.ggml.add_space_prefix' is a %s, expected a bool",
				      f->path, gguf_type_name(kv->type));
			goto fail;
		}
		v->add_space_prefix = kv->data[0] != 0;
	}
	*out = v;
	return HSQ_OK;
fail:
	spm_free(v);
	return st;
}

void spm_free(spm_vocab *v)
{
	if (!v)
		return;
	free(v->scores);
	free(v);
}

size_t spm_unescape(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		if (n - i >= 3 && memcmp(s + i, SPACE_ESC, 3) == 0) {
			s[o++] = ' ';
			i += 3;
		} else {
			s[o++] = s[i++];
		}
	}
	return o;
}

/* ------------------------------------------------------------ encoding */

typedef struct spm_bigram {
	float score;
	int32_t left, right; /* symbol indices */
	uint32_t size;       /* bytes of left + right when queued: a stale entry no longer adds up */
	int32_t id;          /* the token they make */
} spm_bigram;

typedef struct spm_work {
	const spm_vocab *v;
	const hsq_tokenizer *tok;
	const char *text; /* escaped */
	uint32_t *start, *len;
	int32_t *prev, *next;
	int32_t *id; /* token of a merged symbol; -2 for an original one (not looked up yet) */
	spm_bigram *heap;
	size_t n_heap, cap_heap;
} spm_work;

/* a comes out of the queue before b: llm_bigram_spm's comparator (the
 * higher score; the leftmost pair on equal scores). */
static int better(const spm_bigram *a, const spm_bigram *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static hsq_status heap_push(spm_work *w, spm_bigram b)
{
	if (w->n_heap == w->cap_heap) {
		size_t cap = w->cap_heap ? 2 * w->cap_heap : 1024;
		spm_bigram *p = realloc(w->heap, cap * sizeof *p);
		if (!p)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory while tokenizing");
		w->heap = p;
		w->cap_heap = cap;
	}
	size_t i = w->n_heap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!better(&b, &w->heap[p]))
			break;
		w->heap[i] = w->heap[p];
		i = p;
	}
	w->heap[i] = b;
	return HSQ_OK;
}

static spm_bigram heap_pop(spm_work *w)
{
	spm_bigram top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, n = w->n_heap;
	if (!n)
		return top;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && better(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!better(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	w->heap[i] = last;
	return top;
}

/* llm_tokenizer_spm_session::try_add_bigram */
static hsq_status try_add_bigram(spm_work *w, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return HSQ_OK;
	size_t size = (size_t)w->len[l] + w->len[r];
	if (size > w->v->max_len)
		return HSQ_OK;
	hsq_token id = tokenizer_lookup(w->tok, w->text + w->start[l], size);
	if (id < 0)
		return HSQ_OK;
	return heap_push(w, (spm_bigram){w->v->scores[id], l, r, (uint32_t)size, id});
}

static hsq_status emit(hsq_token **out, size_t *n_out, size_t *cap, hsq_token t)
{
	if (*n_out == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		hsq_token *p = realloc(*out, nc * sizeof *p);
		if (!p)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory while tokenizing");
		*out = p;
		*cap = nc;
	}
	(*out)[(*n_out)++] = t;
	return HSQ_OK;
}

hsq_status spm_encode(const spm_vocab *v, const hsq_tokenizer *tok, const char *text, size_t len, int prev_special,
		      hsq_token **out, size_t *n_out, size_t *cap)
{
	static const size_t len_utf8[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	spm_work w = {.v = v, .tok = tok};
	int prefix = v->add_space_prefix && prev_special;
	size_t n_space = 0, elen, n_sym = 0;
	char *esc = NULL;
	hsq_status st = HSQ_OK;

	if (len == 0 && !prefix)
		return HSQ_OK;
	for (size_t i = 0; i < len; i++)
		n_space += text[i] == ' ';
	elen = 3 * (size_t)prefix + len + 2 * n_space; /* each space grows to 3 bytes */
	if (elen > MAX_SYMBOLS)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "a text fragment of %zu bytes is too long to tokenize at once; split it",
				len);
	/* 1. space prefix and escaping (llama_escape_whitespace) */
	esc = malloc(elen ? elen : 1);
	w.start = malloc(sizeof *w.start * elen);
	w.len = malloc(sizeof *w.len * elen);
	w.prev = malloc(sizeof *w.prev * elen);
	w.next = malloc(sizeof *w.next * elen);
	w.id = malloc(sizeof *w.id * elen);
	if (!esc || !w.start || !w.len || !w.prev || !w.next || !w.id) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
		goto done;
	}
	size_t o = 0;
	if (prefix) {
		memcpy(esc, SPACE_ESC, 3);
		o = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(esc + o, SPACE_ESC, 3);
			o += 3;
		} else {
			esc[o++] = text[i];
		}
	}
	w.text = esc;

	/* 2. one symbol per UTF-8 character */
	for (size_t off = 0; off < elen; n_sym++) {
		size_t l = len_utf8[(uint8_t)esc[off] >> 4];
		if (l > elen - off)
			l = elen - off;
		w.start[n_sym] = (uint32_t)off;
		w.len[n_sym] = (uint32_t)l;
		w.prev[n_sym] = (int32_t)n_sym - 1;
		w.id[n_sym] = -2;
		off += l;
		w.next[n_sym] = off == elen ? -1 : (int32_t)n_sym + 1;
	}

	/* 3. merge the best-scoring pair while any pair is a token */
	for (size_t i = 1; i < n_sym; i++)
		if ((st = try_add_bigram(&w, (int32_t)i - 1, (int32_t)i)))
			goto done;
	while (w.n_heap) {
		spm_bigram b = heap_pop(&w);
		int32_t l = b.left, r = b.right;
		if (!w.len[l] || !w.len[r] || w.len[l] + w.len[r] != b.size)
			continue; /* one side was merged away or has grown since */
		w.len[l] += w.len[r];
		w.len[r] = 0;
		w.id[l] = b.id;
		w.next[l] = w.next[r];
		if (w.next[r] >= 0)
			w.prev[w.next[r]] = l;
		if ((st = try_add_bigram(&w, w.prev[l], l)) || (st = try_add_bigram(&w, l, w.next[l])))
			goto done;
	}

	/* 4. tokens, or byte fallback */
	for (int32_t i = 0; i != -1; i = w.next[i]) {
		hsq_token id = w.id[i] != -2 ? w.id[i] : tokenizer_lookup(tok, esc + w.start[i], w.len[i]);
		if (id >= 0) {
			if ((st = emit(out, n_out, cap, id)))
				goto done;
			continue;
		}
		for (uint32_t k = 0; k < w.len[i]; k++) {
			uint8_t byte = (uint8_t)esc[w.start[i] + k];
			if (v->byte_tok[byte] < 0) {
				/* llama.cpp throws here (std::map::at). */
				st = hsq_fail(HSQ_ERR_UNSUPPORTED,
					      "the vocabulary has no token for byte 0x%02X (neither <0x%02X> nor the byte "
					      "itself), so this text cannot be tokenized",
					      byte, byte);
				goto done;
			}
			if ((st = emit(out, n_out, cap, v->byte_tok[byte])))
				goto done;
		}
	}
done:
	free(esc);
	free(w.start);
	free(w.len);
	free(w.prev);
	free(w.next);
	free(w.id);
	free(w.heap);
	return st;
}

/* ------------------------------------------------------------ detokenizing */

int bpe_clean_spaces(const char *pre)
{
	/* Every tokenizer.ggml.pre for which llama_vocab::impl::load sets
	 * clean_spaces = false. */
	static const char *const off[] = {
		"deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "sarvam-moe", "command-r",
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "poro-chat", "viking", "tekken", "smollm",
		"chameleon", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m", "tiny_aya",
		"cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe",
		"seed-coder", "hunyuan", "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2",
		"afmoe", "laguna", "minimax-m2", NULL};
	for (const char *const *p = off; *p; p++)
		if (strcmp(pre, *p) == 0)
			return 0;
	return 1;
}

hsq_status tokenizer_detokenize(const hsq_tokenizer *tok, const hsq_token *tokens, size_t n, int remove_special,
				int unparse_special, char **out, size_t *len)
{
	const spm_vocab *v = tokenizer_spm(tok);
	/* add_space_prefix is false for byte-level BPE; SPM has no clean-up. */
	int remove_space = v ? v->add_space_prefix : 0, clean_spaces = tokenizer_clean_spaces(tok);
	size_t total = 0, cap = 64;
	char *text;

	*out = NULL;
	*len = 0;
	if (!tokens && n)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "tokens is NULL but n is %zu", n);
	if (remove_special && tokenizer_add_bos(tok) && n > 0 && tokens[0] == tokenizer_bos(tok)) {
		remove_space = 0;
		tokens++;
		n--;
	}
	if (remove_special && tokenizer_add_eos(tok) && n > 0 && tokens[n - 1] == tokenizer_eos(tok))
		n--;
	if (!(text = malloc(cap)))
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory detokenizing %zu tokens", n);
	for (size_t i = 0; i < n; i++) {
		const char *b;
		size_t bl;
		hsq_status st = tokenizer_token_bytes(tok, tokens[i], unparse_special, &b, &bl);
		if (st) {
			free(text);
			return st;
		}
		if (remove_space && bl && b[0] == ' ') { /* token_to_piece's lstrip = 1 */
			b++;
			bl--;
		}
		remove_space = 0;
		if (total + bl + 1 > cap) {
			while (total + bl + 1 > cap)
				cap *= 2;
			char *p = realloc(text, cap);
			if (!p) {
				free(text);
				return hsq_fail(HSQ_ERR_NOMEM, "out of memory detokenizing %zu tokens", n);
			}
			text = p;
		}
		memcpy(text + total, b, bl);
		total += bl;
	}

	if (clean_spaces && total) {
		/* The three passes of llama_vocab::impl::detokenize, verbatim
		 * (including the NUL the second one leaves behind). */
		size_t t1 = total, t2, t3;
		total = 1;
		for (size_t i = 1; i < t1; i++) {
			char x = text[i];
			if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
				total--; /* " ?", " !", " .", " ," */
			text[total++] = x;
		}
		t2 = total;
		total = 1;
		for (size_t i = 1; i < t2; i++) {
			char x = text[i];
			if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') { /* " ' " */
				total--;
				text[++i] = '\0';
			}
			text[total++] = x;
		}
		t3 = total;
		total = 1;
		for (size_t i = 1; i < t3; i++) {
			char x = text[i];
			if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
				char x1 = text[i + 1];
				if (x1 == 's' || x1 == 'm') /* " 's", " 'm" */
					total--;
				else if (i + 2 < t3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
					total--; /* " 're", " 've" */
			}
			text[total++] = x;
		}
	}
	text[total] = '\0';
	*out = text;
	*len = total;
	return HSQ_OK;
}

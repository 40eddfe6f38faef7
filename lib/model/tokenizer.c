/* tokenizer.c - byte-level BPE from GGUF metadata, token for token the same
 * as llama.cpp (llama-vocab.cpp and unicode.cpp, as shipped in
 * llama-cpp-python 0.3.36).
 *
 * Encoding runs in four stages, each a copy of llama.cpp's:
 *  1. special-token partition: every CONTROL / USER_DEFINED / UNKNOWN token,
 *     longest first, is cut out of the raw text (tokenizer_st_partition);
 *  2. each remaining fragment is decoded leniently (invalid bytes become
 *     U+FFFD) and "collapsed" to one byte per codepoint (ASCII as is, other
 *     codepoints by class), and the pre-tokenizer regexes run over that with
 *     PCRE2, each regex splitting the pieces the previous one produced;
 *  3. every piece is mapped through GPT-2's bytes_to_unicode and merged by
 *     BPE rank, lowest rank first and leftmost on ties;
 *  4. merged symbols that are not tokens fall back to single-byte tokens.
 *
 * Running the regexes on the collapsed text rather than on UTF-8 matters:
 * llama.cpp's notion of \s, \p{L} and \p{N} (its own Unicode 15.1 tables) is
 * not PCRE2's, and PCRE2 in UTF mode cannot look at the surrogates and
 * overlong forms llama.cpp lets through.
 *
 * Strings are interned: every token text and every string named by a merge
 * gets an id (tokens keep their own ids, merge-only strings follow), so BPE
 * works on integer pairs and a merge lookup is one hash probe.
 *
 * SentencePiece vocabularies (tokenizer.ggml.model = "llama", e.g. gemma3)
 * share the vocabulary, attributes, EOG set, pieces and the special-token
 * partition (stage 1) built here; tokenizer_spm.c encodes their raw
 * fragments in place of stages 2-4. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "common/error.h"
#include "common/unicode.h"
#include "model/tokenizer.h"
#include "model/tokenizer_spm.h"

/* Token attributes, as llama.cpp's llama_token_attr bits. */
enum {
	ATTR_UNKNOWN = 1 << 0,
	ATTR_UNUSED = 1 << 1,
	ATTR_NORMAL = 1 << 2,
	ATTR_CONTROL = 1 << 3,
	ATTR_USER_DEFINED = 1 << 4,
	ATTR_BYTE = 1 << 5,
};

/* Upper bounds that keep every size computation far from overflow; real
 * vocabularies are below 300k tokens. */
#define MAX_VOCAB (1 << 24)
#define MAX_MERGES (1 << 24)
#define MAX_TEXT ((size_t)1 << 30)

enum pre_type { PRE_DEFAULT, PRE_GPT2, PRE_SMOLLM, PRE_LLAMA3, PRE_QWEN2 };

/* tokenizer.ggml.pre values accepted, each mapped to the llama.cpp
 * pre-tokenizer type whose regexes it uses. Only names whose other llama.cpp
 * settings (special-token defaults, separators) we reproduce are listed. */
static const struct {
	const char *name;
	enum pre_type type;
} pre_names[] = {
	{"default", PRE_DEFAULT}, {"gpt-2", PRE_GPT2},      {"gpt2", PRE_GPT2},
	{"phi-2", PRE_GPT2},      {"mpt", PRE_GPT2},        {"olmo", PRE_GPT2},
	{"smollm", PRE_SMOLLM},   {"starcoder", PRE_SMOLLM}, {"refact", PRE_SMOLLM},
	{"codeshell", PRE_SMOLLM}, {"llama3", PRE_LLAMA3},   {"llama-v3", PRE_LLAMA3},
	{"llama-bpe", PRE_LLAMA3}, {"falcon3", PRE_LLAMA3},  {"qwen2", PRE_QWEN2},
	{"deepseek-r1-qwen", PRE_QWEN2}, {"megrez", PRE_QWEN2}, {"stablelm2", PRE_QWEN2},
};

/* The regexes, verbatim from llama-vocab.cpp (llm_tokenizer_bpe). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                     \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
	"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                  \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
	"| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define MAX_REGEX 4
static const char *const pre_regexes[][MAX_REGEX + 1] = {
	[PRE_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
	[PRE_GPT2] = {RE_GPT2, NULL},
	[PRE_SMOLLM] = {"\\p{N}", RE_GPT2, NULL},
	[PRE_LLAMA3] = {RE_LLAMA3, NULL},
	[PRE_QWEN2] = {RE_QWEN2, NULL},
};

/* A slot of the string table; the hash spares most text comparisons. */
typedef struct str_slot {
	uint32_t id1;  /* interned id + 1; 0 = empty */
	uint32_t hash; /* hash_bytes of the text */
} str_slot;

/* A merge: the pair (left, right) of interned ids becomes `result`. */
typedef struct merge_slot {
	uint32_t left, right;
	uint32_t rank;   /* index in tokenizer.ggml.merges; UINT32_MAX = empty slot */
	uint32_t result; /* interned id of left+right */
} merge_slot;

struct hsq_tokenizer {
	int n_vocab;
	/* Interned strings: ids [0, n_vocab) are the tokens, then strings that
	 * only merges name. Text lives in pool at str_off[id], str_len[id]. */
	uint32_t n_str, cap_str;
	uint32_t *str_off, *str_len;
	char *pool;
	size_t pool_len, pool_cap;
	str_slot *str_slots; /* open addressing, at most half full */
	uint32_t str_mask;
	merge_slot *merges;
	uint32_t merge_mask;

	uint8_t *attr;      /* [n_vocab] ATTR_* */
	uint8_t *eog;       /* [n_vocab] 1 if the token ends generation */
	char *pieces;       /* decoded bytes of every token, NUL after each */
	uint32_t *piece_off; /* [n_vocab] */
	uint32_t *piece_len; /* [n_vocab] */
	int32_t *specials;  /* tokens cut out before BPE, longest text first */
	int n_specials;

	hsq_token bos, eos;
	int add_bos, add_eos;
	int ignore_merges; /* llama3: a piece that is a whole token skips BPE */
	enum pre_type pre;
	pcre2_code *re[MAX_REGEX];
	int n_re;

	uint8_t enc[256][2];   /* bytes_to_unicode: the UTF-8 of each byte's character */
	uint8_t enc_len[256];
	int32_t byte_sym[256]; /* interned id of enc[b], -1 if neither token nor merged */
	int32_t byte_tok[256]; /* token whose text is the single byte b, -1 if none */
	char *chat_template;   /* NUL-terminated copy, or NULL */
	spm_vocab *spm;        /* tokenizer.ggml.model = "llama" (tokenizer_spm.c); NULL for gpt2 */
	int clean_spaces;      /* llama.cpp's clean_spaces, for tokenizer_detokenize */
};

/* ------------------------------------------------------------ interning */

static uint32_t hash_bytes(const char *s, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static uint32_t hash_pair(uint32_t a, uint32_t b)
{
	uint64_t x = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(x >> 32) ^ (uint32_t)x;
}

static int32_t str_lookup(const hsq_tokenizer *t, const char *s, size_t n)
{
	if (!t->str_slots)
		return -1;
	uint32_t h = hash_bytes(s, n);
	for (uint32_t i = h & t->str_mask;; i = (i + 1) & t->str_mask) {
		const str_slot *sl = &t->str_slots[i];
		if (!sl->id1)
			return -1;
		uint32_t v = sl->id1 - 1;
		if (sl->hash == h && t->str_len[v] == n && memcmp(t->pool + t->str_off[v], s, n) == 0)
			return (int32_t)v;
	}
}

/* Appends s to the pool as string `id` (NUL-terminated for convenience). */
static hsq_status pool_add(hsq_tokenizer *t, uint32_t id, const char *s, size_t n)
{
	if (t->pool_len + n + 1 > UINT32_MAX)
		return hsq_fail(HSQ_ERR_FORMAT, "tokenizer strings exceed 4 GiB; the vocabulary is corrupt");
	if (t->pool_len + n + 1 > t->pool_cap) {
		size_t cap = t->pool_cap ? t->pool_cap : 1 << 16;
		while (cap < t->pool_len + n + 1)
			cap *= 2;
		char *p = realloc(t->pool, cap);
		if (!p)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
		t->pool = p;
		t->pool_cap = cap;
	}
	memcpy(t->pool + t->pool_len, s, n);
	t->pool[t->pool_len + n] = '\0';
	t->str_off[id] = (uint32_t)t->pool_len;
	t->str_len[id] = (uint32_t)n;
	t->pool_len += n + 1;
	return HSQ_OK;
}

/* Makes room for one more string: the id arrays grow by doubling, the
 * table doubles and rehashes when it would pass half full. */
static hsq_status str_reserve(hsq_tokenizer *t)
{
	if (t->n_str + 1 > t->cap_str) {
		uint32_t cap = t->cap_str ? 2 * t->cap_str : 1024;
		uint32_t *off = realloc(t->str_off, sizeof *off * cap);
		if (off)
			t->str_off = off;
		uint32_t *len = realloc(t->str_len, sizeof *len * cap);
		if (len)
			t->str_len = len;
		if (!off || !len)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
		t->cap_str = cap;
	}
	if (2 * ((uint64_t)t->n_str + 1) > (uint64_t)t->str_mask + 1 || !t->str_slots) {
		uint32_t cap = t->str_slots ? 2 * (t->str_mask + 1) : 1024;
		str_slot *sl = calloc(cap, sizeof *sl);
		if (!sl)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
		for (uint32_t k = 0; t->str_slots && k <= t->str_mask; k++) {
			str_slot o = t->str_slots[k];
			if (!o.id1)
				continue;
			uint32_t i = o.hash & (cap - 1);
			while (sl[i].id1)
				i = (i + 1) & (cap - 1);
			sl[i] = o;
		}
		free(t->str_slots);
		t->str_slots = sl;
		t->str_mask = cap - 1;
	}
	return HSQ_OK;
}

/* Interns s: its id, new or existing, in *id. */
static hsq_status str_intern(hsq_tokenizer *t, const char *s, size_t n, uint32_t *id)
{
	uint32_t h = hash_bytes(s, n);
	hsq_status st = str_reserve(t);
	if (st)
		return st;
	uint32_t i = h & t->str_mask;
	for (;; i = (i + 1) & t->str_mask) {
		str_slot *sl = &t->str_slots[i];
		if (!sl->id1)
			break;
		uint32_t v = sl->id1 - 1;
		if (sl->hash == h && t->str_len[v] == n && memcmp(t->pool + t->str_off[v], s, n) == 0) {
			*id = v;
			return HSQ_OK;
		}
	}
	uint32_t nid = t->n_str;
	if ((st = pool_add(t, nid, s, n)))
		return st;
	t->n_str++;
	t->str_slots[i] = (str_slot){nid + 1, h};
	*id = nid;
	return HSQ_OK;
}

static const merge_slot *merge_lookup(const hsq_tokenizer *t, uint32_t a, uint32_t b)
{
	for (uint32_t i = hash_pair(a, b) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
		const merge_slot *m = &t->merges[i];
		if (m->rank == UINT32_MAX)
			return NULL;
		if (m->left == a && m->right == b)
			return m;
	}
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t c = 16;
	while (c < n)
		c *= 2;
	return c;
}

/* ------------------------------------------------------------ loading */

static hsq_status oom(void)
{
	return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
}

static const char *tok_text(const hsq_tokenizer *t, int32_t id)
{
	return t->pool + t->str_off[id];
}

static int tok_is(const hsq_tokenizer *t, int32_t id, const char *z)
{
	size_t n = strlen(z);
	return t->str_len[id] == n && memcmp(tok_text(t, id), z, n) == 0;
}

/* Every name classify_specials looks for starts with '<', '[', '_' or
 * U+2581 and is short: this skips ordinary tokens cheaply. */
static int name_candidate(const hsq_tokenizer *t, int32_t id)
{
	unsigned char c = (unsigned char)tok_text(t, id)[0];
	return t->str_len[id] <= 40 && (c == '<' || c == '[' || c == '_' || c == 0xe2);
}

static int tok_is_any(const hsq_tokenizer *t, int32_t id, const char *const *list)
{
	for (; *list; list++)
		if (tok_is(t, id, *list))
			return 1;
	return 0;
}

/* Reads an optional token-id key into *id (unchanged when absent). */
static hsq_status read_token_id(const gguf_file *f, const char *key, int n_vocab, hsq_token *id)
{
	const gguf_kv *kv = gguf_find(f, key);
	int64_t v;
	if (!kv)
		return HSQ_OK;
	if (kv->type == GGUF_TYPE_ARRAY || kv->type == GGUF_TYPE_BOOL || gguf_kv_as_i64(kv, &v))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is not an integer token id", f->path, key);
	if (v < 0 || v >= n_vocab)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: metadata key '%s' = %lld is out of range for a vocabulary of %d tokens; "
				"the model file is damaged",
				f->path, key, (long long)v, n_vocab);
	*id = (hsq_token)v;
	return HSQ_OK;
}

static hsq_status read_bool(const gguf_file *f, const char *key, int *out)
{
	const gguf_kv *kv = gguf_find(f, key);
	if (!kv)
		return HSQ_OK;
	if (kv->type != GGUF_TYPE_BOOL)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is a %s, expected a bool", f->path, key,
				gguf_type_name(kv->type));
	*out = kv->data[0] != 0;
	return HSQ_OK;
}

static hsq_status load_tokens(hsq_tokenizer *t, const gguf_file *f)
{
	gguf_str_iter it;
	gguf_str s;
	uint64_t n;
	hsq_status st = gguf_str_array(f, "tokenizer.ggml.tokens", &it, &n);
	if (st)
		return st;
	if (n == 0 || n > MAX_VOCAB)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1..%d)", f->path,
				(unsigned long long)n, MAX_VOCAB);
	t->n_vocab = (int)n;
	for (uint32_t i = 0; gguf_str_next(&it, &s); i++) {
		char empty[32];
		uint32_t id;
		if (s.len == 0) {
			/* llama.cpp renames empty tokens so they can never match. */
			snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
			s.ptr = empty;
			s.len = strlen(empty);
		}
		if (s.len > UINT32_MAX)
			return hsq_fail(HSQ_ERR_FORMAT, "%s: token %u is %llu bytes long", f->path, i,
					(unsigned long long)s.len);
		/* llama.cpp asserts on this (token_to_id would lose an id). */
		int32_t dup = str_lookup(t, s.ptr, (size_t)s.len);
		if (dup >= 0)
			return hsq_fail(HSQ_ERR_FORMAT, "%s: tokens %d and %u have the same text; the vocabulary is corrupt",
					f->path, dup, i);
		if ((st = str_intern(t, s.ptr, (size_t)s.len, &id)))
			return st;
		if (id != i)
			return hsq_fail(HSQ_ERR_INTERNAL, "token %u interned as %u; please report", i, id);
	}
	return HSQ_OK;
}

static hsq_status load_types(hsq_tokenizer *t, const gguf_file *f)
{
	const void *data;
	uint64_t n;
	hsq_status st;

	if (gguf_find(f, "tokenizer.ggml.scores")) {
		/* Unused by BPE, but a length mismatch means a damaged file. */
		const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.scores");
		if (kv->type != GGUF_TYPE_ARRAY ||
		    (kv->arr_type != GGUF_TYPE_FLOAT32 && kv->arr_type != GGUF_TYPE_INT32))
			return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.scores is not an array of float32 or int32", f->path);
		if (kv->arr_len != (uint64_t)t->n_vocab)
			return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.scores has %llu entries but there are %d tokens",
					f->path, (unsigned long long)kv->arr_len, t->n_vocab);
	}
	if (!gguf_find(f, "tokenizer.ggml.token_type")) {
		memset(t->attr, ATTR_NORMAL, (size_t)t->n_vocab);
		return HSQ_OK;
	}
	if ((st = gguf_num_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &data, &n)))
		return st;
	if (n != (uint64_t)t->n_vocab)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries but there are %d tokens",
				f->path, (unsigned long long)n, t->n_vocab);
	for (int i = 0; i < t->n_vocab; i++) {
		int32_t ty;
		memcpy(&ty, (const uint8_t *)data + 4 * (size_t)i, 4); /* the mapping need not be aligned */
		switch (ty) {
		case 1: t->attr[i] = ATTR_NORMAL; break;
		case 2: t->attr[i] = ATTR_UNKNOWN; break;
		case 3: t->attr[i] = ATTR_CONTROL; break;
		case 4: t->attr[i] = ATTR_USER_DEFINED; break;
		case 5: t->attr[i] = ATTR_UNUSED; break;
		case 6: t->attr[i] = ATTR_BYTE; break;
		default: t->attr[i] = 0; break; /* undefined: never emitted as text */
		}
	}
	return HSQ_OK;
}

static hsq_status load_merges(hsq_tokenizer *t, const gguf_file *f)
{
	gguf_str_iter it;
	gguf_str s;
	uint64_t n2;
	hsq_status st = gguf_str_array(f, "tokenizer.ggml.merges", &it, &n2);
	if (st)
		return st;
	for (uint32_t rank = 0; gguf_str_next(&it, &s); rank++) {
		/* Split at the first space after the first byte, as llama.cpp
		 * does (so a merge may start with a space). A line without a
		 * space names no pair BPE can form: skip it. */
		const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', (size_t)s.len - 1) : NULL;
		uint32_t a, b, r;
		if (!sp)
			continue;
		size_t la = (size_t)(sp - s.ptr), lb = (size_t)s.len - la - 1;
		if (la + lb > UINT32_MAX)
			return hsq_fail(HSQ_ERR_FORMAT, "%s: merge %u is too long", f->path, rank);
		if ((st = str_intern(t, s.ptr, la, &a)) || (st = str_intern(t, sp + 1, lb, &b)))
			return st;
		/* The pair's text, interned too: the id BPE gives the merged
		 * symbol (pieces of s are not contiguous without the space). */
		char stack[256], *cat = la + lb <= sizeof stack ? stack : malloc(la + lb);
		if (!cat)
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading merges");
		memcpy(cat, s.ptr, la);
		memcpy(cat + la, sp + 1, lb);
		st = str_intern(t, cat, la + lb, &r);
		if (cat != stack)
			free(cat);
		if (st)
			return st;
		uint32_t i = hash_pair(a, b) & t->merge_mask;
		for (;; i = (i + 1) & t->merge_mask) {
			merge_slot *m = &t->merges[i];
			if (m->rank == UINT32_MAX) {
				*m = (merge_slot){a, b, rank, r};
				break;
			}
			if (m->left == a && m->right == b)
				break; /* a repeated pair keeps its first (lowest) rank, as std::map::emplace */
		}
	}
	return HSQ_OK;
}

/* EOT/EOM/FIM detection, EOG set and attribute fix-ups from
 * llama_vocab::impl::load, in the same order, so that the same tokens end
 * up special (cut out before BPE) and end generation. */
static void classify_specials(hsq_tokenizer *t, hsq_token eot, hsq_token eom, hsq_token fim[6])
{
	static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
						"<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
						"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
						"<end_of_utterance>", NULL};
	static const char *const eom_names[] = {"<|eom_id|>", NULL};
	static const char *const fim_names[6][9] = {
		{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
		 "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL},
		{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
		 "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL},
		{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
		 "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL},
		{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
		{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
		{"<|file_sep|>", NULL},
	};
	static const char *const eog_names[] = {
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};
	static const char *const always_user[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
	int n = t->n_vocab;

	/* llama.cpp walks an unordered_map and takes the first hit; we take
	 * the lowest id, which agrees whenever only one candidate exists. */
	for (int32_t id = 0; id < n; id++) {
		if (!name_candidate(t, id))
			continue;
		if (eot < 0 && tok_is_any(t, id, eot_names)) {
			eot = id;
			t->attr[id] |= ATTR_CONTROL;
		}
		if (eom < 0 && tok_is_any(t, id, eom_names)) {
			eom = id;
			t->attr[id] |= ATTR_CONTROL;
		}
		for (int k = 0; k < 6; k++) {
			if (fim[k] < 0 && tok_is_any(t, id, fim_names[k])) {
				fim[k] = id;
				t->attr[id] |= ATTR_CONTROL;
			}
		}
	}
	for (int32_t id = 0; id < n; id++)
		if ((t->attr[id] & ATTR_CONTROL) && strstr(tok_text(t, id), "unused"))
			t->attr[id] |= ATTR_UNUSED;

	/* FIM pad, repo and separator end generation too. */
	for (int k = 3; k < 6; k++)
		if (fim[k] >= 0)
			t->eog[fim[k]] = 1;
	for (int32_t id = 0; id < n; id++) {
		if (!name_candidate(t, id))
			continue;
		if (tok_is_any(t, id, eog_names)) {
			t->eog[id] = 1;
			t->attr[id] |= ATTR_CONTROL;
		}
		if (tok_is_any(t, id, always_user))
			t->attr[id] = ATTR_USER_DEFINED;
	}
	if (t->eos >= 0)
		t->eog[t->eos] = 1;
	if (eot >= 0)
		t->eog[eot] = 1;
	if (eom >= 0)
		t->eog[eom] = 1;

	/* o200k_harmony / solar-open: "<|end|>" separates messages there. */
	int has_return = 0, has_call = 0, has_flush = 0, has_tool_response = 0;
	int32_t end_id = -1, s_id = -1;
	for (int32_t id = 0; id < n; id++) {
		if (!t->eog[id])
			continue;
		has_return |= tok_is(t, id, "<|return|>");
		has_call |= tok_is(t, id, "<|call|>") || tok_is(t, id, "<|calls|>");
		has_flush |= tok_is(t, id, "<|flush|>");
		has_tool_response |= tok_is(t, id, "<|tool_response>") || tok_is(t, id, "<|plamo:eos|>");
		if (tok_is(t, id, "<|end|>"))
			end_id = id;
		if (tok_is(t, id, "</s>"))
			s_id = id;
	}
	if (end_id >= 0 && has_call && (has_return || has_flush)) {
		t->eog[end_id] = 0;
		t->attr[end_id] = ATTR_USER_DEFINED;
	}
	/* gemma4 / plamo: "</s>" is an ordinary token there. */
	if (s_id >= 0 && has_tool_response) {
		t->eog[s_id] = 0;
		t->attr[s_id] = ATTR_NORMAL;
	}
}

static int cmp_special(const void *pa, const void *pb, void *ctx)
{
	const hsq_tokenizer *t = ctx;
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
	if (t->str_len[a] != t->str_len[b])
		return t->str_len[a] > t->str_len[b] ? -1 : 1;
	return (a > b) - (a < b);
}

/* GPT-2's bytes_to_unicode: printable bytes keep their codepoint, the other
 * 68 take 256, 257, ... in byte order. */
static void build_byte_maps(hsq_tokenizer *t)
{
	int next = 256;
	for (int b = 0; b < 256; b++) {
		int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
		uint8_t buf[4];
		size_t n = uni_encode(keep ? (uint32_t)b : (uint32_t)next++, buf);
		t->enc_len[b] = (uint8_t)n;
		memcpy(t->enc[b], buf, n);
		t->byte_sym[b] = str_lookup(t, (const char *)buf, n);
		char c = (char)b;
		int32_t tk = str_lookup(t, &c, 1);
		t->byte_tok[b] = tk < t->n_vocab ? tk : -1;
	}
}

/* Inverse of bytes_to_unicode for codepoints below 0x144; -1 elsewhere. */
static int unicode_to_byte(uint32_t cpt)
{
	if ((cpt >= 0x21 && cpt <= 0x7e) || (cpt >= 0xa1 && cpt <= 0xac) || (cpt >= 0xae && cpt <= 0xff))
		return (int)cpt;
	if (cpt < 256 || cpt >= 256 + 68)
		return -1;
	int k = (int)cpt - 256;
	for (int b = 0; b < 256; b++) {
		int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
		if (!keep && k-- == 0)
			return b;
	}
	return -1;
}

typedef struct strbuf {
	char *p;
	size_t n, cap;
} strbuf;

static int sb_put(strbuf *sb, const void *s, size_t n)
{
	if (sb->n + n + 1 > sb->cap) {
		size_t cap = sb->cap ? sb->cap : 1 << 16;
		while (cap < sb->n + n + 1)
			cap *= 2;
		char *p = realloc(sb->p, cap);
		if (!p)
			return -1;
		sb->p = p;
		sb->cap = cap;
	}
	memcpy(sb->p + sb->n, s, n);
	sb->n += n;
	return 0;
}

/* The text llama.cpp's token_to_piece(special = true) gives, precomputed so
 * hsq_token_bytes is O(1). */
static hsq_status build_pieces(hsq_tokenizer *t)
{
	strbuf sb = {0};
	hsq_status st = HSQ_OK;

	t->piece_off = malloc(sizeof *t->piece_off * (size_t)t->n_vocab);
	t->piece_len = malloc(sizeof *t->piece_len * (size_t)t->n_vocab);
	if (!t->piece_off || !t->piece_len) {
		st = oom();
		goto done;
	}
	for (int32_t id = 0; id < t->n_vocab; id++) {
		const uint8_t *s = (const uint8_t *)tok_text(t, id);
		size_t n = t->str_len[id], start = sb.n;
		uint8_t a = t->attr[id];
		if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) {
			if (sb_put(&sb, s, n)) {
				st = oom();
				goto done;
			}
		} else if ((a & ATTR_NORMAL) && t->spm) {
			if (sb_put(&sb, s, n)) {
				st = oom();
				goto done;
			}
			sb.n = start + spm_unescape(sb.p + start, n);
		} else if (a & ATTR_NORMAL) {
			for (size_t i = 0; i < n;) {
				size_t adv;
				uint32_t cpt = uni_decode_lenient(s + i, n - i, &adv);
				int b = unicode_to_byte(cpt);
				i += adv;
				if (b >= 0) {
					uint8_t c = (uint8_t)b;
					if (sb_put(&sb, &c, 1)) {
						st = oom();
						goto done;
					}
					continue;
				}
				/* llama_decode_text's marker for a character outside
				 * the byte alphabet: its UTF-8 in hex, then the whole
				 * token text. */
				uint8_t u[4];
				char hex[32] = "[UNK_BYTE_0x";
				size_t un = uni_encode(cpt, u), hn = strlen(hex);
				for (size_t k = 0; k < un; k++)
					hn += (size_t)snprintf(hex + hn, sizeof hex - hn, "%02x", u[k]);
				if (sb_put(&sb, hex, hn) || sb_put(&sb, s, n) || sb_put(&sb, "]", 1)) {
					st = oom();
					goto done;
				}
			}
		} else if (a & ATTR_BYTE) {
			/* "<0xAB>": the byte is the two hex digits at offset 3. */
			char hx[3] = {0};
			if (n > 3)
				hx[0] = (char)s[3];
			if (n > 4)
				hx[1] = (char)s[4];
			uint8_t c = (uint8_t)strtol(hx, NULL, 16);
			if (sb_put(&sb, &c, 1)) {
				st = oom();
				goto done;
			}
		}
		if (sb.n > UINT32_MAX) {
			st = hsq_fail(HSQ_ERR_FORMAT, "decoded vocabulary exceeds 4 GiB; the file is corrupt");
			goto done;
		}
		t->piece_off[id] = (uint32_t)start;
		t->piece_len[id] = (uint32_t)(sb.n - start);
		if (sb_put(&sb, "", 1)) { /* NUL after each piece */
			st = oom();
			goto done;
		}
	}
	t->pieces = sb.p;
	sb.p = NULL;
done:
	free(sb.p);
	return st;
}

/* llama.cpp's unicode_regex_split rewrite: each \p{X} becomes its collapsed
 * class byte plus the ASCII members of X, bracketed unless already inside a
 * character class. */
static hsq_status compile_regex(const char *re, pcre2_code **out)
{
	static const struct {
		const char *pat;
		char col;
		const char *ascii;
	} ucat[] = {
		{"\\p{N}", (char)UNI_COL_NUMBER, "0-9"},
		{"\\p{L}", (char)UNI_COL_LETTER, "A-Za-z"},
		{"\\p{P}", (char)UNI_COL_PUNCT, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
		{"\\p{M}", (char)UNI_COL_MARK, ""},
		{"\\p{S}", (char)UNI_COL_SYMBOL, "\\$\\+<->^`\\|\\~"},
		{"\\p{Lu}", (char)UNI_COL_LETTER, "A-Za-z"},
		{"\\p{Ll}", (char)UNI_COL_LETTER, "A-Za-z"},
		{"\\p{Lt}", (char)UNI_COL_LETTER, "A-Za-z"},
		{"\\p{Lm}", (char)UNI_COL_LETTER, "A-Za-z"},
		{"\\p{Lo}", (char)UNI_COL_LETTER, "A-Za-z"},
	};
	size_t n = strlen(re);
	char buf[1024];
	size_t o = 0;
	int inside = 0;

	for (size_t i = 0; i < n; i++) {
		if (o + 32 >= sizeof buf)
			return hsq_fail(HSQ_ERR_INTERNAL, "pre-tokenizer regex too long; please report");
		if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
			buf[o++] = '[';
			inside = 1;
			continue;
		}
		if (inside && re[i] == ']' && re[i - 1] != '\\') {
			buf[o++] = ']';
			inside = 0;
			continue;
		}
		if (re[i] == '\\' && i + 3 < n && re[i + 1] == 'p' && re[i + 2] == '{') {
			const char *close = strchr(re + i + 3, '}');
			size_t k = 0, nk = sizeof ucat / sizeof ucat[0];
			if (close && (size_t)(close - re) <= i + 10) {
				size_t plen = (size_t)(close - re) - i + 1;
				for (k = 0; k < nk; k++)
					if (strlen(ucat[k].pat) == plen && memcmp(ucat[k].pat, re + i, plen) == 0)
						break;
			}
			if (close && k < nk) {
				if (!inside)
					buf[o++] = '[';
				buf[o++] = ucat[k].col;
				memcpy(buf + o, ucat[k].ascii, strlen(ucat[k].ascii));
				o += strlen(ucat[k].ascii);
				if (!inside)
					buf[o++] = ']';
				i = (size_t)(close - re);
				continue;
			}
		}
		buf[o++] = re[i];
	}

	int err;
	PCRE2_SIZE erroff;
	/* No PCRE2_UTF: the subject is the collapsed text, one byte per
	 * codepoint, where \s is exactly llama.cpp's (ASCII space, \t..\r, and
	 * VT standing in for all other White_Space). */
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)buf, o, 0, &err, &erroff, NULL);
	if (!code) {
		PCRE2_UCHAR msg[128];
		pcre2_get_error_message(err, msg, sizeof msg);
		return hsq_fail(HSQ_ERR_INTERNAL, "pre-tokenizer regex '%s' does not compile (%s at %zu); please report",
				re, (const char *)msg, (size_t)erroff);
	}
	/* JIT when the platform has it; the interpreter gives the same
	 * matches, only slower. Fuzz builds (tests/fuzz/), which load a model
	 * per input, leave it out: compiling costs more than it saves there. */
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
#endif
	*out = code;
	return HSQ_OK;
}

/* The merge table (empty), sized for a load factor of at most one half. */
static hsq_status alloc_merges(hsq_tokenizer *t, const gguf_file *f)
{
	uint64_t n_tok_arr = 0, n_merges = 0;
	const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.tokens");

	if (kv && kv->type == GGUF_TYPE_ARRAY)
		n_tok_arr = kv->arr_len;
	kv = gguf_find(f, "tokenizer.ggml.merges");
	if (!kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing; a gpt2 tokenizer needs its merges",
				f->path);
	if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key 'tokenizer.ggml.merges' is not an array of strings",
				f->path);
	n_merges = kv->arr_len;
	if (n_tok_arr > MAX_VOCAB || n_merges > MAX_MERGES)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: %llu tokens and %llu merges exceed the limits (%d each)", f->path,
				(unsigned long long)n_tok_arr, (unsigned long long)n_merges, MAX_VOCAB);
	t->merge_mask = pow2_at_least(2 * n_merges) - 1;
	t->merges = malloc(sizeof *t->merges * ((size_t)t->merge_mask + 1));
	if (!t->merges)
		return oom();
	for (size_t i = 0; i <= t->merge_mask; i++)
		t->merges[i].rank = UINT32_MAX;
	return HSQ_OK;
}

/* Copies an optional string value into buf for comparison and error
 * messages. *present: 0 absent, 1 present, 2 present but longer than buf
 * (so it cannot be any value we support). */
static hsq_status str_field(const gguf_file *f, const char *key, char *buf, size_t cap, int *present)
{
	gguf_str s;
	*present = 0;
	buf[0] = '\0';
	if (!gguf_find(f, key))
		return HSQ_OK;
	if (gguf_get_str(f, key, &s))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is not a string", f->path, key);
	size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
	memcpy(buf, s.ptr, n);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
			buf[i] = '?'; /* keep error messages printable */
	*present = s.len < cap ? 1 : 2;
	return HSQ_OK;
}

hsq_status tokenizer_load(const gguf_file *f, hsq_tokenizer **out)
{
	hsq_tokenizer *t = NULL;
	hsq_status st;
	char model[64], pre[64];
	int have_model, have_pre, spm;
	hsq_token eot = -1, eom = -1, fim[6] = {-1, -1, -1, -1, -1, -1};

	*out = NULL;
	if ((st = str_field(f, "tokenizer.ggml.model", model, sizeof model, &have_model)))
		return st;
	if (!have_model)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.ggml.model is missing; the file has no tokenizer",
				f->path);
	spm = have_model == 1 && strcmp(model, "llama") == 0;
	if (!spm && (have_model != 1 || strcmp(model, "gpt2") != 0))
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: tokenizer model '%s' is not supported (supported: gpt2, byte-level bpe; "
				"llama, sentencepiece)",
				f->path, model);
	/* llama.cpp would merge by all-zero scores; no real SPM file lacks them. */
	if (spm && !gguf_find(f, "tokenizer.ggml.scores"))
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: tokenizer model 'llama' (sentencepiece) without tokenizer.ggml.scores is not supported",
				f->path);
	if ((st = str_field(f, "tokenizer.ggml.pre", pre, sizeof pre, &have_pre)))
		return st;
	if (spm)
		have_pre = 0; /* llama.cpp ignores the pre-tokenizer of SPM vocabularies */

	t = calloc(1, sizeof *t);
	if (!t)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory building the tokenizer");
	t->bos = t->eos = -1;
	if (!have_pre || (have_pre == 1 && !pre[0])) {
		t->pre = PRE_DEFAULT; /* llama.cpp's fallback for old conversions */
	} else {
		size_t k, nk = sizeof pre_names / sizeof pre_names[0];
		for (k = 0; k < nk; k++)
			if (have_pre == 1 && strcmp(pre, pre_names[k].name) == 0)
				break;
		if (k == nk) {
			st = hsq_fail(HSQ_ERR_UNSUPPORTED,
				      "%s: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported "
				      "(supported: smollm, gpt2, default, llama3/llama-bpe, qwen2 and aliases)",
				      f->path, pre);
			goto fail;
		}
		t->pre = pre_names[k].type;
	}
	if (t->pre == PRE_LLAMA3) {
		t->ignore_merges = 1;
		t->add_bos = 1;
	}
	t->clean_spaces = !spm && bpe_clean_spaces(have_pre == 1 ? pre : "");

	if (!spm && (st = alloc_merges(t, f)))
		goto fail;
	if ((st = load_tokens(t, f)))
		goto fail;
	t->attr = malloc((size_t)t->n_vocab);
	t->eog = calloc((size_t)t->n_vocab, 1);
	if (!t->attr || !t->eog) {
		st = oom();
		goto fail;
	}
	if ((st = load_types(t, f)) || (st = spm ? spm_load(f, t, &t->spm) : load_merges(t, f)))
		goto fail;
	if (spm) {
		/* llama.cpp's defaults for SPM vocabularies; metadata overrides. */
		t->bos = t->n_vocab > 1 ? 1 : -1;
		t->eos = t->n_vocab > 2 ? 2 : -1;
		t->add_bos = 1;
	}

	if ((st = read_token_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos)) ||
	    (st = read_token_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos)) ||
	    (st = read_token_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab, &eot)) ||
	    (st = read_token_id(f, "tokenizer.ggml.eom_token_id", t->n_vocab, &eom)) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_pre_token_id", t->n_vocab, &fim[0])) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_suf_token_id", t->n_vocab, &fim[1])) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_mid_token_id", t->n_vocab, &fim[2])) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_pad_token_id", t->n_vocab, &fim[3])) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_rep_token_id", t->n_vocab, &fim[4])) ||
	    (st = read_token_id(f, "tokenizer.ggml.fim_sep_token_id", t->n_vocab, &fim[5])) ||
	    (st = read_token_id(f, "tokenizer.ggml.prefix_token_id", t->n_vocab, &fim[0])) ||
	    (st = read_token_id(f, "tokenizer.ggml.suffix_token_id", t->n_vocab, &fim[1])) ||
	    (st = read_token_id(f, "tokenizer.ggml.middle_token_id", t->n_vocab, &fim[2])) ||
	    (st = read_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos)) ||
	    (st = read_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos)))
		goto fail;
	if (t->add_bos && t->bos < 0) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: the tokenizer adds a bos token but tokenizer.ggml.bos_token_id is missing",
			      f->path);
		goto fail;
	}
	if (t->add_eos && t->eos < 0) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: the tokenizer adds an eos token but tokenizer.ggml.eos_token_id is missing",
			      f->path);
		goto fail;
	}

	classify_specials(t, eot, eom, fim);
	t->specials = malloc(sizeof *t->specials * (size_t)t->n_vocab);
	if (!t->specials) {
		st = oom();
		goto fail;
	}
	for (int32_t id = 0; id < t->n_vocab; id++)
		if (t->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
			t->specials[t->n_specials++] = id;
	qsort_r(t->specials, (size_t)t->n_specials, sizeof *t->specials, cmp_special, t);

	if (!spm)
		build_byte_maps(t);
	if ((st = build_pieces(t)))
		goto fail;
	for (const char *const *re = pre_regexes[t->pre]; *re && !spm; re++)
		if ((st = compile_regex(*re, &t->re[t->n_re++])))
			goto fail;

	gguf_str tmpl;
	if (gguf_get_str(f, "tokenizer.chat_template", &tmpl) == 0) {
		if (tmpl.len > (1u << 24)) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: tokenizer.chat_template is %llu bytes long", f->path,
				      (unsigned long long)tmpl.len);
			goto fail;
		}
		t->chat_template = malloc((size_t)tmpl.len + 1);
		if (!t->chat_template) {
			st = oom();
			goto fail;
		}
		memcpy(t->chat_template, tmpl.ptr, (size_t)tmpl.len);
		t->chat_template[tmpl.len] = '\0';
	}
	*out = t;
	return HSQ_OK;
fail:
	tokenizer_free(t);
	return st;
}

void tokenizer_free(hsq_tokenizer *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_re; i++)
		pcre2_code_free(t->re[i]);
	free(t->str_off);
	free(t->str_len);
	free(t->pool);
	free(t->str_slots);
	free(t->merges);
	free(t->attr);
	free(t->eog);
	free(t->pieces);
	free(t->piece_off);
	free(t->piece_len);
	free(t->specials);
	free(t->chat_template);
	spm_free(t->spm);
	free(t);
}

int tokenizer_n_vocab(const hsq_tokenizer *t)
{
	return t->n_vocab;
}

hsq_token tokenizer_bos(const hsq_tokenizer *t)
{
	return t->bos;
}

hsq_token tokenizer_eos(const hsq_tokenizer *t)
{
	return t->eos;
}

int tokenizer_add_bos(const hsq_tokenizer *t)
{
	return t->add_bos;
}

int tokenizer_is_eog(const hsq_tokenizer *t, hsq_token tk)
{
	return tk >= 0 && tk < t->n_vocab && t->eog[tk];
}

const char *tokenizer_chat_template(const hsq_tokenizer *t)
{
	return t->chat_template;
}

hsq_token tokenizer_find(const hsq_tokenizer *t, const char *text)
{
	int32_t id = str_lookup(t, text, strlen(text));
	return id < t->n_vocab ? id : -1;
}

hsq_token tokenizer_lookup(const hsq_tokenizer *t, const char *s, size_t n)
{
	int32_t id = str_lookup(t, s, n);
	return id < t->n_vocab ? id : -1;
}

const spm_vocab *tokenizer_spm(const hsq_tokenizer *t)
{
	return t->spm;
}

int tokenizer_add_eos(const hsq_tokenizer *t)
{
	return t->add_eos;
}

int tokenizer_clean_spaces(const hsq_tokenizer *t)
{
	return t->clean_spaces;
}

hsq_status tokenizer_token_bytes(const hsq_tokenizer *t, hsq_token tk, int special, const char **bytes,
				 size_t *len)
{
	if (tk < 0 || tk >= t->n_vocab)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "token id %d is out of range for a vocabulary of %d tokens",
				(int)tk, t->n_vocab);
	if (!special && (t->attr[tk] & (ATTR_CONTROL | ATTR_UNKNOWN))) {
		*bytes = t->pieces + t->piece_off[tk] + t->piece_len[tk]; /* the NUL: an empty string */
		*len = 0;
		return HSQ_OK;
	}
	*bytes = t->pieces + t->piece_off[tk];
	*len = t->piece_len[tk];
	return HSQ_OK;
}

/* ------------------------------------------------------------ encoding */

typedef struct bigram {
	uint32_t rank;
	int32_t left, right; /* symbol indices */
	uint32_t lid, rid;   /* their interned ids when queued, to spot stale entries */
	uint32_t result;
} bigram;

typedef struct frag {
	size_t off, len; /* raw text, when tok < 0 */
	int32_t tok;     /* special token */
} frag;

/* Scratch space for one tokenizer_encode call: the tokenizer itself stays
 * read-only, so concurrent calls are safe. */
typedef struct work {
	hsq_token *out;
	size_t n_out, cap_out;
	uint8_t *norm;   /* fragment re-encoded from its codepoints */
	uint8_t *col;    /* collapsed: one byte per codepoint */
	uint32_t *coff;  /* byte offset in norm of each codepoint, [n_cpt + 1] */
	uint32_t *pa, *pb; /* piece lengths in codepoints */
	size_t cap_text; /* capacity of the above, in input bytes */
	int32_t *sym_id, *sym_prev, *sym_next;
	uint32_t *sym_len;
	size_t cap_sym;
	bigram *heap;
	size_t n_heap, cap_heap;
	char *enc;       /* a piece in bytes_to_unicode form (ignore_merges) */
	size_t cap_enc;
	pcre2_match_data *md;
} work;

static void work_free(work *w)
{
	free(w->norm);
	free(w->col);
	free(w->coff);
	free(w->pa);
	free(w->pb);
	free(w->sym_id);
	free(w->sym_prev);
	free(w->sym_next);
	free(w->sym_len);
	free(w->heap);
	free(w->enc);
	if (w->md)
		pcre2_match_data_free(w->md);
}

static hsq_status nomem(void)
{
	return hsq_fail(HSQ_ERR_NOMEM, "out of memory while tokenizing");
}

static hsq_status emit(work *w, hsq_token tk)
{
	if (w->n_out == w->cap_out) {
		size_t cap = w->cap_out * 2;
		hsq_token *p = realloc(w->out, cap * sizeof *p);
		if (!p)
			return nomem();
		w->out = p;
		w->cap_out = cap;
	}
	w->out[w->n_out++] = tk;
	return HSQ_OK;
}

static void heap_push(work *w, bigram b)
{
	/* Min-heap on (rank, left): llama.cpp's llm_bigram_bpe comparator. */
	size_t i = w->n_heap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		const bigram *q = &w->heap[p];
		if (q->rank < b.rank || (q->rank == b.rank && q->left <= b.left))
			break;
		w->heap[i] = *q;
		i = p;
	}
	w->heap[i] = b;
}

static bigram heap_pop(work *w)
{
	bigram top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, n = w->n_heap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && (w->heap[c + 1].rank < w->heap[c].rank ||
				  (w->heap[c + 1].rank == w->heap[c].rank && w->heap[c + 1].left < w->heap[c].left)))
			c++;
		if (last.rank < w->heap[c].rank || (last.rank == w->heap[c].rank && last.left <= w->heap[c].left))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n)
		w->heap[i] = last;
	return top;
}

static hsq_status add_bigram(const hsq_tokenizer *t, work *w, int32_t l, int32_t r)
{
	if (l < 0 || r < 0 || w->sym_id[l] < 0 || w->sym_id[r] < 0)
		return HSQ_OK;
	const merge_slot *m = merge_lookup(t, (uint32_t)w->sym_id[l], (uint32_t)w->sym_id[r]);
	if (!m)
		return HSQ_OK;
	if (w->n_heap == w->cap_heap) {
		size_t cap = w->cap_heap ? 2 * w->cap_heap : 256;
		bigram *p = realloc(w->heap, cap * sizeof *p);
		if (!p)
			return nomem();
		w->heap = p;
		w->cap_heap = cap;
	}
	heap_push(w, (bigram){m->rank, l, r, m->left, m->right, m->result});
	return HSQ_OK;
}

/* A symbol that is no token: llama.cpp looks up every byte of its
 * bytes_to_unicode form as a one-byte token and drops the misses. */
static hsq_status emit_fallback(const hsq_tokenizer *t, work *w, const uint8_t *s, size_t n)
{
	hsq_status st;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < t->enc_len[s[i]]; k++)
			if (t->byte_tok[t->enc[s[i]][k]] >= 0 && (st = emit(w, t->byte_tok[t->enc[s[i]][k]])))
				return st;
	return HSQ_OK;
}

/* BPE over one pre-tokenized piece s[0..n) (raw bytes; symbol i starts as
 * the bytes_to_unicode character of byte i). */
static hsq_status bpe_piece(const hsq_tokenizer *t, work *w, const uint8_t *s, size_t n)
{
	hsq_status st;

	if (t->ignore_merges) {
		size_t m = 0;
		if (2 * n > w->cap_enc) {
			free(w->enc);
			w->cap_enc = 2 * n;
			if (!(w->enc = malloc(w->cap_enc)))
				return nomem();
		}
		for (size_t i = 0; i < n; i++) {
			memcpy(w->enc + m, t->enc[s[i]], t->enc_len[s[i]]);
			m += t->enc_len[s[i]];
		}
		int32_t id = str_lookup(t, w->enc, m);
		if (id >= 0 && id < t->n_vocab)
			return emit(w, id);
	}
	if (n > w->cap_sym) {
		size_t cap = n;
		free(w->sym_id);
		free(w->sym_prev);
		free(w->sym_next);
		free(w->sym_len);
		w->sym_id = malloc(cap * sizeof *w->sym_id);
		w->sym_prev = malloc(cap * sizeof *w->sym_prev);
		w->sym_next = malloc(cap * sizeof *w->sym_next);
		w->sym_len = malloc(cap * sizeof *w->sym_len);
		w->cap_sym = cap;
		if (!w->sym_id || !w->sym_prev || !w->sym_next || !w->sym_len) {
			w->cap_sym = 0;
			return nomem();
		}
	}
	for (size_t i = 0; i < n; i++) {
		w->sym_id[i] = t->byte_sym[s[i]];
		w->sym_len[i] = 1;
		w->sym_prev[i] = (int32_t)i - 1;
		w->sym_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
	}
	w->n_heap = 0;
	for (size_t i = 1; i < n; i++)
		if ((st = add_bigram(t, w, (int32_t)i - 1, (int32_t)i)))
			return st;
	while (w->n_heap) {
		bigram b = heap_pop(w);
		int32_t l = b.left, r = b.right;
		/* Stale when either side has been merged away or has grown
		 * since the pair was queued (llama.cpp compares the texts). */
		if (!w->sym_len[l] || !w->sym_len[r] || w->sym_id[l] != (int32_t)b.lid ||
		    w->sym_id[r] != (int32_t)b.rid)
			continue;
		w->sym_len[l] += w->sym_len[r];
		w->sym_len[r] = 0;
		w->sym_id[l] = (int32_t)b.result;
		w->sym_next[l] = w->sym_next[r];
		if (w->sym_next[r] >= 0)
			w->sym_prev[w->sym_next[r]] = l;
		if ((st = add_bigram(t, w, w->sym_prev[l], l)) || (st = add_bigram(t, w, l, w->sym_next[l])))
			return st;
	}
	for (int32_t i = 0; i != -1; i = w->sym_next[i]) {
		int32_t id = w->sym_id[i];
		if (id >= 0 && id < t->n_vocab)
			st = emit(w, id);
		else
			st = emit_fallback(t, w, s + i, w->sym_len[i]);
		if (st)
			return st;
	}
	return HSQ_OK;
}

static hsq_status grow_text(work *w, size_t n)
{
	if (n <= w->cap_text)
		return HSQ_OK;
	free(w->norm);
	free(w->col);
	free(w->coff);
	free(w->pa);
	free(w->pb);
	w->cap_text = n;
	w->norm = malloc(3 * n);
	w->col = malloc(n);
	w->coff = malloc((n + 1) * sizeof *w->coff);
	w->pa = malloc(n * sizeof *w->pa);
	w->pb = malloc(n * sizeof *w->pb);
	if (!w->norm || !w->col || !w->coff || !w->pa || !w->pb) {
		w->cap_text = 0;
		return nomem();
	}
	return HSQ_OK;
}

/* Splits every piece of pa (n_pa pieces over col) with one regex into pb,
 * like llama.cpp's unicode_regex_split_stl: matches and the gaps between
 * them both become pieces. Returns the number of pieces in *n_pb. */
static hsq_status regex_split(const pcre2_code *re, work *w, size_t n_pa, size_t *n_pb)
{
	size_t start = 0, np = 0;
	for (size_t k = 0; k < n_pa; k++) {
		size_t len = w->pa[k], pos = 0, last = 0;
		const uint8_t *subj = w->col + start;
		while (pos < len) {
			int rc = pcre2_match(re, subj, len, pos, 0, w->md, NULL);
			if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its stack on the heap */
				rc = pcre2_match(re, subj, len, pos, PCRE2_NO_JIT, w->md, NULL);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0) {
				PCRE2_UCHAR msg[128];
				pcre2_get_error_message(rc, msg, sizeof msg);
				return hsq_fail(HSQ_ERR_INTERNAL, "pre-tokenizer regex failed: %s; please report",
						(const char *)msg);
			}
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
			size_t ms = ov[0], me = ov[1];
			if (me <= ms) { /* none of our regexes can match empty; be safe */
				pos = ms + 1;
				continue;
			}
			if (ms > last)
				w->pb[np++] = (uint32_t)(ms - last);
			w->pb[np++] = (uint32_t)(me - ms);
			last = pos = me;
		}
		if (last < len)
			w->pb[np++] = (uint32_t)(len - last);
		start += len;
	}
	*n_pb = np;
	return HSQ_OK;
}

/* Pre-tokenizes and BPE-encodes one fragment of raw text. */
static hsq_status encode_raw(const hsq_tokenizer *t, work *w, const uint8_t *text, size_t len)
{
	hsq_status st;
	size_t n_cpt = 0, nb = 0, n_pa, n_pb = 0;
	utf8proc_uint8_t *nfc = NULL;

	/* Qwen2/Qwen3 tokenizers normalise to NFC before splitting (their
	 * tokenizer.json has an NFC normalizer; llama.cpp skips this step, so
	 * it splits decomposed text differently). Invalid UTF-8 is left as is. */
	if (t->pre == PRE_QWEN2 && len) {
		utf8proc_ssize_t r = utf8proc_map(text, (utf8proc_ssize_t)len, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
		if (r >= 0) {
			text = nfc;
			len = (size_t)r;
		} else {
			nfc = NULL;
		}
	}
	st = grow_text(w, len);
	if (st)
		goto done;
	/* Decode leniently and re-encode, as llama.cpp's
	 * unicode_cpts_from_utf8 + unicode_cpt_to_utf8 round trip does:
	 * invalid bytes become U+FFFD, overlong forms shrink. */
	for (size_t i = 0; i < len;) {
		size_t adv;
		uint32_t cpt = uni_decode_lenient(text + i, len - i, &adv);
		i += adv;
		w->coff[n_cpt] = (uint32_t)nb;
		w->col[n_cpt++] = uni_collapse(cpt);
		nb += uni_encode(cpt, w->norm + nb);
	}
	w->coff[n_cpt] = (uint32_t)nb;

	w->pa[0] = (uint32_t)n_cpt;
	n_pa = 1;
	for (int r = 0; r < t->n_re; r++) {
		if ((st = regex_split(t->re[r], w, n_pa, &n_pb)))
			goto done;
		uint32_t *tmp = w->pa;
		w->pa = w->pb;
		w->pb = tmp;
		n_pa = n_pb;
	}
	size_t c = 0;
	for (size_t k = 0; k < n_pa; k++) {
		size_t b0 = w->coff[c], b1 = w->coff[c + w->pa[k]];
		c += w->pa[k];
		if ((st = bpe_piece(t, w, w->norm + b0, b1 - b0)))
			goto done;
	}
done:
	free(nfc);
	return st;
}

/* 1 if every byte pair of s[0..n) (its byte, if n is 1) is marked in the
 * text's pairs / bytes bitmaps: a cheap necessary condition for s to occur. */
static int may_occur(const char *s, size_t n, const uint64_t *pairs, const uint64_t *bytes)
{
	if (n == 1)
		return (int)(bytes[(uint8_t)s[0] >> 6] >> ((uint8_t)s[0] & 63)) & 1;
	for (size_t i = 0; i + 1 < n; i++) {
		unsigned p = (unsigned)(uint8_t)s[i] << 8 | (uint8_t)s[i + 1];
		if (!((pairs[p >> 6] >> (p & 63)) & 1))
			return 0;
	}
	return 1;
}

/* llama.cpp's tokenizer_st_partition: for each special token, longest
 * first, cut every occurrence out of every raw fragment. */
static hsq_status partition(const hsq_tokenizer *t, const char *text, size_t len, int parse_special, frag **out,
			    size_t *n_out)
{
	size_t cap = 16, n = 1;
	frag *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
	hsq_status st = HSQ_OK;

	if (!a || !b) {
		st = nomem();
		goto done;
	}
	a[0] = (frag){0, len, -1};
	/* The bytes and byte pairs the text holds: a special token with a pair
	 * the text lacks cannot occur, which spares most memmem scans when
	 * there are thousands of special tokens (gemma3 has ~6400). */
	uint64_t pairs[65536 / 64] = {0}, bytes[4] = {0};
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)text[i];
		bytes[c >> 6] |= 1ull << (c & 63);
		if (i + 1 < len) {
			unsigned p = (unsigned)c << 8 | (uint8_t)text[i + 1];
			pairs[p >> 6] |= 1ull << (p & 63);
		}
	}
	for (int k = 0; k < t->n_specials; k++) {
		int32_t sp = t->specials[k];
		const char *stext = tok_text(t, sp);
		size_t slen = t->str_len[sp], nb = 0;
		/* Without parse_special only user-defined tokens are cut out. */
		if (!parse_special && (t->attr[sp] & (ATTR_CONTROL | ATTR_UNKNOWN)))
			continue;
		if (!may_occur(stext, slen, pairs, bytes) || !memmem(text, len, stext, slen))
			continue;
		for (size_t i = 0; i < n; i++) {
			/* Worst case this fragment becomes 2 pieces per match + 1. */
			size_t off = a[i].off, end = a[i].off + a[i].len;
			for (;;) {
				if (nb + 3 > cap) {
					size_t ncap = 2 * cap;
					frag *na = realloc(a, ncap * sizeof *na);
					if (!na) {
						st = nomem();
						goto done;
					}
					a = na;
					frag *nbp = realloc(b, ncap * sizeof *nbp);
					if (!nbp) {
						st = nomem();
						goto done;
					}
					b = nbp;
					cap = ncap;
				}
				if (a[i].tok >= 0) {
					b[nb++] = a[i];
					break;
				}
				const char *m = end - off >= slen ? memmem(text + off, end - off, stext, slen) : NULL;
				if (!m) {
					if (end > off)
						b[nb++] = (frag){off, end - off, -1};
					break;
				}
				size_t mo = (size_t)(m - text);
				if (mo > off)
					b[nb++] = (frag){off, mo - off, -1};
				b[nb++] = (frag){0, 0, sp};
				off = mo + slen;
			}
		}
		frag *tmp = a;
		a = b;
		b = tmp;
		n = nb;
	}
	*out = a;
	*n_out = n;
	a = NULL;
done:
	free(a);
	free(b);
	return st;
}

hsq_status tokenizer_encode(const hsq_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
			    hsq_token **out, size_t *n_out)
{
	work w = {0};
	frag *frags = NULL;
	size_t n_frags = 0;
	hsq_status st = HSQ_OK;
	int add_eos = 0;

	*out = NULL;
	*n_out = 0;
	if (!text && len)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "text is NULL but its length is %zu", len);
	if (len > MAX_TEXT)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "text of %zu bytes is too long to tokenize at once (limit %zu); "
				"split it", len, MAX_TEXT);
	if (add_bos < 0) {
		/* The model's own choice, which with llama.cpp's add_special
		 * also covers a trailing EOS. */
		add_bos = t->add_bos;
		add_eos = t->add_eos;
	}
	if (add_bos && t->bos < 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the model has no bos token; tokenize with add_bos = 0");

	w.cap_out = len / 2 + 16;
	w.out = malloc(w.cap_out * sizeof *w.out);
	w.md = pcre2_match_data_create(1, NULL);
	if (!w.out || !w.md) {
		st = nomem();
		goto done;
	}
	if (add_bos && (st = emit(&w, t->bos)))
		goto done;
	if (len) {
		if ((st = partition(t, text, len, parse_special, &frags, &n_frags)))
			goto done;
		int prev_special = 1; /* SPM's space prefix: at the start and after special tokens */
		for (size_t i = 0; i < n_frags; i++) {
			if (frags[i].tok >= 0)
				st = emit(&w, frags[i].tok);
			else if (t->spm)
				st = spm_encode(t->spm, t, text + frags[i].off, frags[i].len, prev_special, &w.out, &w.n_out,
						&w.cap_out);
			else
				st = encode_raw(t, &w, (const uint8_t *)text + frags[i].off, frags[i].len);
			if (st)
				goto done;
			prev_special = frags[i].tok >= 0;
		}
	}
	if (add_eos && (st = emit(&w, t->eos)))
		goto done;
	*out = w.out;
	*n_out = w.n_out;
	w.out = NULL;
done:
	free(w.out);
	free(frags);
	work_free(&w);
	return st;
}

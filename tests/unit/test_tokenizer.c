/* test_tokenizer.c - the byte-level BPE tokenizer: ids against llama.cpp,
 * byte-exact decoding, streaming detokenization, special tokens, chat
 * template, and hostile metadata in small GGUF files built here.
 *
 * Model-based tests use $HSQ_TEST_MODEL (SmolLM2-135M-Instruct) and are
 * skipped, with a visible SKIP line, when it is not there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The shared builder defines helpers this file does not use. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gguf_builder.h"
#pragma GCC diagnostic pop
#include "hsq.h"
#include "common/unicode.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "detok_stream.h"

/* ------------------------------------------------------------ helpers */

static hsq_model *load_model(void)
{
	const char *path = getenv("HSQ_TEST_MODEL");
	hsq_model *m = NULL;
	if (!path || access(path, R_OK) != 0) {
		fprintf(stderr, "SKIP: test model not found (set HSQ_TEST_MODEL; run 'make model')\n");
		cr_skip_test("HSQ_TEST_MODEL not readable");
	}
	cr_assert_eq(hsq_model_load(path, &m), HSQ_OK, "loading %s: %s", path, hsq_last_error());
	return m;
}

static void expect_ids(const hsq_model *m, const char *text, int parse_special, const hsq_token *want,
		       size_t n_want)
{
	hsq_token *ids = NULL;
	size_t n = 0;
	cr_assert_eq(hsq_tokenize(m, text, strlen(text), 0, parse_special, &ids, &n), HSQ_OK, "%s",
		     hsq_last_error());
	cr_expect_eq(n, n_want, "'%s': %zu tokens, want %zu", text, n, n_want);
	for (size_t i = 0; i < n && i < n_want; i++)
		cr_expect_eq(ids[i], want[i], "'%s' token %zu: got %d want %d", text, i, ids[i], want[i]);
	hsq_free(ids);
}

/* Decoding the tokens of text (special tokens as text) gives text back. */
static void expect_round_trip(const hsq_model *m, const char *text, size_t len, int parse_special)
{
	hsq_token *ids = NULL;
	size_t n = 0, o = 0;
	char *back = malloc(len + 1);
	cr_assert_eq(hsq_tokenize(m, text, len, 0, parse_special, &ids, &n), HSQ_OK, "%s", hsq_last_error());
	for (size_t i = 0; i < n; i++) {
		const char *b;
		size_t bl;
		cr_assert_eq(hsq_token_bytes(m, ids[i], 1, &b, &bl), HSQ_OK);
		cr_assert_leq(o + bl, len, "decoded text longer than the input");
		memcpy(back + o, b, bl);
		o += bl;
	}
	cr_expect(o == len && memcmp(back, text, len) == 0, "round trip of '%.*s' failed", (int)len, text);
	free(back);
	hsq_free(ids);
}

/* ids copied from llama.cpp as shipped in llama-cpp-python 0.3.36:
 * Llama(model_path, vocab_only=True).tokenize(text.encode(), add_bos=False,
 * special=...) on SmolLM2-135M-Instruct.Q4_1.gguf. */
static const struct known {
	const char *text;
	int special;
	hsq_token ids[32];
	size_t n;
} known[] = {
	{"The quick brown fox jumps over the lazy dog.", 1,
	 {504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30}, 10},
	{"I'm sure it's 12345 o'clock, isn't it? We'll see 3.14.", 1,
	 {57, 5248, 2090, 357, 506, 216, 33, 34, 35, 36, 37, 263, 23, 17466, 28, 3247, 982, 357, 47, 1046, 3060, 963,
	  216, 35, 30, 33, 36, 30},
	 28},
	{"a  b   c\n\n\tindented\r\n    four spaces  \n", 1,
	 {81, 216, 278, 256, 265, 1116, 197, 526, 6574, 3136, 1876, 5600, 32057}, 13},
	{"Größe und Übermaß: Straße", 1,
	 {27302, 7466, 34878, 85, 3423, 5549, 246, 593, 2432, 34878, 42, 19144, 34878, 85}, 14},
	{"日本語のテキストです。", 1,
	 {23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 7365, 117, 39958,
	  19076},
	 19},
	{"Привет, мир!", 1, {155, 249, 46879, 16464, 32547, 28, 41337, 7872, 9175, 17}, 10},
	{"中文文本，包括标点。", 1, {28589, 29184, 29184, 40993, 12831, 30158, 223, 48509, 122, 46781, 44083, 19076}, 12},
	{"Hi 😀👍🏽!", 1, {26843, 40303, 218, 10813, 235, 231, 10813, 233, 138, 17}, 10},
	{"<|im_start|>user\nHello<|im_end|>\n", 1, {1, 4093, 198, 19556, 2, 198}, 6},
	{"<|im_start|>user\nHello<|im_end|>\n", 0,
	 {44, 108, 306, 79, 3738, 108, 46, 4093, 198, 19556, 44, 108, 306, 79, 486, 108, 46, 198}, 18},
};

/* ------------------------------------------------------ model-based tests */

Test(tokenizer, matches_llama_cpp)
{
	hsq_model *m = load_model();
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		expect_ids(m, known[i].text, known[i].special, known[i].ids, known[i].n);
	hsq_model_free(m);
}

Test(tokenizer, round_trip_is_byte_exact)
{
	static const char *const extra[] = {
		"", " ", "\n", "   trailing   ", "\t\t\n\r\n", "x\xc2\xa0y\xe3\x80\x80z", "don't DON'T o'clock",
		"0123456789 \xd9\xa3\xd9\xa4 \xef\xbc\x95", "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d"
		"\xf0\x9f\x91\xa7 family", "<|endoftext|><reponame>x<file_sep>", "<|im_sta <|im_end",
	};
	hsq_model *m = load_model();
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		expect_round_trip(m, known[i].text, strlen(known[i].text), known[i].special);
	for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
		expect_round_trip(m, extra[i], strlen(extra[i]), 1);
		expect_round_trip(m, extra[i], strlen(extra[i]), 0);
	}
	hsq_model_free(m);
}

Test(tokenizer, bos_eos_and_empty_input)
{
	hsq_model *m = load_model();
	hsq_token *ids = NULL;
	size_t n = 99;
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	cr_expect_eq(info.bos, 1);
	cr_expect_eq(info.eos, 2);
	cr_expect_eq(info.add_bos, 0, "SmolLM2 sets tokenizer.ggml.add_bos_token = false");

	cr_assert_eq(hsq_tokenize(m, "", 0, -1, 1, &ids, &n), HSQ_OK);
	cr_expect_eq(n, 0, "empty text with the model's default adds nothing");
	hsq_free(ids);
	cr_assert_eq(hsq_tokenize(m, NULL, 0, 1, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 1 && ids[0] == 1, "add_bos = 1 forces BOS");
	hsq_free(ids);
	cr_assert_eq(hsq_tokenize(m, "Hi", 2, 1, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 2 && ids[0] == 1 && ids[1] == 26843);
	hsq_free(ids);
	cr_expect_eq(hsq_tokenize(m, NULL, 5, 0, 1, &ids, &n), HSQ_ERR_INVALID_ARG);

	/* End of generation: EOS/<|im_end|>, <|endoftext|>, and <reponame>
	 * (llama.cpp's FIM repo marker), as llama_vocab_is_eog says. */
	for (hsq_token t = 0; t < 20; t++)
		cr_expect_eq(tokenizer_is_eog(m->tok, t), t == 0 || t == 2 || t == 4, "is_eog(%d)", t);
	cr_expect_eq(tokenizer_find(m->tok, "<|im_end|>"), 2);
	cr_expect_eq(tokenizer_find(m->tok, "no such token text"), -1);
	hsq_model_free(m);
}

Test(tokenizer, token_bytes_and_errors)
{
	hsq_model *m = load_model();
	const char *b;
	size_t n;
	cr_assert_eq(hsq_token_bytes(m, 2, 1, &b, &n), HSQ_OK);
	cr_expect(n == 10 && memcmp(b, "<|im_end|>", 10) == 0);
	cr_assert_eq(hsq_token_bytes(m, 2, 0, &b, &n), HSQ_OK);
	cr_expect_eq(n, 0, "control tokens are not text unless special is set");
	cr_assert_eq(hsq_token_bytes(m, 216, 0, &b, &n), HSQ_OK); /* "Ġ" */
	cr_expect(n == 1 && b[0] == ' ');
	cr_assert_eq(hsq_token_bytes(m, 218, 0, &b, &n), HSQ_OK); /* a lone UTF-8 lead byte */
	cr_expect(n == 1 && (unsigned char)b[0] >= 0x80);

	cr_expect_eq(hsq_token_bytes(m, -1, 1, &b, &n), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "-1") && strstr(hsq_last_error(), "49152"), "detail: %s",
		  hsq_last_error());
	cr_expect_eq(hsq_token_bytes(m, 49152, 1, &b, &n), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "49152"), "detail: %s", hsq_last_error());
	cr_expect_eq(hsq_token_bytes(NULL, 0, 1, &b, &n), HSQ_ERR_INVALID_ARG);
	hsq_model_free(m);
}

Test(tokenizer, streaming_detok_keeps_characters_whole)
{
	hsq_model *m = load_model();
	/* Both split characters over byte-level tokens in SmolLM2 (see the
	 * known ids above: 40303 218 is one emoji). */
	cr_expect_gt(detok_stream(m, "Hi 😀👍🏽!"), 0, "the emoji should span several tokens");
	cr_expect_gt(detok_stream(m, "日本語のテキストです。"), 0, "a CJK character should span several tokens");
	detok_stream(m, "plain ascii text");

	/* Control tokens print nothing; an invalid leftover flushes as U+FFFD. */
	hsq_detok st = {0};
	char out[16];
	size_t got;
	cr_assert_eq(hsq_detok_push(m, &st, 2, out, sizeof out, &got), HSQ_OK);
	cr_expect_eq(got, 0);
	/* 40303 is " " plus the first three bytes of 😀: only the space prints. */
	cr_assert_eq(hsq_detok_push(m, &st, 40303, out, sizeof out, &got), HSQ_OK);
	cr_expect(got == 1 && out[0] == ' ');
	cr_expect_eq(st.n_pending, 3);
	cr_expect_eq(hsq_detok_push(m, &st, 40303, out, 0, &got), HSQ_ERR_INVALID_ARG, "no room: refused");
	cr_assert_eq(hsq_detok_flush(&st, out, sizeof out), 3);
	cr_expect(memcmp(out, "\xef\xbf\xbd", 3) == 0);
	cr_expect_eq(st.n_pending, 0);
	cr_expect_eq(hsq_detok_flush(&st, out, sizeof out), 0);
	hsq_model_free(m);
}

Test(tokenizer, special_token_parsing)
{
	hsq_model *m = load_model();
	hsq_token *ids;
	size_t n;
	const char *s = "x<|endoftext|>y";
	cr_assert_eq(hsq_tokenize(m, s, strlen(s), 0, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 3 && ids[1] == 0, "parse_special = 1 finds <|endoftext|>");
	hsq_free(ids);
	cr_assert_eq(hsq_tokenize(m, s, strlen(s), 0, 0, &ids, &n), HSQ_OK);
	for (size_t i = 0; i < n; i++)
		cr_expect_gt(ids[i], 16, "parse_special = 0 must not produce control token %d", ids[i]);
	hsq_free(ids);
	hsq_model_free(m);
}

Test(tokenizer, chat_format_chatml)
{
	hsq_model *m = load_model();
	char *p;
	cr_assert_eq(hsq_chat_format(m, NULL, "Hi there", &p), HSQ_OK, "%s", hsq_last_error());
	cr_expect_str_eq(p, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
			    "Face<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
	hsq_free(p);
	cr_assert_eq(hsq_chat_format(m, "Be brief.", "Hi", &p), HSQ_OK);
	cr_expect_str_eq(p, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
			    "<|im_start|>assistant\n");
	hsq_free(p);
	cr_expect_eq(hsq_chat_format(m, NULL, NULL, &p), HSQ_ERR_INVALID_ARG);
	hsq_model_free(m);
}

Test(tokenizer, one_megabyte_is_fast)
{
	static const char para[] =
		"It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
		"foolishness; it was the epoch of belief (1775), it was the epoch of incredulity...\n\n  \"Don't!\" "
		"she said -- and I'd 42 reasons.\t";
	size_t len = 1 << 20, pl = sizeof para - 1;
	char *text = malloc(len);
	for (size_t i = 0; i < len; i++)
		text[i] = para[i % pl];
	hsq_model *m = load_model();
	hsq_token *ids;
	size_t n;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	cr_assert_eq(hsq_tokenize(m, text, len, 0, 1, &ids, &n), HSQ_OK);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	/* ~0.07 s optimised; this binary runs under ASan/UBSan, which costs
	 * several times that, so the bound is loose. */
	cr_expect_lt(s, 3.0, "tokenizing 1 MiB took %.2f s", s);
	cr_expect_gt(n, len / 8);
	hsq_free(ids);
	free(text);
	hsq_model_free(m);
}

/* ------------------------------------------- tiny GGUF files built here */

static void kv_bool(gbuf *b, const char *k, int v)
{
	gb_str(b, k);
	gb_u32(b, 7);
	uint8_t x = (uint8_t)v;
	gb_put(b, &x, 1);
}

static void kv_strs(gbuf *b, const char *k, const char *const *v, size_t n)
{
	gb_str(b, k);
	gb_u32(b, 9);
	gb_u32(b, 8);
	gb_u64(b, n);
	for (size_t i = 0; i < n; i++)
		gb_str(b, v[i]);
}

static void kv_i32s(gbuf *b, const char *k, const int32_t *v, size_t n)
{
	gb_str(b, k);
	gb_u32(b, 9);
	gb_u32(b, 5);
	gb_u64(b, n);
	gb_put(b, v, 4 * n);
}

/* The tiny vocabulary: tokens 0..255 are the bytes_to_unicode characters of
 * bytes 0..255, then a few merged tokens and two control tokens. */
enum { T_HE = 256, T_LL, T_HELL, T_HELLO, T_IM_START, T_IM_END, N_TINY };

struct tiny_opts {
	const char *model, *pre, *tmpl;
	int n_types;   /* entries in token_type (N_TINY unless testing a mismatch) */
	uint32_t bos;  /* tokenizer.ggml.bos_token_id */
	int bad_merge; /* add merges naming strings that are no tokens */
	int dup;       /* give two tokens the same text */
};

static char *tiny_text[N_TINY];

static void tiny_vocab(void)
{
	int next = 256;
	for (int b = 0; b < 256; b++) {
		int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
		uint8_t u[4];
		size_t n = uni_encode(keep ? (uint32_t)b : (uint32_t)next++, u);
		free(tiny_text[b]);
		tiny_text[b] = strndup((const char *)u, n);
	}
	const char *more[] = {"he", "ll", "hell", "hello", "<|im_start|>", "<|im_end|>"};
	for (int i = 0; i < 6; i++) {
		free(tiny_text[256 + i]);
		tiny_text[256 + i] = strdup(more[i]);
	}
}

static hsq_status tiny_load(const struct tiny_opts *o, gguf_file **f, hsq_tokenizer **tok)
{
	static int seq;
	char path[96];
	gbuf b = {0};
	int32_t types[N_TINY];
	const char *merges[] = {"h e", "l l", "he ll", "hell o", "w o", "zz qq", "nospace"};
	size_t n_merges = o->bad_merge ? 7 : 4;
	uint64_t n_kv = 7 + (o->tmpl != NULL);

	tiny_vocab();
	if (o->dup) {
		free(tiny_text[T_HE]);
		tiny_text[T_HE] = strdup("ll");
	}
	for (int i = 0; i < N_TINY; i++)
		types[i] = i >= T_IM_START ? 3 : 1;
	gb_u32(&b, 0x46554747u);
	gb_u32(&b, 3);
	gb_u64(&b, 0);
	gb_u64(&b, n_kv);
	kv_str(&b, "tokenizer.ggml.model", o->model ? o->model : "gpt2");
	kv_str(&b, "tokenizer.ggml.pre", o->pre ? o->pre : "smollm");
	kv_strs(&b, "tokenizer.ggml.tokens", (const char *const *)tiny_text, N_TINY);
	kv_i32s(&b, "tokenizer.ggml.token_type", types, (size_t)(o->n_types ? o->n_types : N_TINY));
	kv_strs(&b, "tokenizer.ggml.merges", merges, n_merges);
	kv_u32(&b, "tokenizer.ggml.bos_token_id", o->bos ? o->bos : T_IM_START);
	kv_bool(&b, "tokenizer.ggml.add_bos_token", 0);
	if (o->tmpl)
		kv_str(&b, "tokenizer.chat_template", o->tmpl);
	gb_pad(&b, 32);
	snprintf(path, sizeof path, "/tmp/hsq-test-tok-%d-%d.gguf", (int)getpid(), seq++);
	cr_assert_eq(write_file(path, b.p, b.n), 0);
	free(b.p);
	hsq_status st = gguf_open(path, f);
	unlink(path);
	cr_assert_eq(st, HSQ_OK, "%s", hsq_last_error());
	st = tokenizer_load(*f, tok);
	if (st) {
		gguf_close(*f);
		*f = NULL;
	}
	return st;
}

static void tiny_free(gguf_file *f, hsq_tokenizer *tok)
{
	tokenizer_free(tok);
	gguf_close(f);
	for (int i = 0; i < N_TINY; i++) {
		free(tiny_text[i]);
		tiny_text[i] = NULL;
	}
}

Test(tokenizer_meta, tiny_vocab_merges_and_fallback)
{
	gguf_file *f;
	hsq_tokenizer *t;
	hsq_token *ids;
	size_t n;
	struct tiny_opts o = {.bad_merge = 1};
	cr_assert_eq(tiny_load(&o, &f, &t), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(tokenizer_n_vocab(t), N_TINY);

	cr_assert_eq(tokenizer_encode(t, "hello", 5, 0, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 1 && ids[0] == T_HELLO, "merges by rank give one token");
	hsq_free(ids);
	/* "w o" merges into "wo", which is no token: llama.cpp falls back to
	 * the one-byte tokens. */
	cr_assert_eq(tokenizer_encode(t, "wo", 2, 0, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 2 && ids[0] == 'w' && ids[1] == 'o');
	hsq_free(ids);
	cr_assert_eq(tokenizer_encode(t, "<|im_start|>hello<|im_end|>", 27, 1, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 4 && ids[0] == T_IM_START && ids[1] == T_IM_START && ids[2] == T_HELLO && ids[3] == T_IM_END);
	hsq_free(ids);
	/* " hello" is one piece, "Ġhello"; no merge joins Ġ (byte 0x20). */
	cr_assert_eq(tokenizer_encode(t, " hello", 6, 0, 1, &ids, &n), HSQ_OK);
	cr_expect(n == 2 && ids[0] == 0x20 && ids[1] == T_HELLO);
	hsq_free(ids);

	const char *b;
	size_t bl;
	cr_assert_eq(tokenizer_token_bytes(t, 0x20, 0, &b, &bl), HSQ_OK);
	cr_expect(bl == 1 && b[0] == ' ', "Ġ decodes to a space");
	cr_assert_eq(tokenizer_token_bytes(t, T_HELLO, 0, &b, &bl), HSQ_OK);
	cr_expect(bl == 5 && memcmp(b, "hello", 5) == 0);
	cr_assert_eq(tokenizer_token_bytes(t, N_TINY, 0, &b, &bl), HSQ_ERR_INVALID_ARG);
	tiny_free(f, t);
}

Test(tokenizer_meta, refuses_unsupported_and_damaged)
{
	gguf_file *f;
	hsq_tokenizer *t;
	struct tiny_opts o = {.model = "llama"};
	cr_expect_eq(tiny_load(&o, &f, &t), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "'llama'"), "names the model: %s", hsq_last_error());

	o = (struct tiny_opts){.pre = "deepseek-coder"};
	cr_expect_eq(tiny_load(&o, &f, &t), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "'deepseek-coder'"), "names the pre-tokenizer: %s", hsq_last_error());

	o = (struct tiny_opts){.n_types = N_TINY - 1};
	cr_expect_eq(tiny_load(&o, &f, &t), HSQ_ERR_FORMAT);
	cr_expect(strstr(hsq_last_error(), "token_type"), "%s", hsq_last_error());

	o = (struct tiny_opts){.dup = 1};
	cr_expect_eq(tiny_load(&o, &f, &t), HSQ_ERR_FORMAT);
	cr_expect(strstr(hsq_last_error(), "same text"), "%s", hsq_last_error());

	o = (struct tiny_opts){.bos = N_TINY + 5};
	cr_expect_eq(tiny_load(&o, &f, &t), HSQ_ERR_FORMAT);
	cr_expect(strstr(hsq_last_error(), "bos_token_id"), "%s", hsq_last_error());

	static const char *const ok_pres[] = {"gpt2", "gpt-2", "default", "llama3", "llama-bpe", "qwen2", "smollm"};
	for (size_t i = 0; i < sizeof ok_pres / sizeof ok_pres[0]; i++) {
		o = (struct tiny_opts){.pre = ok_pres[i]};
		cr_expect_eq(tiny_load(&o, &f, &t), HSQ_OK, "pre '%s': %s", ok_pres[i], hsq_last_error());
		if (f)
			tiny_free(f, t);
	}
	for (int i = 0; i < N_TINY; i++) {
		free(tiny_text[i]);
		tiny_text[i] = NULL;
	}
}

Test(tokenizer_meta, chat_template_detection)
{
	gguf_file *f;
	hsq_tokenizer *t;
	hsq_model m = {0};
	char *p;
	/* A Qwen-style chatml template has no default system message. */
	struct tiny_opts o = {.tmpl = "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + "
				      "messages[0].content + '<|im_end|>\\n' }}{%- endif %}"};
	cr_assert_eq(tiny_load(&o, &f, &t), HSQ_OK, "%s", hsq_last_error());
	m.tok = t;
	strcpy(m.arch, "qwen3");
	cr_assert_eq(hsq_chat_format(&m, NULL, "Hi", &p), HSQ_OK, "%s", hsq_last_error());
	cr_expect_str_eq(p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
	hsq_free(p);
	tiny_free(f, t);

	o = (struct tiny_opts){.tmpl = "{{ bos_token }}[INST] {{ message }} [/INST]"};
	cr_assert_eq(tiny_load(&o, &f, &t), HSQ_OK);
	m.tok = t;
	cr_expect_eq(hsq_chat_format(&m, NULL, "Hi", &p), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "qwen3") && strstr(hsq_last_error(), "chatml"), "%s", hsq_last_error());
	tiny_free(f, t);
}

Test(tokenizer_meta, utf8_check)
{
	size_t len;
	cr_expect_eq(uni_utf8_check((const uint8_t *)"a", 1, &len), UNI_UTF8_OK);
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xf0\x9f\x98\x80", 4, &len), UNI_UTF8_OK);
	cr_expect_eq(len, 4);
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xf0\x9f\x98", 3, &len), UNI_UTF8_INCOMPLETE);
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xc0\x80", 2, &len), UNI_UTF8_INVALID, "overlong");
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xed\xa0\x80", 3, &len), UNI_UTF8_INVALID, "surrogate");
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xf4\x90\x80\x80", 4, &len), UNI_UTF8_INVALID);
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\xe2\x28", 2, &len), UNI_UTF8_INVALID);
	cr_expect_eq(len, 1, "maximal subpart: the lead byte alone");
	cr_expect_eq(uni_utf8_check((const uint8_t *)"\x80", 1, &len), UNI_UTF8_INVALID);
}

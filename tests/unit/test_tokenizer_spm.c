/* test_tokenizer_spm.c - the SentencePiece-style tokenizer
 * (tokenizer.ggml.model = "llama"): ids against llama.cpp, the gemma3
 * golden manifest, byte fallback, pieces, streaming detokenization,
 * llama_detokenize's rules, the gemma chat template, speed, and small SPM
 * vocabularies built here for what gemma3 does not exercise (the space
 * prefix, score order and ties, missing byte tokens, damaged metadata).
 *
 * Model-based tests use $HSQ_TEST_GEMMA (gemma-3-270m-q4_k_m.gguf) through
 * the internal API (gguf_open + tokenizer_load) and are skipped, with a
 * visible SKIP line, when it is not there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gguf_builder.h"
#pragma GCC diagnostic pop
#include "golden_util.h"
#include "hsq.h"
#include "common/unicode.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "model/tokenizer_spm.h"
#include "detok_stream.h"

/* ------------------------------------------------------------ helpers */

/* gemma3's tokenizer wrapped in a bare hsq_model, so the public calls
 * (hsq_tokenize, hsq_detok_push, hsq_chat_format) can be used too. */
typedef struct gemma {
	gguf_file *f;
	hsq_model m;
} gemma;

static void gemma_load(gemma *g)
{
	const char *path = getenv("HSQ_TEST_GEMMA");
	memset(g, 0, sizeof *g);
	if (!path || access(path, R_OK) != 0) {
		fprintf(stderr, "SKIP: gemma3 model not found (set HSQ_TEST_GEMMA to gemma-3-270m-q4_k_m.gguf)\n");
		cr_skip_test("HSQ_TEST_GEMMA not readable");
	}
	cr_assert_eq(gguf_open(path, &g->f), HSQ_OK, "%s: %s", path, hsq_last_error());
	cr_assert_eq(tokenizer_load(g->f, &g->m.tok), HSQ_OK, "%s: %s", path, hsq_last_error());
	strcpy(g->m.arch, "gemma3");
	strcpy(g->m.name, "gemma-3-270m");
}

static void gemma_free(gemma *g)
{
	tokenizer_free(g->m.tok);
	gguf_close(g->f);
}

static void expect_ids(const hsq_tokenizer *t, const char *text, size_t len, int add_bos, int special,
		       const hsq_token *want, size_t n_want)
{
	hsq_token *ids = NULL;
	size_t n = 0;
	cr_assert_eq(tokenizer_encode(t, text, len, add_bos, special, &ids, &n), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(n, n_want, "'%.*s': %zu tokens, want %zu", (int)len, text, n, n_want);
	for (size_t i = 0; i < n && i < n_want; i++)
		cr_expect_eq(ids[i], want[i], "'%.*s' token %zu: got %d want %d", (int)len, text, i, ids[i], want[i]);
	hsq_free(ids);
}

/* Decoding the tokens of text (special tokens as text) gives text back. */
static void expect_round_trip(const hsq_tokenizer *t, const char *text, size_t len, int special)
{
	hsq_token *ids = NULL;
	size_t n = 0, o = 0;
	char *back = malloc(len + 1);
	cr_assert_eq(tokenizer_encode(t, text, len, 0, special, &ids, &n), HSQ_OK, "%s", hsq_last_error());
	for (size_t i = 0; i < n; i++) {
		const char *b;
		size_t bl;
		cr_assert_eq(tokenizer_token_bytes(t, ids[i], 1, &b, &bl), HSQ_OK);
		cr_assert_leq(o + bl, len, "decoded text of '%.*s' longer than the input", (int)len, text);
		memcpy(back + o, b, bl);
		o += bl;
	}
	cr_expect(o == len && memcmp(back, text, len) == 0, "round trip of '%.*s' failed", (int)len, text);
	free(back);
	hsq_free(ids);
}

/* ------------------------------------------------- gemma3 against llama.cpp */

/* ids copied from llama.cpp as shipped in llama-cpp-python 0.3.36:
 * Llama(model_path=gemma-3-270m-q4_k_m.gguf, vocab_only=True)
 *     .tokenize(text, add_bos=True, special=...) */
static const struct known {
	const char *text;
	int special;
	hsq_token ids[24];
	size_t n;
} known[] = {
	{"Hello world, this is a test.", 1, {2, 9259, 1902, 236764, 672, 563, 496, 1594, 236761}, 9},
	/* "  " is a user-defined token, cut out before SPM */
	{"  two leading, two trailing  ", 1, {2, 138, 13498, 5830, 236764, 1156, 45330, 138}, 8},
	{"Tabs\tand\nnewlines\n\n\nand   runs", 1, {2, 76222, 255968, 624, 107, 208697, 109, 624, 139, 85817}, 10},
	{"Gr\xc3\xb6\xc3\x9f" "e, na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
	 "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88\xe3\x80\x81\xe4\xb8\xad\xe6\x96\x87\xe3\x80\x82 "
	 "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82!",
	 1,
	 {2, 9322, 237001, 16756, 236764, 120362, 33443, 2192, 33375, 238582, 236945, 95830, 236951, 55041, 236924,
	  15745, 8362, 236888},
	 18},
	{"emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d"
	 "\xf0\x9f\x91\xa7",
	 1, {2, 67906, 163543, 240493, 242713, 236743, 243874, 237243, 243767, 237243, 244814}, 11},
	{"<start_of_turn>user\nHi<end_of_turn>\n", 1, {2, 105, 2364, 107, 10979, 106, 107}, 7},
	{"<start_of_turn>user\nHi<end_of_turn>\n", 0,
	 {2, 236820, 3041, 236779, 1340, 236779, 887, 236813, 2364, 107, 10979, 236820, 643, 236779, 1340, 236779, 887,
	  236813, 107},
	 19},
	/* a literal U+2581 is the same symbol as an escaped space */
	{"a\xe2\x96\x81" "b \xe2\x96\x81", 1, {2, 236746, 518, 236743, 236743}, 5},
	/* byte fallback: U+10FFFD is no token */
	{"\xf4\x8f\xbf\xbd", 1, {2, 482, 381, 429, 427}, 5},
	/* 0xFF announces a 4-byte character: "\xff\xfe" "b\xe6" is one symbol */
	{"a\xff\xfe" "b\xe6\x97", 1, {2, 236746, 493, 492, 336, 468, 389}, 7},
	{"x<bos><unused42></s>[multimodal]y", 1, {2, 236781, 2, 48, 212, 5, 236762}, 7},
	{"x<bos><unused42></s>[multimodal]y", 0,
	 {2, 236781, 236820, 46757, 1798, 63634, 236812, 236778, 2588, 236751, 236813, 5, 236762}, 13},
};

Test(tokenizer_spm, matches_llama_cpp)
{
	gemma g;
	gemma_load(&g);
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		expect_ids(g.m.tok, known[i].text, strlen(known[i].text), -1, known[i].special, known[i].ids, known[i].n);
		/* add_bos = 0 drops exactly the leading BOS */
		expect_ids(g.m.tok, known[i].text, strlen(known[i].text), 0, known[i].special, known[i].ids + 1,
			   known[i].n - 1);
	}
	gemma_free(&g);
}

/* tests/golden/gemma3/tokens.tsv (llama.cpp, add_bos=True, special=True):
 * sources are relative to that folder, or corpora:. */
Test(tokenizer_spm, golden_manifest)
{
	gemma g;
	gemma_load(&g);
	gu_table tab = gu_table_load("gemma3/tokens.tsv");
	int n_run = 0, n_skip = 0;
	for (size_t i = 0; i < tab.n_rows; i++) {
		const gu_row *r = &tab.rows[i];
		const char *name = gu_field(r, 0), *src = gu_field(r, 1);
		char rel[1024];
		int skipped = 0;
		if (strncmp(src, "corpora:", 8) == 0)
			snprintf(rel, sizeof rel, "%s", src);
		else
			snprintf(rel, sizeof rel, "gemma3/%s", src);
		size_t len = (size_t)strtoull(gu_field(r, 3), NULL, 10);
		char *text = gu_load_source(rel, strtol(gu_field(r, 2), NULL, 10), len, gu_field(r, 4), &skipped);
		if (skipped) {
			n_skip++;
			continue;
		}
		hsq_token *want = NULL, *got = NULL;
		size_t n_want = gu_parse_ids(gu_field(r, 6), &want), n_got = 0;
		cr_assert_eq(n_want, (size_t)strtoul(gu_field(r, 5), NULL, 10), "%s: id count", name);
		cr_assert_eq(tokenizer_encode(g.m.tok, text, len, -1, 1, &got, &n_got), HSQ_OK, "%s: %s", name,
			     hsq_last_error());
		long d = gu_first_diff(got, n_got, want, n_want);
		cr_expect_eq(d, -1, "%s: %zu ids, llama.cpp %zu, first difference at %ld", name, n_got, n_want, d);
		n_run++;
		hsq_free(got);
		free(want);
		free(text);
	}
	if (n_skip)
		fprintf(stderr, "SKIP: %d gemma3 corpus cases: shared corpora not found (set HSQ_SHARED)\n", n_skip);
	cr_expect_gt(n_run, 40, "only %d manifest cases ran", n_run);
	gu_table_free(&tab);
	gemma_free(&g);
}

Test(tokenizer_spm, round_trip_is_byte_exact)
{
	static const char *const texts[] = {
		"", " ", "\n", "   trailing   ", "\t\t\n\r\n", "x\xc2\xa0y\xe3\x80\x80z", "don't DON'T o'clock",
		"0123456789 \xd9\xa3\xd9\xa4 \xef\xbc\x95",
		"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 family",
		"<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<start_of <end_of_turn", "<0x41> [multimodal]",
		"\xf4\x8f\xbf\xbd\xf3\xa0\x80\x81 private use and tags", "a\xff\xfe" "b\xe6\x97", /* invalid UTF-8 */
	};
	gemma g;
	gemma_load(&g);
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		expect_round_trip(g.m.tok, texts[i], strlen(texts[i]), 1);
		expect_round_trip(g.m.tok, texts[i], strlen(texts[i]), 0);
	}
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (!strstr(known[i].text, "\xe2\x96\x81")) /* U+2581 decodes as a space */
			expect_round_trip(g.m.tok, known[i].text, strlen(known[i].text), known[i].special);
	gemma_free(&g);
}

Test(tokenizer_spm, bos_eos_eog_and_pieces)
{
	gemma g;
	gemma_load(&g);
	const hsq_tokenizer *t = g.m.tok;
	cr_expect_eq(tokenizer_n_vocab(t), 262144);
	cr_expect_eq(tokenizer_bos(t), 2);
	cr_expect_eq(tokenizer_eos(t), 1);
	cr_expect_eq(tokenizer_add_bos(t), 1);
	/* llama_vocab_is_eog: <eos>, <end_of_turn> and </s>, nothing else */
	int n_eog = 0;
	for (hsq_token i = 0; i < tokenizer_n_vocab(t); i++)
		n_eog += tokenizer_is_eog(t, i);
	cr_expect_eq(n_eog, 3);
	cr_expect(tokenizer_is_eog(t, 1) && tokenizer_is_eog(t, 106) && tokenizer_is_eog(t, 212));
	cr_expect_eq(tokenizer_find(t, "<end_of_turn>"), 106);

	const char *b;
	size_t n;
	cr_assert_eq(tokenizer_token_bytes(t, 1902, 0, &b, &n), HSQ_OK); /* "▁world" */
	cr_expect(n == 6 && memcmp(b, " world", 6) == 0);
	cr_assert_eq(tokenizer_token_bytes(t, 482, 0, &b, &n), HSQ_OK); /* "<0xF4>" */
	cr_expect(n == 1 && (uint8_t)b[0] == 0xf4);
	cr_assert_eq(tokenizer_token_bytes(t, 106, 0, &b, &n), HSQ_OK);
	cr_expect_eq(n, 0, "control tokens are not text unless special is set");
	cr_assert_eq(tokenizer_token_bytes(t, 106, 1, &b, &n), HSQ_OK);
	cr_expect(n == 13 && memcmp(b, "<end_of_turn>", 13) == 0);
	cr_assert_eq(tokenizer_token_bytes(t, 138, 0, &b, &n), HSQ_OK); /* user-defined "  " */
	cr_expect(n == 2 && memcmp(b, "  ", 2) == 0);
	cr_assert_eq(tokenizer_token_bytes(t, 6, 1, &b, &n), HSQ_OK); /* <unused0>: control */
	cr_expect(n == 9 && memcmp(b, "<unused0>", 9) == 0);
	cr_expect_eq(tokenizer_token_bytes(t, 262144, 1, &b, &n), HSQ_ERR_INVALID_ARG);
	gemma_free(&g);
}

Test(tokenizer_spm, streaming_detok_of_byte_tokens)
{
	gemma g;
	gemma_load(&g);
	/* U+10FFFD is four byte tokens: three pushes print nothing. */
	cr_expect_eq(detok_stream(&g.m, "x \xf4\x8f\xbf\xbd y"), 3);
	cr_expect_eq(detok_stream(&g.m, "Hello world, \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e!"), 0);

	hsq_detok st = {0};
	char out[16];
	size_t got;
	cr_assert_eq(hsq_detok_push(&g.m, &st, 482, out, sizeof out, &got), HSQ_OK); /* <0xF4> */
	cr_expect_eq(got, 0);
	cr_assert_eq(hsq_detok_push(&g.m, &st, 381, out, sizeof out, &got), HSQ_OK); /* <0x8F> */
	cr_expect_eq(got, 0);
	cr_expect_eq(st.n_pending, 2);
	cr_assert_eq(hsq_detok_push(&g.m, &st, 106, out, sizeof out, &got), HSQ_OK); /* <end_of_turn>: nothing */
	cr_expect(got == 0 && st.n_pending == 2);
	/* "▁world" cannot continue the sequence: U+FFFD, then " world". */
	cr_assert_eq(hsq_detok_push(&g.m, &st, 1902, out, sizeof out, &got), HSQ_OK);
	cr_expect(got == 9 && memcmp(out, "\xef\xbf\xbd world", 9) == 0);
	cr_expect_eq(hsq_detok_flush(&st, out, sizeof out), 0);
	gemma_free(&g);
}

Test(tokenizer_spm, detokenize_like_llama_cpp)
{
	/* llama_detokenize(remove_special, unparse_special) of
	 * <bos><start_of_turn>user\nHi<end_of_turn>\n, from llama.cpp 0.3.36 */
	static const hsq_token ids[] = {2, 105, 2364, 107, 10979, 106, 107};
	static const struct {
		int rs, up;
		const char *want;
	} cases[] = {
		{0, 0, "user\nHi\n"},
		{0, 1, "<bos><start_of_turn>user\nHi<end_of_turn>\n"},
		{1, 0, "user\nHi\n"},
		{1, 1, "<start_of_turn>user\nHi<end_of_turn>\n"},
	};
	gemma g;
	gemma_load(&g);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *s;
		size_t n;
		cr_assert_eq(tokenizer_detokenize(g.m.tok, ids, 7, cases[i].rs, cases[i].up, &s, &n), HSQ_OK);
		cr_expect(n == strlen(cases[i].want) && strcmp(s, cases[i].want) == 0, "(%d, %d): '%s'", cases[i].rs,
			  cases[i].up, s);
		free(s);
	}
	/* gemma3 has no space prefix: nothing is stripped */
	static const hsq_token sp[] = {2, 236746, 518, 236743, 236743};
	char *s;
	size_t n;
	cr_assert_eq(tokenizer_detokenize(g.m.tok, sp, 5, 1, 0, &s, &n), HSQ_OK);
	cr_expect_str_eq(s, "a b  ");
	free(s);
	cr_expect_eq(tokenizer_detokenize(g.m.tok, ids, 0, 1, 1, &s, &n), HSQ_OK);
	cr_expect(n == 0 && s[0] == '\0');
	free(s);
	gemma_free(&g);
}

Test(tokenizer_spm, chat_format_gemma)
{
	gemma g;
	char *p;
	hsq_token *ids;
	size_t n;
	gemma_load(&g);
	/* as llama.cpp's llama_chat_apply_template("gemma") writes them */
	cr_assert_eq(hsq_chat_format(&g.m, NULL, "  Hi there \n", &p), HSQ_OK, "%s", hsq_last_error());
	cr_expect_str_eq(p, "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
	hsq_free(p);
	cr_assert_eq(hsq_chat_format(&g.m, " Be brief. ", "Hi", &p), HSQ_OK);
	cr_expect_str_eq(p, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
	/* tokenized with the model's default: BOS first, markers as tokens */
	static const hsq_token want[] = {2, 105, 2364, 107, 3912, 8652, 236761, 108, 10979, 106, 107, 105, 4368, 107};
	cr_assert_eq(hsq_tokenize(&g.m, p, strlen(p), -1, 1, &ids, &n), HSQ_OK);
	cr_expect(n == sizeof want / sizeof want[0] && memcmp(ids, want, sizeof want) == 0, "%zu ids", n);
	hsq_free(ids);
	hsq_free(p);
	cr_assert_eq(hsq_chat_format(&g.m, "   ", "Hi", &p), HSQ_OK);
	cr_expect_str_eq(p, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
	hsq_free(p);
	cr_expect_eq(hsq_chat_format(&g.m, NULL, NULL, &p), HSQ_ERR_INVALID_ARG);
	gemma_free(&g);
}

Test(tokenizer_spm, one_megabyte_is_fast)
{
	static const char para[] =
		"It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
		"foolishness; it was the epoch of belief (1775)...\n\n  \"Don't!\" she said -- \xe6\x97\xa5\xe6\x9c\xac "
		"\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 caf\xc3\xa9\t";
	size_t len = 1 << 20, pl = sizeof para - 1;
	gemma g;
	gemma_load(&g);
	char *text = malloc(len);
	for (size_t i = 0; i < len; i++)
		text[i] = para[i % pl];
	hsq_token *ids;
	size_t n;
	struct timespec a, b;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	cr_assert_eq(tokenizer_encode(g.m.tok, text, len, -1, 1, &ids, &n), HSQ_OK);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	/* ~0.2 s of CPU optimised; ASan/UBSan cost several times that. */
	cr_expect_lt(s, 4.0, "tokenizing 1 MiB took %.2f s of CPU", s);
	cr_expect_gt(n, len / 8);
	/* one long line without spaces merges in O(n log n) too */
	memset(text, 'a', len);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	hsq_free(ids);
	cr_assert_eq(tokenizer_encode(g.m.tok, text, len, 0, 1, &ids, &n), HSQ_OK);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	cr_expect_lt(s, 4.0, "tokenizing 1 MiB of 'a' took %.2f s of CPU", s);
	hsq_free(ids);
	free(text);
	gemma_free(&g);
}

/* ------------------------------------------ small SPM vocabularies built here */

static void kv_bool(gbuf *b, const char *k, int v)
{
	gb_str(b, k);
	gb_u32(b, 7);
	uint8_t x = (uint8_t)v;
	gb_put(b, &x, 1);
}

static void kv_strs(gbuf *b, const char *k, char *const *v, size_t n)
{
	gb_str(b, k);
	gb_u32(b, 9);
	gb_u32(b, 8);
	gb_u64(b, n);
	for (size_t i = 0; i < n; i++)
		gb_str(b, v[i]);
}

static void kv_arr32(gbuf *b, const char *k, uint32_t type, const void *v, size_t n)
{
	gb_str(b, k);
	gb_u32(b, 9);
	gb_u32(b, type);
	gb_u64(b, n);
	gb_put(b, v, 4 * n);
}

/* Tokens: <unk> <s> </s>, <0x00>..<0xFF>, then the pieces below. Pairs
 * "xy"/"yz" tie on score (the leftmost merges); "qr" beats "pq". */
enum { T_BYTE0 = 3 };
static const struct {
	const char *text;
	float score;
} pieces[] = {
	{"\xe2\x96\x81", -10}, {"a", -10}, {"b", -10}, {"x", -10}, {"y", -10}, {"z", -10}, {"p", -10},
	{"q", -10}, {"r", -10}, {"\xe2\x96\x81" "a", -2}, {"xy", -1}, {"yz", -1}, {"pq", -2}, {"qr", -1},
};
#define N_PIECES (sizeof pieces / sizeof pieces[0])

struct spm_opts {
	int prefix;     /* tokenizer.ggml.add_space_prefix: -1 absent (true), 0, 1 */
	int no_bytes;   /* leave the <0xXX> tokens out */
	int no_scores;  /* leave tokenizer.ggml.scores out */
	int int_scores; /* scores as int32 */
};

/* The id of a piece, given the options. */
static hsq_token piece_id(const struct spm_opts *o, const char *text)
{
	for (size_t i = 0; i < N_PIECES; i++)
		if (strcmp(pieces[i].text, text) == 0)
			return (hsq_token)(3 + (o->no_bytes ? 0 : 256) + i);
	cr_assert_fail("no piece '%s'", text);
	return -1;
}

static hsq_status spm_tiny(const struct spm_opts *o, gguf_file **f, hsq_tokenizer **tok)
{
	static int seq;
	char *text[3 + 256 + N_PIECES], path[96];
	float scores[3 + 256 + N_PIECES];
	int32_t iscores[3 + 256 + N_PIECES], types[3 + 256 + N_PIECES];
	size_t n = 0;
	gbuf b = {0};

	const char *ctl[] = {"<unk>", "<s>", "</s>"};
	for (int i = 0; i < 3; i++, n++) {
		text[n] = strdup(ctl[i]);
		scores[n] = 0;
		types[n] = i == 0 ? 2 : 3;
	}
	for (int c = 0; c < 256 && !o->no_bytes; c++, n++) {
		text[n] = malloc(8);
		snprintf(text[n], 8, "<0x%02X>", c);
		scores[n] = 0;
		types[n] = 6;
	}
	for (size_t i = 0; i < N_PIECES; i++, n++) {
		text[n] = strdup(pieces[i].text);
		scores[n] = pieces[i].score;
		types[n] = 1;
	}
	for (size_t i = 0; i < n; i++)
		iscores[i] = (int32_t)scores[i];

	gb_u32(&b, 0x46554747u);
	gb_u32(&b, 3);
	gb_u64(&b, 0);
	gb_u64(&b, 4 + !o->no_scores + (o->prefix >= 0));
	kv_str(&b, "tokenizer.ggml.model", "llama");
	kv_str(&b, "tokenizer.ggml.pre", "no-such-pre"); /* llama.cpp ignores it for SPM */
	kv_strs(&b, "tokenizer.ggml.tokens", text, n);
	kv_arr32(&b, "tokenizer.ggml.token_type", 5, types, n);
	if (!o->no_scores)
		kv_arr32(&b, "tokenizer.ggml.scores", o->int_scores ? 5 : 6, o->int_scores ? (void *)iscores : (void *)scores,
			 n);
	if (o->prefix >= 0)
		kv_bool(&b, "tokenizer.ggml.add_space_prefix", o->prefix);
	gb_pad(&b, 32);
	for (size_t i = 0; i < n; i++)
		free(text[i]);
	snprintf(path, sizeof path, "/tmp/hsq-test-spm-%d-%d.gguf", (int)getpid(), seq++);
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

static void tiny_expect(const hsq_tokenizer *t, const struct spm_opts *o, const char *text, int add_bos,
			const char *const *want)
{
	hsq_token ids[16];
	size_t n = 0;
	for (; want[n]; n++) {
		if (strcmp(want[n], "<s>") == 0)
			ids[n] = 1;
		else if (strncmp(want[n], "<0x", 3) == 0)
			ids[n] = T_BYTE0 + (hsq_token)strtol(want[n] + 3, NULL, 16);
		else
			ids[n] = piece_id(o, want[n]);
	}
	expect_ids(t, text, strlen(text), add_bos, 1, ids, n);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(tokenizer_spm_meta, merges_by_score_leftmost_on_ties)
{
	gguf_file *f;
	hsq_tokenizer *t;
	for (int is = 0; is < 2; is++) {
		struct spm_opts o = {.prefix = 0, .int_scores = is};
		cr_assert_eq(spm_tiny(&o, &f, &t), HSQ_OK, "%s", hsq_last_error());
		cr_expect_eq(tokenizer_bos(t), 1, "llama.cpp's SPM default");
		cr_expect_eq(tokenizer_eos(t), 2);
		cr_expect_eq(tokenizer_add_bos(t), 1);
		cr_expect(tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 1));
		tiny_expect(t, &o, "xyz", 0, W("xy", "z"));
		tiny_expect(t, &o, "pqr", 0, W("p", "qr"));
		tiny_expect(t, &o, "xyzpqr", -1, W("<s>", "xy", "z", "p", "qr"));
		/* no prefix: "▁a" only where the text has a space */
		tiny_expect(t, &o, "a a", 0, W("a", "\xe2\x96\x81" "a"));
		/* byte fallback: "é" is no token */
		tiny_expect(t, &o, "\xc3\xa9z", 0, W("<0xC3>", "<0xA9>", "z"));
		tokenizer_free(t);
		gguf_close(f);
	}
}

Test(tokenizer_spm_meta, space_prefix)
{
	gguf_file *f;
	hsq_tokenizer *t;
	struct spm_opts o = {.prefix = -1}; /* absent: llama.cpp's default, true */
	cr_assert_eq(spm_tiny(&o, &f, &t), HSQ_OK, "%s", hsq_last_error());
	tiny_expect(t, &o, "a b", 0, W("\xe2\x96\x81" "a", "\xe2\x96\x81", "b"));
	tiny_expect(t, &o, "a", -1, W("<s>", "\xe2\x96\x81" "a"));
	/* after a special token the prefix comes again */
	tiny_expect(t, &o, "a<s>a", 0, W("\xe2\x96\x81" "a", "<s>", "\xe2\x96\x81" "a"));
	tiny_expect(t, &o, "<s>a", 0, W("<s>", "\xe2\x96\x81" "a"));

	/* llama_detokenize drops the prefix's space from the first token,
	 * except after a removed BOS; a kept BOS uses up the stripping. */
	hsq_token a = piece_id(&o, "\xe2\x96\x81" "a"), sp = piece_id(&o, "\xe2\x96\x81"), bb = piece_id(&o, "b");
	struct {
		hsq_token ids[4];
		size_t n;
		int rs, up;
		const char *want;
	} cases[] = {
		{{a, sp, bb}, 3, 1, 0, "a b"},       {{1, a, sp, bb}, 4, 1, 0, " a b"},
		{{1, a, sp, bb}, 4, 0, 0, " a b"},   {{1, a, sp, bb}, 4, 0, 1, "<s> a b"},
		{{T_BYTE0 + ' ', a}, 2, 1, 0, " a"}, /* only one space goes, and only from the first token */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *s;
		size_t n;
		cr_assert_eq(tokenizer_detokenize(t, cases[i].ids, cases[i].n, cases[i].rs, cases[i].up, &s, &n), HSQ_OK);
		cr_expect_str_eq(s, cases[i].want, "case %zu", i);
		free(s);
	}
	tokenizer_free(t);
	gguf_close(f);
}

Test(tokenizer_spm_meta, refuses_damaged)
{
	gguf_file *f;
	hsq_tokenizer *t;
	struct spm_opts o = {.no_scores = 1};
	cr_expect_eq(spm_tiny(&o, &f, &t), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "scores"), "%s", hsq_last_error());

	/* Without byte tokens a character that is no token cannot be encoded
	 * (llama.cpp throws); everything else still works. */
	o = (struct spm_opts){.prefix = 0, .no_bytes = 1};
	cr_assert_eq(spm_tiny(&o, &f, &t), HSQ_OK, "%s", hsq_last_error());
	tiny_expect(t, &o, "xyz", 0, W("xy", "z"));
	hsq_token *ids;
	size_t n;
	cr_expect_eq(tokenizer_encode(t, "x\xc3\xa9", 3, 0, 1, &ids, &n), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "0xC3"), "%s", hsq_last_error());
	tokenizer_free(t);
	gguf_close(f);
}

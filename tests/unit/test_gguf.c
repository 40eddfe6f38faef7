/* test_gguf.c - the GGUF reader on well-formed and hostile files. */
#include <criterion/criterion.h>
#include <math.h>
#include <unistd.h>

#include "common/sha256.h"
#include "hsq.h"
#include "model/gguf.h"
#include "gguf_builder.h"

static char path[64];

static void setup(void)
{
	snprintf(path, sizeof path, "/tmp/hsq-test-gguf-%d.gguf", (int)getpid());
}
static void teardown(void)
{
	unlink(path);
}

/* A v3 file with one key of every scalar type, a string array, an int
 * array, and two F32 tensors. Returns the buffer. */
static gbuf build_valid(uint32_t version)
{
	gbuf b = { 0 };
	gb_u32(&b, 0x46554747u);
	gb_u32(&b, version);
	gb_u64(&b, 2);  /* tensors */
	gb_u64(&b, 15); /* kvs */
	gb_str(&b, "k.u8"); gb_u32(&b, 0); gb_put(&b, (uint8_t[]){ 200 }, 1);
	gb_str(&b, "k.i8"); gb_u32(&b, 1); gb_put(&b, (int8_t[]){ -5 }, 1);
	gb_str(&b, "k.u16"); gb_u32(&b, 2); gb_put(&b, (uint16_t[]){ 60000 }, 2);
	gb_str(&b, "k.i16"); gb_u32(&b, 3); gb_put(&b, (int16_t[]){ -300 }, 2);
	kv_u32(&b, "k.u32", 4000000000u);
	gb_str(&b, "k.i32"); gb_u32(&b, 5); gb_put(&b, (int32_t[]){ -70000 }, 4);
	kv_f32(&b, "k.f32", 0.25f);
	gb_str(&b, "k.bool"); gb_u32(&b, 7); gb_put(&b, (uint8_t[]){ 1 }, 1);
	kv_str(&b, "general.architecture", "llama");
	gb_str(&b, "k.u64"); gb_u32(&b, 10); gb_u64(&b, 1ull << 40);
	gb_str(&b, "k.i64"); gb_u32(&b, 11); gb_u64(&b, (uint64_t)-9);
	gb_str(&b, "k.f64"); gb_u32(&b, 12); gb_put(&b, (double[]){ 1.5 }, 8);
	gb_str(&b, "k.strs"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 3);
	gb_str(&b, "a"); gb_str(&b, ""); gb_str(&b, "ccc");
	gb_str(&b, "k.ints"); gb_u32(&b, 9); gb_u32(&b, 5); gb_u64(&b, 4);
	for (int32_t i = 0; i < 4; i++) gb_put(&b, &i, 4);
	kv_u32(&b, "general.alignment", 64);
	tensor_info(&b, "t.a", 1, (uint64_t[]){ 4 }, 0, 0);
	tensor_info(&b, "t.b", 2, (uint64_t[]){ 2, 3 }, 0, 64);
	gb_pad(&b, 64);
	float a[16] = { 1, 2, 3, 4 }, bb[6] = { 5, 6, 7, 8, 9, 10 };
	gb_put(&b, a, sizeof a); /* 64 bytes: 16 B of data + padding */
	gb_put(&b, bb, sizeof bb);
	return b;
}

TestSuite(gguf, .init = setup, .fini = teardown);

Test(gguf, reads_every_metadata_type_v2_and_v3)
{
	for (uint32_t v = 2; v <= 3; v++) {
		gbuf b = build_valid(v);
		cr_assert_eq(write_file(path, b.p, b.n), 0);
		gguf_file *f;
		cr_assert_eq(gguf_open(path, &f), HSQ_OK, "v%u: %s", v, hsq_last_error());
		cr_expect_eq(f->version, v);
		int64_t i;
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.u8"), &i), 0); cr_expect_eq(i, 200);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.i8"), &i), 0); cr_expect_eq(i, -5);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.u16"), &i), 0); cr_expect_eq(i, 60000);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.i16"), &i), 0); cr_expect_eq(i, -300);
		cr_expect_eq(gguf_get_u32_or(f, "k.u32", 0), 4000000000u);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.i32"), &i), 0); cr_expect_eq(i, -70000);
		cr_expect_float_eq(gguf_get_f32_or(f, "k.f32", 0), 0.25f, 0);
		cr_expect_eq(gguf_get_bool_or(f, "k.bool", 0), 1);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.u64"), &i), 0); cr_expect_eq(i, 1ll << 40);
		cr_assert_eq(gguf_kv_as_i64(gguf_find(f, "k.i64"), &i), 0); cr_expect_eq(i, -9);
		cr_expect_float_eq(gguf_get_f32_or(f, "k.f64", 0), 1.5f, 0);
		gguf_str s;
		cr_assert_eq(gguf_get_str(f, "general.architecture", &s), 0);
		cr_expect_eq(s.len, 5);
		cr_expect_eq(memcmp(s.ptr, "llama", 5), 0);
		gguf_str_iter it;
		uint64_t n;
		cr_assert_eq(gguf_str_array(f, "k.strs", &it, &n), HSQ_OK);
		cr_expect_eq(n, 3);
		const char *want[] = { "a", "", "ccc" };
		for (int k = 0; gguf_str_next(&it, &s); k++)
			cr_expect(s.len == strlen(want[k]) && memcmp(s.ptr, want[k], s.len) == 0);
		const void *arr;
		cr_assert_eq(gguf_num_array(f, "k.ints", 5, &arr, &n), HSQ_OK);
		cr_expect_eq(n, 4);
		int32_t third;
		memcpy(&third, (const uint8_t *)arr + 12, 4); /* metadata arrays are unaligned */
		cr_expect_eq(third, 3);
		cr_expect_eq(gguf_num_array(f, "k.ints", 6, &arr, &n), HSQ_ERR_FORMAT, "wrong element type refused");
		cr_expect_eq(f->alignment, 64);
		const gguf_tensor *t = gguf_find_tensor(f, "t.b");
		cr_assert_not_null(t);
		cr_expect_eq(t->ne[0], 2);
		cr_expect_eq(t->ne[1], 3);
		cr_expect_eq(t->n_bytes, 24);
		cr_expect_float_eq(((const float *)t->data)[5], 10.0f, 0);
		cr_expect_float_eq(((const float *)gguf_find_tensor(f, "t.a")->data)[3], 4.0f, 0);
		cr_expect_null(gguf_find_tensor(f, "t.c"));
		gguf_close(f);
		free(b.p);
	}
}

/* Every prefix of a valid file is refused cleanly (no crash, a status). */
Test(gguf, every_truncation_is_an_error)
{
	gbuf b = build_valid(3);
	for (size_t n = 0; n < b.n; n++) {
		cr_assert_eq(write_file(path, b.p, n), 0);
		gguf_file *f = NULL;
		hsq_status st = gguf_open(path, &f);
		cr_expect(st == HSQ_ERR_TRUNCATED || st == HSQ_ERR_FORMAT, "prefix %zu: status %d", n, st);
		cr_expect_null(f);
		cr_expect_neq(hsq_last_error()[0], '\0');
	}
	free(b.p);
}

/* Flipping any single header/table byte never crashes the reader. */
Test(gguf, byte_flips_never_crash)
{
	gbuf b = build_valid(3);
	size_t table_end = b.n - 64 - 24 - 8; /* roughly: before data */
	for (size_t i = 0; i < table_end; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			b.p[i] ^= (uint8_t)(1 << bit);
			cr_assert_eq(write_file(path, b.p, b.n), 0);
			gguf_file *f = NULL;
			if (gguf_open(path, &f) == HSQ_OK)
				gguf_close(f);
			b.p[i] ^= (uint8_t)(1 << bit);
		}
	}
	free(b.p);
}

static hsq_status open_bytes(gbuf *b)
{
	cr_assert_eq(write_file(path, b->p, b->n), 0);
	gguf_file *f = NULL;
	hsq_status st = gguf_open(path, &f);
	gguf_close(f);
	free(b->p);
	return st;
}

Test(gguf, hostile_headers)
{
	gbuf b = { 0 };
	gb_put(&b, "GGML not a gguf file....", 24);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_FORMAT);
	cr_expect(strstr(hsq_last_error(), "not a GGUF file") != NULL, "%s", hsq_last_error());

	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 1); gb_u64(&b, 0); gb_u64(&b, 0);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_UNSUPPORTED, "GGUF v1 refused");

	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 0x03000000u); gb_u64(&b, 0); gb_u64(&b, 0);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "big-endian") != NULL, "%s", hsq_last_error());

	/* absurd counts */
	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 1ull << 62); gb_u64(&b, 1ull << 62);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_FORMAT);

	/* a string length past the end of the file */
	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 0); gb_u64(&b, 1);
	gb_u64(&b, 0xffffffffffffff00ull); gb_put(&b, "key", 3);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_TRUNCATED);

	/* array length that would overflow n * size */
	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 0); gb_u64(&b, 1);
	gb_str(&b, "k"); gb_u32(&b, 9); gb_u32(&b, 10); gb_u64(&b, 1ull << 62);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_TRUNCATED);

	/* invalid value type */
	b = (gbuf){ 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 0); gb_u64(&b, 1);
	gb_str(&b, "k"); gb_u32(&b, 77); gb_u32(&b, 0);
	cr_expect_eq(open_bytes(&b), HSQ_ERR_FORMAT);
}

static hsq_status one_tensor(uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off, size_t data_bytes,
			     uint32_t align)
{
	gbuf b = { 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 1); gb_u64(&b, align ? 1 : 0);
	if (align)
		kv_u32(&b, "general.alignment", align);
	tensor_info(&b, "t", n_dims, ne, type, off);
	gb_pad(&b, align ? align : 32);
	uint8_t *zeros = calloc(1, data_bytes + 1);
	gb_put(&b, zeros, data_bytes);
	free(zeros);
	return open_bytes(&b);
}

Test(gguf, hostile_tensor_tables)
{
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 8 }, 0, 0, 32, 0), HSQ_OK);
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 9 }, 0, 0, 32, 0), HSQ_ERR_TRUNCATED, "data past the end");
	cr_expect_eq(one_tensor(5, (uint64_t[]){ 1, 1, 1, 1, 1 }, 0, 0, 32, 0), HSQ_ERR_FORMAT, "5 dims");
	cr_expect_eq(one_tensor(2, (uint64_t[]){ 1ull << 39, 1ull << 39 }, 0, 0, 32, 0), HSQ_ERR_FORMAT, "overflow");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 0 }, 0, 0, 32, 0), HSQ_ERR_FORMAT, "zero dim");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 8 }, 0, 4, 64, 0), HSQ_ERR_FORMAT, "misaligned offset");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 8 }, 99, 0, 64, 0), HSQ_ERR_FORMAT, "unknown type id");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 33 }, 2, 0, 64, 0), HSQ_ERR_FORMAT, "Q4_0 row not a block multiple");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 32 }, 2, 0, 18, 0), HSQ_OK, "one Q4_0 block");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 8 }, 0, 0, 64, 48), HSQ_ERR_FORMAT, "alignment not a power of two");
	cr_expect_eq(one_tensor(1, (uint64_t[]){ 8 }, 0, 0, 64, 64), HSQ_OK, "alignment 64");
}

Test(gguf, missing_file_names_path)
{
	gguf_file *f;
	cr_expect_eq(gguf_open("/nonexistent/x.gguf", &f), HSQ_ERR_IO);
	cr_expect(strstr(hsq_last_error(), "/nonexistent/x.gguf") != NULL);
}

Test(gguf, real_model_tensor_table)
{
	const char *m = getenv("HSQ_TEST_MODEL");
	if (!m || access(m, R_OK)) {
		printf("SKIP: real model tensor table (HSQ_TEST_MODEL not set or missing)\n");
		cr_skip_test("HSQ_TEST_MODEL not set");
	}
	gguf_file *f;
	cr_assert_eq(gguf_open(m, &f), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(f->version, 3);
	cr_expect_eq(f->n_tensors, 272);
	cr_expect_eq(f->n_kv, 33);
	const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
	cr_assert_not_null(t);
	cr_expect_eq(t->type, 8, "Q8_0 embedding");
	cr_expect_eq(t->ne[0], 576);
	cr_expect_eq(t->ne[1], 49152);
	cr_expect_eq(gguf_get_u32_or(f, "llama.block_count", 0), 30);
	gguf_close(f);
}

/* ------------------------------------------------------------ identity */

/* One F32 tensor of 1024 values (4 KiB) whose value at [mid] is v. */
static gbuf one_big_tensor(float v)
{
	gbuf b = { 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 1); gb_u64(&b, 0);
	tensor_info(&b, "t", 1, (uint64_t[]){ 1024 }, 0, 0);
	gb_pad(&b, 32);
	float x[1024] = { 0 };
	x[512] = v;
	gb_put(&b, x, sizeof x);
	return b;
}

static void identity_of(gbuf *b, uint8_t id[32])
{
	cr_assert_eq(write_file(path, b->p, b->n), 0);
	gguf_file *f = NULL;
	cr_assert_eq(gguf_open(path, &f), HSQ_OK, "%s", hsq_last_error());
	memcpy(id, f->identity, 32);
	gguf_close(f);
	free(b->p);
}

Test(gguf, identity_covers_every_weight_byte)
{
	uint8_t a[32], b[32], whole[32];
	gbuf g = one_big_tensor(1.0f);
	sha256(g.p, g.n, whole);
	identity_of(&g, a);
	cr_expect_eq(memcmp(a, whole, 32), 0, "the identity is the SHA-256 of the whole file");
	g = one_big_tensor(2.0f); /* byte 2048 of 4096: outside the first and last 256 */
	identity_of(&g, b);
	cr_expect_neq(memcmp(a, b, 32), 0, "a weight in the middle of a tensor must change the identity");
}

static void hex(const uint8_t d[32], char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

Test(gguf, sha256_known_answers)
{
	uint8_t d[32];
	char h[65];
	sha256("abc", 3, d);
	hex(d, h);
	cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256("", 0, d);
	hex(d, h);
	cr_expect_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha256(m, strlen(m), d);
	hex(d, h);
	cr_expect_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"); /* FIPS 180-2 B.2 */
	/* one million 'a', fed in uneven pieces */
	static uint8_t mil[1000000];
	memset(mil, 'a', sizeof mil);
	sha256_ctx c;
	sha256_init(&c);
	for (size_t off = 0, step = 1; off < sizeof mil; off += step, step = step * 3 % 1021 + 1)
		sha256_update(&c, mil + off, off + step > sizeof mil ? sizeof mil - off : step);
	sha256_final(&c, d);
	hex(d, h);
	cr_expect_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* The CPU's SHA extensions (where present) and the portable code agree on
 * every block count from 0 to 40 over varied data and states. */
Test(gguf, sha256_accelerated_matches_portable)
{
	uint8_t data[64 * 40];
	uint32_t seed = 12345;
	for (size_t i = 0; i < sizeof data; i++) {
		seed = seed * 1664525u + 1013904223u;
		data[i] = (uint8_t)(seed >> 24);
	}
	uint32_t probe[8] = { 0 };
	if (sha256_blocks_accel(probe, data, 1)) {
		printf("SKIP: sha256 accelerated path (this CPU has no SHA extensions)\n");
		cr_skip_test("no SHA extensions");
	}
	for (size_t n = 0; n <= 40; n++) {
		uint32_t a[8], b[8];
		for (int i = 0; i < 8; i++)
			a[i] = b[i] = (uint32_t)(0x9e3779b9u * (uint32_t)(i + n));
		sha256_blocks_portable(a, data + (n % 7), n > 39 ? 39 : n);
		cr_assert_eq(sha256_blocks_accel(b, data + (n % 7), n > 39 ? 39 : n), 0);
		cr_assert_eq(memcmp(a, b, sizeof a), 0, "%zu blocks differ", n);
	}
}

/* ------------------------------------------- model sanity (model.c) */

/* A tiny llama model built in memory: its metadata and tensor table are
 * fields a test can change before tiny_model_bytes() writes the file. */
typedef struct tiny_tensor {
	char name[48];
	uint32_t n_dims;
	uint64_t ne[2];
	uint32_t type;  /* F32 (0) unless a test says otherwise */
	int64_t offset; /* -1: the next free aligned slot */
} tiny_tensor;

typedef struct tiny_model {
	uint32_t block_count, n_embd, n_head, n_head_kv, n_ff;
	float rope_base, eps;  /* written as f32 */
	int rope_as_string;    /* write rope.freq_base as a string instead */
	int n_t;
	tiny_tensor t[40];
} tiny_model;

static void tiny_add(tiny_model *m, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1)
{
	tiny_tensor *t = &m->t[m->n_t++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->n_dims = n_dims;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->type = 0;
	t->offset = -1;
}

/* 2 layers, hidden 8, 2 query heads and 1 kv head of 4 dims, ffn 16,
 * vocabulary 8: every tensor the llama loader asks for, in F32. */
static tiny_model tiny_llama(void)
{
	tiny_model m = { .block_count = 2, .n_embd = 8, .n_head = 2, .n_head_kv = 1, .n_ff = 16,
			 .rope_base = 10000.0f, .eps = 1e-5f };
	tiny_add(&m, "token_embd.weight", 2, 8, 8);
	tiny_add(&m, "output_norm.weight", 1, 8, 1);
	for (int l = 0; l < 2; l++) {
		char n[48];
#define T(suffix, dims, a, b) snprintf(n, sizeof n, "blk.%d." suffix ".weight", l); tiny_add(&m, n, dims, a, b);
		T("attn_norm", 1, 8, 1)
		T("ffn_norm", 1, 8, 1)
		T("attn_q", 2, 8, 8)
		T("attn_k", 2, 8, 4)
		T("attn_v", 2, 8, 4)
		T("attn_output", 2, 8, 8)
		T("ffn_gate", 2, 8, 16)
		T("ffn_up", 2, 8, 16)
		T("ffn_down", 2, 16, 8)
#undef T
	}
	return m;
}

static tiny_tensor *tiny_find(tiny_model *m, const char *name)
{
	for (int i = 0; i < m->n_t; i++)
		if (!strcmp(m->t[i].name, name))
			return &m->t[i];
	cr_assert_fail("no tensor %s", name);
	return NULL;
}

static uint64_t tiny_bytes(const tiny_tensor *t)
{
	uint64_t n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);
	return t->type == 2 ? n / 32 * 18 : n * 4; /* Q4_0 or F32 */
}

static hsq_status tiny_load(tiny_model *m)
{
	gbuf b = { 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, (uint64_t)m->n_t); gb_u64(&b, 12);
	kv_str(&b, "general.architecture", "llama");
	kv_u32(&b, "llama.block_count", m->block_count);
	kv_u32(&b, "llama.embedding_length", m->n_embd);
	kv_u32(&b, "llama.feed_forward_length", m->n_ff);
	kv_u32(&b, "llama.attention.head_count", m->n_head);
	kv_u32(&b, "llama.attention.head_count_kv", m->n_head_kv);
	if (m->rope_as_string)
		kv_str(&b, "llama.rope.freq_base", "10000");
	else
		kv_f32(&b, "llama.rope.freq_base", m->rope_base);
	kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", m->eps);
	kv_str(&b, "tokenizer.ggml.model", "gpt2");
	kv_str(&b, "tokenizer.ggml.pre", "default");
	gb_str(&b, "tokenizer.ggml.tokens"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 8);
	for (int i = 0; i < 8; i++)
		gb_str(&b, (const char[]){ (char)('a' + i), 0 });
	gb_str(&b, "tokenizer.ggml.merges"); gb_u32(&b, 9); gb_u32(&b, 8); gb_u64(&b, 1);
	gb_str(&b, "a b");
	uint64_t next = 0, end = 0;
	for (int i = 0; i < m->n_t; i++) {
		tiny_tensor *t = &m->t[i];
		uint64_t off = t->offset >= 0 ? (uint64_t)t->offset : next;
		tensor_info(&b, t->name, t->n_dims, t->ne, t->type, off);
		uint64_t e = off + tiny_bytes(t);
		if (t->offset < 0)
			next = (e + 31) / 32 * 32;
		if (e > end)
			end = e;
	}
	gb_pad(&b, 32);
	size_t data = b.n;
	float *w = calloc(1, end + 4);
	for (uint64_t i = 0; i < end / 4; i++)
		w[i] = 0.01f * (float)(i % 7) + 0.5f;
	gb_put(&b, w, end);
	free(w);
	(void)data;
	cr_assert_eq(write_file(path, b.p, b.n), 0);
	free(b.p);
	hsq_model *model = NULL;
	hsq_status st = hsq_model_load(path, &model);
	if (st)
		cr_assert_null(model);
	hsq_model_free(model);
	return st;
}

#define EXPECT_REFUSED(m, status, pattern, why)                                                           \
	do {                                                                                              \
		hsq_status st_ = tiny_load(&(m));                                                         \
		cr_expect_eq(st_, status, "%s: got %s (%s)", why, hsq_strerror(st_), hsq_last_error());  \
		cr_expect(strstr(hsq_last_error(), pattern) != NULL, "%s: message '%s' lacks '%s'", why, \
			  hsq_last_error(), pattern);                                                     \
		cr_expect(strstr(hsq_last_error(), path) != NULL, "%s: message names no file: %s", why,  \
			  hsq_last_error());                                                              \
	} while (0)

Test(gguf, tiny_model_loads)
{
	tiny_model m = tiny_llama();
	cr_assert_eq(tiny_load(&m), HSQ_OK, "%s", hsq_last_error());
}

/* Two tensors sharing bytes of the data section. */
Test(gguf, overlapping_tensors_are_refused)
{
	tiny_model m = tiny_llama();
	tiny_find(&m, "blk.1.ffn_up.weight")->offset = (int64_t)0; /* on top of token_embd */
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "overlap", "ffn_up over token_embd");

	m = tiny_llama();
	tiny_find(&m, "output_norm.weight")->offset = 224; /* the last 32 of token_embd's 256 bytes */
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "overlap", "output_norm over the end of token_embd");
}

Test(gguf, duplicate_tensor_names_are_refused)
{
	tiny_model m = tiny_llama();
	snprintf(tiny_find(&m, "blk.1.attn_norm.weight")->name, 48, "blk.1.ffn_norm.weight");
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "appears twice", "two blk.1.ffn_norm.weight");
}

/* block_count must agree with the blk.N tensors, and an absurd one is a
 * corrupt file (exit 3), not an allocation failure (exit 1). */
Test(gguf, block_count_matches_the_tensors)
{
	static const uint32_t counts[] = { 1u << 30, 1000000, 3, 1 };
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		tiny_model m = tiny_llama();
		m.block_count = counts[i];
		EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "block_count", "block_count against 2 layers of tensors");
		cr_expect_null(strstr(hsq_last_error(), "out of memory"), "%s", hsq_last_error());
	}
	tiny_model m = tiny_llama();
	m.block_count = 1u << 31;
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "block_count", "block_count 2^31");
}

/* rope.freq_base and the rms epsilon: finite, in range, and numbers. */
Test(gguf, rope_base_and_epsilon_in_range)
{
	static const float bad_base[] = { INFINITY, -INFINITY, NAN, 1.0f, 0.5f, -10000.0f, 1e30f };
	for (size_t i = 0; i < sizeof bad_base / sizeof bad_base[0]; i++) {
		tiny_model m = tiny_llama();
		m.rope_base = bad_base[i];
		EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "rope.freq_base", "rope base");
	}
	static const float bad_eps[] = { INFINITY, NAN, 0.0f, -1e-5f, 1.0f, 1e10f };
	for (size_t i = 0; i < sizeof bad_eps / sizeof bad_eps[0]; i++) {
		tiny_model m = tiny_llama();
		m.eps = bad_eps[i];
		EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "layer_norm_rms_epsilon", "rms epsilon");
	}
	tiny_model m = tiny_llama();
	m.rope_as_string = 1;
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "not a number", "rope base as a string");
	m = tiny_llama();
	m.rope_base = 5e8f;
	m.eps = 1e-12f;
	cr_expect_eq(tiny_load(&m), HSQ_OK, "wide but real values load: %s", hsq_last_error());
}

/* Shapes the header implies, head counts against the tensors, and a
 * quantized tensor's block size (checked before this file's sanity work;
 * kept here so the tiny model covers them). */
Test(gguf, shapes_agree_with_the_header)
{
	tiny_model m = tiny_llama();
	m.n_head_kv = 2; /* attn_k/attn_v hold one kv head */
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "attn_k", "two kv heads, tensors for one");
	m = tiny_llama();
	m.n_ff = 32;
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "ffn_gate", "ffn length against ffn_gate");
	m = tiny_llama();
	tiny_find(&m, "blk.1.ffn_down.weight")->type = 2; /* Q4_0: rows of 16 are not whole blocks */
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "not a multiple", "Q4_0 row of 16");
	m = tiny_llama();
	m.t[m.n_t - 1] = m.t[m.n_t - 2];
	snprintf(m.t[m.n_t - 2].name, 48, "blk.1.attn_v_extra.weight");
	EXPECT_REFUSED(m, HSQ_ERR_FORMAT, "ffn_down", "a required tensor missing");
}

/* ------------------------------------------------- the identity cache */

#include <sys/stat.h>

#include "model/idcache.h"

static char cache_home[64];

static void use_private_cache(void)
{
	snprintf(cache_home, sizeof cache_home, "/tmp/hsq-test-idcache-XXXXXX");
	cr_assert_not_null(mkdtemp(cache_home));
	setenv("XDG_CACHE_HOME", cache_home, 1);
}

static void drop_private_cache(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_home);
	cr_expect_eq(system(cmd), 0);
}

/* The one entry file in the private cache (there is only ever one here). */
static void entry_of(const struct stat *sb, char *out, size_t cap)
{
	snprintf(out, cap, "%s/hsq/model-ids/%llx-%llx", cache_home, (unsigned long long)sb->st_dev,
		 (unsigned long long)sb->st_ino);
}

Test(gguf, idcache_round_trip_and_keys)
{
	use_private_cache();
	gbuf g = one_big_tensor(1.0f);
	cr_assert_eq(write_file(path, g.p, g.n), 0);
	free(g.p);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	uint8_t id[32], got[32];
	for (int i = 0; i < 32; i++)
		id[i] = (uint8_t)(i * 37 + 1);
	idcache_put(&sb, id);
	cr_expect_eq(idcache_get(&sb, got), 0, "a file changed in the last seconds is not cached");
	sb.st_mtim.tv_sec -= 100;
	sb.st_ctim.tv_sec -= 100;
	idcache_put(&sb, id);
	cr_assert_eq(idcache_get(&sb, got), 1);
	cr_expect_eq(memcmp(id, got, 32), 0);
	struct stat other = sb;
	other.st_size++;
	cr_expect_eq(idcache_get(&other, got), 0, "size is part of the key");
	other = sb;
	other.st_mtim.tv_nsec ^= 1;
	cr_expect_eq(idcache_get(&other, got), 0, "mtime is part of the key");
	other = sb;
	other.st_ctim.tv_nsec ^= 1;
	cr_expect_eq(idcache_get(&other, got), 0, "ctime is part of the key");
	other = sb;
	other.st_ino++;
	cr_expect_eq(idcache_get(&other, got), 0, "the inode is part of the key");
	drop_private_cache();
}

/* Entries are read as hostile: damage is a miss, never a wrong digest, a
 * crash or a hang. */
Test(gguf, idcache_hostile_entries_are_misses, .timeout = 20)
{
	use_private_cache();
	gbuf g = one_big_tensor(1.0f);
	cr_assert_eq(write_file(path, g.p, g.n), 0);
	free(g.p);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	sb.st_mtim.tv_sec -= 100;
	sb.st_ctim.tv_sec -= 100;
	uint8_t id[32] = { 1, 2, 3 }, got[32];
	idcache_put(&sb, id);
	char entry[256], good[512];
	entry_of(&sb, entry, sizeof entry);
	FILE *f = fopen(entry, "rb");
	cr_assert_not_null(f);
	size_t n = fread(good, 1, sizeof good - 1, f);
	fclose(f);
	good[n] = '\0';
	cr_assert_eq(idcache_get(&sb, got), 1);

	char bad[512];
	memcpy(bad, good, n);
	bad[n - 2] = 'F'; /* upper-case hex */
	cr_assert_eq(write_file(entry, bad, n), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "upper-case digit");
	bad[n - 2] = 'g';
	cr_assert_eq(write_file(entry, bad, n), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "not a hex digit");
	cr_assert_eq(write_file(entry, good, n - 1), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "no newline");
	cr_assert_eq(write_file(entry, good, n / 2), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "truncated");
	memcpy(bad, good, n);
	bad[n] = '\n';
	cr_assert_eq(write_file(entry, bad, n + 1), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "trailing bytes");
	memcpy(bad, good, n);
	bad[20] ^= 1;
	cr_assert_eq(write_file(entry, bad, n), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "another key");
	cr_assert_eq(write_file(entry, "", 0), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "empty");

	char real[300];
	snprintf(real, sizeof real, "%s.real", entry);
	cr_assert_eq(write_file(real, good, n), 0);
	unlink(entry);
	cr_assert_eq(symlink(real, entry), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "a symbolic link is not followed");
	unlink(entry);
	cr_assert_eq(mkfifo(entry, 0600), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "a FIFO is a miss, without blocking");
	unlink(entry);
	cr_assert_eq(mkdir(entry, 0700), 0);
	cr_expect_eq(idcache_get(&sb, got), 0, "a directory");
	rmdir(entry);
	idcache_put(&sb, id);
	cr_expect_eq(idcache_get(&sb, got), 1, "rewritten after the damage");
	drop_private_cache();
}

/* gguf_open uses the cache: a file older than two seconds is hashed once,
 * the entry's digest is what later opens report, and a changed file is
 * hashed again. */
Test(gguf, identity_is_cached_per_file, .timeout = 30)
{
	use_private_cache();
	gbuf g = one_big_tensor(1.0f);
	uint8_t want[32];
	sha256(g.p, g.n, want);
	cr_assert_eq(write_file(path, g.p, g.n), 0);
	sleep(3); /* past the age below which nothing is cached */
	gguf_file *f = NULL;
	cr_assert_eq(gguf_open(path, &f), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(memcmp(f->identity, want, 32), 0);
	gguf_close(f);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	char entry[256], line[512];
	entry_of(&sb, entry, sizeof entry);
	FILE *e = fopen(entry, "rb");
	cr_assert_not_null(e, "no cache entry written");
	size_t n = fread(line, 1, sizeof line, e);
	fclose(e);
	cr_assert_gt(n, 66);
	line[n - 2] = line[n - 2] == '0' ? '1' : '0'; /* another digest, still well formed */
	cr_assert_eq(write_file(entry, line, n), 0);
	cr_assert_eq(gguf_open(path, &f), HSQ_OK, "%s", hsq_last_error());
	cr_expect_neq(memcmp(f->identity, want, 32), 0, "the cached digest is used");
	gguf_close(f);

	g.p[g.n - 1000] ^= 1; /* rewrite the model in place, same size */
	uint8_t want2[32];
	sha256(g.p, g.n, want2);
	FILE *w = fopen(path, "r+b");
	cr_assert_not_null(w);
	fwrite(g.p, 1, g.n, w);
	fclose(w);
	free(g.p);
	cr_assert_eq(gguf_open(path, &f), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(memcmp(f->identity, want2, 32), 0, "a rewritten model is hashed again");
	gguf_close(f);
	drop_private_cache();
}

/* A llama header with hyperparameters in range one by one (<= 2^30) whose
 * products are not, and the tensors load_transformer reads before it uses
 * them: token_embd [16, 4], output_norm and the first layer's norms. */
static hsq_status load_llama(uint32_t n_layer, uint32_t n_head, uint32_t key_length)
{
	gbuf b = { 0 };
	gb_u32(&b, 0x46554747u); gb_u32(&b, 3); gb_u64(&b, 4); gb_u64(&b, 7);
	kv_str(&b, "general.architecture", "llama");
	kv_u32(&b, "llama.block_count", n_layer);
	kv_u32(&b, "llama.embedding_length", 16);
	kv_u32(&b, "llama.feed_forward_length", 16);
	kv_u32(&b, "llama.attention.head_count", n_head);
	kv_u32(&b, "llama.attention.head_count_kv", 1);
	kv_u32(&b, "llama.attention.key_length", key_length);
	tensor_info(&b, "token_embd.weight", 2, (uint64_t[]){ 16, 4 }, 0, 0);
	tensor_info(&b, "output_norm.weight", 1, (uint64_t[]){ 16 }, 0, 256);
	tensor_info(&b, "blk.0.attn_norm.weight", 1, (uint64_t[]){ 16 }, 0, 320);
	tensor_info(&b, "blk.0.ffn_norm.weight", 1, (uint64_t[]){ 16 }, 0, 384);
	gb_pad(&b, 32);
	float ones[112];
	for (int i = 0; i < 112; i++)
		ones[i] = 1.0f;
	gb_put(&b, ones, sizeof ones);
	cr_assert_eq(write_file(path, b.p, b.n), 0);
	free(b.p);
	hsq_model *m = NULL;
	hsq_status st = hsq_model_load(path, &m);
	cr_expect_null(m);
	return st;
}

/* Found by tests/fuzz/fuzz_gguf: block_count 536870913 overflowed the int
 * count of norm copies (6 * n_layer + 1), and head_count x key_length the
 * int row count of attn_q. Both are refused, and UBSan (the unit tests
 * run under it, non-recovering) sees no overflow. */
Test(gguf, hostile_hyperparameter_products)
{
	cr_expect_eq(load_llama(536870913, 1, 16), HSQ_ERR_FORMAT, "more layers than tensors");
	cr_expect(strstr(hsq_last_error(), "block_count") != NULL, "%s", hsq_last_error());
	cr_expect_eq(load_llama(1, 1u << 16, 1u << 16), HSQ_ERR_FORMAT, "n_head * head_dim = 2^32");
	cr_expect(strstr(hsq_last_error(), "attn_q") != NULL, "%s", hsq_last_error());
}

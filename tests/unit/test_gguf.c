/* test_gguf.c - the GGUF reader on well-formed and hostile files. */
#include <criterion/criterion.h>
#include <unistd.h>

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

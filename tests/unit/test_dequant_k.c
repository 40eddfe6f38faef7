/* test_dequant_k.c - the k-quant (Q2_K..Q6_K) and Q5_0/Q5_1 dequantizers
 * against gguf-py's (the llama.cpp project's independent Python
 * implementation), on seeded raw blocks with extreme scale fields written by
 * tests/ref/make_dequant_golden.py; and the refusal of partial blocks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/dequant.h"
#include "model/ggml_types.h"

typedef struct golden {
	uint32_t type, n, nbytes;
	uint8_t *raw;
	float *want;
} golden;

static golden load(const char *type_name)
{
	char path[128];
	golden g;
	snprintf(path, sizeof path, "tests/golden/dequant/%s.bin", type_name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s (run tests from the repo root)", path);
	uint32_t hdr[3];
	cr_assert_eq(fread(hdr, 4, 3, f), 3, "%s: short header", path);
	g.type = hdr[0];
	g.n = hdr[1];
	g.nbytes = hdr[2];
	cr_assert(g.n > 0 && g.n <= 1u << 20 && g.nbytes <= 1u << 22, "%s: bad header", path);
	g.raw = malloc(g.nbytes);
	g.want = malloc((size_t)g.n * sizeof *g.want);
	cr_assert(g.raw && g.want);
	cr_assert_eq(fread(g.raw, 1, g.nbytes, f), g.nbytes, "%s: short raw data", path);
	cr_assert_eq(fread(g.want, 4, g.n, f), g.n, "%s: short values", path);
	fclose(f);
	cr_assert_str_eq(ggml_traits(g.type)->name, type_name, "%s: type id %u", path, g.type);
	return g;
}

static void unload(golden *g)
{
	free(g->raw);
	free(g->want);
}

/* Every value is one correctly rounded operation on exact products (see
 * dequant_k.c), so the result must match gguf-py bit for bit. */
static void expect_same(const char *what, const float *got, const float *want, uint32_t n)
{
	int bad = 0;
	for (uint32_t i = 0; i < n && bad < 10; i++) {
		uint32_t a, b;
		memcpy(&a, &got[i], 4);
		memcpy(&b, &want[i], 4);
		if (a != b) {
			cr_expect_fail("%s[%u]: got %.9g (0x%08x) want %.9g (0x%08x)", what, i, got[i], a,
				       want[i], b);
			bad++;
		}
	}
}

static void check_golden(const char *type_name)
{
	golden g = load(type_name);
	const ggml_type_traits *t = ggml_traits(g.type);
	cr_assert_eq(dequant_supported(g.type), 1, "%s: supported flag", type_name);
	cr_assert_geq(g.n / t->block_elems, 2, "%s: at least 2 blocks", type_name);
	cr_assert_eq(ggml_row_bytes(g.type, g.n), g.nbytes, "%s: block geometry", type_name);

	/* whole row in one call */
	float *got = malloc((size_t)g.n * sizeof *got);
	cr_assert_not_null(got);
	cr_assert_eq(dequant_row(g.type, g.raw, got, g.n), 0);
	expect_same(type_name, got, g.want, g.n);

	/* block by block, into a fresh buffer: same values at the same offsets */
	memset(got, 0xff, (size_t)g.n * sizeof *got);
	for (uint32_t b = 0; b < g.n / t->block_elems; b++)
		cr_assert_eq(dequant_row(g.type, g.raw + (size_t)b * t->block_bytes, got + (size_t)b * t->block_elems,
					 t->block_elems), 0);
	expect_same(type_name, got, g.want, g.n);

	free(got);
	unload(&g);
}

Test(dequant_k, q2_k) { check_golden("Q2_K"); }
Test(dequant_k, q3_k) { check_golden("Q3_K"); }
Test(dequant_k, q4_k) { check_golden("Q4_K"); }
Test(dequant_k, q5_k) { check_golden("Q5_K"); }
Test(dequant_k, q6_k) { check_golden("Q6_K"); }
Test(dequant_k, q5_0) { check_golden("Q5_0"); }
Test(dequant_k, q5_1) { check_golden("Q5_1"); }

static const uint32_t k_types[] = { GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };

Test(dequant_k, geometry)
{
	static const uint32_t bytes[] = { 84, 110, 144, 176, 210 };
	for (size_t i = 0; i < sizeof k_types / sizeof *k_types; i++) {
		const ggml_type_traits *t = ggml_traits(k_types[i]);
		cr_expect_eq(t->block_elems, 256, "%s", t->name);
		cr_expect_eq(t->block_bytes, bytes[i], "%s", t->name);
		cr_expect_eq(ggml_row_bytes(k_types[i], 1024), 4 * bytes[i], "%s", t->name);
		cr_expect_eq(ggml_row_bytes(k_types[i], 576), 0, "%s: 576 is not a whole number of blocks", t->name);
	}
	cr_expect_eq(ggml_traits(GGML_TYPE_Q5_0)->block_bytes, 22);
	cr_expect_eq(ggml_traits(GGML_TYPE_Q5_1)->block_bytes, 24);
	/* still refused: no dequantizer yet */
	cr_expect_eq(dequant_supported(GGML_TYPE_Q8_K), 0);
	cr_expect_eq(dequant_supported(GGML_TYPE_IQ4_XS), 0);
}

/* A row length that is not a whole number of blocks (a truncated or odd
 * call) is refused with -1 and nothing is written; 0 values is a no-op. */
Test(dequant_k, partial_blocks_refused)
{
	static uint8_t src[2 * 210];
	static float dst[512 + 1];
	static const int64_t bad[] = { 1, 32, 128, 255, 257, 511, -256 };
	for (uint32_t i = 0; i < sizeof src; i++)
		src[i] = (uint8_t)(i * 37 + 11);
	for (size_t k = 0; k < sizeof k_types / sizeof *k_types; k++) {
		const char *name = ggml_traits(k_types[k])->name;
		for (size_t j = 0; j < sizeof bad / sizeof *bad; j++) {
			for (int i = 0; i < 513; i++)
				dst[i] = 12345.0f;
			cr_expect_eq(dequant_row(k_types[k], src, dst, bad[j]), -1, "%s n=%lld", name,
				     (long long)bad[j]);
			for (int i = 0; i < 513; i++)
				cr_assert_eq(dst[i], 12345.0f, "%s n=%lld wrote dst[%d]", name, (long long)bad[j], i);
		}
		cr_expect_eq(dequant_row(k_types[k], src, dst, 0), 0, "%s n=0", name);
		cr_expect_eq(dst[0], 12345.0f);
		cr_expect_eq(dequant_row(k_types[k], src, dst, 512), 0, "%s n=512", name);
		cr_expect_eq(dst[512], 12345.0f, "%s: wrote past 512 values", name);
	}
	uint32_t q5[] = { GGML_TYPE_Q5_0, GGML_TYPE_Q5_1 };
	for (int k = 0; k < 2; k++) {
		cr_expect_eq(dequant_row(q5[k], src, dst, 16), -1);
		cr_expect_eq(dequant_row(q5[k], src, dst, 33), -1);
		cr_expect_eq(dequant_row(q5[k], src, dst, -32), -1);
		cr_expect_eq(dequant_row(q5[k], src, dst, 64), 0);
	}
}

/* Hand-built blocks with values worked out from the format description
 * (dequant_k.h), independent of the golden files. */
Test(dequant_k, hand_built_blocks)
{
	float y[256];
	uint8_t b[210];

	/* Q4_K: d = 1, dmin = 0.5 (fp16 0x3c00, 0x3800); sub-block 0: scale 3,
	 * min 2; sub-block 7: scale 63, min 63 (top bits from bytes 3 and 7);
	 * nibble 0x5 for the first 32 values, 0xa for values 32..63. */
	memset(b, 0, 144);
	b[0] = 0x00, b[1] = 0x3c, b[2] = 0x00, b[3] = 0x38;
	b[4 + 0] = 3, b[4 + 4] = 2;             /* sc[0], mn[0] */
	b[4 + 11] = 0xff, b[4 + 3] = 0xc0, b[4 + 7] = 0xc0; /* sc[7] = mn[7] = 63 */
	for (int i = 0; i < 32; i++)
		b[16 + i] = 0xa5;
	for (int i = 96; i < 128; i++)
		b[16 + i] = 0xf0;               /* high nibbles of chunk 3: sub-block 7 */
	cr_assert_eq(dequant_row(GGML_TYPE_Q4_K, b, y, 256), 0);
	cr_expect_eq(y[0], 3.0f * 5 - 0.5f * 2);
	cr_expect_eq(y[31], 14.0f);
	cr_expect_eq(y[32], 0.0f * 10 - 0.0f);  /* sub-block 1: scale 0, min 0 */
	cr_expect_eq(y[224], 63.0f * 15 - 0.5f * 63);
	cr_expect_eq(y[192], 0.0f - 0.0f);       /* sub-block 6: low nibbles 0 */

	/* Q6_K: d = 2, scale[0] = -128, scale[15] = 127; q = 0 everywhere
	 * (value -32) but value 255, which has ql nibble 0xf, qh bits 3: 63. */
	memset(b, 0, 210);
	b[208] = 0x00, b[209] = 0x40;           /* 2.0 */
	b[192 + 0] = 0x80;
	b[192 + 15] = 0x7f;
	b[64 + 63] = 0xf0;                      /* ql for value 255: high nibble of byte 64+63 */
	b[128 + 32 + 31] = 0xc0;                /* qh bits 6..7 of byte 32+31 */
	cr_assert_eq(dequant_row(GGML_TYPE_Q6_K, b, y, 256), 0);
	cr_expect_eq(y[0], 2.0f * -128 * -32);
	cr_expect_eq(y[254], 2.0f * 127 * -32);
	cr_expect_eq(y[255], 2.0f * 127 * 31);
	cr_expect_eq(y[16], 0.0f);               /* scale[1] = 0 */
}

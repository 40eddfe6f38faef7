/* test_dequant.c - each dequantizer against gguf-py's (the llama.cpp
 * project's independent Python implementation; tests/ref/make_dequant_golden.py). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/fp16.h"
#include "model/dequant.h"
#include "model/ggml_types.h"

static void check_golden(const char *type_name)
{
	char path[128];
	snprintf(path, sizeof path, "tests/golden/dequant/%s.bin", type_name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s (run tests from the repo root)", path);
	uint32_t hdr[3];
	cr_assert_eq(fread(hdr, 4, 3, f), 3);
	uint8_t *raw = malloc(hdr[2]);
	float *want = malloc(hdr[1] * sizeof *want), *got = malloc(hdr[1] * sizeof *got);
	cr_assert_eq(fread(raw, 1, hdr[2], f), hdr[2]);
	cr_assert_eq(fread(want, 4, hdr[1], f), hdr[1]);
	fclose(f);
	cr_assert_eq(ggml_row_bytes(hdr[0], hdr[1]), hdr[2], "%s: block geometry", type_name);
	cr_assert_eq(dequant_row(hdr[0], raw, got, hdr[1]), 0);
	for (uint32_t i = 0; i < hdr[1]; i++) {
		/* Exact but for one rounding: d*q+m may be fused (FMA) here and
		 * not in numpy. */
		float tol = 2e-7f * (fabsf(want[i]) + 1e-3f);
		cr_expect(fabsf(got[i] - want[i]) <= tol, "%s[%u]: got %.9g want %.9g", type_name, i, got[i], want[i]);
	}
	free(raw);
	free(want);
	free(got);
}

Test(dequant, f16) { check_golden("F16"); }
Test(dequant, bf16) { check_golden("BF16"); }
Test(dequant, q4_0) { check_golden("Q4_0"); }
Test(dequant, q4_1) { check_golden("Q4_1"); }
Test(dequant, q8_0) { check_golden("Q8_0"); }

Test(dequant, unsupported_types_refused)
{
	float out[256];
	uint8_t in[512] = { 0 };
	cr_expect_eq(dequant_row(GGML_TYPE_IQ2_XXS, in, out, 256), -1);
	cr_expect_eq(dequant_supported(GGML_TYPE_IQ2_XXS), 0);
	cr_expect_eq(dequant_supported(GGML_TYPE_Q4_1), 1);
	cr_expect_str_eq(ggml_traits(GGML_TYPE_Q6_K)->name, "Q6_K");
	cr_expect_str_eq(ggml_traits(1234)->name, "unknown");
}

Test(dequant, half_conversions_exhaustive)
{
	/* every f16 -> f32 -> f16 round trip is exact (NaN payloads aside) */
	for (uint32_t h = 0; h < 65536; h++) {
		float f = hsq_f16_to_f32((uint16_t)h);
		if (f != f)
			continue;
		cr_assert_eq(hsq_f32_to_f16(f), h, "half 0x%04x", h);
	}
	cr_expect_eq(hsq_f32_to_f16(65520.0f), 0x7c00, "overflow rounds to infinity");
	cr_expect_eq(hsq_f32_to_f16(1e-8f), 0, "underflow to zero");
	cr_expect_float_eq(hsq_bf16_to_f32(0x3f80), 1.0f, 0);
}

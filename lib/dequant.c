/* dequant.c - CPU dequantization of GGUF weight rows. */
#include <string.h>

#include "dequant.h"
#include "dequant_k.h"
#include "fp16.h"
#include "ggml_types.h"

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static float f16(const uint8_t *p)
{
	return hsq_f16_to_f32(rd16(p));
}

/* Written with vector types so the compiler emits SIMD unpacking; every
 * path (decode and prefill) dequantizes through these same functions, so
 * the values are identical wherever they are used. */
typedef uint8_t vu8x16 __attribute__((vector_size(16)));
typedef int8_t vi8x16 __attribute__((vector_size(16)));
typedef int32_t vi32x16 __attribute__((vector_size(64)));
typedef float vf16 __attribute__((vector_size(64)));

/* Widen to int32 first: a direct u8 -> float conversion compiles to
 * per-lane scalar code. */
static vf16 u8_to_f(vu8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, vi32x16), vf16);
}

static vf16 i8_to_f(vi8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, vi32x16), vf16);
}

static vu8x16 load_u8x16(const uint8_t *p)
{
	vu8x16 v;
	memcpy(&v, p, 16);
	return v;
}

static void store_f16x(float *y, vf16 v)
{
	memcpy(y, &v, sizeof v);
}

static void dequant_q4_0(const uint8_t *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i += 32, b += 18, y += 32) {
		float d = f16(b);
		vu8x16 q = load_u8x16(b + 2);
		vf16 lo = i8_to_f((vi8x16)(q & 0x0f) - 8);
		vf16 hi = i8_to_f((vi8x16)(q >> 4) - 8);
		store_f16x(y, lo * d);
		store_f16x(y + 16, hi * d);
	}
}

static void dequant_q4_1(const uint8_t *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i += 32, b += 20, y += 32) {
		float d = f16(b), m = f16(b + 2);
		vu8x16 q = load_u8x16(b + 4);
		vf16 lo = u8_to_f(q & 0x0f);
		vf16 hi = u8_to_f(q >> 4);
		store_f16x(y, lo * d + m);
		store_f16x(y + 16, hi * d + m);
	}
}

static void dequant_q8_0(const uint8_t *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i += 32, b += 34, y += 32) {
		float d = f16(b);
		vi8x16 q0, q1;
		memcpy(&q0, b + 2, 16);
		memcpy(&q1, b + 18, 16);
		store_f16x(y, i8_to_f(q0) * d);
		store_f16x(y + 16, i8_to_f(q1) * d);
	}
}

int dequant_supported(uint32_t type)
{
	return ggml_traits(type)->supported;
}

int dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
	const uint8_t *b = src;
	switch (type) {
	case GGML_TYPE_F32:
		memcpy(dst, src, (size_t)n * 4);
		return 0;
	case GGML_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = hsq_f16_to_f32(rd16(b + 2 * i));
		return 0;
	case GGML_TYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = hsq_bf16_to_f32(rd16(b + 2 * i));
		return 0;
	case GGML_TYPE_Q4_0: dequant_q4_0(b, dst, n); return 0;
	case GGML_TYPE_Q4_1: dequant_q4_1(b, dst, n); return 0;
	case GGML_TYPE_Q8_0: dequant_q8_0(b, dst, n); return 0;
	case GGML_TYPE_Q5_0: return dequant_q5_0(b, dst, n);
	case GGML_TYPE_Q5_1: return dequant_q5_1(b, dst, n);
	case GGML_TYPE_Q2_K: return dequant_q2_k(b, dst, n);
	case GGML_TYPE_Q3_K: return dequant_q3_k(b, dst, n);
	case GGML_TYPE_Q4_K: return dequant_q4_k(b, dst, n);
	case GGML_TYPE_Q5_K: return dequant_q5_k(b, dst, n);
	case GGML_TYPE_Q6_K: return dequant_q6_k(b, dst, n);
	default: return -1;
	}
}

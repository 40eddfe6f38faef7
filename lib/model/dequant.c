/* dequant.c - CPU dequantization of GGUF weight rows. */
#include <string.h>

#include "common/fp16.h"
#include "model/dequant.h"
#include "model/dequant_k.h"
#include "model/ggml_types.h"
#include "model/quant_blocks.h"

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

#define DEQUANT_BLOCKS(name, decode, block_bytes)                                  \
	static void name(const uint8_t *b, float *y, int64_t n)                    \
	{                                                                          \
		for (int64_t i = 0; i < n; i += 32, b += (block_bytes), y += 32) { \
			hsq_vf16 lo, hi;                                           \
			decode(b, &lo, &hi);                                       \
			memcpy(y, &lo, sizeof lo);                                 \
			memcpy(y + 16, &hi, sizeof hi);                            \
		}                                                                  \
	}

DEQUANT_BLOCKS(dequant_q4_0, qb_q4_0, Q4_0_BYTES)
DEQUANT_BLOCKS(dequant_q4_1, qb_q4_1, Q4_1_BYTES)
DEQUANT_BLOCKS(dequant_q8_0, qb_q8_0, Q8_0_BYTES)

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

/* ggml_types.c - names and block geometry of ggml tensor types. */
#include "model/ggml_types.h"

static const ggml_type_traits traits[GGML_TYPE_COUNT] = {
	[GGML_TYPE_F32] = { "F32", 1, 4, 1 },
	[GGML_TYPE_F16] = { "F16", 1, 2, 1 },
	[GGML_TYPE_Q4_0] = { "Q4_0", 32, 18, 1 },
	[GGML_TYPE_Q4_1] = { "Q4_1", 32, 20, 1 },
	[GGML_TYPE_Q5_0] = { "Q5_0", 32, 22, 1 },
	[GGML_TYPE_Q5_1] = { "Q5_1", 32, 24, 1 },
	[GGML_TYPE_Q8_0] = { "Q8_0", 32, 34, 1 },
	[GGML_TYPE_Q8_1] = { "Q8_1", 32, 36, 0 },
	[GGML_TYPE_Q2_K] = { "Q2_K", 256, 84, 1 },
	[GGML_TYPE_Q3_K] = { "Q3_K", 256, 110, 1 },
	[GGML_TYPE_Q4_K] = { "Q4_K", 256, 144, 1 },
	[GGML_TYPE_Q5_K] = { "Q5_K", 256, 176, 1 },
	[GGML_TYPE_Q6_K] = { "Q6_K", 256, 210, 1 },
	[GGML_TYPE_Q8_K] = { "Q8_K", 256, 292, 0 },
	[GGML_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66, 0 },
	[GGML_TYPE_IQ2_XS] = { "IQ2_XS", 256, 74, 0 },
	[GGML_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98, 0 },
	[GGML_TYPE_IQ1_S] = { "IQ1_S", 256, 50, 0 },
	[GGML_TYPE_IQ4_NL] = { "IQ4_NL", 32, 18, 0 },
	[GGML_TYPE_IQ3_S] = { "IQ3_S", 256, 110, 0 },
	[GGML_TYPE_IQ2_S] = { "IQ2_S", 256, 82, 0 },
	[GGML_TYPE_IQ4_XS] = { "IQ4_XS", 256, 136, 0 },
	[GGML_TYPE_I8] = { "I8", 1, 1, 0 },
	[GGML_TYPE_I16] = { "I16", 1, 2, 0 },
	[GGML_TYPE_I32] = { "I32", 1, 4, 0 },
	[GGML_TYPE_I64] = { "I64", 1, 8, 0 },
	[GGML_TYPE_F64] = { "F64", 1, 8, 0 },
	[GGML_TYPE_IQ1_M] = { "IQ1_M", 256, 56, 0 },
	[GGML_TYPE_BF16] = { "BF16", 1, 2, 1 },
	[GGML_TYPE_TQ1_0] = { "TQ1_0", 256, 54, 0 },
	[GGML_TYPE_TQ2_0] = { "TQ2_0", 256, 66, 0 },
	[GGML_TYPE_MXFP4] = { "MXFP4", 32, 17, 0 },
};

static const ggml_type_traits unknown = { "unknown", 0, 0, 0 };

const ggml_type_traits *ggml_traits(uint32_t type)
{
	if (type >= GGML_TYPE_COUNT || traits[type].block_elems == 0)
		return &unknown;
	return &traits[type];
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n)
{
	const ggml_type_traits *t = ggml_traits(type);
	if (t->block_elems == 0 || n % t->block_elems)
		return 0;
	uint64_t blocks = n / t->block_elems;
	if (blocks > UINT64_MAX / t->block_bytes)
		return 0;
	return blocks * t->block_bytes;
}

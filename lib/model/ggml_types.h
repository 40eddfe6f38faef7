/* ggml_types.h - tensor element types as numbered in GGUF files (ggml's
 * enum ggml_type) and their block geometry (internal). */
#ifndef HSQ_GGML_TYPES_H
#define HSQ_GGML_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum ggml_type {
	GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
	GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
	GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
	GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_IQ2_XXS = 16, GGML_TYPE_IQ2_XS = 17,
	GGML_TYPE_IQ3_XXS = 18, GGML_TYPE_IQ1_S = 19, GGML_TYPE_IQ4_NL = 20, GGML_TYPE_IQ3_S = 21,
	GGML_TYPE_IQ2_S = 22, GGML_TYPE_IQ4_XS = 23, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25,
	GGML_TYPE_I32 = 26, GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_IQ1_M = 29,
	GGML_TYPE_BF16 = 30, GGML_TYPE_TQ1_0 = 34, GGML_TYPE_TQ2_0 = 35, GGML_TYPE_MXFP4 = 39,
	GGML_TYPE_COUNT = 40
};

/* Elements per block and bytes per block; block_size 0 = unknown type. */
typedef struct ggml_type_traits {
	const char *name;  /* "Q4_1" */
	uint32_t block_elems;
	uint32_t block_bytes;
	int supported;     /* 1 if hsq can dequantize it */
} ggml_type_traits;

/* Traits of a type id; a zeroed struct with name "unknown" for ids out of range. */
const ggml_type_traits *ggml_traits(uint32_t type);

/* Bytes for n elements (n a multiple of block_elems); 0 on overflow or bad type. */
uint64_t ggml_row_bytes(uint32_t type, uint64_t n);

#endif

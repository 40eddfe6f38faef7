/* quant_blocks.h - decoding one 32-value block of Q4_0 / Q4_1 / Q8_0 into
 * two 16-lane float vectors (internal).
 *
 * dequant.c (rows to memory) and the fused matmul kernels in backend_cpu.c
 * (blocks straight into registers) both decode through these functions, so
 * a weight has the same float value on every path. Layouts in dequant.h. */
#ifndef HSQ_QUANT_BLOCKS_H
#define HSQ_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "fp16.h"

typedef uint8_t hsq_vu8x16 __attribute__((vector_size(16)));
typedef int8_t hsq_vi8x16 __attribute__((vector_size(16)));
typedef int32_t hsq_vi32x16 __attribute__((vector_size(64)));
typedef float hsq_vf16 __attribute__((vector_size(64), aligned(4)));

static inline float qb_f16(const uint8_t *p)
{
	return hsq_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* Widen to int32 first: a direct u8 -> float conversion compiles to
 * per-lane scalar code. */
static inline hsq_vf16 qb_u8_to_f(hsq_vu8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}

static inline hsq_vf16 qb_i8_to_f(hsq_vi8x16 q)
{
	return __builtin_convertvector(__builtin_convertvector(q, hsq_vi32x16), hsq_vf16);
}

#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q8_0_BYTES 34

/* Values 0..15 of the block in *lo, 16..31 in *hi. */
static inline void qb_q4_0(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b);
	hsq_vu8x16 q;
	memcpy(&q, b + 2, 16);
	*lo = qb_i8_to_f((hsq_vi8x16)(q & 0x0f) - 8) * d;
	*hi = qb_i8_to_f((hsq_vi8x16)(q >> 4) - 8) * d;
}

static inline void qb_q4_1(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b), m = qb_f16(b + 2);
	hsq_vu8x16 q;
	memcpy(&q, b + 4, 16);
	*lo = qb_u8_to_f(q & 0x0f) * d + m;
	*hi = qb_u8_to_f(q >> 4) * d + m;
}

static inline void qb_q8_0(const uint8_t *b, hsq_vf16 *lo, hsq_vf16 *hi)
{
	float d = qb_f16(b);
	hsq_vi8x16 q0, q1;
	memcpy(&q0, b + 2, 16);
	memcpy(&q1, b + 18, 16);
	*lo = qb_i8_to_f(q0) * d;
	*hi = qb_i8_to_f(q1) * d;
}

#endif

/* fp16.h - IEEE half and bfloat16 <-> float conversions (internal). */
#ifndef HSQ_FP16_H
#define HSQ_FP16_H

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

/* Exact conversion of an IEEE 754 binary16 value to float, subnormals,
 * infinities and NaN included. */
static inline float hsq_f16_to_f32(uint16_t h)
{
#if defined(__F16C__)
	return _cvtsh_ss(h); /* same result as the portable path below */
#endif
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else if (exp == 0) {
		if (mant == 0) {
			bits = sign;
		} else { /* subnormal: renormalise */
			int e = -1;
			do { mant <<= 1; e++; } while (!(mant & 0x400));
			bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
		}
	} else {
		bits = sign | (exp + 112) << 23 | mant << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* float -> binary16 with round-to-nearest-even; overflow gives infinity. */
static inline uint16_t hsq_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffffu;
	if (absx >= 0x7f800000u) /* inf or nan */
		return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
	if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return (uint16_t)(sign | 0x7c00);
	if (absx < 0x38800000u) { /* result is subnormal or zero */
		if (absx < 0x33000000u)
			return (uint16_t)sign;
		/* value = mant * 2^(e-150) and the subnormal unit is 2^-24, so
		 * drop sh = 126 - e low bits, rounding to nearest even. */
		uint32_t mant = (absx & 0x7fffff) | 0x800000;
		int e = (int)(absx >> 23);
		int sh = 126 - e;
		uint32_t r = mant >> sh, rem = mant & ((1u << sh) - 1), mid = 1u << (sh - 1);
		if (rem > mid || (rem == mid && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	uint32_t r = ((absx - 0x38000000u) >> 13);
	uint32_t rem = absx & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++;
	return (uint16_t)(sign | r);
}

static inline float hsq_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

#endif

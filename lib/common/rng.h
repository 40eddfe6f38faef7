/* rng.h - internal helpers around the public hsq_rng streams (see hsq.h). */
#ifndef HSQ_RNG_H
#define HSQ_RNG_H
#include "hsq_codec.h"

/* SplitMix64 finaliser: turns (seed, index) pairs into well-spread 64-bit
 * seeds so that neighbouring seeds give unrelated streams. */
uint64_t hsq_rng_mix64(uint64_t x);

/* Fill n floats with N(0, sigma^2) draws. */
void hsq_rng_fill_normal(hsq_rng *rng, float *out, size_t n, double sigma);

#endif

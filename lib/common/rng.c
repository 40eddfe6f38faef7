/* rng.c - the two independent random streams of the codec study.
 *
 * PCG64 is O'Neill's pcg_setseq_128_xsl_rr_64 (the generator behind numpy's
 * PCG64); mt19937 is Matsumoto and Nishimura's 32-bit Mersenne Twister (the
 * generator of C++ std::mt19937). Both are written here from their published
 * definitions; tests/unit/test_rng.c checks them against reference outputs.
 * Running the whole study once per generator separates a codec difference
 * from the noise of one particular random stream. */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "common/rng.h"

typedef unsigned __int128 u128;

#define PCG_MULT_HI 0x2360ED051FC65DA4ULL
#define PCG_MULT_LO 0x4385DF649FCCF645ULL

static u128 pcg_get(uint64_t hi, uint64_t lo)
{
	return ((u128)hi << 64) | lo;
}

static void pcg_step(hsq_rng *rng)
{
	u128 state = pcg_get(rng->pcg_state_hi, rng->pcg_state_lo);
	u128 inc = pcg_get(rng->pcg_inc_hi, rng->pcg_inc_lo);
	state = state * pcg_get(PCG_MULT_HI, PCG_MULT_LO) + inc;
	rng->pcg_state_hi = (uint64_t)(state >> 64);
	rng->pcg_state_lo = (uint64_t)state;
}

static uint64_t pcg_next(hsq_rng *rng)
{
	pcg_step(rng);
	/* XSL-RR: xor the halves, rotate by the top 6 bits of the state. */
	uint64_t x = rng->pcg_state_hi ^ rng->pcg_state_lo;
	unsigned rot = (unsigned)(rng->pcg_state_hi >> 58);
	return (x >> rot) | (x << ((64 - rot) & 63));
}

static void pcg_seed(hsq_rng *rng, uint64_t seed, uint64_t stream)
{
	/* pcg64_srandom_r(initstate = seed, initseq = stream). */
	u128 inc = ((u128)stream << 1) | 1u;
	rng->pcg_inc_hi = (uint64_t)(inc >> 64);
	rng->pcg_inc_lo = (uint64_t)inc;
	rng->pcg_state_hi = 0;
	rng->pcg_state_lo = 0;
	pcg_step(rng);
	u128 state = pcg_get(rng->pcg_state_hi, rng->pcg_state_lo) + seed;
	rng->pcg_state_hi = (uint64_t)(state >> 64);
	rng->pcg_state_lo = (uint64_t)state;
	pcg_step(rng);
}

enum { MT_N = 624, MT_M = 397 };

static void mt_seed(hsq_rng *rng, uint32_t seed)
{
	rng->mt[0] = seed;
	for (int i = 1; i < MT_N; i++)
		rng->mt[i] = 1812433253u * (rng->mt[i - 1] ^ (rng->mt[i - 1] >> 30)) + (uint32_t)i;
	rng->mt_index = MT_N;
}

static void mt_twist(hsq_rng *rng)
{
	uint32_t *s = rng->mt;
	for (int i = 0; i < MT_N; i++) {
		uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT_N] & 0x7fffffffu);
		uint32_t v = s[(i + MT_M) % MT_N] ^ (y >> 1);
		if (y & 1u)
			v ^= 0x9908b0dfu;
		s[i] = v;
	}
	rng->mt_index = 0;
}

static uint32_t mt_next(hsq_rng *rng)
{
	if (rng->mt_index >= MT_N)
		mt_twist(rng);
	uint32_t y = rng->mt[rng->mt_index++];
	y ^= y >> 11;
	y ^= (y << 7) & 0x9d2c5680u;
	y ^= (y << 15) & 0xefc60000u;
	y ^= y >> 18;
	return y;
}

uint64_t hsq_rng_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

hsq_status hsq_rng_init(hsq_rng *rng, hsq_rng_kind kind, uint64_t seed, uint64_t stream)
{
	if (!rng)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "rng: null generator pointer");
	memset(rng, 0, sizeof *rng);
	rng->kind = kind;
	switch (kind) {
	case HSQ_RNG_PCG64:
		pcg_seed(rng, seed, stream);
		return HSQ_OK;
	case HSQ_RNG_MT19937:
		/* mt19937 takes a 32-bit seed: fold the 64-bit seed and the stream
		 * through SplitMix64 unless the caller asked for the plain reference
		 * seeding (stream 0 and a seed that fits in 32 bits). */
		if (stream == 0 && seed <= 0xffffffffULL)
			mt_seed(rng, (uint32_t)seed);
		else
			mt_seed(rng, (uint32_t)hsq_rng_mix64(seed ^ hsq_rng_mix64(stream)));
		return HSQ_OK;
	}
	return hsq_fail(HSQ_ERR_INVALID_ARG, "rng: unknown generator kind %d (use pcg64 or mt19937)",
			(int)kind);
}

const char *hsq_rng_name(hsq_rng_kind kind)
{
	switch (kind) {
	case HSQ_RNG_PCG64: return "pcg64";
	case HSQ_RNG_MT19937: return "mt19937";
	}
	return "unknown";
}

uint64_t hsq_rng_u64(hsq_rng *rng)
{
	if (rng->kind == HSQ_RNG_PCG64)
		return pcg_next(rng);
	/* mt19937 is a 32-bit generator: two draws, the first in the high half. */
	uint64_t hi = mt_next(rng);
	return (hi << 32) | mt_next(rng);
}

uint32_t hsq_rng_u32(hsq_rng *rng)
{
	if (rng->kind == HSQ_RNG_PCG64)
		return (uint32_t)(pcg_next(rng) >> 32);
	return mt_next(rng);
}

double hsq_rng_uniform(hsq_rng *rng)
{
	return (double)(hsq_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint64_t hsq_rng_below(hsq_rng *rng, uint64_t n)
{
	if (n <= 1)
		return 0;
	/* Rejection on the top of the range keeps every residue equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = hsq_rng_u64(rng);
	while (x >= limit);
	return x % n;
}

double hsq_rng_normal(hsq_rng *rng)
{
	if (rng->have_normal) {
		rng->have_normal = 0;
		return rng->cached_normal;
	}
	/* Marsaglia's polar method: exact, no trigonometry, two values per
	 * accepted pair. */
	double u, v, s;
	do {
		u = 2.0 * hsq_rng_uniform(rng) - 1.0;
		v = 2.0 * hsq_rng_uniform(rng) - 1.0;
		s = u * u + v * v;
	} while (s >= 1.0 || s == 0.0);
	double f = sqrt(-2.0 * log(s) / s);
	rng->cached_normal = v * f;
	rng->have_normal = 1;
	return u * f;
}

double hsq_rng_student_t(hsq_rng *rng, int nu)
{
	if (nu < 1)
		return NAN;
	/* t = z / sqrt(chi2_nu / nu), chi2 as a sum of nu squared normals
	 * (nu is a small integer in the regimes). */
	double z = hsq_rng_normal(rng);
	double chi2 = 0.0;
	for (int i = 0; i < nu; i++) {
		double g = hsq_rng_normal(rng);
		chi2 += g * g;
	}
	return z / sqrt(chi2 / nu);
}

void hsq_rng_fill_normal(hsq_rng *rng, float *out, size_t n, double sigma)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (float)(sigma * hsq_rng_normal(rng));
}

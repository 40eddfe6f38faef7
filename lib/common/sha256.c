/* sha256.c - SHA-256 (FIPS 180-4): portable C, and the x86 SHA extensions
 * (SHA-NI) where the CPU has them, picked once at run time.
 *
 * The model identity hashes the whole GGUF file at every load, so the speed
 * matters: the portable code does about 0.3 GB/s, SHA-NI several times that.
 * Both compute the same function; test_gguf checks they agree. */
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI 1
#endif

#include "common/sha256.h"

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress1(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void sha256_blocks_portable(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
	for (size_t i = 0; i < n_blocks; i++)
		compress1(h, p + 64 * i);
}

#ifdef HAVE_SHA_NI
/* The usual SHA-NI formulation: the state lives as ABEF/CDGH pairs, each
 * sha256rnds2 does two rounds, sha256msg1/msg2 extend the schedule. */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_sha_ni(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
	__m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
	__m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);  /* EFGH */
	__m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                       /* ABEF */
	s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                            /* CDGH */
	for (size_t b = 0; b < n_blocks; b++, p += 64) {
		__m128i save0 = s0, save1 = s1, w[4];
		for (int g = 0; g < 16; g++) {
			__m128i m;
			if (g < 4) {
				w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
			} else {
				m = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]);
				m = _mm_add_epi32(m, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
				w[g & 3] = _mm_sha256msg2_epu32(m, w[(g + 3) & 3]);
			}
			m = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
			s1 = _mm_sha256rnds2_epu32(s1, s0, m);
			s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
		}
		s0 = _mm_add_epi32(s0, save0);
		s1 = _mm_add_epi32(s1, save1);
	}
	tmp = _mm_shuffle_epi32(s0, 0x1B);     /* FEBA */
	s1 = _mm_shuffle_epi32(s1, 0xB1);      /* DCHG */
	s0 = _mm_blend_epi16(tmp, s1, 0xF0);   /* DCBA */
	s1 = _mm_alignr_epi8(s1, tmp, 8);      /* HGFE */
	_mm_storeu_si128((__m128i *)&h[0], s0);
	_mm_storeu_si128((__m128i *)&h[4], s1);
}

static int cpu_has_sha_ni(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b & bit_SHA) != 0;
}
#endif

int sha256_blocks_accel(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
#ifdef HAVE_SHA_NI
	static int have = -1; /* probed once; a race only probes twice */
	if (have < 0)
		have = cpu_has_sha_ni();
	if (have) {
		blocks_sha_ni(h, p, n_blocks);
		return 0;
	}
#else
	(void)h, (void)p, (void)n_blocks;
#endif
	return -1;
}

static void compress(uint32_t h[8], const uint8_t *p, size_t n_blocks)
{
	if (sha256_blocks_accel(h, p, n_blocks))
		sha256_blocks_portable(h, p, n_blocks);
}

void sha256_init(sha256_ctx *c)
{
	static const uint32_t init[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	memcpy(c->h, init, sizeof init);
	c->n_bytes = 0;
	c->n_block = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	c->n_bytes += len;
	if (c->n_block) {
		size_t take = 64 - c->n_block < len ? 64 - c->n_block : len;
		memcpy(c->block + c->n_block, p, take);
		c->n_block += take; p += take; len -= take;
		if (c->n_block < 64)
			return;
		compress(c->h, c->block, 1);
		c->n_block = 0;
	}
	if (len >= 64) {
		compress(c->h, p, len / 64);
		p += len / 64 * 64;
		len %= 64;
	}
	memcpy(c->block, p, len);
	c->n_block = len;
}

void sha256_final(sha256_ctx *c, uint8_t out[32])
{
	uint64_t bits = c->n_bytes * 8;
	uint8_t pad = 0x80, zero = 0, len_be[8];
	sha256_update(c, &pad, 1);
	while (c->n_block != 56)
		sha256_update(c, &zero, 1);
	for (int i = 0; i < 8; i++)
		len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(c, len_be, 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24); out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8); out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

void sha256(const void *data, size_t len, uint8_t out[32])
{
	sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, data, len);
	sha256_final(&c, out);
}

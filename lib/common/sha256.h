/* sha256.h - SHA-256 (FIPS 180-4), for model identity (the whole GGUF file). */
#ifndef HSQ_SHA256_H
#define HSQ_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
	uint32_t h[8];
	uint64_t n_bytes;      /* message length so far */
	uint8_t block[64];
	size_t n_block;        /* bytes waiting in block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t out[32]);
void sha256(const void *data, size_t len, uint8_t out[32]);

/* The compression function over n_blocks 64-byte blocks, for the test that
 * the two implementations agree: the portable C one, and the CPU's SHA
 * extensions, which return -1 (leaving h alone) where the CPU lacks them. */
void sha256_blocks_portable(uint32_t h[8], const uint8_t *p, size_t n_blocks);
int sha256_blocks_accel(uint32_t h[8], const uint8_t *p, size_t n_blocks);
#endif

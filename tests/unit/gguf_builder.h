/* gguf_builder.h - builds small GGUF files in memory for unit tests
 * (header-only, test code). Little-endian host assumed, as in GGUF. */
#ifndef HSQ_TEST_GGUF_BUILDER_H
#define HSQ_TEST_GGUF_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gbuf {
	uint8_t *p;
	size_t n, cap;
} gbuf;

static inline void gb_put(gbuf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}
static inline void gb_u32(gbuf *b, uint32_t v) { gb_put(b, &v, 4); }
static inline void gb_u64(gbuf *b, uint64_t v) { gb_put(b, &v, 8); }
static inline void gb_str(gbuf *b, const char *s) { gb_u64(b, strlen(s)); gb_put(b, s, strlen(s)); }
static inline void gb_pad(gbuf *b, size_t align)
{
	static const uint8_t zero[64];
	while (b->n % align)
		gb_put(b, zero, 1);
}

/* Key-value helpers: key, type, value. */
static inline void kv_u32(gbuf *b, const char *k, uint32_t v) { gb_str(b, k); gb_u32(b, 4); gb_u32(b, v); }
static inline void kv_f32(gbuf *b, const char *k, float v) { gb_str(b, k); gb_u32(b, 6); gb_put(b, &v, 4); }
static inline void kv_str(gbuf *b, const char *k, const char *v) { gb_str(b, k); gb_u32(b, 8); gb_str(b, v); }

/* A tensor info entry: name, dims, type, offset. */
static inline void tensor_info(gbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
	gb_str(b, name);
	gb_u32(b, n_dims);
	for (uint32_t i = 0; i < n_dims; i++)
		gb_u64(b, ne[i]);
	gb_u32(b, type);
	gb_u64(b, off);
}

static inline int write_file(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(d, 1, n, f);
	fclose(f);
	return w == n ? 0 : -1;
}

#endif

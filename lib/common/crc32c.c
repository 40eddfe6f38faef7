/* crc32c.c - CRC-32C: the SSE4.2 instruction when the build targets it,
 * otherwise slicing-by-8 tables (about 1-2 GB/s). */
#include <pthread.h>
#include <string.h>

#include "common/crc32c.h"

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t c = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

#else

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&table_once, table_init);
	const unsigned char *p = data;
	uint32_t c = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		/* Little-endian word order: the slicing tables assume it. */
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
		    table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
		    table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return ~c;
}

#endif

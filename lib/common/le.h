/* le.h - little-endian encoding of integers and floats in byte buffers,
 * for the on-disk formats (snapshots, codec calibration files); portable
 * to any host byte order (internal). */
#ifndef HSQ_LE_H
#define HSQ_LE_H

#include <stdint.h>
#include <string.h>

static inline void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static inline void put_f32(uint8_t *p, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	put_u32(p, v);
}

static inline float get_f32(const uint8_t *p)
{
	uint32_t v = get_u32(p);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

static inline void put_f64(uint8_t *p, double f)
{
	uint64_t v;
	memcpy(&v, &f, 8);
	put_u64(p, v);
}

static inline double get_f64(const uint8_t *p)
{
	uint64_t v = get_u64(p);
	double f;
	memcpy(&f, &v, 8);
	return f;
}

#endif

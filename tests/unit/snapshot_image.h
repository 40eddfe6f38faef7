/* snapshot_image.h - editing a snapshot's bytes in tests, as a buggy or
 * malicious writer would: find a section's table entry, recompute the
 * header CRC after an edit. */
#ifndef HSQ_TEST_SNAPSHOT_IMAGE_H
#define HSQ_TEST_SNAPSHOT_IMAGE_H

#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "le.h"
#include "snapshot_format.h"

/* Table entry of section `name` in image f, or NULL. */
static inline uint8_t *snap_image_entry(uint8_t *f, const char *name)
{
	uint32_t n = get_u32(f + SNAP_H_SECTION_COUNT), es = get_u32(f + SNAP_H_ENTRY_SIZE);
	uint64_t to = get_u64(f + SNAP_H_TABLE_OFFSET);
	for (uint32_t i = 0; i < n; i++)
		if (!strncmp((const char *)f + to + (size_t)i * es, name, 16))
			return f + to + (size_t)i * es;
	return NULL;
}

/* Recomputes the header CRC (header and section table) of image f. */
static inline void snap_image_reseal_header(uint8_t *f)
{
	uint32_t hs = get_u32(f + SNAP_H_HEADER_SIZE), ns = get_u32(f + SNAP_H_SECTION_COUNT);
	uint32_t es = get_u32(f + SNAP_H_ENTRY_SIZE);
	uint64_t to = get_u64(f + SNAP_H_TABLE_OFFSET);
	put_u32(f + SNAP_H_CRC, 0);
	uint32_t c = crc32c_update(0, f, hs);
	put_u32(f + SNAP_H_CRC, crc32c_update(c, f + to, (size_t)ns * es));
}

#endif

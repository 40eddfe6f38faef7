/* snapshot_reseal.h - make a snapshot's checksums right again after its
 * bytes were changed, as a buggy or malicious writer would, so that a
 * reader gets past the CRC32C checks to the parsers behind them (used by
 * fuzz_snapshot.c and by tests/unit/test_fuzz_regress.c). In order:
 *   - the header's file_size becomes the buffer's size;
 *   - each l3.index entry's frame CRC (when l3.index is raw);
 *   - each section's CRC32C of its stored bytes (when they lie in the buffer);
 *   - the header CRC32C of header (its CRC field as 0) + section table.
 * Fields that point outside the buffer are left as they are. */
#ifndef HSQ_FUZZ_SNAPSHOT_RESEAL_H
#define HSQ_FUZZ_SNAPSHOT_RESEAL_H

#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "snapshot/snapshot_format.h"

/* Is [off, off + n) inside a buffer of size bytes? */
static inline int reseal_inside(uint64_t off, uint64_t n, size_t size)
{
	return off <= size && n <= size - off;
}

/* The section table entry named `name`, or NULL. */
static inline uint8_t *reseal_entry(uint8_t *b, size_t size, const char *name)
{
	uint64_t to = get_u64(b + SNAP_H_TABLE_OFFSET);
	uint32_t n = get_u32(b + SNAP_H_SECTION_COUNT), es = get_u32(b + SNAP_H_ENTRY_SIZE);
	if (n > SNAP_MAX_SECTIONS || es < SNAP_ENTRY_SIZE || es > 4096 || !reseal_inside(to, (uint64_t)n * es, size))
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + to + (uint64_t)i * es;
		if (strncmp((const char *)e + SNAP_E_NAME, name, SNAP_SECTION_NAME_LEN) == 0)
			return e;
	}
	return NULL;
}

static inline void snapshot_reseal(uint8_t *b, size_t size)
{
	if (size < SNAP_HEADER_SIZE)
		return;
	put_u64(b + SNAP_H_FILE_SIZE, size);
	uint64_t to = get_u64(b + SNAP_H_TABLE_OFFSET);
	uint32_t n = get_u32(b + SNAP_H_SECTION_COUNT), es = get_u32(b + SNAP_H_ENTRY_SIZE);
	uint32_t hs = get_u32(b + SNAP_H_HEADER_SIZE);
	if (n > SNAP_MAX_SECTIONS || es < SNAP_ENTRY_SIZE || es > 4096 || !reseal_inside(to, (uint64_t)n * es, size))
		return;

	/* l3.index: 32-byte entries, a CRC32C at 28 of the frame at offset 0
	 * (from the start of l3) of stored bytes at 8. */
	uint8_t *ix = reseal_entry(b, size, "l3.index"), *l3 = reseal_entry(b, size, "l3");
	if (ix && l3 && get_u16(ix + SNAP_E_CODEC) == SNAP_CODEC_RAW && ix[SNAP_E_FILTER] == SNAP_FILTER_NONE) {
		uint64_t io = get_u64(ix + SNAP_E_OFFSET), is = get_u64(ix + SNAP_E_STORED);
		uint64_t lo = get_u64(l3 + SNAP_E_OFFSET), ls = get_u64(l3 + SNAP_E_STORED);
		if (reseal_inside(io, is, size) && reseal_inside(lo, ls, size))
			for (uint64_t k = 0; k + 32 <= is; k += 32) {
				uint8_t *x = b + io + k;
				uint64_t fo = get_u64(x), fs = get_u64(x + 8);
				if (reseal_inside(fo, fs, ls))
					put_u32(x + 28, crc32c_update(0, b + lo + fo, fs));
			}
	}
	/* Each section's stored bytes. The l3.index entries changed above, so
	 * sections go in table order after them. */
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + to + (uint64_t)i * es;
		uint64_t off = get_u64(e + SNAP_E_OFFSET), stored = get_u64(e + SNAP_E_STORED);
		if (reseal_inside(off, stored, size))
			put_u32(e + SNAP_E_CRC, crc32c_update(0, b + off, stored));
	}
	/* Header (its CRC field as 0) and table, as one buffer. */
	if (hs < SNAP_HEADER_SIZE || hs > size || hs > 65536)
		return;
	put_u32(b + SNAP_H_CRC, 0);
	uint32_t crc = crc32c_update(0, b, hs);
	crc = crc32c_update(crc, b + to, (size_t)n * es);
	put_u32(b + SNAP_H_CRC, crc);
}

#endif

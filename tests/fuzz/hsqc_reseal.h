/* hsqc_reseal.h - make a calibration file's checksums right again after
 * its bytes were changed, as a buggy or malicious writer would, so that a
 * reader gets past the CRC32C checks to the checks behind them (used by
 * fuzz_hsqc.c and tests/unit/test_calibration.c). In order:
 *   - the header's file_size becomes the buffer's size (when fix_size);
 *   - each section's CRC32C of its bytes (when they lie in the buffer);
 *   - the header CRC32C of header (its CRC field as 0) + section table.
 * Fields that point outside the buffer are left as they are. */
#ifndef HSQ_FUZZ_HSQC_RESEAL_H
#define HSQ_FUZZ_HSQC_RESEAL_H

#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "learn/calib_format.h"

/* Is [off, off + n) inside a buffer of size bytes? */
static inline int hsqc_inside(uint64_t off, uint64_t n, size_t size)
{
	return off <= size && n <= size - off;
}

static inline void hsqc_reseal(uint8_t *b, size_t size, int fix_size)
{
	if (size < CAL_HEADER_SIZE)
		return;
	if (fix_size)
		put_u64(b + CAL_H_FILE_SIZE, size);
	uint64_t to = get_u64(b + CAL_H_TABLE_OFFSET);
	uint32_t n = get_u32(b + CAL_H_SECTION_COUNT), es = get_u32(b + CAL_H_ENTRY_SIZE);
	uint32_t hs = get_u32(b + CAL_H_HEADER_SIZE);
	if (n > CAL_MAX_SECTIONS || es < CAL_ENTRY_SIZE || es > 4096 || !hsqc_inside(to, (uint64_t)n * es, size))
		return;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + to + (uint64_t)i * es;
		uint64_t off = get_u64(e + CAL_E_OFFSET), len = get_u64(e + CAL_E_SIZE);
		if (hsqc_inside(off, len, size))
			put_u32(e + CAL_E_CRC, crc32c_update(0, b + off, (size_t)len));
	}
	if (hs < CAL_HEADER_SIZE || hs > size || hs > 65536)
		return;
	put_u32(b + CAL_H_CRC, 0);
	uint32_t crc = crc32c_update(0, b, hs);
	crc = crc32c_update(crc, b + to, (size_t)n * es);
	put_u32(b + CAL_H_CRC, crc);
}

#endif

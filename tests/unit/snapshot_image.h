/* snapshot_image.h - editing a snapshot's bytes in tests, as a buggy or
 * malicious writer would: read a file, find a section's table entry,
 * recompute the header CRC after an edit, load the edited bytes. */
#ifndef HSQ_TEST_SNAPSHOT_IMAGE_H
#define HSQ_TEST_SNAPSHOT_IMAGE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "hsq.h"
#include "common/le.h"
#include "snapshot/snapshot_format.h"

/* The bytes of file `path` (malloc'ed) and their count, or NULL. */
static inline uint8_t *snap_image_read(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long n;
	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) == (size_t)n) {
		*size = (size_t)n;
	} else {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	return b;
}

/* Writes image b to `path`, loads it as a snapshot and removes the file;
 * the loader's status (HSQ_ERR_IO when the file cannot be written). */
static inline hsq_status snap_image_load(const hsq_model *model, const uint8_t *b, size_t size, const char *path,
					 const hsq_context_params *cp, hsq_context **out)
{
	*out = NULL;
	FILE *f = fopen(path, "wb");
	if (!f)
		return HSQ_ERR_IO;
	int ok = fwrite(b, 1, size, f) == size;
	if (fclose(f) != 0 || !ok) {
		unlink(path);
		return HSQ_ERR_IO;
	}
	hsq_status st = hsq_snapshot_load(model, path, cp, out);
	unlink(path);
	return st;
}

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

/* Writes the u32 value at byte off of section `name` in image f, then
 * re-computes the section's CRC and the header's, as a writer would have;
 * 0 when the section is absent or too short. */
static inline int snap_image_put_u32(uint8_t *f, const char *name, uint64_t off, uint32_t value)
{
	uint8_t *e = snap_image_entry(f, name);
	if (!e || off + 4 > get_u64(e + SNAP_E_STORED))
		return 0;
	uint8_t *sec = f + get_u64(e + SNAP_E_OFFSET);
	put_u32(sec + off, value);
	put_u32(e + SNAP_E_CRC, crc32c_update(0, sec, (size_t)get_u64(e + SNAP_E_STORED)));
	snap_image_reseal_header(f);
	return 1;
}

/* Replaces old_n bytes at byte `at` of section `name` in image f (size
 * bytes) by the new_n bytes of `with`, as a writer that wrote them would
 * have: the section's sizes and CRC follow, every section and the table
 * behind it move by the change rounded to 64 (keeping their alignment),
 * the file size and header CRC are recomputed. Returns the new image
 * (malloc'ed; f is left as it was) and its size, or NULL. The section must
 * be stored raw. */
static inline uint8_t *snap_image_splice(const uint8_t *f, size_t size, const char *name, uint64_t at, uint64_t old_n,
					 const uint8_t *with, uint64_t new_n, size_t *out_size)
{
	uint8_t *e = snap_image_entry((uint8_t *)f, name);
	if (!e || get_u16(e + SNAP_E_CODEC) != SNAP_CODEC_RAW)
		return NULL;
	uint64_t so = get_u64(e + SNAP_E_OFFSET), st = get_u64(e + SNAP_E_STORED), end = so + st;
	if (at > st || old_n > st - at)
		return NULL;
	int64_t d = (int64_t)new_n - (int64_t)old_n;
	int64_t D = d >= 0 ? (d + 63) / 64 * 64 : -((-d) / 64 * 64);
	size_t n = (size_t)((int64_t)size + D);
	uint8_t *g = calloc(1, n + 1);
	if (!g)
		return NULL;
	memcpy(g, f, (size_t)(so + at));
	memcpy(g + so + at, with, (size_t)new_n);
	memcpy(g + so + at + new_n, f + so + at + old_n, (size_t)(st - at - old_n));
	memcpy(g + (int64_t)end + D, f + end, size - (size_t)end);
	uint64_t to = get_u64(g + SNAP_H_TABLE_OFFSET);
	if (to >= end)
		put_u64(g + SNAP_H_TABLE_OFFSET, to = (uint64_t)((int64_t)to + D));
	put_u64(g + SNAP_H_FILE_SIZE, n);
	uint32_t ns = get_u32(g + SNAP_H_SECTION_COUNT), es = get_u32(g + SNAP_H_ENTRY_SIZE);
	for (uint32_t i = 0; i < ns; i++) {
		uint8_t *x = g + to + (size_t)i * es;
		uint64_t o = get_u64(x + SNAP_E_OFFSET);
		if (!strncmp((const char *)x, name, 16)) {
			put_u64(x + SNAP_E_STORED, st + (uint64_t)d);
			put_u64(x + SNAP_E_RAW, st + (uint64_t)d);
			put_u32(x + SNAP_E_CRC, crc32c_update(0, g + so, (size_t)(st + (uint64_t)d)));
		} else if (o >= end) {
			put_u64(x + SNAP_E_OFFSET, (uint64_t)((int64_t)o + D));
		}
	}
	snap_image_reseal_header(g);
	*out_size = n;
	return g;
}

#endif

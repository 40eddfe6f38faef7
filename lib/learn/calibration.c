/* calibration.c - reading hsq calibration files (hsq_calibration_load);
 * the format is specified in man/hsq-calibration.5 and named in
 * calib_format.h. lib/train/calib_write.c writes them.
 *
 * A calibration file is small (hsq-calibrate's default reader for
 * SmolLM2-135M, 64 hidden units, makes a file of 169 KiB), so the reader
 * takes the whole file into memory (at most CAL_MAX_FILE_SIZE bytes),
 * hashes it for the snapshots built with it, and checks it from that
 * buffer. Every byte is hostile: the
 * header and section table are checksummed and bounds-checked before any
 * offset in them is used, every section is checked against its CRC32C,
 * the bytes between sections must be zero (so no byte of the file goes
 * unchecked), sizes must match the shape exactly and every weight must be
 * finite. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"
#include "common/sha256.h"
#include "common/unicode.h"
#include "hsq.h"
#include "learn/calib_format.h"
#include "learn/calibration.h"

/* One entry of the section table, parsed. */
typedef struct cal_section {
	char name[CAL_SECTION_NAME_LEN];
	uint64_t offset, size; /* bytes */
	uint32_t flags, crc;
} cal_section;

int calib_info_check(const uint8_t *s, size_t n, size_t *at)
{
	size_t i = 0;
	while (i < n) {
		size_t len;
		if (uni_utf8_check(s + i, n - i, &len) != UNI_UTF8_OK) {
			*at = i;
			return 1;
		}
		/* C0 controls but tab and newline, DEL, and the C1 controls
		 * U+0080..U+009F (encoded c2 80..c2 9f). */
		uint8_t c = s[i];
		if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f || (c == 0xc2 && s[i + 1] < 0xa0)) {
			*at = i;
			return 2;
		}
		i += len;
	}
	return 0;
}

/* Copies a NUL-padded string field, replacing bytes that are not printable
 * ASCII text (controls, DEL) so messages stay on one line; as the snapshot
 * reader does. */
static void copy_printable(char *dst, size_t cap, const uint8_t *src, size_t len)
{
	size_t i = 0;
	for (; i + 1 < cap && i < len && src[i]; i++)
		dst[i] = src[i] < 0x20 || src[i] == 0x7f ? '?' : (char)src[i];
	dst[i] = '\0';
}

static void hex_prefix(char out[17], const uint8_t *id)
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* What a file that is not a regular file is, for the message. */
static const char *file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "of an unknown kind";
}

/* Reads the whole regular file at path into *out (*n bytes, at most
 * CAL_MAX_FILE_SIZE). */
static hsq_status read_whole(const char *path, uint8_t **out, size_t *n)
{
	hsq_status st = HSQ_OK;
	uint8_t *b = NULL;
	*out = NULL;
	*n = 0;
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	 * writer before fstat could refuse it. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return hsq_fail(HSQ_ERR_IO, "%s: %s%s", path, strerror(errno),
				errno == ENOENT ? " (train one with hsq-calibrate)" : "");
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = hsq_fail(HSQ_ERR_IO, "%s: not a regular file (%s); pass a calibration file written by hsq-calibrate",
			      path, file_kind(sb.st_mode));
		goto done;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto done;
	}
	if ((uint64_t)sb.st_size > CAL_MAX_FILE_SIZE) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: %llu bytes, more than the %llu a calibration file may hold; the file is damaged or not a calibration file",
			      path, (unsigned long long)sb.st_size, (unsigned long long)CAL_MAX_FILE_SIZE);
		goto done;
	}
	size_t size = (size_t)sb.st_size;
	if (!(b = malloc(size ? size : 1))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path, size);
		goto done;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t r = read(fd, b + got, size - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			st = hsq_fail(HSQ_ERR_IO, "%s: read failed at byte %zu: %s", path, got, strerror(errno));
			goto done;
		}
		if (r == 0)
			break; /* the file shrank under us: judged by its header below */
		got += (size_t)r;
	}
	*out = b;
	*n = got;
	b = NULL;
done:
	free(b);
	close(fd);
	return st;
}

static int known_section(const char *name)
{
	return !strcmp(name, CAL_SEC_INFO) || !strcmp(name, CAL_SEC_READER);
}

static hsq_status parse_entry(const char *path, uint32_t i, const uint8_t *e, uint64_t file_size, uint64_t header_size,
			      uint64_t table_off, uint64_t table_end, cal_section *s)
{
	/* Name: 1..15 bytes of [a-z0-9._-], then NUL padding. */
	size_t len = 0;
	while (len < CAL_SECTION_NAME_LEN && e[CAL_E_NAME + len])
		len++;
	int ok = len > 0 && len < CAL_SECTION_NAME_LEN;
	for (size_t k = 0; ok && k < CAL_SECTION_NAME_LEN; k++) {
		uint8_t c = e[CAL_E_NAME + k];
		if (k < len)
			ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		else
			ok = c == 0;
	}
	if (!ok)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section %u has an invalid name; the file is damaged", path, i);
	memcpy(s->name, e + CAL_E_NAME, len);
	s->name[len] = '\0';
	s->offset = get_u64(e + CAL_E_OFFSET);
	s->size = get_u64(e + CAL_E_SIZE);
	s->flags = get_u32(e + CAL_E_FLAGS);
	s->crc = get_u32(e + CAL_E_CRC);

	if (s->offset % CAL_ALIGN)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' offset %llu is not a multiple of %d bytes; the file is damaged",
				path, s->name, (unsigned long long)s->offset, CAL_ALIGN);
	/* Inside the file, past the header, clear of the table. */
	if (s->offset < header_size || s->offset > file_size || s->size > file_size - s->offset ||
	    (s->size && s->offset < table_end && table_off < s->offset + s->size))
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: section '%s' (%llu bytes at offset %llu) overlaps the header or the section table, or lies outside the file's %llu bytes; the file is damaged",
				path, s->name, (unsigned long long)s->size, (unsigned long long)s->offset,
				(unsigned long long)file_size);
	if (!known_section(s->name)) {
		if (s->flags & CAL_SECTION_REQUIRED)
			return hsq_fail(HSQ_ERR_UNSUPPORTED,
					"%s: required section '%s' is unknown to this hsq (%s); upgrade hsq to read this calibration",
					path, s->name, hsq_version());
	} else if (s->flags & ~CAL_SECTION_KNOWN_FLAGS) {
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: section '%s' uses unknown flags 0x%x; upgrade hsq", path, s->name,
				s->flags & ~CAL_SECTION_KNOWN_FLAGS);
	}
	return HSQ_OK;
}

/* The bytes no range covers (header, table, sections; alignment padding)
 * must be zero: with them, every byte of the file is checked. ranges:
 * [start, end) pairs, sorted here. */
static hsq_status check_gaps(const char *path, const uint8_t *b, uint64_t n, uint64_t (*ranges)[2], size_t n_ranges)
{
	for (size_t i = 1; i < n_ranges; i++) /* insertion sort: at most 2 + CAL_MAX_SECTIONS */
		for (size_t j = i; j > 0 && ranges[j - 1][0] > ranges[j][0]; j--) {
			uint64_t t0 = ranges[j][0], t1 = ranges[j][1];
			ranges[j][0] = ranges[j - 1][0];
			ranges[j][1] = ranges[j - 1][1];
			ranges[j - 1][0] = t0;
			ranges[j - 1][1] = t1;
		}
	uint64_t pos = 0;
	for (size_t i = 0; i <= n_ranges; i++) {
		uint64_t start = i < n_ranges ? ranges[i][0] : n;
		for (; pos < start; pos++)
			if (b[pos])
				return hsq_fail(HSQ_ERR_FORMAT,
						"%s: byte %llu lies outside the header, the section table and every section but is not zero; the file is damaged",
						path, (unsigned long long)pos);
		if (i < n_ranges && ranges[i][1] > pos)
			pos = ranges[i][1];
	}
	return HSQ_OK;
}

static hsq_status identity_mismatch(const char *path, const hsq_calibration *cal, const hsq_model_info *mi)
{
	char want[17], have[17];
	hex_prefix(want, cal->info.model_identity);
	hex_prefix(have, mi->identity);
	return hsq_fail(HSQ_ERR_MODEL_MISMATCH,
			"%s was trained for model '%s' (%s, identity %s), not for the given model '%s' (%s, identity %s); pass the model it was trained for, or train a calibration for this model with hsq-calibrate",
			path, cal->name[0] ? cal->name : "unnamed", cal->arch[0] ? cal->arch : "?", want,
			mi->name && mi->name[0] ? mi->name : "unnamed", mi->architecture ? mi->architecture : "?", have);
}

/* The reader section: its 64-byte head, then the four weight arrays, each
 * value finite. sh_* is the header's model shape. */
static hsq_status parse_reader(const char *path, const uint8_t *p, uint64_t size, uint32_t sh_layer, uint32_t sh_embd,
			       uint32_t sh_head_kv, reader_net *net)
{
	if (size < CAL_READER_HEAD_SIZE)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'reader' is %llu bytes, shorter than its %d-byte head; the file is damaged",
				path, (unsigned long long)size, CAL_READER_HEAD_SIZE);
	uint32_t tap = get_u32(p + CAL_R_TAP_LAYER), n_embd = get_u32(p + CAL_R_N_EMBD);
	uint32_t n_in = get_u32(p + CAL_R_N_IN), n_hidden = get_u32(p + CAL_R_N_HIDDEN);
	uint32_t n_out = get_u32(p + CAL_R_N_OUT), n_layer = get_u32(p + CAL_R_N_LAYER);
	uint32_t n_head_kv = get_u32(p + CAL_R_N_HEAD_KV), act = get_u32(p + CAL_R_ACTIVATION);
	uint32_t pos_features = get_u32(p + CAL_R_POS_FEATURES), prior = get_u32(p + CAL_R_PRIOR);
	if (prior != CAL_PRIOR_NONE && prior != CAL_PRIOR_OBS)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: the reader corrects prior %u, unknown to this hsq (%s); upgrade hsq",
				path, prior, hsq_version());
	if (act != CAL_ACT_SILU)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: the reader uses activation %u, unknown to this hsq (%s); upgrade hsq",
				path, act, hsq_version());
	if (pos_features != CAL_POS_FEATURES)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: the reader reads %u position features, this hsq (%s) knows %d; upgrade hsq", path,
				pos_features, hsq_version(), CAL_POS_FEATURES);
	if (n_embd != sh_embd || n_layer != sh_layer || n_head_kv != sh_head_kv)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: the reader is shaped for %u layers, %u kv heads and hidden size %u, the header for %u, %u and %u; the file is damaged",
				path, n_layer, n_head_kv, n_embd, sh_layer, sh_head_kv, sh_embd);
	if (n_in != n_embd + CAL_POS_FEATURES || n_out != n_layer * n_head_kv || n_hidden == 0 ||
	    n_hidden > CAL_MAX_HIDDEN || tap >= n_layer)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: implausible reader shape (layer %u of %u, %u inputs for hidden size %u, %u hidden units, %u outputs for %u x %u heads); the file is damaged",
				path, tap, n_layer, n_in, n_embd, n_hidden, n_out, n_layer, n_head_kv);
	/* The bounds above keep these far below 2^64: n_in <= 2^16 + 4,
	 * n_out <= 2^20, n_hidden <= 2^12. */
	uint64_t n_w1 = (uint64_t)n_hidden * n_in, n_w2 = (uint64_t)n_out * n_hidden;
	uint64_t n_floats = n_w1 + n_hidden + n_w2 + n_out;
	if (size != CAL_READER_HEAD_SIZE + 4 * n_floats)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: section 'reader' is %llu bytes, but a reader of %u inputs, %u hidden units and %u outputs takes %llu; the file is damaged",
				path, (unsigned long long)size, n_in, n_hidden, n_out,
				(unsigned long long)(CAL_READER_HEAD_SIZE + 4 * n_floats));

	/* size <= CAL_MAX_FILE_SIZE, so every count fits in a size_t and
	 * n_floats in an int. */
	net->tap_layer = (int)tap;
	net->n_embd = (int)n_embd;
	net->n_in = (int)n_in;
	net->n_hidden = (int)n_hidden;
	net->n_out = (int)n_out;
	net->prior_obs = prior == CAL_PRIOR_OBS;
	net->w1 = malloc(sizeof(float) * (size_t)n_w1);
	net->b1 = malloc(sizeof(float) * n_hidden);
	net->w2 = malloc(sizeof(float) * (size_t)n_w2);
	net->b2 = malloc(sizeof(float) * n_out);
	if (!net->w1 || !net->b1 || !net->w2 || !net->b2)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s (a reader of %llu weights)", path,
				(unsigned long long)n_floats);
	struct {
		const char *name;
		float *dst;
		uint64_t n;
		uint32_t cols; /* for the message: [row][col] */
	} arr[4] = {
		{ "w1", net->w1, n_w1, n_in },
		{ "b1", net->b1, n_hidden, 0 },
		{ "w2", net->w2, n_w2, n_hidden },
		{ "b2", net->b2, n_out, 0 },
	};
	const uint8_t *q = p + CAL_READER_HEAD_SIZE;
	for (int a = 0; a < 4; a++) {
		for (uint64_t i = 0; i < arr[a].n; i++, q += 4) {
			float f = get_f32(q);
			if (!isfinite(f)) {
				if (arr[a].cols)
					return hsq_fail(HSQ_ERR_FORMAT,
							"%s: reader weight %s[%llu][%llu] is not finite; the file is damaged",
							path, arr[a].name, (unsigned long long)(i / arr[a].cols),
							(unsigned long long)(i % arr[a].cols));
				return hsq_fail(HSQ_ERR_FORMAT, "%s: reader weight %s[%llu] is not finite; the file is damaged",
						path, arr[a].name, (unsigned long long)i);
			}
			arr[a].dst[i] = f;
		}
	}
	return HSQ_OK;
}

/* Checks the file b[0..n) and fills cal; mi, when not NULL, is the model
 * the calibration must have been trained for. */
static hsq_status parse(const char *path, const uint8_t *b, size_t n, const hsq_model_info *mi, hsq_calibration *cal)
{
	hsq_status st = HSQ_OK;
	cal_section *secs = NULL;
	uint64_t (*ranges)[2] = NULL;

	if (n == 0)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: empty file, not an hsq calibration file; train one with hsq-calibrate",
				path);
	size_t have = n < CAL_MAGIC_LEN ? n : CAL_MAGIC_LEN;
	if (memcmp(b, CAL_MAGIC, have)) {
		/* A snapshot shares the first four bytes, then "\r\n". */
		int snap = n >= 6 && !memcmp(b, "\x89HSQ\r\n", 6);
		return hsq_fail(HSQ_ERR_FORMAT, "%s: not an hsq calibration file (bad magic%s); pass a file written by hsq-calibrate",
				path, snap ? ": it is an hsq snapshot" : "");
	}
	if (n < CAL_H_VERSION_MINOR + 2)
		return hsq_fail(HSQ_ERR_TRUNCATED,
				"%s: truncated calibration file (%zu bytes, shorter than its header); copy it again or re-create it with hsq-calibrate",
				path, n);
	uint16_t major = get_u16(b + CAL_H_VERSION_MAJOR), minor = get_u16(b + CAL_H_VERSION_MINOR);
	if (major != CAL_VERSION_MAJOR)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				major > CAL_VERSION_MAJOR
					? "%s: calibration format %u.%u is newer than this hsq %s reads (%d.x); upgrade hsq"
					: "%s: calibration format %u.%u is older than this hsq %s reads (%d.x); train it again with hsq-calibrate",
				path, major, minor, hsq_version(), CAL_VERSION_MAJOR);
	if (n < CAL_HEADER_SIZE)
		return hsq_fail(HSQ_ERR_TRUNCATED,
				"%s: truncated calibration file (%zu bytes, shorter than its header); copy it again or re-create it with hsq-calibrate",
				path, n);
	uint32_t header_size = get_u32(b + CAL_H_HEADER_SIZE);
	uint64_t declared = get_u64(b + CAL_H_FILE_SIZE);
	if (declared > n)
		return hsq_fail(HSQ_ERR_TRUNCATED,
				"%s: truncated calibration file: %zu bytes, but its header says %llu; copy it again or re-create it with hsq-calibrate",
				path, n, (unsigned long long)declared);
	if (declared < n)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: %zu bytes, but its header says %llu: data was appended or the file is damaged",
				path, n, (unsigned long long)declared);
	if (header_size < CAL_HEADER_SIZE || header_size > CAL_MAX_HEADER_SIZE || header_size > n)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: invalid header size %u; the file is damaged", path, header_size);
	uint32_t n_sections = get_u32(b + CAL_H_SECTION_COUNT), entry_size = get_u32(b + CAL_H_ENTRY_SIZE);
	uint64_t table_off = get_u64(b + CAL_H_TABLE_OFFSET);
	if (n_sections == 0 || n_sections > CAL_MAX_SECTIONS || entry_size < CAL_ENTRY_SIZE ||
	    entry_size > CAL_MAX_ENTRY_SIZE || entry_size % 8 || table_off < header_size || table_off > n ||
	    (uint64_t)n_sections * entry_size > n - table_off)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: invalid section table (%u entries of %u bytes at offset %llu); the file is damaged",
				path, n_sections, entry_size, (unsigned long long)table_off);

	/* Header (its CRC field as zero) and table: nothing in them is used
	 * before the CRC matches (the checks above only bound the read). */
	static const uint8_t zero4[4];
	size_t table_bytes = (size_t)n_sections * entry_size;
	uint32_t crc = crc32c_update(0, b, CAL_H_CRC);
	crc = crc32c_update(crc, zero4, 4);
	crc = crc32c_update(crc, b + CAL_H_CRC + 4, header_size - (CAL_H_CRC + 4));
	crc = crc32c_update(crc, b + table_off, table_bytes);
	uint32_t want = get_u32(b + CAL_H_CRC);
	if (crc != want)
		return hsq_fail(HSQ_ERR_CHECKSUM,
				"%s: header or section table is damaged (crc32c %08x, expected %08x); re-create it with hsq-calibrate",
				path, crc, want);
	uint32_t flags = get_u32(b + CAL_H_FLAGS);
	if (flags)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: calibration file uses features unknown to this hsq %s (flags 0x%x); upgrade hsq", path,
				hsq_version(), flags);
	uint32_t sh_layer = get_u32(b + CAL_H_N_LAYER), sh_embd = get_u32(b + CAL_H_N_EMBD);
	uint32_t sh_head_kv = get_u32(b + CAL_H_N_HEAD_KV);
	if (sh_layer == 0 || sh_layer > CAL_MAX_LAYERS || sh_embd == 0 || sh_embd > CAL_MAX_EMBD || sh_head_kv == 0 ||
	    sh_head_kv > CAL_MAX_HEAD_KV)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: implausible model shape in the header (%u layers, hidden size %u, %u kv heads); the file is damaged",
				path, sh_layer, sh_embd, sh_head_kv);
	memcpy(cal->info.model_identity, b + CAL_H_IDENTITY, 32);
	copy_printable(cal->arch, sizeof cal->arch, b + CAL_H_ARCH, CAL_ARCH_LEN);
	copy_printable(cal->name, sizeof cal->name, b + CAL_H_NAME, CAL_NAME_LEN);

	secs = calloc(n_sections, sizeof *secs);
	ranges = calloc(2 + (size_t)n_sections, sizeof *ranges);
	if (!secs || !ranges) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto done;
	}
	for (uint32_t i = 0; i < n_sections; i++)
		if ((st = parse_entry(path, i, b + table_off + (size_t)i * entry_size, n, header_size, table_off,
				      table_off + table_bytes, &secs[i])))
			goto done;
	const cal_section *reader = NULL, *info = NULL;
	for (uint32_t i = 0; i < n_sections; i++) {
		const cal_section *a = &secs[i];
		for (uint32_t j = i + 1; j < n_sections; j++) {
			const cal_section *c = &secs[j];
			if (!strcmp(a->name, c->name)) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' appears twice; the file is damaged", path,
					      a->name);
				goto done;
			}
			if (a->size && c->size && a->offset < c->offset + c->size && c->offset < a->offset + a->size) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: sections '%s' and '%s' overlap; the file is damaged", path,
					      a->name, c->name);
				goto done;
			}
		}
		if (!strcmp(a->name, CAL_SEC_READER))
			reader = a;
		else if (!strcmp(a->name, CAL_SEC_INFO))
			info = a;
		ranges[2 + i][0] = a->offset;
		ranges[2 + i][1] = a->offset + a->size;
	}
	ranges[0][0] = 0;
	ranges[0][1] = header_size;
	ranges[1][0] = table_off;
	ranges[1][1] = table_off + table_bytes;
	if ((st = check_gaps(path, b, n, ranges, 2 + (size_t)n_sections)))
		goto done;
	/* Every section, the skipped ones too: then a damaged byte anywhere is
	 * reported as damage. */
	for (uint32_t i = 0; i < n_sections; i++) {
		uint32_t got = crc32c_update(0, b + secs[i].offset, (size_t)secs[i].size);
		if (got != secs[i].crc) {
			st = hsq_fail(HSQ_ERR_CHECKSUM,
				      "%s: section '%s' is damaged (crc32c %08x, expected %08x); re-create it with hsq-calibrate",
				      path, secs[i].name, got, secs[i].crc);
			goto done;
		}
	}

	/* Trained for this model? Checked once the file is known intact, and
	 * before its weights are read. */
	if (mi) {
		if (memcmp(mi->identity, cal->info.model_identity, 32)) {
			st = identity_mismatch(path, cal, mi);
			goto done;
		}
		if ((uint32_t)mi->n_layer != sh_layer || (uint32_t)mi->n_embd != sh_embd ||
		    (uint32_t)mi->n_head_kv != sh_head_kv) {
			st = hsq_fail(HSQ_ERR_MODEL_MISMATCH,
				      "%s names model '%s' but was trained for %u layers, hidden size %u and %u kv heads, and the model has %d, %d and %d; the file is damaged, re-create it with hsq-calibrate",
				      path, cal->name[0] ? cal->name : "unnamed", sh_layer, sh_embd, sh_head_kv, mi->n_layer,
				      mi->n_embd, mi->n_head_kv);
			goto done;
		}
	}

	if (!reader) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: calibration file has no 'reader' section; the file is damaged", path);
		goto done;
	}
	if ((st = parse_reader(path, b + reader->offset, reader->size, sh_layer, sh_embd, sh_head_kv, &cal->reader)))
		goto done;

	uint64_t info_size = info ? info->size : 0;
	if (info_size > CAL_MAX_INFO_SIZE) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: section 'info' is %llu bytes, more than the %llu allowed; the file is damaged",
			      path, (unsigned long long)info_size, (unsigned long long)CAL_MAX_INFO_SIZE);
		goto done;
	}
	const uint8_t *text = info ? b + info->offset : NULL;
	size_t at = 0;
	int bad = info_size ? calib_info_check(text, (size_t)info_size, &at) : 0;
	if (bad) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: section 'info' %s at byte %zu; the file is damaged", path,
			      bad == 1 ? "is not valid utf-8" : "holds a control character", at);
		goto done;
	}
	if (!(cal->info_text = malloc((size_t)info_size + 1))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto done;
	}
	if (info_size)
		memcpy(cal->info_text, text, (size_t)info_size);
	cal->info_text[info_size] = '\0';

	const reader_net *r = &cal->reader;
	cal->info.version_major = major;
	cal->info.version_minor = minor;
	cal->info.file_size = n;
	cal->info.model_arch = cal->arch;
	cal->info.model_name = cal->name;
	cal->info.reader_layer = r->tap_layer;
	cal->info.reader_hidden = r->n_hidden;
	cal->info.reader_prior = r->prior_obs;
	cal->info.reader_params = r->n_hidden * r->n_in + r->n_hidden + r->n_out * r->n_hidden + r->n_out;
	cal->info.info = cal->info_text;
done:
	free(secs);
	free(ranges);
	return st;
}

hsq_status hsq_calibration_load(const char *path, const hsq_model *model, hsq_calibration **out)
{
	hsq_status st;
	uint8_t *b = NULL;
	size_t n = 0;
	hsq_calibration *cal = NULL;
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_calibration_load: the output pointer is missing");
	*out = NULL;
	if (!path || !*path)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "no calibration file path given");
	hsq_model_info mi;
	if (model)
		hsq_model_get_info(model, &mi);
	if ((st = read_whole(path, &b, &n)))
		goto fail;
	if (!(cal = calloc(1, sizeof *cal))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto fail;
	}
	if ((st = parse(path, b, n, model ? &mi : NULL, cal)))
		goto fail;
	/* What a snapshot built with this reader records. */
	sha256(b, n, cal->info.sha256);
	free(b);
	*out = cal;
	return HSQ_OK;
fail:
	free(b);
	hsq_calibration_free(cal);
	return st;
}

void hsq_calibration_free(hsq_calibration *cal)
{
	if (!cal)
		return;
	free(cal->reader.w1);
	free(cal->reader.b1);
	free(cal->reader.w2);
	free(cal->reader.b2);
	free(cal->info_text);
	free(cal);
}

void hsq_calibration_get_info(const hsq_calibration *cal, hsq_calibration_info *out)
{
	if (!out)
		return;
	if (!cal) {
		memset(out, 0, sizeof *out);
		return;
	}
	*out = cal->info;
}

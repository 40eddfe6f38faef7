/* snapshot_read.c - opening and reading hsq snapshot files.
 *
 * The format is specified in man/hsq-snapshot.5 and named in
 * snapshot_format.h. Readers treat the file as hostile: the header and the
 * section table are checksummed and bounds-checked before any offset is
 * used, every decoded size is capped by what the table says (and, for the KV
 * cache, by what the hyper-parameters imply), and token ids are checked
 * against the vocabulary before they can index an embedding table. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"
#include "hsq.h"
#include "snapshot/snapshot_format.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/tiers_io.h"

/* Bytes moved per read while streaming uncompressed or single-stream data. */
#define IO_BLOCK ((size_t)4 << 20)
/* Largest header / table entry / small section a reader accepts. */
#define MAX_HEADER_SIZE 4096u
#define MAX_ENTRY_SIZE 1024u
#define MAX_META_SIZE ((uint64_t)1 << 16)
/* Largest chunk table (entries) a reader allocates. */
#define MAX_CHUNKS ((uint64_t)1 << 24)

void snap_copy_printable(char *dst, size_t cap, const uint8_t *src, size_t len)
{
	size_t i = 0;
	for (; i + 1 < cap && i < len && src[i]; i++)
		dst[i] = src[i] < 0x20 || src[i] == 0x7f ? '?' : (char)src[i];
	dst[i] = '\0';
}

void snap_reader_close(snap_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->sections);
	r->fd = -1;
	r->sections = NULL;
}

/* Reads exactly n bytes at off. The sizes were checked against fstat, so a
 * short read means the file shrank under us. */
static hsq_status read_at(const snap_reader *r, uint64_t off, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t got = pread(r->fd, p, n, (off_t)off);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return hsq_fail(HSQ_ERR_IO, "%s: read failed at byte %llu: %s", r->path,
					(unsigned long long)off, strerror(errno));
		}
		if (got == 0)
			return hsq_fail(HSQ_ERR_TRUNCATED,
					"%s: file ends at byte %llu, inside data its header describes; was it truncated while being read? re-create it with hsq-prefill",
					r->path, (unsigned long long)off);
		p += got;
		off += (uint64_t)got;
		n -= (size_t)got;
	}
	return HSQ_OK;
}

const snap_section *snap_find_section(const snap_reader *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_sections; i++)
		if (!strcmp(r->sections[i].name, name))
			return &r->sections[i];
	return NULL;
}

static int known_section(const char *name)
{
	for (int i = 0; i < TIER_N_SECTIONS; i++)
		if (!strcmp(name, tier_section_names[i]))
			return 1;
	return !strcmp(name, "meta") || !strcmp(name, "tokens") || !strcmp(name, "kv.full");
}

static hsq_status parse_entry(const snap_reader *r, uint32_t i, const uint8_t *e, uint64_t header_size,
			      uint64_t table_off, uint64_t table_end, snap_section *s)
{
	/* Name: 1..15 bytes of [a-z0-9._-], then NUL padding. */
	size_t len = 0;
	while (len < SNAP_SECTION_NAME_LEN && e[SNAP_E_NAME + len])
		len++;
	int ok = len > 0 && len < SNAP_SECTION_NAME_LEN;
	for (size_t k = 0; ok && k < SNAP_SECTION_NAME_LEN; k++) {
		uint8_t c = e[SNAP_E_NAME + k];
		if (k < len)
			ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		else
			ok = c == 0;
	}
	if (!ok)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section %u has an invalid name; the file is damaged or not a snapshot",
				r->path, i);
	memcpy(s->name, e + SNAP_E_NAME, len);
	s->name[len] = '\0';
	s->offset = get_u64(e + SNAP_E_OFFSET);
	s->stored = get_u64(e + SNAP_E_STORED);
	s->raw = get_u64(e + SNAP_E_RAW);
	s->chunk = get_u64(e + SNAP_E_CHUNK);
	s->codec = get_u16(e + SNAP_E_CODEC);
	s->filter = e[SNAP_E_FILTER];
	s->align_log2 = e[SNAP_E_ALIGN_LOG2];
	s->flags = get_u32(e + SNAP_E_FLAGS);
	s->crc = get_u32(e + SNAP_E_CRC);

	if (s->align_log2 < SNAP_ALIGN_LOG2_MIN || s->align_log2 > SNAP_ALIGN_LOG2_MAX ||
	    s->offset % ((uint64_t)1 << s->align_log2))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' offset %llu is not aligned to 2^%u bytes; the file is damaged",
				r->path, s->name, (unsigned long long)s->offset, s->align_log2);
	/* Inside the file, clear of the header and of the table (which a
	 * writer may put before or after the sections). */
	if (s->offset < header_size || s->offset > r->file_size || s->stored > r->file_size - s->offset ||
	    (s->stored && s->offset < table_end && table_off < s->offset + s->stored))
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: section '%s' (%llu bytes at offset %llu) overlaps the header or the section table, or lies outside the file's %llu bytes; the file is damaged",
				r->path, s->name, (unsigned long long)s->stored, (unsigned long long)s->offset,
				(unsigned long long)r->file_size);
	if ((s->flags & SNAP_SECTION_REQUIRED) && !known_section(s->name))
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: required section '%s' is unknown to this hsq (%s); upgrade hsq to read this snapshot",
				r->path, s->name, hsq_version());
	return HSQ_OK;
}

hsq_status snap_check_encoding(const snap_reader *r, const snap_section *s)
{
	if (s->flags & ~SNAP_SECTION_KNOWN_FLAGS)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: section '%s' uses unknown flags 0x%x; upgrade hsq", r->path,
				s->name, s->flags & ~SNAP_SECTION_KNOWN_FLAGS);
	if (s->codec != SNAP_CODEC_RAW && s->codec != SNAP_CODEC_ZSTD)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: section '%s' uses unknown codec %u; upgrade hsq", r->path,
				s->name, s->codec);
	if (s->filter != SNAP_FILTER_NONE && s->filter != SNAP_FILTER_SHUFFLE4)
		return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: section '%s' uses unknown filter %u; upgrade hsq", r->path,
				s->name, s->filter);
	if (s->codec == SNAP_CODEC_RAW && (s->stored != s->raw || s->chunk != 0))
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: uncompressed section '%s' stores %llu bytes but declares %llu; the file is damaged",
				r->path, s->name, (unsigned long long)s->stored, (unsigned long long)s->raw);
	if (s->filter == SNAP_FILTER_SHUFFLE4 && (s->raw % 4 || s->chunk % 4))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' is byte-shuffled but its sizes are not multiples of 4",
				r->path, s->name);
	return HSQ_OK;
}

hsq_status snap_checksum_error(const snap_reader *r, const snap_section *s, uint32_t got)
{
	return hsq_fail(HSQ_ERR_CHECKSUM,
			"%s: section '%s' is damaged (crc32c %08x, expected %08x); re-create the snapshot with hsq-prefill",
			r->path, s->name, got, s->crc);
}

static hsq_status parse_meta(snap_reader *r, const uint8_t *m, size_t n)
{
	snap_meta *x = &r->meta;
	if (n < SNAP_META_SIZE)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'meta' is %zu bytes, shorter than the %d this format needs",
				r->path, n, SNAP_META_SIZE);
	x->n_layer = get_u32(m + SNAP_M_N_LAYER);
	x->n_head_kv = get_u32(m + SNAP_M_N_HEAD_KV);
	x->head_dim = get_u32(m + SNAP_M_HEAD_DIM);
	x->n_tokens = get_u32(m + SNAP_M_N_TOKENS);
	x->mode = get_u32(m + SNAP_M_MODE);
	x->kv_dtype = get_u32(m + SNAP_M_KV_DTYPE);
	x->n_vocab = get_u32(m + SNAP_M_N_VOCAB);
	x->n_embd = get_u32(m + SNAP_M_N_EMBD);
	x->n_head = get_u32(m + SNAP_M_N_HEAD);
	x->n_ctx_train = get_u32(m + SNAP_M_N_CTX_TRAIN);
	uint32_t bits = get_u32(m + SNAP_M_ROPE_BASE);
	memcpy(&x->rope_base, &bits, 4);
	x->k_rope = get_u32(m + SNAP_M_K_ROPE);
	x->pos_base = get_u32(m + SNAP_M_POS_BASE);
	snap_copy_printable(x->writer, sizeof x->writer, m + SNAP_M_WRITER, SNAP_WRITER_LEN);

	if (x->n_layer == 0 || x->n_layer > SNAP_MAX_LAYERS || x->n_head_kv == 0 || x->head_dim == 0 ||
	    (uint64_t)x->n_head_kv * x->head_dim > SNAP_MAX_KV_WIDTH || x->n_tokens > SNAP_MAX_TOKENS ||
	    x->n_vocab == 0 || x->n_vocab > INT32_MAX)
		return hsq_fail(HSQ_ERR_FORMAT,
				"%s: implausible hyper-parameters in section 'meta' (%u layers, %u kv heads x %u, %u tokens, vocabulary %u); the file is damaged",
				r->path, x->n_layer, x->n_head_kv, x->head_dim, x->n_tokens, x->n_vocab);
	if (x->mode != r->mode)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: header says mode %u but section 'meta' says %u; the file is damaged",
				r->path, r->mode, x->mode);
	return HSQ_OK;
}

/* What a file that is not a regular file is, for the message. */
static const char *file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "of an unknown kind";
}

hsq_status snap_reader_open(snap_reader *r, const char *path)
{
	hsq_status st = HSQ_OK;
	uint8_t *hdr = NULL, *meta = NULL;
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->path = path;

	if (!path)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "no snapshot path given");
	/* O_NONBLOCK: opening a FIFO (or a terminal) for reading would
	 * otherwise wait for a writer before fstat could refuse it. */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0)
		return hsq_fail(HSQ_ERR_IO, "%s: %s%s", path, strerror(errno),
				errno == ENOENT ? " (create it with hsq-prefill)" : "");
	struct stat sb;
	if (fstat(r->fd, &sb) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = hsq_fail(HSQ_ERR_IO, "%s: not a regular file (%s); pass a snapshot written by hsq-prefill", path,
			      file_kind(sb.st_mode));
		goto fail;
	}
	int fl = fcntl(r->fd, F_GETFL);
	if (fl < 0 || fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	r->file_size = (uint64_t)sb.st_size;

	uint8_t fixed[SNAP_HEADER_SIZE];
	size_t have = r->file_size < SNAP_HEADER_SIZE ? (size_t)r->file_size : SNAP_HEADER_SIZE;
	if ((st = read_at(r, 0, fixed, have)))
		goto fail;
	if (r->file_size == 0) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: empty file, not an hsq snapshot; re-create it with hsq-prefill", path);
		goto fail;
	}
	if (have < SNAP_MAGIC_LEN || memcmp(fixed, SNAP_MAGIC, SNAP_MAGIC_LEN)) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: not an hsq snapshot (bad magic); pass a file written by hsq-prefill",
			      path);
		goto fail;
	}
	if (have < SNAP_H_VERSION_MINOR + 2) {
		st = hsq_fail(HSQ_ERR_TRUNCATED, "%s: truncated snapshot (%llu bytes, shorter than its header); re-create it with hsq-prefill",
			      path, (unsigned long long)r->file_size);
		goto fail;
	}
	r->major = get_u16(fixed + SNAP_H_VERSION_MAJOR);
	r->minor = get_u16(fixed + SNAP_H_VERSION_MINOR);
	if (r->major != SNAP_VERSION_MAJOR) {
		if (r->major > SNAP_VERSION_MAJOR)
			st = hsq_fail(HSQ_ERR_UNSUPPORTED,
				      "%s: snapshot format %u.%u is newer than this hsq %s reads (%d.x); upgrade hsq or re-create the snapshot with this version",
				      path, r->major, r->minor, hsq_version(), SNAP_VERSION_MAJOR);
		else
			st = hsq_fail(HSQ_ERR_UNSUPPORTED,
				      "%s: snapshot format %u.%u is older than this hsq %s reads (%d.x); re-create the snapshot with hsq-prefill",
				      path, r->major, r->minor, hsq_version(), SNAP_VERSION_MAJOR);
		goto fail;
	}
	if (have < SNAP_HEADER_SIZE) {
		st = hsq_fail(HSQ_ERR_TRUNCATED, "%s: truncated snapshot (%llu bytes, shorter than its header); re-create it with hsq-prefill",
			      path, (unsigned long long)r->file_size);
		goto fail;
	}
	uint32_t header_size = get_u32(fixed + SNAP_H_HEADER_SIZE);
	uint64_t declared = get_u64(fixed + SNAP_H_FILE_SIZE);
	if (declared > r->file_size) {
		st = hsq_fail(HSQ_ERR_TRUNCATED,
			      "%s: truncated snapshot: %llu bytes, but its header says %llu; the copy was cut short, copy it again or re-create it with hsq-prefill",
			      path, (unsigned long long)r->file_size, (unsigned long long)declared);
		goto fail;
	}
	if (declared < r->file_size) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: %llu bytes, but its header says %llu: data was appended or the file is damaged; re-create it with hsq-prefill",
			      path, (unsigned long long)r->file_size, (unsigned long long)declared);
		goto fail;
	}
	if (header_size < SNAP_HEADER_SIZE || header_size > MAX_HEADER_SIZE || header_size > r->file_size) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: invalid header size %u; the file is damaged", path, header_size);
		goto fail;
	}
	uint32_t flags = get_u32(fixed + SNAP_H_FLAGS);
	r->mode = get_u32(fixed + SNAP_H_MODE);
	uint64_t table_off = get_u64(fixed + SNAP_H_TABLE_OFFSET);
	r->n_sections = get_u32(fixed + SNAP_H_SECTION_COUNT);
	uint32_t entry_size = get_u32(fixed + SNAP_H_ENTRY_SIZE);
	uint32_t want_crc = get_u32(fixed + SNAP_H_CRC);
	if (r->n_sections == 0 || r->n_sections > SNAP_MAX_SECTIONS || entry_size < SNAP_ENTRY_SIZE ||
	    entry_size > MAX_ENTRY_SIZE || entry_size % 8 || table_off < header_size || table_off > r->file_size ||
	    (uint64_t)r->n_sections * entry_size > r->file_size - table_off) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: invalid section table (%u entries of %u bytes at offset %llu); the file is damaged",
			      path, r->n_sections, entry_size, (unsigned long long)table_off);
		goto fail;
	}

	/* Header + table, one buffer, one CRC: nothing in them is used before
	 * the CRC matches (the checks above only bound the read). */
	size_t table_bytes = (size_t)r->n_sections * entry_size;
	hdr = malloc(header_size + table_bytes);
	r->sections = calloc(r->n_sections, sizeof *r->sections);
	if (!hdr || !r->sections) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto fail;
	}
	if ((st = read_at(r, 0, hdr, header_size)) || (st = read_at(r, table_off, hdr + header_size, table_bytes)))
		goto fail;
	put_u32(hdr + SNAP_H_CRC, 0);
	uint32_t got_crc = crc32c_update(0, hdr, header_size + table_bytes);
	if (got_crc != want_crc) {
		st = hsq_fail(HSQ_ERR_CHECKSUM,
			      "%s: header or section table is damaged (crc32c %08x, expected %08x); re-create the snapshot with hsq-prefill",
			      path, got_crc, want_crc);
		goto fail;
	}
	if (flags) {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: snapshot uses features unknown to this hsq %s (flags 0x%x); upgrade hsq",
			      path, hsq_version(), flags);
		goto fail;
	}
	memcpy(r->identity, hdr + SNAP_H_IDENTITY, 32);
	snap_copy_printable(r->arch, sizeof r->arch, hdr + SNAP_H_ARCH, SNAP_ARCH_LEN);
	snap_copy_printable(r->name, sizeof r->name, hdr + SNAP_H_NAME, SNAP_NAME_LEN);

	for (uint32_t i = 0; i < r->n_sections; i++)
		if ((st = parse_entry(r, i, hdr + header_size + (size_t)i * entry_size, header_size, table_off,
					 table_off + table_bytes, &r->sections[i])))
			goto fail;
	for (uint32_t i = 0; i < r->n_sections; i++) {
		const snap_section *a = &r->sections[i];
		for (uint32_t j = i + 1; j < r->n_sections; j++) {
			const snap_section *b = &r->sections[j];
			if (!strcmp(a->name, b->name)) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' appears twice; the file is damaged", path,
					      a->name);
				goto fail;
			}
			if (a->stored && b->stored && a->offset < b->offset + b->stored &&
			    b->offset < a->offset + a->stored) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: sections '%s' and '%s' overlap; the file is damaged", path,
					      a->name, b->name);
				goto fail;
			}
		}
	}

	const snap_section *ms = snap_find_section(r, "meta");
	if (!ms) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: snapshot has no 'meta' section; the file is damaged", path);
		goto fail;
	}
	if ((st = snap_read_small_section(r, ms, MAX_META_SIZE, &meta)) || (st = parse_meta(r, meta, (size_t)ms->raw)))
		goto fail;
	free(hdr);
	free(meta);
	return HSQ_OK;
fail:
	free(hdr);
	free(meta);
	snap_reader_close(r);
	return st;
}

/* Reverses SNAP_FILTER_SHUFFLE4 on n bytes (n % 4 == 0): plane j holds
 * byte j of every element. */
static void unshuffle4(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
	size_t m = n / 4;
	const uint8_t *p0 = src, *p1 = src + m, *p2 = src + 2 * m, *p3 = src + 3 * m;
	/* Written as whole little-endian words so the compiler vectorises it. */
	for (size_t i = 0; i < m; i++) {
		uint32_t v = (uint32_t)p0[i] | (uint32_t)p1[i] << 8 | (uint32_t)p2[i] << 16 | (uint32_t)p3[i] << 24;
		memcpy(dst + 4 * i, &v, 4);
	}
}

hsq_status snap_section_stream(const snap_reader *r, const snap_section *s, snap_sink_fn sink, void *arg)
{
	hsq_status st = HSQ_OK;
	uint8_t *in = NULL, *out = NULL, *tmp = NULL, *table = NULL;
	ZSTD_DCtx *dctx = NULL;
	uint32_t crc = 0;

	if ((st = snap_check_encoding(r, s)))
		return st;
	int shuffled = s->filter == SNAP_FILTER_SHUFFLE4;

	if (s->codec == SNAP_CODEC_RAW && !shuffled) {
		size_t cap = s->raw < IO_BLOCK ? (size_t)s->raw : IO_BLOCK;
		if (!(in = malloc(cap ? cap : 1))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", r->path);
			goto done;
		}
		for (uint64_t off = 0; off < s->raw; off += cap) {
			size_t n = s->raw - off < cap ? (size_t)(s->raw - off) : cap;
			if ((st = read_at(r, s->offset + off, in, n)))
				goto done;
			crc = crc32c_update(crc, in, n);
			if ((st = sink(arg, off, in, n)))
				goto done;
		}
	} else if (s->codec == SNAP_CODEC_RAW || (s->codec == SNAP_CODEC_ZSTD && s->chunk == 0 && shuffled)) {
		/* One unit holding the whole section: only small or shuffled
		 * single-stream sections take this path; raw_size bounds it. */
		if (s->raw > SIZE_MAX / 2 || !(in = malloc(s->stored ? s->stored : 1)) ||
		    !(out = malloc(s->raw ? s->raw : 1)) || !(tmp = malloc(s->raw ? s->raw : 1))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading section '%s' of %s (%llu bytes)", s->name,
				      r->path, (unsigned long long)s->raw);
			goto done;
		}
		if ((st = read_at(r, s->offset, in, s->stored)))
			goto done;
		crc = crc32c_update(0, in, s->stored);
		if (crc != s->crc) {
			st = snap_checksum_error(r, s, crc);
			goto done;
		}
		const uint8_t *plain = in;
		if (s->codec == SNAP_CODEC_ZSTD) {
			size_t got = ZSTD_decompress(out, s->raw, in, s->stored);
			if (ZSTD_isError(got) || got != s->raw) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' does not decompress to its %llu bytes (%s); the file is damaged",
					      r->path, s->name, (unsigned long long)s->raw,
					      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size");
				goto done;
			}
			plain = out;
		}
		unshuffle4(tmp, plain, s->raw);
		st = sink(arg, 0, tmp, s->raw);
		goto done;
	} else if (s->chunk == 0) {
		/* One zstd stream (possibly several concatenated frames). The
		 * output block is filled completely before it goes to the sink,
		 * so the sink sees sizes that are multiples of 4; decoding
		 * stops with an error as soon as it would exceed raw_size. */
		if (!(dctx = ZSTD_createDCtx()) || !(in = malloc(IO_BLOCK)) || !(out = malloc(IO_BLOCK))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", r->path);
			goto done;
		}
		uint64_t read_off = 0, raw_off = 0;
		size_t fill = 0, ret = 0;
		ZSTD_inBuffer ib = { in, 0, 0 };
		for (;;) {
			if (ib.pos == ib.size) {
				if (read_off == s->stored)
					break;
				size_t n = s->stored - read_off < IO_BLOCK ? (size_t)(s->stored - read_off) : IO_BLOCK;
				if ((st = read_at(r, s->offset + read_off, in, n)))
					goto done;
				crc = crc32c_update(crc, in, n);
				read_off += n;
				ib.size = n;
				ib.pos = 0;
			}
			uint64_t left = s->raw - raw_off - fill;
			size_t room = IO_BLOCK - fill < left ? IO_BLOCK - fill : (size_t)left;
			uint8_t extra;
			ZSTD_outBuffer ob = room ? (ZSTD_outBuffer){ out + fill, room, 0 } : (ZSTD_outBuffer){ &extra, 1, 0 };
			ret = ZSTD_decompressStream(dctx, &ob, &ib);
			if (ZSTD_isError(ret)) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' is not valid zstd data (%s); the file is damaged",
					      r->path, s->name, ZSTD_getErrorName(ret));
				goto done;
			}
			if (!room && ob.pos) {
				st = hsq_fail(HSQ_ERR_FORMAT,
					      "%s: section '%s' decompresses to more than its %llu bytes; the file is damaged",
					      r->path, s->name, (unsigned long long)s->raw);
				goto done;
			}
			if (room)
				fill += ob.pos;
			if (fill && (fill == IO_BLOCK || raw_off + fill == s->raw)) {
				if ((st = sink(arg, raw_off, out, fill)))
					goto done;
				raw_off += fill;
				fill = 0;
			}
		}
		if (raw_off != s->raw || ret != 0) {
			st = hsq_fail(HSQ_ERR_FORMAT,
				      "%s: section '%s' decompresses to %llu bytes%s, not its %llu; the file is damaged",
				      r->path, s->name, (unsigned long long)(raw_off + fill),
				      ret ? " and ends inside a frame" : "", (unsigned long long)s->raw);
			goto done;
		}
	} else {
		/* Independent frames of `chunk` raw bytes each, then the chunk
		 * table: n+1 u64 offsets of the frames from the section start. */
		uint64_t n_chunks = s->raw / s->chunk + (s->raw % s->chunk != 0);
		uint64_t table_bytes = (n_chunks + 1) * 8;
		if (n_chunks > MAX_CHUNKS || table_bytes > s->stored) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' is too short for its %llu-chunk table; the file is damaged",
				      r->path, s->name, (unsigned long long)n_chunks);
			goto done;
		}
		uint64_t frames_end = s->stored - table_bytes;
		if (!(table = malloc(table_bytes))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", r->path);
			goto done;
		}
		if ((st = read_at(r, s->offset + frames_end, table, table_bytes)))
			goto done;
		/* Validate the whole table before reading any frame. */
		size_t max_frame = 0, frame_bound = ZSTD_compressBound(s->chunk);
		if (get_u64(table) != 0 || get_u64(table + n_chunks * 8) != frames_end) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' has an invalid chunk table; the file is damaged",
				      r->path, s->name);
			goto done;
		}
		for (uint64_t i = 0; i < n_chunks; i++) {
			uint64_t a = get_u64(table + i * 8), b = get_u64(table + i * 8 + 8);
			if (b < a || b - a > frame_bound || b - a == 0) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' chunk %llu has an invalid size; the file is damaged",
					      r->path, s->name, (unsigned long long)i);
				goto done;
			}
			if (b - a > max_frame)
				max_frame = (size_t)(b - a);
		}
		size_t unit = s->chunk < s->raw ? (size_t)s->chunk : (size_t)s->raw;
		if (!(dctx = ZSTD_createDCtx()) || !(in = malloc(max_frame ? max_frame : 1)) ||
		    !(out = malloc(unit ? unit : 1)) || (shuffled && !(tmp = malloc(unit ? unit : 1)))) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading section '%s' of %s", s->name, r->path);
			goto done;
		}
		for (uint64_t i = 0; i < n_chunks; i++) {
			uint64_t a = get_u64(table + i * 8), b = get_u64(table + i * 8 + 8);
			uint64_t raw_off = i * s->chunk;
			size_t want = s->raw - raw_off < s->chunk ? (size_t)(s->raw - raw_off) : (size_t)s->chunk;
			if ((st = read_at(r, s->offset + a, in, (size_t)(b - a))))
				goto done;
			crc = crc32c_update(crc, in, (size_t)(b - a));
			size_t got = ZSTD_decompressDCtx(dctx, out, want, in, (size_t)(b - a));
			if (ZSTD_isError(got) || got != want) {
				st = hsq_fail(HSQ_ERR_FORMAT,
					      "%s: section '%s' chunk %llu does not decompress to its %zu bytes (%s); the file is damaged",
					      r->path, s->name, (unsigned long long)i, want,
					      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size");
				goto done;
			}
			const uint8_t *plain = out;
			if (shuffled) {
				unshuffle4(tmp, out, want);
				plain = tmp;
			}
			if ((st = sink(arg, raw_off, plain, want)))
				goto done;
		}
		crc = crc32c_update(crc, table, table_bytes);
	}
	if (crc != s->crc)
		st = snap_checksum_error(r, s, crc);
done:
	/* Damage usually shows first as undecodable data: when the stored
	 * bytes do not match their checksum, say so, since that is the cause. */
	if (st == HSQ_ERR_FORMAT) {
		uint32_t full;
		hsq_status saved = st;
		char msg[512];
		snprintf(msg, sizeof msg, "%s", hsq_last_error());
		if (snap_section_crc(r, s, &full) == HSQ_OK && full != s->crc)
			st = snap_checksum_error(r, s, full);
		else
			st = hsq_fail(saved, "%s", msg);
	}
	free(in);
	free(out);
	free(tmp);
	free(table);
	ZSTD_freeDCtx(dctx);
	return st;
}

typedef struct buf_sink {
	uint8_t *buf;
	uint64_t cap;
} buf_sink;

static hsq_status to_buffer(void *arg, uint64_t raw_off, const uint8_t *data, size_t n)
{
	buf_sink *b = arg;
	if (raw_off > b->cap || n > b->cap - raw_off)
		return hsq_fail(HSQ_ERR_INTERNAL, "section decoder wrote past its buffer; please report");
	memcpy(b->buf + raw_off, data, n);
	return HSQ_OK;
}

hsq_status snap_read_small_section(snap_reader *r, const snap_section *s, uint64_t max_raw, uint8_t **out)
{
	hsq_status st;
	*out = NULL;
	if (s->raw > max_raw)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' claims %llu bytes, more than the %llu it can hold; the file is damaged",
				r->path, s->name, (unsigned long long)s->raw, (unsigned long long)max_raw);
	buf_sink b = { malloc(s->raw ? s->raw : 1), s->raw };
	if (!b.buf)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading section '%s' of %s", s->name, r->path);
	if ((st = snap_section_stream(r, s, to_buffer, &b))) {
		free(b.buf);
		return st;
	}
	*out = b.buf;
	return HSQ_OK;
}

hsq_status snap_section_crc(const snap_reader *r, const snap_section *s, uint32_t *out)
{
	/* A block of IO_BLOCK bytes at most: most sections are far smaller. */
	size_t cap = s->stored < IO_BLOCK ? (size_t)s->stored : IO_BLOCK;
	uint8_t *buf = malloc(cap ? cap : 1);
	uint32_t crc = 0;
	if (!buf)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", r->path);
	for (uint64_t off = 0; off < s->stored; off += cap) {
		size_t n = s->stored - off < cap ? (size_t)(s->stored - off) : cap;
		hsq_status st = read_at(r, s->offset + off, buf, n);
		if (st) {
			free(buf);
			return st;
		}
		crc = crc32c_update(crc, buf, n);
	}
	free(buf);
	*out = crc;
	return HSQ_OK;
}

hsq_status snap_read_tokens(snap_reader *r, uint32_t n_vocab, hsq_token **out)
{
	const snap_section *s = snap_find_section(r, "tokens");
	uint8_t *raw = NULL;
	hsq_status st;
	*out = NULL;
	if (!s)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: snapshot has no 'tokens' section; the file is damaged", r->path);
	if (s->raw != (uint64_t)r->meta.n_tokens * 4)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tokens' holds %llu bytes, not the %llu that %u tokens need; the file is damaged",
				r->path, (unsigned long long)s->raw, (unsigned long long)r->meta.n_tokens * 4,
				r->meta.n_tokens);
	if ((st = snap_read_small_section(r, s, s->raw, &raw)))
		return st;
	hsq_token *t = (hsq_token *)raw; /* malloc'ed: aligned for int32 */
	for (uint32_t i = 0; i < r->meta.n_tokens; i++) {
		int32_t v = (int32_t)get_u32(raw + 4 * (size_t)i);
		if (v < 0 || (uint32_t)v >= n_vocab) {
			free(raw);
			return hsq_fail(HSQ_ERR_FORMAT, "%s: token %u has id %d, outside the vocabulary of %u; the file is damaged",
					r->path, i, v, n_vocab);
		}
		t[i] = v;
	}
	*out = t;
	return HSQ_OK;
}

/* snapshot.c - save and resume contexts through hsq snapshot files.
 *
 * The format is specified in man/hsq-snapshot.5 and named in
 * snapshot_format.h. Readers treat the file as hostile: the header and the
 * section table are checksummed and bounds-checked before any offset is
 * used, every decoded size is capped by what the table says (and, for the KV
 * cache, by what the hyper-parameters imply), and token ids are checked
 * against the vocabulary before they can index an embedding table.
 *
 * Writers never leave a partial file at the destination: they write a
 * temporary file in the same directory, fsync it, rename it over the
 * destination and fsync the directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"
#include "context/context.h"
#include "hsq.h"
#include "kv/tiers.h"
#include "model/model.h"
#include "snapshot/snapshot_format.h"
#include "snapshot/tiers_io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot.c copies fp32 and int32 arrays as little-endian bytes: port it before building on a big-endian host"
#endif

/* Bytes moved per read while streaming uncompressed or single-stream data. */
#define IO_BLOCK ((size_t)4 << 20)
/* Largest header / table entry / small section a reader accepts. */
#define MAX_HEADER_SIZE 4096u
#define MAX_ENTRY_SIZE 1024u
#define MAX_META_SIZE ((uint64_t)1 << 16)
/* Largest chunk table (entries) a reader allocates. */
#define MAX_CHUNKS ((uint64_t)1 << 24)

/* ------------------------------------------------------- byte helpers */

static uint64_t align_up(uint64_t v, unsigned log2)
{
	uint64_t a = (uint64_t)1 << log2;
	return (v + a - 1) & ~(a - 1);
}

/* Copies a NUL-padded string field out of the file, replacing control
 * bytes so a hostile name cannot drive the terminal of whoever prints it. */
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

/* ------------------------------------------------------------ reader */

typedef struct snap_section {
	char name[SNAP_SECTION_NAME_LEN];
	uint64_t offset;   /* bytes from file start */
	uint64_t stored;   /* bytes in the file */
	uint64_t raw;      /* bytes after decoding */
	uint64_t chunk;    /* raw bytes per zstd frame, 0 = one stream */
	uint32_t codec;    /* SNAP_CODEC_* */
	uint32_t filter;   /* SNAP_FILTER_* */
	uint32_t align_log2;
	uint32_t flags;    /* SNAP_SECTION_* */
	uint32_t crc;      /* CRC32C of the stored bytes */
} snap_section;

typedef struct snap_meta {
	uint32_t n_layer, n_head_kv, head_dim, n_tokens, mode, kv_dtype;
	uint32_t n_vocab, n_embd, n_head, n_ctx_train, k_rope, pos_base;
	float rope_base;
	char writer[SNAP_WRITER_LEN];
} snap_meta;

typedef struct snap_reader {
	const char *path;
	int fd;
	uint64_t file_size; /* bytes, from fstat (equal to the header's) */
	uint16_t major, minor;
	uint32_t mode;
	uint8_t identity[32];
	char arch[SNAP_ARCH_LEN];
	char name[SNAP_NAME_LEN];
	uint32_t n_sections;
	snap_section *sections; /* [n_sections] */
	snap_meta meta;
} snap_reader;

static void reader_close(snap_reader *r)
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

static const snap_section *find_section(const snap_reader *r, const char *name)
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

/* Checks the encoding fields of a section the caller is about to decode. */
static hsq_status check_encoding(const snap_reader *r, const snap_section *s)
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

static hsq_status checksum_error(const snap_reader *r, const snap_section *s, uint32_t got)
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
	copy_printable(x->writer, sizeof x->writer, m + SNAP_M_WRITER, SNAP_WRITER_LEN);

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

static hsq_status read_small_section(snap_reader *r, const snap_section *s, uint64_t max_raw, uint8_t **out);

/* Opens a snapshot: header, section table (CRC-checked), and the meta
 * section. Leaves r->fd open for reading sections. */
static hsq_status reader_open(snap_reader *r, const char *path)
{
	hsq_status st = HSQ_OK;
	uint8_t *hdr = NULL, *meta = NULL;
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->path = path;

	if (!path)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "no snapshot path given");
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return hsq_fail(HSQ_ERR_IO, "%s: %s%s", path, strerror(errno),
				errno == ENOENT ? " (create it with hsq-prefill -o FILE)" : "");
	struct stat sb;
	if (fstat(r->fd, &sb) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = hsq_fail(HSQ_ERR_IO, "%s: not a regular file; pass a snapshot written by hsq-prefill", path);
		goto fail;
	}
	r->file_size = (uint64_t)sb.st_size;

	uint8_t fixed[SNAP_HEADER_SIZE];
	size_t have = r->file_size < SNAP_HEADER_SIZE ? (size_t)r->file_size : SNAP_HEADER_SIZE;
	if ((st = read_at(r, 0, fixed, have)))
		goto fail;
	if (r->file_size == 0) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: empty file, not an hsq snapshot; re-create it with hsq-prefill -o", path);
		goto fail;
	}
	if (have < SNAP_MAGIC_LEN || memcmp(fixed, SNAP_MAGIC, SNAP_MAGIC_LEN)) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: not an hsq snapshot (bad magic); pass a file written by hsq-prefill -o",
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
	copy_printable(r->arch, sizeof r->arch, hdr + SNAP_H_ARCH, SNAP_ARCH_LEN);
	copy_printable(r->name, sizeof r->name, hdr + SNAP_H_NAME, SNAP_NAME_LEN);

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

	const snap_section *ms = find_section(r, "meta");
	if (!ms) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: snapshot has no 'meta' section; the file is damaged", path);
		goto fail;
	}
	if ((st = read_small_section(r, ms, MAX_META_SIZE, &meta)) || (st = parse_meta(r, meta, (size_t)ms->raw)))
		goto fail;
	free(hdr);
	free(meta);
	return HSQ_OK;
fail:
	free(hdr);
	free(meta);
	reader_close(r);
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

static void shuffle4(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
	size_t m = n / 4;
	uint8_t *p0 = dst, *p1 = dst + m, *p2 = dst + 2 * m, *p3 = dst + 3 * m;
	for (size_t i = 0; i < m; i++) {
		uint32_t v;
		memcpy(&v, src + 4 * i, 4);
		p0[i] = (uint8_t)v;
		p1[i] = (uint8_t)(v >> 8);
		p2[i] = (uint8_t)(v >> 16);
		p3[i] = (uint8_t)(v >> 24);
	}
}

static hsq_status section_crc(const snap_reader *r, const snap_section *s, uint32_t *out);

/* Receives decoded bytes in order: raw_off is their position in the
 * section's raw content. n is a multiple of 4 whenever raw_off, the
 * section's raw size and its chunk size are. */
typedef hsq_status (*sink_fn)(void *arg, uint64_t raw_off, const uint8_t *data, size_t n);

/* Decodes a section and streams its raw content to sink, checking the
 * CRC32C of the stored bytes. The sink sees data before the last stored byte
 * is checked (zstd frames carry their own content checksum, checked before
 * their data is passed on), so a caller must discard what it built when
 * this fails. Memory: one chunk (or IO_BLOCK) of stored and decoded bytes. */
static hsq_status section_stream(const snap_reader *r, const snap_section *s, sink_fn sink, void *arg)
{
	hsq_status st = HSQ_OK;
	uint8_t *in = NULL, *out = NULL, *tmp = NULL, *table = NULL;
	ZSTD_DCtx *dctx = NULL;
	uint32_t crc = 0;

	if ((st = check_encoding(r, s)))
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
			st = checksum_error(r, s, crc);
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
		st = checksum_error(r, s, crc);
done:
	/* Damage usually shows first as undecodable data: when the stored
	 * bytes do not match their checksum, say so, since that is the cause. */
	if (st == HSQ_ERR_FORMAT) {
		uint32_t full;
		hsq_status saved = st;
		char msg[512];
		snprintf(msg, sizeof msg, "%s", hsq_last_error());
		if (section_crc(r, s, &full) == HSQ_OK && full != s->crc)
			st = checksum_error(r, s, full);
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

/* Reads a whole section into a malloc'ed buffer of s->raw bytes, refusing
 * sections larger than max_raw. For raw sections the CRC is checked before
 * the caller sees any byte. */
static hsq_status read_small_section(snap_reader *r, const snap_section *s, uint64_t max_raw, uint8_t **out)
{
	hsq_status st;
	*out = NULL;
	if (s->raw > max_raw)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section '%s' claims %llu bytes, more than the %llu it can hold; the file is damaged",
				r->path, s->name, (unsigned long long)s->raw, (unsigned long long)max_raw);
	buf_sink b = { malloc(s->raw ? s->raw : 1), s->raw };
	if (!b.buf)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading section '%s' of %s", s->name, r->path);
	if ((st = section_stream(r, s, to_buffer, &b))) {
		free(b.buf);
		return st;
	}
	*out = b.buf;
	return HSQ_OK;
}

/* Only computes the CRC of the stored bytes (hsq-inspect --verify). */
static hsq_status section_crc(const snap_reader *r, const snap_section *s, uint32_t *out)
{
	uint8_t *buf = malloc(IO_BLOCK);
	uint32_t crc = 0;
	if (!buf)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", r->path);
	for (uint64_t off = 0; off < s->stored; off += IO_BLOCK) {
		size_t n = s->stored - off < IO_BLOCK ? (size_t)(s->stored - off) : IO_BLOCK;
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

/* Tokens: int32 LE, n_tokens of them, each in [0, n_vocab). */
static hsq_status read_tokens(snap_reader *r, uint32_t n_vocab, hsq_token **out)
{
	const snap_section *s = find_section(r, "tokens");
	uint8_t *raw = NULL;
	hsq_status st;
	*out = NULL;
	if (!s)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: snapshot has no 'tokens' section; the file is damaged", r->path);
	if (s->raw != (uint64_t)r->meta.n_tokens * 4)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tokens' holds %llu bytes, not the %llu that %u tokens need; the file is damaged",
				r->path, (unsigned long long)s->raw, (unsigned long long)r->meta.n_tokens * 4,
				r->meta.n_tokens);
	if ((st = read_small_section(r, s, s->raw, &raw)))
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

/* ------------------------------------------------------------ inspect */

static void fill_info(const snap_reader *r, hsq_snapshot_info *info)
{
	memset(info, 0, sizeof *info);
	info->version = (uint32_t)r->major << 16 | r->minor;
	info->mode = r->mode;
	info->file_size = r->file_size;
	snprintf(info->architecture, sizeof info->architecture, "%s", r->arch);
	snprintf(info->model_name, sizeof info->model_name, "%s", r->name);
	memcpy(info->model_identity, r->identity, 32);
	info->n_layer = (int)r->meta.n_layer;
	info->n_head_kv = (int)r->meta.n_head_kv;
	info->head_dim = (int)r->meta.head_dim;
	info->n_vocab = (int)r->meta.n_vocab;
	info->n_tokens = (int)r->meta.n_tokens;
	info->kv_bytes_fp16 = (uint64_t)r->meta.n_layer * 2 * r->meta.n_tokens * r->meta.n_head_kv *
			      r->meta.head_dim * 2;
	info->n_sections = (int)r->n_sections;
	int n = (int)(sizeof info->sections / sizeof info->sections[0]);
	for (int i = 0; i < info->n_sections && i < n; i++) {
		const snap_section *s = &r->sections[i];
		hsq_snapshot_section_info *o = &info->sections[i];
		snprintf(o->name, sizeof o->name, "%s", s->name);
		o->offset = s->offset;
		o->size = s->stored;
		o->raw_size = s->raw;
		o->codec = s->codec;
		o->checksum_ok = -1;
	}
}

hsq_status hsq_snapshot_inspect(const char *path, int verify, hsq_snapshot_info *info)
{
	snap_reader r;
	hsq_status st = HSQ_OK;
	if (!info)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_inspect: info is NULL");
	memset(info, 0, sizeof *info);
	if ((st = reader_open(&r, path)))
		return st;
	fill_info(&r, info);
	if (verify) {
		hsq_status bad = HSQ_OK;
		int n = (int)(sizeof info->sections / sizeof info->sections[0]);
		for (uint32_t i = 0; i < r.n_sections; i++) {
			uint32_t crc = 0;
			if ((st = section_crc(&r, &r.sections[i], &crc)))
				goto done;
			if (i < (uint32_t)n)
				info->sections[i].checksum_ok = crc == r.sections[i].crc;
			if (crc != r.sections[i].crc && !bad)
				bad = checksum_error(&r, &r.sections[i], crc);
		}
		st = bad;
	}
done:
	reader_close(&r);
	return st;
}

hsq_status hsq_snapshot_read_tokens(const char *path, hsq_token **tokens, size_t *n)
{
	snap_reader r;
	hsq_status st;
	if (!tokens || !n)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_read_tokens: NULL output");
	*tokens = NULL;
	*n = 0;
	if ((st = reader_open(&r, path)))
		return st;
	if ((st = read_tokens(&r, r.meta.n_vocab, tokens)) == HSQ_OK)
		*n = r.meta.n_tokens;
	reader_close(&r);
	return st;
}

/* --------------------------------------------------------------- load */

typedef struct kv_sink {
	hsq_context *ctx;
	int n_tokens;         /* positions in the snapshot */
	uint64_t plane_bytes; /* n_tokens * width * 4: one layer's K or V */
} kv_sink;

/* kv.full raw layout: for each layer, K then V, each [n_tokens][width]
 * fp32. Copies a decoded range into the caches, split at plane borders. */
static hsq_status to_cache(void *arg, uint64_t raw_off, const uint8_t *data, size_t n)
{
	kv_sink *k = arg;
	if (raw_off % 4 || n % 4)
		return hsq_fail(HSQ_ERR_INTERNAL, "kv decoder produced a misaligned range; please report");
	while (n) {
		uint64_t plane = raw_off / k->plane_bytes, within = raw_off % k->plane_bytes;
		size_t take = k->plane_bytes - within < n ? (size_t)(k->plane_bytes - within) : n;
		/* data is a malloc'ed buffer advanced by multiples of 4. */
		context_kv_write(k->ctx, (int)(plane / 2), (int)(plane % 2), k->n_tokens, within / 4,
				 (const float *)(const void *)data, take / 4);
		data += take;
		raw_off += take;
		n -= take;
	}
	return HSQ_OK;
}

static hsq_status identity_mismatch(const snap_reader *r, const hsq_model_info *mi)
{
	char want[17], have[17];
	hex_prefix(want, r->identity);
	hex_prefix(have, mi->identity);
	return hsq_fail(HSQ_ERR_MODEL_MISMATCH,
			"%s was built by model '%s' (%s, identity %s), not by the given model '%s' (%s, identity %s); pass the model that wrote it with -m, or re-create the snapshot with this model",
			r->path, r->name[0] ? r->name : "unnamed", r->arch, want,
			mi->name && mi->name[0] ? mi->name : "unnamed", mi->architecture ? mi->architecture : "?", have);
}

/* A context for a tiered snapshot: no full cache, the tiers read from
 * their sections (every section's CRC checked as it is read). */
static hsq_status load_tiers(snap_reader *r, const hsq_model *model, const hsq_context_params *params,
			     hsq_context **out)
{
	hsq_status st;
	const hsq_model_info *mi = &model->info;
	hsq_context *ctx = NULL;
	hsq_token *tokens = NULL;
	struct hsq_tiers *t = NULL;
	tier_blob blobs[TIER_N_SECTIONS];
	memset(blobs, 0, sizeof blobs);
	*out = NULL;
	for (int i = 0; i < TIER_N_SECTIONS; i++) {
		const snap_section *s = find_section(r, tier_section_names[i]);
		if (!s && i >= TIER_N_REQUIRED)
			continue; /* router.heads (1.2) or centres (1.3): older files lack them */
		if (!s) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: %s-mode snapshot has no '%s' section; the file is damaged", r->path,
				      hsq_mode_name((hsq_snapshot_mode)r->mode), tier_section_names[i]);
			goto done;
		}
		if ((st = check_encoding(r, s)) || (st = read_small_section(r, s, r->file_size, &blobs[i].data)))
			goto done;
		blobs[i].size = s->raw;
	}
	hsq_snapshot_mode mode;
	hsq_tier_params tp;
	if ((st = tiers_read_config(r->path, blobs[0].data, blobs[0].size, mi->n_layer, mi->n_head_kv, mi->head_dim,
				    &mode, &tp)))
		goto done;
	if (mode != (hsq_snapshot_mode)r->mode) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tiers' says mode %u but the header says %u; the file is damaged",
			      r->path, (unsigned)mode, r->mode);
		goto done;
	}
	if ((st = read_tokens(r, (uint32_t)mi->n_vocab, &tokens)))
		goto done;
	hsq_context_params p = params ? *params : hsq_context_default_params();
	if ((st = context_new(model, &p, 0, &ctx)))
		goto done;
	if ((uint32_t)ctx->n_ctx < r->meta.n_tokens) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (-c %u or more)",
			      r->path, r->meta.n_tokens, ctx->n_ctx, r->meta.n_tokens);
		goto done;
	}
	/* tiers_new re-checks the parameters: damaged values are refused here */
	if ((st = tiers_new(model, mode, &tp, ctx->n_ctx, pool_threads(ctx->backend->ops->host_pool(ctx->backend)), &t)) ||
	    (st = tiers_rope_reserve(t, ctx->n_ctx)) ||
	    (st = tiers_deserialize(t, r->path, blobs, (int)r->meta.n_tokens)) ||
	    (st = tiers_pq_fit_all(t, ctx->backend->ops->host_pool(ctx->backend)))) /* the router codes, derived from L3 */
		goto done;
	ctx->tiers = t;
	t = NULL;
	if (r->meta.n_tokens)
		memcpy(ctx->tokens, tokens, (size_t)r->meta.n_tokens * sizeof *tokens);
	ctx->n_past = (int)r->meta.n_tokens;
	ctx->obs_from = ctx->n_past;
	*out = ctx;
	ctx = NULL;
done:
	if (st && st != HSQ_ERR_NOMEM && st != HSQ_ERR_IO && st != HSQ_ERR_CHECKSUM && st != HSQ_ERR_TRUNCATED &&
	    st != HSQ_ERR_CONTEXT_FULL && st != HSQ_ERR_UNSUPPORTED)
	{
		if (st == HSQ_ERR_INVALID_ARG) { /* a parameter tiers_new refused came from the file */
			char why[256];
			snprintf(why, sizeof why, "%s", hsq_last_error());
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: %s; the file is damaged", r->path, why);
		}
	}
	tiers_free(t);
	hsq_context_free(ctx);
	free(tokens);
	tier_blobs_free(blobs);
	return st;
}

void hsq_tier_map_free(hsq_tier_map *map)
{
	if (!map)
		return;
	if (map->heads)
		for (int i = 0; i < map->n_layer * map->n_head_kv; i++) {
			free(map->heads[i].l1_pos);
			free(map->heads[i].g_first);
			free(map->heads[i].g_last);
			free(map->heads[i].g_class);
		}
	free(map->heads);
	free(map);
}

hsq_status hsq_snapshot_read_tiers(const char *path, hsq_tier_map **out)
{
	snap_reader r;
	hsq_status st;
	hsq_tier_map *map = NULL;
	tier_blob b[TIER_N_SECTIONS];
	uint8_t *frame = NULL;
	ZSTD_DCtx *dctx = NULL;
	memset(b, 0, sizeof b);
	*out = NULL;
	if ((st = reader_open(&r, path)))
		return st;
	if (r.mode < HSQ_MODE_QUANT || r.mode > HSQ_MODE_SNAPKV) {
		st = hsq_fail(HSQ_ERR_INVALID_ARG, "%s is a %s snapshot: it has no tiers", path,
			      hsq_mode_name((hsq_snapshot_mode)r.mode));
		goto done;
	}
	for (int i = 0; i < TIER_N_SECTIONS; i++) {
		const snap_section *s = find_section(&r, tier_section_names[i]);
		if (!s && i >= TIER_N_REQUIRED)
			continue; /* router.heads (1.2) or centres (1.3): older files lack them */
		if (!s) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: no '%s' section; the file is damaged", path, tier_section_names[i]);
			goto done;
		}
		if ((st = check_encoding(&r, s)) || (st = read_small_section(&r, s, r.file_size, &b[i].data)))
			goto done;
		b[i].size = s->raw;
	}
	const snap_meta *m = &r.meta;
	if (!(map = calloc(1, sizeof *map)) || !(map->heads = calloc((size_t)m->n_layer * m->n_head_kv, sizeof *map->heads)) ||
	    !(dctx = ZSTD_createDCtx())) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto done;
	}
	map->n_layer = (int)m->n_layer;
	map->n_head_kv = (int)m->n_head_kv;
	map->head_dim = (int)m->head_dim;
	map->n_tokens = (int)m->n_tokens;
	if ((st = tiers_read_config(path, b[0].data, b[0].size, map->n_layer, map->n_head_kv, map->head_dim, &map->mode,
				    &map->params)))
		goto done;
	copy_printable(map->reader, sizeof map->reader, b[0].data + TC_READER_NAME, 32);
	copy_printable(map->compressor, sizeof map->compressor, b[0].data + TC_COMPRESSOR_NAME, 32);
	size_t c4 = 2 * (size_t)get_u32(b[0].data + TC_CODE4), c3 = 2 * (size_t)get_u32(b[0].data + TC_CODE3);
	int n_heads = map->n_layer * map->n_head_kv, n = map->n_tokens;
	if (c4 > 4096 || c3 > 4096) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: code sizes %zu/%zu in section 'tiers' are implausible; the file is damaged",
			      path, c4 / 2, c3 / 2);
		goto done;
	}
	if ((st = tier_tables_check(path, b, n_heads)))
		goto done;
	for (int i = 0; i < n_heads; i++) {
		hsq_tier_head_info *h = &map->heads[i];
		tier_entry e;
		if ((st = tier_entry_read(path, b, i, map->n_head_kv, n, c4, c3, &e)))
			goto done;
		h->layer = i / map->n_head_kv;
		h->head = i % map->n_head_kv;
		h->window = e.window;
		h->n_l1 = (int)e.n_l1;
		h->n_group = (int)e.n_group;
		h->n_l3 = (int)e.n_l3;
		h->l1_bytes = tier_l1_bytes(e.n_l1, c4) + (b[TIER_S_CENTRES].size ? tier_centre_bytes(map->head_dim) : 0);
		h->l2_bytes = tier_l2_bytes(e.n_group, e.n_l3, c3, map->head_dim); /* router codes: derived from L3 at load, held in L2 */
		h->l3_bytes = tier_l3_bytes(e.n_l3, c4);
		h->l3_stored = e.l3_stored;
		h->l1_pos = malloc(e.n_l1 * 4 + 4);
		h->g_first = malloc(e.n_group * 4 + 4);
		h->g_last = malloc(e.n_group * 4 + 4);
		h->g_class = malloc(e.n_group + 1);
		free(frame);
		frame = malloc(e.l3_raw + 1);
		if (!h->l1_pos || !h->g_first || !h->g_last || !h->g_class || !frame) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
			goto done;
		}
		for (uint64_t k = 0; k < e.n_l1; k++)
			h->l1_pos[k] = (int32_t)get_u32(e.l1_pos + 4 * k);
		if (!e.n_l3)
			continue;
		size_t got = ZSTD_decompressDCtx(dctx, frame, e.l3_raw, b[4].data + e.l3_off, e.l3_stored);
		if (ZSTD_isError(got) || got != e.l3_raw || crc32c_update(0, b[4].data + e.l3_off, e.l3_stored) != e.l3_crc) {
			st = hsq_fail(HSQ_ERR_CHECKSUM, "%s: archive frame of layer %d head %d is damaged; re-create the snapshot with hsq-prefill",
				      path, h->layer, h->head);
			goto done;
		}
		for (uint64_t g = 0; g < e.n_group; g++) {
			uint32_t a = get_u32(e.g_start + 4 * g), z = get_u32(e.g_start + 4 * (g + 1));
			if (z <= a || z > e.n_l3) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: group %llu of layer %d head %d is malformed; the file is damaged",
					      path, (unsigned long long)g, h->layer, h->head);
				goto done;
			}
			h->g_first[g] = (int32_t)get_u32(frame + 4 * (size_t)a);
			h->g_last[g] = (int32_t)get_u32(frame + 4 * (size_t)(z - 1));
			h->g_class[g] = e.g_class[g];
			h->n_medium += e.g_class[g] == HSQ_GROUP_MEDIUM;
		}
	}
	for (int i = 0; i < n_heads && b[TIER_S_RESIDUAL].size; i++) { /* residual key codes, in L1 and L3 */
		hsq_tier_head_info *h = &map->heads[i];
		const uint8_t *codes;
		if ((st = tier_residual_entry(path, &b[TIER_S_RESIDUAL], map->n_layer, map->n_head_kv, c4 / 2, i, h->n_l1,
					      h->n_l3, &codes)))
			goto done;
		h->residual = codes != NULL;
		h->l1_bytes += codes ? (uint64_t)h->n_l1 * (c4 / 2) : 0;
		h->l3_bytes += codes ? (uint64_t)h->n_l3 * (c4 / 2) : 0;
	}
	int n_global = 0;
	float *ind = malloc((size_t)n_heads * sizeof *ind);
	uint8_t *global = malloc((size_t)n_heads), *picked = malloc((size_t)n_heads);
	if (!ind || !global || !picked) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
	} else if (!(st = tier_heads_read(path, &b[TIER_S_HEADS], map->n_layer, map->n_head_kv, ind))) {
		for (int i = 0; i < n_heads; i++) {
			map->heads[i].induction = ind[i];
			global[i] = !map->heads[i].window;
			n_global += global[i];
		}
		/* the heads a decode with the default count would pick */
		int want = map->mode == HSQ_MODE_HSQ ? hsq_default_retrieval_heads(n_global) : 0;
		tiers_pick_top(ind, global, n_heads, want, picked);
		for (int i = 0; i < n_heads; i++)
			map->heads[i].retrieval = picked[i];
	}
	free(ind);
	free(global);
	free(picked);
	if (st)
		goto done;
	for (int l = 0; l < map->n_layer; l++)
		map->fp16_kv_bytes +=
			tier_fp16_layer_bytes(n, map->heads[l * map->n_head_kv].window, map->n_head_kv, map->head_dim);
	*out = map;
	map = NULL;
done:
	hsq_tier_map_free(map);
	tier_blobs_free(b);
	free(frame);
	ZSTD_freeDCtx(dctx);
	reader_close(&r);
	return st;
}

hsq_status hsq_snapshot_load(const hsq_model *model, const char *path, const hsq_context_params *params,
			     hsq_context **out)
{
	snap_reader r;
	hsq_status st = HSQ_OK;
	hsq_context *ctx = NULL;
	hsq_token *tokens = NULL;
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_load: out is NULL");
	*out = NULL;
	if (!model)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_load: model is NULL");
	if ((st = reader_open(&r, path)))
		return st;
	const hsq_model_info *mi = &model->info;
	const snap_meta *m = &r.meta;

	if (r.mode < HSQ_MODE_FULL || r.mode > HSQ_MODE_SNAPKV) {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: snapshot mode %u is not supported by this hsq %s; upgrade hsq",
			      path, r.mode, hsq_version());
		goto fail;
	}
	if (memcmp(r.identity, mi->identity, 32)) {
		st = identity_mismatch(&r, mi);
		goto fail;
	}
	if (m->n_layer != (uint32_t)mi->n_layer || m->n_head_kv != (uint32_t)mi->n_head_kv ||
	    m->head_dim != (uint32_t)mi->head_dim || m->n_vocab != (uint32_t)mi->n_vocab) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: shape (%u layers, %u kv heads x %u, vocabulary %u) disagrees with its own model (%d, %d x %d, %d); the file is damaged",
			      path, m->n_layer, m->n_head_kv, m->head_dim, m->n_vocab, mi->n_layer, mi->n_head_kv,
			      mi->head_dim, mi->n_vocab);
		goto fail;
	}
	int tiered = r.mode != HSQ_MODE_FULL;
	if (m->kv_dtype != (tiered ? SNAP_DTYPE_TQ : SNAP_DTYPE_F32) || m->k_rope != (tiered ? 0u : 1u) ||
	    m->pos_base != 0) {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED,
			      "%s: kv cache encoding (dtype %u, k_rope %u, pos_base %u) is not supported by this hsq %s; upgrade hsq",
			      path, m->kv_dtype, m->k_rope, m->pos_base, hsq_version());
		goto fail;
	}
	int want_ctx = params && params->n_ctx > 0 ? params->n_ctx : mi->n_ctx_train;
	if (want_ctx > 0 && m->n_tokens > (uint32_t)want_ctx) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (-c %u or more)",
			      path, m->n_tokens, want_ctx, m->n_tokens);
		goto fail;
	}

	if (tiered) {
		st = load_tiers(&r, model, params, &ctx);
		goto fail; /* ctx is NULL on failure */
	}
	const snap_section *kv = find_section(&r, "kv.full");
	if (!kv) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: full-mode snapshot has no 'kv.full' section; the file is damaged", path);
		goto fail;
	}
	uint64_t width = (uint64_t)m->n_head_kv * m->head_dim;
	uint64_t plane = (uint64_t)m->n_tokens * width * 4;
	if (kv->raw != plane * 2 * m->n_layer || (kv->chunk && kv->chunk % 4)) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: section 'kv.full' holds %llu bytes, not the %llu that %u tokens need; the file is damaged",
			      path, (unsigned long long)kv->raw, (unsigned long long)(plane * 2 * m->n_layer), m->n_tokens);
		goto fail;
	}
	if ((st = read_tokens(&r, (uint32_t)mi->n_vocab, &tokens)))
		goto fail;

	hsq_context_params p = params ? *params : hsq_context_default_params();
	if ((st = hsq_context_new(model, &p, &ctx)))
		goto fail;
	if ((uint32_t)ctx->n_ctx < m->n_tokens) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (-c %u or more)",
			      path, m->n_tokens, ctx->n_ctx, m->n_tokens);
		goto fail;
	}
	/* With no tokens the section is empty and the sink is never called. */
	kv_sink ks = { ctx, (int)m->n_tokens, plane ? plane : 1 };
	if ((st = section_stream(&r, kv, to_cache, &ks)))
		goto fail;
	if (m->n_tokens)
		memcpy(ctx->tokens, tokens, (size_t)m->n_tokens * sizeof *tokens);
	ctx->n_past = (int)m->n_tokens;
	ctx->obs_from = ctx->n_past; /* no queries were evaluated here */
fail:
	if (!st) {
		*out = ctx;
		ctx = NULL;
	}
	hsq_context_free(ctx);
	free(tokens);
	reader_close(&r);
	return st;
}

/* --------------------------------------------------------------- save */

typedef struct snap_writer {
	const char *path;  /* destination */
	char *tmp_path;    /* temporary file next to it */
	char *dir;         /* its directory, for fsync */
	int fd;
} snap_writer;

static hsq_status write_at(const snap_writer *w, uint64_t off, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t put = pwrite(w->fd, p, n, (off_t)off);
		if (put < 0) {
			if (errno == EINTR)
				continue;
			return hsq_fail(HSQ_ERR_IO, "cannot write snapshot %s: %s%s", w->path, strerror(errno),
					errno == ENOSPC || errno == EDQUOT ? " (free some space or write elsewhere with -o)"
									   : "");
		}
		p += put;
		off += (uint64_t)put;
		n -= (size_t)put;
	}
	return HSQ_OK;
}

/* Creates ".NAME.XXXXXXXX.tmp" next to the destination with O_EXCL and mode
 * 0666 (the umask applies, as for any new file); mkstemp would give 0600. */
static hsq_status writer_open(snap_writer *w, const char *path)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
	w->path = path;
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "snapshot path '%s' names a directory; give a file name such as out.hsq",
				path);
	size_t dir_len = slash ? (size_t)(slash - path) : 0;
	if (slash && dir_len == 0)
		dir_len = 1; /* "/name" */
	w->dir = slash ? strndup(path, dir_len) : strdup(".");
	size_t prefix = slash ? (size_t)(slash - path) + 1 : 0; /* "dir/" */
	size_t cap = prefix + 200 + 32;
	w->tmp_path = malloc(cap);
	if (!w->dir || !w->tmp_path)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory writing %s", path);
	static _Atomic unsigned counter;
	for (int attempt = 0; attempt < 100; attempt++) {
		uint64_t rnd = 0;
		if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			rnd = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 20 ^ counter++;
		}
		/* ".NAME.XXXXXXXX.tmp", NAME cut to 200 bytes to stay under NAME_MAX. */
		snprintf(w->tmp_path, cap, "%.*s.%.200s.%08x.tmp", (int)prefix, path, base, (unsigned)rnd);
		w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (w->fd >= 0)
			return HSQ_OK;
		if (errno != EEXIST)
			break;
	}
	int e = errno;
	hsq_status st = hsq_fail(HSQ_ERR_IO, "cannot create snapshot %s: temporary file in %s: %s%s", path, w->dir,
				 strerror(e),
				 e == ENOENT	? " (create the directory first)"
				 : e == EACCES || e == EPERM || e == EROFS ? " (choose a writable directory with -o)"
									    : "");
	free(w->tmp_path);
	w->tmp_path = NULL;
	return st;
}

/* Removes the temporary file unless it was renamed into place. */
static void writer_abort(snap_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_path)
		unlink(w->tmp_path);
	free(w->tmp_path);
	free(w->dir);
	memset(w, 0, sizeof *w);
	w->fd = -1;
}

static hsq_status writer_commit(snap_writer *w)
{
	hsq_status st = HSQ_OK;
	if (fsync(w->fd) < 0)
		return hsq_fail(HSQ_ERR_IO, "cannot write snapshot %s: fsync: %s", w->path, strerror(errno));
	int fd = w->fd;
	w->fd = -1;
	if (close(fd) < 0)
		return hsq_fail(HSQ_ERR_IO, "cannot write snapshot %s: close: %s", w->path, strerror(errno));
	if (rename(w->tmp_path, w->path) < 0)
		return hsq_fail(HSQ_ERR_IO, "cannot write snapshot %s: rename from %s: %s%s", w->path, w->tmp_path,
				strerror(errno), errno == EISDIR ? " (the destination is a directory)" : "");
	free(w->tmp_path);
	w->tmp_path = NULL; /* renamed: nothing to clean up any more */
	/* Make the rename itself durable. Some file systems cannot fsync a
	 * directory (EINVAL); the file is complete either way. */
	int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS)
			st = hsq_fail(HSQ_ERR_IO, "snapshot %s was written but its directory could not be synced: %s",
				      w->path, strerror(errno));
		close(dfd);
	}
	return st;
}

typedef struct out_section {
	const char *name;
	uint64_t offset, stored, raw, chunk;
	uint32_t codec, filter, flags, crc;
} out_section;

static void put_entry(uint8_t *e, const out_section *s)
{
	memset(e, 0, SNAP_ENTRY_SIZE);
	memcpy(e + SNAP_E_NAME, s->name, strlen(s->name));
	put_u64(e + SNAP_E_OFFSET, s->offset);
	put_u64(e + SNAP_E_STORED, s->stored);
	put_u64(e + SNAP_E_RAW, s->raw);
	put_u64(e + SNAP_E_CHUNK, s->chunk);
	put_u16(e + SNAP_E_CODEC, (uint16_t)s->codec);
	e[SNAP_E_FILTER] = (uint8_t)s->filter;
	e[SNAP_E_ALIGN_LOG2] = SNAP_ALIGN_LOG2;
	put_u32(e + SNAP_E_FLAGS, s->flags);
	put_u32(e + SNAP_E_CRC, s->crc);
}

/* Copies a string into a NUL-padded field, truncating at a UTF-8 character
 * boundary so it always stays NUL-terminated and valid. */
static void put_str(uint8_t *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n > cap - 1) {
		n = cap - 1;
		while (n > 0 && ((uint8_t)src[n] & 0xC0) == 0x80)
			n--;
	}
	memset(dst, 0, cap);
	if (n)
		memcpy(dst, src, n);
}

/* The filter the writer applies to kv.full: shuffling the four bytes of the
 * fp32 values into planes lets zstd compress the sign/exponent bytes; see
 * hsq-snapshot(5). */
#ifndef KV_FILTER
#define KV_FILTER SNAP_FILTER_SHUFFLE4
#endif

hsq_status hsq_snapshot_save(const hsq_context *ctx, const char *path, hsq_snapshot_mode mode, int zstd_level)
{
	hsq_status st = HSQ_OK;
	snap_writer w = { .fd = -1 };
	ZSTD_CCtx *cctx = NULL;
	float *host = NULL;
	uint8_t *shuf = NULL, *zbuf = NULL, *table = NULL, *small = NULL;

	if (!ctx || !path || !*path)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_save: %s is missing", !ctx ? "the context" : "the path");
	if (mode < HSQ_MODE_FULL || mode > HSQ_MODE_SNAPKV)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "snapshot mode %d is unknown; use full, quant, hsq, streaming or snapkv",
				(int)mode);
	if (mode != hsq_context_mode(ctx))
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"cannot save a %s context as a %s snapshot; compress it first (hsq_context_compress)",
				hsq_mode_name(hsq_context_mode(ctx)), hsq_mode_name(mode));
	if (mode == HSQ_MODE_FULL && !ctx->has_full_kv)
		return hsq_fail(HSQ_ERR_INTERNAL, "context has no full cache to save; please report");
	if (ctx->tiers) {
		for (int l = 0; l < ctx->tiers->n_layer; l++)
			if (ctx->tiers->layers[l].n_tail)
				return hsq_fail(HSQ_ERR_INVALID_ARG,
						"cannot save a %s context after tokens were appended to it (its decode tail is not stored); save right after compressing",
						hsq_mode_name(mode));
	}
	if (zstd_level == 0)
		zstd_level = 3;
	if (zstd_level < 1 || zstd_level > 19)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "zstd level %d is out of range; use 1..19", zstd_level);
	const hsq_model_info *mi = &ctx->model->info;
	if (ctx->n_past < 0 || ctx->n_past > ctx->n_ctx)
		return hsq_fail(HSQ_ERR_INTERNAL, "context holds %d of %d positions; please report", ctx->n_past, ctx->n_ctx);
	uint32_t n_tokens = (uint32_t)ctx->n_past;
	if (n_tokens > SNAP_MAX_TOKENS)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cannot save %u tokens to %s: snapshots hold at most %d", n_tokens, path,
				SNAP_MAX_TOKENS);
	uint64_t width = context_kv_width(ctx);
	size_t plane = (size_t)n_tokens * width * sizeof(float);

	/* Layout: header, table, meta, tokens, then kv.full (full mode) or the
	 * tier sections, each 64-byte aligned. */
	enum { S_META, S_TOKENS, S_KV, MAX_SECTIONS = 2 + TIER_N_SECTIONS };
	tier_blob blobs[TIER_N_SECTIONS];
	memset(blobs, 0, sizeof blobs);
	out_section sec[MAX_SECTIONS] = {
		[S_META] = { .name = "meta", .raw = SNAP_META_SIZE, .flags = SNAP_SECTION_REQUIRED },
		[S_TOKENS] = { .name = "tokens", .raw = (uint64_t)n_tokens * 4, .flags = SNAP_SECTION_REQUIRED },
		[S_KV] = { .name = "kv.full", .raw = (uint64_t)plane * 2 * (uint64_t)mi->n_layer,
			   .flags = SNAP_SECTION_REQUIRED },
	};
	if (ctx->tiers && (st = tiers_serialize(ctx->tiers, zstd_level, blobs)))
		return st;
	int n_tier_sections = 0; /* the required ones, and the optional ones in use */
	for (int i = 0; ctx->tiers && i < TIER_N_SECTIONS; i++)
		n_tier_sections += i < TIER_N_REQUIRED || blobs[i].size > 0;
	int n_sections = mode == HSQ_MODE_FULL ? 3 : 2 + n_tier_sections;
	uint64_t pos = align_up(SNAP_HEADER_SIZE + (uint64_t)n_sections * SNAP_ENTRY_SIZE, SNAP_ALIGN_LOG2);

	if ((st = writer_open(&w, path)))
		goto fail;

	/* meta */
	size_t small_cap = SNAP_META_SIZE > sec[S_TOKENS].raw ? SNAP_META_SIZE : (size_t)sec[S_TOKENS].raw;
	if (!(small = calloc(1, small_cap))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory writing %s", path);
		goto fail;
	}
	put_u32(small + SNAP_M_N_LAYER, (uint32_t)mi->n_layer);
	put_u32(small + SNAP_M_N_HEAD_KV, (uint32_t)mi->n_head_kv);
	put_u32(small + SNAP_M_HEAD_DIM, (uint32_t)mi->head_dim);
	put_u32(small + SNAP_M_N_TOKENS, n_tokens);
	put_u32(small + SNAP_M_MODE, (uint32_t)mode);
	put_u32(small + SNAP_M_KV_DTYPE, mode == HSQ_MODE_FULL ? SNAP_DTYPE_F32 : SNAP_DTYPE_TQ);
	put_u32(small + SNAP_M_N_VOCAB, (uint32_t)mi->n_vocab);
	put_u32(small + SNAP_M_N_EMBD, (uint32_t)mi->n_embd);
	put_u32(small + SNAP_M_N_HEAD, (uint32_t)mi->n_head);
	put_u32(small + SNAP_M_N_CTX_TRAIN, (uint32_t)mi->n_ctx_train);
	uint32_t bits;
	memcpy(&bits, &mi->rope_freq_base, 4);
	put_u32(small + SNAP_M_ROPE_BASE, bits);
	put_u32(small + SNAP_M_K_ROPE, mode == HSQ_MODE_FULL ? 1 : 0); /* tiers keep K before RoPE */
	put_u32(small + SNAP_M_POS_BASE, 0);
	char writer[SNAP_WRITER_LEN];
	snprintf(writer, sizeof writer, "hsq %s", hsq_version());
	put_str(small + SNAP_M_WRITER, SNAP_WRITER_LEN, writer);
	sec[S_META].offset = pos;
	sec[S_META].stored = SNAP_META_SIZE;
	sec[S_META].crc = crc32c_update(0, small, SNAP_META_SIZE);
	if ((st = write_at(&w, pos, small, SNAP_META_SIZE)))
		goto fail;
	pos = align_up(pos + SNAP_META_SIZE, SNAP_ALIGN_LOG2);

	/* tokens: small, stored raw so a reader can take them without zstd. */
	memset(small, 0, small_cap);
	for (uint32_t i = 0; i < n_tokens; i++)
		put_u32(small + 4 * (size_t)i, (uint32_t)ctx->tokens[i]);
	sec[S_TOKENS].offset = pos;
	sec[S_TOKENS].stored = sec[S_TOKENS].raw;
	sec[S_TOKENS].crc = crc32c_update(0, small, (size_t)sec[S_TOKENS].raw);
	if ((st = write_at(&w, pos, small, (size_t)sec[S_TOKENS].raw)))
		goto fail;
	pos = align_up(pos + sec[S_TOKENS].raw, SNAP_ALIGN_LOG2);

	uint64_t file_size;
	if (mode != HSQ_MODE_FULL) {
		/* tier sections, raw (l3 holds its own zstd frames) */
		for (int i = 0, k = 2; i < TIER_N_SECTIONS; i++) {
			if (i >= TIER_N_REQUIRED && !blobs[i].size)
				continue;
			out_section *o = &sec[k++];
			o->name = tier_section_names[i];
			o->flags = tier_section_required_bit(i) ? SNAP_SECTION_REQUIRED : 0;
			o->codec = SNAP_CODEC_RAW;
			o->offset = pos;
			o->raw = o->stored = blobs[i].size;
			o->crc = crc32c_update(0, blobs[i].data, (size_t)blobs[i].size);
			if ((st = write_at(&w, pos, blobs[i].data, (size_t)blobs[i].size)))
				goto fail;
			pos = align_up(pos + blobs[i].size, SNAP_ALIGN_LOG2);
		}
		file_size = sec[n_sections - 1].offset + sec[n_sections - 1].stored;
		goto header;
	}

	/* kv.full: one zstd frame per layer and K/V (so one layer can be read
	 * alone), streamed so memory stays at about one layer, then the
	 * chunk table. */
	out_section *kv = &sec[S_KV];
	kv->offset = pos;
	if (plane) {
		size_t n_chunks = 2 * (size_t)mi->n_layer;
		size_t bound = ZSTD_compressBound(plane);
		kv->codec = SNAP_CODEC_ZSTD;
		kv->filter = KV_FILTER;
		kv->chunk = plane;
		host = malloc(plane);
		shuf = KV_FILTER != SNAP_FILTER_NONE ? malloc(plane) : NULL;
		zbuf = malloc(bound);
		table = malloc((n_chunks + 1) * 8);
		cctx = ZSTD_createCCtx();
		if (!host || (KV_FILTER != SNAP_FILTER_NONE && !shuf) || !zbuf || !table || !cctx) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory writing %s (one layer is %zu bytes)", path, plane);
			goto fail;
		}
		size_t zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, zstd_level);
		if (!ZSTD_isError(zr))
			zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
		if (ZSTD_isError(zr)) {
			st = hsq_fail(HSQ_ERR_INTERNAL, "zstd refused its parameters (%s); please report",
				      ZSTD_getErrorName(zr));
			goto fail;
		}
		uint64_t rel = 0;
		uint32_t crc = 0;
		for (size_t c = 0; c < n_chunks; c++) {
			/* ring (sliding-window) layers give zeros for rows they no longer hold */
			context_kv_read(ctx, (int)(c / 2), (int)(c % 2), 0, (int)n_tokens, host);
			const void *in = host;
			if (KV_FILTER == SNAP_FILTER_SHUFFLE4) {
				shuffle4(shuf, (const uint8_t *)host, plane);
				in = shuf;
			}
			size_t z = ZSTD_compress2(cctx, zbuf, bound, in, plane);
			if (ZSTD_isError(z)) {
				st = hsq_fail(HSQ_ERR_INTERNAL, "zstd failed compressing layer %zu of %s (%s); please report",
					      c / 2, path, ZSTD_getErrorName(z));
				goto fail;
			}
			put_u64(table + c * 8, rel);
			crc = crc32c_update(crc, zbuf, z);
			if ((st = write_at(&w, pos + rel, zbuf, z)))
				goto fail;
			rel += z;
		}
		put_u64(table + n_chunks * 8, rel);
		crc = crc32c_update(crc, table, (n_chunks + 1) * 8);
		if ((st = write_at(&w, pos + rel, table, (n_chunks + 1) * 8)))
			goto fail;
		kv->stored = rel + (n_chunks + 1) * 8;
		kv->crc = crc;
	} else {
		/* No tokens: an empty raw section. */
		kv->codec = SNAP_CODEC_RAW;
		kv->stored = 0;
		kv->crc = 0;
	}
	/* Exactly the size the header declares (with no tokens, the empty
	 * kv.full section sits at an aligned offset past the last byte). */
	file_size = kv->offset + kv->stored;
header:
	if (ftruncate(w.fd, (off_t)file_size) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "cannot write snapshot %s: %s", path, strerror(errno));
		goto fail;
	}

	/* Header and table last, so an interrupted write never has a magic. */
	uint8_t head[SNAP_HEADER_SIZE + MAX_SECTIONS * SNAP_ENTRY_SIZE];
	size_t head_size = SNAP_HEADER_SIZE + (size_t)n_sections * SNAP_ENTRY_SIZE;
	memset(head, 0, sizeof head);
	memcpy(head + SNAP_H_MAGIC, SNAP_MAGIC, SNAP_MAGIC_LEN);
	put_u16(head + SNAP_H_VERSION_MAJOR, SNAP_VERSION_MAJOR);
	put_u16(head + SNAP_H_VERSION_MINOR, SNAP_VERSION_MINOR);
	put_u32(head + SNAP_H_HEADER_SIZE, SNAP_HEADER_SIZE);
	put_u64(head + SNAP_H_FILE_SIZE, file_size);
	put_u32(head + SNAP_H_FLAGS, 0);
	put_u32(head + SNAP_H_MODE, (uint32_t)mode);
	put_u64(head + SNAP_H_TABLE_OFFSET, SNAP_HEADER_SIZE);
	put_u32(head + SNAP_H_SECTION_COUNT, (uint32_t)n_sections);
	put_u32(head + SNAP_H_ENTRY_SIZE, SNAP_ENTRY_SIZE);
	memcpy(head + SNAP_H_IDENTITY, mi->identity, 32);
	put_str(head + SNAP_H_ARCH, SNAP_ARCH_LEN, mi->architecture);
	put_str(head + SNAP_H_NAME, SNAP_NAME_LEN, mi->name);
	for (int i = 0; i < n_sections; i++)
		put_entry(head + SNAP_HEADER_SIZE + (size_t)i * SNAP_ENTRY_SIZE, &sec[i]);
	put_u32(head + SNAP_H_CRC, crc32c_update(0, head, head_size));
	if ((st = write_at(&w, 0, head, head_size)) || (st = writer_commit(&w)))
		goto fail;
fail:
	writer_abort(&w); /* after a commit only frees; otherwise removes the temporary */
	ZSTD_freeCCtx(cctx);
	free(host);
	free(shuf);
	free(zbuf);
	free(table);
	free(small);
	tier_blobs_free(blobs);
	return st;
}

uint32_t hsq_snapshot_format(void) { return (uint32_t)SNAP_VERSION_MAJOR << 16 | SNAP_VERSION_MINOR; }

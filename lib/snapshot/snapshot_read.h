/* snapshot_read.h - the snapshot reader that loading (snapshot_load.c) and
 * inspection (snapshot_inspect.c) share (internal): a file opened and
 * validated by snap_reader_open, and its sections read, streamed and
 * checked. snapshot_read.c treats the file as hostile input. */
#ifndef HSQ_SNAPSHOT_READ_H
#define HSQ_SNAPSHOT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "hsq.h"
#include "snapshot/snapshot_format.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lib/snapshot copies fp32 and int32 arrays as little-endian bytes: port it before building on a big-endian host"
#endif

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

/* An open snapshot: what its header, section table and meta section say. */
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

/* Receives decoded bytes in order: raw_off is their position in the
 * section's raw content. n is a multiple of 4 whenever raw_off, the
 * section's raw size and its chunk size are. */
typedef hsq_status (*snap_sink_fn)(void *arg, uint64_t raw_off, const uint8_t *data, size_t n);

/* Opens a snapshot: header, section table (CRC-checked), and the meta
 * section. Leaves r->fd open for reading sections. */
hsq_status snap_reader_open(snap_reader *r, const char *path);
/* Closes the file and frees the section table (snap_reader_open does so
 * itself when it fails). */
void snap_reader_close(snap_reader *r);

/* The section of that name, or NULL when the file has none. */
const snap_section *snap_find_section(const snap_reader *r, const char *name);
/* Checks the encoding fields of a section the caller is about to decode. */
hsq_status snap_check_encoding(const snap_reader *r, const snap_section *s);
/* Fails with HSQ_ERR_CHECKSUM: section s stores bytes whose CRC32C is got. */
hsq_status snap_checksum_error(const snap_reader *r, const snap_section *s, uint32_t got);

/* Decodes a section and streams its raw content to sink, checking the
 * CRC32C of the stored bytes. The sink sees data before the last stored byte
 * is checked (zstd frames carry their own content checksum, checked before
 * their data is passed on), so a caller must discard what it built when
 * this fails. Memory: one chunk (or IO_BLOCK) of stored and decoded bytes. */
hsq_status snap_section_stream(const snap_reader *r, const snap_section *s, snap_sink_fn sink, void *arg);
/* Reads a whole section into a malloc'ed buffer of s->raw bytes, refusing
 * sections larger than max_raw. For raw sections the CRC is checked before
 * the caller sees any byte. */
hsq_status snap_read_small_section(snap_reader *r, const snap_section *s, uint64_t max_raw, uint8_t **out);
/* Only computes the CRC of the stored bytes (hsq-inspect --verify). */
hsq_status snap_section_crc(const snap_reader *r, const snap_section *s, uint32_t *out);
/* Tokens: int32 LE, n_tokens of them, each in [0, n_vocab). */
hsq_status snap_read_tokens(snap_reader *r, uint32_t n_vocab, hsq_token **out);

/* Copies a NUL-padded string field out of the file, replacing control
 * bytes so a hostile name cannot drive the terminal of whoever prints it. */
void snap_copy_printable(char *dst, size_t cap, const uint8_t *src, size_t len);

#endif

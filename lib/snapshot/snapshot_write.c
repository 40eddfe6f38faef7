/* snapshot_write.c - save a context as an hsq snapshot file
 * (hsq_snapshot_save); the format is specified in man/hsq-snapshot.5 and
 * named in snapshot_format.h.
 *
 * Writers never leave a partial file at the destination: they write a
 * temporary file in the same directory, fsync it, rename it over the
 * destination and fsync the directory.
 *
 * The temporary file, ".NAME.XXXXXXXX.tmp" (XXXXXXXX: 8 lowercase hex
 * digits), is held open from its creation until it is renamed, and locked
 * (flock, exclusive) all that time: a tool can tell a temporary file that
 * a live process is writing (locked) from one a killed run left behind
 * (unlocked, so removable), and find its own among the files it has open
 * (hsq-prefill's cmd/common/cleanup.c does both). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "common/atomic_write.h"
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
#error "lib/snapshot copies fp32 and int32 arrays as little-endian bytes: port it before building on a big-endian host"
#endif

static uint64_t align_up(uint64_t v, unsigned log2)
{
	uint64_t a = (uint64_t)1 << log2;
	return (v + a - 1) & ~(a - 1);
}

/* Applies SNAP_FILTER_SHUFFLE4 on n bytes (n % 4 == 0); unshuffle4 in
 * snapshot_read.c reverses it. */
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
	atomic_writer w = { .fd = -1 };
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

	if ((st = atomic_writer_open(&w, path, "snapshot", "out.hsq")))
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
	if ((st = atomic_writer_write_at(&w, pos, small, SNAP_META_SIZE)))
		goto fail;
	pos = align_up(pos + SNAP_META_SIZE, SNAP_ALIGN_LOG2);

	/* tokens: small, stored raw so a reader can take them without zstd. */
	memset(small, 0, small_cap);
	for (uint32_t i = 0; i < n_tokens; i++)
		put_u32(small + 4 * (size_t)i, (uint32_t)ctx->tokens[i]);
	sec[S_TOKENS].offset = pos;
	sec[S_TOKENS].stored = sec[S_TOKENS].raw;
	sec[S_TOKENS].crc = crc32c_update(0, small, (size_t)sec[S_TOKENS].raw);
	if ((st = atomic_writer_write_at(&w, pos, small, (size_t)sec[S_TOKENS].raw)))
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
			if ((st = atomic_writer_write_at(&w, pos, blobs[i].data, (size_t)blobs[i].size)))
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
			if ((st = atomic_writer_write_at(&w, pos + rel, zbuf, z)))
				goto fail;
			rel += z;
		}
		put_u64(table + n_chunks * 8, rel);
		crc = crc32c_update(crc, table, (n_chunks + 1) * 8);
		if ((st = atomic_writer_write_at(&w, pos + rel, table, (n_chunks + 1) * 8)))
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
	if ((st = atomic_writer_write_at(&w, 0, head, head_size)) || (st = atomic_writer_commit(&w)))
		goto fail;
fail:
	atomic_writer_abort(&w); /* after a commit only frees; otherwise removes the temporary */
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

/* tiers_io.c - the tier sections of a snapshot (hsq-snapshot(5), format
 * 1.3): "tiers" (configuration), "l1", "l2" (contiguous, 64-byte aligned
 * arrays a device backend loads with one copy each), "l3.index" and "l3"
 * (one zstd frame per layer and KV head, each with its own CRC32C, so one
 * head's archive can be read without the rest), "router.heads" (1.2) and
 * "centres" (1.3).
 *
 * Readers treat every byte as hostile: counts, offsets, positions, group
 * bounds and code norms are all checked before anything is used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/fp16.h"
#include "common/le.h"
#include "kv/tiers.h"
#include "snapshot/tiers_io.h"

static uint64_t align64(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

const char *const tier_section_names[TIER_N_SECTIONS] = { "tiers",	 "l1",	    "l2",	      "l3.index",
								    "l3",	 "router.heads", "centres", "keys.residual" };

void tier_blobs_free(tier_blob *b)
{
	for (int i = 0; i < TIER_N_SECTIONS; i++) {
		free(b[i].data);
		b[i].data = NULL;
		b[i].size = 0;
	}
}

static void put_name(uint8_t *dst, const char *s)
{
	memset(dst, 0, 32);
	size_t n = strlen(s);
	memcpy(dst, s, n < 31 ? n : 31);
}

/* keys.residual, when a head has residuals (else left empty). Returns -1
 * when out of memory. */
static int residuals_write(const struct hsq_tiers *t, tier_blob *b)
{
	int H = t->n_head_kv, n_heads = t->n_layer * H;
	uint64_t off = align64(TIER_RES_HEADER + TIER_RES_ENTRY * (uint64_t)n_heads), size = off;
	int any = 0;
	for (int i = 0; i < n_heads; i++) {
		const tier_head *h = &t->layers[i / H].heads[i % H];
		if (h->has_res) {
			any = 1;
			size = align64(size + tier_res_bytes((uint64_t)h->n_l1 + (uint64_t)h->n_l3, t->code4));
		}
	}
	if (!any)
		return 0;
	if (!(b->data = calloc(1, size)))
		return -1;
	b->size = size;
	uint8_t *d = b->data;
	put_u32(d, (uint32_t)t->n_layer);
	put_u32(d + 4, (uint32_t)H);
	put_u32(d + 8, (uint32_t)t->code4);
	for (int i = 0; i < n_heads; i++) {
		const tier_head *h = &t->layers[i / H].heads[i % H];
		if (!h->has_res)
			continue;
		uint8_t *e = d + TIER_RES_HEADER + TIER_RES_ENTRY * (size_t)i;
		uint64_t n1 = (uint64_t)h->n_l1 * t->code4, n3 = (uint64_t)h->n_l3 * t->code4;
		put_u32(e, TIER_RES_HAS);
		put_u32(e + 4, (uint32_t)h->n_l1);
		put_u32(e + 8, (uint32_t)h->n_l3);
		put_u64(e + 16, off);
		put_u64(e + 24, n1 + n3);
		memcpy(d + off, h->l1_res, (size_t)n1);
		memcpy(d + off + n1, h->l3_res, (size_t)n3);
		off = align64(off + n1 + n3);
	}
	return 0;
}

hsq_status tiers_serialize(const struct hsq_tiers *t, int zstd_level, tier_blob *b)
{
	hsq_status st = HSQ_OK;
	int L = t->n_layer, H = t->n_head_kv, n_heads = L * H;
	size_t c4 = tier_code4_pair(t), c3 = tier_code3_pair(t);
	ZSTD_CCtx *cctx = NULL;
	uint8_t *frame = NULL;
	memset(b, 0, TIER_N_SECTIONS * sizeof *b);

	/* tiers: the configuration */
	b[0].size = TIER_CFG_SIZE;
	if (!(b[0].data = calloc(1, TIER_CFG_SIZE)))
		goto nomem;
	uint8_t *c = b[0].data;
	const hsq_tier_params *p = &t->params;
	put_u32(c + TC_MODE, (uint32_t)t->mode);
	put_u32(c + TC_SINKS, (uint32_t)p->sinks);
	put_u32(c + TC_WINDOW, (uint32_t)p->window);
	put_f32(c + TC_L1_FRACTION, p->l1_fraction);
	put_u32(c + TC_GROUP_SIZE, (uint32_t)p->group_size);
	put_f32(c + TC_MEDIUM_FRACTION, p->medium_fraction);
	put_u32(c + TC_OBS_WINDOW, (uint32_t)p->obs_window);
	put_u32(c + TC_READER, (uint32_t)p->reader);
	put_u32(c + TC_COMPRESSOR, (uint32_t)p->compressor);
	put_u32(c + TC_KEEP, (uint32_t)p->keep);
	put_u64(c + TC_SEED, p->seed);
	put_u32(c + TC_CODEC, HSQ_CODEC_TQ);
	put_u32(c + TC_BITS_L1L3, 4);
	put_u32(c + TC_BITS_L2, 3);
	put_u32(c + TC_CODE4, (uint32_t)t->code4);
	put_u32(c + TC_CODE3, (uint32_t)t->code3);
	put_u32(c + TC_N_LAYER, (uint32_t)L);
	put_u32(c + TC_N_HEAD_KV, (uint32_t)H);
	put_u32(c + TC_HEAD_DIM, (uint32_t)t->head_dim);
	put_name(c + TC_READER_NAME, hsq_reader_name(p->reader));
	put_name(c + TC_COMPRESSOR_NAME, hsq_compressor_name(p->compressor));
	put_u32(c + TC_KEY_ROUNDING, (uint32_t)p->key_rounding);
	if (t->has_calibration)
		memcpy(c + TC_CALIBRATION, t->calibration_sha256, 32);

	/* l1 and l2: table of 16-byte entries, then one aligned block per head */
	uint64_t s1 = align64((uint64_t)n_heads * 16), s2 = s1;
	for (int i = 0; i < n_heads; i++) {
		const tier_head *h = &t->layers[i / H].heads[i % H];
		s1 += align64((uint64_t)h->n_l1 * 4) + align64((uint64_t)h->n_l1 * c4);
		s2 += align64((uint64_t)(h->n_group + 1) * 4) + align64((uint64_t)h->n_group) +
		      align64((uint64_t)h->n_group * c3);
	}
	b[1].size = s1;
	b[2].size = s2;
	b[3].size = (uint64_t)n_heads * 32;
	if (!(b[1].data = calloc(1, s1)) || !(b[2].data = calloc(1, s2)) || !(b[3].data = calloc(1, b[3].size)))
		goto nomem;
	uint64_t o1 = align64((uint64_t)n_heads * 16), o2 = o1, l3_total = 0;
	size_t max_frame = 0;
	for (int i = 0; i < n_heads; i++) {
		const tier_head *h = &t->layers[i / H].heads[i % H];
		uint8_t *e1 = b[1].data + (size_t)i * 16, *e2 = b[2].data + (size_t)i * 16;
		put_u32(e1, (uint32_t)h->n_l1);
		put_u32(e1 + 4, (uint32_t)t->layers[i / H].window);
		put_u64(e1 + 8, o1);
		for (int k = 0; k < h->n_l1; k++)
			put_u32(b[1].data + o1 + 4 * (size_t)k, (uint32_t)h->l1_pos[k]);
		o1 += align64((uint64_t)h->n_l1 * 4);
		if (h->n_l1)
			memcpy(b[1].data + o1, h->l1_code, (size_t)h->n_l1 * c4);
		o1 += align64((uint64_t)h->n_l1 * c4);

		put_u32(e2, (uint32_t)h->n_group);
		put_u32(e2 + 4, (uint32_t)h->n_l3);
		put_u64(e2 + 8, o2);
		for (int g = 0; g <= h->n_group; g++)
			put_u32(b[2].data + o2 + 4 * (size_t)g, h->n_group ? (uint32_t)h->g_start[g] : 0);
		o2 += align64((uint64_t)(h->n_group + 1) * 4);
		if (h->n_group)
			memcpy(b[2].data + o2, h->g_class, (size_t)h->n_group);
		o2 += align64((uint64_t)h->n_group);
		if (h->n_group)
			memcpy(b[2].data + o2, h->sum_code, (size_t)h->n_group * c3);
		o2 += align64((uint64_t)h->n_group * c3);
		size_t raw = (size_t)h->n_l3 * (4 + c4);
		max_frame = raw > max_frame ? raw : max_frame;
		l3_total += ZSTD_compressBound(raw);
	}

	/* l3: one zstd frame per head: positions (i32) then codes */
	if (!(b[4].data = malloc(l3_total ? l3_total : 1)) || !(frame = malloc(max_frame ? max_frame : 1)) ||
	    !(cctx = ZSTD_createCCtx()))
		goto nomem;
	size_t zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, zstd_level);
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	if (ZSTD_isError(zr)) {
		st = hsq_fail(HSQ_ERR_INTERNAL, "zstd refused its parameters (%s); please report", ZSTD_getErrorName(zr));
		goto fail;
	}
	uint64_t off = 0;
	for (int i = 0; i < n_heads; i++) {
		const tier_head *h = &t->layers[i / H].heads[i % H];
		size_t raw = (size_t)h->n_l3 * (4 + c4);
		for (int k = 0; k < h->n_l3; k++)
			put_u32(frame + 4 * (size_t)k, (uint32_t)h->l3_pos[k]);
		if (h->n_l3)
			memcpy(frame + 4 * (size_t)h->n_l3, h->l3_code, (size_t)h->n_l3 * c4);
		size_t z = ZSTD_compress2(cctx, b[4].data + off, l3_total - off, frame, raw);
		if (ZSTD_isError(z)) {
			st = hsq_fail(HSQ_ERR_INTERNAL, "zstd failed on the archive of layer %d head %d (%s); please report",
				      i / H, i % H, ZSTD_getErrorName(z));
			goto fail;
		}
		uint8_t *e = b[3].data + (size_t)i * 32;
		put_u64(e, off);
		put_u64(e + 8, z);
		put_u64(e + 16, raw);
		put_u32(e + 24, (uint32_t)h->n_l3);
		put_u32(e + 28, crc32c_update(0, b[4].data + off, z));
		off += z;
	}
	b[4].size = off;

	/* router.heads: hsq mode only */
	if (t->mode == HSQ_MODE_HSQ) {
		b[TIER_S_HEADS].size = tier_heads_bytes(n_heads);
		if (!(b[TIER_S_HEADS].data = calloc(1, b[TIER_S_HEADS].size)))
			goto nomem;
		put_u32(b[TIER_S_HEADS].data, (uint32_t)L);
		put_u32(b[TIER_S_HEADS].data + 4, (uint32_t)H);
		for (int i = 0; i < n_heads; i++)
			put_f32(b[TIER_S_HEADS].data + TIER_HEADS_HEADER + 4 * (size_t)i,
				t->layers[i / H].heads[i % H].induction);
	}
	/* centres: every tiered mode */
	b[TIER_S_CENTRES].size = tier_centres_bytes(n_heads, t->head_dim);
	if (!(b[TIER_S_CENTRES].data = calloc(1, b[TIER_S_CENTRES].size)))
		goto nomem;
	uint8_t *cc = b[TIER_S_CENTRES].data;
	put_u32(cc, (uint32_t)L);
	put_u32(cc + 4, (uint32_t)H);
	put_u32(cc + 8, (uint32_t)t->head_dim);
	for (int i = 0; i < n_heads; i++)
		for (int d = 0; d < 2 * t->head_dim; d++)
			put_f32(cc + TIER_CENTRES_HEADER + 4 * ((size_t)i * 2 * t->head_dim + d),
				t->layers[i / H].heads[i % H].centre[d]);
	if (residuals_write(t, &b[TIER_S_RESIDUAL]))
		goto nomem;
	goto fail; /* success: only the scratch goes */
nomem:
	st = hsq_fail(HSQ_ERR_NOMEM, "out of memory writing the tiers");
fail:
	if (st)
		tier_blobs_free(b);
	ZSTD_freeCCtx(cctx);
	free(frame);
	return st;
}

hsq_status tiers_read_config(const char *path, const uint8_t *c, uint64_t size, int n_layer, int n_head_kv,
			     int head_dim, hsq_snapshot_mode *mode, hsq_tier_params *p, uint8_t calibration[32])
{
	if (size < TIER_CFG_SIZE)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tiers' is %llu bytes, shorter than %d; the file is damaged",
				path, (unsigned long long)size, TIER_CFG_SIZE);
	*mode = (hsq_snapshot_mode)get_u32(c + TC_MODE);
	memset(p, 0, sizeof *p);
	p->sinks = (int)get_u32(c + TC_SINKS);
	p->window = (int)get_u32(c + TC_WINDOW);
	p->l1_fraction = get_f32(c + TC_L1_FRACTION);
	p->group_size = (int)get_u32(c + TC_GROUP_SIZE);
	p->medium_fraction = get_f32(c + TC_MEDIUM_FRACTION);
	p->obs_window = (int)get_u32(c + TC_OBS_WINDOW);
	p->reader = (hsq_reader_kind)get_u32(c + TC_READER);
	p->compressor = (hsq_compressor_kind)get_u32(c + TC_COMPRESSOR);
	p->keep = (int)get_u32(c + TC_KEEP);
	p->seed = get_u64(c + TC_SEED);
	/* reserved and 0 before format 1.5, when every writer rounded to the
	 * nearest level */
	uint32_t rounding = get_u32(c + TC_KEY_ROUNDING);
	if (rounding > HSQ_KEY_ROUNDING_QUERY)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: the tiers' keys were rounded by method %u, which this hsq %s does not know; upgrade hsq",
				path, rounding, hsq_version());
	p->key_rounding = (hsq_key_rounding)rounding;
	memcpy(calibration, c + TC_CALIBRATION, 32); /* reserved and 0 before format 1.6 */
	if (get_u32(c + TC_CODEC) != HSQ_CODEC_TQ || get_u32(c + TC_BITS_L1L3) != 4 || get_u32(c + TC_BITS_L2) != 3)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"%s: tiers use codec %u at %u/%u bits, which this hsq %s does not read (tq at 4/3); upgrade hsq",
				path, get_u32(c + TC_CODEC), get_u32(c + TC_BITS_L1L3), get_u32(c + TC_BITS_L2),
				hsq_version());
	if (get_u32(c + TC_N_LAYER) != (uint32_t)n_layer || get_u32(c + TC_N_HEAD_KV) != (uint32_t)n_head_kv ||
	    get_u32(c + TC_HEAD_DIM) != (uint32_t)head_dim)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tiers' describes %u layers x %u heads x %u, not the snapshot's %d x %d x %d; the file is damaged",
				path, get_u32(c + TC_N_LAYER), get_u32(c + TC_N_HEAD_KV), get_u32(c + TC_HEAD_DIM), n_layer,
				n_head_kv, head_dim);
	return HSQ_OK;
}

hsq_status tier_heads_read(const char *path, const tier_blob *blob, int n_layer, int n_head_kv, float *induction)
{
	int n_heads = n_layer * n_head_kv;
	memset(induction, 0, (size_t)n_heads * sizeof *induction);
	if (!blob->size)
		return HSQ_OK; /* format 1.1, or a mode without retrieval heads */
	if (blob->size < tier_heads_bytes(n_heads) || get_u32(blob->data) != (uint32_t)n_layer ||
	    get_u32(blob->data + 4) != (uint32_t)n_head_kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'router.heads' (%llu bytes) does not describe %d layers x %d heads; the file is damaged",
				path, (unsigned long long)blob->size, n_layer, n_head_kv);
	for (int i = 0; i < n_heads; i++) {
		float v = get_f32(blob->data + TIER_HEADS_HEADER + 4 * (size_t)i);
		if (!(v >= 0.0f && v <= 1.0f))
			return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'router.heads' gives layer %d head %d the induction score %g, outside 0..1; the file is damaged",
					path, i / n_head_kv, i % n_head_kv, (double)v);
		induction[i] = v;
	}
	return HSQ_OK;
}

/* Reads section centres (absent: every centre stays 0) into the heads. */
static hsq_status centres_read(struct hsq_tiers *t, const char *path, const tier_blob *blob)
{
	int H = t->n_head_kv, hd = t->head_dim, n_heads = t->n_layer * H;
	if (!blob->size)
		return HSQ_OK; /* format 1.1 or 1.2 */
	if (blob->size < tier_centres_bytes(n_heads, hd) || get_u32(blob->data) != (uint32_t)t->n_layer ||
	    get_u32(blob->data + 4) != (uint32_t)H || get_u32(blob->data + 8) != (uint32_t)hd)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'centres' (%llu bytes) does not describe %d layers x %d heads x %d; the file is damaged",
				path, (unsigned long long)blob->size, t->n_layer, H, hd);
	for (int i = 0; i < n_heads; i++)
		for (int d = 0; d < 2 * hd; d++) {
			float v = get_f32(blob->data + TIER_CENTRES_HEADER + 4 * ((size_t)i * 2 * hd + d));
			if (!(fabsf(v) <= 65504.0f))
				return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'centres' gives layer %d head %d the %s centre %g in channel %d, not a finite value within 65504; the file is damaged",
						path, i / H, i % H, d < hd ? "key" : "value", (double)v, d % hd);
			t->layers[i / H].heads[i % H].centre[d] = v;
		}
	return HSQ_OK;
}

/* Checks that [off, off + n) lies inside a section of `size` bytes. */
static int inside(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

/* The fp16 norm at the start of every code must be finite (a damaged norm
 * would poison every attention it enters). */
static int codes_finite(const uint8_t *codes, size_t n, size_t code_bytes)
{
	for (size_t i = 0; i < n; i++) {
		float f = hsq_f16_to_f32(get_u16(codes + i * code_bytes));
		if (!isfinite(f))
			return 0;
	}
	return 1;
}

hsq_status tier_tables_check(const char *path, const tier_blob *b, int n_heads, int n_head_kv)
{
	if (!inside(0, (uint64_t)n_heads * 16, b[1].size) || !inside(0, (uint64_t)n_heads * 16, b[2].size) ||
	    b[3].size != (uint64_t)n_heads * 32)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tier tables are shorter than %d heads need; the file is damaged", path,
				n_heads);
	/* The frames follow one another in head order from byte 0 of l3, so
	 * no head's entry can name another head's frame (or overlap it), and
	 * nothing follows the last one. */
	uint64_t next = 0;
	for (int i = 0; i < n_heads; i++) {
		const uint8_t *e = b[3].data + (size_t)i * 32;
		uint64_t off = get_u64(e), stored = get_u64(e + 8);
		if (off != next || !inside(off, stored, b[4].size))
			return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'l3.index' places the archive frame of layer %d head %d (%llu bytes at %llu) where the frames in head order leave byte %llu of 'l3'; the file is damaged",
					path, i / n_head_kv, i % n_head_kv, (unsigned long long)stored, (unsigned long long)off,
					(unsigned long long)next);
		next = off + stored;
	}
	if (next != b[4].size)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'l3' has %llu bytes after its last archive frame; the file is damaged",
				path, (unsigned long long)(b[4].size - next));
	return HSQ_OK;
}

hsq_status tier_entry_read(const char *path, const tier_blob *b, int i, int n_head_kv, int n_tokens, size_t c4,
			   size_t c3, tier_entry *e)
{
	const uint8_t *e1 = b[1].data + (size_t)i * 16, *e2 = b[2].data + (size_t)i * 16, *e3 = b[3].data + (size_t)i * 32;
	uint64_t n = (uint64_t)n_tokens;
	e->n_l1 = get_u32(e1);
	e->window = (int)get_u32(e1 + 4);
	e->l1_off = get_u64(e1 + 8);
	e->n_group = get_u32(e2);
	e->n_l3 = get_u32(e2 + 4);
	e->l2_off = get_u64(e2 + 8);
	e->l3_off = get_u64(e3);
	e->l3_stored = get_u64(e3 + 8);
	e->l3_raw = get_u64(e3 + 16);
	e->l3_crc = get_u32(e3 + 28);
	uint64_t ng = e->n_group;
	if (e->window < 0 || e->n_l1 > n || e->n_l3 > n || ng > e->n_l3 || e->n_l1 + e->n_l3 > n ||
	    !inside(e->l1_off, align64(e->n_l1 * 4) + e->n_l1 * c4, b[1].size) ||
	    !inside(e->l2_off, align64((ng + 1) * 4) + align64(ng) + ng * c3, b[2].size) ||
	    get_u32(e3 + 24) != e->n_l3 || !inside(e->l3_off, e->l3_stored, b[4].size) ||
	    e->l3_raw != e->n_l3 * (4 + c4))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tier tables of layer %d head %d (%llu L1, %llu groups, %llu archived of %d tokens) do not fit; the file is damaged",
				path, i / n_head_kv, i % n_head_kv, (unsigned long long)e->n_l1, (unsigned long long)ng,
				(unsigned long long)e->n_l3, n_tokens);
	e->l1_pos = b[1].data + e->l1_off;
	e->l1_codes = e->l1_pos + align64(e->n_l1 * 4);
	e->g_start = b[2].data + e->l2_off;
	e->g_class = e->g_start + align64((ng + 1) * 4);
	e->l2_codes = e->g_class + align64(ng);
	return HSQ_OK;
}

hsq_status tier_residual_entry(const char *path, const tier_blob *blob, int n_layer, int n_head_kv, size_t code4,
			       int i, int n_l1, int n_l3, const uint8_t **codes)
{
	const uint8_t *d = blob->data;
	uint64_t size = blob->size, table = TIER_RES_HEADER + TIER_RES_ENTRY * (uint64_t)n_layer * (uint64_t)n_head_kv;
	*codes = NULL;
	if (size < table || get_u32(d) != (uint32_t)n_layer || get_u32(d + 4) != (uint32_t)n_head_kv ||
	    get_u32(d + 8) != (uint32_t)code4 || get_u32(d + 12))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'keys.residual' (%llu bytes) does not describe %d layers x %d heads with %zu-byte codes; the file is damaged",
				path, (unsigned long long)size, n_layer, n_head_kv, code4);
	int l = i / n_head_kv, g = i % n_head_kv;
	const uint8_t *e = d + TIER_RES_HEADER + TIER_RES_ENTRY * (size_t)i;
	uint32_t flags = get_u32(e), n1 = get_u32(e + 4), n3 = get_u32(e + 8);
	uint64_t off = get_u64(e + 16), bytes = get_u64(e + 24);
	if (flags & ~TIER_RES_HAS || get_u32(e + 12) || (!(flags & TIER_RES_HAS) && (n1 || n3 || off || bytes)))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'keys.residual' has a malformed entry for layer %d head %d; the file is damaged",
				path, l, g);
	if (!(flags & TIER_RES_HAS))
		return HSQ_OK;
	if (n1 != (uint32_t)n_l1 || n3 != (uint32_t)n_l3 || bytes != tier_res_bytes((uint64_t)n1 + n3, code4) ||
	    off % 64 || off < table || !inside(off, bytes, size))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'keys.residual' gives layer %d head %d %u + %u residual codes at offset %llu, but the head holds %d + %d tokens (or the block leaves the section); the file is damaged",
				path, l, g, n1, n3, (unsigned long long)off, n_l1, n_l3);
	if (!codes_finite(d + off, (size_t)n1 + n3, code4))
		return hsq_fail(HSQ_ERR_FORMAT, "%s: a residual key code of layer %d head %d has a non-finite norm; the file is damaged",
				path, l, g);
	*codes = d + off;
	return HSQ_OK;
}

/* Reads keys.residual into the heads it gives residuals (their L1 and L3
 * already loaded). */
static hsq_status residuals_read(struct hsq_tiers *t, const char *path, const tier_blob *blob)
{
	hsq_status st;
	int H = t->n_head_kv;
	if (t->mode != HSQ_MODE_HSQ)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'keys.residual' in a %s snapshot, where only hsq keeps residual keys; the file is damaged",
				path, hsq_mode_name(t->mode));
	for (int i = 0; i < t->n_layer * H; i++) {
		tier_head *h = &t->layers[i / H].heads[i % H];
		const uint8_t *codes;
		if ((st = tier_residual_entry(path, blob, t->n_layer, H, t->code4, i, h->n_l1, h->n_l3, &codes)))
			return st;
		if (!codes)
			continue;
		if ((st = tiers_head_enable_res(t, h)))
			return st;
		memcpy(h->l1_res, codes, (size_t)h->n_l1 * t->code4);
		memcpy(h->l3_res, codes + (size_t)h->n_l1 * t->code4, (size_t)h->n_l3 * t->code4);
	}
	return HSQ_OK;
}

hsq_status tiers_deserialize(struct hsq_tiers *t, const char *path, const tier_blob *b, int n_tokens)
{
	hsq_status st = HSQ_OK;
	int L = t->n_layer, H = t->n_head_kv, n_heads = L * H;
	size_t c4 = tier_code4_pair(t), c3 = tier_code3_pair(t);
	uint8_t *frame = NULL;
	ZSTD_DCtx *dctx = NULL;
	if (get_u32(b[0].data + TC_CODE4) != t->code4 || get_u32(b[0].data + TC_CODE3) != t->code3)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: code sizes %u/%u in section 'tiers' disagree with the codec (%zu/%zu); the file is damaged",
				path, get_u32(b[0].data + TC_CODE4), get_u32(b[0].data + TC_CODE3), t->code4, t->code3);
	if ((st = tier_tables_check(path, b, n_heads, H)) || (st = centres_read(t, path, &b[TIER_S_CENTRES])))
		return st;
	/* who holds each position of the head being read: 0 none, 1 L1, 2 L3 */
	uint8_t *owner = malloc((size_t)n_tokens + 1);
	if (!owner)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
	if (!(dctx = ZSTD_createDCtx())) {
		free(owner);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
	}
	for (int i = 0; i < n_heads; i++) {
		int l = i / H;
		tier_head *h = &t->layers[l].heads[i % H];
		tier_entry e;
		if ((st = tier_entry_read(path, b, i, H, n_tokens, c4, c3, &e)))
			goto fail;
		if (e.window != t->layers[l].window) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: layer %d is stored with attention window %d but the model's is %d; the file is damaged",
				      path, l, e.window, t->layers[l].window);
			goto fail;
		}
		uint64_t n1 = e.n_l1, ng = e.n_group, n3 = e.n_l3;
		/* L1 */
		const uint8_t *pos1 = e.l1_pos, *codes1 = e.l1_codes;
		int32_t *pos = malloc((size_t)(n1 > n3 ? n1 : n3) * 4 + 4);
		if (!pos)
			goto nomem;
		for (uint64_t k = 0; k < n1; k++) {
			uint32_t v = get_u32(pos1 + 4 * k);
			if (v >= (uint32_t)n_tokens || (k && v <= (uint32_t)pos[k - 1])) {
				free(pos);
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: L1 position %u of layer %d head %d is out of order or past the %d tokens; the file is damaged",
					      path, v, l, i % H, n_tokens);
				goto fail;
			}
			pos[k] = (int32_t)v;
		}
		if (!codes_finite(codes1, 2 * n1, t->code4)) {
			free(pos);
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: an L1 code of layer %d head %d has a non-finite norm; the file is damaged",
				      path, l, i % H);
			goto fail;
		}
		st = tiers_head_add_l1(t, l, h, (int)n1, pos, codes1, NULL);
		free(pos);
		if (st)
			goto fail;
		/* one zstd frame, nothing after it (for a head without groups
		 * too: its frame of empty content is never decompressed) */
		size_t fz = ZSTD_findFrameCompressedSize(b[4].data + e.l3_off, e.l3_stored);
		if (ZSTD_isError(fz) || fz != e.l3_stored) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: archive frame of layer %d head %d in section 'l3' %s; the file is damaged",
				      path, l, i % H, ZSTD_isError(fz) ? "is not one zstd frame" : "has bytes after its zstd frame");
			goto fail;
		}
		if (ng == 0 && n3 == 0)
			continue;
		if (t->layers[l].window || t->mode != HSQ_MODE_HSQ || ng == 0) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: layer %d head %d has groups where mode %s allows none; the file is damaged",
				      path, l, i % H, hsq_mode_name(t->mode));
			goto fail;
		}
		/* L2 group table */
		const uint8_t *gs = e.g_start, *cls = e.g_class, *codes2 = e.l2_codes;
		if (get_u32(gs) != 0 || get_u32(gs + 4 * ng) != n3) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: group table of layer %d head %d does not span its %llu archived tokens; the file is damaged",
				      path, l, i % H, (unsigned long long)n3);
			goto fail;
		}
		for (uint64_t g = 0; g < ng; g++) {
			uint32_t a = get_u32(gs + 4 * g), z = get_u32(gs + 4 * (g + 1));
			if (z <= a || z - a > (uint32_t)t->params.group_size || cls[g] > HSQ_GROUP_MEDIUM) {
				st = hsq_fail(HSQ_ERR_FORMAT, "%s: group %llu of layer %d head %d is malformed (tokens %u..%u, class %u); the file is damaged",
					      path, (unsigned long long)g, l, i % H, a, z, cls[g]);
				goto fail;
			}
		}
		if (!codes_finite(codes2, 2 * ng, t->code3)) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: an L2 summary of layer %d head %d has a non-finite norm; the file is damaged",
				      path, l, i % H);
			goto fail;
		}
		/* L3 frame */
		uint64_t off = e.l3_off, stored = e.l3_stored, raw = e.l3_raw;
		if (crc32c_update(0, b[4].data + off, stored) != e.l3_crc) {
			st = hsq_fail(HSQ_ERR_CHECKSUM, "%s: archive frame of layer %d head %d is damaged (crc32c mismatch); re-create the snapshot with hsq-prefill",
				      path, l, i % H);
			goto fail;
		}
		free(frame);
		if (!(frame = malloc(raw)))
			goto nomem;
		size_t got = ZSTD_decompressDCtx(dctx, frame, raw, b[4].data + off, stored);
		if (ZSTD_isError(got) || got != raw) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: archive frame of layer %d head %d does not decompress to %llu bytes (%s); the file is damaged",
				      path, l, i % H, (unsigned long long)raw,
				      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
			goto fail;
		}
		const uint8_t *codes3 = frame + 4 * n3;
		if (!codes_finite(codes3, 2 * n3, t->code4)) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: an archived code of layer %d head %d has a non-finite norm; the file is damaged",
				      path, l, i % H);
			goto fail;
		}
		int32_t gpos[16];
		memset(owner, 0, (size_t)n_tokens);
		for (uint64_t k = 0; k < n1; k++)
			owner[get_u32(e.l1_pos + 4 * k)] = 1; /* checked above */
		for (uint64_t g = 0; g < ng; g++) {
			uint32_t a = get_u32(gs + 4 * g), z = get_u32(gs + 4 * (g + 1));
			for (uint32_t k = a; k < z; k++) {
				uint32_t v = get_u32(frame + 4 * (size_t)k);
				if (v >= (uint32_t)n_tokens) {
					st = hsq_fail(HSQ_ERR_FORMAT, "%s: archived position %u of layer %d head %d is past the %d tokens; the file is damaged",
						      path, v, l, i % H, n_tokens);
					goto fail;
				}
				/* strictly ascending in a group, once in L3, never in L1 */
				const char *why = k > a && v <= (uint32_t)gpos[k - a - 1] ? "is not above the one before it in its group"
						  : owner[v] == 1 ? "is also an L1 position"
						  : owner[v] == 2 ? "appears twice"
						  : NULL;
				if (why) {
					st = hsq_fail(HSQ_ERR_FORMAT, "%s: archived position %u (token %u of group %llu) of layer %d head %d in section 'l3' %s; the file is damaged",
						      path, v, k - a, (unsigned long long)g, l, i % H, why);
					goto fail;
				}
				owner[v] = 2;
				gpos[k - a] = (int32_t)v;
			}
			if ((st = tiers_head_add_group(t, &t->rope[t->layers[l].rope_table], h, (int)(z - a), gpos,
						       codes3 + (size_t)a * c4, NULL, codes2 + (size_t)g * c3, cls[g])))
				goto fail;
		}
	}
	t->n_tokens = n_tokens;
	float *ind = malloc((size_t)n_heads * sizeof *ind);
	if (!ind)
		goto nomem;
	if (!(st = tier_heads_read(path, &b[TIER_S_HEADS], L, H, ind)))
		for (int i = 0; i < n_heads; i++)
			t->layers[i / H].heads[i % H].induction = ind[i];
	free(ind);
	if (!st && !(st = tiers_pick_retrieval(t)) && b[TIER_S_RESIDUAL].size &&
	    !(st = residuals_read(t, path, &b[TIER_S_RESIDUAL])))
		tiers_refresh_residual_heads(t);
	t->params.residual_heads = tiers_residual_head_count(t); /* as built */
	goto fail;
nomem:
	st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading the tiers of %s", path);
fail:
	free(frame);
	free(owner);
	ZSTD_freeDCtx(dctx);
	return st;
}

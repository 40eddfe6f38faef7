/* snapshot_inspect.c - what a snapshot holds, without a model:
 * hsq_snapshot_inspect (header, sections, checksums), hsq_snapshot_read_tokens
 * and hsq_snapshot_read_tiers (the tier map of every head). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"
#include "hsq.h"
#include "kv/tiers.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/tiers_io.h"

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
	if ((st = snap_reader_open(&r, path)))
		return st;
	fill_info(&r, info);
	if (verify) {
		hsq_status bad = HSQ_OK;
		int n = (int)(sizeof info->sections / sizeof info->sections[0]);
		for (uint32_t i = 0; i < r.n_sections; i++) {
			uint32_t crc = 0;
			if ((st = snap_section_crc(&r, &r.sections[i], &crc)))
				goto done;
			if (i < (uint32_t)n)
				info->sections[i].checksum_ok = crc == r.sections[i].crc;
			if (crc != r.sections[i].crc && !bad)
				bad = snap_checksum_error(&r, &r.sections[i], crc);
		}
		st = bad;
	}
done:
	snap_reader_close(&r);
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
	if ((st = snap_reader_open(&r, path)))
		return st;
	if ((st = snap_read_tokens(&r, r.meta.n_vocab, tokens)) == HSQ_OK)
		*n = r.meta.n_tokens;
	snap_reader_close(&r);
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
	if ((st = snap_reader_open(&r, path)))
		return st;
	if (r.mode < HSQ_MODE_QUANT || r.mode > HSQ_MODE_SNAPKV) {
		st = hsq_fail(HSQ_ERR_INVALID_ARG, "%s is a %s snapshot: it has no tiers", path,
			      hsq_mode_name((hsq_snapshot_mode)r.mode));
		goto done;
	}
	for (int i = 0; i < TIER_N_SECTIONS; i++) {
		const snap_section *s = snap_find_section(&r, tier_section_names[i]);
		if (!s && !tier_section_needed(i, r.minor))
			continue; /* router.heads (1.2), keys.residual (1.4), or centres before 1.3 */
		if (!s) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: snapshot of format %u.%u has no '%s' section; the file is damaged",
				      path, r.major, r.minor, tier_section_names[i]);
			goto done;
		}
		if ((st = snap_check_encoding(&r, s)) || (st = snap_read_small_section(&r, s, r.file_size, &b[i].data)))
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
				    &map->params, map->calibration_sha256)))
		goto done;
	snap_copy_printable(map->reader, sizeof map->reader, b[0].data + TC_READER_NAME, 32);
	snap_copy_printable(map->compressor, sizeof map->compressor, b[0].data + TC_COMPRESSOR_NAME, 32);
	size_t c4 = 2 * (size_t)get_u32(b[0].data + TC_CODE4), c3 = 2 * (size_t)get_u32(b[0].data + TC_CODE3);
	int n_heads = map->n_layer * map->n_head_kv, n = map->n_tokens;
	if (c4 > 4096 || c3 > 4096) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: code sizes %zu/%zu in section 'tiers' are implausible; the file is damaged",
			      path, c4 / 2, c3 / 2);
		goto done;
	}
	if ((st = tier_tables_check(path, b, n_heads, map->n_head_kv)))
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
	snap_reader_close(&r);
	return st;
}

/* codec.c - the codec interface: parameters, layout, batch encode/decode,
 * bit packing and look-up-table dot products (see codec.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/codec.h"

static const struct {
	hsq_codec_kind kind;
	const char *name;
	const char *alias;
} kind_names[] = {
	{HSQ_CODEC_PLAIN, "plain", "plain-kv"},
	{HSQ_CODEC_TQ, "tq", "tq-kv"},
	{HSQ_CODEC_TQ_QJL, "tq-qjl", "tq-qkv"},
	{HSQ_CODEC_SQ, "sq", "sq-kv"},
	{HSQ_CODEC_SQU, "squ", "squ-kv"},
};

const char *hsq_codec_kind_name(hsq_codec_kind kind)
{
	for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
		if (kind_names[i].kind == kind)
			return kind_names[i].name;
	return "unknown";
}

hsq_status hsq_codec_kind_parse(const char *name, hsq_codec_kind *out)
{
	for (size_t i = 0; name && i < sizeof kind_names / sizeof kind_names[0]; i++) {
		if (!strcasecmp(name, kind_names[i].name) || !strcasecmp(name, kind_names[i].alias)) {
			*out = kind_names[i].kind;
			return HSQ_OK;
		}
	}
	return hsq_fail(HSQ_ERR_INVALID_ARG,
			"unknown codec '%s' (use plain, tq, tq-qjl, sq or squ)", name ? name : "");
}

static hsq_status check_params(const hsq_codec_params *p)
{
	const char *name = hsq_codec_kind_name(p->kind);
	int lo = 1, hi = 8;
	switch (p->kind) {
	case HSQ_CODEC_PLAIN: break;
	case HSQ_CODEC_TQ: hi = 4; break;
	case HSQ_CODEC_TQ_QJL: lo = 2; hi = 5; break;
	case HSQ_CODEC_SQ:
	case HSQ_CODEC_SQU: break;
	default:
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"codec: unknown kind %d (use plain, tq, tq-qjl, sq or squ)", (int)p->kind);
	}
	if (p->dim < HSQ_CODEC_MIN_DIM || p->dim > HSQ_CODEC_MAX_DIM)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: dimension %d out of range %d..%d", name,
				p->dim, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (p->bits < lo || p->bits > hi)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: %d bits per value out of range %d..%d", name,
				p->bits, lo, hi);
	if (p->path != HSQ_KV_K && p->path != HSQ_KV_V)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s: unknown kv path %d (use k or v)", name,
				(int)p->path);
	if (p->kind == HSQ_CODEC_TQ_QJL && p->path == HSQ_KV_V)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"tq-qjl: the qjl residual sketch is for the k path only (it makes inner "
				"products unbiased but adds variance to reconstructed values); use tq "
				"for the v path");
	if ((p->kind == HSQ_CODEC_SQ || p->kind == HSQ_CODEC_SQU) && !p->calib)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"%s: needs a calibration (hsq_sq_calibrate or hsq_sq_calib_load)", name);
	return HSQ_OK;
}

hsq_status codec_region_init(hsq_codec *c, int r, int n_fields, const uint8_t *widths)
{
	codec_region *reg = &c->region[r];
	reg->n_fields = n_fields;
	reg->width = malloc((size_t)(n_fields > 0 ? n_fields : 1));
	reg->lut_off = malloc(sizeof(uint32_t) * (size_t)(n_fields > 0 ? n_fields : 1));
	if (!reg->width || !reg->lut_off)
		return hsq_fail(HSQ_ERR_NOMEM, "%s: out of memory for the code layout",
				hsq_codec_kind_name(c->params.kind));
	size_t total_bits = 0;
	uint32_t lut_len = 0;
	int uniform = n_fields > 0 ? widths[0] : 0;
	for (int f = 0; f < n_fields; f++) {
		if (widths[f] < 1 || widths[f] > 8)
			return hsq_fail(HSQ_ERR_INTERNAL, "%s: field width %d out of range; please report",
					hsq_codec_kind_name(c->params.kind), widths[f]);
		reg->width[f] = widths[f];
		reg->lut_off[f] = lut_len;
		lut_len += 1u << widths[f];
		total_bits += widths[f];
		if (widths[f] != uniform)
			uniform = 0;
	}
	reg->lut_len = lut_len;
	reg->byte_width = (uniform && 8 % uniform == 0) ? uniform : 0;
	reg->group_width = (uniform && 8 % uniform != 0) ? uniform : 0;
	reg->chunk_fields = reg->group_width && 2 * reg->group_width <= 8 ? 2 : 1;
	reg->n_chunks = (n_fields + reg->chunk_fields - 1) / reg->chunk_fields;
	reg->n_bytes = (total_bits + 7) / 8;
	reg->first_field = r == 0 ? 0 : c->region[0].n_fields;
	c->n_regions = r + 1;
	return HSQ_OK;
}

void codec_finish_layout(hsq_codec *c)
{
	size_t off = 2 * (size_t)c->n_side;
	for (int r = 0; r < c->n_regions; r++) {
		c->region[r].offset = off;
		off += c->region[r].n_bytes;
	}
	c->code_bytes = off;
}

hsq_status hsq_codec_new(const hsq_codec_params *params, hsq_codec **out)
{
	hsq_status st;
	hsq_codec *c = NULL;
	*out = NULL;
	if (!params)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "codec: null parameters");
	st = check_params(params);
	if (st != HSQ_OK)
		goto cleanup;
	c = calloc(1, sizeof *c);
	if (!c) {
		st = hsq_fail(HSQ_ERR_NOMEM, "codec: out of memory");
		goto cleanup;
	}
	c->params = *params;
	c->dim = params->dim;
	switch (params->kind) {
	case HSQ_CODEC_PLAIN: st = codec_plain_init(c); break;
	case HSQ_CODEC_TQ:
	case HSQ_CODEC_TQ_QJL: st = codec_tq_init(c); break;
	default: st = codec_sq_init(c); break;
	}
	if (st != HSQ_OK)
		goto cleanup;
	codec_finish_layout(c);
	*out = c;
	c = NULL;
cleanup:
	hsq_codec_free(c);
	return st;
}

void hsq_codec_free(hsq_codec *c)
{
	if (!c)
		return;
	if (c->ops && c->ops->free_impl)
		c->ops->free_impl(c->impl);
	for (int r = 0; r < 2; r++) {
		free(c->region[r].width);
		free(c->region[r].lut_off);
	}
	free(c);
}

const hsq_codec_params *hsq_codec_get_params(const hsq_codec *c)
{
	return &c->params;
}

size_t hsq_codec_code_bytes(const hsq_codec *c)
{
	return c->code_bytes;
}

double hsq_codec_bits_per_value(const hsq_codec *c)
{
	return 8.0 * (double)c->code_bytes / c->dim;
}

int hsq_codec_n_fields(const hsq_codec *c)
{
	int n = 0;
	for (int r = 0; r < c->n_regions; r++)
		n += c->region[r].n_fields;
	return n;
}

/* Byte-aligned widths (1, 2, 4, 8): w is a constant at each call site
 * below, so the inner loops unroll. Full bytes first, then the tail. */
static inline void pack_bytes(const uint8_t *idx, int n, uint8_t *out, const int w)
{
	const int per = 8 / w;
	const unsigned mask = (1u << w) - 1u;
	int full = n / per, p = 0;
	for (; p < full; p++) {
		unsigned byte = 0;
		for (int s = 0; s < per; s++)
			byte |= ((unsigned)idx[p * per + s] & mask) << (s * w);
		out[p] = (uint8_t)byte;
	}
	if (full * per < n) {
		unsigned byte = 0;
		for (int s = 0; full * per + s < n; s++)
			byte |= ((unsigned)idx[full * per + s] & mask) << (s * w);
		out[p] = (uint8_t)byte;
	}
}

static inline void unpack_bytes(const uint8_t *in, int n, uint8_t *idx, const int w)
{
	const int per = 8 / w;
	const unsigned mask = (1u << w) - 1u;
	int full = n / per, p = 0;
	for (; p < full; p++)
		for (int s = 0; s < per; s++)
			idx[p * per + s] = (uint8_t)((in[p] >> (s * w)) & mask);
	for (int s = 0; full * per + s < n; s++)
		idx[full * per + s] = (uint8_t)((in[p] >> (s * w)) & mask);
}

void codec_pack(const codec_region *reg, const uint8_t *idx, uint8_t *out)
{
	switch (reg->byte_width) {
	case 1: pack_bytes(idx, reg->n_fields, out, 1); return;
	case 2: pack_bytes(idx, reg->n_fields, out, 2); return;
	case 4: pack_bytes(idx, reg->n_fields, out, 4); return;
	case 8: memcpy(out, idx, (size_t)reg->n_fields); return;
	}
	uint64_t acc = 0;
	int have = 0;
	size_t o = 0;
	for (int f = 0; f < reg->n_fields; f++) {
		acc |= (uint64_t)(idx[f] & ((1u << reg->width[f]) - 1u)) << have;
		have += reg->width[f];
		while (have >= 8) {
			out[o++] = (uint8_t)acc;
			acc >>= 8;
			have -= 8;
		}
	}
	if (have > 0)
		out[o++] = (uint8_t)acc;
}

void codec_unpack(const codec_region *reg, const uint8_t *in, uint8_t *idx)
{
	switch (reg->byte_width) {
	case 1: unpack_bytes(in, reg->n_fields, idx, 1); return;
	case 2: unpack_bytes(in, reg->n_fields, idx, 2); return;
	case 4: unpack_bytes(in, reg->n_fields, idx, 4); return;
	case 8: memcpy(idx, in, (size_t)reg->n_fields); return;
	}
	uint64_t acc = 0;
	int have = 0;
	size_t o = 0;
	for (int f = 0; f < reg->n_fields; f++) {
		int wf = reg->width[f];
		while (have < wf) {
			acc |= (uint64_t)in[o++] << have;
			have += 8;
		}
		idx[f] = (uint8_t)(acc & ((1u << wf) - 1u));
		acc >>= wf;
		have -= wf;
	}
}

void hsq_codec_unpack_code(const hsq_codec *c, const uint8_t *code, float *side, uint8_t *idx)
{
	for (int s = 0; s < c->n_side; s++)
		side[s] = hsq_f16_to_f32((uint16_t)(code[2 * s] | (code[2 * s + 1] << 8)));
	for (int r = 0; r < c->n_regions; r++)
		codec_unpack(&c->region[r], code + c->region[r].offset, idx + c->region[r].first_field);
}

void hsq_codec_pack_code(const hsq_codec *c, const float *side, const uint8_t *idx, uint8_t *code)
{
	for (int s = 0; s < c->n_side; s++) {
		uint16_t h = hsq_f32_to_f16(side[s]);
		code[2 * s] = (uint8_t)h;
		code[2 * s + 1] = (uint8_t)(h >> 8);
	}
	for (int r = 0; r < c->n_regions; r++)
		codec_pack(&c->region[r], idx + c->region[r].first_field, code + c->region[r].offset);
}

hsq_status hsq_codec_encode(const hsq_codec *c, const float *x, size_t n, uint8_t *codes)
{
	float side[CODEC_MAX_SIDE];
	uint8_t idx[CODEC_MAX_FIELDS];
	int d = c->dim;
	for (size_t i = 0; i < n; i++) {
		const float *row = x + i * (size_t)d;
		for (int j = 0; j < d; j++)
			if (!isfinite(row[j]))
				return hsq_fail(HSQ_ERR_INVALID_ARG,
						"%s: value %d of vector %zu is not finite; only finite "
						"vectors can be encoded",
						hsq_codec_kind_name(c->params.kind), j, i);
		c->ops->encode(c, row, side, idx);
		hsq_codec_pack_code(c, side, idx, codes + i * c->code_bytes);
	}
	return HSQ_OK;
}

void hsq_codec_decode(const hsq_codec *c, const uint8_t *codes, size_t n, float *x)
{
	float side[CODEC_MAX_SIDE];
	uint8_t idx[CODEC_MAX_FIELDS];
	for (size_t i = 0; i < n; i++) {
		hsq_codec_unpack_code(c, codes + i * c->code_bytes, side, idx);
		c->ops->decode(c, side, idx, x + i * (size_t)c->dim);
	}
}

hsq_status hsq_codec_query_new(const hsq_codec *c, hsq_codec_query **out)
{
	hsq_status st = HSQ_OK;
	hsq_codec_query *q = calloc(1, sizeof *q);
	*out = NULL;
	if (!q)
		goto nomem;
	q->codec = c;
	q->rot = calloc((size_t)c->dim, sizeof(float));
	if (!q->rot)
		goto nomem;
	for (int r = 0; r < c->n_regions; r++) {
		const codec_region *reg = &c->region[r];
		size_t len = codec_lut_len(reg);
		q->lut[r].region = reg;
		q->lut[r].table = calloc(len ? len : 1, sizeof(float));
		if (!q->lut[r].table)
			goto nomem;
	}
	*out = q;
	return HSQ_OK;
nomem:
	st = hsq_fail(HSQ_ERR_NOMEM, "%s: out of memory for a query's look-up tables",
		      hsq_codec_kind_name(c->params.kind));
	hsq_codec_query_free(q);
	return st;
}

void hsq_codec_query_set(hsq_codec_query *q, const float *x)
{
	q->codec->ops->query_set(q->codec, q, x);
}

void hsq_codec_dot(const hsq_codec_query *q, const uint8_t *codes, size_t n, float *scores)
{
	const hsq_codec *c = q->codec;
	for (size_t i = 0; i < n; i++)
		scores[i] = c->ops->score(q, codes + i * c->code_bytes);
}

void hsq_codec_query_free(hsq_codec_query *q)
{
	if (!q)
		return;
	free(q->rot);
	for (int r = 0; r < 2; r++)
		free(q->lut[r].table);
	free(q);
}

size_t codec_lut_len(const codec_region *reg)
{
	if (reg->byte_width)
		return reg->n_bytes * 256;
	if (reg->group_width)
		return (size_t)reg->n_chunks << (reg->chunk_fields * reg->group_width);
	return reg->lut_len;
}

/* Table of `per` consecutive fields of width bw starting at field f0 (fields
 * past n contribute 0), indexed by their packed bits: built by doubling
 * the table one field at a time (new index = old index | level << shift). */
static void fill_packed(float *t, int per, int bw, size_t f0, int n, const float *w, const float *lv)
{
	int size = 1, nl = 1 << bw;
	t[0] = 0.0f;
	for (int s = 0; s < per; s++) {
		size_t f = f0 + (size_t)s;
		float wf = f < (size_t)n ? w[f] : 0.0f;
		for (int k = nl - 1; k >= 0; k--)
			for (int o = 0; o < size; o++)
				t[k * size + o] = t[o] + wf * lv[k];
		size *= nl;
	}
}

void codec_lut_fill(codec_lut *lut, const float *w, const float *const *level_sets)
{
	const codec_region *reg = lut->region;
	if (reg->byte_width) {
		int per = 8 / reg->byte_width;
		for (size_t p = 0; p < reg->n_bytes; p++)
			fill_packed(lut->table + p * 256, per, reg->byte_width, p * (size_t)per, reg->n_fields, w,
				    level_sets[reg->byte_width]);
		return;
	}
	if (reg->group_width) {
		int gw = reg->group_width, cf = reg->chunk_fields;
		size_t tsz = (size_t)1 << (cf * gw);
		for (int ch = 0; ch < reg->n_chunks; ch++)
			fill_packed(lut->table + ch * tsz, cf, gw, (size_t)ch * cf, reg->n_fields, w,
				    level_sets[gw]);
		return;
	}
	for (int f = 0; f < reg->n_fields; f++) {
		const float *lv = level_sets[reg->width[f]];
		float *t = lut->table + reg->lut_off[f];
		for (int k = 0; k < (1 << reg->width[f]); k++)
			t[k] = w[f] * lv[k];
	}
}

/* Group mode: 8 fields in w bytes, read as one little-endian word, looked
 * up chunk by chunk. */
static float eval_groups(const codec_region *reg, const float *t, const uint8_t *packed)
{
	int gw = reg->group_width, cf = reg->chunk_fields, cbits = cf * gw, per = 8 / cf;
	size_t tsz = (size_t)1 << cbits, mask = tsz - 1;
	float s0 = 0.0f, s1 = 0.0f;
	int ch = 0;
	size_t g = 0;
	if (gw == 3) {
		/* The 3-bit case, unrolled: 3 bytes hold 4 chunks of 6 bits. */
		for (; (size_t)ch + 4 <= (size_t)reg->n_chunks && g * 3 + 3 <= reg->n_bytes; g++, ch += 4) {
			const uint8_t *p = packed + g * 3;
			uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
			const float *tc = t + (size_t)ch * 64;
			s0 += tc[v & 63] + tc[128 + ((v >> 12) & 63)];
			s1 += tc[64 + ((v >> 6) & 63)] + tc[192 + (v >> 18)];
		}
	}
	for (; ch < reg->n_chunks; g++) {
		size_t at = g * (size_t)gw, nb = reg->n_bytes - at < (size_t)gw ? reg->n_bytes - at : (size_t)gw;
		uint64_t v = 0;
		for (size_t b = 0; b < nb; b++)
			v |= (uint64_t)packed[at + b] << (8 * b);
		for (int k = 0; k < per && ch < reg->n_chunks; k++, ch++) {
			float e = t[(size_t)ch * tsz + ((v >> (k * cbits)) & mask)];
			if (k & 1)
				s1 += e;
			else
				s0 += e;
		}
	}
	return s0 + s1;
}

float codec_lut_eval(const codec_lut *lut, const uint8_t *packed)
{
	const codec_region *reg = lut->region;
	const float *t = lut->table;
	if (reg->byte_width) {
		/* Four partial sums break the add dependency chain. */
		float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
		size_t p = 0, n = reg->n_bytes;
		for (; p + 4 <= n; p += 4, t += 1024) {
			s0 += t[packed[p]];
			s1 += t[256 + packed[p + 1]];
			s2 += t[512 + packed[p + 2]];
			s3 += t[768 + packed[p + 3]];
		}
		for (; p < n; p++, t += 256)
			s0 += t[packed[p]];
		return (s0 + s1) + (s2 + s3);
	}
	if (reg->group_width)
		return eval_groups(reg, t, packed);
	float s = 0.0f;
	uint64_t acc = 0;
	int have = 0;
	size_t o = 0;
	for (int f = 0; f < reg->n_fields; f++) {
		int wf = reg->width[f];
		while (have < wf) {
			acc |= (uint64_t)packed[o++] << have;
			have += 8;
		}
		s += t[reg->lut_off[f] + (uint32_t)(acc & ((1u << wf) - 1u))];
		acc >>= wf;
		have -= wf;
	}
	return s;
}

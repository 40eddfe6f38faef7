/* codec.h - the codec interface behind hsq_codec_* (internal).
 *
 * One encoded vector is `code_bytes` bytes:
 *
 *   [side: n_side fp16 values, little-endian]
 *   [region 0: packed fields, LSB-first within each byte]
 *   [region 1 (tq-qjl only): packed fields, starting on a byte boundary]
 *
 * A field is one quantization index of `width` bits (widths may differ per
 * field: SpectralQuant). Field f of a region whose widths are all w, with w
 * dividing 8, lies in byte f / (8/w) at bit (f % (8/w)) * w, which lets the
 * dot product index a 256-entry table with each packed byte. For other
 * uniform widths (3 bits: the L2 tier) eight fields fill exactly w bytes,
 * and the dot product reads them as one word and looks up two 3-bit
 * fields at a time in a 64-entry table. */
#ifndef HSQ_CODEC_INTERNAL_H
#define HSQ_CODEC_INTERNAL_H
#include "common/error.h"
#include "common/fp16.h"
#include "hsq_codec.h"

#define CODEC_MAX_SIDE 2
#define CODEC_MAX_FIELDS (2 * HSQ_CODEC_MAX_DIM)

typedef struct codec_region {
	int n_fields;
	uint8_t *width;     /* n_fields: bits of each field, 1..8 */
	uint32_t *lut_off;  /* n_fields: offset of the field's table in a per-field LUT */
	uint32_t lut_len;   /* per-field LUT length: sum of 2^width */
	int byte_width;     /* w if every width is w and w divides 8, else 0 */
	int group_width;    /* w if every width is w and w does not divide 8 (3, 5, 6, 7):
			     * 8 fields fill exactly w bytes, read as one word */
	int chunk_fields;   /* group mode: fields per LUT entry (2 when 2w <= 8) */
	int n_chunks;       /* group mode: ceil(n_fields / chunk_fields) */
	size_t offset;      /* byte offset of the region in a code */
	size_t n_bytes;     /* packed bytes */
	int first_field;    /* index of the region's first field in the codec's field list */
} codec_region;

typedef struct codec_lut {
	const codec_region *region;
	float *table;       /* byte mode: n_bytes x 256; group mode: n_chunks x
			     * 2^(chunk_fields w); field mode: lut_len */
} codec_lut;

typedef struct codec_ops {
	/* One vector -> side values (already rounded to fp16) and one index
	 * per field, regions in order. x is finite. */
	void (*encode)(const hsq_codec *c, const float *x, float *side, uint8_t *idx);
	void (*decode)(const hsq_codec *c, const float *side, const uint8_t *idx, float *x);
	/* Fill the query's tables and constants for query vector q. */
	void (*query_set)(const hsq_codec *c, hsq_codec_query *q, const float *x);
	/* Score of one code from the query's tables. */
	float (*score)(const hsq_codec_query *q, const uint8_t *code);
	void (*free_impl)(void *impl);
} codec_ops;

struct hsq_codec {
	hsq_codec_params params;
	int dim;
	int n_side;                /* fp16 side values at the start of a code */
	int n_regions;             /* 1 or 2 */
	codec_region region[2];
	size_t code_bytes;
	const codec_ops *ops;
	void *impl;                /* the kind's own state */
};

struct hsq_codec_query {
	const hsq_codec *codec;
	float *rot;                /* dim: the query in the codec's basis */
	codec_lut lut[2];          /* one per region */
	float k0;                  /* kind-specific constant (plain: sum q; sq: <q, mean>) */
};

/* Sets up region r with n_fields fields of the given widths (copied) and
 * computes the layout; call in region order, then codec_finish_layout. */
hsq_status codec_region_init(hsq_codec *c, int r, int n_fields, const uint8_t *widths);
void codec_finish_layout(hsq_codec *c);

void codec_pack(const codec_region *reg, const uint8_t *idx, uint8_t *out);
void codec_unpack(const codec_region *reg, const uint8_t *in, uint8_t *idx);

/* Table length (floats) of a LUT for the region. */
size_t codec_lut_len(const codec_region *reg);
/* LUT for a region: entry (field j, level k) = w[j] * levels(j)[k], where
 * levels(j) = level_sets[width of j] (2^width values each). */
void codec_lut_fill(codec_lut *lut, const float *w, const float *const *level_sets);
float codec_lut_eval(const codec_lut *lut, const uint8_t *packed);

/* The fp16 value nearest to f, saturating at +-65504 (side values must stay
 * finite). */
static inline float codec_round_f16(float f)
{
	if (f > 65504.0f)
		f = 65504.0f;
	else if (f < -65504.0f)
		f = -65504.0f;
	return hsq_f16_to_f32(hsq_f32_to_f16(f));
}

/* Kind constructors: fill c->ops, c->impl, n_side and the regions. */
hsq_status codec_plain_init(hsq_codec *c);
hsq_status codec_tq_init(hsq_codec *c);

/* Query-weighted rounding for a TQ codec (4.1 of docs/tiers.md). m: the
 * dim x dim weight of the coding error e in x's basis, E[(q.e)^2] = e^T m e
 * over the queries expected (symmetric, positive semi-definite); damp: the
 * ridge added, as a fraction of m's mean diagonal. u: dim x dim floats, the
 * factor codec_tq_encode_weighted rounds with. */
hsq_status codec_tq_rounding(const hsq_codec *c, const double *m, double damp, float *u);
/* Encodes x as hsq_codec_encode would, but picks the levels that make
 * e^T m e small rather than |e|^2; decodes with hsq_codec_decode. */
hsq_status codec_tq_encode_weighted(const hsq_codec *c, const float *x, const float *u, uint8_t *code);
hsq_status codec_sq_init(hsq_codec *c);

/* Unpacks one code into its side values and field indices (tests). */
void hsq_codec_unpack_code(const hsq_codec *c, const uint8_t *code, float *side, uint8_t *idx);
/* Packs side values and indices into one code (tests). */
void hsq_codec_pack_code(const hsq_codec *c, const float *side, const uint8_t *idx, uint8_t *code);
/* Number of fields over all regions. */
int hsq_codec_n_fields(const hsq_codec *c);

#endif

/* codec_plain.c - Plain-KV: per-vector asymmetric scalar quantization with
 * no rotation. Side data: the vector's minimum and the step (fp16 each);
 * value j is stored as round((x_j - min) / step) in b bits, step =
 * (max - min) / (2^b - 1). This is the baseline the rotation-based codecs
 * must beat: it adapts to each vector's range but an outlier coordinate
 * stretches that range for all the others. */
#include <math.h>
#include <stdlib.h>

#include "codec/codec.h"

typedef struct plain_impl {
	float ramp[256]; /* level k of the LUT is just k */
} plain_impl;

static void plain_encode(const hsq_codec *c, const float *x, float *side, uint8_t *idx)
{
	int d = c->dim, top = (1 << c->params.bits) - 1;
	float lo = x[0], hi = x[0];
	for (int j = 1; j < d; j++) {
		lo = fminf(lo, x[j]);
		hi = fmaxf(hi, x[j]);
	}
	/* Quantize against the stored (fp16) min and step so that decoding
	 * sees exactly what encoding assumed. */
	float lo16 = codec_round_f16(lo);
	float step16 = codec_round_f16((hi - lo16) / (float)top);
	if (step16 < 0.0f)
		step16 = 0.0f;
	side[0] = lo16;
	side[1] = step16;
	float inv = step16 > 0.0f ? 1.0f / step16 : 0.0f;
	for (int j = 0; j < d; j++) {
		float k = rintf((x[j] - lo16) * inv);
		idx[j] = (uint8_t)(k < 0.0f ? 0 : k > (float)top ? top : (int)k);
	}
}

static void plain_decode(const hsq_codec *c, const float *side, const uint8_t *idx, float *x)
{
	for (int j = 0; j < c->dim; j++)
		x[j] = side[0] + side[1] * (float)idx[j];
}

static void plain_query_set(const hsq_codec *c, hsq_codec_query *q, const float *x)
{
	const plain_impl *im = c->impl;
	const float *sets[9];
	float sum = 0.0f;
	for (int j = 0; j < c->dim; j++) {
		q->rot[j] = x[j];
		sum += x[j];
	}
	for (int b = 0; b <= 8; b++)
		sets[b] = im->ramp;
	q->k0 = sum;
	codec_lut_fill(&q->lut[0], q->rot, sets);
}

static float plain_score(const hsq_codec_query *q, const uint8_t *code)
{
	/* <q, min + step k> = min sum(q) + step sum(q_j k_j) */
	const hsq_codec *c = q->codec;
	float lo = hsq_f16_to_f32((uint16_t)(code[0] | (code[1] << 8)));
	float step = hsq_f16_to_f32((uint16_t)(code[2] | (code[3] << 8)));
	return lo * q->k0 + step * codec_lut_eval(&q->lut[0], code + c->region[0].offset);
}

static const codec_ops plain_ops = {
	.encode = plain_encode,
	.decode = plain_decode,
	.query_set = plain_query_set,
	.score = plain_score,
	.free_impl = free,
};

hsq_status codec_plain_init(hsq_codec *c)
{
	plain_impl *im = malloc(sizeof *im);
	if (!im)
		return hsq_fail(HSQ_ERR_NOMEM, "plain: out of memory");
	for (int k = 0; k < 256; k++)
		im->ramp[k] = (float)k;
	c->impl = im;
	c->ops = &plain_ops;
	c->n_side = 2;
	uint8_t widths[HSQ_CODEC_MAX_DIM];
	for (int j = 0; j < c->dim; j++)
		widths[j] = (uint8_t)c->params.bits;
	return codec_region_init(c, 0, c->dim, widths);
}

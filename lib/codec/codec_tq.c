/* codec_tq.c - TQ-KV (TurboQuant) and TQ-QKV (TurboQuant + QJL residual).
 *
 * TQ-KV: y = R x with R the seeded randomized Hadamard rotation
 * (hadamard.h). The coordinates of y / |x| behave like those of a random
 * unit vector, whose density is known in closed form (a Beta law, near
 * N(0, 1/d)), so one data-oblivious Lloyd-Max codebook for that density
 * quantizes every coordinate. Side data: |x| in fp16.
 *
 * TQ-QKV (keys only): the same at b-1 bits, then the residual r = y - y^
 * is sketched as sign(S r) with S a seeded d x d Gaussian matrix, plus |r|
 * in fp16. For a query q (rotated the same way),
 *   <q, y^> + sqrt(pi/2)/d |r| <S q, sign(S r)>
 * is an unbiased estimator of <q, y> over the draw of S, since
 * E[<s, q> sign(<s, r>)] = sqrt(2/pi) <q, r>/|r| for s ~ N(0, I). Decoding
 * uses the same formula as a vector, y^ + sqrt(pi/2)/d |r| S^T sign(S r).
 * The estimator trades the MSE codebook's shrinkage bias for variance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec/hadamard.h"
#include "codec/lloyd_max.h"
#include "common/linalg.h"
#include "common/rng.h"
#include "common/vec_f32.h"

typedef struct tq_impl {
	hsq_rotation *rot;
	const hsq_codebook *cb;  /* Beta(dim) codebook at the MSE bits */
	int qjl;                 /* 1: tq-qjl */
	float *sketch;           /* qjl: dim x dim Gaussian S, row-major */
	float qjl_scale;         /* qjl: sqrt(pi/2) / dim */
	float levels[256];       /* codebook levels / sqrt(dim): a unit-norm vector's scale */
	float signs[2];          /* qjl LUT levels: bit 0 -> -1, bit 1 -> +1 */
} tq_impl;

static void tq_free(void *p)
{
	tq_impl *im = p;
	if (!im)
		return;
	hsq_rotation_free(im->rot);
	free(im->sketch);
	free(im);
}

/* MSE stage on rotated y with norm |x| (already fp16-rounded): indices and
 * the reconstruction y^ in the rotated basis. */
static void mse_stage(const hsq_codec *c, const float *y, float norm16, uint8_t *idx, float *yhat)
{
	const tq_impl *im = c->impl;
	int d = c->dim;
	float u[HSQ_CODEC_MAX_DIM];
	float to_unit = norm16 > 0.0f ? sqrtf((float)d) / norm16 : 0.0f;
	for (int j = 0; j < d; j++)
		u[j] = y[j] * to_unit;
	codec_count_below(u, d, im->cb->threshold, im->cb->n - 1, idx);
	for (int j = 0; j < d; j++)
		yhat[j] = norm16 * im->levels[idx[j]];
}

static void tq_encode(const hsq_codec *c, const float *x, float *side, uint8_t *idx)
{
	const tq_impl *im = c->impl;
	int d = c->dim;
	float y[HSQ_CODEC_MAX_DIM], yhat[HSQ_CODEC_MAX_DIM];
	double n2 = 0.0;
	for (int j = 0; j < d; j++)
		n2 += (double)x[j] * x[j];
	float norm16 = codec_round_f16((float)sqrt(n2));
	side[0] = norm16;
	hsq_rotation_apply(im->rot, x, y);
	mse_stage(c, y, norm16, idx, yhat);
	if (!im->qjl)
		return;
	double r2 = 0.0;
	float r[HSQ_CODEC_MAX_DIM];
	for (int j = 0; j < d; j++) {
		r[j] = y[j] - yhat[j];
		r2 += (double)r[j] * r[j];
	}
	side[1] = codec_round_f16((float)sqrt(r2));
	uint8_t *sg = idx + d;
	for (int i = 0; i < d; i++)
		sg[i] = codec_dotf(im->sketch + (size_t)i * d, r, d) >= 0.0f;
}

static void tq_decode(const hsq_codec *c, const float *side, const uint8_t *idx, float *x)
{
	const tq_impl *im = c->impl;
	int d = c->dim;
	float y[HSQ_CODEC_MAX_DIM];
	for (int j = 0; j < d; j++)
		y[j] = side[0] * im->levels[idx[j]];
	if (im->qjl) {
		float a = im->qjl_scale * side[1];
		const uint8_t *sg = idx + d;
		for (int i = 0; i < d; i++)
			codec_axpyf(y, sg[i] ? a : -a, im->sketch + (size_t)i * d, d);
	}
	hsq_rotation_apply_t(im->rot, y, x);
}

static void tq_query_set(const hsq_codec *c, hsq_codec_query *q, const float *x)
{
	const tq_impl *im = c->impl;
	int d = c->dim;
	const float *sets[9];
	hsq_rotation_apply(im->rot, x, q->rot);
	for (int b = 0; b <= 8; b++)
		sets[b] = im->levels;
	codec_lut_fill(&q->lut[0], q->rot, sets);
	if (!im->qjl)
		return;
	float sq[HSQ_CODEC_MAX_DIM];
	for (int i = 0; i < d; i++)
		sq[i] = im->qjl_scale * codec_dotf(im->sketch + (size_t)i * d, q->rot, d);
	sets[1] = im->signs;
	codec_lut_fill(&q->lut[1], sq, sets);
}

static float tq_score(const hsq_codec_query *q, const uint8_t *code)
{
	const hsq_codec *c = q->codec;
	const tq_impl *im = c->impl;
	float norm = hsq_f16_to_f32((uint16_t)(code[0] | (code[1] << 8)));
	float s = norm * codec_lut_eval(&q->lut[0], code + c->region[0].offset);
	if (im->qjl) {
		float rnorm = hsq_f16_to_f32((uint16_t)(code[2] | (code[3] << 8)));
		s += rnorm * codec_lut_eval(&q->lut[1], code + c->region[1].offset);
	}
	return s;
}

/* R applied to each row of src (d x d): into the rows of dst, or with
 * transposed into its columns. buf: 2 d floats. */
static void rotate_rows(const hsq_rotation *rot, const double *src, int d, int transposed, double *dst, float *buf)
{
	for (int i = 0; i < d; i++) {
		for (int j = 0; j < d; j++)
			buf[j] = (float)src[(size_t)i * d + j];
		hsq_rotation_apply(rot, buf, buf + d);
		for (int j = 0; j < d; j++)
			dst[transposed ? (size_t)j * d + i : (size_t)i * d + j] = buf[d + j];
	}
}

hsq_status codec_tq_rounding(const hsq_codec *c, const double *m, double damp, float *u)
{
	if (c->params.kind != HSQ_CODEC_TQ)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "weighted rounding needs a tq codec, not %s",
				hsq_codec_kind_name(c->params.kind));
	const tq_impl *im = c->impl;
	int d = c->dim;
	size_t dd = (size_t)d * d;
	double *w = malloc(3 * dd * sizeof *w);
	float *col = malloc(2 * (size_t)d * sizeof *col);
	hsq_status st = HSQ_OK;
	if (!w || !col) {
		st = hsq_fail(HSQ_ERR_NOMEM, "tq: out of memory for a %dx%d rounding weight", d, d);
		goto done;
	}
	/* w = R m R^T: the weight in the rotated basis the codebook rounds in.
	 * a = R m column by column (m is symmetric: its column j is its row
	 * j), then w = a R^T row by row. */
	double *a = w + dd, *up = w + 2 * dd;
	rotate_rows(im->rot, m, d, 1, a, col);
	rotate_rows(im->rot, a, d, 0, w, col);
	double mean_diag = 0.0;
	for (int i = 0; i < d; i++)
		mean_diag += w[(size_t)i * d + i] / d;
	/* Symmetrize what float rounding broke, and damp: without queries
	 * (mean_diag 0) this is the identity, plain nearest rounding. */
	double ridge = mean_diag > 0.0 ? damp * mean_diag : 1.0;
	for (int i = 0; i < d; i++) {
		for (int j = 0; j < i; j++)
			w[(size_t)i * d + j] = w[(size_t)j * d + i] = 0.5 * (w[(size_t)i * d + j] + w[(size_t)j * d + i]);
		w[(size_t)i * d + i] += ridge;
	}
	if ((st = hsq_inverse_cholesky_upper(w, d, up, a)))
		goto done;
	for (size_t i = 0; i < dd; i++)
		u[i] = (float)up[i];
done:
	free(w);
	free(col);
	return st;
}

hsq_status codec_tq_encode_weighted(const hsq_codec *c, const float *x, const float *u, uint8_t *code)
{
	const tq_impl *im = c->impl;
	int d = c->dim;
	float y[HSQ_CODEC_MAX_DIM], side[CODEC_MAX_SIDE];
	uint8_t idx[HSQ_CODEC_MAX_DIM];
	if (c->params.kind != HSQ_CODEC_TQ)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "weighted rounding needs a tq codec, not %s",
				hsq_codec_kind_name(c->params.kind));
	double n2 = 0.0;
	for (int j = 0; j < d; j++) {
		if (!isfinite(x[j]))
			return hsq_fail(HSQ_ERR_INVALID_ARG, "tq: value %d of the vector is not finite; only finite vectors can be encoded", j);
		n2 += (double)x[j] * x[j];
	}
	float norm16 = codec_round_f16((float)sqrt(n2));
	side[0] = norm16;
	hsq_rotation_apply(im->rot, x, y);
	float to_unit = norm16 > 0.0f ? sqrtf((float)d) / norm16 : 0.0f;
	for (int j = 0; j < d; j++)
		y[j] *= to_unit;
	/* Coordinate by coordinate: the nearest level, then the error, scaled
	 * by the factor's diagonal, is taken off the coordinates still to be
	 * rounded along row j of u. This minimizes e^T w e greedily (GPTQ's
	 * order), where nearest rounding minimizes |e|^2. */
	for (int j = 0; j < d; j++) {
		codec_count_below(&y[j], 1, im->cb->threshold, im->cb->n - 1, &idx[j]);
		const float *uj = u + (size_t)j * d;
		float err = (y[j] - im->cb->level[idx[j]]) / uj[j];
		/* y[k] -= err * u[j][k] for k > j, vectorized (gcc -O2 leaves the
		 * scalar loop scalar): d^2 per key, most of encoding one. Each
		 * element as the scalar loop: y + (-err) u is y - err u exactly. */
		axpy_f32(y + j + 1, -err, uj + j + 1, d - j - 1);
	}
	hsq_codec_pack_code(c, side, idx, code);
	return HSQ_OK;
}

static const codec_ops tq_ops = {
	.encode = tq_encode,
	.decode = tq_decode,
	.query_set = tq_query_set,
	.score = tq_score,
	.free_impl = tq_free,
};

hsq_status codec_tq_init(hsq_codec *c)
{
	hsq_status st;
	int d = c->dim;
	tq_impl *im = calloc(1, sizeof *im);
	if (!im)
		return hsq_fail(HSQ_ERR_NOMEM, "tq: out of memory");
	c->impl = im;
	c->ops = &tq_ops;
	im->qjl = c->params.kind == HSQ_CODEC_TQ_QJL;
	int mse_bits = c->params.bits - im->qjl;
	st = hsq_rotation_new(d, c->params.seed, &im->rot);
	if (st != HSQ_OK)
		return st;
	st = hsq_codebook_get(HSQ_DENSITY_BETA, d, mse_bits, &im->cb);
	if (st != HSQ_OK)
		return st;
	for (int k = 0; k < im->cb->n; k++)
		im->levels[k] = im->cb->level[k] / sqrtf((float)d);
	uint8_t widths[HSQ_CODEC_MAX_DIM];
	memset(widths, mse_bits, sizeof widths);
	c->n_side = im->qjl ? 2 : 1;
	st = codec_region_init(c, 0, d, widths);
	if (st != HSQ_OK || !im->qjl)
		return st;

	im->sketch = malloc(sizeof(float) * (size_t)d * d);
	if (!im->sketch)
		return hsq_fail(HSQ_ERR_NOMEM, "tq-qjl: out of memory for a %dx%d sketch", d, d);
	/* The sketch has its own stream so that changing it never moves the
	 * rotation of the same seed. */
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, c->params.seed, 0x51e7c4ULL);
	hsq_rng_fill_normal(&rng, im->sketch, (size_t)d * d, 1.0);
	im->qjl_scale = sqrtf((float)M_PI / 2.0f) / (float)d;
	im->signs[0] = -1.0f;
	im->signs[1] = 1.0f;
	memset(widths, 1, sizeof widths);
	return codec_region_init(c, 1, d, widths);
}

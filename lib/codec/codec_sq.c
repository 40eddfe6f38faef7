/* codec_sq.c - SQ-KV and SQU-KV (SpectralQuant): a per-head eigenbasis
 * learnt from calibration vectors, with bits spent where the variance is.
 *
 * Calibration (one per head and per path: K and V use separate sets):
 * mean mu and covariance C of the samples, C = U^T diag(lambda) U with
 * lambda descending. The effective dimension d_eff is placed at the largest
 * spectral gap lambda_k / lambda_{k+1} when that gap is at least
 * gap_ratio; a flat spectrum (no such gap) keeps d_eff = dim. Pruning at a
 * gap rather than at an energy fraction is what keeps one spurious
 * eigenvalue from entering the head.
 *
 * Bits: the budget is b * dim index bits per vector (the same as TQ-KV at
 * b bits). Each of the dim - d_eff tail coordinates gets the fixed floor
 * tail_bits; the rest goes to the d_eff head coordinates, by greedy
 * integer water-filling on the Gaussian Lloyd-Max distortion
 * lambda_i D(b_i) (SQ) or uniformly (SQU), never more than max_bits to one
 * coordinate. Bits left when every head coordinate is capped are not
 * stored: at large budgets SpectralQuant is smaller than nominal.
 *
 * Coding: y = U (x - mu); the vector's scale s = sqrt(sum y_i^2 / sum
 * lambda_i) over the stored coordinates (b_i > 0) is kept in fp16, and
 * coordinate i is quantized with the Gaussian Lloyd-Max codebook of b_i
 * bits scaled by s sqrt(lambda_i). Coordinates without bits decode to the
 * calibration mean. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "codec/codec_kernels.h"
#include "codec/lloyd_max.h"
#include "common/crc32c.h"
#include "common/le.h"
#include "common/linalg.h"

struct hsq_sq_calib {
	int dim;
	int d_eff;               /* head coordinates, 1..dim */
	uint64_t n_samples;      /* calibration rows it was learnt from */
	hsq_sq_calib_params params;
	double *mean;            /* dim */
	double *eval;            /* dim, descending, >= 0 */
	double *evec;            /* dim x dim, row i = eigenvector of eval[i] */
};

hsq_sq_calib_params hsq_sq_calib_default_params(void)
{
	hsq_sq_calib_params p = {.gap_ratio = 4.0, .tail_bits = 1, .max_bits = 8};
	return p;
}

static hsq_status check_calib_params(const hsq_sq_calib_params *p)
{
	if (!(p->gap_ratio > 1.0) || !isfinite(p->gap_ratio))
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"sq calibration: gap ratio %g must be a finite number above 1 (default 4)",
				p->gap_ratio);
	if (p->tail_bits < 0 || p->tail_bits > 4)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"sq calibration: tail floor of %d bits out of range 0..4 (default 1)",
				p->tail_bits);
	if (p->max_bits < 1 || p->max_bits > 8)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"sq calibration: per-coordinate cap of %d bits out of range 1..8 (default 8)",
				p->max_bits);
	if (p->tail_bits > p->max_bits)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"sq calibration: tail floor %d exceeds the per-coordinate cap %d",
				p->tail_bits, p->max_bits);
	return HSQ_OK;
}

static hsq_status calib_alloc(int dim, hsq_sq_calib **out)
{
	hsq_sq_calib *c = calloc(1, sizeof *c);
	*out = NULL;
	if (!c)
		return hsq_fail(HSQ_ERR_NOMEM, "sq calibration: out of memory");
	c->dim = dim;
	c->mean = calloc((size_t)dim, sizeof(double));
	c->eval = calloc((size_t)dim, sizeof(double));
	c->evec = calloc((size_t)dim * dim, sizeof(double));
	if (!c->mean || !c->eval || !c->evec) {
		hsq_sq_calib_free(c);
		return hsq_fail(HSQ_ERR_NOMEM, "sq calibration: out of memory for dimension %d", dim);
	}
	*out = c;
	return HSQ_OK;
}

void hsq_sq_calib_free(hsq_sq_calib *c)
{
	if (!c)
		return;
	free(c->mean);
	free(c->eval);
	free(c->evec);
	free(c);
}

/* Largest gap lambda_k / lambda_{k+1}; zero eigenvalues (fewer samples
 * than dimensions) are floored so the ratio stays finite. */
static int spectral_gap_deff(const double *ev, int dim, double gap_ratio)
{
	if (!(ev[0] > 0.0))
		return dim;
	double floor = ev[0] * 1e-12, best = 0.0;
	int best_k = dim;
	for (int k = 0; k + 1 < dim; k++) {
		double g = fmax(ev[k], floor) / fmax(ev[k + 1], floor);
		if (g > best) {
			best = g;
			best_k = k + 1;
		}
	}
	return best >= gap_ratio ? best_k : dim;
}

hsq_status hsq_sq_calibrate(const float *x, size_t n, int dim, const hsq_sq_calib_params *params,
			    hsq_sq_calib **out)
{
	hsq_status st;
	hsq_sq_calib *c = NULL;
	double *cov = NULL;
	hsq_sq_calib_params p = params ? *params : hsq_sq_calib_default_params();
	*out = NULL;
	st = check_calib_params(&p);
	if (st != HSQ_OK)
		return st;
	if (dim < HSQ_CODEC_MIN_DIM || dim > HSQ_CODEC_MAX_DIM)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "sq calibration: dimension %d out of range %d..%d",
				dim, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (n < 2)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"sq calibration: %zu sample vectors; need at least 2 (ideally several times the dimension %d)",
				n, dim);
	for (size_t i = 0; i < n * (size_t)dim; i++)
		if (!isfinite(x[i]))
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"sq calibration: value %zu of sample %zu is not finite",
					i % (size_t)dim, i / (size_t)dim);
	st = calib_alloc(dim, &c);
	if (st != HSQ_OK)
		goto cleanup;
	c->params = p;
	c->n_samples = n;
	cov = calloc((size_t)dim * dim, sizeof(double));
	if (!cov) {
		st = hsq_fail(HSQ_ERR_NOMEM, "sq calibration: out of memory for the covariance");
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < dim; j++)
			c->mean[j] += x[i * (size_t)dim + j];
	for (int j = 0; j < dim; j++)
		c->mean[j] /= (double)n;
	/* Upper triangle of sum (x - mu)(x - mu)^T, then mirrored. */
	double row[HSQ_CODEC_MAX_DIM];
	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < dim; j++)
			row[j] = x[i * (size_t)dim + j] - c->mean[j];
		for (int a = 0; a < dim; a++) {
			double ra = row[a], *restrict ca = cov + (size_t)a * dim;
			const double *restrict rb = row;
			int b = a;
			for (; b + 8 <= dim; b += 8) /* blocks of 8 vectorize at -O2 */
				for (int t = 0; t < 8; t++)
					ca[b + t] += ra * rb[b + t];
			for (; b < dim; b++)
				ca[b] += ra * rb[b];
		}
	}
	for (int a = 0; a < dim; a++) {
		for (int b = a; b < dim; b++) {
			double v = cov[(size_t)a * dim + b] / (double)(n - 1);
			cov[(size_t)a * dim + b] = v;
			cov[(size_t)b * dim + a] = v;
		}
	}
	st = hsq_sym_eigen(cov, dim, c->eval, c->evec);
	if (st != HSQ_OK)
		goto cleanup;
	for (int j = 0; j < dim; j++)
		c->eval[j] = fmax(c->eval[j], 0.0); /* round-off below zero */
	c->d_eff = spectral_gap_deff(c->eval, dim, p.gap_ratio);
	*out = c;
	c = NULL;
cleanup:
	free(cov);
	hsq_sq_calib_free(c);
	return st;
}

int hsq_sq_calib_dim(const hsq_sq_calib *c)
{
	return c->dim;
}

int hsq_sq_calib_deff(const hsq_sq_calib *c)
{
	return c->d_eff;
}

const hsq_sq_calib_params *hsq_sq_calib_get_params(const hsq_sq_calib *c)
{
	return &c->params;
}

const double *hsq_sq_calib_eigenvalues(const hsq_sq_calib *c)
{
	return c->eval;
}

hsq_status hsq_sq_calib_allocation(const hsq_sq_calib *c, hsq_codec_kind kind, int bits,
				   uint8_t *alloc)
{
	int d = c->dim, head = c->d_eff, cap = c->params.max_bits, floor = c->params.tail_bits;
	if (kind != HSQ_CODEC_SQ && kind != HSQ_CODEC_SQU)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "sq allocation: codec %s is not sq or squ",
				hsq_codec_kind_name(kind));
	if (bits < 1 || bits > 8)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "sq allocation: %d bits out of range 1..8", bits);
	long budget = (long)bits * d - (long)floor * (d - head);
	if (budget < 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"%s: %d bits per value cannot pay the tail floor of %d bits on %d of %d "
				"coordinates; raise the bits or lower the tail floor",
				hsq_codec_kind_name(kind), bits, floor, d - head, d);
	for (int i = head; i < d; i++)
		alloc[i] = (uint8_t)floor;
	memset(alloc, 0, (size_t)head);
	if (kind == HSQ_CODEC_SQU) {
		long each = budget / head;
		if (each >= cap) {
			memset(alloc, cap, (size_t)head);
			return HSQ_OK;
		}
		long extra = budget - each * head;
		for (int i = 0; i < head; i++)
			alloc[i] = (uint8_t)(each + (i < extra));
		return HSQ_OK;
	}
	/* Greedy water-filling: each bit goes where it removes the most
	 * expected squared error, lambda_i (D(b_i) - D(b_i + 1)). Greedy is
	 * optimal here because D is convex and decreasing in b. */
	double dist[9];
	dist[0] = 1.0;
	for (int b = 1; b <= cap; b++) {
		const hsq_codebook *cb;
		hsq_status st = hsq_codebook_get(HSQ_DENSITY_GAUSSIAN, 0, b, &cb);
		if (st != HSQ_OK)
			return st;
		dist[b] = cb->mse;
	}
	for (long spent = 0; spent < budget; spent++) {
		int best = -1;
		double gain = 0.0;
		for (int i = 0; i < head; i++) {
			if (alloc[i] >= cap)
				continue;
			double g = c->eval[i] * (dist[alloc[i]] - dist[alloc[i] + 1]);
			if (g > gain) {
				gain = g;
				best = i;
			}
		}
		if (best < 0)
			break; /* every head coordinate capped or without variance */
		alloc[best]++;
	}
	return HSQ_OK;
}

/* ------------------------------------------------------------ the codec */

typedef struct sq_impl {
	float *basis;            /* dim x dim, row i = eigenvector i */
	float *mean;             /* dim */
	float *sigma;            /* dim: sqrt(lambda_i) */
	float inv_sqrt_coded;    /* 1 / sqrt(sum of lambda over stored coordinates), 0 if none */
	int *coord;              /* n_fields: eigen-coordinate of each stored field */
	uint8_t alloc[HSQ_CODEC_MAX_DIM];   /* bits per eigen-coordinate */
	const hsq_codebook *cb[9];          /* Gaussian codebook per width */
	const float *level_sets[9];         /* cb[b]->level, for the LUT */
} sq_impl;

static void sq_free(void *p)
{
	sq_impl *im = p;
	if (!im)
		return;
	free(im->basis);
	free(im->mean);
	free(im->sigma);
	free(im->coord);
	free(im);
}

/* y = U (x - mu), all dim eigen-coordinates. */
static void sq_project(const sq_impl *im, int d, const float *x, float *y)
{
	float xc[HSQ_CODEC_MAX_DIM];
	for (int j = 0; j < d; j++)
		xc[j] = x[j] - im->mean[j];
	for (int i = 0; i < d; i++)
		y[i] = codec_dotf(im->basis + (size_t)i * d, xc, d);
}

static void sq_encode(const hsq_codec *c, const float *x, float *side, uint8_t *idx)
{
	const sq_impl *im = c->impl;
	const codec_region *reg = &c->region[0];
	float y[HSQ_CODEC_MAX_DIM];
	sq_project(im, c->dim, x, y);
	/* The scale measures only the coordinates that are stored: energy in
	 * zero-bit coordinates is dropped anyway, and leaving it out makes
	 * re-encoding a decoded vector give back the same codes. */
	double e2 = 0.0;
	for (int f = 0; f < reg->n_fields; f++)
		e2 += (double)y[im->coord[f]] * y[im->coord[f]];
	float s16 = codec_round_f16((float)(sqrt(e2) * im->inv_sqrt_coded));
	side[0] = s16;
	for (int f = 0; f < reg->n_fields; f++) {
		int i = im->coord[f];
		float unit = s16 * im->sigma[i];
		float z = unit > 0.0f ? y[i] / unit : 0.0f;
		idx[f] = (uint8_t)hsq_codebook_index(im->cb[reg->width[f]], z);
	}
}

static void sq_decode(const hsq_codec *c, const float *side, const uint8_t *idx, float *x)
{
	const sq_impl *im = c->impl;
	const codec_region *reg = &c->region[0];
	int d = c->dim;
	float w[HSQ_CODEC_MAX_DIM];
	int n = 0;
	for (int f = 0; f < reg->n_fields; f++) {
		int i = im->coord[f];
		w[n++] = side[0] * im->sigma[i] * im->cb[reg->width[f]]->level[idx[f]];
	}
	for (int j = 0; j < d; j++)
		x[j] = im->mean[j];
	/* x = mu + sum_f yhat_f u_coord(f): rows of the basis, contiguous. */
	for (int f = 0; f < n; f++)
		codec_axpyf(x, w[f], im->basis + (size_t)im->coord[f] * d, d);
}

static void sq_query_set(const hsq_codec *c, hsq_codec_query *q, const float *x)
{
	const sq_impl *im = c->impl;
	const codec_region *reg = &c->region[0];
	int d = c->dim;
	float qmu = 0.0f, w[HSQ_CODEC_MAX_DIM];
	for (int j = 0; j < d; j++)
		qmu += x[j] * im->mean[j];
	for (int i = 0; i < d; i++)
		q->rot[i] = codec_dotf(im->basis + (size_t)i * d, x, d);
	for (int f = 0; f < reg->n_fields; f++)
		w[f] = q->rot[im->coord[f]] * im->sigma[im->coord[f]];
	q->k0 = qmu;
	codec_lut_fill(&q->lut[0], w, im->level_sets);
}

static float sq_score(const hsq_codec_query *q, const uint8_t *code)
{
	const hsq_codec *c = q->codec;
	float s = hsq_f16_to_f32((uint16_t)(code[0] | (code[1] << 8)));
	return q->k0 + s * codec_lut_eval(&q->lut[0], code + c->region[0].offset);
}

static const codec_ops sq_ops = {
	.encode = sq_encode,
	.decode = sq_decode,
	.query_set = sq_query_set,
	.score = sq_score,
	.free_impl = sq_free,
};

hsq_status codec_sq_init(hsq_codec *c)
{
	hsq_status st;
	const hsq_sq_calib *cal = c->params.calib;
	int d = c->dim;
	if (cal->dim != d)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"%s: calibration is for dimension %d but the codec has dimension %d",
				hsq_codec_kind_name(c->params.kind), cal->dim, d);
	sq_impl *im = calloc(1, sizeof *im);
	if (!im)
		return hsq_fail(HSQ_ERR_NOMEM, "sq: out of memory");
	c->impl = im;
	c->ops = &sq_ops;
	c->n_side = 1;
	st = hsq_sq_calib_allocation(cal, c->params.kind, c->params.bits, im->alloc);
	if (st != HSQ_OK)
		return st;
	im->basis = malloc(sizeof(float) * (size_t)d * d);
	im->mean = malloc(sizeof(float) * (size_t)d);
	im->sigma = malloc(sizeof(float) * (size_t)d);
	im->coord = malloc(sizeof(int) * (size_t)d);
	if (!im->basis || !im->mean || !im->sigma || !im->coord)
		return hsq_fail(HSQ_ERR_NOMEM, "sq: out of memory for dimension %d", d);
	double coded = 0.0;
	for (int i = 0; i < d; i++) {
		im->mean[i] = (float)cal->mean[i];
		im->sigma[i] = (float)sqrt(cal->eval[i]);
		if (im->alloc[i])
			coded += cal->eval[i];
	}
	for (size_t i = 0; i < (size_t)d * d; i++)
		im->basis[i] = (float)cal->evec[i];
	im->inv_sqrt_coded = coded > 0.0 ? (float)(1.0 / sqrt(coded)) : 0.0f;
	static const float zero_level[1] = {0.0f};
	im->level_sets[0] = zero_level;
	for (int b = 1; b <= 8; b++) {
		st = hsq_codebook_get(HSQ_DENSITY_GAUSSIAN, 0, b, &im->cb[b]);
		if (st != HSQ_OK)
			return st;
		im->level_sets[b] = im->cb[b]->level;
	}
	uint8_t widths[HSQ_CODEC_MAX_DIM];
	int n = 0;
	for (int i = 0; i < d; i++) {
		if (im->alloc[i] == 0)
			continue; /* not stored: decodes to the calibration mean */
		im->coord[n] = i;
		widths[n++] = im->alloc[i];
	}
	return codec_region_init(c, 0, n, widths);
}

/* --------------------------------------------------- calibration files */

#define CAL_MAGIC "HSQSQCAL"
#define CAL_VERSION 1u
#define CAL_HEADER 64u


/* Payload: mean f32[dim], eigenvalues f64[dim], eigenvectors f32[dim*dim]
 * (float32 is the precision the codec works in), then CRC-32C. */
static size_t payload_bytes(int dim)
{
	return 4 * (size_t)dim + 8 * (size_t)dim + 4 * (size_t)dim * dim;
}

hsq_status hsq_sq_calib_serialize(const hsq_sq_calib *c, uint8_t **buf, size_t *len)
{
	size_t pay = payload_bytes(c->dim), total = CAL_HEADER + pay + 4;
	uint8_t *b = calloc(1, total);
	*buf = NULL;
	*len = 0;
	if (!b)
		return hsq_fail(HSQ_ERR_NOMEM, "sq calibration: out of memory serializing %zu bytes",
				total);
	memcpy(b, CAL_MAGIC, 8);
	put_u32(b + 8, CAL_VERSION);
	put_u32(b + 12, CAL_HEADER);
	put_u32(b + 16, (uint32_t)c->dim);
	put_u32(b + 20, (uint32_t)c->d_eff);
	put_u32(b + 24, (uint32_t)c->params.tail_bits);
	put_u32(b + 28, (uint32_t)c->params.max_bits);
	put_f64(b + 32, c->params.gap_ratio);
	put_u64(b + 40, c->n_samples);
	put_u64(b + 48, (uint64_t)pay);
	put_u32(b + 56, 0); /* flags, reserved */
	put_u32(b + 60, crc32c_update(0, b, 60));
	uint8_t *p = b + CAL_HEADER;
	for (int i = 0; i < c->dim; i++, p += 4)
		put_f32(p, (float)c->mean[i]);
	for (int i = 0; i < c->dim; i++, p += 8)
		put_f64(p, c->eval[i]);
	for (size_t i = 0; i < (size_t)c->dim * c->dim; i++, p += 4)
		put_f32(p, (float)c->evec[i]);
	put_u32(p, crc32c_update(0, b + CAL_HEADER, pay));
	*buf = b;
	*len = total;
	return HSQ_OK;
}

hsq_status hsq_sq_calib_deserialize(const uint8_t *b, size_t len, hsq_sq_calib **out)
{
	hsq_status st = HSQ_OK;
	hsq_sq_calib *c = NULL;
	*out = NULL;
	if (len < 8 || memcmp(b, CAL_MAGIC, 8) != 0)
		return hsq_fail(HSQ_ERR_FORMAT,
				"sq calibration: not a calibration file (magic '%s' expected)", CAL_MAGIC);
	if (len < CAL_HEADER)
		return hsq_fail(HSQ_ERR_TRUNCATED,
				"sq calibration: %zu bytes, shorter than the %u-byte header", len,
				CAL_HEADER);
	uint32_t version = get_u32(b + 8);
	if (version != CAL_VERSION)
		return hsq_fail(HSQ_ERR_UNSUPPORTED,
				"sq calibration: version %u; this build reads version %u (recalibrate or "
				"upgrade)", version, CAL_VERSION);
	if (get_u32(b + 60) != crc32c_update(0, b, 60))
		return hsq_fail(HSQ_ERR_CHECKSUM, "sq calibration: header checksum mismatch");
	uint32_t header = get_u32(b + 12), dim = get_u32(b + 16), d_eff = get_u32(b + 20);
	hsq_sq_calib_params p = {
		.gap_ratio = get_f64(b + 32),
		.tail_bits = (int)get_u32(b + 24),
		.max_bits = (int)get_u32(b + 28),
	};
	if (header != CAL_HEADER)
		return hsq_fail(HSQ_ERR_FORMAT, "sq calibration: header size %u, expected %u", header,
				CAL_HEADER);
	if (dim < HSQ_CODEC_MIN_DIM || dim > HSQ_CODEC_MAX_DIM)
		return hsq_fail(HSQ_ERR_FORMAT, "sq calibration: dimension %u out of range %d..%d", dim,
				HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (d_eff < 1 || d_eff > dim)
		return hsq_fail(HSQ_ERR_FORMAT, "sq calibration: d_eff %u out of range 1..%u", d_eff,
				dim);
	if (p.tail_bits > 4 || p.max_bits > 8 || check_calib_params(&p) != HSQ_OK)
		return hsq_fail(HSQ_ERR_FORMAT,
				"sq calibration: bad parameters (tail %d bits, cap %d bits, gap ratio %g)",
				p.tail_bits, p.max_bits, p.gap_ratio);
	size_t pay = payload_bytes((int)dim);
	if (get_u64(b + 48) != pay)
		return hsq_fail(HSQ_ERR_FORMAT,
				"sq calibration: payload of %llu bytes, expected %zu for dimension %u",
				(unsigned long long)get_u64(b + 48), pay, dim);
	if (len < CAL_HEADER + pay + 4)
		return hsq_fail(HSQ_ERR_TRUNCATED, "sq calibration: %zu bytes, expected %zu", len,
				CAL_HEADER + pay + 4);
	if (len > CAL_HEADER + pay + 4)
		return hsq_fail(HSQ_ERR_FORMAT, "sq calibration: %zu trailing bytes after the payload",
				len - (CAL_HEADER + pay + 4));
	if (get_u32(b + CAL_HEADER + pay) != crc32c_update(0, b + CAL_HEADER, pay))
		return hsq_fail(HSQ_ERR_CHECKSUM, "sq calibration: payload checksum mismatch");
	st = calib_alloc((int)dim, &c);
	if (st != HSQ_OK)
		return st;
	c->d_eff = (int)d_eff;
	c->params = p;
	c->n_samples = get_u64(b + 40);
	const uint8_t *q = b + CAL_HEADER;
	for (uint32_t i = 0; i < dim; i++, q += 4)
		c->mean[i] = get_f32(q);
	for (uint32_t i = 0; i < dim; i++, q += 8)
		c->eval[i] = get_f64(q);
	for (size_t i = 0; i < (size_t)dim * dim; i++, q += 4)
		c->evec[i] = get_f32(q);
	for (uint32_t i = 0; i < dim; i++) {
		if (!isfinite(c->mean[i]) || !isfinite(c->eval[i]) || c->eval[i] < 0.0 ||
		    (i > 0 && c->eval[i] > c->eval[i - 1])) {
			st = hsq_fail(HSQ_ERR_FORMAT,
				      "sq calibration: eigenvalue or mean %u is negative, unsorted or not finite",
				      i);
			goto cleanup;
		}
	}
	for (size_t i = 0; i < (size_t)dim * dim; i++) {
		if (!isfinite(c->evec[i])) {
			st = hsq_fail(HSQ_ERR_FORMAT, "sq calibration: eigenvector entry %zu is not finite",
				      i);
			goto cleanup;
		}
	}
	*out = c;
	c = NULL;
cleanup:
	hsq_sq_calib_free(c);
	return st;
}

hsq_status hsq_sq_calib_save(const hsq_sq_calib *c, const char *path)
{
	hsq_status st;
	uint8_t *buf = NULL;
	size_t len = 0;
	char *tmp = NULL;
	int fd = -1;
	st = hsq_sq_calib_serialize(c, &buf, &len);
	if (st != HSQ_OK)
		return st;
	/* Temporary file in the same directory, fsync, rename: readers see the
	 * old file or the new one, never a torn write. */
	size_t plen = strlen(path);
	tmp = malloc(plen + 16);
	if (!tmp) {
		st = hsq_fail(HSQ_ERR_NOMEM, "sq calibration: out of memory");
		goto cleanup;
	}
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp.XXXXXX", 12);
	fd = mkstemp(tmp);
	if (fd < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: cannot create a temporary file next to it: %s", path,
			      strerror(errno));
		free(tmp);
		tmp = NULL;
		goto cleanup;
	}
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			st = hsq_fail(HSQ_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
			goto cleanup;
		}
		done += (size_t)w;
	}
	if (fsync(fd) != 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (close(fd) != 0) {
		fd = -1;
		st = hsq_fail(HSQ_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
		goto cleanup;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: cannot rename the temporary file into place: %s", path,
			      strerror(errno));
		goto cleanup;
	}
	free(tmp);
	tmp = NULL;
cleanup:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(buf);
	return st;
}

hsq_status hsq_sq_calib_load(const char *path, hsq_sq_calib **out)
{
	hsq_status st = HSQ_OK;
	uint8_t *buf = NULL;
	FILE *f = NULL;
	*out = NULL;
	f = fopen(path, "rb");
	if (!f)
		return hsq_fail(HSQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
		st = hsq_fail(HSQ_ERR_IO, "%s: not a regular file", path);
		goto cleanup;
	}
	size_t len = (size_t)sb.st_size;
	if (len > ((size_t)1 << 28)) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: %zu bytes is far too large for a calibration", path,
			      len);
		goto cleanup;
	}
	buf = malloc(len ? len : 1);
	if (!buf) {
		st = hsq_fail(HSQ_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, len);
		goto cleanup;
	}
	if (fread(buf, 1, len, f) != len) {
		st = hsq_fail(HSQ_ERR_IO, "%s: read failed", path);
		goto cleanup;
	}
	st = hsq_sq_calib_deserialize(buf, len, out);
	if (st != HSQ_OK) {
		/* Name the file in the detail. */
		char detail[400];
		snprintf(detail, sizeof detail, "%s", hsq_last_error());
		st = hsq_fail(st, "%s: %s", path, detail);
	}
cleanup:
	if (f)
		fclose(f);
	free(buf);
	return st;
}

/* codec_metrics.c - the error measures of the codec study.
 *
 * Reconstruction: relMSE (squared error over energy, pooled over rows),
 * direction error 1 - mean cos(x, x^), and the 2D error
 * d2 = relMSE^2 + (2 dir_err)^2: the squared distance from a perfect codec
 * in the plane (relMSE, chord^2), where 2 (1 - cos) is the squared chord
 * between the unit vectors, so both axes are in units of relative squared
 * length.
 *
 * Attention: o = softmax(q K^T / sqrt(d)) V per query, compared with the
 * unquantized output as sum |o - o^|^2 / sum |o|^2, with K and V quantized
 * together, K alone (scores from the codec's LUT dot product) and V alone
 * (decoded values): the K path goes through the softmax, the V path is
 * linear in the value errors. Score bias and variance tell the K path's
 * two error sources apart: the slope of the codec score on the exact score
 * (a shrinking MSE codebook has slope < 1) and the residual variance about
 * that slope (what QJL adds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec_kernels.h"
#include "common/error.h"
#include "eval/codec_metrics.h"

const char *hsq_metric_name(hsq_metric m)
{
	static const char *names[HSQ_N_METRICS] = {
		"relmse", "dir_err", "d2", "relmse_k", "relmse_v",
		"attn_err", "attn_err_k", "attn_err_v", "score_bias", "score_var",
	};
	return (unsigned)m < HSQ_N_METRICS ? names[m] : "unknown";
}

hsq_status hsq_metric_parse(const char *name, hsq_metric *out)
{
	for (int m = 0; name && m < HSQ_N_METRICS; m++) {
		if (!strcmp(name, hsq_metric_name((hsq_metric)m))) {
			*out = (hsq_metric)m;
			return HSQ_OK;
		}
	}
	return hsq_fail(HSQ_ERR_INVALID_ARG,
			"unknown metric '%s' (use relmse, dir_err, d2, relmse_k, relmse_v, attn_err, "
			"attn_err_k, attn_err_v, score_bias or score_var)",
			name ? name : "");
}

void hsq_sq_err(const float *x, const float *y, size_t n, int d, double *err, double *energy)
{
	double e = 0.0, s = 0.0;
	for (size_t i = 0; i < n * (size_t)d; i++) {
		double t = (double)x[i] - y[i];
		e += t * t;
		s += (double)x[i] * x[i];
	}
	*err = e;
	*energy = s;
}

double hsq_cos_sum(const float *x, const float *y, size_t n, int d)
{
	double sum = 0.0;
	for (size_t i = 0; i < n; i++) {
		const float *a = x + i * (size_t)d, *b = y + i * (size_t)d;
		double ab = 0.0, aa = 0.0, bb = 0.0;
		for (int j = 0; j < d; j++) {
			ab += (double)a[j] * b[j];
			aa += (double)a[j] * a[j];
			bb += (double)b[j] * b[j];
		}
		if (aa == 0.0 || bb == 0.0)
			sum += (aa == 0.0 && bb == 0.0) ? 1.0 : 0.0;
		else
			sum += ab / sqrt(aa * bb);
	}
	return sum;
}

void hsq_softmax_rows(double *s, size_t m, size_t n)
{
	for (size_t i = 0; i < m; i++) {
		double *row = s + i * n, mx = row[0], z = 0.0;
		for (size_t j = 1; j < n; j++)
			mx = fmax(mx, row[j]);
		for (size_t j = 0; j < n; j++) {
			row[j] = exp(row[j] - mx);
			z += row[j];
		}
		for (size_t j = 0; j < n; j++)
			row[j] /= z;
	}
}

void hsq_attend(const double *p, const float *v, size_t m, size_t n, int d, double *out)
{
	memset(out, 0, sizeof(double) * m * (size_t)d);
	for (size_t i = 0; i < m; i++)
		for (size_t t = 0; t < n; t++)
			codec_axpyd(out + i * (size_t)d, p[i * n + t], v + t * (size_t)d, d);
}

static double rel_err(const double *a, const double *b, size_t len)
{
	double e = 0.0, s = 0.0;
	for (size_t i = 0; i < len; i++) {
		e += (a[i] - b[i]) * (a[i] - b[i]);
		s += a[i] * a[i];
	}
	return s > 0.0 ? e / s : (e > 0.0 ? INFINITY : 0.0);
}

hsq_status hsq_codec_measure(const hsq_codec *ck, const hsq_codec *cv, const hsq_regime_data *data,
			     double *values)
{
	hsq_status st = HSQ_OK;
	const hsq_regime_shape *sh = &data->shape;
	int d = sh->dim;
	size_t n = (size_t)sh->n_test, m = (size_t)sh->n_query, nd = n * (size_t)d;
	uint8_t *codes_k = NULL, *codes_v = NULL;
	float *kh = NULL, *vh = NULL, *row = NULL;
	double *s = NULL, *sh_ = NULL, *o = NULL, *o_k = NULL, *o_v = NULL, *o_kv = NULL;
	hsq_codec_query *query = NULL;
	if (hsq_codec_get_params(ck)->dim != d || hsq_codec_get_params(cv)->dim != d)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "measure: codec dimension differs from the data's %d",
				d);
	codes_k = malloc(n * hsq_codec_code_bytes(ck));
	codes_v = malloc(n * hsq_codec_code_bytes(cv));
	kh = malloc(sizeof(float) * nd);
	vh = malloc(sizeof(float) * nd);
	row = malloc(sizeof(float) * n);
	s = malloc(sizeof(double) * m * n);
	sh_ = malloc(sizeof(double) * m * n);
	o = malloc(sizeof(double) * m * (size_t)d);
	o_k = malloc(sizeof(double) * m * (size_t)d);
	o_v = malloc(sizeof(double) * m * (size_t)d);
	o_kv = malloc(sizeof(double) * m * (size_t)d);
	if (!codes_k || !codes_v || !kh || !vh || !row || !s || !sh_ || !o || !o_k || !o_v ||
	    !o_kv) {
		st = hsq_fail(HSQ_ERR_NOMEM, "measure: out of memory for %zu tokens", n);
		goto cleanup;
	}
	st = hsq_codec_encode(ck, data->k, n, codes_k);
	if (st == HSQ_OK)
		st = hsq_codec_encode(cv, data->v, n, codes_v);
	if (st == HSQ_OK)
		st = hsq_codec_query_new(ck, &query);
	if (st != HSQ_OK)
		goto cleanup;
	hsq_codec_decode(ck, codes_k, n, kh);
	hsq_codec_decode(cv, codes_v, n, vh);

	double ek, sk, ev, sv;
	hsq_sq_err(data->k, kh, n, d, &ek, &sk);
	hsq_sq_err(data->v, vh, n, d, &ev, &sv);
	double cos_sum = hsq_cos_sum(data->k, kh, n, d) + hsq_cos_sum(data->v, vh, n, d);
	values[HSQ_METRIC_RELMSE_K] = sk > 0.0 ? ek / sk : 0.0;
	values[HSQ_METRIC_RELMSE_V] = sv > 0.0 ? ev / sv : 0.0;
	values[HSQ_METRIC_RELMSE] = sk + sv > 0.0 ? (ek + ev) / (sk + sv) : 0.0;
	values[HSQ_METRIC_DIR_ERR] = 1.0 - cos_sum / (2.0 * (double)n);
	values[HSQ_METRIC_D2] = values[HSQ_METRIC_RELMSE] * values[HSQ_METRIC_RELMSE] +
				4.0 * values[HSQ_METRIC_DIR_ERR] * values[HSQ_METRIC_DIR_ERR];

	/* Scores: exact in double, codec through its LUT dot product. */
	double inv_sqrt_d = 1.0 / sqrt((double)d), ss = 0.0, sh_s = 0.0;
	for (size_t i = 0; i < m; i++) {
		const float *q = data->q + i * (size_t)d;
		for (size_t t = 0; t < n; t++)
			s[i * n + t] = codec_dotd(q, data->k + t * (size_t)d, d) * inv_sqrt_d;
		hsq_codec_query_set(query, q);
		hsq_codec_dot(query, codes_k, n, row);
		for (size_t t = 0; t < n; t++) {
			sh_[i * n + t] = row[t] * inv_sqrt_d;
			ss += s[i * n + t] * s[i * n + t];
			sh_s += sh_[i * n + t] * s[i * n + t];
		}
	}
	double slope = ss > 0.0 ? sh_s / ss : 1.0, resid = 0.0;
	for (size_t i = 0; i < m * n; i++)
		resid += (sh_[i] - slope * s[i]) * (sh_[i] - slope * s[i]);
	values[HSQ_METRIC_SCORE_BIAS] = slope - 1.0;
	values[HSQ_METRIC_SCORE_VAR] = ss > 0.0 ? resid / ss : 0.0;

	hsq_softmax_rows(s, m, n);
	hsq_softmax_rows(sh_, m, n);
	hsq_attend(s, data->v, m, n, d, o);
	hsq_attend(sh_, data->v, m, n, d, o_k);
	hsq_attend(s, vh, m, n, d, o_v);
	hsq_attend(sh_, vh, m, n, d, o_kv);
	values[HSQ_METRIC_ATTN_ERR] = rel_err(o, o_kv, m * (size_t)d);
	values[HSQ_METRIC_ATTN_ERR_K] = rel_err(o, o_k, m * (size_t)d);
	values[HSQ_METRIC_ATTN_ERR_V] = rel_err(o, o_v, m * (size_t)d);
cleanup:
	hsq_codec_query_free(query);
	free(codes_k);
	free(codes_v);
	free(kh);
	free(vh);
	free(row);
	free(s);
	free(sh_);
	free(o);
	free(o_k);
	free(o_v);
	free(o_kv);
	return st;
}

/* context_learn.c - what the learned parts of the method read from a
 * context: the hidden state of the reader's layer at every position, and
 * the attention that a span of queries paid the positions before them
 * (hsq-calibrate's labels); and the calibration a context uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "context/context.h"
#include "kv/tiers.h"
#include "learn/calibration.h"

hsq_status hsq_context_keep_hidden(hsq_context *ctx, int layer)
{
	const hsq_model_info *mi = &ctx->model->info;
	if (layer == -1) {
		free(ctx->hidden);
		ctx->hidden = NULL;
		return HSQ_OK;
	}
	if (layer < 0 || layer >= mi->n_layer)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "layer %d is out of range; the model has layers 0..%d", layer,
				mi->n_layer - 1);
	if (ctx->hidden && ctx->hidden_layer == layer)
		return HSQ_OK;
	float *h = malloc((size_t)ctx->n_ctx * (size_t)mi->n_embd * sizeof *h);
	if (!h)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory keeping the hidden states of %d positions (%.1f MiB)",
				ctx->n_ctx, (double)ctx->n_ctx * mi->n_embd * sizeof *h / 1048576.0);
	free(ctx->hidden);
	ctx->hidden = h;
	ctx->hidden_layer = layer;
	ctx->hidden_from = ctx->n_past;
	return HSQ_OK;
}

hsq_status hsq_context_hidden(const hsq_context *ctx, int p0, int n, float *out)
{
	if (!ctx->hidden)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the context keeps no hidden states; call hsq_context_keep_hidden before evaluating");
	if (p0 < ctx->hidden_from || n < 0 || p0 > ctx->n_past - n)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"positions %d..%d have no kept hidden state; positions %d..%d were evaluated while the context kept them",
				p0, p0 + n - 1, ctx->hidden_from, ctx->n_past - 1);
	size_t E = (size_t)ctx->model->info.n_embd;
	memcpy(out, ctx->hidden + (size_t)p0 * E, (size_t)n * E * sizeof *out);
	return HSQ_OK;
}

hsq_status hsq_context_put_hidden(hsq_context *ctx, int p0, int n, const float *rows)
{
	if (!ctx->hidden)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the context keeps no hidden states; call hsq_context_keep_hidden first");
	if (n < 1 || p0 < 0 || p0 + n != ctx->hidden_from)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"hidden states of positions %d..%d do not end where the kept ones begin (position %d)", p0,
				p0 + n - 1, ctx->hidden_from);
	size_t E = (size_t)ctx->model->info.n_embd;
	memcpy(ctx->hidden + (size_t)p0 * E, rows, (size_t)n * E * sizeof *rows);
	ctx->hidden_from = p0;
	return HSQ_OK;
}

/* One layer of hsq_context_attention_mass: its keys 0..last are read
 * once, then every query head of the span attends to them. */
typedef struct mass_job {
	const hsq_context *ctx;
	int q0, nq, n_keys;
	float *out;
	float **keys;   /* [threads][(q0 + nq) * kv_width] */
	double **score; /* [threads][q0 + nq] */
} mass_job;

static void mass_layer(void *arg, int l, int thread)
{
	const mass_job *J = arg;
	const hsq_context *ctx = J->ctx;
	const hsq_model_info *mi = &ctx->model->info;
	int H = mi->n_head_kv, G = mi->n_head / H, hd = mi->head_dim, last = J->q0 + J->nq;
	int window = ctx->model->layers[l].window;
	size_t kvw = context_kv_width(ctx), qw = (size_t)mi->n_head * hd;
	float *K = J->keys[thread];
	double *s = J->score[thread];
	double scale = 1.0 / sqrt((double)hd);
	int first_kept = window && last > window ? last - window : 0;
	context_kv_read(ctx, l, 0, first_kept, last - first_kept, K + (size_t)first_kept * kvw);
	float *out = J->out + (size_t)l * H * J->n_keys;
	memset(out, 0, (size_t)H * J->n_keys * sizeof *out);
	for (int o = J->q0; o < last; o++) {
		const float *qrow = ctx->obs_q + ((size_t)l * HSQ_OBS_MAX + (size_t)(o % HSQ_OBS_MAX)) * qw;
		int p0 = window && o - window + 1 > 0 ? o - window + 1 : 0;
		for (int hq = 0; hq < mi->n_head; hq++) {
			int g = hq / G;
			const float *q = qrow + (size_t)hq * hd;
			double mx = -INFINITY, sum = 0.0;
			for (int p = p0; p <= o; p++) {
				const float *k = K + (size_t)p * kvw + (size_t)g * hd;
				double d = 0.0;
				for (int i = 0; i < hd; i++)
					d += (double)q[i] * k[i];
				s[p] = d * scale;
				mx = s[p] > mx ? s[p] : mx;
			}
			for (int p = p0; p <= o; p++)
				sum += s[p] = exp(s[p] - mx);
			int end = o + 1 < J->n_keys ? o + 1 : J->n_keys;
			for (int p = p0; p < end; p++)
				out[(size_t)g * J->n_keys + p] += (float)(s[p] / sum);
		}
	}
}

hsq_status hsq_context_attention_mass(const hsq_context *ctx, int q0, int nq, int n_keys, float *out)
{
	hsq_status st = HSQ_OK;
	if (ctx->tiers || !ctx->has_full_kv)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"attention mass needs a context in full mode with its cache; this one is %s",
				hsq_mode_name(hsq_context_mode(ctx)));
	int oldest = ctx->n_past - HSQ_OBS_MAX > ctx->obs_from ? ctx->n_past - HSQ_OBS_MAX : ctx->obs_from;
	if (nq < 1 || q0 < oldest || q0 > ctx->n_past - nq)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"queries of positions %d..%d are not kept; the context keeps those of positions %d..%d (the last %d evaluated)",
				q0, q0 + nq - 1, oldest, ctx->n_past - 1, HSQ_OBS_MAX);
	if (n_keys < 1 || n_keys > ctx->n_past)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%d keys asked for; the context holds positions 0..%d", n_keys,
				ctx->n_past - 1);
	hsq_pool *pool = ctx->backend->ops->host_pool(ctx->backend);
	int T = pool_threads(pool), last = q0 + nq;
	mass_job J = { ctx, q0, nq, n_keys, out, calloc((size_t)T, sizeof(float *)), calloc((size_t)T, sizeof(double *)) };
	if (!J.keys || !J.score) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the attention mass of %d positions", last);
		goto done;
	}
	for (int t = 0; t < T; t++) {
		J.keys[t] = calloc((size_t)last * context_kv_width(ctx), sizeof(float));
		J.score[t] = malloc((size_t)last * sizeof(double));
		if (!J.keys[t] || !J.score[t]) {
			st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the attention mass of %d positions", last);
			goto done;
		}
	}
	pool_run(pool, ctx->model->info.n_layer, mass_layer, &J);
done:
	for (int t = 0; t < T; t++) {
		if (J.keys)
			free(J.keys[t]);
		if (J.score)
			free(J.score[t]);
	}
	free(J.keys);
	free(J.score);
	return st;
}

hsq_status hsq_context_set_calibration(hsq_context *ctx, const hsq_calibration *cal)
{
	hsq_status st;
	if (!cal) {
		ctx->calibration = NULL;
		return hsq_context_keep_hidden(ctx, -1);
	}
	const hsq_model_info *mi = &ctx->model->info;
	if (memcmp(cal->info.model_identity, mi->identity, sizeof mi->identity))
		return hsq_fail(HSQ_ERR_MODEL_MISMATCH, "the calibration was trained for %s (%s), not for this model (%s)",
				cal->info.model_name[0] ? cal->info.model_name : "another model", cal->info.model_arch,
				mi->name[0] ? mi->name : mi->architecture);
	if ((st = hsq_context_keep_hidden(ctx, cal->reader.tap_layer)))
		return st;
	ctx->calibration = cal;
	return HSQ_OK;
}

const uint8_t *hsq_context_calibration_sha256(const hsq_context *ctx)
{
	return ctx->tiers && ctx->tiers->has_calibration ? ctx->tiers->calibration_sha256 : NULL;
}

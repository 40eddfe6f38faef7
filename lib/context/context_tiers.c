/* context_tiers.c - the public face of the tiers: compressing a context,
 * routing budget, trace, recall probe and byte counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/error.h"
#include "context/context.h"
#include "kv/tiers.h"

hsq_status hsq_context_compress(hsq_context *ctx, hsq_snapshot_mode mode, const hsq_tier_params *params)
{
	hsq_status st;
	if (!ctx)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_context_compress: the context is missing");
	if (ctx->tiers)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the context is already compressed (mode %s)",
				hsq_mode_name(ctx->tiers->mode));
	if (mode == HSQ_MODE_FULL)
		return HSQ_OK;
	if (!ctx->has_full_kv)
		return hsq_fail(HSQ_ERR_INTERNAL, "a context without a full cache cannot be compressed; please report");
	struct hsq_tiers *t = NULL;
	kv_view kv = context_kv_view(ctx);
	if ((st = tiers_new(ctx->model, mode, params, ctx->n_ctx, pool_threads(kv.pool), &t)))
		return st;
	if ((st = tiers_build(&kv, t))) {
		tiers_free(t);
		return st;
	}
	ctx->tiers = t;
	return HSQ_OK;
}

hsq_snapshot_mode hsq_context_mode(const hsq_context *ctx)
{
	return ctx->tiers ? ctx->tiers->mode : HSQ_MODE_FULL;
}

const hsq_tier_params *hsq_context_tier_params(const hsq_context *ctx)
{
	return ctx->tiers ? &ctx->tiers->params : NULL;
}

hsq_status hsq_context_set_budget(hsq_context *ctx, int budget)
{
	if (budget < HSQ_BUDGET_DEFAULT)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"budget %d is out of range; use a token count, HSQ_BUDGET_ALL or HSQ_BUDGET_DEFAULT", budget);
	if (!ctx->tiers || ctx->tiers->mode != HSQ_MODE_HSQ)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "a routing budget needs an hsq context; this one is %s",
				hsq_mode_name(hsq_context_mode(ctx)));
	ctx->tiers->budget = budget;
	return HSQ_OK;
}

int hsq_context_budget(const hsq_context *ctx)
{
	const struct hsq_tiers *t = ctx->tiers;
	if (!t || t->mode != HSQ_MODE_HSQ)
		return 0;
	return tiers_budget_tokens(t, t->n_tokens, INT32_MAX);
}

hsq_status hsq_context_set_retrieval_heads(hsq_context *ctx, int n)
{
	if (n < HSQ_RETRIEVAL_DEFAULT)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"retrieval heads %d is out of range; use a head count or HSQ_RETRIEVAL_DEFAULT", n);
	if (!ctx->tiers || ctx->tiers->mode != HSQ_MODE_HSQ)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "retrieval heads need an hsq context; this one is %s",
				hsq_mode_name(hsq_context_mode(ctx)));
	int before = ctx->tiers->retrieval_heads;
	ctx->tiers->retrieval_heads = n;
	hsq_status st = tiers_pick_retrieval(ctx->tiers);
	if (st) {
		ctx->tiers->retrieval_heads = before; /* the marks were left as they were */
		return st;
	}
	return HSQ_OK;
}

hsq_status hsq_context_use_residual_keys(hsq_context *ctx, int on)
{
	if (!ctx || !ctx->tiers)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "residual keys need a compressed context; this one is %s",
				ctx ? hsq_mode_name(hsq_context_mode(ctx)) : "missing");
	if (on != 0 && on != 1)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "residual keys: %d is neither 0 (off) nor 1 (on)", on);
	if (ctx->tiers->res_off == !on)
		return HSQ_OK;
	ctx->tiers->res_off = !on;
	tiers_refresh_residual_heads(ctx->tiers); /* L1 keys with or without residuals */
	return HSQ_OK;
}

int hsq_context_residual_keys(const hsq_context *ctx)
{
	const struct hsq_tiers *t = ctx->tiers;
	return t && !t->res_off ? tiers_residual_head_count(t) : 0;
}

int hsq_context_retrieval_heads(const hsq_context *ctx)
{
	const struct hsq_tiers *t = ctx->tiers;
	int n = 0;
	if (t)
		for (int l = 0; l < t->n_layer; l++)
			for (int h = 0; h < t->n_head_kv; h++)
				n += t->layers[l].heads[h].retrieval;
	return n;
}

void hsq_context_set_trace(hsq_context *ctx, hsq_trace_fn fn, void *user)
{
	if (ctx->tiers) {
		ctx->tiers->trace = fn;
		ctx->tiers->trace_user = user;
	}
}

hsq_status hsq_context_set_recall_probe(hsq_context *ctx, int on)
{
	if (!ctx->tiers)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the recall probe needs a compressed context (mode full has no router)");
	if (on && !ctx->has_full_kv)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"the recall probe needs the full cache, which a context loaded from a %s snapshot does not have; compress a prefilled context instead",
				hsq_mode_name(ctx->tiers->mode));
	ctx->tiers->probe = on != 0;
	return HSQ_OK;
}

hsq_status hsq_context_recall(const hsq_context *ctx, double *per_layer)
{
	if (!ctx->tiers)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "the context is not compressed: no recall to report");
	for (int l = 0; l < ctx->tiers->n_layer; l++) {
		const tier_layer *L = &ctx->tiers->layers[l];
		per_layer[l] = L->recall_count ? L->recall_sum / (double)L->recall_count : NAN;
	}
	return HSQ_OK;
}

hsq_status hsq_context_tier_stats(const hsq_context *ctx, hsq_tier_stats *out)
{
	memset(out, 0, sizeof *out);
	const hsq_model_info *mi = &ctx->model->info;
	int n = ctx->n_past;
	out->n_tokens = n;
	for (int l = 0; l < mi->n_layer; l++)
		out->fp16_kv_bytes += tier_fp16_layer_bytes(n, ctx->model->layers[l].window, mi->n_head_kv, mi->head_dim);
	const struct hsq_tiers *t = ctx->tiers;
	if (!t)
		return HSQ_OK;
	for (int l = 0; l < t->n_layer; l++) {
		const tier_layer *L = &t->layers[l];
		out->tail_bytes += (uint64_t)L->n_tail * 2 * t->n_head_kv * t->head_dim * sizeof(float);
		for (int h = 0; h < t->n_head_kv; h++) {
			const tier_head *x = &L->heads[h];
			out->n_l1 += x->n_l1;
			out->n_group += x->n_group;
			out->n_l3 += x->n_l3;
			for (int g = 0; g < x->n_group; g++)
				out->n_medium += x->g_class[g] == HSQ_GROUP_MEDIUM;
			out->l1_bytes += tier_l1_bytes((uint64_t)x->n_l1, tier_code4_pair(t)) + tier_centre_bytes(t->head_dim);
			out->l2_bytes += tier_l2_bytes((uint64_t)x->n_group, (uint64_t)x->n_l3, tier_code3_pair(t), t->head_dim);
			out->l3_bytes += tier_l3_bytes((uint64_t)x->n_l3, tier_code4_pair(t));
			if (x->has_res) { /* residual key codes: L1's in the fast tier, L3's in the archive */
				out->l1_bytes += (uint64_t)x->n_l1 * t->code4;
				out->l3_bytes += (uint64_t)x->n_l3 * t->code4;
			}
		}
	}
	return HSQ_OK;
}

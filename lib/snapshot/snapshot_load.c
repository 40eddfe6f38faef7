/* snapshot_load.c - resume a context from a snapshot (hsq_snapshot_load):
 * checks that the file was written by this model, then fills a new
 * context's full KV cache, or its tiers, from the sections. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "context/context.h"
#include "hsq.h"
#include "kv/tiers.h"
#include "model/model.h"
#include "snapshot/snapshot_format.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/tiers_io.h"

static void hex_prefix(char out[17], const uint8_t *id)
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

typedef struct kv_sink {
	const char *path;
	hsq_context *ctx;
	int n_tokens;         /* positions in the snapshot */
	uint64_t plane_bytes; /* n_tokens * width * 4: one layer's K or V */
} kv_sink;

/* Magnitudes from here on (65520, bits 0x477ff000) round to an fp16
 * infinity, and infinities and NaNs lie above it. */
#define F16_OVERFLOW_BITS 0x477ff000u

/* Index of the first of n little-endian f32 at p that the fp16 cache
 * cannot hold (an infinity, a NaN, or a magnitude that rounds to an fp16
 * infinity), or n. Blocks of 16 with no early exit inside, so the compiler
 * can vectorise the common case. */
static size_t first_beyond_f16(const uint8_t *p, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		uint32_t w[16], bad = 0;
		memcpy(w, p + 4 * i, sizeof w);
		for (int j = 0; j < 16; j++)
			bad |= (w[j] & 0x7fffffffu) >= F16_OVERFLOW_BITS;
		if (bad)
			break;
	}
	for (; i < n; i++) {
		uint32_t u;
		memcpy(&u, p + 4 * i, 4);
		if ((u & 0x7fffffffu) >= F16_OVERFLOW_BITS)
			return i;
	}
	return n;
}

/* kv.full raw layout: for each layer, K then V, each [n_tokens][width]
 * fp32. Copies a decoded range into the caches, split at plane borders. */
static hsq_status to_cache(void *arg, uint64_t raw_off, const uint8_t *data, size_t n)
{
	kv_sink *k = arg;
	if (raw_off % 4 || n % 4)
		return hsq_fail(HSQ_ERR_INTERNAL, "kv decoder produced a misaligned range; please report");
	while (n) {
		uint64_t plane = raw_off / k->plane_bytes, within = raw_off % k->plane_bytes;
		size_t take = k->plane_bytes - within < n ? (size_t)(k->plane_bytes - within) : n;
		/* A cache that decodes to NaN or infinity (or to a value the
		 * fp16 cache would hold as infinity) would poison every
		 * attention it enters. */
		size_t at = first_beyond_f16(data, take / 4);
		if (at < take / 4) {
			uint64_t width = k->plane_bytes / 4 / (uint64_t)(k->n_tokens ? k->n_tokens : 1);
			uint64_t elem = within / 4 + at;
			float f;
			memcpy(&f, data + 4 * at, 4);
			if (isfinite(f))
				return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'kv.full' holds %g (layer %d %s, token %llu, channel %llu), beyond the fp16 range (65504) of the cache this runtime holds",
						k->path, (double)f, (int)(plane / 2), plane % 2 ? "V" : "K",
						(unsigned long long)(elem / width), (unsigned long long)(elem % width));
			return hsq_fail(HSQ_ERR_FORMAT, "%s: section 'kv.full' holds a non-finite value (layer %d %s, token %llu, channel %llu); the file is damaged",
					k->path, (int)(plane / 2), plane % 2 ? "V" : "K",
					(unsigned long long)(elem / width), (unsigned long long)(elem % width));
		}
		/* data is a malloc'ed buffer advanced by multiples of 4. */
		context_kv_write(k->ctx, (int)(plane / 2), (int)(plane % 2), k->n_tokens, within / 4,
				 (const float *)(const void *)data, take / 4);
		data += take;
		raw_off += take;
		n -= take;
	}
	return HSQ_OK;
}

static hsq_status identity_mismatch(const snap_reader *r, const hsq_model_info *mi)
{
	char want[17], have[17];
	hex_prefix(want, r->identity);
	hex_prefix(have, mi->identity);
	return hsq_fail(HSQ_ERR_MODEL_MISMATCH,
			"%s was built by model '%s' (%s, identity %s), not by the given model '%s' (%s, identity %s); pass the model that wrote it, or re-create the snapshot with this model",
			r->path, r->name[0] ? r->name : "unnamed", r->arch, want,
			mi->name && mi->name[0] ? mi->name : "unnamed", mi->architecture ? mi->architecture : "?", have);
}

/* A context for a tiered snapshot: no full cache, the tiers read from
 * their sections (every section's CRC checked as it is read). */
static hsq_status load_tiers(snap_reader *r, const hsq_model *model, const hsq_context_params *params,
			     hsq_context **out)
{
	hsq_status st;
	const hsq_model_info *mi = &model->info;
	hsq_context *ctx = NULL;
	hsq_token *tokens = NULL;
	struct hsq_tiers *t = NULL;
	tier_blob blobs[TIER_N_SECTIONS];
	memset(blobs, 0, sizeof blobs);
	*out = NULL;
	for (int i = 0; i < TIER_N_SECTIONS; i++) {
		const snap_section *s = snap_find_section(r, tier_section_names[i]);
		if (!s && !tier_section_needed(i, r->minor))
			continue; /* router.heads (1.2), keys.residual (1.4), or centres before 1.3 */
		if (!s) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: %s-mode snapshot of format %u.%u has no '%s' section; the file is damaged",
				      r->path, hsq_mode_name((hsq_snapshot_mode)r->mode), r->major, r->minor,
				      tier_section_names[i]);
			goto done;
		}
		if ((st = snap_check_encoding(r, s)) || (st = snap_read_small_section(r, s, r->file_size, &blobs[i].data)))
			goto done;
		blobs[i].size = s->raw;
	}
	hsq_snapshot_mode mode;
	hsq_tier_params tp;
	uint8_t calibration[32];
	if ((st = tiers_read_config(r->path, blobs[0].data, blobs[0].size, mi->n_layer, mi->n_head_kv, mi->head_dim,
				    &mode, &tp, calibration)))
		goto done;
	if (mode != (hsq_snapshot_mode)r->mode) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: section 'tiers' says mode %u but the header says %u; the file is damaged",
			      r->path, (unsigned)mode, r->mode);
		goto done;
	}
	if ((st = snap_read_tokens(r, (uint32_t)mi->n_vocab, &tokens)))
		goto done;
	hsq_context_params p = params ? *params : hsq_context_default_params();
	if ((st = context_new(model, &p, 0, &ctx)))
		goto done;
	if ((uint32_t)ctx->n_ctx < r->meta.n_tokens) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (%u tokens or more)",
			      r->path, r->meta.n_tokens, ctx->n_ctx, r->meta.n_tokens);
		goto done;
	}
	/* tiers_new re-checks the parameters: damaged values are refused here */
	hsq_pool *pool = ctx->backend->ops->host_pool(ctx->backend);
	if ((st = tiers_new(model, mode, &tp, ctx->n_ctx, pool_threads(pool), &t)) ||
	    (st = tiers_rope_reserve(t, ctx->n_ctx)) ||
	    (st = tiers_deserialize(t, r->path, blobs, (int)r->meta.n_tokens)) ||
	    (st = tiers_pq_fit_all(t, pool))) /* the router codes, derived from L3 */
		goto done;
	for (int i = 0; i < 32; i++)
		t->has_calibration |= calibration[i] != 0;
	memcpy(t->calibration_sha256, calibration, sizeof calibration);
	ctx->tiers = t;
	t = NULL;
	if (r->meta.n_tokens)
		memcpy(ctx->tokens, tokens, (size_t)r->meta.n_tokens * sizeof *tokens);
	ctx->n_past = (int)r->meta.n_tokens;
	ctx->obs_from = ctx->n_past;
	*out = ctx;
	ctx = NULL;
done:
	if (st && st != HSQ_ERR_NOMEM && st != HSQ_ERR_IO && st != HSQ_ERR_CHECKSUM && st != HSQ_ERR_TRUNCATED &&
	    st != HSQ_ERR_CONTEXT_FULL && st != HSQ_ERR_UNSUPPORTED)
	{
		if (st == HSQ_ERR_INVALID_ARG) { /* a parameter tiers_new refused came from the file */
			char why[256];
			snprintf(why, sizeof why, "%s", hsq_last_error());
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: %s; the file is damaged", r->path, why);
		}
	}
	tiers_free(t);
	hsq_context_free(ctx);
	free(tokens);
	tier_blobs_free(blobs);
	return st;
}

hsq_status hsq_snapshot_load(const hsq_model *model, const char *path, const hsq_context_params *params,
			     hsq_context **out)
{
	snap_reader r;
	hsq_status st = HSQ_OK;
	hsq_context *ctx = NULL;
	hsq_token *tokens = NULL;
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_load: out is NULL");
	*out = NULL;
	if (!model)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "hsq_snapshot_load: model is NULL");
	if ((st = snap_reader_open(&r, path)))
		return st;
	const hsq_model_info *mi = &model->info;
	const snap_meta *m = &r.meta;

	if (r.mode < HSQ_MODE_FULL || r.mode > HSQ_MODE_SNAPKV) {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: snapshot mode %u is not supported by this hsq %s; upgrade hsq",
			      path, r.mode, hsq_version());
		goto fail;
	}
	if (memcmp(r.identity, mi->identity, 32)) {
		st = identity_mismatch(&r, mi);
		goto fail;
	}
	if (m->n_layer != (uint32_t)mi->n_layer || m->n_head_kv != (uint32_t)mi->n_head_kv ||
	    m->head_dim != (uint32_t)mi->head_dim || m->n_vocab != (uint32_t)mi->n_vocab) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: shape (%u layers, %u kv heads x %u, vocabulary %u) disagrees with its own model (%d, %d x %d, %d); the file is damaged",
			      path, m->n_layer, m->n_head_kv, m->head_dim, m->n_vocab, mi->n_layer, mi->n_head_kv,
			      mi->head_dim, mi->n_vocab);
		goto fail;
	}
	int tiered = r.mode != HSQ_MODE_FULL;
	if (m->kv_dtype != (tiered ? SNAP_DTYPE_TQ : SNAP_DTYPE_F32) || m->k_rope != (tiered ? 0u : 1u) ||
	    m->pos_base != 0) {
		st = hsq_fail(HSQ_ERR_UNSUPPORTED,
			      "%s: kv cache encoding (dtype %u, k_rope %u, pos_base %u) is not supported by this hsq %s; upgrade hsq",
			      path, m->kv_dtype, m->k_rope, m->pos_base, hsq_version());
		goto fail;
	}
	int want_ctx = params && params->n_ctx > 0 ? params->n_ctx : mi->n_ctx_train;
	if (want_ctx > 0 && m->n_tokens > (uint32_t)want_ctx) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (%u tokens or more)",
			      path, m->n_tokens, want_ctx, m->n_tokens);
		goto fail;
	}

	if (tiered) {
		st = load_tiers(&r, model, params, &ctx);
		goto fail; /* ctx is NULL on failure */
	}
	const snap_section *kv = snap_find_section(&r, "kv.full");
	if (!kv) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: full-mode snapshot has no 'kv.full' section; the file is damaged", path);
		goto fail;
	}
	uint64_t width = (uint64_t)m->n_head_kv * m->head_dim;
	uint64_t plane = (uint64_t)m->n_tokens * width * 4;
	if (kv->raw != plane * 2 * m->n_layer || (kv->chunk && kv->chunk % 4)) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: section 'kv.full' holds %llu bytes, not the %llu that %u tokens need; the file is damaged",
			      path, (unsigned long long)kv->raw, (unsigned long long)(plane * 2 * m->n_layer), m->n_tokens);
		goto fail;
	}
	if ((st = snap_read_tokens(&r, (uint32_t)mi->n_vocab, &tokens)))
		goto fail;

	hsq_context_params p = params ? *params : hsq_context_default_params();
	if ((st = hsq_context_new(model, &p, &ctx)))
		goto fail;
	if ((uint32_t)ctx->n_ctx < m->n_tokens) {
		st = hsq_fail(HSQ_ERR_CONTEXT_FULL,
			      "%s holds %u tokens but the context holds only %d; pass a larger context (%u tokens or more)",
			      path, m->n_tokens, ctx->n_ctx, m->n_tokens);
		goto fail;
	}
	/* With no tokens the section is empty and the sink is never called. */
	kv_sink ks = { path, ctx, (int)m->n_tokens, plane ? plane : 1 };
	if ((st = snap_section_stream(&r, kv, to_cache, &ks)))
		goto fail;
	if (m->n_tokens)
		memcpy(ctx->tokens, tokens, (size_t)m->n_tokens * sizeof *tokens);
	ctx->n_past = (int)m->n_tokens;
	ctx->obs_from = ctx->n_past; /* no queries were evaluated here */
fail:
	if (!st) {
		*out = ctx;
		ctx = NULL;
	}
	hsq_context_free(ctx);
	free(tokens);
	snap_reader_close(&r);
	return st;
}

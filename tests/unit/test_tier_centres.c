/*
 * test_tier_centres.c - centred codes and section centres (ASan/UBSan build).
 *
 * The default model reads 300 tokens of ordinary text, which is compressed
 * in quant mode (every token in L1) and in hsq mode. Checked against the
 * full cache the context held before compression:
 *   - each head's centres are the mean of its keys (before RoPE) and values
 *     over the positions after the sinks;
 *   - a code is flagged centred exactly when the vector minus the centre is
 *     the shorter, and it decodes to the codec's decoding plus the centre;
 *   - over the model, centring makes the keys' coding error several times
 *     smaller than coding them as they are, and never makes any head's
 *     values worse;
 *   - a centred key summary decodes with the centre rotated to its group's
 *     positions;
 *   - a snapshot stores the centres (format 1.3, section centres with the
 *     required bit) and a loaded one decodes every code identically; a file
 *     without the section loads with zero centres; impossible centres are
 *     refused, naming the section.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "context/context.h"
#include "hsq_eval.h"
#include "snapshot_image.h"
#include "tier_probe.h"
#include "common/vec_f16.h"
#include "kv/tiers.h"

#define N_TOK 300
#define SINKS 4

static const char text[] =
	"The harbour master kept a ledger of every ship that came in, with the name of its captain, the port it "
	"had sailed from, the cargo it carried and the day it left again. In the winter the ledger grew thin, for "
	"the ice closed the northern route and only the coastal traders came, small boats with salt fish, timber "
	"and wool. In the spring the great ships returned from the south with wine, oil and cloth, and the clerks "
	"worked by lamplight to keep up with them. The old master liked to say that a town could be read from its "
	"harbour ledger better than from any history, because a ledger never flatters: it only counts what came and "
	"what went, and at what price. His daughter, who kept the books after him, added a column for the weather, "
	"and another for the news the sailors brought, so that the ledger became in time a chronicle of the whole "
	"coast, of wars and harvests, storms and fairs, weddings and wrecks, set down in the same plain hand as the "
	"barrels of herring and the bales of wool. When the town council wanted to know how trade had fared in a "
	"bad year, they did not ask the merchants, who would complain whatever the truth, but sent for the ledger.";

static hsq_model *model;
static hsq_context *quant, *hsq;
static float *full_k, *full_v; /* [n_layer][N_TOK][n_head_kv * head_dim] before compression, K after RoPE */
static int n_tok;
static char snap_path[64];

static hsq_context_params params(void)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 1;
	return cp;
}

static hsq_context *prefill(void)
{
	return tier_probe_prefill(model, text, params().n_ctx, 200, N_TOK, &n_tok);
}

static void setup(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	if (!p || !*p || access(p, R_OK) != 0)
		return;
	cr_assert_eq(hsq_model_load(p, &model), HSQ_OK, "%s", hsq_last_error());
	quant = prefill();
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	size_t plane = (size_t)n_tok * mi.n_head_kv * mi.head_dim;
	full_k = malloc((size_t)mi.n_layer * plane * sizeof *full_k);
	full_v = malloc((size_t)mi.n_layer * plane * sizeof *full_v);
	cr_assert(full_k && full_v);
	for (int l = 0; l < mi.n_layer; l++) {
		context_kv_read(quant, l, 0, 0, n_tok, full_k + (size_t)l * plane);
		context_kv_read(quant, l, 1, 0, n_tok, full_v + (size_t)l * plane);
	}
	hsq_tier_params tp = hsq_tier_default_params();
	tp.sinks = SINKS;
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(quant, HSQ_MODE_QUANT, &tp), HSQ_OK, "%s", hsq_last_error());
	hsq = prefill();
	cr_assert_eq(hsq_context_compress(hsq, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	snprintf(snap_path, sizeof snap_path, "/tmp/hsq-centres-%d.hsq", (int)getpid());
}

static void teardown(void)
{
	hsq_context_free(quant);
	hsq_context_free(hsq);
	hsq_model_free(model);
	free(full_k);
	free(full_v);
	unlink(snap_path);
	quant = hsq = NULL;
	model = NULL;
	full_k = full_v = NULL;
}

TestSuite(tier_centres, .init = setup, .fini = teardown);

/* Token i of head g of layer l before compression: K brought back before
 * RoPE, and V. */
static void original(const struct hsq_tiers *t, int l, int g, int i, float *k, float *v)
{
	tier_probe_row(t, full_k, n_tok, l, g, i, 1, k);
	tier_probe_row(t, full_v, n_tok, l, g, i, 0, v);
}

Test(tier_centres, centres_are_the_means_after_the_sinks)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = quant->tiers;
	int hd = t->head_dim;
	float k[HSQ_CODEC_MAX_DIM], v[HSQ_CODEC_MAX_DIM];
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			double sum[2 * HSQ_CODEC_MAX_DIM] = { 0 }, scale = 0.0;
			for (int i = SINKS; i < n_tok; i++) {
				original(t, l, g, i, k, v);
				for (int d = 0; d < hd; d++) {
					sum[d] += k[d];
					sum[hd + d] += v[d];
					scale = fmax(scale, fmax(fabs(k[d]), fabs(v[d])));
				}
			}
			const float *c = t->layers[l].heads[g].centre;
			for (int d = 0; d < 2 * hd; d++)
				cr_assert_leq(fabs(c[d] - sum[d] / (n_tok - SINKS)), 1e-5 * scale,
					      "layer %d head %d channel %d: centre %g, mean %g", l, g, d, (double)c[d],
					      sum[d] / (n_tok - SINKS));
		}
}

Test(tier_centres, flag_follows_the_shorter_vector_and_centring_lowers_the_error)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = quant->tiers;
	int hd = t->head_dim;
	size_t c4 = t->code4;
	uint8_t raw[2 * (2 + HSQ_CODEC_MAX_DIM)];
	float k[HSQ_CODEC_MAX_DIM], v[HSQ_CODEC_MAX_DIM], dk[HSQ_CODEC_MAX_DIM], dv[HSQ_CODEC_MAX_DIM];
	float rk[HSQ_CODEC_MAX_DIM], rv[HSQ_CODEC_MAX_DIM], plain[HSQ_CODEC_MAX_DIM];
	double err_k = 0, err_k_raw = 0;
	int n_centred = 0, n_codes = 0;
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			cr_assert_eq(h->n_l1, n_tok, "quant keeps every token in L1");
			double err_v = 0, err_v_raw = 0;
			for (int i = 0; i < h->n_l1; i++) {
				cr_assert_eq(h->l1_pos[i], i);
				original(t, l, g, i, k, v);
				const uint8_t *code = h->l1_code + (size_t)i * tier_code4_pair(t);
				for (int part = 0; part < 2; part++) {
					const float *x = part ? v : k, *c = h->centre + part * hd;
					const uint8_t *pc = code + part * c4;
					double nx = 0, nr = 0;
					for (int d = 0; d < hd; d++) {
						float r = x[d] - c[d];
						nx += (double)x[d] * x[d];
						nr += (double)r * r;
					}
					int flagged = (pc[1] & TIER_CODE_CENTRED) != 0;
					cr_assert_eq(flagged, nr < nx, "layer %d head %d token %d %s: flag %d, |x-c|^2 %g, |x|^2 %g",
						     l, g, i, part ? "V" : "K", flagged, nr, nx);
					n_centred += flagged;
					n_codes++;
					/* the flagged code is the codec's, shifted by the centre */
					uint8_t cp[2 + HSQ_CODEC_MAX_DIM];
					memcpy(cp, pc, c4);
					cp[1] &= (uint8_t)~TIER_CODE_CENTRED;
					hsq_codec_decode(t->c4, cp, 1, plain);
					float *out = part ? dv : dk;
					tiers_decode_token(t, h, code, dk, dv);
					for (int d = 0; d < hd; d++)
						cr_assert_eq(out[d], plain[d] + (flagged ? c[d] : 0.0f),
							     "layer %d head %d token %d channel %d", l, g, i, d);
				}
				/* against coding the vectors as they are */
				cr_assert_eq(hsq_codec_encode(t->c4, k, 1, raw), HSQ_OK);
				cr_assert_eq(hsq_codec_encode(t->c4, v, 1, raw + c4), HSQ_OK);
				hsq_codec_decode(t->c4, raw, 1, rk);
				hsq_codec_decode(t->c4, raw + c4, 1, rv);
				err_k += tier_probe_sq_dist(dk, k, hd);
				err_k_raw += tier_probe_sq_dist(rk, k, hd);
				err_v += tier_probe_sq_dist(dv, v, hd);
				err_v_raw += tier_probe_sq_dist(rv, v, hd);
			}
			/* a value is centred only when that shortens it: the error may
			 * move by the codec's noise, not grow with the centre */
			cr_assert_leq(err_v, 1.05 * err_v_raw, "layer %d head %d: value error %g, uncentred %g", l, g, err_v,
				      err_v_raw);
		}
	cr_log_info("centred codes: %d of %d; key error %.4g against %.4g uncentred (%.2fx)", n_centred, n_codes, err_k,
		    err_k_raw, err_k_raw / err_k);
	printf("tier centres: %d of %d codes centred; key coding error %.2fx smaller than uncentred\n", n_centred,
	       n_codes, err_k_raw / err_k);
	cr_assert_lt(err_k, 0.5 * err_k_raw, "centring must at least halve the keys' coding error: %g against %g", err_k,
		     err_k_raw);
}

Test(tier_centres, key_summaries_centre_on_their_group_positions)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	int hd = t->head_dim, n_groups = 0, n_flagged = 0;
	size_t c3 = t->code3;
	float plain[HSQ_CODEC_MAX_DIM], row[HSQ_CODEC_MAX_DIM], sk[HSQ_CODEC_MAX_DIM], sv[HSQ_CODEC_MAX_DIM];
	for (int l = 0; l < t->n_layer; l++) {
		const rope_table *r = &t->rope[t->layers[l].rope_table];
		for (int g = 0; g < t->n_head_kv; g++) {
			const tier_head *h = &t->layers[l].heads[g];
			for (int k = 0; k < h->n_group; k++) {
				const uint8_t *code = h->sum_code + (size_t)k * tier_code3_pair(t);
				int first = h->g_start[k], n = h->g_start[k + 1] - first;
				n_groups++;
				if (!(code[1] & TIER_CODE_CENTRED))
					continue;
				n_flagged++;
				double ck[HSQ_CODEC_MAX_DIM] = { 0 };
				for (int i = 0; i < n; i++) {
					memcpy(row, h->centre, (size_t)hd * sizeof *row);
					tiers_rope_rows(t, r, row, &h->l3_pos[first + i], 1, +1);
					for (int d = 0; d < hd; d++)
						ck[d] += row[d];
				}
				uint8_t cp[2 + HSQ_CODEC_MAX_DIM];
				memcpy(cp, code, c3);
				cp[1] &= (uint8_t)~TIER_CODE_CENTRED;
				hsq_codec_decode(t->c3, cp, 1, plain);
				tiers_decode_summary(t, h, r, h->l3_pos + first, n, code, sk, sv);
				for (int d = 0; d < hd; d++) {
					cr_assert_float_eq(sk[d], plain[d] + ck[d] / n, 1e-4f * (1.0f + fabsf(sk[d])),
							   "layer %d head %d group %d channel %d", l, g, k, d);
					cr_assert_eq(h->sum_k[(size_t)k * hd + d], hsq_f32_to_f16(sk[d]),
						     "the working copy (fp16) decodes alike");
				}
			}
		}
	}
	cr_assert_gt(n_groups, 0);
	cr_assert_gt(n_flagged, n_groups / 2, "most key summaries are centred (%d of %d)", n_flagged, n_groups);
}

static hsq_status load_bytes(const uint8_t *b, size_t size, hsq_context **out)
{
	char path[80];
	snprintf(path, sizeof path, "%s.mod", snap_path);
	hsq_context_params cp = params();
	return snap_image_load(model, b, size, path, &cp, out);
}

/* Every centre and decoded L1 and L2 row of a equals b's, bit for bit. */
static void same_tiers(const struct hsq_tiers *a, const struct hsq_tiers *b)
{
	int hd = a->head_dim;
	for (int l = 0; l < a->n_layer; l++)
		for (int g = 0; g < a->n_head_kv; g++) {
			const tier_head *x = &a->layers[l].heads[g], *y = &b->layers[l].heads[g];
			cr_assert_eq(memcmp(x->centre, y->centre, 2 * (size_t)hd * sizeof(float)), 0, "layer %d head %d", l,
				     g);
			cr_assert_eq(x->n_l1, y->n_l1);
			cr_assert_eq(x->n_group, y->n_group);
			if (x->n_l1) {
				cr_assert_eq(memcmp(x->l1_k, y->l1_k, (size_t)x->n_l1 * hd * sizeof *x->l1_k), 0);
				cr_assert_eq(memcmp(x->l1_v, y->l1_v, (size_t)x->n_l1 * hd * sizeof *x->l1_v), 0);
			}
			if (x->n_group) {
				cr_assert_eq(memcmp(x->sum_k, y->sum_k, (size_t)x->n_group * hd * sizeof *x->sum_k), 0);
				cr_assert_eq(memcmp(x->sum_v, y->sum_v, (size_t)x->n_group * hd * sizeof *x->sum_v), 0);
			}
		}
}

Test(tier_centres, snapshots_keep_the_centres)
{
	if (!model)
		cr_skip_test("HSQ_TEST_MODEL not set (run 'make model')");
	const struct hsq_tiers *t = hsq->tiers;
	hsq_context_params cp = params();
	hsq_context *back = NULL;
	cr_assert_eq(hsq_snapshot_save(quant, snap_path, HSQ_MODE_QUANT, 3), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_load(model, snap_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	same_tiers(quant->tiers, back->tiers);
	hsq_context_free(back);
	cr_assert_eq(hsq_snapshot_save(hsq, snap_path, HSQ_MODE_HSQ, 3), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_load(model, snap_path, &cp, &back), HSQ_OK, "%s", hsq_last_error());
	same_tiers(hsq->tiers, back->tiers);
	hsq_context_free(back);

	size_t size;
	uint8_t *file = snap_image_read(snap_path, &size), *bad = file ? malloc(size) : NULL;
	cr_assert_not_null(bad, "%s: cannot read", snap_path);
	cr_assert_geq(get_u16(file + SNAP_H_VERSION_MINOR), 3, "a 1.3 writer or later");
	uint8_t *e = snap_image_entry(file, "centres");
	cr_assert_not_null(e, "a tiered snapshot has a centres section");
	cr_assert_eq(get_u32(e + SNAP_E_FLAGS) & SNAP_SECTION_REQUIRED, SNAP_SECTION_REQUIRED,
		     "centres has the required bit: an older reader must refuse the file");

	/* a 1.2 file: no centres (renamed to a private section); it loads with
	 * every centre 0 */
	memcpy(bad, file, size);
	uint8_t *be = snap_image_entry(bad, "centres");
	memset(be, 0, 16);
	memcpy(be, "x.unused", 8);
	put_u32(be + SNAP_E_FLAGS, 0);
	put_u16(bad + SNAP_H_VERSION_MINOR, 2);
	snap_image_reseal_header(bad);
	cr_assert_eq(load_bytes(bad, size, &back), HSQ_OK, "%s", hsq_last_error());
	for (int l = 0; l < t->n_layer; l++)
		for (int g = 0; g < t->n_head_kv; g++)
			for (int d = 0; d < 2 * t->head_dim; d++)
				cr_assert_eq(back->tiers->layers[l].heads[g].centre[d], 0.0f);
	hsq_context_free(back);

	/* impossible values: refused, naming the section */
	size_t centre0 = 16, last = 16 + 4 * ((size_t)t->n_layer * t->n_head_kv * 2 * t->head_dim - 1);
	struct {
		const char *what;
		size_t off;
		uint32_t value;
	} cases[] = {
		{ "layers unlike the snapshot's", 0, 31 },
		{ "heads unlike the snapshot's", 4, 9 },
		{ "a head size unlike the snapshot's", 8, 128 },
		{ "a NaN centre", centre0, 0x7fc00000u },
		{ "an infinite centre", last, 0xff800000u },
		{ "a centre beyond fp16", centre0 + 4, 0x47900000u /* 73728 */ },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		memcpy(bad, file, size);
		cr_assert(snap_image_put_u32(bad, "centres", cases[c].off, cases[c].value), "%s", cases[c].what);
		hsq_status st = load_bytes(bad, size, &back);
		cr_assert_eq(st, HSQ_ERR_FORMAT, "%s: got %s (%s)", cases[c].what, hsq_strerror(st), hsq_last_error());
		cr_assert_null(back);
		cr_assert_not_null(strstr(hsq_last_error(), "centres"), "%s: %s", cases[c].what, hsq_last_error());
	}
	free(bad);
	free(file);
}

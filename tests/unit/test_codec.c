/* test_codec.c - the codec interface, Plain-KV, TQ-KV and TQ-QKV. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec_testutil.h"
#include "codec/lloyd_max.h"

/* Exact storage: fp16 side values plus packed indices. */
Test(codec, bits_per_value_is_exact)
{
	struct {
		hsq_codec_kind kind;
		int dim, bits;
		size_t bytes;
	} cases[] = {
		{HSQ_CODEC_TQ, 128, 4, 2 + 64},          /* norm + 128 x 4 bits */
		{HSQ_CODEC_TQ, 128, 3, 2 + 48},
		{HSQ_CODEC_TQ, 64, 2, 2 + 16},
		{HSQ_CODEC_TQ, 96, 3, 2 + 36},
		{HSQ_CODEC_TQ, 33, 3, 2 + 13},           /* 99 bits round up */
		{HSQ_CODEC_PLAIN, 128, 4, 4 + 64},       /* min, step + indices */
		{HSQ_CODEC_TQ_QJL, 128, 4, 4 + 48 + 16}, /* norms + 3-bit codes + signs */
		{HSQ_CODEC_TQ_QJL, 64, 2, 4 + 8 + 8},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		hsq_codec *c = tu_codec(cases[i].kind, cases[i].dim, cases[i].bits, HSQ_KV_K, 1, NULL);
		cr_expect_eq(hsq_codec_code_bytes(c), cases[i].bytes, "%s d=%d b=%d: %zu bytes",
			     hsq_codec_kind_name(cases[i].kind), cases[i].dim, cases[i].bits,
			     hsq_codec_code_bytes(c));
		cr_expect_float_eq(hsq_codec_bits_per_value(c), 8.0 * cases[i].bytes / cases[i].dim, 1e-12);
		hsq_codec_free(c);
	}
}

/* Acceptance: the MSE of random unit vectors is within 3% of the theory
 * (the Lloyd-Max distortion of the Beta density) for TQ at 2, 3, 4 bits. */
Test(codec, tq_mse_matches_theory)
{
	const int dims[] = {64, 128, 96};
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 77, 0);
	for (int t = 0; t < 3; t++) {
		int d = dims[t];
		const size_t n = 3000;
		float *x = tu_unit_vectors(&g, n, d), *y = malloc(sizeof(float) * n * d);
		for (int b = 2; b <= 4; b++) {
			const hsq_codebook *cb;
			cr_assert_eq(hsq_codebook_get(HSQ_DENSITY_BETA, d, b, &cb), HSQ_OK);
			hsq_codec *c = tu_codec(HSQ_CODEC_TQ, d, b, HSQ_KV_K, 1000 + b, NULL);
			uint8_t *codes = malloc(n * hsq_codec_code_bytes(c));
			cr_assert_eq(hsq_codec_encode(c, x, n, codes), HSQ_OK);
			hsq_codec_decode(c, codes, n, y);
			double err = 0;
			for (size_t i = 0; i < n * d; i++)
				err += (x[i] - y[i]) * (x[i] - y[i]);
			double mse = err / n;
			cr_expect(fabs(mse / cb->mse - 1) < 0.03, "d=%d b=%d: mse %.5f, theory %.5f", d, b, mse,
				  cb->mse);
			free(codes);
			hsq_codec_free(c);
		}
		free(x);
		free(y);
	}
}

static hsq_codec *make_any(int kind, int d, int b, hsq_sq_calib **cal, hsq_rng *g)
{
	*cal = NULL;
	if (kind == HSQ_CODEC_SQ || kind == HSQ_CODEC_SQU) {
		float *s = tu_gaussian(g, 400, d, 1.0);
		cr_assert_eq(hsq_sq_calibrate(s, 400, d, NULL, cal), HSQ_OK);
		free(s);
	}
	return tu_codec(kind, d, b, HSQ_KV_K, 31, *cal);
}

/* Packing is lossless: unpack(pack(indices)) is bit-exact, for every
 * codec, width and odd dimension, and repacking reproduces the bytes. */
Test(codec, pack_unpack_round_trip)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 8, 0);
	const int dims[] = {33, 64, 100};
	for (int kind = HSQ_CODEC_PLAIN; kind <= HSQ_CODEC_SQU; kind++)
		for (int t = 0; t < 3; t++)
			for (int b = 2; b <= 4; b++) {
				hsq_sq_calib *cal;
				hsq_codec *c = make_any(kind, dims[t], b, &cal, &g);
				int nf = hsq_codec_n_fields(c);
				uint8_t idx[2 * HSQ_CODEC_MAX_DIM], back[2 * HSQ_CODEC_MAX_DIM];
				uint8_t code[1024], code2[1024];
				float side[2] = {1.5f, -0.25f}, side2[2];
				for (int rep = 0; rep < 20; rep++) {
					for (int r = 0, f = 0; r < c->n_regions; r++)
						for (int k = 0; k < c->region[r].n_fields; k++, f++)
							idx[f] = (uint8_t)hsq_rng_below(&g, 1u << c->region[r].width[k]);
					hsq_codec_pack_code(c, side, idx, code);
					hsq_codec_unpack_code(c, code, side2, back);
					cr_assert_eq(memcmp(idx, back, (size_t)nf), 0, "%s d=%d b=%d",
						     hsq_codec_kind_name(kind), dims[t], b);
					for (int s = 0; s < c->n_side; s++)
						cr_assert_eq(side2[s], side[s]);
					hsq_codec_pack_code(c, side2, back, code2);
					cr_assert_eq(memcmp(code, code2, hsq_codec_code_bytes(c)), 0);
				}
				hsq_codec_free(c);
				hsq_sq_calib_free(cal);
			}
}

/* Encoding is deterministic and decoding is a function of the bytes alone.
 * Re-encoding a decoded vector: Plain gives back the same code byte for
 * byte; the norm-scaled codecs give back the same quantization indices
 * for (nearly) every vector, though not the same fp16 norm, because the
 * reconstruction is shorter than the input by the codebook's distortion
 * and a coordinate near a decision boundary can then cross it. tq-qjl is
 * left out: its decoded vector carries the sketch term. */
Test(codec, encode_decode_encode_same_codes)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 9, 0);
	const int kinds[] = {HSQ_CODEC_PLAIN, HSQ_CODEC_TQ, HSQ_CODEC_SQ, HSQ_CODEC_SQU};
	for (int t = 0; t < 4; t++)
		for (int b = 2; b <= 4; b++) {
			const int d = 64, n = 200;
			hsq_sq_calib *cal;
			hsq_codec *c = make_any(kinds[t], d, b, &cal, &g);
			size_t cb = hsq_codec_code_bytes(c);
			float *x = tu_gaussian(&g, n, d, 1.0), *y = malloc(sizeof(float) * n * d);
			float *y2 = malloc(sizeof(float) * n * d);
			uint8_t *c1 = malloc(n * cb), *c2 = malloc(n * cb), *c3 = malloc(n * cb);
			cr_assert_eq(hsq_codec_encode(c, x, n, c1), HSQ_OK);
			cr_assert_eq(hsq_codec_encode(c, x, n, c2), HSQ_OK);
			cr_expect_eq(memcmp(c1, c2, n * cb), 0, "deterministic");
			hsq_codec_decode(c, c1, n, y);
			hsq_codec_decode(c, c2, n, y2);
			cr_expect_eq(memcmp(y, y2, sizeof(float) * n * d), 0, "decode is a function of the bytes");
			cr_assert_eq(hsq_codec_encode(c, y, n, c3), HSQ_OK);
			int nf = hsq_codec_n_fields(c), same = 0, same_bytes = 0;
			for (int i = 0; i < n; i++) {
				uint8_t i1[512], i3[512];
				float s1[2], s3[2];
				hsq_codec_unpack_code(c, c1 + i * cb, s1, i1);
				hsq_codec_unpack_code(c, c3 + i * cb, s3, i3);
				same += memcmp(i1, i3, (size_t)nf) == 0;
				same_bytes += memcmp(c1 + i * cb, c3 + i * cb, cb) == 0;
			}
			if (kinds[t] == HSQ_CODEC_PLAIN)
				cr_expect_eq(same_bytes, n, "plain b=%d: %d of %d codes identical", b, same_bytes, n);
			else
				cr_expect_geq(same, n * 95 / 100, "%s b=%d: %d of %d vectors re-encode to the same indices",
					      hsq_codec_kind_name(kinds[t]), b, same, n);
			free(x);
			free(y);
			free(y2);
			free(c1);
			free(c2);
			free(c3);
			hsq_codec_free(c);
			hsq_sq_calib_free(cal);
		}
}

/* The LUT dot product equals <q, decode(code)> for every codec. */
Test(codec, lut_dot_equals_decoded_dot)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_MT19937, 10, 0);
	const int dims[] = {48, 128, 100};
	for (int kind = HSQ_CODEC_PLAIN; kind <= HSQ_CODEC_SQU; kind++)
		for (int t = 0; t < 3; t++)
			for (int b = 2; b <= 4; b++) {
				int d = dims[t];
				const int n = 64;
				hsq_sq_calib *cal;
				hsq_codec *c = make_any(kind, d, b, &cal, &g);
				float *x = tu_gaussian(&g, n, d, 1.0), *y = malloc(sizeof(float) * n * d);
				float *q = tu_gaussian(&g, 1, d, 1.0), s[64];
				uint8_t *codes = malloc(n * hsq_codec_code_bytes(c));
				cr_assert_eq(hsq_codec_encode(c, x, n, codes), HSQ_OK);
				hsq_codec_decode(c, codes, n, y);
				hsq_codec_query *qq;
				cr_assert_eq(hsq_codec_query_new(c, &qq), HSQ_OK);
				hsq_codec_query_set(qq, q);
				hsq_codec_dot(qq, codes, n, s);
				for (int i = 0; i < n; i++) {
					double ref = 0, scale = 0;
					for (int j = 0; j < d; j++) {
						ref += (double)q[j] * y[i * d + j];
						scale += fabs((double)q[j] * y[i * d + j]);
					}
					cr_expect(fabs(s[i] - ref) <= 1e-4 * scale + 1e-5, "%s d=%d b=%d: %g vs %g",
						  hsq_codec_kind_name(kind), d, b, s[i], ref);
				}
				hsq_codec_query_free(qq);
				free(x);
				free(y);
				free(q);
				free(codes);
				hsq_codec_free(c);
				hsq_sq_calib_free(cal);
			}
}

/* QJL's estimator is unbiased over the draw of the sketch (and rotation):
 * for fixed x and q, the mean error over 600 seeds is within 4 standard
 * errors of 0. The same seeds through TQ at b-1 bits (the MSE stage alone)
 * show the codebook's shrinkage bias far outside that band, so the test
 * can tell an unbiased estimator from a biased one. */
Test(codec, qjl_inner_product_is_unbiased)
{
	const int d = 128, seeds = 600;
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 4242, 0);
	float *x = tu_gaussian(&g, 1, d, 1.0), *q = tu_gaussian(&g, 1, d, 1.0);
	double truth = 0;
	for (int j = 0; j < d; j++)
		truth += (double)q[j] * x[j];
	/* make the inner product large so the MSE bias is visible */
	for (int j = 0; j < d; j++)
		q[j] += x[j];
	truth = 0;
	for (int j = 0; j < d; j++)
		truth += (double)q[j] * x[j];
	for (int b = 2; b <= 4; b++) {
		double *eq = malloc(sizeof(double) * seeds), *et = malloc(sizeof(double) * seeds);
		for (int s = 0; s < seeds; s++) {
			hsq_codec *cq = tu_codec(HSQ_CODEC_TQ_QJL, d, b, HSQ_KV_K, 5000 + s, NULL);
			hsq_codec *ct = tu_codec(HSQ_CODEC_TQ, d, b - 1, HSQ_KV_K, 5000 + s, NULL);
			uint8_t code[256];
			hsq_codec_query *qq;
			float v;
			cr_assert_eq(hsq_codec_encode(cq, x, 1, code), HSQ_OK);
			cr_assert_eq(hsq_codec_query_new(cq, &qq), HSQ_OK);
			hsq_codec_query_set(qq, q);
			hsq_codec_dot(qq, code, 1, &v);
			eq[s] = v - truth;
			hsq_codec_query_free(qq);
			cr_assert_eq(hsq_codec_encode(ct, x, 1, code), HSQ_OK);
			cr_assert_eq(hsq_codec_query_new(ct, &qq), HSQ_OK);
			hsq_codec_query_set(qq, q);
			hsq_codec_dot(qq, code, 1, &v);
			et[s] = v - truth;
			hsq_codec_query_free(qq);
			hsq_codec_free(cq);
			hsq_codec_free(ct);
		}
		hsq_summary sq, st;
		hsq_summarize(eq, seeds, &sq);
		hsq_summarize(et, seeds, &st);
		double se_q = sq.sd / sqrt(seeds), se_t = st.sd / sqrt(seeds);
		cr_expect_lt(fabs(sq.mean), 4 * se_q, "b=%d: qjl mean error %g, standard error %g", b,
			     sq.mean, se_q);
		cr_expect_gt(fabs(st.mean), 8 * se_t, "b=%d: tq(b-1) bias %g should be obvious (se %g)",
			     b, st.mean, se_t);
		cr_expect_lt(st.mean, 0.0, "the MSE codebook shrinks inner products");
		free(eq);
		free(et);
	}
	free(x);
	free(q);
}

Test(codec, qjl_refuses_the_v_path)
{
	hsq_codec_params p = {.kind = HSQ_CODEC_TQ_QJL, .dim = 128, .bits = 3, .path = HSQ_KV_V};
	hsq_codec *c = (hsq_codec *)1;
	cr_expect_eq(hsq_codec_new(&p, &c), HSQ_ERR_UNSUPPORTED);
	cr_expect_null(c);
	cr_expect(strstr(hsq_last_error(), "k path") && strstr(hsq_last_error(), "use tq"),
		  "message: %s", hsq_last_error());
}

Test(codec, refuses_bad_parameters)
{
	struct {
		hsq_codec_kind kind;
		int dim, bits;
	} bad[] = {
		{HSQ_CODEC_TQ, 15, 3}, {HSQ_CODEC_TQ, 257, 3}, {HSQ_CODEC_TQ, 64, 5},
		{HSQ_CODEC_TQ, 64, 0}, {HSQ_CODEC_TQ_QJL, 64, 1}, {HSQ_CODEC_PLAIN, 64, 9},
		{(hsq_codec_kind)0, 64, 3}, {HSQ_CODEC_SQ, 64, 3}, /* no calibration */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		hsq_codec_params p = {.kind = bad[i].kind, .dim = bad[i].dim, .bits = bad[i].bits};
		hsq_codec *c;
		cr_expect_eq(hsq_codec_new(&p, &c), HSQ_ERR_INVALID_ARG, "case %zu", i);
		cr_expect_neq(hsq_last_error()[0], '\0');
	}
	hsq_codec_kind k;
	cr_expect_eq(hsq_codec_kind_parse("TQ-QKV", &k), HSQ_OK);
	cr_expect_eq(k, HSQ_CODEC_TQ_QJL);
	cr_expect_eq(hsq_codec_kind_parse("zip", &k), HSQ_ERR_INVALID_ARG);
}

Test(codec, edge_vectors)
{
	hsq_codec *t = tu_codec(HSQ_CODEC_TQ, 64, 3, HSQ_KV_K, 1, NULL);
	hsq_codec *p = tu_codec(HSQ_CODEC_PLAIN, 64, 3, HSQ_KV_K, 1, NULL);
	float x[64] = {0}, y[64];
	uint8_t code[64];
	cr_assert_eq(hsq_codec_encode(t, x, 1, code), HSQ_OK);
	hsq_codec_decode(t, code, 1, y);
	for (int j = 0; j < 64; j++)
		cr_expect_eq(y[j], 0.0f, "zero vector decodes to zero");
	for (int j = 0; j < 64; j++)
		x[j] = 0.75f;
	cr_assert_eq(hsq_codec_encode(p, x, 1, code), HSQ_OK);
	hsq_codec_decode(p, code, 1, y);
	for (int j = 0; j < 64; j++)
		cr_expect_eq(y[j], 0.75f, "a constant vector is exact in plain");
	for (int j = 0; j < 64; j++)
		x[j] = (j % 2 ? 1e6f : -1e6f); /* beyond fp16: side data saturates */
	cr_assert_eq(hsq_codec_encode(t, x, 1, code), HSQ_OK);
	hsq_codec_decode(t, code, 1, y);
	for (int j = 0; j < 64; j++)
		cr_expect(isfinite(y[j]));
	x[5] = NAN;
	cr_expect_eq(hsq_codec_encode(t, x, 1, code), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "not finite"));
	hsq_codec_free(t);
	hsq_codec_free(p);
}

/* test_codec_study.c - regimes, metrics, summaries and the study runner. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/codec_metrics.h"
#include "eval/codec_study.h"
#include "codec_testutil.h"

static hsq_regime_shape small_shape(void)
{
	hsq_regime_shape s = hsq_regime_default_shape();
	s.n_calib = 300;
	s.n_test = 200;
	return s;
}

static double energy_per_coordinate(const float *x, int n, int d)
{
	double e = 0;
	for (int i = 0; i < n * d; i++)
		e += (double)x[i] * x[i];
	return e / ((double)n * d);
}

/* Every regime is deterministic per seed and has unit energy per
 * coordinate on average (so errors compare across regimes). */
Test(regimes, deterministic_with_unit_energy)
{
	hsq_regime_shape sh = small_shape();
	for (int r = 0; r < HSQ_N_REGIMES; r++) {
		hsq_rng g1, g2;
		hsq_rng_init(&g1, HSQ_RNG_PCG64, 5, (uint64_t)r);
		hsq_rng_init(&g2, HSQ_RNG_PCG64, 5, (uint64_t)r);
		hsq_regime_data a, b;
		cr_assert_eq(hsq_regime_generate((hsq_regime)r, &sh, &g1, &a), HSQ_OK, "%s", hsq_last_error());
		cr_assert_eq(hsq_regime_generate((hsq_regime)r, &sh, &g2, &b), HSQ_OK);
		size_t nt = (size_t)sh.n_test * sh.dim;
		cr_expect_eq(memcmp(a.k, b.k, nt * sizeof(float)), 0, "%s", hsq_regime_name((hsq_regime)r));
		cr_expect_eq(memcmp(a.q, b.q, (size_t)sh.n_query * sh.dim * sizeof(float)), 0);
		double ek = energy_per_coordinate(a.k, sh.n_test, sh.dim);
		double ev = energy_per_coordinate(a.v_calib, sh.n_calib, sh.dim);
		/* heavy tails make the sample energy noisy */
		double tol = r == HSQ_REGIME_HEAVY_TAIL ? 0.35 : 0.1;
		cr_expect(fabs(ek - 1) < tol, "%s: K energy per coordinate %g", hsq_regime_name((hsq_regime)r), ek);
		cr_expect(fabs(ev - 1) < tol, "%s: V energy per coordinate %g", hsq_regime_name((hsq_regime)r), ev);
		/* queries scaled to the score standard deviation */
		double ss = 0;
		for (int i = 0; i < sh.n_query; i++)
			for (int t = 0; t < sh.n_test; t++) {
				double s = 0;
				for (int j = 0; j < sh.dim; j++)
					s += (double)a.q[i * sh.dim + j] * a.k[t * sh.dim + j];
				s /= sqrt(sh.dim);
				ss += s * s;
			}
		double sd = sqrt(ss / (sh.n_query * sh.n_test));
		cr_expect(fabs(sd / sh.score_std - 1) < 0.3, "%s: score std %g", hsq_regime_name((hsq_regime)r), sd);
		hsq_regime_data_free(&a);
		hsq_regime_data_free(&b);
	}
}

/* Fraction of the energy of rows y that lies in the span of the top r
 * eigenvectors of the covariance of rows x. */
static double captured(const float *x, int nx, const float *y, int ny, int d, int r)
{
	hsq_sq_calib *c;
	hsq_sq_calib_params p = hsq_sq_calib_default_params();
	cr_assert_eq(hsq_sq_calibrate(x, nx, d, &p, &c), HSQ_OK);
	/* project through a codec-free path: serialize to read the basis */
	uint8_t *buf;
	size_t len;
	cr_assert_eq(hsq_sq_calib_serialize(c, &buf, &len), HSQ_OK);
	const uint8_t *vec = buf + 64 + 4 * d + 8 * d; /* float32 eigenvectors, row-major */
	double in = 0, all = 0;
	for (int i = 0; i < ny; i++) {
		for (int k = 0; k < r; k++) {
			double s = 0;
			for (int j = 0; j < d; j++) {
				float u;
				memcpy(&u, vec + 4 * ((size_t)k * d + j), 4);
				s += u * y[i * d + j];
			}
			in += s * s;
		}
		for (int j = 0; j < d; j++)
			all += (double)y[i * d + j] * y[i * d + j];
	}
	free(buf);
	hsq_sq_calib_free(c);
	return in / all;
}

Test(regimes, subspaces_are_as_documented)
{
	hsq_regime_shape sh = small_shape();
	hsq_rng g;
	hsq_regime_data dat;
	int d = sh.dim;
	/* low-rank: K calibration has a gap at 8 */
	hsq_rng_init(&g, HSQ_RNG_MT19937, 1, 0);
	cr_assert_eq(hsq_regime_generate(HSQ_REGIME_LOW_RANK, &sh, &g, &dat), HSQ_OK);
	hsq_sq_calib *c;
	cr_assert_eq(hsq_sq_calibrate(dat.k_calib, sh.n_calib, d, NULL, &c), HSQ_OK);
	cr_expect_eq(hsq_sq_calib_deff(c), 8);
	hsq_sq_calib_free(c);
	cr_expect_gt(captured(dat.k_calib, sh.n_calib, dat.k, sh.n_test, d, 8), 0.9);
	hsq_regime_data_free(&dat);
	/* kv-aligned: V lies in K's subspace; kv-misaligned: orthogonal to it */
	cr_assert_eq(hsq_regime_generate(HSQ_REGIME_KV_ALIGNED, &sh, &g, &dat), HSQ_OK);
	cr_expect_gt(captured(dat.k_calib, sh.n_calib, dat.v, sh.n_test, d, 8), 0.9);
	hsq_regime_data_free(&dat);
	cr_assert_eq(hsq_regime_generate(HSQ_REGIME_KV_MISALIGNED, &sh, &g, &dat), HSQ_OK);
	cr_expect_lt(captured(dat.k_calib, sh.n_calib, dat.v, sh.n_test, d, 8), 0.05);
	hsq_regime_data_free(&dat);
	/* shift: half of the test energy lies outside the calibration span */
	cr_assert_eq(hsq_regime_generate(HSQ_REGIME_SHIFT, &sh, &g, &dat), HSQ_OK);
	double in = captured(dat.k_calib, sh.n_calib, dat.k, sh.n_test, d, 16);
	cr_expect(in > 0.4 && in < 0.6, "shift: %.2f of the test energy in the calibrated span", in);
	hsq_regime_data_free(&dat);
}

Test(regimes, names_and_errors)
{
	hsq_regime r;
	cr_expect_eq(hsq_regime_parse("kv-misaligned", &r), HSQ_OK);
	cr_expect_eq(r, HSQ_REGIME_KV_MISALIGNED);
	cr_expect_eq(hsq_regime_parse("gaussian", &r), HSQ_ERR_INVALID_ARG);
	hsq_regime_shape sh = small_shape();
	sh.dim = 8;
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 1, 0);
	hsq_regime_data dat;
	cr_expect_eq(hsq_regime_generate(HSQ_REGIME_ISOTROPIC, &sh, &g, &dat), HSQ_ERR_INVALID_ARG);
	sh = small_shape();
	sh.score_std = 0;
	cr_expect_eq(hsq_regime_generate(HSQ_REGIME_ISOTROPIC, &sh, &g, &dat), HSQ_ERR_INVALID_ARG);
}

Test(metrics, definitions)
{
	float x[4] = {3, 4, 0, 0}, y[4] = {3, 4, 0, 0}, z[4] = {0, 0, 0, 1};
	double e, s;
	hsq_sq_err(x, y, 2, 2, &e, &s);
	cr_expect_eq(e, 0.0);
	cr_expect_eq(s, 25.0);
	cr_expect_float_eq(hsq_cos_sum(x, y, 1, 2), 1.0, 1e-12);
	cr_expect_float_eq(hsq_cos_sum(x, z, 1, 4), 0.0, 1e-12);
	cr_expect_float_eq(hsq_cos_sum(x + 2, y + 2, 1, 2), 1.0, 1e-12); /* both zero */
	double sc[6] = {0, log(2), log(3), 1, 1, 1};
	hsq_softmax_rows(sc, 2, 3);
	cr_expect_float_eq(sc[0], 1 / 6.0, 1e-12);
	cr_expect_float_eq(sc[2], 0.5, 1e-12);
	cr_expect_float_eq(sc[4], 1 / 3.0, 1e-12);
	float v[6] = {1, 0, 0, 1, 2, 2};
	double o[4];
	hsq_attend(sc, v, 2, 3, 2, o);
	cr_expect_float_eq(o[0], 1 / 6.0 + 1.0, 1e-12);
	cr_expect_float_eq(o[1], 2 / 6.0 + 1.0, 1e-12);
	hsq_metric m;
	cr_expect_eq(hsq_metric_parse("attn_err_v", &m), HSQ_OK);
	cr_expect_eq(m, HSQ_METRIC_ATTN_ERR_V);
	cr_expect_eq(hsq_metric_parse("mse", &m), HSQ_ERR_INVALID_ARG);
}

/* hsq_codec_measure on one instance: the combined metrics follow from the
 * isolated ones, and an 8-bit plain codec is nearly exact. */
Test(metrics, measure_is_consistent)
{
	hsq_regime_shape sh = small_shape();
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 3, 0);
	hsq_regime_data dat;
	cr_assert_eq(hsq_regime_generate(HSQ_REGIME_ISOTROPIC, &sh, &g, &dat), HSQ_OK);
	double v[HSQ_N_METRICS];
	hsq_codec *k = tu_codec(HSQ_CODEC_TQ, sh.dim, 3, HSQ_KV_K, 1, NULL);
	hsq_codec *vv = tu_codec(HSQ_CODEC_TQ, sh.dim, 3, HSQ_KV_V, 2, NULL);
	cr_assert_eq(hsq_codec_measure(k, vv, &dat, v), HSQ_OK);
	cr_expect(v[HSQ_METRIC_RELMSE] >= fmin(v[HSQ_METRIC_RELMSE_K], v[HSQ_METRIC_RELMSE_V]) &&
		  v[HSQ_METRIC_RELMSE] <= fmax(v[HSQ_METRIC_RELMSE_K], v[HSQ_METRIC_RELMSE_V]));
	cr_expect_float_eq(v[HSQ_METRIC_D2],
			   v[HSQ_METRIC_RELMSE] * v[HSQ_METRIC_RELMSE] + 4 * v[HSQ_METRIC_DIR_ERR] * v[HSQ_METRIC_DIR_ERR],
			   1e-12);
	cr_expect(fabs(v[HSQ_METRIC_RELMSE_K] / 0.034 - 1) < 0.1, "tq 3-bit relmse %g", v[HSQ_METRIC_RELMSE_K]);
	cr_expect_lt(v[HSQ_METRIC_SCORE_BIAS], 0.0, "the MSE codebook shrinks scores");
	hsq_codec_free(k);
	hsq_codec_free(vv);
	k = tu_codec(HSQ_CODEC_PLAIN, sh.dim, 8, HSQ_KV_K, 1, NULL);
	vv = tu_codec(HSQ_CODEC_PLAIN, sh.dim, 8, HSQ_KV_V, 1, NULL);
	cr_assert_eq(hsq_codec_measure(k, vv, &dat, v), HSQ_OK);
	for (int m = 0; m < HSQ_N_METRICS; m++)
		cr_expect_lt(fabs(v[m]), 1e-3, "plain 8-bit %s = %g", hsq_metric_name((hsq_metric)m), v[m]);
	hsq_codec_free(k);
	hsq_codec_free(vv);
	hsq_regime_data_free(&dat);
}

Test(summary, t_interval)
{
	double x[5] = {1, 2, 3, 4, 5};
	hsq_summary s;
	hsq_summarize(x, 5, &s);
	cr_expect_float_eq(s.mean, 3.0, 1e-12);
	cr_expect_float_eq(s.sd, sqrt(2.5), 1e-12);
	cr_expect_float_eq(s.ci_hi - s.mean, 2.7764 * sqrt(2.5) / sqrt(5), 1e-4);
	/* t quantiles: df 10, 30, 100, 199 */
	cr_expect_float_eq(hsq_t975(10), 2.2281, 2e-4);
	cr_expect_float_eq(hsq_t975(30), 2.0423, 1e-4);
	cr_expect_float_eq(hsq_t975(100), 1.9840, 1e-4);
	cr_expect_float_eq(hsq_t975(199), 1.9720, 1e-4);
}

static hsq_study_params tiny_study(void)
{
	hsq_study_params p = hsq_study_default_params();
	p.n_seeds = 3;
	p.shape = small_shape();
	p.shape.dim = 64;
	p.n_regimes = 2;
	p.regimes[0] = HSQ_REGIME_LOW_RANK;
	p.regimes[1] = HSQ_REGIME_HEAVY_TAIL;
	return p;
}

/* The result does not depend on the number of threads. */
Test(study, independent_of_threads)
{
	hsq_study_params p = tiny_study();
	hsq_study *a, *b;
	p.n_threads = 1;
	cr_assert_eq(hsq_study_run(&p, &a), HSQ_OK, "%s", hsq_last_error());
	p.n_threads = 3;
	cr_assert_eq(hsq_study_run(&p, &b), HSQ_OK, "%s", hsq_last_error());
	for (int s = 0; s < p.n_streams; s++)
		for (int r = 0; r < p.n_regimes; r++)
			for (int c = 0; c < p.n_codecs; c++)
				for (int k = 0; k < p.n_bits; k++)
					for (int m = 0; m < HSQ_N_METRICS; m++)
						cr_assert_eq(memcmp(hsq_study_samples(a, s, r, c, k, (hsq_metric)m),
								    hsq_study_samples(b, s, r, c, k, (hsq_metric)m),
								    sizeof(double) * p.n_seeds),
							     0);
	cr_expect_eq(hsq_study_mean_deff(a, 0, 0), 8.0, "low-rank d_eff");
	cr_expect_null(hsq_study_samples(a, 2, 0, 0, 0, HSQ_METRIC_D2));
	/* the two streams draw different data */
	cr_expect_neq(hsq_study_samples(a, 0, 0, 1, 0, HSQ_METRIC_D2)[0],
		      hsq_study_samples(a, 1, 0, 1, 0, HSQ_METRIC_D2)[0]);
	hsq_finding f[HSQ_N_FINDINGS];
	cr_expect_eq(hsq_study_findings(a, 0, f), HSQ_OK);
	cr_expect_eq(hsq_study_findings(a, 2, f), HSQ_ERR_INVALID_ARG);
	hsq_study_free(a);
	hsq_study_free(b);
}

Test(study, refuses_bad_parameters)
{
	hsq_study *s;
	hsq_study_params p = tiny_study();
	p.n_seeds = 1;
	cr_expect_eq(hsq_study_run(&p, &s), HSQ_ERR_INVALID_ARG);
	p = tiny_study();
	p.bits[2] = 5; /* tq supports 1..4 */
	cr_expect_eq(hsq_study_run(&p, &s), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "tq does not support 5 bits"), "%s", hsq_last_error());
	p = tiny_study();
	p.regimes[1] = p.regimes[0];
	cr_expect_eq(hsq_study_run(&p, &s), HSQ_ERR_INVALID_ARG);
	p = tiny_study();
	p.streams[1] = HSQ_RNG_PCG64;
	cr_expect_eq(hsq_study_run(&p, &s), HSQ_ERR_INVALID_ARG);
	p = tiny_study();
	p.calib.tail_bits = 3;
	p.bits[0] = 1;
	p.n_codecs = 1;
	p.codecs[0] = HSQ_CODEC_SQ;
	cr_expect_eq(hsq_study_run(&p, &s), HSQ_ERR_INVALID_ARG, "tail floor above the budget");
	cr_expect(strstr(hsq_last_error(), "tail floor"), "%s", hsq_last_error());
}

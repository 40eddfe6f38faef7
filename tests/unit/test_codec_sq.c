/* test_codec_sq.c - SpectralQuant: calibration, d_eff, bit allocation,
 * calibration files, and the codec on structured data. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec_testutil.h"
#include "common/linalg.h"

/* n rows: rank-r signal (variance var_r per direction, in the first r
 * coordinates rotated by a fixed random basis) plus N(0, noise^2). */
static float *structured(hsq_rng *g, int n, int d, int r, const double *var, double noise)
{
	double *basis = malloc(sizeof(double) * (size_t)d * d);
	for (int i = 0; i < d * d; i++)
		basis[i] = hsq_rng_normal(g);
	cr_assert_eq(hsq_orthonormalize_rows(basis, d, d), HSQ_OK);
	float *x = malloc(sizeof(float) * (size_t)n * d);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < d; j++) {
			double v = noise * hsq_rng_normal(g);
			x[i * d + j] = (float)v;
		}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < r; k++) {
			double z = sqrt(var[k]) * hsq_rng_normal(g);
			for (int j = 0; j < d; j++)
				x[i * d + j] += (float)(z * basis[k * d + j]);
		}
	free(basis);
	return x;
}

static hsq_sq_calib *calibrate(const float *x, int n, int d)
{
	hsq_sq_calib *c;
	cr_assert_eq(hsq_sq_calibrate(x, n, d, NULL, &c), HSQ_OK, "%s", hsq_last_error());
	return c;
}

Test(sq, eigenbasis_and_spectral_gap)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 1, 0);
	const int d = 64, n = 1000;
	double var[6] = {40, 30, 20, 16, 12, 10};
	float *x = structured(&g, n, d, 6, var, 0.3);
	hsq_sq_calib *c = calibrate(x, n, d);
	const double *ev = hsq_sq_calib_eigenvalues(c);
	for (int i = 1; i < d; i++)
		cr_expect_geq(ev[i - 1], ev[i], "descending");
	cr_expect_eq(hsq_sq_calib_deff(c), 6, "the gap after the six signal directions");
	cr_expect(fabs(ev[0] / 40.0 - 1) < 0.2, "top eigenvalue %g near 40", ev[0]);
	cr_expect(ev[10] < 0.2, "noise eigenvalues near 0.09: %g", ev[10]);
	hsq_sq_calib_free(c);
	free(x);
	/* isotropic data has no gap: no pruning */
	x = tu_gaussian(&g, n, d, 1.0);
	c = calibrate(x, n, d);
	cr_expect_eq(hsq_sq_calib_deff(c), d);
	hsq_sq_calib_free(c);
	free(x);
}

/* Fewer samples than dimensions: the sample covariance has rank n - 1 and
 * the gap criterion lands on it, whatever the data (d_eff follows the
 * calibration budget, as the seed observes). */
Test(sq, deff_follows_the_calibration_budget)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 2, 0);
	float *x = tu_gaussian(&g, 40, 64, 1.0);
	hsq_sq_calib *c = calibrate(x, 40, 64);
	cr_expect_eq(hsq_sq_calib_deff(c), 39);
	hsq_sq_calib_free(c);
	free(x);
}

Test(sq, allocation_rules)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 3, 0);
	const int d = 64, n = 2000;
	double var[8] = {64, 32, 16, 8, 4, 2, 1.5, 1.2};
	float *x = structured(&g, n, d, 8, var, 0.1);
	hsq_sq_calib *c = calibrate(x, n, d);
	int head = hsq_sq_calib_deff(c);
	cr_assert_eq(head, 8);
	for (int b = 1; b <= 4; b++) {
		uint8_t wf[64], un[64];
		cr_assert_eq(hsq_sq_calib_allocation(c, HSQ_CODEC_SQ, b, wf), HSQ_OK);
		cr_assert_eq(hsq_sq_calib_allocation(c, HSQ_CODEC_SQU, b, un), HSQ_OK);
		int sum_wf = 0, sum_un = 0;
		for (int i = 0; i < d; i++) {
			sum_wf += wf[i];
			sum_un += un[i];
			cr_expect_leq(wf[i], 8);
			if (i >= head) {
				cr_expect_eq(wf[i], 1, "tail floor");
				cr_expect_eq(un[i], 1, "tail floor");
			}
		}
		cr_expect_leq(sum_wf, b * d);
		cr_expect_leq(sum_un, b * d);
		/* uniform: head coordinates differ by at most one bit */
		int lo = 9, hi = 0;
		for (int i = 0; i < head; i++) {
			lo = un[i] < lo ? un[i] : lo;
			hi = un[i] > hi ? un[i] : hi;
		}
		cr_expect_leq(hi - lo, 1, "b=%d uniform spread %d..%d", b, lo, hi);
		/* water-filling: more variance, at least as many bits */
		for (int i = 1; i < head; i++)
			cr_expect_geq(wf[i - 1], wf[i], "b=%d coordinate %d", b, i);
	}
	/* at 1 bit the head budget is 8 bits: water-filling puts them on the
	 * strongest directions, uniform gives each head coordinate one */
	uint8_t wf[64];
	hsq_sq_calib_allocation(c, HSQ_CODEC_SQ, 1, wf);
	cr_expect_gt(wf[0], wf[7]);
	hsq_sq_calib_free(c);
	free(x);
}

Test(sq, tail_floor_must_fit_the_budget)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 4, 0);
	double var[2] = {50, 40};
	float *x = structured(&g, 500, 64, 2, var, 0.05);
	hsq_sq_calib_params p = hsq_sq_calib_default_params();
	p.tail_bits = 2;
	hsq_sq_calib *c;
	cr_assert_eq(hsq_sq_calibrate(x, 500, 64, &p, &c), HSQ_OK);
	uint8_t a[64];
	cr_expect_eq(hsq_sq_calib_allocation(c, HSQ_CODEC_SQ, 1, a), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "tail floor"), "%s", hsq_last_error());
	hsq_codec_params cp = {.kind = HSQ_CODEC_SQU, .dim = 64, .bits = 1, .calib = c};
	hsq_codec *codec;
	cr_expect_eq(hsq_codec_new(&cp, &codec), HSQ_ERR_INVALID_ARG);
	hsq_sq_calib_free(c);
	free(x);
}

Test(sq, refuses_bad_calibration_input)
{
	float x[64 * 3] = {0};
	hsq_sq_calib *c;
	cr_expect_eq(hsq_sq_calibrate(x, 1, 64, NULL, &c), HSQ_ERR_INVALID_ARG);
	x[70] = INFINITY;
	cr_expect_eq(hsq_sq_calibrate(x, 3, 64, NULL, &c), HSQ_ERR_INVALID_ARG);
	x[70] = 0;
	cr_expect_eq(hsq_sq_calibrate(x, 3, 8, NULL, &c), HSQ_ERR_INVALID_ARG);
	hsq_sq_calib_params p = hsq_sq_calib_default_params();
	p.gap_ratio = 1.0;
	cr_expect_eq(hsq_sq_calibrate(x, 3, 64, &p, &c), HSQ_ERR_INVALID_ARG);
}

/* On data inside the calibrated subspace SQ at 2 bits beats TQ at 2 bits
 * by a wide margin: the low-rank advantage the codec exists for. */
Test(sq, structured_data_reconstruction)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 5, 0);
	const int d = 128, n = 600;
	double var[8] = {16, 16, 16, 16, 16, 16, 16, 16};
	float *all = structured(&g, 2 * n, d, 8, var, 0.25);
	hsq_sq_calib *cal = calibrate(all, n, d);
	const float *x = all + (size_t)n * d;
	double err[2];
	const int kinds[2] = {HSQ_CODEC_SQ, HSQ_CODEC_TQ};
	for (int t = 0; t < 2; t++) {
		hsq_codec *c = tu_codec(kinds[t], d, 2, HSQ_KV_K, 1, cal);
		uint8_t *codes = malloc(n * hsq_codec_code_bytes(c));
		float *y = malloc(sizeof(float) * n * d);
		cr_assert_eq(hsq_codec_encode(c, x, n, codes), HSQ_OK);
		hsq_codec_decode(c, codes, n, y);
		double e = 0, s = 0;
		for (int i = 0; i < n * d; i++) {
			e += (x[i] - y[i]) * (x[i] - y[i]);
			s += x[i] * x[i];
		}
		err[t] = e / s;
		free(codes);
		free(y);
		hsq_codec_free(c);
	}
	cr_expect_lt(err[0], 0.05, "sq relmse %g", err[0]);
	cr_expect_lt(err[0] * 3, err[1], "sq %g should beat tq %g", err[0], err[1]);
	hsq_sq_calib_free(cal);
	free(all);
}

static hsq_sq_calib *sample_calib(void)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_MT19937, 6, 0);
	double var[4] = {30, 20, 10, 5};
	float *x = structured(&g, 300, 48, 4, var, 0.2);
	hsq_sq_calib *c = calibrate(x, 300, 48);
	free(x);
	return c;
}

Test(sq, serialization_round_trip)
{
	hsq_sq_calib *a = sample_calib(), *b;
	uint8_t *buf, *buf2;
	size_t len, len2;
	cr_assert_eq(hsq_sq_calib_serialize(a, &buf, &len), HSQ_OK);
	cr_expect_eq(memcmp(buf, "HSQSQCAL", 8), 0);
	cr_assert_eq(hsq_sq_calib_deserialize(buf, len, &b), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(hsq_sq_calib_deff(b), hsq_sq_calib_deff(a));
	for (int i = 0; i < 48; i++)
		cr_expect_eq(hsq_sq_calib_eigenvalues(b)[i], hsq_sq_calib_eigenvalues(a)[i]);
	cr_assert_eq(hsq_sq_calib_serialize(b, &buf2, &len2), HSQ_OK);
	cr_expect_eq(len, len2);
	cr_expect_eq(memcmp(buf, buf2, len), 0, "serialize(deserialize(x)) == x");
	/* a codec from the loaded calibration encodes identically */
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 7, 0);
	float *x = tu_gaussian(&g, 50, 48, 2.0);
	for (int k = HSQ_CODEC_SQ; k <= HSQ_CODEC_SQU; k++) {
		hsq_codec *ca = tu_codec(k, 48, 3, HSQ_KV_V, 0, a), *cb = tu_codec(k, 48, 3, HSQ_KV_V, 0, b);
		size_t n = hsq_codec_code_bytes(ca) * 50;
		uint8_t *ka = malloc(n), *kb = malloc(n);
		cr_assert_eq(hsq_codec_encode(ca, x, 50, ka), HSQ_OK);
		cr_assert_eq(hsq_codec_encode(cb, x, 50, kb), HSQ_OK);
		cr_expect_eq(memcmp(ka, kb, n), 0, "%s codes differ after a round trip", hsq_codec_kind_name(k));
		free(ka);
		free(kb);
		hsq_codec_free(ca);
		hsq_codec_free(cb);
	}
	free(x);
	free(buf);
	free(buf2);
	hsq_sq_calib_free(a);
	hsq_sq_calib_free(b);
}

Test(sq, damaged_files_are_refused)
{
	hsq_sq_calib *a = sample_calib(), *b;
	uint8_t *buf;
	size_t len;
	cr_assert_eq(hsq_sq_calib_serialize(a, &buf, &len), HSQ_OK);
	uint8_t *copy = malloc(len + 1);

	memcpy(copy, buf, len);
	copy[len / 2] ^= 0x10;
	cr_expect_eq(hsq_sq_calib_deserialize(copy, len, &b), HSQ_ERR_CHECKSUM, "payload bit flip");
	memcpy(copy, buf, len);
	copy[20] ^= 1; /* d_eff */
	cr_expect_eq(hsq_sq_calib_deserialize(copy, len, &b), HSQ_ERR_CHECKSUM, "header bit flip");
	cr_expect_eq(hsq_sq_calib_deserialize(buf, len - 1, &b), HSQ_ERR_TRUNCATED);
	cr_expect_eq(hsq_sq_calib_deserialize(buf, 30, &b), HSQ_ERR_TRUNCATED);
	memcpy(copy, buf, len);
	copy[len] = 0;
	cr_expect_eq(hsq_sq_calib_deserialize(copy, len + 1, &b), HSQ_ERR_FORMAT, "trailing byte");
	memcpy(copy, buf, len);
	copy[0] = 'X';
	cr_expect_eq(hsq_sq_calib_deserialize(copy, len, &b), HSQ_ERR_FORMAT, "magic");
	memcpy(copy, buf, len);
	copy[8] = 2; /* version 2: refused before the checksum is looked at */
	cr_expect_eq(hsq_sq_calib_deserialize(copy, len, &b), HSQ_ERR_UNSUPPORTED);
	cr_expect(strstr(hsq_last_error(), "version 2"), "%s", hsq_last_error());
	free(copy);
	free(buf);
	hsq_sq_calib_free(a);
}

Test(sq, save_and_load_files)
{
	hsq_sq_calib *a = sample_calib(), *b;
	char dir[] = "/tmp/hsq-sq-test.XXXXXX";
	cr_assert(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/k.hsqsq", dir);
	cr_assert_eq(hsq_sq_calib_save(a, path), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_sq_calib_load(path, &b), HSQ_OK, "%s", hsq_last_error());
	cr_expect_eq(hsq_sq_calib_dim(b), 48);
	hsq_sq_calib_free(b);
	/* truncate the file: the error names it */
	FILE *f = fopen(path, "r+");
	cr_assert(f);
	cr_assert_eq(ftruncate(fileno(f), 100), 0);
	fclose(f);
	cr_expect_eq(hsq_sq_calib_load(path, &b), HSQ_ERR_TRUNCATED);
	cr_expect(strstr(hsq_last_error(), path), "%s", hsq_last_error());
	cr_expect_eq(hsq_sq_calib_load("/nonexistent/k.hsqsq", &b), HSQ_ERR_IO);
	char bad[300];
	snprintf(bad, sizeof bad, "%s/missing-dir/k.hsqsq", dir);
	cr_expect_eq(hsq_sq_calib_save(a, bad), HSQ_ERR_IO);
	unlink(path);
	rmdir(dir);
	hsq_sq_calib_free(a);
}

/* test_codec_weighted.c - query-weighted TQ rounding (codec_tq_rounding,
 * codec_tq_encode_weighted) and the factor it rounds with
 * (hsq_inverse_cholesky_upper). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec_testutil.h"
#include "common/linalg.h"

/* A random symmetric positive definite n x n matrix: B B^T + n I. */
static void random_spd(hsq_rng *g, int n, double *w)
{
	double *b = malloc(sizeof(double) * n * n);
	for (int i = 0; i < n * n; i++)
		b[i] = hsq_rng_normal(g);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			double s = i == j ? n : 0.0;
			for (int k = 0; k < n; k++)
				s += b[i * n + k] * b[j * n + k];
			w[i * n + j] = s;
		}
	free(b);
}

Test(weighted, inverse_cholesky_factor)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 41, 0);
	const int sizes[] = {1, 2, 7, 64};
	for (int s = 0; s < 4; s++) {
		int n = sizes[s];
		double *w = malloc(sizeof(double) * n * n), *u = malloc(sizeof(double) * n * n);
		double *work = malloc(sizeof(double) * n * n);
		random_spd(&g, n, w);
		cr_assert_eq(hsq_inverse_cholesky_upper(w, n, u, work), HSQ_OK, "%s", hsq_last_error());
		double worst = 0.0;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++) {
				if (j < i)
					cr_expect_eq(u[i * n + j], 0.0, "n %d: u[%d][%d] below the diagonal", n, i, j);
				/* (u^T u w)[i][j] is the identity */
				double t = 0.0;
				for (int k = 0; k < n; k++) {
					double utu = 0.0;
					for (int r = 0; r < n; r++)
						utu += u[r * n + i] * u[r * n + k];
					t += utu * w[k * n + j];
				}
				worst = fmax(worst, fabs(t - (i == j)));
			}
		cr_expect_lt(worst, 1e-10, "n %d: |u^T u w - I| = %g", n, worst);
		free(w);
		free(u);
		free(work);
	}
	double not_pd[4] = {1, 2, 2, 1}, u[4], work[4];
	cr_expect_eq(hsq_inverse_cholesky_upper(not_pd, 2, u, work), HSQ_ERR_INVALID_ARG);
}

/* Without queries (m = 0) the rounding is plain nearest rounding: the
 * same bytes as hsq_codec_encode. */
Test(weighted, zero_weight_is_nearest_rounding)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 42, 0);
	const int d = 64, n = 2000;
	hsq_codec *c = tu_codec(HSQ_CODEC_TQ, d, 4, HSQ_KV_K, 7, NULL);
	size_t cb = hsq_codec_code_bytes(c);
	double *m = calloc((size_t)d * d, sizeof *m);
	float *u = malloc(sizeof(float) * d * d);
	cr_assert_eq(codec_tq_rounding(c, m, 0.1, u), HSQ_OK, "%s", hsq_last_error());
	float *x = tu_gaussian(&g, n, d, 3.0);
	uint8_t *a = malloc(n * cb), *b = malloc(n * cb);
	cr_assert_eq(hsq_codec_encode(c, x, n, a), HSQ_OK);
	for (int i = 0; i < n; i++)
		cr_assert_eq(codec_tq_encode_weighted(c, x + (size_t)i * d, u, b + i * cb), HSQ_OK);
	cr_expect_eq(memcmp(a, b, n * cb), 0, "m = 0 gives the nearest levels");
	free(m);
	free(u);
	free(x);
	free(a);
	free(b);
	hsq_codec_free(c);
}

/* With queries in a few directions, the error those queries see shrinks
 * and the total error grows only a little: the rounding moves the error
 * into directions no query reads. */
Test(weighted, query_directions_see_less_error)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 43, 0);
	const int d = 64, n = 4000, nq = 6;
	hsq_codec *c = tu_codec(HSQ_CODEC_TQ, d, 4, HSQ_KV_K, 11, NULL);
	size_t cb = hsq_codec_code_bytes(c);
	float *q = tu_gaussian(&g, nq, d, 1.0);
	double *m = calloc((size_t)d * d, sizeof *m);
	for (int k = 0; k < nq; k++)
		for (int i = 0; i < d; i++)
			for (int j = 0; j < d; j++)
				m[i * d + j] += (double)q[k * d + i] * q[k * d + j];
	float *u = malloc(sizeof(float) * d * d);
	cr_assert_eq(codec_tq_rounding(c, m, 0.1, u), HSQ_OK, "%s", hsq_last_error());
	float *x = tu_gaussian(&g, n, d, 1.0), y[64];
	uint8_t *code = malloc(cb);
	double seen[2] = {0, 0}, total[2] = {0, 0};
	for (int w = 0; w < 2; w++)
		for (int i = 0; i < n; i++) {
			const float *xi = x + (size_t)i * d;
			if (w)
				cr_assert_eq(codec_tq_encode_weighted(c, xi, u, code), HSQ_OK);
			else
				cr_assert_eq(hsq_codec_encode(c, xi, 1, code), HSQ_OK);
			hsq_codec_decode(c, code, 1, y);
			for (int j = 0; j < d; j++)
				total[w] += ((double)y[j] - xi[j]) * ((double)y[j] - xi[j]);
			for (int k = 0; k < nq; k++) {
				double e = 0.0;
				for (int j = 0; j < d; j++)
					e += (double)q[k * d + j] * ((double)y[j] - xi[j]);
				seen[w] += e * e;
			}
		}
	cr_expect_lt(seen[1], 0.5 * seen[0], "error along the queries: weighted %g, nearest %g", seen[1], seen[0]);
	cr_expect_lt(total[1], 2.0 * total[0], "total error: weighted %g, nearest %g", total[1], total[0]);
	cr_expect_gt(total[1], total[0], "nearest rounding has the least total error");
	free(q);
	free(m);
	free(u);
	free(x);
	free(code);
	hsq_codec_free(c);
}

Test(weighted, refuses_other_codecs_and_bad_vectors)
{
	const int d = 64;
	hsq_codec *qjl = tu_codec(HSQ_CODEC_TQ_QJL, d, 4, HSQ_KV_K, 3, NULL);
	double *m = calloc((size_t)d * d, sizeof *m);
	float u[64 * 64], x[64] = {0};
	uint8_t code[256];
	cr_expect_eq(codec_tq_rounding(qjl, m, 0.1, u), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(codec_tq_encode_weighted(qjl, x, u, code), HSQ_ERR_INVALID_ARG);
	hsq_codec *tq = tu_codec(HSQ_CODEC_TQ, d, 4, HSQ_KV_K, 3, NULL);
	cr_assert_eq(codec_tq_rounding(tq, m, 0.1, u), HSQ_OK);
	x[5] = NAN;
	cr_expect_eq(codec_tq_encode_weighted(tq, x, u, code), HSQ_ERR_INVALID_ARG);
	cr_expect(strstr(hsq_last_error(), "not finite"), "%s", hsq_last_error());
	free(m);
	hsq_codec_free(qjl);
	hsq_codec_free(tq);
}

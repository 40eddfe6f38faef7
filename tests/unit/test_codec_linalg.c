/* test_codec_linalg.c - the symmetric eigen-decomposition behind
 * SpectralQuant, checked against an independent cyclic Jacobi solver
 * written here, and Gram-Schmidt. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hsq_eval.h"
#include "common/linalg.h"

/* Cyclic Jacobi: slow, simple, and a different algorithm from the
 * Householder + QL code under test. Eigenvalues only, sorted descending. */
static void jacobi_eigenvalues(const double *a_in, int n, double *ev)
{
	double *a = malloc(sizeof(double) * n * n);
	memcpy(a, a_in, sizeof(double) * n * n);
	for (int sweep = 0; sweep < 100; sweep++) {
		double off = 0;
		for (int p = 0; p < n; p++)
			for (int q = p + 1; q < n; q++)
				off += a[p * n + q] * a[p * n + q];
		if (off < 1e-26)
			break;
		for (int p = 0; p < n; p++)
			for (int q = p + 1; q < n; q++) {
				if (fabs(a[p * n + q]) < 1e-300)
					continue;
				double theta = (a[q * n + q] - a[p * n + p]) / (2 * a[p * n + q]);
				double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
				double c = 1 / sqrt(t * t + 1), s = t * c;
				for (int k = 0; k < n; k++) { /* columns p, q */
					double akp = a[k * n + p], akq = a[k * n + q];
					a[k * n + p] = c * akp - s * akq;
					a[k * n + q] = s * akp + c * akq;
				}
				for (int k = 0; k < n; k++) { /* rows p, q */
					double apk = a[p * n + k], aqk = a[q * n + k];
					a[p * n + k] = c * apk - s * aqk;
					a[q * n + k] = s * apk + c * aqk;
				}
			}
	}
	for (int i = 0; i < n; i++)
		ev[i] = a[i * n + i];
	for (int i = 1; i < n; i++) /* insertion sort, descending */
		for (int j = i; j > 0 && ev[j] > ev[j - 1]; j--) {
			double t = ev[j];
			ev[j] = ev[j - 1];
			ev[j - 1] = t;
		}
	free(a);
}

static void check(const double *a, int n)
{
	double *ev = malloc(sizeof(double) * n), *v = malloc(sizeof(double) * n * n);
	double *ref = malloc(sizeof(double) * n);
	cr_assert_eq(hsq_sym_eigen(a, n, ev, v), HSQ_OK);
	jacobi_eigenvalues(a, n, ref);
	double scale = 0;
	for (int i = 0; i < n * n; i++)
		scale = fmax(scale, fabs(a[i]));
	for (int i = 0; i < n; i++) {
		cr_expect(fabs(ev[i] - ref[i]) < 1e-10 * (scale + 1), "n=%d eigenvalue %d: %.15g vs %.15g", n,
			  i, ev[i], ref[i]);
		if (i)
			cr_expect_geq(ev[i - 1], ev[i]);
		for (int r = 0; r < n; r++) { /* A v = lambda v */
			double s = 0;
			for (int c = 0; c < n; c++)
				s += a[r * n + c] * v[i * n + c];
			cr_expect(fabs(s - ev[i] * v[i * n + r]) < 1e-10 * (scale + 1) * n, "residual");
		}
		for (int j = 0; j <= i; j++) { /* orthonormal */
			double s = 0;
			for (int c = 0; c < n; c++)
				s += v[i * n + c] * v[j * n + c];
			cr_expect(fabs(s - (i == j)) < 1e-10, "orthonormality %d %d: %g", i, j, s);
		}
	}
	free(ev);
	free(v);
	free(ref);
}

Test(linalg, random_symmetric_matrices)
{
	hsq_rng g;
	hsq_rng_init(&g, HSQ_RNG_PCG64, 1, 0);
	const int sizes[] = {1, 2, 3, 7, 16, 33, 64};
	for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
		int n = sizes[t];
		double *a = malloc(sizeof(double) * n * n);
		for (int i = 0; i < n; i++)
			for (int j = 0; j <= i; j++)
				a[i * n + j] = a[j * n + i] = hsq_rng_normal(&g);
		check(a, n);
		free(a);
	}
}

Test(linalg, structured_matrices)
{
	/* diagonal, repeated eigenvalues, rank one, zero */
	const int n = 12;
	double a[144];
	memset(a, 0, sizeof a);
	for (int i = 0; i < n; i++)
		a[i * n + i] = (i % 3) - 1.0;
	check(a, n);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			a[i * n + j] = (i + 1.0) * (j + 1.0);
	check(a, n);
	memset(a, 0, sizeof a);
	check(a, n);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			a[i * n + j] = (i == j) ? 2.0 : (abs(i - j) == 1 ? -1.0 : 0.0);
	check(a, n); /* eigenvalues 2 - 2 cos(k pi / 13) */
	double ev[12], v[144];
	cr_assert_eq(hsq_sym_eigen(a, n, ev, v), HSQ_OK);
	for (int k = 1; k <= n; k++)
		cr_expect(fabs(ev[k - 1] - (2 - 2 * cos((n + 1 - k) * M_PI / (n + 1)))) < 1e-12);
	a[5] = NAN;
	cr_expect_eq(hsq_sym_eigen(a, n, ev, v), HSQ_ERR_INVALID_ARG);
}

Test(linalg, gram_schmidt)
{
	double q[3 * 4] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1};
	cr_assert_eq(hsq_orthonormalize_rows(q, 3, 4), HSQ_OK);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			double s = 0;
			for (int k = 0; k < 4; k++)
				s += q[i * 4 + k] * q[j * 4 + k];
			cr_expect(fabs(s - (i == j)) < 1e-14);
		}
	double dep[2 * 3] = {1, 2, 3, 2, 4, 6};
	cr_expect_eq(hsq_orthonormalize_rows(dep, 2, 3), HSQ_ERR_INVALID_ARG);
}

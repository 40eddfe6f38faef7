/* linalg.c - symmetric eigen-decomposition and Gram-Schmidt (see linalg.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/linalg.h"

/* a (n x n, overwritten) -> diag, off (tridiagonal T, off[i] couples i and
 * i+1) and z (n x n) whose row i is the eigenvector of diag[i].
 * Scratch: v and p, n doubles each, and p + n, n more (reflector betas).
 * Split out so that the public entry owns every allocation. */
static void eigen_work(double *a, int n, double *diag, double *off, double *z, double *v,
		       double *p)
{
	double *betas = p + n; /* n entries */
	memset(betas, 0, sizeof(double) * (size_t)n);
	/* Tridiagonalise, recording reflectors (v_k stored in column k below
	 * the subdiagonal) and their beta. */
	for (int k = 0; k < n - 2; k++) {
		int m = n - k - 1;
		double norm2 = 0.0;
		for (int i = 0; i < m; i++) {
			v[i] = a[(size_t)(k + 1 + i) * n + k];
			norm2 += v[i] * v[i];
		}
		double tail2 = norm2 - v[0] * v[0];
		if (tail2 <= 0.0) {
			off[k] = v[0];
			betas[k] = 0.0;
			continue;
		}
		double norm = sqrt(norm2);
		double alpha = v[0] >= 0.0 ? -norm : norm;
		v[0] -= alpha;
		double vv = v[0] * v[0] + tail2;
		double beta = 2.0 / vv;
		double vp = 0.0;
		for (int i = 0; i < m; i++) {
			const double *row = a + (size_t)(k + 1 + i) * n + k + 1;
			double s = 0.0;
			for (int j = 0; j < m; j++)
				s += row[j] * v[j];
			p[i] = beta * s;
			vp += v[i] * p[i];
		}
		double kk = 0.5 * beta * vp;
		for (int i = 0; i < m; i++)
			p[i] -= kk * v[i];
		for (int i = 0; i < m; i++) {
			double *row = a + (size_t)(k + 1 + i) * n + k + 1;
			for (int j = 0; j < m; j++)
				row[j] -= v[i] * p[j] + p[i] * v[j];
		}
		off[k] = alpha;
		for (int i = 0; i < m; i++)
			a[(size_t)(k + 1 + i) * n + k] = v[i];
		betas[k] = beta;
	}
	for (int i = 0; i < n; i++)
		diag[i] = a[(size_t)i * n + i];
	if (n >= 2)
		off[n - 2] = a[(size_t)(n - 1) * n + n - 2];

	/* z = Q^T where Q = H_0 ... H_{n-3}, so that the QL rotations below
	 * act on contiguous rows: z = I H_{n-3} ... H_0, each right product
	 * touching columns k+1.. of rows k+1.. only (the rest is identity). */
	memset(z, 0, sizeof(double) * (size_t)n * n);
	for (int i = 0; i < n; i++)
		z[(size_t)i * n + i] = 1.0;
	for (int k = n - 3; k >= 0; k--) {
		if (betas[k] == 0.0)
			continue;
		int m = n - k - 1;
		for (int i = 0; i < m; i++)
			v[i] = a[(size_t)(k + 1 + i) * n + k];
		for (int r = k + 1; r < n; r++) {
			double *row = z + (size_t)r * n + k + 1;
			double s = 0.0;
			for (int i = 0; i < m; i++)
				s += row[i] * v[i];
			s *= betas[k];
			for (int i = 0; i < m; i++)
				row[i] -= s * v[i];
		}
	}

	/* Implicit QL on the tridiagonal (diag, off), rotating the rows of z
	 * so that row i ends as the eigenvector of diag[i]. */
	for (int l = 0; l < n; l++) {
		for (int iter = 0; iter < 60; iter++) {
			int m = l;
			for (; m < n - 1; m++) {
				double scale = fabs(diag[m]) + fabs(diag[m + 1]);
				if (fabs(off[m]) <= DBL_EPSILON * scale)
					break;
			}
			if (m == l)
				break;
			/* Shift from the 2x2 block at l (Wilkinson). */
			double g = (diag[l + 1] - diag[l]) / (2.0 * off[l]);
			double r = hypot(g, 1.0);
			g = diag[m] - diag[l] + off[l] / (g + copysign(r, g));
			double s = 1.0, c = 1.0, shift = 0.0;
			int i;
			int deflated = 0;
			for (i = m - 1; i >= l; i--) {
				double f = s * off[i], b = c * off[i];
				r = hypot(f, g);
				off[i + 1] = r;
				if (r == 0.0) {
					diag[i + 1] -= shift;
					off[m] = 0.0;
					deflated = 1;
					break;
				}
				s = f / r;
				c = g / r;
				g = diag[i + 1] - shift;
				r = (diag[i] - g) * s + 2.0 * c * b;
				shift = s * r;
				diag[i + 1] = g + shift;
				g = c * r - b;
				double *zi = z + (size_t)i * n, *zi1 = zi + n;
				for (int k = 0; k < n; k++) {
					double zk1 = zi1[k], zk = zi[k];
					zi1[k] = s * zk + c * zk1;
					zi[k] = c * zk - s * zk1;
				}
			}
			if (deflated)
				continue;
			diag[l] -= shift;
			off[l] = g;
			off[m] = 0.0;
		}
	}
}

hsq_status hsq_sym_eigen(const double *a_in, int n, double *eval, double *evec)
{
	hsq_status st = HSQ_OK;
	double *a = NULL, *z = NULL, *work = NULL;
	int *order = NULL;
	if (n < 1)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "eigen: matrix size %d must be positive", n);
	size_t nn = (size_t)n * n;
	a = malloc(sizeof(double) * nn);
	z = malloc(sizeof(double) * nn);
	work = malloc(sizeof(double) * (size_t)(5 * n + 2));
	order = malloc(sizeof(int) * (size_t)n);
	if (!a || !z || !work || !order) {
		st = hsq_fail(HSQ_ERR_NOMEM, "eigen: out of memory for a %dx%d matrix", n, n);
		goto cleanup;
	}
	for (size_t i = 0; i < nn; i++) {
		if (!isfinite(a_in[i])) {
			st = hsq_fail(HSQ_ERR_INVALID_ARG, "eigen: matrix entry %zu is not finite", i);
			goto cleanup;
		}
	}
	memcpy(a, a_in, sizeof(double) * nn);
	double *diag = work, *off = work + n, *v = work + 2 * n, *p = work + 3 * n;
	memset(off, 0, sizeof(double) * (size_t)n);
	eigen_work(a, n, diag, off, z, v, p);
	/* Sort descending (insertion sort on indices: n is small). */
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = 1; i < n; i++) {
		int t = order[i], j = i;
		while (j > 0 && diag[order[j - 1]] < diag[t]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = t;
	}
	for (int i = 0; i < n; i++) {
		eval[i] = diag[order[i]];
		memcpy(evec + (size_t)i * n, z + (size_t)order[i] * n, sizeof(double) * (size_t)n);
	}
cleanup:
	free(a);
	free(z);
	free(work);
	free(order);
	return st;
}

hsq_status hsq_orthonormalize_rows(double *q, int k, int n)
{
	for (int i = 0; i < k; i++) {
		double *qi = q + (size_t)i * n;
		double before = 0.0;
		for (int t = 0; t < n; t++)
			before += qi[t] * qi[t];
		for (int pass = 0; pass < 2; pass++) {
			for (int j = 0; j < i; j++) {
				const double *qj = q + (size_t)j * n;
				double dot = 0.0;
				for (int t = 0; t < n; t++)
					dot += qi[t] * qj[t];
				for (int t = 0; t < n; t++)
					qi[t] -= dot * qj[t];
			}
		}
		double norm2 = 0.0;
		for (int t = 0; t < n; t++)
			norm2 += qi[t] * qi[t];
		if (!(norm2 > 1e-20 * before) || norm2 == 0.0)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"orthonormalize: row %d is linearly dependent on the previous rows", i);
		double inv = 1.0 / sqrt(norm2);
		for (int t = 0; t < n; t++)
			qi[t] *= inv;
	}
	return HSQ_OK;
}

/* The factor below runs in O(n^3) once per block of 64 key positions
 * when a head's keys are rounded against its queries: most of a
 * compression at head_dim 256. Its loops run along rows, eight doubles at
 * a time, and every element still sums its terms in the order of the
 * textbook loops (k ascending), so the factor has the same bits as those
 * loops: a vector lane does what the scalar loop did for its element. */
typedef double vd8 __attribute__((vector_size(64)));

/* y[i] += x[i] * c, i < n. Called with -c to subtract: y + x (-c) rounds
 * exactly as y - x c. */
static inline void add_scaled(double *restrict y, const double *restrict x, double c, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		vd8 a, b;
		memcpy(&a, y + i, sizeof a);
		memcpy(&b, x + i, sizeof b);
		a += b * c;
		memcpy(y + i, &a, sizeof a);
	}
	for (; i < n; i++)
		y[i] += x[i] * c;
}

/* a = L L^T in place for the symmetric a (its upper triangle is read):
 * L^T in the upper triangle (row j holds column j of L), the lower set to
 * 0. Left-looking: row j of a less the rows k < j, each scaled by L[j][k]. */
static int cholesky_upper(double *a, int n)
{
	for (int j = 0; j < n; j++) {
		double *row = a + (size_t)j * n;
		for (int k = 0; k < j; k++)
			add_scaled(row + j, a + (size_t)k * n + j, -a[(size_t)k * n + j], n - j);
		double s = row[j];
		if (!(s > 0.0))
			return 0;
		double ljj = sqrt(s);
		row[j] = ljj;
		for (int i = j + 1; i < n; i++)
			row[i] /= ljj;
		memset(row, 0, (size_t)j * sizeof *row);
	}
	return 1;
}

hsq_status hsq_inverse_cholesky_upper(const double *w, int n, double *u, double *work)
{
	double *lt = work; /* L^T, then w^-1, then the factor of w^-1 */
	memcpy(lt, w, (size_t)n * n * sizeof *lt);
	if (!cholesky_upper(lt, n))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cholesky: the %dx%d matrix is not positive definite", n, n);
	/* u <- L^-1 (lower), row by row by forward substitution: row i is
	 * (e_i - sum over k < i of L[i][k] u[k]) / L[i][i]. */
	memset(u, 0, (size_t)n * n * sizeof *u);
	for (int i = 0; i < n; i++) {
		double *ui = u + (size_t)i * n;
		ui[i] = 1.0;
		for (int k = 0; k < i; k++)
			add_scaled(ui, u + (size_t)k * n, -lt[(size_t)k * n + i], k + 1);
		double lii = lt[(size_t)i * n + i];
		for (int c = 0; c <= i; c++)
			ui[c] /= lii;
	}
	/* lt <- w^-1 = L^-T L^-1 (its upper triangle): row j is the sum over
	 * k >= j of u[k][j] u[k], then its Cholesky factor, transposed in
	 * place: the upper triangular u. */
	memset(lt, 0, (size_t)n * n * sizeof *lt);
	for (int j = 0; j < n; j++)
		for (int k = j; k < n; k++)
			add_scaled(lt + (size_t)j * n + j, u + (size_t)k * n + j, u[(size_t)k * n + j], k - j + 1);
	if (!cholesky_upper(lt, n))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "cholesky: the inverse of the %dx%d matrix is not positive definite",
				n, n);
	memcpy(u, lt, (size_t)n * n * sizeof *u);
	return HSQ_OK;
}

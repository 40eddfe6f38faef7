/* linalg.h - small dense linear algebra for SpectralQuant calibration and
 * the synthetic regimes (internal). Row-major doubles throughout. */
#ifndef HSQ_LINALG_H
#define HSQ_LINALG_H
#include "hsq.h"

/* Eigen-decomposition of the symmetric n x n matrix a (only its values are
 * read; a is not modified). eval: n eigenvalues, descending. evec: n x n,
 * row i is the unit eigenvector of eval[i]. Householder reduction to
 * tridiagonal form, then implicit QL with Wilkinson-style shifts: O(n^3). */
hsq_status hsq_sym_eigen(const double *a, int n, double *eval, double *evec);

/* Orthonormalises the k rows of q (k x n, k <= n) in place by modified
 * Gram-Schmidt, twice for accuracy. A row that becomes numerically zero is
 * reported as HSQ_ERR_INVALID_ARG (rows were dependent). */
hsq_status hsq_orthonormalize_rows(double *q, int k, int n);

/* u (n x n, upper triangular) with u^T u = w^-1, for the symmetric
 * positive definite w (n x n; its upper triangle is read, w is not
 * modified). work: n x n doubles. The
 * factor GPTQ-style sequential rounding feeds each coordinate's error
 * forward with. HSQ_ERR_INVALID_ARG when w is not positive definite. */
hsq_status hsq_inverse_cholesky_upper(const double *w, int n, double *u, double *work);

#endif

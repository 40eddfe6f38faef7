/* regimes.c - fixed generators for the synthetic regimes of the codec
 * study. Each isolates one assumption a codec can make about K/V vectors:
 * their marginal shape (isotropic, heavy-tail), their rank (low-rank), the
 * relation of the K and V subspaces (kv-aligned, kv-misaligned), how fast
 * the spectrum decays (decay-fast, decay-slow), and whether calibration
 * data look like test data (shift). Every vector has unit expected energy
 * per coordinate (E|x|^2 = dim) so errors compare across regimes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/linalg.h"
#include "common/rng.h"
#include "eval/regimes.h"

static const struct {
	const char *name;
	const char *description;
} regime_info[HSQ_N_REGIMES] = {
	{"isotropic", "iid N(0, 1) coordinates"},
	{"heavy-tail", "iid Student t (nu = 3) coordinates, scaled to unit variance"},
	{"low-rank", "rank 8 signal + N(0, 0.25^2) noise; K and V in independent random subspaces"},
	{"kv-aligned", "rank 8 signal + noise; K and V share one subspace"},
	{"kv-misaligned", "rank 8 signal + noise; K and V in orthogonal subspaces"},
	{"decay-fast", "full rank, eigenvalues proportional to 0.90^i in a random basis"},
	{"decay-slow", "full rank, eigenvalues proportional to 0.99^i in a random basis"},
	{"shift", "rank 16 + noise; half of the test subspace lies outside the calibration span"},
};

const char *hsq_regime_name(hsq_regime r)
{
	return (unsigned)r < HSQ_N_REGIMES ? regime_info[r].name : "unknown";
}

const char *hsq_regime_description(hsq_regime r)
{
	return (unsigned)r < HSQ_N_REGIMES ? regime_info[r].description : "unknown";
}

hsq_status hsq_regime_parse(const char *name, hsq_regime *out)
{
	for (int r = 0; name && r < HSQ_N_REGIMES; r++) {
		if (!strcasecmp(name, regime_info[r].name)) {
			*out = (hsq_regime)r;
			return HSQ_OK;
		}
	}
	return hsq_fail(HSQ_ERR_INVALID_ARG,
			"unknown regime '%s' (use isotropic, heavy-tail, low-rank, kv-aligned, "
			"kv-misaligned, decay-fast, decay-slow or shift)",
			name ? name : "");
}

hsq_regime_shape hsq_regime_default_shape(void)
{
	hsq_regime_shape s = {.dim = 128, .n_calib = 512, .n_test = 256, .n_query = 16,
			      .score_std = 2.5};
	return s;
}

void hsq_regime_data_free(hsq_regime_data *d)
{
	if (!d)
		return;
	free(d->k_calib);
	free(d->v_calib);
	free(d->k);
	free(d->v);
	free(d->q);
	memset(d, 0, sizeof *d);
}

/* k orthonormal random directions (rows of a Haar-random orthogonal
 * matrix: Gram-Schmidt of Gaussian rows). */
static hsq_status random_basis(hsq_rng *rng, int k, int dim, double *basis)
{
	for (size_t i = 0; i < (size_t)k * dim; i++)
		basis[i] = hsq_rng_normal(rng);
	return hsq_orthonormalize_rows(basis, k, dim);
}

/* rows x dim: x = sum_r sqrt(lambda_r) z_r basis_r + noise * g, with z, g
 * standard normal. */
static void spectral_rows(hsq_rng *rng, float *x, int rows, int dim, const double *basis,
			  const double *sqrt_lambda, int rank, double noise)
{
	for (int i = 0; i < rows; i++) {
		float *row = x + (size_t)i * dim;
		for (int j = 0; j < dim; j++)
			row[j] = (float)(noise * hsq_rng_normal(rng));
		for (int r = 0; r < rank; r++) {
			double z = sqrt_lambda[r] * hsq_rng_normal(rng);
			const double *b = basis + (size_t)r * dim;
			for (int j = 0; j < dim; j++)
				row[j] += (float)(z * b[j]);
		}
	}
}

typedef struct gen_ctx {
	hsq_rng *rng;
	int dim;
	double *basis;      /* up to dim x dim scratch */
	double *basis2;     /* second basis */
	double *sqrt_lambda;
} gen_ctx;

/* Low-rank rows in the span of `rank` rows of basis: signal variance
 * dim / rank per direction, so the signal has unit energy per coordinate. */
static void low_rank_rows(gen_ctx *g, float *x, int rows, const double *basis, int rank)
{
	for (int r = 0; r < rank; r++)
		g->sqrt_lambda[r] = sqrt((double)g->dim / rank);
	spectral_rows(g->rng, x, rows, g->dim, basis, g->sqrt_lambda, rank, REGIME_NOISE);
}

static void decay_rows(gen_ctx *g, float *x, int rows, const double *basis, double rho)
{
	double sum = 0.0;
	for (int i = 0; i < g->dim; i++)
		sum += pow(rho, i);
	for (int i = 0; i < g->dim; i++)
		g->sqrt_lambda[i] = sqrt(pow(rho, i) * g->dim / sum);
	spectral_rows(g->rng, x, rows, g->dim, basis, g->sqrt_lambda, g->dim, 0.0);
}

static void iid_rows(gen_ctx *g, float *x, int rows, int heavy)
{
	/* t_nu has variance nu / (nu - 2): rescale to unit variance. */
	double scale = sqrt((REGIME_T_NU - 2.0) / REGIME_T_NU);
	for (size_t i = 0; i < (size_t)rows * g->dim; i++)
		x[i] = heavy ? (float)(scale * hsq_rng_student_t(g->rng, REGIME_T_NU))
			     : (float)hsq_rng_normal(g->rng);
}

hsq_status hsq_regime_generate(hsq_regime regime, const hsq_regime_shape *shape, hsq_rng *rng,
			       hsq_regime_data *out)
{
	hsq_status st = HSQ_OK;
	gen_ctx g = {.rng = rng};
	memset(out, 0, sizeof *out);
	if ((unsigned)regime >= HSQ_N_REGIMES)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "regime: unknown regime %d", (int)regime);
	if (shape->dim < HSQ_CODEC_MIN_DIM || shape->dim > HSQ_CODEC_MAX_DIM)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "regime: dimension %d out of range %d..%d",
				shape->dim, HSQ_CODEC_MIN_DIM, HSQ_CODEC_MAX_DIM);
	if (shape->n_calib < 2 || shape->n_test < 1 || shape->n_query < 1 ||
	    shape->n_calib > 1000000 || shape->n_test > 1000000 || shape->n_query > 100000)
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"regime: sizes out of range (calibration %d, test %d, queries %d; need "
				"2.., 1.., 1..)",
				shape->n_calib, shape->n_test, shape->n_query);
	if (!(shape->score_std > 0.0) || !isfinite(shape->score_std))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "regime: score std %g must be positive",
				shape->score_std);
	int d = shape->dim;
	if ((regime == HSQ_REGIME_KV_MISALIGNED && 2 * REGIME_RANK > d) ||
	    (regime == HSQ_REGIME_SHIFT && REGIME_SHIFT_RANK + REGIME_SHIFT_MOVED > d))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "regime %s: dimension %d is too small",
				hsq_regime_name(regime), d);
	out->shape = *shape;
	size_t nc = (size_t)shape->n_calib * d, nt = (size_t)shape->n_test * d;
	out->k_calib = malloc(sizeof(float) * nc);
	out->v_calib = malloc(sizeof(float) * nc);
	out->k = malloc(sizeof(float) * nt);
	out->v = malloc(sizeof(float) * nt);
	out->q = malloc(sizeof(float) * (size_t)shape->n_query * d);
	g.dim = d;
	g.basis = malloc(sizeof(double) * (size_t)d * d);
	g.basis2 = malloc(sizeof(double) * (size_t)d * d);
	g.sqrt_lambda = malloc(sizeof(double) * (size_t)d);
	if (!out->k_calib || !out->v_calib || !out->k || !out->v || !out->q || !g.basis ||
	    !g.basis2 || !g.sqrt_lambda) {
		st = hsq_fail(HSQ_ERR_NOMEM, "regime %s: out of memory", hsq_regime_name(regime));
		goto cleanup;
	}
	int nC = shape->n_calib, nT = shape->n_test, r = REGIME_RANK;
	switch (regime) {
	case HSQ_REGIME_ISOTROPIC:
	case HSQ_REGIME_HEAVY_TAIL: {
		int heavy = regime == HSQ_REGIME_HEAVY_TAIL;
		iid_rows(&g, out->k_calib, nC, heavy);
		iid_rows(&g, out->v_calib, nC, heavy);
		iid_rows(&g, out->k, nT, heavy);
		iid_rows(&g, out->v, nT, heavy);
		break;
	}
	case HSQ_REGIME_LOW_RANK:
	case HSQ_REGIME_KV_ALIGNED:
	case HSQ_REGIME_KV_MISALIGNED: {
		/* basis rows 0..r-1 span K; V uses the same rows (aligned), the
		 * next r rows of one orthonormal set (misaligned), or an
		 * independent draw (low-rank). */
		st = random_basis(rng, 2 * r, d, g.basis);
		if (st != HSQ_OK)
			goto cleanup;
		const double *vb = g.basis;
		if (regime == HSQ_REGIME_KV_MISALIGNED) {
			vb = g.basis + (size_t)r * d;
		} else if (regime == HSQ_REGIME_LOW_RANK) {
			st = random_basis(rng, r, d, g.basis2);
			if (st != HSQ_OK)
				goto cleanup;
			vb = g.basis2;
		}
		low_rank_rows(&g, out->k_calib, nC, g.basis, r);
		low_rank_rows(&g, out->v_calib, nC, vb, r);
		low_rank_rows(&g, out->k, nT, g.basis, r);
		low_rank_rows(&g, out->v, nT, vb, r);
		break;
	}
	case HSQ_REGIME_DECAY_FAST:
	case HSQ_REGIME_DECAY_SLOW: {
		double rho = regime == HSQ_REGIME_DECAY_FAST ? REGIME_DECAY_FAST : REGIME_DECAY_SLOW;
		st = random_basis(rng, d, d, g.basis);
		if (st == HSQ_OK)
			st = random_basis(rng, d, d, g.basis2);
		if (st != HSQ_OK)
			goto cleanup;
		decay_rows(&g, out->k_calib, nC, g.basis, rho);
		decay_rows(&g, out->v_calib, nC, g.basis2, rho);
		decay_rows(&g, out->k, nT, g.basis, rho);
		decay_rows(&g, out->v, nT, g.basis2, rho);
		break;
	}
	case HSQ_REGIME_SHIFT: {
		/* Calibration spans rows 0..R-1; the test signal keeps rows
		 * M..R-1 and replaces rows 0..M-1 (the strongest calibrated
		 * directions) by rows R..R+M-1, orthogonal to the whole
		 * calibration span. K and V get independent bases. */
		int R = REGIME_SHIFT_RANK, M = REGIME_SHIFT_MOVED;
		for (int path = 0; path < 2; path++) {
			double *b = path ? g.basis2 : g.basis;
			st = random_basis(rng, R + M, d, b);
			if (st != HSQ_OK)
				goto cleanup;
			low_rank_rows(&g, path ? out->v_calib : out->k_calib, nC, b, R);
			low_rank_rows(&g, path ? out->v : out->k, nT, b + (size_t)M * d, R);
		}
		break;
	}
	}
	/* Queries: N(0, I) scaled so that q.k / sqrt(d) has std score_std
	 * over the test keys (E[(g.k)^2] = |k|^2 for g ~ N(0, I)). */
	double kk = 0.0;
	for (size_t i = 0; i < nt; i++)
		kk += (double)out->k[i] * out->k[i];
	double rms = sqrt(kk / nT);
	double c = rms > 0.0 ? shape->score_std * sqrt((double)d) / rms : 1.0;
	hsq_rng_fill_normal(rng, out->q, (size_t)shape->n_query * d, c);
cleanup:
	free(g.basis);
	free(g.basis2);
	free(g.sqrt_lambda);
	if (st != HSQ_OK)
		hsq_regime_data_free(out);
	return st;
}

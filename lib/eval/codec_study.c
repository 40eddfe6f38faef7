/* codec_study.c - the controlled codec study: regimes x codecs x bits x
 * random streams x seeds, run on a few threads.
 *
 * One work item is (stream, regime, seed): it draws the regime's data from
 * its own generator, calibrates SpectralQuant once (K and V on their own
 * calibration sets), draws one rotation/sketch seed per path shared by
 * every codec and bit width (so that codecs are compared on identical
 * data and rotations: paired samples), and measures every codec at every
 * width. Items write to fixed slots, so the result does not depend on the
 * number of threads or their timing. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/rng.h"
#include "eval/codec_study.h"

hsq_study_params hsq_study_default_params(void)
{
	hsq_study_params p;
	memset(&p, 0, sizeof p);
	p.n_seeds = 200;
	p.base_seed = 1;
	p.shape = hsq_regime_default_shape();
	p.n_regimes = HSQ_N_REGIMES;
	for (int r = 0; r < HSQ_N_REGIMES; r++)
		p.regimes[r] = (hsq_regime)r;
	p.n_codecs = HSQ_N_CODEC_KINDS;
	p.codecs[0] = HSQ_CODEC_PLAIN;
	p.codecs[1] = HSQ_CODEC_TQ;
	p.codecs[2] = HSQ_CODEC_TQ_QJL;
	p.codecs[3] = HSQ_CODEC_SQ;
	p.codecs[4] = HSQ_CODEC_SQU;
	p.n_bits = 3;
	p.bits[0] = 2;
	p.bits[1] = 3;
	p.bits[2] = 4;
	p.n_streams = 2;
	p.streams[0] = HSQ_RNG_PCG64;
	p.streams[1] = HSQ_RNG_MT19937;
	p.calib = hsq_sq_calib_default_params();
	p.joint_calib = 0;
	p.n_threads = 0;
	return p;
}

double hsq_t975(double df)
{
	static const double small[] = {0, 12.7062, 4.3027, 3.1824, 2.7764, 2.5706};
	if (df < 1.0)
		return NAN;
	if (df < 6.0 && df == floor(df))
		return small[(int)df];
	/* Cornish-Fisher expansion of t around z = 1.959964 (error < 1e-4 for
	 * df >= 5). */
	double z = 1.959963984540054, z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2,
	       z9 = z7 * z2;
	double g1 = (z3 + z) / 4.0;
	double g2 = (5 * z5 + 16 * z3 + 3 * z) / 96.0;
	double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384.0;
	double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160.0;
	return z + g1 / df + g2 / (df * df) + g3 / (df * df * df) + g4 / (df * df * df * df);
}

void hsq_summarize(const double *x, size_t n, hsq_summary *out)
{
	memset(out, 0, sizeof *out);
	out->n = n;
	if (n == 0) {
		out->mean = out->sd = out->ci_lo = out->ci_hi = NAN;
		return;
	}
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	out->mean = sum / (double)n;
	if (n < 2) {
		out->sd = NAN;
		out->ci_lo = out->ci_hi = out->mean;
		return;
	}
	double ss = 0.0;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - out->mean) * (x[i] - out->mean);
	out->sd = sqrt(ss / (double)(n - 1));
	double half = hsq_t975((double)(n - 1)) * out->sd / sqrt((double)n);
	out->ci_lo = out->mean - half;
	out->ci_hi = out->mean + half;
}

static int bits_ok(hsq_codec_kind kind, int bits)
{
	switch (kind) {
	case HSQ_CODEC_TQ: return bits >= 1 && bits <= 4;
	case HSQ_CODEC_TQ_QJL: return bits >= 2 && bits <= 5;
	default: return bits >= 1 && bits <= 8;
	}
}

hsq_status hsq_study_check_params(const hsq_study_params *p)
{
	if (!p)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: null parameters");
	if (p->n_seeds < 2 || p->n_seeds > 100000)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d seeds out of range 2..100000",
				p->n_seeds);
	if (p->n_regimes < 1 || p->n_regimes > HSQ_N_REGIMES)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d regimes out of range 1..%d",
				p->n_regimes, HSQ_N_REGIMES);
	if (p->n_codecs < 1 || p->n_codecs > HSQ_N_CODEC_KINDS)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d codecs out of range 1..%d", p->n_codecs,
				HSQ_N_CODEC_KINDS);
	if (p->n_bits < 1 || p->n_bits > 8)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d bit widths out of range 1..8",
				p->n_bits);
	if (p->n_streams < 1 || p->n_streams > 2)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d random streams out of range 1..2",
				p->n_streams);
	for (int i = 0; i < p->n_regimes; i++) {
		if ((unsigned)p->regimes[i] >= HSQ_N_REGIMES)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "study: unknown regime %d", (int)p->regimes[i]);
		for (int j = 0; j < i; j++)
			if (p->regimes[j] == p->regimes[i])
				return hsq_fail(HSQ_ERR_INVALID_ARG, "study: regime %s listed twice",
						hsq_regime_name(p->regimes[i]));
	}
	for (int i = 0; i < p->n_codecs; i++) {
		if (p->codecs[i] < HSQ_CODEC_PLAIN || p->codecs[i] > HSQ_CODEC_SQU)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "study: unknown codec %d", (int)p->codecs[i]);
		for (int j = 0; j < i; j++)
			if (p->codecs[j] == p->codecs[i])
				return hsq_fail(HSQ_ERR_INVALID_ARG, "study: codec %s listed twice",
						hsq_codec_kind_name(p->codecs[i]));
		for (int b = 0; b < p->n_bits; b++)
			if (!bits_ok(p->codecs[i], p->bits[b]))
				return hsq_fail(HSQ_ERR_INVALID_ARG,
						"study: %s does not support %d bits per value (plain, sq, "
						"squ: 1..8; tq: 1..4; tq-qjl: 2..5)",
						hsq_codec_kind_name(p->codecs[i]), p->bits[b]);
	}
	for (int b = 0; b < p->n_bits; b++)
		for (int j = 0; j < b; j++)
			if (p->bits[j] == p->bits[b])
				return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d bits listed twice", p->bits[b]);
	for (int s = 0; s < p->n_streams; s++) {
		if (p->streams[s] != HSQ_RNG_PCG64 && p->streams[s] != HSQ_RNG_MT19937)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "study: unknown random stream %d",
					(int)p->streams[s]);
		if (s == 1 && p->streams[1] == p->streams[0])
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"study: the two random streams must be different generators");
	}
	if (p->n_threads < 0 || p->n_threads > 256)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "study: %d threads out of range 0..256",
				p->n_threads);
	return HSQ_OK;
}

static size_t cell_index(const hsq_study_params *p, int st, int rg, int cd, int bt)
{
	return (((size_t)st * p->n_regimes + rg) * p->n_codecs + cd) * p->n_bits + bt;
}

typedef struct study_run {
	hsq_study *study;
	int n_items;
	int next;                /* next item to take, under lock */
	int failed;              /* set on the first failure: stop taking items */
	hsq_status status;
	char detail[512];
	pthread_mutex_t lock;
} study_run;

static int uses_sq(const hsq_study_params *p)
{
	for (int c = 0; c < p->n_codecs; c++)
		if (p->codecs[c] == HSQ_CODEC_SQ || p->codecs[c] == HSQ_CODEC_SQU)
			return 1;
	return 0;
}

/* Seed of item (regime, seed index): spread by SplitMix64 so that
 * neighbouring seeds and regimes give unrelated streams. */
static void item_rng(const hsq_study_params *p, hsq_rng_kind kind, hsq_regime regime, int seed,
		     hsq_rng *rng)
{
	uint64_t s = hsq_rng_mix64(p->base_seed ^ hsq_rng_mix64(0x7265676dULL + (uint64_t)regime));
	uint64_t stream = ((uint64_t)regime << 32) | (uint64_t)(seed + 1);
	hsq_rng_init(rng, kind, hsq_rng_mix64(s + (uint64_t)seed), stream);
}

static hsq_status run_item(hsq_study *study, int item)
{
	const hsq_study_params *p = &study->p;
	hsq_status st = HSQ_OK;
	int seed = item % p->n_seeds;
	int rg = (item / p->n_seeds) % p->n_regimes;
	int sm = item / (p->n_seeds * p->n_regimes);
	hsq_regime_data data;
	hsq_sq_calib *cal_k = NULL, *cal_v = NULL;
	hsq_codec *ck = NULL, *cv = NULL;
	float *pooled = NULL;
	hsq_rng rng;
	memset(&data, 0, sizeof data);

	item_rng(p, p->streams[sm], p->regimes[rg], seed, &rng);
	st = hsq_regime_generate(p->regimes[rg], &p->shape, &rng, &data);
	if (st != HSQ_OK)
		goto cleanup;
	uint64_t seed_k = hsq_rng_u64(&rng), seed_v = hsq_rng_u64(&rng);
	double deff = 0.0;
	if (uses_sq(p)) {
		size_t nc = (size_t)p->shape.n_calib, d = (size_t)p->shape.dim;
		if (p->joint_calib) {
			pooled = malloc(sizeof(float) * 2 * nc * d);
			if (!pooled) {
				st = hsq_fail(HSQ_ERR_NOMEM, "study: out of memory for pooled calibration");
				goto cleanup;
			}
			memcpy(pooled, data.k_calib, sizeof(float) * nc * d);
			memcpy(pooled + nc * d, data.v_calib, sizeof(float) * nc * d);
			st = hsq_sq_calibrate(pooled, 2 * nc, (int)d, &p->calib, &cal_k);
		} else {
			st = hsq_sq_calibrate(data.k_calib, nc, (int)d, &p->calib, &cal_k);
			if (st == HSQ_OK)
				st = hsq_sq_calibrate(data.v_calib, nc, (int)d, &p->calib, &cal_v);
		}
		if (st != HSQ_OK)
			goto cleanup;
		deff = hsq_sq_calib_deff(cal_k);
	}
	study->deff[((size_t)sm * p->n_regimes + rg) * p->n_seeds + seed] = deff;
	for (int cd = 0; cd < p->n_codecs; cd++) {
		for (int bt = 0; bt < p->n_bits; bt++) {
			hsq_codec_kind kind = p->codecs[cd];
			hsq_codec_params pk = {
				.kind = kind, .dim = p->shape.dim, .bits = p->bits[bt],
				.path = HSQ_KV_K, .seed = seed_k, .calib = cal_k,
			};
			hsq_codec_params pv = pk;
			pv.path = HSQ_KV_V;
			pv.seed = seed_v;
			pv.calib = p->joint_calib ? cal_k : cal_v;
			/* TQ-QKV is TQ-KV with QJL on the K path only: V stays TQ. */
			if (kind == HSQ_CODEC_TQ_QJL)
				pv.kind = HSQ_CODEC_TQ;
			st = hsq_codec_new(&pk, &ck);
			if (st == HSQ_OK)
				st = hsq_codec_new(&pv, &cv);
			size_t cell = cell_index(p, sm, rg, cd, bt);
			double values[HSQ_N_METRICS];
			if (st == HSQ_OK)
				st = hsq_codec_measure(ck, cv, &data, values);
			if (st != HSQ_OK)
				goto cleanup;
			for (int m = 0; m < HSQ_N_METRICS; m++)
				study->samples[(cell * HSQ_N_METRICS + m) * p->n_seeds + seed] = values[m];
			study->bpv[cell * p->n_seeds + seed] =
				0.5 * (hsq_codec_bits_per_value(ck) + hsq_codec_bits_per_value(cv));
			hsq_codec_free(ck);
			hsq_codec_free(cv);
			ck = cv = NULL;
		}
	}
cleanup:
	if (st != HSQ_OK) {
		char detail[400];
		snprintf(detail, sizeof detail, "%s", hsq_last_error());
		st = hsq_fail(st, "%s stream, regime %s, seed %d: %s", hsq_rng_name(p->streams[sm]),
			      hsq_regime_name(p->regimes[rg]), seed, detail);
	}
	hsq_codec_free(ck);
	hsq_codec_free(cv);
	hsq_sq_calib_free(cal_k);
	hsq_sq_calib_free(cal_v);
	free(pooled);
	hsq_regime_data_free(&data);
	return st;
}

static void *worker(void *arg)
{
	study_run *run = arg;
	for (;;) {
		pthread_mutex_lock(&run->lock);
		int item = run->failed ? run->n_items : run->next++;
		pthread_mutex_unlock(&run->lock);
		if (item >= run->n_items)
			return NULL;
		hsq_status st = run_item(run->study, item);
		if (st != HSQ_OK) {
			pthread_mutex_lock(&run->lock);
			if (!run->failed) {
				run->failed = 1;
				run->status = st;
				snprintf(run->detail, sizeof run->detail, "%s", hsq_last_error());
			}
			pthread_mutex_unlock(&run->lock);
			return NULL;
		}
	}
}

hsq_status hsq_study_run(const hsq_study_params *params, hsq_study **out)
{
	hsq_status st;
	hsq_study *s = NULL;
	pthread_t threads[256];
	int started = 0;
	study_run run;
	memset(&run, 0, sizeof run);
	*out = NULL;
	st = hsq_study_check_params(params);
	if (st != HSQ_OK)
		return st;
	s = calloc(1, sizeof *s);
	if (!s)
		return hsq_fail(HSQ_ERR_NOMEM, "study: out of memory");
	s->p = *params;
	const hsq_study_params *p = &s->p;
	size_t cells = (size_t)p->n_streams * p->n_regimes * p->n_codecs * p->n_bits;
	s->samples = calloc(cells * HSQ_N_METRICS * (size_t)p->n_seeds, sizeof(double));
	s->bpv = calloc(cells * (size_t)p->n_seeds, sizeof(double));
	s->deff = calloc((size_t)p->n_streams * p->n_regimes * p->n_seeds, sizeof(double));
	if (!s->samples || !s->bpv || !s->deff) {
		st = hsq_fail(HSQ_ERR_NOMEM, "study: out of memory for %zu cells x %d seeds", cells,
			      p->n_seeds);
		goto cleanup;
	}
	int n_threads = p->n_threads;
	if (n_threads == 0) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = online > 0 ? (int)(online < 256 ? online : 256) : 1;
	}
	run.study = s;
	run.n_items = p->n_streams * p->n_regimes * p->n_seeds;
	pthread_mutex_init(&run.lock, NULL);
	for (; started < n_threads - 1; started++)
		if (pthread_create(&threads[started], NULL, worker, &run) != 0)
			break; /* fewer helpers is still correct */
	worker(&run);
	for (int t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
	pthread_mutex_destroy(&run.lock);
	if (run.failed) {
		st = hsq_fail(run.status, "%s", run.detail);
		goto cleanup;
	}
	*out = s;
	s = NULL;
cleanup:
	hsq_study_free(s);
	return st;
}

void hsq_study_free(hsq_study *s)
{
	if (!s)
		return;
	free(s->samples);
	free(s->bpv);
	free(s->deff);
	free(s);
}

const hsq_study_params *hsq_study_get_params(const hsq_study *s)
{
	return &s->p;
}

static int cell_ok(const hsq_study *s, int st, int rg, int cd, int bt)
{
	const hsq_study_params *p = &s->p;
	return st >= 0 && st < p->n_streams && rg >= 0 && rg < p->n_regimes && cd >= 0 &&
	       cd < p->n_codecs && bt >= 0 && bt < p->n_bits;
}

const double *hsq_study_samples(const hsq_study *s, int st, int rg, int cd, int bt, hsq_metric m)
{
	if (!cell_ok(s, st, rg, cd, bt) || (unsigned)m >= HSQ_N_METRICS)
		return NULL;
	size_t cell = cell_index(&s->p, st, rg, cd, bt);
	return s->samples + (cell * HSQ_N_METRICS + m) * s->p.n_seeds;
}

double hsq_study_bits_per_value(const hsq_study *s, int st, int rg, int cd, int bt)
{
	if (!cell_ok(s, st, rg, cd, bt))
		return NAN;
	const double *b = s->bpv + cell_index(&s->p, st, rg, cd, bt) * s->p.n_seeds;
	double sum = 0.0;
	for (int i = 0; i < s->p.n_seeds; i++)
		sum += b[i];
	return sum / s->p.n_seeds;
}

const double *hsq_study_deff(const hsq_study *s, int st, int rg)
{
	if (!cell_ok(s, st, rg, 0, 0))
		return NULL;
	return s->deff + ((size_t)st * s->p.n_regimes + rg) * s->p.n_seeds;
}

double hsq_study_mean_deff(const hsq_study *s, int st, int rg)
{
	if (!cell_ok(s, st, rg, 0, 0))
		return NAN;
	const double *d = s->deff + ((size_t)st * s->p.n_regimes + rg) * s->p.n_seeds;
	double sum = 0.0;
	for (int i = 0; i < s->p.n_seeds; i++)
		sum += d[i];
	return sum / s->p.n_seeds;
}

int hsq_study_codec_index(const hsq_study *s, hsq_codec_kind kind)
{
	for (int i = 0; i < s->p.n_codecs; i++)
		if (s->p.codecs[i] == kind)
			return i;
	return -1;
}

int hsq_study_regime_index(const hsq_study *s, hsq_regime regime)
{
	for (int i = 0; i < s->p.n_regimes; i++)
		if (s->p.regimes[i] == regime)
			return i;
	return -1;
}

int hsq_study_bits_index(const hsq_study *s, int bits)
{
	for (int i = 0; i < s->p.n_bits; i++)
		if (s->p.bits[i] == bits)
			return i;
	return -1;
}

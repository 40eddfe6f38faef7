/* bench_codecs - encode and decode throughput (GB/s of fp32 vectors) and
 * LUT dot-product throughput of every codec at d = 64 and d = 128, single
 * thread. Usage: bench_codecs [seconds per measurement, default 0.3]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsq_eval.h"

#define N_VEC 8192

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, hsq_status st)
{
	fprintf(stderr, "bench_codecs: %s: %s\n", what, *hsq_last_error() ? hsq_last_error() : hsq_strerror(st));
	exit(1);
}

/* Runs fn until min_s seconds have passed; returns seconds per call. */
typedef struct job {
	const hsq_codec *codec;
	const float *x;
	float *y;
	uint8_t *codes;
	hsq_codec_query *query;
	float *scores;
} job;

static double timed(void (*fn)(job *), job *j, double min_s)
{
	fn(j); /* warm caches and the codebook */
	int reps = 0;
	double t0 = now(), t;
	do {
		fn(j);
		reps++;
		t = now();
	} while (t - t0 < min_s);
	return (t - t0) / reps;
}

static void do_encode(job *j)
{
	hsq_status st = hsq_codec_encode(j->codec, j->x, N_VEC, j->codes);
	if (st != HSQ_OK)
		die("encode", st);
}

static void do_decode(job *j)
{
	hsq_codec_decode(j->codec, j->codes, N_VEC, j->y);
}

static void do_dot(job *j)
{
	hsq_codec_dot(j->query, j->codes, N_VEC, j->scores);
}

int main(int argc, char **argv)
{
	double min_s = argc > 1 ? atof(argv[1]) : 0.3;
	if (!(min_s > 0)) {
		fprintf(stderr, "usage: bench_codecs [seconds per measurement]\n");
		return 2;
	}
	const int dims[2] = {64, 128};
	const hsq_codec_kind kinds[5] = {HSQ_CODEC_PLAIN, HSQ_CODEC_TQ, HSQ_CODEC_TQ_QJL, HSQ_CODEC_SQ,
					 HSQ_CODEC_SQU};
	printf("codec throughput, one thread, %d vectors per batch (GB/s of fp32 input or output;\n"
	       "dot: query prepared once, then scored against encoded vectors)\n\n", N_VEC);
	printf("%-7s %4s %2s %7s %11s %11s %11s %9s %10s\n", "codec", "d", "b", "bits/v", "encode GB/s",
	       "decode GB/s", "dot Mvec/s", "dot ns/v", "query us");
	for (int di = 0; di < 2; di++) {
		int d = dims[di];
		hsq_rng rng;
		hsq_rng_init(&rng, HSQ_RNG_PCG64, 1, (uint64_t)d);
		float *x = malloc(sizeof(float) * N_VEC * d), *y = malloc(sizeof(float) * N_VEC * d);
		float *q = malloc(sizeof(float) * d), *scores = malloc(sizeof(float) * N_VEC);
		uint8_t *codes = malloc((size_t)N_VEC * d * 2);
		if (!x || !y || !q || !scores || !codes)
			die("allocation", HSQ_ERR_NOMEM);
		for (size_t i = 0; i < (size_t)N_VEC * d; i++)
			x[i] = (float)hsq_rng_normal(&rng);
		for (int i = 0; i < d; i++)
			q[i] = (float)hsq_rng_normal(&rng);
		hsq_sq_calib *cal;
		hsq_status st = hsq_sq_calibrate(x, 4096, d, NULL, &cal);
		if (st != HSQ_OK)
			die("calibration", st);
		for (int ki = 0; ki < 5; ki++)
			for (int b = 2; b <= 4; b++) {
				hsq_codec_params p = {.kind = kinds[ki], .dim = d, .bits = b, .path = HSQ_KV_K,
						      .seed = 7, .calib = cal};
				hsq_codec *c;
				if ((st = hsq_codec_new(&p, &c)) != HSQ_OK)
					die("codec", st);
				job j = {.codec = c, .x = x, .y = y, .codes = codes, .scores = scores};
				if ((st = hsq_codec_query_new(c, &j.query)) != HSQ_OK)
					die("query", st);
				double bytes = (double)N_VEC * d * sizeof(float);
				double t_enc = timed(do_encode, &j, min_s);
				double t_dec = timed(do_decode, &j, min_s);
				double t0 = now();
				int reps = 0;
				do {
					hsq_codec_query_set(j.query, q);
					reps++;
				} while (now() - t0 < min_s / 4);
				double t_query = (now() - t0) / reps;
				hsq_codec_query_set(j.query, q);
				double t_dot = timed(do_dot, &j, min_s);
				printf("%-7s %4d %2d %7.3f %11.2f %11.2f %11.1f %9.1f %10.2f\n", hsq_codec_kind_name(kinds[ki]),
				       d, b, hsq_codec_bits_per_value(c), bytes / t_enc / 1e9, bytes / t_dec / 1e9,
				       N_VEC / t_dot / 1e6, t_dot / N_VEC * 1e9, t_query * 1e6);
				hsq_codec_query_free(j.query);
				hsq_codec_free(c);
			}
		hsq_sq_calib_free(cal);
		free(x);
		free(y);
		free(q);
		free(scores);
		free(codes);
	}
	return 0;
}

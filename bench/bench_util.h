/* bench_util.h - what the benchmark programs share: a monotonic clock,
 * reading a whole text file, tier parameters from the environment. */
#ifndef HSQ_BENCH_UTIL_H
#define HSQ_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsq.h"

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The whole file, NUL-terminated (malloc'ed; *len bytes before the NUL),
 * or NULL when it cannot be read. */
static inline char *bench_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		*len = (size_t)n;
	}
	return buf;
}

/* Default tier parameters, overridden from the environment to try
 * alternatives: HSQ_Q_READER (key-norm), HSQ_Q_COMPRESSOR (mean,
 * obs-weighted), HSQ_Q_GROUP, HSQ_Q_L1, HSQ_Q_WINDOW, HSQ_Q_MEDIUM. */
static inline hsq_tier_params bench_tier_params(void)
{
	hsq_tier_params p = hsq_tier_default_params();
	const char *e;
	if ((e = getenv("HSQ_Q_READER")))
		p.reader = !strcmp(e, "key-norm") ? HSQ_READER_KEY_NORM : HSQ_READER_OBS_ATTENTION;
	if ((e = getenv("HSQ_Q_COMPRESSOR")))
		p.compressor = !strcmp(e, "obs-weighted") ? HSQ_COMPRESSOR_OBS_WEIGHTED : HSQ_COMPRESSOR_MEAN;
	if ((e = getenv("HSQ_Q_GROUP")))
		p.group_size = atoi(e);
	if ((e = getenv("HSQ_Q_L1")))
		p.l1_fraction = (float)atof(e);
	if ((e = getenv("HSQ_Q_WINDOW")))
		p.window = atoi(e);
	if ((e = getenv("HSQ_Q_MEDIUM")))
		p.medium_fraction = (float)atof(e);
	return p;
}

/* The routing budget from HSQ_Q_BUDGET (tokens) and the number of
 * retrieval heads from HSQ_Q_RETRIEVAL, else the defaults. */
static inline hsq_status bench_set_budget(hsq_context *ctx)
{
	if (hsq_context_mode(ctx) != HSQ_MODE_HSQ)
		return HSQ_OK;
	const char *b = getenv("HSQ_Q_BUDGET"), *r = getenv("HSQ_Q_RETRIEVAL");
	hsq_status st = b ? hsq_context_set_budget(ctx, atoi(b)) : HSQ_OK;
	return st || !r ? st : hsq_context_set_retrieval_heads(ctx, atoi(r));
}

#endif

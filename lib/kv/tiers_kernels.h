/* tiers_kernels.h - the score and value sums of tiered attention for up to
 * four query heads of one KV head at once (internal; tiers_attend.c and
 * its test).
 *
 * Decoding through the tiers attends over a few thousand keys per KV head
 * that are not one ring of rows (L1, summaries, fetched groups, the tail),
 * and every query head sharing the KV head reads the same keys and values.
 * One dot_f32 and one axpy_f32 per (query head, key) reloaded each key and
 * value once per query head and sent every output through memory once per
 * key: half of an 8K decode on an AVX2 machine (perf). Here each 16-lane
 * chunk of a key or value row is loaded once for all the query heads, and
 * the outputs accumulate in registers over a run of rows.
 *
 * The sums are the reference ones bit for bit: a score is summed in
 * dot_f32's order (16 lanes over the channels, hsum16's tree, then the
 * scalar tail), and an output channel adds w * v row after row in row
 * order, as axpy_f32 called row after row does (test_tiers_kernels; rows
 * of weight 0, masked, add nothing, so none is skipped). Q is a
 * compile-time constant in every call (always_inline + switch, the loops
 * over it unrolled), so the Q accumulators stay in registers. On an 8K
 * SmolLM2 snapshot this took decoding from 8.6-8.9 to 11.8-12.8 tokens/s
 * on the 2-core AVX2 machine, the same tokens.
 *
 * The key and value rows are fp16 (vec_f16.h), widened as they are
 * loaded; "dot_f32" and "axpy_f32" below mean those of the widened rows,
 * which is what the kernels equal bit for bit. */
#ifndef HSQ_TIERS_KERNELS_H
#define HSQ_TIERS_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/vec_f16.h"
#include "common/vec_f32.h"

#define TIERS_KERNEL_MAXQ 4 /* query heads per call */
#define TIERS_PREFETCH_ROWS 64 /* rows of a later run prefetched (16: the attention of an
				* 8K hsq step on SmolLM2 7% slower, perf samples) */
#define TIERS_PREFETCH_RUNS 2  /* how many runs ahead (1 and 2 within noise
				* of each other at 8K on SmolLM2, 2 ahead) */

/* A run of consecutive key and value rows one (token, KV head) attends:
 * L1, the summaries, fetched groups or the tail. tiers_values16_runs
 * and tiers_values32_runs sum a slice of 16 or 32 columns over a list of
 * them (the decode split of tiers_attend.c). */
typedef struct tier_run {
	const uint16_t *k, *v; /* first row (fp16); row r at k + r * ld */
	size_t ld;             /* halves between rows */
	int n;                 /* rows */
	int first;             /* index of its first row among all the runs' rows */
	int kind;              /* TIER_RUN_L1, _SUMMARY, _GROUP or _TAIL: how rows are masked */
} tier_run;
enum { TIER_RUN_L1, TIER_RUN_SUMMARY, TIER_RUN_GROUP, TIER_RUN_TAIL };

/* Prefetches the first `width` halves of the first TIERS_PREFETCH_ROWS of
 * n rows (stride ld): the start of a run that sits elsewhere in memory,
 * where the hardware prefetcher starts over. */
static inline void tiers_prefetch_rows(const uint16_t *rows, size_t ld, int n, int width)
{
	for (int r = 0; r < n && r < TIERS_PREFETCH_ROWS; r++)
		for (int c = 0; c < width; c += 32) /* 64-byte lines */
			__builtin_prefetch(rows + (size_t)r * ld + c);
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* AVX2 without AVX-512: gcc lowers the 16-lane vectors of the portable
 * kernels through the stack here (perf: a fifth of the score kernel's time
 * in spills), so each 16-lane accumulator is a pair of 8-lane registers
 * (lanes 0-7, 8-15), as in backend_cpu_avx2.h, and the sums keep dot_f32's
 * order. Operators, not FMA intrinsics: gcc contracts them as it does the
 * reference. */
#include <immintrin.h>

#include "common/vec_f32_avx2.h"

static inline __attribute__((always_inline)) void tiers_scores_q(const float *const *q, const int Q, const uint16_t *k,
								  size_t ldk, int n, int hd, float scale,
								  const float *bias, float *const *s)
{
	for (int r = 0; r < n; r++) {
		const uint16_t *kr = k + (size_t)r * ldk;
		__m256 acc[TIERS_KERNEL_MAXQ][2];
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			acc[i][0] = acc[i][1] = _mm256_setzero_ps();
		int d = 0;
		for (; d + 16 <= hd; d += 16) {
			__m256 k0 = load8_h(kr + d), k1 = load8_h(kr + d + 8);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++) {
				acc[i][0] += _mm256_loadu_ps(q[i] + d) * k0;
				acc[i][1] += _mm256_loadu_ps(q[i] + d + 8) * k1;
			}
		}
		if (bias)
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				s[i][r] = (hsum16_pair(acc[i][0], acc[i][1]) + tail_dot_h(q[i], kr, d, hd)) * scale +
					  bias[r];
		else
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				s[i][r] = (hsum16_pair(acc[i][0], acc[i][1]) + tail_dot_h(q[i], kr, d, hd)) * scale;
	}
}

static inline __attribute__((always_inline)) void tiers_values_q(const float *const *w, const int Q, const uint16_t *v,
								  size_t ldv, int n, int hd, float *const *out)
{
	int d = 0;
	for (; d + 16 <= hd; d += 16) {
		__m256 acc[TIERS_KERNEL_MAXQ][2];
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++) {
			acc[i][0] = _mm256_loadu_ps(out[i] + d);
			acc[i][1] = _mm256_loadu_ps(out[i] + d + 8);
		}
		for (int r = 0; r < n; r++) {
			const uint16_t *vr = v + (size_t)r * ldv + d;
			__m256 v0 = load8_h(vr), v1 = load8_h(vr + 8);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++) {
				__m256 wi = _mm256_set1_ps(w[i][r]);
				acc[i][0] = acc[i][0] + wi * v0;
				acc[i][1] = acc[i][1] + wi * v1;
			}
		}
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++) {
			_mm256_storeu_ps(out[i] + d, acc[i][0]);
			_mm256_storeu_ps(out[i] + d + 8, acc[i][1]);
		}
	}
	if (d < hd) /* channels past the last 16: axpy_h's scalar loop */
		for (int r = 0; r < n; r++)
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				axpy_h(out[i] + d, w[i][r], v + (size_t)r * ldv + d, hd - d);
}

/* out[i][0..15] = the sums tiers_values gives over the runs in order,
 * starting from zeros (out: the 16 columns at d0). */
static inline __attribute__((always_inline)) void tiers_values16_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	__m256 acc[TIERS_KERNEL_MAXQ][2];
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_ps();
	for (int m = 0, off = 0; m < n_runs; off += run[m++].n) {
		const uint16_t *v = run[m].v + d0;
		if (m + TIERS_PREFETCH_RUNS < n_runs) /* later runs' rows are elsewhere */
			tiers_prefetch_rows(run[m + TIERS_PREFETCH_RUNS].v + d0, run[m + TIERS_PREFETCH_RUNS].ld,
					    run[m + TIERS_PREFETCH_RUNS].n, 16);
		for (int r = 0; r < run[m].n; r++) {
			const uint16_t *vr = v + (size_t)r * run[m].ld;
			__m256 v0 = load8_h(vr), v1 = load8_h(vr + 8);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++) {
				__m256 wi = _mm256_set1_ps(w[i][off + r]);
				acc[i][0] = acc[i][0] + wi * v0;
				acc[i][1] = acc[i][1] + wi * v1;
			}
		}
	}
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++) {
		_mm256_storeu_ps(out[i], acc[i][0]);
		_mm256_storeu_ps(out[i] + 8, acc[i][1]);
	}
}

/* Four 8-lane accumulators a query do not fit AVX2's 16 registers: two
 * 16-column passes. */
static inline __attribute__((always_inline)) void tiers_values32_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	float *o2[TIERS_KERNEL_MAXQ];
	for (int i = 0; i < Q; i++)
		o2[i] = out[i] + 16;
	tiers_values16_runs_q(w, Q, run, n_runs, d0, out);
	tiers_values16_runs_q(w, Q, run, n_runs, d0 + 16, o2);
}

static inline __attribute__((always_inline)) void tiers_values64_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	float *o2[TIERS_KERNEL_MAXQ];
	for (int i = 0; i < Q; i++)
		o2[i] = out[i] + 32;
	tiers_values32_runs_q(w, Q, run, n_runs, d0, out);
	tiers_values32_runs_q(w, Q, run, n_runs, d0 + 32, o2);
}
#else
/* Rows r..r+3 when hd is a multiple of 16: 4 rows x Q queries at once, each
 * query chunk loaded once for the 4 rows and the 4 Q sums reduced together
 * by hsum16x16 (hsum16's tree, lane by lane) where one hsum16 per
 * row and query was a third of the kernel's instructions; the same bits. */
static inline __attribute__((always_inline)) void tiers_scores4_q(const float *const *q, const int Q,
								   const uint16_t *k, size_t ldk, int r, int hd,
								   float scale, const float *bias, float *const *s)
{
	vf16 acc[16];
	#pragma GCC unroll 16
	for (int j = 0; j < 16; j++)
		acc[j] = (vf16){ 0 };
	for (int d = 0; d < hd; d += 16) {
		vf16 kv[4];
		#pragma GCC unroll 4
		for (int rr = 0; rr < 4; rr++)
			kv[rr] = load16_h(k + (size_t)(r + rr) * ldk + d);
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++) {
			vf16 qv = load16(q[i] + d);
			#pragma GCC unroll 4
			for (int rr = 0; rr < 4; rr++)
				acc[4 * i + rr] += qv * kv[rr];
		}
	}
	vf16 sums = hsum16x16(acc) + 0.0f; /* + tail_dot_h's 0 of no tail */
	if (bias)
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			#pragma GCC unroll 4
			for (int rr = 0; rr < 4; rr++)
				s[i][r + rr] = sums[4 * i + rr] * scale + bias[r + rr];
	else
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			#pragma GCC unroll 4
			for (int rr = 0; rr < 4; rr++)
				s[i][r + rr] = sums[4 * i + rr] * scale;
}

static inline __attribute__((always_inline)) void tiers_scores_q(const float *const *q, const int Q, const uint16_t *k,
								  size_t ldk, int n, int hd, float scale,
								  const float *bias, float *const *s)
{
	int r0 = 0;
	if (hd % 16 == 0)
		for (; r0 + 4 <= n; r0 += 4)
			tiers_scores4_q(q, Q, k, ldk, r0, hd, scale, bias, s);
	for (int r = r0; r < n; r++) {
		const uint16_t *kr = k + (size_t)r * ldk;
		vf16 acc[TIERS_KERNEL_MAXQ];
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			acc[i] = (vf16){ 0 };
		int d = 0;
		for (; d + 16 <= hd; d += 16) {
			vf16 kv = load16_h(kr + d);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				acc[i] += load16(q[i] + d) * kv;
		}
		/* as written at the reference's call sites, so that gcc
		 * contracts dot * scale + bias the same way */
		if (bias)
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				s[i][r] = (hsum16(acc[i]) + tail_dot_h(q[i], kr, d, hd)) * scale + bias[r];
		else
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				s[i][r] = (hsum16(acc[i]) + tail_dot_h(q[i], kr, d, hd)) * scale;
	}
}

static inline __attribute__((always_inline)) void tiers_values_q(const float *const *w, const int Q, const uint16_t *v,
								  size_t ldv, int n, int hd, float *const *out)
{
	int d = 0;
	for (; d + 16 <= hd; d += 16) {
		vf16 acc[TIERS_KERNEL_MAXQ];
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			acc[i] = load16(out[i] + d);
		for (int r = 0; r < n; r++) {
			vf16 vv = load16_h(v + (size_t)r * ldv + d);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				acc[i] = acc[i] + w[i][r] * vv;
		}
		#pragma GCC unroll 4
		for (int i = 0; i < Q; i++)
			memcpy(out[i] + d, &acc[i], sizeof acc[i]);
	}
	if (d < hd) /* channels past the last 16: axpy_h's scalar loop */
		for (int r = 0; r < n; r++)
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				axpy_h(out[i] + d, w[i][r], v + (size_t)r * ldv + d, hd - d);
}

static inline __attribute__((always_inline)) void tiers_values16_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	vf16 acc[TIERS_KERNEL_MAXQ];
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++)
		acc[i] = (vf16){ 0 };
	for (int m = 0, off = 0; m < n_runs; off += run[m++].n) {
		const uint16_t *v = run[m].v + d0;
		if (m + TIERS_PREFETCH_RUNS < n_runs) /* later runs' rows are elsewhere */
			tiers_prefetch_rows(run[m + TIERS_PREFETCH_RUNS].v + d0, run[m + TIERS_PREFETCH_RUNS].ld,
					    run[m + TIERS_PREFETCH_RUNS].n, 16);
		for (int r = 0; r < run[m].n; r++) {
			vf16 vv = load16_h(v + (size_t)r * run[m].ld);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				acc[i] = acc[i] + w[i][off + r] * vv;
		}
	}
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++)
		memcpy(out[i], &acc[i], sizeof acc[i]);
}


/* The same over 16 NB columns (NB = 2 or 4, a constant after inlining), NB
 * accumulators a query: a row's 32 halves are one 64-byte line, where a
 * 16-column task read half a line and the task beside it the other half
 * (each line came from memory twice); 64 columns, two lines side by side,
 * let gemma-3's 256-column rows stream in 4 tasks instead of 8. */
static inline __attribute__((always_inline)) void tiers_valuesN_runs_q(const float *const *w, const int Q,
									const tier_run *run, int n_runs, int d0,
									float *const *out, const int NB)
{
	vf16 acc[TIERS_KERNEL_MAXQ][4];
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 4
		for (int b = 0; b < NB; b++)
			acc[i][b] = (vf16){ 0 };
	for (int m = 0, off = 0; m < n_runs; off += run[m++].n) {
		const uint16_t *v = run[m].v + d0;
		if (m + TIERS_PREFETCH_RUNS < n_runs) /* later runs' rows are elsewhere */
			tiers_prefetch_rows(run[m + TIERS_PREFETCH_RUNS].v + d0, run[m + TIERS_PREFETCH_RUNS].ld,
					    run[m + TIERS_PREFETCH_RUNS].n, 16 * NB);
		for (int r = 0; r < run[m].n; r++) {
			vf16 vv[4];
			#pragma GCC unroll 4
			for (int b = 0; b < NB; b++)
				vv[b] = load16_h(v + (size_t)r * run[m].ld + 16 * b);
			#pragma GCC unroll 4
			for (int i = 0; i < Q; i++)
				#pragma GCC unroll 4
				for (int b = 0; b < NB; b++)
					acc[i][b] = acc[i][b] + w[i][off + r] * vv[b];
		}
	}
	#pragma GCC unroll 4
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 4
		for (int b = 0; b < NB; b++)
			memcpy(out[i] + 16 * b, &acc[i][b], sizeof acc[i][b]);
}

static inline __attribute__((always_inline)) void tiers_values32_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	tiers_valuesN_runs_q(w, Q, run, n_runs, d0, out, 2);
}

static inline __attribute__((always_inline)) void tiers_values64_runs_q(const float *const *w, const int Q,
									 const tier_run *run, int n_runs, int d0,
									 float *const *out)
{
	tiers_valuesN_runs_q(w, Q, run, n_runs, d0, out, 4);
}

#endif

/* s[r] = s[r] * scale + bias[r], or -INFINITY where masked[r]: the end of
 * tiers_scores for dots it computed earlier with scale 1 and no bias (the
 * router's q.k_summary), written as at its call sites so that gcc
 * contracts it the same way: the same bits as scoring the rows again. */
static inline void tiers_scale_scores(float *s, int n, float scale, const float *bias, const uint8_t *masked)
{
	for (int r = 0; r < n; r++)
		s[r] = masked[r] ? -INFINITY : s[r] * scale + bias[r];
}

/* s[i][r] = dot_f32(q[i], k + r * ldk widened, hd) * scale (+ bias[r] unless bias
 * is NULL) for r < n, i < Q (1 <= Q <= TIERS_KERNEL_MAXQ). */
static inline void tiers_scores(const float *const *q, int Q, const uint16_t *k, size_t ldk, int n, int hd, float scale,
				const float *bias, float *const *s)
{
	switch (Q) {
	case 1: tiers_scores_q(q, 1, k, ldk, n, hd, scale, bias, s); break;
	case 2: tiers_scores_q(q, 2, k, ldk, n, hd, scale, bias, s); break;
	case 3: tiers_scores_q(q, 3, k, ldk, n, hd, scale, bias, s); break;
	default: tiers_scores_q(q, 4, k, ldk, n, hd, scale, bias, s); break;
	}
}

/* out[i][c] += w[i][r] * v[r * ldv + c] for r = 0, 1, ..., n - 1 in that
 * order, c < hd, i < Q (1 <= Q <= TIERS_KERNEL_MAXQ): axpy_h(out[i],
 * w[i][r], v + r * ldv, hd) row after row, bit for bit. */
static inline void tiers_values(const float *const *w, int Q, const uint16_t *v, size_t ldv, int n, int hd,
				float *const *out)
{
	switch (Q) {
	case 1: tiers_values_q(w, 1, v, ldv, n, hd, out); break;
	case 2: tiers_values_q(w, 2, v, ldv, n, hd, out); break;
	case 3: tiers_values_q(w, 3, v, ldv, n, hd, out); break;
	default: tiers_values_q(w, 4, v, ldv, n, hd, out); break;
	}
}

/* out[i][c] for the 16 columns c = d0..d0+15 (out[i] points at column
 * d0): the sums tiers_values called run after run (from zeros) gives,
 * bit for bit, with the accumulators kept in registers from one run to
 * the next; w[i] holds the weights of all the runs' rows in order. */
static inline void tiers_values16_runs(const float *const *w, int Q, const tier_run *run, int n_runs, int d0,
				       float *const *out)
{
	switch (Q) {
	case 1: tiers_values16_runs_q(w, 1, run, n_runs, d0, out); break;
	case 2: tiers_values16_runs_q(w, 2, run, n_runs, d0, out); break;
	case 3: tiers_values16_runs_q(w, 3, run, n_runs, d0, out); break;
	default: tiers_values16_runs_q(w, 4, run, n_runs, d0, out); break;
	}
}

/* out[i][c] for the 32 columns c = d0..d0+31: tiers_values16_runs for
 * d0 and d0 + 16, bit for bit. */
static inline void tiers_values32_runs(const float *const *w, int Q, const tier_run *run, int n_runs, int d0,
				       float *const *out)
{
	switch (Q) {
	case 1: tiers_values32_runs_q(w, 1, run, n_runs, d0, out); break;
	case 2: tiers_values32_runs_q(w, 2, run, n_runs, d0, out); break;
	case 3: tiers_values32_runs_q(w, 3, run, n_runs, d0, out); break;
	default: tiers_values32_runs_q(w, 4, run, n_runs, d0, out); break;
	}
}

/* out[i][c] for the 64 columns c = d0..d0+63: tiers_values16_runs for
 * d0, d0 + 16, d0 + 32 and d0 + 48, bit for bit. */
static inline void tiers_values64_runs(const float *const *w, int Q, const tier_run *run, int n_runs, int d0,
				       float *const *out)
{
	switch (Q) {
	case 1: tiers_values64_runs_q(w, 1, run, n_runs, d0, out); break;
	case 2: tiers_values64_runs_q(w, 2, run, n_runs, d0, out); break;
	case 3: tiers_values64_runs_q(w, 3, run, n_runs, d0, out); break;
	default: tiers_values64_runs_q(w, 4, run, n_runs, d0, out); break;
	}
}

#endif

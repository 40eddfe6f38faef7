/*
 * test_tiers_kernels.c - the multi-head score and value kernels of tiered
 * attention (tiers_kernels.h) against dot_f32 and axpy_f32 called once per
 * (query head, row) on the widened fp16 rows, as tiered attention did
 * before them (ASan/UBSan build); and the fp16 row conversions of
 * vec_f16.h against the scalar ones of fp16.h.
 *
 * Tolerance: none. The kernels promise the reference sums bit for bit (the
 * same products in the same order), so that decoding through the tiers
 * gives the same tokens whatever kernel a machine runs; every comparison
 * here is memcmp. Covered: 1 to 4 query heads, head sizes that are and are
 * not a multiple of 16 (64, 72, 256, 8), rows strided wider than a head
 * (the tail's rows hold every KV head), zero and empty runs, a bias per row
 * (the summaries' log group size), zero weights (masked rows), and outputs
 * accumulated over several runs (one per tier).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kv/tiers_kernels.h"

static float frand(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *random_floats(size_t n, unsigned seed)
{
	float *p = malloc(n * sizeof *p);
	cr_assert(p);
	for (size_t i = 0; i < n; i++)
		p[i] = frand(&seed);
	return p;
}

/* n random halves and the same values widened. */
static uint16_t *random_halves(size_t n, unsigned seed, float **wide)
{
	float *f = random_floats(n, seed);
	uint16_t *h = malloc(n * sizeof *h);
	cr_assert(h);
	f16_row_from_f32(h, f, (int)n);
	f16_row_to_f32(f, h, (int)n);
	*wide = f;
	return h;
}

static const int head_dims[] = { 64, 72, 256, 8 };
static const int run_lengths[] = { 0, 1, 5, 37 };

Test(tiers_kernels, scores_equal_dot_f32_bit_for_bit)
{
	for (size_t a = 0; a < sizeof head_dims / sizeof *head_dims; a++)
		for (size_t b = 0; b < sizeof run_lengths / sizeof *run_lengths; b++)
			for (int Q = 1; Q <= TIERS_KERNEL_MAXQ; Q++)
				for (int with_bias = 0; with_bias < 2; with_bias++) {
					int hd = head_dims[a], n = run_lengths[b];
					size_t ldk = (size_t)hd * 3; /* a tail row: 3 KV heads */
					float *q = random_floats((size_t)Q * hd, 7u + (unsigned)Q);
					float *kf;
					uint16_t *k = random_halves((size_t)(n + 1) * ldk, 11u + (unsigned)hd, &kf);
					float *bias = random_floats((size_t)n + 1, 13u);
					float *got = calloc((size_t)Q * (n + 1), sizeof *got);
					float *want = calloc((size_t)Q * (n + 1), sizeof *want);
					cr_assert(got && want);
					const float *qs[TIERS_KERNEL_MAXQ];
					float *s[TIERS_KERNEL_MAXQ];
					const float scale = 0.125f;
					for (int i = 0; i < Q; i++) {
						qs[i] = q + (size_t)i * hd;
						s[i] = got + (size_t)i * (n + 1);
					}
					/* the second KV head's rows */
					const uint16_t *kr = k + hd;
					const float *kw = kf + hd;
					tiers_scores(qs, Q, kr, ldk, n, hd, scale, with_bias ? bias : NULL, s);
					for (int i = 0; i < Q; i++)
						for (int r = 0; r < n; r++)
							want[(size_t)i * (n + 1) + r] =
								with_bias ? dot_f32(qs[i], kw + r * ldk, hd) * scale + bias[r]
									  : dot_f32(qs[i], kw + r * ldk, hd) * scale;
					cr_assert(memcmp(got, want, (size_t)Q * (n + 1) * sizeof *got) == 0,
						  "scores differ from dot_f32: hd %d, %d rows, %d heads, bias %d", hd, n, Q,
						  with_bias);
					free(q);
					free(k);
					free(kf);
					free(bias);
					free(got);
					free(want);
				}
}

Test(tiers_kernels, values_equal_axpy_f32_row_after_row_bit_for_bit)
{
	for (size_t a = 0; a < sizeof head_dims / sizeof *head_dims; a++)
		for (size_t b = 0; b < sizeof run_lengths / sizeof *run_lengths; b++)
			for (int Q = 1; Q <= TIERS_KERNEL_MAXQ; Q++) {
				int hd = head_dims[a], n = run_lengths[b];
				size_t ldv = (size_t)hd * 2;
				float *vf;
				uint16_t *v = random_halves((size_t)(n + 1) * ldv * 2, 17u + (unsigned)n, &vf);
				float *w = random_floats((size_t)Q * (n + 1), 19u + (unsigned)Q);
				float *got = calloc((size_t)Q * hd, sizeof *got);
				float *want = calloc((size_t)Q * hd, sizeof *want);
				cr_assert(got && want);
				for (int i = 0; i < Q; i++) /* masked rows weigh 0; weights are positive */
					for (int r = 0; r <= n; r++)
						w[(size_t)i * (n + 1) + r] = r % 4 == 2 ? 0.0f : fabsf(w[(size_t)i * (n + 1) + r]);
				const float *ws[TIERS_KERNEL_MAXQ];
				float *o[TIERS_KERNEL_MAXQ];
				for (int i = 0; i < Q; i++) {
					ws[i] = w + (size_t)i * (n + 1);
					o[i] = got + (size_t)i * hd;
				}
				/* two runs into the same outputs: one tier after another */
				const uint16_t *v2 = v + (size_t)(n + 1) * ldv;
				const float *vf2 = vf + (size_t)(n + 1) * ldv;
				tiers_values(ws, Q, v, ldv, n, hd, o);
				tiers_values(ws, Q, v2, ldv, n, hd, o);
				for (int i = 0; i < Q; i++) {
					for (int r = 0; r < n; r++)
						axpy_f32(want + (size_t)i * hd, ws[i][r], vf + r * ldv, hd);
					for (int r = 0; r < n; r++)
						axpy_f32(want + (size_t)i * hd, ws[i][r], vf2 + r * ldv, hd);
				}
				cr_assert(memcmp(got, want, (size_t)Q * hd * sizeof *got) == 0,
					  "values differ from axpy_f32: hd %d, %d rows, %d heads", hd, n, Q);
				free(v);
				free(vf);
				free(w);
				free(got);
				free(want);
			}
}

/* The decode split (tiers_attend.c) sums one 64- or 32-column block (or 16)
 * over every run of a head at once: runs of different strides and lengths (L1, the
 * summaries, fetched groups, the tail, some empty), one weight row for all
 * of them; it must equal tiers_values called run after run from zeros. */
Test(tiers_kernels, values16_over_runs_equal_values_run_after_run_bit_for_bit)
{
	for (size_t a = 0; a < sizeof head_dims / sizeof *head_dims; a++)
		for (int Q = 1; Q <= TIERS_KERNEL_MAXQ; Q++) {
			int hd = head_dims[a];
			if (hd < 16)
				continue;
			enum { RUNS = 6 };
			const int len[RUNS] = { 5, 0, 37, 16, 1, 64 };
			const size_t ld[RUNS] = { (size_t)hd, (size_t)hd, (size_t)hd * 3, (size_t)hd, (size_t)hd, (size_t)hd * 2 };
			tier_run run[RUNS];
			uint16_t *rows[RUNS];
			float *wide[RUNS];
			int total = 0;
			for (int m = 0; m < RUNS; m++) {
				rows[m] = random_halves((size_t)(len[m] + 1) * ld[m], 23u + (unsigned)m, &wide[m]);
				run[m] = (tier_run){ NULL, rows[m], ld[m], len[m], total, TIER_RUN_GROUP };
				total += len[m];
			}
			float *w = random_floats((size_t)Q * total, 29u + (unsigned)Q);
			for (int i = 0; i < Q * total; i++)
				w[i] = i % 5 == 3 ? 0.0f : fabsf(w[i]);
			float *got = calloc((size_t)Q * hd, sizeof *got), *want = calloc((size_t)Q * hd, sizeof *want);
			float *got32 = calloc((size_t)Q * hd, sizeof *got32), *got64 = calloc((size_t)Q * hd, sizeof *got64);
			cr_assert(got && want && got32 && got64);
			const float *ws[TIERS_KERNEL_MAXQ];
			float *o[TIERS_KERNEL_MAXQ], *ow[TIERS_KERNEL_MAXQ];
			for (int d0 = 0; d0 + 16 <= hd; d0 += 16) {
				for (int i = 0; i < Q; i++) {
					ws[i] = w + (size_t)i * total;
					o[i] = got + (size_t)i * hd + d0;
					ow[i] = want + (size_t)i * hd + d0;
				}
				tiers_values16_runs(ws, Q, run, RUNS, d0, o);
				if (d0 % 32 == 0 && d0 + 32 <= hd) { /* 32 columns: the same sums */
					float *o32[TIERS_KERNEL_MAXQ];
					for (int i = 0; i < Q; i++)
						o32[i] = got32 + (size_t)i * hd + d0;
					tiers_values32_runs(ws, Q, run, RUNS, d0, o32);
				}
				if (d0 % 64 == 0 && d0 + 64 <= hd) { /* 64 columns: the same sums */
					float *o64[TIERS_KERNEL_MAXQ];
					for (int i = 0; i < Q; i++)
						o64[i] = got64 + (size_t)i * hd + d0;
					tiers_values64_runs(ws, Q, run, RUNS, d0, o64);
				}
				const float *at[TIERS_KERNEL_MAXQ];
				for (int m = 0, off = 0; m < RUNS; off += len[m++]) {
					for (int i = 0; i < Q; i++)
						at[i] = ws[i] + off;
					tiers_values(at, Q, rows[m] + d0, ld[m], len[m], 16, ow);
				}
			}
			cr_assert(memcmp(got, want, (size_t)Q * hd * sizeof *got) == 0,
				  "values over runs differ from tiers_values: hd %d, %d heads", hd, Q);
			for (int i = 0; i < Q; i++) /* columns of whole 32-blocks */
				cr_assert(memcmp(got32 + (size_t)i * hd, want + (size_t)i * hd, (size_t)(hd / 32 * 32) * sizeof *got) == 0,
					  "values over runs, 32 columns at a time, differ: hd %d, %d heads", hd, Q);
			for (int i = 0; i < Q; i++) /* columns of whole 64-blocks */
				cr_assert(memcmp(got64 + (size_t)i * hd, want + (size_t)i * hd, (size_t)(hd / 64 * 64) * sizeof *got) == 0,
					  "values over runs, 64 columns at a time, differ: hd %d, %d heads", hd, Q);
			free(got32);
			free(got64);
			for (int m = 0; m < RUNS; m++) {
				free(rows[m]);
				free(wide[m]);
			}
			free(w);
			free(got);
			free(want);
		}
}

/* The vector conversions round and widen as the scalar ones do, on
 * values that exercise the rounding: ties to even, the largest half
 * (65504) and what rounds past it to infinity (65520), subnormals and
 * their ties, signed zeros, infinities. */
Test(tiers_kernels, f16_rows_convert_as_the_scalar_functions)
{
	const float edge[] = { 0.0f, -0.0f, 1.0f, -1.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f, 1.0f + 3 * 0x1p-11f,
			       65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e9f, 0x1p-14f, 0x1p-24f, 0x1p-25f,
			       0x1.8p-24f, 3 * 0x1p-25f, 0x1p-26f, INFINITY, -INFINITY, 3.14159f, -2.71828f,
			       1e-3f, 6e-8f, 5.9604645e-8f };
	enum { N = 1000 };
	float src[N];
	unsigned seed = 31u;
	for (int i = 0; i < N; i++)
		src[i] = i < (int)(sizeof edge / sizeof *edge) ? edge[i] : frand(&seed) * (float)(1 << (i % 20));
	uint16_t got[N];
	f16_row_from_f32(got, src, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(got[i], hsq_f32_to_f16(src[i]), "%a -> %#x, want %#x", (double)src[i], got[i],
			     hsq_f32_to_f16(src[i]));
	/* widening: every half there is, 16 at a time */
	static uint16_t all[65536];
	for (int i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	for (int i = 0; i < 65536; i += 16) {
		vf16 w = load16_h(all + i);
		for (int l = 0; l < 16; l++) {
			float want = hsq_f16_to_f32(all[i + l]);
			cr_assert(memcmp(&w[l], &want, sizeof want) == 0 || (isnan(w[l]) && isnan(want)),
				  "half %#x widens to %a, want %a", i + l, (double)w[l], (double)want);
		}
	}
}

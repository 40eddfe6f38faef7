/* test_forward.c - the CPU backend kernels against naive double-precision
 * references, and the batch invariance that snapshot resume relies on. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/fp16.h"
#include "model/dequant.h"
#include "model/ggml_types.h"
#include "hsq.h"
#include "common/vec_f32.h"

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* hsum16x16 (the 4 x 4 score tiles' reduction) is sixteen hsum16, bit for
 * bit: lanes of mixed magnitudes, where another tree rounds differently,
 * and signed zeros, where only the same additions keep the sign. */
Test(backend, hsum16x16_is_hsum16_per_lane)
{
	unsigned s = 5;
	for (int round = 0; round < 2000; round++) {
		vf16 v[16];
		for (int j = 0; j < 16; j++)
			for (int l = 0; l < 16; l++) {
				float x = frand(&s) * ldexpf(1.0f, (int)(frand(&s) * 24));
				v[j][l] = round % 7 == 0 && (l + j) % 3 ? -0.0f : x;
			}
		vf16 all = hsum16x16(v);
		for (int j = 0; j < 16; j++) {
			float one = hsum16(v[j]);
			cr_assert(memcmp(&all[j], &one, sizeof one) == 0, "round %d lane %d: %a against hsum16's %a",
				  round, j, (double)all[j], (double)one);
		}
	}
}

Test(backend, matmul_matches_naive_for_every_batch_shape)
{
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(2, &be), HSQ_OK);
	hsq_model fake = { 0 };
	fake.info.n_embd = 80; fake.info.n_ff = 80; fake.info.n_head = 1; fake.info.head_dim = 80;
	cr_assert_eq(be->ops->prepare(be, &fake, 16), HSQ_OK);
	enum { ROWS = 37, COLS = 80, MAXB = 9 }; /* odd sizes hit every tail path */
	unsigned s = 1;
	float *w = malloc(ROWS * COLS * 4), *x = malloc(MAXB * COLS * 4);
	float *y = malloc(MAXB * ROWS * 4), *y1 = malloc(ROWS * 4);
	for (int i = 0; i < ROWS * COLS; i++) w[i] = frand(&s);
	for (int i = 0; i < MAXB * COLS; i++) x[i] = frand(&s);
	hsq_weight W = { (const uint8_t *)w, GGML_TYPE_F32, ROWS, COLS, COLS * 4 };
	for (int b = 1; b <= MAXB; b++) {
		be->ops->matmul(be, &W, x, b, y);
		for (int t = 0; t < b; t++) {
			be->ops->matmul(be, &W, x + t * COLS, 1, y1);
			for (int r = 0; r < ROWS; r++) {
				double ref = 0;
				for (int k = 0; k < COLS; k++) ref += (double)w[r * COLS + k] * x[t * COLS + k];
				cr_assert(fabs(y[t * ROWS + r] - ref) <= 1e-5 * (1 + fabs(ref)), "b=%d t=%d r=%d", b, t, r);
				/* batch invariance: bitwise equal to the single-token result */
				cr_assert(memcmp(&y[t * ROWS + r], &y1[r], 4) == 0, "b=%d t=%d r=%d not batch-invariant", b, t, r);
			}
		}
	}
	be->ops->destroy(be);
	free(w); free(x); free(y); free(y1);
}

/* The fused kernels (blocks decoded in registers; on AVX2 machines the
 * 8-lane kernels of backend_cpu_avx2.h) against dequant_row and a double
 * reference, for every batch shape: every tile (rows x tokens) and tail,
 * bit-identical to the one-token result. Tolerance 1e-5 relative: fp32
 * sums of 256 or 1280 products of values below 16 in magnitude (Q6_K:
 * 41). */
static void check_fused_cols(uint32_t type, int block_bytes, int COLS)
{
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(2, &be), HSQ_OK);
	/* batches of 8 + 4 + 1 go through every fused tile shape; from 16
	 * tokens the rows are dequantized to scratch (fused_for) */
	enum { ROWS = 37, MAXB = 17 };
	hsq_model fake = { 0 };
	fake.info.n_embd = COLS; fake.info.n_ff = COLS; fake.info.n_head = 1; fake.info.head_dim = COLS;
	cr_assert_eq(be->ops->prepare(be, &fake, 16), HSQ_OK);
	int per_block = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K ? 256 : 32; /* values per block */
	int row_bytes = COLS / per_block * block_bytes;
	uint8_t *w = malloc((size_t)ROWS * row_bytes);
	float *wf = malloc(ROWS * COLS * 4), *x = malloc(MAXB * COLS * 4);
	float *y = malloc(MAXB * ROWS * 4), *y1 = malloc(ROWS * 4);
	unsigned s = 7;
	for (int i = 0; i < ROWS * row_bytes; i++)
		w[i] = (uint8_t)(frand(&s) * 127.0f + 128.0f);
	for (int b = 0; b < ROWS * COLS / per_block; b++) { /* sane scales: d (and Q4_1's m) in [-1, 1] */
		uint8_t *blk = w + (size_t)b * block_bytes;
		uint16_t d = hsq_f32_to_f16(frand(&s)), m = hsq_f32_to_f16(frand(&s));
		if (per_block == 256) { /* k-quants: 6-bit (Q4_K) or int8 (Q6_K) sub-scales multiply d */
			d = hsq_f32_to_f16(hsq_f16_to_f32(d) * 0.01f);
			m = hsq_f32_to_f16(hsq_f16_to_f32(m) * 0.01f);
		}
		uint8_t *at = blk + (type == GGML_TYPE_Q6_K ? 208 : 0); /* Q6_K keeps d last */
		at[0] = (uint8_t)d; at[1] = (uint8_t)(d >> 8);
		if (type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q4_K) { blk[2] = (uint8_t)m; blk[3] = (uint8_t)(m >> 8); }
	}
	for (int r = 0; r < ROWS; r++)
		cr_assert_eq(dequant_row(type, w + (size_t)r * row_bytes, wf + r * COLS, COLS), 0);
	for (int i = 0; i < MAXB * COLS; i++) x[i] = frand(&s);
	hsq_weight W = { w, type, ROWS, COLS, (size_t)row_bytes };
	for (int b = 1; b <= MAXB; b++) {
		be->ops->matmul(be, &W, x, b, y);
		for (int t = 0; t < b; t++) {
			be->ops->matmul(be, &W, x + t * COLS, 1, y1);
			for (int r = 0; r < ROWS; r++) {
				double ref = 0, mag = 0;
				for (int k = 0; k < COLS; k++) {
					ref += (double)wf[r * COLS + k] * x[t * COLS + k];
					mag += fabs((double)wf[r * COLS + k] * x[t * COLS + k]);
				}
				cr_assert(fabs(y[t * ROWS + r] - ref) <= 1e-5 * (1 + mag), "type %u b=%d t=%d r=%d: %g vs %g",
					  type, b, t, r, y[t * ROWS + r], ref);
				cr_assert(memcmp(&y[t * ROWS + r], &y1[r], 4) == 0, "type %u b=%d t=%d r=%d not batch-invariant",
					  type, b, t, r);
				/* and the dequantize-then-dot path's sum, bit for bit */
				float dot = dot_f32(wf + r * COLS, x + t * COLS, COLS);
				cr_assert(memcmp(&y1[r], &dot, 4) == 0, "type %u t=%d r=%d: %a, dot_f32 %a", type, t, r, y1[r],
					  dot);
			}
		}
	}
	be->ops->destroy(be);
	free(w); free(wf); free(x); free(y); free(y1);
}

/* 256 columns take the 2 x 8 tile for 8 tokens and more (AVX-512), 1280
 * columns the 4 x 4 tile (FUSED_WIDE_MAX_COLS, backend_cpu.c). */
static void check_fused_type(uint32_t type, int block_bytes)
{
	check_fused_cols(type, block_bytes, 256);
	check_fused_cols(type, block_bytes, 1280);
}

Test(backend, fused_quant_matmul_matches_dequant_for_every_batch_shape)
{
	check_fused_type(GGML_TYPE_Q4_0, 18);
	check_fused_type(GGML_TYPE_Q4_1, 20);
	check_fused_type(GGML_TYPE_Q5_0, 22); /* fused below 6 tokens, dequantized above */
	check_fused_type(GGML_TYPE_Q8_0, 34);
}

/* The k-quants' fused kernels (Q4_K, Q6_K: below 6 tokens, the scratch
 * pass from 6; AVX2 builds always the scratch pass), the same checks. */
Test(backend, fused_kquant_matmul_matches_dequant_for_every_batch_shape)
{
	check_fused_type(GGML_TYPE_Q4_K, 144);
	check_fused_type(GGML_TYPE_Q6_K, 210);
}

/* The KV cache is fp16: n values rounded to halves in place (the naive
 * references below then see what the cache holds), their halves in h. */
static void to_halves(float *x, uint16_t *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h[i] = hsq_f32_to_f16(x[i]);
		x[i] = hsq_f16_to_f32(h[i]);
	}
}

/* Naive double-precision attention of token t over positions
 * max(0, t - window + 1)..t of linear caches. */
static void naive_attention(const float *q, const float *k, const float *v, int t, int h, int NH, int NKV, int HD,
			    int window, double *o)
{
	int g = h / (NH / NKV), first = window && t + 1 > window ? t + 1 - window : 0;
	double sc[64], mx = -1e300, sum = 0;
	for (int p = first; p <= t; p++) {
		double d = 0;
		for (int i = 0; i < HD; i++)
			d += (double)q[(t * NH + h) * HD + i] * k[(p * NKV + g) * HD + i];
		sc[p] = d / sqrt(HD);
		mx = fmax(mx, sc[p]);
	}
	for (int p = first; p <= t; p++) {
		sc[p] = exp(sc[p] - mx);
		sum += sc[p];
	}
	for (int i = 0; i < HD; i++) {
		o[i] = 0;
		for (int p = first; p <= t; p++)
			o[i] += sc[p] / sum * v[(p * NKV + g) * HD + i];
	}
}

/* Full causal attention, and sliding-window attention over a ring cache
 * of 5 rows (position p in row p % 5), both against the naive reference. */
Test(backend, attention_matches_naive_causal_gqa_and_window)
{
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(2, &be), HSQ_OK);
	enum { NH = 4, NKV = 2, HD = 24, NT = 11, CAP = 5, W = 3 };
	hsq_model fake = { 0 };
	fake.info.n_embd = NH * HD; fake.info.n_ff = NH * HD; fake.info.n_head = NH; fake.info.head_dim = HD;
	cr_assert_eq(be->ops->prepare(be, &fake, NT), HSQ_OK);
	unsigned s = 7;
	float q[NT * NH * HD], k[NT * NKV * HD], v[NT * NKV * HD], out[NT * NH * HD];
	uint16_t kh[NT * NKV * HD], vh[NT * NKV * HD], kr[CAP * NKV * HD], vr[CAP * NKV * HD];
	int pos[NT];
	for (int i = 0; i < NT * NH * HD; i++) q[i] = frand(&s) * 2;
	for (int i = 0; i < NT * NKV * HD; i++) { k[i] = frand(&s) * 2; v[i] = frand(&s); }
	to_halves(k, kh, NT * NKV * HD);
	to_halves(v, vh, NT * NKV * HD);
	for (int t = 0; t < NT; t++) pos[t] = t;
	be->ops->attention(be, q, kh, vh, NT, pos, NT, NH, NKV, HD, 0, 1.0f / sqrtf(HD), out);
	double o[HD];
	for (int t = 0; t < NT; t++)
		for (int h = 0; h < NH; h++) {
			naive_attention(q, k, v, t, h, NH, NKV, HD, 0, o);
			for (int i = 0; i < HD; i++)
				cr_assert(fabs(out[(t * NH + h) * HD + i] - o[i]) < 1e-5, "full t=%d h=%d i=%d", t, h, i);
		}
	/* one token at a time, the ring holding the last CAP positions */
	for (int t = 0; t < NT; t++) {
		memcpy(kr + (t % CAP) * NKV * HD, kh + t * NKV * HD, sizeof *kh * NKV * HD);
		memcpy(vr + (t % CAP) * NKV * HD, vh + t * NKV * HD, sizeof *vh * NKV * HD);
		be->ops->attention(be, q + t * NH * HD, kr, vr, CAP, &pos[t], 1, NH, NKV, HD, W, 1.0f / sqrtf(HD), out);
		for (int h = 0; h < NH; h++) {
			naive_attention(q, k, v, t, h, NH, NKV, HD, W, o);
			for (int i = 0; i < HD; i++)
				cr_assert(fabs(out[h * HD + i] - o[i]) < 1e-5, "window t=%d h=%d i=%d", t, h, i);
		}
	}
	be->ops->destroy(be);
}

/* Sliding-window layers with several tokens score and sum the query heads
 * of a KV head together (attn_heads_task): bit-identical to one token at a
 * time over the same ring, whose windows here wrap around its end, and
 * close to the naive reference, for 1 to 13 heads a KV head, with and
 * without a tail of 16 lanes. */
Test(backend, window_attention_is_batch_invariant)
{
	enum { NT = 6, W = 7, CAP = W + NT, P0 = 22, MAXH = 13, MAXHD = 72 };
	static const int shapes[][3] = { /* n_head, n_head_kv, head_dim */
		{ 8, 2, 72 }, { 9, 3, 64 }, { 6, 1, 16 }, { 13, 1, 20 }, { 2, 2, 16 }, { 4, 1, 256 },
	};
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(2, &be), HSQ_OK);
	hsq_model fake = { 0 };
	fake.info.n_embd = MAXH * 256; fake.info.n_ff = MAXH * 256; fake.info.n_head = MAXH;
	fake.info.head_dim = 256;
	cr_assert_eq(be->ops->prepare(be, &fake, P0 + NT), HSQ_OK);
	size_t nq = (size_t)NT * MAXH * 256, nkv = (size_t)CAP * MAXH * 256;
	float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4);
	float *out = malloc(nq * 4), *one = malloc(MAXH * 256 * 4);
	unsigned s = 5;
	for (size_t i = 0; i < nq; i++) q[i] = frand(&s) * 2;
	for (size_t i = 0; i < nkv; i++) { k[i] = frand(&s) * 2; v[i] = frand(&s); }
	uint16_t *kh = malloc(nkv * 2), *vh = malloc(nkv * 2);
	to_halves(k, kh, nkv);
	to_halves(v, vh, nkv);
	int pos[NT];
	for (int t = 0; t < NT; t++) pos[t] = P0 + t; /* row p % CAP: the last windows wrap */
	for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
		int nh = shapes[c][0], nkvh = shapes[c][1], hd = shapes[c][2];
		float sc = 1.0f / sqrtf((float)hd);
		be->ops->attention(be, q, kh, vh, CAP, pos, NT, nh, nkvh, hd, W, sc, out);
		for (int t = 0; t < NT; t++) {
			be->ops->attention(be, q + (size_t)t * nh * hd, kh, vh, CAP, &pos[t], 1, nh, nkvh, hd, W, sc, one);
			cr_assert(memcmp(out + (size_t)t * nh * hd, one, (size_t)nh * hd * 4) == 0,
				  "shape %zu token %d: the batch differs from one token at a time", c, t);
			for (int h = 0; h < nh; h++) { /* naive, over positions pos - W + 1 .. pos */
				int g = h / (nh / nkvh);
				double sco[W], mx = -1e300, sum = 0;
				for (int p = 0; p < W; p++) {
					size_t row = (size_t)((pos[t] - W + 1 + p) % CAP);
					double d = 0;
					for (int i = 0; i < hd; i++)
						d += (double)q[((size_t)t * nh + h) * hd + i] * k[(row * nkvh + g) * hd + i];
					sco[p] = d * sc;
					mx = fmax(mx, sco[p]);
				}
				for (int p = 0; p < W; p++)
					sum += sco[p] = exp(sco[p] - mx);
				for (int i = 0; i < hd; i++) {
					double o = 0;
					for (int p = 0; p < W; p++) {
						size_t row = (size_t)((pos[t] - W + 1 + p) % CAP);
						o += sco[p] / sum * v[(row * nkvh + g) * hd + i];
					}
					cr_assert(fabs(one[h * hd + i] - o) < 1e-5, "shape %zu t=%d h=%d i=%d", c, t, h, i);
				}
			}
		}
	}
	be->ops->destroy(be);
	free(q); free(k); free(v); free(kh); free(vh); free(out); free(one);
}

/* Global layers with several tokens run blocked (a block of tokens per KV
 * head, backend_cpu.c): bit-identical to one token at a time, and close to
 * the naive reference, for GQA ratios below, at and above the block's 12
 * queries, head sizes with and without a tail of 16 lanes, a batch that
 * is not a whole number of blocks, and a batch that continues a cache. */
Test(backend, blocked_attention_is_batch_invariant)
{
	enum { NT = 23, FIRST = 6, MAXH = 13, MAXHD = 1028 };
	/* n_head, n_head_kv, head_dim; at head_dim 1024 and more the value
	 * rows come in chunks of 16 (ATTN_VCHUNK_BYTES), so the sums carry
	 * over between chunks (1028: the scalar tail channels too) */
	static const int shapes[][3] = {
		{ 9, 3, 64 }, { 4, 1, 72 }, { 2, 2, 16 }, { 12, 1, 24 }, { 13, 1, 20 }, { 8, 1, 1024 }, { 2, 1, 1028 },
	};
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(2, &be), HSQ_OK);
	hsq_model fake = { 0 };
	fake.info.n_embd = MAXH * MAXHD; fake.info.n_ff = MAXH * MAXHD; fake.info.n_head = MAXH;
	fake.info.head_dim = MAXHD;
	cr_assert_eq(be->ops->prepare(be, &fake, FIRST + NT), HSQ_OK);
	size_t nq = (size_t)NT * MAXH * MAXHD, nkv = (size_t)(FIRST + NT) * MAXH * MAXHD;
	float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4);
	float *out = malloc(nq * 4), *one = malloc(MAXH * MAXHD * 4);
	double o[MAXHD];
	unsigned s = 11;
	for (size_t i = 0; i < nq; i++) q[i] = frand(&s) * 2;
	for (size_t i = 0; i < nkv; i++) { k[i] = frand(&s) * 2; v[i] = frand(&s); }
	uint16_t *kh = malloc(nkv * 2), *vh = malloc(nkv * 2);
	to_halves(k, kh, nkv);
	to_halves(v, vh, nkv);
	int pos[NT];
	for (int t = 0; t < NT; t++) pos[t] = FIRST + t; /* rows 0..FIRST-1 came before */
	for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
		int nh = shapes[c][0], nkvh = shapes[c][1], hd = shapes[c][2];
		float sc = 1.0f / sqrtf((float)hd);
		be->ops->attention(be, q, kh, vh, FIRST + NT, pos, NT, nh, nkvh, hd, 0, sc, out);
		for (int t = 0; t < NT; t++) {
			be->ops->attention(be, q + (size_t)t * nh * hd, kh, vh, FIRST + NT, &pos[t], 1, nh, nkvh, hd, 0, sc,
					   one);
			cr_assert(memcmp(out + (size_t)t * nh * hd, one, (size_t)nh * hd * 4) == 0,
				  "shape %zu token %d: the batch differs from one token at a time", c, t);
			for (int h = 0; h < nh; h++) { /* naive, at position pos[t] */
				int g = h / (nh / nkvh);
				double sco[FIRST + NT], mx = -1e300, sum = 0;
				for (int p = 0; p <= pos[t]; p++) {
					double d = 0;
					for (int i = 0; i < hd; i++)
						d += (double)q[((size_t)t * nh + h) * hd + i] * k[((size_t)p * nkvh + g) * hd + i];
					sco[p] = d * sc;
					mx = fmax(mx, sco[p]);
				}
				for (int p = 0; p <= pos[t]; p++)
					sum += sco[p] = exp(sco[p] - mx);
				for (int i = 0; i < hd; i++) {
					o[i] = 0;
					for (int p = 0; p <= pos[t]; p++)
						o[i] += sco[p] / sum * v[((size_t)p * nkvh + g) * hd + i];
					cr_assert(fabs(one[h * hd + i] - o[i]) < 1e-5, "shape %zu t=%d h=%d i=%d", c, t, h, i);
				}
			}
		}
	}
	be->ops->destroy(be);
	free(q); free(k); free(v); free(kh); free(vh); free(out); free(one);
}

Test(backend, rope_rotates_pairs_by_position)
{
	hsq_backend *be;
	cr_assert_eq(backend_cpu_new(1, &be), HSQ_OK);
	float x[2 * 8];
	int pos[2] = { 0, 3 };
	for (int i = 0; i < 16; i++) x[i] = (float)(i % 8 + 1);
	be->ops->rope(be, x, pos, 2, 1, 8, 10000.0f, 0);
	for (int i = 0; i < 8; i++)
		cr_expect_float_eq(x[i], (float)(i + 1), 1e-6, "position 0 is the identity");
	for (int i = 0; i < 8; i += 2) {
		double th = 3 * pow(10000.0, -(double)i / 8), a = i + 1, b = i + 2;
		cr_expect(fabs(x[8 + i] - (a * cos(th) - b * sin(th))) < 1e-5);
		cr_expect(fabs(x[8 + i + 1] - (a * sin(th) + b * cos(th))) < 1e-5);
	}
	/* NeoX: pair i is (i, i + 4) with angle pos * base^(-2i/8) */
	for (int i = 0; i < 16; i++) x[i] = (float)(i % 8 + 1);
	be->ops->rope(be, x, pos, 2, 1, 8, 10000.0f, 1);
	for (int i = 0; i < 4; i++) {
		double th = 3 * pow(10000.0, -2.0 * i / 8), a = i + 1, b = i + 5;
		cr_expect(fabs(x[8 + i] - (a * cos(th) - b * sin(th))) < 1e-5, "neox pair %d", i);
		cr_expect(fabs(x[8 + i + 4] - (a * sin(th) + b * cos(th))) < 1e-5, "neox pair %d", i);
	}
	be->ops->destroy(be);
}

static const char *model_path(void)
{
	const char *m = getenv("HSQ_TEST_MODEL");
	if (!m || access(m, R_OK)) {
		printf("SKIP: model-based forward tests (HSQ_TEST_MODEL not set or missing)\n");
		return NULL;
	}
	return m;
}

/* Logits of a token do not depend on how the sequence was split into
 * eval calls or on the thread count: bitwise equal. */
Test(forward, split_and_threads_do_not_change_logits)
{
	const char *m = model_path();
	if (!m)
		cr_skip_test("no model");
	hsq_model *model;
	cr_assert_eq(hsq_model_load(m, &model), HSQ_OK, "%s", hsq_last_error());
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	hsq_token toks[24];
	for (int i = 0; i < 24; i++) toks[i] = 100 + 37 * i;
	float *all = malloc((size_t)24 * mi.n_vocab * 4), *one = malloc((size_t)mi.n_vocab * 4);
	hsq_context_params p = { 64, 2, 8 }; /* batch 8: 24 tokens in 3 chunks */
	hsq_context *a, *b;
	cr_assert_eq(hsq_context_new(model, &p, &a), HSQ_OK);
	cr_assert_eq(hsq_context_eval(a, toks, 24, all, 1), HSQ_OK);
	hsq_context_params p1 = { 64, 1, 5 };
	cr_assert_eq(hsq_context_new(model, &p1, &b), HSQ_OK);
	size_t splits[] = { 3, 1, 9, 11 };
	size_t done = 0;
	for (int k = 0; k < 4; k++) {
		float *lg = malloc(splits[k] * (size_t)mi.n_vocab * 4);
		cr_assert_eq(hsq_context_eval(b, toks + done, splits[k], lg, 1), HSQ_OK);
		cr_assert(memcmp(lg, all + done * mi.n_vocab, splits[k] * (size_t)mi.n_vocab * 4) == 0,
			  "split %d differs", k);
		free(lg);
		done += splits[k];
	}
	cr_expect_eq(hsq_context_n_past(b), 24);
	cr_expect_eq(hsq_context_eval(b, toks, 41, one, 0), HSQ_ERR_CONTEXT_FULL, "41 more do not fit in 64");
	hsq_token bad = mi.n_vocab;
	cr_expect_eq(hsq_context_eval(b, &bad, 1, one, 0), HSQ_ERR_INVALID_ARG);
	cr_expect_eq(hsq_context_eval(b, toks, 0, one, 0), HSQ_ERR_EMPTY_INPUT);
	hsq_context_free(a);
	hsq_context_free(b);
	hsq_model_free(model);
	free(all);
	free(one);
}

Test(forward, context_limits)
{
	const char *m = model_path();
	if (!m)
		cr_skip_test("no model");
	hsq_model *model;
	cr_assert_eq(hsq_model_load(m, &model), HSQ_OK);
	hsq_context *c = NULL;
	hsq_context_params p = { 9000, 1, 0 };
	cr_expect_eq(hsq_context_new(model, &p, &c), HSQ_ERR_CONTEXT_FULL);
	cr_expect(strstr(hsq_last_error(), "8192") != NULL, "%s", hsq_last_error());
	cr_expect_null(c);
	hsq_model_free(model);
}

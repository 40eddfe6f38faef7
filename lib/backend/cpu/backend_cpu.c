/* backend_cpu.c - the CPU backend: threaded fp32 kernels.
 *
 * Every output element of matmul is one dot product accumulated in 16 float
 * lanes over k (k = 0, 16, 32, ...) and reduced lane 0..15 in order, then a
 * scalar tail. All kernels below (1x1, 4-row, 4x4 tile) follow that order,
 * so a token's result is bit-identical whether it was computed alone
 * (decode) or inside a batch (prefill): a resumed snapshot continues
 * exactly like a single pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/error.h"
#include "common/le.h"
#include "common/threadpool.h"
#include "common/vec_f16.h"
#include "common/vec_f32.h"
#include "model/dequant.h"
#include "model/ggml_types.h"
#include "model/quant_blocks.h"

#if defined(__AVX2__) && !defined(__AVX512F__)
#define HSQ_CPU_AVX2 1
#include "backend/cpu/backend_cpu_avx2.h"
#endif


#define ROWS_PER_TASK 16
#define MAX_THREADS 256
/* Queries of one blocked attention task (tokens x the query heads of one
 * KV head), which share each load of a key row; a multiple of 8 and of 4,
 * the queries that share each load of a value row (attn_values). At long
 * context the K and V rows stream from the last-level cache once per
 * task, so more queries a task means fewer passes over them. */
#define ATTN_MAXQ 24
/* Value rows a blocked task's query groups pass over in turn: 64 KiB
 * of them, 64 rows at head_dim 256, well inside L2. */
#define ATTN_VCHUNK_BYTES 65536
/* Queries per value-row load: 8 where 8 accumulators of 16 lanes fit the
 * registers (AVX-512, 32 of them), 4 on AVX2 (16 of 8 lanes, 2 a query). */
#ifdef HSQ_CPU_AVX2
#define ATTN_VALUES_Q 4
#else
#define ATTN_VALUES_Q 8
#endif

/* RoPE's cosines and sines for one batch of positions and one frequency
 * base. Every layer turns its queries and keys by the same angles, so the
 * first computes them (pow, cos and sin in double were 4% of gemma-3's
 * prefill) and the others read the same floats. gemma-3 alternates two
 * bases, hence two tables. */
#define ROPE_TABLES 2

typedef struct rope_angles {
	float *cs;  /* [n_tok][head_dim / 2][2]: cos, sin of each angle */
	int *pos;   /* [n_tok]: the positions it holds */
	int n_tok, head_dim;
	size_t cap_cs, cap_pos; /* floats and positions allocated */
	float freq_base;
	uint64_t used; /* the backend's rope_clock when last used */
} rope_angles;

typedef struct cpu_backend {
	hsq_backend base;
	hsq_pool *pool;
	int n_threads;
	float *scratch;      /* [n_threads][ROWS_PER_TASK][max_cols]: dequantized rows */
	float *scores;       /* [n_threads][ATTN_MAXQ][n_ctx]: attention scores */
	int n_ctx;           /* positions the scores scratch holds */
	float *dec_scores;   /* [n_head][n_ctx]: a decode step's scores, then weights */
	rope_angles rope[ROPE_TABLES];
	uint64_t rope_clock; /* stamps rope_angles.used */
} cpu_backend;

/* Keeps v in a register: without it gcc folds the load of a token's x into
 * each of the rows' multiply-adds, 4 loads where 1 does, and a tile waits
 * on the load ports instead of the multiply-adds (prefill's tile_4x6 at
 * 108 -> 170 GFLOP/s on one Zen 4 core, bench/matmul; the same sums). */
#ifdef __AVX512F__ /* a 16-lane vector is one register only there */
#define REG_PIN(v) __asm__("" : "+v"(v))
#else
#define REG_PIN(v) ((void)0)
#endif

/* y[t][r] for 4 rows and T tokens at once (T = 4 or 6, a constant after
 * inlining): 4T independent accumulators hide FMA latency, each w load
 * serves T tokens and each x load 4 rows; each accumulates exactly like
 * dot_f32. The loops must unroll completely, or gcc keeps the
 * accumulators on the stack (two thirds of the time was those loads and
 * stores, seen with perf annotate). 4 x 6 uses 24 + 4 + 1 of AVX-512's 32
 * vector registers. */
static inline __attribute__((always_inline)) void tile_4xT(const float *w, int ldw, const float *x, int ldx, int n,
							   float *y, int ldy, const int T)
{
	vf16 acc[6][4] = { { { 0 } } };
	int k = 0;
	for (; k + 16 <= n; k += 16) {
		vf16 wv[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			wv[r] = load16(w + (size_t)r * ldw + k);
#pragma GCC unroll 6
		for (int t = 0; t < T; t++) {
			vf16 xv = load16(x + (size_t)t * ldx + k);
			REG_PIN(xv);
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				acc[t][r] += wv[r] * xv;
		}
	}
#pragma GCC unroll 6
	for (int t = 0; t < T; t++)
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			y[(size_t)t * ldy + r] = hsum16(acc[t][r]) +
						 tail_dot(w + (size_t)r * ldw, x + (size_t)t * ldx, k, n);
}

static void tile_4x4(const float *w, int ldw, const float *x, int ldx, int n, float *y, int ldy)
{
#ifdef HSQ_CPU_AVX2 /* 16 accumulators of 16 lanes do not fit 16 registers */
	const float *xt[4] = { x, x + ldx, x + 2 * (size_t)ldx, x + 3 * (size_t)ldx };
	float *yt[4] = { y, y + ldy, y + 2 * (size_t)ldy, y + 3 * (size_t)ldy };
	for (int t0 = 0; t0 < 4; t0 += 2)
		for (int r0 = 0; r0 < 4; r0 += 2)
			tile_2x2q8(w, ldw, xt, n, yt, r0, t0);
	return;
#endif
	tile_4xT(w, ldw, x, ldx, n, y, ldy, 4);
}

#ifndef HSQ_CPU_AVX2
static void tile_4x6(const float *w, int ldw, const float *x, int ldx, int n, float *y, int ldy)
{
	tile_4xT(w, ldw, x, ldx, n, y, ldy, 6);
}
#endif

/* 4 rows (f32, or fp16 when half: a constant after inlining), one
 * vector x: y[r] = dot_f32(row r, x) of the (widened) row. */
static inline __attribute__((always_inline)) void tile_4x1_rows(const void *w, const int half, int ldw,
								const float *x, int n, float *y)
{
	const float *wf = w;
	const uint16_t *wh = w;
	vf16 acc[4] = { { 0 } };
	int k = 0;
	for (; k + 16 <= n; k += 16) {
		vf16 xv = load16(x + k);
		REG_PIN(xv);
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			acc[r] += (half ? load16_h(wh + (size_t)r * ldw + k) : load16(wf + (size_t)r * ldw + k)) * xv;
	}
#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
		y[r] = hsum16(acc[r]) + (half ? tail_dot_h(x, wh + (size_t)r * ldw, k, n)
					      : tail_dot(wf + (size_t)r * ldw, x, k, n));
}

/* 4 weight rows, one token: the decode path of the matmul. */
static void tile_4x1(const float *w, int ldw, const float *x, int n, float *y)
{
	tile_4x1_rows(w, 0, ldw, x, n, y);
}

/* 4 fp16 keys (the KV cache) against 4 queries (pointers: a block's
 * queries are not evenly spaced): s[i][r] = k_r . q_i, each in the dot_f32
 * order over the widened key, so equal to tile_4x1h and dot_h bit for bit.
 * tile_4x4 with pointers; making tile_4x4 call this one slowed gemma's
 * matmul by a fifth (measured). */
static void tile_4x4q(const uint16_t *k, int ldk, const float *const *q, int n, float *const *s)
{
#ifdef HSQ_CPU_AVX2
	for (int i0 = 0; i0 < 4; i0 += 2)
		for (int r0 = 0; r0 < 4; r0 += 2)
			tile_2x2q8h(k, ldk, q, n, s, r0, i0);
	return;
#endif
	/* unrolled completely, or gcc 12 keeps kv and acc on the stack (a
	 * store after every FMA, seen with perf annotate) */
	vf16 acc[4][4] = { { { 0 } } };
	int d = 0;
	for (; d + 16 <= n; d += 16) {
		vf16 kv[4], qv[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			kv[r] = load16_h(k + (size_t)r * ldk + d);
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			qv[i] = load16(q[i] + d);
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				acc[i][r] += kv[r] * qv[i];
	}
	if (d == n) { /* no tail: tail_dot adds 0.0f, as here */
		vf16 sums = hsum16x16((const vf16 *)acc) + 0.0f; /* acc[i][r] is j = 4i + r */
		for (int i = 0; i < 4; i++)
			memcpy(s[i], (const float *)&sums + 4 * i, 4 * sizeof(float));
		return;
	}
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			s[i][r] = hsum16(acc[i][r]) + tail_dot_h(q[i], k + (size_t)r * ldk, d, n);
}

/* 4 fp16 keys, one query: s[r] = dot_h(q, k_r, n), the decode path. */
static void tile_4x1h(const uint16_t *k, int ldk, const float *q, int n, float *s)
{
	tile_4x1_rows(k, 1, ldk, q, n, s);
}

typedef struct matmul_job {
	const hsq_weight *w;
	const float *x; /* [n_tok][cols] */
	int n_tok;
	float *y;       /* [n_tok][rows] */
	float *scratch; /* per-thread slots of ROWS_PER_TASK * cols floats */
	int task_rows;  /* rows per task: ROWS_PER_TASK, or more for the fused kernels */
} matmul_job;

/* Fused kernels for Q4_0/Q4_1/Q5_0/Q8_0 and (AVX-512 and portable builds)
 * Q4_K/Q6_K: blocks of 32 values are decoded straight into registers
 * (quant_blocks.h, the same values dequant_row gives) and multiplied into
 * R x T accumulators. Per output the order is the dot_f32 order (16-lane
 * chunks k = 0, 16, 32, ...), whatever R and T are, so decode (T = 1) and
 * prefill (T = 4 tiles) agree bit for bit. R and T are compile-time
 * constants in every call (always_inline + switch). A decoder gets a group
 * of S blocks of a row (S = 1 for the plain types; for a K-quant the 8 of
 * a super-block of 256, whose scales its group_scales_fn decoded once into
 * sc) and the index j of the block of 32 in it. */
typedef void (*group_scales_fn)(const uint8_t *g, float sc[16]);
typedef void (*group_block_fn)(const uint8_t *g, int j, const float *sc, vf16 *lo, vf16 *hi);

#define PLAIN_BLOCK(name)                                                                                   \
	static inline __attribute__((always_inline)) void name##_block(const uint8_t *g, int j, const float *sc, \
								       vf16 *lo, vf16 *hi)                    \
	{                                                                                                   \
		qb_##name(g, lo, hi);                                                                       \
		(void)j;                                                                                    \
		(void)sc;                                                                                   \
	}
PLAIN_BLOCK(q4_0)
PLAIN_BLOCK(q4_1)
PLAIN_BLOCK(q5_0)
PLAIN_BLOCK(q8_0)
#undef PLAIN_BLOCK

#ifndef HSQ_CPU_AVX2
#define Q4_K_BYTES 144
#define Q6_K_BYTES 210

static inline vf16 u8_to_f(const uint8_t *p, int shift, uint8_t mask)
{
	hsq_vu8x16 q;
	memcpy(&q, p, 16);
	return qb_u8_to_f((q >> shift) & mask);
}

/* The K-quants go a super-block of 256 values at a time: its scales are
 * decoded once into 16 floats (*_scales), which the 8 blocks of 32 then
 * read (*_block), in a block loop unrolled so that each block's nibble
 * shifts are constants. Scales decoded per block through the branches of
 * the 6-bit packing, and shifts by a variable (gcc widens the bytes to
 * words and permutes them back), held Q4_K and Q6_K decode steps to 6-8
 * GB/s. */

/* Q4_K: out[j] = d * sc_j, out[8 + j] = dmin * m_j for sub-blocks j = 0..7
 * (dequant_k.c's scale_min_k4, four bytes at a time: sc and m of 0-3 are
 * the low 6 bits of bytes 0-3 and 4-7; of 4-7 a nibble of bytes 8-11 with
 * the top 2 bits of bytes 0-3 (scales) or 4-7 (mins) above it). */
static inline __attribute__((always_inline)) void q4_k_scales(const uint8_t *s, float out[16])
{
	uint32_t a = get_u32(s + 4), b = get_u32(s + 8), c = get_u32(s + 12);
	typedef uint32_t vu32x4 __attribute__((vector_size(16)));
	vu32x4 sm = { a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
		      ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u) };
	float d = qb_f16(s), dmin = qb_f16(s + 2);
	vf16 dm = { d, d, d, d, d, d, d, d, dmin, dmin, dmin, dmin, dmin, dmin, dmin, dmin };
	/* the four words as 16 bytes in order (a little-endian host, as
	 * lib/snapshot requires); exact: 11-bit halves times 6-bit integers */
	vf16 v = qb_u8_to_f((hsq_vu8x16)sm) * dm;
	memcpy(out, &v, sizeof v);
}

/* Block j of a Q4_K super-block: d * sc * q - dmin * m (dequant_q4_k: the
 * products are exact, so the same bits whether or not the multiply-add is
 * fused). */
static inline __attribute__((always_inline)) void q4_k_block(const uint8_t *s, int j, const float *sc, vf16 *lo,
							      vf16 *hi)
{
	const uint8_t *qs = s + 16 + 32 * (j / 2);
	int shift = j % 2 ? 4 : 0;
	float d = sc[j], m = sc[8 + j];
	*lo = u8_to_f(qs, shift, 15) * d - m;
	*hi = u8_to_f(qs + 16, shift, 15) * d - m;
}

/* Q6_K: out[i] = d * sc_i, one scale per 16 values (exact products). */
static inline __attribute__((always_inline)) void q6_k_scales(const uint8_t *s, float out[16])
{
	hsq_vi8x16 q;
	memcpy(&q, s + 192, 16);
	vf16 v = qb_i8_to_f(q) * qb_f16(s + 208);
	memcpy(out, &v, sizeof v);
}

/* Block j of a Q6_K super-block holds its values 32 j .. 32 j + 31, d * sc *
 * (q - 32) with q = 4 bits of ql | 2 bits of qh << 4 (dequant_q6_k). q - 32
 * is formed in bytes: the same float as the sum of the converted parts. */
static inline __attribute__((always_inline)) void q6_k_block(const uint8_t *s, int j, const float *sc, vf16 *lo,
							      vf16 *hi)
{
	int half = j / 4, g = j % 4;
	const uint8_t *ql = s + 64 * half + 32 * (g & 1), *qh = s + 128 + 32 * half;
	int shift = (g >> 1) * 4;
	hsq_vu8x16 l0, l1, h0, h1;
	memcpy(&l0, ql, 16);
	memcpy(&l1, ql + 16, 16);
	memcpy(&h0, qh, 16);
	memcpy(&h1, qh + 16, 16);
	hsq_vi8x16 q0 = (hsq_vi8x16)(((l0 >> shift) & 15) | ((h0 >> (2 * g)) & 3) << 4) - 32;
	hsq_vi8x16 q1 = (hsq_vi8x16)(((l1 >> shift) & 15) | ((h1 >> (2 * g)) & 3) << 4) - 32;
	*lo = qb_i8_to_f(q0) * sc[2 * j];
	*hi = qb_i8_to_f(q1) * sc[2 * j + 1];
}
#endif

/* A decode step (T = 1) streams each weight once from memory, with a few
 * instructions per block: without help the loads wait on memory, and
 * gemma-3's 178 MB Q8_0 output matrix read at 8 GB/s on one core of the
 * Zen 4 VM. Prefetching the bytes this far ahead in the rows (the next
 * tiles' rows, as rows are contiguous) keeps enough lines in flight: 28
 * GB/s (8 KiB ahead; 2 KiB gave 11). Prefetches change no result. */
#ifndef FUSED_PREFETCH
#define FUSED_PREFETCH 8192
#endif

static inline __attribute__((always_inline)) void
fused_tile(group_scales_fn scales, group_block_fn block, const int S, size_t group_bytes, const uint8_t *w,
	   size_t row_bytes, int R, const float *x, int ldx, int T, int n, float *y, int ldy)
{
	vf16 acc[8][4] = { { { 0 } } };
	for (int s = 0; s < n / (32 * S); s++) {
		float sc[4][16];
		if (scales)
#pragma GCC unroll 4
			for (int r = 0; r < R; r++)
				scales(w + (size_t)r * row_bytes + (size_t)s * group_bytes, sc[r]);
		/* unrolled so that the shifts of each block's bits are constants
		 * (a byte shift by a variable widens to words and back) */
#pragma GCC unroll 8
		for (int j = 0; j < S; j++) {
			int b = S * s + j;
			vf16 lo[4], hi[4];
#pragma GCC unroll 4
			for (int r = 0; r < R; r++) {
				const uint8_t *g = w + (size_t)r * row_bytes + (size_t)s * group_bytes;
				if (T == 1)
					__builtin_prefetch(g + (size_t)j * group_bytes / S + FUSED_PREFETCH);
				block(g, j, sc[r], &lo[r], &hi[r]);
			}
#pragma GCC unroll 8
			for (int t = 0; t < T; t++) {
				vf16 x0 = load16(x + (size_t)t * ldx + 32 * b), x1 = load16(x + (size_t)t * ldx + 32 * b + 16);
				REG_PIN(x0);
				REG_PIN(x1);
#pragma GCC unroll 4
				for (int r = 0; r < R; r++) {
					acc[t][r] += lo[r] * x0;
					acc[t][r] += hi[r] * x1;
				}
			}
		}
	}
#pragma GCC unroll 8
	for (int t = 0; t < T; t++)
#pragma GCC unroll 4
		for (int r = 0; r < R; r++)
			y[(size_t)t * ldy + r] = hsum16(acc[t][r]) + 0.0f;
}

#ifdef HSQ_CPU_AVX2
#define FUSED_TILE(decode, block_bytes, w, rb, R, x, ldx, T, n, y, ldy) \
	fused_tile8(qb8_##decode, block_bytes, w, rb, R, x, ldx, T, n, y, ldy)
#else
#define FUSED_TILE(decode, block_bytes, w, rb, R, x, ldx, T, n, y, ldy) \
	fused_tile(NULL, decode##_block, 1, block_bytes, w, rb, R, x, ldx, T, n, y, ldy)
#endif

/* Tile of the fused kernels, rows x tokens: its accumulators (R x T
 * 16-lane vectors) and decoded blocks must fit the vector registers.
 * AVX-512 has 32 of 16 lanes: 4 x 4, and 2 x 8 (below). With sixteen of
 * 8 lanes (AVX2) a 16-lane vector takes two: 1 row x 4 tokens (8 + 4
 * registers, one block decode per 16 multiply-adds). The shape never
 * changes a result. */
#ifdef HSQ_CPU_AVX2
#define FUSED_R 1
#define FUSED_T 4
#define FUSED_WIDE_CASES(decode, block_bytes)
#else
#define FUSED_R 4
#define FUSED_T 4
/* Fused batches of 8 tokens and more (8 to 15 since fused_for sends
 * larger ones to the scratch pass) go 2 rows x 8 tokens at a time: one
 * block decode per 16 multiply-adds instead of per 8, 16 accumulators
 * (bench/matmul, Q4_1 at 512 tokens when those were fused: 52-53 -> 57
 * GFLOP/s on a Zen 4, 53-56 -> 59-60 on a Xeon; 2 x 12 was slower). Only for rows of up to
 * 1024 columns: 8 tokens of 2048 columns are 64 KiB, more than L1 holds,
 * and the tile fell behind 4 x 4 there (Xeon, 640 x 2048: Q4_1 57 -> 45.5,
 * Q8_0 68 -> 46 GFLOP/s). */
#define FUSED_WIDE_R 2
#define FUSED_WIDE_T 8
#define FUSED_WIDE_MAX_COLS 1024
#define FUSED_WIDE_CASES(decode, block_bytes)                                                                  \
	case 2 * 16 + 8: FUSED_TILE(decode, block_bytes, w, rb, 2, x, ldx, 8, n, y, ldy); break;                \
	case 1 * 16 + 8: FUSED_TILE(decode, block_bytes, w, rb, 1, x, ldx, 8, n, y, ldy); break;
#endif

#define DEFINE_FUSED(name, decode, block_bytes)                                                              \
	static void name(const uint8_t *w, size_t rb, int R, const float *x, int ldx, int T, int n, float *y,   \
			 int ldy)                                                                               \
	{                                                                                                       \
		switch (R * 16 + T) {                                                                           \
		FUSED_WIDE_CASES(decode, block_bytes)                                                           \
		case 4 * 16 + 4: FUSED_TILE(decode, block_bytes, w, rb, 4, x, ldx, 4, n, y, ldy); break;        \
		case 4 * 16 + 1: FUSED_TILE(decode, block_bytes, w, rb, 4, x, ldx, 1, n, y, ldy); break;        \
		case 1 * 16 + 4: FUSED_TILE(decode, block_bytes, w, rb, 1, x, ldx, 4, n, y, ldy); break;        \
		default: /* R == 1, T == 1 */ FUSED_TILE(decode, block_bytes, w, rb, 1, x, ldx, 1, n, y, ldy);  \
		}                                                                                               \
	}

DEFINE_FUSED(fused_q4_0, q4_0, Q4_0_BYTES)
DEFINE_FUSED(fused_q4_1, q4_1, Q4_1_BYTES)
DEFINE_FUSED(fused_q5_0, q5_0, Q5_0_BYTES)
DEFINE_FUSED(fused_q8_0, q8_0, Q8_0_BYTES)
#ifndef HSQ_CPU_AVX2
/* The K-quants a super-block (8 blocks) at a time. */
#define DEFINE_FUSED_K(name, kind, sb_bytes)                                                                   \
	static void name(const uint8_t *w, size_t rb, int R, const float *x, int ldx, int T, int n, float *y,   \
			 int ldy)                                                                               \
	{                                                                                                       \
		switch (R * 16 + T) {                                                                           \
		case 4 * 16 + 4: fused_tile(kind##_scales, kind##_block, 8, sb_bytes, w, rb, 4, x, ldx, 4, n, y, ldy); break; \
		case 4 * 16 + 1: fused_tile(kind##_scales, kind##_block, 8, sb_bytes, w, rb, 4, x, ldx, 1, n, y, ldy); break; \
		case 1 * 16 + 4: fused_tile(kind##_scales, kind##_block, 8, sb_bytes, w, rb, 1, x, ldx, 4, n, y, ldy); break; \
		default: /* R == 1, T == 1 */                                                                  \
			fused_tile(kind##_scales, kind##_block, 8, sb_bytes, w, rb, 1, x, ldx, 1, n, y, ldy);   \
		}                                                                                               \
	}

DEFINE_FUSED_K(fused_q4_k, q4_k, Q4_K_BYTES)
DEFINE_FUSED_K(fused_q6_k, q6_k, Q6_K_BYTES)
#endif

typedef void (*fused_fn)(const uint8_t *w, size_t rb, int R, const float *x, int ldx, int T, int n, float *y, int ldy);

/* The fused kernel for a type, or NULL: dequantize each task's rows to
 * scratch once and tile them (the same sums either way). A fused kernel
 * decodes each block once per tile of tokens, the scratch pass once per
 * matmul, so from some batch size on the scratch pass wins: Q5_0, whose
 * fifth bits make the block decode dear, from 6 tokens (bench/matmul on
 * the AMD VM: 43 against 50 GFLOP/s at 512 tokens; one token 23 against
 * 9); Q4_0, Q4_1 and Q8_0 from 16 (on the Xeon, one thread: Q4_1 at 16
 * tokens 63-76 -> 79-112 GFLOP/s, at 512 tokens 58-63 -> 85-137; Q8_0 at
 * 16 tokens 67-76 -> 80-108; at 8 tokens neither wins everywhere). The
 * AVX2 kernels 9.4 against 5.8 for one Q5_0 token. */
static fused_fn fused_for(uint32_t type, int n_tok)
{
	switch (type) {
	case GGML_TYPE_Q4_0: return n_tok < 16 ? fused_q4_0 : NULL;
	case GGML_TYPE_Q4_1: return n_tok < 16 ? fused_q4_1 : NULL;
	case GGML_TYPE_Q5_0: return n_tok < 6 ? fused_q5_0 : NULL;
	case GGML_TYPE_Q8_0: return n_tok < 16 ? fused_q8_0 : NULL;
#ifndef HSQ_CPU_AVX2
	case GGML_TYPE_Q4_K: return n_tok < 6 ? fused_q4_k : NULL;
	case GGML_TYPE_Q6_K: return n_tok < 6 ? fused_q6_k : NULL;
#endif
	default: return NULL;
	}
}

/* Rows r0..r0+nr of a fused-type weight against every token. */
static void matmul_fused(const matmul_job *j, fused_fn fn, int r0, int nr)
{
	const hsq_weight *w = j->w;
	int n = (int)w->cols, ldy = (int)w->rows;
	const uint8_t *base = w->data + (size_t)r0 * w->row_bytes;
	int t = 0;
#ifdef FUSED_WIDE_T
	for (; n <= FUSED_WIDE_MAX_COLS && t + FUSED_WIDE_T <= j->n_tok; t += FUSED_WIDE_T) {
		int r = 0;
		for (; r + FUSED_WIDE_R <= nr; r += FUSED_WIDE_R)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, FUSED_WIDE_R, j->x + (size_t)t * n, n,
			   FUSED_WIDE_T, n, j->y + (size_t)t * ldy + r0 + r, ldy);
		for (; r < nr; r++)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, 1, j->x + (size_t)t * n, n, FUSED_WIDE_T, n,
			   j->y + (size_t)t * ldy + r0 + r, ldy);
	}
#endif
	for (; t + FUSED_T <= j->n_tok; t += FUSED_T) {
		int r = 0;
		for (; r + FUSED_R <= nr; r += FUSED_R)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, FUSED_R, j->x + (size_t)t * n, n, FUSED_T, n,
			   j->y + (size_t)t * ldy + r0 + r, ldy);
		for (; r < nr; r++)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, 1, j->x + (size_t)t * n, n, FUSED_T, n,
			   j->y + (size_t)t * ldy + r0 + r, ldy);
	}
	for (; t < j->n_tok; t++) {
		int r = 0;
		for (; r + FUSED_R <= nr; r += FUSED_R)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, FUSED_R, j->x + (size_t)t * n, n, 1, n,
			   j->y + (size_t)t * ldy + r0 + r, ldy);
		for (; r < nr; r++)
			fn(base + (size_t)r * w->row_bytes, w->row_bytes, 1, j->x + (size_t)t * n, n, 1, n,
			   j->y + (size_t)t * ldy + r0 + r, ldy);
	}
}

static void matmul_task(void *arg, int task, int thread)
{
	const matmul_job *j = arg;
	const hsq_weight *w = j->w;
	int n = (int)w->cols;
	int r0 = task * j->task_rows;
	int nr = (int)w->rows - r0 < j->task_rows ? (int)w->rows - r0 : j->task_rows;
	fused_fn fn = fused_for(w->type, j->n_tok);
	if (fn) {
		matmul_fused(j, fn, r0, nr);
		return;
	}
	float *wbuf;
	if (w->type == GGML_TYPE_F32) { /* use the rows in place */
		wbuf = (float *)(w->data + (size_t)r0 * w->row_bytes);
	} else {
		wbuf = j->scratch + (size_t)thread * ROWS_PER_TASK * n;
		for (int r = 0; r < nr; r++)
			dequant_row(w->type, w->data + (size_t)(r0 + r) * w->row_bytes, wbuf + (size_t)r * n, n);
	}
	int ldy = (int)w->rows;
	int t = 0;
#ifndef HSQ_CPU_AVX2
	for (; t + 6 <= j->n_tok; t += 6) {
		int r = 0;
		for (; r + 4 <= nr; r += 4)
			tile_4x6(wbuf + (size_t)r * n, n, j->x + (size_t)t * n, n, n, j->y + (size_t)t * ldy + r0 + r, ldy);
		for (; r < nr; r++)
			for (int tt = t; tt < t + 6; tt++)
				j->y[(size_t)tt * ldy + r0 + r] = dot_f32(wbuf + (size_t)r * n, j->x + (size_t)tt * n, n);
	}
#endif
	for (; t + 4 <= j->n_tok; t += 4) {
		int r = 0;
		for (; r + 4 <= nr; r += 4)
			tile_4x4(wbuf + (size_t)r * n, n, j->x + (size_t)t * n, n, n, j->y + (size_t)t * ldy + r0 + r, ldy);
		for (; r < nr; r++)
			for (int tt = t; tt < t + 4; tt++)
				j->y[(size_t)tt * ldy + r0 + r] = dot_f32(wbuf + (size_t)r * n, j->x + (size_t)tt * n, n);
	}
	for (; t < j->n_tok; t++) {
		int r = 0;
		for (; r + 4 <= nr; r += 4)
			tile_4x1(wbuf + (size_t)r * n, n, j->x + (size_t)t * n, n, j->y + (size_t)t * ldy + r0 + r);
		for (; r < nr; r++)
			j->y[(size_t)t * ldy + r0 + r] = dot_f32(wbuf + (size_t)r * n, j->x + (size_t)t * n, n);
	}
}

static void cpu_matmul(hsq_backend *be, const hsq_weight *w, const float *x, int n_tok, float *y)
{
	cpu_backend *cb = (cpu_backend *)be;
	matmul_job j = { w, x, n_tok, y, cb->scratch, ROWS_PER_TASK };
	/* The fused kernels need no scratch, so their tasks can be longer:
	 * 32 per thread. gemma-3's output matrix in tasks of 16 rows was
	 * 16,384 tasks, each a trip of the shared task counter between the
	 * cores. A row's sums do not depend on its task. */
	if (fused_for(w->type, n_tok)) {
		int per = (int)(w->rows / ((size_t)pool_threads(cb->pool) * 32));
		j.task_rows = per > ROWS_PER_TASK ? per / ROWS_PER_TASK * ROWS_PER_TASK : ROWS_PER_TASK;
	}
	int n_tasks = (int)((w->rows + (size_t)j.task_rows - 1) / (size_t)j.task_rows);
	pool_run(cb->pool, n_tasks, matmul_task, &j);
}

static void cpu_embed(hsq_backend *be, const hsq_weight *table, const hsq_token *tokens, int n_tok, float *x)
{
	for (int t = 0; t < n_tok; t++)
		dequant_row(table->type, table->data + (size_t)tokens[t] * table->row_bytes, x + (size_t)t * table->cols,
			    table->cols);
}

static void cpu_rmsnorm(hsq_backend *be, const float *x, const float *weight, int n_tok, int n, float eps, float *y)
{
	for (int t = 0; t < n_tok; t++) {
		const float *xr = x + (size_t)t * n;
		float *yr = y + (size_t)t * n;
		float ss = dot_f32(xr, xr, n);
		float scale = 1.0f / sqrtf(ss / (float)n + eps);
		for (int i = 0; i < n; i++)
			yr[i] = xr[i] * scale * weight[i];
	}
}

typedef struct rope_job {
	float *x;
	const int *pos;
	int n_tok, n_heads, head_dim, neox;
	float freq_base;
	float *cs; /* the table to read, or to fill when fill; NULL: compute in place */
	int fill;
} rope_job;

#define ROPE_TASK_TOKENS 32 /* tokens per RoPE task */

/* Tokens are independent: the split over the threads changes no bit. */
static void rope_task(void *arg, int task, int thread)
{
	const rope_job *r = arg;
	int half = r->head_dim / 2, t0 = task * ROPE_TASK_TOKENS;
	int t1 = r->n_tok - t0 < ROPE_TASK_TOKENS ? r->n_tok : t0 + ROPE_TASK_TOKENS;
	for (int t = t0; t < t1; t++) {
		float *cs = r->cs ? r->cs + (size_t)t * half * 2 : NULL;
		for (int i = 0; i < half; i++) {
			float c, s;
			if (cs && !r->fill) {
				c = cs[2 * i];
				s = cs[2 * i + 1];
			} else {
				/* theta_i = pos * base^(-2i/d), in double so long positions keep precision */
				double theta = (double)r->pos[t] * pow((double)r->freq_base, -2.0 * i / r->head_dim);
				c = (float)cos(theta);
				s = (float)sin(theta);
				if (cs) {
					cs[2 * i] = c;
					cs[2 * i + 1] = s;
				}
			}
			int i0 = r->neox ? i : 2 * i, i1 = r->neox ? i + half : 2 * i + 1;
			for (int h = 0; h < r->n_heads; h++) {
				float *v = r->x + ((size_t)t * r->n_heads + h) * r->head_dim;
				float a = v[i0], b = v[i1];
				v[i0] = a * c - b * s;
				v[i1] = a * s + b * c;
			}
		}
	}
	(void)thread;
}

/* The table holding these angles, or the least recently used one made
 * ready to be filled (*fill = 1); NULL without memory for it (the angles
 * are then computed in place: the same floats). */
static rope_angles *rope_angles_for(cpu_backend *cb, const int *pos, int n_tok, int head_dim, float freq_base,
				  int *fill)
{
	rope_angles *lru = &cb->rope[0];
	cb->rope_clock++;
	for (int i = 0; i < ROPE_TABLES; i++) {
		rope_angles *tb = &cb->rope[i];
		if (n_tok > 0 && tb->n_tok == n_tok && tb->head_dim == head_dim && tb->freq_base == freq_base &&
		    memcmp(tb->pos, pos, (size_t)n_tok * sizeof *pos) == 0) {
			tb->used = cb->rope_clock;
			*fill = 0;
			return tb;
		}
		if (tb->used < lru->used)
			lru = tb;
	}
	size_t need = (size_t)n_tok * (size_t)(head_dim / 2) * 2;
	if (need > lru->cap_cs || (size_t)n_tok > lru->cap_pos) {
		free(lru->cs);
		free(lru->pos);
		lru->cs = malloc(need * sizeof *lru->cs);
		lru->pos = malloc((size_t)n_tok * sizeof *lru->pos);
		if (!lru->cs || !lru->pos) {
			free(lru->cs);
			free(lru->pos);
			*lru = (rope_angles){ 0 };
			return NULL;
		}
		lru->cap_cs = need;
		lru->cap_pos = (size_t)n_tok;
	}
	memcpy(lru->pos, pos, (size_t)n_tok * sizeof *pos);
	lru->n_tok = n_tok;
	lru->head_dim = head_dim;
	lru->freq_base = freq_base;
	lru->used = cb->rope_clock;
	*fill = 1;
	return lru;
}

static void cpu_rope(hsq_backend *be, float *x, const int *pos, int n_tok, int n_heads, int head_dim, float freq_base,
		     int neox)
{
	cpu_backend *cb = (cpu_backend *)be;
	int fill = 0;
	rope_angles *tb = rope_angles_for(cb, pos, n_tok, head_dim, freq_base, &fill);
	rope_job r = { x, pos, n_tok, n_heads, head_dim, neox, freq_base, tb ? tb->cs : NULL, fill };
	pool_run(cb->pool, (n_tok + ROPE_TASK_TOKENS - 1) / ROPE_TASK_TOKENS, rope_task, &r);
}

typedef struct attn_job {
	cpu_backend *cb;
	const float *q;
	const uint16_t *k, *v;  /* fp16 caches of cap rows */
	int cap;
	const int *pos;
	int n_tok, n_head, n_head_kv, head_dim, window;
	float scale;
	float *out;
	int tok_block;          /* tokens per blocked task (attn_block_task) */
} attn_job;

/* Scores to attention weights, in place: s[p] = exp(s[p] * scale - max) *
 * (1 / sum). Every step is elementwise or a fixed order over the row (the
 * max exactly; the sum in 16 lanes, hsum16, then the tail), so the weights
 * of a row depend on the row alone, whichever batch it came in. */
static void softmax_weights(float *s, int n, float scale)
{
	vf16 sum16 = { 0 }, mx16 = sum16 - INFINITY;
	float mx = -INFINITY, sum;
	int p = 0;
	for (; p + 16 <= n; p += 16) { /* the max of the scaled scores, read only */
		vf16 x = load16(s + p) * scale;
		vi16 gt = x > mx16;
		mx16 = (vf16)((gt & (vi16)x) | (~gt & (vi16)mx16));
	}
	for (int i = 0; i < 16; i++)
		mx = mx16[i] > mx ? mx16[i] : mx;
	for (; p < n; p++)
		mx = s[p] * scale > mx ? s[p] * scale : mx;
	for (p = 0; p + 16 <= n; p += 16) {
		vf16 x = vexp16(load16(s + p) * scale - mx);
		memcpy(s + p, &x, sizeof x);
		sum16 += x;
	}
	sum = hsum16(sum16);
	for (; p < n; p++) {
		s[p] = expf_softmax(s[p] * scale - mx);
		sum += s[p];
	}
	float inv = 1.0f / sum;
	for (p = 0; p + 16 <= n; p += 16) {
		vf16 x = load16(s + p) * inv;
		memcpy(s + p, &x, sizeof x);
	}
	for (; p < n; p++)
		s[p] *= inv;
}

/* One (token, head) pair: scores over positions 0..pos, softmax, weighted
 * sum of values, each in a fixed sequential order over positions. Scores
 * use the dot_f32 order, so results do not depend on the batch. */
static void attn_task(void *arg, int task, int thread)
{
	const attn_job *j = arg;
	int hd = j->head_dim, t = task / j->n_head, h = task % j->n_head;
	int g = h / (j->n_head / j->n_head_kv);
	size_t kvw = (size_t)j->n_head_kv * hd;
	const float *q = j->q + ((size_t)t * j->n_head + h) * hd;
	const uint16_t *kb = j->k + (size_t)g * hd, *vb = j->v + (size_t)g * hd;
	float *out = j->out + ((size_t)t * j->n_head + h) * hd;
	float *s = j->cb->scores + (size_t)thread * ATTN_MAXQ * j->cb->n_ctx;
	int first = j->window && j->pos[t] + 1 > j->window ? j->pos[t] + 1 - j->window : 0;
	int n = j->pos[t] + 1 - first, cap = j->cap;
	/* Positions first..pos[t] are rows (first + p) % cap: at most two
	 * contiguous runs of the ring. */
	int r0 = first % cap, run = cap - r0 < n ? cap - r0 : n;
	int p = 0;
	for (; p + 4 <= run; p += 4) /* 4 keys at once: same order as dot_f32 */
		tile_4x1h(kb + (r0 + p) * kvw, (int)kvw, q, hd, s + p);
	for (; p < run; p++)
		s[p] = dot_h(q, kb + (r0 + p) * kvw, hd);
	for (; p + 4 <= n; p += 4)
		tile_4x1h(kb + (p - run) * kvw, (int)kvw, q, hd, s + p);
	for (; p < n; p++)
		s[p] = dot_h(q, kb + (p - run) * kvw, hd);
	softmax_weights(s, n, j->scale);
	int d0 = 0;
#ifdef HSQ_CPU_AVX2
	if (run == n) /* one contiguous run of rows: the blocked task's kernel */
		d0 = attn_values8(vb + (size_t)r0 * kvw, kvw, hd, &s, &n, &out, 1, n, n, 0, n, 1);
#endif
	/* 16-lane blocks of the output accumulate in registers over positions */
	for (; d0 + 16 <= hd; d0 += 16) {
		vf16 acc = { 0 };
		for (p = 0; p < n; p++) {
			size_t row = p < run ? (size_t)(r0 + p) : (size_t)(p - run);
			acc += s[p] * load16_h(vb + row * kvw + d0);
		}
		memcpy(out + d0, &acc, sizeof acc);
	}
	for (int d = d0; d < hd; d++) {
		float o = 0.0f;
		for (p = 0; p < n; p++) {
			size_t row = p < run ? (size_t)(r0 + p) : (size_t)(p - run);
			o += s[p] * hsq_f16_to_f32(vb[row * kvw + d]);
		}
		out[d] = o;
	}
}

/* out[i] = sum over p < n[i] of w[i][p] * v_p for Q queries (Q = 1, 4 or
 * ATTN_VALUES_Q, a constant after inlining, so the accumulators stay in
 * registers) sharing one load of each value row; each query's sum in
 * position order. One call adds the rows p0 <= p < p1 (first: the call
 * with p0 = 0, which starts the sums); between calls a sum waits in
 * out[i], stored and reloaded exactly, so a run of calls over consecutive
 * ranges gives the bits of one call over them all. */
static inline __attribute__((always_inline)) void attn_values(const uint16_t *vb, size_t kvw, int hd,
							      float *const *w, const int *n, float *const *out,
							      const int Q, int p0, int p1, int first)
{
	int n_min = n[0], n_max = n[0];
	for (int i = 1; i < Q; i++) {
		n_min = n[i] < n_min ? n[i] : n_min;
		n_max = n[i] > n_max ? n[i] : n_max;
	}
	int lo = n_min < p1 ? n_min : p1, hi = n_max < p1 ? n_max : p1;
	int d0 = 0;
#ifdef HSQ_CPU_AVX2
	d0 = attn_values8(vb, kvw, hd, w, n, out, Q, n_min, n_max, p0, p1, first);
#endif
	for (; d0 + 16 <= hd; d0 += 16) {
		vf16 acc[ATTN_VALUES_Q] = { { 0 } };
		if (!first)
			for (int i = 0; i < Q; i++)
				acc[i] = load16(out[i] + d0);
		int p = p0;
		for (; p < lo; p++) {
			vf16 v = load16_h(vb + (size_t)p * kvw + d0);
#pragma GCC unroll 8
			for (int i = 0; i < Q; i++)
				acc[i] += w[i][p] * v;
		}
		for (; p < hi; p++) {
			vf16 v = load16_h(vb + (size_t)p * kvw + d0);
#pragma GCC unroll 8
			for (int i = 0; i < Q; i++)
				if (p < n[i])
					acc[i] += w[i][p] * v;
		}
		for (int i = 0; i < Q; i++)
			memcpy(out[i] + d0, &acc[i], sizeof acc[i]);
	}
	for (int i = 0; i < Q; i++)
		for (int d = d0; d < hd; d++) {
			float o = first ? 0.0f : out[i][d];
			for (int p = p0; p < n[i] && p < p1; p++)
				o += w[i][p] * hsq_f16_to_f32(vb[(size_t)p * kvw + d]);
			out[i][d] = o;
		}
}

/* Scores of Q queries (Q = rep, at most ATTN_MAXQ) against the rows
 * p0..p1-1 of the keys at kb (row r at kb + r * kvw) into s[i][o + p - p0]:
 * 4 keys x 4 queries at a time, then 4 keys x 1 query, then one key at a
 * time, as attn_task does for each query (tile_4x4q equals tile_4x1 and
 * dot_f32 bit for bit). */
static void heads_scores(const uint16_t *kb, size_t kvw, int hd, const float *const *q, int Q, int p0, int p1,
			 float *const *s, int o)
{
	int p = p0;
	for (; p + 4 <= p1; p += 4) {
		const uint16_t *k4 = kb + (size_t)p * kvw;
		int i = 0;
		for (; i + 4 <= Q; i += 4) {
			float *s4[4] = { s[i] + o + p - p0, s[i + 1] + o + p - p0, s[i + 2] + o + p - p0,
					 s[i + 3] + o + p - p0 };
			tile_4x4q(k4, (int)kvw, q + i, hd, s4);
		}
		for (; i < Q; i++)
			tile_4x1h(k4, (int)kvw, q[i], hd, s[i] + o + p - p0);
	}
	for (; p < p1; p++)
		for (int i = 0; i < Q; i++)
			s[i][o + p - p0] = dot_h(q[i], kb + (size_t)p * kvw, hd);
}

/* Sliding-window layers in a batch: the query heads that share a KV head
 * see the same window of one token, the same rows of the ring, so one
 * task per (token, KV head) scores them 4 at a time and sums the values
 * 4 (or ATTN_VALUES_Q) at a time, each value row loaded once for all of
 * them where attn_task loads it once per head. Each query's sums run in
 * attn_task's order over the one or two runs of the ring, so the results
 * are attn_task's bit for bit (test_forward,
 * window_attention_is_batch_invariant). */
static void attn_heads_task(void *arg, int task, int thread)
{
	const attn_job *j = arg;
	int hd = j->head_dim, rep = j->n_head / j->n_head_kv;
	int t = task / j->n_head_kv, g = task % j->n_head_kv;
	size_t kvw = (size_t)j->n_head_kv * hd;
	const uint16_t *kb = j->k + (size_t)g * hd, *vb = j->v + (size_t)g * hd;
	const float *q[ATTN_MAXQ] = { 0 };
	float *out[ATTN_MAXQ] = { 0 }, *s[ATTN_MAXQ] = { 0 }, *s2[ATTN_MAXQ] = { 0 };
	int first = j->window && j->pos[t] + 1 > j->window ? j->pos[t] + 1 - j->window : 0;
	int n = j->pos[t] + 1 - first, cap = j->cap;
	int r0 = first % cap, run = cap - r0 < n ? cap - r0 : n;
	int nn[ATTN_MAXQ], n2[ATTN_MAXQ];
	for (int i = 0; i < rep; i++) {
		size_t at = ((size_t)t * j->n_head + (size_t)g * rep + i) * hd;
		q[i] = j->q + at;
		out[i] = j->out + at;
		s[i] = j->cb->scores + ((size_t)thread * ATTN_MAXQ + i) * j->cb->n_ctx;
		s2[i] = s[i] + run;
		nn[i] = run;
		n2[i] = n - run;
	}
	/* positions first..pos[t]: rows r0..r0+run-1, then 0..n-run-1 */
	heads_scores(kb, kvw, hd, q, rep, r0, r0 + run, s, 0);
	heads_scores(kb, kvw, hd, q, rep, 0, n - run, s, run);
	for (int i = 0; i < rep; i++)
		softmax_weights(s[i], n, j->scale);
	for (int part = 0; part < 2; part++) {
		const uint16_t *rows = part ? vb : vb + (size_t)r0 * kvw;
		float *const *w = part ? s2 : s;
		const int *np = part ? n2 : nn;
		int len = part ? n - run : run;
		if (part && len == 0)
			break;
		int i = 0;
#if ATTN_VALUES_Q == 8
		for (; i + 8 <= rep; i += 8)
			attn_values(rows, kvw, hd, w + i, np + i, out + i, 8, 0, len, !part);
#endif
		for (; i + 4 <= rep; i += 4)
			attn_values(rows, kvw, hd, w + i, np + i, out + i, 4, 0, len, !part);
		for (; i < rep; i++)
			attn_values(rows, kvw, hd, w + i, np + i, out + i, 1, 0, len, !part);
	}
}

/* The same attention for a block of tokens and one KV head, in global
 * layers (positions 0..pos[t] are rows 0..pos[t]): each key row is loaded
 * once for all the block's queries (its tokens times the query heads
 * sharing the KV head) and each value row once per 4 of them, where
 * attn_task loads both once per query; at long context that stream of K
 * and V from memory was most of a prefill. Every query's sums run in
 * attn_task's order, so the results are bit-identical to it (test_forward,
 * blocked_attention_is_batch_invariant). */
static void attn_block_task(void *arg, int task, int thread)
{
	const attn_job *j = arg;
	int hd = j->head_dim, rep = j->n_head / j->n_head_kv;
	int n_blocks = (j->n_tok + j->tok_block - 1) / j->tok_block;
	int g = task / n_blocks, t0 = (task % n_blocks) * j->tok_block;
	int t1 = t0 + j->tok_block < j->n_tok ? t0 + j->tok_block : j->n_tok;
	size_t kvw = (size_t)j->n_head_kv * hd;
	const uint16_t *kb = j->k + (size_t)g * hd, *vb = j->v + (size_t)g * hd;
	const float *q[ATTN_MAXQ];
	float *out[ATTN_MAXQ], *s[ATTN_MAXQ];
	int n[ATTN_MAXQ], m = 0, n_min = j->cb->n_ctx, n_max = 0;
	for (int t = t0; t < t1; t++)
		for (int r = 0; r < rep; r++, m++) {
			size_t at = ((size_t)t * j->n_head + (size_t)g * rep + r) * hd;
			q[m] = j->q + at;
			out[m] = j->out + at;
			s[m] = j->cb->scores + ((size_t)thread * ATTN_MAXQ + m) * j->cb->n_ctx;
			n[m] = j->pos[t] + 1;
			n_min = n[m] < n_min ? n[m] : n_min;
			n_max = n[m] > n_max ? n[m] : n_max;
		}
	/* scores: 4 keys at a time for every query that reaches all 4 (4
	 * queries at a time while all do), then each query's last n % 4 keys
	 * one by one, as attn_task does */
	for (int p = 0; p + 4 <= n_max; p += 4) {
		const uint16_t *k4 = kb + (size_t)p * kvw;
		int i = 0;
		if (p + 4 <= n_min)
			for (; i + 4 <= m; i += 4) {
				float *s4[4] = { s[i] + p, s[i + 1] + p, s[i + 2] + p, s[i + 3] + p };
				tile_4x4q(k4, (int)kvw, q + i, hd, s4);
			}
		for (; i < m; i++)
			if (p + 4 <= n[i])
				tile_4x1h(k4, (int)kvw, q[i], hd, s[i] + p);
	}
	for (int i = 0; i < m; i++) {
		for (int p = n[i] - n[i] % 4; p < n[i]; p++)
			s[i][p] = dot_h(q[i], kb + (size_t)p * kvw, hd);
		softmax_weights(s[i], n[i], j->scale);
	}
	/* values: ATTN_VALUES_Q queries at a time, then 4, then one by one,
	 * over a chunk of rows that stays in L2 while every group passes over
	 * it (the V stream from the last-level cache once per task, not once
	 * per group); the sums carry over between chunks in out */
	int chunk = ATTN_VCHUNK_BYTES / (hd * (int)sizeof *vb);
	chunk = chunk < 16 ? 16 : chunk;
	for (int p0 = 0; p0 < n_max; p0 += chunk) {
		int p1 = n_max - p0 < chunk ? n_max : p0 + chunk, first = p0 == 0;
		int i = 0;
#if ATTN_VALUES_Q == 8
		for (; i + 8 <= m; i += 8)
			attn_values(vb, kvw, hd, s + i, n + i, out + i, 8, p0, p1, first);
#endif
		for (; i + 4 <= m; i += 4)
			attn_values(vb, kvw, hd, s + i, n + i, out + i, 4, p0, p1, first);
		for (; i < m; i++)
			attn_values(vb, kvw, hd, s + i, n + i, out + i, 1, p0, p1, first);
	}
}

/* Decode: one token, every head. attn_task's per-head tasks read each
 * key and value row once per query head sharing it (3 in SmolLM2, 4 in
 * gemma-3) and the values once per 16 of their columns, and 9 tasks (or
 * 4) do not spread evenly over the threads; at 8K that was two thirds of
 * a decode step (perf, docs/perf.md). Three regions instead: scores of a
 * KV head's query heads over a chunk of positions (each key row loaded
 * once for all of them), softmax per query head, then the values of a KV
 * head's query heads over one block of DEC_VALUE_COLS columns (each value
 * line loaded once). Every score is one dot product in the dot_f32 order, the softmax
 * is softmax_weights, and every output lane sums its rows in position
 * order as attn_task does, so the bits are attn_task's
 * (test_forward: decode equals the batch). */
#define DEC_SCORE_CHUNK 256 /* positions per score task */
/* Columns per value task: 32 fp16 values are one 64-byte line of a row,
 * which 16-column tasks read half of each (every line came from memory
 * twice); on AVX2, 2 x 8 queries' accumulators of 32 lanes would not fit
 * its 16 registers. */
#ifdef HSQ_CPU_AVX2
#define DEC_VALUE_COLS 16
#else
#define DEC_VALUE_COLS 32
#endif

typedef struct dec_job {
	const attn_job *j;
	float *s;      /* [n_head][n_ctx] scores, then weights */
	int first, n;  /* the token's positions first..first+n-1 */
	int r0, run;   /* ring: positions first.. are rows r0..r0+run-1, then 0.. */
	int n_chunks;  /* score tasks per KV head */
	int n_dblk;    /* value tasks per KV head: blocks of cols columns, + 1 for a tail */
	int cols;      /* DEC_VALUE_COLS, or 64 for rows of 128 columns and more */
} dec_job;

static inline size_t dec_row(const dec_job *d, int p)
{
	return p < d->run ? (size_t)(d->r0 + p) : (size_t)(p - d->run);
}

static void dec_scores_task(void *arg, int task, int thread)
{
	const dec_job *d = arg;
	const attn_job *j = d->j;
	int hd = j->head_dim, rep = j->n_head / j->n_head_kv;
	/* chunk-major: the threads score the KV heads of neighbouring rows of
	 * the ring at once (head after head, each pass read a third of every
	 * row, and SmolLM2's 8K full decode ran 10% slower) */
	int g = task % j->n_head_kv, p0 = task / j->n_head_kv * DEC_SCORE_CHUNK;
	int p1 = p0 + DEC_SCORE_CHUNK < d->n ? p0 + DEC_SCORE_CHUNK : d->n;
	size_t kvw = (size_t)j->n_head_kv * hd;
	const uint16_t *kb = j->k + (size_t)g * hd;
	const float *q[ATTN_MAXQ];
	float *s[ATTN_MAXQ];
	float *spare = j->cb->scores + (size_t)thread * ATTN_MAXQ * j->cb->n_ctx;
	for (int i0 = 0; i0 < rep; i0 += ATTN_MAXQ) {
		int Q = rep - i0 < ATTN_MAXQ ? rep - i0 : ATTN_MAXQ;
		for (int i = 0; i < Q; i++) {
			q[i] = j->q + ((size_t)g * rep + i0 + i) * hd;
			s[i] = d->s + ((size_t)g * rep + i0 + i) * j->cb->n_ctx;
		}
		/* up to a multiple of 4 queries, the extra ones a repeat of the
		 * last into this thread's spare scores: heads_scores then takes
		 * every key 4 x 4 (tile_4x4q, whose reductions are a quarter of
		 * tile_4x1's), and the real scores are the same bits */
		for (; Q % 4 && Q < ATTN_MAXQ; Q++) {
			q[Q] = q[Q - 1];
			s[Q] = spare;
		}
		/* the chunk's positions as runs of consecutive rows */
		int p = p0;
		while (p < p1) {
			int end = p < d->run ? (d->run < p1 ? d->run : p1) : p1;
			size_t r = dec_row(d, p);
			heads_scores(kb, kvw, hd, q, Q, (int)r, (int)r + end - p, s, p);
			p = end;
		}
	}
}

static void dec_softmax_task(void *arg, int task, int thread)
{
	const dec_job *d = arg;
	softmax_weights(d->s + (size_t)task * d->j->cb->n_ctx, d->n, d->j->scale);
}

/* out[i][d0..d0+16 NB-1] = sum over positions p in order of w[i][p] v_p
 * for Q query heads (Q and NB constants after inlining: the accumulators
 * stay in registers). */
static inline __attribute__((always_inline)) void dec_values_blk(const dec_job *d, const uint16_t *vb, size_t kvw,
								 int d0, float *const *w, float *const *out, const int Q,
								 const int NB)
{
	vf16 acc[8][4] = { { { 0 } } };
	for (int p = 0; p < d->n; p++) {
		const uint16_t *row = vb + dec_row(d, p) * kvw + d0;
		vf16 v[4];
#pragma GCC unroll 4
		for (int b = 0; b < NB; b++)
			v[b] = load16_h(row + 16 * b);
#pragma GCC unroll 8
		for (int i = 0; i < Q; i++)
#pragma GCC unroll 4
			for (int b = 0; b < NB; b++)
				acc[i][b] += w[i][p] * v[b];
	}
	for (int i = 0; i < Q; i++)
		for (int b = 0; b < NB; b++)
			memcpy(out[i] + d0 + 16 * b, &acc[i][b], sizeof acc[i][b]);
}

static void dec_values_task(void *arg, int task, int thread)
{
	const dec_job *d = arg;
	const attn_job *j = d->j;
	int hd = j->head_dim, rep = j->n_head / j->n_head_kv;
	int g = task % j->n_head_kv, blk = task / j->n_head_kv; /* block-major, as the scores */
	size_t kvw = (size_t)j->n_head_kv * hd;
	const uint16_t *vb = j->v + (size_t)g * hd;
	float *w[8], *out[8];
	for (int i0 = 0; i0 < rep; i0 += 8) {
		int Q = rep - i0 < 8 ? rep - i0 : 8;
		for (int i = 0; i < Q; i++) {
			w[i] = d->s + ((size_t)g * rep + i0 + i) * j->cb->n_ctx;
			out[i] = j->out + ((size_t)g * rep + i0 + i) * hd;
		}
		int d0 = blk * d->cols, d1 = hd - d0 < d->cols ? hd : d0 + d->cols;
		int nb = (d1 - d0) / 16; /* 16-lane blocks; the columns past the last one below */
		for (int i = 0; i < Q; i++)
			for (int c = d0 + 16 * nb; c < d1; c++) {
				float o = 0.0f;
				for (int p = 0; p < d->n; p++)
					o += w[i][p] * hsq_f16_to_f32(vb[dec_row(d, p) * kvw + c]);
				out[i][c] = o;
			}
		/* 64 columns at once for up to 4 queries (16 accumulators), else
		 * 32 and 16: each column sums its rows in the same order */
		for (int c0 = d0, step = 16; c0 + 16 <= d0 + 16 * nb; c0 += step) {
			int left = d0 + 16 * nb - c0;
#define DEC_VALUES_Q(q)                                                                    \
	case q:                                                                            \
		if (q <= 4 && left >= 64) {                                                \
			dec_values_blk(d, vb, kvw, c0, w, out, q, q <= 4 ? 4 : 2); /* 4 for q <= 4 only */ \
			step = 64;                                                         \
		} else if (left >= 32) {                                                   \
			dec_values_blk(d, vb, kvw, c0, w, out, q, 2);                      \
			step = 32;                                                         \
		} else {                                                                   \
			dec_values_blk(d, vb, kvw, c0, w, out, q, 1);                      \
			step = 16;                                                         \
		}                                                                          \
		break
			switch (Q) {
				DEC_VALUES_Q(1);
				DEC_VALUES_Q(2);
				DEC_VALUES_Q(3);
				DEC_VALUES_Q(4);
				DEC_VALUES_Q(5);
				DEC_VALUES_Q(6);
				DEC_VALUES_Q(7);
				DEC_VALUES_Q(8);
			}
#undef DEC_VALUES_Q
		}
	}
}

static void attn_decode(cpu_backend *cb, const attn_job *j)
{
	dec_job d = { .j = j, .s = cb->dec_scores };
	d.first = j->window && j->pos[0] + 1 > j->window ? j->pos[0] + 1 - j->window : 0;
	d.n = j->pos[0] + 1 - d.first;
	d.r0 = d.first % j->cap;
	d.run = j->cap - d.r0 < d.n ? j->cap - d.r0 : d.n;
	d.n_chunks = (d.n + DEC_SCORE_CHUNK - 1) / DEC_SCORE_CHUNK;
#ifdef HSQ_CPU_AVX2
	d.cols = DEC_VALUE_COLS;
#else /* two lines of a row side by side: gemma-3's 256 columns in 4 tasks, not 8 */
	d.cols = j->head_dim >= 128 && j->n_head / j->n_head_kv <= 4 ? 64 : DEC_VALUE_COLS;
#endif
	d.n_dblk = (j->head_dim + d.cols - 1) / d.cols;
	pool_run(cb->pool, j->n_head_kv * d.n_chunks, dec_scores_task, &d);
	pool_run(cb->pool, j->n_head, dec_softmax_task, &d);
	pool_run(cb->pool, j->n_head_kv * d.n_dblk, dec_values_task, &d);
}

static void cpu_attention(hsq_backend *be, const float *q, const uint16_t *k_cache, const uint16_t *v_cache, int cap,
			  const int *pos, int n_tok, int n_head, int n_head_kv, int head_dim, int window, float scale,
			  float *out)
{
	cpu_backend *cb = (cpu_backend *)be;
	int rep = n_head / n_head_kv, tok_block = rep <= ATTN_MAXQ ? ATTN_MAXQ / rep : 0;
	attn_job j = { cb, q, k_cache, v_cache, cap, pos, n_tok, n_head, n_head_kv, head_dim, window, scale, out,
		       tok_block };
	/* blocked where it pays and its layout holds: a global layer whose rows
	 * are positions, and tokens enough to share each row among several */
	int blocked = !window && tok_block >= 2 && n_tok >= 2;
	for (int t = 0; blocked && t < n_tok; t++)
		blocked = pos[t] >= 0 && pos[t] < cap && pos[t] < cb->n_ctx;
	/* a sliding-window layer's batch: the heads of a KV head together (one
	 * token alone, decode, keeps attn_task: the same bits, and its tasks
	 * spread over more threads) */
	int heads = window && n_tok >= 2 && rep >= 2 && rep <= ATTN_MAXQ;
	if (n_tok == 1 && cb->dec_scores && pos[0] >= 0 && pos[0] < cb->n_ctx)
		attn_decode(cb, &j);
	else if (blocked)
		pool_run(cb->pool, n_head_kv * ((n_tok + tok_block - 1) / tok_block), attn_block_task, &j);
	else if (heads)
		pool_run(cb->pool, n_tok * n_head_kv, attn_heads_task, &j);
	else
		pool_run(cb->pool, n_tok * n_head, attn_task, &j);
}

/* The gated activations run over n_tok x n_ff values with a libm call
 * each (expf, tanhf): on the calling thread alone they were a fifth of
 * gemma-3's prefill, the other core idle (perf). Each value is computed
 * alone, so the split over the threads changes no bit. */
#define ACT_CHUNK 4096 /* values per task */

typedef void (*act_range_fn)(float *gate, const float *up, size_t i0, size_t i1);

typedef struct act_job {
	act_range_fn range;
	float *gate;
	const float *up;
	size_t n;
} act_job;

static void swiglu_range(float *gate, const float *up, size_t i0, size_t i1)
{
	for (size_t i = i0; i < i1; i++)
		gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* GELU with the tanh approximation, as gemma's reference uses, in the form
 * 0.5 x (1 + tanh u) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * 16 values at a time with vexp16 (within 2 ulp of expf; e^(-2u) capped at
 * e^88, where x / (1 + e^88) is 0 to within 1e-38). libm's tanhf, one value
 * at a time, was a sixth of gemma-3's prefill (perf). Each value depends
 * on itself only: the tail goes through the same vector code. */
static inline vf16 gelu16(vf16 x)
{
	const vf16 zero = { 0 }, cap = zero + 88.0f;
	vf16 z = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
	vi16 over = z > cap;
	z = (vf16)((over & (vi16)cap) | (~over & (vi16)z));
	return x / (1.0f + vexp16(z));
}

static void geglu_range(float *gate, const float *up, size_t i0, size_t i1)
{
	size_t i = i0;
	for (; i + 16 <= i1; i += 16) {
		vf16 g = gelu16(load16(gate + i)) * load16(up + i);
		memcpy(gate + i, &g, sizeof g);
	}
	if (i < i1) {
		vf16 x = { 0 }, u = { 0 };
		memcpy(&x, gate + i, (i1 - i) * sizeof(float));
		memcpy(&u, up + i, (i1 - i) * sizeof(float));
		vf16 g = gelu16(x) * u;
		memcpy(gate + i, &g, (i1 - i) * sizeof(float));
	}
}

static void act_task(void *arg, int task, int thread)
{
	const act_job *a = arg;
	size_t i0 = (size_t)task * ACT_CHUNK, i1 = a->n - i0 < ACT_CHUNK ? a->n : i0 + ACT_CHUNK;
	a->range(a->gate, a->up, i0, i1);
	(void)thread;
}

static void act_run(hsq_backend *be, act_range_fn range, float *gate, const float *up, size_t n)
{
	act_job a = { range, gate, up, n };
	pool_run(((cpu_backend *)be)->pool, (int)((n + ACT_CHUNK - 1) / ACT_CHUNK), act_task, &a);
}

static void cpu_swiglu(hsq_backend *be, float *gate, const float *up, size_t n)
{
	act_run(be, swiglu_range, gate, up, n);
}

static void cpu_geglu(hsq_backend *be, float *gate, const float *up, size_t n)
{
	act_run(be, geglu_range, gate, up, n);
}

static void cpu_scale(hsq_backend *be, float *x, float s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

static void cpu_add(hsq_backend *be, float *x, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

static hsq_pool *cpu_host_pool(hsq_backend *be) { return ((cpu_backend *)be)->pool; }

static void cpu_score_groups(hsq_backend *be, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
			     float *table, float *key_score, float *score)
{
	tiers_pq_group_scores(t, h, q, G, table, key_score, score);
}

/* tiers_attend calls the router's scoring back through this, so that the
 * table's score_groups is the one entry a backend changes to score the
 * groups its own way. */
static void score_through_backend(void *user, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
				  float *table, float *key_score, float *score)
{
	hsq_backend *be = user;
	be->ops->score_groups(be, t, h, q, G, table, key_score, score);
}

static void cpu_attend_tiered(hsq_backend *be, struct hsq_tiers *t, int layer, const float *q, const float *k,
			      const float *v, const int *pos, int n, const uint16_t *full_k, const uint16_t *full_v,
			      int full_cap, float *out)
{
	tiers_attend(t, layer, q, k, v, pos, n, full_k, full_v, full_cap, out, cpu_host_pool(be), score_through_backend,
		     be);
}

/* calloc: large blocks come straight from mmap as untouched zero pages, so
 * a big KV cache costs memory only as positions fill. Kernels load with
 * memcpy, so 16-byte alignment is enough. */
static float *cpu_alloc(hsq_backend *be, size_t n_floats)
{
	return calloc(n_floats ? n_floats : 1, sizeof(float));
}

static void cpu_release(hsq_backend *be, float *buf)
{
	free(buf);
}

static void cpu_copy(hsq_backend *be, float *dst, const float *src, size_t n_floats)
{
	memcpy(dst, src, n_floats * sizeof(float));
}

static uint16_t *cpu_alloc_kv(hsq_backend *be, size_t n_halves)
{
	return calloc(n_halves ? n_halves : 1, sizeof(uint16_t));
}

static void cpu_release_kv(hsq_backend *be, uint16_t *buf)
{
	free(buf);
}

static void cpu_store_kv(hsq_backend *be, uint16_t *dst, const float *src, size_t n)
{
	f16_row_from_f32(dst, src, n);
}

static void cpu_download_kv(hsq_backend *be, float *dst, const uint16_t *src, size_t n)
{
	f16_row_to_f32(dst, src, n);
}

static hsq_status cpu_prepare(hsq_backend *be, const hsq_model *model, int n_ctx)
{
	cpu_backend *cb = (cpu_backend *)be;
	const hsq_model_info *mi = &model->info;
	size_t max_cols = (size_t)(mi->n_ff > mi->n_embd ? mi->n_ff : mi->n_embd);
	if ((size_t)mi->n_head * mi->head_dim > max_cols)
		max_cols = (size_t)mi->n_head * mi->head_dim;
	free(cb->scratch);
	free(cb->scores);
	free(cb->dec_scores);
	cb->scratch = cpu_alloc(be, (size_t)cb->n_threads * ROWS_PER_TASK * max_cols);
	cb->scores = cpu_alloc(be, (size_t)cb->n_threads * ATTN_MAXQ * (size_t)n_ctx);
	cb->dec_scores = cpu_alloc(be, (size_t)mi->n_head * (size_t)n_ctx);
	cb->n_ctx = n_ctx;
	if (!cb->scratch || !cb->scores || !cb->dec_scores)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d threads of scratch at context %d", cb->n_threads,
				n_ctx);
	return HSQ_OK;
}

static void cpu_destroy(hsq_backend *be)
{
	cpu_backend *cb = (cpu_backend *)be;
	if (!cb)
		return;
	pool_free(cb->pool);
	for (int i = 0; i < ROPE_TABLES; i++) {
		free(cb->rope[i].cs);
		free(cb->rope[i].pos);
	}
	free(cb->scratch);
	free(cb->scores);
	free(cb->dec_scores);
	free(cb);
}

static const hsq_backend_ops cpu_ops = {
	.name = "cpu",
	.destroy = cpu_destroy,
	.prepare = cpu_prepare,
	.alloc = cpu_alloc,
	.release = cpu_release,
	.upload = cpu_copy,
	.download = cpu_copy,
	.copy = cpu_copy,
	.alloc_kv = cpu_alloc_kv,
	.release_kv = cpu_release_kv,
	.store_kv = cpu_store_kv,
	.upload_kv = cpu_store_kv,
	.download_kv = cpu_download_kv,
	.embed = cpu_embed,
	.matmul = cpu_matmul,
	.rmsnorm = cpu_rmsnorm,
	.rope = cpu_rope,
	.attention = cpu_attention,
	.swiglu = cpu_swiglu,
	.geglu = cpu_geglu,
	.scale = cpu_scale,
	.add = cpu_add,
	.attend_tiered = cpu_attend_tiered,
	.score_groups = cpu_score_groups,
	.host_pool = cpu_host_pool,
};

hsq_status backend_cpu_new(int n_threads, hsq_backend **out)
{
	*out = NULL;
	if (n_threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = n > 0 ? (int)n : 1;
	}
	if (n_threads > MAX_THREADS)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%d threads requested; at most %d are supported", n_threads,
				MAX_THREADS);
	cpu_backend *cb = calloc(1, sizeof *cb);
	if (!cb)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory creating the cpu backend");
	cb->base.ops = &cpu_ops;
	cb->n_threads = n_threads;
	hsq_status st = pool_new(n_threads, &cb->pool);
	if (st) {
		free(cb);
		return st;
	}
	*out = &cb->base;
	return HSQ_OK;
}

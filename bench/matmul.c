/* matmul.c - the CPU backend's matmul alone, in GFLOP/s, per weight type.
 *
 * usage: matmul [THREADS [SECONDS]]
 *
 * Random weights in the layouts the models use (F32 rows as they are;
 * Q4_1 (SmolLM2), Q8_0, Q5_0, Q4_K and Q6_K (gemma-3-270m) through the
 * fused kernels for small batches and dequantized to scratch, then
 * tiled, for larger ones (backend_cpu.c, fused_for; Q4_K and Q6_K are
 * always dequantized in AVX2 builds)), shaped like gemma-3-270m's projections (1024 x 640,
 * 2048 x 640, 640 x 2048; rows x cols, the cols a multiple of the type's
 * block), times batches of 512, 64, 16, 8 and 4 tokens (prefill chunks,
 * a question) and a decode step of one.
 * Each case repeats for about SECONDS (default 1) and prints the best
 * rate: 2 * rows * cols * tokens / time. Prints a checksum of the outputs
 * so two builds can be compared for the same results. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "bench_util.h"
#include "model/ggml_types.h"

static uint64_t rng_state = 88172645463325252ull;

static uint32_t next_u32(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

static float next_unit(void) /* uniform in [-1, 1) */
{
	return (float)(next_u32() >> 8) / (float)(1u << 23) - 1.0f;
}

/* fp16 0x2c00 = 0.0625: a scale that keeps the products ordinary */
static void put_f16(uint8_t *p, uint16_t h)
{
	p[0] = (uint8_t)(h & 0xff);
	p[1] = (uint8_t)(h >> 8);
}

/* One row of `cols` weights in `type`, random codes, fixed scales. */
static size_t fill_row(uint32_t type, uint8_t *row, int cols)
{
	switch (type) {
	case GGML_TYPE_F32:
		for (int i = 0; i < cols; i++) {
			float v = next_unit() * 0.05f;
			memcpy(row + 4 * (size_t)i, &v, 4);
		}
		return 4 * (size_t)cols;
	case GGML_TYPE_Q4_1: /* d, m, 16 bytes of nibbles per 32 */
		for (int b = 0; b < cols / 32; b++) {
			uint8_t *blk = row + 20 * (size_t)b;
			put_f16(blk, 0x2c00);
			put_f16(blk + 2, 0xac00);
			for (int i = 4; i < 20; i++)
				blk[i] = (uint8_t)next_u32();
		}
		return 20 * (size_t)(cols / 32);
	case GGML_TYPE_Q8_0: /* d, 32 signed bytes per 32 */
		for (int b = 0; b < cols / 32; b++) {
			uint8_t *blk = row + 34 * (size_t)b;
			put_f16(blk, 0x2000);
			for (int i = 2; i < 34; i++)
				blk[i] = (uint8_t)next_u32();
		}
		return 34 * (size_t)(cols / 32);
	case GGML_TYPE_Q5_0: /* d, 4 bytes of fifth bits, 16 bytes of nibbles per 32 */
		for (int b = 0; b < cols / 32; b++) {
			uint8_t *blk = row + 22 * (size_t)b;
			put_f16(blk, 0x2000);
			for (int i = 2; i < 22; i++)
				blk[i] = (uint8_t)next_u32();
		}
		return 22 * (size_t)(cols / 32);
	case GGML_TYPE_Q6_K: /* 128 bytes of low nibbles, 64 of high bits, 16 scales, d per 256 */
		for (int b = 0; b < cols / 256; b++) {
			uint8_t *blk = row + 210 * (size_t)b;
			for (int i = 0; i < 208; i++)
				blk[i] = (uint8_t)next_u32();
			put_f16(blk + 208, 0x1800);
		}
		return 210 * (size_t)(cols / 256);
	case GGML_TYPE_Q4_K: /* d, dmin, 12 bytes of 6-bit scales, 128 bytes of nibbles per 256 */
		for (int b = 0; b < cols / 256; b++) {
			uint8_t *blk = row + 144 * (size_t)b;
			put_f16(blk, 0x2000);
			put_f16(blk + 2, 0x2000);
			for (int i = 4; i < 144; i++)
				blk[i] = (uint8_t)next_u32();
		}
		return 144 * (size_t)(cols / 256);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	double seconds = argc > 2 ? atof(argv[2]) : 1.0;
	if (threads < 1 || seconds <= 0) {
		fprintf(stderr, "usage: matmul [THREADS [SECONDS]]\n");
		return 2;
	}
	hsq_backend *be = NULL;
	if (backend_cpu_new(threads, &be) != HSQ_OK) {
		fprintf(stderr, "matmul: cannot start the CPU backend\n");
		return 1;
	}
	static const struct { uint32_t type; const char *name; int block; } types[] = {
		{ GGML_TYPE_F32, "f32", 1 },     { GGML_TYPE_Q4_1, "q4_1", 32 },  { GGML_TYPE_Q8_0, "q8_0", 32 },
		{ GGML_TYPE_Q5_0, "q5_0", 32 },  { GGML_TYPE_Q4_K, "q4_k", 256 }, { GGML_TYPE_Q6_K, "q6_k", 256 },
	};
	static const int shapes[][2] = { { 1024, 640 }, { 2048, 640 }, { 640, 2048 } };
	static const int batches[] = { 512, 64, 16, 8, 4, 1 };
	int max_rows = 2048, max_cols = 2048, max_tok = 512;
	uint8_t *wdata = malloc((size_t)max_rows * max_cols * 4);
	float *x = malloc((size_t)max_tok * max_cols * sizeof *x);
	float *y = malloc((size_t)max_tok * max_rows * sizeof *y);
	if (!wdata || !x || !y) {
		fprintf(stderr, "matmul: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < (size_t)max_tok * max_cols; i++)
		x[i] = next_unit();
	/* prepare sizes the dequantization scratch from the model's widths */
	hsq_model shape;
	memset(&shape, 0, sizeof shape);
	shape.info.n_embd = 640;
	shape.info.n_ff = max_cols;
	shape.info.n_head = 4;
	shape.info.head_dim = 256;
	if (be->ops->prepare(be, &shape, 16) != HSQ_OK) {
		fprintf(stderr, "matmul: %s\n", hsq_last_error());
		return 1;
	}
	printf("%-6s %-11s %6s %10s %12s\n", "type", "rows x cols", "tokens", "GFLOP/s", "checksum");
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
			int rows = shapes[si][0], cols = shapes[si][1];
			if (cols % types[ti].block)
				continue; /* no model stores such a row */
			hsq_weight w = { wdata, types[ti].type, rows, cols, 0 };
			w.row_bytes = fill_row(w.type, wdata, cols);
			for (int r = 1; r < rows; r++)
				fill_row(w.type, wdata + (size_t)r * w.row_bytes, cols);
			for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
				int n_tok = batches[bi];
				double best = 1e30, t_all = bench_now();
				int reps = 0;
				do {
					double t0 = bench_now();
					be->ops->matmul(be, &w, x, n_tok, y);
					double dt = bench_now() - t0;
					best = dt < best ? dt : best;
					reps++;
				} while (bench_now() - t_all < seconds || reps < 3);
				double sum = 0;
				for (size_t i = 0; i < (size_t)n_tok * rows; i++)
					sum += y[i] * (double)((i % 7) + 1);
				printf("%-6s %4d x %-4d %6d %10.1f %12.6g\n", types[ti].name, rows, cols, n_tok,
				       2.0 * rows * cols * n_tok / best * 1e-9, sum);
			}
		}
	be->ops->destroy(be);
	free(wdata);
	free(x);
	free(y);
	return 0;
}

/* reader_kernels.h - the reader's forward for one row, shared by the
 * runtime (reader_forward) and the trainer (lib/train/reader_trainer.c),
 * so that the trainer's loss is the loss of the runtime's scores, bit for
 * bit (internal).
 *
 * Every sum is dot_f32's (common/vec_f32.h): 16 lanes over the inputs, a
 * fixed reduction tree, a scalar tail. dot_f32 alone runs one chain of
 * dependent multiply-adds, bound by their latency (4 cycles each, about
 * 10 G multiply-adds/s); eight weight rows at a time against the same
 * input vector give eight independent chains and load the input once for
 * eight, while each output is still exactly dot_f32 of its row. */
#ifndef HSQ_READER_KERNELS_H
#define HSQ_READER_KERNELS_H

#include <math.h>

#include "common/vec_f32.h"
#include "learn/reader_net.h"

#define READER_DOT_ROWS 8

/* out[k] = w[k][0..len-1] . x + bias[k] for k in 0..rows-1 (w row-major). */
static inline void reader_dots(const float *w, int rows, int len, const float *x, const float *bias, float *out)
{
	const int n16 = len & ~15;
	int k = 0;
	for (; k + READER_DOT_ROWS <= rows; k += READER_DOT_ROWS) {
		const float *wk = w + (size_t)k * len;
		vf16 acc[READER_DOT_ROWS];
		memset(acc, 0, sizeof acc);
		for (int i = 0; i < n16; i += 16) {
			vf16 xv = load16(x + i);
#pragma GCC unroll 8
			for (int u = 0; u < READER_DOT_ROWS; u++)
				acc[u] += load16(wk + (size_t)u * len + i) * xv;
		}
		for (int u = 0; u < READER_DOT_ROWS; u++)
			out[k + u] = (hsum16(acc[u]) + tail_dot(wk + (size_t)u * len, x, n16, len)) + bias[k + u];
	}
	for (; k < rows; k++)
		out[k] = dot_f32(w + (size_t)k * len, x, len) + bias[k];
}

/* One input row x[n_in]: z[n_hidden] = w1 x + b1 (z may be h: the
 * pre-activations are then not kept), h = silu(z), out[n_out] = w2 h + b2. */
static inline void reader_row(const reader_net *net, const float *x, float *z, float *h, float *out)
{
	reader_dots(net->w1, net->n_hidden, net->n_in, x, net->b1, z);
	for (int k = 0; k < net->n_hidden; k++)
		h[k] = z[k] / (1.0f + expf(-z[k]));
	reader_dots(net->w2, net->n_out, net->n_hidden, h, net->b2, out);
}

#endif

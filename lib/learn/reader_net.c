/* reader_net.c - the learned reader's input features and forward pass.
 *
 * The runtime scores every position of a document (up to 32K rows, up to
 * 90 outputs) at compression time; the trainer runs the same row kernel
 * (learn/reader_kernels.h). Every product sum runs in dot_f32's fixed
 * order, so a row's scores are the same bits whatever the number of rows
 * in the call, and the hidden layer (n_hidden dot products of n_in floats
 * per row, most of the time) runs in vector registers without
 * -ffast-math. */
#include <math.h>

#include "learn/reader_kernels.h"
#include "learn/reader_net.h"

void reader_features(const float *x, int n_embd, int p, int n, float *row)
{
	/* The mean square in double: n_embd is in the hundreds to thousands and
	 * the residual stream has a few very large channels. */
	double ss = 0.0;
	for (int i = 0; i < n_embd; i++)
		ss += (double)x[i] * x[i];
	float inv = (float)(1.0 / sqrt(ss / n_embd + READER_RMS_EPS));
	for (int i = 0; i < n_embd; i++)
		row[i] = x[i] * inv;
	/* Where the position lies: relative, on a log scale from either end,
	 * and the document's length on a log scale (1 at 64K tokens). */
	double ln = log1p((double)n);
	row[n_embd + 0] = (float)((double)p / n);
	row[n_embd + 1] = (float)(log1p((double)p) / ln);
	row[n_embd + 2] = (float)(log1p((double)(n - 1 - p)) / ln);
	row[n_embd + 3] = (float)(ln / log(65536.0));
}

void reader_forward(const reader_net *net, const float *in, int m, float *scratch, float *out)
{
	/* scratch holds the row's pre-activations, then their silu in place. */
	for (int i = 0; i < m; i++)
		reader_row(net, in + (size_t)i * net->n_in, scratch, scratch, out + (size_t)i * net->n_out);
}

size_t reader_n_params(int n_in, int n_hidden, int n_out)
{
	/* w1 [n_hidden][n_in], b1 [n_hidden], w2 [n_out][n_hidden], b2 [n_out]:
	 * a count of floats (times sizeof(float) for bytes). */
	return (size_t)n_hidden * n_in + (size_t)n_hidden + (size_t)n_out * n_hidden + (size_t)n_out;
}

void reader_obs_prior(const float *mass, int n, int first, int end, float *out)
{
	double z = 0.0;
	int k = 0;
	for (int p = first > 0 ? first : 0; p < end && p < n; p++) {
		z += mass[p];
		k++;
	}
	double inv = z > 0 ? 1.0 / z : 0.0, floor = 1.0 / (k > 0 ? k : 1);
	for (int p = 0; p < n; p++)
		out[p] = (float)log(mass[p] * inv + floor);
}

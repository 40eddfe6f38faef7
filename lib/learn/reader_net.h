/* reader_net.h - the learned reader of the HSQ method (internal).
 *
 * A small MLP over the hidden state of an early layer (the residual stream
 * after layer tap_layer) and four position features. For every position of
 * a document it gives one score per layer and KV head; over the positions
 * of a document, softmax of a head's scores is the reader's guess of the
 * share of attention that later queries of that head will pay each
 * position (hsq-calibrate(1) trains it to that, hsq-calibration(5) stores
 * it). The tier builder uses the guess where the obs-attention reader uses
 * the observation queries' attention mass: to flag L1 tokens, to choose the
 * medium groups and to weight the summaries. */
#ifndef HSQ_READER_NET_H
#define HSQ_READER_NET_H

#include <stddef.h>

#define READER_POS_FEATURES 4
#define READER_RMS_EPS 1e-6f

typedef struct reader_net {
	int tap_layer; /* layer whose output the reader reads, 0..n_layer-1 */
	int n_embd;    /* the model's hidden size */
	int n_in;      /* n_embd + READER_POS_FEATURES */
	int n_hidden;  /* width of the hidden layer */
	int n_out;     /* n_layer * n_head_kv: a score per layer and KV head, j = l * n_head_kv + g */
	float *w1;     /* [n_hidden][n_in] */
	float *b1;     /* [n_hidden] */
	float *w2;     /* [n_out][n_hidden] */
	float *b2;     /* [n_out] */
	int prior_obs; /* 1: a head's guess is softmax(score + reader_obs_prior of the
			* obs-attention reader's mass): the network corrects that reader */
} reader_net;

/* The input row of position p (0..n-1) of a document of n tokens:
 * row[0..n_embd-1] = x / sqrt(mean(x^2) + READER_RMS_EPS), then
 * row[n_embd + 0] = p / n,
 * row[n_embd + 1] = log1p(p) / log1p(n),
 * row[n_embd + 2] = log1p(n - 1 - p) / log1p(n),
 * row[n_embd + 3] = log1p(n) / log(65536). */
void reader_features(const float *x, int n_embd, int p, int n, float *row);

/* Scores of m input rows: out[i][n_out] = w2 . silu(w1 . in[i] + b1) + b2,
 * silu(z) = z / (1 + exp(-z)). Each row's sums run in a fixed order, so a
 * row's scores do not depend on m or on the other rows. scratch holds
 * n_hidden floats. */
void reader_forward(const reader_net *net, const float *in, int m, float *scratch, float *out);

/* The number of floats in the four weight arrays. */
size_t reader_n_params(int n_in, int n_hidden, int n_out);

/* The prior of one head: out[p] = ln(mass[p] / Z + 1 / K) for p in 0..n-1,
 * Z the sum of mass over the K positions the reader chooses among,
 * first..end-1: the obs-attention reader's guess mixed half and half with
 * a uniform one, so that no position starts out of the network's reach
 * (all equal when Z is 0). mass: the obs-attention reader's (the
 * attention of the document's last queries). */
void reader_obs_prior(const float *mass, int n, int first, int end, float *out);

#endif

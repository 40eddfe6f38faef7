/* reader_trainer.c - training the learned reader: its loss, the gradient
 * by hand, AdamW.
 *
 * Per document, in four parallel phases (llm.c's train_gpt2.c manner,
 * layer by layer forward and back):
 *   1. forward, in blocks of ROW_BLOCK rows: z = w1 in + b1 and h = silu(z)
 *      [n][n_hidden] are kept, score = w2 h + b2 [n][n_out];
 *   2. per head: the softmax over the doc's candidate positions, the
 *      cross-entropy, and dL/dscore written over the scores;
 *   3. back through w2 and the SiLU, in blocks of rows: dL/dz over z;
 *   4. the weight gradients, parallel over tiles of output units: tile
 *      dW1[k0..k0+7][.] sums dz[r][k] in[r][.] over the rows, tile
 *      dW2[j0..j0+7][.] sums dscore[r][j] h[r][.].
 * No sum runs across threads: in phase 4 a tile's sum runs over the rows in
 * row order (a float partial per block of ROW_BLOCK rows, added into the
 * double gradient in block order), and the documents come in doc order, so
 * the weights are the same bits whatever the number of threads. Memory is
 * the doc's activations, not a gradient buffer per block or per thread
 * (n_hidden up to 4096 makes w1 up to 9.5 MB at n_embd 576). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/rng.h"
#include "common/threadpool.h"
#include "common/vec_f32.h"
#include "learn/reader_kernels.h"
#include "train/reader_grad.h"
#include "train/reader_trainer.h"

#define ROW_BLOCK 64       /* rows per forward/backward task and per float partial sum */
#define TILE 8             /* output units per weight-gradient task: 8 accumulators of 16 lanes */
#define MAX_HIDDEN 4096
#define TARGET_SUM_TOL 1e-3 /* a head's targets over the candidates sum to 1 within this */
#define INIT_STREAM 0x726561646572ULL /* "reader": the PCG64 stream of the initial weights */

_Static_assert(READER_POS_FEATURES == HSQ_READER_POS_FEATURES, "two names for one constant");

void hsq_reader_features(const float *x, int n_embd, int p, int n, float *row)
{
	reader_features(x, n_embd, p, n, row);
}

hsq_adamw_params hsq_adamw_default_params(void)
{
	return (hsq_adamw_params){ .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f };
}

/* ------------------------------------------------------------ the loss */

typedef struct grad_job {
	const reader_net *net;
	const hsq_reader_doc *doc;
	int n_blocks;          /* of ROW_BLOCK rows in the doc */
	int n_ktiles;          /* dW1 tiles; the dW2 tiles follow them in phase 4 */
	int want_grad;
	double inv_pairs;      /* 1 / (doc, head) pairs over all docs */
	float *score;          /* [n][n_out]: scores, then dL/dscore */
	float *z;              /* [n][n_hidden]: pre-activations, then dL/dz */
	float *h;              /* [n][n_hidden]: silu(z) */
	int *bad_row;          /* [n_blocks]: first row with a value not finite, or -1 */
	double *head_loss;     /* [n_out]: this doc's cross-entropy per head (0 if off) */
	double *grad;          /* [n_params] w1, b1, w2, b2 */
	float *scratch;        /* [n_threads][scratch_floats] */
	size_t scratch_floats;
} grad_job;

/* 1 if the n floats are finite: an exponent of all ones is an infinity or
 * a NaN. 16 lanes at a time (gcc -O2 leaves the scalar loop scalar, and it
 * cost a tenth of the forward). */
static int row_finite(const float *x, int n)
{
	const vi16 ones = (vi16){ 0 } + 0x7f800000;
	vi16 bad = { 0 };
	int i = 0, any = 0;
	for (; i + 16 <= n; i += 16)
		bad |= ((vi16)load16(x + i) & ones) == ones;
	for (int l = 0; l < 16; l++)
		any |= bad[l];
	for (; i < n; i++)
		any |= !isfinite(x[i]);
	return !any;
}

static void forward_task(void *arg, int block, int thread)
{
	const grad_job *j = arg;
	const reader_net *net = j->net;
	const int n_in = net->n_in;
	int r0 = block * ROW_BLOCK, r1 = r0 + ROW_BLOCK < j->doc->n ? r0 + ROW_BLOCK : j->doc->n;
	j->bad_row[block] = -1;
	for (int r = r0; r < r1; r++) {
		const float *x = j->doc->in + (size_t)r * n_in;
		if (!row_finite(x, n_in) && j->bad_row[block] < 0)
			j->bad_row[block] = r;
		/* reader_forward's row, keeping z and h for the backward pass. */
		reader_row(net, x, j->z + (size_t)r * net->n_hidden, j->h + (size_t)r * net->n_hidden,
			   j->score + (size_t)r * net->n_out);
	}
}

/* Head o of the doc: loss = -sum_p t_p log softmax(s)_p over candidates
 * p, = -sum_p t_p (s_p - max) + T log sum_p e^(s_p - max) with T = sum_p
 * t_p (1 for valid targets). dL/ds_p = (T softmax_p - t_p) / pairs, the
 * exact derivative even where T is 1 only to TARGET_SUM_TOL. */
static void softmax_task(void *arg, int o, int thread)
{
	const grad_job *j = arg;
	const hsq_reader_doc *d = j->doc;
	const int no = j->net->n_out, n = d->n;
	float *s = j->score + o;   /* s[p * no]: this head's column */
	if (!d->head_on[o]) {
		j->head_loss[o] = 0.0;
		if (j->want_grad)
			for (int p = 0; p < n; p++)
				s[(size_t)p * no] = 0.0f;
		return;
	}
	const float *t = d->target + (size_t)o * n; /* target may be NULL where no head is trained */
	if (d->prior) { /* the guess the network corrects: softmax(s + prior), same derivative */
		const float *pr = d->prior + (size_t)o * n;
		for (int p = 0; p < n; p++)
			if (d->cand[p])
				s[(size_t)p * no] += pr[p];
	}
	float mx = -INFINITY;
	for (int p = 0; p < n; p++)
		if (d->cand[p] && s[(size_t)p * no] > mx)
			mx = s[(size_t)p * no];
	double sum = 0.0, ts = 0.0, tsum = 0.0;
	for (int p = 0; p < n; p++) {
		float *sp = s + (size_t)p * no;
		if (!d->cand[p]) {
			if (j->want_grad)
				*sp = 0.0f;
			continue;
		}
		float e = expf(*sp - mx);
		sum += e;
		ts += (double)t[p] * (*sp - mx);
		tsum += t[p];
		if (j->want_grad)
			*sp = e; /* kept for dL/ds below */
	}
	j->head_loss[o] = tsum * log(sum) - ts;
	if (!j->want_grad)
		return;
	double scale = tsum / sum;
	for (int p = 0; p < n; p++)
		if (d->cand[p]) {
			float *sp = s + (size_t)p * no;
			*sp = (float)((scale * *sp - t[p]) * j->inv_pairs);
		}
}

/* dL/dh = w2^T dL/ds, then dL/dz = dL/dh silu'(z), silu'(z) = sig(z) (1 +
 * z (1 - sig(z))), over z in place. */
static void backward_rows_task(void *arg, int block, int thread)
{
	const grad_job *j = arg;
	const reader_net *net = j->net;
	const int nh = net->n_hidden, no = net->n_out;
	float *dh = j->scratch + (size_t)thread * j->scratch_floats;
	int r0 = block * ROW_BLOCK, r1 = r0 + ROW_BLOCK < j->doc->n ? r0 + ROW_BLOCK : j->doc->n;
	for (int r = r0; r < r1; r++) {
		const float *ds = j->score + (size_t)r * no;
		float *z = j->z + (size_t)r * nh;
		/* dh[c] = sum over the outputs o in order of ds[o] w2[o][c]: 64
		 * columns at a time in four registers (an axpy per output stored dh
		 * back 90 times a row, a tenth of the step). */
		int c = 0;
		for (; c + 64 <= nh; c += 64) {
			vf16 a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
			for (int o = 0; o < no; o++) {
				if (ds[o] == 0.0f)
					continue;
				const float *w = net->w2 + (size_t)o * nh + c;
				a0 += ds[o] * load16(w);
				a1 += ds[o] * load16(w + 16);
				a2 += ds[o] * load16(w + 32);
				a3 += ds[o] * load16(w + 48);
			}
			memcpy(dh + c, &a0, sizeof a0);
			memcpy(dh + c + 16, &a1, sizeof a1);
			memcpy(dh + c + 32, &a2, sizeof a2);
			memcpy(dh + c + 48, &a3, sizeof a3);
		}
		for (; c < nh; c++) {
			float a = 0.0f;
			for (int o = 0; o < no; o++)
				if (ds[o] != 0.0f)
					a += ds[o] * net->w2[(size_t)o * nh + c];
			dh[c] = a;
		}
		for (int k = 0; k < nh; k++) {
			float sg = 1.0f / (1.0f + expf(-z[k]));
			z[k] = dh[k] * (sg * (1.0f + z[k] * (1.0f - sg)));
		}
	}
}

/* gw[u][0..width-1] += sum over the doc's rows r of d[r * d_stride + u] *
 * x[r * width + .], and gb[u] += sum_r d[r * d_stride + u], for the units u
 * < units (<= TILE) of one tile: a weight row and bias per output unit.
 * Per block of ROW_BLOCK rows, a float sum over the block's rows in row
 * order, kept in registers for 16 columns of all TILE units at once (the
 * block's d, zero-padded to TILE, in part), then added into the double
 * gradient; the blocks in order. */
static void tile_sum(const grad_job *j, float *part, int units, const float *d, int d_stride, const float *x,
		     int width, double *gw, double *gb)
{
	const int n = j->doc->n, n16 = width & ~15;
	float (*dt)[TILE] = (float (*)[TILE])part; /* [ROW_BLOCK][TILE] */
	for (int b = 0; b < j->n_blocks; b++) {
		int r0 = b * ROW_BLOCK, rows = r0 + ROW_BLOCK < n ? ROW_BLOCK : n - r0;
		const float *xb = x + (size_t)r0 * width;
		for (int r = 0; r < rows; r++)
			for (int u = 0; u < TILE; u++)
				dt[r][u] = u < units ? d[(size_t)(r0 + r) * d_stride + u] : 0.0f;
		for (int i = 0; i < n16; i += 16) {
			vf16 acc[TILE];
			memset(acc, 0, sizeof acc);
			for (int r = 0; r < rows; r++) {
				vf16 xv = load16(xb + (size_t)r * width + i);
#pragma GCC unroll 8
				for (int u = 0; u < TILE; u++)
					acc[u] += dt[r][u] * xv;
			}
			for (int u = 0; u < units; u++)
				for (int l = 0; l < 16; l++)
					gw[(size_t)u * width + i + l] += acc[u][l];
		}
		for (int i = n16; i < width; i++)
			for (int u = 0; u < units; u++) {
				float a = 0.0f;
				for (int r = 0; r < rows; r++)
					a += dt[r][u] * xb[(size_t)r * width + i];
				gw[(size_t)u * width + i] += a;
			}
		for (int u = 0; u < units; u++) {
			float a = 0.0f;
			for (int r = 0; r < rows; r++)
				a += dt[r][u];
			gb[u] += a;
		}
	}
}

static void weight_grad_task(void *arg, int task, int thread)
{
	const grad_job *j = arg;
	const reader_net *net = j->net;
	const int n_in = net->n_in, nh = net->n_hidden, no = net->n_out;
	float *part = j->scratch + (size_t)thread * j->scratch_floats;
	double *g_w1 = j->grad, *g_b1 = g_w1 + (size_t)nh * n_in, *g_w2 = g_b1 + nh, *g_b2 = g_w2 + (size_t)no * nh;
	if (task < j->n_ktiles) {
		int k0 = task * TILE, units = nh - k0 < TILE ? nh - k0 : TILE;
		tile_sum(j, part, units, j->z + k0, nh, j->doc->in, n_in, g_w1 + (size_t)k0 * n_in, g_b1 + k0);
	} else {
		int o0 = (task - j->n_ktiles) * TILE, units = no - o0 < TILE ? no - o0 : TILE;
		tile_sum(j, part, units, j->score + o0, no, j->h, nh, g_w2 + (size_t)o0 * nh, g_b2 + o0);
	}
}

/* The shape of one doc; *pairs gets its number of trained heads. */
static hsq_status check_doc(const reader_net *net, const hsq_reader_doc *d, int di, int *pairs)
{
	if (d->n < 2)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d has %d positions; a doc needs 2 or more", di, d->n);
	if (!d->in || !d->cand || !d->head_on)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d lacks its %s", di,
				!d->in ? "input rows" : !d->cand ? "candidate flags" : "head flags");
	int n_cand = 0;
	for (int p = 0; p < d->n; p++)
		n_cand += d->cand[p] != 0;
	if (n_cand < 2)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d has %d candidate positions; a doc needs 2 or more", di,
				n_cand);
	int on = 0;
	for (int o = 0; o < net->n_out; o++) {
		if (!d->head_on[o])
			continue;
		if (!d->target)
			return hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d trains head %d but has no targets", di, o);
		const float *t = d->target + (size_t)o * d->n;
		double sum = 0.0;
		for (int p = 0; p < d->n; p++) {
			if (!d->cand[p])
				continue;
			if (!isfinite(t[p]) || t[p] < 0.0f)
				return hsq_fail(HSQ_ERR_INVALID_ARG,
						"reader doc %d, head %d: target %g at position %d is not a share (finite, >= 0)",
						di, o, (double)t[p], p);
			sum += t[p];
			if (d->prior && !isfinite(d->prior[(size_t)o * d->n + p]))
				return hsq_fail(HSQ_ERR_INVALID_ARG,
						"reader doc %d, head %d: prior %g at position %d is not finite", di, o,
						(double)d->prior[(size_t)o * d->n + p], p);
		}
		if (fabs(sum - 1.0) > TARGET_SUM_TOL)
			return hsq_fail(HSQ_ERR_INVALID_ARG,
					"reader doc %d, head %d: targets over the candidates sum to %.6g, not 1", di, o, sum);
		on++;
	}
	*pairs = on;
	return HSQ_OK;
}

static hsq_status resolve_threads(int n_threads, int *out)
{
	if (n_threads < 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader: %d threads; use 1 or more (0: all online cores)", n_threads);
	if (n_threads == 0) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = online > 0 ? (online > 1024 ? 1024 : (int)online) : 1;
	}
	*out = n_threads;
	return HSQ_OK;
}

hsq_status reader_loss_grad(const reader_net *net, const hsq_reader_doc *docs, int n_docs, int n_threads,
			    double *loss, double *grad)
{
	hsq_status st = HSQ_OK;
	grad_job j = { .net = net, .want_grad = grad != NULL };
	hsq_pool *pool = NULL;
	if (!net || !loss || (!docs && n_docs > 0))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader loss: null %s", !net ? "network" : !loss ? "loss" : "docs");
	if (n_docs < 1)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader loss: %d docs; give 1 or more", n_docs);
	if ((st = resolve_threads(n_threads, &n_threads)))
		return st;
	const int nh = net->n_hidden, no = net->n_out;
	long pairs = 0;
	int n_max = 0;
	for (int d = 0; d < n_docs; d++) {
		int on = 0;
		if ((st = check_doc(net, &docs[d], d, &on)))
			return st;
		pairs += on;
		if (docs[d].n > n_max)
			n_max = docs[d].n;
	}
	if (pairs == 0)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader loss: no doc trains any head (head_on is 0 everywhere)");
	j.inv_pairs = 1.0 / (double)pairs;
	j.n_ktiles = (nh + TILE - 1) / TILE;
	int n_jtiles = (no + TILE - 1) / TILE;
	/* Per thread: phase 3's dL/dh [n_hidden], or phase 4's block of d
	 * [ROW_BLOCK][TILE]. */
	size_t sf = (size_t)nh > (size_t)ROW_BLOCK * TILE ? (size_t)nh : (size_t)ROW_BLOCK * TILE;
	j.scratch_floats = sf;
	int max_blocks = (n_max + ROW_BLOCK - 1) / ROW_BLOCK;
	j.score = malloc((size_t)n_max * no * sizeof *j.score);
	j.z = malloc((size_t)n_max * nh * sizeof *j.z);
	j.h = malloc((size_t)n_max * nh * sizeof *j.h);
	j.bad_row = malloc((size_t)max_blocks * sizeof *j.bad_row);
	j.head_loss = malloc((size_t)no * sizeof *j.head_loss);
	j.scratch = malloc((size_t)n_threads * sf * sizeof *j.scratch);
	if (!j.score || !j.z || !j.h || !j.bad_row || !j.head_loss || !j.scratch) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for the reader's activations (%d positions x %d hidden)",
			      n_max, nh);
		goto done;
	}
	if ((st = pool_new(n_threads, &pool)))
		goto done;
	if (grad)
		memset(grad, 0, reader_n_params(net->n_in, nh, no) * sizeof *grad);
	j.grad = grad;
	double total = 0.0;
	for (int d = 0; d < n_docs; d++) {
		j.doc = &docs[d];
		j.n_blocks = (docs[d].n + ROW_BLOCK - 1) / ROW_BLOCK;
		pool_run(pool, j.n_blocks, forward_task, &j);
		for (int b = 0; b < j.n_blocks; b++)
			if (j.bad_row[b] >= 0) {
				st = hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d: input row %d has a value not finite", d,
					      j.bad_row[b]);
				goto done;
			}
		pool_run(pool, no, softmax_task, &j);
		double doc_loss = 0.0;
		for (int o = 0; o < no; o++)
			doc_loss += j.head_loss[o];
		if (!isfinite(doc_loss)) {
			/* Finite inputs give finite scores unless the weights have
			 * grown huge: the data (or a learning rate too large for it). */
			st = hsq_fail(HSQ_ERR_INVALID_ARG, "reader doc %d: the loss is not finite (the scores overflow)", d);
			goto done;
		}
		total += doc_loss;
		if (!grad)
			continue;
		pool_run(pool, j.n_blocks, backward_rows_task, &j);
		pool_run(pool, j.n_ktiles + n_jtiles, weight_grad_task, &j);
	}
	*loss = total * j.inv_pairs;
done:
	pool_free(pool);
	free(j.score);
	free(j.z);
	free(j.h);
	free(j.bad_row);
	free(j.head_loss);
	free(j.scratch);
	return st;
}

/* ---------------------------------------------------------- the trainer */

static hsq_status check_opt(const hsq_adamw_params *o)
{
	if (!(o->lr > 0.0f) || !isfinite(o->lr))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "adamw learning rate %g is out of range; use a finite value > 0",
				(double)o->lr);
	if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f) || !(o->beta2 >= 0.0f && o->beta2 < 1.0f))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "adamw betas %g, %g are out of range; use 0 <= beta < 1",
				(double)o->beta1, (double)o->beta2);
	if (!(o->eps > 0.0f) || !isfinite(o->eps))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "adamw eps %g is out of range; use a finite value > 0", (double)o->eps);
	if (!(o->weight_decay >= 0.0f) || !isfinite(o->weight_decay))
		return hsq_fail(HSQ_ERR_INVALID_ARG, "adamw weight decay %g is out of range; use a finite value >= 0",
				(double)o->weight_decay);
	return HSQ_OK;
}

hsq_status hsq_reader_trainer_new(const hsq_model_info *mi, int tap_layer, int n_hidden, uint64_t seed,
				  const hsq_adamw_params *opt, hsq_reader_trainer **out)
{
	hsq_status st = HSQ_OK;
	hsq_reader_trainer *tr = NULL;
	hsq_adamw_params o = opt ? *opt : hsq_adamw_default_params();
	if (!out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader trainer: null output pointer");
	*out = NULL;
	if (!mi)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader trainer: null model info");
	if (mi->n_layer < 1 || mi->n_embd < 1 || mi->n_head_kv < 1)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader trainer: model shape %d layers, %d embd, %d kv heads is empty",
				mi->n_layer, mi->n_embd, mi->n_head_kv);
	if (tap_layer < 0 || tap_layer >= mi->n_layer)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader layer %d is out of range; the model has layers 0..%d",
				tap_layer, mi->n_layer - 1);
	if (n_hidden < 1 || n_hidden > MAX_HIDDEN)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader hidden width %d is out of range; use 1..%d", n_hidden,
				MAX_HIDDEN);
	if ((st = check_opt(&o)))
		return st;
	long long n_out = (long long)mi->n_layer * mi->n_head_kv;
	int n_in = mi->n_embd + READER_POS_FEATURES;
	if (n_out > INT_MAX || mi->n_embd > INT_MAX - READER_POS_FEATURES ||
	    reader_n_params(n_in, n_hidden, (int)n_out) > INT_MAX)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader for %d layers x %d kv heads, %d embd is too large",
				mi->n_layer, mi->n_head_kv, mi->n_embd);
	size_t n_params = reader_n_params(n_in, n_hidden, (int)n_out);

	tr = calloc(1, sizeof *tr);
	if (!tr)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the reader trainer");
	/* One allocation for the four arrays, in the moments' order, so that
	 * AdamW runs over all parameters as one vector; w1 owns it. */
	float *w = malloc(n_params * sizeof *w);
	tr->m = calloc(n_params, sizeof *tr->m);
	tr->v = calloc(n_params, sizeof *tr->v);
	if (!w || !tr->m || !tr->v) {
		free(w);
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory for a reader of %zu parameters", n_params);
		goto fail;
	}
	reader_net *net = &tr->net;
	*net = (reader_net){ .tap_layer = tap_layer, .n_embd = mi->n_embd, .n_in = n_in, .n_hidden = n_hidden,
			     .n_out = (int)n_out };
	net->w1 = w;
	net->b1 = net->w1 + (size_t)n_hidden * n_in;
	net->w2 = net->b1 + n_hidden;
	net->b2 = net->w2 + (size_t)n_out * n_hidden;
	tr->n_layer = mi->n_layer;
	tr->n_head_kv = mi->n_head_kv;
	tr->opt = o;

	hsq_rng rng;
	if ((st = hsq_rng_init(&rng, HSQ_RNG_PCG64, seed, INIT_STREAM)))
		goto fail;
	double a1 = 1.0 / sqrt((double)n_in), a2 = 1.0 / sqrt((double)n_hidden);
	for (size_t i = 0; i < (size_t)n_hidden * n_in; i++)
		net->w1[i] = (float)((2.0 * hsq_rng_uniform(&rng) - 1.0) * a1);
	for (size_t i = 0; i < (size_t)n_out * n_hidden; i++)
		net->w2[i] = (float)((2.0 * hsq_rng_uniform(&rng) - 1.0) * a2);
	memset(net->b1, 0, (size_t)n_hidden * sizeof *net->b1);
	memset(net->b2, 0, (size_t)n_out * sizeof *net->b2);
	*out = tr;
	return HSQ_OK;
fail:
	hsq_reader_trainer_free(tr);
	return st;
}

void hsq_reader_trainer_free(hsq_reader_trainer *tr)
{
	if (!tr)
		return;
	free(tr->net.w1); /* the one allocation of w1, b1, w2, b2 */
	free(tr->m);
	free(tr->v);
	free(tr->kept);
	free(tr);
}

int hsq_reader_trainer_n_params(const hsq_reader_trainer *tr)
{
	if (!tr)
		return 0;
	return (int)reader_n_params(tr->net.n_in, tr->net.n_hidden, tr->net.n_out);
}

hsq_status hsq_reader_trainer_loss(const hsq_reader_trainer *tr, const hsq_reader_doc *docs, int n_docs,
				   int n_threads, double *loss)
{
	if (!tr)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader loss: null trainer");
	return reader_loss_grad(&tr->net, docs, n_docs, n_threads, loss, NULL);
}

hsq_status hsq_reader_trainer_step(hsq_reader_trainer *tr, const hsq_reader_doc *docs, int n_docs, int n_threads,
				   double *loss)
{
	hsq_status st = HSQ_OK;
	double l = 0.0, *g = NULL;
	if (!tr)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader step: null trainer");
	const reader_net *net = &tr->net;
	size_t n_params = reader_n_params(net->n_in, net->n_hidden, net->n_out);
	g = malloc(n_params * sizeof *g);
	if (!g)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the gradient of %zu parameters", n_params);
	if ((st = reader_loss_grad(net, docs, n_docs, n_threads, &l, g)))
		goto done;

	/* AdamW with bias correction at step t; the decay, decoupled from the
	 * gradient, only on w1 [0, n_w1) and w2 [w2_at, w2_at + n_w2). */
	const hsq_adamw_params *o = &tr->opt;
	long t = ++tr->step;
	double b1 = o->beta1, b2 = o->beta2;
	double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
	size_t n_w1 = (size_t)net->n_hidden * net->n_in, w2_at = n_w1 + (size_t)net->n_hidden;
	size_t n_w2 = (size_t)net->n_out * net->n_hidden;
	float *w = net->w1;
	for (size_t i = 0; i < n_params; i++) {
		double m = b1 * tr->m[i] + (1.0 - b1) * g[i];
		double v = b2 * tr->v[i] + (1.0 - b2) * g[i] * g[i];
		tr->m[i] = (float)m;
		tr->v[i] = (float)v;
		double u = (m / c1) / (sqrt(v / c2) + o->eps);
		if (i < n_w1 || (i >= w2_at && i < w2_at + n_w2))
			u += (double)o->weight_decay * w[i];
		w[i] = (float)(w[i] - (double)o->lr * u);
	}
	if (loss)
		*loss = l;
done:
	free(g);
	return st;
}

hsq_status hsq_reader_trainer_scores(const hsq_reader_trainer *tr, const hsq_reader_doc *doc, float *out)
{
	if (!tr || !doc || !out)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader scores: null %s", !tr ? "trainer" : !doc ? "doc" : "output");
	if (doc->n < 1 || !doc->in)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "reader scores: a doc of %d positions%s", doc->n,
				doc->in ? "" : " and no input rows");
	float *scratch = malloc((size_t)tr->net.n_hidden * sizeof *scratch);
	if (!scratch)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the reader's hidden layer");
	reader_forward(&tr->net, doc->in, doc->n, scratch, out);
	free(scratch);
	return HSQ_OK;
}

void hsq_reader_obs_prior(const float *mass, int n, int n_out, int first, int end, float *prior)
{
	for (int j = 0; j < n_out; j++)
		reader_obs_prior(mass + (size_t)j * n, n, first, end, prior + (size_t)j * n);
}

hsq_status hsq_reader_trainer_set_prior(hsq_reader_trainer *tr, int on)
{
	if (on != 0 && on != 1)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "prior switch %d is neither 0 nor 1", on);
	tr->net.prior_obs = on;
	if (on && tr->step == 0) { /* the first guess is the prior's */
		memset(tr->net.w2, 0, (size_t)tr->net.n_out * tr->net.n_hidden * sizeof *tr->net.w2);
		memset(tr->net.b2, 0, (size_t)tr->net.n_out * sizeof *tr->net.b2);
	}
	return HSQ_OK;
}

hsq_status hsq_reader_trainer_keep(hsq_reader_trainer *tr)
{
	size_t n = (size_t)hsq_reader_trainer_n_params(tr);
	if (!tr->kept && !(tr->kept = malloc(n * sizeof *tr->kept)))
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory keeping a reader of %zu weights", n);
	memcpy(tr->kept, tr->net.w1, n * sizeof *tr->kept); /* w1, b1, w2, b2 are one array */
	return HSQ_OK;
}

hsq_status hsq_reader_trainer_restore(hsq_reader_trainer *tr)
{
	if (!tr->kept)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "no weights were kept to restore");
	memcpy(tr->net.w1, tr->kept, (size_t)hsq_reader_trainer_n_params(tr) * sizeof *tr->kept);
	return HSQ_OK;
}

/* test_reader_grad.c - the learned reader (lib/learn/reader_net.c) and its
 * training (lib/train/reader_trainer.c): the hand-written gradient against
 * central differences of an independent fp64 forward, the loss against the
 * same, learning a toy problem, bit-identical weights for 1, 2 and 3
 * threads, the runtime forward against the trainer's scores, the input
 * features against hand-computed values, and argument errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "learn/reader_net.h"
#include "train/reader_grad.h"
#include "train/reader_trainer.h"

/* ------------------------------------------------------------ helpers */

static hsq_model_info shape(int n_layer, int n_head_kv, int n_embd)
{
	return (hsq_model_info){ .architecture = "llama", .name = "toy", .n_layer = n_layer, .n_embd = n_embd,
				 .n_head = n_head_kv, .n_head_kv = n_head_kv, .head_dim = 8 };
}

/* A document the test owns: n rows of n_in inputs, targets [n_out][n],
 * candidates and trained heads. */
typedef struct toy_doc {
	float *in, *target;
	uint8_t *cand, *head_on;
	hsq_reader_doc d;
} toy_doc;

static void toy_alloc(toy_doc *t, int n, int n_in, int n_out)
{
	t->in = calloc((size_t)n * n_in, sizeof *t->in);
	t->target = calloc((size_t)n * n_out, sizeof *t->target);
	t->cand = calloc((size_t)n, 1);
	t->head_on = calloc((size_t)n_out, 1);
	cr_assert(t->in && t->target && t->cand && t->head_on);
	t->d = (hsq_reader_doc){ .n = n, .in = t->in, .target = t->target, .cand = t->cand, .head_on = t->head_on };
}

static void toy_free(toy_doc *t)
{
	free(t->in);
	free(t->target);
	free(t->cand);
	free(t->head_on);
}

/* Random inputs N(0, 1); candidates all but position 0 (a sink) and the
 * last two (the recent window); random shares on the candidates of the
 * trained heads. Outside them the targets hold values that must not be
 * read: 7 on non-candidates, NaN in the rows of heads not trained. */
static void toy_random(toy_doc *t, int n_in, int n_out, const uint8_t *head_on, hsq_rng *rng)
{
	int n = t->d.n;
	hsq_rng_fill_normal(rng, t->in, (size_t)n * n_in, 1.0);
	for (int p = 0; p < n; p++)
		t->cand[p] = p > 0 && p < n - 2;
	memcpy(t->head_on, head_on, (size_t)n_out);
	for (int o = 0; o < n_out; o++) {
		float *row = t->target + (size_t)o * n;
		if (!head_on[o]) {
			for (int p = 0; p < n; p++)
				row[p] = NAN;
			continue;
		}
		double sum = 0.0, w[4096];
		for (int p = 0; p < n; p++) {
			w[p] = t->cand[p] ? 0.05 + hsq_rng_uniform(rng) : 0.0;
			sum += w[p];
		}
		for (int p = 0; p < n; p++)
			row[p] = t->cand[p] ? (float)(w[p] / sum) : 7.0f;
	}
}

/* The loss of the header, straight from its definition, in double
 * throughout: weights w[n_params] in the order w1, b1, w2, b2. */
static double ref_loss(const reader_net *net, const double *w, const hsq_reader_doc *docs, int n_docs)
{
	const int n_in = net->n_in, nh = net->n_hidden, no = net->n_out;
	const double *w1 = w, *b1 = w1 + nh * n_in, *w2 = b1 + nh, *b2 = w2 + no * nh;
	double total = 0.0;
	int pairs = 0;
	for (int d = 0; d < n_docs; d++) {
		const hsq_reader_doc *doc = &docs[d];
		int n = doc->n;
		double *s = malloc(sizeof *s * n * no), hid[4096];
		for (int p = 0; p < n; p++) {
			for (int k = 0; k < nh; k++) {
				double z = b1[k];
				for (int i = 0; i < n_in; i++)
					z += w1[k * n_in + i] * doc->in[p * n_in + i];
				hid[k] = z / (1.0 + exp(-z));
			}
			for (int o = 0; o < no; o++) {
				double a = b2[o];
				for (int k = 0; k < nh; k++)
					a += w2[o * nh + k] * hid[k];
				s[p * no + o] = a;
			}
		}
		for (int o = 0; o < no; o++) {
			if (!doc->head_on[o])
				continue;
			double mx = -INFINITY, sum = 0.0, ce = 0.0;
			if (doc->prior)
				for (int p = 0; p < n; p++)
					s[p * no + o] += doc->prior[o * n + p];
			for (int p = 0; p < n; p++)
				if (doc->cand[p] && s[p * no + o] > mx)
					mx = s[p * no + o];
			for (int p = 0; p < n; p++)
				if (doc->cand[p])
					sum += exp(s[p * no + o] - mx);
			for (int p = 0; p < n; p++)
				if (doc->cand[p])
					ce -= doc->target[o * n + p] * (s[p * no + o] - mx - log(sum));
			total += ce;
			pairs++;
		}
		free(s);
	}
	return total / pairs;
}

static double *weights_double(const reader_net *net, size_t n)
{
	double *w = malloc(n * sizeof *w);
	for (size_t i = 0; i < n; i++)
		w[i] = net->w1[i]; /* the trainer's four arrays are one, from w1 */
	return w;
}

/* The tiny net of the gradient check: n_embd 6 (n_in 10), 5 hidden, 4
 * outputs (2 layers x 2 KV heads), head 2 never trained and head 1 not in
 * doc 1; docs of 7 and 9 positions with 3 non-candidates each. Biases
 * random so that every parameter is exercised off zero. */
typedef struct tiny {
	hsq_reader_trainer *tr;
	toy_doc docs[2];
	hsq_reader_doc d[2];
	float prior[4 * 7]; /* doc 0's prior (another reader's log guess); doc 1 has none */
} tiny;

static void tiny_new(tiny *t)
{
	hsq_model_info mi = shape(2, 2, 6);
	cr_assert_eq(hsq_reader_trainer_new(&mi, 0, 5, 11, NULL, &t->tr), HSQ_OK, "%s", hsq_last_error());
	reader_net *net = &t->tr->net;
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, 5, 0);
	hsq_rng_fill_normal(&rng, net->b1, 5, 0.3);
	hsq_rng_fill_normal(&rng, net->b2, 4, 0.3);
	for (int i = 0; i < 4 * 5; i++)
		net->w2[i] *= 3.0f; /* scores that differ by more than a unit */
	static const uint8_t on0[4] = { 1, 1, 0, 1 }, on1[4] = { 1, 0, 0, 1 };
	int n[2] = { 7, 9 };
	for (int d = 0; d < 2; d++) {
		toy_alloc(&t->docs[d], n[d], 10, 4);
		toy_random(&t->docs[d], 10, 4, d ? on1 : on0, &rng);
		t->d[d] = t->docs[d].d;
	}
	hsq_rng_fill_normal(&rng, t->prior, 4 * 7, 1.0);
	t->d[0].prior = t->prior;
}

static void tiny_free(tiny *t)
{
	hsq_reader_trainer_free(t->tr);
	for (int d = 0; d < 2; d++)
		toy_free(&t->docs[d]);
}

/* ---------------------------------------------------------- (a) gradient */

/* Every parameter's analytic gradient (float forward, double sums) against
 * central differences of ref_loss, perturbed in double by 1e-5 (truncation
 * error ~1e-10, so the difference is the analytic side's float error).
 * Largest error seen over the 79 parameters: 5.6e-6 relative (where |n|
 * >= 1e-3; 7.4e-6 in the -O2 build), 7.4e-8 absolute; the tolerance is 1e-5 + 1e-3 |n|. Head 2's row of w2 and its bias take
 * no gradient at all. */
Test(reader_grad, gradient_matches_central_differences)
{
	tiny t;
	tiny_new(&t);
	const reader_net *net = &t.tr->net;
	size_t np = (size_t)hsq_reader_trainer_n_params(t.tr);
	cr_assert_eq(np, (size_t)(5 * 10 + 5 + 4 * 5 + 4));
	double *g = malloc(np * sizeof *g), loss;
	cr_assert_eq(reader_loss_grad(net, t.d, 2, 1, &loss, g), HSQ_OK, "%s", hsq_last_error());
	double *w = weights_double(net, np), worst = 0.0, worst_abs = 0.0;
	const double h = 1e-5;
	for (size_t i = 0; i < np; i++) {
		double w0 = w[i];
		w[i] = w0 + h;
		double lp = ref_loss(net, w, t.d, 2);
		w[i] = w0 - h;
		double lm = ref_loss(net, w, t.d, 2);
		w[i] = w0;
		double num = (lp - lm) / (2 * h);
		double err = fabs(g[i] - num);
		cr_expect(err <= 1e-5 + 1e-3 * fabs(num), "parameter %zu: analytic %.9g, numerical %.9g", i, g[i], num);
		if (fabs(num) >= 1e-3 && err / fabs(num) > worst)
			worst = err / fabs(num);
		if (err > worst_abs)
			worst_abs = err;
	}
	cr_log_info("reader gradient: largest relative error %.3g (where |n| >= 1e-3), absolute %.3g, over %zu parameters",
		    worst, worst_abs, np);
	size_t w2_at = 5 * 10 + 5, b2_at = w2_at + 4 * 5;
	for (int k = 0; k < 5; k++)
		cr_expect_eq(g[w2_at + 2 * 5 + k], 0.0, "head 2 is not trained");
	cr_expect_eq(g[b2_at + 2], 0.0);
	free(w);
	free(g);
	tiny_free(&t);
}

/* The library's own loss is consistent with its gradient too: central
 * differences of hsq_reader_trainer_loss with the weight perturbed in
 * float by 1e-2. The float forward's rounding (~1e-7 of a loss near 2)
 * over 2h gives ~1e-5; the second-order term h^2 L''' a little more.
 * Largest error seen 2.9e-5 (absolute); tolerance 1e-3 + 1e-2 |n|. */
Test(reader_grad, gradient_matches_library_loss_differences)
{
	tiny t;
	tiny_new(&t);
	reader_net *net = &t.tr->net;
	size_t np = (size_t)hsq_reader_trainer_n_params(t.tr);
	double *g = malloc(np * sizeof *g), loss, lp, lm, worst = 0.0;
	cr_assert_eq(reader_loss_grad(net, t.d, 2, 2, &loss, g), HSQ_OK);
	const float h = 1e-2f;
	for (size_t i = 0; i < np; i++) {
		float w0 = net->w1[i];
		net->w1[i] = w0 + h;
		double hp = (double)net->w1[i] - w0;
		cr_assert_eq(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &lp), HSQ_OK);
		net->w1[i] = w0 - h;
		double hm = w0 - (double)net->w1[i];
		cr_assert_eq(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &lm), HSQ_OK);
		net->w1[i] = w0;
		double num = (lp - lm) / (hp + hm);
		cr_expect(fabs(g[i] - num) <= 1e-3 + 1e-2 * fabs(num), "parameter %zu: analytic %.9g, numerical %.9g", i,
			  g[i], num);
		if (fabs(g[i] - num) > worst)
			worst = fabs(g[i] - num);
	}
	cr_log_info("reader gradient against the library's loss: largest absolute error %.3g", worst);
	free(g);
	tiny_free(&t);
}

/* -------------------------------------------------------------- (b) loss */

/* Against ref_loss on the same weights: the library's forward is float,
 * so 1e-6 relative (seen: 1e-8). The trainer's loss and step agree, and
 * the step's loss is the one before the step. */
Test(reader_grad, loss_matches_independent_computation)
{
	tiny t;
	tiny_new(&t);
	size_t np = (size_t)hsq_reader_trainer_n_params(t.tr);
	double *w = weights_double(&t.tr->net, np);
	double want = ref_loss(&t.tr->net, w, t.d, 2), got, stepped, after;
	cr_assert_eq(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &got), HSQ_OK, "%s", hsq_last_error());
	cr_expect(fabs(got - want) <= 1e-6 * fabs(want), "loss %.12g, fp64 reference %.12g", got, want);
	cr_log_info("reader loss %.12g, fp64 reference %.12g", got, want);
	cr_assert_eq(hsq_reader_trainer_step(t.tr, t.d, 2, 1, &stepped), HSQ_OK);
	cr_expect_eq(stepped, got, "a step reports the loss before it");
	cr_assert_eq(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &after), HSQ_OK);
	cr_expect_neq(after, got, "a step moves the weights");
	cr_expect_eq(t.tr->step, 1);
	free(w);
	tiny_free(&t);
}

/* One head of a 2-position doc with scores known in closed form: a net
 * with w1 = w2 = 0 scores b2; target (1, 0) gives -log softmax(b2)[0]. */
Test(reader_grad, loss_of_known_scores)
{
	hsq_model_info mi = shape(1, 1, 2);
	hsq_reader_trainer *tr;
	cr_assert_eq(hsq_reader_trainer_new(&mi, 0, 3, 1, NULL, &tr), HSQ_OK);
	reader_net *net = &tr->net;
	memset(net->w1, 0, reader_n_params(net->n_in, 3, 1) * sizeof(float));
	net->b2[0] = 0.5f;
	float in[2 * 6] = { 0 }, target[2] = { 1.0f, 0.0f };
	uint8_t cand[2] = { 1, 1 }, on[1] = { 1 };
	hsq_reader_doc d = { .n = 2, .in = in, .target = target, .cand = cand, .head_on = on };
	double loss;
	cr_assert_eq(hsq_reader_trainer_loss(tr, &d, 1, 1, &loss), HSQ_OK);
	cr_expect(fabs(loss - log(2.0)) < 1e-12, "equal scores: log 2, got %.15g", loss);
	hsq_reader_trainer_free(tr);
}

/* ---------------------------------------------------------- (c) learning */

/* 8 docs of 40 positions; 4 positions per doc carry a marked feature (x[0]
 * is 4 there and 0 elsewhere, the other channels N(0, 1), before the RMS
 * normalisation) and take all of heads 0 and 1's attention; head 2 is not
 * trained. 50 AdamW steps at lr 1e-2 take the
 * loss from about log 37 = 3.6 towards the targets' entropy log 4 = 1.39
 * (seen: 3.46 -> 1.45), and the four best-scored candidates of every doc
 * and trained head are the marked ones. */
Test(reader_grad, steps_learn_a_toy_problem)
{
	enum { N_DOCS = 8, N = 40, N_EMBD = 8, N_IN = N_EMBD + 4, N_OUT = 3, MARKS = 4 };
	hsq_model_info mi = shape(3, 1, N_EMBD);
	hsq_adamw_params opt = hsq_adamw_default_params();
	opt.lr = 1e-2f;
	hsq_reader_trainer *tr;
	cr_assert_eq(hsq_reader_trainer_new(&mi, 1, 16, 3, &opt, &tr), HSQ_OK);
	toy_doc docs[N_DOCS];
	hsq_reader_doc d[N_DOCS];
	uint8_t marked[N_DOCS][N];
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, 9, 0);
	for (int di = 0; di < N_DOCS; di++) {
		toy_alloc(&docs[di], N, N_IN, N_OUT);
		memset(marked[di], 0, N);
		for (int k = 0; k < MARKS;) {
			int p = 1 + (int)hsq_rng_below(&rng, N - 3);
			k += !marked[di][p];
			marked[di][p] = 1;
		}
		for (int p = 0; p < N; p++) {
			float x[N_EMBD];
			hsq_rng_fill_normal(&rng, x, N_EMBD, 1.0);
			x[0] = marked[di][p] ? 4.0f : 0.0f;
			reader_features(x, N_EMBD, p, N, docs[di].in + p * N_IN);
			docs[di].cand[p] = p > 0 && p < N - 2;
		}
		for (int o = 0; o < N_OUT; o++) {
			docs[di].head_on[o] = o < 2;
			for (int p = 0; p < N; p++)
				docs[di].target[o * N + p] = marked[di][p] ? 1.0f / MARKS : 0.0f;
		}
		d[di] = docs[di].d;
	}
	double first = 0, loss = 0;
	for (int s = 0; s < 50; s++) {
		cr_assert_eq(hsq_reader_trainer_step(tr, d, N_DOCS, 2, &loss), HSQ_OK, "%s", hsq_last_error());
		if (s == 0)
			first = loss;
	}
	cr_assert_eq(hsq_reader_trainer_loss(tr, d, N_DOCS, 2, &loss), HSQ_OK);
	cr_log_info("toy reader: loss %.4f -> %.4f", first, loss);
	cr_expect(loss < first - 0.75 * (first - log((double)MARKS)), "loss %.4f -> %.4f", first, loss);
	float scores[N * N_OUT];
	for (int di = 0; di < N_DOCS; di++) {
		cr_assert_eq(hsq_reader_trainer_scores(tr, &d[di], scores), HSQ_OK);
		for (int o = 0; o < 2; o++) {
			/* The lowest marked score beats every unmarked candidate. */
			float lo_marked = INFINITY, hi_other = -INFINITY;
			for (int p = 0; p < N; p++) {
				if (!docs[di].cand[p])
					continue;
				float s = scores[p * N_OUT + o];
				if (marked[di][p] && s < lo_marked)
					lo_marked = s;
				if (!marked[di][p] && s > hi_other)
					hi_other = s;
			}
			cr_expect(lo_marked > hi_other, "doc %d head %d: marked %g vs other %g", di, o, lo_marked,
				  hi_other);
		}
	}
	for (int di = 0; di < N_DOCS; di++)
		toy_free(&docs[di]);
	hsq_reader_trainer_free(tr);
}

/* ------------------------------------------------------- (d) determinism */

/* Docs of 150 and 200 positions (3 and 4 blocks of 64 rows), 20 hidden
 * units and 18 outputs (3 tiles each): 5 steps with 1, 2 and 3 threads
 * give the same weights, moments and losses bit for bit. */
Test(reader_grad, weights_identical_for_1_2_3_threads)
{
	enum { N_EMBD = 24, N_IN = N_EMBD + 4, N_OUT = 18 };
	hsq_model_info mi = shape(6, 3, N_EMBD);
	hsq_reader_trainer *tr[3];
	toy_doc docs[2];
	hsq_reader_doc d[2];
	uint8_t on[N_OUT];
	for (int o = 0; o < N_OUT; o++)
		on[o] = o % 5 != 2;
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, 21, 0);
	int n[2] = { 150, 200 };
	for (int di = 0; di < 2; di++) {
		toy_alloc(&docs[di], n[di], N_IN, N_OUT);
		toy_random(&docs[di], N_IN, N_OUT, on, &rng);
		d[di] = docs[di].d;
	}
	double loss[3][5];
	for (int t = 0; t < 3; t++) {
		cr_assert_eq(hsq_reader_trainer_new(&mi, 2, 20, 77, NULL, &tr[t]), HSQ_OK);
		for (int s = 0; s < 5; s++)
			cr_assert_eq(hsq_reader_trainer_step(tr[t], d, 2, t + 1, &loss[t][s]), HSQ_OK, "%s",
				     hsq_last_error());
	}
	size_t bytes = (size_t)hsq_reader_trainer_n_params(tr[0]) * sizeof(float);
	for (int t = 1; t < 3; t++) {
		cr_expect(memcmp(tr[t]->net.w1, tr[0]->net.w1, bytes) == 0, "%d threads: weights differ", t + 1);
		cr_expect(memcmp(tr[t]->m, tr[0]->m, bytes) == 0, "%d threads: first moments differ", t + 1);
		cr_expect(memcmp(tr[t]->v, tr[0]->v, bytes) == 0, "%d threads: second moments differ", t + 1);
		cr_expect(memcmp(loss[t], loss[0], sizeof loss[0]) == 0, "%d threads: losses differ", t + 1);
	}
	cr_expect(loss[0][4] < loss[0][0]);
	for (int t = 0; t < 3; t++)
		hsq_reader_trainer_free(tr[t]);
	for (int di = 0; di < 2; di++)
		toy_free(&docs[di]);
}

/* ---------------------------------------------------- (e) runtime forward */

/* reader_forward on all rows at once, in uneven chunks, and row by row
 * gives the trainer's scores bit for bit; the trainer's loss is the
 * loss of those scores (fp64 softmax of them, 1e-9 relative). */
Test(reader_grad, runtime_forward_matches_trainer_scores)
{
	enum { N = 70, N_EMBD = 37, N_IN = N_EMBD + 4, N_OUT = 6, NH = 19 };
	hsq_model_info mi = shape(3, 2, N_EMBD);
	hsq_reader_trainer *tr;
	cr_assert_eq(hsq_reader_trainer_new(&mi, 0, NH, 5, NULL, &tr), HSQ_OK);
	toy_doc doc;
	uint8_t on[N_OUT] = { 1, 1, 1, 0, 1, 1 };
	hsq_rng rng;
	hsq_rng_init(&rng, HSQ_RNG_PCG64, 1, 0);
	hsq_rng_fill_normal(&rng, tr->net.b1, NH, 0.5);
	hsq_rng_fill_normal(&rng, tr->net.b2, N_OUT, 0.5);
	toy_alloc(&doc, N, N_IN, N_OUT);
	toy_random(&doc, N_IN, N_OUT, on, &rng);
	static float want[N * N_OUT], all[N * N_OUT], chunks[N * N_OUT], one[N * N_OUT];
	float scratch[NH];
	cr_assert_eq(hsq_reader_trainer_scores(tr, &doc.d, want), HSQ_OK);
	reader_forward(&tr->net, doc.in, N, scratch, all);
	for (int r = 0; r < N;) {
		int m = r % 3 == 0 ? 13 : 4;
		m = r + m > N ? N - r : m;
		reader_forward(&tr->net, doc.in + r * N_IN, m, scratch, chunks + r * N_OUT);
		r += m;
	}
	for (int r = 0; r < N; r++)
		reader_forward(&tr->net, doc.in + r * N_IN, 1, scratch, one + r * N_OUT);
	cr_expect(memcmp(all, want, sizeof want) == 0, "reader_forward differs from the trainer's scores");
	cr_expect(memcmp(chunks, want, sizeof want) == 0, "a row's scores depend on the rows beside it");
	cr_expect(memcmp(one, want, sizeof want) == 0, "a row's scores depend on m");

	double total = 0.0;
	int pairs = 0;
	for (int o = 0; o < N_OUT; o++) {
		if (!on[o])
			continue;
		double mx = -INFINITY, sum = 0.0, ce = 0.0;
		for (int p = 0; p < N; p++)
			if (doc.cand[p] && want[p * N_OUT + o] > mx)
				mx = want[p * N_OUT + o];
		for (int p = 0; p < N; p++)
			if (doc.cand[p])
				sum += exp(want[p * N_OUT + o] - mx);
		for (int p = 0; p < N; p++)
			if (doc.cand[p])
				ce -= doc.target[o * N + p] * (want[p * N_OUT + o] - mx - log(sum));
		total += ce;
		pairs++;
	}
	double loss;
	cr_assert_eq(hsq_reader_trainer_loss(tr, &doc.d, 1, 3, &loss), HSQ_OK);
	cr_expect(fabs(loss - total / pairs) <= 1e-9 * fabs(loss), "loss %.15g, of the scores %.15g", loss,
		  total / pairs);
	toy_free(&doc);
	hsq_reader_trainer_free(tr);
}

/* --------------------------------------------------------- (f) features */

Test(reader_grad, features_match_hand_computed_values)
{
	const float x[4] = { 1.0f, -2.0f, 3.0f, 4.0f };
	float row[8], row2[8];
	/* mean(x^2) = 30 / 4 = 7.5; p = 3 of n = 10. */
	reader_features(x, 4, 3, 10, row);
	double rms = sqrt(7.5 + 1e-6);
	double want[8] = { 1.0 / rms, -2.0 / rms, 3.0 / rms, 4.0 / rms, 0.3, log(4.0) / log(11.0),
			   log(7.0) / log(11.0), log(11.0) / log(65536.0) };
	for (int i = 0; i < 8; i++)
		cr_expect(fabs(row[i] - want[i]) <= 1e-6 * fabs(want[i]), "feature %d: %.9g, want %.9g", i, row[i],
			  want[i]);
	hsq_reader_features(x, 4, 3, 10, row2);
	cr_expect(memcmp(row, row2, sizeof row) == 0, "hsq_reader_features is reader_features");
	/* The ends: the first position is 0 from the start, the last 0 from
	 * the end; a doc of 65535 tokens has length feature 1. */
	reader_features(x, 4, 0, 65535, row);
	cr_expect_eq(row[4], 0.0f);
	cr_expect_eq(row[5], 0.0f);
	cr_expect(fabs(row[6] - log(65535.0) / log(65536.0)) < 1e-6);
	cr_expect(fabs(row[7] - 1.0f) < 1e-6);
	reader_features(x, 4, 65534, 65535, row);
	cr_expect_eq(row[6], 0.0f);
	cr_expect(fabs(row[5] - log(65535.0) / log(65536.0)) < 1e-6);
	/* A zero state stays zero (the epsilon keeps the division finite). */
	const float zero[4] = { 0 };
	reader_features(zero, 4, 1, 2, row);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(row[i], 0.0f);
	cr_expect_eq(reader_n_params(10, 5, 4), (size_t)(50 + 5 + 20 + 4));
}

/* ------------------------------------------------------- (g) arguments */

static void expect_invalid(hsq_status st, const char *needle, const char *what)
{
	cr_expect_eq(st, HSQ_ERR_INVALID_ARG, "%s: status %d", what, st);
	const char *e = hsq_last_error();
	cr_expect(e && *e, "%s: no detail", what);
	if (needle && e)
		cr_expect(strstr(e, needle) != NULL, "%s: detail '%s' lacks '%s'", what, e, needle);
}

Test(reader_grad, new_rejects_bad_arguments)
{
	hsq_model_info mi = shape(4, 2, 6);
	hsq_reader_trainer *tr = (hsq_reader_trainer *)1;
	expect_invalid(hsq_reader_trainer_new(&mi, -1, 8, 1, NULL, &tr), "-1", "layer -1");
	cr_expect_null(tr);
	expect_invalid(hsq_reader_trainer_new(&mi, 4, 8, 1, NULL, &tr), "0..3", "layer 4 of 4");
	expect_invalid(hsq_reader_trainer_new(&mi, 0, 0, 1, NULL, &tr), "hidden width 0", "0 hidden");
	expect_invalid(hsq_reader_trainer_new(&mi, 0, 4097, 1, NULL, &tr), "4097", "4097 hidden");
	expect_invalid(hsq_reader_trainer_new(NULL, 0, 8, 1, NULL, &tr), "model info", "null info");
	hsq_adamw_params opt = hsq_adamw_default_params();
	opt.lr = 0.0f;
	expect_invalid(hsq_reader_trainer_new(&mi, 0, 8, 1, &opt, &tr), "learning rate", "lr 0");
	opt = hsq_adamw_default_params();
	opt.beta2 = 1.0f;
	expect_invalid(hsq_reader_trainer_new(&mi, 0, 8, 1, &opt, &tr), "betas", "beta2 1");
	cr_assert_eq(hsq_reader_trainer_new(&mi, 3, 4096, 1, NULL, &tr), HSQ_OK, "the limits are allowed");
	cr_expect_eq(tr->net.n_out, 8);
	cr_expect_eq(tr->net.tap_layer, 3);
	hsq_reader_trainer_free(tr);
}

Test(reader_grad, loss_and_step_reject_bad_docs)
{
	tiny t;
	tiny_new(&t);
	double loss;
	toy_doc *b = &t.docs[1];
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 0, 1, &loss), "0 docs", "no docs");
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, -1, &loss), "-1 threads", "-1 threads");

	t.d[1].n = 1;
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &loss), "doc 1 has 1 positions", "1 position");
	t.d[1].n = b->d.n;

	uint8_t saved[9];
	memcpy(saved, b->cand, 9);
	memset(b->cand, 0, 9);
	b->cand[4] = 1;
	expect_invalid(hsq_reader_trainer_step(t.tr, t.d, 2, 1, &loss), "doc 1 has 1 candidate", "1 candidate");
	memcpy(b->cand, saved, 9);

	float keep = b->in[3 * 10 + 2];
	b->in[3 * 10 + 2] = NAN;
	expect_invalid(hsq_reader_trainer_step(t.tr, t.d, 2, 2, &loss), "doc 1: input row 3", "NaN input");
	b->in[3 * 10 + 2] = INFINITY;
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &loss), "doc 1: input row 3", "infinite input");
	b->in[3 * 10 + 2] = keep;

	/* Head 3 of doc 1: a negative share, then shares summing to 1/2. */
	float *t3 = b->target + 3 * 9, keep3[9];
	memcpy(keep3, t3, sizeof keep3);
	t3[2] = -t3[2];
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &loss), "doc 1, head 3", "negative target");
	for (int p = 0; p < 9; p++)
		t3[p] = keep3[p] * 0.5f;
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &loss), "sum to 0.5", "targets sum to 1/2");
	memcpy(t3, keep3, sizeof keep3);

	uint8_t off[4] = { 0 };
	t.d[0].head_on = off;
	t.d[1].head_on = off;
	expect_invalid(hsq_reader_trainer_loss(t.tr, t.d, 2, 1, &loss), "no doc trains any head", "no heads");
	t.d[0].head_on = t.docs[0].head_on;
	t.d[1].head_on = t.docs[1].head_on;

	/* Weights so large that the scores overflow: the loss is not finite,
	 * and the failed step leaves the weights as they were. */
	size_t np = (size_t)hsq_reader_trainer_n_params(t.tr);
	float *w = t.tr->net.w1, *before = malloc(np * sizeof *before);
	for (size_t i = 0; i < np; i++)
		w[i] = 3e37f;
	memcpy(before, w, np * sizeof *w);
	expect_invalid(hsq_reader_trainer_step(t.tr, t.d, 2, 1, &loss), "loss is not finite", "overflow");
	cr_expect(memcmp(before, w, np * sizeof *w) == 0);
	cr_expect_eq(t.tr->step, 0);
	free(before);

	float out[9 * 4];
	expect_invalid(hsq_reader_trainer_scores(t.tr, NULL, out), "null doc", "null doc");
	hsq_reader_doc empty = { .n = 0, .in = b->in };
	expect_invalid(hsq_reader_trainer_scores(t.tr, &empty, out), "0 positions", "empty doc");
	tiny_free(&t);
}

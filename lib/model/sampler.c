/* sampler.c - next-token selection: greedy, or temperature with top-k and
 * top-p (nucleus) truncation, from a seeded PRNG so runs are repeatable.
 * Order: top-k on the logits, then softmax at the temperature, then top-p
 * on those probabilities, then a draw. (llama.cpp applies temperature last;
 * top-p therefore sees sharper or flatter distributions here.) */
#include <math.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/vec_f32.h"

typedef struct candidate {
	float logit; /* later: probability */
	hsq_token id;
} candidate;

struct hsq_sampler {
	hsq_sampler_params p;
	uint64_t state;     /* splitmix64 state */
	candidate *cands;   /* [cap] scratch, reused across calls */
	int cap;
};

hsq_sampler_params hsq_sampler_default_params(void)
{
	hsq_sampler_params p = { 0.0f, 40, 0.95f, 0 };
	return p;
}

hsq_status hsq_sampler_new(const hsq_sampler_params *params, hsq_sampler **out)
{
	*out = NULL;
	if (!(params->temperature >= 0) || params->top_k < 0 || !(params->top_p > 0 && params->top_p <= 1))
		return hsq_fail(HSQ_ERR_INVALID_ARG,
				"invalid sampling parameters (temperature %g must be >= 0, top-k %d >= 0, top-p %g in (0,1])",
				params->temperature, params->top_k, params->top_p);
	hsq_sampler *s = calloc(1, sizeof *s);
	if (!s)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory creating a sampler");
	s->p = *params;
	s->state = params->seed;
	*out = s;
	return HSQ_OK;
}

void hsq_sampler_free(hsq_sampler *s)
{
	if (!s)
		return;
	free(s->cands);
	free(s);
}

/* splitmix64: small, well mixed, enough for sampling. */
static double next_uniform(hsq_sampler *s)
{
	uint64_t z = (s->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

static int by_logit_desc(const void *a, const void *b)
{
	const candidate *x = a, *y = b;
	if (x->logit != y->logit)
		return x->logit < y->logit ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* 16 lanes, each keeping the first index of its largest value (strictly
 * larger replaces), started at x[0]; then the largest lane, the lowest
 * index on a tie. The same pick as one scalar pass, which compared each
 * logit with the best so far through memory: a dependent chain of loads,
 * 4% of a gemma-3 decode step over 262,144 logits (perf). */
int hsq_argmax(const float *x, int n)
{
	int i = 1, best = 0;
	if (n >= 17) {
		vf16 m;
		for (int l = 0; l < 16; l++)
			m[l] = x[0];
		vi16 at = { 0 }, idx = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
		for (; i + 16 <= n; i += 16, idx += 16) {
			vf16 v = load16(x + i);
			vi16 gt = v > m;
			m = (vf16)((gt & (vi16)v) | (~gt & (vi16)m));
			at = (gt & idx) | (~gt & at);
		}
		for (int l = 0; l < 16; l++)
			if (m[l] > x[best] || (m[l] == x[best] && at[l] < best))
				best = at[l];
	}
	for (; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

hsq_token hsq_sampler_sample(hsq_sampler *s, const float *logits, int n_vocab)
{
	if (s->p.temperature <= 0.0f || s->p.top_k == 1)
		return hsq_argmax(logits, n_vocab);
	if (s->cap < n_vocab) {
		candidate *c = realloc(s->cands, (size_t)n_vocab * sizeof *c);
		if (!c) /* cannot sample without scratch: fall back to the mode */
			return hsq_argmax(logits, n_vocab);
		s->cands = c;
		s->cap = n_vocab;
	}
	candidate *c = s->cands;
	for (int i = 0; i < n_vocab; i++)
		c[i] = (candidate){ logits[i], i };
	qsort(c, (size_t)n_vocab, sizeof *c, by_logit_desc);
	int n = n_vocab;
	if (s->p.top_k > 0 && s->p.top_k < n)
		n = s->p.top_k;
	/* softmax at temperature over the kept candidates (sorted, so c[0] is max) */
	double sum = 0;
	float max = c[0].logit;
	for (int i = 0; i < n; i++) {
		c[i].logit = expf((c[i].logit - max) / s->p.temperature);
		sum += c[i].logit;
	}
	if (s->p.top_p < 1.0f) {
		double cum = 0;
		for (int i = 0; i < n; i++) {
			cum += c[i].logit / sum;
			if (cum >= s->p.top_p) {
				n = i + 1;
				break;
			}
		}
		sum = 0;
		for (int i = 0; i < n; i++)
			sum += c[i].logit;
	}
	double r = next_uniform(s) * sum, acc = 0;
	for (int i = 0; i < n; i++) {
		acc += c[i].logit;
		if (r < acc)
			return c[i].id;
	}
	return c[n - 1].id;
}

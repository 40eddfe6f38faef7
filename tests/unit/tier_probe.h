/* tier_probe.h - what the tier tests compare codes against: a context
 * that has read a text, a row of the full cache it held before
 * compression, and squared distances. */
#ifndef HSQ_TEST_TIER_PROBE_H
#define HSQ_TEST_TIER_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "hsq.h"
#include "kv/tiers.h"

/* A new context of n_ctx positions (one thread) that has evaluated the
 * first max_tok tokens of text, or all of them when fewer; the text must
 * give at least min_tok. *n_tok: the tokens evaluated. */
static inline hsq_context *tier_probe_prefill(hsq_model *model, const char *text, int n_ctx, int min_tok, int max_tok,
					      int *n_tok)
{
	hsq_context_params cp = hsq_context_default_params();
	cp.n_ctx = n_ctx;
	cp.n_threads = 1;
	hsq_context *c = NULL;
	hsq_token *toks = NULL;
	size_t n = 0;
	cr_assert_eq(hsq_context_new(model, &cp, &c), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_tokenize(model, text, strlen(text), -1, 0, &toks, &n), HSQ_OK, "%s", hsq_last_error());
	cr_assert_geq(n, (size_t)min_tok, "the sample text is %zu tokens", n);
	*n_tok = (int)(n < (size_t)max_tok ? n : (size_t)max_tok);
	cr_assert_eq(hsq_context_eval(c, toks, (size_t)*n_tok, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_free(toks);
	return c;
}

/* Row i of head g of layer l from a copy of the cache (planes of n_tok
 * rows of n_head_kv * head_dim floats per layer) into x; for keys (which
 * the cache holds after RoPE) rotated back before RoPE. */
static inline void tier_probe_row(const struct hsq_tiers *t, const float *cache, int n_tok, int l, int g, int i,
				  int is_key, float *x)
{
	size_t kvw = (size_t)t->n_head_kv * t->head_dim, plane = (size_t)n_tok * kvw;
	memcpy(x, cache + (size_t)l * plane + (size_t)i * kvw + (size_t)g * t->head_dim,
	       (size_t)t->head_dim * sizeof *x);
	if (is_key) {
		int32_t pos = i;
		tiers_rope_rows(t, &t->rope[t->layers[l].rope_table], x, &pos, 1, -1);
	}
}

static inline double tier_probe_sq_dist(const float *a, const float *b, int n)
{
	double s = 0.0;
	for (int d = 0; d < n; d++)
		s += ((double)a[d] - b[d]) * ((double)a[d] - b[d]);
	return s;
}

#endif

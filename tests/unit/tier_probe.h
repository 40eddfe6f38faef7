/* tier_probe.h - what the tier tests compare codes against: a row of the
 * full cache a context held before compression, and squared distances. */
#ifndef HSQ_TEST_TIER_PROBE_H
#define HSQ_TEST_TIER_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tiers.h"

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

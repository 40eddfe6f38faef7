/* tiers_pq.c - the router's key codes: a product quantizer of each head's
 * archived keys, with an error radius per key, held in the fast tier.
 *
 * The router must find the groups holding the keys a query matches best,
 * without reading L3. Each key (after RoPE, as a fetch decodes it, without
 * residuals) is cut into head_dim / 4 sub-vectors of 4 channels; each
 * sub-vector is replaced by the nearest of 16 centroids of its subspace (a
 * 4-bit index), and the distance |k - k~| between the key and what its
 * indices reconstruct is kept as an 8-bit radius, rounded up. A query
 * scores a key by
 *
 *     q . k~ + |q| r   >=   q . k      (Cauchy-Schwarz: |q . (k - k~)| <= |q| r)
 *
 * with head_dim / 4 table lookups (the table holds the query's dot product
 * with every centroid), and a group by its best key. So the score is an
 * upper bound of q . k over the group, like the per-channel bounds it
 * replaced, but per key and much tighter: a key the centroids represent
 * well gets little slack, and an outlier key, which a needle often is, is
 * never ranked below its true score (docs/tiers.md, Routing).
 *
 * The codes lie in blocks of TIER_PQ_BLOCK keys in L3 order, subspace by
 * subspace (tiers.h, tier_pq_nibble), so that 16 keys are scored at once
 * with one 16-lane table lookup per subspace (AVX-512; AVX2 takes two
 * 8-lane halves); the portable loop adds the same values in the same
 * order.
 *
 * The centroids and the radius step are fitted per head by k-means over
 * the head's archived keys when its groups are complete (tiers_pq_fit, at
 * the end of building or loading the tiers): the snapshot does not store
 * them, and the same L3 codes give the same centroids and codes bit for
 * bit, so a loaded snapshot routes exactly as the context that wrote it.
 * Groups added later (online compression) are coded with the centroids
 * already fitted; a key farther from them than the fitted ones coarsens
 * the head's radius unit, so every score stays a bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/threadpool.h"
#include "common/vec_f32.h"
#include "kv/tiers.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* At most this many keys train a head's centroids (every k-th key, in L3
 * order), and this many Lloyd iterations: enough to settle 16 centroids
 * in 4 dimensions, and bounded whatever the context length. */
#define PQ_FIT_MAX 4096
#define PQ_FIT_ITERATIONS 8

/* The centroids of a head's subspaces transposed, cbt[s][j][c] =
 * centroid c of subspace s, channel j, so that 16 distances are one
 * vector (nearest). [m][TIER_PQ_SUB][TIER_PQ_K] floats. */
static void transpose_centroids(const float *cent, int m, float *cbt)
{
	for (int s = 0; s < m; s++)
		for (int c = 0; c < TIER_PQ_K; c++)
			for (int j = 0; j < TIER_PQ_SUB; j++)
				cbt[((size_t)s * TIER_PQ_SUB + j) * TIER_PQ_K + c] =
					cent[((size_t)s * TIER_PQ_K + c) * TIER_PQ_SUB + j];
}

/* Index of the centroid of one subspace (cb: [TIER_PQ_K][TIER_PQ_SUB];
 * cbt: the same transposed, [TIER_PQ_SUB][TIER_PQ_K]) nearest to
 * sub-vector x, the lowest index on ties. Every build computes a squared
 * distance as (((0 + e0^2) + e1^2) + e2^2) + e3^2, each square rounded
 * before its addition (what gcc makes of the portable loop), so the
 * AVX-512 path picks the same centroids: the codes do not depend on it. */
static int nearest(const float *cb, const float *cbt, const float *x)
{
#if defined(__AVX512F__) && TIER_PQ_K == 16
	(void)cb;
	vf16 d = { 0 };
	for (int j = 0; j < TIER_PQ_SUB; j++) {
		vf16 e = x[j] - load16(cbt + j * TIER_PQ_K);
		vf16 sq = e * e;
		__asm__("" : "+v"(sq)); /* not contracted into an FMA with the addition */
		d = d + sq;
	}
	__m512 dv = (__m512)d; /* a NaN distance never wins, as below: made +inf */
	dv = _mm512_mask_mov_ps(dv, _mm512_cmp_ps_mask(dv, dv, _CMP_UNORD_Q), _mm512_set1_ps(INFINITY));
	float m = _mm512_reduce_min_ps(dv);
	if (!(m < INFINITY))
		return 0;
	return __builtin_ctz(_mm512_cmp_ps_mask(dv, _mm512_set1_ps(m), _CMP_EQ_OQ));
#else
	(void)cbt;
	int best = 0;
	float best_d = INFINITY;
	for (int c = 0; c < TIER_PQ_K; c++) {
		float d = 0.0f;
		for (int j = 0; j < TIER_PQ_SUB; j++) {
			float e = x[j] - cb[c * TIER_PQ_SUB + j];
			d += e * e;
		}
		if (d < best_d) {
			best_d = d;
			best = c;
		}
	}
	return best;
#endif
}

/* Key of L3 token i of head h after RoPE, as the router codes it. */
static void router_key(const struct hsq_tiers *t, const tier_head *h, const rope_table *r, int i, float *k)
{
	float v[HSQ_CODEC_MAX_DIM];
	tiers_decode_token(t, h, h->l3_code + (size_t)i * tier_code4_pair(t), k, v);
	tiers_rope_rows(t, r, k, &h->l3_pos[i], 1, +1);
}

/* Writes the indices of key k (L3 token i); cbt: the head's centroids
 * transposed (transpose_centroids). */
static void encode_key(const struct hsq_tiers *t, tier_head *h, const float *cbt, const float *k, int i)
{
	int m = tier_pq_subspaces(t->head_dim);
	for (int s = 0; s < m; s++) {
		int c = nearest(h->pq_centroid + (size_t)s * TIER_PQ_K * TIER_PQ_SUB,
				cbt + (size_t)s * TIER_PQ_SUB * TIER_PQ_K, k + s * TIER_PQ_SUB);
		uint8_t *b = h->pq_code + tier_pq_nibble(t->head_dim, i, s);
		*b = (uint8_t)(i % 2 ? (*b & 0x0f) | c << 4 : (*b & 0xf0) | c);
	}
}

/* |k - k~| for key k (L3 token i) and the indices it holds. */
static double code_error(const struct hsq_tiers *t, const tier_head *h, const float *k, int i)
{
	int m = tier_pq_subspaces(t->head_dim);
	double e2 = 0.0;
	for (int s = 0; s < m; s++) {
		uint8_t b = h->pq_code[tier_pq_nibble(t->head_dim, i, s)];
		const float *c = h->pq_centroid + ((size_t)s * TIER_PQ_K + (i % 2 ? b >> 4 : b & 15)) * TIER_PQ_SUB;
		for (int j = 0; j < TIER_PQ_SUB; j++) {
			double d = (double)k[s * TIER_PQ_SUB + j] - c[j];
			e2 += d * d;
		}
	}
	return sqrt(e2);
}

/* The radius unit for a largest error max_err: max_err / 255, rounded
 * up so that 255 units hold it. */
static float radius_step(double max_err)
{
	float step = (float)(max_err / 255.0);
	while ((double)step * 255.0 < max_err)
		step = nextafterf(step, INFINITY);
	return step;
}

/* The radius code of an error: rounded up, so that step * code >= err
 * (err <= 255 step). */
static uint8_t radius_code(float step, double err)
{
	if (!(step > 0.0f))
		return 0;
	double c = ceil(err / step);
	int r = c > 255.0 ? 255 : (int)c;
	while (r < 255 && (double)step * r < err)
		r++;
	return (uint8_t)r;
}

hsq_status tiers_pq_grow(const struct hsq_tiers *t, tier_head *h, int cap_l3)
{
	size_t have = tier_pq_bytes(t->head_dim, h->pq_cap), need = tier_pq_bytes(t->head_dim, cap_l3);
	size_t have_r = tier_pq_blocks(h->pq_cap), need_r = tier_pq_blocks(cap_l3);
	if (need <= have)
		return HSQ_OK;
	uint8_t *p = realloc(h->pq_code, need);
	if (p)
		h->pq_code = p;
	uint8_t *r = p ? realloc(h->pq_radius, need_r) : NULL;
	if (r)
		h->pq_radius = r;
	double *e = r ? realloc(h->pq_err, need_r * sizeof *e) : NULL;
	if (!e)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the router codes of %d tokens", cap_l3);
	h->pq_err = e;
	/* the keys of a last block not yet there score as code 0, radius 0 */
	memset(p + have, 0, need - have);
	memset(r + have_r, 0, need_r - have_r);
	memset(e + have_r, 0, (need_r - have_r) * sizeof *e);
	h->pq_cap = cap_l3;
	return HSQ_OK;
}

hsq_status tiers_pq_add(const struct hsq_tiers *t, tier_head *h, const rope_table *r, int first, int n)
{
	if (!h->pq_centroid)
		/* before the fit, which codes every key; after it, a head that had
		 * no groups then is fitted on its first online group */
		return t->pq_fitted ? tiers_pq_fit(t, h, r) : HSQ_OK;
	float k[HSQ_CODEC_MAX_DIM], cbt[HSQ_CODEC_MAX_DIM * TIER_PQ_K];
	transpose_centroids(h->pq_centroid, tier_pq_subspaces(t->head_dim), cbt);
	for (int i = first; i < first + n; i++) {
		router_key(t, h, r, i, k);
		encode_key(t, h, cbt, k, i);
		double err = h->pq_err[i] = code_error(t, h, k, i);
		if (err > (double)h->pq_step * 255.0) {
			/* a key farther from the centroids than any they were
			 * fitted on: a coarser unit, and every radius so far coded
			 * again in it from its error (decoding every key again
			 * for it was 5% of a 2K hsq decode step on SmolLM2,
			 * whose few fitted keys online keys often exceed) */
			h->pq_step = radius_step(err);
			for (int j = 0; j < i; j++)
				h->pq_radius[j] = radius_code(h->pq_step, h->pq_err[j]);
		}
		h->pq_radius[i] = radius_code(h->pq_step, err);
	}
	return HSQ_OK;
}

hsq_status tiers_pq_fit(const struct hsq_tiers *t, tier_head *h, const rope_table *r)
{
	int hd = t->head_dim, m = tier_pq_subspaces(hd), n = h->n_l3;
	if (n == 0)
		return HSQ_OK;
	int stride = (n + PQ_FIT_MAX - 1) / PQ_FIT_MAX, n_fit = (n + stride - 1) / stride;
	float *x = malloc((size_t)n_fit * hd * sizeof *x);
	double *sum = malloc(TIER_PQ_K * TIER_PQ_SUB * sizeof *sum), *err = h->pq_err;
	float *cent = h->pq_centroid ? h->pq_centroid : malloc(tier_pq_centroid_bytes(hd));
	float k[HSQ_CODEC_MAX_DIM];
	if (!x || !sum || !cent) {
		free(x);
		free(sum);
		if (cent != h->pq_centroid)
			free(cent);
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory fitting the router codes of %d keys", n);
	}
	h->pq_centroid = cent;
	for (int i = 0; i < n_fit; i++)
		router_key(t, h, r, i * stride, x + (size_t)i * hd);
	for (int s = 0; s < m; s++) {
		float *cb = cent + (size_t)s * TIER_PQ_K * TIER_PQ_SUB;
		/* start from keys spread evenly over the context, in order */
		for (int c = 0; c < TIER_PQ_K; c++)
			memcpy(cb + c * TIER_PQ_SUB, x + (size_t)((int64_t)c * n_fit / TIER_PQ_K) * hd + s * TIER_PQ_SUB,
			       TIER_PQ_SUB * sizeof *cb);
		for (int it = 0; it < PQ_FIT_ITERATIONS; it++) {
			int count[TIER_PQ_K] = { 0 };
			float cbt[TIER_PQ_SUB * TIER_PQ_K];
			transpose_centroids(cb, 1, cbt);
			memset(sum, 0, TIER_PQ_K * TIER_PQ_SUB * sizeof *sum);
			for (int i = 0; i < n_fit; i++) {
				const float *xs = x + (size_t)i * hd + s * TIER_PQ_SUB;
				int c = nearest(cb, cbt, xs);
				count[c]++;
				for (int j = 0; j < TIER_PQ_SUB; j++)
					sum[c * TIER_PQ_SUB + j] += xs[j];
			}
			for (int c = 0; c < TIER_PQ_K; c++) /* an empty cluster keeps its centroid */
				for (int j = 0; count[c] && j < TIER_PQ_SUB; j++)
					cb[c * TIER_PQ_SUB + j] = (float)(sum[c * TIER_PQ_SUB + j] / count[c]);
		}
	}
	/* code every key, then the radius step: the largest error in 255 steps */
	double max_err = 0.0;
	float cbt[HSQ_CODEC_MAX_DIM * TIER_PQ_K];
	transpose_centroids(cent, m, cbt);
	for (int i = 0; i < n; i++) {
		const float *key = k;
		if (stride == 1) /* every key trained the centroids: x holds it */
			key = x + (size_t)i * hd;
		else
			router_key(t, h, r, i, k);
		encode_key(t, h, cbt, key, i);
		err[i] = code_error(t, h, key, i);
		max_err = err[i] > max_err ? err[i] : max_err;
	}
	h->pq_step = radius_step(max_err);
	for (int i = 0; i < n; i++)
		h->pq_radius[i] = radius_code(h->pq_step, err[i]);
	free(x);
	free(sum);
	return HSQ_OK;
}

typedef struct fit_job {
	struct hsq_tiers *t;
	hsq_status *status; /* [n_layer * n_head_kv] */
} fit_job;

static void fit_task(void *arg, int task, int thread)
{
	fit_job *j = arg;
	struct hsq_tiers *t = j->t;
	tier_layer *L = &t->layers[task / t->n_head_kv];
	tier_head *h = &L->heads[task % t->n_head_kv];
	j->status[task] = h->n_group > 0 ? tiers_pq_fit(t, h, &t->rope[L->rope_table]) : HSQ_OK;
}

hsq_status tiers_pq_fit_all(struct hsq_tiers *t, hsq_pool *pool)
{
	int n = t->n_layer * t->n_head_kv;
	fit_job j = { t, calloc((size_t)(n > 0 ? n : 1), sizeof(hsq_status)) };
	if (!j.status)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory fitting the router codes");
	/* one task per head: each head's fit reads and writes only that head,
	 * so the codes do not depend on the thread count */
	pool_run(pool, n, fit_task, &j);
	t->pq_fitted = 1;
	hsq_status st = HSQ_OK;
	for (int i = 0; i < n && !st; i++)
		st = j.status[i];
	free(j.status);
	/* the workers' messages stay on their threads: say it again here */
	return st ? hsq_fail(st, "out of memory fitting the router codes of %d heads", n) : HSQ_OK;
}

#ifdef __AVX512F__
#include <immintrin.h>

typedef unsigned char vu8x16 __attribute__((vector_size(16)));

/* The scores of a block's 16 keys for n tables (rows of `row` floats from
 * table, slacks from slack) folded into *best, the first table's scores
 * replacing it when first is set. */
static inline __attribute__((always_inline)) void score_heads(const uint8_t *blk, int m, const float *table,
							      size_t row, const float *slack, vf16 rad, const int n,
							      int first, vf16 *best)
{
	const vu8x16 spread = { 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7 };
	const vu8x16 shift = { 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4 };
	vf16 acc[8];
#pragma GCC unroll 8
	for (int a = 0; a < n; a++)
		acc[a] = (vf16){ 0 };
	for (int s = 0; s < m; s++) {
		/* one 8-byte load (a memcpy into the 16-byte vector went through
		 * the stack, and its store-forwarding stall was a third of the
		 * router's time: perf annotate) */
		vu8x16 raw = (vu8x16)_mm_loadl_epi64((const __m128i *)(blk + (size_t)s * (TIER_PQ_BLOCK / 2)));
		vu8x16 nib = (__builtin_shuffle(raw, spread) >> shift) & 15;
		vi16 idx = __builtin_convertvector(nib, vi16);
#pragma GCC unroll 8
		for (int a = 0; a < n; a++)
			acc[a] += __builtin_shuffle(load16(table + a * row + (size_t)s * TIER_PQ_K), idx);
	}
#pragma GCC unroll 8
	for (int a = 0; a < n; a++) {
		vf16 sc = acc[a] + slack[a] * rad;
		if (first && a == 0) {
			*best = sc;
			continue;
		}
		vi16 gt = sc > *best;
		*best = (vf16)((gt & (vi16)sc) | (~gt & (vi16)*best));
	}
}
#endif

/* Scores of the keys of block b (TIER_PQ_BLOCK of them; a last block's
 * missing keys score as code 0) for the G tables, each plus its query's
 * slack (|q| step) times the key's radius code, the largest over the
 * tables into out[TIER_PQ_BLOCK]. Each score sums the subspaces in order
 * from 0.0f, then adds the slack. */
static void score_block(const uint8_t *blk, const uint8_t *radius, int m, const float *table, const float *slack,
			int G, float *out)
{
	size_t row = (size_t)m * TIER_PQ_K;
#ifdef __AVX512F__
	vu8x16 rc;
	memcpy(&rc, radius, sizeof rc);
	vf16 rad = __builtin_convertvector(__builtin_convertvector(rc, vi16), vf16), best = { 0 };
	for (int hq = 0; hq < G; hq += 8) {
		const float *tb = table + hq * row, *sl = slack + hq;
		switch (G - hq < 8 ? G - hq : 8) { /* a constant n keeps the sums in registers */
		case 1: score_heads(blk, m, tb, row, sl, rad, 1, hq == 0, &best); break;
		case 2: score_heads(blk, m, tb, row, sl, rad, 2, hq == 0, &best); break;
		case 3: score_heads(blk, m, tb, row, sl, rad, 3, hq == 0, &best); break;
		case 4: score_heads(blk, m, tb, row, sl, rad, 4, hq == 0, &best); break;
		case 5: score_heads(blk, m, tb, row, sl, rad, 5, hq == 0, &best); break;
		case 6: score_heads(blk, m, tb, row, sl, rad, 6, hq == 0, &best); break;
		case 7: score_heads(blk, m, tb, row, sl, rad, 7, hq == 0, &best); break;
		default: score_heads(blk, m, tb, row, sl, rad, 8, hq == 0, &best); break;
		}
	}
	memcpy(out, &best, sizeof best);
#elif defined(__AVX2__)
	/* 8 lanes: a 16-entry table lookup is a two-register shuffle (two
	 * vpermps and a blend), keys 0-7 then 8-15 of the block */
	typedef int vi8 __attribute__((vector_size(32)));
	for (int half = 0; half < 2; half++) {
		vf8 best = { 0 };
		vi8 rad;
		for (int l = 0; l < 8; l++)
			rad[l] = radius[half * 8 + l];
		vf8 radf = __builtin_convertvector(rad, vf8);
		for (int hq = 0; hq < G; hq++) {
			vf8 acc = { 0 };
			for (int s = 0; s < m; s++) {
				const uint8_t *b = blk + (size_t)s * (TIER_PQ_BLOCK / 2) + half * 4;
				vi8 idx = { b[0] & 15, b[0] >> 4, b[1] & 15, b[1] >> 4, b[2] & 15, b[2] >> 4, b[3] & 15, b[3] >> 4 };
				vf8 lo, hi;
				memcpy(&lo, table + hq * row + (size_t)s * TIER_PQ_K, sizeof lo);
				memcpy(&hi, table + hq * row + (size_t)s * TIER_PQ_K + 8, sizeof hi);
				acc += __builtin_shuffle(lo, hi, idx);
			}
			vf8 sc = acc + slack[hq] * radf;
			if (hq == 0) {
				best = sc;
				continue;
			}
			vi8 gt = sc > best;
			best = (vf8)((gt & (vi8)sc) | (~gt & (vi8)best));
		}
		memcpy(out + half * 8, &best, sizeof best);
	}
#else
	for (int i = 0; i < TIER_PQ_BLOCK; i++) {
		float best = -INFINITY;
		for (int hq = 0; hq < G; hq++) {
			float sc = 0.0f;
			for (int s = 0; s < m; s++) {
				uint8_t b = blk[(size_t)s * (TIER_PQ_BLOCK / 2) + i / 2];
				sc += table[hq * row + (size_t)s * TIER_PQ_K + (i % 2 ? b >> 4 : b & 15)];
			}
			sc = sc + slack[hq] * (float)radius[i];
			best = hq == 0 || sc > best ? sc : best;
		}
		out[i] = best;
	}
#endif
}

void tiers_pq_group_scores(const struct hsq_tiers *t, const tier_head *h, const float *q, int G, float *table,
			   float *key_score, float *score)
{
	int hd = t->head_dim, m = tier_pq_subspaces(hd);
	size_t row = (size_t)m * TIER_PQ_K;
	float slack[TIER_PQ_MAX_G];
	for (int hq = 0; hq < G; hq++) {
		const float *qh = q + (size_t)hq * hd;
		slack[hq] = sqrtf(dot_f32(qh, qh, hd)) * h->pq_step;
		for (int s = 0; s < m; s++)
			for (int c = 0; c < TIER_PQ_K; c++)
				table[hq * row + (size_t)s * TIER_PQ_K + c] =
					dot_f32(qh + s * TIER_PQ_SUB,
						h->pq_centroid + ((size_t)s * TIER_PQ_K + c) * TIER_PQ_SUB, TIER_PQ_SUB);
	}
	size_t block_bytes = tier_pq_bytes(hd, TIER_PQ_BLOCK);
	for (int b = 0; b * TIER_PQ_BLOCK < h->n_l3; b++)
		score_block(h->pq_code + (size_t)b * block_bytes, h->pq_radius + (size_t)b * TIER_PQ_BLOCK, m, table,
			    slack, G, key_score + (size_t)b * TIER_PQ_BLOCK);
	for (int k = 0; k < h->n_group; k++) {
		float best = -INFINITY;
		for (int i = h->g_start[k]; i < h->g_start[k + 1]; i++)
			best = key_score[i] > best ? key_score[i] : best;
		score[k] = best;
	}
}

/* tiers_attend.c - decode through the HSQ tiers: route, fetch, attend,
 * and compress the tail online.
 *
 * A chunk of tokens goes through three steps, each in parallel:
 *   1. route, for each token and KV head (one task): score every L2 group
 *      against the query heads that share the KV head (the maximum over
 *      them), by the bound of q.k its keys' router codes give and by its
 *      key summary, and take groups from the two rankings in turn while
 *      their tokens fit the budget; a retrieval head (the few with the
 *      highest induction score, tiers.h) takes every group;
 *   2. fetch: decode each group that some token of the chunk takes, once,
 *      into its rows of the head's decoded copy of L3 (which keeps it for
 *      the next calls), the keys rotated to their positions, in fp16 (for
 *      one token taking a few new groups, by the route task of the head);
 *   3. attend, for each token and KV head, for each query head (up to four
 *      at once sharing each row load, tiers_kernels.h): softmax over L1
 *      tokens, the summaries of the groups not fetched (score + log(group
 *      size): a summary stands for that many tokens with the same key),
 *      the fetched tokens and the tail up to the token's own position;
 *      fetched groups' summaries are masked so no token counts twice.
 * A chunk of a few tokens (decode) runs step 3 split finer, over chunks of
 * rows and 32-column blocks (split_attend), with the same sums.
 * Decoding is deterministic, so where a group's rows come from changes no
 * bit of the result: a chunk gives the logits of its tokens one at a time.
 * Sliding-window layers only hold L1 and the tail, masked to the window. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/threadpool.h"
#include "common/vec_f16.h"
#include "common/vec_f32.h"
#include "kv/tiers.h"
#include "kv/tiers_kernels.h"

/* A group in a ranking: its score and index in one 64-bit key whose
 * unsigned order is the ranking's order (higher score first, ties to the
 * lower group index). High word: the score's bits mapped to an unsigned
 * order (negative floats flipped whole, others with the sign bit set);
 * low word: the group index complemented. Scores are never NaN. */
typedef uint64_t ranked_group;

static inline ranked_group rank_key(float score, int32_t group)
{
	uint32_t u;
	score += 0.0f; /* -0 ranks as +0, as the comparison of floats has it */
	memcpy(&u, &score, sizeof u);
	u = u >> 31 ? ~u : u | 0x80000000u;
	return (uint64_t)u << 32 | (uint32_t)~(uint32_t)group;
}

static inline int32_t rank_group(ranked_group r)
{
	return (int32_t)~(uint32_t)r;
}

/* Sorts n groups into the ranking's order (best first) by a stable radix
 * sort on the score word, 8 bits a pass, from a[] in ascending group
 * order, so that equal scores keep the lower group first as the full key
 * orders them; tmp holds n. The router takes a few hundred groups from
 * each ranking: a heap popped them one at a time, a branch mispredicted
 * at nearly every level (heap_sift was 5.5% of an 8K decode step on
 * SmolLM2, perf); the radix passes do not branch on the data. A pass
 * whose digit is the same for every group is skipped. */
static void rank_sort(ranked_group *a, ranked_group *tmp, int n)
{
	if (n < 2)
		return;
	uint32_t count[4][256] = { { 0 } };
	for (int i = 0; i < n; i++) {
		uint32_t u = ~(uint32_t)(a[i] >> 32); /* ascending in u is descending in score */
		for (int p = 0; p < 4; p++)
			count[p][u >> (8 * p) & 255]++;
	}
	ranked_group *src = a, *dst = tmp;
	for (int p = 0; p < 4; p++) {
		uint32_t at = 0, *c = count[p];
		if (c[~(uint32_t)(src[0] >> 32) >> (8 * p) & 255] == (uint32_t)n)
			continue;
		for (int b = 0; b < 256; b++) {
			uint32_t m = c[b];
			c[b] = at;
			at += m;
		}
		for (int i = 0; i < n; i++)
			dst[c[~(uint32_t)(src[i] >> 32) >> (8 * p) & 255]++] = src[i];
		ranked_group *swap = src;
		src = dst;
		dst = swap;
	}
	if (src != a)
		memcpy(a, src, (size_t)n * sizeof *a);
}

/* Grows a scratch buffer; returns 0 or -1. */
static int reserve(void **p, int need, size_t elem)
{

	void *q = realloc(*p, (size_t)(need > 0 ? need : 1) * elem);
	if (!q)
		return -1;
	*p = q;
	return 0;
}

static hsq_status ensure_scratch(struct hsq_tiers *t, int groups, int fetch, int scores, int n_pos, int keys)
{
	int hd = t->head_dim;
	for (int i = 0; i < t->n_threads; i++) {
		tier_scratch *x = &t->scratch[i];
		if (groups > x->cap_groups || !x->gk) {
			if (reserve(&x->rank, 3 * groups, sizeof(ranked_group)) ||
			    reserve((void **)&x->gscore, groups, sizeof(float)) ||
			    reserve((void **)&x->pq_table, t->n_head / t->n_head_kv * hd * TIER_PQ_K, sizeof(float)) ||
			    reserve((void **)&x->fetched, groups, 1) || reserve((void **)&x->gk, groups, sizeof *x->gk) ||
			    reserve((void **)&x->gv, groups, sizeof *x->gv) ||
			    reserve((void **)&x->gsize, groups, sizeof *x->gsize) ||
			    reserve((void **)&x->sum_bias, groups, sizeof *x->sum_bias) ||
			    reserve((void **)&x->sum_score, groups, sizeof *x->sum_score))
				goto nomem;
			x->cap_groups = groups;
		}
		if (fetch > x->cap_fetch) {
			if (reserve((void **)&x->fpos, fetch, sizeof(int32_t)) ||
			    reserve((void **)&x->fk, fetch, hd * sizeof *x->fk) ||
			    reserve((void **)&x->fv, fetch, hd * sizeof *x->fv))
				goto nomem;
			x->cap_fetch = fetch;
		}
		if (keys > x->cap_keys) {
			if (reserve((void **)&x->kscore, keys, sizeof(float)))
				goto nomem;
			x->cap_keys = keys;
		}
		if (scores > x->cap_scores) {
			if (reserve((void **)&x->s, TIERS_KERNEL_MAXQ * scores, sizeof(float)))
				goto nomem;
			x->cap_scores = scores;
		}
		if (n_pos > x->cap_pos) {
			if (reserve((void **)&x->ps, n_pos, sizeof(float)) ||
			    reserve((void **)&x->covered, n_pos, 1))
				goto nomem;
			memset(x->covered, 0, (size_t)n_pos);
			x->cap_pos = n_pos;
		}
	}
	return HSQ_OK;
nomem:
	return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the tier attention scratch");
}

typedef struct attend_job {
	struct hsq_tiers *t;
	tier_layer *L;
	const float *q;        /* [n][n_head * hd] */
	const int *pos;        /* [n] */
	int n;
	int budget;            /* tokens per head; INT_MAX = every group */
	const uint16_t *full_k, *full_v; /* probe: the layer's full cache (fp16 ring) or NULL */
	int full_cap;
	float *out;            /* [n][n_head * hd] */
	int32_t *trace;        /* [n * H][max_groups] fetched group ids */
	int *n_trace;          /* [n * H] */
	int max_groups;
	double *recall;        /* [n * H] summed over the head's query heads */
	int use_cache;         /* 1: fetched groups are read from the heads'
				* decoded rows (filled before the attention
				* tasks run, read only by them) */
	int fill_in_route;     /* 1: each route task decodes the groups it takes
				* that are not decoded yet, when they are few
				* (one token: one task per KV head, so no two
				* tasks share a head's rows); step 2 then finds
				* nothing left and runs no region */
	tier_score_fn score;   /* the router's group scores (the backend's op) */
	void *score_user;
} attend_job;

/* The router (docs/tiers.md, Decoding): marks in fetched[] the groups of
 * head h that a token's queries q ([G][hd], the query heads sharing the KV
 * head) take under budget tokens. Two rankings take turns: by the bound of
 * q.k over each group's keys that the router codes give (tiers_pq.c),
 * which finds a group holding one key the query matches strongly (a
 * needle) even when its mean key does not; and by q.k_summary, which finds
 * the groups whose attention mass is spread over many keys. Each turn
 * takes the next group of its ranking that is not taken yet and still
 * fits; a group that would overflow the budget is skipped. A score is the
 * largest over the G query heads. x: the task's scratch (rankings of
 * 2 n_group entries and n_group more for sorting them, the router's
 * tables and scores); sum_dots: NULL, or where each query head's
 * q.k_summary go (G rows of n_group). */
static void route(const struct hsq_tiers *t, const tier_head *h, const float *q, int G, int hd, int budget,
		  tier_score_fn score, void *score_user, tier_scratch *x, float *const *sum_dots, uint8_t *fetched)
{
	int ng = h->n_group;
	ranked_group *by_bound = x->rank, *by_mean = by_bound + ng;
	int coded = h->pq_centroid != NULL; /* not when fitting it ran out of memory */
	if (coded)
		score(score_user, t, h, q, G, x->pq_table, x->kscore, x->gscore);
	/* q.k_summary, the largest over the query heads, up to four heads at
	 * a time through sum_dots[head] when given (the split attention's
	 * score rows, which then take them: split_scores_task), else through
	 * x->s (free until the attention) */
	float *best = x->sum_score;
	for (int k = 0; k < ng; k++)
		best[k] = -INFINITY;
	for (int hq0 = 0; hq0 < G; hq0 += TIERS_KERNEL_MAXQ) {
		int Q = G - hq0 < TIERS_KERNEL_MAXQ ? G - hq0 : TIERS_KERNEL_MAXQ;
		const float *qs[TIERS_KERNEL_MAXQ];
		float *dots[TIERS_KERNEL_MAXQ];
		for (int i = 0; i < Q; i++) {
			qs[i] = q + (size_t)(hq0 + i) * hd;
			dots[i] = sum_dots ? sum_dots[hq0 + i] : x->s + (size_t)i * x->cap_scores;
		}
		tiers_scores(qs, Q, h->sum_k, (size_t)hd, ng, hd, 1.0f, NULL, dots);
		for (int i = 0; i < Q; i++)
			for (int k = 0; k < ng; k++)
				best[k] = dots[i][k] > best[k] ? dots[i][k] : best[k];
	}
	for (int k = 0; k < ng; k++) {
		by_bound[k] = rank_key(coded ? x->gscore[k] : best[k], k);
		by_mean[k] = rank_key(best[k], k);
	}
	rank_sort(by_bound, by_mean + ng, ng);
	rank_sort(by_mean, by_mean + ng, ng);
	ranked_group *list[2] = { by_bound, by_mean };
	int next[2] = { 0, 0 }, total = 0, largest = 0; /* next: each ranking's first group not passed */
	for (int k = 0; k < ng; k++)
		largest = h->g_start[k + 1] - h->g_start[k] > largest ? h->g_start[k + 1] - h->g_start[k] : largest;
	for (int turn = 0; (next[0] < ng || next[1] < ng) && total < budget; turn ^= 1) {
		if (budget - total < largest) {
			/* Near the budget most groups no longer fit: a ranking's
			 * next take is its best group not taken that fits, and
			 * the groups passed over stay for its later turns. */
			int pick = -1;
			for (int i = next[turn]; i < ng && pick < 0; i++) {
				int k = rank_group(list[turn][i]);
				if (!fetched[k] && total + h->g_start[k + 1] - h->g_start[k] <= budget)
					pick = i;
			}
			if (pick < 0) {
				next[turn] = ng;
				continue;
			}
			int k = rank_group(list[turn][pick]);
			fetched[k] = 1;
			total += h->g_start[k + 1] - h->g_start[k];
			continue;
		}
		while (next[turn] < ng) { /* every group fits here: skip those taken */
			int k = rank_group(list[turn][next[turn]++]);
			if (fetched[k])
				continue;
			fetched[k] = 1;
			total += h->g_start[k + 1] - h->g_start[k];
			break;
		}
	}
}

/* s[i] = exp(s[i] - max) in place, 0 where s[i] is -INFINITY (masked);
 * returns their sum (0 when every score is masked). 16 lanes with vexp16,
 * a fixed order over the row up to its last unmasked score: a token of a
 * chunk sees the chunk's later tail tokens masked at the end of its row,
 * and must sum exactly as when it is decoded alone, without them. */
static float softmax_masked_exp(float *s, int n)
{
	const vf16 zero = { 0 }, neg_inf = zero - INFINITY;
	vf16 mx16 = neg_inf, sum16 = zero;
	float m = -INFINITY, sum;
	while (n > 0 && s[n - 1] == -INFINITY)
		s[--n] = 0.0f;
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		vf16 x = load16(s + i);
		vi16 gt = x > mx16;
		mx16 = (vf16)((gt & (vi16)x) | (~gt & (vi16)mx16));
	}
	for (int l = 0; l < 16; l++)
		m = mx16[l] > m ? mx16[l] : m;
	for (; i < n; i++)
		m = s[i] > m ? s[i] : m;
	for (i = 0; i + 16 <= n; i += 16) {
		vf16 x = load16(s + i);
		vi16 keep = x != neg_inf;
		vf16 e = (vf16)(keep & (vi16)vexp16(x - m));
		memcpy(s + i, &e, sizeof e);
		sum16 += e;
	}
	sum = hsum16(sum16);
	for (; i < n; i++) {
		s[i] = s[i] == -INFINITY ? 0.0f : expf_softmax(s[i] - m);
		sum += s[i];
	}
	return sum;
}

/* at[i] = sr[i] + off for the Q heads: where a run of rows starts in
 * each head's scores. */
static void rows_from(float **at, float *const *sr, int Q, int off)
{
	for (int i = 0; i < Q; i++)
		at[i] = sr[i] + off;
}

/* Decodes group k of head h into fp16 rows dk, dv ([group size][head_dim]
 * each), the keys rotated to their positions. */
static void decode_group(const struct hsq_tiers *t, const tier_layer *L, const tier_head *h, int k, uint16_t *dk,
			 uint16_t *dv)
{
	const rope_table *R = &t->rope[L->rope_table];
	int first = h->g_start[k], size = h->g_start[k + 1] - first, hd = t->head_dim;
	float kf[HSQ_CODEC_MAX_DIM], vf[HSQ_CODEC_MAX_DIM];
	for (int i = 0; i < size; i++) {
		tiers_decode_token_res(t, h, h->l3_code + (size_t)(first + i) * tier_code4_pair(t),
				       h->has_res ? h->l3_res + (size_t)(first + i) * t->code4 : NULL, kf, vf);
		tiers_rope_rows(t, R, kf, &h->l3_pos[first + i], 1, +1);
		f16_row_from_f32(dk + (size_t)i * hd, kf, hd);
		f16_row_from_f32(dv + (size_t)i * hd, vf, hd);
	}
}

/* Groups a route task decodes itself (fill_in_route): after the first
 * steps of a decode, a token's router takes a few groups that no earlier
 * token took, too few to be worth a region (a fork and a join) of their
 * own; the first steps take hundreds, which the region spreads over the
 * threads. */
#define TIERS_ROUTE_FILLS 32

/* Step 1 for one token and KV head: the groups to fetch, in group order,
 * into the task's row of the trace. For a chunk the split attention can
 * take, the router's q.k_summary dots go to the summaries' rows of the
 * split scores, and t->sum_rows[task] says what the summary rows need
 * (enum sum_rows). */
enum sum_rows {
	SUM_ROWS_SCORE,  /* score the summaries */
	SUM_ROWS_DOTS,   /* the router left q.k_summary in the rows: scale them */
	SUM_ROWS_MASKED, /* every group fetched: every summary masked */
};

static void route_task(void *arg, int task, int thread)
{
	const attend_job *j = arg;
	struct hsq_tiers *t = j->t;
	const tier_layer *L = j->L;
	tier_scratch *x = &t->scratch[thread];
	int H = t->n_head_kv, G = t->n_head / H, hd = t->head_dim;
	int ti = task / H, g = task % H;
	const tier_head *h = &L->heads[g];
	int32_t *tr = j->trace + (size_t)task * j->max_groups;
	int n = 0, split = j->n <= t->cap_split_tok && G <= TIER_PQ_MAX_G;
	uint8_t rows = SUM_ROWS_SCORE;
	if (h->n_group > 0 && j->budget > 0) {
		if (j->budget == INT_MAX || h->retrieval) {
			for (int k = 0; k < h->n_group; k++)
				tr[n++] = k;
			rows = SUM_ROWS_MASKED;
		} else {
			float *dots[TIER_PQ_MAX_G];
			for (int i = 0; split && i < G; i++)
				dots[i] = t->split_s + ((size_t)ti * t->n_head + (size_t)g * G + i) * t->cap_split_rows +
					  h->n_l1;
			memset(x->fetched, 0, (size_t)h->n_group);
			route(t, h, j->q + (size_t)ti * t->n_head * hd + (size_t)g * G * hd, G, hd, j->budget, j->score,
			      j->score_user, x, split ? dots : NULL, x->fetched);
			for (int k = 0; k < h->n_group; k++)
				if (x->fetched[k])
					tr[n++] = k;
			rows = split ? SUM_ROWS_DOTS : SUM_ROWS_SCORE;
		}
	}
	if (split)
		t->sum_rows[task] = rows;
	j->n_trace[task] = n;
	if (!j->fill_in_route)
		return;
	int new_groups = 0;
	for (int f = 0; f < n; f++)
		new_groups += !h->g_decoded[tr[f]];
	if (new_groups > TIERS_ROUTE_FILLS) /* the first steps: left to step 2's region, in parallel */
		return;
	for (int f = 0; f < n; f++)
		if (!h->g_decoded[tr[f]]) {
			size_t at = (size_t)h->g_start[tr[f]] * hd;
			decode_group(t, L, h, tr[f], h->dec_k + at, h->dec_v + at);
			h->g_decoded[tr[f]] = 1;
		}
}

/* Step 2: the groups the chunk's tokens fetch that are not decoded yet,
 * listed in t->fill for fill_task and marked decoded. Serial: a group may
 * be fetched by every token of the chunk. */
static int list_fills(const attend_job *j)
{
	struct hsq_tiers *t = j->t;
	tier_layer *L = j->L;
	int H = t->n_head_kv, n_fill = 0;
	for (int task = 0; task < j->n * H; task++) {
		int g = task % H;
		tier_head *h = &L->heads[g];
		const int32_t *tr = j->trace + (size_t)task * j->max_groups;
		for (int f = 0; f < j->n_trace[task]; f++) {
			int k = tr[f];
			if (h->g_decoded[k])
				continue;
			h->g_decoded[k] = 1;
			t->fill[n_fill++] = (tier_fill){ g, k };
		}
	}
	return n_fill;
}

/* Step 2, in parallel: decodes one listed group into its rows. */
static void fill_task(void *arg, int task, int thread)
{
	const attend_job *j = arg;
	const struct hsq_tiers *t = j->t;
	tier_fill w = t->fill[task];
	const tier_head *h = &j->L->heads[w.head];
	size_t rows = (size_t)h->g_start[w.group] * t->head_dim;
	decode_group(t, j->L, h, w.group, h->dec_k + rows, h->dec_v + rows);
	(void)thread;
}

/* Step 3 for one token and KV head: gathers the fetched rows (decoded in
 * step 2, or into scratch without the cache) and attends. */
static void attend_task(void *arg, int task, int thread)
{
	const attend_job *j = arg;
	struct hsq_tiers *t = j->t;
	const tier_layer *L = j->L;
	tier_scratch *x = &t->scratch[thread];
	int H = t->n_head_kv, G = t->n_head / H, hd = t->head_dim;
	int ti = task / H, g = task % H, p = j->pos[ti];
	int wfirst = L->window && p + 1 > L->window ? p + 1 - L->window : 0;
	const tier_head *h = &L->heads[g];
	const float *qrow = j->q + (size_t)ti * t->n_head * hd;
	size_t kvw = (size_t)H * hd;

	const int32_t *tr = j->trace + (size_t)task * j->max_groups;
	int n_groups_fetched = j->n_trace[task], n_fetch = 0;
	int n_decoded = 0; /* rows decoded into x->fk/fv */
	if (h->n_group > 0)
		memset(x->fetched, 0, (size_t)h->n_group);
	for (int f = 0; f < n_groups_fetched; f++) {
		int k = tr[f], first = h->g_start[k], size = h->g_start[k + 1] - first;
		x->fetched[k] = 1;
		x->gsize[f] = size;
		for (int i = 0; i < size; i++)
			x->fpos[n_fetch + i] = h->l3_pos[first + i];
		n_fetch += size;
		if (j->use_cache) { /* decoded in step 2, or by an earlier call */
			x->gk[f] = h->dec_k + (size_t)first * hd;
			x->gv[f] = h->dec_v + (size_t)first * hd;
			continue;
		}
		uint16_t *dk = x->fk + (size_t)n_decoded * hd, *dv = x->fv + (size_t)n_decoded * hd;
		decode_group(t, L, h, k, dk, dv);
		x->gk[f] = dk;
		x->gv[f] = dv;
		n_decoded += size;
	}

	/* 3. attend: up to TIERS_KERNEL_MAXQ query heads at a time share each
	 * load of a key or value row (tiers_kernels.h); a head's scores are
	 * one row of x->s, in the order L1, summaries, fetched tokens, tail */
	int ns = h->n_l1 + h->n_group + n_fetch + L->n_tail;
	for (int k = 0; k < h->n_group; k++) /* a summary stands for its group's tokens */
		x->sum_bias[k] = logf((float)(h->g_start[k + 1] - h->g_start[k]));
	for (int hq0 = g * G; hq0 < (g + 1) * G; hq0 += TIERS_KERNEL_MAXQ) {
		int Q = (g + 1) * G - hq0 < TIERS_KERNEL_MAXQ ? (g + 1) * G - hq0 : TIERS_KERNEL_MAXQ;
		const float *qs[TIERS_KERNEL_MAXQ];
		float *sr[TIERS_KERNEL_MAXQ], *o[TIERS_KERNEL_MAXQ];
		for (int i = 0; i < Q; i++) {
			qs[i] = qrow + (size_t)(hq0 + i) * hd;
			sr[i] = x->s + (size_t)i * x->cap_scores;
			o[i] = j->out + ((size_t)ti * t->n_head + hq0 + i) * hd;
		}
		float *at[TIERS_KERNEL_MAXQ]; /* each head's weights of the current run of rows */
		int off = 0;
		rows_from(at, sr, Q, off);
		tiers_scores(qs, Q, h->l1_k, (size_t)hd, h->n_l1, hd, t->attn_scale, NULL, at);
		for (int r = 0; r < h->n_l1; r++)
			if (h->l1_pos[r] < wfirst || h->l1_pos[r] > p)
				for (int i = 0; i < Q; i++)
					at[i][r] = -INFINITY;
		off += h->n_l1;
		rows_from(at, sr, Q, off);
		tiers_scores(qs, Q, h->sum_k, (size_t)hd, h->n_group, hd, t->attn_scale, x->sum_bias, at);
		for (int k = 0; k < h->n_group; k++)
			if (x->fetched[k]) /* its tokens are attended instead */
				for (int i = 0; i < Q; i++)
					at[i][k] = -INFINITY;
		off += h->n_group;
		for (int f = 0; f < n_groups_fetched; f++) {
			rows_from(at, sr, Q, off);
			tiers_scores(qs, Q, x->gk[f], (size_t)hd, x->gsize[f], hd, t->attn_scale, NULL, at);
			off += x->gsize[f];
		}
		rows_from(at, sr, Q, off);
		tiers_scores(qs, Q, L->tail_kh + (size_t)g * hd, kvw, L->n_tail, hd, t->attn_scale, NULL, at);
		for (int r = 0; r < L->n_tail; r++)
			if (L->tail_pos[r] < wfirst || L->tail_pos[r] > p)
				for (int i = 0; i < Q; i++)
					at[i][r] = -INFINITY;
		for (int i = 0; i < Q; i++) { /* weights, normalized */
			float sum = softmax_masked_exp(sr[i], ns);
			float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
			for (int r = 0; r < ns; r++)
				sr[i][r] *= inv;
			memset(o[i], 0, (size_t)hd * sizeof *o[i]);
		}
		off = 0;
		rows_from(at, sr, Q, off);
		tiers_values((const float *const *)at, Q, h->l1_v, (size_t)hd, h->n_l1, hd, o);
		off += h->n_l1;
		rows_from(at, sr, Q, off);
		tiers_values((const float *const *)at, Q, h->sum_v, (size_t)hd, h->n_group, hd, o);
		off += h->n_group;
		for (int f = 0; f < n_groups_fetched; f++) {
			rows_from(at, sr, Q, off);
			tiers_values((const float *const *)at, Q, x->gv[f], (size_t)hd, x->gsize[f], hd, o);
			off += x->gsize[f];
		}
		rows_from(at, sr, Q, off);
		tiers_values((const float *const *)at, Q, L->tail_vh + (size_t)g * hd, kvw, L->n_tail, hd, o);
	}

	double recall = 0.0;
	for (int hq = g * G; j->full_k && hq < (g + 1) * G; hq++) {
		const float *q = qrow + (size_t)hq * hd;
		/* probe: true attention over the full cache at positions
		 * wfirst..p, and the share L1 + fetched + tail hold */
		float pm = -INFINITY, psum = 0.0f;
		int np = p + 1 - wfirst;
		for (int i = 0; i < np; i++) {
			int row = (wfirst + i) % j->full_cap;
			x->ps[i] = dot_h(q, j->full_k + (size_t)row * kvw + (size_t)g * hd, hd) * t->attn_scale;
			pm = x->ps[i] > pm ? x->ps[i] : pm;
		}
		for (int i = 0; i < np; i++) {
			x->ps[i] = expf(x->ps[i] - pm);
			psum += x->ps[i];
		}
		for (int i = 0; i < h->n_l1; i++)
			if (h->l1_pos[i] >= wfirst && h->l1_pos[i] <= p)
				x->covered[h->l1_pos[i] - wfirst] = 1;
		for (int i = 0; i < n_fetch; i++)
			if (x->fpos[i] >= wfirst && x->fpos[i] <= p)
				x->covered[x->fpos[i] - wfirst] = 1;
		for (int i = 0; i < L->n_tail; i++)
			if (L->tail_pos[i] >= wfirst && L->tail_pos[i] <= p)
				x->covered[L->tail_pos[i] - wfirst] = 1;
		double got = 0.0;
		for (int i = 0; i < np; i++) {
			if (x->covered[i])
				got += x->ps[i];
			x->covered[i] = 0;
		}
		recall += got / psum;
	}
	if (j->recall)
		j->recall[task] = recall;
}

/* The split attention of a chunk of a few tokens (decode). attend_task
 * gives each (token, KV head) to one thread: a decode step has n_head_kv
 * tasks (3 in SmolLM2, 1 in gemma-3), too few to keep two cores busy, and
 * a retrieval head, which attends to every archived token, takes several
 * times as long as the others. Here the same sums run in three parallel
 * regions: scores of a (token, KV head) over chunks of SPLIT_SCORE_ROWS of
 * its rows, softmax per query head, then the values of a (token, KV head)
 * over one 32-column block. A score is the same dot product, the softmax
 * sees the same row, and every output lane adds its rows in the same order
 * (tiers_values over a slice of columns is its sums for those columns), so
 * the bits are attend_task's (test_resume_tiers: decoding equals a
 * batch). */
#define SPLIT_SCORE_ROWS 256

/* The runs of rows of each (token, KV head) and its fetched groups, from
 * the trace; 0, or -1 when groups are fetched without the decoded groups
 * (group_cache_off: attend_task then decodes them into scratch). */
static int split_gather(const attend_job *j)
{
	struct hsq_tiers *t = j->t;
	const tier_layer *L = j->L;
	int H = t->n_head_kv, hd = t->head_dim;
	size_t kvw = (size_t)H * hd;
	for (int task = 0; task < j->n * H; task++)
		if (j->n_trace[task] > 0 && !j->use_cache)
			return -1;
	for (int task = 0; task < j->n * H; task++) {
		const tier_head *h = &L->heads[task % H];
		tier_run *run = t->runs + (size_t)task * t->cap_runs;
		uint8_t *fetched = t->split_fetched + (size_t)task * t->cap_runs;
		const int32_t *tr = j->trace + (size_t)task * j->max_groups;
		int m = 0, rows = h->n_l1 + h->n_group + L->n_tail;
		run[m++] = (tier_run){ h->l1_k, h->l1_v, (size_t)hd, h->n_l1, 0, TIER_RUN_L1 };
		run[m++] = (tier_run){ h->sum_k, h->sum_v, (size_t)hd, h->n_group, h->n_l1, TIER_RUN_SUMMARY };
		if (h->n_group > 0)
			memset(fetched, 0, (size_t)h->n_group);
		for (int f = 0; f < j->n_trace[task]; f++) {
			int k = tr[f], size = h->g_start[k + 1] - h->g_start[k];
			size_t at = (size_t)h->g_start[k] * hd;
			tier_run *last = &run[m - 1];
			/* groups fetched side by side: one run, one stream of rows */
			if (last->kind == TIER_RUN_GROUP && last->k + (size_t)last->n * hd == h->dec_k + at)
				last->n += size;
			else
				run[m++] = (tier_run){ h->dec_k + at, h->dec_v + at, (size_t)hd, size, rows - L->n_tail,
						       TIER_RUN_GROUP };
			fetched[k] = 1;
			rows += size;
		}
		size_t g_off = (size_t)(task % H) * hd;
		run[m++] = (tier_run){ L->tail_kh + g_off, L->tail_vh + g_off, kvw, L->n_tail, rows - L->n_tail,
				       TIER_RUN_TAIL };
		t->n_runs[task] = m;
		t->n_rows[task] = rows;
	}
	return 0;
}

typedef struct split_job {
	const attend_job *j;
	int n_chunks;          /* score tasks per (token, KV head) */
	int n_dblk;            /* value tasks per (token, KV head): blocks of dblk columns */
	int dblk;              /* 64 for rows of 128 columns and more, else 32 */
	float log_size[17];    /* logf(i): a summary's bias for a group of i tokens (8 or 16) */
} split_job;

static void split_scores_task(void *arg, int task, int thread)
{
	const split_job *sj = arg;
	const attend_job *j = sj->j;
	const struct hsq_tiers *t = j->t;
	const tier_layer *L = j->L;
	int H = t->n_head_kv, G = t->n_head / H, hd = t->head_dim;
	int tk = task / sj->n_chunks, ti = tk / H, g = tk % H, p = j->pos[ti];
	int r0 = task % sj->n_chunks * SPLIT_SCORE_ROWS, r1 = r0 + SPLIT_SCORE_ROWS;
	r1 = r1 < t->n_rows[tk] ? r1 : t->n_rows[tk];
	int wfirst = L->window && p + 1 > L->window ? p + 1 - L->window : 0;
	const tier_head *h = &L->heads[g];
	const tier_run *run = t->runs + (size_t)tk * t->cap_runs;
	const uint8_t *fetched = t->split_fetched + (size_t)tk * t->cap_runs;
	float bias[SPLIT_SCORE_ROWS];
	/* the chunk's first run: the last one starting at or before r0 */
	int m0 = 0;
	for (int lo = 0, hi = t->n_runs[tk] - 1; lo <= hi;) {
		int mid = (lo + hi) / 2;
		if (run[mid].first <= r0) {
			m0 = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	for (int hq0 = g * G; hq0 < (g + 1) * G && r0 < r1; hq0 += TIERS_KERNEL_MAXQ) {
		int Q = (g + 1) * G - hq0 < TIERS_KERNEL_MAXQ ? (g + 1) * G - hq0 : TIERS_KERNEL_MAXQ;
		const float *qs[TIERS_KERNEL_MAXQ];
		float *at[TIERS_KERNEL_MAXQ];
		for (int i = 0; i < Q; i++)
			qs[i] = j->q + ((size_t)ti * t->n_head + hq0 + i) * hd;
		for (int m = m0; m < t->n_runs[tk] && run[m].first < r1; m++) {
			int off = run[m].first, a = r0 > off ? r0 : off, b = off + run[m].n < r1 ? off + run[m].n : r1;
			if (a >= b)
				continue;
			for (int i = 0; i < Q; i++)
				at[i] = t->split_s + ((size_t)ti * t->n_head + hq0 + i) * t->cap_split_rows + a;
			const uint16_t *k = run[m].k + (size_t)(a - off) * run[m].ld;
			const float *b_at = NULL;
			if (run[m].kind == TIER_RUN_SUMMARY) { /* a summary stands for its group's tokens */
				if (t->sum_rows[tk] == SUM_ROWS_MASKED) {
					for (int i = 0; i < Q; i++)
						for (int r = a; r < b; r++)
							at[i][r - a] = -INFINITY;
					continue;
				}
				for (int r = a; r < b; r++) {
					int size = h->g_start[r - off + 1] - h->g_start[r - off];
					bias[r - a] = size <= 16 ? sj->log_size[size] : logf((float)size);
				}
				b_at = bias;
				if (t->sum_rows[tk] == SUM_ROWS_DOTS) { /* the router's dots, as tiers_scores ends */
					for (int i = 0; i < Q; i++)
						tiers_scale_scores(at[i], b - a, t->attn_scale, b_at, fetched + (a - off));
					continue;
				}
			}
			if (m + TIERS_PREFETCH_RUNS < t->n_runs[tk] && hq0 == g * G) /* later runs' rows are elsewhere */
				tiers_prefetch_rows(run[m + TIERS_PREFETCH_RUNS].k, run[m + TIERS_PREFETCH_RUNS].ld,
						    run[m + TIERS_PREFETCH_RUNS].n, hd);
			tiers_scores(qs, Q, k, run[m].ld, b - a, hd, t->attn_scale, b_at, at);
			if (run[m].kind == TIER_RUN_GROUP) /* fetched tokens: none masked */
				continue;
			for (int r = a; r < b; r++) {
				int masked;
				switch (run[m].kind) {
				case TIER_RUN_L1: masked = h->l1_pos[r - off] < wfirst || h->l1_pos[r - off] > p; break;
				case TIER_RUN_SUMMARY: masked = fetched[r - off]; break;
				case TIER_RUN_TAIL: masked = L->tail_pos[r - off] < wfirst || L->tail_pos[r - off] > p; break;
				default: masked = 0;
				}
				if (masked)
					for (int i = 0; i < Q; i++)
						at[i][r - a] = -INFINITY;
			}
		}
	}
	(void)thread;
}

static void split_softmax_task(void *arg, int task, int thread)
{
	const split_job *sj = arg;
	const struct hsq_tiers *t = sj->j->t;
	int H = t->n_head_kv, G = t->n_head / H;
	int ti = task / t->n_head, hq = task % t->n_head, rows = t->n_rows[ti * H + hq / G];
	float *s = t->split_s + (size_t)task * t->cap_split_rows;
	float sum = softmax_masked_exp(s, rows);
	float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
	for (int r = 0; r < rows; r++)
		s[r] *= inv;
	(void)thread;
}

static void split_values_task(void *arg, int task, int thread)
{
	const split_job *sj = arg;
	const attend_job *j = sj->j;
	const struct hsq_tiers *t = j->t;
	int H = t->n_head_kv, G = t->n_head / H, hd = t->head_dim;
	int tk = task / sj->n_dblk, ti = tk / H, g = tk % H;
	int d0 = task % sj->n_dblk * sj->dblk, width = hd - d0 < sj->dblk ? hd - d0 : sj->dblk;
	const tier_run *run = t->runs + (size_t)tk * t->cap_runs;
	for (int hq0 = g * G; hq0 < (g + 1) * G; hq0 += TIERS_KERNEL_MAXQ) {
		int Q = (g + 1) * G - hq0 < TIERS_KERNEL_MAXQ ? (g + 1) * G - hq0 : TIERS_KERNEL_MAXQ;
		const float *at[TIERS_KERNEL_MAXQ];
		float *o[TIERS_KERNEL_MAXQ];
		for (int i = 0; i < Q; i++) {
			o[i] = j->out + ((size_t)ti * t->n_head + hq0 + i) * hd + d0;
			at[i] = t->split_s + ((size_t)ti * t->n_head + hq0 + i) * t->cap_split_rows;
		}
		if (width == 64) {
			tiers_values64_runs(at, Q, run, t->n_runs[tk], d0, o);
			continue;
		}
		if (width == 32) {
			tiers_values32_runs(at, Q, run, t->n_runs[tk], d0, o);
			continue;
		}
		int c = 0; /* the head's last columns: 16 of them, then the rest */
		if (width >= 16) {
			tiers_values16_runs(at, Q, run, t->n_runs[tk], d0, o);
			c = 16;
		}
		if (c == width)
			continue;
		for (int i = 0; i < Q; i++) {
			o[i] += c;
			memset(o[i], 0, (size_t)(width - c) * sizeof *o[i]);
		}
		for (int off = 0, m = 0; m < t->n_runs[tk]; off += run[m++].n) {
			for (int i = 0; i < Q; i++)
				at[i] = t->split_s + ((size_t)ti * t->n_head + hq0 + i) * t->cap_split_rows + off;
			tiers_values(at, Q, run[m].v + d0 + c, run[m].ld, run[m].n, width - c, o);
		}
	}
	(void)thread;
}

/* Step 3 split (see above); 0, or -1 when it does not apply (attend_task
 * then runs). */
static int split_attend(const attend_job *j, hsq_pool *pool)
{
	const struct hsq_tiers *t = j->t;
	if (j->n > t->cap_split_tok || j->full_k || split_gather(j))
		return -1;
	int H = t->n_head_kv, max_rows = 0;
	for (int task = 0; task < j->n * H; task++)
		max_rows = t->n_rows[task] > max_rows ? t->n_rows[task] : max_rows;
	int dblk = t->head_dim >= 128 ? 64 : 32;
	split_job sj = { j, (max_rows + SPLIT_SCORE_ROWS - 1) / SPLIT_SCORE_ROWS, (t->head_dim + dblk - 1) / dblk, dblk,
			 { 0 } };
	for (int i = 1; i <= 16; i++)
		sj.log_size[i] = logf((float)i);
	if (sj.n_chunks > 0)
		pool_run(pool, j->n * H * sj.n_chunks, split_scores_task, &sj);
	pool_run(pool, j->n * t->n_head, split_softmax_task, &sj);
	pool_run(pool, j->n * H * sj.n_dblk, split_values_task, &sj);
	return 0;
}

void tiers_attend(struct hsq_tiers *t, int layer, const float *q, const float *k, const float *v, const int *pos,
		  int n, const uint16_t *full_k, const uint16_t *full_v, int full_cap, float *out, hsq_pool *pool,
		  tier_score_fn score, void *score_user)
{
	tier_layer *L = &t->layers[layer];
	int H = t->n_head_kv;
	size_t kvw = (size_t)H * t->head_dim;

	/* append the chunk to the tail (capacity reserved by tiers_reserve_chunk) */
	memcpy(L->tail_k + (size_t)L->n_tail * kvw, k, (size_t)n * kvw * sizeof *k);
	memcpy(L->tail_v + (size_t)L->n_tail * kvw, v, (size_t)n * kvw * sizeof *v);
	f16_row_from_f32(L->tail_kh + (size_t)L->n_tail * kvw, k, (int)((size_t)n * kvw));
	f16_row_from_f32(L->tail_vh + (size_t)L->n_tail * kvw, v, (int)((size_t)n * kvw));
	for (int i = 0; i < n; i++)
		L->tail_pos[L->n_tail + i] = pos[i];
	L->n_tail += n;

	attend_job j = { .t = t, .L = L, .q = q, .pos = pos, .n = n, .full_k = full_k, .full_v = full_v,
			 .full_cap = full_cap, .out = out };
	j.budget = tiers_budget_tokens(t, t->n_tokens, INT_MAX);
	for (int h = 0; h < H; h++)
		j.max_groups = L->heads[h].n_group > j.max_groups ? L->heads[h].n_group : j.max_groups;
	j.use_cache = t->mode == HSQ_MODE_HSQ && !t->group_cache_off;
	j.fill_in_route = j.use_cache && n == 1;
	j.trace = t->trace_buf;
	j.n_trace = t->trace_count;
	j.recall = full_k ? t->recall_buf : NULL;
	j.score = score;
	j.score_user = score_user;
	if (j.max_groups > 0) {
		pool_run(pool, n * H, route_task, &j);
	} else { /* no groups (quant, a sliding layer): nothing to route, and no region to wait for */
		memset(j.n_trace, 0, (size_t)n * H * sizeof *j.n_trace);
		if (n <= t->cap_split_tok)
			memset(t->sum_rows, SUM_ROWS_SCORE, (size_t)n * H);
	}
	int n_fill = j.use_cache ? list_fills(&j) : 0;
	if (n_fill > 0)
		pool_run(pool, n_fill, fill_task, &j);
	if (split_attend(&j, pool))
		pool_run(pool, n * H, attend_task, &j);

	for (int i = 0; i < n * H; i++) { /* hit counts here: tasks of one head run in parallel */
		tier_head *h = &L->heads[i % H];
		const int32_t *tr = t->trace_buf + (size_t)i * j.max_groups;
		for (int m = 0; m < t->trace_count[i]; m++)
			h->g_hits[tr[m]]++;
	}
	if (t->trace)
		for (int i = 0; i < n * H; i++)
			t->trace(t->trace_user, pos[i / H], layer, i % H, t->trace_buf + (size_t)i * j.max_groups,
				 t->trace_count[i]);
	if (full_k)
		for (int i = 0; i < n * H; i++) {
			L->recall_sum += t->recall_buf[i];
			L->recall_count += (uint64_t)(t->n_head / H);
		}
}

/* Sizes the scratch and trace buffers for a chunk of n tokens before its
 * layers run. */
hsq_status tiers_reserve_chunk(struct hsq_tiers *t, int n)
{
	int H = t->n_head_kv, max_groups = 0, max_l3 = 0, max_l1 = 0, max_tail = 0, max_gsize = t->params.group_size;
	int retrieval_l3 = 0; /* a retrieval head fetches all of its L3 */
	for (int l = 0; l < t->n_layer; l++) {
		tier_layer *L = &t->layers[l];
		max_tail = L->n_tail > max_tail ? L->n_tail : max_tail;
		for (int h = 0; h < H; h++) {
			tier_head *hd = &L->heads[h];
			max_groups = hd->n_group > max_groups ? hd->n_group : max_groups;
			max_l3 = hd->n_l3 > max_l3 ? hd->n_l3 : max_l3;
			max_l1 = hd->n_l1 > max_l1 ? hd->n_l1 : max_l1;
			if (hd->retrieval)
				retrieval_l3 = hd->n_l3 > retrieval_l3 ? hd->n_l3 : retrieval_l3;
		}
	}
	int budget = tiers_budget_tokens(t, t->n_tokens + n, max_l3);
	int fetch = budget + max_gsize < max_l3 ? budget + max_gsize : max_l3;
	if (budget > 0 && retrieval_l3 > fetch)
		fetch = retrieval_l3;
	int scores = max_l1 + max_groups + fetch + max_tail + n;
	hsq_status st = ensure_scratch(t, max_groups, fetch, scores, t->probe ? t->n_tokens + n : 0,
					(int)tier_pq_blocks(max_l3));
	if (st)
		return st;
	if (n <= TIERS_SPLIT_MAX_TOK && (n > t->cap_split_tok || max_groups + 3 > t->cap_runs ||
					 scores > t->cap_split_rows)) {
		int tok = n > t->cap_split_tok ? n : t->cap_split_tok;
		int runs = max_groups + 3 > t->cap_runs ? max_groups + 3 : t->cap_runs;
		int rows = scores > t->cap_split_rows ? scores : t->cap_split_rows;
		t->cap_split_tok = 0; /* until every buffer has its new size */
		if (reserve((void **)&t->runs, tok * H * runs, sizeof *t->runs) ||
		    reserve((void **)&t->n_runs, tok * H, sizeof *t->n_runs) ||
		    reserve((void **)&t->n_rows, tok * H, sizeof *t->n_rows) ||
		    reserve((void **)&t->sum_rows, tok * H, sizeof *t->sum_rows) ||
		    reserve((void **)&t->split_fetched, tok * H * runs, 1) ||
		    reserve((void **)&t->split_s, tok * t->n_head * rows, sizeof *t->split_s))
			return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the decode attention scratch");
		t->cap_split_tok = tok;
		t->cap_runs = runs;
		t->cap_split_rows = rows;
	}
	size_t need = (size_t)n * H;
	int32_t *tb = realloc(t->trace_buf, (need * (size_t)(max_groups > 0 ? max_groups : 1)) * sizeof *tb);
	if (!tb)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the router trace");
	t->trace_buf = tb;
	int *tc = realloc(t->trace_count, need * sizeof *tc);
	double *rb = tc ? realloc(t->recall_buf, need * sizeof *rb) : NULL;
	if (tc)
		t->trace_count = tc;
	if (rb)
		t->recall_buf = rb;
	if (!tc || !rb)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the router trace");
	/* decoded groups: rows for every L3 token (a decode step reads at
	 * most the budget of them, a retrieval head all, and the router's
	 * picks drift: an LRU cache of one, then two budgets re-decoded evicted
	 * groups a few tokens later, 87,000 then 12,800 in 64 tokens at 8K on
	 * SmolLM2), at their L3 rows so that groups fetched side by side are
	 * one run; pages of groups never fetched are never touched. Room for
	 * the whole context at once: online compaction adds a group at a time,
	 * and growing the rows then (realloc, which copied the 600 MB of a 32K
	 * gemma-3 context when the allocator had them on its heap) was a tenth
	 * of 128 decode steps (perf: memmove and page clearing). */
	if (t->mode == HSQ_MODE_HSQ) {
		if ((size_t)H * max_groups > (size_t)t->cap_fill) {
			tier_fill *fl = realloc(t->fill, (size_t)H * max_groups * sizeof *fl);
			if (!fl)
				return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the decoded groups");
			t->fill = fl;
			t->cap_fill = H * max_groups;
		}
		size_t hd = (size_t)t->head_dim;
		for (int l = 0; l < t->n_layer; l++)
			for (int hh = 0; hh < H; hh++) {
				tier_head *x = &t->layers[l].heads[hh];
				if (x->n_l3 <= x->cap_dec)
					continue;
				int cap = x->cap_dec + x->cap_dec / 4 > x->n_l3 ? x->cap_dec + x->cap_dec / 4 : x->n_l3;
				cap = cap > t->n_ctx ? cap : t->n_ctx;
				uint16_t *dk = realloc(x->dec_k, (size_t)cap * hd * sizeof *dk);
				if (dk)
					x->dec_k = dk;
				uint16_t *dv = dk ? realloc(x->dec_v, (size_t)cap * hd * sizeof *dv) : NULL;
				if (!dv)
					return hsq_fail(HSQ_ERR_NOMEM, "out of memory for %d decoded L3 rows", cap);
				x->dec_v = dv;
				x->cap_dec = cap;
			}
	}
	/* tail room: the chunk on top of what is there */
	for (int l = 0; l < t->n_layer; l++) {
		tier_layer *L = &t->layers[l];
		if (L->n_tail + n > L->cap_tail) {
			int cap = L->n_tail + n + t->params.window + 2 * max_gsize;
			float *tk = realloc(L->tail_k, (size_t)cap * H * t->head_dim * sizeof *tk);
			if (tk)
				L->tail_k = tk;
			float *tv = tk ? realloc(L->tail_v, (size_t)cap * H * t->head_dim * sizeof *tv) : NULL;
			if (tv)
				L->tail_v = tv;
			uint16_t *tkh = tv ? realloc(L->tail_kh, (size_t)cap * H * t->head_dim * sizeof *tkh) : NULL;
			if (tkh)
				L->tail_kh = tkh;
			uint16_t *tvh = tkh ? realloc(L->tail_vh, (size_t)cap * H * t->head_dim * sizeof *tvh) : NULL;
			if (tvh)
				L->tail_vh = tvh;
			int32_t *tp = tvh ? realloc(L->tail_pos, (size_t)cap * sizeof *tp) : NULL;
			if (tp)
				L->tail_pos = tp;
			if (!tp)
				return hsq_fail(HSQ_ERR_NOMEM, "out of memory for the decode tail");
			L->cap_tail = cap;
		}
	}
	return tiers_rope_reserve(t, t->n_tokens + n);
}

/* Drops the oldest `count` rows of a layer's tail. */
static void tail_drop(const struct hsq_tiers *t, tier_layer *L, int count)
{
	size_t kvw = (size_t)t->n_head_kv * t->head_dim;
	int left = L->n_tail - count;
	memmove(L->tail_k, L->tail_k + (size_t)count * kvw, (size_t)left * kvw * sizeof *L->tail_k);
	memmove(L->tail_v, L->tail_v + (size_t)count * kvw, (size_t)left * kvw * sizeof *L->tail_v);
	memmove(L->tail_kh, L->tail_kh + (size_t)count * kvw, (size_t)left * kvw * sizeof *L->tail_kh);
	memmove(L->tail_vh, L->tail_vh + (size_t)count * kvw, (size_t)left * kvw * sizeof *L->tail_vh);
	memmove(L->tail_pos, L->tail_pos + count, (size_t)left * sizeof *L->tail_pos);
	L->n_tail = left;
}

/* Encodes the oldest m tail rows of head g (K brought back before RoPE),
 * with their residual key codes into res when the head keeps them. */
static hsq_status encode_tail(const struct hsq_tiers *t, const tier_layer *L, int g, int m, float *kbuf,
			      uint8_t *codes, uint8_t *res, uint8_t *sum)
{
	hsq_status st;
	int hd = t->head_dim;
	size_t kvw = (size_t)t->n_head_kv * hd;
	float mk[HSQ_CODEC_MAX_DIM], mv[HSQ_CODEC_MAX_DIM];
	memset(mk, 0, sizeof mk);
	memset(mv, 0, sizeof mv);
	for (int i = 0; i < m; i++) {
		const float *kr = L->tail_k + i * kvw + (size_t)g * hd, *vr = L->tail_v + i * kvw + (size_t)g * hd;
		for (int d = 0; d < hd; d++) {
			mk[d] += kr[d] / (float)m;
			mv[d] += vr[d] / (float)m;
		}
		memcpy(kbuf, kr, (size_t)hd * sizeof *kbuf);
		tiers_rope_rows(t, &t->rope[L->rope_table], kbuf, &L->tail_pos[i], 1, -1);
		const tier_head *h = &L->heads[g];
		uint8_t *code = codes + (size_t)i * tier_code4_pair(t);
		if ((st = tiers_encode_token(t, h, kbuf, vr, NULL, code)) ||
		    (h->has_res && (st = tiers_encode_residual(t, h, kbuf, code, res + (size_t)i * t->code4))))
			return st;
	}
	if (sum && (st = tiers_encode_summary(t, &L->heads[g], &t->rope[L->rope_table], L->tail_pos, m, mk, mv, sum)))
		return st;
	return HSQ_OK;
}

hsq_status tiers_compact(struct hsq_tiers *t)
{
	hsq_status st;
	int keep = t->params.window, gs = t->params.group_size;
	float kbuf[HSQ_CODEC_MAX_DIM];
	uint8_t sum[2 * 4 * HSQ_CODEC_MAX_DIM];
	uint8_t codes[16 * 2 * (4 * HSQ_CODEC_MAX_DIM / 8 + 8)], res[16 * (4 * HSQ_CODEC_MAX_DIM / 8 + 8)];
	for (int l = 0; l < t->n_layer; l++) {
		tier_layer *L = &t->layers[l];
		if (L->n_tail == 0)
			continue;
		if (L->window) {
			/* sliding layer: rows older than the window are never read again */
			int last = L->tail_pos[L->n_tail - 1], drop = 0;
			while (drop < L->n_tail && L->tail_pos[drop] <= last - L->window)
				drop++;
			if (drop)
				tail_drop(t, L, drop);
			continue;
		}
		if (t->mode == HSQ_MODE_HSQ) {
			while (L->n_tail - keep >= gs) {
				for (int g = 0; g < t->n_head_kv; g++) {
					if ((st = encode_tail(t, L, g, gs, kbuf, codes, res, sum)) ||
					    (st = tiers_head_add_group(t, &t->rope[L->rope_table], &L->heads[g], gs,
								       L->tail_pos, codes, res, sum, HSQ_GROUP_LOW)))
						return st;
				}
				tail_drop(t, L, gs);
			}
		} else if (t->mode == HSQ_MODE_QUANT) {
			while (L->n_tail > keep) {
				int m = L->n_tail - keep < 16 ? L->n_tail - keep : 16;
				for (int g = 0; g < t->n_head_kv; g++)
					if ((st = encode_tail(t, L, g, m, kbuf, codes, res, NULL)) ||
					    (st = tiers_head_add_l1(t, l, &L->heads[g], m, L->tail_pos, codes, res)))
						return st;
				tail_drop(t, L, m);
			}
		}
		/* streaming and snapkv keep every generated token, as SnapKV does */
	}
	return HSQ_OK;
}

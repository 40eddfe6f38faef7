/* tiers.h - the HSQ three-tier KV cache (internal).
 *
 * Per layer and KV head:
 *   L1 (fast tier)    individual tokens, K before RoPE and V, 4-bit TQ;
 *   L2 (fast tier)    one key and one value summary per group of grouped
 *                     tokens, 3-bit TQ (keys after RoPE: they are routing
 *                     keys, scored against queries);
 *   L3 (archive)      every grouped token, K before RoPE and V, 4-bit TQ.
 * Tokens appended after compression stay full-precision in a per-layer
 * tail until the recent window is full, then move into the tiers.
 *
 * The modes share this structure: quant keeps every token in L1 (no
 * groups); streaming keeps sinks and a recent window in L1 and drops the
 * rest; snapkv keeps what an observation window attends to most and drops
 * the rest. Only hsq has L2 and L3.
 *
 * Codes of one token are [K code][V code], each hsq_codec_code_bytes of
 * the tier's codec. Decoded working copies (fp16, K rotated to its
 * position) of L1 and L2 are kept for the CPU attention: the tier byte
 * counts report the encoded sizes, which are what a snapshot stores and a
 * device backend would hold. */
#ifndef HSQ_TIERS_H
#define HSQ_TIERS_H

#include <stdint.h>

#include "hsq_codec.h"
#include "kv/kv_view.h"
#include "kv/tiers_kernels.h"

typedef struct tier_head {
	int n_l1, cap_l1;
	int32_t *l1_pos;       /* [n_l1] positions, ascending */
	uint8_t *l1_code;      /* [n_l1][2][code4] K (before RoPE), V */
	uint16_t *l1_k, *l1_v; /* [n_l1][head_dim] decoded, fp16; K rotated to l1_pos */

	int n_group, cap_group;
	int32_t *g_start;      /* [n_group + 1] first L3 index of each group */
	uint8_t *g_class;      /* [n_group] HSQ_GROUP_LOW or HSQ_GROUP_MEDIUM */
	uint8_t *sum_code;     /* [n_group][2][code3] key summary (after RoPE), value summary */
	uint16_t *sum_k, *sum_v; /* [n_group][head_dim] decoded summaries, fp16 */
	uint32_t *g_hits;      /* [n_group] times the router fetched the group */
	/* Router key codes (tiers_pq.c): every L3 key after RoPE as a product
	 * code, head_dim / TIER_PQ_SUB indices of 4 bits, and an 8-bit error
	 * radius; the head's centroids and radius step. Derived from L3 (not
	 * stored in snapshots). A group's router score, the best over its keys
	 * of q . k~ + |q| step radius, bounds q . k over the group's keys. */
	float *pq_centroid;    /* [head_dim / TIER_PQ_SUB][TIER_PQ_K][TIER_PQ_SUB], NULL
				* until fitted */
	uint8_t *pq_code;      /* [tier_pq_bytes(pq_cap)] blocks of TIER_PQ_BLOCK L3 keys
				* (tier_pq_nibble) */
	uint8_t *pq_radius;    /* [tier_pq_blocks(pq_cap)] in L3 order: |k - k~| <= step x code */
	double *pq_err;        /* [tier_pq_blocks(pq_cap)] each L3 key's |k - k~|, which its
				* radius codes, kept so that a new step re-codes the radii
				* without decoding every key again */
	float pq_step;         /* radius units, the head's largest error / 255 */
	int pq_cap;            /* L3 tokens pq_code has room for */

	float induction;       /* 0..1: share of the observation queries' attention on
				* tokens that follow an earlier occurrence of the query's
				* own token, beyond the recent window (hsq mode; stored in
				* section router.heads, 0 when absent) */
	uint8_t retrieval;     /* 1: one of the retrieval heads, which fetch every
				* group whenever the budget is not 0 */
	float *centre;         /* [2][head_dim] centre of the head's K (before RoPE)
				* and V: an L1/L3 code flagged TIER_CODE_CENTRED
				* holds its vector minus the centre (zeros when the
				* snapshot has no section centres) */

	int n_l3, cap_l3;
	int32_t *l3_pos;       /* [n_l3] positions; ascending within a group */
	uint8_t *l3_code;      /* [n_l3][2][code4] K (before RoPE), V */

	/* Residual key codes (section keys.residual): a second 4-bit code of
	 * each L1 and L3 key's coding error, for the heads picked by
	 * params.residual_heads when the tiers were built (by default the
	 * retrieval heads of that moment). A key decodes with its residual
	 * unless the context turned residuals off (hsq_tiers.res_off). */
	uint8_t has_res;       /* 1: l1_res and l3_res are kept */
	uint8_t *l1_res;       /* [cap_l1][code4] in L1 order */
	uint8_t *l3_res;       /* [cap_l3][code4] in L3 order */

	/* Groups decoded by earlier attend calls, kept for the next ones
	 * (consecutive tokens fetch mostly the same groups, and a retrieval
	 * head fetches them all), at their L3 rows: groups fetched side by
	 * side are one run of rows for the attention. Memory is reserved for
	 * all of L3 but only the pages of decoded groups are ever touched. */
	uint8_t *g_decoded;    /* [cap_group] 1 = the group's rows of dec_k, dec_v hold it */
	uint16_t *dec_k, *dec_v; /* [cap_dec][head_dim] fp16, in L3 order; K rotated
				  * to its position */
	int cap_dec;           /* rows dec_k and dec_v have room for */
} tier_head;

typedef struct tier_layer {
	int window;            /* sliding attention window of the layer, 0 = global */
	int rope_table;        /* index of the layer's RoPE table in hsq_tiers.rope */
	tier_head *heads;      /* [n_head_kv] */
	/* Full-precision tail, shared by the layer's heads (same positions). */
	int n_tail, cap_tail;
	int32_t *tail_pos;     /* [cap_tail] */
	float *tail_k;         /* [cap_tail][n_head_kv * head_dim] K after RoPE */
	float *tail_v;         /* [cap_tail][n_head_kv * head_dim] */
	uint16_t *tail_kh, *tail_vh; /* [cap_tail][n_head_kv * head_dim] the same rows
				      * in fp16, which the attention reads (the
				      * fp32 rows are what online compression codes) */
	/* Router recall probe: sums of captured true attention mass. */
	double recall_sum;
	uint64_t recall_count;
} tier_layer;

typedef struct rope_table {
	float base;
	int n_pos;             /* positions tabulated */
	float *cs;             /* [n_pos][head_dim / 2][2] cos, sin (as cpu_rope rounds them) */
} rope_table;

struct hsq_tiers {
	hsq_snapshot_mode mode;
	hsq_tier_params params;      /* as built (defaults resolved) */
	int n_layer, n_head, n_head_kv, head_dim, n_ctx;
	int rope_neox;
	float attn_scale;
	hsq_codec *c4, *c3;          /* L1/L3 and L2 codecs */
	size_t code4, code3;         /* bytes of one code */
	tier_layer *layers;          /* [n_layer] */
	int n_rope;
	rope_table rope[4];
	int budget;                  /* tokens per KV head, HSQ_BUDGET_ALL or HSQ_BUDGET_DEFAULT */
	int retrieval_heads;         /* heads with the highest induction that fetch every
				      * group, or HSQ_RETRIEVAL_DEFAULT */
	int pq_fitted;               /* 1: tiers_pq_fit_all has run (online groups are coded) */
	int res_off;                 /* 1: heads decode keys without their residual codes
				      * (hsq_context_use_residual_keys) */
	int group_cache_off;         /* 1: fetched groups are decoded afresh by every task
				      * (tests compare the cache against it) */
	struct tier_fill *fill;      /* [cap_fill] groups an attend call decodes */
	int cap_fill;
	int n_tokens;                /* positions covered (snapshot + appended) */
	hsq_trace_fn trace;
	void *trace_user;
	int probe;                   /* 1: measure router recall against the full cache */
	int has_calibration;         /* 1: built with a calibration's learned reader */
	uint8_t calibration_sha256[32]; /* that calibration file's SHA-256 */
	/* What one attend call reports per task (token x KV head), sized by
	 * tiers_reserve_chunk for a chunk of n tokens. */
	int32_t *trace_buf;          /* [n * n_head_kv][max groups] groups fetched */
	int *trace_count;            /* [n * n_head_kv] */
	double *recall_buf;          /* [n * n_head_kv] probe: recall summed over query heads */
	/* Per-thread scratch for the attention tasks (tiers_attend.c). */
	int n_threads;
	struct tier_scratch *scratch; /* [n_threads] */
	/* The split attention of a chunk of at most TIERS_SPLIT_MAX_TOK tokens
	 * (tiers_attend.c), sized by tiers_reserve_chunk. */
	struct tier_run *runs;       /* [n * n_head_kv][cap_runs] the runs of rows each
				      * (token, KV head) attends, in score order */
	int *n_runs;                 /* [n * n_head_kv] */
	int *n_rows;                 /* [n * n_head_kv] rows over all of its runs */
	uint8_t *sum_rows;           /* [n * n_head_kv] what its summary rows of split_s need
				      * (tiers_attend.c, enum sum_rows) */
	uint8_t *split_fetched;      /* [n * n_head_kv][cap_runs] 1 = group fetched */
	float *split_s;              /* [n * n_head][cap_split_rows] scores, then weights */
	int cap_split_tok, cap_runs, cap_split_rows;
};

/* Tokens a chunk may have for the split attention: its scores live in
 * one buffer for all its query heads. */
#define TIERS_SPLIT_MAX_TOK 4

/* A group that one attend call decodes into its head's decoded rows. */
typedef struct tier_fill {
	int head, group;
} tier_fill;

typedef struct tier_scratch {
	int cap_groups, cap_fetch, cap_scores, cap_pos, cap_keys;
	void *rank;            /* [3 * cap_groups] the rankings by key codes and by summary, and
				* the radix sort's buffer */
	float *gscore;         /* [cap_groups] the groups' key-code scores */
	float *kscore;         /* [cap_keys] every L3 key's code score */
	float *pq_table;       /* [n_head / n_head_kv][head_dim * TIER_PQ_K] the query
				* heads' dot products with the router centroids */
	uint8_t *fetched;      /* [cap_groups] 1 = fetched this step */
	int32_t *fpos;         /* [cap_fetch] positions of fetched tokens */
	uint16_t *fk, *fv;     /* [cap_fetch][head_dim] fetched K (rotated), V in fp16, when not cached */
	const uint16_t **gk, **gv; /* [cap_groups] rows of each fetched group (cache or fk/fv) */
	int *gsize;            /* [cap_groups] tokens of each fetched group */
	float *s;              /* [TIERS_KERNEL_MAXQ][cap_scores] attention weights of
				* the query heads attended together */
	float *sum_bias;       /* [cap_groups] log of each group's token count */
	float *sum_score;      /* [cap_groups] router: q.k_summary, the largest over
				* the query heads */
	float *ps;             /* [cap_pos] probe: true scores */
	uint8_t *covered;      /* [cap_pos] probe: positions L1/fetch/tail hold */
} tier_scratch;

/* Codes of one token (K then V) in L1/L3, and one summary in L2. */
static inline size_t tier_code4_pair(const struct hsq_tiers *t) { return 2 * t->code4; }
static inline size_t tier_code3_pair(const struct hsq_tiers *t) { return 2 * t->code3; }

/* The router's product codes: sub-vectors of TIER_PQ_SUB channels, each
 * one of TIER_PQ_K centroids (a 4-bit index). */
#define TIER_PQ_SUB 4
#define TIER_PQ_K 16
#define TIER_PQ_BLOCK 16
#define TIER_PQ_MAX_G 64 /* query heads per KV head the router scores at once */
static inline int tier_pq_subspaces(int head_dim) { return head_dim / TIER_PQ_SUB; }
/* n rounded up to whole blocks of TIER_PQ_BLOCK keys. */
static inline size_t tier_pq_blocks(int n) { return (size_t)(n + TIER_PQ_BLOCK - 1) / TIER_PQ_BLOCK * TIER_PQ_BLOCK; }
/* Bytes of one key's code. */
static inline size_t tier_pq_code_bytes(int head_dim) { return (size_t)head_dim / (2 * TIER_PQ_SUB); }
/* Bytes holding n keys' codes: whole blocks of TIER_PQ_BLOCK keys. */
static inline size_t tier_pq_bytes(int head_dim, int n) { return tier_pq_blocks(n) * tier_pq_code_bytes(head_dim); }
/* Byte holding the index of L3 key i in subspace s: block i / 16, then
 * the subspaces in order, 8 bytes each (16 keys' indices, the even key's
 * in the low nibble). */
static inline size_t tier_pq_nibble(int head_dim, int i, int s)
{
	return tier_pq_bytes(head_dim, i - i % TIER_PQ_BLOCK) + (size_t)s * (TIER_PQ_BLOCK / 2) + (size_t)(i % TIER_PQ_BLOCK) / 2;
}
/* f32 centroids of one head. */
static inline uint64_t tier_pq_centroid_bytes(int head_dim) { return (uint64_t)head_dim * TIER_PQ_K * 4; }
/* The router codes of a head with n_l3 archived keys as the fast tier
 * holds them: the indices and the radius byte of every key, and the
 * head's f32 centroids and radius step. */
static inline uint64_t tier_pq_head_bytes(uint64_t n_l3, int head_dim)
{
	return n_l3 ? n_l3 * (tier_pq_code_bytes(head_dim) + 1) + tier_pq_centroid_bytes(head_dim) + 4 : 0;
}

/* Encoded bytes of the tiers as hsq_tier_stats counts them: codes plus an
 * int32 position per token and the head's centres (L1), codes plus an int32
 * position per token (L3); codes, an int32 group start and a class byte
 * per group, and the router codes of the grouped keys (L2). pair4/pair3:
 * bytes of one token's or one summary's K and V codes. */
static inline uint64_t tier_l1_bytes(uint64_t n_l1, size_t pair4) { return n_l1 * (pair4 + 4); }
/* The f32 key and value centres of one head, which decoding L1 needs
 * beside it (counted in L1). */
static inline uint64_t tier_centre_bytes(int head_dim) { return 8 * (uint64_t)head_dim; }
static inline uint64_t tier_l2_bytes(uint64_t n_group, uint64_t n_l3, size_t pair3, int head_dim)
{
	return n_group * (pair3 + 4 + 1) + tier_pq_head_bytes(n_l3, head_dim);
}
static inline uint64_t tier_l3_bytes(uint64_t n_l3, size_t pair4) { return n_l3 * (pair4 + 4); }
/* fp16 K and V of one layer holding n positions (a sliding layer: its
 * window), the size the ratios are taken against. */
static inline uint64_t tier_fp16_layer_bytes(int n, int window, int n_head_kv, int head_dim)
{
	int held = window && window < n ? window : n;
	return (uint64_t)held * 2 * (uint64_t)n_head_kv * (uint64_t)head_dim * 2;
}

/* Allocates an empty structure for the model (no tokens). */
hsq_status tiers_new(const hsq_model *model, hsq_snapshot_mode mode, const hsq_tier_params *params, int n_ctx,
		     int n_threads, struct hsq_tiers **out);
void tiers_free(struct hsq_tiers *t);

/* Makes sure the RoPE tables hold positions 0..n_pos-1. */
hsq_status tiers_rope_reserve(struct hsq_tiers *t, int n_pos);
/* Rotates n rows of head_dim floats, row i to position pos[i] (sign +1) or
 * back from it (sign -1), with table r. */
void tiers_rope_rows(const struct hsq_tiers *t, const rope_table *r, float *x, const int32_t *pos, int n, int sign);

/* Bit 7 of byte 1 of an L1/L3 code, the sign bit of its fp16 norm (a norm
 * is never negative): the code holds the vector minus its head's centre
 * (tier_head.centre). */
#define TIER_CODE_CENTRED 0x80u

/* Codes of one token of head h from K before RoPE and V, and back (K
 * still before RoPE). Each vector is coded minus the head's centre when
 * that is the shorter of the two, else as it is: the mean key of a head
 * carries most of its keys' energy, but the attention sinks point
 * elsewhere, and centring them would enlarge the errors on the tokens
 * attention weighs most (docs/tiers.md). key_rounding: the key's
 * query-weighted rounding factor (codec_tq_rounding), or NULL for the
 * nearest levels. */
hsq_status tiers_encode_token(const struct hsq_tiers *t, const tier_head *h, const float *k_pre, const float *v,
			      const float *key_rounding, uint8_t *code);
void tiers_decode_token(const struct hsq_tiers *t, const tier_head *h, const uint8_t *code, float *k_pre, float *v);

/* Residual key codes. tiers_encode_residual codes k_pre minus what the key
 * code of `code` decodes to (no centring: the error has no mean to take
 * out). tiers_decode_token_res decodes like tiers_decode_token and adds
 * the decoded residual `res` to the key when the head uses its residuals
 * (tiers_head_uses_res; res may then not be NULL). */
hsq_status tiers_encode_residual(const struct hsq_tiers *t, const tier_head *h, const float *k_pre,
				 const uint8_t *code, uint8_t *res);
static inline int tiers_head_uses_res(const struct hsq_tiers *t, const tier_head *h)
{
	return h->has_res && !t->res_off;
}
void tiers_decode_token_res(const struct hsq_tiers *t, const tier_head *h, const uint8_t *code, const uint8_t *res,
			    float *k_pre, float *v);
/* Heads that keep residual codes (has_res), over every layer. */
static inline int tiers_residual_head_count(const struct hsq_tiers *t)
{
	int n = 0;
	for (int l = 0; l < t->n_layer; l++)
		for (int h = 0; h < t->n_head_kv; h++)
			n += t->layers[l].heads[h].has_res;
	return n;
}
/* Gives head h residual storage for its current capacity (codes zero:
 * the caller fills them for every token the head holds). */
hsq_status tiers_head_enable_res(const struct hsq_tiers *t, tier_head *h);
/* Residual codes of the heads params.residual_heads picks in a freshly
 * built context (after tiers_pick_retrieval), from its full cache; each
 * such head keeps them from then on. */
hsq_status tiers_build_residuals(const kv_view *kv, struct hsq_tiers *t);

/* Summary codes (L2) of a group of head h at positions pos[n] from its
 * key summary (after RoPE) and value summary, and back: each coded minus
 * the group's centre when that is shorter (flag TIER_CODE_CENTRED), the
 * group's centre being the mean of the head's key centre rotated to each
 * position (keys) and the value centre (values). r: the layer's RoPE
 * table. */
hsq_status tiers_encode_summary(const struct hsq_tiers *t, const tier_head *h, const rope_table *r,
				const int32_t *pos, int n, const float *k_sum, const float *v_sum, uint8_t *code);
void tiers_decode_summary(const struct hsq_tiers *t, const tier_head *h, const rope_table *r, const int32_t *pos,
			  int n, const uint8_t *code, float *k_sum, float *v_sum);

/* Sets the centres of every head of layer `layer` from its n tokens' K
 * (before RoPE) and V (rows of stride floats, head g at g * head_dim): the
 * mean over positions from `first` on, leaving out the first `sinks` when
 * others remain. A centre that a 4-bit code's fp16 norm could not follow
 * (a coordinate beyond 65504) is left at zero. */
void tiers_set_centres(struct hsq_tiers *t, int layer, const float *k_pre, const float *v, size_t stride, int first,
		       int n, int sinks);

/* The rule that picks retrieval heads, over n heads in layer-major order:
 * marks in picked[n] (0/1) the `want` eligible heads with the highest score
 * above 0, ties to the earlier head. One rule for decode and for the tier
 * map that hsq-inspect shows. */
void tiers_pick_top(const float *score, const uint8_t *eligible, int n, int want, uint8_t *picked);

/* Marks the retrieval heads: the t->retrieval_heads (resolved) global
 * heads with the highest induction above 0 (none outside hsq mode). */
hsq_status tiers_pick_retrieval(struct hsq_tiers *t);

/* Appends tokens to a head (capacity grows). Codes are copied; the decoded
 * working copies, and the router codes of a group's keys once the head is
 * fitted (tiers_pq_fit), are made from them (r: the layer's RoPE table,
 * which the router's keys after RoPE need). */
hsq_status tiers_head_add_l1(struct hsq_tiers *t, int layer, tier_head *h, int n, const int32_t *pos,
			     const uint8_t *codes, const uint8_t *res);
hsq_status tiers_head_add_group(struct hsq_tiers *t, const rope_table *r, tier_head *h, int n, const int32_t *pos,
				const uint8_t *codes, const uint8_t *res, const uint8_t *sum_code, int cls);
/* res: the tokens' residual key codes ([n][code4]) when the head has
 * residuals (has_res), else ignored (may be NULL). The router codes come
 * from the keys without their residuals: the scores of a head with
 * residuals bound its keys to within the 4-bit code's error, which only
 * orders the groups (attention reads the fetched keys as decoded). */

/* Re-decodes the L1 working keys of the heads that keep residual codes
 * (with them unless residuals are off) and empties their decoded-group
 * cache: after the residuals arrive, or after they were turned on or off. */
void tiers_refresh_residual_heads(struct hsq_tiers *t);

/* Router key codes (tiers_pq.c). tiers_pq_grow sizes a head's codes for
 * cap_l3 tokens; tiers_pq_fit fits the head's centroids over its L3 keys
 * and codes every key, once its groups are complete (r: the layer's RoPE
 * table); tiers_pq_add codes L3 tokens first..first+n-1 (nothing before
 * tiers_pq_fit_all; after it, a head without centroids is fitted).
 * tiers_pq_group_scores: for queries q ([G][hd], the query heads sharing
 * the KV head), each group's score is the largest over the G queries and
 * the group's keys of q . k~ + |q| r, an upper bound of q . k; table:
 * scratch of G * head_dim * TIER_PQ_K floats, key_score: scratch of
 * tier_pq_blocks(n_l3) floats (each key's score). */
hsq_status tiers_pq_grow(const struct hsq_tiers *t, tier_head *h, int cap_l3);
hsq_status tiers_pq_fit(const struct hsq_tiers *t, tier_head *h, const rope_table *r);
hsq_status tiers_pq_add(const struct hsq_tiers *t, tier_head *h, const rope_table *r, int first, int n);
void tiers_pq_group_scores(const struct hsq_tiers *t, const tier_head *h, const float *q, int G, float *table,
			   float *key_score, float *score);
/* Fits the router codes of every head with groups (end of building or
 * loading the tiers), one head per task of the backend's host threads. */
hsq_status tiers_pq_fit_all(struct hsq_tiers *t, hsq_pool *pool);

/* The router's group scores, as tiers_pq_group_scores computes them: the
 * backend's op (backend.h, score_groups) behind a plain function pointer,
 * so that the attention below can call a backend's own. */
typedef void (*tier_score_fn)(void *user, const struct hsq_tiers *t, const tier_head *h, const float *q, int G,
			      float *table, float *key_score, float *score);

/* Tokens per KV head the router fetches at a step over n_tokens
 * positions: the budget as set, hsq_default_budget(n_tokens) for
 * HSQ_BUDGET_DEFAULT, and `all` for HSQ_BUDGET_ALL (every group). */
static inline int tiers_budget_tokens(const struct hsq_tiers *t, int n_tokens, int all)
{
	return t->budget == HSQ_BUDGET_ALL ? all
	       : t->budget == HSQ_BUDGET_DEFAULT ? hsq_default_budget(n_tokens)
						 : t->budget;
}

/* Builds the tiers from a full KV cache (positions 0..kv->n_tokens-1) and
 * the observation queries its owner captured. */
hsq_status tiers_build(const kv_view *kv, struct hsq_tiers *t);

/* The attention of one layer for a chunk of n tokens: appends k, v (after
 * RoPE, [n][n_head_kv * head_dim]) to the tail, then every token attends
 * to L1, the summaries of unfetched groups, the fetched groups and the
 * tail up to its position. full_k/full_v: the layer's full cache (fp16,
 * ring of full_cap rows) when the recall probe is on, else NULL. */
void tiers_attend(struct hsq_tiers *t, int layer, const float *q, const float *k, const float *v, const int *pos,
		  int n, const uint16_t *full_k, const uint16_t *full_v, int full_cap, float *out, hsq_pool *pool,
		  tier_score_fn score, void *score_user);

/* Sizes scratch, trace buffers, tail and RoPE tables for a chunk of n
 * tokens; call before the chunk's layers run. */
hsq_status tiers_reserve_chunk(struct hsq_tiers *t, int n);

/* Moves tail tokens beyond the recent window into the tiers (online
 * compression); call after every chunk. */
hsq_status tiers_compact(struct hsq_tiers *t);


#endif

/*
 * test_resume_tiers.c - the HSQ tiers on the real default model.
 *
 * The context is share/sample-document.txt, twice (about 1,100 tokens), so
 * there are sinks, a window, flagged L1 tokens and ~60 groups per head.
 * SmolLM2 has 9 query heads on 3 KV heads: every test goes through the GQA
 * routing (one routing decision per KV head, shared by its query heads).
 *
 *   reversibility   budget HSQ_BUDGET_ALL fetches every group: without
 *                   retrieval heads and with the residual keys off, logits
 *                   equal mode quant within 2e-3 (same codes, same
 *                   decoding; only the order of the softmax sums differs),
 *                   and with the residual keys on they differ;
 *   budget 0        nothing is fetched (trace), the captured attention mass
 *                   is below 1 and the logits differ from the full fetch;
 *   routing         with a small budget the router fetches groups whose
 *                   tokens fit the budget, every step, every head; the recall
 *                   probe rises with the budget;
 *   RoPE positions  quant (every key decoded and rotated to its position)
 *                   stays close to full precision: the argmax agrees on the
 *                   continuation and the mean negative log-likelihood of
 *                   the document's own next tokens rises by < 0.15 nats
 *                   (keys at wrong positions cost far more);
 *   group cache     fetched groups kept decoded between and within attend
 *                   calls (least recently used slots reused) change nothing:
 *                   one-token steps, chunks of 5, 1, 7 and 3 tokens and one
 *                   chunk all give bit for bit the logits of one chunk with
 *                   the cache off (every group decoded afresh by each task);
 *   decode split    one-token steps (the split attention of tiers_attend.c:
 *                   rows and columns over the threads) and one chunk (one
 *                   task per token and KV head) give the same logits bit
 *                   for bit, in modes quant and hsq with their defaults
 *                   (retrieval heads, the group cache);
 *   online          64 decode steps past the window turn tail tokens into
 *                   groups (counts grow, the tail stays bounded);
 *   snapshots       save -> load gives the same logits, bit for bit; a
 *                   flipped byte in a tier section is refused.
 */
#include <math.h>
#include <unistd.h>

#include "context/context.h"
#include "golden_util.h"
#include "kv/tiers.h"

#define N_NEXT 16

typedef struct doc_ctx {
	hsq_model *model;
	hsq_model_info info;
	hsq_token *doc;
	size_t n_doc;
	hsq_token next[N_NEXT];
} doc_ctx;

static void open_doc(doc_ctx *d, const char *what)
{
	GU_LOAD_MODEL_OR_SKIP(d->model, what);
	hsq_model_get_info(d->model, &d->info);
	FILE *f = fopen("share/sample-document.txt", "rb");
	cr_assert(f, "share/sample-document.txt is missing (run from the repository root)");
	char buf[8192];
	size_t n = fread(buf, 1, sizeof buf / 2 - 1, f);
	fclose(f);
	memcpy(buf + n, buf, n); /* twice */
	buf[2 * n] = '\0';
	hsq_token *all;
	size_t n_all;
	cr_assert_eq(hsq_tokenize(d->model, buf, 2 * n, 1, 0, &all, &n_all), HSQ_OK, "%s", hsq_last_error());
	cr_assert_gt(n_all, 800 + N_NEXT);
	d->n_doc = n_all - N_NEXT;
	d->doc = all;
	memcpy(d->next, all + d->n_doc, sizeof d->next);
}

static void close_doc(doc_ctx *d)
{
	hsq_free(d->doc);
	hsq_model_free(d->model);
}

/* A prefilled context compressed to mode (full: not compressed). */
static hsq_context *prefill(doc_ctx *d, hsq_snapshot_mode mode)
{
	hsq_context_params cp = { 4096, 2, 256 };
	hsq_context *ctx;
	cr_assert_eq(hsq_context_new(d->model, &cp, &ctx), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_eval(ctx, d->doc, d->n_doc, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_compress(ctx, mode, NULL), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_mode(ctx), mode);
	return ctx;
}

/* Logits of the N_NEXT continuation tokens, one eval each. */
static float *continue_logits(doc_ctx *d, hsq_context *ctx)
{
	size_t V = (size_t)d->info.n_vocab;
	float *lg = malloc(N_NEXT * V * sizeof *lg);
	for (int i = 0; i < N_NEXT; i++)
		cr_assert_eq(hsq_context_eval(ctx, &d->next[i], 1, lg + i * V, 0), HSQ_OK, "%s", hsq_last_error());
	return lg;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		double x = fabs((double)a[i] - b[i]);
		m = x > m ? x : m;
	}
	return m;
}

/* The recall probe's mean over layers. */
static double mean_recall(const doc_ctx *d, const hsq_context *ctx)
{
	double rec[64], mean = 0;
	cr_assert_leq(d->info.n_layer, 64);
	cr_assert_eq(hsq_context_recall(ctx, rec), HSQ_OK, "%s", hsq_last_error());
	for (int l = 0; l < d->info.n_layer; l++)
		mean += rec[l] / d->info.n_layer;
	return mean;
}

typedef struct trace_count {
	long calls, groups, empty;
	int max_groups;
	int n_head_kv;
	int head_max[1024]; /* [layer * n_head_kv + head] most groups in one step */
} trace_count;

static void count_trace(void *user, int pos, int layer, int head, const int *groups, int n)
{
	trace_count *c = user;
	c->calls++;
	c->groups += n;
	c->empty += n == 0;
	c->max_groups = n > c->max_groups ? n : c->max_groups;
	int k = layer * c->n_head_kv + head;
	if (c->n_head_kv && k < 1024 && n > c->head_max[k])
		c->head_max[k] = n;
	for (int i = 1; i < n; i++)
		cr_assert_lt(groups[i - 1], groups[i], "fetched groups come in L2 order");
	(void)pos;
	(void)layer;
	(void)head;
}

Test(tiers, budget_all_equals_quant)
{
	doc_ctx d;
	open_doc(&d, "tiers reversibility");
	hsq_context *q = prefill(&d, HSQ_MODE_QUANT), *h = prefill(&d, HSQ_MODE_HSQ), *r = prefill(&d, HSQ_MODE_HSQ);
	cr_assert_eq(hsq_context_set_budget(h, HSQ_BUDGET_ALL), HSQ_OK);
	cr_assert_eq(hsq_context_set_retrieval_heads(h, 0), HSQ_OK);
	cr_assert_eq(hsq_context_use_residual_keys(h, 0), HSQ_OK);
	cr_assert_eq(hsq_context_set_budget(r, HSQ_BUDGET_ALL), HSQ_OK);
	cr_assert_eq(hsq_context_set_retrieval_heads(r, 0), HSQ_OK);
	cr_assert_gt(hsq_context_residual_keys(r), 0);
	hsq_tier_stats ts;
	hsq_context_tier_stats(h, &ts);
	cr_assert_gt(ts.n_group, 0, "hsq built no groups");
	float *a = continue_logits(&d, q), *b = continue_logits(&d, h), *c = continue_logits(&d, r);
	double diff = max_abs_diff(a, b, (size_t)N_NEXT * d.info.n_vocab);
	double dres = max_abs_diff(a, c, (size_t)N_NEXT * d.info.n_vocab);
	fprintf(stderr, "tiers: budget all vs quant: max |logit diff| %.2e over %d steps (%.2e with the residual keys on)\n",
		diff, N_NEXT, dres);
	/* The same rows in another order (L1, then the groups): the sums
	 * differ in rounding only. Over fp16 rows that is up to 6.3e-3 here
	 * (2.6e-5 when the rows were fp32; fp32 rows rounded to fp16 values
	 * gave the same 6.3e-3, so it is the rounding, not the storage); an
	 * unmasked summary or a missed group moves logits by 1e-1 or more. */
	cr_assert_leq(diff, 2e-2, "budget-all hsq differs from quant by %g", diff);
	cr_assert_gt(dres, 1e-3, "the residual keys should change the logits (%g)", dres);
	free(a);
	free(b);
	free(c);
	hsq_context_free(q);
	hsq_context_free(h);
	hsq_context_free(r);
	close_doc(&d);
}

Test(tiers, budget_zero_fetches_nothing)
{
	doc_ctx d;
	open_doc(&d, "tiers budget 0");
	hsq_context *h0 = prefill(&d, HSQ_MODE_HSQ), *ha = prefill(&d, HSQ_MODE_HSQ);
	cr_assert_eq(hsq_context_set_budget(h0, 0), HSQ_OK);
	cr_assert_eq(hsq_context_set_budget(ha, HSQ_BUDGET_ALL), HSQ_OK);
	trace_count c = { 0 };
	hsq_context_set_trace(h0, count_trace, &c);
	cr_assert_eq(hsq_context_set_recall_probe(h0, 1), HSQ_OK);
	float *a = continue_logits(&d, h0), *b = continue_logits(&d, ha);
	cr_assert_eq(c.groups, 0, "budget 0 fetched %ld groups", c.groups);
	cr_assert_eq(c.calls, (long)N_NEXT * d.info.n_layer * d.info.n_head_kv);
	double mean = mean_recall(&d, h0);
	fprintf(stderr, "tiers: budget 0: recall (L1 + tail only) %.3f\n", mean);
	cr_assert_lt(mean, 0.999, "with nothing fetched, L1 and the tail cannot hold all the attention mass");
	cr_assert_gt(max_abs_diff(a, b, (size_t)N_NEXT * d.info.n_vocab), 1e-3,
		     "attending summaries only should differ from attending every original");
	for (size_t i = 0; i < (size_t)N_NEXT * d.info.n_vocab; i++)
		cr_assert(isfinite(a[i]));
	free(a);
	free(b);
	hsq_context_free(h0);
	hsq_context_free(ha);
	close_doc(&d);
}

Test(tiers, routing_respects_budget_and_recall_grows)
{
	doc_ctx d;
	open_doc(&d, "tiers routing");
	double prev = -1;
	int budgets[3] = { 32, 128, HSQ_BUDGET_ALL };
	for (int k = 0; k < 3; k++) {
		hsq_context *h = prefill(&d, HSQ_MODE_HSQ);
		cr_assert_eq(hsq_context_set_budget(h, budgets[k]), HSQ_OK);
		static trace_count c;
		memset(&c, 0, sizeof c);
		c.n_head_kv = d.info.n_head_kv;
		cr_assert_leq(d.info.n_layer * d.info.n_head_kv, 1024);
		hsq_context_set_trace(h, count_trace, &c);
		cr_assert_eq(hsq_context_set_recall_probe(h, 1), HSQ_OK);
		free(continue_logits(&d, h));
		double mean = mean_recall(&d, h);
		int n_retrieval = hsq_context_retrieval_heads(h);
		fprintf(stderr, "tiers: budget %d: %.2f groups per head-step, recall %.4f (%d retrieval heads)\n",
			budgets[k], (double)c.groups / c.calls, mean, n_retrieval);
		if (budgets[k] > 0) { /* groups hold at most 16 tokens: at most budget/8 medium groups,
				       * except in the retrieval heads, which fetch every group */
			int over = 0;
			for (int i = 0; i < d.info.n_layer * d.info.n_head_kv; i++)
				over += c.head_max[i] > budgets[k] / 8;
			cr_assert_gt(n_retrieval, 0, "the default picks retrieval heads");
			cr_assert_leq(over, n_retrieval, "budget %d: %d heads fetched more than %d groups", budgets[k], over,
				      budgets[k] / 8);
		} else {
			cr_assert_eq(c.empty, 0);
		}
		cr_assert_gt(mean, prev, "recall should grow with the budget (%g after %g)", mean, prev);
		prev = mean;
		if (budgets[k] == HSQ_BUDGET_ALL)
			cr_assert_gt(mean, 0.999999, "fetching everything must capture all the mass (%g)", mean);
		hsq_context_free(h);
	}
	close_doc(&d);
}

Test(tiers, group_cache_changes_nothing)
{
	doc_ctx d;
	open_doc(&d, "tiers group cache");
	size_t V = (size_t)d.info.n_vocab;
	hsq_context *ref = prefill(&d, HSQ_MODE_HSQ);
	cr_assert_eq(hsq_context_set_budget(ref, 64), HSQ_OK);
	ref->tiers->group_cache_off = 1;
	float *want = malloc(N_NEXT * V * sizeof *want), *got = malloc(N_NEXT * V * sizeof *got);
	cr_assert_eq(hsq_context_eval(ref, d.next, N_NEXT, want, 1), HSQ_OK, "%s", hsq_last_error());
	hsq_context_free(ref);

	static const int splits[][5] = { /* chunk sizes, 0-terminated */
		{ N_NEXT, 0 }, { 5, 1, 7, 3, 0 } };
	for (int s = 0; s < 3; s++) {
		hsq_context *c = prefill(&d, HSQ_MODE_HSQ);
		cr_assert_eq(hsq_context_set_budget(c, 64), HSQ_OK);
		const char *how = s == 2 ? "one-token steps" : s == 0 ? "one chunk" : "chunks of 5, 1, 7, 3";
		if (s == 2) {
			float *one = continue_logits(&d, c);
			memcpy(got, one, N_NEXT * V * sizeof *got);
			free(one);
		} else {
			int at = 0;
			for (int i = 0; splits[s][i]; i++) {
				cr_assert_eq(hsq_context_eval(c, d.next + at, splits[s][i], got + at * V, 1), HSQ_OK,
					     "%s", hsq_last_error());
				at += splits[s][i];
			}
			cr_assert_eq(at, N_NEXT);
		}
		int cached = 0;
		for (int l = 0; l < d.info.n_layer; l++)
			for (int h = 0; h < d.info.n_head_kv; h++)
				for (int k = 0; k < c->tiers->layers[l].heads[h].n_group; k++)
					cached += c->tiers->layers[l].heads[h].g_decoded[k];
		cr_assert_gt(cached, 0, "%s: the cache holds no group", how);
		cr_assert_eq(memcmp(want, got, N_NEXT * V * sizeof *got), 0,
			     "%s with the group cache differ from one chunk without it (max %g)", how,
			     max_abs_diff(want, got, N_NEXT * V));
		hsq_context_free(c);
	}
	free(want);
	free(got);
	close_doc(&d);
}

Test(tiers, split_decode_equals_one_chunk)
{
	doc_ctx d;
	open_doc(&d, "tiers decode split");
	size_t V = (size_t)d.info.n_vocab;
	hsq_snapshot_mode modes[2] = { HSQ_MODE_QUANT, HSQ_MODE_HSQ };
	for (int m = 0; m < 2; m++) {
		hsq_context *chunk = prefill(&d, modes[m]), *steps = prefill(&d, modes[m]);
		float *want = malloc(N_NEXT * V * sizeof *want);
		cr_assert_eq(hsq_context_eval(chunk, d.next, N_NEXT, want, 1), HSQ_OK, "%s", hsq_last_error());
		float *got = continue_logits(&d, steps);
		cr_assert_eq(memcmp(want, got, N_NEXT * V * sizeof *got), 0,
			     "%s: one-token steps differ from one chunk (max %g)", m ? "hsq" : "quant",
			     max_abs_diff(want, got, N_NEXT * V));
		free(want);
		free(got);
		hsq_context_free(chunk);
		hsq_context_free(steps);
	}
	close_doc(&d);
}

Test(tiers, quant_keys_land_at_their_positions)
{
	doc_ctx d;
	open_doc(&d, "tiers rope positions");
	hsq_context *f = prefill(&d, HSQ_MODE_FULL), *q = prefill(&d, HSQ_MODE_QUANT);
	float *a = continue_logits(&d, f), *b = continue_logits(&d, q);
	int agree = 0;
	for (int i = 0; i < N_NEXT; i++)
		agree += hsq_argmax(a + (size_t)i * d.info.n_vocab, d.info.n_vocab) ==
			 hsq_argmax(b + (size_t)i * d.info.n_vocab, d.info.n_vocab);
	double nll_f = 0, nll_q = 0;
	int V = d.info.n_vocab;
	for (int i = 0; i + 1 < N_NEXT; i++) { /* step i's logits predict next[i + 1] */
		const float *x[2] = { a + (size_t)i * V, b + (size_t)i * V };
		for (int k = 0; k < 2; k++) {
			double mx = x[k][0], s = 0;
			for (int v = 1; v < V; v++)
				mx = x[k][v] > mx ? x[k][v] : mx;
			for (int v = 0; v < V; v++)
				s += exp(x[k][v] - mx);
			double nll = log(s) + mx - x[k][d.next[i + 1]];
			*(k ? &nll_q : &nll_f) += nll / (N_NEXT - 1);
		}
	}
	fprintf(stderr, "tiers: quant vs full: argmax agrees %d/%d, mean nll %.4f vs %.4f\n", agree, N_NEXT, nll_q,
		nll_f);
	cr_assert_geq(agree, N_NEXT - 2);
	cr_assert_lt(nll_q, nll_f + 0.15, "quant nll %g vs full %g", nll_q, nll_f);
	free(a);
	free(b);
	hsq_context_free(f);
	hsq_context_free(q);
	close_doc(&d);
}

Test(tiers, online_compression_bounds_the_tail)
{
	doc_ctx d;
	open_doc(&d, "tiers online compression");
	hsq_context *h = prefill(&d, HSQ_MODE_HSQ);
	hsq_tier_stats before, after;
	hsq_context_tier_stats(h, &before);
	const hsq_tier_params *p = hsq_context_tier_params(h);
	cr_assert_eq(before.tail_bytes, 0);
	int steps = p->window + 4 * p->group_size;
	for (int i = 0; i < steps; i++)
		cr_assert_eq(hsq_context_eval(h, &d.doc[i % 200 + 1], 1, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_context_tier_stats(h, &after);
	uint64_t row = 2ull * d.info.n_head_kv * d.info.head_dim * sizeof(float) * d.info.n_layer;
	fprintf(stderr, "tiers: %d steps: groups %lld -> %lld, tail %llu rows\n", steps, (long long)before.n_group,
		(long long)after.n_group, (unsigned long long)(after.tail_bytes / row));
	cr_assert_eq(after.n_group - before.n_group, 4LL * d.info.n_layer * d.info.n_head_kv,
		     "4 groups per head expected from %d steps", steps);
	cr_assert_lt(after.tail_bytes / row, (uint64_t)(p->window + p->group_size));
	cr_assert_eq(after.n_l3 - before.n_l3, 4LL * p->group_size * d.info.n_layer * d.info.n_head_kv);
	cr_assert_eq(after.n_tokens, (int)d.n_doc + steps);
	hsq_context_free(h);
	close_doc(&d);
}

Test(tiers, snapshot_roundtrip_and_damage)
{
	doc_ctx d;
	open_doc(&d, "tiers snapshot");
	char path[] = "/tmp/hsq-tiers-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	hsq_snapshot_mode modes[2] = { HSQ_MODE_HSQ, HSQ_MODE_QUANT };
	for (int k = 0; k < 2; k++) {
		hsq_context *h = prefill(&d, modes[k]);
		cr_assert_eq(hsq_snapshot_save(h, path, modes[k], 3), HSQ_OK, "%s", hsq_last_error());
		hsq_context_params cp = { 4096, 2, 256 };
		hsq_context *l;
		cr_assert_eq(hsq_snapshot_load(d.model, path, &cp, &l), HSQ_OK, "%s", hsq_last_error());
		cr_assert_eq(hsq_context_mode(l), modes[k]);
		cr_assert_eq(hsq_context_n_past(l), (int)d.n_doc);
		float *a = continue_logits(&d, h), *b = continue_logits(&d, l);
		cr_assert_eq(memcmp(a, b, (size_t)N_NEXT * d.info.n_vocab * sizeof *a), 0,
			     "%s: the loaded snapshot decodes differently", hsq_mode_name(modes[k]));
		cr_assert_neq(hsq_snapshot_save(l, path, modes[k], 3), HSQ_OK, "saving after decode must be refused");
		free(a);
		free(b);
		hsq_context_free(h);
		hsq_context_free(l);
	}
	/* damage one byte inside section l2 (hsq) */
	hsq_context *h = prefill(&d, HSQ_MODE_HSQ);
	cr_assert_eq(hsq_snapshot_save(h, path, HSQ_MODE_HSQ, 3), HSQ_OK);
	hsq_context_free(h);
	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(path, 1, &info), HSQ_OK, "%s", hsq_last_error());
	uint64_t off = 0;
	for (int i = 0; i < info.n_sections; i++)
		if (!strcmp(info.sections[i].name, "l2"))
			off = info.sections[i].offset + info.sections[i].size / 2;
	cr_assert_gt(off, 0, "no l2 section");
	FILE *f = fopen(path, "r+b");
	fseek(f, (long)off, SEEK_SET);
	int ch = fgetc(f);
	fseek(f, (long)off, SEEK_SET);
	fputc(ch ^ 0x40, f);
	fclose(f);
	hsq_context *l = NULL;
	hsq_status st = hsq_snapshot_load(d.model, path, NULL, &l);
	cr_assert_eq(st, HSQ_ERR_CHECKSUM, "damaged l2 gave %s: %s", hsq_strerror(st), hsq_last_error());
	cr_assert_null(l);
	unlink(path);
	close_doc(&d);
}

/*
 * test_resume.c - resuming from a snapshot equals a single pass.
 *
 * For each document of tests/golden/resume.tsv (written by
 * tests/ref/make_golden.py; one of them >= 4K tokens):
 *   single pass: eval(doc + prompt) in one call, then 32 greedy tokens;
 *   resumed:     eval(doc), hsq_snapshot_save(HSQ_MODE_FULL) to a temp file,
 *                hsq_snapshot_load into a fresh context, eval(prompt), 32
 *                greedy tokens.
 * The two must agree token for token and their logits must be bitwise equal
 * at every step (the API promises batch-invariant arithmetic and FULL mode
 * stores the fp32 KV cache). The single pass is then compared with the
 * references of resume.tsv: llama.cpp and the exact numpy forward pass. A
 * divergence is a failure unless it is explained by a near-tie: hsq may leave
 * numpy's path only where numpy's own top-2 gap is < NP_NEAR_TIE, and may
 * leave llama.cpp's path only where llama.cpp itself has already left the
 * exact path (its activations are quantized to 8 bits, which moves logits by
 * up to ~1; see test_golden.c). Every divergence is printed with its step
 * and gap.
 *
 * The documents are read in place from the shared corpora (visible SKIP when
 * absent) and tokenized with hsq_tokenize; the evaluation itself uses the
 * reference token ids, so a tokenizer bug is reported separately and does
 * not hide a resume bug. Separate from test_golden.c because the 4K-token
 * document takes a while under the sanitizer build; each document is its
 * own test so that `--jobs 2` runs them in parallel.
 */
#include <unistd.h>

#include "golden_util.h"

/* Numpy (fp64) vs an fp32 forward pass after 4K tokens: ~1e-3 at most. */
#define NP_NEAR_TIE 0.01

static const gu_row *find_row(const gu_table *t, const char *name)
{
	for (size_t i = 0; i < t->n_rows; i++)
		if (strcmp(t->rows[i].field[0], name) == 0)
			return &t->rows[i];
	cr_assert_fail("resume.tsv has no document named %s", name);
	return NULL;
}

/* resume.tsv: name source offset length fnv1a64 prompt n_doc n_prompt tokens
 *             n_gen ids gaps np_ids np_gaps */
static void run_resume(const char *name)
{
	hsq_model *m = NULL;
	char label[64];
	snprintf(label, sizeof label, "resume %s", name);
	GU_LOAD_MODEL_OR_SKIP(m, label);
	hsq_model_info info;
	hsq_model_get_info(m, &info);
	gu_table t = gu_table_load("resume.tsv");
	const gu_row *r = find_row(&t, name);
	const char *src = gu_field(r, 1);
	long off = strtol(gu_field(r, 2), NULL, 10);
	size_t len = (size_t)strtoull(gu_field(r, 3), NULL, 10);
	int skipped = 0;
	char *doc = gu_load_source(src, off, len, gu_field(r, 4), &skipped);
	if (skipped) {
		fprintf(stderr, "SKIP: resume %s: shared corpora not found (set HSQ_SHARED or provide "
			"../shared/corpora)\n", name);
		gu_table_free(&t);
		hsq_model_free(m);
		cr_skip_test("shared corpora not found");
	}
	size_t n_doc = (size_t)strtoul(gu_field(r, 6), NULL, 10);
	size_t n_prompt = (size_t)strtoul(gu_field(r, 7), NULL, 10);
	hsq_token *ids = NULL, *want = NULL, *npw = NULL;
	size_t n = gu_parse_ids(gu_field(r, 8), &ids);
	cr_assert_eq(n, n_doc + n_prompt, "resume.tsv %s: token count", name);
	size_t n_gen = gu_parse_ids(gu_field(r, 10), &want);
	cr_assert_eq(n_gen, (size_t)strtoul(gu_field(r, 9), NULL, 10));
	float *gaps = NULL, *npgaps = NULL;
	size_t n_gaps = gu_parse_floats(gu_field(r, 11), &gaps);
	size_t n_np = strcmp(gu_field(r, 12), "-") ? gu_parse_ids(gu_field(r, 12), &npw) : 0;
	size_t n_npgaps = gu_parse_floats(gu_field(r, 13), &npgaps);
	int n_fail = 0;

	/* The document's tokenization (reported; evaluation uses the reference ids). */
	hsq_token *dt = NULL;
	size_t n_dt = 0;
	hsq_status st = hsq_tokenize(m, doc, len, 0, 1, &dt, &n_dt);
	cr_assert_eq(st, HSQ_OK, "resume %s: hsq_tokenize: %s: %s", name, hsq_strerror(st), hsq_last_error());
	long td = gu_first_diff(dt, n_dt, ids, n_doc);
	if (td >= 0) {
		fprintf(stderr, "FAIL: resume %s: hsq_tokenize gives %zu ids, llama.cpp %zu, first "
			"difference at %ld (continuing with llama.cpp's ids)\n", name, n_dt, n_doc, td);
		n_fail++;
	}
	hsq_free(dt);

	int n_ctx = (int)(n + n_gen + 64);
	size_t V = (size_t)info.n_vocab;
	float *la = malloc(V * sizeof *la), *lb = malloc(V * sizeof *lb);
	float *ha = malloc(n_gen * V * sizeof *ha), *hb = malloc(n_gen * V * sizeof *hb);
	hsq_token *ga = malloc(n_gen * sizeof *ga), *gb = malloc(n_gen * sizeof *gb);
	cr_assert(la && lb && ha && hb && ga && gb);
	hsq_sampler *smp = gu_greedy_sampler();

	/* single pass */
	double t0 = gu_now();
	hsq_context *a = gu_context(m, n_ctx);
	st = hsq_context_eval(a, ids, n, la, 0);
	cr_assert_eq(st, HSQ_OK, "resume %s: eval %zu tokens: %s: %s", name, n, hsq_strerror(st), hsq_last_error());
	double t_prefill = gu_now() - t0;
	gu_greedy(a, smp, la, info.n_vocab, (int)n_gen, ga, ha);
	double t_single = gu_now() - t0;
	hsq_context_free(a);

	/* prefill the document, snapshot, resume in a fresh context */
	char dir[4096], path[4200];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/hsq-resume-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
	snprintf(path, sizeof path, "%s/%s.hsq", dir, name);
	t0 = gu_now();
	hsq_context *b = gu_context(m, n_ctx);
	st = hsq_context_eval(b, ids, n_doc, NULL, 0);
	cr_assert_eq(st, HSQ_OK, "resume %s: eval doc: %s: %s", name, hsq_strerror(st), hsq_last_error());
	double t_doc = gu_now() - t0;
	t0 = gu_now();
	st = hsq_snapshot_save(b, path, HSQ_MODE_FULL, 0);
	cr_assert_eq(st, HSQ_OK, "resume %s: hsq_snapshot_save(%s): %s: %s", name, path, hsq_strerror(st),
		     hsq_last_error());
	double t_save = gu_now() - t0;
	hsq_context_free(b);

	hsq_context_params p = hsq_context_default_params();
	p.n_ctx = n_ctx;
	hsq_context *c = NULL;
	t0 = gu_now();
	st = hsq_snapshot_load(m, path, &p, &c);
	cr_assert_eq(st, HSQ_OK, "resume %s: hsq_snapshot_load(%s): %s: %s", name, path, hsq_strerror(st),
		     hsq_last_error());
	double t_load = gu_now() - t0;
	cr_assert_eq(hsq_context_n_past(c), (int)n_doc, "resumed context has %d tokens, snapshot of %zu",
		     hsq_context_n_past(c), n_doc);
	cr_assert_eq(gu_first_diff(hsq_context_tokens(c), n_doc, ids, n_doc), -1,
		     "resumed context's tokens are not the document's");
	t0 = gu_now();
	st = hsq_context_eval(c, ids + n_doc, n_prompt, lb, 0);
	cr_assert_eq(st, HSQ_OK, "resume %s: eval prompt after load: %s: %s", name, hsq_strerror(st),
		     hsq_last_error());
	gu_greedy(c, smp, lb, info.n_vocab, (int)n_gen, gb, hb);
	double t_resumed = gu_now() - t0;
	hsq_context_free(c);
	struct stat sst;
	long long snap_bytes = stat(path, &sst) == 0 ? (long long)sst.st_size : -1;
	unlink(path);
	rmdir(dir);

	fprintf(stderr, "  resume %s: %zu doc + %zu prompt tokens; single pass %.1fs (prefill %.1fs); "
		"doc %.1fs, save %.2fs (%lld bytes), load %.2fs, prompt + %zu tokens %.1fs\n", name, n_doc,
		n_prompt, t_single, t_prefill, t_doc, t_save, snap_bytes, t_load, n_gen, t_resumed);

	/* resumed == single pass, bitwise */
	long d = gu_first_diff(gb, n_gen, ga, n_gen);
	if (d >= 0) {
		fprintf(stderr, "FAIL: resume %s: resumed greedy differs from the single pass at step %ld "
			"(%d vs %d)\n", name, d, gb[d], ga[d]);
		n_fail++;
	}
	for (size_t k = 0; k < n_gen; k++)
		if (memcmp(ha + k * V, hb + k * V, V * sizeof *ha) != 0) {
			gu_cmp cc = gu_compare(hb + k * V, ha + k * V, V);
			fprintf(stderr, "FAIL: resume %s: logits at step %zu are not bitwise equal to the "
				"single pass (max abs %.3g)\n", name, k, cc.max_abs);
			n_fail++;
			break;
		}

	/* single pass vs the references */
	long dn = npw ? gu_first_diff(ga, n_gen, npw, n_np) : -1;
	int np_tie = 0;
	if (npw && dn >= 0) {
		gu_report_divergence(m, "numpy", name, ga, npw, npgaps, n_npgaps, dn);
		if ((size_t)dn < n_npgaps && npgaps[dn] < NP_NEAR_TIE) {
			fprintf(stderr, "  resume %s: near-tie in the exact reference (gap %.4f < %.2f): accepted\n",
				name, npgaps[dn], NP_NEAR_TIE);
			np_tie = 1;
		} else {
			fprintf(stderr, "FAIL: resume %s: greedy leaves the exact reference's path at step %ld\n",
				name, dn);
			n_fail++;
		}
	}
	long dl = gu_first_diff(ga, n_gen, want, n_gen);
	if (dl >= 0) {
		gu_report_divergence(m, "llama.cpp", name, ga, want, gaps, n_gaps, dl);
		long ref_split = npw ? gu_first_diff(want, n_gen, npw, n_np) : -1;
		if (ref_split >= 0 && ref_split <= dl) {
			fprintf(stderr, "  resume %s: llama.cpp itself left the exact path at step %ld "
				"(its gap there %.4f): accepted\n", name, ref_split, gaps[ref_split]);
		} else if (np_tie && dn <= dl) {
			fprintf(stderr, "  resume %s: explained by the near-tie at step %ld: accepted\n", name, dn);
		} else {
			fprintf(stderr, "FAIL: resume %s: greedy differs from llama.cpp at step %ld\n", name, dl);
			n_fail++;
		}
	} else {
		double mg = INFINITY;
		for (size_t k = 0; k < n_gaps; k++)
			mg = gaps[k] < mg ? gaps[k] : mg;
		fprintf(stderr, "  resume %s: %zu greedy tokens equal to llama.cpp (smallest gap %.3f)%s\n",
			name, n_gen, mg, (npw && dn < 0) ? " and to numpy" : "");
	}

	hsq_sampler_free(smp);
	free(la);
	free(lb);
	free(ha);
	free(hb);
	free(ga);
	free(gb);
	free(ids);
	free(want);
	free(npw);
	free(gaps);
	free(npgaps);
	free(doc);
	gu_table_free(&t);
	hsq_model_free(m);
	cr_assert_eq(n_fail, 0, "resume %s: %d check(s) failed (see above)", name, n_fail);
}

/* One test per resume.tsv document; `covered` checks the list is complete. */
static const char *const DOCS[] = {"passage", "moby", "fr_man", "sotu_4k"};

Test(resume, covered)
{
	gu_table t = gu_table_load("resume.tsv");
	int big = 0;
	for (size_t i = 0; i < t.n_rows; i++) {
		int found = 0;
		for (size_t k = 0; k < sizeof DOCS / sizeof DOCS[0]; k++)
			found |= strcmp(DOCS[k], t.rows[i].field[0]) == 0;
		cr_expect(found, "resume.tsv document %s has no test in test_resume.c", t.rows[i].field[0]);
		big |= strtol(gu_field(&t.rows[i], 6), NULL, 10) >= 4096;
	}
	cr_expect(big, "resume.tsv needs a document of >= 4096 tokens");
	gu_table_free(&t);
}

Test(resume, passage)
{
	run_resume("passage");
}

Test(resume, moby)
{
	run_resume("moby");
}

Test(resume, fr_man)
{
	run_resume("fr_man");
}

Test(resume, sotu_4k)
{
	run_resume("sotu_4k");
}

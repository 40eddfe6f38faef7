/*
 * golden_util.h - helpers shared by test_golden.c and test_resume.c: locating
 * the golden data and the shared corpora, parsing the TSV manifests written
 * by tests/ref/make_golden.py (formats in tests/ref/README.md), and comparing
 * logits. Uses only the public include/hsq.h API.
 *
 * Paths: the tests run from the repository root (make unit), so the golden
 * data is tests/golden/ (override: HSQ_GOLDEN_DIR) and the corpora are
 * $HSQ_SHARED/corpora, else ../shared/corpora. The model is $HSQ_TEST_MODEL.
 */
#ifndef HSQ_GOLDEN_UTIL_H
#define HSQ_GOLDEN_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hsq.h"

#define GU_UNUSED __attribute__((unused))
#define GU_MAX_FIELDS 16

/* The greedy continuations of the golden files are GOLDEN_N_GEN tokens. */
#define GOLDEN_N_GEN 32

static GU_UNUSED const char *gu_golden_dir(void)
{
	const char *d = getenv("HSQ_GOLDEN_DIR");
	return d && *d ? d : "tests/golden";
}

static GU_UNUSED int gu_is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The shared corpora directory, or NULL if absent. */
static GU_UNUSED const char *gu_corpora_dir(void)
{
	static char buf[4096];
	const char *shared = getenv("HSQ_SHARED");
	snprintf(buf, sizeof buf, "%s/corpora", shared && *shared ? shared : "../shared");
	return gu_is_dir(buf) ? buf : NULL;
}

static GU_UNUSED double gu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Loads $HSQ_TEST_MODEL, or prints a visible SKIP line and skips the test. */
#define GU_LOAD_MODEL_OR_SKIP(model_var, what)                                                 \
	do {                                                                                \
		const char *mp_ = getenv("HSQ_TEST_MODEL");                                 \
		FILE *mf_ = mp_ && *mp_ ? fopen(mp_, "rb") : NULL;                          \
		if (!mf_) {                                                                 \
			fprintf(stderr, "SKIP: %s: no model (set HSQ_TEST_MODEL to "       \
				"SmolLM2-135M-Instruct.Q4_1.gguf; `make model` fetches it)\n", \
				(what));                                                    \
			cr_skip_test("no model: set HSQ_TEST_MODEL");                       \
		}                                                                           \
		fclose(mf_);                                                                \
		hsq_status st_ = hsq_model_load(mp_, &(model_var));                         \
		cr_assert_eq(st_, HSQ_OK, "hsq_model_load(%s): %s: %s", mp_,               \
			     hsq_strerror(st_), hsq_last_error());                          \
	} while (0)

/* Reads len bytes at off of path (len (size_t)-1: the whole file). Returns a
 * malloc'ed, NUL-terminated buffer, or NULL (errno set). */
static GU_UNUSED char *gu_read_range(const char *path, long off, size_t len, size_t *out_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	if (!f)
		return NULL;
	if (len == (size_t)-1) {
		if (fseek(f, 0, SEEK_END) != 0)
			goto fail;
		long end = ftell(f);
		if (end < 0)
			goto fail;
		len = (size_t)end - (size_t)off;
	}
	if (fseek(f, off, SEEK_SET) != 0)
		goto fail;
	buf = malloc(len + 1);
	if (!buf)
		goto fail;
	if (fread(buf, 1, len, f) != len) {
		errno = EIO;
		goto fail;
	}
	buf[len] = '\0';
	fclose(f);
	if (out_len)
		*out_len = len;
	return buf;
fail:
	free(buf);
	fclose(f);
	return NULL;
}

static GU_UNUSED uint64_t gu_fnv1a64(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Resolves a manifest "source" field: "corpora:REL" (NULL + *skipped = 1 when
 * the corpora are absent) or a path relative to the golden dir. Reads
 * [off, off+len) and checks the FNV-1a hash the generator recorded, so a
 * changed corpus is reported as such rather than as a tokenizer bug. */
static GU_UNUSED char *gu_load_source(const char *source, long off, size_t len,
				      const char *fnv_hex, int *skipped)
{
	char path[4096];
	int k;
	*skipped = 0;
	if (strncmp(source, "corpora:", 8) == 0) {
		const char *c = gu_corpora_dir();
		if (!c) {
			*skipped = 1;
			return NULL;
		}
		k = snprintf(path, sizeof path, "%s/%s", c, source + 8);
	} else {
		k = snprintf(path, sizeof path, "%s/%s", gu_golden_dir(), source);
	}
	cr_assert(k > 0 && (size_t)k < sizeof path, "path too long: %s", source);
	size_t got = 0;
	char *buf = gu_read_range(path, off, len, &got);
	cr_assert_not_null(buf, "cannot read %s [%ld, +%zu): %s", path, off, len, strerror(errno));
	if (fnv_hex && strcmp(fnv_hex, "-") != 0) {
		char hex[17];
		snprintf(hex, sizeof hex, "%016llx", (unsigned long long)gu_fnv1a64(buf, got));
		if (strcmp(hex, fnv_hex) != 0)
			cr_assert_fail("%s [%ld, +%zu) is not the text the golden data was made from "
				       "(fnv1a64 %s, expected %s): the corpus changed; rerun "
				       "tests/ref/make_golden.py", path, off, len, hex, fnv_hex);
	}
	return buf;
}

/* ------------------------------------------------------------ manifests */

typedef struct gu_row {
	char *line;                     /* owned; fields point into it */
	int n_fields;
	char *field[GU_MAX_FIELDS];
} gu_row;

typedef struct gu_table {
	gu_row *rows;
	size_t n_rows;
} gu_table;

/* Reads tests/golden/NAME: one row per non-comment line, fields split on TAB. */
static GU_UNUSED gu_table gu_table_load(const char *name)
{
	char path[4096];
	gu_table t = {0};
	snprintf(path, sizeof path, "%s/%s", gu_golden_dir(), name);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open golden manifest %s: %s (run the tests from the repository root)",
			   path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		gu_row r = {0};
		r.line = strdup(line);
		cr_assert_not_null(r.line);
		char *p = r.line;
		r.field[r.n_fields++] = p;
		while ((p = strchr(p, '\t')) != NULL && r.n_fields < GU_MAX_FIELDS) {
			*p++ = '\0';
			r.field[r.n_fields++] = p;
		}
		gu_row *nr = realloc(t.rows, (t.n_rows + 1) * sizeof *nr);
		cr_assert_not_null(nr);
		t.rows = nr;
		t.rows[t.n_rows++] = r;
	}
	free(line);
	fclose(f);
	cr_assert_gt(t.n_rows, 0, "golden manifest %s is empty", path);
	return t;
}

static GU_UNUSED void gu_table_free(gu_table *t)
{
	for (size_t i = 0; i < t->n_rows; i++)
		free(t->rows[i].line);
	free(t->rows);
	t->rows = NULL;
	t->n_rows = 0;
}

static GU_UNUSED const char *gu_field(const gu_row *r, int i)
{
	cr_assert_lt(i, r->n_fields, "golden manifest row '%s' has %d fields, wanted > %d",
		     r->field[0], r->n_fields, i);
	return r->field[i];
}

/* Parses space-separated ints ("" -> 0 ids). *out is malloc'ed (>= 1 slot). */
static GU_UNUSED size_t gu_parse_ids(const char *s, hsq_token **out)
{
	size_t n = 0, cap = 64;
	hsq_token *v = malloc(cap * sizeof *v);
	cr_assert_not_null(v);
	while (*s) {
		char *end;
		long x = strtol(s, &end, 10);
		if (end == s)
			break;
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof *v);
			cr_assert_not_null(v);
		}
		v[n++] = (hsq_token)x;
		s = end;
		while (*s == ' ')
			s++;
	}
	*out = v;
	return n;
}

/* Parses space-separated numbers up to the first that is not one; *out is
 * malloc'ed. */
static GU_UNUSED size_t gu_parse_doubles(const char *s, double **out)
{
	size_t n = 0, cap = 64;
	double *v = malloc(cap * sizeof *v);
	cr_assert_not_null(v);
	while (*s) {
		char *end;
		double x = strtod(s, &end);
		if (end == s)
			break;
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof *v);
			cr_assert_not_null(v);
		}
		v[n++] = x;
		s = end;
		while (*s == ' ')
			s++;
	}
	*out = v;
	return n;
}

/* Parses space-separated floats ("-" -> 0 values, *out NULL). */
static GU_UNUSED size_t gu_parse_floats(const char *s, float **out)
{
	*out = NULL;
	if (strcmp(s, "-") == 0)
		return 0;
	double *d;
	size_t n = gu_parse_doubles(s, &d);
	float *v = malloc((n ? n : 1) * sizeof *v);
	cr_assert_not_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)d[i];
	free(d);
	*out = v;
	return n;
}

/* Reads a little-endian float32 vector of n values from the golden dir
 * (NULL for "-"). */
static GU_UNUSED float *gu_load_f32(const char *rel, size_t n)
{
	if (strcmp(rel, "-") == 0)
		return NULL;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", gu_golden_dir(), rel);
	size_t got = 0;
	char *buf = gu_read_range(path, 0, (size_t)-1, &got);
	cr_assert_not_null(buf, "cannot read %s: %s", path, strerror(errno));
	cr_assert_eq(got, n * sizeof(float), "%s: %zu bytes, expected %zu (n_vocab %zu float32)",
		     path, got, n * sizeof(float), n);
	float *v = malloc(n * sizeof *v);
	cr_assert_not_null(v);
	for (size_t i = 0; i < n; i++) {
		const unsigned char *b = (const unsigned char *)buf + 4 * i;
		uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		memcpy(&v[i], &u, 4);
	}
	free(buf);
	return v;
}

/* ------------------------------------------------------------- numerics */

typedef struct gu_cmp {
	double max_abs; /* max |a - b| */
	double cosine;  /* a.b / (|a||b|) */
	double range;   /* max(b) - min(b): the reference's logit range */
	int argmax_a, argmax_b;
} gu_cmp;

static GU_UNUSED int gu_argmax(const float *v, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (v[i] > v[best]) /* ties to the lowest id, as hsq's greedy sampler */
			best = i;
	return (int)best;
}

/* Top-1 minus top-2 value. */
static GU_UNUSED double gu_top2_gap(const float *v, size_t n)
{
	int a = gu_argmax(v, n);
	double second = -INFINITY;
	for (size_t i = 0; i < n; i++)
		if ((int)i != a && v[i] > second)
			second = v[i];
	return (double)v[a] - second;
}

static GU_UNUSED gu_cmp gu_compare(const float *a, const float *b, size_t n)
{
	gu_cmp c = {0};
	double dot = 0, na = 0, nb = 0, lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		double x = a[i], y = b[i], d = fabs(x - y);
		if (!(d <= c.max_abs)) /* also catches NaN */
			c.max_abs = d;
		dot += x * y;
		na += x * x;
		nb += y * y;
		if (y < lo)
			lo = y;
		if (y > hi)
			hi = y;
	}
	c.cosine = dot / (sqrt(na) * sqrt(nb));
	c.range = hi - lo;
	c.argmax_a = gu_argmax(a, n);
	c.argmax_b = gu_argmax(b, n);
	return c;
}

/* Index of the first difference of two id sequences (-1 if equal). */
static GU_UNUSED long gu_first_diff(const hsq_token *a, size_t na, const hsq_token *b, size_t nb)
{
	size_t n = na < nb ? na : nb;
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return na == nb ? -1 : (long)n;
}

/* 1 if p[0..n) is well-formed UTF-8 (no partial sequences). */
static GU_UNUSED int gu_utf8_ok(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = p[i];
		size_t k = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
		if (k == 9 || i + k >= n + (k ? 0 : 1))
			return 0;
		for (size_t j = 1; j <= k; j++)
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
		i += k + 1;
	}
	return 1;
}

/* Prints a readable rendering of a token: id and bytes, control bytes
 * escaped, non-ASCII bytes escaped too when the token is not whole UTF-8. */
static GU_UNUSED void gu_fmt_token(const hsq_model *m, hsq_token t, char *out, size_t cap)
{
	const char *b = NULL;
	size_t n = 0, o = 0;
	if (hsq_token_bytes(m, t, 1, &b, &n) != HSQ_OK || !b) {
		snprintf(out, cap, "%d:?", t);
		return;
	}
	int utf8 = gu_utf8_ok((const unsigned char *)b, n);
	o = (size_t)snprintf(out, cap, "%d:'", t);
	for (size_t i = 0; i < n && o + 6 < cap; i++) {
		unsigned char c = (unsigned char)b[i];
		if (c == '\n')
			o += (size_t)snprintf(out + o, cap - o, "\\n");
		else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8))
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	if (o + 2 <= cap) {
		out[o++] = '\'';
		out[o] = '\0';
	} else {
		out[cap - 1] = '\0';
	}
}

/* Greedy generation: n_gen tokens from logits (the prompt's last-position
 * logits, overwritten), evaluating each chosen token. Also checks that the
 * hsq greedy sampler agrees with a plain argmax. all_logits (optional)
 * receives n_gen rows: the logits each token was chosen from. */
static GU_UNUSED void gu_greedy(hsq_context *ctx, hsq_sampler *smp, float *logits, int n_vocab,
				int n_gen, hsq_token *out, float *all_logits)
{
	for (int i = 0; i < n_gen; i++) {
		if (all_logits)
			memcpy(all_logits + (size_t)i * n_vocab, logits, (size_t)n_vocab * sizeof *logits);
		hsq_token t = hsq_sampler_sample(smp, logits, n_vocab);
		int am = gu_argmax(logits, (size_t)n_vocab);
		cr_assert_eq(t, am, "greedy sampler chose %d, argmax is %d (step %d)", t, am, i);
		out[i] = t;
		hsq_status st = hsq_context_eval(ctx, &t, 1, logits, 0);
		cr_assert_eq(st, HSQ_OK, "hsq_context_eval(1 token, step %d): %s: %s", i,
			     hsq_strerror(st), hsq_last_error());
	}
}

static GU_UNUSED hsq_sampler *gu_greedy_sampler(void)
{
	hsq_sampler_params sp = hsq_sampler_default_params();
	sp.temperature = 0.0f;
	sp.top_k = 0;
	sp.top_p = 1.0f;
	hsq_sampler *s = NULL;
	hsq_status st = hsq_sampler_new(&sp, &s);
	cr_assert_eq(st, HSQ_OK, "hsq_sampler_new: %s: %s", hsq_strerror(st), hsq_last_error());
	return s;
}

static GU_UNUSED hsq_context *gu_context(const hsq_model *m, int n_ctx)
{
	hsq_context_params p = hsq_context_default_params();
	p.n_ctx = n_ctx;
	hsq_context *ctx = NULL;
	hsq_status st = hsq_context_new(m, &p, &ctx);
	cr_assert_eq(st, HSQ_OK, "hsq_context_new(n_ctx %d): %s: %s", n_ctx, hsq_strerror(st),
		     hsq_last_error());
	return ctx;
}

/* Reports, for a greedy continuation that differs from a reference at step
 * d, the reference's top-2 gap there: the size of the near-tie that the two
 * implementations resolved differently. */
static GU_UNUSED void gu_report_divergence(const hsq_model *m, const char *what, const char *case_name,
					   const hsq_token *got, const hsq_token *ref, const float *gaps,
					   size_t n_gaps, long d)
{
	char a[96], b[96];
	gu_fmt_token(m, got[d], a, sizeof a);
	gu_fmt_token(m, ref[d], b, sizeof b);
	fprintf(stderr, "  %s: greedy diverges from %s at step %ld: hsq %s, reference %s "
		"(reference top-2 gap there %.4f)\n", case_name, what, d, a, b,
		(size_t)d < n_gaps ? (double)gaps[d] : NAN);
}

#endif

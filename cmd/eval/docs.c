/* docs.c - the documents of ppl and agree: files read, checked and cut
 * into token sequences; named in the configuration; their log records. */
#include <stdlib.h>
#include <string.h>

#include "docs.h"

static char *read_text(const char *path, size_t *len, char hash[17])
{
	char *text = cli_read_all(EVAL_PROG, path, len);
	if (*len == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "%s is empty; give a text document", path);
	if (strlen(text) != *len)
		cli_die(EVAL_PROG, EXIT_INPUT, "%s contains a NUL byte at offset %zu; is it text?", path, strlen(text));
	eval_fnv1a_hex(text, *len, hash);
	return text;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

static void add_doc(eval_docs *D, const char *name, hsq_token *toks, size_t n)
{
	eval_doc *d = realloc(D->docs, (size_t)(D->n + 1) * sizeof *d);
	if (!d)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	D->docs = d;
	d = &D->docs[D->n++];
	snprintf(d->name, sizeof d->name, "%s", name);
	d->toks = toks;
	d->n = n;
}

/* --join: the files' texts, in order, separated by a blank line, then cut
 * into consecutive samples of need tokens (the rest is dropped). */
static void load_joined(eval_docs *D, const eval_runner *R, int need)
{
	sbuf all = { 0 };
	for (int i = 0; i < D->n_files; i++) {
		size_t len;
		char *text = read_text(D->files[i], &len, D->hash[i]);
		sb_printf(&all, "%s%s", i ? "\n\n" : "", text);
		free(text);
	}
	size_t n;
	hsq_token *toks = eval_tokenize(R->model, all.s, all.len, -1, 0, &n, "joined documents");
	sb_free(&all);
	for (size_t at = 0; at + (size_t)need <= n; at += (size_t)need) {
		hsq_token *t = malloc((size_t)need * sizeof *t);
		char name[32];
		if (!t)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		memcpy(t, toks + at, (size_t)need * sizeof *t);
		snprintf(name, sizeof name, "joined-%03d", D->n);
		add_doc(D, name, t, (size_t)need);
	}
	if (D->n == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "the joined documents are %zu tokens, fewer than the %d one sample needs; "
					       "give more text or lower --context",
			n, need);
	hsq_free(toks);
}

void eval_docs_load(eval_docs *D, const eval_runner *R, int n_files, char **files, int need, int join)
{
	memset(D, 0, sizeof *D);
	if (n_files > EVAL_MAX_FILES)
		cli_usage_error(EVAL_PROG, "at most %d documents", EVAL_MAX_FILES);
	D->n_files = n_files;
	for (int i = 0; i < n_files; i++)
		D->files[i] = files[i];
	if (join) {
		load_joined(D, R, need);
		return;
	}
	int kept = 0;
	for (int i = 0; i < n_files; i++) {
		size_t len, n;
		char *text = read_text(files[i], &len, D->hash[i]);
		hsq_token *toks = eval_tokenize(R->model, text, len, -1, 0, &n, files[i]);
		free(text);
		hsq_token *doc = NULL;
		if (n < (size_t)need) {
			/* not silently: a skipped document changes what the summary covers */
			fprintf(stderr, "%s: skipping %s: %zu tokens, fewer than the %d needed (or use --join)\n",
				EVAL_PROG, files[i], n, need);
		} else if (!(doc = malloc((size_t)need * sizeof *doc))) {
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		} else {
			memcpy(doc, toks, (size_t)need * sizeof *doc); /* the document's first need tokens */
			kept++;
		}
		hsq_free(toks);
		add_doc(D, base_name(files[i]), doc, doc ? (size_t)need : 0);
	}
	if (kept == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "no document has the %d tokens needed; give longer documents, lower "
					       "--context, or concatenate them with --join",
			need);
}

void eval_docs_config(const eval_docs *D, sbuf *b)
{
	sb_printf(b, "\"documents\":[");
	for (int i = 0; i < D->n_files; i++) {
		sb_printf(b, "%s{\"name\":", i ? "," : "");
		sb_jstr(b, base_name(D->files[i]));
		sb_printf(b, ",\"fnv1a\":\"%s\"}", D->hash[i]);
	}
	sb_printf(b, "]");
}

void eval_docs_free(eval_docs *D)
{
	for (int i = 0; i < D->n; i++)
		free(D->docs[i].toks);
	free(D->docs);
	D->docs = NULL;
	D->n = 0;
}

/* ------------------------------------------------- document records */

int eval_doc_record(const json_value *rec, const eval_docs *D, long *index, char *err, size_t cap)
{
	const json_value *kind = json_get(rec, "record"), *name = json_get(rec, "name");
	if (!kind || kind->type != JSON_STRING || strcmp(kind->string, "document")) {
		snprintf(err, cap, "'record' is not \"document\"");
		return 0;
	}
	if (!json_int_member(rec, "index", 0, D->n - 1, index, err, cap))
		return 0;
	if (!name || name->type != JSON_STRING || strcmp(name->string, D->docs[*index].name)) {
		snprintf(err, cap, "'name' is not \"%s\", the name of document %ld", D->docs[*index].name, *index);
		return 0;
	}
	if (!D->docs[*index].toks) {
		snprintf(err, cap, "document %ld (%s) is too short for this run", *index, D->docs[*index].name);
		return 0;
	}
	return 1;
}

int eval_doc_records(const eval_log *L, const eval_docs *D, const json_value **by_doc)
{
	int n = 0;
	for (int i = 0; i < D->n; i++)
		by_doc[i] = NULL;
	for (size_t i = 0; i < L->n; i++) {
		int k = (int)json_get(&L->records[i], "index")->number;
		if (by_doc[k])
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: document %d (%s) is in the log twice; remove one", L->path,
				L->lines[i], k, D->docs[k].name);
		by_doc[k] = &L->records[i];
		n++;
	}
	return n;
}

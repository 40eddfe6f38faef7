/* docs.h - the documents of ppl and agree (docs.c): files read, cut into
 * token sequences, named in the configuration and in the log's records. */
#ifndef HSQ_CMD_EVAL_DOCS_H
#define HSQ_CMD_EVAL_DOCS_H

#include "log.h"
#include "runner.h"

typedef struct eval_doc {
	char name[256];      /* base name of the file, or "joined-NNN" */
	hsq_token *toks;     /* the first n tokens (malloc), NULL when skipped */
	size_t n;
} eval_doc;

typedef struct eval_docs {
	int n_files;
	const char *files[EVAL_MAX_FILES];
	char hash[EVAL_MAX_FILES][17]; /* FNV-1a 64 of each file, hex */
	int n;                          /* documents (or joined samples) */
	eval_doc *docs;
} eval_docs;

/* Reads the files (exit 4 when one cannot be read or is empty) and cuts
 * them into documents of need tokens: each file one document (shorter
 * ones skipped with a note), or with join all files concatenated and cut
 * into consecutive samples. Exits 4 when nothing is long enough. */
void eval_docs_load(eval_docs *D, const eval_runner *R, int n_files, char **files, int need, int join);
/* "documents":[{"name":..,"fnv1a":..},..] for the configuration. */
void eval_docs_config(const eval_docs *D, sbuf *b);
void eval_docs_free(eval_docs *D);

/* A document record ({"record":"document","index":I,"name":..}) of a
 * kept document; *index set. 0 with a reason otherwise. */
int eval_doc_record(const json_value *rec, const eval_docs *D, long *index, char *err, size_t cap);
/* by_doc[i]: the (checked) record of document i, or NULL; exits 4 naming
 * the line of a document logged twice. Returns how many are logged. */
int eval_doc_records(const eval_log *L, const eval_docs *D, const json_value **by_doc);

#endif

/* eval.h - what the model-based subcommands of hsq-eval share (needle, ppl,
 * agree, bench): the options common to all of them, running one method on
 * a context that holds a document, the trial log that makes runs
 * resumable, a small JSON reader for it, and the writers of the summary
 * files (JSON, CSV, Markdown, SVG).
 *
 * Every subcommand follows one pattern: parse options; load the model;
 * describe the run as a configuration (a JSON object of everything that
 * decides the trials' results); open the trial log (fresh, or resumed when
 * the configuration matches); run what the log does not hold yet, one JSON
 * line per trial; then summarize from the log's records alone, so that a
 * resumed run prints what an uninterrupted one would. */
#ifndef HSQ_CMD_EVAL_H
#define HSQ_CMD_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "common/atomic.h"
#include "common/cleanup.h"
#include "common/cli.h"
#include "common/json.h"
#include "common/svg.h"
#include "common/tier_options.h"
#include "hsq_eval.h"

#define EVAL_PROG "hsq-eval"
#define EVAL_MAX_METHODS 5
#define EVAL_MAX_LIST 64   /* items of --lengths, --depths */
#define EVAL_MAX_FILES 4096 /* documents or haystack files */
#define EVAL_CHUNK 16      /* tokens per scoring step after compression */
#define EVAL_ALPHA 0.05    /* every test and interval: 95% (TOST: 90% CI) */
#define EVAL_MAX_JOBS 256  /* --jobs */

/* The subcommands (argv[0] is the subcommand's name). */
int eval_needle(int argc, char **argv);
int eval_ppl(int argc, char **argv);
int eval_agree(int argc, char **argv);
int eval_bench(int argc, char **argv);

/* ------------------------------------------------------ common options */

enum {
	EOPT_MODEL = 'm',
	EOPT_THREADS = 't',
	EOPT_QUIET = 'q',
	EOPT_METHODS = 300,
	EOPT_JSON,
	EOPT_CSV,
	EOPT_REPORT,
	EOPT_LOG,
	EOPT_RESUME,
	EOPT_FORCE,
	EOPT_SUMMARIZE,
	EOPT_JOBS,
	EOPT_SPECIFIC = 320, /* first id of a subcommand's own options */
};

/* Entries of every subcommand's option table, after its own. */
#define EVAL_COMMON_OPTIONS                                                                                       \
	{ "methods", 0, "LIST",                                                                                   \
	  "comma-separated methods: full,quant,hsq,streaming,snapkv (default: all; full, the reference, always runs)", \
	  EOPT_METHODS },                                                                                         \
	TIER_ROUTING_OPTIONS, TIER_OPTION_RESIDUAL_HEADS, TIER_OPTION_KEY_ROUNDING,                               \
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", EOPT_MODEL },        \
	{ "threads", 't', "N", "CPU threads (default: all cores; with --jobs, per job: cores / jobs)", EOPT_THREADS }, \
	{ "json", 0, "FILE", "write the summary as JSON to FILE", EOPT_JSON },                                    \
	{ "csv", 0, "FILE", "write the summary rows as CSV to FILE", EOPT_CSV },                                  \
	{ "report", 0, "DIR", "write DIR/report.md and SVG plots (DIR is created)", EOPT_REPORT },                \
	{ "log", 0, "FILE", "trial log, one JSON line per completed trial (default hsq-eval-SUBCOMMAND.jsonl)",    \
	  EOPT_LOG },                                                                                             \
	{ "resume", 0, NULL, "continue the trial log, skipping what it holds (same configuration; needle: more --trials grows it)",          \
	  EOPT_RESUME },                                                                                          \
	{ "force", 0, NULL, "overwrite an existing trial log", EOPT_FORCE },                                      \
	{ "summarize", 0, NULL, "run nothing: summarize the trials the log holds (the log is only read)",          \
	  EOPT_SUMMARIZE },                                                                                       \
	{ "quiet", 'q', NULL, "no progress lines on standard error", EOPT_QUIET }

/* In the option tables of needle, ppl and agree, not bench (whose timings
 * need the machine to themselves). */
#define EVAL_JOBS_OPTION { "jobs", 0, "N", "run the trials in N processes side by side (default 1: none)", EOPT_JOBS }

typedef struct eval_common {
	const char *sub;        /* "needle", ... */
	const char *model_arg;  /* -m, or NULL */
	int threads;            /* 0 = all cores */
	int jobs;               /* worker processes running the trials; 1: none */
	int n_methods;
	hsq_snapshot_mode methods[EVAL_MAX_METHODS]; /* methods[0] is full */
	tier_options tier;      /* --budget, --retrieval-heads; --residual-heads and --key-rounding in tier.params */
	const char *json_path, *csv_path, *report_dir;
	const char *log_path;
	char log_default[64];
	int resume, force, quiet;
	int summarize;          /* --summarize: the log is read, nothing runs */
} eval_common;

void eval_common_init(eval_common *c, const char *sub);
/* Handles option id (a common one) and returns 1, or returns 0. */
int eval_common_option(eval_common *c, int id, const char *arg);
/* Checks combinations once every option is read (exits 2). */
void eval_common_finish(eval_common *c);
/* Index of mode in c->methods, or -1. */
int eval_method_index(const eval_common *c, hsq_snapshot_mode mode);

/* Comma-separated integers from lo to hi, distinct; exits 2 naming opt. */
int eval_parse_ints(const char *opt, const char *value, long lo, long hi, int *out, int cap);
/* Comma-separated file names (pointers into a copy of value). */
int eval_parse_files(const char *opt, const char *value, const char **out, int cap);

/* Progress on stderr unless --quiet, one line in one write (so that the
 * lines of --jobs workers do not mix). */
void eval_progress(const eval_common *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks this process's progress lines "job w+1/n: " (a --jobs worker). */
void eval_progress_tag(int w, int n);

/* --------------------------------------------------------------- JSON */

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
	json_type type;
	int boolean;
	double number;
	char *string;       /* JSON_STRING: NUL-terminated (\u0000 is refused) */
	size_t n;           /* items of an array or object */
	json_value *items;  /* array elements, or object values */
	char **keys;        /* object keys */
};

/* Parses text[0..len) as one JSON value (RFC 8259; white space around it
 * allowed, nesting at most 32 deep). Returns 0, or -1 with a lowercase
 * reason and the byte offset in err. */
int json_parse(const char *text, size_t len, json_value *out, char *err, size_t cap);
void json_free(json_value *v);
/* Member key of an object, or NULL (absent, or v not an object). */
const json_value *json_get(const json_value *v, const char *key);
int json_equal(const json_value *a, const json_value *b);
/* Compact JSON text of v (for messages). */
void json_write(sbuf *b, const json_value *v);

/* Typed members of a log record; on a missing or mistyped member they
 * write a reason to err and return 0. */
int json_int_member(const json_value *o, const char *key, long lo, long hi, long *out, char *err, size_t cap);
int json_num_member(const json_value *o, const char *key, double *out, char *err, size_t cap);
int json_bool_member(const json_value *o, const char *key, int *out, char *err, size_t cap);
/* A member that must be an object (the per-method results). */
const json_value *json_obj_member(const json_value *o, const char *key, char *err, size_t cap);

/* ----------------------------------------------------------- trial log */

/* Checks one record of a subcommand's log; 0 with a reason in err. */
typedef int (*eval_record_check)(const json_value *rec, void *user, char *err, size_t cap);

typedef struct eval_log {
	char path[4096];
	FILE *f;               /* open for appending */
	json_value *records;   /* every record, read back or appended */
	long *lines;           /* the line of each record in the file */
	size_t n, cap;
	long next_line;
	eval_record_check check;
	void *user;
	int shared;            /* appended to by --jobs workers: lock each append */
} eval_log;

/* Opens c->log_path for config (the JSON text of an object). Without
 * --resume an existing log is refused (exit 2) unless --force. With
 * --resume the log's first line must hold the same subcommand and an
 * equal configuration (exit 2 naming the first difference), or one that
 * differs only in a smaller "trials" (the log then grows: its first line
 * is rewritten with this configuration and its records kept); its records
 * are validated with check (a malformed one exits 4 naming file and line,
 * except a half-written last line, which is dropped and cut off the file).
 * With --summarize the log must exist and is only read: checked as with
 * --resume, but a log of fewer trials per cell is taken as it is, a
 * half-written last line is dropped and left in the file, and nothing may
 * be appended (L->f is NULL). */
void eval_log_open(eval_log *L, const eval_common *c, const char *config, eval_record_check check, void *user);
/* Appends one record (a JSON object without newline), flushes it, and
 * keeps its parsed form in L->records. */
void eval_log_append(eval_log *L, const sbuf *record);
void eval_log_close(eval_log *L);
/* A --jobs worker: opens the log anew (an open file of its own, so that
 * the lock excludes the other workers) and appends under an exclusive
 * lock from then on. */
void eval_log_share(eval_log *L);
/* Reads the log's records again (after the workers appended theirs);
 * the header was checked when it was opened. */
void eval_log_reload(eval_log *L);

/* ------------------------------------------------------- output files */

/* A summary file (atomic.h); opened at the start so that a bad path fails
 * before the work. */
typedef atomic_file eval_file;

/* Opens path's temporary file (exit 1 naming path). path NULL: f NULL. */
void eval_file_open(eval_file *o, const char *path);
/* Renames it into place (exit 1 naming path); nothing when f is NULL. */
void eval_file_commit(eval_file *o);

/* Creates DIR if needed and checks that it is a writable directory. */
void eval_report_dir(const char *dir);
/* DIR/name, written whole by fn(f, user) and renamed into place. */
void eval_report_write(const char *dir, const char *name, void (*fn)(FILE *f, const void *user), const void *user);
/* Writes "," and v (%.6g) to a CSV row; an empty field when v is not finite. */
void eval_csv_num(FILE *f, double v);

/* ------------------------------------------------------ running methods */

typedef struct eval_runner {
	hsq_model *model;
	hsq_model_info mi;
	const eval_common *c;
	hsq_tier_params tp;    /* library defaults; keep 0 sizes streaming/snapkv to hsq's fast tier */
	int n_obs;             /* tokens re-evaluated after loading: the reader's observation window */
	char dir[4096];        /* private temporary directory */
	char snap[4200];       /* dir/doc.hsq: the full snapshot of the current document */
	char msnap[4200];      /* dir/method.hsq: one method's compressed snapshot */
	float *logits;         /* EVAL_CHUNK rows of n_vocab */
	char model_id[65];     /* sha256 of the model, hex */
} eval_runner;

/* Loads the model (exit 3) and makes the temporary directory. */
void eval_runner_init(eval_runner *R, const eval_common *c);
/* Makes R->dir afresh and names R->snap and R->msnap in it (a --jobs
 * worker's own). */
void eval_runner_tmpdir(eval_runner *R);
void eval_runner_free(eval_runner *R);
/* Appends "model", "model_sha256", "version", "methods", "budget" and the
 * tier parameters to a configuration object being written. */
void eval_runner_config(const eval_runner *R, sbuf *b);
/* Evaluates toks[0..n) in a new full context of n_ctx tokens and saves it
 * as R->snap. Returns the seconds the evaluation took. */
double eval_prefill(eval_runner *R, const hsq_token *toks, size_t n, int n_ctx);
/* A context for mode at the end of the document: loads R->snap, evaluates
 * the n_obs observation tokens (their last logits in R->logits), then
 * compresses (not for full; *compress_s its time, may be NULL) and sets
 * the budget (hsq). */
hsq_context *eval_open(eval_runner *R, hsq_snapshot_mode mode, const hsq_token *obs, int n_ctx, double *compress_s);
/* hsq_context_eval or exit (1, or 4 for a full context). */
void eval_eval(const eval_runner *R, hsq_context *ctx, const hsq_token *toks, size_t n, float *logits, int all);
/* Loads a snapshot for mode and sets the budget (bench, needle). */
hsq_context *eval_load(eval_runner *R, const char *path, int n_ctx, hsq_snapshot_mode mode);
/* Dies with the library's message for a failed call. */
void eval_die_status(hsq_status st, const char *what) __attribute__((noreturn));

int eval_argmax(const float *x, int n);
/* -log softmax(logits)[target], in double. */
double eval_nll(const float *logits, int n, int target);
/* Bytes of the fast tier: L1 + L2; for full, the whole cache at fp16. */
uint64_t eval_fast_bytes(const hsq_context *ctx);
hsq_tier_stats eval_tier_stats(const hsq_context *ctx);

/* Tokenizes or exits 4 naming what. */
hsq_token *eval_tokenize(const hsq_model *m, const char *text, size_t len, int add_bos, int special, size_t *n,
			 const char *what);

/* ---------------------------------------------------------- documents */

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
/* rec.methods[mode], an object, or NULL with a reason. */
const json_value *eval_method_result(const json_value *rec, hsq_snapshot_mode mode, char *err, size_t cap);
/* by_doc[i]: the (checked) record of document i, or NULL; exits 4 naming
 * the line of a document logged twice. Returns how many are logged. */
int eval_doc_records(const eval_log *L, const eval_docs *D, const json_value **by_doc);

/* 64-bit FNV-1a of bytes, as 16 hex digits. */
void eval_fnv1a_hex(const void *p, size_t n, char out[17]);
/* Current and peak resident set, bytes (0 when unknown). */
uint64_t eval_rss_now(void);
uint64_t eval_rss_peak(void);

/* Prints to stdout and checks it (exit 1 when it cannot be written). */
void eval_flush_stdout(void);

/* ---------------------------------------------------------------- jobs */

/* With c->jobs > 1: forks the workers. In worker w returns w; it runs the
 * pending items whose rank (0, 1, ... in the loop's order) is w modulo
 * c->jobs, then calls eval_jobs_done. In the parent, waits for them all
 * (a failed one stops the others and exits with its status), reads the
 * log back, and returns -1: the loop is skipped. With c->jobs <= 1
 * returns 0 and eval_jobs_done does nothing. Call with no context open. */
int eval_jobs_fork(const eval_common *c, eval_runner *R, eval_log *L);
/* A worker's end: closes the log, frees the runner (its temporary files)
 * and exits 0. */
void eval_jobs_done(const eval_common *c, eval_runner *R, eval_log *L);

#endif

/* options.h - the options every model run of hsq-eval takes (needle,
 * ppl, agree, bench; options.c), the lists they parse, progress lines. */
#ifndef HSQ_CMD_EVAL_OPTIONS_H
#define HSQ_CMD_EVAL_OPTIONS_H

#include <stddef.h>

#include "common/cli.h"
#include "common/tier_options.h"
#include "hsq_eval.h"

#define EVAL_PROG "hsq-eval"
#define EVAL_MAX_METHODS 6
#define EVAL_MAX_LIST 64   /* items of --lengths, --depths */
#define EVAL_MAX_FILES 4096 /* documents or haystack files */
#define EVAL_CHUNK 16      /* tokens per scoring step after compression */
#define EVAL_ALPHA 0.05    /* every test and interval: 95% (TOST: 90% CI) */
#define EVAL_MAX_JOBS 256  /* --jobs */

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
	EOPT_CALIBRATION,
	EOPT_SPECIFIC = 320, /* first id of a subcommand's own options */
};

/* The entries a model run's option table ends with, after its own (and
 * --jobs), zero-terminated. */
extern const cli_option eval_common_options[];
/* --jobs: in the tables of needle, ppl and agree, not bench (whose
 * timings need the machine to themselves). */
extern const cli_option eval_jobs_option;

/* hsq-learned: hsq with the learned reader of --calibration. Its snapshots
 * are hsq's, so it is no snapshot mode of the library but a method id past
 * them, stored with the modes in eval_common.methods: name a method with
 * eval_method_name, and ask the library for eval_method_mode. */
#define EVAL_HSQ_LEARNED ((hsq_snapshot_mode)16)

typedef struct eval_common {
	const char *sub;        /* "needle", ... */
	const char *model_arg;  /* -m, or NULL */
	int threads;            /* 0 = all cores */
	int jobs;               /* worker processes running the trials; 1: none */
	int n_methods;
	hsq_snapshot_mode methods[EVAL_MAX_METHODS]; /* methods[0] is full; EVAL_HSQ_LEARNED among them */
	const char *calibration; /* --calibration FILE: hsq-learned's reader, or NULL */
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
/* A method's name in tables, logs and files: "hsq-learned", or the
 * library's name of the mode. */
const char *eval_method_name(hsq_snapshot_mode m);
/* The library mode a method compresses to (hsq-learned: hsq). */
hsq_snapshot_mode eval_method_mode(hsq_snapshot_mode m);
/* Columns a method's name takes in a table: 9 ("streaming"), or the
 * longest name listed, so that the default tables keep their layout. */
int eval_method_width(const eval_common *c);

/* Comma-separated integers from lo to hi, distinct; exits 2 naming opt. */
int eval_parse_ints(const char *opt, const char *value, long lo, long hi, int *out, int cap);
/* Comma-separated file names (pointers into a copy of value). */
int eval_parse_files(const char *opt, const char *value, const char **out, int cap);

/* Progress on stderr unless --quiet, one line in one write (so that the
 * lines of --jobs workers do not mix). */
void eval_progress(const eval_common *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks this process's progress lines "job w+1/n: " (a --jobs worker). */
void eval_progress_tag(int w, int n);

/* Prints to stdout and checks it (exit 1 when it cannot be written). */
void eval_flush_stdout(void);

#endif

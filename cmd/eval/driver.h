/* driver.h - the one driver every subcommand of hsq-eval goes through
 * (driver.c), and the subcommands it drives.
 *
 * A run: parse the options (the subcommand's own; a model run's then
 * --jobs and the common options); load the model; let the subcommand set
 * up (a model run describes itself as a configuration: a JSON object of
 * everything that decides the trials' results); open the output files
 * (so that a bad path fails before the work); open the trial log (fresh,
 * resumed when the configuration matches, or only read by --summarize);
 * run the items the log does not hold yet, in --jobs processes when asked,
 * one JSON line per trial; then summarize from the log's records alone,
 * so that a resumed run prints what an uninterrupted one would: the table
 * on standard output, the summary files, the --report directory.
 *
 * The codec study (codecs) runs no model and keeps no log: its one item
 * is the whole study, its output files are PREFIX.csv, .json and .svg. */
#ifndef HSQ_CMD_EVAL_DRIVER_H
#define HSQ_CMD_EVAL_DRIVER_H

#include <stddef.h>
#include <stdio.h>

#include "common/cli.h"
#include "common/json.h"
#include "common/svg.h"
#include "log.h"
#include "options.h"
#include "output.h"
#include "runner.h"

#define EVAL_MAX_OUTPUTS 3

/* An output file: its path (NULL: not asked for) and what writes it. */
typedef struct eval_output {
	const char *path;
	void (*write)(FILE *f);
	const char *opt; /* the option that names it, for messages: "--json" */
} eval_output;

/* A subcommand: what the driver asks of it, in the order it asks. Its
 * state lives in static storage of its own. */
typedef struct eval_sub {
	const char *name;           /* "needle" */
	const char *summary;        /* its line in hsq-eval --help */
	const char *usage, *description;
	const cli_option *options;  /* its own options, zero-terminated; a model run's from EOPT_SPECIFIC */
	int jobs;                   /* takes --jobs */
	int table_last;             /* prints its table after the output files are in place (codecs names them) */

	/* Sets its defaults. Returns the common options it takes (a model
	 * run), or NULL (no model, no log: codecs). */
	eval_common *(*init)(void);
	/* One of its own options: 1, or 0 for another id (exit 2 on a bad value). */
	int (*option)(int id, const char *value);
	/* The arguments after the options, and checks across options (exit 2). */
	void (*args)(int argc, char **argv);
	/* What the run needs, before the output files open: with the model
	 * loaded in R (NULL without a model). Returns the configuration (a
	 * malloc'ed JSON object), or NULL without a log. */
	char *(*setup)(eval_runner *R);
	/* Its output files into out[EVAL_MAX_OUTPUTS], how many. NULL: --json
	 * and --csv, by write_json and write_csv. */
	int (*outputs)(eval_output *out);
	void (*write_json)(FILE *f);
	void (*write_csv)(FILE *f);

	/* A model run's trial log: each record checked (with check_user) as
	 * it is read back or appended. */
	eval_record_check check;
	void *check_user;
	/* What the log holds, once opened: its state, a progress line,
	 * a refusal (exit) when --summarize cannot be served. */
	void (*resumed)(const eval_log *L);
	/* The items of the run in order (count NULL: one, the whole run),
	 * whether item i is still to run (pending NULL: every one), running
	 * it (appending its record to L; L is NULL without a log). With
	 * --jobs, worker w runs the pending items whose rank among the
	 * pending ones is w modulo the jobs. */
	size_t (*count)(void);
	int (*pending)(size_t i);
	void (*run)(eval_log *L, size_t i);

	/* The summary, from the log's records (L NULL without a log). */
	void (*summarize)(const eval_log *L);
	/* The table on standard output. */
	void (*print)(void);
	/* The files of DIR, --report (exists and is writable). */
	void (*report)(const char *dir);
	/* Frees its state (the driver frees the runner, the log, the configuration). */
	void (*done)(void);
} eval_sub;

extern const eval_sub eval_codecs, eval_needle, eval_ppl, eval_agree, eval_bench;

/* Runs sub (argv[0] is its name); returns the exit status. */
int eval_drive(const eval_sub *sub, int argc, char **argv);

#endif

/* log.h - the trial log of hsq-eval's model runs (log.c): a header line
 * with the run's configuration, then one JSON line per finished trial;
 * appended to as trials finish, resumed, validated, or only read. */
#ifndef HSQ_CMD_EVAL_LOG_H
#define HSQ_CMD_EVAL_LOG_H

#include <stdio.h>

#include "json_read.h"
#include "options.h"

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
 * --resume, but without the model's identity (config then takes the log's
 * model_sha256, in place), a log of fewer trials per cell is taken as it is, a
 * half-written last line is dropped and left in the file, and nothing may
 * be appended (L->f is NULL). */
void eval_log_open(eval_log *L, const eval_common *c, char *config, eval_record_check check, void *user);
/* What eval_log_open refuses before it reads anything, checked before the
 * model is loaded: --log naming a directory or an existing log without
 * --resume or --force (usage errors, exit 2), a log that cannot be
 * created or appended to (exit 1). */
void eval_log_check(const eval_common *c);
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

/* rec.methods[mode], an object, or NULL with a reason. */
const json_value *eval_method_result(const json_value *rec, hsq_snapshot_mode mode, char *err, size_t cap);

#endif

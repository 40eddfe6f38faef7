/* output.h - hsq-eval's summary files (output.c): written whole and
 * renamed into place, the --report directory, CSV numbers. */
#ifndef HSQ_CMD_EVAL_OUTPUT_H
#define HSQ_CMD_EVAL_OUTPUT_H

#include <stdio.h>

#include "common/atomic.h"

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

#endif

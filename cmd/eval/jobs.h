/* jobs.h - --jobs N: the pending trials of a run shared among N worker
 * processes (jobs.c); the driver's. */
#ifndef HSQ_CMD_EVAL_JOBS_H
#define HSQ_CMD_EVAL_JOBS_H

#include "log.h"
#include "options.h"
#include "runner.h"

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

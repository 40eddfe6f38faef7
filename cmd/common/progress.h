/* progress.h - a one-line progress report on a terminal: items done of a
 * total, the rate and the time left, rewritten in place on standard error.
 * Silent when standard error is not a terminal (a log, a pipe, a batch
 * job) or when the tool was asked to be quiet. */
#ifndef HSQ_CMD_PROGRESS_H
#define HSQ_CMD_PROGRESS_H

#include <stddef.h>

typedef struct progress {
	const char *prog;  /* the tool, the line's prefix */
	const char *unit;  /* "tokens" */
	size_t total;      /* items in all */
	double start;      /* cli_now() at progress_start, s */
	double last;       /* when the line was last drawn, s */
	int on;            /* 1: draw (a terminal, not quiet) */
	int drawn;         /* 1: a line is on the screen */
} progress;

/* quiet != 0, or standard error not a terminal: every call does nothing. */
void progress_start(progress *p, const char *prog, const char *unit, size_t total, int quiet);
/* done of total finished; the line is redrawn at most ten times a second
 * (and always for the last item). */
void progress_update(progress *p, size_t done);
/* Clears the line, so that what follows starts on a clean one. */
void progress_end(progress *p);

#endif

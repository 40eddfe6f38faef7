/* progress.c - the progress line of long runs (progress.h). */
#include <stdio.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/progress.h"

void progress_start(progress *p, const char *prog, const char *unit, size_t total, int quiet)
{
	*p = (progress){ .prog = prog, .unit = unit, .total = total, .start = cli_now() };
	p->on = !quiet && isatty(STDERR_FILENO);
}

void progress_update(progress *p, size_t done)
{
	if (!p->on)
		return;
	double now = cli_now(), spent = now - p->start;
	if (done < p->total && now - p->last < 0.1)
		return;
	p->last = now;
	double rate = spent > 0 ? done / spent : 0;
	fprintf(stderr, "\r%s: %zu/%zu %s", p->prog, done, p->total, p->unit);
	if (rate > 0) {
		long left = (long)((p->total - done) / rate + 0.5);
		fprintf(stderr, ", %.1f %s/s, ", rate, p->unit);
		if (left >= 90)
			fprintf(stderr, "%ld min %02ld s left", left / 60, left % 60);
		else
			fprintf(stderr, "%ld s left", left);
	}
	fputs("\033[K", stderr); /* erase what a longer earlier line left */
	fflush(stderr);
	p->drawn = 1;
}

void progress_end(progress *p)
{
	if (p->on && p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = 0;
}

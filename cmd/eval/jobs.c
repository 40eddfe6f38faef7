/* jobs.c - --jobs N: a run's pending trials shared among N worker
 * processes, for machines where trials side by side beat threads within
 * one trial (on the 2-core development VM two one-thread processes finish
 * 2K needle trials about 1.3x faster than one two-thread process; see
 * BENCHMARKS.md).
 *
 * The parent forks the workers just before its trial loop: the model is
 * loaded (its pages stay shared) and no context exists yet (so no thread
 * pool is lost in the fork). Worker w runs the pending items whose rank in
 * the loop is w modulo N, appends each finished record to the log under
 * an exclusive lock, and exits. The parent waits for every worker, reads
 * the log back and summarizes it as it would a resumed log: the output is
 * what a run without --jobs prints, because the summary follows grid or
 * document order, not the order of the log's lines. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/cleanup.h"
#include "jobs.h"

static pid_t workers[EVAL_MAX_JOBS]; /* 0: not running */

static void stop_workers(int n)
{
	for (int w = 0; w < n; w++)
		if (workers[w] > 0)
			kill(workers[w], SIGTERM);
}

/* Runs in the new process: from here on it cleans up only what it makes. */
static void become_worker(const eval_common *c, eval_runner *R, eval_log *L, int w, pid_t parent)
{
#ifdef __linux__
	/* without this a worker would run on after its parent was killed
	 * alone (not its process group), with nobody to summarize: follow it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
	if (getppid() != parent)
		_exit(EXIT_FAILURE_RUNTIME);
	cleanup_reset();
	eval_progress_tag(w, c->jobs);
	eval_runner_tmpdir(R);
	eval_log_share(L);
}

/* Waits for every worker. The first that fails stops the others, and the
 * run exits with its status (after its own message, which it printed). */
static void wait_workers(const eval_common *c, const eval_log *L)
{
	int left = c->jobs, failed = -1, code = EXIT_FAILURE_RUNTIME;
	char how[64] = "";
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "waiting for the --jobs workers: %s", strerror(errno));
		}
		int w = 0;
		while (w < c->jobs && workers[w] != pid)
			w++;
		if (w == c->jobs)
			continue;
		workers[w] = 0;
		left--;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			continue;
		if (failed < 0) {
			failed = w;
			if (WIFEXITED(st)) {
				code = WEXITSTATUS(st);
				snprintf(how, sizeof how, "exited with status %d", code);
			} else {
				snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
			}
			stop_workers(c->jobs);
		}
	}
	if (failed >= 0)
		cli_die(EVAL_PROG, code, "job %d of %d %s; the trials finished are kept in %s: rerun with --resume",
			failed + 1, c->jobs, how, L->path);
}

int eval_jobs_fork(const eval_common *c, eval_runner *R, eval_log *L)
{
	if (c->jobs <= 1)
		return 0;
	pid_t parent = getpid();
	fflush(NULL); /* nothing buffered may be written twice */
	for (int w = 0; w < c->jobs; w++) {
		pid_t pid = fork();
		if (pid == 0) {
			become_worker(c, R, L, w, parent);
			return w;
		}
		if (pid < 0) {
			int e = errno;
			stop_workers(w);
			while (wait(NULL) > 0 || errno == EINTR)
				;
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot start job %d of %d: %s; try fewer --jobs", w + 1,
				c->jobs, strerror(e));
		}
		workers[w] = pid;
	}
	wait_workers(c, L);
	eval_log_reload(L);
	return -1;
}

void eval_jobs_done(const eval_common *c, eval_runner *R, eval_log *L)
{
	if (c->jobs <= 1)
		return;
	eval_log_close(L);
	eval_runner_free(R);
	/* not exit(): the parent owns stdout and the summary; the worker's
	 * temporary files are gone with eval_runner_free */
	_exit(EXIT_OK);
}

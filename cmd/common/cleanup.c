/* cleanup.c - temporary files and directories removed when a tool ends,
 * fails or is interrupted (SIGINT, SIGTERM, SIGHUP), unless forgotten
 * first: the temporary files of atomic.c, hsq-eval's private directories
 * of snapshots. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"

#define N_CLEANUP 16
static char cleanup_paths[N_CLEANUP][4300];
static volatile sig_atomic_t cleanup_used[N_CLEANUP];
/* a private directory of the run's (mkdtemp): anything left in it is ours */
static volatile sig_atomic_t cleanup_is_dir[N_CLEANUP];

/* Empties a private temporary directory of what the run did not name: a
 * snapshot being saved when a signal arrives is a temporary file beside
 * doc.hsq (the library writes ".doc.hsq.XXXXXXXX.tmp" and renames it), and
 * rmdir fails while it is there. Raw getdents64 and unlinkat, because
 * opendir and readdir are not async-signal-safe. */
static void cleanup_empty_dir(const char *dir)
{
#ifdef __linux__
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096] __attribute__((aligned(8)));
	long n;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof reclen);
			const char *name = buf + off + 19;
			if (strcmp(name, ".") && strcmp(name, ".."))
				unlinkat(fd, name, 0);
			off += reclen;
		}
	close(fd);
#else
	(void)dir;
#endif
}

/* Files first (unlink), then directories (emptied, rmdir): a directory is
 * added before the files in it, so walking backwards empties it first.
 * Only async-signal-safe calls, so the signal handler can use it. */
static void cleanup_run(void)
{
	for (int i = N_CLEANUP - 1; i >= 0; i--) {
		if (!cleanup_used[i])
			continue;
		if (!cleanup_is_dir[i]) {
			unlink(cleanup_paths[i]);
		} else if (rmdir(cleanup_paths[i]) != 0) {
			cleanup_empty_dir(cleanup_paths[i]);
			rmdir(cleanup_paths[i]);
		}
	}
}

static void cleanup_signal(int sig)
{
	cleanup_run();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void add(const char *path, int is_dir)
{
	static int installed;
	if (!installed) {
		installed = 1;
		atexit(cleanup_run);
		signal(SIGINT, cleanup_signal);
		signal(SIGTERM, cleanup_signal);
		signal(SIGHUP, cleanup_signal);
	}
	for (int i = 0; i < N_CLEANUP; i++)
		if (!cleanup_used[i]) {
			snprintf(cleanup_paths[i], sizeof cleanup_paths[i], "%s", path);
			cleanup_is_dir[i] = is_dir;
			cleanup_used[i] = 1;
			return;
		}
	cli_die(cli_prog(), EXIT_FAILURE_RUNTIME, "internal error: too many temporary files");
}

void cleanup_add(const char *path)
{
	add(path, 0);
}

void cleanup_add_dir(const char *dir)
{
	add(dir, 1);
}

void cleanup_forget(const char *path)
{
	for (int i = 0; i < N_CLEANUP; i++)
		if (cleanup_used[i] && !strcmp(cleanup_paths[i], path))
			cleanup_used[i] = 0;
}

void cleanup_reset(void)
{
	for (int i = 0; i < N_CLEANUP; i++)
		cleanup_used[i] = 0;
}

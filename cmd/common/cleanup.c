/* cleanup.c - temporary files and directories removed when a tool ends,
 * fails or is interrupted (SIGINT, SIGTERM, SIGHUP), unless forgotten
 * first: the temporary files of atomic.c, hsq-eval's private directories
 * of snapshots, the temporary file of the snapshot hsq-prefill is writing
 * (and those that killed runs left beside it). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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

/* Calls fn(dirfd, name) for every entry of dir but "." and "..": raw
 * getdents64, because opendir and readdir are not async-signal-safe and
 * the signal handler walks directories too. Does nothing off Linux. */
static void each_entry(const char *dir, void (*fn)(int dirfd, const char *name))
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
				fn(fd, name);
			off += reclen;
		}
	close(fd);
#else
	(void)dir;
	(void)fn;
#endif
}

static void unlink_entry(int dirfd, const char *name)
{
	unlinkat(dirfd, name, 0);
}

/* Empties a private temporary directory of what the run did not name: a
 * snapshot being saved when a signal arrives is a temporary file beside
 * doc.hsq (the library writes ".doc.hsq.XXXXXXXX.tmp" and renames it), and
 * rmdir fails while it is there. */
static void cleanup_empty_dir(const char *dir)
{
	each_entry(dir, unlink_entry);
}

/* The snapshot being written (cleanup_add_snapshot): its directory and
 * the last component of its path. */
static char snap_dir[4300], snap_base[256];
static volatile sig_atomic_t snap_used;

/* Whether name is ".BASE.XXXXXXXX.tmp" for base (cut to 200 bytes), X a
 * lowercase hex digit: the library's temporary file for that destination
 * (snapshot_write.c, writer_open). By hand: async-signal-safe. */
static int is_snapshot_temp(const char *name, const char *base)
{
	if (*name++ != '.')
		return 0;
	for (int i = 0; i < 200 && base[i]; i++)
		if (*name++ != base[i])
			return 0;
	if (*name++ != '.')
		return 0;
	for (int i = 0; i < 8; i++, name++)
		if (!((*name >= '0' && *name <= '9') || (*name >= 'a' && *name <= 'f')))
			return 0;
	return name[0] == '.' && name[1] == 't' && name[2] == 'm' && name[3] == 'p' && name[4] == '\0';
}

/* Whether this process has the file st describes open: the library holds
 * its temporary file open until it is renamed. */
static int open_here(const struct stat *st)
{
	struct stat fs;
	for (int fd = 0; fd < 1024; fd++)
		if (fstat(fd, &fs) == 0 && fs.st_dev == st->st_dev && fs.st_ino == st->st_ino)
			return 1;
	return 0;
}

static void unlink_if_our_temp(int dirfd, const char *name)
{
	struct stat st;
	if (is_snapshot_temp(name, snap_base) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && open_here(&st))
		unlinkat(dirfd, name, 0);
}

/* Removes the snapshot's temporary file that this process has open. */
static void cleanup_snapshot_temp(void)
{
	each_entry(snap_dir, unlink_if_our_temp);
}

/* Files first (unlink), then directories (emptied, rmdir): a directory is
 * added before the files in it, so walking backwards empties it first.
 * Only async-signal-safe calls, so the signal handler can use it. */
static void cleanup_run(void)
{
	if (snap_used)
		cleanup_snapshot_temp();
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

/* A signal the tool was started with ignored (nohup's SIGHUP, SIGINT in a
 * shell's background job) stays ignored: it could not stop the tool. */
static void catch(int sig)
{
	struct sigaction old;
	if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
		signal(sig, cleanup_signal);
}

static void install(void)
{
	static int installed;
	if (!installed) {
		installed = 1;
		atexit(cleanup_run);
		catch(SIGINT);
		catch(SIGTERM);
		catch(SIGHUP);
	}
}

static void add(const char *path, int is_dir)
{
	install();
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
	snap_used = 0;
}

/* dest's directory and last component, as the library splits them. */
static int split_dest(const char *dest, char *dir, size_t dir_cap, char *base, size_t base_cap)
{
	const char *slash = strrchr(dest, '/');
	const char *b = slash ? slash + 1 : dest;
	int n = !slash ? snprintf(dir, dir_cap, ".") : slash == dest ? snprintf(dir, dir_cap, "/")
								 : snprintf(dir, dir_cap, "%.*s", (int)(slash - dest), dest);
	return *b && n > 0 && (size_t)n < dir_cap && (size_t)snprintf(base, base_cap, "%.200s", b) < base_cap;
}

void cleanup_add_snapshot(const char *dest)
{
	snap_used = 0;
	if (!split_dest(dest, snap_dir, sizeof snap_dir, snap_base, sizeof snap_base))
		return; /* the library refuses such a path before it creates anything */
	install();
	snap_used = 1;
}

int cleanup_stale_snapshots(const char *dest, struct timespec before)
{
	char dir[4300], base[256];
	if (!split_dest(dest, dir, sizeof dir, base, sizeof base))
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0, dfd = dirfd(d);
	for (struct dirent *e; (e = readdir(d));) {
		if (!is_snapshot_temp(e->d_name, base))
			continue;
		int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st, now;
		int older = 0;
		if (fstat(fd, &st) == 0)
			older = st.st_mtim.tv_sec < before.tv_sec ||
				(st.st_mtim.tv_sec == before.tv_sec && st.st_mtim.tv_nsec < before.tv_nsec);
		/* the lock: no live writer; the same file still under that name */
		if (older && S_ISREG(st.st_mode) && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    fstatat(dfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
		    now.st_ino == st.st_ino && unlinkat(dfd, e->d_name, 0) == 0)
			n++;
		close(fd);
	}
	closedir(d);
	return n;
}

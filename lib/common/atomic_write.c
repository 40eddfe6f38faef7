/* atomic_write.c - files written whole or not at all (atomic_write.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic_write.h"
#include "common/error.h"

hsq_status atomic_writer_write_at(const atomic_writer *w, uint64_t off, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t put = pwrite(w->fd, p, n, (off_t)off);
		if (put < 0) {
			if (errno == EINTR)
				continue;
			return hsq_fail(HSQ_ERR_IO, "cannot write %s %s: %s%s", w->what, w->path, strerror(errno),
					errno == ENOSPC || errno == EDQUOT ? " (free some space or write elsewhere)"
									   : "");
		}
		p += put;
		off += (uint64_t)put;
		n -= (size_t)put;
	}
	return HSQ_OK;
}

/* mkstemp would give mode 0600: O_EXCL with 0666 lets the umask decide,
 * as for any new file. */
hsq_status atomic_writer_open(atomic_writer *w, const char *path, const char *what, const char *example)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
	w->what = what;
	w->path = path;
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base)
		return hsq_fail(HSQ_ERR_INVALID_ARG, "%s path '%s' names a directory; give a file name such as %s", what,
				path, example);
	size_t dir_len = slash ? (size_t)(slash - path) : 0;
	if (slash && dir_len == 0)
		dir_len = 1; /* "/name" */
	w->dir = slash ? strndup(path, dir_len) : strdup(".");
	size_t prefix = slash ? (size_t)(slash - path) + 1 : 0; /* "dir/" */
	size_t cap = prefix + 200 + 32;
	w->tmp_path = malloc(cap);
	if (!w->dir || !w->tmp_path)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory writing %s", path);
	static _Atomic unsigned counter;
	for (int attempt = 0; attempt < 100; attempt++) {
		uint64_t rnd = 0;
		if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			rnd = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 20 ^ counter++;
		}
		/* ".NAME.XXXXXXXX.tmp", NAME cut to 200 bytes to stay under NAME_MAX. */
		snprintf(w->tmp_path, cap, "%.*s.%.200s.%08x.tmp", (int)prefix, path, base, (unsigned)rnd);
		w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (w->fd >= 0) {
			/* advisory: "being written"; file systems without
			 * flock still get the file */
			flock(w->fd, LOCK_EX | LOCK_NB);
			return HSQ_OK;
		}
		if (errno != EEXIST)
			break;
	}
	int e = errno;
	hsq_status st = hsq_fail(HSQ_ERR_IO, "cannot create %s %s: temporary file in %s: %s%s", what, path, w->dir,
				 strerror(e),
				 e == ENOENT	? " (create the directory first)"
				 : e == EACCES || e == EPERM || e == EROFS ? " (choose a writable directory)"
									    : "");
	free(w->tmp_path);
	w->tmp_path = NULL;
	return st;
}

void atomic_writer_abort(atomic_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_path)
		unlink(w->tmp_path);
	free(w->tmp_path);
	free(w->dir);
	memset(w, 0, sizeof *w);
	w->fd = -1;
}

hsq_status atomic_writer_commit(atomic_writer *w)
{
	hsq_status st = HSQ_OK;
	if (fsync(w->fd) < 0)
		return hsq_fail(HSQ_ERR_IO, "cannot write %s %s: fsync: %s", w->what, w->path, strerror(errno));
	/* Renamed while still open (and locked): the temporary name is never
	 * that of a file this process has closed. */
	if (rename(w->tmp_path, w->path) < 0)
		return hsq_fail(HSQ_ERR_IO, "cannot write %s %s: rename from %s: %s%s", w->what, w->path, w->tmp_path,
				strerror(errno), errno == EISDIR ? " (the destination is a directory)" : "");
	free(w->tmp_path);
	w->tmp_path = NULL; /* renamed: nothing to clean up any more */
	int fd = w->fd;
	w->fd = -1;
	/* The data is on disk (fsync above) and in place; a failed close
	 * cannot take either back. */
	close(fd);
	/* Make the rename itself durable. Some file systems cannot fsync a
	 * directory (EINVAL); the file is complete either way. */
	int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0 && errno != EINVAL && errno != EROFS)
			st = hsq_fail(HSQ_ERR_IO, "%s %s was written but its directory could not be synced: %s",
				      w->what, w->path, strerror(errno));
		close(dfd);
	}
	return st;
}

/* atomic.c - output files written to a temporary file beside them and
 * renamed into place when complete. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "cleanup.h"

int atomic_open(atomic_file *a, const char *path)
{
	memset(a, 0, sizeof *a);
	int n = snprintf(a->path, sizeof a->path, "%s", path);
	snprintf(a->tmp, sizeof a->tmp, "%s.XXXXXX", path);
	mode_t mask = umask(0);
	umask(mask);
	int fd = n > 0 && (size_t)n + 8 < sizeof a->path ? mkstemp(a->tmp) : -1;
	if (fd < 0 || fchmod(fd, 0666 & ~mask) != 0 || !(a->f = fdopen(fd, "w"))) {
		int e = fd < 0 && n > 0 && (size_t)n + 8 >= sizeof a->path ? ENAMETOOLONG : errno;
		if (fd >= 0) {
			close(fd);
			remove(a->tmp);
		}
		return e;
	}
	cleanup_add(a->tmp);
	return 0;
}

int atomic_commit(atomic_file *a, int sync)
{
	int bad = ferror(a->f);
	if (sync && !bad)
		bad = fflush(a->f) != 0 || fsync(fileno(a->f)) != 0;
	bad |= fclose(a->f);
	a->f = NULL;
	if (bad || rename(a->tmp, a->path) != 0) {
		int e = errno;
		remove(a->tmp);
		cleanup_forget(a->tmp);
		return e;
	}
	cleanup_forget(a->tmp);
	return 0;
}

void atomic_discard(atomic_file *a)
{
	if (!a->f)
		return;
	fclose(a->f);
	a->f = NULL;
	remove(a->tmp);
	cleanup_forget(a->tmp);
}

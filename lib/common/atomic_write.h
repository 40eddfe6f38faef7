/* atomic_write.h - files the library writes whole or not at all
 * (internal): snapshots and calibration files. A temporary file
 * ".NAME.XXXXXXXX.tmp" (XXXXXXXX: 8 lowercase hex digits) is created next
 * to the destination with O_EXCL, mode 0666 less the umask, and held
 * locked (flock) until it is renamed onto the destination; then the
 * directory is fsynced. The tools' cleanup (cmd/common/cleanup.h) knows
 * the pattern. */
#ifndef HSQ_ATOMIC_WRITE_H
#define HSQ_ATOMIC_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "hsq.h"

typedef struct atomic_writer {
	const char *what; /* "snapshot", "calibration": the file's kind in messages */
	const char *path; /* destination */
	char *tmp_path;   /* temporary file next to it */
	char *dir;        /* its directory, for fsync */
	int fd;
} atomic_writer;

/* Opens the temporary file of path; example names a file of the kind for
 * the message when path names a directory ("out.hsq"). */
hsq_status atomic_writer_open(atomic_writer *w, const char *path, const char *what, const char *example);
/* Writes n bytes at offset off of the temporary file. */
hsq_status atomic_writer_write_at(const atomic_writer *w, uint64_t off, const void *buf, size_t n);
/* fsync, rename onto the destination, fsync of the directory. */
hsq_status atomic_writer_commit(atomic_writer *w);
/* Removes the temporary file unless it was renamed into place; frees. A
 * writer initialised as { .fd = -1 } and never opened is fine. */
void atomic_writer_abort(atomic_writer *w);

#endif

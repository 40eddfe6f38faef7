/* atomic.h - output files written whole or not at all: the text goes to a
 * temporary file beside the destination, which is renamed onto it when
 * complete. Opened before the work, so that a bad path fails at once, not
 * after minutes of it; a run that fails or is interrupted leaves the
 * destination as it was and no temporary file (cleanup.h). */
#ifndef HSQ_CMD_ATOMIC_H
#define HSQ_CMD_ATOMIC_H

#include <stdio.h>

typedef struct atomic_file {
	char path[4096]; /* the destination */
	char tmp[4096];  /* path.XXXXXX */
	FILE *f;         /* the temporary file, while open */
} atomic_file;

/* Opens a temporary file beside path, mode 0666 less the umask, removed
 * at exit unless committed. Returns 0, or an errno value (ENAMETOOLONG
 * for a path too long) with f NULL. */
int atomic_open(atomic_file *a, const char *path);
/* Closes the temporary file (after fsync with sync) and renames it onto
 * the destination. Returns 0, or an errno value with the temporary file
 * removed and the destination untouched. */
int atomic_commit(atomic_file *a, int sync);
/* Closes and removes the temporary file, if open. */
void atomic_discard(atomic_file *a);

#endif

/* fuzz_util.h - what the libFuzzer harnesses share: the readers under test
 * take paths, so each input is written to one memfd per process and read
 * back through /proc/self/fd/N (no files on disk, nothing left behind). */
#ifndef HSQ_FUZZ_UTIL_H
#define HSQ_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The path of a file holding exactly data[0..size), or NULL. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("hsq-fuzz", 0);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0)
		abort();
	size_t done = 0;
	while (done < size) {
		ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	return path;
}

#endif

/* idcache.c - the model identity cached per file (see idcache.h).
 *
 * An entry is one line of text, e.g.
 *   hsq-model-id 1 dev 2049 ino 131 size 98000000 mtime 1733...000 ctime ... sha256 <64 hex>
 * It is valid only if everything before the digest is byte for byte what
 * this file's stat gives now, and the digest is 64 lowercase hex digits
 * ending the file with a newline. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/idcache.h"

#define ENTRY_MAX 512  /* a valid entry is about 200 bytes */
#define MIN_AGE_S 2    /* younger files are not cached (see idcache.h) */

/* <cache>/hsq/model-ids, from XDG_CACHE_HOME or HOME (absolute only). */
static int cache_dir(char *buf, size_t cap)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int n;
	if (x && x[0] == '/')
		n = snprintf(buf, cap, "%s/hsq/model-ids", x);
	else if (h && h[0] == '/')
		n = snprintf(buf, cap, "%s/.cache/hsq/model-ids", h);
	else
		return -1;
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int entry_path(const struct stat *sb, char *buf, size_t cap)
{
	char dir[4096];
	if (cache_dir(dir, sizeof dir))
		return -1;
	int n = snprintf(buf, cap, "%s/%llx-%llx", dir, (unsigned long long)sb->st_dev,
			 (unsigned long long)sb->st_ino);
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The entry for sb and id; returns its length, or -1. */
static int format_entry(const struct stat *sb, const uint8_t id[32], char *out, size_t cap)
{
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	int n = snprintf(out, cap, "hsq-model-id 1 dev %llu ino %llu size %lld mtime %lld.%09ld ctime %lld.%09ld sha256 %s\n",
			 (unsigned long long)sb->st_dev, (unsigned long long)sb->st_ino, (long long)sb->st_size,
			 (long long)sb->st_mtim.tv_sec, (long)sb->st_mtim.tv_nsec, (long long)sb->st_ctim.tv_sec,
			 (long)sb->st_ctim.tv_nsec, hex);
	return n > 0 && (size_t)n < cap ? n : -1;
}

static int hex_nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int idcache_get(const struct stat *sb, uint8_t id[32])
{
	char path[4200], want[ENTRY_MAX], got[ENTRY_MAX];
	static const uint8_t zero[32];
	int n = format_entry(sb, zero, want, sizeof want);
	if (n < 0 || entry_path(sb, path, sizeof path))
		return 0;
	/* O_NONBLOCK and O_NOFOLLOW: a FIFO or a link planted at the entry's
	 * name is a miss, not a hang or a read elsewhere. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat es;
	ssize_t len = 0;
	if (fstat(fd, &es) == 0 && S_ISREG(es.st_mode) && es.st_size == n) {
		while (len < n) {
			ssize_t r = read(fd, got + len, (size_t)(n - len));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			len += r;
		}
	}
	close(fd);
	size_t prefix = (size_t)n - 65; /* 64 hex digits and the newline */
	if (len != n || memcmp(got, want, prefix) || got[n - 1] != '\n')
		return 0;
	uint8_t d[32];
	for (int i = 0; i < 32; i++) {
		int hi = hex_nibble(got[prefix + 2 * i]), lo = hex_nibble(got[prefix + 2 * i + 1]);
		if (hi < 0 || lo < 0)
			return 0;
		d[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(id, d, 32);
	return 1;
}

/* mkdir -p for the components below an existing root, mode 0700. */
static int make_dirs(char *dir)
{
	for (char *p = dir + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			int bad = mkdir(dir, 0700) != 0 && errno != EEXIST;
			*p = c;
			if (bad)
				return -1;
			if (!c)
				return 0;
		}
	}
}

void idcache_put(const struct stat *sb, const uint8_t id[32])
{
	char dir[4096], path[4200], tmp[4300], line[ENTRY_MAX];
	time_t now = time(NULL);
	if (now - sb->st_mtim.tv_sec < MIN_AGE_S || now - sb->st_ctim.tv_sec < MIN_AGE_S)
		return;
	int n = format_entry(sb, id, line, sizeof line);
	if (n < 0 || cache_dir(dir, sizeof dir) || entry_path(sb, path, sizeof path) || make_dirs(dir))
		return;
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
		return;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, (size_t)n);
	if (close(fd) != 0 || w != n || rename(tmp, path) != 0)
		unlink(tmp);
}

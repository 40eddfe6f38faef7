/* cleanup.h - temporary files and directories removed when a tool exits
 * or is stopped by SIGINT, SIGTERM or SIGHUP, unless forgotten first (a
 * signal ignored when the tool started, as under nohup, stays ignored). */
#ifndef HSQ_CMD_CLEANUP_H
#define HSQ_CMD_CLEANUP_H

#include <time.h>

/* A temporary file (at most 16 paths at once; more is an internal error,
 * exit 1). The first call installs the exit and signal handlers. */
void cleanup_add(const char *path);
/* A private directory (mkdtemp): emptied of whatever is left in it, then
 * removed; add it before the files in it. */
void cleanup_add_dir(const char *dir);
void cleanup_forget(const char *path);
/* Forgets every path (a forked worker leaves its parent's to the parent). */
void cleanup_reset(void);

/* A snapshot the library is about to write to dest: it writes a temporary
 * file beside it, ".BASE.XXXXXXXX.tmp" (BASE: dest's last component, cut
 * to 200 bytes; X: lowercase hex), held open and locked (flock) until it
 * is renamed onto dest (lib/snapshot/snapshot_write.c). On a signal or at
 * exit, the file of that pattern which this process has open is removed;
 * never another's. One snapshot at a time; cleanup_reset forgets it. */
void cleanup_add_snapshot(const char *dest);
/* Removes the temporary files of dest that runs killed before they could
 * clean up left behind: exactly the pattern above, regular files of this
 * user's, last modified before `before` (the start of this run), and not
 * locked, so no live process is writing them. Returns how many. */
int cleanup_stale_snapshots(const char *dest, struct timespec before);

#endif

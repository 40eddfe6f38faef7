/* cleanup.h - temporary files and directories removed when a tool exits
 * or is stopped by SIGINT, SIGTERM or SIGHUP, unless forgotten first. */
#ifndef HSQ_CMD_CLEANUP_H
#define HSQ_CMD_CLEANUP_H

/* A temporary file (at most 16 paths at once; more is an internal error,
 * exit 1). The first call installs the exit and signal handlers. */
void cleanup_add(const char *path);
/* A private directory (mkdtemp): emptied of whatever is left in it, then
 * removed; add it before the files in it. */
void cleanup_add_dir(const char *dir);
void cleanup_forget(const char *path);
/* Forgets every path (a forked worker leaves its parent's to the parent). */
void cleanup_reset(void);

#endif

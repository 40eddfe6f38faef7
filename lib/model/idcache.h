/* idcache.h - the model identity (SHA-256 of the whole GGUF file) cached
 * per file, so a model is hashed once and not at every load.
 *
 * An entry lives in $XDG_CACHE_HOME/hsq/model-ids/ (else ~/.cache/hsq/...),
 * named by the file's device and inode, and records the device, inode,
 * size, mtime and ctime it was computed for: any write to the model, a
 * rename over it or a copy elsewhere changes one of them and the entry no
 * longer matches. Entries are written atomically (temporary file, rename)
 * and only for a file whose mtime and ctime are at least two seconds old, so
 * a write in the same clock tick as the hashing cannot hide behind an equal
 * timestamp. Reading treats an entry as hostile: a bounded read of a
 * regular file, every field parsed strictly; anything odd is a miss. The
 * cache is best effort: no error is ever reported from it. */
#ifndef HSQ_IDCACHE_H
#define HSQ_IDCACHE_H

#include <stdint.h>
#include <sys/stat.h>

/* 1 and id filled if a valid entry for the file sb describes exists, else 0. */
int idcache_get(const struct stat *sb, uint8_t id[32]);
/* Records id for the file sb describes (if old enough); silent on failure. */
void idcache_put(const struct stat *sb, const uint8_t id[32]);

#endif

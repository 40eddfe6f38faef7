/* crc32c.h - CRC-32C (Castagnoli), the snapshot section checksum (internal).
 *
 * Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final XOR
 * 0xFFFFFFFF, as in iSCSI, ext4 and SSE4.2's crc32 instruction; check value
 * crc32c("123456789") = 0xE3069283. Chosen over a cryptographic hash because
 * snapshots guard against damage, not forgery, and a section of several
 * hundred MiB must verify in well under a second. */
#ifndef HSQ_CRC32C_H
#define HSQ_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Continues a checksum: pass 0 to start, then the previous result, so
 * crc32c_update(crc32c_update(0, a, n), b, m) == CRC-32C of a then b. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

#endif

/* snapshot_format.h - on-disk layout of hsq snapshots (internal).
 *
 * The normative description is man/hsq-snapshot.5; this header only names
 * its constants and byte offsets. Everything on disk is little-endian and
 * read/written field by field (never by casting a struct onto the bytes),
 * so the layout does not depend on the compiler's padding or the host's
 * byte order. */
#ifndef HSQ_SNAPSHOT_FORMAT_H
#define HSQ_SNAPSHOT_FORMAT_H

#include <stdint.h>

/* "\x89HSQ\r\n\x1a\n": the high byte catches 7-bit transfers, CR LF and the
 * ^Z catch text-mode line-ending conversion (the PNG trick). */
#define SNAP_MAGIC "\x89HSQ\r\n\x1a\n"
#define SNAP_MAGIC_LEN 8

#define SNAP_VERSION_MAJOR 1 /* readers refuse any other major version */
#define SNAP_VERSION_MINOR 6 /* readers accept any minor of their major; 1.1 adds the tier modes,
                              * 1.2 the optional section router.heads, 1.3 the
                              * section centres (required bit set), 1.4 the optional
                              * section keys.residual, 1.5 the tiers' key_rounding, 1.6 the
                              * tiers' calibration */

/* ----------------------------------------------------------- header */
#define SNAP_HEADER_SIZE 256 /* bytes written by this version; readers accept >= */

#define SNAP_H_MAGIC 0          /* u8[8] */
#define SNAP_H_VERSION_MAJOR 8  /* u16 */
#define SNAP_H_VERSION_MINOR 10 /* u16 */
#define SNAP_H_HEADER_SIZE 12   /* u32, bytes */
#define SNAP_H_FILE_SIZE 16     /* u64, bytes */
#define SNAP_H_FLAGS 24         /* u32, required features: none defined, must be 0 */
#define SNAP_H_MODE 28          /* u32, hsq_snapshot_mode */
#define SNAP_H_TABLE_OFFSET 32  /* u64, bytes from file start */
#define SNAP_H_SECTION_COUNT 40 /* u32 */
#define SNAP_H_ENTRY_SIZE 44    /* u32, bytes per section table entry */
#define SNAP_H_CRC 48           /* u32, CRC32C of header (this field as 0) + table */
#define SNAP_H_RESERVED0 52     /* u32, 0 */
#define SNAP_H_IDENTITY 56      /* u8[32], sha256 model identity */
#define SNAP_H_ARCH 88          /* char[32], NUL-padded, NUL-terminated */
#define SNAP_H_NAME 120         /* char[128], NUL-padded, NUL-terminated */
#define SNAP_H_RESERVED1 248    /* u64, 0 */

#define SNAP_ARCH_LEN 32
#define SNAP_NAME_LEN 128

/* ---------------------------------------------------- section table */
#define SNAP_ENTRY_SIZE 64 /* bytes written by this version; readers accept >= */

#define SNAP_E_NAME 0        /* char[16], [a-z0-9._-], NUL-padded, NUL-terminated */
#define SNAP_E_OFFSET 16     /* u64, bytes from file start, multiple of 2^align_log2 */
#define SNAP_E_STORED 24     /* u64, bytes in the file */
#define SNAP_E_RAW 32        /* u64, bytes after decoding */
#define SNAP_E_CHUNK 40      /* u64, raw bytes per zstd frame; 0 = one stream */
#define SNAP_E_CODEC 48      /* u16, SNAP_CODEC_* */
#define SNAP_E_FILTER 50     /* u8, SNAP_FILTER_* */
#define SNAP_E_ALIGN_LOG2 51 /* u8, offset alignment, 6..30 */
#define SNAP_E_FLAGS 52      /* u32, SNAP_SECTION_* */
#define SNAP_E_CRC 56        /* u32, CRC32C of the stored bytes */
#define SNAP_E_RESERVED 60   /* u32, 0 */

#define SNAP_SECTION_NAME_LEN 16
#define SNAP_MAX_SECTIONS 256 /* readers refuse more: bounds the table read */

#define SNAP_CODEC_RAW 0
#define SNAP_CODEC_ZSTD 1

#define SNAP_FILTER_NONE 0
#define SNAP_FILTER_SHUFFLE4 1 /* byte planes of 4-byte elements, per chunk */

#define SNAP_SECTION_REQUIRED 1u /* a reader that does not know it must refuse */
#define SNAP_SECTION_KNOWN_FLAGS SNAP_SECTION_REQUIRED

#define SNAP_ALIGN_LOG2 6 /* 64 bytes: what this writer uses */
#define SNAP_ALIGN_LOG2_MIN 6
#define SNAP_ALIGN_LOG2_MAX 30

/* ----------------------------------------------------- meta section */
#define SNAP_META_SIZE 128 /* bytes written by this version; readers accept >= */

#define SNAP_M_N_LAYER 0        /* u32 */
#define SNAP_M_N_HEAD_KV 4      /* u32 */
#define SNAP_M_HEAD_DIM 8       /* u32 */
#define SNAP_M_N_TOKENS 12      /* u32 */
#define SNAP_M_MODE 16          /* u32, equals the header's mode */
#define SNAP_M_KV_DTYPE 20      /* u32, SNAP_DTYPE_* */
#define SNAP_M_N_VOCAB 24       /* u32 */
#define SNAP_M_N_EMBD 28        /* u32 */
#define SNAP_M_N_HEAD 32        /* u32 */
#define SNAP_M_N_CTX_TRAIN 36   /* u32 */
#define SNAP_M_ROPE_BASE 40     /* f32 (IEEE 754 binary32) */
#define SNAP_M_K_ROPE 44        /* u32, 1 = K stored after RoPE */
#define SNAP_M_POS_BASE 48      /* u32, position of token 0 */
#define SNAP_M_RESERVED0 52     /* u32, 0 */
#define SNAP_M_WRITER 56        /* char[32], "hsq 0.1.0", NUL-padded */
#define SNAP_M_RESERVED1 88     /* u8[40], 0 */

#define SNAP_WRITER_LEN 32

#define SNAP_DTYPE_F32 0
#define SNAP_DTYPE_F16 1 /* reserved */
#define SNAP_DTYPE_TQ 2  /* TurboQuant codes in the tier sections (modes quant..snapkv) */

/* Upper bounds that keep every size computation far from overflow. */
#define SNAP_MAX_LAYERS 1024
#define SNAP_MAX_KV_WIDTH (1 << 20) /* n_head_kv * head_dim */
#define SNAP_MAX_TOKENS (1 << 24) /* implementation limit, see hsq-snapshot(5) */

#endif

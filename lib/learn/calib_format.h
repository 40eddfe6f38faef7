/* calib_format.h - on-disk layout of hsq calibration files (internal).
 *
 * The normative description is man/hsq-calibration.5; this header only
 * names its constants and byte offsets. Everything on disk is little-endian
 * and read/written field by field (never by casting a struct onto the
 * bytes), as in snapshot_format.h, whose conventions this format shares. */
#ifndef HSQ_CALIB_FORMAT_H
#define HSQ_CALIB_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* "\x89HSQ-CAL\r\n\x1a\n": the high byte catches 7-bit transfers, CR LF and
 * the ^Z catch text-mode line-ending conversion (the PNG trick); "-CAL"
 * tells it from a snapshot ("\x89HSQ\r\n..."). */
#define CAL_MAGIC "\x89HSQ-CAL\r\n\x1a\n"
#define CAL_MAGIC_LEN 12

#define CAL_VERSION_MAJOR 1 /* readers refuse any other major version */
#define CAL_VERSION_MINOR 0 /* readers accept any minor of their major */

/* ----------------------------------------------------------- header */
#define CAL_HEADER_SIZE 256 /* bytes written by this version; readers accept >= */

#define CAL_H_MAGIC 0          /* u8[12] */
#define CAL_H_VERSION_MAJOR 12 /* u16 */
#define CAL_H_VERSION_MINOR 14 /* u16 */
#define CAL_H_HEADER_SIZE 16   /* u32, bytes */
#define CAL_H_FLAGS 20         /* u32, required features: none defined, must be 0 */
#define CAL_H_FILE_SIZE 24     /* u64, bytes */
#define CAL_H_SECTION_COUNT 32 /* u32 */
#define CAL_H_ENTRY_SIZE 36    /* u32, bytes per section table entry */
#define CAL_H_TABLE_OFFSET 40  /* u64, bytes from file start */
#define CAL_H_CRC 48           /* u32, CRC32C of header (this field as 0) + table */
#define CAL_H_RESERVED0 52     /* u32, 0 */
#define CAL_H_IDENTITY 56      /* u8[32], SHA-256 of the model's GGUF file */
#define CAL_H_ARCH 88          /* char[32], NUL-padded, NUL-terminated */
#define CAL_H_NAME 120         /* char[120], NUL-padded, NUL-terminated */
#define CAL_H_N_LAYER 240      /* u32, the model's transformer blocks */
#define CAL_H_N_EMBD 244       /* u32, the model's hidden size */
#define CAL_H_N_HEAD_KV 248    /* u32, the model's key/value heads */
#define CAL_H_RESERVED1 252    /* u32, 0 */

#define CAL_ARCH_LEN 32
#define CAL_NAME_LEN 120

/* ---------------------------------------------------- section table */
#define CAL_ENTRY_SIZE 64 /* bytes written by this version; readers accept >= */

#define CAL_E_NAME 0      /* char[16], [a-z0-9._-], NUL-padded, NUL-terminated */
#define CAL_E_OFFSET 16   /* u64, bytes from file start, multiple of CAL_ALIGN */
#define CAL_E_SIZE 24     /* u64, bytes */
#define CAL_E_FLAGS 32    /* u32, CAL_SECTION_* */
#define CAL_E_CRC 36      /* u32, CRC32C of the section's bytes */
#define CAL_E_RESERVED 40 /* u8[24], 0 */

#define CAL_SECTION_NAME_LEN 16
#define CAL_MAX_SECTIONS 64 /* readers refuse more: bounds the table read */
#define CAL_ALIGN 64        /* every section starts at a multiple of this, bytes */

#define CAL_SECTION_REQUIRED 1u /* a reader that does not know it must refuse */
#define CAL_SECTION_KNOWN_FLAGS CAL_SECTION_REQUIRED

/* Largest header / table entry a reader accepts, and the largest file. */
#define CAL_MAX_HEADER_SIZE 4096u
#define CAL_MAX_ENTRY_SIZE 1024u
#define CAL_MAX_FILE_SIZE ((uint64_t)1 << 30) /* 1 GiB: read whole into memory */

/* ----------------------------------------------------- info section */
#define CAL_SEC_INFO "info"                   /* UTF-8 "key: value" lines; optional */
#define CAL_MAX_INFO_SIZE ((uint64_t)1 << 20) /* 1 MiB */

/* The rule for the info text s[0..n), shared by the reader and the writer
 * (lib/train/calib_write.c): 0 when it is valid UTF-8 (strict: no overlong
 * forms, surrogates or values above U+10FFFF) holding no control character
 * but tab and newline (no NUL, DEL, C0 or C1 control); else 1 (ill-formed
 * UTF-8) or 2 (a control character), with *at the offset of the first
 * offending byte. Defined in calibration.c. */
int calib_info_check(const uint8_t *s, size_t n, size_t *at);

/* --------------------------------------------------- reader section */
#define CAL_SEC_READER "reader" /* required */
#define CAL_READER_HEAD_SIZE 64 /* bytes before the weights */

#define CAL_R_TAP_LAYER 0     /* u32, 0..n_layer-1 */
#define CAL_R_N_EMBD 4        /* u32, equals the header's */
#define CAL_R_N_IN 8          /* u32, n_embd + pos_features */
#define CAL_R_N_HIDDEN 12     /* u32, 1..CAL_MAX_HIDDEN */
#define CAL_R_N_OUT 16        /* u32, n_layer * n_head_kv */
#define CAL_R_N_LAYER 20      /* u32, equals the header's */
#define CAL_R_N_HEAD_KV 24    /* u32, equals the header's */
#define CAL_R_ACTIVATION 28   /* u32, CAL_ACT_* */
#define CAL_R_POS_FEATURES 32 /* u32, CAL_POS_FEATURES */
#define CAL_R_PRIOR 36        /* u32, CAL_PRIOR_*: what the scores are added to */
#define CAL_R_RESERVED 40     /* u8[24], 0 */
/* then f32 w1[n_hidden][n_in], b1[n_hidden], w2[n_out][n_hidden], b2[n_out] */

#define CAL_ACT_SILU 1     /* silu(z) = z / (1 + exp(-z)) */
#define CAL_POS_FEATURES 4 /* READER_POS_FEATURES */
#define CAL_PRIOR_NONE 0   /* a head's guess is softmax(scores) */
#define CAL_PRIOR_OBS 1    /* softmax(scores + reader_obs_prior of the obs-attention mass) */

/* Upper bounds that keep every size computation far from overflow; the
 * file size (at most CAL_MAX_FILE_SIZE) bounds the weights further. */
#define CAL_MAX_LAYERS 1024
#define CAL_MAX_EMBD (1 << 16)
#define CAL_MAX_HEAD_KV 1024
#define CAL_MAX_HIDDEN 4096

#endif

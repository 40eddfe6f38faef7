/* tiers_io.h - tier sections of a snapshot (internal); the normative
 * layout is hsq-snapshot(5), format 1.4. */
#ifndef HSQ_TIERS_IO_H
#define HSQ_TIERS_IO_H

#include <stdint.h>

#include "hsq_codec.h"

struct hsq_tiers;

#define TIER_N_SECTIONS 8  /* tiers, l1, l2, l3.index, l3, router.heads, centres, keys.residual */
#define TIER_N_REQUIRED 5  /* the first five; a reader also takes files without
			    * router.heads (1.2), centres (1.3) or keys.residual (1.4) */
#define TIER_S_HEADS 5
#define TIER_S_CENTRES 6
#define TIER_S_RESIDUAL 7
/* Whether the writer sets the required bit of section i: centres changes
 * what codes mean, so a reader that does not know it must refuse. */
static inline int tier_section_required_bit(int i) { return i < TIER_N_REQUIRED || i == TIER_S_CENTRES; }
/* Whether a tiered snapshot of format 1.minor must hold section i: the
 * first five always, centres from 1.3 on (every 1.3 writer writes it, so
 * a file without it lost it). */
static inline int tier_section_needed(int i, unsigned minor)
{
	return i < TIER_N_REQUIRED || (i == TIER_S_CENTRES && minor >= 3);
}
extern const char *const tier_section_names[TIER_N_SECTIONS];

typedef struct tier_blob {
	uint8_t *data;  /* malloc'ed section bytes as stored */
	uint64_t size;  /* bytes */
} tier_blob;

/* Section "tiers": 256 bytes, little-endian. */
#define TIER_CFG_SIZE 256
#define TC_MODE 0               /* u32, hsq_snapshot_mode */
#define TC_SINKS 4              /* u32 */
#define TC_WINDOW 8             /* u32 */
#define TC_L1_FRACTION 12       /* f32 */
#define TC_GROUP_SIZE 16        /* u32, 8 or 16 */
#define TC_MEDIUM_FRACTION 20   /* f32 */
#define TC_OBS_WINDOW 24        /* u32 */
#define TC_READER 28            /* u32, hsq_reader_kind */
#define TC_COMPRESSOR 32        /* u32, hsq_compressor_kind */
#define TC_KEEP 36              /* u32 */
#define TC_SEED 40              /* u64, TQ seed: L1/L3 codec seed, L2 codec seed + 1 */
#define TC_CODEC 48             /* u32, hsq_codec_kind (2 = tq) */
#define TC_BITS_L1L3 52         /* u32, 4 */
#define TC_BITS_L2 56           /* u32, 3 */
#define TC_CODE4 60             /* u32, bytes of one 4-bit code */
#define TC_CODE3 64             /* u32, bytes of one 3-bit code */
#define TC_N_LAYER 68           /* u32 */
#define TC_N_HEAD_KV 72         /* u32 */
#define TC_HEAD_DIM 76          /* u32 */
#define TC_READER_NAME 80       /* char[32], NUL-padded */
#define TC_COMPRESSOR_NAME 112  /* char[32], NUL-padded */
#define TC_KEY_ROUNDING 144     /* u32, hsq_key_rounding (format 1.5; 0 = nearest before) */
#define TC_CALIBRATION 148      /* u8[32], SHA-256 of the calibration file whose learned
				 * reader built the tiers; zeros: none (format 1.6) */
/* 180..255 reserved, 0 */

/* One (layer, head) row of the l1, l2 and l3.index tables, checked:
 * counts within n_tokens, every block inside its section, the frame's
 * raw size and token count consistent. */
typedef struct tier_entry {
	int window;              /* the layer's attention window, as stored */
	uint64_t n_l1, l1_off;   /* L1 tokens; block offset in l1 */
	uint64_t n_group, n_l3;  /* groups, archived tokens */
	uint64_t l2_off;         /* block offset in l2 */
	uint64_t l3_off, l3_stored, l3_raw; /* the zstd frame in l3 */
	uint32_t l3_crc;         /* CRC32C of the frame */
	const uint8_t *l1_pos, *l1_codes;   /* into blobs[1] */
	const uint8_t *g_start, *g_class, *l2_codes; /* into blobs[2] */
} tier_entry;

/* Checks that the tables hold n_heads rows (n_head_kv a layer) and that
 * the l3 frames of l3.index follow one another in head order from byte 0
 * to the end of l3. */
hsq_status tier_tables_check(const char *path, const tier_blob *blobs, int n_heads, int n_head_kv);
/* Row i (layer-major) with code pairs of c4 (L1/L3) and c3 (L2) bytes. */
hsq_status tier_entry_read(const char *path, const tier_blob *blobs, int i, int n_head_kv, int n_tokens, size_t c4,
			   size_t c3, tier_entry *e);

/* Section "router.heads" (format 1.2, hsq mode, optional): u32 n_layer,
 * u32 n_head_kv, then f32 induction[n_layer][n_head_kv], each 0..1. */
#define TIER_HEADS_HEADER 8
static inline uint64_t tier_heads_bytes(int n_heads) { return TIER_HEADS_HEADER + 4 * (uint64_t)n_heads; }
/* Reads router.heads (blob of size bytes; size 0 = absent: all 0) into
 * induction[n_layer * n_head_kv], checking shape and values. */
hsq_status tier_heads_read(const char *path, const tier_blob *blob, int n_layer, int n_head_kv, float *induction);

/* Section "centres" (format 1.3, every tiered mode): u32 n_layer, u32
 * n_head_kv, u32 head_dim, u32 0, then f32 [n_layer][n_head_kv][2][head_dim]
 * (key centre before RoPE, then value centre), each finite, |x| <= 65504. */
#define TIER_CENTRES_HEADER 16
static inline uint64_t tier_centres_bytes(int n_heads, int head_dim)
{
	return TIER_CENTRES_HEADER + 8 * (uint64_t)n_heads * (uint64_t)head_dim;
}

/* Section "keys.residual" (format 1.4, hsq mode, optional): u32 n_layer,
 * u32 n_head_kv, u32 code4, u32 0, then a 32-byte entry per head (u32
 * flags, bit 0 = has residuals; u32 n_l1; u32 n_l3; u32 0; u64 offset of
 * the head's codes, a multiple of 64; u64 bytes), the table padded to 64;
 * a head's codes are n_l1 then n_l3 4-bit codes in L1 and L3 order. */
#define TIER_RES_HEADER 16
#define TIER_RES_ENTRY 32
#define TIER_RES_HAS 1u
/* Residual bytes of a head with n_l1 + n_l3 tokens (0 without residuals). */
static inline uint64_t tier_res_bytes(uint64_t n_tokens, uint64_t code4) { return n_tokens * code4; }
/* Entry i (layer-major) of keys.residual, checked with the section's
 * table against the head's n_l1 and n_l3 tokens: *codes is the head's
 * n_l1 + n_l3 codes, or NULL when the head has no residuals. */
hsq_status tier_residual_entry(const char *path, const tier_blob *blob, int n_layer, int n_head_kv, size_t code4,
			       int i, int n_l1, int n_l3, const uint8_t **codes);

/* Builds the sections (blobs[i] named tier_section_names[i]); an optional
 * section the mode has no use for is left empty (size 0, not written). */
hsq_status tiers_serialize(const struct hsq_tiers *t, int zstd_level, tier_blob *blobs);
void tier_blobs_free(tier_blob *blobs);
/* Reads mode and parameters from section "tiers", checking the shape. */
hsq_status tiers_read_config(const char *path, const uint8_t *cfg, uint64_t size, int n_layer, int n_head_kv,
			     int head_dim, hsq_snapshot_mode *mode, hsq_tier_params *params,
			     uint8_t calibration[32]);
/* Fills an empty t (made by tiers_new with that mode and parameters);
 * the caller then fits the router codes (tiers_pq_fit_all). */
hsq_status tiers_deserialize(struct hsq_tiers *t, const char *path, const tier_blob *blobs, int n_tokens);

#endif

/*
 * hsq_codec.h - the KV codecs of libhsq and their calibration.
 *
 * Quantizers for K/V vectors behind one interface: plain scalar, TurboQuant
 * (randomized Hadamard rotation and a Lloyd-Max codebook), TurboQuant with a
 * QJL residual sketch, and SpectralQuant (a calibrated per-head eigenbasis).
 * Vectors are float32 rows of `dim` values; a codec turns each row into a
 * fixed number of bytes (hsq_codec_code_bytes), so row i of a batch starts
 * at codes + i * code_bytes. The random streams are here because
 * calibration and codec users draw their samples and seeds from them.
 */
#ifndef HSQ_CODEC_H
#define HSQ_CODEC_H

#include "hsq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ random streams */

/* The study runs every experiment once per generator: two independent
 * streams separate a codec difference from the noise of one stream. */
typedef enum hsq_rng_kind {
	HSQ_RNG_PCG64 = 1,   /* PCG XSL-RR 128/64 (numpy's PCG64) */
	HSQ_RNG_MT19937 = 2, /* 32-bit Mersenne Twister (std::mt19937) */
} hsq_rng_kind;

/* A random stream. Fields are public only so that it can live on the stack;
 * use the functions below. */
typedef struct hsq_rng {
	hsq_rng_kind kind;
	int have_normal;                     /* cached_normal holds a spare draw */
	double cached_normal;
	uint64_t pcg_state_hi, pcg_state_lo; /* PCG64: 128-bit LCG state */
	uint64_t pcg_inc_hi, pcg_inc_lo;     /* PCG64: stream increment, odd */
	uint32_t mt[624];                    /* mt19937: state words */
	int mt_index;                        /* mt19937: next word; 624 = twist */
} hsq_rng;

/* PCG64: seed and stream are pcg64_srandom_r's initstate and initseq.
 * mt19937: stream 0 and a seed below 2^32 give the reference seeding
 * (std::mt19937(seed)); otherwise both are hashed into the 32-bit seed. */
HSQ_API hsq_status hsq_rng_init(hsq_rng *rng, hsq_rng_kind kind, uint64_t seed, uint64_t stream);
HSQ_API const char *hsq_rng_name(hsq_rng_kind kind);      /* "pcg64", "mt19937" */
HSQ_API uint64_t hsq_rng_u64(hsq_rng *rng);
HSQ_API uint32_t hsq_rng_u32(hsq_rng *rng);
HSQ_API double hsq_rng_uniform(hsq_rng *rng);             /* [0, 1), 53 random bits */
HSQ_API uint64_t hsq_rng_below(hsq_rng *rng, uint64_t n); /* uniform on 0..n-1, unbiased */
HSQ_API double hsq_rng_normal(hsq_rng *rng);              /* N(0, 1), polar method */
HSQ_API double hsq_rng_student_t(hsq_rng *rng, int nu);   /* Student t, nu >= 1 dof (else NaN) */

/* ------------------------------------------------------------- codecs */

#define HSQ_CODEC_MIN_DIM 16
#define HSQ_CODEC_MAX_DIM 256

typedef enum hsq_codec_kind {
	HSQ_CODEC_PLAIN = 1,  /* per-vector min/max scalar quantizer, no rotation */
	HSQ_CODEC_TQ = 2,     /* TurboQuant: seeded randomized Hadamard rotation,
			       * Beta Lloyd-Max codebook, fp16 norm */
	HSQ_CODEC_TQ_QJL = 3, /* TQ at b-1 bits + 1-bit QJL residual sketch; K only */
	HSQ_CODEC_SQ = 4,     /* SpectralQuant: calibrated eigenbasis, water-filling */
	HSQ_CODEC_SQU = 5,    /* SpectralQuant with uniform bits over d_eff */
} hsq_codec_kind;
#define HSQ_N_CODEC_KINDS 5

typedef enum hsq_kv_path {
	HSQ_KV_K = 0, /* keys: scored against queries */
	HSQ_KV_V = 1, /* values: summed under attention weights */
} hsq_kv_path;

typedef struct hsq_codec hsq_codec;             /* immutable once made: thread-safe */
typedef struct hsq_codec_query hsq_codec_query; /* a query prepared for one codec */
typedef struct hsq_sq_calib hsq_sq_calib;       /* SpectralQuant eigenbasis */

typedef struct hsq_codec_params {
	hsq_codec_kind kind;
	int dim;            /* values per vector, HSQ_CODEC_MIN_DIM..HSQ_CODEC_MAX_DIM */
	int bits;           /* nominal bits per value: plain 1..8, tq 1..4,
			     * tq-qjl 2..5 (b-1 for the codebook), sq/squ 1..8 */
	hsq_kv_path path;   /* tq-qjl refuses HSQ_KV_V */
	uint64_t seed;      /* rotation and sketch seed (tq, tq-qjl) */
	const hsq_sq_calib *calib; /* sq/squ: this head's basis for this path;
				    * borrowed, must outlive the codec */
} hsq_codec_params;

HSQ_API const char *hsq_codec_kind_name(hsq_codec_kind kind); /* "plain", "tq", "tq-qjl", "sq", "squ" */
/* Accepts the names above, case-insensitively, and "tq-kv"/"tq-qkv"/"plain-kv"/
 * "sq-kv"/"squ-kv". */
HSQ_API hsq_status hsq_codec_kind_parse(const char *name, hsq_codec_kind *out);

HSQ_API hsq_status hsq_codec_new(const hsq_codec_params *params, hsq_codec **out);
HSQ_API void hsq_codec_free(hsq_codec *codec);
HSQ_API const hsq_codec_params *hsq_codec_get_params(const hsq_codec *codec);
/* Bytes one encoded vector takes: side data (fp16) and packed indices. */
HSQ_API size_t hsq_codec_code_bytes(const hsq_codec *codec);
/* Exact storage per value: 8 * code_bytes / dim, norms and padding
 * included. Per-head calibration (rotation seed, eigenbasis) is not counted:
 * it is shared by every token of the head. */
HSQ_API double hsq_codec_bits_per_value(const hsq_codec *codec);

/* x: n rows of dim floats; codes: n * code_bytes bytes. Non-finite input is
 * refused (HSQ_ERR_INVALID_ARG) and leaves codes unspecified. */
HSQ_API hsq_status hsq_codec_encode(const hsq_codec *codec, const float *x, size_t n, uint8_t *codes);
HSQ_API void hsq_codec_decode(const hsq_codec *codec, const uint8_t *codes, size_t n, float *x);

/* Inner products <q, decode(code_i)> without decoding: the query is rotated
 * once (into the codec's basis) and turned into look-up tables; each score
 * is then a sum of table entries indexed by the packed bytes. For tq-qjl the
 * score is the unbiased QJL estimator. */
HSQ_API hsq_status hsq_codec_query_new(const hsq_codec *codec, hsq_codec_query **out);
HSQ_API void hsq_codec_query_set(hsq_codec_query *query, const float *q); /* q: dim floats */
HSQ_API void hsq_codec_dot(const hsq_codec_query *query, const uint8_t *codes, size_t n, float *scores);
HSQ_API void hsq_codec_query_free(hsq_codec_query *query);

/* --------------------------------------------- SpectralQuant calibration */

typedef struct hsq_sq_calib_params {
	double gap_ratio; /* d_eff = argmax_k lambda_k/lambda_{k+1} if that ratio
			   * is >= gap_ratio, else dim (no gap, no pruning) */
	int tail_bits;    /* fixed floor for the d - d_eff tail coordinates, 0..4 */
	int max_bits;     /* cap for one coordinate, 1..8 */
} hsq_sq_calib_params;

HSQ_API hsq_sq_calib_params hsq_sq_calib_default_params(void); /* 4.0, 1, 8 */
/* Mean, covariance and its eigenbasis from n sample rows (n >= 2). */
HSQ_API hsq_status hsq_sq_calibrate(const float *x, size_t n, int dim, const hsq_sq_calib_params *params,
				    hsq_sq_calib **out);
HSQ_API void hsq_sq_calib_free(hsq_sq_calib *calib);
HSQ_API int hsq_sq_calib_dim(const hsq_sq_calib *calib);
HSQ_API int hsq_sq_calib_deff(const hsq_sq_calib *calib);
HSQ_API const hsq_sq_calib_params *hsq_sq_calib_get_params(const hsq_sq_calib *calib);
HSQ_API const double *hsq_sq_calib_eigenvalues(const hsq_sq_calib *calib); /* dim, descending */
/* Bits each eigen-coordinate gets at nominal `bits` (dim entries). */
HSQ_API hsq_status hsq_sq_calib_allocation(const hsq_sq_calib *calib, hsq_codec_kind kind, int bits,
					   uint8_t *alloc);
/* Versioned little-endian serialization (hsq-eval(1), CALIBRATION FILES).
 * *buf is malloc'ed (hsq_free). */
HSQ_API hsq_status hsq_sq_calib_serialize(const hsq_sq_calib *calib, uint8_t **buf, size_t *len);
HSQ_API hsq_status hsq_sq_calib_deserialize(const uint8_t *buf, size_t len, hsq_sq_calib **out);
HSQ_API hsq_status hsq_sq_calib_save(const hsq_sq_calib *calib, const char *path); /* atomic */
HSQ_API hsq_status hsq_sq_calib_load(const char *path, hsq_sq_calib **out);

#ifdef __cplusplus
}
#endif
#endif

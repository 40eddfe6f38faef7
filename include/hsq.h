/*
 * hsq.h - the public API of libhsq.
 *
 * libhsq loads GGUF models, tokenizes, runs the transformer, samples, and
 * saves/resumes contexts through on-disk snapshots (see hsq-snapshot(5)).
 * The library never prints and never exits: every fallible call returns an
 * hsq_status; hsq_strerror() names the status and hsq_last_error() returns a
 * one-line, lowercase detail (the file or value at fault, a suggested fix)
 * for the last failure on the calling thread.
 */
#ifndef HSQ_H
#define HSQ_H

#include <stddef.h>
#include <stdint.h>

/* Functions of the installed API carry HSQ_API: libhsq.so is built with
 * -fvisibility=hidden, so it exports these and nothing else. */
#ifndef HSQ_API
#  if defined(__GNUC__) && defined(HSQ_BUILDING_LIBRARY)
#    define HSQ_API __attribute__((visibility("default")))
#  else
#    define HSQ_API
#  endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define HSQ_VERSION_STRING "0.1.0"

/* Status codes. Values are pinned: tools map them to exit codes (hsq(7)). */
typedef enum hsq_status {
	HSQ_OK = 0,
	HSQ_ERR_NOMEM = 1,          /* allocation failed */
	HSQ_ERR_IO = 2,             /* open/read/write/rename failed (errno in detail) */
	HSQ_ERR_FORMAT = 3,         /* not a GGUF/snapshot file, or malformed */
	HSQ_ERR_TRUNCATED = 4,      /* file shorter than its own header says */
	HSQ_ERR_UNSUPPORTED = 5,    /* architecture, tensor type or version not supported */
	HSQ_ERR_INVALID_ARG = 6,    /* a caller-supplied value is out of range */
	HSQ_ERR_CONTEXT_FULL = 7,   /* more tokens than the context holds */
	HSQ_ERR_MODEL_MISMATCH = 8, /* snapshot was built by a different model file */
	HSQ_ERR_CHECKSUM = 9,       /* a section checksum does not match */
	HSQ_ERR_EMPTY_INPUT = 10,   /* nothing to process */
	HSQ_ERR_INTERNAL = 11,      /* a bug: please report */
} hsq_status;


/* Short fixed description of a status ("out of memory", ...). Never NULL. */
HSQ_API const char *hsq_strerror(hsq_status status);
/* Detail of the last error on this thread, or "" if none. Valid until the
 * next libhsq call on this thread. */
HSQ_API const char *hsq_last_error(void);
HSQ_API const char *hsq_version(void);
/* The snapshot format version this library writes, major << 16 | minor
 * (hsq-snapshot(5)): what decides the codes a compressed context holds. */
HSQ_API uint32_t hsq_snapshot_format(void);

typedef int32_t hsq_token;

/* ---------------------------------------------------------------- model */

typedef struct hsq_model hsq_model;

typedef struct hsq_model_info {
	const char *architecture; /* "llama", ... (owned by the model) */
	const char *name;         /* general.name, or "" */
	int n_layer;              /* transformer blocks */
	int n_embd;               /* hidden size */
	int n_head;               /* query heads */
	int n_head_kv;            /* key/value heads (GQA) */
	int head_dim;             /* dimension of one head */
	int n_ff;                 /* feed-forward hidden size */
	int n_vocab;              /* vocabulary size */
	int n_ctx_train;          /* context length the model was trained for, tokens */
	float rope_freq_base;     /* RoPE theta */
	float rms_eps;            /* RMSNorm epsilon */
	hsq_token bos;            /* beginning-of-sequence token, -1 if none */
	hsq_token eos;            /* end-of-sequence token, -1 if none */
	int add_bos;              /* 1 if the tokenizer prepends BOS by default */
	uint64_t file_size;       /* bytes */
	uint8_t identity[32];     /* sha256 of the whole GGUF file: the model identity */
} hsq_model_info;

/* Memory-map and validate a GGUF file. Every offset, count and dimension is
 * bounds-checked; unsupported architectures and tensor types are refused;
 * anything but a regular file (a directory, a FIFO) is refused without
 * blocking. The identity is the SHA-256 of the whole file, cached under
 * $XDG_CACHE_HOME/hsq/model-ids/ (else ~/.cache/hsq/...; see hsq(7)) so an
 * unchanged model is hashed once; the cache is best effort and never
 * fails a load. */
HSQ_API hsq_status hsq_model_load(const char *path, hsq_model **out);
HSQ_API void hsq_model_free(hsq_model *model);
HSQ_API void hsq_model_get_info(const hsq_model *model, hsq_model_info *info);
/* The sliding attention window of a layer in tokens; 0 for a layer that
 * attends to the whole context; -1 for a layer out of range. */
HSQ_API int hsq_model_layer_window(const hsq_model *model, int layer);

/* Default model path: $HSQ_MODEL, else the first readable of
 * $XDG_DATA_HOME/hsq/models/SmolLM2-135M-Instruct.Q4_1.gguf,
 * ~/.local/share/hsq/models/..., PREFIX/share/hsq/models/...
 * Writes into buf (cap bytes). Returns HSQ_ERR_INVALID_ARG if none found. */
HSQ_API hsq_status hsq_default_model_path(char *buf, size_t cap);

/* ------------------------------------------------------------ tokenizer */

/* Tokenize UTF-8 text. add_bos: prepend BOS (-1: the model's default).
 * parse_special: recognise special-token text such as "<|im_start|>".
 * On success *tokens is malloc'ed (free with hsq_free) and *n_tokens set. */
HSQ_API hsq_status hsq_tokenize(const hsq_model *model, const char *text, size_t len,
				int add_bos, int parse_special,
				hsq_token **tokens, size_t *n_tokens);

/* Raw bytes of one token (not NUL-terminated; may be a partial UTF-8
 * sequence). Control tokens give their text only if special != 0. */
HSQ_API hsq_status hsq_token_bytes(const hsq_model *model, hsq_token token, int special,
				   const char **bytes, size_t *len);

/* 1 if generation should stop at this token (end of sequence or of turn). */
HSQ_API int hsq_token_is_eog(const hsq_model *model, hsq_token token);

/* Streaming detokenizer: feeds token bytes and emits only complete UTF-8
 * sequences, so a multi-byte character split across tokens prints whole. */
typedef struct hsq_detok {
	unsigned char pending[8]; /* bytes of an incomplete UTF-8 sequence */
	size_t n_pending;
} hsq_detok;
/* Appends the printable bytes for `token` to out (cap bytes, *out_len set). */
HSQ_API hsq_status hsq_detok_push(const hsq_model *model, hsq_detok *state, hsq_token token,
				  char *out, size_t cap, size_t *out_len);
/* Flushes what is left (invalid trailing bytes become U+FFFD). */
HSQ_API size_t hsq_detok_flush(hsq_detok *state, char *out, size_t cap);

/* Wrap a user message in the model's chat template (chatml, e.g. SmolLM2
 * and Qwen3; gemma's <start_of_turn> turns), ending with the assistant
 * prompt. system NULL: the template's default. *out is malloc'ed (hsq_free). */
HSQ_API hsq_status hsq_chat_format(const hsq_model *model, const char *system, const char *user,
				   char **out);

HSQ_API void hsq_free(void *ptr);

/* -------------------------------------------------------------- context */

typedef struct hsq_context hsq_context;

typedef struct hsq_context_params {
	int n_ctx;     /* tokens the KV cache holds; 0 = model's training context */
	int n_threads; /* CPU threads; 0 = all online cores */
	int n_batch;   /* prefill chunk, tokens; 0 = 512 */
} hsq_context_params;

HSQ_API hsq_context_params hsq_context_default_params(void);
HSQ_API hsq_status hsq_context_new(const hsq_model *model, const hsq_context_params *params,
				   hsq_context **out);
HSQ_API void hsq_context_free(hsq_context *ctx);

/* Run tokens through the model, appending them to the KV cache at positions
 * n_past..n_past+n-1. If logits is non-NULL it receives the next-token
 * logits: n_vocab floats for the last token, or n*n_vocab floats (row per
 * token) when all_logits is set. The result for a token does not depend on
 * how the tokens were split into calls (batch-invariant arithmetic). */
HSQ_API hsq_status hsq_context_eval(hsq_context *ctx, const hsq_token *tokens, size_t n,
				    float *logits, int all_logits);
HSQ_API int hsq_context_n_past(const hsq_context *ctx);
HSQ_API int hsq_context_n_ctx(const hsq_context *ctx);
/* Tokens in the context so far (n_past of them), owned by the context. */
HSQ_API const hsq_token *hsq_context_tokens(const hsq_context *ctx);
HSQ_API const hsq_model *hsq_context_model(const hsq_context *ctx);

/* ------------------------------------------------------------ KV modes */

/* How a context keeps its KV cache; also the mode of a snapshot. */
typedef enum hsq_snapshot_mode {
	HSQ_MODE_FULL = 1,      /* uncompressed (fp16 in memory), every token */
	HSQ_MODE_QUANT = 2,     /* every token at 4-bit TQ, no hierarchy */
	HSQ_MODE_HSQ = 3,       /* L1 tokens + L2 group summaries + L3 archive */
	HSQ_MODE_STREAMING = 4, /* eviction: sinks + recent window (StreamingLLM) */
	HSQ_MODE_SNAPKV = 5,    /* eviction: what an observation window attends to (SnapKV) */
} hsq_snapshot_mode;
HSQ_API const char *hsq_mode_name(hsq_snapshot_mode mode); /* "full", "quant", "hsq", ... */
HSQ_API hsq_status hsq_mode_parse(const char *name, hsq_snapshot_mode *out);

/* Which non-learned reader flags L1 tokens, and which compressor makes the
 * L2 summaries (a snapshot records both). */
typedef enum hsq_reader_kind {
	HSQ_READER_OBS_ATTENTION = 1, /* attention mass from the last obs_window queries */
	HSQ_READER_KEY_NORM = 2,      /* largest key norms (query-free) */
	HSQ_READER_LEARNED = 3,       /* the calibration's reader (hsq_context_set_calibration) */
} hsq_reader_kind;
typedef enum hsq_compressor_kind {
	HSQ_COMPRESSOR_MEAN = 1,         /* mean of the group's keys (after RoPE) and values */
	HSQ_COMPRESSOR_OBS_WEIGHTED = 2, /* means weighted by the reader's attention mass */
} hsq_compressor_kind;
/* How the 4-bit codes of L1 and L3 keys pick their levels (a snapshot
 * records it; decoding is the same either way). */
typedef enum hsq_key_rounding {
	HSQ_KEY_ROUNDING_NEAREST = 0, /* each rotated coordinate to its nearest level:
				       * the least squared error */
	HSQ_KEY_ROUNDING_QUERY = 1,   /* levels that make the error the observation
				       * queries see small (docs/tiers.md) */
} hsq_key_rounding;
HSQ_API const char *hsq_reader_name(hsq_reader_kind kind);         /* "obs-attention", "key-norm", "learned" */
HSQ_API const char *hsq_compressor_name(hsq_compressor_kind kind); /* "mean", "obs-weighted" */
HSQ_API const char *hsq_key_rounding_name(hsq_key_rounding kind);  /* "nearest", "query" */
/* How hsq-decode ranks the L2 groups: "pq16-radius", product codes of the
 * grouped keys (16 centroids per 4 channels) with an error radius, derived
 * from L3 when tiers are built or loaded. Snapshots do not store it, so
 * results that depend on routing (an hsq-eval log) record this name. */
HSQ_API const char *hsq_router_name(void);

#define HSQ_GROUP_LOW 0    /* a group of group_size tokens */
#define HSQ_GROUP_MEDIUM 1 /* a group of group_size / 2 tokens */
#define HSQ_OBS_MAX 64     /* most observation queries a context keeps */

typedef struct hsq_tier_params {
	int sinks;             /* first tokens kept in L1 (attention sinks) */
	int window;            /* most recent tokens kept in L1; also the full-precision
				* tail kept during decode before online compression */
	float l1_fraction;     /* share of the other tokens the reader flags into L1, 0..1 */
	int group_size;        /* tokens per low group: 8 or 16 */
	float medium_fraction; /* share of group_size blocks the reader splits into two
				* medium groups of group_size / 2 (group_size 16 only), 0..1 */
	int obs_window;        /* observation queries for the reader, 1..HSQ_OBS_MAX */
	hsq_reader_kind reader;
	hsq_compressor_kind compressor;
	uint64_t seed;         /* TurboQuant rotation seed (L1/L3 and L2 codecs) */
	int keep;              /* streaming/snapkv: tokens kept per KV head; 0 = the
				* tokens whose 4-bit bytes equal the fast tier hsq builds */
	int residual_heads;    /* hsq: KV heads whose keys get a residual code (about 8
				* bits of key instead of 4): HSQ_RESIDUAL_DEFAULT = the
				* retrieval heads marked at compression, HSQ_RESIDUAL_ALL =
				* every global-attention head, 0 = none, n = the n heads
				* with the highest induction score above 0 (fewer if fewer
				* score above 0). A compressed or loaded context reports
				* the number of heads that have residual codes (the tiers
				* section does not store the setting). */
	hsq_key_rounding key_rounding; /* query: needs the observation queries, as the
				* obs-attention reader does; without them the keys are
				* rounded to the nearest levels, and a compressed context
				* reports nearest (as built) */
} hsq_tier_params;

#define HSQ_RESIDUAL_DEFAULT (-1)
#define HSQ_RESIDUAL_ALL (-2)

/* sinks 4, window 64, l1_fraction 0.03, group_size 16, medium_fraction 0.25,
 * obs_window 32, obs-attention reader, obs-weighted compressor, seed
 * 0x4853510001 (310635462657), residual_heads HSQ_RESIDUAL_DEFAULT,
 * key_rounding HSQ_KEY_ROUNDING_QUERY. */
HSQ_API hsq_tier_params hsq_tier_default_params(void);

/* Re-encodes the KV cache of ctx (positions 0..n_past-1) in mode (quant,
 * hsq, streaming, snapkv); later tokens attend through the tiers. The full
 * cache stays allocated (the recall probe reads it). params NULL = defaults.
 * A context can be compressed once. */
HSQ_API hsq_status hsq_context_compress(hsq_context *ctx, hsq_snapshot_mode mode,
					 const hsq_tier_params *params);
HSQ_API hsq_snapshot_mode hsq_context_mode(const hsq_context *ctx);
/* The parameters a compressed context was built with (NULL for full). */
HSQ_API const hsq_tier_params *hsq_context_tier_params(const hsq_context *ctx);

/* Routing budget: tokens per KV head the router fetches from L3 at each
 * step. 0 fetches nothing (only L1, the summaries and the tail are
 * attended); HSQ_BUDGET_ALL fetches every group (the reversibility check:
 * with no retrieval heads and the residual keys off, decoding then equals
 * mode quant up to summation order);
 * HSQ_BUDGET_DEFAULT (the initial value) is hsq_default_budget of the
 * context length, re-evaluated as the context grows. */
#define HSQ_BUDGET_ALL (-1)
#define HSQ_BUDGET_DEFAULT (-2)
HSQ_API hsq_status hsq_context_set_budget(hsq_context *ctx, int budget);
HSQ_API int hsq_context_budget(const hsq_context *ctx); /* in effect now, tokens */
/* Default budget at n context tokens: n / 4 rounded up to 16, at least 256. */
HSQ_API int hsq_default_budget(int n_tokens);

/* Retrieval heads. Compression gives every KV head of a global-attention
 * layer an induction score: the share of the observation queries'
 * attention that falls on tokens following an earlier occurrence of the
 * query's own token, farther back than the recent window. Heads that copy
 * from far back this way are the ones that find a needle, and a few of
 * them carry most of it (docs/tiers.md). The n heads with the highest
 * score above 0 fetch every group at each step, beyond the budget; with a
 * budget of 0 nothing is fetched. HSQ_RETRIEVAL_DEFAULT (the initial
 * value) is hsq_default_retrieval_heads of the model's global-attention
 * KV heads. Snapshots store the scores; a snapshot without them
 * (hsq-snapshot(5)) marks no head. By default the heads marked when an hsq
 * context is compressed also get residual key codes
 * (hsq_tier_params.residual_heads); moving the marks later does not move
 * the residuals. */
#define HSQ_RETRIEVAL_DEFAULT (-1)
HSQ_API hsq_status hsq_context_set_retrieval_heads(hsq_context *ctx, int n);
HSQ_API int hsq_context_retrieval_heads(const hsq_context *ctx); /* heads marked now */
/* One in six of the global-attention KV heads, rounded up (15 of
 * SmolLM2's 90; chosen on needle trials, docs/tiers.md). */
HSQ_API int hsq_default_retrieval_heads(int n_global_heads);

/* Residual keys. A head with residual codes (hsq_tier_params.residual_heads)
 * decodes each key from its 4-bit code plus the 4-bit code of that code's
 * error, about 8 bits, whether or not it is a retrieval head. on = 0 turns
 * this off for the context (keys from their 4-bit codes alone: the
 * reversibility check, or to measure what the residuals buy); on = 1 (the
 * initial state) turns it back on. Needs a compressed context. */
HSQ_API hsq_status hsq_context_use_residual_keys(hsq_context *ctx, int on);
HSQ_API int hsq_context_residual_keys(const hsq_context *ctx); /* heads decoding with residuals now */

/* Router trace: called for every token, layer and KV head of an hsq
 * context with the groups fetched (ids in the head's L2 order). The
 * callback runs on the calling thread after the layer's attention. */
typedef void (*hsq_trace_fn)(void *user, int pos, int layer, int head, const int *groups, int n_groups);
HSQ_API void hsq_context_set_trace(hsq_context *ctx, hsq_trace_fn fn, void *user);

/* Router recall probe: for every token attended through the tiers,
 * measure the share of the true attention mass (softmax over the full
 * cache, which a context compressed in this process still holds) that L1,
 * the fetched groups and the tail capture. per_layer receives n_layer
 * means (NaN for layers with no samples). */
HSQ_API hsq_status hsq_context_set_recall_probe(hsq_context *ctx, int on);
HSQ_API hsq_status hsq_context_recall(const hsq_context *ctx, double *per_layer);

/* Sizes of the tiers, bytes as encoded (what a snapshot stores and a device
 * backend holds). */
typedef struct hsq_tier_stats {
	int n_tokens;           /* positions covered */
	uint64_t fp16_kv_bytes; /* the same KV cache at fp16 (sliding layers: their window) */
	uint64_t l1_bytes;      /* codes + positions + the heads' centres + residual
				 * key codes of L1 tokens */
	uint64_t l2_bytes;      /* summary codes + group table */
	uint64_t l3_bytes;      /* codes + positions + residual key codes, uncompressed */
	uint64_t tail_bytes;    /* full-precision tail (fp32) */
	int64_t n_l1, n_group, n_medium, n_l3; /* over all layers and heads */
} hsq_tier_stats;
HSQ_API hsq_status hsq_context_tier_stats(const hsq_context *ctx, hsq_tier_stats *out);

/* ---------------------------------------------------------- calibration */

/* A calibration file (hsq-calibration(5), written by hsq-calibrate(1))
 * carries the learned parts of the HSQ method for one model: today the
 * reader, a small network over the hidden state of an early layer that
 * guesses which tokens later queries will attend to. */
typedef struct hsq_calibration hsq_calibration;

typedef struct hsq_calibration_info {
	int version_major, version_minor; /* of the file format */
	uint64_t file_size;               /* bytes */
	uint8_t sha256[32];               /* of the whole file: what a snapshot records */
	uint8_t model_identity[32];       /* the model it was trained for (hsq_model_info.identity) */
	const char *model_arch;           /* that model's architecture and name (owned by the calibration) */
	const char *model_name;
	int reader_layer;                 /* the layer whose output the reader reads */
	int reader_hidden;                /* width of the reader's hidden layer */
	int reader_params;                /* trained numbers in the reader */
	int reader_prior;                 /* 1: it corrects the obs-attention reader's guess */
	const char *info;                 /* the info section: UTF-8 lines "key: value" (texts and
					   * their SHA-256, options, seed, losses; owned) */
} hsq_calibration_info;

/* Reads and checks a calibration file: every byte is treated as hostile
 * (checksums, sizes, shapes, finite weights). With model non-NULL a file
 * trained for another model is refused with HSQ_ERR_MODEL_MISMATCH. */
HSQ_API hsq_status hsq_calibration_load(const char *path, const hsq_model *model, hsq_calibration **out);
HSQ_API void hsq_calibration_free(hsq_calibration *cal);
HSQ_API void hsq_calibration_get_info(const hsq_calibration *cal, hsq_calibration_info *out);

/* Makes cal the context's calibration (NULL: none): from the next
 * evaluated token on, the context keeps the hidden state the reader reads
 * for every position, so that hsq_context_compress with the learned reader
 * can score them. Set it before the document is evaluated. cal must
 * outlive the context and be trained for its model. */
HSQ_API hsq_status hsq_context_set_calibration(hsq_context *ctx, const hsq_calibration *cal);
/* SHA-256 of the calibration a compressed context was built with, or NULL. */
HSQ_API const uint8_t *hsq_context_calibration_sha256(const hsq_context *ctx);

/* What training needs (hsq-calibrate):
 * hsq_context_keep_hidden: from the next evaluated token on, keep the
 * residual stream after layer `layer` (0..n_layer-1; -1 stops and frees)
 * of every position, n_embd floats each, n_ctx rows at most.
 * hsq_context_hidden copies the kept rows of positions p0..p0+n-1 to out
 * [n][n_embd]; positions evaluated while none was kept are an error. */
HSQ_API hsq_status hsq_context_keep_hidden(hsq_context *ctx, int layer);
HSQ_API hsq_status hsq_context_hidden(const hsq_context *ctx, int p0, int n, float *out);
/* Gives a context that keeps hidden states those of positions p0..p0+n-1,
 * which it holds but did not evaluate while keeping them (a context loaded
 * from a snapshot), as hsq_context_hidden returned them from the context
 * that evaluated the same tokens: the rows must end where the kept ones
 * begin (p0 + n equals the first position evaluated since). The
 * arithmetic is batch-invariant, so they are the rows it would have kept. */
HSQ_API hsq_status hsq_context_put_hidden(hsq_context *ctx, int p0, int n, const float *rows);
/* The attention that the queries of positions q0..q0+nq-1 (among the last
 * HSQ_OBS_MAX evaluated in this context, full mode) pay to positions
 * 0..n_keys-1, summed over the queries and over the query heads of each KV
 * head: out[(l * n_head_kv + g) * n_keys + p]. A sliding-window layer's
 * queries attend only to their window. */
HSQ_API hsq_status hsq_context_attention_mass(const hsq_context *ctx, int q0, int nq, int n_keys, float *out);

/* -------------------------------------------------------------- sampler */

typedef struct hsq_sampler_params {
	float temperature; /* 0 = greedy (argmax) */
	int top_k;         /* keep the k most likely; 0 = off */
	float top_p;       /* nucleus mass in (0,1]; 1 = off */
	uint64_t seed;     /* PRNG seed */
} hsq_sampler_params;

typedef struct hsq_sampler hsq_sampler;
HSQ_API hsq_sampler_params hsq_sampler_default_params(void);
HSQ_API hsq_status hsq_sampler_new(const hsq_sampler_params *params, hsq_sampler **out);
HSQ_API void hsq_sampler_free(hsq_sampler *sampler);
/* Picks a token from n_vocab logits. Ties in greedy mode go to the lowest id. */
HSQ_API hsq_token hsq_sampler_sample(hsq_sampler *sampler, const float *logits, int n_vocab);
/* The greedy pick: the lowest index of the largest of x[0..n-1] (n >= 1; a
 * NaN is never larger; 0 when x[0] is the largest or NaN). */
HSQ_API int hsq_argmax(const float *x, int n);

/* ------------------------------------------------------------- snapshot */


/* Write ctx (its tokens and KV cache) to path atomically: a temporary file
 * in the same directory, fsync, rename over path, fsync the directory. On
 * failure the temporary file is removed and an existing file at path is left
 * untouched. zstd_level: 1..19 (0 = 3). Format: hsq-snapshot(5). */
HSQ_API hsq_status hsq_snapshot_save(const hsq_context *ctx, const char *path,
				     hsq_snapshot_mode mode, int zstd_level);

/* Recreate a context from a snapshot. The model must be the one that wrote
 * it (HSQ_ERR_MODEL_MISMATCH otherwise). params->n_ctx 0 = model default;
 * it must hold at least the snapshot's tokens (HSQ_ERR_CONTEXT_FULL).
 * params may be NULL (defaults). Damage gives HSQ_ERR_CHECKSUM, FORMAT or
 * TRUNCATED; *out is set only on success, after every checksum matched. */
HSQ_API hsq_status hsq_snapshot_load(const hsq_model *model, const char *path,
				     const hsq_context_params *params, hsq_context **out);

typedef struct hsq_snapshot_section_info {
	char name[16];        /* "meta", "tokens", "kv.full", ... */
	uint64_t offset;      /* bytes from file start */
	uint64_t size;        /* stored bytes */
	uint64_t raw_size;    /* bytes after decompression */
	uint32_t codec;       /* 0 raw, 1 zstd */
	int checksum_ok;      /* 1 ok, 0 bad, -1 not verified */
} hsq_snapshot_section_info;

typedef struct hsq_snapshot_info {
	uint32_t version;           /* format version: major << 16 | minor */
	uint32_t mode;              /* hsq_snapshot_mode (may be one this hsq cannot load) */
	uint64_t file_size;         /* bytes */
	char architecture[32];
	char model_name[128];
	uint8_t model_identity[32];
	int n_layer, n_head_kv, head_dim, n_vocab;
	int n_tokens;               /* tokens in the snapshot */
	uint64_t kv_bytes_fp16;     /* size of the same KV cache at fp16, bytes */
	int n_sections;             /* sections in the file */
	hsq_snapshot_section_info sections[16]; /* the first min(n_sections, 16) */
} hsq_snapshot_info;

/* Read the header, section table and meta section (verify != 0: also check
 * every section checksum, filling checksum_ok; returns HSQ_ERR_CHECKSUM if
 * any is bad, with info still filled and the detail naming the first bad
 * section). Needs no model. */
HSQ_API hsq_status hsq_snapshot_inspect(const char *path, int verify, hsq_snapshot_info *info);
/* The snapshot's tokens (malloc'ed, hsq_free; checksum-verified, each id
 * checked against the vocabulary). Needs no model. */
HSQ_API hsq_status hsq_snapshot_read_tokens(const char *path, hsq_token **tokens, size_t *n);

/* The tier layout of a compressed snapshot (modes quant..snapkv), for
 * hsq-inspect. Needs no model; every section is checksum-verified. */
typedef struct hsq_tier_head_info {
	int layer, head;
	int window;                /* sliding window of the layer, 0 = global */
	int n_l1, n_group, n_medium, n_l3;
	uint64_t l1_bytes;         /* codes + positions + the head's centres (when the
	                              file has them) + its L1 residual key codes */
	uint64_t l2_bytes;         /* summary codes + group table */
	uint64_t l3_bytes;         /* codes + positions, before zstd, + its L3 residual
	                              key codes */
	int residual;              /* 1: section keys.residual holds residual key codes
	                              for the head (a retrieval head when built) */
	uint64_t l3_stored;        /* the head's zstd frame in the file */
	int32_t *l1_pos;           /* [n_l1] positions */
	int32_t *g_first, *g_last; /* [n_group] first and last position of each group */
	uint8_t *g_class;          /* [n_group] HSQ_GROUP_LOW / HSQ_GROUP_MEDIUM */
	float induction;           /* 0..1, the retrieval-head score (0 when not stored) */
	int retrieval;             /* 1: one of the default retrieval heads, the ones
	                              hsq-decode fetches in full unless told otherwise
	                              (hsq mode only; the library's own pick) */
} hsq_tier_head_info;

typedef struct hsq_tier_map {
	hsq_snapshot_mode mode;
	hsq_tier_params params;
	char reader[32], compressor[32]; /* names recorded by the writer */
	uint8_t calibration_sha256[32];  /* SHA-256 of the calibration whose learned reader
					  * built the tiers; zeros: none */
	int n_layer, n_head_kv, head_dim, n_tokens;
	uint64_t fp16_kv_bytes;    /* the same context at fp16 (sliding layers: their window) */
	hsq_tier_head_info *heads; /* [n_layer * n_head_kv], layer-major */
} hsq_tier_map;

HSQ_API hsq_status hsq_snapshot_read_tiers(const char *path, hsq_tier_map **out);
HSQ_API void hsq_tier_map_free(hsq_tier_map *map);

#ifdef __cplusplus
}
#endif
#endif

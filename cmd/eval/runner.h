/* runner.h - running one method on a context that holds a document
 * (runner.c): the model, the document's snapshot, each method's context. */
#ifndef HSQ_CMD_EVAL_RUNNER_H
#define HSQ_CMD_EVAL_RUNNER_H

#include <stdint.h>

#include "common/json.h"
#include "options.h"

typedef struct eval_runner {
	hsq_model *model;
	hsq_model_info mi;
	const eval_common *c;
	hsq_tier_params tp;    /* library defaults; keep 0 sizes streaming/snapkv to hsq's fast tier */
	int n_obs;             /* tokens re-evaluated after loading: the reader's observation window */
	char dir[4096];        /* private temporary directory */
	char snap[4200];       /* dir/doc.hsq: the full snapshot of the current document */
	char msnap[4200];      /* dir/method.hsq: one method's compressed snapshot */
	float *logits;         /* EVAL_CHUNK rows of n_vocab */
	char model_id[65];     /* sha256 of the model, hex */
	hsq_calibration *cal;  /* --calibration (hsq-learned), or NULL */
	char cal_id[65];       /* sha256 of the calibration file, hex */
	/* With a calibration: the reader's hidden rows of the positions
	 * eval_prefill evaluated, [n_hidden][n_embd], which a context loaded
	 * from R->snap lacks (hsq_context_put_hidden) */
	float *hidden;
	int n_hidden;
} eval_runner;

/* Loads the model and the calibration (exit 3) and makes the temporary
 * directory. */
void eval_runner_init(eval_runner *R, const eval_common *c);
/* Makes R->dir afresh and names R->snap and R->msnap in it (a --jobs
 * worker's own). */
void eval_runner_tmpdir(eval_runner *R);
void eval_runner_free(eval_runner *R);
/* Appends "model", "model_sha256", "version", "methods", "calibration_sha256"
 * (with a calibration), "budget" and the tier parameters to a configuration
 * object being written. */
void eval_runner_config(const eval_runner *R, sbuf *b);
/* Evaluates toks[0..n) in a new full context of n_ctx tokens and saves it
 * as R->snap (with a calibration, keeps the hidden rows in R->hidden).
 * Returns the seconds the evaluation took. */
double eval_prefill(eval_runner *R, const hsq_token *toks, size_t n, int n_ctx);
/* A context for method mode at the end of the document: loads R->snap,
 * evaluates the n_obs observation tokens (their last logits in R->logits),
 * then compresses (not for full; *compress_s its time, may be NULL) and sets
 * the budget (hsq, hsq-learned). */
hsq_context *eval_open(eval_runner *R, hsq_snapshot_mode mode, const hsq_token *obs, int n_ctx, double *compress_s);
/* hsq_context_eval or exit (1, or 4 for a full context). */
void eval_eval(const eval_runner *R, hsq_context *ctx, const hsq_token *toks, size_t n, float *logits, int all);
/* Loads a snapshot for method mode and sets the budget (bench, needle). */
hsq_context *eval_load(eval_runner *R, const char *path, int n_ctx, hsq_snapshot_mode mode);
/* Dies with the library's message for a failed call. */
void eval_die_status(hsq_status st, const char *what) __attribute__((noreturn));

/* -log softmax(logits)[target], in double. */
double eval_nll(const float *logits, int n, int target);
/* Bytes of the fast tier: L1 + L2; for full, the whole cache at fp16. */
uint64_t eval_fast_bytes(const hsq_context *ctx);
hsq_tier_stats eval_tier_stats(const hsq_context *ctx);

/* Tokenizes or exits 4 naming what. */
hsq_token *eval_tokenize(const hsq_model *m, const char *text, size_t len, int add_bos, int special, size_t *n,
			 const char *what);

/* 64-bit FNV-1a of bytes, as 16 hex digits. */
void eval_fnv1a_hex(const void *p, size_t n, char out[17]);
/* Current and peak resident set, bytes (0 when unknown). */
uint64_t eval_rss_now(void);
uint64_t eval_rss_peak(void);

#endif

/*
 * hsq_train.h - the training wing: what hsq-calibrate(1) trains the learned
 * parts of the HSQ method with, and the writer of calibration files
 * (hsq-calibration(5)).
 *
 * Built as libhsq-train.a, linked into hsq-calibrate and the tests, not
 * installed: the runtime only reads calibration files (hsq.h). Forward and
 * backward passes are written by hand (checked against finite differences
 * in tests/unit/test_reader_grad.c) and updated with AdamW. Training is
 * deterministic: the same documents, options and seed give the same
 * weights bit for bit whatever the number of threads. Like the rest of
 * libhsq it never prints and never exits.
 */
#ifndef HSQ_TRAIN_H
#define HSQ_TRAIN_H

#include "hsq.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSQ_READER_POS_FEATURES 4

/* SHA-256 of n bytes (what the calibration's info records of each text). */
void hsq_sha256(const void *data, size_t n, uint8_t out[32]);

/* The reader's input row of position p (0..n-1) of a document of n tokens,
 * from x, the residual stream after the reader's layer (n_embd floats):
 * row[n_embd + HSQ_READER_POS_FEATURES] (hsq-calibration(5) gives the
 * features). The same function the runtime uses. */
void hsq_reader_features(const float *x, int n_embd, int p, int n, float *row);

/* The obs-attention prior of every head (hsq_reader_doc.prior, laid out
 * [n_out][n]) from that reader's mass [n_out][n]: per head the runtime's
 * ln(mass / Z + 1 / K), Z the mass on the K positions first..end-1 (the
 * ones the reader chooses among). */
void hsq_reader_obs_prior(const float *mass, int n, int n_out, int first, int end, float *prior);

/* One training document: a context of n positions, the reader's input
 * rows, and the label of each trained head: the share of the attention
 * that queries after the context (its continuation) paid each candidate
 * position. */
typedef struct hsq_reader_doc {
	int n;                  /* context positions */
	const float *in;        /* [n][n_embd + HSQ_READER_POS_FEATURES] */
	const float *target;    /* [n_out][n]: per head, >= 0 on candidates, summing to 1;
				 * rows of heads not trained are not read */
	const uint8_t *cand;    /* [n] 1: a position the reader chooses among (not a sink,
				 * not the recent window); at least 2 */
	const uint8_t *head_on; /* [n_out] 1: a head trained (global-attention layers) */
	const float *prior;     /* [n_out][n] or NULL: added to each head's scores before the
				 * softmax (the log of another reader's guess, which the
				 * network then learns to correct); finite on candidates */
} hsq_reader_doc;

typedef struct hsq_adamw_params {
	float lr;           /* learning rate */
	float beta1, beta2; /* moment decays, 0..1 */
	float eps;
	float weight_decay; /* decoupled, on the weight matrices only (not the biases) */
} hsq_adamw_params;
hsq_adamw_params hsq_adamw_default_params(void); /* 1e-3, 0.9, 0.999, 1e-8, 0.01 */

typedef struct hsq_reader_trainer hsq_reader_trainer;

/* A reader for a model of mi's shape reading layer tap_layer, n_hidden
 * wide, its weights drawn from seed (uniform, +-1/sqrt(fan-in); biases 0). */
hsq_status hsq_reader_trainer_new(const hsq_model_info *mi, int tap_layer, int n_hidden, uint64_t seed,
				  const hsq_adamw_params *opt, hsq_reader_trainer **out);
void hsq_reader_trainer_free(hsq_reader_trainer *tr);

/* The loss over docs: for every doc and trained head, the cross-entropy
 * -sum_p target[p] log softmax(score + prior)[p] over the doc's candidate
 * positions; the mean over (doc, head) pairs. Documents are cut into fixed
 * blocks that n_threads threads share; the sums run in block order. */
hsq_status hsq_reader_trainer_loss(const hsq_reader_trainer *tr, const hsq_reader_doc *docs, int n_docs,
				   int n_threads, double *loss);
/* One AdamW step on the gradient of that loss over docs; *loss gets the
 * loss before the step. */
hsq_status hsq_reader_trainer_step(hsq_reader_trainer *tr, const hsq_reader_doc *docs, int n_docs, int n_threads,
				   double *loss);
/* The scores of one doc: out[n][n_out] (the runtime's reader_forward). */
hsq_status hsq_reader_trainer_scores(const hsq_reader_trainer *tr, const hsq_reader_doc *doc, float *out);
int hsq_reader_trainer_n_params(const hsq_reader_trainer *tr);
/* on = 1: the reader's guess adds the obs-attention prior to its scores
 * (docs then carry hsq_reader_doc.prior, and the file records it), and,
 * before the first step, the output layer starts at zero, so that the
 * first guess is the prior's. */
hsq_status hsq_reader_trainer_set_prior(hsq_reader_trainer *tr, int on);
/* Keeps a copy of the weights as they are now (the best so far, say);
 * restore puts the kept copy back (an error when none was kept). The
 * optimiser's state is not kept. */
hsq_status hsq_reader_trainer_keep(hsq_reader_trainer *tr);
hsq_status hsq_reader_trainer_restore(hsq_reader_trainer *tr);

/* Writes a calibration file for model holding the trainer's reader and
 * the info text (UTF-8 lines "key: value", no NUL), atomically: a
 * temporary file in the same directory, fsync, rename, fsync of the
 * directory. */
hsq_status hsq_calibration_write(const char *path, const hsq_model *model, const hsq_reader_trainer *tr,
				 const char *info);

#ifdef __cplusplus
}
#endif
#endif

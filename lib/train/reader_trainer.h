/* reader_trainer.h - the reader being trained (internal to the training
 * wing): its network and the optimiser's state. */
#ifndef HSQ_READER_TRAINER_H
#define HSQ_READER_TRAINER_H

#include "hsq_train.h"
#include "learn/reader_net.h"

struct hsq_reader_trainer {
	reader_net net;       /* the weights being trained (owned) */
	int n_layer, n_head_kv;
	hsq_adamw_params opt;
	long step;            /* AdamW steps taken */
	float *m, *v;         /* [n_params] first and second moments, in the order
			       * w1, b1, w2, b2 */
	float *kept;          /* [n_params] hsq_reader_trainer_keep's copy, or NULL */
};

/* Writes a calibration file holding net, trained for the model mi
 * describes (identity, architecture, name and shape), with the info text;
 * atomically. hsq_calibration_write is this with the trainer's network. */
hsq_status calib_write_reader(const char *path, const hsq_model_info *mi, const reader_net *net, const char *info);

#endif

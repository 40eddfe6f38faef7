/* reader_grad.h - the reader's loss and its hand-written gradient
 * (internal to the training wing; tests/unit/test_reader_grad.c checks the
 * gradient against finite differences through it). */
#ifndef HSQ_READER_GRAD_H
#define HSQ_READER_GRAD_H

#include "hsq_train.h"
#include "learn/reader_net.h"

/* The loss of hsq_reader_trainer_loss over docs for the weights of net,
 * and with grad non-NULL its gradient: grad[reader_n_params(...)] in the
 * order w1, b1, w2, b2, the same layout as the trainer's moments. Checks
 * the docs (HSQ_ERR_INVALID_ARG naming the doc and value); a loss that is
 * not finite is HSQ_ERR_INVALID_ARG too. n_threads 0: all online cores.
 * The result is the same bits for every n_threads. */
hsq_status reader_loss_grad(const reader_net *net, const hsq_reader_doc *docs, int n_docs, int n_threads,
			    double *loss, double *grad);

#endif

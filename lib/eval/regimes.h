/* regimes.h - the synthetic K/V regimes of the codec study (internal
 * constants; the API is in hsq.h). The numbers here are documented in
 * hsq-eval(1), CODECS, Regimes: change both together. */
#ifndef HSQ_REGIMES_H
#define HSQ_REGIMES_H
#include "hsq_eval.h"

#define REGIME_T_NU 3            /* heavy-tail: Student t degrees of freedom */
#define REGIME_RANK 8            /* low-rank, kv-*: rank of the signal */
#define REGIME_NOISE 0.25        /* low-rank, kv-*, shift: noise std per coordinate */
#define REGIME_SHIFT_RANK 16     /* shift: rank of calibration and test signals */
#define REGIME_SHIFT_MOVED 8     /* shift: test directions outside the calibrated span */
#define REGIME_DECAY_FAST 0.90   /* decay-fast: lambda_i proportional to 0.90^i */
#define REGIME_DECAY_SLOW 0.99   /* decay-slow: lambda_i proportional to 0.99^i */

#endif

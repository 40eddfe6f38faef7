/* codec_metrics.h - error measures of the codec study (internal helpers;
 * hsq_codec_measure is public). */
#ifndef HSQ_CODEC_METRICS_H
#define HSQ_CODEC_METRICS_H
#include "hsq_eval.h"

/* sum |x - y|^2 and sum |x|^2 over n rows of d values. */
void hsq_sq_err(const float *x, const float *y, size_t n, int d, double *err, double *energy);
/* Sum over rows of cos(x_i, y_i); a zero row counts 1 if both are zero,
 * else 0. */
double hsq_cos_sum(const float *x, const float *y, size_t n, int d);
/* Row-wise softmax of an m x n score matrix, in place (max-subtracted). */
void hsq_softmax_rows(double *s, size_t m, size_t n);
/* out (m x d) = p (m x n) v (n x d). */
void hsq_attend(const double *p, const float *v, size_t m, size_t n, int d, double *out);

#endif

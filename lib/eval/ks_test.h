/* ks_test.h - two-sample Kolmogorov-Smirnov test (internal helpers; the
 * entry point hsq_ks_2samp is public, in hsq.h). */
#ifndef HSQ_KS_TEST_H
#define HSQ_KS_TEST_H
#include "hsq_eval.h"

/* P(D >= k / (m n)) under H0 for samples of sizes m and n without ties,
 * where k = max |i n - j m| over the merged order: exact, by lattice paths. */
double hsq_ks_exact_p(size_t m, size_t n, uint64_t k);
/* Kolmogorov's limit Q(lambda) = 2 sum (-1)^(j-1) exp(-2 j^2 lambda^2). */
double hsq_ks_limit_q(double lambda);

#endif

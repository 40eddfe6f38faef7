/* hadamard.h - seeded randomized Walsh-Hadamard rotation (internal).
 *
 * R = H D2 P H D1: D1, D2 random sign flips, P a random permutation, H the
 * orthonormal Walsh-Hadamard transform applied block-diagonally over a
 * decomposition of dim into powers of two (largest first: 96 = 64 + 32).
 * Why two rounds: one round H D1 maps a vector with all its energy in one
 * coordinate to a flat +-1/sqrt(n) pattern, which a Gaussian codebook
 * quantizes badly; the second round turns that pattern into near-Gaussian
 * coordinates, and its permutation mixes across blocks when dim is not a
 * power of two. R is orthonormal and fixed by (dim, seed). */
#ifndef HSQ_HADAMARD_H
#define HSQ_HADAMARD_H
#include "hsq_codec.h"

typedef struct hsq_rotation hsq_rotation;

hsq_status hsq_rotation_new(int dim, uint64_t seed, hsq_rotation **out);
void hsq_rotation_free(hsq_rotation *rot);
int hsq_rotation_dim(const hsq_rotation *rot);
/* y = R x; x and y may be the same array. */
void hsq_rotation_apply(const hsq_rotation *rot, const float *x, float *y);
/* x = R^T y; x and y may be the same array. */
void hsq_rotation_apply_t(const hsq_rotation *rot, const float *y, float *x);

/* In-place orthonormal Walsh-Hadamard transform of n = 2^k values. */
void hsq_fwht(float *x, int n);

#endif

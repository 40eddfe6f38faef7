/* sha256_text.c - the training wing's SHA-256, for the texts a calibration
 * records. */
#include "common/sha256.h"
#include "hsq_train.h"

void hsq_sha256(const void *data, size_t n, uint8_t out[32])
{
	sha256(data, n, out);
}

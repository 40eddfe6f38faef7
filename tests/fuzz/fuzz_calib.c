/* fuzz_calib.c - libFuzzer harness for SpectralQuant calibration files
 * (hsq_sq_calib_deserialize; the format of hsq-eval(1), CALIBRATION
 * FILES). Each input is a calibration file. The harness first makes its
 * two CRC32Cs right again (header: bytes 0..59 at 60; payload: the bytes
 * between the 64-byte header and the last 4, stored in the last 4), so the
 * checks behind them are reached. A calibration that deserializes is used:
 * its bit allocations, an sq and an squ codec made with it, one vector
 * encoded, decoded and scored, and serialized again.
 * Corpus: tests/fuzz/corpus/calib/ (tests/fuzz/gen_calib.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "hsq.h"
#include "hsq_codec.h"

#define CAL_HEADER 64

static void use(const hsq_sq_calib *c)
{
	int dim = hsq_sq_calib_dim(c);
	uint8_t alloc[HSQ_CODEC_MAX_DIM];
	float x[HSQ_CODEC_MAX_DIM], y[HSQ_CODEC_MAX_DIM], score;
	(void)hsq_sq_calib_deff(c);
	(void)hsq_sq_calib_eigenvalues(c);
	for (int i = 0; i < dim; i++)
		x[i] = sinf(0.7f * (float)i) + 0.1f * (float)(i % 5);
	for (hsq_codec_kind kind = HSQ_CODEC_SQ; kind <= HSQ_CODEC_SQU; kind++)
		for (int bits = 1; bits <= 8; bits += 3) {
			(void)hsq_sq_calib_allocation(c, kind, bits, alloc);
			hsq_codec_params p = { .kind = kind, .dim = dim, .bits = bits, .path = HSQ_KV_K, .calib = c };
			hsq_codec *codec = NULL;
			if (hsq_codec_new(&p, &codec) != HSQ_OK)
				continue;
			uint8_t *code = malloc(hsq_codec_code_bytes(codec));
			hsq_codec_query *q = NULL;
			if (code && hsq_codec_encode(codec, x, 1, code) == HSQ_OK) {
				hsq_codec_decode(codec, code, 1, y);
				if (hsq_codec_query_new(codec, &q) == HSQ_OK) {
					hsq_codec_query_set(q, x);
					hsq_codec_dot(q, code, 1, &score);
					hsq_codec_query_free(q);
				}
			}
			free(code);
			hsq_codec_free(codec);
		}
	uint8_t *buf = NULL;
	size_t len = 0;
	if (hsq_sq_calib_serialize(c, &buf, &len) == HSQ_OK)
		hsq_free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *b = malloc(size ? size : 1);
	if (!b)
		return 0;
	memcpy(b, data, size);
	if (size >= CAL_HEADER)
		put_u32(b + 60, crc32c_update(0, b, 60));
	if (size >= CAL_HEADER + 4)
		put_u32(b + size - 4, crc32c_update(0, b + CAL_HEADER, size - CAL_HEADER - 4));
	hsq_sq_calib *c = NULL;
	if (hsq_sq_calib_deserialize(b, size, &c) == HSQ_OK) {
		use(c);
		hsq_sq_calib_free(c);
	}
	free(b);
	return 0;
}

/* fuzz_hsqc.c - libFuzzer harness for the calibration file reader
 * (hsq_calibration_load, lib/learn/calibration.c; the format of
 * man/hsq-calibration.5). Each input is a calibration file. Mutated bytes
 * would nearly always fail a CRC32C check first, so before the reader sees
 * an input the harness makes its checksums right again, as a buggy or
 * malicious writer would (tests/fuzz/hsqc_reseal.h): the header's
 * file_size becomes the input's size, each section's CRC32C is recomputed
 * where its bytes lie in the input, then the header's. The file is loaded
 * without a model (so the identity does not stop it); a calibration that
 * loads has every weight read and its info text measured.
 * Corpus: tests/fuzz/corpus/hsqc/ (tests/fuzz/gen_hsqc.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "hsq.h"
#include "hsqc_reseal.h"
#include "learn/calibration.h"

/* Reads every weight, so ASan sees the arrays are as large as the shape
 * says; the sum goes nowhere. */
static void use(const hsq_calibration *cal)
{
	hsq_calibration_info info;
	hsq_calibration_get_info(cal, &info);
	const reader_net *r = &cal->reader;
	volatile float sum = 0.0f;
	for (size_t i = 0; i < (size_t)r->n_hidden * (size_t)r->n_in; i++)
		sum += r->w1[i];
	for (int i = 0; i < r->n_hidden; i++)
		sum += r->b1[i];
	for (size_t i = 0; i < (size_t)r->n_out * (size_t)r->n_hidden; i++)
		sum += r->w2[i];
	for (int i = 0; i < r->n_out; i++)
		sum += r->b2[i];
	if (strlen(info.info) > (1u << 20) || !info.model_name || !info.model_arch)
		abort(); /* the reader bounds the text, and always names the model */
	(void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *b = malloc(size ? size : 1);
	if (!b)
		return 0;
	memcpy(b, data, size);
	hsqc_reseal(b, size, 1);
	const char *path = fuzz_file(b, size);
	free(b);

	hsq_calibration *cal = NULL;
	if (hsq_calibration_load(path, NULL, &cal) == HSQ_OK) {
		use(cal);
		hsq_calibration_free(cal);
	}
	return 0;
}

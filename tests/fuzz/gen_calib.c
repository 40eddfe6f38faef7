/* gen_calib.c - writes the seed corpus of fuzz_calib: SpectralQuant
 * calibrations of dimensions 16 and 32 from deterministic samples (one with
 * a spectral gap, one without), serialized as hsq-eval writes them.
 *
 *   cc -Iinclude tests/fuzz/gen_calib.c build/libhsq.a -lzstd -lpcre2-8 -lutf8proc -lm -lpthread -o gen_calib
 *   ./gen_calib tests/fuzz/corpus/calib */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hsq.h"
#include "hsq_codec.h"

static int write_one(const char *dir, const char *name, int dim, int n, int gap)
{
	float *x = malloc(sizeof(float) * (size_t)dim * (size_t)n);
	uint32_t s = 38u + (uint32_t)dim;
	for (int r = 0; r < n; r++)
		for (int i = 0; i < dim; i++) {
			s = s * 1664525u + 1013904223u;
			float u = (float)(s >> 8) / 16777216.0f - 0.5f;
			x[(size_t)r * dim + i] = gap && i < 3 ? 10.0f * u : u / (1.0f + 0.1f * (float)i);
		}
	hsq_sq_calib_params p = hsq_sq_calib_default_params();
	hsq_sq_calib *c = NULL;
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int ok = hsq_sq_calibrate(x, (size_t)n, dim, &p, &c) == HSQ_OK && hsq_sq_calib_save(c, path) == HSQ_OK;
	if (!ok)
		fprintf(stderr, "gen_calib: %s: %s\n", path, hsq_last_error());
	hsq_sq_calib_free(c);
	free(x);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	return write_one(dir, "dim16-gap.cal", 16, 200, 1) | write_one(dir, "dim32-flat.cal", 32, 300, 0);
}

/* fuzz_gguf.c - libFuzzer harness for the GGUF reader: each input is a
 * GGUF file, loaded with hsq_model_load, which opens it with gguf_open
 * (header, metadata, tensor table, data bounds, identity) and then reads
 * the architecture, hyperparameters, tensor shapes and types and the
 * vocabulary (tokenizer, merges, scores, token types, special ids).
 * Corpus: tests/fuzz/corpus/gguf/, small synthetic GGUFs
 * (tests/fuzz/make_corpus.py). */
#include <stdint.h>
#include <stddef.h>

#include "fuzz_util.h"
#include "hsq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hsq_model *m = NULL;
	if (hsq_model_load(fuzz_file(data, size), &m) == HSQ_OK)
		hsq_model_free(m);
	return 0;
}

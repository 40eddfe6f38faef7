/* fuzz_tokenizer.c - libFuzzer harness for the tokenizers. Each input is
 * one flags byte (bit 0: add BOS, bit 1: parse special tokens) and the
 * text. It is tokenized with the default model's vocabulary (byte-level
 * BPE: SmolLM2-135M, hsq_default_model_path, loaded once per process) and
 * with the tiny sentencepiece vocabulary of tests/fuzz/models/tiny-spm.gguf
 * (byte fallback), and every token is turned back into bytes. A missing
 * vocabulary is skipped with a SKIP line. Corpus: tests/fuzz/corpus/tokenizer/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hsq.h"

static hsq_model *models[2];

static void load(int i, const char *path)
{
	if (hsq_model_load(path, &models[i]) != HSQ_OK) {
		fprintf(stderr, "SKIP: fuzz_tokenizer: %s\n", hsq_last_error());
		models[i] = NULL;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[4096];
	const char *env = getenv("HSQ_FUZZ_TOKENIZER_MODEL");
	if (env)
		load(0, env);
	else if (hsq_default_model_path(path, sizeof path) == HSQ_OK)
		load(0, path);
	else
		fprintf(stderr, "SKIP: fuzz_tokenizer: no default model (%s)\n", hsq_last_error());
	load(1, "tests/fuzz/models/tiny-spm.gguf");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int add_bos = data[0] & 1, special = (data[0] >> 1) & 1;
	for (int m = 0; m < 2; m++) {
		if (!models[m])
			continue;
		hsq_token *tok = NULL;
		size_t n = 0;
		if (hsq_tokenize(models[m], (const char *)data + 1, size - 1, add_bos, special, &tok, &n) != HSQ_OK)
			continue;
		for (size_t i = 0; i < n; i++) {
			const char *bytes;
			size_t len;
			(void)hsq_token_bytes(models[m], tok[i], special, &bytes, &len);
		}
		hsq_free(tok);
	}
	return 0;
}

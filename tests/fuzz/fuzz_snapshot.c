/* fuzz_snapshot.c - libFuzzer harness for the snapshot reader
 * (lib/snapshot/, the format of man/hsq-snapshot.5). Each input is a
 * snapshot file. Mutated bytes would nearly always fail a CRC32C check
 * first, so before the readers see an input the harness makes its
 * checksums right again, as a buggy or malicious writer would:
 *   - the header's file_size becomes the input's size;
 *   - each l3.index entry's frame CRC (when l3.index and l3 are raw);
 *   - each section's CRC32C of its stored bytes (when they lie in the file);
 *   - the header CRC32C of header (CRC field as 0) + section table.
 * Then hsq_snapshot_inspect (verify = 1), hsq_snapshot_read_tokens,
 * hsq_snapshot_read_tiers and hsq_snapshot_load against the tiny model the
 * corpus was written with (tests/fuzz/models/tiny-llama.gguf, or
 * $HSQ_FUZZ_SNAPSHOT_MODEL; without it the load is left out).
 * Corpus: tests/fuzz/corpus/snapshot/ (tests/fuzz/make_corpus.sh). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "hsq.h"
#include "snapshot_reseal.h"

static hsq_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *path = getenv("HSQ_FUZZ_SNAPSHOT_MODEL");
	if (!path)
		path = "tests/fuzz/models/tiny-llama.gguf";
	if (hsq_model_load(path, &model) != HSQ_OK) {
		fprintf(stderr, "fuzz_snapshot: no model (%s): hsq_snapshot_load is not fuzzed\n", hsq_last_error());
		model = NULL;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *b = malloc(size ? size : 1);
	if (!b)
		return 0;
	memcpy(b, data, size);
	snapshot_reseal(b, size);
	const char *path = fuzz_file(b, size);
	free(b);

	hsq_snapshot_info info;
	(void)hsq_snapshot_inspect(path, 1, &info);
	hsq_token *tokens = NULL;
	size_t n = 0;
	if (hsq_snapshot_read_tokens(path, &tokens, &n) == HSQ_OK)
		hsq_free(tokens);
	hsq_tier_map *map = NULL;
	if (hsq_snapshot_read_tiers(path, &map) == HSQ_OK)
		hsq_tier_map_free(map);
	if (model) {
		hsq_context_params cp = hsq_context_default_params();
		cp.n_threads = 1;
		cp.n_ctx = 256;
		hsq_context *ctx = NULL;
		if (hsq_snapshot_load(model, path, &cp, &ctx) == HSQ_OK)
			hsq_context_free(ctx);
	}
	return 0;
}

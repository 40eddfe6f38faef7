/* test_fuzz_regress.c - the inputs on which the fuzz harnesses
 * (tests/fuzz/) found bugs, replayed as the harnesses run them, under this
 * build's ASan and UBSan: tests/fuzz/regress/gguf/ through hsq_model_load,
 * tests/fuzz/regress/snapshot/ resealed (tests/fuzz/snapshot_reseal.h) and
 * read by hsq_snapshot_inspect, _read_tokens, _read_tiers and _load against
 * tests/fuzz/models/tiny-llama.gguf. Any status is fine; a sanitizer report
 * (which aborts: -fno-sanitize-recover) is not. The tests run from the top
 * of the tree, as `make unit` runs them.
 *
 *   regress/gguf/block-count-overflow     block_count 536870913: 6 * n_layer + 1
 *                                         overflowed int in model.c
 *   regress/gguf/key-length-oom           attention.key_length 134217744: the norm
 *                                         slots asked for 3.7 GB before any tensor
 *                                         was checked against it (refused, below)
 *   regress/snapshot/tiers-add-empty-l1   a head with no L1 tokens: NULL + 0 and
 *                                         memcpy(NULL, ...) in tiers_head_add_l1 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "hsq.h"
#include "../fuzz/snapshot_reseal.h"

#define REGRESS "tests/fuzz/regress"
#define TINY_MODEL "tests/fuzz/models/tiny-llama.gguf"

static uint8_t *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	uint8_t *b = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 65536;
			b = realloc(b, cap);
			cr_assert_not_null(b);
		}
		got = fread(b + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	*size = n;
	return b;
}

static void write_all(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fwrite(b, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* Calls fn on every file of REGRESS/dir; returns how many there were. */
static int each_input(const char *dir, void (*fn)(const char *path, uint8_t *b, size_t n))
{
	char d[256], path[512];
	snprintf(d, sizeof d, "%s/%s", REGRESS, dir);
	DIR *D = opendir(d);
	if (!D) {
		printf("SKIP: fuzz regressions in %s (run from the top of the tree)\n", d);
		cr_skip_test("no %s", d);
	}
	int count = 0;
	for (struct dirent *e; (e = readdir(D));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", d, e->d_name);
		size_t n;
		uint8_t *b = read_all(path, &n);
		fn(path, b, n);
		free(b);
		count++;
	}
	closedir(D);
	return count;
}

static char tmp[64];
static hsq_model *tiny;

static void gguf_one(const char *path, uint8_t *b, size_t n)
{
	write_all(tmp, b, n);
	hsq_model *m = NULL;
	hsq_status st = hsq_model_load(tmp, &m);
	printf("%s: %s\n", path, hsq_strerror(st));
	hsq_model_free(m);
}

static void snapshot_one(const char *path, uint8_t *b, size_t n)
{
	snapshot_reseal(b, n);
	write_all(tmp, b, n);
	hsq_snapshot_info info;
	hsq_token *tok = NULL;
	size_t n_tok;
	hsq_tier_map *map = NULL;
	hsq_context *ctx = NULL;
	hsq_context_params cp = hsq_context_default_params();
	cp.n_threads = 1;
	cp.n_ctx = 256;
	hsq_status s1 = hsq_snapshot_inspect(tmp, 1, &info);
	hsq_status s2 = hsq_snapshot_read_tokens(tmp, &tok, &n_tok);
	hsq_status s3 = hsq_snapshot_read_tiers(tmp, &map);
	hsq_status s4 = hsq_snapshot_load(tiny, tmp, &cp, &ctx);
	printf("%s: inspect %s, tokens %s, tiers %s, load %s\n", path, hsq_strerror(s1), hsq_strerror(s2),
	       hsq_strerror(s3), hsq_strerror(s4));
	hsq_free(tok);
	hsq_tier_map_free(map);
	hsq_context_free(ctx);
}

static void setup(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/hsq-test-fuzz-regress-%d", (int)getpid());
}

static void teardown(void)
{
	unlink(tmp);
}

TestSuite(fuzz_regress, .init = setup, .fini = teardown);

Test(fuzz_regress, gguf)
{
	cr_expect_geq(each_input("gguf", gguf_one), 1);
}

/* Beyond not crashing: refused as a corrupt file, before the allocation. */
Test(fuzz_regress, key_length_checked_before_allocating)
{
	const char *path = REGRESS "/gguf/key-length-oom";
	if (access(path, R_OK) != 0) {
		printf("SKIP: %s missing (run from the top of the tree)\n", path);
		cr_skip_test("no %s", path);
	}
	hsq_model *m = NULL;
	cr_expect_eq(hsq_model_load(path, &m), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_expect_null(m);
	cr_expect(strstr(hsq_last_error(), "blk.0.attn_q.weight") != NULL, "%s", hsq_last_error());
	hsq_model_free(m);
}

Test(fuzz_regress, snapshot)
{
	if (access(TINY_MODEL, R_OK) != 0) {
		printf("SKIP: snapshot fuzz regressions (%s missing; run from the top of the tree)\n", TINY_MODEL);
		cr_skip_test("no %s", TINY_MODEL);
	}
	cr_assert_eq(hsq_model_load(TINY_MODEL, &tiny), HSQ_OK, "%s", hsq_last_error());
	cr_expect_geq(each_input("snapshot", snapshot_one), 1);
	hsq_model_free(tiny);
}

/*
 * test_tiers_hostile.c - tier snapshots with hostile bytes (ASan/UBSan build).
 *
 * An hsq snapshot of 160 tokens (sinks 2, window 16: a few L1 tokens and
 * ~9 groups per head) is damaged in ways a checksum cannot catch: bytes of
 * the tier sections are changed and the section and header CRCs recomputed,
 * as a buggy or malicious writer would. Every load must either fail with a
 * format, checksum or unsupported status (and no context), or succeed with
 * a context that decodes without a sanitizer report. Targeted cases check
 * that impossible counts, offsets, positions, group bounds, classes and
 * non-finite norms are each refused with HSQ_ERR_FORMAT.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "hsq.h"
#include "snapshot_image.h"

#define N_TOK 160
#define N_CTX 256

static const char *model_path(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	return p && *p && access(p, R_OK) == 0 ? p : NULL;
}

typedef struct image {
	hsq_model *model;
	uint8_t *file;
	size_t size;
	char path[64];
} image;

static hsq_context_params params(void)
{
	hsq_context_params p = hsq_context_default_params();
	p.n_ctx = N_CTX;
	p.n_threads = 1;
	return p;
}

/* Writes the hsq snapshot and reads its bytes; 0 when there is no model. */
static int make_image(image *im)
{
	const char *mp = model_path();
	if (!mp) {
		fprintf(stderr, "SKIP: tier hostile-input tests: HSQ_TEST_MODEL not set (run 'make model')\n");
		return 0;
	}
	cr_assert_eq(hsq_model_load(mp, &im->model), HSQ_OK, "%s", hsq_last_error());
	hsq_context_params cp = params();
	hsq_context *ctx;
	cr_assert_eq(hsq_context_new(im->model, &cp, &ctx), HSQ_OK, "%s", hsq_last_error());
	hsq_token toks[N_TOK];
	for (int i = 0; i < N_TOK; i++)
		toks[i] = 100 + 37 * i;
	cr_assert_eq(hsq_context_eval(ctx, toks, N_TOK, NULL, 0), HSQ_OK, "%s", hsq_last_error());
	hsq_tier_params tp = hsq_tier_default_params();
	tp.sinks = 2;
	tp.window = 16;
	cr_assert_eq(hsq_context_compress(ctx, HSQ_MODE_HSQ, &tp), HSQ_OK, "%s", hsq_last_error());
	snprintf(im->path, sizeof im->path, "/tmp/hsq-hostile-%d.hsq", (int)getpid());
	cr_assert_eq(hsq_snapshot_save(ctx, im->path, HSQ_MODE_HSQ, 3), HSQ_OK, "%s", hsq_last_error());
	hsq_context_free(ctx);
	FILE *f = fopen(im->path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	im->size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	im->file = malloc(im->size);
	cr_assert_eq(fread(im->file, 1, im->size, f), im->size);
	fclose(f);
	return 1;
}

static void free_image(image *im)
{
	unlink(im->path);
	free(im->file);
	hsq_model_free(im->model);
}

static uint8_t *entry_of(uint8_t *f, const char *name)
{
	uint8_t *e = snap_image_entry(f, name);
	cr_assert_not_null(e, "no section %s", name);
	return e;
}

/* Start of a section's bytes in the image, and its size. */
static uint8_t *section(uint8_t *f, const char *name, size_t *size)
{
	uint8_t *e = entry_of(f, name);
	*size = (size_t)get_u64(e + SNAP_E_STORED);
	return f + get_u64(e + SNAP_E_OFFSET);
}

/* Recomputes the CRC of section `name` and the header's, as a writer would. */
static void reseal(uint8_t *f, const char *name)
{
	size_t n;
	uint8_t *s = section(f, name, &n);
	put_u32(entry_of(f, name) + SNAP_E_CRC, crc32c_update(0, s, n));
	snap_image_reseal_header(f);
}

/* Writes the damaged image, loads it, and (when it loads) decodes. */
static hsq_status load_damaged(const image *im, const uint8_t *bytes)
{
	char path[80];
	snprintf(path, sizeof path, "%s.bad", im->path);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(bytes, 1, im->size, f), im->size);
	fclose(f);
	hsq_context *ctx = NULL;
	hsq_context_params cp = params();
	hsq_status st = hsq_snapshot_load(im->model, path, &cp, &ctx);
	unlink(path);
	if (st == HSQ_OK) {
		hsq_token t = 42;
		hsq_model_info mi;
		hsq_model_get_info(im->model, &mi);
		float *logits = malloc(sizeof(float) * (size_t)mi.n_vocab);
		cr_assert_eq(hsq_context_eval(ctx, &t, 1, logits, 0), HSQ_OK, "decode after a load: %s", hsq_last_error());
		free(logits);
		hsq_context_free(ctx);
	} else {
		cr_assert_null(ctx, "a failed load must not return a context");
		cr_assert(st == HSQ_ERR_FORMAT || st == HSQ_ERR_CHECKSUM || st == HSQ_ERR_UNSUPPORTED,
			  "damage gave %s: %s", hsq_strerror(st), hsq_last_error());
	}
	return st;
}

Test(tiers_hostile, resealed_random_damage_never_crashes)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	const char *names[] = { "tiers", "l1", "l2", "l3.index", "l3", "router.heads" };
	uint8_t *bad = malloc(im.size);
	uint64_t s = 12345;
	int refused = 0, loaded = 0;
	for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
		for (int trial = 0; trial < 40; trial++) {
			memcpy(bad, im.file, im.size);
			size_t n;
			uint8_t *sec = section(bad, names[k], &n);
			for (int j = 0; j < 3; j++) { /* three bytes per trial */
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				sec[(s >> 33) % n] ^= (uint8_t)(1 + ((s >> 20) % 255));
			}
			reseal(bad, names[k]);
			if (load_damaged(&im, bad) == HSQ_OK)
				loaded++;
			else
				refused++;
		}
	}
	fprintf(stderr, "tiers hostile: %d damaged images refused, %d loaded and decoded\n", refused, loaded);
	cr_assert_gt(refused, 0);
	free(bad);
	free_image(&im);
}

Test(tiers_hostile, impossible_values_are_format_errors)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	uint8_t *bad = malloc(im.size);
	size_t n;
	struct {
		const char *what, *sec;
		size_t off;  /* in the section; SIZE_MAX: computed below */
		int width;   /* 1, 2, 4, 8 bytes */
		uint64_t value;
	} cases[] = {
		{ "L1 count past the tokens", "l1", 0, 4, N_TOK + 1 },
		{ "L1 block offset past the section", "l1", 8, 8, 1ull << 40 },
		{ "groups more than archived tokens", "l2", 0, 4, 1000 },
		{ "archived tokens past the tokens", "l2", 4, 4, N_TOK * 2 },
		{ "window unlike the model's", "l1", 4, 4, 512 },
		{ "l3 frame outside the section", "l3.index", 0, 8, 1ull << 40 },
		{ "group size over 16", "tiers", 16, 4, 32 },
		{ "codec bits", "tiers", 52, 4, 5 },
		{ "shape", "tiers", 68, 4, 31 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		memcpy(bad, im.file, im.size);
		uint8_t *sec = section(bad, cases[c].sec, &n);
		uint8_t *p = sec + cases[c].off;
		if (cases[c].width == 4)
			put_u32(p, (uint32_t)cases[c].value);
		else
			put_u64(p, cases[c].value);
		reseal(bad, cases[c].sec);
		hsq_status st = load_damaged(&im, bad);
		cr_assert(st == HSQ_ERR_FORMAT || st == HSQ_ERR_UNSUPPORTED, "%s: got %s (%s)", cases[c].what,
			  hsq_strerror(st), hsq_last_error());
	}
	/* in the first head's blocks: an L1 position out of order, a bad group
	 * start, an unknown class, an infinite norm */
	for (int c = 0; c < 4; c++) {
		memcpy(bad, im.file, im.size);
		const char *name = c == 0 || c == 3 ? "l1" : "l2";
		uint8_t *sec = section(bad, name, &n);
		uint64_t off = get_u64(sec + 8), cnt = get_u32(sec);
		cr_assert_gt(cnt, 1);
		if (c == 0)
			put_u32(sec + off + 4, get_u32(sec + off)); /* position 1 = position 0 */
		else if (c == 1)
			put_u32(sec + off + 4, 0); /* group 1 starts at 0: empty group 0 */
		else if (c == 2)
			sec[off + ((4 * (cnt + 1) + 63) & ~63ull)] = 7; /* class of group 0 */
		else
			put_u16(sec + off + ((4 * cnt + 63) & ~63ull), 0x7c00); /* +inf norm of token 0's K */
		reseal(bad, name);
		hsq_status st = load_damaged(&im, bad);
		cr_assert_eq(st, HSQ_ERR_FORMAT, "case %d: got %s (%s)", c, hsq_strerror(st), hsq_last_error());
	}
	free(bad);
	free_image(&im);
}

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
 * non-finite norms are each refused with HSQ_ERR_FORMAT, and so are archive
 * frames re-written with positions that repeat, overlap L1 or are out of
 * order in their group, frames under another head's index entry, bytes
 * after the last frame, and a 1.3+ file without its centres section.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <zstd.h>

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

/* Writes the damaged image of n bytes, loads it, and (when it loads)
 * decodes. */
static hsq_status load_damaged_n(const image *im, const uint8_t *bytes, size_t n)
{
	char path[80];
	snprintf(path, sizeof path, "%s.bad", im->path);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(bytes, 1, n, f), n);
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

static hsq_status load_damaged(const image *im, const uint8_t *bytes) { return load_damaged_n(im, bytes, im->size); }

/* Loads a damaged image that must be refused with HSQ_ERR_FORMAT by a
 * message naming the file and `what` (the section, in quotes). */
static void expect_refused(const image *im, const uint8_t *bytes, size_t n, const char *what, const char *words)
{
	hsq_status st = load_damaged_n(im, bytes, n);
	const char *msg = hsq_last_error();
	cr_assert_eq(st, HSQ_ERR_FORMAT, "%s: got %s (%s)", words, hsq_strerror(st), msg);
	cr_assert(strstr(msg, im->path) && strstr(msg, what) && strstr(msg, words) && !strchr(msg, '\n'),
		  "the message names the file, %s and '%s': %s", what, words, msg);
}

/* The decompressed archive frame of head i (its n_l3 positions, then the
 * codes) and its size. */
static uint8_t *frame_of(uint8_t *f, int i, size_t *raw_n)
{
	size_t n3, n;
	uint8_t *l3 = section(f, "l3", &n3), *e = section(f, "l3.index", &n) + 32 * (size_t)i;
	*raw_n = (size_t)get_u64(e + 16);
	uint8_t *raw = malloc(*raw_n + 1);
	size_t got = ZSTD_decompress(raw, *raw_n, l3 + get_u64(e), (size_t)get_u64(e + 8));
	cr_assert_eq(got, *raw_n, "frame of head %d: %s", i, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
	return raw;
}

/* A new image whose head i archive frame holds `raw` compressed, then the
 * `extra` bytes; l3.index follows (the frame's size and CRC, the offsets of
 * the frames behind it), every CRC recomputed. */
static uint8_t *with_frame(const image *im, int i, const uint8_t *raw, size_t raw_n, const uint8_t *extra,
			   size_t extra_n, size_t *out_n)
{
	size_t cap = ZSTD_compressBound(raw_n) + extra_n, n;
	uint8_t *z = malloc(cap);
	size_t zn = ZSTD_compress(z, cap, raw, raw_n, 3);
	cr_assert(!ZSTD_isError(zn));
	if (extra_n)
		memcpy(z + zn, extra, extra_n);
	zn += extra_n;
	uint8_t *e = section(im->file, "l3.index", &n) + 32 * (size_t)i;
	uint64_t off = get_u64(e), old = get_u64(e + 8);
	uint8_t *g = snap_image_splice(im->file, im->size, "l3", off, old, z, zn, out_n);
	cr_assert_not_null(g);
	uint8_t *idx = section(g, "l3.index", &n);
	put_u64(idx + 32 * (size_t)i + 8, zn);
	put_u32(idx + 32 * (size_t)i + 28, crc32c_update(0, z, zn));
	for (size_t j = (size_t)i + 1; j < n / 32; j++)
		put_u64(idx + 32 * j, get_u64(idx + 32 * j) + zn - old);
	reseal(g, "l3.index");
	free(z);
	return g;
}

/* Re-writes the archive frame of head 0 with one kind of bad positions
 * (0: a repeat, 1: out of order in a group, 2: an L1 position) and checks
 * that the load is refused with `words`; first checks that the frame
 * re-written unchanged loads. */
static void bad_positions(int kind, const char *words)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	size_t n, raw_n, bad_n;
	/* head 0: its groups (l2) and L1 positions (l1) */
	uint8_t *l2 = section(im.file, "l2", &n), *l1 = section(im.file, "l1", &n);
	uint32_t ng = get_u32(l2), n1 = get_u32(l1);
	const uint8_t *gs = l2 + get_u64(l2 + 8), *p1 = l1 + get_u64(l1 + 8);
	cr_assert_geq(ng, 2);
	uint32_t a1 = get_u32(gs + 4), a2 = get_u32(gs + 8);
	cr_assert(a1 >= 2 && a2 > a1, "groups 0 and 1 of head 0 hold tokens 0..%u and %u..%u", a1, a1, a2);
	uint8_t *raw = frame_of(im.file, 0, &raw_n), *pos = malloc(raw_n);

	/* the archive re-written as it was loads: the helper is sound */
	uint8_t *bad = with_frame(&im, 0, raw, raw_n, NULL, 0, &bad_n);
	cr_assert_eq(load_damaged_n(&im, bad, bad_n), HSQ_OK, "%s", hsq_last_error());
	free(bad);

	memcpy(pos, raw, raw_n);
	if (kind == 0) {
		/* group 1 starts at group 0's last position (both groups
		 * still ascending) */
		put_u32(pos + 4 * a1, get_u32(pos + 4 * (a1 - 1)));
	} else if (kind == 1) {
		put_u32(pos, get_u32(raw + 4)); /* group 0's first two swapped */
		put_u32(pos + 4, get_u32(raw));
	} else {
		/* an L1 position where it keeps its group ascending: one below
		 * group 0's first token (a sink), or between two neighbours */
		int found = 0;
		for (uint32_t g = 0; g < ng && !found; g++) {
			uint32_t a = get_u32(gs + 4 * g), z = get_u32(gs + 4 * (g + 1));
			for (uint32_t k = a; k < z && !found; k++) {
				int64_t lo = k > a ? (int64_t)get_u32(raw + 4 * (k - 1)) : -1;
				int64_t hi = k + 1 < z ? (int64_t)get_u32(raw + 4 * (k + 1)) : INT64_MAX;
				for (uint32_t j = 0; j < n1 && !found; j++) {
					int64_t p = get_u32(p1 + 4 * j);
					if (p > lo && p < hi) {
						put_u32(pos + 4 * k, (uint32_t)p);
						found = 1;
					}
				}
			}
		}
		cr_assert(found, "no L1 position fits between archived neighbours of head 0");
	}
	bad = with_frame(&im, 0, pos, raw_n, NULL, 0, &bad_n);
	expect_refused(&im, bad, bad_n, "'l3'", words);
	free(bad);
	free(pos);
	free(raw);
	free_image(&im);
}

Test(tiers_hostile, archived_position_twice_is_refused) { bad_positions(0, "appears twice"); }
Test(tiers_hostile, archived_positions_out_of_order_are_refused) { bad_positions(1, "not above the one before it"); }
Test(tiers_hostile, archived_position_in_l1_is_refused) { bad_positions(2, "also an L1 position"); }

Test(tiers_hostile, frame_under_another_heads_entry_is_refused)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	size_t n;
	uint8_t *bad = malloc(im.size);

	/* the index entries of two heads with as many archived tokens
	 * swapped: each head would read the other's frame */
	memcpy(bad, im.file, im.size);
	uint8_t *idx = section(bad, "l3.index", &n);
	size_t j = 1;
	while (j < n / 32 && get_u32(idx + 32 * j + 24) != get_u32(idx + 24))
		j++;
	cr_assert_lt(j, n / 32, "no head archives as many tokens as head 0");
	uint8_t tmp[32];
	memcpy(tmp, idx, 32);
	memcpy(idx, idx + 32 * j, 32);
	memcpy(idx + 32 * j, tmp, 32);
	reseal(bad, "l3.index");
	expect_refused(&im, bad, im.size, "'l3.index'", "where the frames in head order leave");

	/* two heads' entries naming one frame */
	memcpy(bad, im.file, im.size);
	idx = section(bad, "l3.index", &n);
	memcpy(idx + 32 * j, idx, 32);
	reseal(bad, "l3.index");
	expect_refused(&im, bad, im.size, "'l3.index'", "where the frames in head order leave");
	free(bad);
	free_image(&im);
}

Test(tiers_hostile, bytes_after_the_last_frame_are_refused)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	size_t n, bad_n;
	/* bytes after the last frame of l3 */
	static const uint8_t junk[24] = { 0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3 };
	size_t n3;
	section(im.file, "l3", &n3);
	uint8_t *bad = snap_image_splice(im.file, im.size, "l3", n3, 0, junk, sizeof junk, &bad_n);
	cr_assert_not_null(bad);
	expect_refused(&im, bad, bad_n, "'l3'", "bytes after its last archive frame");
	free(bad);

	/* a skippable zstd frame after the last head's frame, inside its
	 * index entry: it would decompress the same */
	section(im.file, "l3.index", &n);
	int last = (int)(n / 32) - 1;
	size_t raw_n;
	uint8_t *raw = frame_of(im.file, last, &raw_n);
	static const uint8_t skip[12] = { 0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 9, 9, 9, 9 };
	bad = with_frame(&im, last, raw, raw_n, skip, sizeof skip, &bad_n);
	expect_refused(&im, bad, bad_n, "'l3'", "bytes after its zstd frame");
	free(bad);
	free(raw);
	free_image(&im);
}

Test(tiers_hostile, centres_are_required_from_format_1_3)
{
	image im = { 0 };
	if (!make_image(&im))
		cr_skip_test("HSQ_TEST_MODEL not set");
	uint8_t *bad = malloc(im.size);
	memcpy(bad, im.file, im.size);
	/* the centres entry dropped from the table (its bytes stay, unnamed) */
	uint32_t ns = get_u32(bad + SNAP_H_SECTION_COUNT), es = get_u32(bad + SNAP_H_ENTRY_SIZE);
	uint8_t *last = bad + get_u64(bad + SNAP_H_TABLE_OFFSET) + (size_t)(ns - 1) * es;
	uint8_t *c = entry_of(bad, "centres");
	if (c != last)
		memcpy(c, last, es);
	put_u32(bad + SNAP_H_SECTION_COUNT, ns - 1);
	snap_image_reseal_header(bad);
	cr_assert_eq(get_u16(bad + SNAP_H_VERSION_MINOR), SNAP_VERSION_MINOR);
	expect_refused(&im, bad, im.size, "'centres'", "has no");
	for (uint16_t minor = 3; minor < SNAP_VERSION_MINOR; minor++) {
		put_u16(bad + SNAP_H_VERSION_MINOR, minor);
		snap_image_reseal_header(bad);
		expect_refused(&im, bad, im.size, "'centres'", "has no");
	}
	/* a 1.2 file has none, and loads (with centres of zero) */
	put_u16(bad + SNAP_H_VERSION_MINOR, 2);
	snap_image_reseal_header(bad);
	cr_assert_eq(load_damaged(&im, bad), HSQ_OK, "%s", hsq_last_error());
	free(bad);
	free_image(&im);
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

/* test_calibration.c - calibration files (hsq-calibration(5)): the writer
 * (lib/train/calib_write.c) and the reader (lib/learn/calibration.c).
 *
 * Round trips of hand-made readers bit for bit; byte-identical rewrites;
 * every single-byte flip and every truncation of a small file refused;
 * damage behind resealed checksums (tests/fuzz/hsqc_reseal.h) refused with
 * the right status; files laid out otherwise by an independent encoder in
 * this test (unknown optional sections, the table last, larger headers and
 * entries) accepted; the writer's argument checks; and a calibration
 * refused by a model it was not trained for (the tiny model of
 * tests/fuzz/models/, found from the top of the tree as `make unit` runs
 * the tests). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/le.h"
#include "common/sha256.h"
#include "hsq.h"
#include "hsq_train.h"
#include "learn/calib_format.h"
#include "learn/calibration.h"
#include "learn/reader_net.h"
#include "train/reader_trainer.h"
#include "../fuzz/hsqc_reseal.h"

#define TINY_MODEL "tests/fuzz/models/tiny-llama.gguf"

/* ------------------------------------------------------------ helpers */

static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/hsq-test-calibration.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(calibration, .init = make_tmpdir, .fini = remove_tmpdir);

static char *tmp_path(const char *name)
{
	static char buf[8][256];
	static int i;
	char *p = buf[i++ % 8];
	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

static uint8_t *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
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

/* Files in tmpdir, so a failed write can be shown to leave nothing. */
static int count_files(void)
{
	DIR *d = opendir(tmpdir);
	cr_assert_not_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* A model description of the given shape; its identity a pattern of seed. */
static hsq_model_info make_mi(int n_layer, int n_embd, int n_head_kv, const char *name, uint8_t seed)
{
	hsq_model_info mi;
	memset(&mi, 0, sizeof mi);
	mi.architecture = "llama";
	mi.name = name;
	mi.n_layer = n_layer;
	mi.n_embd = n_embd;
	mi.n_head_kv = n_head_kv;
	mi.n_head = n_head_kv;
	mi.head_dim = n_embd / n_head_kv;
	for (int i = 0; i < 32; i++)
		mi.identity[i] = (uint8_t)(seed * 31 + i * 7 + 1);
	return mi;
}

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s;
}

/* Deterministic pseudo-random weights of every magnitude and sign, with
 * some special values (zero, -0, denormals, the largest float). */
static float weight(uint32_t *s)
{
	uint32_t r = lcg(s);
	switch (r % 16) {
	case 0: return 0.0f;
	case 1: return -0.0f;
	case 2: return 1e-40f; /* denormal */
	case 3: return -3.4028235e38f;
	default: return ((float)(r >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, (int)(r % 13) - 6);
	}
}

static reader_net make_net(const hsq_model_info *mi, int tap, int n_hidden, uint32_t seed)
{
	reader_net net = {
		.tap_layer = tap,
		.n_embd = mi->n_embd,
		.n_in = mi->n_embd + READER_POS_FEATURES,
		.n_hidden = n_hidden,
		.n_out = mi->n_layer * mi->n_head_kv,
	};
	net.w1 = malloc(sizeof(float) * (size_t)net.n_hidden * (size_t)net.n_in);
	net.b1 = malloc(sizeof(float) * (size_t)net.n_hidden);
	net.w2 = malloc(sizeof(float) * (size_t)net.n_out * (size_t)net.n_hidden);
	net.b2 = malloc(sizeof(float) * (size_t)net.n_out);
	cr_assert(net.w1 && net.b1 && net.w2 && net.b2);
	for (int i = 0; i < net.n_hidden * net.n_in; i++)
		net.w1[i] = weight(&seed);
	for (int i = 0; i < net.n_hidden; i++)
		net.b1[i] = weight(&seed);
	for (int i = 0; i < net.n_out * net.n_hidden; i++)
		net.w2[i] = weight(&seed);
	for (int i = 0; i < net.n_out; i++)
		net.b2[i] = weight(&seed);
	return net;
}

static void free_net(reader_net *net)
{
	free(net->w1);
	free(net->b1);
	free(net->w2);
	free(net->b2);
}

static const char *INFO = "tool: hsq-calibrate 0.1.0\nmodel: test-model\n"
			  "texts: 3 (caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac)\n"
			  "options:\t--hidden 5\nloss: 0.125\n";

/* The small file most tests damage: 1 layer, hidden size 4, 1 KV head, 2
 * hidden units; an info text of 37 bytes, so padding follows it. */
static uint8_t *small_file(size_t *n)
{
	hsq_model_info mi = make_mi(1, 4, 1, "small", 3);
	reader_net net = make_net(&mi, 0, 2, 11);
	const char *path = tmp_path("small.hsqc");
	cr_assert_eq(calib_write_reader(path, &mi, &net, "seed: 1\nloss: 0.5\ntexts: caf\xc3\xa9 \xe2\x82\xac\n"), HSQ_OK,
		     "%s", hsq_last_error());
	free_net(&net);
	uint8_t *b = read_all(path, n);
	unlink(path);
	return b;
}

/* Loads the bytes b[0..n) through a file in tmpdir; returns the status. */
static hsq_status load_bytes(const uint8_t *b, size_t n, const hsq_model *model, hsq_calibration **out)
{
	const char *path = tmp_path("probe.hsqc");
	write_all(path, b, n);
	hsq_status st = hsq_calibration_load(path, model, out);
	unlink(path);
	return st;
}

/* The detail of the last failure: not empty, and lowercase once the paths
 * (which may hold capitals: mkdtemp) are taken out. */
static void assert_lowercase_error(const char *what)
{
	const char *e = hsq_last_error();
	cr_assert(e && *e, "%s: empty error detail", what);
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", e);
	for (char *p; (p = strstr(buf, tmpdir));)
		memset(p, 'x', strlen(tmpdir));
	for (const char *p = buf; *p; p++)
		cr_assert(!isupper((unsigned char)*p), "%s: the detail is not lowercase: '%s'", what, e);
}

/* Loads b[0..n) expecting want; with msg non-NULL, the detail holds it. */
static void expect_status(const uint8_t *b, size_t n, hsq_status want, const char *msg, const char *what)
{
	hsq_calibration *cal = NULL;
	hsq_status st = load_bytes(b, n, NULL, &cal);
	cr_assert_eq(st, want, "%s: status %d (%s), want %d; detail: %s", what, st, hsq_strerror(st), want,
		     hsq_last_error());
	cr_assert_null(cal, "%s: a refused load returned a calibration", what);
	assert_lowercase_error(what);
	if (msg)
		cr_assert(strstr(hsq_last_error(), msg), "%s: detail '%s' lacks '%s'", what, hsq_last_error(), msg);
}

/* The section table entry named name in a file this writer wrote (table at
 * CAL_HEADER_SIZE). */
static uint8_t *entry(uint8_t *b, const char *name)
{
	uint32_t n = get_u32(b + CAL_H_SECTION_COUNT);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + get_u64(b + CAL_H_TABLE_OFFSET) + (size_t)i * get_u32(b + CAL_H_ENTRY_SIZE);
		if (!strncmp((const char *)e + CAL_E_NAME, name, CAL_SECTION_NAME_LEN))
			return e;
	}
	cr_assert_fail("no section '%s'", name);
	return NULL;
}

static uint8_t *section(uint8_t *b, const char *name)
{
	return b + get_u64(entry(b, name) + CAL_E_OFFSET);
}

/* ------------------------------------------------- an independent encoder */

typedef struct tsec {
	const char *name;
	uint32_t flags;
	const uint8_t *data;
	size_t size;
} tsec;

static size_t up64(size_t v) { return (v + 63) / 64 * 64; }

/* A file holding the first CAL_HEADER_SIZE bytes of hdr (magic, version,
 * identity, names, shape), a header of hs bytes, entries of es bytes and
 * the sections in the order given, the table before or after them;
 * resealed. */
static uint8_t *assemble(const uint8_t *hdr, uint32_t hs, uint32_t es, const tsec *s, int n, int table_last,
			 size_t *size)
{
	size_t pos = up64(table_last ? hs : hs + (size_t)n * es);
	size_t offs[16];
	cr_assert(n <= 16);
	for (int i = 0; i < n; i++) {
		offs[i] = pos;
		pos = up64(pos + s[i].size);
	}
	size_t table = table_last ? pos : hs;
	size_t total = table_last ? table + (size_t)n * es : (n ? offs[n - 1] + s[n - 1].size : pos);
	uint8_t *b = calloc(1, total);
	cr_assert_not_null(b);
	memcpy(b, hdr, CAL_HEADER_SIZE);
	put_u32(b + CAL_H_HEADER_SIZE, hs);
	put_u32(b + CAL_H_ENTRY_SIZE, es);
	put_u32(b + CAL_H_SECTION_COUNT, (uint32_t)n);
	put_u64(b + CAL_H_TABLE_OFFSET, table);
	for (int i = 0; i < n; i++) {
		uint8_t *e = b + table + (size_t)i * es;
		memcpy(e + CAL_E_NAME, s[i].name, strlen(s[i].name));
		put_u64(e + CAL_E_OFFSET, offs[i]);
		put_u64(e + CAL_E_SIZE, s[i].size);
		put_u32(e + CAL_E_FLAGS, s[i].flags);
		memcpy(b + offs[i], s[i].data, s[i].size);
	}
	hsqc_reseal(b, total, 1);
	*size = total;
	return b;
}

/* ------------------------------------------------------------- tests */

Test(calibration, round_trip_is_bitwise)
{
	hsq_model_info mi = make_mi(3, 8, 2, "test-model", 1);
	reader_net net = make_net(&mi, 1, 5, 42);
	net.prior_obs = 1;
	const char *path = tmp_path("a.hsqc");
	cr_assert_eq(calib_write_reader(path, &mi, &net, INFO), HSQ_OK, "%s", hsq_last_error());

	hsq_calibration *cal = NULL;
	cr_assert_eq(hsq_calibration_load(path, NULL, &cal), HSQ_OK, "%s", hsq_last_error());
	const reader_net *r = &cal->reader;
	cr_assert_eq(r->prior_obs, 1, "the prior comes back");
	cr_assert_eq(r->tap_layer, 1);
	cr_assert_eq(r->n_embd, 8);
	cr_assert_eq(r->n_in, 12);
	cr_assert_eq(r->n_hidden, 5);
	cr_assert_eq(r->n_out, 6);
	/* Bit for bit: -0, denormals and the largest float included. */
	cr_assert_eq(memcmp(r->w1, net.w1, sizeof(float) * 5 * 12), 0);
	cr_assert_eq(memcmp(r->b1, net.b1, sizeof(float) * 5), 0);
	cr_assert_eq(memcmp(r->w2, net.w2, sizeof(float) * 6 * 5), 0);
	cr_assert_eq(memcmp(r->b2, net.b2, sizeof(float) * 6), 0);

	size_t n;
	uint8_t *b = read_all(path, &n);
	uint8_t digest[32];
	sha256(b, n, digest);
	hsq_calibration_info info;
	hsq_calibration_get_info(cal, &info);
	cr_assert_eq(info.version_major, 1);
	cr_assert_eq(info.version_minor, 0);
	cr_assert_eq(info.file_size, n);
	cr_assert_eq(memcmp(info.sha256, digest, 32), 0, "sha256 is not the file's");
	cr_assert_eq(memcmp(info.model_identity, mi.identity, 32), 0);
	cr_assert_str_eq(info.model_arch, "llama");
	cr_assert_str_eq(info.model_name, "test-model");
	cr_assert_eq(info.reader_layer, 1);
	cr_assert_eq(info.reader_hidden, 5);
	cr_assert_eq(info.reader_params, 5 * 12 + 5 + 6 * 5 + 6);
	cr_assert_str_eq(info.info, INFO);
	/* The layout of hsq-calibration(5): header, table of two, info, reader. */
	cr_assert_eq(memcmp(b, "\x89HSQ-CAL\r\n\x1a\n", 12), 0);
	cr_assert_eq(get_u32(b + CAL_H_SECTION_COUNT), 2);
	cr_assert_eq(get_u32(entry(b, "info") + CAL_E_FLAGS), 0);
	cr_assert_eq(get_u32(entry(b, "reader") + CAL_E_FLAGS), CAL_SECTION_REQUIRED);
	cr_assert_eq(get_u64(entry(b, "reader") + CAL_E_SIZE), 64 + 4 * (size_t)info.reader_params);
	cr_assert_eq(get_u32(section(b, "reader") + CAL_R_ACTIVATION), CAL_ACT_SILU);
	free(b);
	hsq_calibration_free(cal);
	free_net(&net);
}

Test(calibration, writing_is_deterministic_and_atomic)
{
	hsq_model_info mi = make_mi(2, 16, 1, "det", 2);
	reader_net net = make_net(&mi, 1, 7, 5);
	const char *p1 = tmp_path("one.hsqc"), *p2 = tmp_path("two.hsqc");
	cr_assert_eq(calib_write_reader(p1, &mi, &net, INFO), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(calib_write_reader(p2, &mi, &net, INFO), HSQ_OK, "%s", hsq_last_error());
	size_t n1, n2;
	uint8_t *b1 = read_all(p1, &n1), *b2 = read_all(p2, &n2);
	cr_assert_eq(n1, n2);
	cr_assert_eq(memcmp(b1, b2, n1), 0, "the same reader written twice differs");
	/* Writing over an existing file replaces it, and leaves no temporary. */
	net.b2[0] = 123.0f;
	cr_assert_eq(calib_write_reader(p1, &mi, &net, ""), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(count_files(), 2);
	hsq_calibration *cal = NULL;
	cr_assert_eq(hsq_calibration_load(p1, NULL, &cal), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(cal->reader.b2[0], 123.0f);
	cr_assert_str_eq(cal->info_text, "");
	hsq_calibration_free(cal);
	free(b1);
	free(b2);
	free_net(&net);
}

Test(calibration, every_flipped_byte_is_refused)
{
	size_t n;
	uint8_t *b = small_file(&n);
	cr_assert_lt(n, 1024, "the small file is %zu bytes", n);
	static const uint8_t masks[] = { 0x01, 0x80, 0xff };
	for (size_t i = 0; i < n; i++)
		for (size_t m = 0; m < sizeof masks; m++) {
			b[i] ^= masks[m];
			hsq_calibration *cal = NULL;
			hsq_status st = load_bytes(b, n, NULL, &cal);
			b[i] ^= masks[m];
			char what[64];
			snprintf(what, sizeof what, "byte %zu ^ 0x%02x", i, masks[m]);
			cr_assert_neq(st, HSQ_OK, "%s loaded", what);
			cr_assert_null(cal);
			assert_lowercase_error(what);
		}
	/* And the undamaged file loads. */
	hsq_calibration *cal = NULL;
	cr_assert_eq(load_bytes(b, n, NULL, &cal), HSQ_OK, "%s", hsq_last_error());
	hsq_calibration_free(cal);
	free(b);
}

Test(calibration, every_truncation_is_refused)
{
	size_t n;
	uint8_t *b = small_file(&n);
	for (size_t len = 0; len < n; len++) {
		hsq_calibration *cal = NULL;
		hsq_status st = load_bytes(b, len, NULL, &cal);
		cr_assert(st == HSQ_ERR_TRUNCATED || st == HSQ_ERR_FORMAT, "%zu of %zu bytes: status %d (%s)", len, n, st,
			  hsq_last_error());
		cr_assert_null(cal);
		char what[64];
		snprintf(what, sizeof what, "%zu of %zu bytes", len, n);
		assert_lowercase_error(what);
		/* Cut after the header, the file is truncated, not malformed. */
		if (len >= CAL_MAGIC_LEN)
			cr_assert_eq(st, HSQ_ERR_TRUNCATED, "%s: %s", what, hsq_last_error());
	}
	/* Appended bytes are damage too. */
	b = realloc(b, n + 5);
	memset(b + n, 0, 5);
	expect_status(b, n + 5, HSQ_ERR_FORMAT, "appended", "5 bytes appended");
	free(b);
}

/* One kind of damage: what it does to a copy of the small file, whether
 * the checksums are made right again, the status and a word of the detail. */
typedef struct damage {
	const char *what;
	void (*apply)(uint8_t *b, size_t n);
	int reseal;
	hsq_status want;
	const char *msg;
} damage;

#define R(b, f) (section(b, "reader") + (f))
static void d_major2(uint8_t *b, size_t n) { put_u16(b + CAL_H_VERSION_MAJOR, 2); }
static void d_major0(uint8_t *b, size_t n) { put_u16(b + CAL_H_VERSION_MAJOR, 0); }
static void d_flags(uint8_t *b, size_t n) { put_u32(b + CAL_H_FLAGS, 4); }
static void d_crc(uint8_t *b, size_t n) { b[CAL_H_CRC] ^= 1; }
static void d_reader_crc(uint8_t *b, size_t n) { R(b, 70)[0] ^= 1; }
static void d_info_unknown_required(uint8_t *b, size_t n)
{
	memcpy(entry(b, "info") + CAL_E_NAME, "x.future", 9);
	put_u32(entry(b, "x.future") + CAL_E_FLAGS, CAL_SECTION_REQUIRED);
}
static void d_reader_flag_bit(uint8_t *b, size_t n) { put_u32(entry(b, "reader") + CAL_E_FLAGS, 3); }
static void d_nan_w1(uint8_t *b, size_t n) { put_u32(R(b, 64 + 4 * 3), 0x7fc00000u); }
static void d_inf_b2(uint8_t *b, size_t n) { put_f32(b + n - 4, INFINITY); }
static void d_hidden0(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_HIDDEN), 0); }
static void d_hidden_huge(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_HIDDEN), 4097); }
static void d_hidden_other(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_HIDDEN), 3); }
static void d_tap(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_TAP_LAYER), 1); }
static void d_n_in(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_IN), 9); }
static void d_n_out(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_OUT), 2); }
static void d_reader_embd(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_N_EMBD), 5); }
static void d_header_layers(uint8_t *b, size_t n) { put_u32(b + CAL_H_N_LAYER, 2); }
static void d_header_kv(uint8_t *b, size_t n) { put_u32(b + CAL_H_N_HEAD_KV, 2); }
static void d_header_layers0(uint8_t *b, size_t n) { put_u32(b + CAL_H_N_LAYER, 0); }
static void d_header_embd_huge(uint8_t *b, size_t n) { put_u32(b + CAL_H_N_EMBD, 0xffffffffu); }
static void d_activation(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_ACTIVATION), 2); }
static void d_pos_features(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_POS_FEATURES), 5); }
static void d_prior(uint8_t *b, size_t n) { put_u32(R(b, CAL_R_PRIOR), 2); }
static void d_overlap(uint8_t *b, size_t n)
{
	put_u64(entry(b, "info") + CAL_E_OFFSET, get_u64(entry(b, "reader") + CAL_E_OFFSET));
}
static void d_unaligned(uint8_t *b, size_t n) { put_u64(entry(b, "info") + CAL_E_OFFSET, 392); }
static void d_in_header(uint8_t *b, size_t n) { put_u64(entry(b, "info") + CAL_E_OFFSET, 0); }
static void d_in_table(uint8_t *b, size_t n) { put_u64(entry(b, "info") + CAL_E_OFFSET, 320); }
static void d_past_end(uint8_t *b, size_t n) { put_u64(entry(b, "info") + CAL_E_OFFSET, (n + 64) / 64 * 64); }
static void d_reader_size_huge(uint8_t *b, size_t n) { put_u64(entry(b, "reader") + CAL_E_SIZE, (uint64_t)1 << 62); }
static void d_info_size_max(uint8_t *b, size_t n) { put_u64(entry(b, "info") + CAL_E_SIZE, UINT64_MAX); }
static void d_reader_size_short(uint8_t *b, size_t n)
{
	put_u64(entry(b, "reader") + CAL_E_SIZE, get_u64(entry(b, "reader") + CAL_E_SIZE) - 4);
	put_f32(b + n - 4, 0.0f); /* so the byte after the section is the zero padding a gap must be */
}
static void d_reader_head_short(uint8_t *b, size_t n)
{
	uint8_t *e = entry(b, "reader");
	memset(b + get_u64(e + CAL_E_OFFSET) + 32, 0, get_u64(e + CAL_E_SIZE) - 32);
	put_u64(e + CAL_E_SIZE, 32);
}
static void d_count0(uint8_t *b, size_t n) { put_u32(b + CAL_H_SECTION_COUNT, 0); }
static void d_count65(uint8_t *b, size_t n) { put_u32(b + CAL_H_SECTION_COUNT, 65); }
static void d_count_huge(uint8_t *b, size_t n) { put_u32(b + CAL_H_SECTION_COUNT, 0xffffffffu); }
static void d_entry_size(uint8_t *b, size_t n) { put_u32(b + CAL_H_ENTRY_SIZE, 0x80000000u); }
static void d_entry_small(uint8_t *b, size_t n) { put_u32(b + CAL_H_ENTRY_SIZE, 32); }
static void d_table_huge(uint8_t *b, size_t n) { put_u64(b + CAL_H_TABLE_OFFSET, UINT64_MAX - 8); }
static void d_table_in_header(uint8_t *b, size_t n) { put_u64(b + CAL_H_TABLE_OFFSET, 64); }
static void d_header_small(uint8_t *b, size_t n) { put_u32(b + CAL_H_HEADER_SIZE, 128); }
static void d_header_huge(uint8_t *b, size_t n) { put_u32(b + CAL_H_HEADER_SIZE, 1u << 30); }
static void d_file_size_small(uint8_t *b, size_t n) { put_u64(b + CAL_H_FILE_SIZE, n - 1); }
static void d_file_size_huge(uint8_t *b, size_t n) { put_u64(b + CAL_H_FILE_SIZE, UINT64_MAX); }
static void d_duplicate(uint8_t *b, size_t n) { memcpy(entry(b, "info") + CAL_E_NAME, "reader", 7); }
static void d_name_upper(uint8_t *b, size_t n) { entry(b, "info")[CAL_E_NAME] = 'I'; }
static void d_name_empty(uint8_t *b, size_t n) { memset(entry(b, "info") + CAL_E_NAME, 0, CAL_SECTION_NAME_LEN); }
static void d_name_unterminated(uint8_t *b, size_t n)
{
	memset(entry(b, "info") + CAL_E_NAME, 'a', CAL_SECTION_NAME_LEN);
}
static void d_name_junk_after(uint8_t *b, size_t n) { entry(b, "info")[CAL_E_NAME + 10] = 'x'; }
static void d_no_reader(uint8_t *b, size_t n)
{
	memcpy(entry(b, "reader") + CAL_E_NAME, "x.reader", 9);
	put_u32(entry(b, "x.reader") + CAL_E_FLAGS, 0);
}
static void d_info_bad_utf8(uint8_t *b, size_t n) { section(b, "info")[3] = 0xff; }
static void d_info_overlong(uint8_t *b, size_t n) { memcpy(section(b, "info") + 2, "\xc0\xaf", 2); }
static void d_info_surrogate(uint8_t *b, size_t n) { memcpy(section(b, "info") + 1, "\xed\xa0\x80", 3); }
static void d_info_cut_char(uint8_t *b, size_t n)
{
	/* The last character of the text (U+20AC, 3 bytes, then \n) cut in two. */
	uint8_t *e = entry(b, "info");
	uint64_t size = get_u64(e + CAL_E_SIZE);
	memset(b + get_u64(e + CAL_E_OFFSET) + size - 2, 0, 2);
	put_u64(e + CAL_E_SIZE, size - 2);
}
static void d_info_nul(uint8_t *b, size_t n) { section(b, "info")[4] = 0; }
static void d_info_cr(uint8_t *b, size_t n) { section(b, "info")[4] = '\r'; }
static void d_info_esc(uint8_t *b, size_t n) { section(b, "info")[4] = 0x1b; }
static void d_info_del(uint8_t *b, size_t n) { section(b, "info")[4] = 0x7f; }
static void d_info_c1(uint8_t *b, size_t n) { memcpy(section(b, "info") + 4, "\xc2\x85", 2); }
static void d_gap(uint8_t *b, size_t n)
{
	uint8_t *e = entry(b, "info");
	b[get_u64(e + CAL_E_OFFSET) + get_u64(e + CAL_E_SIZE)] = ' ';
}
static void d_magic_snapshot(uint8_t *b, size_t n) { memcpy(b, "\x89HSQ\r\n\x1a\n", 8); }
#undef R

static const damage damages[] = {
	{ "major version 2", d_major2, 1, HSQ_ERR_UNSUPPORTED, "newer" },
	{ "major version 0", d_major0, 1, HSQ_ERR_UNSUPPORTED, "older" },
	{ "header flags", d_flags, 1, HSQ_ERR_UNSUPPORTED, "flags 0x4" },
	{ "header crc", d_crc, 0, HSQ_ERR_CHECKSUM, "header" },
	{ "reader bytes", d_reader_crc, 0, HSQ_ERR_CHECKSUM, "'reader'" },
	{ "unknown required section", d_info_unknown_required, 1, HSQ_ERR_UNSUPPORTED, "'x.future'" },
	{ "unknown flag of a known section", d_reader_flag_bit, 1, HSQ_ERR_UNSUPPORTED, "flags 0x2" },
	{ "nan weight", d_nan_w1, 1, HSQ_ERR_FORMAT, "w1[0][3]" },
	{ "infinite weight", d_inf_b2, 1, HSQ_ERR_FORMAT, "b2[0]" },
	{ "n_hidden 0", d_hidden0, 1, HSQ_ERR_FORMAT, "0 hidden units" },
	{ "n_hidden 4097", d_hidden_huge, 1, HSQ_ERR_FORMAT, "4097 hidden units" },
	{ "n_hidden not the size's", d_hidden_other, 1, HSQ_ERR_FORMAT, "takes" },
	{ "tap layer past the last", d_tap, 1, HSQ_ERR_FORMAT, "layer 1 of 1" },
	{ "n_in", d_n_in, 1, HSQ_ERR_FORMAT, "9 inputs" },
	{ "n_out", d_n_out, 1, HSQ_ERR_FORMAT, "2 outputs" },
	{ "reader n_embd against the header", d_reader_embd, 1, HSQ_ERR_FORMAT, "the header" },
	{ "header n_layer against the reader", d_header_layers, 1, HSQ_ERR_FORMAT, "the header" },
	{ "header n_head_kv against the reader", d_header_kv, 1, HSQ_ERR_FORMAT, "the header" },
	{ "header n_layer 0", d_header_layers0, 1, HSQ_ERR_FORMAT, "0 layers" },
	{ "header n_embd huge", d_header_embd_huge, 1, HSQ_ERR_FORMAT, "hidden size 4294967295" },
	{ "activation", d_activation, 1, HSQ_ERR_UNSUPPORTED, "activation 2" },
	{ "position features", d_pos_features, 1, HSQ_ERR_UNSUPPORTED, "5 position features" },
	{ "prior", d_prior, 1, HSQ_ERR_UNSUPPORTED, "prior 2" },
	{ "overlapping sections", d_overlap, 1, HSQ_ERR_FORMAT, "overlap" },
	{ "unaligned section", d_unaligned, 1, HSQ_ERR_FORMAT, "multiple of 64" },
	{ "section in the header", d_in_header, 1, HSQ_ERR_FORMAT, "overlaps the header" },
	{ "section in the table", d_in_table, 1, HSQ_ERR_FORMAT, "overlaps the header" },
	{ "section past the end", d_past_end, 1, HSQ_ERR_FORMAT, "outside the file" },
	{ "huge reader size", d_reader_size_huge, 1, HSQ_ERR_FORMAT, "outside the file" },
	{ "info size 2^64-1", d_info_size_max, 1, HSQ_ERR_FORMAT, "outside the file" },
	{ "reader 4 bytes short", d_reader_size_short, 1, HSQ_ERR_FORMAT, "takes" },
	{ "reader shorter than its head", d_reader_head_short, 1, HSQ_ERR_FORMAT, "its 64-byte head" },
	{ "no sections", d_count0, 1, HSQ_ERR_FORMAT, "section table" },
	{ "65 sections", d_count65, 1, HSQ_ERR_FORMAT, "section table" },
	{ "2^32-1 sections", d_count_huge, 1, HSQ_ERR_FORMAT, "section table" },
	{ "huge entries", d_entry_size, 1, HSQ_ERR_FORMAT, "section table" },
	{ "small entries", d_entry_small, 1, HSQ_ERR_FORMAT, "section table" },
	{ "table offset near 2^64", d_table_huge, 1, HSQ_ERR_FORMAT, "section table" },
	{ "table in the header", d_table_in_header, 1, HSQ_ERR_FORMAT, "section table" },
	{ "header size 128", d_header_small, 1, HSQ_ERR_FORMAT, "header size" },
	{ "header size 2^30", d_header_huge, 1, HSQ_ERR_FORMAT, "header size" },
	{ "file size one short", d_file_size_small, 0, HSQ_ERR_FORMAT, "appended" },
	{ "file size 2^64-1", d_file_size_huge, 0, HSQ_ERR_TRUNCATED, "truncated" },
	{ "two sections named reader", d_duplicate, 1, HSQ_ERR_FORMAT, "twice" },
	{ "capital in a name", d_name_upper, 1, HSQ_ERR_FORMAT, "invalid name" },
	{ "empty name", d_name_empty, 1, HSQ_ERR_FORMAT, "invalid name" },
	{ "name without nul", d_name_unterminated, 1, HSQ_ERR_FORMAT, "invalid name" },
	{ "bytes after a name's nul", d_name_junk_after, 1, HSQ_ERR_FORMAT, "invalid name" },
	{ "no reader section", d_no_reader, 1, HSQ_ERR_FORMAT, "no 'reader'" },
	{ "info: byte 0xff", d_info_bad_utf8, 1, HSQ_ERR_FORMAT, "utf-8 at byte 3" },
	{ "info: overlong form", d_info_overlong, 1, HSQ_ERR_FORMAT, "utf-8 at byte 2" },
	{ "info: surrogate", d_info_surrogate, 1, HSQ_ERR_FORMAT, "utf-8 at byte 1" },
	{ "info: character cut short", d_info_cut_char, 1, HSQ_ERR_FORMAT, "utf-8" },
	{ "info: nul", d_info_nul, 1, HSQ_ERR_FORMAT, "control character at byte 4" },
	{ "info: carriage return", d_info_cr, 1, HSQ_ERR_FORMAT, "control character at byte 4" },
	{ "info: escape", d_info_esc, 1, HSQ_ERR_FORMAT, "control character at byte 4" },
	{ "info: del", d_info_del, 1, HSQ_ERR_FORMAT, "control character at byte 4" },
	{ "info: c1 control", d_info_c1, 1, HSQ_ERR_FORMAT, "control character at byte 4" },
	{ "padding not zero", d_gap, 1, HSQ_ERR_FORMAT, "not zero" },
	{ "a snapshot's magic", d_magic_snapshot, 1, HSQ_ERR_FORMAT, "it is an hsq snapshot" },
};

Test(calibration, damage_behind_valid_checksums_is_refused)
{
	size_t n;
	uint8_t *orig = small_file(&n);
	uint8_t *b = malloc(n);
	for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
		const damage *d = &damages[i];
		memcpy(b, orig, n);
		d->apply(b, n);
		if (d->reseal)
			hsqc_reseal(b, n, 0);
		expect_status(b, n, d->want, d->msg, d->what);
	}
	free(b);
	free(orig);
}

Test(calibration, other_minor_versions_and_layouts_load)
{
	size_t n;
	uint8_t *b = small_file(&n);
	hsq_calibration *want = NULL, *cal = NULL;
	cr_assert_eq(load_bytes(b, n, NULL, &want), HSQ_OK, "%s", hsq_last_error());

	/* A later minor version (same major) is read. */
	put_u16(b + CAL_H_VERSION_MINOR, 7);
	hsqc_reseal(b, n, 0);
	cr_assert_eq(load_bytes(b, n, NULL, &cal), HSQ_OK, "minor 7: %s", hsq_last_error());
	hsq_calibration_info info;
	hsq_calibration_get_info(cal, &info);
	cr_assert_eq(info.version_minor, 7);
	hsq_calibration_free(cal);
	put_u16(b + CAL_H_VERSION_MINOR, 0);

	/* The sections of the file, laid out again by assemble(). */
	uint8_t *e_info = entry(b, "info"), *e_reader = entry(b, "reader");
	tsec info_s = { "info", 0, b + get_u64(e_info + CAL_E_OFFSET), get_u64(e_info + CAL_E_SIZE) };
	tsec reader_s = { "reader", CAL_SECTION_REQUIRED, b + get_u64(e_reader + CAL_E_OFFSET),
			  get_u64(e_reader + CAL_E_SIZE) };
	static const uint8_t extra[] = "something a later version adds";
	tsec unknown = { "x.later", 0, extra, sizeof extra };
	tsec unknown_required = { "x.later", CAL_SECTION_REQUIRED, extra, sizeof extra };
	tsec empty = { "x.empty", 0, extra, 0 };
	struct {
		const char *what;
		tsec s[4];
		int n;
		uint32_t hs, es;
		int table_last;
		hsq_status want;
		int has_info;
	} layouts[] = {
		{ "reader first", { reader_s, info_s }, 2, 256, 64, 0, HSQ_OK, 1 },
		{ "table last", { info_s, reader_s }, 2, 256, 64, 1, HSQ_OK, 1 },
		{ "no info section", { reader_s }, 1, 256, 64, 0, HSQ_OK, 0 },
		{ "an unknown optional section", { info_s, unknown, reader_s }, 3, 256, 64, 0, HSQ_OK, 1 },
		{ "an empty unknown section", { empty, reader_s, info_s }, 3, 256, 64, 1, HSQ_OK, 1 },
		{ "a 320-byte header, 72-byte entries", { unknown, reader_s, info_s }, 3, 320, 72, 0, HSQ_OK, 1 },
		{ "an unknown required section", { info_s, unknown_required, reader_s }, 3, 256, 64, 0,
		  HSQ_ERR_UNSUPPORTED, 1 },
		{ "no reader section", { info_s, unknown }, 2, 256, 64, 0, HSQ_ERR_FORMAT, 1 },
	};
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
		size_t m;
		uint8_t *f = assemble(b, layouts[i].hs, layouts[i].es, layouts[i].s, layouts[i].n, layouts[i].table_last, &m);
		hsq_status st = load_bytes(f, m, NULL, &cal);
		cr_assert_eq(st, layouts[i].want, "%s: status %d: %s", layouts[i].what, st, hsq_last_error());
		if (st == HSQ_OK) {
			const reader_net *r = &cal->reader, *w = &want->reader;
			cr_assert_eq(r->n_hidden, w->n_hidden);
			cr_assert_eq(memcmp(r->w1, w->w1, sizeof(float) * (size_t)(w->n_hidden * w->n_in)), 0);
			cr_assert_eq(memcmp(r->b2, w->b2, sizeof(float) * (size_t)w->n_out), 0);
			cr_assert_str_eq(cal->info_text, layouts[i].has_info ? want->info_text : "", "%s", layouts[i].what);
			hsq_calibration_free(cal);
		} else {
			cr_assert_null(cal);
			assert_lowercase_error(layouts[i].what);
		}
		free(f);
	}
	hsq_calibration_free(want);
	free(b);
}

Test(calibration, large_info_text)
{
	hsq_model_info mi = make_mi(1, 4, 1, "big", 4);
	reader_net net = make_net(&mi, 0, 1, 9);
	size_t cap = ((size_t)1 << 20) + 2;
	char *text = malloc(cap);
	for (size_t i = 0; i < cap - 1; i++)
		text[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
	/* 1 MiB exactly: written and read. */
	text[(size_t)1 << 20] = '\0';
	const char *path = tmp_path("big.hsqc");
	cr_assert_eq(calib_write_reader(path, &mi, &net, text), HSQ_OK, "%s", hsq_last_error());
	hsq_calibration *cal = NULL;
	cr_assert_eq(hsq_calibration_load(path, NULL, &cal), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(strlen(cal->info_text), (size_t)1 << 20);
	cr_assert_eq(memcmp(cal->info_text, text, (size_t)1 << 20), 0);
	hsq_calibration_free(cal);
	/* A byte more: the writer refuses it, and a reader refuses a file
	 * that holds it. */
	text[(size_t)1 << 20] = 'z';
	text[cap - 1] = '\0';
	cr_assert_eq(calib_write_reader(tmp_path("bigger.hsqc"), &mi, &net, text), HSQ_ERR_INVALID_ARG);
	assert_lowercase_error("1 MiB + 1 of info");
	size_t n;
	uint8_t *b = read_all(path, &n);
	uint8_t *e_reader = entry(b, "reader");
	tsec s[2] = { { "info", 0, (const uint8_t *)text, cap - 1 },
		      { "reader", CAL_SECTION_REQUIRED, b + get_u64(e_reader + CAL_E_OFFSET), get_u64(e_reader + CAL_E_SIZE) } };
	size_t m;
	uint8_t *f = assemble(b, 256, 64, s, 2, 0, &m);
	expect_status(f, m, HSQ_ERR_FORMAT, "more than the 1048576 allowed", "1 MiB + 1 of info");
	free(f);
	free(b);
	free(text);
	free_net(&net);
}

Test(calibration, writer_refuses_bad_arguments)
{
	hsq_model_info mi = make_mi(2, 8, 2, "args", 5);
	reader_net net = make_net(&mi, 1, 3, 7);
	const char *path = tmp_path("w.hsqc");
	int before = count_files();

	reader_net r = net;
	r.n_embd = 9;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "n_embd");
	assert_lowercase_error("n_embd");
	r = net;
	r.n_in = 8;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "n_in");
	r = net;
	r.n_out = 3;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "n_out");
	r = net;
	r.tap_layer = 2;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "tap layer");
	r = net;
	r.tap_layer = -1;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "tap layer -1");
	r = net;
	r.n_hidden = 0;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "n_hidden 0");
	r = net;
	r.n_hidden = 4097;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "n_hidden 4097");
	r = net;
	r.w2 = NULL;
	cr_assert_eq(calib_write_reader(path, &mi, &r, ""), HSQ_ERR_INVALID_ARG, "no w2");
	hsq_model_info other = make_mi(3, 8, 2, "args", 5);
	cr_assert_eq(calib_write_reader(path, &other, &net, ""), HSQ_ERR_INVALID_ARG, "another shape");
	assert_lowercase_error("another shape");

	/* Weights that are not finite. */
	float keep = net.w2[5];
	net.w2[5] = NAN;
	cr_assert_eq(calib_write_reader(path, &mi, &net, ""), HSQ_ERR_INVALID_ARG, "nan");
	cr_assert(strstr(hsq_last_error(), "w2[5]"), "%s", hsq_last_error());
	net.w2[5] = -INFINITY;
	cr_assert_eq(calib_write_reader(path, &mi, &net, ""), HSQ_ERR_INVALID_ARG, "-inf");
	net.w2[5] = keep;

	/* The info text: checked as the reader checks it. */
	static const char *bad_info[] = { "a\rb", "key: \x01", "\x7f", "caf\xc3", "\xc0\xaf", "\xed\xa0\x80x",
					  "\xf4\x90\x80\x80", "x\xc2\x9f" };
	for (size_t i = 0; i < sizeof bad_info / sizeof bad_info[0]; i++) {
		cr_assert_eq(calib_write_reader(path, &mi, &net, bad_info[i]), HSQ_ERR_INVALID_ARG, "info %zu", i);
		assert_lowercase_error("info");
	}

	/* Arguments and paths. */
	cr_assert_eq(calib_write_reader(NULL, &mi, &net, ""), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(calib_write_reader("", &mi, &net, ""), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(calib_write_reader(path, NULL, &net, ""), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(calib_write_reader(path, &mi, NULL, ""), HSQ_ERR_INVALID_ARG);
	char dir[300];
	snprintf(dir, sizeof dir, "%s/", tmpdir);
	cr_assert_eq(calib_write_reader(dir, &mi, &net, ""), HSQ_ERR_INVALID_ARG, "a directory path");
	cr_assert_eq(calib_write_reader(tmp_path("no/such/dir.hsqc"), &mi, &net, ""), HSQ_ERR_IO);
	cr_assert(strstr(hsq_last_error(), "create the directory"), "%s", hsq_last_error());
	cr_assert_eq(mkdir(tmp_path("adir"), 0700), 0);
	cr_assert_eq(calib_write_reader(tmp_path("adir"), &mi, &net, ""), HSQ_ERR_IO, "over a directory");
	cr_assert_eq(rmdir(tmp_path("adir")), 0);
	cr_assert_eq(hsq_calibration_write(path, NULL, NULL, ""), HSQ_ERR_INVALID_ARG);
	/* No failure left a file, or a temporary, behind. */
	cr_assert_eq(count_files(), before);
	/* NULL info is the empty text. */
	cr_assert_eq(calib_write_reader(path, &mi, &net, NULL), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(count_files(), before + 1);
	free_net(&net);
}

Test(calibration, loader_refuses_what_is_not_a_calibration)
{
	hsq_calibration *cal = (hsq_calibration *)1;
	cr_assert_eq(hsq_calibration_load(tmp_path("missing.hsqc"), NULL, &cal), HSQ_ERR_IO);
	cr_assert_null(cal);
	cr_assert(strstr(hsq_last_error(), "missing.hsqc"), "%s", hsq_last_error());
	cr_assert_eq(hsq_calibration_load(tmpdir, NULL, &cal), HSQ_ERR_IO);
	cr_assert(strstr(hsq_last_error(), "directory"), "%s", hsq_last_error());
	/* A FIFO is refused at once, not waited on. */
	const char *fifo = tmp_path("fifo");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(hsq_calibration_load(fifo, NULL, &cal), HSQ_ERR_IO);
	cr_assert(strstr(hsq_last_error(), "FIFO"), "%s", hsq_last_error());
	unlink(fifo);
	expect_status((const uint8_t *)"", 0, HSQ_ERR_FORMAT, "empty", "empty file");
	expect_status((const uint8_t *)"hello, world\n", 13, HSQ_ERR_FORMAT, "bad magic", "text");
	expect_status((const uint8_t *)"\x89HSQ-C", 6, HSQ_ERR_TRUNCATED, "truncated", "6 bytes of magic");
	cr_assert_eq(hsq_calibration_load(NULL, NULL, &cal), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(hsq_calibration_load(tmp_path("x"), NULL, NULL), HSQ_ERR_INVALID_ARG);
	hsq_calibration_free(NULL);
	hsq_calibration_info info;
	hsq_calibration_get_info(NULL, &info);
	cr_assert_eq(info.file_size, 0);
}

/* The tiny model of the fuzz corpus (2 layers, hidden size 16, 1 KV head),
 * or a skip. */
static hsq_model *tiny_model(void)
{
	if (access(TINY_MODEL, R_OK) != 0) {
		printf("SKIP: calibration against a model: %s missing (run from the top of the tree)\n", TINY_MODEL);
		cr_skip_test("no %s", TINY_MODEL);
	}
	hsq_model *m = NULL;
	cr_assert_eq(hsq_model_load(TINY_MODEL, &m), HSQ_OK, "%s", hsq_last_error());
	return m;
}

Test(calibration, loads_only_for_its_model)
{
	hsq_model *model = tiny_model();
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	cr_assert_eq(mi.n_layer, 2);

	/* Trained for this model (through the public writer). */
	hsq_reader_trainer tr;
	memset(&tr, 0, sizeof tr);
	tr.net = make_net(&mi, 1, 4, 3);
	tr.n_layer = mi.n_layer;
	tr.n_head_kv = mi.n_head_kv;
	const char *mine = tmp_path("mine.hsqc");
	cr_assert_eq(hsq_calibration_write(mine, model, &tr, INFO), HSQ_OK, "%s", hsq_last_error());
	hsq_calibration *cal = NULL;
	cr_assert_eq(hsq_calibration_load(mine, model, &cal), HSQ_OK, "%s", hsq_last_error());
	hsq_calibration_info info;
	hsq_calibration_get_info(cal, &info);
	cr_assert_eq(memcmp(info.model_identity, mi.identity, 32), 0);
	cr_assert_str_eq(info.model_name, mi.name);
	cr_assert_str_eq(info.model_arch, mi.architecture);
	hsq_calibration_free(cal);

	/* Trained for another model of the same shape. */
	hsq_model_info other = make_mi(mi.n_layer, mi.n_embd, mi.n_head_kv, "other-model", 9);
	other.architecture = "qwen3";
	const char *theirs = tmp_path("theirs.hsqc");
	cr_assert_eq(calib_write_reader(theirs, &other, &tr.net, INFO), HSQ_OK, "%s", hsq_last_error());
	cal = (hsq_calibration *)1;
	cr_assert_eq(hsq_calibration_load(theirs, model, &cal), HSQ_ERR_MODEL_MISMATCH, "%s", hsq_last_error());
	cr_assert_null(cal);
	const char *e = hsq_last_error();
	char hex_theirs[17], hex_mine[17];
	for (int i = 0; i < 8; i++) {
		snprintf(hex_theirs + 2 * i, 3, "%02x", other.identity[i]);
		snprintf(hex_mine + 2 * i, 3, "%02x", mi.identity[i]);
	}
	cr_assert(strstr(e, "other-model") && strstr(e, "qwen3") && strstr(e, mi.name) && strstr(e, "llama") &&
			  strstr(e, hex_theirs) && strstr(e, hex_mine),
		  "the detail names neither both models nor both identities: %s", e);
	cr_assert(islower((unsigned char)e[0]) || e[0] == '/', "%s", e);
	/* Without a model, it loads. */
	cr_assert_eq(hsq_calibration_load(theirs, NULL, &cal), HSQ_OK, "%s", hsq_last_error());
	hsq_calibration_free(cal);

	/* This model's identity but another shape: damage, refused too. */
	size_t n;
	uint8_t *b = read_all(mine, &n);
	put_u32(b + CAL_H_N_HEAD_KV, 2);
	hsqc_reseal(b, n, 0);
	cal = NULL;
	cr_assert_eq(load_bytes(b, n, model, &cal), HSQ_ERR_MODEL_MISMATCH, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "kv heads"), "%s", hsq_last_error());
	free(b);

	/* And the writer refuses a reader shaped for another model. */
	reader_net wide = make_net(&mi, 0, 2, 1);
	wide.n_out = 3;
	hsq_reader_trainer tr2 = tr;
	tr2.net = wide;
	cr_assert_eq(hsq_calibration_write(tmp_path("wide.hsqc"), model, &tr2, ""), HSQ_ERR_INVALID_ARG);
	wide.n_out = mi.n_layer * mi.n_head_kv;
	free_net(&wide);
	free_net(&tr.net);
	hsq_model_free(model);
}

Test(calibration, sizes_past_the_format_limit)
{
	/* A file over 1 GiB (sparse: no disk used) is refused before a byte
	 * of it is read. */
	const char *path = tmp_path("huge.hsqc");
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, ((off_t)1 << 30) + 1), 0);
	close(fd);
	hsq_calibration *cal = NULL;
	cr_assert_eq(hsq_calibration_load(path, NULL, &cal), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "more than the 1073741824"), "%s", hsq_last_error());
	assert_lowercase_error("over 1 GiB");
	unlink(path);

	/* A reader whose file would pass 1 GiB is refused before its weights
	 * are read (the one float here would not hold them). */
	hsq_model_info mi = make_mi(1, 65536, 1, "wide", 6);
	float one = 0.0f;
	reader_net net = { .tap_layer = 0, .n_embd = 65536, .n_in = 65540, .n_hidden = 4096, .n_out = 1,
			   .w1 = &one, .b1 = &one, .w2 = &one, .b2 = &one };
	cr_assert_eq(calib_write_reader(path, &mi, &net, ""), HSQ_ERR_INVALID_ARG);
	cr_assert(strstr(hsq_last_error(), "more than the 1073741824"), "%s", hsq_last_error());
	/* And shapes past the format's bounds. */
	hsq_model_info big = make_mi(1025, 8, 1, "deep", 6);
	reader_net deep = { .tap_layer = 0, .n_embd = 8, .n_in = 12, .n_hidden = 1, .n_out = 1025,
			    .w1 = &one, .b1 = &one, .w2 = &one, .b2 = &one };
	cr_assert_eq(calib_write_reader(path, &big, &deep, ""), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(count_files(), 0);
}

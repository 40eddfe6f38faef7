/* test_snapshot.c - snapshot save/load/inspect (hsq-snapshot(5)).
 *
 * Round trips with the real model (HSQ_TEST_MODEL), refusal of a snapshot
 * by another model, every kind of damage (flipped bytes, truncation, bad
 * magic, other versions, hostile sizes), atomic writes, and files written by
 * an independent encoder in this test (other codecs, chunkings, filters,
 * section orders) that a conforming reader must accept. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "backend/backend.h"
#include "common/crc32c.h"
#include "context/context.h"
#include "hsq.h"
#include "model/model.h"
#include "snapshot/snapshot_format.h"

#define N_TOK 8
#define N_CTX 32

/* ------------------------------------------------------------ helpers */

static const char *model_path(void)
{
	const char *p = getenv("HSQ_TEST_MODEL");
	return p && *p && access(p, R_OK) == 0 ? p : NULL;
}

#define NEED_MODEL()                                                                                  \
	do {                                                                                          \
		if (!model_path()) {                                                                  \
			fprintf(stderr, "SKIP: snapshot test %s: HSQ_TEST_MODEL not set or unreadable (run 'make model')\n", \
				__func__);                                                            \
			cr_skip_test("HSQ_TEST_MODEL not set");                                      \
		}                                                                                     \
	} while (0)

static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path);
}

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/hsq-test-snapshot.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *tmp_path(const char *name)
{
	static char buf[8][256];
	static int i;
	char *p = buf[i++ % 8];
	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

static uint8_t *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n ? (size_t)n : 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static void write_file(const char *path, const void *buf, size_t size)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(buf, 1, size, f), size);
	cr_assert_eq(fclose(f), 0);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void wr32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the header CRC of a snapshot image after an edit. */
static void fix_header_crc(uint8_t *f)
{
	uint32_t hs = rd32(f + SNAP_H_HEADER_SIZE), n = rd32(f + SNAP_H_SECTION_COUNT);
	uint32_t es = rd32(f + SNAP_H_ENTRY_SIZE);
	uint64_t to = rd64(f + SNAP_H_TABLE_OFFSET);
	wr32(f + SNAP_H_CRC, 0);
	uint32_t c = crc32c_update(0, f, hs);
	c = crc32c_update(c, f + to, (size_t)n * es);
	wr32(f + SNAP_H_CRC, c);
}

/* Table entry of the named section in a snapshot image. */
static uint8_t *entry_of(uint8_t *f, const char *name)
{
	uint32_t n = rd32(f + SNAP_H_SECTION_COUNT), es = rd32(f + SNAP_H_ENTRY_SIZE);
	uint64_t to = rd64(f + SNAP_H_TABLE_OFFSET);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = f + to + (size_t)i * es;
		if (!strncmp((const char *)e, name, 16))
			return e;
	}
	cr_assert_fail("section %s not found", name);
	return NULL;
}

/* ---------------------------------------------- model and a snapshot */

static hsq_model *load_model(const char *path)
{
	hsq_model *m = NULL;
	hsq_status st = hsq_model_load(path, &m);
	cr_assert_eq(st, HSQ_OK, "model load: %s", hsq_last_error());
	return m;
}

static hsq_context_params params(int n_ctx)
{
	hsq_context_params p = hsq_context_default_params();
	p.n_ctx = n_ctx;
	p.n_threads = 1;
	return p;
}

/* A context holding N_TOK fixed tokens (valid ids; no tokenizer needed). */
static hsq_context *make_context(const hsq_model *m, int n_tok)
{
	hsq_context *ctx = NULL;
	hsq_context_params p = params(N_CTX);
	cr_assert_eq(hsq_context_new(m, &p, &ctx), HSQ_OK, "context: %s", hsq_last_error());
	hsq_token toks[N_CTX];
	for (int i = 0; i < n_tok; i++)
		toks[i] = 100 + 37 * i;
	if (n_tok)
		cr_assert_eq(hsq_context_eval(ctx, toks, (size_t)n_tok, NULL, 0), HSQ_OK, "eval: %s",
			     hsq_last_error());
	return ctx;
}

/* Rows 0..n_past-1 of one cache buffer, copied to the host. */
static float *cache_rows(const hsq_context *ctx, const uint16_t *buf)
{
	size_t n = (size_t)ctx->n_past * context_kv_width(ctx);
	float *h = malloc(n ? n * sizeof *h : 1);
	cr_assert_not_null(h);
	if (n)
		ctx->backend->ops->download_kv(ctx->backend, h, buf, n);
	return h;
}

static void assert_same_context(const hsq_context *a, const hsq_context *b)
{
	cr_assert_eq(a->n_past, b->n_past, "n_past %d vs %d", a->n_past, b->n_past);
	cr_assert_eq(memcmp(a->tokens, b->tokens, (size_t)a->n_past * sizeof(hsq_token)), 0, "tokens differ");
	size_t bytes = (size_t)a->n_past * context_kv_width(a) * sizeof(float);
	for (int l = 0; l < a->model->info.n_layer; l++) {
		for (int kv = 0; kv < 2; kv++) {
			float *x = cache_rows(a, kv ? a->v_cache[l] : a->k_cache[l]);
			float *y = cache_rows(b, kv ? b->v_cache[l] : b->k_cache[l]);
			cr_assert_eq(memcmp(x, y, bytes), 0, "layer %d %s cache differs", l, kv ? "V" : "K");
			free(x);
			free(y);
		}
	}
}

/* The raw content of kv.full for ctx: per layer K then V rows. */
static uint8_t *kv_raw(const hsq_context *ctx, size_t *size)
{
	size_t plane = (size_t)ctx->n_past * context_kv_width(ctx) * sizeof(float);
	int L = ctx->model->info.n_layer;
	uint8_t *raw = malloc(plane * 2 * (size_t)L + 1);
	cr_assert_not_null(raw);
	for (int l = 0; l < L; l++) {
		for (int kv = 0; kv < 2; kv++) {
			float *x = cache_rows(ctx, kv ? ctx->v_cache[l] : ctx->k_cache[l]);
			memcpy(raw + (2 * (size_t)l + (size_t)kv) * plane, x, plane);
			free(x);
		}
	}
	*size = plane * 2 * (size_t)L;
	return raw;
}

typedef struct fixture {
	hsq_model *model;
	hsq_context *ctx;
	const char *path; /* the saved snapshot */
	uint8_t *file;    /* its bytes */
	size_t size;
} fixture;

static void setup_fixture(fixture *f, int n_tok)
{
	make_tmpdir();
	f->model = load_model(model_path());
	f->ctx = make_context(f->model, n_tok);
	f->path = tmp_path("ctx.hsq");
	hsq_status st = hsq_snapshot_save(f->ctx, f->path, HSQ_MODE_FULL, 0);
	cr_assert_eq(st, HSQ_OK, "save: %s", hsq_last_error());
	f->file = read_file(f->path, &f->size);
}

static void free_fixture(fixture *f)
{
	hsq_context_free(f->ctx);
	hsq_model_free(f->model);
	free(f->file);
	remove_tmpdir();
}

/* Loads path; on success checks the caches equal f->ctx's. */
static hsq_status try_load(fixture *f, const char *path)
{
	hsq_context *ctx = NULL;
	hsq_context_params p = params(N_CTX);
	hsq_status st = hsq_snapshot_load(f->model, path, &p, &ctx);
	if (st == HSQ_OK) {
		cr_assert_not_null(ctx);
		assert_same_context(f->ctx, ctx);
		hsq_context_free(ctx);
	} else {
		cr_assert_null(ctx, "a failed load must not return a context");
		cr_assert(strlen(hsq_last_error()) > 0, "a failure must leave a message");
	}
	return st;
}

static int count_tmp_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".tmp"))
			n++;
	closedir(d);
	return n;
}

/* ------------------------------------------------------- round trips */

Test(snapshot, round_trip_is_bitwise)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);

	hsq_context *ctx = NULL;
	hsq_context_params p = params(N_CTX);
	cr_assert_eq(hsq_snapshot_load(f.model, f.path, &p, &ctx), HSQ_OK, "load: %s", hsq_last_error());
	assert_same_context(f.ctx, ctx);
	cr_assert_eq(hsq_context_n_past(ctx), N_TOK);

	/* Resuming continues exactly as the original context would. */
	int nv = f.model->info.n_vocab;
	float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
	hsq_token next[3] = { 42, 4242, 7 };
	cr_assert_eq(hsq_context_eval(f.ctx, next, 3, la, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_context_eval(ctx, next, 3, lb, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(memcmp(la, lb, (size_t)nv * sizeof *la), 0, "logits after resume differ");
	assert_same_context(f.ctx, ctx);
	free(la);
	free(lb);
	hsq_context_free(ctx);

	/* Default n_ctx (0 = model's) also works. */
	hsq_context_params dflt = hsq_context_default_params();
	dflt.n_threads = 1;
	dflt.n_ctx = 0;
	cr_assert_eq(hsq_snapshot_load(f.model, f.path, &dflt, &ctx), HSQ_OK, "load: %s", hsq_last_error());
	cr_assert_eq(hsq_context_n_past(ctx), N_TOK);
	hsq_context_free(ctx);
	free_fixture(&f);
}

Test(snapshot, inspect_and_read_tokens)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(f.path, 0, &info), HSQ_OK, "%s", hsq_last_error());
	const hsq_model_info *mi = &f.model->info;
	cr_assert_eq(info.version, (uint32_t)SNAP_VERSION_MAJOR << 16 | SNAP_VERSION_MINOR);
	cr_assert_eq(info.mode, HSQ_MODE_FULL);
	cr_assert_eq(info.file_size, f.size);
	cr_assert_str_eq(info.architecture, mi->architecture);
	cr_assert_str_eq(info.model_name, mi->name);
	cr_assert_eq(memcmp(info.model_identity, mi->identity, 32), 0);
	cr_assert_eq(info.n_layer, mi->n_layer);
	cr_assert_eq(info.n_head_kv, mi->n_head_kv);
	cr_assert_eq(info.head_dim, mi->head_dim);
	cr_assert_eq(info.n_vocab, mi->n_vocab);
	cr_assert_eq(info.n_tokens, N_TOK);
	cr_assert_eq(info.kv_bytes_fp16, (uint64_t)mi->n_layer * 2 * N_TOK * mi->n_head_kv * mi->head_dim * 2);
	cr_assert_eq(info.n_sections, 3);
	const char *names[3] = { "meta", "tokens", "kv.full" };
	for (int i = 0; i < 3; i++) {
		const hsq_snapshot_section_info *s = &info.sections[i];
		cr_assert_str_eq(s->name, names[i]);
		cr_assert_eq(s->checksum_ok, -1);
		cr_assert_eq(s->offset % 64, 0, "section %s is not 64-byte aligned", s->name);
		cr_assert_leq(s->offset + s->size, info.file_size);
	}
	cr_assert_eq(info.sections[2].codec, 1);
	cr_assert_eq(info.sections[2].raw_size, 2 * info.kv_bytes_fp16);

	cr_assert_eq(hsq_snapshot_inspect(f.path, 1, &info), HSQ_OK, "%s", hsq_last_error());
	for (int i = 0; i < 3; i++)
		cr_assert_eq(info.sections[i].checksum_ok, 1);

	hsq_token *toks = NULL;
	size_t n = 0;
	cr_assert_eq(hsq_snapshot_read_tokens(f.path, &toks, &n), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(n, (size_t)N_TOK);
	cr_assert_eq(memcmp(toks, f.ctx->tokens, n * sizeof *toks), 0);
	hsq_free(toks);
	free_fixture(&f);
}

Test(snapshot, empty_context_round_trips)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, 0);
	cr_assert_eq(try_load(&f, f.path), HSQ_OK, "%s", hsq_last_error());
	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(f.path, 1, &info), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(info.n_tokens, 0);
	hsq_token *toks = NULL;
	size_t n = 99;
	cr_assert_eq(hsq_snapshot_read_tokens(f.path, &toks, &n), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(n, 0);
	hsq_free(toks);
	free_fixture(&f);
}

Test(snapshot, saving_is_deterministic)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *again = tmp_path("again.hsq");
	cr_assert_eq(hsq_snapshot_save(f.ctx, again, HSQ_MODE_FULL, 0), HSQ_OK, "%s", hsq_last_error());
	size_t n;
	uint8_t *b = read_file(again, &n);
	cr_assert_eq(n, f.size);
	cr_assert_eq(memcmp(b, f.file, n), 0, "the same context saved twice gives different bytes");
	free(b);
	/* Other levels give valid, equivalent files. */
	cr_assert_eq(hsq_snapshot_save(f.ctx, again, HSQ_MODE_FULL, 1), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(try_load(&f, again), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_save(f.ctx, again, HSQ_MODE_FULL, 19), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(try_load(&f, again), HSQ_OK, "%s", hsq_last_error());
	free_fixture(&f);
}

Test(snapshot, bad_arguments)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *p = tmp_path("x.hsq");
	cr_assert_eq(hsq_snapshot_save(f.ctx, p, HSQ_MODE_FULL, 20), HSQ_ERR_INVALID_ARG);
	cr_assert(strstr(hsq_last_error(), "1..19"), "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_save(f.ctx, p, HSQ_MODE_FULL, -1), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(hsq_snapshot_save(f.ctx, p, (hsq_snapshot_mode)7, 3), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(hsq_snapshot_save(NULL, p, HSQ_MODE_FULL, 3), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(hsq_snapshot_save(f.ctx, NULL, HSQ_MODE_FULL, 3), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(hsq_snapshot_save(f.ctx, tmp_path(""), HSQ_MODE_FULL, 3), HSQ_ERR_INVALID_ARG);
	cr_assert_eq(access(p, F_OK), -1, "a refused save must not create the file");
	cr_assert_eq(count_tmp_files(tmpdir), 0);

	hsq_context *ctx = (hsq_context *)1;
	hsq_context_params small = params(N_TOK - 1);
	cr_assert_eq(hsq_snapshot_load(f.model, f.path, &small, &ctx), HSQ_ERR_CONTEXT_FULL);
	cr_assert_null(ctx);
	cr_assert(strstr(hsq_last_error(), "(8 tokens or more)"), "should say the context it needs: %s", hsq_last_error());
	cr_assert_null(strstr(hsq_last_error(), "-c "), "the library names no tool flag: %s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), f.path), "should name the file: %s", hsq_last_error());
	hsq_context_params exact = params(N_TOK);
	cr_assert_eq(hsq_snapshot_load(f.model, f.path, &exact, &ctx), HSQ_OK, "%s", hsq_last_error());
	hsq_context_free(ctx);

	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(tmp_path("missing.hsq"), 0, &info), HSQ_ERR_IO);
	cr_assert(strstr(hsq_last_error(), "missing.hsq"), "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_inspect(tmpdir, 0, &info), HSQ_ERR_IO);
	cr_assert(strstr(hsq_last_error(), "not a regular file"), "%s", hsq_last_error());
	free_fixture(&f);
}

/* --------------------------------------------------- model identity */

/* A copy of the model with the first byte of general.name's value changed:
 * the same weights, but another identity. */
static const char *write_renamed_model(void)
{
	size_t n;
	uint8_t *m = read_file(model_path(), &n);
	static const char key[] = "general.name";
	uint8_t *hit = NULL;
	for (size_t i = 8; i + sizeof key + 12 < n && i < ((size_t)1 << 24); i++) {
		if (!memcmp(m + i, key, sizeof key - 1) && rd64(m + i - 8) == sizeof key - 1 &&
		    rd32(m + i + sizeof key - 1) == 8) {
			hit = m + i + sizeof key - 1 + 4 + 8; /* type, length, then the value */
			break;
		}
	}
	cr_assert_not_null(hit, "general.name not found in the model");
	hit[0] ^= 0x20; /* "Smollm2" -> "smollm2" */
	const char *p = tmp_path("renamed.gguf");
	write_file(p, m, n);
	free(m);
	return p;
}

Test(snapshot, other_model_is_refused)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	hsq_model *other = load_model(write_renamed_model());
	cr_assert_neq(memcmp(other->info.identity, f.model->info.identity, 32), 0,
		      "renaming the model must change its identity");
	hsq_context *ctx = (hsq_context *)1;
	hsq_context_params p = params(N_CTX);
	hsq_status st = hsq_snapshot_load(other, f.path, &p, &ctx);
	cr_assert_eq(st, HSQ_ERR_MODEL_MISMATCH, "got %s: %s", hsq_strerror(st), hsq_last_error());
	cr_assert_null(ctx);
	const char *msg = hsq_last_error();
	cr_assert(strstr(msg, f.path), "should name the snapshot: %s", msg);
	cr_assert(strstr(msg, f.model->info.name), "should name the model that built it: %s", msg);
	cr_assert(strstr(msg, other->info.name), "should name the given model: %s", msg);
	cr_assert(strstr(msg, "pass the model that wrote it"), "should suggest the fix: %s", msg);
	cr_assert_null(strstr(msg, " -m"), "the library names no tool flag: %s", msg);
	hsq_model_free(other);
	free_fixture(&f);
}

/* A copy of the model with one byte changed in the middle of a weight
 * tensor, far from its first and last 256 bytes: the same header, metadata
 * and tensor table, different weights. */
static const char *write_reweighted_model(const hsq_model *m)
{
	size_t n;
	uint8_t *bytes = read_file(model_path(), &n);
	const gguf_tensor *t = gguf_find_tensor(m->gguf, "blk.7.ffn_down.weight");
	cr_assert_not_null(t);
	cr_assert_gt(t->n_bytes, 4096);
	size_t at = (size_t)(t->data - m->gguf->map) + (size_t)t->n_bytes / 2 + 1;
	bytes[at] ^= 0x11; /* a quant nibble pair, not a scale */
	const char *p = tmp_path("reweighted.gguf");
	write_file(p, bytes, n);
	free(bytes);
	return p;
}

Test(snapshot, model_with_other_weights_is_refused)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	hsq_model *other = load_model(write_reweighted_model(f.model));
	cr_assert_neq(memcmp(other->info.identity, f.model->info.identity, 32), 0,
		      "a weight byte in the middle of a tensor must change the identity");
	hsq_context *ctx = (hsq_context *)1;
	hsq_context_params p = params(N_CTX);
	hsq_status st = hsq_snapshot_load(other, f.path, &p, &ctx);
	cr_assert_eq(st, HSQ_ERR_MODEL_MISMATCH, "got %s: %s", hsq_strerror(st), hsq_last_error());
	cr_assert_null(ctx);
	hsq_model_free(other);
	free_fixture(&f);
}

/* ------------------------------------------------------------ damage */

Test(snapshot, flipped_byte_in_each_section_is_a_checksum_error)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *names[] = { "meta", "tokens", "kv.full" };
	const char *bad = tmp_path("bad.hsq");
	for (int i = 0; i < 3; i++) {
		uint8_t *e = entry_of(f.file, names[i]);
		uint64_t off = rd64(e + SNAP_E_OFFSET), size = rd64(e + SNAP_E_STORED);
		uint64_t where[] = { off, off + size / 2, off + size - 1, off + size - 9 /* kv: chunk table */ };
		for (int w = 0; w < 4; w++) {
			f.file[where[w]] ^= 0x10;
			write_file(bad, f.file, f.size);
			f.file[where[w]] ^= 0x10;
			hsq_status st = try_load(&f, bad);
			cr_assert_eq(st, HSQ_ERR_CHECKSUM, "%s byte %llu: got %s (%s)", names[i],
				     (unsigned long long)where[w], hsq_strerror(st), hsq_last_error());
			cr_assert(strstr(hsq_last_error(), names[i]), "should name section %s: %s", names[i],
				  hsq_last_error());
			cr_assert(strstr(hsq_last_error(), "bad.hsq"), "should name the file: %s", hsq_last_error());

			hsq_snapshot_info info;
			st = hsq_snapshot_inspect(bad, 1, &info);
			cr_assert_eq(st, HSQ_ERR_CHECKSUM, "inspect --verify of %s: %s", names[i], hsq_strerror(st));
			if (i > 0) { /* meta is needed to open the file at all */
				cr_assert_eq(info.sections[i].checksum_ok, 0);
				cr_assert_eq(info.sections[(i + 1) % 3].checksum_ok, 1);
				cr_assert_eq(hsq_snapshot_inspect(bad, 0, &info), HSQ_OK,
					     "without --verify only the header and meta are checked");
			}
		}
	}
	/* A flip in the fields only the header CRC covers. */
	for (size_t at = SNAP_H_IDENTITY; at < SNAP_HEADER_SIZE + 3 * SNAP_ENTRY_SIZE; at += 7) {
		f.file[at] ^= 0x01;
		write_file(bad, f.file, f.size);
		f.file[at] ^= 0x01;
		hsq_status st = try_load(&f, bad);
		cr_assert_eq(st, HSQ_ERR_CHECKSUM, "header byte %zu: got %s (%s)", at, hsq_strerror(st),
			     hsq_last_error());
	}
	free_fixture(&f);
}

Test(snapshot, random_damage_never_loads_wrong_data)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *bad = tmp_path("bad.hsq");
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (int trial = 0; trial < 48; trial++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t at = (size_t)(x % f.size);
		uint8_t bit = (uint8_t)(1u << (x >> 60 & 7));
		f.file[at] ^= bit;
		write_file(bad, f.file, f.size);
		f.file[at] ^= bit;
		/* Either an error, or (a flip in alignment padding) the same data. */
		try_load(&f, bad);
		hsq_snapshot_info info;
		hsq_snapshot_inspect(bad, 1, &info);
		hsq_token *t = NULL;
		size_t n;
		if (hsq_snapshot_read_tokens(bad, &t, &n) == HSQ_OK) {
			cr_assert_eq(n, (size_t)N_TOK);
			cr_assert_eq(memcmp(t, f.ctx->tokens, n * sizeof *t), 0);
		}
		hsq_free(t);
	}
	free_fixture(&f);
}

Test(snapshot, truncated_files_are_refused)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *bad = tmp_path("cut.hsq");
	size_t cuts[64], n = 0;
	size_t fixed[] = { 0, 1, 7, 8, 9, 12, 16, 100, 255, 256, 257, 300, 447, 448, 449, 575, 576, 577, 600 };
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		cuts[n++] = fixed[i];
	for (int i = 1; i <= 24; i++)
		cuts[n++] = f.size * (size_t)i / 25;
	cuts[n++] = f.size - 8;
	cuts[n++] = f.size - 1;
	for (size_t i = 0; i < n; i++) {
		write_file(bad, f.file, cuts[i]);
		hsq_status st = try_load(&f, bad);
		cr_assert_neq(st, HSQ_OK, "a file cut at %zu loaded", cuts[i]);
		if (cuts[i] >= SNAP_H_VERSION_MINOR + 2)
			cr_assert_eq(st, HSQ_ERR_TRUNCATED, "cut at %zu: got %s (%s)", cuts[i], hsq_strerror(st),
				     hsq_last_error());
		hsq_snapshot_info info;
		cr_assert_neq(hsq_snapshot_inspect(bad, 1, &info), HSQ_OK);
		hsq_token *t = NULL;
		size_t nt;
		cr_assert_neq(hsq_snapshot_read_tokens(bad, &t, &nt), HSQ_OK);
		cr_assert_null(t);
	}
	/* Bytes appended to a valid file. */
	uint8_t *longer = calloc(1, f.size + 100);
	memcpy(longer, f.file, f.size);
	write_file(bad, longer, f.size + 100);
	cr_assert_eq(try_load(&f, bad), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	free(longer);
	free_fixture(&f);
}

Test(snapshot, header_checks)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	const char *bad = tmp_path("hdr.hsq");
	uint8_t *b = malloc(f.size);
	hsq_status st;

#define RESET() memcpy(b, f.file, f.size)
#define LOAD_EXPECT(status, needle)                                                                       \
	do {                                                                                              \
		write_file(bad, b, f.size);                                                               \
		st = try_load(&f, bad);                                                                   \
		cr_assert_eq(st, status, "got %s: %s", hsq_strerror(st), hsq_last_error());               \
		cr_assert(strstr(hsq_last_error(), needle), "message lacks '%s': %s", needle, hsq_last_error()); \
	} while (0)

	RESET();
	b[0] = 'G';
	LOAD_EXPECT(HSQ_ERR_FORMAT, "not an hsq snapshot");
	RESET();
	b[4] = '\n'; /* "\r\n" became "\n\n": a text-mode transfer */
	LOAD_EXPECT(HSQ_ERR_FORMAT, "bad magic");
	RESET();
	wr16(b + SNAP_H_VERSION_MAJOR, 2);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "upgrade hsq");
	RESET();
	wr16(b + SNAP_H_VERSION_MAJOR, 0);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "older");
	RESET();
	wr16(b + SNAP_H_VERSION_MINOR, 9); /* a newer minor: still readable */
	fix_header_crc(b);
	write_file(bad, b, f.size);
	cr_assert_eq(try_load(&f, bad), HSQ_OK, "minor version 1.9 must load: %s", hsq_last_error());
	RESET();
	wr32(b + SNAP_H_FLAGS, 4);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "flags");
	RESET();
	wr64(b + SNAP_H_FILE_SIZE, f.size + 1);
	LOAD_EXPECT(HSQ_ERR_TRUNCATED, "truncated");
	RESET();
	wr32(b + SNAP_H_SECTION_COUNT, 100000);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "section table");
	RESET();
	wr64(b + SNAP_H_TABLE_OFFSET, (uint64_t)1 << 62);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "section table");
	RESET();
	wr32(b + SNAP_H_HEADER_SIZE, 1u << 31);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "header size");
	RESET();
	wr32(b + SNAP_H_MODE, 2); /* a mode this reader cannot resume */
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "mode"); /* meta still says 1 */

	/* Table entries, with a valid header CRC (a writer bug or forgery). */
	RESET();
	wr64(entry_of(b, "tokens") + SNAP_E_OFFSET, rd64(entry_of(b, "tokens") + SNAP_E_OFFSET) + 4);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "aligned");
	RESET();
	wr64(entry_of(b, "tokens") + SNAP_E_OFFSET, rd64(entry_of(b, "meta") + SNAP_E_OFFSET));
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "overlap");
	RESET();
	wr64(entry_of(b, "kv.full") + SNAP_E_STORED, (uint64_t)-64);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "outside the file");
	RESET();
	wr64(entry_of(b, "meta") + SNAP_E_OFFSET, 0);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "header");
	RESET();
	memcpy(entry_of(b, "tokens"), "meta\0\0", 6);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "twice");
	RESET();
	memcpy(entry_of(b, "tokens"), "Tokens", 6);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "invalid name");
	RESET();
	memcpy(entry_of(b, "tokens"), "l9.future", 10);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "l9.future");
	RESET();
	wr32(entry_of(b, "tokens") + SNAP_E_FLAGS, 0); /* optional but known: still read */
	fix_header_crc(b);
	write_file(bad, b, f.size);
	cr_assert_eq(try_load(&f, bad), HSQ_OK, "%s", hsq_last_error());
	RESET();
	wr32(entry_of(b, "tokens") + SNAP_E_FLAGS, 0x81);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "flags");
	RESET();
	wr16(entry_of(b, "kv.full") + SNAP_E_CODEC, 9);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "codec 9");
	RESET();
	entry_of(b, "kv.full")[SNAP_E_FILTER] = 5;
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_UNSUPPORTED, "filter 5");
	RESET();
	wr64(entry_of(b, "kv.full") + SNAP_E_RAW, rd64(entry_of(b, "kv.full") + SNAP_E_RAW) + 4);
	fix_header_crc(b);
	LOAD_EXPECT(HSQ_ERR_FORMAT, "kv.full");

	/* Empty and non-snapshot files. */
	write_file(bad, "", 0);
	cr_assert_eq(try_load(&f, bad), HSQ_ERR_FORMAT);
	cr_assert(strstr(hsq_last_error(), "empty"), "%s", hsq_last_error());
	write_file(bad, "hello, world\n", 13);
	cr_assert_eq(try_load(&f, bad), HSQ_ERR_FORMAT);
	cr_assert_eq(try_load(&f, model_path()), HSQ_ERR_FORMAT);
	free(b);
	free_fixture(&f);
#undef RESET
#undef LOAD_EXPECT
}

/* --------------------------------- files from an independent encoder */

typedef struct tsec {
	const char *name;
	const uint8_t *data; /* stored bytes */
	uint64_t stored, raw, chunk;
	uint16_t codec;
	uint8_t filter;
	uint32_t flags;
} tsec;

/* Writes a snapshot with the header identity/arch/name/mode of `like` and
 * the given sections, in order, 64-byte aligned; the table goes first or
 * (table_last) after the sections. */
static void write_custom(const char *path, const uint8_t *like, const tsec *s, int n, int table_last)
{
	size_t table = (size_t)n * SNAP_ENTRY_SIZE;
	size_t pos = SNAP_HEADER_SIZE + (table_last ? 0 : table);
	size_t offs[16];
	for (int i = 0; i < n; i++) {
		pos = (pos + 63) & ~(size_t)63;
		offs[i] = pos;
		pos += s[i].stored;
	}
	size_t table_off = table_last ? (pos + 7) & ~(size_t)7 : SNAP_HEADER_SIZE;
	size_t size = table_last ? table_off + table : pos;
	uint8_t *f = calloc(1, size);
	memcpy(f, like, SNAP_HEADER_SIZE);
	wr64(f + SNAP_H_FILE_SIZE, size);
	wr64(f + SNAP_H_TABLE_OFFSET, table_off);
	wr32(f + SNAP_H_SECTION_COUNT, (uint32_t)n);
	for (int i = 0; i < n; i++) {
		uint8_t *e = f + table_off + (size_t)i * SNAP_ENTRY_SIZE;
		memcpy(e + SNAP_E_NAME, s[i].name, strlen(s[i].name));
		wr64(e + SNAP_E_OFFSET, offs[i]);
		wr64(e + SNAP_E_STORED, s[i].stored);
		wr64(e + SNAP_E_RAW, s[i].raw);
		wr64(e + SNAP_E_CHUNK, s[i].chunk);
		wr16(e + SNAP_E_CODEC, s[i].codec);
		e[SNAP_E_FILTER] = s[i].filter;
		e[SNAP_E_ALIGN_LOG2] = 6;
		wr32(e + SNAP_E_FLAGS, s[i].flags);
		wr32(e + SNAP_E_CRC, crc32c_update(0, s[i].data, s[i].stored));
		memcpy(f + offs[i], s[i].data, s[i].stored);
	}
	fix_header_crc(f);
	write_file(path, f, size);
	free(f);
}

static void shuffle(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t m = n / 4;
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < 4; j++)
			dst[j * m + i] = src[4 * i + j];
}

/* zstd-encodes raw: chunk 0 -> `frames` concatenated frames (cut at odd
 * byte counts); chunk > 0 -> one frame per chunk plus the chunk table. */
static uint8_t *zstd_encode(const uint8_t *raw, size_t n, size_t chunk, int frames, int shuffled, size_t *out_n)
{
	size_t units = chunk ? (n + chunk - 1) / chunk : (size_t)frames;
	size_t cap = ZSTD_compressBound(n) + units * 64 + (units + 1) * 8 + 64;
	uint8_t *out = malloc(cap), *tmp = malloc(n + 1), *table = malloc((units + 1) * 8);
	const uint8_t *src = raw;
	if (shuffled && !chunk) {
		shuffle(tmp, raw, n);
		src = tmp;
	}
	size_t o = 0;
	for (size_t u = 0; u < units; u++) {
		size_t a, b;
		if (chunk) {
			a = u * chunk;
			b = a + chunk < n ? a + chunk : n;
		} else {
			a = n * u / units + (u ? 1 : 0);
			b = u + 1 == units ? n : n * (u + 1) / units + 1;
		}
		const uint8_t *in = src + a;
		if (shuffled && chunk) {
			shuffle(tmp, raw + a, b - a);
			in = tmp;
		}
		wr64(table + u * 8, o);
		size_t z = ZSTD_compress(out + o, cap - o, in, b - a, 3);
		cr_assert(!ZSTD_isError(z), "%s", ZSTD_getErrorName(z));
		o += z;
	}
	if (chunk) {
		wr64(table + units * 8, o);
		memcpy(out + o, table, (units + 1) * 8);
		o += (units + 1) * 8;
	}
	free(tmp);
	free(table);
	*out_n = o;
	return out;
}

/* The meta and tokens sections of the fixture's file, as stored. */
static tsec section_as_is(fixture *f, const char *name)
{
	uint8_t *e = entry_of(f->file, name);
	tsec s = { .name = name, .data = f->file + rd64(e + SNAP_E_OFFSET), .stored = rd64(e + SNAP_E_STORED),
		   .raw = rd64(e + SNAP_E_RAW), .chunk = rd64(e + SNAP_E_CHUNK), .codec = (uint16_t)rd32(e + SNAP_E_CODEC),
		   .filter = e[SNAP_E_FILTER], .flags = rd32(e + SNAP_E_FLAGS) };
	s.codec &= 0xffff;
	return s;
}

Test(snapshot, other_valid_encodings_load)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	size_t raw_n;
	uint8_t *raw = kv_raw(f.ctx, &raw_n);
	const char *p = tmp_path("enc.hsq");
	struct {
		const char *what;
		uint16_t codec;
		size_t chunk;
		int frames, shuffled, table_last;
	} cases[] = {
		{ "raw", 0, 0, 0, 0, 0 },
		{ "raw, table last", 0, 0, 0, 0, 1 },
		{ "zstd one frame", 1, 0, 1, 0, 0 },
		{ "zstd three frames cut at odd bytes", 1, 0, 3, 0, 1 },
		{ "zstd one frame shuffled", 1, 0, 1, 1, 0 },
		{ "zstd 4000-byte chunks", 1, 4000, 0, 0, 0 },
		{ "zstd 4000-byte chunks shuffled, table last", 1, 4000, 0, 1, 1 },
		{ "zstd one big chunk", 1, raw_n * 2, 0, 0, 0 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		tsec s[3] = { section_as_is(&f, "tokens"), section_as_is(&f, "meta"),
			      { .name = "kv.full", .raw = raw_n, .flags = 1 } };
		uint8_t *enc = NULL;
		s[2].codec = cases[c].codec;
		if (cases[c].codec == 0) {
			s[2].data = raw;
			s[2].stored = raw_n;
		} else {
			size_t n;
			enc = zstd_encode(raw, raw_n, cases[c].chunk, cases[c].frames, cases[c].shuffled, &n);
			s[2].data = enc;
			s[2].stored = n;
			s[2].chunk = cases[c].chunk;
			s[2].filter = (uint8_t)cases[c].shuffled;
		}
		write_custom(p, f.file, s, 3, cases[c].table_last);
		hsq_status st = try_load(&f, p);
		cr_assert_eq(st, HSQ_OK, "%s: %s", cases[c].what, hsq_last_error());
		hsq_snapshot_info info;
		cr_assert_eq(hsq_snapshot_inspect(p, 1, &info), HSQ_OK, "%s: %s", cases[c].what, hsq_last_error());
		free(enc);
	}

	/* Unknown optional sections are ignored, whatever they hold. */
	static const uint8_t junk[100] = { 1, 2, 3 };
	tsec s[5] = { section_as_is(&f, "meta"), section_as_is(&f, "tokens"), section_as_is(&f, "kv.full"),
		      { .name = "x.test", .data = junk, .stored = 100, .raw = 7, .codec = 77, .filter = 9, .flags = 0x80 },
		      { .name = "l1.k", .data = junk, .stored = 0, .raw = 0 } };
	write_custom(p, f.file, s, 5, 1);
	cr_assert_eq(try_load(&f, p), HSQ_OK, "%s", hsq_last_error());
	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(p, 1, &info), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(info.n_sections, 5);
	cr_assert_str_eq(info.sections[3].name, "x.test");
	free(raw);
	free_fixture(&f);
}

Test(snapshot, hostile_contents_with_valid_checksums)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	size_t raw_n;
	uint8_t *raw = kv_raw(f.ctx, &raw_n);
	const char *p = tmp_path("hostile.hsq");
	hsq_status st;
	tsec base[3] = { section_as_is(&f, "meta"), section_as_is(&f, "tokens"), section_as_is(&f, "kv.full") };

	/* A token id outside the vocabulary. */
	uint8_t toks[4 * N_TOK];
	memcpy(toks, base[1].data, sizeof toks);
	wr32(toks + 8, (uint32_t)f.model->info.n_vocab);
	tsec s[3] = { base[0], base[1], base[2] };
	s[1].data = toks;
	write_custom(p, f.file, s, 3, 0);
	st = try_load(&f, p);
	cr_assert_eq(st, HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "vocabulary"), "%s", hsq_last_error());
	hsq_token *t = NULL;
	size_t nt;
	cr_assert_eq(hsq_snapshot_read_tokens(p, &t, &nt), HSQ_ERR_FORMAT);
	wr32(toks + 8, 0x80000000u); /* negative */
	write_custom(p, f.file, s, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());

	/* Meta that disagrees with the model, or is implausible. */
	uint8_t meta[SNAP_META_SIZE];
	struct {
		size_t at;
		uint32_t v;
		hsq_status want;
	} metas[] = {
		{ SNAP_M_N_LAYER, 29, HSQ_ERR_FORMAT },
		{ SNAP_M_N_LAYER, 0, HSQ_ERR_FORMAT },
		{ SNAP_M_N_LAYER, 0xffffffffu, HSQ_ERR_FORMAT },
		{ SNAP_M_HEAD_DIM, 0x7fffffffu, HSQ_ERR_FORMAT },
		{ SNAP_M_N_TOKENS, 0xffffffffu, HSQ_ERR_FORMAT },
		{ SNAP_M_N_TOKENS, 1u << 20, HSQ_ERR_CONTEXT_FULL },
		{ SNAP_M_N_TOKENS, N_TOK - 1, HSQ_ERR_FORMAT },
		{ SNAP_M_MODE, 2, HSQ_ERR_FORMAT },
		{ SNAP_M_KV_DTYPE, 1, HSQ_ERR_UNSUPPORTED },
		{ SNAP_M_POS_BASE, 5, HSQ_ERR_UNSUPPORTED },
	};
	for (size_t i = 0; i < sizeof metas / sizeof *metas; i++) {
		memcpy(meta, base[0].data, sizeof meta);
		wr32(meta + metas[i].at, metas[i].v);
		tsec m[3] = { base[0], base[1], base[2] };
		m[0].data = meta;
		write_custom(p, f.file, m, 3, 0);
		st = try_load(&f, p);
		cr_assert_eq(st, metas[i].want, "meta field %zu = %u: got %s (%s)", metas[i].at, metas[i].v,
			     hsq_strerror(st), hsq_last_error());
	}
	tsec shortmeta[3] = { base[0], base[1], base[2] };
	shortmeta[0].stored = shortmeta[0].raw = 64;
	write_custom(p, f.file, shortmeta, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());

	/* kv.full: a chunk table pointing outside, frames that decompress to
	 * more than a chunk, a stream that stops early, garbage frames. */
	size_t n;
	uint8_t *enc = zstd_encode(raw, raw_n, 4000, 0, 0, &n);
	tsec k[3] = { base[0], base[1], base[2] };
	k[2] = (tsec){ .name = "kv.full", .data = enc, .stored = n, .raw = raw_n, .chunk = 4000, .codec = 1, .flags = 1 };
	uint64_t saved = rd64(enc + n - 16);
	wr64(enc + n - 16, (uint64_t)1 << 40);
	write_custom(p, f.file, k, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	wr64(enc + n - 16, saved);
	k[2].chunk = 2000; /* frames hold 4000 bytes each */
	write_custom(p, f.file, k, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	free(enc);

	enc = zstd_encode(raw, raw_n / 2, 0, 1, 0, &n); /* half the content */
	k[2] = (tsec){ .name = "kv.full", .data = enc, .stored = n, .raw = raw_n, .codec = 1, .flags = 1 };
	write_custom(p, f.file, k, 3, 1);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	free(enc);
	enc = zstd_encode(raw, raw_n, 0, 2, 0, &n); /* two frames, then cut inside the second */
	k[2].data = enc;
	k[2].stored = n - 5;
	write_custom(p, f.file, k, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	free(enc);
	size_t big = raw_n * 2; /* more content than raw_size */
	uint8_t *twice = malloc(big);
	memcpy(twice, raw, raw_n);
	memcpy(twice + raw_n, raw, raw_n);
	enc = zstd_encode(twice, big, 0, 1, 0, &n);
	k[2].data = enc;
	k[2].stored = n;
	write_custom(p, f.file, k, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	free(enc);
	free(twice);
	static uint8_t garbage[4096];
	for (size_t i = 0; i < sizeof garbage; i++)
		garbage[i] = (uint8_t)(i * 131 + 7);
	k[2].data = garbage;
	k[2].stored = sizeof garbage;
	write_custom(p, f.file, k, 3, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());

	/* Missing sections. */
	tsec two[2] = { base[0], base[2] };
	write_custom(p, f.file, two, 2, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "tokens"), "%s", hsq_last_error());
	tsec nokv[2] = { base[0], base[1] };
	write_custom(p, f.file, nokv, 2, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "kv.full"), "%s", hsq_last_error());
	tsec nometa[2] = { base[1], base[2] };
	write_custom(p, f.file, nometa, 2, 0);
	cr_assert_eq(try_load(&f, p), HSQ_ERR_FORMAT, "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "meta"), "%s", hsq_last_error());
	free(raw);
	free_fixture(&f);
}

Test(snapshot, non_finite_cache_is_refused)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	size_t raw_n, n;
	uint8_t *raw = kv_raw(f.ctx, &raw_n), *enc;
	const char *p = tmp_path("nonfinite.hsq");
	hsq_status st;
	tsec base[3] = { section_as_is(&f, "meta"), section_as_is(&f, "tokens"), section_as_is(&f, "kv.full") };
	tsec k[3] = { base[0], base[1], base[2] };
	/* A cache that decodes to NaN or infinity, or to a value that the
	 * fp16 cache would hold as infinity (65520 and -1e9: finite in f32),
	 * written raw and as the writer encodes it (chunks of a layer's K or
	 * V, shuffled). */
	static const uint32_t nonfinite[] = { 0x7fc00000u, 0xff800000u, 0x7f800001u, 0x477ff000u, 0xce6e6b28u };
	size_t plane = raw_n / 2 / (size_t)f.model->info.n_layer;
	for (size_t i = 0; i < sizeof nonfinite / sizeof *nonfinite; i++) {
		for (int enc_kind = 0; enc_kind < 2; enc_kind++) {
			uint8_t *poisoned = malloc(raw_n);
			memcpy(poisoned, raw, raw_n);
			size_t at = 3 * plane + 4 * (i * 97 + 5); /* layer 1's V */
			wr32(poisoned + at, nonfinite[i]);
			k[2] = (tsec){ .name = "kv.full", .data = poisoned, .stored = raw_n, .raw = raw_n, .flags = 1 };
			enc = NULL;
			if (enc_kind) {
				enc = zstd_encode(poisoned, raw_n, plane, 0, 1, &n);
				k[2] = (tsec){ .name = "kv.full", .data = enc, .stored = n, .raw = raw_n, .chunk = plane,
					       .codec = 1, .filter = 1, .flags = 1 };
			}
			write_custom(p, f.file, k, 3, 0);
			st = try_load(&f, p);
			cr_assert_eq(st, HSQ_ERR_FORMAT, "non-finite %08x: got %s (%s)", nonfinite[i], hsq_strerror(st),
				     hsq_last_error());
			cr_assert(strstr(hsq_last_error(), p) && strstr(hsq_last_error(), "'kv.full'") &&
					  strstr(hsq_last_error(), i < 3 ? "non-finite" : "beyond the fp16 range") &&
					  strstr(hsq_last_error(), "layer 1 V"),
				  "%s", hsq_last_error());
			free(enc);
			free(poisoned);
		}
	}

	free(raw);
	free_fixture(&f);
}

/* ----------------------------------------------------------- atomicity */

Test(snapshot, failed_saves_leave_nothing_behind)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);

	/* A directory that does not exist. */
	const char *p = tmp_path("no/such/dir/x.hsq");
	hsq_status st = hsq_snapshot_save(f.ctx, p, HSQ_MODE_FULL, 0);
	cr_assert_eq(st, HSQ_ERR_IO, "got %s", hsq_strerror(st));
	cr_assert(strstr(hsq_last_error(), "no/such/dir"), "%s", hsq_last_error());
	cr_assert(strstr(hsq_last_error(), "create the directory"), "%s", hsq_last_error());

	/* The destination is a (non-empty) directory: the rename fails. */
	const char *d = tmp_path("adir.hsq");
	cr_assert_eq(mkdir(d, 0755), 0);
	write_file(tmp_path("adir.hsq/keep"), "x", 1);
	st = hsq_snapshot_save(f.ctx, d, HSQ_MODE_FULL, 0);
	cr_assert_eq(st, HSQ_ERR_IO, "got %s", hsq_strerror(st));
	cr_assert_eq(count_tmp_files(tmpdir), 0, "the temporary file was left behind");

	/* A write that fails half-way (file size limit, like a full disk):
	 * the previous snapshot at the destination stays intact. */
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 4096;
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	st = hsq_snapshot_save(f.ctx, f.path, HSQ_MODE_FULL, 0);
	setrlimit(RLIMIT_FSIZE, &old);
	cr_assert_eq(st, HSQ_ERR_IO, "got %s", hsq_strerror(st));
	cr_assert(strstr(hsq_last_error(), "ctx.hsq"), "%s", hsq_last_error());
	size_t n;
	uint8_t *now = read_file(f.path, &n);
	cr_assert_eq(n, f.size);
	cr_assert_eq(memcmp(now, f.file, n), 0, "the existing snapshot was damaged by a failed save");
	free(now);
	cr_assert_eq(count_tmp_files(tmpdir), 0, "the temporary file was left behind");

	/* A read-only directory (permissions do not bind root). */
	if (geteuid() != 0) {
		const char *ro = tmp_path("ro");
		cr_assert_eq(mkdir(ro, 0555), 0);
		st = hsq_snapshot_save(f.ctx, tmp_path("ro/x.hsq"), HSQ_MODE_FULL, 0);
		cr_assert_eq(st, HSQ_ERR_IO);
		cr_assert(strstr(hsq_last_error(), "writable"), "%s", hsq_last_error());
		cr_assert_eq(count_tmp_files(ro), 0);
	} else {
		fprintf(stderr, "SKIP: read-only directory check (running as root)\n");
	}
	free_fixture(&f);
}

Test(snapshot, saving_replaces_atomically)
{
	NEED_MODEL();
	fixture f = { 0 };
	setup_fixture(&f, N_TOK);
	/* A reader holding the old file keeps reading the old bytes. */
	int fd = open(f.path, O_RDONLY);
	cr_assert_geq(fd, 0);
	hsq_context *smaller = make_context(f.model, 3);
	cr_assert_eq(hsq_snapshot_save(smaller, f.path, HSQ_MODE_FULL, 0), HSQ_OK, "%s", hsq_last_error());
	uint8_t head[SNAP_HEADER_SIZE];
	cr_assert_eq(pread(fd, head, sizeof head, 0), (ssize_t)sizeof head);
	cr_assert_eq(memcmp(head, f.file, sizeof head), 0);
	close(fd);
	hsq_snapshot_info info;
	cr_assert_eq(hsq_snapshot_inspect(f.path, 1, &info), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(info.n_tokens, 3);
	cr_assert_eq(count_tmp_files(tmpdir), 0);

	/* Mode of the new file: 0666 less the umask, like any created file. */
	mode_t mask = umask(022);
	umask(mask);
	struct stat sb;
	cr_assert_eq(stat(f.path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0666 & ~mask, "mode %o", sb.st_mode & 0777);

	/* A relative path in the current directory. */
	char cwd[4096];
	cr_assert_not_null(getcwd(cwd, sizeof cwd));
	cr_assert_eq(chdir(tmpdir), 0);
	cr_assert_eq(hsq_snapshot_save(smaller, "rel.hsq", HSQ_MODE_FULL, 0), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(hsq_snapshot_inspect("rel.hsq", 1, &info), HSQ_OK, "%s", hsq_last_error());
	cr_assert_eq(chdir(cwd), 0);
	hsq_context_free(smaller);
	free_fixture(&f);
}

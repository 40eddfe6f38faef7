/* gguf.c - memory-mapped, bounds-checked GGUF v2/v3 reader.
 *
 * Layout (little-endian): "GGUF" u32 version, u64 tensor_count, u64 kv_count,
 * kv_count x (string key, u32 type, value), tensor_count x (string name,
 * u32 n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to alignment,
 * tensor data. A string is u64 length + bytes. Nothing is trusted: the
 * cursor never reads past the mapping and every size product is checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/sha256.h"
#include "model/ggml_types.h"
#include "model/gguf.h"
#include "model/idcache.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
/* Sanity caps far above any real model, so hostile counts cannot make us
 * allocate absurd tables before the bounds checks catch them. */
#define MAX_KV 1000000u
#define MAX_TENSORS 1000000u

typedef struct cursor {
	const uint8_t *p, *end;
	const char *path;
} cursor;

static hsq_status truncated(const cursor *c, const char *what)
{
	return hsq_fail(HSQ_ERR_TRUNCATED, "%s: truncated GGUF file (ends inside %s); re-download it",
			c->path, what);
}

static hsq_status rd(cursor *c, void *out, size_t n, const char *what)
{
	if ((size_t)(c->end - c->p) < n)
		return truncated(c, what);
	memcpy(out, c->p, n);
	c->p += n;
	return HSQ_OK;
}

static hsq_status rd_str(cursor *c, gguf_str *s, const char *what)
{
	uint64_t len = 0;
	hsq_status st = rd(c, &len, 8, what);
	if (st)
		return st;
	if (len > (uint64_t)(c->end - c->p))
		return truncated(c, what);
	s->ptr = (const char *)c->p;
	s->len = len;
	c->p += len;
	return HSQ_OK;
}

size_t gguf_type_size(uint32_t type)
{
	switch (type) {
	case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
	case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
	case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
	case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
	default: return 0;
	}
}

const char *gguf_type_name(uint32_t type)
{
	static const char *names[GGUF_TYPE_COUNT] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
	};
	return type < GGUF_TYPE_COUNT ? names[type] : "invalid";
}

/* Skips one value of `type` (not an array), checking bounds. */
static hsq_status skip_scalar(cursor *c, uint32_t type, const char *what)
{
	if (type == GGUF_TYPE_STRING) {
		gguf_str s;
		return rd_str(c, &s, what);
	}
	size_t n = gguf_type_size(type);
	if (n == 0)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: invalid metadata value type %u in %s; the file is corrupt",
				c->path, type, what);
	if ((size_t)(c->end - c->p) < n)
		return truncated(c, what);
	c->p += n;
	return HSQ_OK;
}

static hsq_status read_kv(cursor *c, gguf_kv *kv)
{
	hsq_status st = rd_str(c, &kv->key, "a metadata key");
	if (st)
		return st;
	if ((st = rd(c, &kv->type, 4, "a metadata type")))
		return st;
	kv->arr_type = 0;
	kv->arr_len = 0;
	if (kv->type == GGUF_TYPE_ARRAY) {
		if ((st = rd(c, &kv->arr_type, 4, "an array type")) || (st = rd(c, &kv->arr_len, 8, "an array length")))
			return st;
		kv->data = c->p;
		if (kv->arr_type == GGUF_TYPE_ARRAY)
			return hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: nested arrays in metadata key '%.*s' are not supported",
					c->path, (int)kv->key.len, kv->key.ptr);
		size_t es = gguf_type_size(kv->arr_type);
		if (kv->arr_type == GGUF_TYPE_STRING) {
			for (uint64_t i = 0; i < kv->arr_len; i++)
				if ((st = skip_scalar(c, GGUF_TYPE_STRING, "a string array")))
					return st;
		} else if (es == 0) {
			return hsq_fail(HSQ_ERR_FORMAT, "%s: invalid array element type %u in key '%.*s'",
					c->path, kv->arr_type, (int)kv->key.len, kv->key.ptr);
		} else {
			if (kv->arr_len > (uint64_t)(c->end - c->p) / es)
				return truncated(c, "an array");
			c->p += kv->arr_len * es;
		}
		return HSQ_OK;
	}
	kv->data = c->p;
	return skip_scalar(c, kv->type, "a metadata value");
}

static int str_eq(gguf_str s, const char *z)
{
	size_t n = strlen(z);
	return s.len == n && memcmp(s.ptr, z, n) == 0;
}

static hsq_status read_tensor_info(cursor *c, gguf_tensor *t)
{
	hsq_status st = rd_str(c, &t->name, "a tensor name");
	if (st || (st = rd(c, &t->n_dims, 4, "a tensor rank")))
		return st;
	if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' has %u dimensions (1..%d allowed)",
				c->path, (int)t->name.len, t->name.ptr, t->n_dims, GGUF_MAX_DIMS);
	for (int i = 0; i < GGUF_MAX_DIMS; i++)
		t->ne[i] = 1;
	for (uint32_t i = 0; i < t->n_dims; i++)
		if ((st = rd(c, &t->ne[i], 8, "a tensor shape")))
			return st;
	if ((st = rd(c, &t->type, 4, "a tensor type")) || (st = rd(c, &t->offset, 8, "a tensor offset")))
		return st;
	return HSQ_OK;
}

/* Element count and stored bytes of a tensor, overflow-checked. */
static hsq_status tensor_size(const gguf_file *f, gguf_tensor *t)
{
	uint64_t n = 1;
	for (int i = 0; i < GGUF_MAX_DIMS; i++) {
		if (t->ne[i] == 0 || t->ne[i] > (1ull << 40) || n > UINT64_MAX / t->ne[i])
			return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' has an invalid shape", f->path,
					(int)t->name.len, t->name.ptr);
		n *= t->ne[i];
	}
	const ggml_type_traits *tr = ggml_traits(t->type);
	if (tr->block_elems == 0)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' has unknown type id %u", f->path,
				(int)t->name.len, t->name.ptr, t->type);
	if (t->ne[0] % tr->block_elems)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' row of %llu elements is not a multiple of the %s block (%u)",
				f->path, (int)t->name.len, t->name.ptr, (unsigned long long)t->ne[0], tr->name,
				tr->block_elems);
	uint64_t row = ggml_row_bytes(t->type, t->ne[0]);
	uint64_t rows = n / t->ne[0];
	if (row == 0 || rows > UINT64_MAX / row)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' is too large", f->path, (int)t->name.len, t->name.ptr);
	t->n_bytes = row * rows;
	return HSQ_OK;
}

static int by_offset(const void *a, const void *b)
{
	const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return (x->n_bytes > y->n_bytes) - (x->n_bytes < y->n_bytes);
}

static int by_name(const void *a, const void *b)
{
	const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
	uint64_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
	int c = n ? memcmp(x->name.ptr, y->name.ptr, (size_t)n) : 0;
	if (c)
		return c;
	return (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

/* No two tensors share a byte of the data section or a name (a lookup by
 * name would silently take the first). Sorting keeps it O(n log n) for the
 * largest table the caps allow. */
static hsq_status check_tensor_table(const gguf_file *f)
{
	if (f->n_tensors < 2)
		return HSQ_OK;
	hsq_status st = HSQ_OK;
	const gguf_tensor **v = malloc((size_t)f->n_tensors * sizeof *v);
	if (!v)
		return hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", f->path);
	for (uint64_t i = 0; i < f->n_tensors; i++)
		v[i] = &f->tensors[i];
	qsort(v, (size_t)f->n_tensors, sizeof *v, by_offset);
	for (uint64_t i = 1; i < f->n_tensors && !st; i++)
		if (v[i - 1]->offset + v[i - 1]->n_bytes > v[i]->offset)
			st = hsq_fail(HSQ_ERR_FORMAT,
				      "%s: tensors '%.*s' and '%.*s' overlap in the data section; the file is corrupt",
				      f->path, (int)v[i - 1]->name.len, v[i - 1]->name.ptr, (int)v[i]->name.len,
				      v[i]->name.ptr);
	if (!st)
		qsort(v, (size_t)f->n_tensors, sizeof *v, by_name);
	for (uint64_t i = 1; i < f->n_tensors && !st; i++)
		if (!by_name(&v[i - 1], &v[i]))
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' appears twice in the tensor table; the file is corrupt",
				      f->path, (int)v[i]->name.len, v[i]->name.ptr);
	free(v);
	return st;
}

/* Identity: the SHA-256 of the whole file, so two models that differ in any
 * weight byte (or any metadata) differ. Hashing reads every page (sha256.c
 * uses the CPU's SHA extensions for it), so the digest is cached per file
 * (idcache.h) and a model unchanged since its last load is not hashed
 * again. sb is the file's stat from before the mapping was read: a write
 * during the hashing changes the file's ctime and voids the entry. */
static void compute_identity(gguf_file *f, const struct stat *sb)
{
	if (idcache_get(sb, f->identity))
		return;
	sha256(f->map, f->size, f->identity);
	idcache_put(sb, f->identity);
}

static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "a special file";
}

hsq_status gguf_open(const char *path, gguf_file **out)
{
	hsq_status st = HSQ_OK;
	gguf_file *f = NULL;
	int fd = -1;
	*out = NULL;

	f = calloc(1, sizeof *f);
	if (!f || !(f->path = strdup(path))) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory opening %s", path);
		goto fail;
	}
	/* O_NONBLOCK so that a FIFO given as the model is refused at once
	 * instead of waiting for a writer; cleared once it is known to be a
	 * regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s%s", path, strerror(errno),
			      errno == ENOENT ? " (run 'make model' for the default model)" : "");
		goto fail;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = hsq_fail(HSQ_ERR_IO, "%s: is %s, not a regular file; name a .gguf model file", path,
			      file_kind(sb.st_mode));
		goto fail;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		st = hsq_fail(HSQ_ERR_IO, "%s: %s", path, strerror(errno));
		goto fail;
	}
	f->size = (uint64_t)sb.st_size;
	if (f->size < 24) {
		st = hsq_fail(HSQ_ERR_FORMAT,
			      "%s: not a GGUF file (%llu bytes, too short for a header)", path,
			      (unsigned long long)f->size);
		goto fail;
	}
	void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		st = hsq_fail(HSQ_ERR_IO, "%s: cannot map file: %s", path, strerror(errno));
		goto fail;
	}
	f->map = m;

	cursor c = { f->map, f->map + f->size, f->path };
	uint32_t magic = 0;
	rd(&c, &magic, 4, "the header");
	if (magic != GGUF_MAGIC) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: not a GGUF file (bad magic); pass a .gguf model", path);
		goto fail;
	}
	rd(&c, &f->version, 4, "the header");
	if (f->version != 2 && f->version != 3) {
		uint32_t swapped = __builtin_bswap32(f->version);
		st = hsq_fail(HSQ_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)%s", path,
			      f->version, swapped == 2 || swapped == 3 ? "; this looks like a big-endian file" : "");
		goto fail;
	}
	rd(&c, &f->n_tensors, 8, "the header");
	if ((st = rd(&c, &f->n_kv, 8, "the header")))
		goto fail;
	if (f->n_kv > MAX_KV || f->n_tensors > MAX_TENSORS) {
		st = hsq_fail(HSQ_ERR_FORMAT, "%s: implausible counts (%llu metadata keys, %llu tensors)", path,
			      (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);
		goto fail;
	}
	/* Each kv needs >= 12 bytes and each tensor info >= 24: a cheap check
	 * before allocating tables sized by hostile counts. */
	if (f->n_kv * 12 + f->n_tensors * 24 > f->size) {
		st = truncated(&c, "the metadata");
		goto fail;
	}
	f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
	f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
	if (!f->kv || !f->tensors) {
		st = hsq_fail(HSQ_ERR_NOMEM, "out of memory reading %s", path);
		goto fail;
	}
	for (uint64_t i = 0; i < f->n_kv; i++)
		if ((st = read_kv(&c, &f->kv[i])))
			goto fail;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if ((st = read_tensor_info(&c, &f->tensors[i])))
			goto fail;
	uint64_t table_end = (uint64_t)(c.p - f->map);

	f->alignment = 32;
	const gguf_kv *al = gguf_find(f, "general.alignment");
	if (al) {
		int64_t a;
		if (gguf_kv_as_i64(al, &a) || a <= 0 || (a & (a - 1)) || a > (1 << 20)) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: general.alignment must be a power of two", path);
			goto fail;
		}
		f->alignment = (uint64_t)a;
	}
	f->data_offset = (table_end + f->alignment - 1) / f->alignment * f->alignment;
	if (f->data_offset > f->size) {
		st = truncated(&c, "the padding before tensor data");
		goto fail;
	}
	uint64_t data_size = f->size - f->data_offset;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		gguf_tensor *t = &f->tensors[i];
		if ((st = tensor_size(f, t)))
			goto fail;
		if (t->offset % f->alignment) {
			st = hsq_fail(HSQ_ERR_FORMAT, "%s: tensor '%.*s' offset %llu is not aligned to %llu", path,
				      (int)t->name.len, t->name.ptr, (unsigned long long)t->offset,
				      (unsigned long long)f->alignment);
			goto fail;
		}
		if (t->offset > data_size || t->n_bytes > data_size - t->offset) {
			st = hsq_fail(HSQ_ERR_TRUNCATED, "%s: tensor '%.*s' extends past the end of the file; re-download it",
				      path, (int)t->name.len, t->name.ptr);
			goto fail;
		}
		t->data = f->map + f->data_offset + t->offset;
	}
	if ((st = check_tensor_table(f)))
		goto fail;
	compute_identity(f, &sb);
	close(fd);
	*out = f;
	return HSQ_OK;
fail:
	if (fd >= 0)
		close(fd);
	gguf_close(f);
	return st;
}

void gguf_close(gguf_file *f)
{
	if (!f)
		return;
	if (f->map)
		munmap((void *)f->map, f->size);
	free(f->kv);
	free(f->tensors);
	free(f->path);
	free(f);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key)
{
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (str_eq(f->kv[i].key, key))
			return &f->kv[i];
	return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (str_eq(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

int gguf_kv_as_i64(const gguf_kv *kv, int64_t *out)
{
	const uint8_t *d = kv->data;
	switch (kv->type) {
	case GGUF_TYPE_UINT8: *out = d[0]; return 0;
	case GGUF_TYPE_INT8: *out = (int8_t)d[0]; return 0;
	case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, d, 2); *out = v; return 0; }
	case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, d, 2); *out = v; return 0; }
	case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, d, 4); *out = v; return 0; }
	case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, d, 4); *out = v; return 0; }
	case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, d, 8); if (v > INT64_MAX) return -1; *out = (int64_t)v; return 0; }
	case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, d, 8); *out = v; return 0; }
	case GGUF_TYPE_BOOL: *out = d[0] != 0; return 0;
	default: return -1;
	}
}

hsq_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
	const gguf_kv *kv = gguf_find(f, key);
	int64_t v;
	if (!kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is missing", f->path, key);
	if (kv->type == GGUF_TYPE_ARRAY || gguf_kv_as_i64(kv, &v) || v < 0 || v > UINT32_MAX)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is not a valid unsigned integer", f->path, key);
	*out = (uint32_t)v;
	return HSQ_OK;
}

uint32_t gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t dflt)
{
	const gguf_kv *kv = gguf_find(f, key);
	int64_t v;
	if (!kv || kv->type == GGUF_TYPE_ARRAY || gguf_kv_as_i64(kv, &v) || v < 0 || v > UINT32_MAX)
		return dflt;
	return (uint32_t)v;
}

float gguf_get_f32_or(const gguf_file *f, const char *key, float dflt)
{
	const gguf_kv *kv = gguf_find(f, key);
	if (!kv)
		return dflt;
	if (kv->type == GGUF_TYPE_FLOAT32) {
		float v;
		memcpy(&v, kv->data, 4);
		return v;
	}
	if (kv->type == GGUF_TYPE_FLOAT64) {
		double v;
		memcpy(&v, kv->data, 8);
		return (float)v;
	}
	int64_t i;
	return gguf_kv_as_i64(kv, &i) ? dflt : (float)i;
}

int gguf_get_bool_or(const gguf_file *f, const char *key, int dflt)
{
	const gguf_kv *kv = gguf_find(f, key);
	int64_t v;
	if (!kv || kv->type == GGUF_TYPE_ARRAY || gguf_kv_as_i64(kv, &v))
		return dflt;
	return v != 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out)
{
	const gguf_kv *kv = gguf_find(f, key);
	if (!kv || kv->type != GGUF_TYPE_STRING)
		return -1;
	uint64_t len;
	memcpy(&len, kv->data, 8);
	out->ptr = (const char *)kv->data + 8;
	out->len = len;
	return 0;
}

hsq_status gguf_str_array(const gguf_file *f, const char *key, gguf_str_iter *it, uint64_t *n)
{
	const gguf_kv *kv = gguf_find(f, key);
	if (!kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is missing", f->path, key);
	if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is not an array of strings", f->path, key);
	it->f = f;
	it->p = kv->data;
	it->left = kv->arr_len;
	*n = kv->arr_len;
	return HSQ_OK;
}

int gguf_str_next(gguf_str_iter *it, gguf_str *out)
{
	if (it->left == 0)
		return 0;
	uint64_t len;
	memcpy(&len, it->p, 8); /* validated by read_kv at open */
	out->ptr = (const char *)it->p + 8;
	out->len = len;
	it->p += 8 + len;
	it->left--;
	return 1;
}

hsq_status gguf_num_array(const gguf_file *f, const char *key, uint32_t want_type,
			  const void **data, uint64_t *n)
{
	const gguf_kv *kv = gguf_find(f, key);
	if (!kv)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is missing", f->path, key);
	if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != want_type)
		return hsq_fail(HSQ_ERR_FORMAT, "%s: metadata key '%s' is not an array of %s", f->path, key,
				gguf_type_name(want_type));
	*data = kv->data;
	*n = kv->arr_len;
	return HSQ_OK;
}

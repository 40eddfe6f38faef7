/* gguf.h - a bounds-checked reader for GGUF v2/v3 files (memory-mapped).
 *
 * The file is treated as hostile: every offset, count, string length and
 * tensor dimension is checked against the mapping before it is used. Values
 * point into the mapping and stay valid until gguf_close(). */
#ifndef HSQ_GGUF_H
#define HSQ_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "hsq.h"

enum gguf_type {
	GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
	GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
	GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
};

typedef struct gguf_str {
	const char *ptr; /* not NUL-terminated: points into the mapping */
	uint64_t len;    /* bytes */
} gguf_str;

typedef struct gguf_kv {
	gguf_str key;
	uint32_t type;       /* enum gguf_type */
	uint32_t arr_type;   /* element type when type == GGUF_TYPE_ARRAY */
	uint64_t arr_len;    /* elements when type == GGUF_TYPE_ARRAY */
	const uint8_t *data; /* scalar value, or first array element (strings: length-prefixed) */
} gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
	gguf_str name;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ne[0] fastest (row length) */
	uint32_t type;              /* enum ggml_type (see ggml_types.h) */
	uint64_t offset;            /* bytes from the start of the data section */
	uint64_t n_bytes;           /* stored size */
	const uint8_t *data;        /* into the mapping */
} gguf_tensor;

typedef struct gguf_file {
	char *path;            /* owned copy, for error messages */
	const uint8_t *map;    /* whole file, read-only */
	uint64_t size;         /* bytes */
	uint32_t version;      /* 2 or 3 */
	uint64_t n_kv;
	gguf_kv *kv;           /* [n_kv] */
	uint64_t n_tensors;
	gguf_tensor *tensors;  /* [n_tensors] */
	uint64_t alignment;    /* general.alignment or 32 */
	uint64_t data_offset;  /* start of the tensor data section, bytes */
	uint8_t identity[32];  /* sha256 of the whole file */
} gguf_file;

hsq_status gguf_open(const char *path, gguf_file **out);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters: return HSQ_ERR_FORMAT (with detail) on a type mismatch,
 * HSQ_ERR_FORMAT if missing unless a default applies (the _or variants). */
hsq_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
uint32_t gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t dflt);
float gguf_get_f32_or(const gguf_file *f, const char *key, float dflt);
int gguf_get_bool_or(const gguf_file *f, const char *key, int dflt);
/* String value; returns 0 and sets *out if present and a string. */
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Integer scalar of any width, converted; returns 0 on success. */
int gguf_kv_as_i64(const gguf_kv *kv, int64_t *out);

/* Array of strings: walk element i (0-based) sequentially with an iterator
 * because strings are variable length. */
typedef struct gguf_str_iter {
	const gguf_file *f;
	const uint8_t *p; /* next element */
	uint64_t left;    /* elements not yet returned */
} gguf_str_iter;
hsq_status gguf_str_array(const gguf_file *f, const char *key, gguf_str_iter *it, uint64_t *n);
/* Next string; returns 0 when done. The array was validated at open. */
int gguf_str_next(gguf_str_iter *it, gguf_str *out);

/* Numeric array: pointer to raw little-endian elements of the given type
 * (checked), and count. Elements are NOT aligned (metadata is packed):
 * read them with memcpy. */
hsq_status gguf_num_array(const gguf_file *f, const char *key, uint32_t want_type,
			  const void **data, uint64_t *n);

/* Size in bytes of a scalar gguf type (0 for string/array). */
size_t gguf_type_size(uint32_t type);
const char *gguf_type_name(uint32_t type);

#endif

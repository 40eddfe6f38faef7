/* json_read.h - a small, strict JSON reader (RFC 8259) for hsq-eval's
 * trial logs (json_read.c); writing JSON is common/json.h's. */
#ifndef HSQ_CMD_EVAL_JSON_READ_H
#define HSQ_CMD_EVAL_JSON_READ_H

#include <stddef.h>

#include "common/json.h"

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
	json_type type;
	int boolean;
	double number;
	char *string;       /* JSON_STRING: NUL-terminated (\u0000 is refused) */
	size_t n;           /* items of an array or object */
	json_value *items;  /* array elements, or object values */
	char **keys;        /* object keys */
};

/* Parses text[0..len) as one JSON value (RFC 8259; white space around it
 * allowed, nesting at most 32 deep). Returns 0, or -1 with a lowercase
 * reason and the byte offset in err. */
int json_parse(const char *text, size_t len, json_value *out, char *err, size_t cap);
void json_free(json_value *v);
/* Member key of an object, or NULL (absent, or v not an object). */
const json_value *json_get(const json_value *v, const char *key);
int json_equal(const json_value *a, const json_value *b);
/* Compact JSON text of v (for messages). */
void json_write(sbuf *b, const json_value *v);

/* Typed members of a log record; on a missing or mistyped member they
 * write a reason to err and return 0. */
int json_int_member(const json_value *o, const char *key, long lo, long hi, long *out, char *err, size_t cap);
int json_num_member(const json_value *o, const char *key, double *out, char *err, size_t cap);
int json_bool_member(const json_value *o, const char *key, int *out, char *err, size_t cap);
/* A member that must be an object (the per-method results). */
const json_value *json_obj_member(const json_value *o, const char *key, char *err, size_t cap);

#endif

/* json_read.c - a small, strict JSON reader (RFC 8259) for the trial logs of
 * hsq-eval. The logs may come from an interrupted run or may have been
 * edited, so nothing is trusted: every byte is checked, nesting is
 * bounded, numbers must follow the grammar, strings must be valid UTF-8,
 * and on error the reason and byte offset come back instead of a crash. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "json_read.h"
#include "options.h"

#define JSON_MAX_DEPTH 32

typedef struct parser {
	const char *s, *end, *start;
	char *err;
	size_t cap;
	int failed;
} parser;

static int fail(parser *p, const char *what)
{
	if (!p->failed)
		snprintf(p->err, p->cap, "%s at byte %ld", what, (long)(p->s - p->start) + 1);
	p->failed = 1;
	return -1;
}

static void skip_ws(parser *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static int parse_value(parser *p, json_value *v, int depth);

static int literal(parser *p, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
		return fail(p, "unexpected text");
	p->s += n;
	return 0;
}

static int parse_number(parser *p, json_value *v)
{
	const char *a = p->s;
	if (p->s < p->end && *p->s == '-')
		p->s++;
	if (p->s < p->end && *p->s == '0')
		p->s++;
	else if (p->s < p->end && *p->s >= '1' && *p->s <= '9')
		while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
			p->s++;
	else
		return fail(p, "bad number");
	if (p->s < p->end && *p->s == '.') {
		p->s++;
		if (p->s >= p->end || *p->s < '0' || *p->s > '9')
			return fail(p, "bad number");
		while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
			p->s++;
	}
	if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
		p->s++;
		if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
			p->s++;
		if (p->s >= p->end || *p->s < '0' || *p->s > '9')
			return fail(p, "bad number");
		while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
			p->s++;
	}
	char buf[64];
	size_t n = (size_t)(p->s - a);
	if (n >= sizeof buf)
		return fail(p, "number too long");
	memcpy(buf, a, n);
	buf[n] = '\0';
	errno = 0;
	v->type = JSON_NUMBER;
	v->number = strtod(buf, NULL);
	if (!isfinite(v->number))
		return fail(p, "number out of range");
	return 0;
}

static int hex4(parser *p, unsigned *out)
{
	if (p->end - p->s < 4)
		return fail(p, "bad \\u escape");
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p->s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return fail(p, "bad \\u escape");
	}
	p->s += 4;
	*out = v;
	return 0;
}

static void put_utf8(sbuf *b, unsigned cp)
{
	if (cp < 0x80) {
		sb_putc(b, (char)cp);
	} else if (cp < 0x800) {
		sb_putc(b, (char)(0xc0 | cp >> 6));
		sb_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		sb_putc(b, (char)(0xe0 | cp >> 12));
		sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		sb_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else {
		sb_putc(b, (char)(0xf0 | cp >> 18));
		sb_putc(b, (char)(0x80 | ((cp >> 12) & 0x3f)));
		sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		sb_putc(b, (char)(0x80 | (cp & 0x3f)));
	}
}

/* The escape after a backslash. */
static int parse_escape(parser *p, sbuf *b)
{
	if (p->s >= p->end)
		return fail(p, "unterminated string");
	char c = *p->s++;
	const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
	const char *at = strchr(from, c);
	if (c && at) {
		sb_putc(b, to[at - from]);
		return 0;
	}
	if (c != 'u')
		return fail(p, "bad escape");
	unsigned cp, lo;
	if (hex4(p, &cp))
		return -1;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail(p, "lone low surrogate");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (p->end - p->s < 2 || p->s[0] != '\\' || p->s[1] != 'u')
			return fail(p, "lone high surrogate");
		p->s += 2;
		if (hex4(p, &lo))
			return -1;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail(p, "bad surrogate pair");
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0)
		return fail(p, "\\u0000 in a string");
	put_utf8(b, cp);
	return 0;
}

static int parse_string(parser *p, char **out)
{
	sbuf b = { 0 };
	p->s++; /* the opening quote */
	sb_printf(&b, "%s", "");
	for (;;) {
		if (p->s >= p->end) {
			sb_free(&b);
			return fail(p, "unterminated string");
		}
		unsigned char c = (unsigned char)*p->s;
		int r = 0;
		if (c == '"') {
			p->s++;
			break;
		} else if (c == '\\') {
			p->s++;
			r = parse_escape(p, &b);
		} else if (c < 0x20) {
			r = fail(p, "control character in a string");
		} else if (c < 0x80) {
			sb_putc(&b, (char)c);
			p->s++;
		} else {
			int n = (int)cli_utf8_len(p->s, (size_t)(p->end - p->s));
			if (n == 0)
				r = fail(p, "invalid UTF-8 in a string");
			for (int i = 0; i < n; i++)
				sb_putc(&b, *p->s++);
		}
		if (r) {
			sb_free(&b);
			return -1;
		}
	}
	*out = b.s;
	return 0;
}

/* Appends a zeroed slot to an array or object being built. */
static json_value *grow(json_value *v, size_t *cap, int with_key)
{
	if (v->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		json_value *items = realloc(v->items, nc * sizeof *items);
		if (!items)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		v->items = items;
		if (with_key) {
			char **keys = realloc(v->keys, nc * sizeof *keys);
			if (!keys)
				cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
			v->keys = keys;
		}
		*cap = nc;
	}
	json_value *slot = &v->items[v->n];
	memset(slot, 0, sizeof *slot);
	if (with_key)
		v->keys[v->n] = NULL;
	v->n++;
	return slot;
}

static int parse_array(parser *p, json_value *v, int depth)
{
	size_t cap = 0;
	v->type = JSON_ARRAY;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == ']') {
		p->s++;
		return 0;
	}
	for (;;) {
		if (parse_value(p, grow(v, &cap, 0), depth + 1))
			return -1;
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == ']') {
			p->s++;
			return 0;
		}
		return fail(p, "expected ',' or ']'");
	}
}

static int parse_object(parser *p, json_value *v, int depth)
{
	size_t cap = 0;
	v->type = JSON_OBJECT;
	p->s++;
	skip_ws(p);
	if (p->s < p->end && *p->s == '}') {
		p->s++;
		return 0;
	}
	for (;;) {
		skip_ws(p);
		if (p->s >= p->end || *p->s != '"')
			return fail(p, "expected a member name");
		char *key;
		if (parse_string(p, &key))
			return -1;
		for (size_t i = 0; i < v->n; i++)
			if (!strcmp(v->keys[i], key)) {
				free(key);
				return fail(p, "duplicate member name");
			}
		json_value *slot = grow(v, &cap, 1);
		v->keys[v->n - 1] = key;
		skip_ws(p);
		if (p->s >= p->end || *p->s != ':')
			return fail(p, "expected ':'");
		p->s++;
		if (parse_value(p, slot, depth + 1))
			return -1;
		skip_ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == '}') {
			p->s++;
			return 0;
		}
		return fail(p, "expected ',' or '}'");
	}
}

static int parse_value(parser *p, json_value *v, int depth)
{
	if (depth > JSON_MAX_DEPTH)
		return fail(p, "nested too deeply");
	skip_ws(p);
	if (p->s >= p->end)
		return fail(p, "unexpected end");
	switch (*p->s) {
	case '{': return parse_object(p, v, depth);
	case '[': return parse_array(p, v, depth);
	case '"': v->type = JSON_STRING; return parse_string(p, &v->string);
	case 't': v->type = JSON_BOOL; v->boolean = 1; return literal(p, "true");
	case 'f': v->type = JSON_BOOL; return literal(p, "false");
	case 'n': v->type = JSON_NULL; return literal(p, "null");
	default: return parse_number(p, v);
	}
}

int json_parse(const char *text, size_t len, json_value *out, char *err, size_t cap)
{
	parser p = { text, text + len, text, err, cap, 0 };
	memset(out, 0, sizeof *out);
	if (parse_value(&p, out, 0) == 0) {
		skip_ws(&p);
		if (p.s == p.end)
			return 0;
		fail(&p, "trailing text");
	}
	json_free(out);
	return -1;
}

void json_free(json_value *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		json_free(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->string);
	memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *v, const char *key)
{
	if (!v || v->type != JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->keys[i], key))
			return &v->items[i];
	return NULL;
}

/* Objects are equal when they hold the same members, in any order. */
int json_equal(const json_value *a, const json_value *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case JSON_NULL: return 1;
	case JSON_BOOL: return a->boolean == b->boolean;
	case JSON_NUMBER: return a->number == b->number;
	case JSON_STRING: return !strcmp(a->string, b->string);
	case JSON_ARRAY:
		if (a->n != b->n)
			return 0;
		for (size_t i = 0; i < a->n; i++)
			if (!json_equal(&a->items[i], &b->items[i]))
				return 0;
		return 1;
	case JSON_OBJECT:
		if (a->n != b->n)
			return 0;
		for (size_t i = 0; i < a->n; i++) {
			const json_value *o = json_get(b, a->keys[i]);
			if (!o || !json_equal(&a->items[i], o))
				return 0;
		}
		return 1;
	}
	return 0;
}

void json_write(sbuf *b, const json_value *v)
{
	switch (v->type) {
	case JSON_NULL: sb_printf(b, "null"); break;
	case JSON_BOOL: sb_printf(b, v->boolean ? "true" : "false"); break;
	case JSON_NUMBER: sb_printf(b, "%.17g", v->number); break;
	case JSON_STRING: sb_jstr(b, v->string); break;
	case JSON_ARRAY:
	case JSON_OBJECT:
		sb_putc(b, v->type == JSON_ARRAY ? '[' : '{');
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				sb_putc(b, ',');
			if (v->type == JSON_OBJECT) {
				sb_jstr(b, v->keys[i]);
				sb_putc(b, ':');
			}
			json_write(b, &v->items[i]);
		}
		sb_putc(b, v->type == JSON_ARRAY ? ']' : '}');
		break;
	}
}

/* ------------------------------------------------- typed members */

int json_num_member(const json_value *o, const char *key, double *out, char *err, size_t cap)
{
	const json_value *v = json_get(o, key);
	if (!v || v->type != JSON_NUMBER) {
		snprintf(err, cap, "'%s' %s", key, v ? "is not a number" : "is missing");
		return 0;
	}
	*out = v->number;
	return 1;
}

int json_int_member(const json_value *o, const char *key, long lo, long hi, long *out, char *err, size_t cap)
{
	double d;
	if (!json_num_member(o, key, &d, err, cap))
		return 0;
	if (d != floor(d) || d < (double)lo || d > (double)hi) {
		snprintf(err, cap, "'%s' is %.17g, not an integer from %ld to %ld", key, d, lo, hi);
		return 0;
	}
	*out = (long)d;
	return 1;
}

int json_bool_member(const json_value *o, const char *key, int *out, char *err, size_t cap)
{
	const json_value *v = json_get(o, key);
	if (!v || v->type != JSON_BOOL) {
		snprintf(err, cap, "'%s' %s", key, v ? "is not true or false" : "is missing");
		return 0;
	}
	*out = v->boolean;
	return 1;
}

const json_value *json_obj_member(const json_value *o, const char *key, char *err, size_t cap)
{
	const json_value *v = json_get(o, key);
	if (!v || v->type != JSON_OBJECT) {
		snprintf(err, cap, "'%s' %s", key, v ? "is not an object" : "is missing");
		return NULL;
	}
	return v;
}

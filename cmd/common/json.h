/* json.h - the JSON writer of the hsq tools: strings escaped and numbers
 * formatted one way for every tool, into a growable text buffer (hsq-eval's
 * trial records and configurations) or onto a stream (hsq-inspect --json,
 * hsq-eval's summary files). Reading JSON is hsq-eval's alone
 * (cmd/eval/json_read.h). */
#ifndef HSQ_CMD_JSON_H
#define HSQ_CMD_JSON_H

#include <stddef.h>
#include <stdio.h>

/* ------------------------------------------------------ growable text */

typedef struct sbuf {
	char *s; /* NUL-terminated once anything is written; NULL before */
	size_t len, cap;
} sbuf;

/* Out of memory exits 1 with a message (cli_prog()). */
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_putc(sbuf *b, char ch);
void sb_free(sbuf *b);

/* --------------------------------------------------------------- JSON */

/* How a string's control characters are written. Both styles are JSON
 * and read back alike; each tool keeps the one its files always had. */
typedef enum json_escapes {
	JSON_ESC_UNICODE, /* every one as \u00XX; DEL as it is (hsq-eval) */
	JSON_ESC_SHORT,   /* \n, \t and \r short, the others and DEL as \u00XX (hsq-inspect) */
} json_escapes;

/* A string literal of s[0..n): '"' and '\' escaped, control characters
 * as esc says, bytes that are not valid UTF-8 replaced by \ufffd (model
 * output may split a character). */
void sb_jstr_n(sbuf *b, const char *s, size_t n, json_escapes esc);
/* The same of a NUL-terminated string, JSON_ESC_UNICODE. */
void sb_jstr(sbuf *b, const char *s);
/* A number that reads back to the same double (%.17g), or null. */
void sb_jnum(sbuf *b, double v);
/* A number rounded for people (%.6g), or null. */
void sb_jnum6(sbuf *b, double v);

/* The same onto a stream. */
void json_fstr_n(FILE *f, const char *s, size_t n, json_escapes esc);
void json_fstr(FILE *f, const char *s, json_escapes esc);
void json_fnum6(FILE *f, double v);

#endif

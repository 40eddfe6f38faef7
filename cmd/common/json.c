/* json.c - the JSON writer of the hsq tools, and the growable text buffer
 * it writes into. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

/* ------------------------------------------------------ growable text */

static void sb_reserve(sbuf *b, size_t more)
{
	if (b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *s = realloc(b->s, cap);
	if (!s)
		cli_die(cli_prog(), EXIT_FAILURE_RUNTIME, "out of memory");
	b->s = s;
	b->cap = cap;
}

void sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		cli_die(cli_prog(), EXIT_FAILURE_RUNTIME, "cannot format output");
	sb_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sb_putc(sbuf *b, char ch)
{
	sb_reserve(b, 1);
	b->s[b->len++] = ch;
	b->s[b->len] = '\0';
}

void sb_free(sbuf *b)
{
	free(b->s);
	memset(b, 0, sizeof *b);
}

/* --------------------------------------------------------------- JSON */

void sb_jstr_n(sbuf *b, const char *s, size_t n, json_escapes esc)
{
	const unsigned char *p = (const unsigned char *)s;
	sb_putc(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		size_t len = cli_utf8_len(s + i, n - i);
		if (len == 0) {
			sb_printf(b, "\\ufffd");
			i++;
			continue;
		}
		if (len > 1) {
			for (size_t k = 0; k < len; k++)
				sb_putc(b, (char)p[i + k]);
			i += len;
			continue;
		}
		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (esc == JSON_ESC_SHORT && c == '\n')
			sb_printf(b, "\\n");
		else if (esc == JSON_ESC_SHORT && c == '\t')
			sb_printf(b, "\\t");
		else if (esc == JSON_ESC_SHORT && c == '\r')
			sb_printf(b, "\\r");
		else if (c < 0x20 || (esc == JSON_ESC_SHORT && c == 0x7f))
			sb_printf(b, "\\u%04x", c);
		else
			sb_putc(b, (char)c);
		i++;
	}
	sb_putc(b, '"');
}

void sb_jstr(sbuf *b, const char *s)
{
	sb_jstr_n(b, s, strlen(s), JSON_ESC_UNICODE);
}

void sb_jnum(sbuf *b, double v)
{
	if (isfinite(v))
		sb_printf(b, "%.17g", v);
	else
		sb_printf(b, "null");
}

void sb_jnum6(sbuf *b, double v)
{
	if (isfinite(v))
		sb_printf(b, "%.6g", v);
	else
		sb_printf(b, "null");
}

void json_fstr_n(FILE *f, const char *s, size_t n, json_escapes esc)
{
	sbuf b = { 0 };
	sb_jstr_n(&b, s, n, esc);
	fwrite(b.s, 1, b.len, f);
	sb_free(&b);
}

void json_fstr(FILE *f, const char *s, json_escapes esc)
{
	json_fstr_n(f, s, strlen(s), esc);
}

void json_fnum6(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

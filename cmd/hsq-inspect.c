/* hsq-inspect - show what a snapshot holds, verify its checksums, and
 * report the tiers of a compressed snapshot and a router trace over them. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/json.h"
#include "common/svg.h"

static const char PROG[] = "hsq-inspect";
static const char USAGE[] = "hsq-inspect [--verify] [--json] [--heads] [--tokens] [--text] "
			    "[--trace FILE [--top N] [--svg FILE]] [-m MODEL] FILE.hsq";
static const char DESCRIPTION[] =
	"Print what a snapshot written by hsq-prefill holds: format version, mode, the model\n"
	"that built it, tokens, sections with their sizes, codecs and checksums, and the size\n"
	"of the KV cache against fp16. For compressed snapshots (quant, hsq, streaming, snapkv)\n"
	"also the tier parameters and the tokens, groups and bytes of L1, L2 and L3 per layer.\n"
	"With --trace, reads a router trace of hsq-decode --trace for this snapshot: hit rates\n"
	"per layer and head, the most fetched groups with the text they cover, and a heatmap\n"
	"of fetches over layers and positions. Needs no model unless --text is given (--trace\n"
	"uses one when it can, to show the text of the groups). Given a calibration file of\n"
	"hsq-calibrate instead, shows its model, its reader and what it records of its training.";

enum { OPT_VERIFY = 256, OPT_JSON, OPT_TOKENS, OPT_TEXT, OPT_HEADS, OPT_TRACE, OPT_TOP, OPT_SVG };

static const cli_option options[] = {
	{ "verify", 0, NULL, "check every section checksum (exit 5 naming a damaged one)", OPT_VERIFY },
	{ "json", 0, NULL, "print the same information as one JSON object", OPT_JSON },
	{ "heads", 0, NULL, "tier and trace tables: one row per layer and KV head (default: per layer)", OPT_HEADS },
	{ "tokens", 0, NULL, "also print the token ids", OPT_TOKENS },
	{ "text", 0, NULL, "also print the tokens as text (needs the model that built it)", OPT_TEXT },
	{ "trace", 0, "FILE", "router trace of hsq-decode --trace for this hsq snapshot: hit rates, top groups, heatmap",
	  OPT_TRACE },
	{ "top", 0, "N", "--trace: how many of the most fetched groups to show (default 10)", OPT_TOP },
	{ "svg", 0, "FILE", "--trace: also write the fetch heatmap as a standalone SVG image", OPT_SVG },
	{ "model", 'm', "FILE", "GGUF model for --text and --trace (default: $HSQ_MODEL or the installed default)", 'm' },
	{ 0 },
};

#define HEAT_COLS 64
static const char HEAT_CHARS[] = " .:-=+*#%@";

/* Snapshot problems exit 5 (hsq(7)); out of memory and bugs exit 1. */
static int exit_code(hsq_status st)
{
	return st == HSQ_ERR_NOMEM || st == HSQ_ERR_INTERNAL ? EXIT_FAILURE_RUNTIME : EXIT_SNAPSHOT;
}

static int is_tiered(uint32_t mode)
{
	return mode >= HSQ_MODE_QUANT && mode <= HSQ_MODE_SNAPKV;
}

static const char *mode_name(uint32_t mode)
{
	return mode >= HSQ_MODE_FULL && mode <= HSQ_MODE_SNAPKV ? hsq_mode_name((hsq_snapshot_mode)mode) : "unknown";
}

static const char *codec_name(uint32_t codec)
{
	return codec == 0 ? "raw" : codec == 1 ? "zstd" : "unknown";
}

static const char *checksum_word(int ok)
{
	return ok > 0 ? "ok" : ok == 0 ? "BAD" : "-";
}

static const char *class_name(int c)
{
	return c == HSQ_GROUP_MEDIUM ? "medium" : "low";
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	return p;
}

/* "19.4 MiB": binary units, three significant digits. */
static const char *human(char *buf, size_t cap, uint64_t bytes)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return buf;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* One line of text, at most `width` characters shown: control characters,
 * C1 controls and invalid UTF-8 bytes escaped (\n, \t, \xNN, \u0085),
 * quotes and backslashes escaped, "..." when cut. */
static void print_line_text(FILE *out, const char *s, size_t n, int width)
{
	int shown = 0;
	fputc('"', out);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = cli_utf8_len(s + i, n - i);
		char esc[16];
		int w;
		if (!len) {
			w = snprintf(esc, sizeof esc, "\\x%02x", c);
			len = 1;
		} else if (len == 2 && c == 0xc2 && (unsigned char)s[i + 1] < 0xa0) {
			w = snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)s[i + 1]);
		} else if (len > 1) {
			w = 1;
			esc[0] = '\0';
		} else if (c == '\n') {
			w = snprintf(esc, sizeof esc, "\\n");
		} else if (c == '\t') {
			w = snprintf(esc, sizeof esc, "\\t");
		} else if (c == '\r') {
			w = snprintf(esc, sizeof esc, "\\r");
		} else if (c == '"' || c == '\\') {
			w = snprintf(esc, sizeof esc, "\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			w = snprintf(esc, sizeof esc, "\\x%02x", c);
		} else {
			w = 1;
			esc[0] = (char)c;
			esc[1] = '\0';
		}
		if (shown + w > width) {
			fputs("\"...", out);
			return;
		}
		if (esc[0])
			fputs(esc, out);
		else
			fwrite(s + i, 1, len, out);
		shown += w;
		i += len;
	}
	fputc('"', out);
}

static const hsq_snapshot_section_info *find(const hsq_snapshot_info *info, const char *name)
{
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++)
		if (!strcmp(info->sections[i].name, name))
			return &info->sections[i];
	return NULL;
}

/* Detokenizes every token into one malloc'ed UTF-8 string (exits on error). */
static char *detokenize(const hsq_model *model, const hsq_token *toks, size_t n, size_t *len)
{
	size_t cap = 4096, used = 0;
	char *text = malloc(cap);
	hsq_detok state = { 0 };
	for (size_t i = 0; i <= n; i++) {
		char piece[1024];
		size_t got;
		if (i < n) {
			hsq_status st = hsq_detok_push(model, &state, toks[i], piece, sizeof piece, &got);
			if (st) {
				free(text);
				cli_die_status(PROG, EXIT_FAILURE_RUNTIME, st);
			}
		} else {
			got = hsq_detok_flush(&state, piece, sizeof piece);
		}
		while (text && used + got + 1 > cap) {
			cap *= 2;
			char *grown = realloc(text, cap);
			if (!grown)
				free(text);
			text = grown;
		}
		if (!text)
			cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		memcpy(text + used, piece, got);
		used += got;
	}
	text[used] = '\0';
	*len = used;
	return text;
}

/* ------------------------------------------------------------- tiers */

typedef struct tier_sum {
	int64_t n_l1, n_group, n_low, n_medium, n_l3;
	uint64_t l1_bytes, l2_bytes, l3_bytes, l3_stored;
} tier_sum;

static void tier_add(tier_sum *s, const hsq_tier_head_info *h)
{
	s->n_l1 += h->n_l1;
	s->n_group += h->n_group;
	s->n_medium += h->n_medium;
	s->n_low += h->n_group - h->n_medium;
	s->n_l3 += h->n_l3;
	s->l1_bytes += h->l1_bytes;
	s->l2_bytes += h->l2_bytes;
	s->l3_bytes += h->l3_bytes;
	s->l3_stored += h->l3_stored;
}

/* The library checks the tier tables against each other; the positions
 * the tool indexes the token array with are checked here. */
static void check_tiers(const hsq_tier_map *map, const hsq_snapshot_info *info, const char *path)
{
	if (map->n_layer != info->n_layer || map->n_head_kv != info->n_head_kv || map->n_tokens != info->n_tokens)
		cli_die(PROG, EXIT_SNAPSHOT, "%s: the tier tables disagree with the header (%d layers, %d kv heads, %d tokens); the file is damaged",
			path, info->n_layer, info->n_head_kv, info->n_tokens);
	for (int i = 0; i < map->n_layer * map->n_head_kv; i++) {
		const hsq_tier_head_info *h = &map->heads[i];
		if (h->n_medium < 0 || h->n_medium > h->n_group)
			cli_die(PROG, EXIT_SNAPSHOT, "%s: layer %d head %d has %d medium groups of %d; the file is damaged", path,
				h->layer, h->head, h->n_medium, h->n_group);
		for (int g = 0; g < h->n_group; g++)
			if (h->g_first[g] < 0 || h->g_first[g] > h->g_last[g] || h->g_last[g] >= map->n_tokens ||
			    h->g_class[g] > HSQ_GROUP_MEDIUM)
				cli_die(PROG, EXIT_SNAPSHOT,
					"%s: group %d of layer %d head %d (positions %d..%d) is outside the %d tokens; the file is damaged",
					path, g, h->layer, h->head, (int)h->g_first[g], (int)h->g_last[g], map->n_tokens);
	}
}

/* ------------------------------------------------------------- trace */

typedef struct head_trace {
	int64_t lines;     /* trace lines (steps) of this head */
	int64_t fetched;   /* fetches of snapshot groups over those lines */
	int64_t online;    /* fetches of groups made online during the decode */
	double rate_sum;   /* sum over lines of fetched / n_group */
	int last_pos;      /* -1 before the first line */
	int64_t last_line; /* file line of last_pos */
	uint32_t *count;   /* [n_group] lines that fetched each group */
	int64_t *stamp;    /* [n_group] last file line that fetched it */
} head_trace;

typedef struct trace_top {
	int layer, head, group;
	uint32_t count;
} trace_top;

typedef struct trace_report {
	const char *path;
	int64_t lines, steps; /* data lines; most lines of one head */
	int first_pos, last_pos;
	head_trace *heads;    /* [n_layer * n_head_kv] */
	int64_t n_fetched_groups; /* (layer, head, group) fetched at least once */
	int64_t online;       /* fetches of groups made online, all heads */
	int *ids;             /* scratch: the online group ids of one line */
	size_t cap_ids;
	trace_top *top;
	int n_top;
	char **top_text;      /* [n_top] detokenized, or NULL without a model */
	size_t *top_len;
	char text_note[600];  /* why positions stand in for text, or "" */
	int cols;
	int *col_first;       /* [cols + 1] first position of each column */
	double *heat;         /* [n_layer * cols] share of the cell's tokens fetched per line */
	double heat_max;
} trace_report;

static void trace_fail(const char *path, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void trace_fail(const char *path, int64_t line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cli_die(PROG, EXIT_INPUT, "%s:%lld: %s", strcmp(path, "-") ? path : "standard input", (long long)line, msg);
}

/* A decimal integer 0..999999999 at *p (before end); advances *p. */
static int parse_uint(const char **p, const char *end, int *out)
{
	const char *s = *p;
	long v = 0;
	int n = 0;
	while (s < end && *s >= '0' && *s <= '9') {
		if (++n > 9)
			return 0;
		v = v * 10 + (*s++ - '0');
	}
	if (!n)
		return 0;
	*p = s;
	*out = (int)v;
	return 1;
}

/* The field at *p up to a blank or end, for messages. */
static void field_word(const char *p, const char *end, char *buf, size_t cap)
{
	size_t n = 0;
	while (p + n < end && p[n] != ' ' && p[n] != '\t' && n < 24)
		n++;
	snprintf(buf, cap, "%.*s%s", (int)n, p, p + n < end && p[n] != ' ' && p[n] != '\t' ? "..." : "");
	for (char *q = buf; *q; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q >= 0x7f)
			*q = '?';
}

static void group_list_fail(const char *path, int64_t ln, const char *p, const char *end) __attribute__((noreturn));
static void group_list_fail(const char *path, int64_t ln, const char *p, const char *end)
{
	char word[40];
	if (p >= end || *p == ' ' || *p == '\t')
		trace_fail(path, ln, "the group list ends with a comma: expected group ids separated by commas, or '-'");
	field_word(p, end, word, sizeof word);
	trace_fail(path, ln, "bad group list at '%s': expected group ids separated by commas, or '-'", word);
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Groups a decode from the snapshot can have added to a head by the time
 * it attends at position pos (online compression: once the tail of new
 * tokens holds the recent window and a group more, its oldest group_size
 * tokens become a low group, on the global layers of an hsq context). */
static int online_groups(const hsq_tier_map *map, const hsq_tier_head_info *h, int pos)
{
	int gs = map->params.group_size, tail = pos - map->n_tokens;
	if (map->mode != HSQ_MODE_HSQ || h->window || gs <= 0 || tail < map->params.window)
		return 0;
	return (tail - map->params.window) / gs;
}

static void parse_trace_line(trace_report *tr, const hsq_tier_map *map, const char *s, const char *e, int64_t ln)
{
	const char *path = tr->path;
	const char *names[3] = { "position", "layer", "head" };
	int v[3];
	char word[40];
	const char *p = s;
	for (int f = 0; f < 3; f++) {
		if (p >= e)
			trace_fail(path, ln, "%d fields, expected 4 (position, layer, head, fetched groups separated by tabs)", f);
		if (!parse_uint(&p, e, &v[f]) || (p < e && *p != ' ' && *p != '\t')) {
			field_word(p, e, word, sizeof word);
			trace_fail(path, ln, "the %s '%s' is not a whole number from 0 to 999999999", names[f], word);
		}
		p = skip_blanks(p, e);
	}
	if (p >= e)
		trace_fail(path, ln, "3 fields, expected 4 (the fetched groups are missing; '-' when none)");
	int pos = v[0], layer = v[1], head = v[2];
	if (layer >= map->n_layer)
		trace_fail(path, ln, "layer %d is out of range: the snapshot has %d layers (0..%d); was the trace written for this snapshot?",
			   layer, map->n_layer, map->n_layer - 1);
	if (head >= map->n_head_kv)
		trace_fail(path, ln, "head %d is out of range: the snapshot has %d kv heads (0..%d); was the trace written for this snapshot?",
			   head, map->n_head_kv, map->n_head_kv - 1);
	if (pos < map->n_tokens)
		trace_fail(path, ln, "position %d is inside the snapshot's %d tokens, but a decode from it starts at position %d; was the trace written for this snapshot?",
			   pos, map->n_tokens, map->n_tokens);
	const hsq_tier_head_info *h = &map->heads[layer * map->n_head_kv + head];
	head_trace *ht = &tr->heads[layer * map->n_head_kv + head];
	if (pos <= ht->last_pos)
		trace_fail(path, ln, "position %d of layer %d head %d comes after position %d (line %lld); positions of one head must increase (two traces joined?)",
			   pos, layer, head, ht->last_pos, (long long)ht->last_line);
	int n = 0;
	size_t n_online = 0;
	if (*p == '-' && (p + 1 == e || p[1] == ' ' || p[1] == '\t')) {
		p++;
	} else {
		for (;;) {
			int g;
			if (!parse_uint(&p, e, &g))
				group_list_fail(path, ln, p, e);
			if (g < h->n_group) {
				if (ht->stamp[g] == ln)
					trace_fail(path, ln, "group %d is listed twice", g);
				ht->stamp[g] = ln;
				ht->count[g]++;
				n++;
			} else if (g - h->n_group < online_groups(map, h, pos)) {
				if (n_online == tr->cap_ids) {
					size_t cap = tr->cap_ids ? 2 * tr->cap_ids : 64;
					int *grown = realloc(tr->ids, cap * sizeof *grown);
					if (!grown)
						cli_die(PROG, EXIT_FAILURE_RUNTIME, "out of memory reading %s", path);
					tr->ids = grown;
					tr->cap_ids = cap;
				}
				tr->ids[n_online++] = g;
			} else {
				trace_fail(path, ln, "group %d of layer %d head %d is out of range: the snapshot has %d groups there "
					   "and a decode can have added %d by position %d; was the trace written for this snapshot?",
					   g, layer, head, h->n_group, online_groups(map, h, pos), pos);
			}
			if (p < e && *p == ',') {
				p++;
				continue;
			}
			if (p < e && *p != ' ' && *p != '\t')
				group_list_fail(path, ln, p, e);
			break;
		}
	}
	if (skip_blanks(p, e) != e)
		trace_fail(path, ln, "more than 4 fields (position, layer, head, fetched groups)");
	if (n_online > 1)
		qsort(tr->ids, n_online, sizeof *tr->ids, int_cmp);
	for (size_t i = 1; i < n_online; i++)
		if (tr->ids[i] == tr->ids[i - 1])
			trace_fail(path, ln, "group %d is listed twice", tr->ids[i]);
	ht->online += (int64_t)n_online;
	tr->online += (int64_t)n_online;
	ht->lines++;
	ht->fetched += n;
	if (h->n_group)
		ht->rate_sum += (double)n / h->n_group;
	ht->last_pos = pos;
	ht->last_line = ln;
	if (!tr->lines || pos < tr->first_pos)
		tr->first_pos = pos;
	if (!tr->lines || pos > tr->last_pos)
		tr->last_pos = pos;
	tr->lines++;
}

static int top_cmp(const void *a, const void *b)
{
	const trace_top *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->layer != y->layer)
		return x->layer - y->layer;
	if (x->head != y->head)
		return x->head - y->head;
	return x->group - y->group;
}

/* Reads and checks the trace (exits 4 naming the line at fault), then
 * computes the most fetched groups and the heatmap. */
static void read_trace(trace_report *tr, const hsq_tier_map *map, const char *path, int top_n)
{
	int H = map->n_head_kv, n_heads = map->n_layer * H;
	size_t len;
	char *buf = cli_read_all(PROG, path, &len);
	memset(tr, 0, sizeof *tr);
	tr->path = path;
	tr->heads = xcalloc((size_t)n_heads, sizeof *tr->heads);
	for (int i = 0; i < n_heads; i++) {
		tr->heads[i].last_pos = -1;
		tr->heads[i].count = xcalloc((size_t)map->heads[i].n_group, sizeof *tr->heads[i].count);
		tr->heads[i].stamp = xcalloc((size_t)map->heads[i].n_group, sizeof *tr->heads[i].stamp);
	}
	const char *nul = memchr(buf, '\0', len);
	int64_t ln = 0;
	for (const char *s = buf, *end = buf + len; s < end;) {
		const char *e = memchr(s, '\n', (size_t)(end - s));
		const char *next = e ? e + 1 : end;
		if (!e)
			e = end;
		ln++;
		if (nul && nul >= s && nul < e)
			trace_fail(path, ln, "the line holds a NUL byte: not a trace of hsq-decode --trace");
		if (e > s && e[-1] == '\r')
			e--;
		if (e - s > (1 << 20))
			trace_fail(path, ln, "the line is longer than 1 MiB: not a trace of hsq-decode --trace");
		if (s < e && *s == '#') {
			static const char magic[] = "# hsq trace ";
			size_t m = sizeof magic - 1;
			char word[40];
			if ((size_t)(e - s) > m && !memcmp(s, magic, m) && !(s[m] == '1' && (s + m + 1 == e || s[m + 1] == ':'))) {
				field_word(s + m, e, word, sizeof word);
				trace_fail(path, ln, "trace format '%s' is not supported (this hsq reads '# hsq trace 1'); upgrade hsq",
					   word);
			}
		} else if (skip_blanks(s, e) != e) {
			parse_trace_line(tr, map, s, e, ln);
		}
		s = next;
	}
	free(buf);
	if (!tr->lines)
		cli_die(PROG, EXIT_INPUT, "%s holds no trace lines; write one with hsq-decode -s SNAPSHOT --trace FILE",
			strcmp(path, "-") ? path : "standard input");

	/* Most fetched groups: every (layer, head, group) fetched at least once. */
	for (int i = 0; i < n_heads; i++) {
		if (tr->heads[i].lines > tr->steps)
			tr->steps = tr->heads[i].lines;
		for (int g = 0; g < map->heads[i].n_group; g++)
			tr->n_fetched_groups += tr->heads[i].count[g] > 0;
	}
	trace_top *all = xcalloc((size_t)tr->n_fetched_groups, sizeof *all);
	size_t k = 0;
	for (int i = 0; i < n_heads; i++)
		for (int g = 0; g < map->heads[i].n_group; g++)
			if (tr->heads[i].count[g])
				all[k++] = (trace_top){ i / H, i % H, g, tr->heads[i].count[g] };
	qsort(all, k, sizeof *all, top_cmp);
	tr->top = all;
	tr->n_top = (int)(k < (size_t)top_n ? k : (size_t)top_n);

	/* Heatmap: each fetch adds its group's tokens to the columns they fall
	 * in; a cell is the share of its tokens fetched per line of the layer. */
	int n = map->n_tokens;
	tr->cols = n < HEAT_COLS ? n : HEAT_COLS;
	if (tr->cols < 1)
		tr->cols = 1;
	tr->col_first = xcalloc((size_t)tr->cols + 1, sizeof *tr->col_first);
	for (int c = 0; c <= tr->cols; c++)
		tr->col_first[c] = (int)(((int64_t)c * n + tr->cols - 1) / tr->cols);
	tr->heat = xcalloc((size_t)map->n_layer * tr->cols, sizeof *tr->heat);
	for (int l = 0; l < map->n_layer; l++) {
		double *row = tr->heat + (size_t)l * tr->cols;
		int64_t lines = 0;
		for (int h = 0; h < H; h++) {
			const hsq_tier_head_info *hi = &map->heads[l * H + h];
			const head_trace *ht = &tr->heads[l * H + h];
			lines += ht->lines;
			for (int g = 0; g < hi->n_group; g++) {
				if (!ht->count[g])
					continue;
				for (int p = hi->g_first[g]; p <= hi->g_last[g];) {
					int c = (int)((int64_t)p * tr->cols / n);
					int stop = tr->col_first[c + 1] - 1 < hi->g_last[g] ? tr->col_first[c + 1] - 1 : hi->g_last[g];
					row[c] += (double)ht->count[g] * (stop - p + 1);
					p = stop + 1;
				}
			}
		}
		for (int c = 0; c < tr->cols; c++) {
			int width = tr->col_first[c + 1] - tr->col_first[c];
			row[c] = lines && width ? row[c] / ((double)width * lines) : 0.0;
			if (row[c] > tr->heat_max)
				tr->heat_max = row[c];
		}
	}
}

static void trace_free(trace_report *tr, const hsq_tier_map *map)
{
	if (!tr->heads)
		return;
	for (int i = 0; i < map->n_layer * map->n_head_kv; i++) {
		free(tr->heads[i].count);
		free(tr->heads[i].stamp);
	}
	if (tr->top_text)
		for (int i = 0; i < tr->n_top; i++)
			free(tr->top_text[i]);
	free(tr->top_text);
	free(tr->top_len);
	free(tr->heads);
	free(tr->ids);
	free(tr->top);
	free(tr->col_first);
	free(tr->heat);
}

/* The text each of the top groups covers (positions first..last). */
static void trace_texts(trace_report *tr, const hsq_tier_map *map, const hsq_model *model, const hsq_token *toks)
{
	tr->top_text = xcalloc((size_t)tr->n_top, sizeof *tr->top_text);
	tr->top_len = xcalloc((size_t)tr->n_top, sizeof *tr->top_len);
	for (int i = 0; i < tr->n_top; i++) {
		const trace_top *t = &tr->top[i];
		const hsq_tier_head_info *h = &map->heads[t->layer * map->n_head_kv + t->head];
		int a = h->g_first[t->group], z = h->g_last[t->group];
		tr->top_text[i] = detokenize(model, toks + a, (size_t)(z - a + 1), &tr->top_len[i]);
	}
}

static double heat_at(const trace_report *tr, int layer, int col)
{
	return tr->heat[(size_t)layer * tr->cols + col];
}

static char heat_char(double v, double max)
{
	if (!(v > 0) || !(max > 0))
		return HEAT_CHARS[0];
	int i = 1 + (int)(v / max * 8.999);
	return HEAT_CHARS[i > 9 ? 9 : i];
}

/* YlGnBu, light to dark. */
static void heat_colour(double t, char *buf, size_t cap)
{
	static const unsigned stops[] = { 0xffffd9, 0xedf8b1, 0xc7e9b4, 0x7fcdbb, 0x41b6c4,
					  0x1d91c0, 0x225ea8, 0x253494, 0x081d58 };
	const int n = (int)(sizeof stops / sizeof *stops) - 1;
	t = t < 0 ? 0 : t > 1 ? 1 : t;
	double x = t * n;
	int i = (int)x < n ? (int)x : n - 1;
	double f = x - i;
	unsigned a = stops[i], b = stops[i + 1], rgb[3];
	for (int c = 0; c < 3; c++) {
		double ca = (a >> (16 - 8 * c)) & 0xff, cb = (b >> (16 - 8 * c)) & 0xff;
		rgb[c] = (unsigned)lround(ca + (cb - ca) * f);
	}
	snprintf(buf, cap, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

/* The heatmap as a standalone SVG: one rect per (layer, column) cell. */
static void write_svg(const char *svg_path, const trace_report *tr, const hsq_tier_map *map, const char *snap)
{
	FILE *f = fopen(svg_path, "w");
	if (!f)
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write the SVG %s: %s", svg_path, strerror(errno));
	const int cw = 10, ch = 12, left = 70, top = 56, bar_w = 16;
	int grid_w = tr->cols * cw, grid_h = map->n_layer * ch;
	int width = left + grid_w + 110, height = top + grid_h + 64;
	char colour[16];
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	svg_begin(f, width, height, 11, 1);
	fprintf(f, "<title>hsq router fetches: ");
	svg_text(f, snap);
	fprintf(f, "</title>\n");
	svg_background(f, "#ffffff");
	fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">Router fetches by layer and position</text>\n", left);
	fprintf(f, "<text x=\"%d\" y=\"38\">", left);
	svg_text(f, snap);
	fprintf(f, ", trace ");
	svg_text(f, tr->path);
	fprintf(f, ": %lld steps (positions %d..%d)</text>\n", (long long)tr->steps, tr->first_pos, tr->last_pos);
	fprintf(f, "<g shape-rendering=\"crispEdges\">\n");
	for (int l = 0; l < map->n_layer; l++)
		for (int c = 0; c < tr->cols; c++) {
			double v = heat_at(tr, l, c);
			heat_colour(tr->heat_max > 0 ? v / tr->heat_max : 0, colour, sizeof colour);
			fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>layer %d, positions %d..%d: %.4f</title></rect>\n",
				left + c * cw, top + l * ch, cw, ch, colour, l, tr->col_first[c], tr->col_first[c + 1] - 1, v);
		}
	fprintf(f, "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444444\"/>\n", left, top,
		grid_w, grid_h);
	/* Axes: layer ticks on the left, position ticks below. */
	int step = map->n_layer > 10 ? (map->n_layer + 9) / 10 : 1;
	for (int l = 0; l < map->n_layer; l += step)
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%d</text>\n", left - 4, top + l * ch + ch - 2, l);
	for (int k = 0; k <= 4; k++) {
		int c = k * tr->cols / 4, x = left + c * cw;
		int p = c < tr->cols ? tr->col_first[c] : map->n_tokens;
		fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444444\"/>\n", x, top + grid_h, x, top + grid_h + 4);
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, top + grid_h + 16, p);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">document position (token)</text>\n", left + grid_w / 2,
		top + grid_h + 34);
	fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">layer</text>\n", 22,
		top + grid_h / 2);
	/* Colour scale. */
	int bx = left + grid_w + 24;
	fprintf(f, "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n");
	for (int k = 0; k <= 8; k++) {
		heat_colour(k / 8.0, colour, sizeof colour);
		fprintf(f, "<stop offset=\"%.3f\" stop-color=\"%s\"/>\n", k / 8.0, colour);
	}
	fprintf(f, "</linearGradient></defs>\n");
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#scale)\" stroke=\"#444444\"/>\n", bx, top,
		bar_w, grid_h);
	fprintf(f, "<text x=\"%d\" y=\"%d\">%.3f</text>\n", bx + bar_w + 4, top + 9, tr->heat_max);
	fprintf(f, "<text x=\"%d\" y=\"%d\">0</text>\n", bx + bar_w + 4, top + grid_h);
	fprintf(f, "<text x=\"%d\" y=\"%d\">share of the cell's tokens fetched per step and head</text>\n", left,
		top + grid_h + 52);
	svg_end(f);
	if (ferror(f) | (fclose(f) != 0))
		cli_die(PROG, EXIT_FAILURE_RUNTIME, "cannot write the SVG %s: %s", svg_path, strerror(errno));
}

/* -------------------------------------------------------------- output */

typedef struct report {
	const char *path;
	const hsq_snapshot_info *info;
	const hsq_tier_map *map; /* tiered snapshots */
	const trace_report *trace;
	const hsq_token *toks;
	size_t n_toks;
	const char *text;
	size_t text_len;
	int verified, show_tokens, per_head;
} report;

static void print_tier_row(const char *label, const tier_sum *s, int window, int any_window)
{
	char b1[32], b2[32], b3[32], b4[32];
	printf("  %-10s %8lld %8lld %8lld %8lld %11s %11s %11s %11s", label, (long long)s->n_l1, (long long)s->n_low,
	       (long long)s->n_medium, (long long)s->n_l3, human(b1, sizeof b1, s->l1_bytes),
	       human(b2, sizeof b2, s->l2_bytes), human(b3, sizeof b3, s->l3_bytes), human(b4, sizeof b4, s->l3_stored));
	if (any_window) {
		if (window)
			printf(" %7d", window);
		else
			printf(" %7s", "-");
	}
	printf("\n");
}

/* The default retrieval heads, as the library marks them, best first. */
static void print_retrieval(const hsq_tier_map *m)
{
	int n = m->n_layer * m->n_head_kv, shown = 0;
	float last = INFINITY;
	int last_i = -1;
	printf("retrieval:  ");
	for (;; shown++) { /* selection: the next marked head below (last, last_i) */
		int best = -1;
		for (int i = 0; i < n; i++) {
			float v = m->heads[i].induction;
			if (!m->heads[i].retrieval || v > last || (v == last && i <= last_i))
				continue;
			if (best < 0 || v > m->heads[best].induction)
				best = i;
		}
		if (best < 0)
			break;
		printf("%s%d.%d %.3f", shown ? ", " : "", m->heads[best].layer, m->heads[best].head,
		       (double)m->heads[best].induction);
		last = m->heads[best].induction;
		last_i = best;
	}
	int n_res = 0;
	for (int i = 0; i < n; i++)
		n_res += m->heads[i].residual;
	if (shown)
		printf(" (layer.head induction; the %d head%s hsq-decode fetches in full by default)\n", shown,
		       shown == 1 ? "" : "s");
	else
		printf("none (no head has an induction score; a format 1.1 snapshot stores none)\n");
	if (n_res)
		printf("residual:   %d head%s keep a second 4-bit code of each key's error (section keys.residual)\n",
		       n_res, n_res == 1 ? "" : "s");
	else if (shown)
		printf("residual:   none (every key decodes from its 4-bit code)\n");
}

static int has_calibration(const hsq_tier_map *m)
{
	for (int i = 0; i < 32; i++)
		if (m->calibration_sha256[i])
			return 1;
	return 0;
}

static void sha_hex(const uint8_t *b, char *out)
{
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* A calibration file (hsq-calibration(5)) instead of a snapshot: its
 * model, its reader and the info it records, or that as JSON. */
static int is_calibration(const char *path)
{
	static const char magic[12] = "\x89HSQ-CAL\r\n\x1a\n";
	char head[12];
	/* without blocking on a FIFO, and only for a regular file: anything
	 * else is left to the snapshot reader, which says what is wrong */
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof head) : -1;
	close(fd);
	return n == (ssize_t)sizeof head && !memcmp(head, magic, sizeof head);
}

static void print_calibration(const char *path, int json)
{
	hsq_calibration *cal;
	hsq_status st = hsq_calibration_load(path, NULL, &cal);
	if (st)
		cli_die_status(PROG, exit_code(st), st);
	hsq_calibration_info ci;
	hsq_calibration_get_info(cal, &ci);
	char sha[65], id[65];
	sha_hex(ci.sha256, sha);
	sha_hex(ci.model_identity, id);
	if (json) {
		printf("{\"file\":");
		json_fstr(stdout, path, JSON_ESC_SHORT);
		printf(",\"kind\":\"calibration\",\"format\":\"%d.%d\",\"file_size\":%llu,\"sha256\":\"%s\",\"model\":{\"name\":",
		       ci.version_major, ci.version_minor, (unsigned long long)ci.file_size, sha);
		json_fstr(stdout, ci.model_name, JSON_ESC_SHORT);
		printf(",\"architecture\":");
		json_fstr(stdout, ci.model_arch, JSON_ESC_SHORT);
		printf(",\"identity\":\"%s\"},\"reader\":{\"layer\":%d,\"hidden\":%d,\"params\":%d,\"prior\":\"%s\"},\"info\":",
		       id, ci.reader_layer, ci.reader_hidden, ci.reader_params, ci.reader_prior ? "obs-attention" : "none");
		json_fstr(stdout, ci.info, JSON_ESC_SHORT);
		printf("}\n");
	} else {
		printf("file:       %s\n", path);
		printf("kind:       calibration (hsq-calibration(5)), format %d.%d, %llu bytes\n", ci.version_major,
		       ci.version_minor, (unsigned long long)ci.file_size);
		printf("sha256:     %s\n", sha);
		printf("model:      %s (%s), identity %.16s...\n", ci.model_name[0] ? ci.model_name : "unnamed",
		       ci.model_arch, id);
		printf("reader:     reads layer %d; hidden layer of %d; %d trained numbers; %s\n", ci.reader_layer,
		       ci.reader_hidden, ci.reader_params,
		       ci.reader_prior ? "corrects the obs-attention reader's guess" : "a guess of its own");
		printf("info:\n");
		const char *s = ci.info;
		while (*s) {
			const char *e = strchr(s, '\n');
			size_t n = e ? (size_t)(e - s) : strlen(s);
			printf("  %.*s\n", (int)n, s);
			s += n + (e != NULL);
		}
	}
	hsq_calibration_free(cal);
}

static void print_tiers(const report *r)
{
	const hsq_tier_map *m = r->map;
	const hsq_tier_params *p = &m->params;
	char b1[32], b2[32], b3[32];
	tier_sum tot = { 0 };
	int any_window = 0, H = m->n_head_kv;
	for (int i = 0; i < m->n_layer * H; i++) {
		tier_add(&tot, &m->heads[i]);
		any_window |= m->heads[i].window != 0;
	}
	printf("tiers:      reader %s, compressor %s\n", m->reader, m->compressor);
	if (has_calibration(m)) {
		char h[65];
		sha_hex(m->calibration_sha256, h);
		printf("calibration: sha256 %s\n", h);
	}
	printf("params:     sinks %d, window %d, l1-fraction %g, group-size %d, medium-fraction %g, obs-window %d, seed %llu, key-rounding %s",
	       p->sinks, p->window, p->l1_fraction, p->group_size, p->medium_fraction, p->obs_window,
	       (unsigned long long)p->seed, hsq_key_rounding_name(p->key_rounding));
	if (m->mode == HSQ_MODE_STREAMING || m->mode == HSQ_MODE_SNAPKV)
		printf(", keep %d%s", p->keep, p->keep ? "" : " (the bytes of hsq's fast tier)");
	printf("\n");
	printf("L1:         %lld tokens, %s\n", (long long)tot.n_l1, human(b1, sizeof b1, tot.l1_bytes));
	printf("L2:         %lld groups (%lld low of %d tokens, %lld medium of %d), %s\n", (long long)tot.n_group,
	       (long long)tot.n_low, p->group_size, (long long)tot.n_medium, p->group_size / 2,
	       human(b1, sizeof b1, tot.l2_bytes));
	printf("L3:         %lld tokens, %s (%s as stored, zstd)\n", (long long)tot.n_l3, human(b1, sizeof b1, tot.l3_bytes),
	       human(b2, sizeof b2, tot.l3_stored));
	uint64_t fp16 = m->fp16_kv_bytes, fast = tot.l1_bytes + tot.l2_bytes;
	printf("vs fp16:    full cache at fp16 %s; fast tier (L1+L2) %s: %.4fx\n", human(b1, sizeof b1, fp16),
	       human(b2, sizeof b2, fast), ratio(fast, fp16));
	printf("            fast tier + archive (L1+L2+L3) %s: %.4fx (%.4fx with L3 as stored, zstd)\n",
	       human(b3, sizeof b3, fast + tot.l3_bytes), ratio(fast + tot.l3_bytes, fp16), ratio(fast + tot.l3_stored, fp16));
	printf("            file %s: %.4fx\n", human(b1, sizeof b1, r->info->file_size), ratio(r->info->file_size, fp16));
	if (m->mode == HSQ_MODE_HSQ)
		print_retrieval(m);
}

static void print_tier_table(const report *r)
{
	const hsq_tier_map *m = r->map;
	int H = m->n_head_kv, any_window = 0;
	for (int i = 0; i < m->n_layer * H; i++)
		any_window |= m->heads[i].window != 0;
	if (r->per_head)
		printf("tier layout per layer and kv head:\n");
	else
		printf("tier layout per layer (%d kv heads summed; --heads for one row per head):\n", H);
	printf("  %-10s %8s %8s %8s %8s %11s %11s %11s %11s%s\n", r->per_head ? "layer.head" : "layer", "L1 tok", "L2 low",
	       "L2 med", "L3 tok", "L1 bytes", "L2 bytes", "L3 bytes", "L3 stored", any_window ? "  window" : "");
	tier_sum tot = { 0 };
	for (int l = 0; l < m->n_layer; l++) {
		tier_sum s = { 0 };
		char label[32];
		for (int h = 0; h < H; h++) {
			const hsq_tier_head_info *hi = &m->heads[l * H + h];
			tier_add(&tot, hi);
			if (r->per_head) {
				tier_sum one = { 0 };
				tier_add(&one, hi);
				snprintf(label, sizeof label, "%d.%d", l, h);
				print_tier_row(label, &one, hi->window, any_window);
			} else {
				tier_add(&s, hi);
			}
		}
		if (!r->per_head) {
			snprintf(label, sizeof label, "%d", l);
			print_tier_row(label, &s, m->heads[l * H].window, any_window);
		}
	}
	print_tier_row("total", &tot, 0, any_window);
}

static void print_trace(const report *r)
{
	const trace_report *tr = r->trace;
	const hsq_tier_map *m = r->map;
	int H = m->n_head_kv;
	int64_t groups_all = 0, fetched_all = 0, covered_all = 0, lines_all = 0;
	double rate_all = 0;
	for (int i = 0; i < m->n_layer * H; i++) {
		groups_all += m->heads[i].n_group;
		fetched_all += tr->heads[i].fetched;
		rate_all += tr->heads[i].rate_sum;
		lines_all += m->heads[i].n_group ? tr->heads[i].lines : 0;
	}
	covered_all = tr->n_fetched_groups;
	printf("trace:      %s: %lld lines, %lld steps (positions %d..%d), %.1f groups fetched per line\n", tr->path,
	       (long long)tr->lines, (long long)tr->steps, tr->first_pos, tr->last_pos,
	       tr->lines ? (double)fetched_all / (double)tr->lines : 0.0);
	if (tr->online)
		printf("online:     %lld fetches of groups the decode made from its own tokens (not in the snapshot: "
		       "left out of the rates, top groups and heatmap)\n", (long long)tr->online);
	printf("router:     hit rate %.1f%% (groups fetched / groups, mean over lines); coverage %.1f%% "
	       "(groups fetched at least once)\n",
	       lines_all ? 100.0 * rate_all / (double)lines_all : 0.0,
	       groups_all ? 100.0 * (double)covered_all / (double)groups_all : 0.0);
	printf("router hits per %s:\n", r->per_head ? "layer and kv head" : "layer (kv heads pooled; --heads for one row per head)");
	printf("  %-10s %7s %7s %8s %9s %9s\n", r->per_head ? "layer.head" : "layer", "lines", "groups", "fetched",
	       "hit rate", "coverage");
	for (int l = 0; l < m->n_layer; l++) {
		int64_t lines = 0, groups = 0, fetched = 0, covered = 0, rated = 0;
		double rate = 0;
		for (int h = 0; h < H; h++) {
			const hsq_tier_head_info *hi = &m->heads[l * H + h];
			const head_trace *ht = &tr->heads[l * H + h];
			int64_t cov = 0;
			for (int g = 0; g < hi->n_group; g++)
				cov += ht->count[g] > 0;
			if (r->per_head) {
				char label[32];
				snprintf(label, sizeof label, "%d.%d", l, h);
				printf("  %-10s %7lld %7d %8.1f", label, (long long)ht->lines, hi->n_group,
				       ht->lines ? (double)ht->fetched / (double)ht->lines : 0.0);
				if (hi->n_group && ht->lines)
					printf(" %8.1f%% %8.1f%%\n", 100.0 * ht->rate_sum / (double)ht->lines,
					       100.0 * (double)cov / hi->n_group);
				else
					printf(" %9s %9s\n", "-", "-");
			}
			lines += ht->lines;
			groups += hi->n_group;
			fetched += ht->fetched;
			covered += cov;
			rate += ht->rate_sum;
			rated += hi->n_group ? ht->lines : 0;
		}
		if (!r->per_head) {
			printf("  %-10d %7lld %7lld %8.1f", l, (long long)lines, (long long)groups,
			       lines ? (double)fetched / (double)lines : 0.0);
			if (groups && rated)
				printf(" %8.1f%% %8.1f%%\n", 100.0 * rate / (double)rated, 100.0 * (double)covered / (double)groups);
			else
				printf(" %9s %9s\n", "-", "-");
		}
	}
	printf("most fetched groups (top %d of %lld fetched; share: of the head's lines):\n", tr->n_top,
	       (long long)tr->n_fetched_groups);
	if (tr->text_note[0])
		printf("  (positions instead of text: %s)\n", tr->text_note);
	printf("  %5s %4s %5s %-6s %7s %6s %11s%s\n", "layer", "head", "group", "class", "fetches", "share", "positions",
	       tr->top_text ? "  text" : "");
	for (int i = 0; i < tr->n_top; i++) {
		const trace_top *t = &tr->top[i];
		const hsq_tier_head_info *hi = &m->heads[t->layer * H + t->head];
		const head_trace *ht = &tr->heads[t->layer * H + t->head];
		char pos[32];
		snprintf(pos, sizeof pos, "%d-%d", (int)hi->g_first[t->group], (int)hi->g_last[t->group]);
		printf("  %5d %4d %5d %-6s %7u %5.0f%% %11s", t->layer, t->head, t->group, class_name(hi->g_class[t->group]),
		       t->count, ht->lines ? 100.0 * t->count / (double)ht->lines : 0.0, pos);
		if (tr->top_text) {
			printf("  ");
			print_line_text(stdout, tr->top_text[i], tr->top_len[i], 70);
		}
		printf("\n");
	}
	printf("fetch heatmap: rows = layers, %d columns of about %.1f positions (0..%d); cell = share of its tokens fetched "
	       "per step and head, scale '%s' from 0 to %.3f:\n",
	       tr->cols, (double)m->n_tokens / tr->cols, m->n_tokens - 1, HEAT_CHARS, tr->heat_max);
	char last[16];
	int lw = snprintf(last, sizeof last, "%d", m->n_tokens - 1);
	printf("  %5s  0%*s\n", "", tr->cols - 1, tr->cols - 1 >= lw ? last : "");
	for (int l = 0; l < m->n_layer; l++) {
		printf("  %5d |", l);
		for (int c = 0; c < tr->cols; c++)
			putchar(heat_char(heat_at(tr, l, c), tr->heat_max));
		printf("|\n");
	}
}

static void print_text(const report *r)
{
	const hsq_snapshot_info *info = r->info;
	char b1[32], b2[32], b3[32], hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", info->model_identity[i]);
	printf("file:       %s\n", r->path);
	printf("size:       %s (%llu bytes)\n", human(b1, sizeof b1, info->file_size),
	       (unsigned long long)info->file_size);
	printf("format:     hsq snapshot %u.%u, little-endian\n", info->version >> 16, info->version & 0xffff);
	printf("mode:       %s", mode_name(info->mode));
	if (info->mode < HSQ_MODE_FULL || info->mode > HSQ_MODE_SNAPKV)
		printf(" (%u; written by a newer hsq?)", info->mode);
	printf("\n");
	printf("model:      %s '%s'\n", info->architecture, info->model_name);
	printf("identity:   %.16s (sha256 %s)\n", hex, hex);
	printf("shape:      %d layers, %d kv heads x %d dims, vocabulary %d\n", info->n_layer, info->n_head_kv,
	       info->head_dim, info->n_vocab);
	printf("tokens:     %d\n", info->n_tokens);
	const hsq_snapshot_section_info *kv = find(info, "kv.full");
	if (kv) {
		uint64_t fp16 = info->kv_bytes_fp16;
		printf("kv cache:   %s fp32 (%s at fp16), stored in %s", human(b1, sizeof b1, kv->raw_size),
		       human(b2, sizeof b2, fp16), human(b3, sizeof b3, kv->size));
		if (kv->size)
			printf(": %.3fx the fp16 size, compression %.2f:1 vs fp32", (double)kv->size / (double)fp16,
			       (double)kv->raw_size / (double)kv->size);
		printf("\n");
	}
	if (r->map)
		print_tiers(r);
	printf("sections:   %d%s\n", info->n_sections,
	       info->n_sections > 16 ? " (the first 16 are listed)" : "");
	printf("  %-15s %12s %12s %12s  %-6s %s\n", "name", "offset", "stored", "raw", "codec", "checksum");
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++) {
		const hsq_snapshot_section_info *s = &info->sections[i];
		printf("  %-15s %12llu %12llu %12llu  %-6s %s\n", s->name, (unsigned long long)s->offset,
		       (unsigned long long)s->size, (unsigned long long)s->raw_size, codec_name(s->codec),
		       checksum_word(s->checksum_ok));
	}
	if (!r->verified)
		printf("checksums:  not verified (use --verify)\n");
	if (r->map)
		print_tier_table(r);
	if (r->show_tokens) {
		printf("token ids:");
		for (size_t i = 0; i < r->n_toks; i++)
			printf("%s%d", i % 16 ? " " : "\n  ", (int)r->toks[i]);
		printf("\n");
	}
	if (r->text) {
		printf("text:\n");
		fwrite(r->text, 1, r->text_len, stdout);
		if (!r->text_len || r->text[r->text_len - 1] != '\n')
			printf("\n");
	}
	if (r->trace)
		print_trace(r);
}

static void json_tiers(const report *r)
{
	const hsq_tier_map *m = r->map;
	const hsq_tier_params *p = &m->params;
	tier_sum tot = { 0 };
	for (int i = 0; i < m->n_layer * m->n_head_kv; i++)
		tier_add(&tot, &m->heads[i]);
	uint64_t fp16 = m->fp16_kv_bytes, fast = tot.l1_bytes + tot.l2_bytes;
	printf(",\"tiers\":{\"mode\":\"%s\",\"reader\":", hsq_mode_name(m->mode));
	json_fstr(stdout, m->reader, JSON_ESC_SHORT);
	printf(",\"compressor\":");
	json_fstr(stdout, m->compressor, JSON_ESC_SHORT);
	if (has_calibration(m)) {
		char h[65];
		sha_hex(m->calibration_sha256, h);
		printf(",\"calibration_sha256\":\"%s\"", h);
	}
	printf(",\"params\":{\"sinks\":%d,\"window\":%d,\"l1_fraction\":", p->sinks, p->window);
	json_fnum6(stdout, p->l1_fraction);
	printf(",\"group_size\":%d,\"medium_fraction\":", p->group_size);
	json_fnum6(stdout, p->medium_fraction);
	printf(",\"obs_window\":%d,\"keep\":%d,\"seed\":%llu,\"key_rounding\":\"%s\"}", p->obs_window, p->keep,
	       (unsigned long long)p->seed, hsq_key_rounding_name(p->key_rounding));
	printf(",\"fp16_bytes\":%llu,\"totals\":{\"l1_tokens\":%lld,\"l2_groups\":%lld,\"l2_low\":%lld,\"l2_medium\":%lld,"
	       "\"l3_tokens\":%lld,\"l1_bytes\":%llu,\"l2_bytes\":%llu,\"l3_bytes\":%llu,\"l3_stored_bytes\":%llu}",
	       (unsigned long long)fp16, (long long)tot.n_l1, (long long)tot.n_group, (long long)tot.n_low,
	       (long long)tot.n_medium, (long long)tot.n_l3, (unsigned long long)tot.l1_bytes,
	       (unsigned long long)tot.l2_bytes, (unsigned long long)tot.l3_bytes, (unsigned long long)tot.l3_stored);
	printf(",\"vs_fp16\":{\"fast\":");
	json_fnum6(stdout, ratio(fast, fp16));
	printf(",\"fast_archive\":");
	json_fnum6(stdout, ratio(fast + tot.l3_bytes, fp16));
	printf(",\"fast_archive_stored\":");
	json_fnum6(stdout, ratio(fast + tot.l3_stored, fp16));
	printf(",\"file\":");
	json_fnum6(stdout, ratio(r->info->file_size, fp16));
	printf("},\"heads\":[");
	for (int i = 0; i < m->n_layer * m->n_head_kv; i++) {
		const hsq_tier_head_info *h = &m->heads[i];
		printf("%s{\"layer\":%d,\"head\":%d,\"window\":%d,\"l1_tokens\":%d,\"l2_low\":%d,\"l2_medium\":%d,"
		       "\"l3_tokens\":%d,\"l1_bytes\":%llu,\"l2_bytes\":%llu,\"l3_bytes\":%llu,\"l3_stored_bytes\":%llu,"
		       "\"induction\":",
		       i ? "," : "", h->layer, h->head, h->window, h->n_l1, h->n_group - h->n_medium, h->n_medium, h->n_l3,
		       (unsigned long long)h->l1_bytes, (unsigned long long)h->l2_bytes, (unsigned long long)h->l3_bytes,
		       (unsigned long long)h->l3_stored);
		json_fnum6(stdout, h->induction);
		printf(",\"retrieval\":%s,\"residual_keys\":%s}", h->retrieval ? "true" : "false",
		       h->residual ? "true" : "false");
	}
	printf("]}");
}

static void json_trace(const report *r, const char *svg_path)
{
	const trace_report *tr = r->trace;
	const hsq_tier_map *m = r->map;
	int H = m->n_head_kv;
	printf(",\"trace\":{\"file\":");
	json_fstr(stdout, tr->path, JSON_ESC_SHORT);
	printf(",\"lines\":%lld,\"steps\":%lld,\"first_position\":%d,\"last_position\":%d,\"fetched_groups\":%lld,"
	       "\"online_fetches\":%lld",
	       (long long)tr->lines, (long long)tr->steps, tr->first_pos, tr->last_pos, (long long)tr->n_fetched_groups,
	       (long long)tr->online);
	printf(",\"heads\":[");
	for (int i = 0; i < m->n_layer * H; i++) {
		const hsq_tier_head_info *hi = &m->heads[i];
		const head_trace *ht = &tr->heads[i];
		int64_t cov = 0;
		for (int g = 0; g < hi->n_group; g++)
			cov += ht->count[g] > 0;
		int has = hi->n_group && ht->lines;
		printf("%s{\"layer\":%d,\"head\":%d,\"lines\":%lld,\"groups\":%d,\"fetched_per_line\":", i ? "," : "", i / H,
		       i % H, (long long)ht->lines, hi->n_group);
		json_fnum6(stdout, ht->lines ? (double)ht->fetched / (double)ht->lines : NAN);
		printf(",\"hit_rate\":");
		json_fnum6(stdout, has ? ht->rate_sum / (double)ht->lines : NAN);
		printf(",\"coverage\":");
		json_fnum6(stdout, has ? (double)cov / hi->n_group : NAN);
		printf(",\"online_fetches\":%lld}", (long long)ht->online);
	}
	printf("],\"top\":[");
	for (int i = 0; i < tr->n_top; i++) {
		const trace_top *t = &tr->top[i];
		const hsq_tier_head_info *hi = &m->heads[t->layer * H + t->head];
		const head_trace *ht = &tr->heads[t->layer * H + t->head];
		printf("%s{\"layer\":%d,\"head\":%d,\"group\":%d,\"class\":\"%s\",\"fetches\":%u,\"share\":", i ? "," : "",
		       t->layer, t->head, t->group, class_name(hi->g_class[t->group]), t->count);
		json_fnum6(stdout, ht->lines ? t->count / (double)ht->lines : NAN);
		printf(",\"first_position\":%d,\"last_position\":%d,\"text\":", (int)hi->g_first[t->group],
		       (int)hi->g_last[t->group]);
		if (tr->top_text)
			json_fstr_n(stdout, tr->top_text[i], tr->top_len[i], JSON_ESC_SHORT);
		else
			printf("null");
		printf("}");
	}
	printf("],\"text_note\":");
	if (tr->text_note[0])
		json_fstr(stdout, tr->text_note, JSON_ESC_SHORT);
	else
		printf("null");
	printf(",\"heatmap\":{\"columns\":%d,\"column_first_position\":[", tr->cols);
	for (int c = 0; c < tr->cols; c++)
		printf("%s%d", c ? "," : "", tr->col_first[c]);
	printf("],\"max\":");
	json_fnum6(stdout, tr->heat_max);
	printf(",\"rows\":[");
	for (int l = 0; l < m->n_layer; l++) {
		printf("%s[", l ? "," : "");
		for (int c = 0; c < tr->cols; c++) {
			printf("%s", c ? "," : "");
			json_fnum6(stdout, heat_at(tr, l, c));
		}
		printf("]");
	}
	printf("]},\"svg\":");
	if (svg_path)
		json_fstr(stdout, svg_path, JSON_ESC_SHORT);
	else
		printf("null");
	printf("}");
}

static void print_json(const report *r, const char *svg_path)
{
	const hsq_snapshot_info *info = r->info;
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", info->model_identity[i]);
	printf("{\"file\":");
	json_fstr(stdout, r->path, JSON_ESC_SHORT);
	printf(",\"file_size\":%llu,\"version\":\"%u.%u\",\"mode\":\"%s\",\"mode_id\":%u,",
	       (unsigned long long)info->file_size, info->version >> 16, info->version & 0xffff,
	       mode_name(info->mode), info->mode);
	printf("\"model\":{\"architecture\":");
	json_fstr(stdout, info->architecture, JSON_ESC_SHORT);
	printf(",\"name\":");
	json_fstr(stdout, info->model_name, JSON_ESC_SHORT);
	printf(",\"identity\":\"%s\"},", hex);
	printf("\"n_layer\":%d,\"n_head_kv\":%d,\"head_dim\":%d,\"n_vocab\":%d,\"n_tokens\":%d,", info->n_layer,
	       info->n_head_kv, info->head_dim, info->n_vocab, info->n_tokens);
	const hsq_snapshot_section_info *kv = find(info, "kv.full");
	if (kv)
		printf("\"kv\":{\"fp32_bytes\":%llu,\"fp16_bytes\":%llu,\"stored_bytes\":%llu,\"stored_vs_fp16\":%.4f},",
		       (unsigned long long)kv->raw_size, (unsigned long long)info->kv_bytes_fp16,
		       (unsigned long long)kv->size,
		       info->kv_bytes_fp16 ? (double)kv->size / (double)info->kv_bytes_fp16 : 0.0);
	printf("\"n_sections\":%d,\"sections\":[", info->n_sections);
	int n = info->n_sections < 16 ? info->n_sections : 16;
	for (int i = 0; i < n; i++) {
		const hsq_snapshot_section_info *s = &info->sections[i];
		printf("%s{\"name\":", i ? "," : "");
		json_fstr(stdout, s->name, JSON_ESC_SHORT);
		printf(",\"offset\":%llu,\"stored_size\":%llu,\"raw_size\":%llu,\"codec\":\"%s\",\"checksum\":\"%s\"}",
		       (unsigned long long)s->offset, (unsigned long long)s->size, (unsigned long long)s->raw_size,
		       codec_name(s->codec), s->checksum_ok > 0 ? "ok" : s->checksum_ok == 0 ? "bad" : "unverified");
	}
	printf("],\"verified\":%s", r->verified ? "true" : "false");
	if (r->map)
		json_tiers(r);
	if (r->show_tokens) {
		printf(",\"tokens\":[");
		for (size_t i = 0; i < r->n_toks; i++)
			printf("%s%d", i ? "," : "", (int)r->toks[i]);
		printf("]");
	}
	if (r->text) {
		printf(",\"text\":");
		json_fstr_n(stdout, r->text, r->text_len, JSON_ESC_SHORT);
	}
	if (r->trace)
		json_trace(r, svg_path);
	printf("}\n");
}

/* ---------------------------------------------------------------- main */

/* The model for --trace's group text: -m (must load and match, or exit 3
 * / 5 like --text), else the default one if it loads and built the
 * snapshot; NULL with a note saying why otherwise. */
static hsq_model *trace_model(const char *model_arg, const hsq_snapshot_info *info, const char *path, char *note,
			      size_t cap)
{
	char buf[4096];
	hsq_model *model = NULL;
	const char *mp = model_arg;
	if (!mp) {
		if (hsq_default_model_path(buf, sizeof buf)) {
			snprintf(note, cap, "%s", hsq_last_error());
			return NULL;
		}
		mp = buf;
	}
	hsq_status st = hsq_model_load(mp, &model);
	if (st) {
		if (model_arg)
			cli_die_status(PROG, cli_exit_for(st, EXIT_MODEL), st);
		snprintf(note, cap, "the default model could not be loaded (%s); pass -m MODEL", hsq_last_error());
		return NULL;
	}
	hsq_model_info mi;
	hsq_model_get_info(model, &mi);
	if (memcmp(mi.identity, info->model_identity, 32)) {
		if (model_arg)
			cli_die(PROG, EXIT_SNAPSHOT,
				"%s was built by model '%s' (%s), not by the given model '%s' (%s); pass the model that built it with -m",
				path, info->model_name, info->architecture, mi.name, mi.architecture);
		snprintf(note, cap, "the default model %.300s is not the one that built the snapshot ('%.127s'); pass it with -m", mp,
			 info->model_name);
		hsq_model_free(model);
		return NULL;
	}
	return model;
}

int main(int argc, char **argv)
{
	const char *model_arg = NULL, *trace_path = NULL, *svg_path = NULL;
	int verify = 0, json = 0, show_tokens = 0, show_text = 0, per_head = 0, top_n = 10, top_given = 0, c;
	cli_parser p;
	cli_stdout_checked();
	cli_init(&p, PROG, options);
	while ((c = cli_next(&p, argc, argv, USAGE, DESCRIPTION)) != -1) {
		switch (c) {
		case OPT_VERIFY: verify = 1; break;
		case OPT_JSON: json = 1; break;
		case OPT_HEADS: per_head = 1; break;
		case OPT_TOKENS: show_tokens = 1; break;
		case OPT_TEXT: show_text = 1; break;
		case OPT_TRACE: trace_path = optarg; break;
		case OPT_TOP:
			top_n = (int)cli_long(PROG, "--top", optarg, 1, 1000000);
			top_given = 1;
			break;
		case OPT_SVG: svg_path = optarg; break;
		case 'm': model_arg = optarg; break;
		default: cli_usage_error(PROG, "unexpected option");
		}
	}
	cli_free(&p);
	if (optind >= argc)
		cli_usage_error(PROG, "no snapshot given; usage: %s", USAGE);
	if (argc - optind > 1)
		cli_usage_error(PROG, "one snapshot at a time ('%s' is extra)", argv[optind + 1]);
	if (model_arg && !show_text && !trace_path)
		cli_usage_error(PROG, "-m is only used with --text or --trace");
	if ((top_given || svg_path) && !trace_path)
		cli_usage_error(PROG, "%s is only used with --trace FILE", svg_path ? "--svg" : "--top");
	const char *path = argv[optind];
	if (is_calibration(path)) {
		if (trace_path || show_tokens || show_text || per_head)
			cli_usage_error(PROG, "%s is a calibration file: --trace, --tokens, --text and --heads apply to snapshots", path);
		print_calibration(path, json); /* loading checks every checksum: --verify adds nothing */
		return EXIT_OK;
	}

	hsq_snapshot_info info;
	hsq_status st = hsq_snapshot_inspect(path, verify, &info);
	/* A checksum failure still fills info: print it (the bad section shows
	 * as BAD), then fail. */
	if (st && st != HSQ_ERR_CHECKSUM)
		cli_die_status(PROG, exit_code(st), st);
	hsq_status verify_st = st;
	char verify_msg[512] = "";
	if (verify_st)
		snprintf(verify_msg, sizeof verify_msg, "%s", hsq_last_error());
	if (trace_path && info.mode != HSQ_MODE_HSQ)
		cli_usage_error(PROG, "--trace needs an hsq snapshot (the only mode with L2 groups to route), and %s is a %s snapshot; "
				"write one with hsq-prefill --mode hsq, then hsq-decode -s SNAPSHOT --trace FILE",
				path, mode_name(info.mode));

	hsq_tier_map *map = NULL;
	if (is_tiered(info.mode) && !verify_st) {
		if ((st = hsq_snapshot_read_tiers(path, &map)))
			cli_die_status(PROG, exit_code(st), st);
		check_tiers(map, &info, path);
	}
	trace_report trace;
	memset(&trace, 0, sizeof trace);
	if (trace_path && map)
		read_trace(&trace, map, trace_path, top_n);

	hsq_token *toks = NULL;
	size_t n_toks = 0, text_len = 0;
	char *text = NULL;
	hsq_model *model = NULL;
	if ((show_tokens || show_text || (trace_path && map)) && !verify_st) {
		if ((st = hsq_snapshot_read_tokens(path, &toks, &n_toks)))
			cli_die_status(PROG, exit_code(st), st);
		if (n_toks != (size_t)info.n_tokens)
			cli_die(PROG, EXIT_SNAPSHOT, "%s holds %zu tokens, its header says %d; the file is damaged", path, n_toks,
				info.n_tokens);
	}
	if (show_text && !verify_st) {
		char buf[4096];
		model = cli_load_model(PROG, cli_model_path(PROG, model_arg, buf, sizeof buf));
		hsq_model_info mi;
		hsq_model_get_info(model, &mi);
		if (memcmp(mi.identity, info.model_identity, 32))
			cli_die(PROG, EXIT_SNAPSHOT,
				"%s was built by model '%s' (%s), not by the given model '%s' (%s); pass the model that built it with -m",
				path, info.model_name, info.architecture, mi.name, mi.architecture);
		text = detokenize(model, toks, n_toks, &text_len);
	} else if (trace_path && map) {
		model = trace_model(model_arg, &info, path, trace.text_note, sizeof trace.text_note);
	}
	if (trace_path && map && model)
		trace_texts(&trace, map, model, toks);
	hsq_model_free(model);
	if (svg_path && map)
		write_svg(svg_path, &trace, map, path);

	report r = {
		.path = path,
		.info = &info,
		.map = map,
		.trace = trace_path && map ? &trace : NULL,
		.toks = toks,
		.n_toks = n_toks,
		.text = text,
		.text_len = text_len,
		.verified = json ? verify && !verify_st : verify,
		.show_tokens = show_tokens && !verify_st,
		.per_head = per_head,
	};
	if (json)
		print_json(&r, svg_path);
	else
		print_text(&r);
	cli_stdout_flush();
	trace_free(&trace, map);
	hsq_tier_map_free(map);
	hsq_free(toks);
	free(text);
	if (verify_st)
		cli_die(PROG, EXIT_SNAPSHOT, "%s", verify_msg);
	return EXIT_OK; /* standard output is closed, and checked, at exit */
}

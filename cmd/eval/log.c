/* log.c - the trial log of hsq-eval's model runs: one JSON line per
 * finished trial after a header line with the run's configuration;
 * appended to as trials finish (by --jobs workers under a lock), resumed
 * when the configuration matches (or grows by --trials), validated record
 * by record, read alone by --summarize. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "log.h"

static void log_push(eval_log *L, json_value *rec, long line)
{
	if (L->n == L->cap) {
		size_t nc = L->cap ? L->cap * 2 : 64;
		json_value *r = realloc(L->records, nc * sizeof *r);
		long *l = realloc(L->lines, nc * sizeof *l);
		if (r)
			L->records = r;
		if (l)
			L->lines = l;
		if (!r || !l)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
		L->cap = nc;
	}
	L->records[L->n] = *rec;
	L->lines[L->n++] = line;
}

/* The header line: which tool wrote the log, and the configuration. */
static void log_header(sbuf *b, const eval_common *c, const char *config)
{
	sb_printf(b, "{\"hsq_eval_log\":1,\"subcommand\":");
	sb_jstr(b, c->sub);
	sb_printf(b, ",\"config\":%s}\n", config);
}

static void log_start(eval_log *L, const eval_common *c, const char *config)
{
	sbuf b = { 0 };
	log_header(&b, c, config);
	L->f = fopen(L->path, "w");
	if (!L->f || fwrite(b.s, 1, b.len, L->f) != b.len || fflush(L->f) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write the trial log %s: %s", L->path, strerror(errno));
	L->next_line = 2;
	sb_free(&b);
}

/* The first member where the log's configuration and ours differ. */
static void config_difference(const json_value *ours, const json_value *theirs, sbuf *msg)
{
	for (size_t i = 0; i < ours->n; i++) {
		const json_value *t = json_get(theirs, ours->keys[i]);
		if (t && json_equal(&ours->items[i], t))
			continue;
		sb_printf(msg, "%s is ", ours->keys[i]);
		json_write(msg, &ours->items[i]);
		sb_printf(msg, " here but ");
		if (t)
			json_write(msg, t);
		else
			sb_printf(msg, "absent");
		sb_printf(msg, " in the log");
		return;
	}
	for (size_t i = 0; i < theirs->n; i++)
		if (!json_get(ours, theirs->keys[i])) {
			sb_printf(msg, "the log has %s, which this run does not", theirs->keys[i]);
			return;
		}
}

/* Whether the two configurations differ in the trial count alone, ours
 * the larger: a needle trial is drawn from (seed, cell, index) and nothing
 * else (needle.c), so a log of n trials per cell holds the first n trials
 * of every longer run, and can grow into one. */
static int grows_trials(const json_value *ours, const json_value *theirs)
{
	const json_value *a = json_get(ours, "trials"), *b = json_get(theirs, "trials");
	if (!a || !b || a->type != JSON_NUMBER || b->type != JSON_NUMBER || !(a->number > b->number) ||
	    ours->n != theirs->n)
		return 0;
	for (size_t i = 0; i < ours->n; i++) {
		const json_value *t = json_get(theirs, ours->keys[i]);
		if (strcmp(ours->keys[i], "trials") && (!t || !json_equal(&ours->items[i], t)))
			return 0;
	}
	return 1;
}

/* What is wrong with a log's first line, if anything. The message goes
 * to why, and everything parsed is freed before returning, so that the
 * caller can free the log text and exit without leaving allocations.
 * HDR_GROW: the same run with more trials per cell (why: "N to M"). */
enum { HDR_OK, HDR_GROW, HDR_NOT_JSON, HDR_NOT_LOG, HDR_OTHER_SUB, HDR_OTHER_CONFIG };

/* Sets ours's string member key to theirs's, when both hold one. */
static void adopt_string(json_value *ours, const json_value *theirs, const char *key)
{
	const json_value *t = json_get(theirs, key);
	if (!t || t->type != JSON_STRING || ours->type != JSON_OBJECT)
		return;
	for (size_t i = 0; i < ours->n; i++)
		if (!strcmp(ours->keys[i], key) && ours->items[i].type == JSON_STRING) {
			char *copy = strdup(t->string);
			if (!copy)
				cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
			free(ours->items[i].string);
			ours->items[i].string = copy;
		}
}

static int check_header(const eval_common *c, const char *line, size_t len, const char *config, char *why,
			size_t cap)
{
	json_value h, ours;
	if (json_parse(line, len, &h, why, cap) != 0)
		return HDR_NOT_JSON;
	const json_value *v = json_get(&h, "hsq_eval_log"), *sub = json_get(&h, "subcommand");
	const json_value *cfg = json_get(&h, "config");
	int r = HDR_OK;
	if (!v || v->type != JSON_NUMBER || v->number != 1 || !sub || sub->type != JSON_STRING || !cfg ||
	    cfg->type != JSON_OBJECT) {
		r = HDR_NOT_LOG;
	} else if (strcmp(sub->string, c->sub)) {
		snprintf(why, cap, "%s", sub->string);
		r = HDR_OTHER_SUB;
	} else {
		if (json_parse(config, strlen(config), &ours, why, cap) != 0)
			cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "internal error: configuration is not JSON (%s)", why);
		/* --summarize runs nothing, so what a log holds does not depend
		 * on the model file at hand: its identity is not compared (a
		 * build that hashed less of the file named the same model by
		 * another identity). Every other setting still must match. */
		if (c->summarize)
			adopt_string(&ours, cfg, "model_sha256");
		if (grows_trials(&ours, cfg)) {
			snprintf(why, cap, "%.0f to %.0f", json_get(cfg, "trials")->number, json_get(&ours, "trials")->number);
			r = HDR_GROW;
		} else if (!json_equal(&ours, cfg)) {
			sbuf msg = { 0 };
			config_difference(&ours, cfg, &msg);
			snprintf(why, cap, "%s", msg.s ? msg.s : "it differs");
			sb_free(&msg);
			r = HDR_OTHER_CONFIG;
		}
		json_free(&ours);
	}
	json_free(&h);
	return r;
}

static void header_refused(const eval_log *L, const eval_common *c, int r, const char *why)
{
	/* --summarize only reads: starting afresh is no way out there */
	const char *opt = c->summarize ? "--summarize" : "--resume";
	const char *afresh = c->summarize ? "" : ", or start afresh with --force";
	switch (r) {
	case HDR_NOT_JSON:
		cli_die(EVAL_PROG, EXIT_INPUT, "%s:1: not a trial log header (%s); give another --log%s", L->path, why,
			c->summarize ? "" : ", or --force to overwrite it");
	case HDR_NOT_LOG:
		cli_die(EVAL_PROG, EXIT_INPUT, "%s:1: not an hsq-eval trial log (no hsq_eval_log 1, subcommand and "
						"config); give another --log", L->path);
	case HDR_OTHER_SUB:
		cli_usage_error(EVAL_PROG, "%s: %s is the log of 'hsq-eval %s', not of '%s'; give the right --log", opt,
				L->path, why, c->sub);
	default:
		cli_usage_error(EVAL_PROG, "%s: %s was written with another configuration (%s); rerun with the options "
					   "that wrote it%s",
				opt, L->path, why, afresh);
	}
}

/* Reads the whole log into memory (it is small: one line per trial). */
static char *read_log(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	sbuf b = { 0 };
	char chunk[65536];
	size_t n;
	sb_printf(&b, "%s", "");
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		for (size_t i = 0; i < n; i++)
			sb_putc(&b, chunk[i]);
	int bad = ferror(f);
	fclose(f);
	if (bad)
		cli_die(EVAL_PROG, EXIT_INPUT, "cannot read the trial log %s: %s", path, strerror(errno));
	*len = b.len;
	return b.s;
}

/* Parses and checks one record line; 0 with a reason on failure. */
static int parse_record(eval_log *L, const char *line, size_t len, json_value *rec, char *err, size_t cap)
{
	if (json_parse(line, len, rec, err, cap) != 0)
		return 0;
	if (rec->type != JSON_OBJECT) {
		snprintf(err, cap, "a record must be a JSON object");
		json_free(rec);
		return 0;
	}
	if (!L->check(rec, L->user, err, cap)) {
		json_free(rec);
		return 0;
	}
	return 1;
}

/* Reads the records of an existing log; returns the bytes to keep (the
 * end of the last good line) and whether that line lacks its newline. */
static size_t resume_records(eval_log *L, const char *text, size_t len, size_t first_end, int *no_newline)
{
	size_t at = first_end, keep = first_end;
	long line = 2;
	*no_newline = 0;
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - text) : len;
		json_value rec;
		char err[512];
		if (end == at && nl) {
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: empty line in the trial log; remove it or start afresh "
							"with --force", L->path, line);
		} else if (parse_record(L, text + at, end - at, &rec, err, sizeof err)) {
			log_push(L, &rec, line);
			keep = nl ? end + 1 : end;
			*no_newline = !nl;
		} else if (!nl) {
			/* an interrupted run: the last line was cut while being written */
			fprintf(stderr, "%s: %s:%ld: dropping a half-written last line (%s)\n", EVAL_PROG, L->path, line,
				err);
		} else {
			cli_die(EVAL_PROG, EXIT_INPUT, "%s:%ld: bad record: %s; fix or remove the line, or start afresh "
							"with --force", L->path, line, err);
		}
		at = nl ? end + 1 : len;
		line++;
	}
	L->next_line = line;
	return keep;
}

/* The log being resumed; static so that a refusal (which exits) does not
 * leave it for LeakSanitizer to report. */
static char *resume_text;

/* Rewrites the log with this run's header in place of its first line
 * (first_end bytes) and the records unchanged: written beside it and
 * renamed over it, so an interruption leaves the old log or the new one.
 * Returns the new text (the old is freed), also kept in resume_text. */
static char *log_grow(const eval_log *L, const eval_common *c, const char *config, char *text, size_t *len,
		      size_t first_end)
{
	sbuf b = { 0 };
	log_header(&b, c, config);
	for (size_t i = first_end; i < *len; i++)
		sb_putc(&b, text[i]);
	free(text);
	resume_text = b.s;
	atomic_file a;
	int e = atomic_open(&a, L->path);
	if (!e && fwrite(b.s, 1, b.len, a.f) != b.len) {
		e = errno;
		atomic_discard(&a);
	} else if (!e) {
		e = atomic_commit(&a, 1);
	}
	if (e)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot rewrite the trial log %s (through %s): %s", L->path, a.tmp,
			strerror(e));
	*len = b.len;
	return b.s;
}

static void log_resume(eval_log *L, const eval_common *c, const char *config)
{
	size_t len;
	char *text = resume_text = read_log(L->path, &len);
	const char *nl = text ? memchr(text, '\n', len) : NULL;
	if (!nl) {
		/* missing, empty, or cut inside its first line: nothing to keep */
		if (text && len)
			fprintf(stderr, "%s: %s holds no complete header line; starting it afresh\n", EVAL_PROG, L->path);
		free(text);
		resume_text = NULL;
		log_start(L, c, config);
		return;
	}
	char why[1024];
	int r = check_header(c, text, (size_t)(nl - text), config, why, sizeof why);
	if (r == HDR_GROW) {
		eval_progress(c, "--resume: growing %s from %s trials per cell; its trials are kept", L->path, why);
		text = log_grow(L, c, config, text, &len, (size_t)(nl - text) + 1);
		nl = memchr(text, '\n', len);
	} else if (r != HDR_OK) {
		free(text);
		resume_text = NULL;
		header_refused(L, c, r, why);
	}
	int no_newline;
	size_t keep = resume_records(L, text, len, (size_t)(nl - text) + 1, &no_newline);
	free(text);
	resume_text = NULL;
	/* cut the dropped line off, so that appended records start on a line of their own */
	if (keep < len && truncate(L->path, (off_t)keep) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot truncate the trial log %s: %s", L->path,
			strerror(errno));
	L->f = fopen(L->path, "a");
	if (!L->f || (no_newline && (fputc('\n', L->f) == EOF || fflush(L->f) != 0)))
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot append to the trial log %s: %s", L->path,
			strerror(errno));
}

/* --summarize: the log read as --resume reads it, and left as it is. */
/* The summary of a log names the model identity its trials ran with:
 * the log header's model_sha256 replaces the one of the model at hand in
 * config (both 64 hex digits, so in place). */
static void adopt_identity(char *config, const char *header, size_t len)
{
	static const char key[] = "\"model_sha256\":\"";
	const size_t k = sizeof key - 1, hex = 64;
	char *ours = strstr(config, key);
	const char *theirs = NULL;
	for (size_t i = 0; i + k + hex < len && !theirs; i++)
		if (!memcmp(header + i, key, k))
			theirs = header + i + k;
	if (ours && theirs && strlen(ours + k) > hex && ours[k + hex] == '"' && theirs[hex] == '"')
		memcpy(ours + k, theirs, hex);
}

static void log_read_only(eval_log *L, const eval_common *c, char *config)
{
	size_t len;
	char *text = resume_text = read_log(L->path, &len);
	if (!text)
		cli_die(EVAL_PROG, EXIT_INPUT, "--summarize: cannot read the trial log %s: %s; run the trials first "
						"(without --summarize), or name the log with --log",
			L->path, strerror(errno));
	const char *nl = memchr(text, '\n', len);
	if (!nl)
		cli_die(EVAL_PROG, EXIT_INPUT, "--summarize: %s holds no complete header line; nothing to summarize",
			L->path);
	char why[1024];
	int r = check_header(c, text, (size_t)(nl - text), config, why, sizeof why);
	if (r == HDR_GROW)
		eval_progress(c, "--summarize: %s is the log of a run of fewer trials per cell (%s); summarizing "
				 "what it holds", L->path, why);
	else if (r != HDR_OK) {
		free(text);
		resume_text = NULL;
		header_refused(L, c, r, why);
	}
	adopt_identity(config, text, (size_t)(nl - text));
	int no_newline;
	resume_records(L, text, len, (size_t)(nl - text) + 1, &no_newline);
	free(text);
	resume_text = NULL;
	if (L->n == 0)
		cli_die(EVAL_PROG, EXIT_INPUT, "--summarize: %s holds no trial yet; nothing to summarize", L->path);
}

void eval_log_check(const eval_common *c)
{
	struct stat st;
	const char *path = c->log_path;
	int exists = stat(path, &st) == 0;
	if (exists && S_ISDIR(st.st_mode))
		cli_usage_error(EVAL_PROG, "--log %s is a directory; name a file", path);
	if (c->summarize)
		return; /* only read */
	if (exists && !c->resume && !c->force)
		cli_usage_error(EVAL_PROG,
				"the trial log %s exists (from an earlier run); continue it with --resume, overwrite it "
				"with --force, or name another with --log",
				path);
	if (!exists)
		cli_check_output(EVAL_PROG, "--log", path, EXIT_FAILURE_RUNTIME);
	else if (access(path, W_OK) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write the trial log %s: %s; name another with --log",
			path, strerror(errno));
}

void eval_log_open(eval_log *L, const eval_common *c, char *config, eval_record_check check, void *user)
{
	memset(L, 0, sizeof *L);
	snprintf(L->path, sizeof L->path, "%s", c->log_path);
	L->check = check;
	L->user = user;
	eval_log_check(c);
	struct stat st;
	int exists = stat(L->path, &st) == 0;
	if (c->summarize) {
		log_read_only(L, c, config);
		return;
	}
	if (c->resume) {
		if (!exists)
			eval_progress(c, "--resume: no trial log at %s yet; starting one", L->path);
		log_resume(L, c, config);
		return;
	}
	log_start(L, c, config);
}

void eval_log_append(eval_log *L, const sbuf *record)
{
	json_value rec;
	char err[512];
	if (!L->f)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "internal error: a record appended to %s, opened only to be read",
			L->path);
	/* what goes into the file is what the summary reads: parse it back */
	if (!parse_record(L, record->s, record->len, &rec, err, sizeof err))
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "internal error: a record does not read back (%s)", err);
	if (L->shared && flock(fileno(L->f), LOCK_EX) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot lock the trial log %s: %s; run without --jobs", L->path,
			strerror(errno));
	/* "a" mode: every write goes to the end, after the other workers' lines */
	if (fwrite(record->s, 1, record->len, L->f) != record->len || fputc('\n', L->f) == EOF || fflush(L->f) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot append to the trial log %s: %s", L->path,
			strerror(errno));
	if (L->shared)
		flock(fileno(L->f), LOCK_UN);
	log_push(L, &rec, L->next_line++);
}

void eval_log_share(eval_log *L)
{
	/* the inherited FILE shares its open file with the parent and the
	 * other workers, and flock locks belong to an open file */
	if (L->f)
		fclose(L->f);
	L->f = fopen(L->path, "a");
	if (!L->f)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot append to the trial log %s: %s", L->path,
			strerror(errno));
	L->shared = 1;
}

void eval_log_reload(eval_log *L)
{
	for (size_t i = 0; i < L->n; i++)
		json_free(&L->records[i]);
	L->n = 0;
	size_t len;
	char *text = read_log(L->path, &len);
	const char *nl = text ? memchr(text, '\n', len) : NULL;
	if (!nl)
		cli_die(EVAL_PROG, EXIT_INPUT, "%s has no header line after the --jobs workers ran; did another "
						"program write it meanwhile?", L->path);
	int no_newline;
	resume_records(L, text, len, (size_t)(nl - text) + 1, &no_newline);
	free(text);
}

void eval_log_close(eval_log *L)
{
	if (L->f && fclose(L->f) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write the trial log %s: %s", L->path, strerror(errno));
	L->f = NULL;
	for (size_t i = 0; i < L->n; i++)
		json_free(&L->records[i]);
	free(L->records);
	free(L->lines);
	L->records = NULL;
	L->lines = NULL;
	L->n = L->cap = 0;
}

const json_value *eval_method_result(const json_value *rec, hsq_snapshot_mode mode, char *err, size_t cap)
{
	const json_value *ms = json_obj_member(rec, "methods", err, cap);
	const json_value *r = ms ? json_obj_member(ms, eval_method_name(mode), err, cap) : NULL;
	if (!r) {
		size_t l = strlen(err);
		snprintf(err + l, cap - l, " (method %s)", eval_method_name(mode));
	}
	return r;
}

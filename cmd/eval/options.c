/* options.c - the options every model run of hsq-eval takes, the lists
 * they parse, progress lines. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

const cli_option eval_common_options[] = {
	{ "methods", 0, "LIST",
	  "comma-separated methods: full,quant,hsq,hsq-learned,streaming,snapkv (default: all but hsq-learned; full, "
	  "the reference, always runs)",
	  EOPT_METHODS },
	{ "calibration", 0, "FILE", "hsq-learned's reader: a calibration file of the model (hsq-calibrate)",
	  EOPT_CALIBRATION },
	TIER_ROUTING_OPTIONS,
	TIER_OPTION_RESIDUAL_HEADS,
	TIER_OPTION_KEY_ROUNDING,
	{ "model", 'm', "FILE", "GGUF model (default: $HSQ_MODEL or the installed default)", EOPT_MODEL },
	{ "threads", 't', "N", "CPU threads (default: all cores; with --jobs, per job: cores / jobs)", EOPT_THREADS },
	{ "json", 0, "FILE", "write the summary as JSON to FILE", EOPT_JSON },
	{ "csv", 0, "FILE", "write the summary rows as CSV to FILE", EOPT_CSV },
	{ "report", 0, "DIR", "write DIR/report.md and SVG plots (DIR is created)", EOPT_REPORT },
	{ "log", 0, "FILE", "trial log, one JSON line per completed trial (default hsq-eval-SUBCOMMAND.jsonl)", EOPT_LOG },
	{ "resume", 0, NULL,
	  "continue the trial log, skipping what it holds (same configuration; needle: more --trials grows it)",
	  EOPT_RESUME },
	{ "force", 0, NULL, "overwrite an existing trial log", EOPT_FORCE },
	{ "summarize", 0, NULL, "run nothing: summarize the trials the log holds (the log is only read)", EOPT_SUMMARIZE },
	{ "quiet", 'q', NULL, "no progress lines on standard error", EOPT_QUIET },
	{ 0 },
};

const cli_option eval_jobs_option = { "jobs", 0, "N", "run the trials in N processes side by side (default 1: none)",
				      EOPT_JOBS };

void eval_common_init(eval_common *c, const char *sub)
{
	memset(c, 0, sizeof *c);
	c->sub = sub;
	/* every method but hsq-learned, which needs --calibration */
	static const hsq_snapshot_mode all[] = { HSQ_MODE_FULL, HSQ_MODE_QUANT, HSQ_MODE_HSQ, HSQ_MODE_STREAMING,
						 HSQ_MODE_SNAPKV };
	c->n_methods = (int)(sizeof all / sizeof all[0]);
	memcpy(c->methods, all, sizeof all);
	tier_options_init(&c->tier);
	c->jobs = 1;
	snprintf(c->log_default, sizeof c->log_default, "hsq-eval-%s.jsonl", sub);
	c->log_path = c->log_default;
}

int eval_method_index(const eval_common *c, hsq_snapshot_mode mode)
{
	for (int i = 0; i < c->n_methods; i++)
		if (c->methods[i] == mode)
			return i;
	return -1;
}

const char *eval_method_name(hsq_snapshot_mode m)
{
	return m == EVAL_HSQ_LEARNED ? "hsq-learned" : hsq_mode_name(m);
}

hsq_snapshot_mode eval_method_mode(hsq_snapshot_mode m)
{
	return m == EVAL_HSQ_LEARNED ? HSQ_MODE_HSQ : m;
}

int eval_method_width(const eval_common *c)
{
	int w = 9;
	for (int i = 0; i < c->n_methods; i++) {
		int n = (int)strlen(eval_method_name(c->methods[i]));
		w = n > w ? n : w;
	}
	return w;
}

/* --methods: full always comes first (every comparison is against it, and
 * agree needs its tokens before the others run); the rest keep the order
 * given. */
static void parse_methods(eval_common *c, const char *value)
{
	char buf[256];
	if (strlen(value) >= sizeof buf)
		cli_usage_error(EVAL_PROG, "--methods: list too long");
	strcpy(buf, value);
	c->n_methods = 1;
	c->methods[0] = HSQ_MODE_FULL;
	int given = 0;
	for (char *item = buf, *next; item; item = next) {
		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		hsq_snapshot_mode m;
		if (!*item)
			cli_usage_error(EVAL_PROG, "--methods '%s' has an empty item; separate methods by single commas",
					value);
		if (!strcmp(item, "hsq-learned"))
			m = EVAL_HSQ_LEARNED;
		else if (hsq_mode_parse(item, &m) != HSQ_OK)
			cli_usage_error(EVAL_PROG, "--methods: unknown method '%s'; use full, quant, hsq, hsq-learned, "
						   "streaming or snapkv", item);
		if (m == HSQ_MODE_FULL && !(given & (1 << m))) {
			given |= 1 << m;
			continue;
		}
		if (given & (1 << m))
			cli_usage_error(EVAL_PROG, "--methods lists '%s' twice", item);
		given |= 1 << m;
		c->methods[c->n_methods++] = m;
	}
}

int eval_common_option(eval_common *c, int id, const char *arg)
{
	switch (id) {
	case EOPT_MODEL: c->model_arg = arg; return 1;
	case EOPT_THREADS: c->threads = (int)cli_long(EVAL_PROG, "--threads", arg, 0, 1024); return 1;
	case EOPT_QUIET: c->quiet = 1; return 1;
	case EOPT_METHODS: parse_methods(c, arg); return 1;
	case EOPT_JSON: c->json_path = arg; return 1;
	case EOPT_CSV: c->csv_path = arg; return 1;
	case EOPT_REPORT: c->report_dir = arg; return 1;
	case EOPT_LOG: c->log_path = arg; return 1;
	case EOPT_RESUME: c->resume = 1; return 1;
	case EOPT_FORCE: c->force = 1; return 1;
	case EOPT_SUMMARIZE: c->summarize = 1; return 1;
	case EOPT_JOBS: c->jobs = (int)cli_long(EVAL_PROG, "--jobs", arg, 1, EVAL_MAX_JOBS); return 1;
	case EOPT_CALIBRATION: c->calibration = arg; return 1;
	default: return tier_option(&c->tier, EVAL_PROG, id, arg);
	}
}

void eval_common_finish(eval_common *c)
{
	if (c->resume && c->force)
		cli_usage_error(EVAL_PROG, "--resume and --force exclude each other: --resume continues the log, "
					   "--force starts it afresh");
	if (c->summarize && c->force)
		cli_usage_error(EVAL_PROG, "--summarize and --force exclude each other: --summarize reads the log, "
					   "--force starts it afresh");
	if (c->summarize && c->jobs > 1)
		cli_usage_error(EVAL_PROG, "--summarize runs no trial; drop --jobs");
	/* both ways: a calibration that no method reads would be recorded in
	 * the log's configuration as if it had decided the results */
	int learned = eval_method_index(c, EVAL_HSQ_LEARNED) >= 0;
	if (learned && !c->calibration)
		cli_usage_error(EVAL_PROG, "--methods lists hsq-learned, which needs a calibration: pass "
					   "--calibration FILE (made by hsq-calibrate for this model)");
	if (c->calibration && !learned)
		cli_usage_error(EVAL_PROG, "--calibration is read by the method hsq-learned alone: add it to --methods "
					   "(e.g. --methods hsq,hsq-learned), or drop --calibration");
	const char *paths[5] = { c->json_path, c->csv_path, c->report_dir, c->log_path, c->calibration };
	static const char *names[5] = { "--json", "--csv", "--report", "--log", "--calibration" };
	for (int i = 0; i < 5; i++)
		if (paths[i] && !*paths[i])
			cli_usage_error(EVAL_PROG, "%s needs a non-empty path", names[i]);
	if (c->jobs > 1 && c->threads == 0) { /* the cores shared among the jobs */
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		c->threads = cores / c->jobs > 1 ? (int)(cores / c->jobs) : 1;
	}
	if (c->json_path && c->csv_path && !strcmp(c->json_path, c->csv_path))
		cli_usage_error(EVAL_PROG, "--json and --csv name the same file '%s'", c->json_path);
	for (int i = 0; i < 2; i++)
		if (paths[i] && !strcmp(paths[i], c->log_path))
			cli_usage_error(EVAL_PROG, "%s names the trial log '%s'; give another file", names[i],
					c->log_path);
}

int eval_parse_ints(const char *opt, const char *value, long lo, long hi, int *out, int cap)
{
	int n = 0;
	const char *p = value;
	for (;;) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || end == p || (*end && *end != ',') || v < lo || v > hi || *p == '+' || *p == ' ')
			cli_usage_error(EVAL_PROG, "%s expects comma-separated integers from %ld to %ld, not '%s'", opt,
					lo, hi, value);
		if (n == cap)
			cli_usage_error(EVAL_PROG, "%s: at most %d items", opt, cap);
		for (int i = 0; i < n; i++)
			if (out[i] == (int)v)
				cli_usage_error(EVAL_PROG, "%s lists %ld twice", opt, v);
		out[n++] = (int)v;
		if (!*end)
			return n;
		p = end + 1;
	}
}

int eval_parse_files(const char *opt, const char *value, const char **out, int cap)
{
	char *copy = strdup(value); /* lives as long as the run: the names point into it */
	if (!copy)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "out of memory");
	int n = 0;
	for (char *item = copy, *next; item; item = next) {
		next = strchr(item, ',');
		if (next)
			*next++ = '\0';
		if (!*item)
			cli_usage_error(EVAL_PROG, "%s '%s' has an empty file name; separate files by single commas", opt,
					value);
		if (n == cap)
			cli_usage_error(EVAL_PROG, "%s: at most %d files", opt, cap);
		out[n++] = item;
	}
	return n;
}

static char progress_tag[32]; /* "job 2/4: " in a --jobs worker */

void eval_progress_tag(int w, int n)
{
	snprintf(progress_tag, sizeof progress_tag, "job %d/%d: ", w + 1, n);
}

void eval_progress(const eval_common *c, const char *fmt, ...)
{
	if (c->quiet)
		return;
	char line[1024];
	va_list ap;
	int n = snprintf(line, sizeof line, "%s %s: %s", EVAL_PROG, c->sub, progress_tag);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strlen(line);
	if (len == sizeof line - 1) /* cut: end the line anyway */
		len--;
	line[len++] = '\n';
	fwrite(line, 1, len, stderr); /* unbuffered: one write */
}

void eval_flush_stdout(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write to standard output: %s", strerror(errno));
}

/* cli.c - shared command-line plumbing for the hsq tools. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define OPT_HELP 1000
#define OPT_VERSION 1001
#define OPT_DUMP 1002

static const cli_option builtin[] = {
	{ "help", 'h', NULL, "show this help and exit", OPT_HELP },
	{ "version", 0, NULL, "print the version and exit", OPT_VERSION },
	{ "dump-options", 0, NULL, NULL, OPT_DUMP }, /* hidden: for completion tests */
};
#define N_BUILTIN (sizeof builtin / sizeof *builtin)

static size_t count_opts(const cli_option *o)
{
	size_t n = 0;
	while (o[n].long_name)
		n++;
	return n;
}

static const cli_option *opt_at(const cli_parser *p, size_t i)
{
	size_t n = count_opts(p->opts);
	return i < n ? &p->opts[i] : &builtin[i - n];
}

static const char *running = "hsq";

const char *cli_prog(void)
{
	return running;
}

void cli_init(cli_parser *p, const char *prog, const cli_option *opts)
{
	size_t n = count_opts(opts) + N_BUILTIN, k = 0;
	running = prog;
	p->prog = prog;
	p->opts = opts;
	p->long_opts = calloc(n + 1, sizeof *p->long_opts);
	if (!p->long_opts)
		cli_die(prog, EXIT_FAILURE_RUNTIME, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const cli_option *o = opt_at(p, i);
		p->long_opts[i] = (struct option){ o->long_name, o->arg ? required_argument : no_argument, NULL, o->id };
		if (o->short_name && k + 3 < sizeof p->short_opts) {
			p->short_opts[k++] = (char)o->short_name;
			if (o->arg)
				p->short_opts[k++] = ':';
		}
	}
	p->short_opts[k] = '\0';
}

void cli_free(cli_parser *p)
{
	free(p->long_opts);
	p->long_opts = NULL;
}

void cli_help(const cli_parser *p, FILE *out, const char *usage_line, const char *description)
{
	fprintf(out, "usage: %s\n%s\n\noptions:\n", usage_line, description);
	size_t n = count_opts(p->opts) + N_BUILTIN;
	for (size_t i = 0; i < n; i++) {
		const cli_option *o = opt_at(p, i);
		char left[64];
		if (!o->help)
			continue;
		if (o->short_name)
			snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->long_name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(left, sizeof left, "    --%s%s%s", o->long_name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(out, "  %-28s %s\n", left, o->help);
	}
}

int cli_next(cli_parser *p, int argc, char **argv, const char *usage_line, const char *description)
{
	opterr = 0;
	int c = getopt_long(argc, argv, p->short_opts, p->long_opts, NULL);
	switch (c) {
	case 'h':
	case OPT_HELP:
		cli_help(p, stdout, usage_line, description);
		exit(EXIT_OK);
	case OPT_VERSION:
		printf("%s %s\n", p->prog, hsq_version());
		exit(EXIT_OK);
	case OPT_DUMP: {
		size_t n = count_opts(p->opts) + N_BUILTIN;
		for (size_t i = 0; i < n; i++) {
			const cli_option *o = opt_at(p, i);
			if (o->help)
				printf("--%s%s%c\t%s\n", o->long_name, o->short_name ? "\t-" : "\t",
				       o->short_name ? o->short_name : ' ', o->arg ? o->arg : "");
		}
		exit(EXIT_OK);
	}
	case '?':
		if (optopt && optopt < 256)
			cli_usage_error(p->prog, "option '-%c' %s", optopt,
					strchr(p->short_opts, optopt) ? "needs a value" : "is unknown");
		cli_usage_error(p->prog, "option '%s' is unknown or needs a value", argv[optind - 1]);
	case ':':
		cli_usage_error(p->prog, "option '%s' needs a value", argv[optind - 1]);
	default:
		return c;
	}
}

void cli_die(const char *prog, int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static const char *status_hints[HSQ_ERR_INTERNAL + 1];

void cli_status_hint(hsq_status st, const char *hint)
{
	if ((int)st >= 0 && st <= HSQ_ERR_INTERNAL)
		status_hints[st] = hint;
}

void cli_die_status(const char *prog, int code, hsq_status st)
{
	const char *detail = hsq_last_error();
	const char *hint = (int)st >= 0 && st <= HSQ_ERR_INTERNAL ? status_hints[st] : NULL;
	cli_die(prog, code, "%s%s%s", *detail ? detail : hsq_strerror(st), hint ? "; " : "", hint ? hint : "");
}

void cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry '%s --help' for usage\n", prog);
	exit(EXIT_USAGE);
}

int cli_exit_for(hsq_status st, int phase_code)
{
	if (st == HSQ_ERR_NOMEM || st == HSQ_ERR_INTERNAL)
		return EXIT_FAILURE_RUNTIME;
	if (st == HSQ_ERR_CONTEXT_FULL)
		return EXIT_INPUT;
	return phase_code;
}

long cli_long(const char *prog, const char *opt, const char *value, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < lo || v > hi)
		cli_usage_error(prog, "%s expects an integer from %ld to %ld, not '%s'", opt, lo, hi, value);
	return v;
}

double cli_double(const char *prog, const char *opt, const char *value, double lo, double hi)
{
	char *end;
	errno = 0;
	double v = strtod(value, &end);
	if (errno || end == value || *end || !(v >= lo && v <= hi))
		cli_usage_error(prog, "%s expects a number from %g to %g, not '%s'", opt, lo, hi, value);
	return v;
}

/* The directory that holds path (a malloc'ed string): "." for a bare
 * name, "/" for "/name". Trailing slashes of path are ignored. */
static char *parent_dir(const char *prog, const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	const char *slash = memrchr(path, '/', n);
	char *dir = !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!dir)
		cli_die(prog, EXIT_FAILURE_RUNTIME, "out of memory");
	return dir;
}

/* Exits unless dir is an existing directory this process can create
 * files in; what is the output path, for the message. */
static void check_writable_dir(const char *prog, const char *opt, const char *what, const char *dir, int code)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		cli_die(prog, code, "cannot write %s (%s): directory %s: %s%s", what, opt, dir, strerror(errno),
			errno == ENOENT ? "; create it first" : "");
	if (!S_ISDIR(st.st_mode))
		cli_die(prog, code, "cannot write %s (%s): %s is not a directory", what, opt, dir);
	if (access(dir, W_OK | X_OK) != 0)
		cli_die(prog, code, "cannot write %s (%s): cannot create files in the directory %s: %s; choose a "
			"writable directory", what, opt, dir, strerror(errno));
}

void cli_check_output(const char *prog, const char *opt, const char *path, int code)
{
	struct stat st;
	if (!*path)
		cli_usage_error(prog, "%s needs a non-empty path", opt);
	size_t n = strlen(path);
	if (path[n - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
		cli_die(prog, code, "cannot write %s (%s): it is a directory; name a file to write", path, opt);
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		cli_die(prog, code, "cannot write %s (%s): it is a device, pipe or socket, which the output would "
			"replace; name a regular file", path, opt);
	char *dir = parent_dir(prog, path);
	check_writable_dir(prog, opt, path, dir, code);
	free(dir);
}

void cli_check_output_dir(const char *prog, const char *opt, const char *path, int code)
{
	struct stat st;
	if (!*path)
		cli_usage_error(prog, "%s needs a non-empty path", opt);
	if (stat(path, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			cli_die(prog, code, "cannot write in %s (%s): it is not a directory; name a directory (it is "
				"created if missing)", path, opt);
		check_writable_dir(prog, opt, path, path, code);
		return;
	}
	char *dir = parent_dir(prog, path);
	check_writable_dir(prog, opt, path, dir, code);
	free(dir);
}

static int stdout_failed;

/* A failed write to standard output: error e (0 when only the stream's
 * error flag says so). EPIPE ends the tool as SIGPIPE would have. */
static void stdout_error(int e, int in_exit_handler)
{
	stdout_failed = 1;
	if (e == EPIPE) {
		sigset_t set;
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(SIGPIPE);
	}
	fprintf(stderr, "%s: cannot write standard output: %s%s\n", running, e ? strerror(e) : "write error",
		e == ENOSPC || e == EDQUOT ? " (free some space or send the output elsewhere)" : "");
	if (in_exit_handler)
		_exit(EXIT_FAILURE_RUNTIME); /* exit() must not be called again from an exit handler */
	exit(EXIT_FAILURE_RUNTIME);
}

static void stdout_close(void)
{
	if (stdout_failed)
		return;
	int had_error = ferror(stdout);
	errno = 0;
	if (fclose(stdout) != 0 || had_error) {
		/* stdout closed by the caller (>&-) with nothing written is fine */
		if (!had_error && errno == EBADF)
			return;
		stdout_error(errno, 1);
	}
}

void cli_stdout_checked(void)
{
	signal(SIGPIPE, SIG_DFL);
	atexit(stdout_close);
}

void cli_stdout_flush(void)
{
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout))
		stdout_error(errno, 0);
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t cli_utf8_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned c = u[0], cp, min;
	size_t len;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	cp = c & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (u[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

FILE *cli_open_input(const char *prog, const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f)
		cli_die(prog, EXIT_INPUT, "cannot open %s: %s", path, strerror(errno));
	return f;
}

char *cli_read_input(const char *prog, FILE *f, const char *path, size_t max, const char *too_long, size_t *len)
{
	const char *name = strcmp(path, "-") ? path : "standard input";
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			cli_die(prog, EXIT_FAILURE_RUNTIME, "out of memory reading %s", name);
		n += fread(buf + n, 1, cap - n - 1, f);
		if (n > max)
			cli_die(prog, EXIT_INPUT, "%s is over %zu bytes, %s", name, max, too_long);
		if (n < cap - 1)
			break;
		cap *= 2;
		buf = realloc(buf, cap);
	}
	if (ferror(f))
		cli_die(prog, EXIT_INPUT, "cannot read %s: %s", name, strerror(errno));
	if (f != stdin)
		fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

char *cli_read_all(const char *prog, const char *path, size_t *len)
{
	return cli_read_input(prog, cli_open_input(prog, path), path, (size_t)-1 / 2, "", len);
}

const char *cli_model_path(const char *prog, const char *given, char *buf, size_t cap)
{
	if (given)
		return given;
	hsq_status st = hsq_default_model_path(buf, cap);
	if (st) {
		cli_status_hint(st, "or pass -m FILE");
		cli_die_status(prog, EXIT_MODEL, st);
	}
	return buf;
}

hsq_model *cli_load_model(const char *prog, const char *path)
{
	hsq_model *m;
	hsq_status st = hsq_model_load(path, &m);
	if (st) {
		if (st == HSQ_ERR_IO)
			cli_status_hint(st, "-m FILE names another");
		cli_die_status(prog, cli_exit_for(st, EXIT_MODEL), st);
	}
	return m;
}

void cli_chat_parts(const char *prog, const hsq_model *model, const char *system, char **open, char **close)
{
	/* Format with a sentinel user message and split around it, so the
	 * split follows whatever template the library implements. */
	static const char sentinel[] = "\x01HSQ-USER\x01";
	char *all;
	hsq_status st = hsq_chat_format(model, system, sentinel, &all);
	if (st)
		cli_die_status(prog, EXIT_MODEL, st);
	char *at = strstr(all, sentinel);
	if (!at)
		cli_die(prog, EXIT_FAILURE_RUNTIME, "chat template did not place the user message");
	*open = strndup(all, (size_t)(at - all));
	*close = strdup(at + strlen(sentinel));
	hsq_free(all);
	if (!*open || !*close)
		cli_die(prog, EXIT_FAILURE_RUNTIME, "out of memory");
}

/* cli.h - what every hsq tool shares: one option table that drives
 * getopt_long, --help and the completion scripts; error reporting; exit
 * codes (documented in hsq(7)); reading input; the model path default. */
#ifndef HSQ_CLI_H
#define HSQ_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "hsq.h"

/* Exit statuses, the same for every tool (hsq(7), EXIT STATUS). */
enum {
	EXIT_OK = 0,
	EXIT_FAILURE_RUNTIME = 1, /* I/O, out of memory, anything else */
	EXIT_USAGE = 2,           /* bad options or option values */
	EXIT_MODEL = 3,           /* model missing, unreadable, not GGUF, truncated, unsupported */
	EXIT_INPUT = 4,           /* empty input, or longer than the context */
	EXIT_SNAPSHOT = 5,        /* snapshot unreadable, corrupt, from another model, or not writable */
};

typedef struct cli_option {
	const char *long_name; /* "model" */
	int short_name;        /* 'm', or 0 */
	const char *arg;       /* "FILE", or NULL for a flag */
	const char *help;      /* one line */
	int id;                /* value returned by cli_next: short_name or a code >= 256 */
} cli_option;

typedef struct cli_parser {
	const char *prog;
	const cli_option *opts; /* terminated by a zeroed entry */
	struct option *long_opts;
	char short_opts[128];
} cli_parser;

/* Builds getopt tables. -h/--help, --version and the hidden --dump-options
 * (prints the table for completion checks) are handled by cli_next. */
void cli_init(cli_parser *p, const char *prog, const cli_option *opts);
/* Next option id, -1 at the end. Exits 2 on unknown options. */
int cli_next(cli_parser *p, int argc, char **argv, const char *usage_line, const char *description);
void cli_free(cli_parser *p);
void cli_help(const cli_parser *p, FILE *out, const char *usage_line, const char *description);
/* The running tool's name, as the last cli_init gave it ("hsq" before):
 * for the messages of code shared by every tool (cmd/common/). */
const char *cli_prog(void);

/* Prints "prog: message" to stderr and exits with code. */
void cli_die(const char *prog, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
/* Prints "prog: <hsq_last_error() or strerror>" and exits with code. */
void cli_die_status(const char *prog, int code, hsq_status st) __attribute__((noreturn));
/* The library's messages never name a tool's flags; a tool says which of
 * its flags a status concerns, and cli_die_status appends "; HINT" to the
 * message of that status (hint: a static string, NULL to drop it). */
void cli_status_hint(hsq_status st, const char *hint);
/* Usage error: message plus "try 'prog --help'", exit 2. */
void cli_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* The exit code for a failed library call in a phase whose failures
 * normally exit `phase_code`: out-of-memory and internal errors are always
 * EXIT_FAILURE_RUNTIME, a context overflow is always EXIT_INPUT. */
int cli_exit_for(hsq_status st, int phase_code);

/* Parses a decimal integer/float option value within [lo, hi] or exits 2. */
long cli_long(const char *prog, const char *opt, const char *value, long lo, long hi);
double cli_double(const char *prog, const char *opt, const char *value, double lo, double hi);

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid:
 * no overlong forms, surrogates or code points above U+10FFFF. The one
 * rule of the writers of JSON, SVG text and hsq-inspect's text lines. */
size_t cli_utf8_len(const char *s, size_t n);

/* Reads a whole file (path "-" = stdin) into a NUL-terminated buffer. */
char *cli_read_all(const char *prog, const char *path, size_t *len);
/* The same in two steps, for a document or prompt whose bound is known
 * only once the model is loaded: cli_open_input opens path ("-" = stdin)
 * or exits 4 naming it; cli_read_input reads it whole (closing it unless
 * stdin), and exits 4 as soon as more than max bytes have come, with
 * "NAME is over MAX bytes, " and too_long as the message, without reading
 * the rest (/dev/zero, a runaway pipe). */
FILE *cli_open_input(const char *prog, const char *path);
char *cli_read_input(const char *prog, FILE *f, const char *path, size_t max, const char *too_long, size_t *len);
/* A generous bound on the bytes of text one token stands for (the longest
 * token of SmolLM2's vocabulary spells 162 bytes, of gemma-3's 48; a byte
 * the vocabulary lacks is one token or more): a document of more
 * than n_ctx times this many bytes cannot fit a context of n_ctx tokens,
 * and is refused while it is read. */
#define CLI_MAX_BYTES_PER_TOKEN 256

/* Checks, before the work, that an output file can be written at path,
 * as the tools write one (a temporary file beside it, renamed onto it):
 * path is not empty (a usage error, exit 2) and names neither a directory
 * nor a special file, and its directory exists and can be written in.
 * Otherwise exits with code, naming opt ("-o", "--json") and path, and
 * saying what to fix. cli_check_output_dir checks a directory that the
 * tool creates when it is missing (--report): it is a writable directory,
 * or it is missing and its parent is one. */
void cli_check_output(const char *prog, const char *opt, const char *path, int code);
void cli_check_output_dir(const char *prog, const char *opt, const char *path, int code);

/* Standard output checked (hsq(7), EXIT STATUS): cli_stdout_checked(),
 * called first thing in main, restores SIGPIPE's default action (a closed
 * pipe then ends the tool silently, as it ends yes(1) in `yes | head`,
 * whether or not the parent ignored SIGPIPE) and registers an exit handler
 * that flushes and closes standard output: a write that failed, at any
 * point, makes the tool print "cannot write standard output: REASON" and
 * exit 1. cli_stdout_flush flushes at once (a stream of tokens), exiting
 * the same way on an error. */
void cli_stdout_checked(void);
void cli_stdout_flush(void);

/* Seconds on the monotonic clock (for -v timings). */
double cli_now(void);

/* Model path: the -m value, or hsq_default_model_path(); exits 3 if none. */
const char *cli_model_path(const char *prog, const char *given, char *buf, size_t cap);
/* Loads the model or exits 3 with the library's message. */
hsq_model *cli_load_model(const char *prog, const char *path);

/* The model's chat template split around the user message: open is
 * everything before it (system turn, user header), close everything after
 * (end of turn, assistant header). Both malloc'ed. Exits on failure. */
void cli_chat_parts(const char *prog, const hsq_model *model, const char *system, char **open, char **close);

#endif

/* output.c - the summary files of hsq-eval: --json and --csv files (and
 * codecs' PREFIX files) written whole and renamed into place, the --report
 * directory and its files, CSV numbers. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "options.h"
#include "output.h"

void eval_file_open(eval_file *o, const char *path)
{
	int e;
	memset(o, 0, sizeof *o);
	if (path && (e = atomic_open(o, path)) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write %s: %s", path, strerror(e));
}

void eval_file_commit(eval_file *o)
{
	int e;
	if (o->f && (e = atomic_commit(o, 0)) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write %s: %s", o->path, strerror(e));
}

void eval_report_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0777) != 0 && errno != EEXIST)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot create the report directory %s: %s", dir,
			strerror(errno));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "--report %s is not a directory; name a directory", dir);
	if (access(dir, W_OK | X_OK) != 0)
		cli_die(EVAL_PROG, EXIT_FAILURE_RUNTIME, "cannot write in the report directory %s: %s", dir,
			strerror(errno));
}

void eval_report_write(const char *dir, const char *name, void (*fn)(FILE *f, const void *user), const void *user)
{
	char path[4400];
	eval_file o;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	eval_file_open(&o, path);
	fn(o.f, user);
	eval_file_commit(&o);
}

void eval_csv_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, ",%.6g", v);
	else
		fputs(",", f);
}
